//! Dropping a QP first sends what its transport owes the peer: the ACK of the last
//! request it received leaves in the pass after the one that completed the request,
//! and a program that destroys its QP as soon as it sees that completion (rdma-core's
//! ibv_rc_pingpong does) must not leave the peer retrying into RetryExcErr.

mod common;

use common::*;
use weft_verbs::{LinkKind, Progress, QpType, RecvWr, SendWr, WcOpcode, WrOp};

fn the_last_ack_leaves_when_the_qp_is_dropped(kind: LinkKind) {
    // Inline progress: no engine thread sends the ACK behind the test's back.
    let (mut a, b) = pair(kind, Progress::Inline, QpType::Rc, 4096);
    let Side {
        ctx: ctx_b,
        cq: mut cq_b,
        qp: mut qp_b,
        mr: mr_b,
        conn: conn_b,
        ..
    } = b;
    qp_b.post_recv([RecvWr::new(7, mr_b.sge(0, 64))]).unwrap();
    a.qp.post_send([SendWr::new(1, WrOp::Send { imm: None }, a.mr.sge(0, 64))])
        .unwrap();
    let got = ok_driving(&mut cq_b, 1, &[&a.ctx]);
    assert_eq!((got[0].wr_id, got[0].opcode), (7, WcOpcode::Recv));
    // The receiving side is done: it destroys its QP at once (the side channel stays
    // open, so the sender's QP is not failed by the connection manager either).
    drop(qp_b);
    let sent = ok_driving(&mut a.cq, 1, &[&ctx_b]);
    assert_eq!((sent[0].wr_id, sent[0].opcode), (1, WcOpcode::Send));
    drop(conn_b);
}

#[test]
fn the_last_ack_leaves_when_the_qp_is_dropped_udp() {
    the_last_ack_leaves_when_the_qp_is_dropped(LinkKind::Udp);
}

#[test]
fn the_last_ack_leaves_when_the_qp_is_dropped_shm() {
    the_last_ack_leaves_when_the_qp_is_dropped(LinkKind::Shm);
}
