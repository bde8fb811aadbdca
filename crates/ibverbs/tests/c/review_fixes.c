/* weft-ibverbs: checks for review findings (see tests/c_api.rs for which fail
 * without their fix; the swapped-CQ deadlock check is timing-dependent).
 * Compiled against the installed verbs.h and linked against weft's libibverbs.so.1
 * by tests/c_api.rs. Prints "ok" and exits 0, or names the first failed check and
 * exits 1; alarm() bounds the whole run (a deadlock dies of SIGALRM). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define ROUNDS 300

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq1, *cq2;

/* Create and destroy QPs whose send and receive CQs are (cq1, cq2) in one thread and
 * (cq2, cq1) in the other: taking the CQ locks in argument order deadlocks. */
static void *swapped(void *arg)
{
	int flip = (int)(uintptr_t)arg;
	for (int i = 0; i < ROUNDS; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = flip ? cq2 : cq1, .recv_cq = flip ? cq1 : cq2,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};
		struct ibv_qp *qp = ibv_create_qp(pd, &ia);
		CHECK(qp, "create_qp (swapped CQs): %s", strerror(errno));
		CHECK(ibv_destroy_qp(qp) == 0, "destroy_qp");
	}
	return NULL;
}

static union ibv_gid gid;

/* RESET -> INIT -> RTR -> RTS towards `peer` (a QP of this context). */
static void connect_qp(struct ibv_qp *qp, struct ibv_qp *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0, "INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER) == 0, "RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0,
	      "RTS");
}

static void send_one(struct ibv_qp *qp, struct ibv_mr *mr, char *buf)
{
	struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0, "post_send");
}

/* 7: an event of a CQ destroyed before it was read is skipped (a blocking
 * ibv_get_cq_event waits for the next one), and a CQ whose events are not all
 * acknowledged is not destroyed (EBUSY). */
static void channel_events(struct ibv_mr *mr, char *buf)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "create_comp_channel: %s", strerror(errno));
	struct ibv_cq *x = ibv_create_cq(ctx, 8, (void *)0x11, ch, 0);
	struct ibv_cq *y = ibv_create_cq(ctx, 8, (void *)0x22, ch, 0);
	CHECK(x && y, "create_cq on a channel");
	struct ibv_qp_init_attr ia = {
		.send_cq = x, .recv_cq = cq1,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *a = ibv_create_qp(pd, &ia);
	ia.send_cq = cq2;
	ia.recv_cq = y;
	struct ibv_qp *b = ibv_create_qp(pd, &ia);
	CHECK(a && b, "create_qp");
	connect_qp(a, b);
	connect_qp(b, a);
	for (int i = 0; i < 2; i++) {
		struct ibv_sge sge = { (uintptr_t)(buf + 1024 + 64 * i), 64, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(b, &w, &bad) == 0, "post_recv");
	}
	/* X's event first (Y unarmed), then Y's (X no longer armed). */
	CHECK(ibv_req_notify_cq(x, 0) == 0, "arm x");
	send_one(a, mr, buf);
	struct ibv_wc wc;
	int k;
	while ((k = ibv_poll_cq(x, 1, &wc)) == 0)
		;
	CHECK(k == 1 && wc.status == IBV_WC_SUCCESS, "send completion");
	while ((k = ibv_poll_cq(y, 1, &wc)) == 0)
		;
	CHECK(k == 1 && wc.status == IBV_WC_SUCCESS, "recv completion");
	CHECK(ibv_req_notify_cq(y, 0) == 0, "arm y");
	send_one(a, mr, buf);
	CHECK(ibv_destroy_qp(a) == 0, "destroy_qp a");
	CHECK(ibv_destroy_cq(x) == 0, "destroy x, its event not read");
	struct ibv_cq *got = NULL;
	void *got_ctx = NULL;
	CHECK(ibv_get_cq_event(ch, &got, &got_ctx) == 0,
	      "get_cq_event skips the destroyed CQ's event (errno %d)", errno);
	CHECK(got == y && got_ctx == (void *)0x22, "the event is y's");
	CHECK(ibv_destroy_qp(b) == 0, "destroy_qp b");
	CHECK(ibv_destroy_cq(y) == EBUSY, "destroy_cq with an unacknowledged event: EBUSY");
	ibv_ack_cq_events(y, 1);
	CHECK(ibv_destroy_cq(y) == 0, "destroy_cq once acknowledged");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel");
}

struct late {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

static void *send_later(void *arg)
{
	struct late *l = arg;
	usleep(50000);
	send_one(l->qp, l->mr, l->buf);
	return NULL;
}

static void take_event(struct ibv_comp_channel *ch, struct ibv_cq *want)
{
	struct ibv_cq *got = NULL;
	void *got_ctx = NULL;
	CHECK(ibv_get_cq_event(ch, &got, &got_ctx) == 0, "get_cq_event (errno %d)", errno);
	CHECK(got == want, "the event is the armed CQ's");
	ibv_ack_cq_events(got, 1);
	struct ibv_wc wc;
	int k;
	while ((k = ibv_poll_cq(want, 1, &wc)) == 0)
		;
	CHECK(k == 1 && wc.status == IBV_WC_SUCCESS, "the event's completion");
}

static void set_nonblocking(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0,
	      "fcntl: %s", strerror(errno));
}

/* 9: the channel's descriptor as a program's own event loop sees it (UCX's async
 * thread; docs/results/ibverbs.md, "a completion channel that stayed readable"). It
 * starts blocking, as rdma-core's; it reads ready while an event waits; a blocking
 * ibv_get_cq_event that wakes on a count already taken settles it without blocking
 * and sleeps until the next event (posted by another thread 50 ms later); a
 * non-blocking look that finds nothing says EAGAIN and leaves it quiet. */
static void channel_descriptor(struct ibv_mr *mr, char *buf)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "create_comp_channel: %s", strerror(errno));
	int fl = fcntl(ch->fd, F_GETFL);
	CHECK(fl >= 0 && !(fl & O_NONBLOCK), "a new channel's descriptor is blocking");
	struct ibv_cq *x = ibv_create_cq(ctx, 8, NULL, ch, 0);
	struct ibv_cq *r = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(x && r, "create_cq");
	struct ibv_qp_init_attr ia = {
		.send_cq = x, .recv_cq = r,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *a = ibv_create_qp(pd, &ia);
	ia.send_cq = r;
	struct ibv_qp *b = ibv_create_qp(pd, &ia);
	CHECK(a && b, "create_qp");
	connect_qp(a, b);
	connect_qp(b, a);
	for (int i = 0; i < 3; i++) {
		struct ibv_sge sge = { (uintptr_t)(buf + 2048 + 64 * i), 64, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(b, &w, &bad) == 0, "post_recv");
	}
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 0, "readable before any event");

	CHECK(ibv_req_notify_cq(x, 0) == 0, "arm x");
	send_one(a, mr, buf);
	CHECK(poll(&p, 1, 5000) == 1, "not readable while an event waits");
	take_event(ch, x);

	CHECK(ibv_req_notify_cq(x, 0) == 0, "arm x again");
	struct late l = { a, mr, buf };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, send_later, &l) == 0, "thread");
	take_event(ch, x);
	pthread_join(t, NULL);

	CHECK(ibv_req_notify_cq(x, 0) == 0, "arm x a third time");
	send_one(a, mr, buf);
	take_event(ch, x);
	set_nonblocking(ch->fd, 1);
	struct ibv_cq *got = NULL;
	void *got_ctx = NULL;
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &got, &got_ctx) == -1 && errno == EAGAIN,
	      "a non-blocking look with no event: errno %d", errno);
	CHECK(poll(&p, 1, 0) == 0, "still readable after a look that found nothing");
	set_nonblocking(ch->fd, 0);

	struct ibv_wc wc;
	for (int got_recv = 0; got_recv < 3;) {
		int k = ibv_poll_cq(r, 1, &wc);
		CHECK(k >= 0 && (k == 0 || wc.status == IBV_WC_SUCCESS), "receive completion");
		got_recv += k;
	}
	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0, "destroy_qp");
	CHECK(ibv_destroy_cq(x) == 0 && ibv_destroy_cq(r) == 0, "destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel");
}

#define BUILDERS 4
#define BATCHES 200

static struct ibv_qp_ex *bx;
static struct ibv_mr *bmr;
static char *bbuf;

/* Each thread posts BATCHES batches of two SENDs through the ibv_wr_* builder of one
 * QP: without an owner lock from wr_start to wr_complete, one thread's wr_start
 * empties another's batch. */
static void *builder(void *arg)
{
	uint64_t t = (uintptr_t)arg;
	for (int i = 0; i < BATCHES; i++) {
		ibv_wr_start(bx);
		for (int k = 0; k < 2; k++) {
			sched_yield(); /* let the other builders in, if they can be */
			bx->wr_id = t * 1000 + 2 * i + k;
			bx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_send(bx);
			ibv_wr_set_sge(bx, bmr->lkey, (uintptr_t)bbuf, 64);
		}
		int r = ibv_wr_complete(bx);
		CHECK(r == 0, "thread %lu batch %d: wr_complete %d", (unsigned long)t, i, r);
	}
	return NULL;
}

static void builder_threads(struct ibv_mr *mr, char *buf)
{
	const int total = BUILDERS * BATCHES * 2;
	bmr = mr;
	bbuf = buf;
	struct ibv_cq *scq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
	CHECK(scq && rcq, "create_cq");
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = scq, .recv_cq = scq,
		.cap = { .max_send_wr = 2048, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	struct ibv_qp *a = ibv_create_qp_ex(ctx, &qa);
	CHECK(a, "create_qp_ex: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = rcq, .recv_cq = rcq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 2048,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *b = ibv_create_qp(pd, &ia);
	CHECK(b, "create_qp");
	connect_qp(a, b);
	connect_qp(b, a);
	for (int i = 0; i < total; i++) {
		struct ibv_sge sge = { (uintptr_t)(buf + 2048), 64, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(b, &w, &bad) == 0, "post_recv %d", i);
	}
	bx = ibv_qp_to_qp_ex(a);
	pthread_t th[BUILDERS];
	for (uintptr_t t = 0; t < BUILDERS; t++)
		CHECK(pthread_create(&th[t], NULL, builder, (void *)t) == 0, "thread");
	for (int t = 0; t < BUILDERS; t++)
		pthread_join(th[t], NULL);
	static char seen[BUILDERS * 1000];
	int done = 0;
	time_t start = time(NULL);
	while (done < total) {
		CHECK(time(NULL) - start < 30, "builder sends: %d of %d completed", done,
		      total);
		struct ibv_wc wc[16];
		int k = ibv_poll_cq(scq, 16, wc);
		CHECK(k >= 0, "poll");
		for (int i = 0; i < k; i++) {
			CHECK(wc[i].status == IBV_WC_SUCCESS, "send %s",
			      ibv_wc_status_str(wc[i].status));
			CHECK(wc[i].wr_id < BUILDERS * 1000 && !seen[wc[i].wr_id]++,
			      "wr_id %lu once", (unsigned long)wc[i].wr_id);
			done++;
		}
	}
	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0, "destroy_qp");
	CHECK(ibv_destroy_cq(scq) == 0 && ibv_destroy_cq(rcq) == 0, "destroy_cq");
}

int main(void)
{
	alarm(60);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "one device");
	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open_device: %s", strerror(errno));
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	cq1 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq1 && cq2, "create_cq");
	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr");

	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "query_gid");

	/* The async event descriptor is a real one (UCX registers it with epoll and
	 * fails on -1), never readable since weft raises no async events, and a
	 * non-blocking ibv_get_async_event says EAGAIN. */
	{
		CHECK(ctx->async_fd >= 0, "async_fd is %d", ctx->async_fd);
		struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
		CHECK(poll(&p, 1, 0) == 0, "async_fd readable with no event");
		int fl = fcntl(ctx->async_fd, F_GETFL);
		CHECK(fl >= 0 && fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0,
		      "O_NONBLOCK on async_fd: %s", strerror(errno));
		struct ibv_async_event ev;
		errno = 0;
		CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN,
		      "get_async_event: errno %d", errno);
	}
	channel_events(mr, buf);
	channel_descriptor(mr, buf);
	builder_threads(mr, buf);

	/* 1: QPs with swapped CQs from two threads at once. */
	{
		pthread_t t[2];
		for (uintptr_t i = 0; i < 2; i++)
			CHECK(pthread_create(&t[i], NULL, swapped, (void *)i) == 0, "thread");
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
	}

	/* 2: a refused receive list names its first request in bad_wr. */
	struct ibv_qp_init_attr ia = {
		.send_cq = cq1, .recv_cq = cq1,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "create_qp");
	{
		struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
		struct ibv_recv_wr w2 = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr w1 = { .wr_id = 1, .next = &w2, .sg_list = &sge,
					  .num_sge = 1 };
		struct ibv_recv_wr *bad = NULL;
		CHECK(ibv_post_recv(qp, &w1, &bad) == EINVAL && bad == &w1,
		      "post_recv in RESET: EINVAL and bad_wr = first (got %p, want %p)",
		      (void *)bad, (void *)&w1);
	}
	/* 2 and 8: a QP on an SRQ refuses its own receives (bad_wr set); the SRQ takes
	 * them. */
	{
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
		struct ibv_srq *srq = ibv_create_srq(pd, &sa);
		CHECK(srq, "create_srq: %s", strerror(errno));
		struct ibv_qp_init_attr sia = ia;
		sia.srq = srq;
		struct ibv_qp *sqp = ibv_create_qp(pd, &sia);
		CHECK(sqp, "create_qp on an SRQ: %s", strerror(errno));
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
		CHECK(ibv_modify_qp(sqp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");
		struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad = NULL;
		CHECK(ibv_post_recv(sqp, &w, &bad) != 0 && bad == &w,
		      "post_recv on a QP with an SRQ: error and bad_wr");
		for (int i = 0; i < 8; i++) {
			bad = NULL;
			CHECK(ibv_post_srq_recv(srq, &w, &bad) == 0, "post_srq_recv %d", i);
		}
		CHECK(ibv_destroy_qp(sqp) == 0, "destroy_qp");
		CHECK(ibv_destroy_srq(srq) == 0, "destroy_srq");
	}

	/* 4: comp_mask decides what create_cq_ex reads. */
	{
		struct ibv_cq_init_attr_ex ca;
		memset(&ca, 0xa5, sizeof ca); /* flags and parent_domain: garbage */
		ca.cqe = 8;
		ca.cq_context = NULL;
		ca.channel = NULL;
		ca.comp_vector = 0;
		ca.wc_flags = IBV_WC_STANDARD_FLAGS;
		ca.comp_mask = 0;
		struct ibv_cq_ex *cx = ibv_create_cq_ex(ctx, &ca);
		CHECK(cx, "create_cq_ex, comp_mask 0, garbage flags/parent_domain: %s",
		      strerror(errno));
		CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)) == 0, "destroy_cq");
		ca.comp_mask = 1u << 20;
		CHECK(!ibv_create_cq_ex(ctx, &ca) && errno == EINVAL,
		      "unknown comp_mask bit: EINVAL, got %d", errno);
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
		ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
		cx = ibv_create_cq_ex(ctx, &ca);
		CHECK(cx, "create_cq_ex, SINGLE_THREADED: %s", strerror(errno));
		CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)) == 0, "destroy_cq");
	}

	/* 5: ibv_rereg_mr answers 0 or a negative ibv_rereg_mr_err_code. */
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_INPUT &&
		      errno == EOPNOTSUPP,
	      "rereg_mr: IBV_REREG_MR_ERR_INPUT, errno EOPNOTSUPP (errno %d)", errno);

	/* 6: IBV_SEND_INLINE in wr_flags does not make SGE data inline: 65 such requests
	 * (more than the inline bounce slots) reach the QP, which refuses them for its
	 * state (EINVAL in RESET), not for inline space (ENOMEM). */
	{
		struct ibv_qp_init_attr_ex qa = {
			.send_cq = cq1, .recv_cq = cq1,
			.cap = { .max_send_wr = 128, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND,
		};
		struct ibv_qp *xq = ibv_create_qp_ex(ctx, &qa);
		CHECK(xq, "create_qp_ex: %s", strerror(errno));
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(xq);
		ibv_wr_start(x);
		for (int i = 0; i < 65; i++) {
			x->wr_id = i;
			x->wr_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
			ibv_wr_send(x);
			ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 8);
		}
		int r = ibv_wr_complete(x);
		CHECK(r == EINVAL, "wr_complete of 65 SGE sends in RESET: EINVAL, got %d", r);
		CHECK(ibv_destroy_qp(xq) == 0, "destroy_qp");
	}

	CHECK(ibv_destroy_qp(qp) == 0, "destroy_qp");
	CHECK(ibv_destroy_cq(cq1) == 0 && ibv_destroy_cq(cq2) == 0, "destroy_cq");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "close_device");
	ibv_free_device_list(list);
	free(buf);
	printf("ok: review fixes\n");
	return 0;
}
