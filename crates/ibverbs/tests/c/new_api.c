/* weft-ibverbs: the extended verbs — ibv_create_cq_ex with ibv_start_poll/next_poll/
 * end_poll and the ibv_wc_read_* accessors, ibv_create_qp_ex with the ibv_wr_*
 * builder (SEND, RDMA WRITE, RDMA READ, fetch-and-add, compare-and-swap) — between two
 * contexts of one process. Built and run by tests/c_api.rs. Prints "ok" and exits 0,
 * or names the first failed check and exits 1. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define LEN 4096

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint64_t *buf;
	union ibv_gid gid;
};

static void open_side(struct ibv_device *dev, struct side *s)
{
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx, "open_device");
	s->pd = ibv_alloc_pd(s->ctx);
	CHECK(s->pd, "alloc_pd");
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 64,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM,
	};
	s->cq = ibv_create_cq_ex(s->ctx, &ca);
	CHECK(s->cq, "create_cq_ex: %s", strerror(errno));
	s->buf = aligned_alloc(4096, LEN);
	memset(s->buf, 0, LEN);
	s->mr = ibv_reg_mr(s->pd, s->buf, LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(s->mr, "reg_mr");
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = ibv_cq_ex_to_cq(s->cq),
		.recv_cq = ibv_cq_ex_to_cq(s->cq),
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
				  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
	};
	s->qp = ibv_create_qp_ex(s->ctx, &qa);
	CHECK(s->qp, "create_qp_ex: %s", strerror(errno));
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	CHECK(s->qpx, "qp_to_qp_ex");
	CHECK(ibv_query_gid(s->ctx, 1, 0, &s->gid) == 0, "query_gid");
}

static void connect_side(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC };
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
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
	a.max_rd_atomic = 4;
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			   IBV_QP_MAX_QP_RD_ATOMIC) == 0, "RTS");
}

/* Poll one completion with the extended API (the next one stays queued); returns its
 * opcode. */
static enum ibv_wc_opcode one(struct side *s, uint64_t want_id, uint32_t want_len)
{
	struct ibv_poll_cq_attr pa = { 0 };
	time_t start = time(NULL);
	int r;
	while ((r = ibv_start_poll(s->cq, &pa)) == ENOENT)
		CHECK(time(NULL) - start < 30, "no completion for wr %lu",
		      (unsigned long)want_id);
	CHECK(r == 0, "start_poll %d", r);
	CHECK(s->cq->status == IBV_WC_SUCCESS, "status %s",
	      ibv_wc_status_str(s->cq->status));
	CHECK(s->cq->wr_id == want_id, "wr_id %lu, want %lu",
	      (unsigned long)s->cq->wr_id, (unsigned long)want_id);
	CHECK(ibv_wc_read_qp_num(s->cq) == s->qp->qp_num, "qp_num");
	if (want_len)
		CHECK(ibv_wc_read_byte_len(s->cq) == want_len, "byte_len %u",
		      ibv_wc_read_byte_len(s->cq));
	enum ibv_wc_opcode op = ibv_wc_read_opcode(s->cq);
	ibv_end_poll(s->cq);
	return op;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0], "a device");
	struct side A, B;
	open_side(list[0], &A);
	open_side(list[0], &B);

	struct ibv_cq_init_attr_ex ts = { .cqe = 4,
		.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	CHECK(!ibv_create_cq_ex(A.ctx, &ts) && errno == EOPNOTSUPP,
	      "timestamps: EOPNOTSUPP");

	connect_side(&A, &B);
	connect_side(&B, &A);

	/* SEND: B receives into the second half of its buffer. */
	struct ibv_sge rs = { (uintptr_t)B.buf + LEN / 2, LEN / 2, B.mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 100, .sg_list = &rs, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(B.qp, &rw, &bad) == 0, "post_recv");
	strcpy((char *)A.buf, "hello over ibv_wr_send");
	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 1;
	A.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(A.qpx);
	ibv_wr_set_sge(A.qpx, A.mr->lkey, (uintptr_t)A.buf, 64);
	CHECK(ibv_wr_complete(A.qpx) == 0, "complete SEND");
	CHECK(one(&A, 1, 0) == IBV_WC_SEND, "send opcode");
	CHECK(one(&B, 100, 64) == IBV_WC_RECV, "recv opcode");
	CHECK(strcmp((char *)B.buf + LEN / 2, "hello over ibv_wr_send") == 0, "payload");

	/* Two WRITEs in one start/complete; only the second signaled. */
	memset(A.buf, 0xab, 256);
	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 2;
	A.qpx->wr_flags = 0;
	ibv_wr_rdma_write(A.qpx, B.mr->rkey, (uintptr_t)B.buf);
	ibv_wr_set_sge(A.qpx, A.mr->lkey, (uintptr_t)A.buf, 128);
	A.qpx->wr_id = 3;
	A.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(A.qpx, B.mr->rkey, (uintptr_t)B.buf + 128);
	struct ibv_sge two = { (uintptr_t)A.buf + 128, 128, A.mr->lkey };
	ibv_wr_set_sge_list(A.qpx, 1, &two);
	CHECK(ibv_wr_complete(A.qpx) == 0, "complete WRITEs");
	CHECK(one(&A, 3, 0) == IBV_WC_RDMA_WRITE, "write opcode");
	for (int i = 0; i < 256; i++)
		CHECK(((uint8_t *)B.buf)[i] == 0xab, "written byte %d", i);

	/* READ back B's first 8 bytes into A's word 100; then atomics on B's word 10. */
	B.buf[10] = 5;
	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 4;
	A.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(A.qpx, B.mr->rkey, (uintptr_t)B.buf);
	ibv_wr_set_sge(A.qpx, A.mr->lkey, (uintptr_t)&A.buf[100], 8);
	CHECK(ibv_wr_complete(A.qpx) == 0, "complete READ");
	CHECK(one(&A, 4, 8) == IBV_WC_RDMA_READ, "read opcode");
	CHECK(A.buf[100] == 0xababababababababULL, "read value");

	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 5;
	ibv_wr_atomic_fetch_add(A.qpx, B.mr->rkey, (uintptr_t)&B.buf[10], 37);
	ibv_wr_set_sge(A.qpx, A.mr->lkey, (uintptr_t)&A.buf[101], 8);
	CHECK(ibv_wr_complete(A.qpx) == 0, "complete FETCH_ADD");
	CHECK(one(&A, 5, 0) == IBV_WC_FETCH_ADD, "fetch_add opcode");
	CHECK(A.buf[101] == 5 && B.buf[10] == 42, "fetch_add: old %lu, new %lu",
	      (unsigned long)A.buf[101], (unsigned long)B.buf[10]);

	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 6;
	ibv_wr_atomic_cmp_swp(A.qpx, B.mr->rkey, (uintptr_t)&B.buf[10], 42, 7);
	ibv_wr_set_sge(A.qpx, A.mr->lkey, (uintptr_t)&A.buf[102], 8);
	CHECK(ibv_wr_complete(A.qpx) == 0, "complete CMP_SWP");
	CHECK(one(&A, 6, 0) == IBV_WC_COMP_SWAP, "cmp_swp opcode");
	CHECK(A.buf[102] == 42 && B.buf[10] == 7, "cmp_swp");

	/* Inline sends from memory no region covers: by the builder (one buffer and a
	 * list of two) and by ibv_post_send with a meaningless lkey, as rdma-core allows. */
	for (int i = 0; i < 3; i++) {
		struct ibv_sge r = { (uintptr_t)B.buf + LEN / 2 + 64 * i, 64, B.mr->lkey };
		struct ibv_recv_wr w = { .wr_id = 200 + i, .sg_list = &r, .num_sge = 1 };
		CHECK(ibv_post_recv(B.qp, &w, &bad) == 0, "post_recv inline %d", i);
	}
	char local[16] = "inline one";
	char part1[8] = "in", part2[16] = "line two";
	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 7;
	A.qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(A.qpx);
	ibv_wr_set_inline_data(A.qpx, local, sizeof local);
	A.qpx->wr_id = 8;
	ibv_wr_send(A.qpx);
	struct ibv_data_buf parts[2] = { { part1, 2 }, { part2, 9 } };
	ibv_wr_set_inline_data_list(A.qpx, 2, parts);
	CHECK(ibv_wr_complete(A.qpx) == 0, "complete inline");
	CHECK(one(&A, 7, 0) == IBV_WC_SEND, "inline 7");
	CHECK(one(&A, 8, 0) == IBV_WC_SEND, "inline 8");
	CHECK(one(&B, 200, sizeof local) == IBV_WC_RECV, "inline recv 200");
	CHECK(one(&B, 201, 11) == IBV_WC_RECV, "inline recv 201");
	CHECK(strcmp((char *)B.buf + LEN / 2, "inline one") == 0, "inline payload one");
	CHECK(memcmp((char *)B.buf + LEN / 2 + 64, "inline two", 11) == 0, "inline payload two");
	char stack[32] = "inline, post_send, lkey 0";
	struct ibv_sge is = { (uintptr_t)stack, sizeof stack, 0 };
	struct ibv_send_wr iw = { .wr_id = 9, .sg_list = &is, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *sbad;
	CHECK(ibv_post_send(A.qp, &iw, &sbad) == 0, "post_send inline");
	memset(stack, 0, sizeof stack); /* the buffer may be reused at once */
	CHECK(one(&A, 9, 0) == IBV_WC_SEND, "inline 9");
	CHECK(one(&B, 202, sizeof stack) == IBV_WC_RECV, "inline recv 202");
	CHECK(strcmp((char *)B.buf + LEN / 2 + 128, "inline, post_send, lkey 0") == 0,
	      "inline payload three");
	/* An inline payload over the QP's max_inline_data is refused. */
	static char big[1024];
	struct ibv_sge bs = { (uintptr_t)big, sizeof big, 0 };
	iw.sg_list = &bs;
	CHECK(ibv_post_send(A.qp, &iw, &sbad) == EINVAL, "inline 1024 B: EINVAL");
	/* Abort discards what was built. */
	ibv_wr_start(A.qpx);
	ibv_wr_send(A.qpx);
	ibv_wr_abort(A.qpx);
	struct ibv_poll_cq_attr pa = { 0 };
	CHECK(ibv_start_poll(A.cq, &pa) == ENOENT, "nothing posted after abort");

	for (int i = 0; i < 2; i++) {
		struct side *s = i ? &B : &A;
		CHECK(ibv_destroy_qp(s->qp) == 0, "destroy_qp");
		CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(s->cq)) == 0, "destroy_cq");
		CHECK(ibv_dereg_mr(s->mr) == 0, "dereg_mr");
		CHECK(ibv_dealloc_pd(s->pd) == 0, "dealloc_pd");
		CHECK(ibv_close_device(s->ctx) == 0, "close_device");
	}
	ibv_free_device_list(list);
	printf("ok: extended CQ and QP\n");
	return 0;
}
