//! Thread progress beside an application that spins on its completion queues: the
//! application's empty polls run the passes and the engine thread stands by (never two
//! spinning threads per process), and the engine thread takes over again when the
//! application blocks on a completion channel or stops polling. Counted, not timed:
//! every wait is bounded by the test timeout.

mod common;

use common::*;
use std::time::{Duration, Instant};
use weft_verbs::cm::ConnParam;
use weft_verbs::{
    CompletionChannel, CompletionQueue, LinkKind, Progress, QpType, RecvWr, SendWr, WrOp,
};

/// One 64-byte SEND from `from` to `to`, both applications spinning on their queues.
fn one_way(from: &mut Side, to: &mut Side, i: u64) {
    to.qp
        .post_recv([RecvWr {
            wr_id: i,
            sg_list: [to.mr.sge(0, 64)].into(),
        }])
        .unwrap();
    from.qp
        .post_send([SendWr::new(
            i,
            WrOp::Send { imm: None },
            vec![from.mr.sge(0, 64)],
        )])
        .unwrap();
    ok(&mut from.cq, 1);
    ok(&mut to.cq, 1);
}

/// Ping-pong `rounds` 64-byte SENDs.
fn pingpong(a: &mut Side, b: &mut Side, rounds: u64) {
    for i in 0..rounds {
        one_way(a, b, i);
        one_way(b, a, i);
    }
}

#[test]
fn an_application_spinning_on_its_queues_makes_the_engine_thread_stand_by() {
    for kind in [LinkKind::Shm, LinkKind::Udp] {
        let (mut a, mut b) = pair(kind, Progress::Thread, QpType::Rc, 1 << 16);
        // Long enough for several 1 ms windows, whatever the machine's speed.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(200) {
            pingpong(&mut a, &mut b, 100);
        }
        for s in [&a, &b] {
            let st = s.ctx.stats();
            assert!(
                st.engine.standbys > 0,
                "{kind:?}: the engine thread never stood by: {st:?}"
            );
            assert_eq!(st.transport.retransmitted_packets, 0, "{kind:?}: {st:?}");
        }
    }
}

#[test]
fn the_engine_thread_serves_again_when_the_application_blocks_on_a_channel() {
    let a = side(LinkKind::Shm, Progress::Thread, QpType::Rc, 1 << 16);
    // b's queue is tied to a completion channel.
    let ctx = device(LinkKind::Shm, Progress::Thread);
    let channel = CompletionChannel::new(&ctx).unwrap();
    let cq = CompletionQueue::new(&ctx, 1024, Some(&channel));
    let b = side_with_cq(ctx, cq, QpType::Rc, 1 << 16);
    let (mut a, mut b) = connect_sides(a, b, &ConnParam::default());
    // b's application spins on its queue first, so b's engine thread stands by ...
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(100) {
        pingpong(&mut a, &mut b, 50);
    }
    assert!(
        b.ctx.stats().engine.standbys > 0,
        "b's engine thread stood by while b spun"
    );
    // ... then b blocks on the channel for a SEND that a posts 20 ms later.
    b.qp.post_recv([RecvWr {
        wr_id: 77,
        sg_list: [b.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    b.cq.req_notify();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        a.qp.post_send([SendWr::new(
            5,
            WrOp::Send { imm: None },
            vec![a.mr.sge(0, 64)],
        )])
        .unwrap();
        ok(&mut a.cq, 1);
        a
    });
    // Nobody polls b meanwhile: only b's engine thread can deliver the SEND.
    let id = channel
        .get_cq_event(T)
        .expect("the SEND arrived while b blocked");
    assert_eq!(id, b.cq.id());
    let got = ok(&mut b.cq, 1);
    assert_eq!(got[0].wr_id, 77);
    let _a = sender.join().unwrap();
}
