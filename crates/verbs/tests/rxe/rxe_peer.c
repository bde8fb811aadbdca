/*
 * The guest side of weft's rdma_rxe interop test (crates/verbs/tests/rxe_interop.rs):
 * a libibverbs program on Linux's soft-RoCE device rxe0 that runs a fixed list of
 * steps against a weft peer and checks every byte on its end.
 *
 *   rxe_peer PORT LOCAL_IP rc|uc|ud MTU SIZE STEPS
 *
 * It listens on TCP PORT, takes one connection from the weft side and exchanges
 * one line each way: "QPN PSN RKEY ADDR\n". The GID used is the one of LOCAL_IP
 * (IPv4-mapped for IPv4), and the weft peer's GID is its TCP address. STEPS is a
 * comma-separated list run in order, each with the same three-line handshake on
 * the TCP connection: the target prepares and says "ready", the requester does the
 * operation, checks its own end and says "done ok|fail", the target checks its end
 * and says "checked ok|fail". A step passes when both ends say ok. Steps:
 *   send_g2w send_w2g sendimm_g2w sendimm_w2g write_g2w write_w2g writeimm_g2w
 *   writeimm_w2g read_g2w read_w2g atomic_g2w atomic_w2g rnr_g2w rnr_w2g
 * ("g2w": the guest is the requester; "w2g": weft is). rnr_*: a SEND whose
 * receive the target posts 300 ms after saying "ready", so the target's RC
 * responder answers with RNR NAKs until then. On UD only the send steps make sense
 * (SIZE at most the MTU); on UC the send and write steps. Prints "STEP name ok|FAIL why" per step and
 * exits 0 when every step passed.
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define BUF_LEN (1 << 20)
#define QKEY 0x11111111u
#define GRH 40

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static struct ibv_ah *ah;
static uint8_t *buf;
static FILE *tin, *tout;
static int ud, uc;
static uint32_t peer_qpn, peer_rkey;
static uint64_t peer_addr;
static size_t size;

static void die(const char *what)
{
	printf("FATAL %s\n", what);
	fflush(stdout);
	exit(2);
}

static uint8_t pattern(const char *step, size_t i)
{
	unsigned h = 0;
	for (const char *c = step; *c; c++)
		h = h * 31 + (unsigned char)*c;
	return (uint8_t)(i * 7 + h + (i >> 8));
}

static void say(const char *fmt, const char *arg)
{
	fprintf(tout, fmt, arg);
	fputc('\n', tout);
	fflush(tout);
}

/* The next line from weft, which must start with `want`; returns what follows. */
static char *hear(const char *want)
{
	static char line[256];
	if (!fgets(line, sizeof line, tin))
		die("the weft side hung up");
	line[strcspn(line, "\n")] = 0;
	size_t n = strlen(want);
	if (strncmp(line, want, n))
		die(line);
	return line + n + (line[n] == ' ');
}

/* Wait (at most 10 s) for one completion; 0 when it is a success of `op`. */
static int wait_wc(enum ibv_wc_opcode op, struct ibv_wc *wc)
{
	struct timeval start, now;
	gettimeofday(&start, NULL);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status == IBV_WC_SUCCESS && wc->opcode == op ? 0 : -1;
		gettimeofday(&now, NULL);
		if (now.tv_sec - start.tv_sec > 10)
			return -1;
	}
}

static int post_recv(void)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = (uint32_t)size + GRH, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static int post_send(enum ibv_wr_opcode op, size_t len, uint64_t off, uint64_t cmp, uint64_t add)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf + BUF_LEN / 2, .length = (uint32_t)len, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.imm_data = htonl(0x5eed0000u | (uint32_t)len);
	if (ud) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = peer_qpn;
		wr.wr.ud.remote_qkey = QKEY;
	} else if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = peer_addr + off;
		wr.wr.atomic.rkey = peer_rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_CMP_AND_SWP ? cmp : add;
		wr.wr.atomic.swap = add;
	} else {
		wr.wr.rdma.remote_addr = peer_addr + off;
		wr.wr.rdma.rkey = peer_rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static int check(const uint8_t *p, const char *step, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(step, i))
			return -1;
	return 0;
}

static void fill(uint8_t *p, const char *step, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(step, i);
}

/* One step; returns NULL when both ends said ok, otherwise why not. */
static const char *step(const char *s)
{
	int g2w = strstr(s, "_g2w") != NULL;
	int imm = !strncmp(s, "sendimm", 7) || !strncmp(s, "writeimm", 8);
	int rnr = !strncmp(s, "rnr", 3);
	int send = !strncmp(s, "send", 4) || rnr, write = !strncmp(s, "write", 5);
	int read = !strncmp(s, "read", 4), atomic = !strncmp(s, "atomic", 6);
	uint8_t *src = buf + BUF_LEN / 2, *target = buf;
	struct ibv_wc wc;
	int ok = 1;
	if (g2w) {
		/* The guest is the requester. */
		hear("ready");
		memset(src, 0, size);
		if (send || write)
			fill(src, s, size);
		if (send)
			ok = !post_send(imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, size, 0, 0, 0) &&
			     !wait_wc(IBV_WC_SEND, &wc);
		else if (write)
			ok = !post_send(imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, size, 0, 0, 0) &&
			     !wait_wc(IBV_WC_RDMA_WRITE, &wc);
		else if (read)
			ok = !post_send(IBV_WR_RDMA_READ, size, 0, 0, 0) && !wait_wc(IBV_WC_RDMA_READ, &wc) &&
			     !check(src, s, size);
		else if (atomic) {
			/* weft holds 0x0102030405060708 at its offset 0: swap in ..., then add. */
			uint64_t v;
			ok = !post_send(IBV_WR_ATOMIC_CMP_AND_SWP, 8, 0, 0x0102030405060708ull, 0x1111111122222222ull) &&
			     !wait_wc(IBV_WC_COMP_SWAP, &wc);
			memcpy(&v, src, 8);
			ok = ok && v == 0x0102030405060708ull;
			ok = ok && !post_send(IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 0, 0, 5) && !wait_wc(IBV_WC_FETCH_ADD, &wc);
			memcpy(&v, src, 8);
			ok = ok && v == 0x1111111122222222ull;
		}
		say("done %s", ok ? "ok" : "fail");
		char *r = hear("checked");
		if (!ok)
			return "the guest's end failed";
		return strcmp(r, "ok") ? "the weft end failed" : NULL;
	}
	/* weft is the requester; the guest is the target. */
	memset(target, 0, size + GRH);
	if ((send && !rnr) || (write && imm))
		ok = !post_recv();
	if (read)
		fill(target, s, size);
	if (atomic) {
		uint64_t v = 0x0102030405060708ull;
		memcpy(target, &v, 8);
	}
	say("ready%s", "");
	if (rnr) {
		usleep(300 * 1000);
		ok = !post_recv();
	}
	char *r = hear("done");
	int theirs = !strcmp(r, "ok");
	if (send) {
		ok = ok && !wait_wc(IBV_WC_RECV, &wc) && wc.byte_len == size + (ud ? GRH : 0) &&
		     !check(target + (ud ? GRH : 0), s, size);
		ok = ok && (!!(wc.wc_flags & IBV_WC_WITH_IMM)) == imm;
		ok = ok && (!imm || ntohl(wc.imm_data) == (0x5eed0000u | (uint32_t)size));
	} else if (write) {
		if (imm)
			ok = ok && !wait_wc(IBV_WC_RECV_RDMA_WITH_IMM, &wc) &&
			     ntohl(wc.imm_data) == (0x5eed0000u | (uint32_t)size);
		/* A UC WRITE without immediate makes no completion here and weft's
		 * "done" may overtake its packets: wait for them (2 s). */
		for (int i = 0; i < 400 && !imm && check(target, s, size); i++)
			usleep(5000);
		ok = ok && !check(target, s, size);
	} else if (atomic) {
		uint64_t v;
		memcpy(&v, target, 8);
		ok = v == 0x1111111122222222ull + 5;
	}
	say("checked %s", ok ? "ok" : "fail");
	if (!theirs)
		return "the weft end failed";
	return ok ? NULL : "the guest's end failed";
}

int main(int argc, char **argv)
{
	if (argc != 7)
		die("usage: rxe_peer PORT LOCAL_IP rc|uc|ud MTU SIZE STEPS");
	setvbuf(stdout, NULL, _IOLBF, 0);
	int port = atoi(argv[1]);
	ud = !strcmp(argv[3], "ud");
	uc = !strcmp(argv[3], "uc");
	int mtu = atoi(argv[4]);
	size = strtoul(argv[5], NULL, 0);
	if (size == 0 || size > BUF_LEN / 2 - GRH)
		die("SIZE");
	union ibv_gid want = {0};
	struct in6_addr a6;
	struct in_addr a4;
	if (inet_pton(AF_INET6, argv[2], &a6) == 1)
		memcpy(want.raw, &a6, 16);
	else if (inet_pton(AF_INET, argv[2], &a4) == 1) {
		want.raw[10] = want.raw[11] = 0xff;
		memcpy(want.raw + 12, &a4, 4);
	} else
		die("LOCAL_IP");

	int ndev;
	struct ibv_device **devs = ibv_get_device_list(&ndev);
	if (!devs || ndev < 1 || !(ctx = ibv_open_device(devs[0])))
		die("no rdma device");
	int gid_index = -1;
	for (int i = 0; i < 16 && gid_index < 0; i++) {
		union ibv_gid g;
		if (!ibv_query_gid(ctx, 1, i, &g) && !memcmp(&g, &want, 16))
			gid_index = i;
	}
	if (gid_index < 0)
		die("LOCAL_IP is not one of rxe0's GIDs");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = aligned_alloc(4096, BUF_LEN);
	mr = ibv_reg_mr(pd, buf, BUF_LEN,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq,
				      .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
				      .qp_type = ud ? IBV_QPT_UD : uc ? IBV_QPT_UC : IBV_QPT_RC};
	if (!pd || !cq || !buf || !mr || !(qp = ibv_create_qp(pd, &ia)))
		die("setting up the QP");

	int ls = socket(AF_INET6, SOCK_STREAM, 0), one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_any};
	if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1))
		die("listen");
	printf("LISTENING %d qpn %u gid_index %d\n", port, qp->qp_num, gid_index);
	struct sockaddr_in6 peer;
	socklen_t plen = sizeof peer;
	int s = accept(ls, (struct sockaddr *)&peer, &plen);
	if (s < 0)
		die("accept");
	tin = fdopen(s, "r");
	tout = fdopen(dup(s), "w");
	uint32_t my_psn = 0x123456;
	fprintf(tout, "%u %u %u %llu\n", qp->qp_num, my_psn, mr->rkey, (unsigned long long)(uintptr_t)buf);
	fflush(tout);
	char line[256];
	unsigned peer_psn;
	unsigned long long addr;
	if (!fgets(line, sizeof line, tin) ||
	    sscanf(line, "%u %u %u %llu", &peer_qpn, &peer_psn, &peer_rkey, &addr) != 4)
		die("the weft side's hello");
	peer_addr = addr;

	struct ibv_ah_attr ah_attr = {.is_global = 1, .port_num = 1};
	memcpy(ah_attr.grh.dgid.raw, &peer.sin6_addr, 16); /* v4-mapped for IPv4 */
	ah_attr.grh.sgid_index = gid_index;
	ah_attr.grh.hop_limit = 64;
	enum ibv_mtu m = mtu == 4096 ? IBV_MTU_4096 : mtu == 2048 ? IBV_MTU_2048 : mtu == 512 ? IBV_MTU_512 : IBV_MTU_1024;
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0};
	if (ud) {
		at.qkey = QKEY;
		if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			die("INIT");
		at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
		if (ibv_modify_qp(qp, &at, IBV_QP_STATE))
			die("RTR");
		at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = my_psn};
		if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN))
			die("RTS");
		if (!(ah = ibv_create_ah(pd, &ah_attr)))
			die("create_ah");
	} else if (uc) {
		at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("INIT");
		at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = m, .dest_qp_num = peer_qpn,
					  .rq_psn = peer_psn, .ah_attr = ah_attr};
		if (ibv_modify_qp(qp, &at,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
			die("RTR");
		at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = my_psn};
		if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN))
			die("RTS");
	} else {
		at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				     IBV_ACCESS_REMOTE_ATOMIC;
		if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("INIT");
		at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = m, .dest_qp_num = peer_qpn,
					  .rq_psn = peer_psn, .max_dest_rd_atomic = 4, .min_rnr_timer = 12,
					  .ah_attr = ah_attr};
		if (ibv_modify_qp(qp, &at,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			die("RTR");
		at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
					  .sq_psn = my_psn, .max_rd_atomic = 4};
		if (ibv_modify_qp(qp, &at,
				  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
			die("RTS");
	}
	printf("CONNECTED peer qpn %u\n", peer_qpn);
	int failed = 0;
	char *steps = strdup(argv[6]);
	for (char *t = strtok(steps, ","); t; t = strtok(NULL, ",")) {
		const char *why = step(t);
		printf("STEP %s %s%s\n", t, why ? "FAIL " : "ok", why ? why : "");
		failed |= why != NULL;
	}
	say("bye%s", "");
	return failed;
}
