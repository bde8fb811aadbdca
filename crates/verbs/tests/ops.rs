//! Every verbs operation between two devices in this process, over the udp link, with
//! an engine thread and with inline progress.

mod common;

use common::*;
use weft_verbs::{LinkKind, Progress, QpType, RecvWr, SendWr, WcOpcode, WrOp};

fn send_recv(kind: LinkKind, progress: Progress) {
    let (mut a, mut b) = pair(kind, progress, QpType::Rc, 1 << 20);
    b.qp.post_recv([RecvWr {
        wr_id: 9,
        sg_list: vec![b.mr.sge(0, 64 * 1024)],
    }])
    .unwrap();
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
    a.mr.write(0, &data).unwrap();
    a.qp.post_send([SendWr::new(
        1,
        WrOp::Send { imm: Some(0xfeed) },
        vec![a.mr.sge(0, 50_000)],
    )])
    .unwrap();
    let ca = ok_driving(&mut a.cq, 1, &[&b.ctx]);
    assert_eq!((ca[0].wr_id, ca[0].opcode), (1, WcOpcode::Send));
    let cb = ok_driving(&mut b.cq, 1, &[&a.ctx]);
    assert_eq!(
        (cb[0].wr_id, cb[0].opcode, cb[0].byte_len, cb[0].imm),
        (9, WcOpcode::Recv, 50_000, Some(0xfeed))
    );
    assert_eq!(b.mr.to_vec(0, 50_000).unwrap(), data);
}

#[test]
fn rc_send_with_imm_over_udp_engine_thread() {
    send_recv(LinkKind::Udp, Progress::Thread);
}

#[test]
fn rc_send_with_imm_over_udp_inline_progress() {
    send_recv(LinkKind::Udp, Progress::Inline);
}
