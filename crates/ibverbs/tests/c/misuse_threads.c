/* weft-ibverbs: misuse gets the errno rdma-core's providers return, and one QP takes
 * posts from several threads at once. Compiled against the installed verbs.h (so the
 * inline ibv_post_send/ibv_poll_cq go through weft's ops table) and linked against
 * weft's libibverbs.so.1 by tests/c_api.rs. Prints "ok" and exits 0, or names the
 * first check that failed and exits 1. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define THREADS 4
#define PER_THREAD 500
#define MSG 64

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
};

static void open_side(struct ibv_device *dev, struct side *s, int depth)
{
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx, "open_device: %s", strerror(errno));
	s->pd = ibv_alloc_pd(s->ctx);
	CHECK(s->pd, "alloc_pd");
	s->cq = ibv_create_cq(s->ctx, depth, NULL, NULL, 0);
	CHECK(s->cq, "create_cq");
	s->buf = calloc(1, MSG * depth);
	s->mr = ibv_reg_mr(s->pd, s->buf, MSG * depth, IBV_ACCESS_LOCAL_WRITE);
	CHECK(s->mr, "reg_mr");
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp, "create_qp: %s", strerror(errno));
	CHECK(ibv_query_gid(s->ctx, 1, 0, &s->gid) == 0, "query_gid");
}

static void connect_side(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = 0 };
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
	      "RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			   IBV_QP_MAX_QP_RD_ATOMIC) == 0, "RTS");
	CHECK(s->qp->state == IBV_QPS_RTS, "qp->state follows modify");
}

static struct side A, B;

static void *poster(void *arg)
{
	uintptr_t t = (uintptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)A.buf, .length = MSG,
				       .lkey = A.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = t * PER_THREAD + i,
					  .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		int r;
		/* A full send queue is ENOMEM: wait for the poller to free a slot. */
		while ((r = ibv_post_send(A.qp, &wr, &bad)) == ENOMEM)
			sched_yield();
		CHECK(r == 0, "thread %lu post %d: %d", (unsigned long)t, i, r);
	}
	return NULL;
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "one device");
	CHECK(strcmp(ibv_get_device_name(list[0]), "weft0") == 0, "named weft0");

	const int depth = THREADS * PER_THREAD;
	open_side(list[0], &A, 64);
	open_side(list[0], &B, depth);

	/* ---- misuse ---- */
	CHECK(!ibv_reg_mr(A.pd, A.buf, 64, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
	      "remote write without local write: EINVAL, got %d", errno);
	CHECK(!ibv_create_cq(A.ctx, 0, NULL, NULL, 0) && errno == EINVAL, "cqe 0");
	CHECK(!ibv_create_cq(A.ctx, 1 << 30, NULL, NULL, 0) && errno == EINVAL,
	      "cqe too large");
	struct ibv_qp_init_attr big = { .send_cq = A.cq, .recv_cq = A.cq,
		.cap = { .max_send_wr = 1 << 30, .max_recv_wr = 1 },
		.qp_type = IBV_QPT_RC };
	CHECK(!ibv_create_qp(A.pd, &big) && errno == EINVAL, "max_send_wr too large");
	struct ibv_qp_init_attr xrc = big;
	xrc.cap.max_send_wr = 1;
	xrc.qp_type = IBV_QPT_XRC_SEND;
	CHECK(!ibv_create_qp(A.pd, &xrc) && errno == EOPNOTSUPP, "XRC: EOPNOTSUPP");
	{
		struct ibv_sge sge = { (uintptr_t)A.buf, MSG, A.mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND }, *bad = NULL;
		CHECK(ibv_post_send(A.qp, &wr, &bad) == EINVAL && bad == &wr,
		      "post_send in RESET: EINVAL and bad_wr");
		wr.num_sge = 1000;
		bad = NULL;
		CHECK(ibv_post_send(A.qp, &wr, &bad) == EINVAL && bad == &wr,
		      "1000 SGEs: EINVAL");
	}
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
		CHECK(ibv_modify_qp(A.qp, &a, IBV_QP_STATE) == EINVAL,
		      "RESET -> RTS: EINVAL");
		a.qp_state = IBV_QPS_INIT;
		CHECK(ibv_modify_qp(A.qp, &a, IBV_QP_STATE) == EINVAL,
		      "INIT without access flags: EINVAL");
	}
	CHECK(ibv_dealloc_pd(A.pd) == EBUSY, "PD in use: EBUSY");
	CHECK(ibv_destroy_cq(A.cq) == EBUSY, "CQ in use: EBUSY");
	{
		union ibv_gid g;
		CHECK(ibv_query_gid(A.ctx, 1, 5, &g) == -1 && errno == EINVAL, "gid 5");
		struct ibv_port_attr pa;
		CHECK(ibv_query_port(A.ctx, 2, &pa) == EINVAL, "port 2");
		CHECK(ibv_query_port(A.ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE &&
			      pa.link_layer == IBV_LINK_LAYER_ETHERNET,
		      "port 1 active, Ethernet");
	}

	/* ---- several threads posting on one QP ---- */
	connect_side(&A, &B);
	connect_side(&B, &A);
	for (int i = 0; i < depth; i++) {
		struct ibv_sge sge = { (uintptr_t)(B.buf + i * MSG), MSG, B.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(B.qp, &wr, &bad) == 0, "post_recv %d", i);
	}
	pthread_t th[THREADS];
	for (uintptr_t t = 0; t < THREADS; t++)
		CHECK(pthread_create(&th[t], NULL, poster, (void *)t) == 0, "thread");
	int sent = 0, received = 0;
	char seen[THREADS * PER_THREAD] = { 0 };
	time_t start = time(NULL);
	while (sent < depth || received < depth) {
		CHECK(time(NULL) - start < 60, "completions: %d sent, %d received", sent,
		      received);
		struct ibv_wc wc[16];
		int k = ibv_poll_cq(A.cq, 16, wc);
		CHECK(k >= 0, "poll A");
		for (int i = 0; i < k; i++) {
			CHECK(wc[i].status == IBV_WC_SUCCESS, "send %s",
			      ibv_wc_status_str(wc[i].status));
			CHECK(wc[i].wr_id < (uint64_t)depth && !seen[wc[i].wr_id]++,
			      "send wr_id %lu once", (unsigned long)wc[i].wr_id);
			sent++;
		}
		k = ibv_poll_cq(B.cq, 16, wc);
		CHECK(k >= 0, "poll B");
		for (int i = 0; i < k; i++) {
			CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV &&
				      wc[i].byte_len == MSG,
			      "recv");
			received++;
		}
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);

	/* ---- teardown in order; every call succeeds ---- */
	struct side *sides[2] = { &A, &B };
	for (int i = 0; i < 2; i++) {
		struct side *s = sides[i];
		CHECK(ibv_destroy_qp(s->qp) == 0, "destroy_qp");
		CHECK(ibv_destroy_cq(s->cq) == 0, "destroy_cq");
		CHECK(ibv_dereg_mr(s->mr) == 0, "dereg_mr");
		CHECK(ibv_dealloc_pd(s->pd) == 0, "dealloc_pd");
		CHECK(ibv_close_device(s->ctx) == 0, "close_device");
	}
	ibv_free_device_list(list);
	printf("ok: %d sends from %d threads on one QP\n", sent, THREADS);
	return 0;
}
