//! UD, shared receive queues, completion channels, error flush and the connection
//! manager's refusals, between two devices in this process.

mod common;

use common::*;
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener, RejectReason};
use weft_verbs::{
    Access, CompletionChannel, CompletionQueue, Error, LinkKind, Progress, QpInitAttr, QpState,
    QpType, RecvWr, SendWr, WcOpcode, WcStatus, WrOp,
};

#[test]
fn ud_send_reaches_the_qp_named_by_the_address_handle_and_can_be_answered() {
    let (mut a, mut b) = pair(LinkKind::Udp, Progress::Thread, QpType::Ud, 1 << 16);
    let qkey = ConnParam::default().qkey;
    b.qp.post_recv([RecvWr {
        wr_id: 1,
        sg_list: [b.mr.sge(0, 2048)].into(),
    }])
    .unwrap();
    a.mr.write(0, b"datagram").unwrap();
    let remote = a.conn.as_ref().unwrap().remote().clone();
    let ah = a.pd.create_ah(remote.addr).unwrap();
    let mut s = SendWr::new(5, WrOp::Send { imm: Some(3) }, vec![a.mr.sge(0, 8)]);
    s.ud = Some(ah.dest(remote.qpn, qkey));
    a.qp.post_send([s]).unwrap();
    ok(&mut a.cq, 1);
    let c = ok(&mut b.cq, 1);
    // As with ibverbs, a UD receive starts with the 40-byte GRH, then the payload.
    let grh = weft_verbs::GRH_LEN;
    assert_eq!(
        (c[0].byte_len as usize, c[0].imm, c[0].src_qp),
        (grh + 8, Some(3), Some(a.qp.qp_num()))
    );
    assert_eq!(b.mr.to_vec(grh, 8).unwrap(), b"datagram");
    // Answer the sender from the completion alone.
    let back = b.pd.create_ah_from_wc(&c[0]).unwrap();
    a.qp.post_recv([RecvWr {
        wr_id: 2,
        sg_list: [a.mr.sge(100, 64)].into(),
    }])
    .unwrap();
    b.mr.write(10, b"reply").unwrap();
    let mut r = SendWr::new(6, WrOp::Send { imm: None }, vec![b.mr.sge(10, 5)]);
    r.ud = Some(back.dest(c[0].src_qp.unwrap(), qkey));
    b.qp.post_send([r]).unwrap();
    ok(&mut b.cq, 1);
    ok(&mut a.cq, 1);
    assert_eq!(a.mr.to_vec(100 + grh, 5).unwrap(), b"reply");
}

#[test]
fn two_qps_share_one_receive_queue() {
    let ctx = device(LinkKind::Udp, Progress::Thread);
    let pd = ctx.alloc_pd();
    let cq = CompletionQueue::new(&ctx, 256, None);
    let mut srq = pd.create_srq(64);
    let mr = pd.alloc_mr(1 << 16, Access::ALL);
    srq.post_recv((0..4).map(|i| RecvWr {
        wr_id: 100 + i,
        sg_list: [mr.sge(i as usize * 1024, 1024)].into(),
    }))
    .unwrap();
    let listener = Listener::bind(&ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = listener.local_addr().unwrap();
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let mut c = side(LinkKind::Udp, Progress::Thread, QpType::Rc, 4096);
        let mut qp = pd
            .create_qp(&cq, &cq, Some(&srq), QpInitAttr::new(QpType::Rc))
            .unwrap();
        let conn_s = std::thread::scope(|s| {
            let h = s.spawn(|| {
                listener
                    .get_request(T)
                    .unwrap()
                    .accept(&mut qp, &ConnParam::default())
                    .unwrap()
            });
            c.conn = Some(cm::connect(&mut c.qp, at, &ConnParam::default()).unwrap());
            h.join().unwrap()
        });
        servers.push((qp, conn_s));
        clients.push(c);
    }
    for (i, c) in clients.iter_mut().enumerate() {
        c.mr.write(0, &[i as u8 + 1; 10]).unwrap();
        c.qp.post_send([SendWr::new(
            1,
            WrOp::Send { imm: None },
            vec![c.mr.sge(0, 10)],
        )])
        .unwrap();
        ok(&mut c.cq, 1);
    }
    let mut cq = cq;
    let got = ok(&mut cq, 2);
    let mut qpns: Vec<u32> = got.iter().map(|c| c.qpn).collect();
    qpns.sort_unstable();
    let mut want: Vec<u32> = servers.iter().map(|(q, _)| q.qp_num()).collect();
    want.sort_unstable();
    assert_eq!(qpns, want, "each QP consumed one shared receive");
    assert!(got.iter().all(|c| c.from_srq && c.wr_id >= 100));
}

#[test]
fn completion_channel_wakes_a_sleeping_thread() {
    let (a, b) = pair(LinkKind::Udp, Progress::Thread, QpType::Rc, 1 << 16);
    let ch = CompletionChannel::new(&b.ctx).unwrap();
    let mut rcq = CompletionQueue::new(&b.ctx, 64, Some(&ch));
    // A second QP on b whose receive CQ is tied to the channel.
    let mut qp2 =
        b.pd.create_qp(&b.cq, &rcq, None, QpInitAttr::new(QpType::Rc))
            .unwrap();
    let listener = Listener::bind(&b.ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = listener.local_addr().unwrap();
    let mut aqp =
        a.pd.create_qp(&a.cq, &a.cq, None, QpInitAttr::new(QpType::Rc))
            .unwrap();
    let (_c1, _c2) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            listener
                .get_request(T)
                .unwrap()
                .accept(&mut qp2, &ConnParam::default())
                .unwrap()
        });
        let c = cm::connect(&mut aqp, at, &ConnParam::default()).unwrap();
        (c, h.join().unwrap())
    });
    qp2.post_recv([RecvWr {
        wr_id: 1,
        sg_list: [b.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    rcq.req_notify();
    assert!(rcq.poll_one().is_none());
    let sender = std::thread::spawn({
        let mr_sge = a.mr.sge(0, 8);
        move || {
            std::thread::sleep(Duration::from_millis(50));
            aqp.post_send([SendWr::new(1, WrOp::Send { imm: None }, vec![mr_sge])])
                .unwrap();
            aqp
        }
    });
    let t = Instant::now();
    let id = ch.get_cq_event(T).expect("event");
    assert_eq!(id, rcq.id());
    assert!(
        t.elapsed() >= Duration::from_millis(40),
        "woke before the send"
    );
    rcq.ack_events(1);
    let c = rcq.poll_one().expect("completion after the event");
    assert_eq!((c.wr_id, c.opcode), (1, WcOpcode::Recv));
    // Not armed again: no second event.
    assert!(matches!(
        ch.get_cq_event(Duration::from_millis(50)),
        Err(Error::Timeout)
    ));
    let _aqp = sender.join().unwrap();
}

#[test]
fn a_qp_moved_to_error_flushes_every_outstanding_request() {
    let (mut a, _b) = pair(LinkKind::Udp, Progress::Thread, QpType::Rc, 1 << 16);
    a.qp.post_recv((0..3).map(|i| RecvWr {
        wr_id: i,
        sg_list: [a.mr.sge(0, 64)].into(),
    }))
    .unwrap();
    // Let the engine take the receives, then fail the QP.
    std::thread::sleep(Duration::from_millis(20));
    a.qp.modify(&weft_verbs::QpAttr {
        state: Some(QpState::Err),
        ..Default::default()
    })
    .unwrap();
    // Sends posted in ERR are flushed too.
    a.qp.post_send([SendWr::new(
        9,
        WrOp::Send { imm: None },
        vec![a.mr.sge(0, 8)],
    )])
    .unwrap();
    let c = collect(&mut a.cq, 4, &[]);
    assert_eq!(c.len(), 4, "{c:?}");
    assert!(c.iter().all(|c| c.status == WcStatus::WrFlushErr), "{c:?}");
    let mut ids: Vec<u64> = c.iter().map(|c| c.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![0, 1, 2, 9]);
}

#[test]
fn closing_the_connection_fails_the_peers_outstanding_work_quickly() {
    let (mut a, b) = pair(LinkKind::Udp, Progress::Thread, QpType::Rc, 1 << 16);
    a.qp.post_recv([RecvWr {
        wr_id: 7,
        sg_list: [a.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    let t = Instant::now();
    drop(b);
    let c = collect(&mut a.cq, 1, &[]);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].wr_id, c[0].status), (7, WcStatus::WrFlushErr));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
}

/// The order a benchmark's client relies on at the end of a run (`weft perf`'s
/// `sift`): the peer hangs up once its last SEND was acknowledged, and the receive
/// that SEND completed is still in the queue, unpolled, ahead of the flushes the
/// hang-up adds behind it.
#[test]
fn a_hang_up_after_the_last_send_leaves_its_receive_ahead_of_the_flushes() {
    let (mut a, mut b) = pair(LinkKind::Udp, Progress::Thread, QpType::Rc, 1 << 16);
    a.qp.post_recv((1..=2).map(|i| RecvWr {
        wr_id: i,
        sg_list: [a.mr.sge(0, 64)].into(),
    }))
    .unwrap();
    b.qp.post_send([SendWr::new(
        5,
        WrOp::Send { imm: None },
        vec![b.mr.sge(0, 8)],
    )])
    .unwrap();
    // Acknowledged: `a`'s engine thread placed it; `a` has not polled.
    ok(&mut b.cq, 1);
    drop(b);
    let c = collect(&mut a.cq, 2, &[]);
    let got: Vec<(u64, WcStatus)> = c.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, [(1, WcStatus::Success), (2, WcStatus::WrFlushErr)]);
}

#[test]
fn the_connection_manager_refuses_mismatches_and_silence_with_clear_errors() {
    // QP type mismatch: a UC client at an RC server.
    let mut srv = side(LinkKind::Udp, Progress::Thread, QpType::Rc, 4096);
    let mut cli = side(LinkKind::Udp, Progress::Thread, QpType::Uc, 4096);
    let listener = Listener::bind(&srv.ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = listener.local_addr().unwrap();
    let (client, server) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            listener
                .get_request(T)
                .unwrap()
                .accept(&mut srv.qp, &ConnParam::default())
        });
        (
            cm::connect(&mut cli.qp, at, &ConnParam::default()),
            h.join().unwrap(),
        )
    });
    match client {
        Err(Error::Rejected {
            peer,
            reason: RejectReason::QpTypeMismatch { theirs, ours },
        }) => {
            assert_eq!(peer, at);
            assert_eq!((theirs, ours), (QpType::Rc, QpType::Uc));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        server,
        Err(Error::Rejected {
            reason: RejectReason::QpTypeMismatch {
                theirs: QpType::Uc,
                ours: QpType::Rc
            },
            ..
        })
    ));
    // An explicit rejection carries the server's reason.
    let mut cli = side(LinkKind::Udp, Progress::Thread, QpType::Rc, 4096);
    let client = std::thread::scope(|s| {
        s.spawn(|| listener.get_request(T).unwrap().reject("server full"));
        cm::connect(&mut cli.qp, at, &ConnParam::default())
    });
    match client {
        Err(Error::Rejected {
            reason: RejectReason::Application(m),
            ..
        }) => assert_eq!(m, "server full"),
        other => panic!("{other:?}"),
    }
    // Nobody listening.
    drop(listener);
    let r = cm::connect(&mut cli.qp, at, &ConnParam::default());
    assert!(
        matches!(
            r,
            Err(Error::Rejected {
                reason: RejectReason::NothingListens,
                ..
            }) | Err(Error::Io(_))
        ),
        "{r:?}"
    );
    // A listener that never answers: the handshake times out.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = ConnParam {
        handshake_timeout: Duration::from_millis(200),
        ..ConnParam::default()
    };
    let t = Instant::now();
    let r = cm::connect(&mut cli.qp, mute.local_addr().unwrap(), &p);
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(3));
    // Garbage sent to a listener is refused and does not stop it.
    let l2 = Listener::bind(&srv.ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at2 = l2.local_addr().unwrap();
    let mut junk = std::net::TcpStream::connect(at2).unwrap();
    use std::io::Write;
    junk.write_all(&[0, 5, 1, b'J', b'U', b'N', b'K']).unwrap();
    assert!(matches!(
        l2.get_request(Duration::from_millis(300)),
        Err(Error::Timeout)
    ));
}

#[test]
fn an_ack_leaves_with_the_reply_one_link_burst_per_message_in_a_ping_pong() {
    // Inline progress, one thread driving both ends: each side's engine runs only when
    // this thread polls. A pass transmits before it receives, so the ACK for a request
    // waits for the next pass and goes out in the same link burst (one sendmmsg on
    // udp) as the reply posted in between, instead of in a burst of its own.
    const N: u64 = 100;
    let (mut a, mut b) = pair(LinkKind::Udp, Progress::Inline, QpType::Rc, 1 << 16);
    a.qp.post_recv((0..N).map(|i| RecvWr::new(i, a.mr.sge(4096, 64))))
        .unwrap();
    b.qp.post_recv((0..N).map(|i| RecvWr::new(i, b.mr.sge(4096, 64))))
        .unwrap();
    let wait_recv = |cq: &mut CompletionQueue, other: &weft_verbs::Context| {
        let deadline = Instant::now() + T;
        let mut out = Vec::new();
        while out.is_empty() && Instant::now() < deadline {
            if cq.poll(&mut out, 1) == 0 {
                other.progress();
            }
        }
        assert_eq!(out.len(), 1, "no message within {T:?}");
        assert_eq!(
            (out[0].status, out[0].opcode),
            (WcStatus::Success, WcOpcode::Recv)
        );
    };
    let unsignaled = |mr: &weft_verbs::MemoryRegion| {
        let mut wr = SendWr::new(0, WrOp::Send { imm: None }, mr.sge(0, 64));
        wr.signaled = false;
        wr
    };
    let before = (
        a.ctx.stats().engine.tx_bursts,
        b.ctx.stats().engine.tx_bursts,
    );
    for _ in 0..N {
        a.qp.post_send([unsignaled(&a.mr)]).unwrap();
        wait_recv(&mut b.cq, &a.ctx);
        b.qp.post_send([unsignaled(&b.mr)]).unwrap();
        wait_recv(&mut a.cq, &b.ctx);
    }
    let bursts = (
        a.ctx.stats().engine.tx_bursts - before.0,
        b.ctx.stats().engine.tx_bursts - before.1,
    );
    // One burst per message each way, with slack for a retransmission or a pass that
    // caught a burst in two halves; an ACK burst of its own per message would be 2N.
    assert!(
        bursts.0 <= N * 5 / 4 && bursts.1 <= N * 5 / 4,
        "link bursts for {N} round trips: a {} b {}",
        bursts.0,
        bursts.1
    );
}

#[test]
fn a_listener_address_already_taken_is_named_in_the_error() {
    let ctx = device(LinkKind::Udp, Progress::Thread);
    let first = Listener::bind(&ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = first.local_addr().unwrap();
    let e = Listener::bind(&ctx, at).unwrap_err();
    match &e {
        Error::Listen { addr, source } => {
            assert_eq!(*addr, at);
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains(&at.to_string()), "{e}");
}

/// The connection manager tells each side the other's delayed-ACK bound, so only a
/// weft peer met through it gets unsignaled messages that do not ask for their ACK;
/// a QP brought up by hand (as toward Linux rdma_rxe) keeps asking.
#[test]
fn the_connection_manager_carries_each_sides_delayed_ack_bound() {
    let (a, b) = pair(LinkKind::Udp, Progress::Thread, QpType::Rc, 4096);
    for (me, peer) in [(&a, &b), (&b, &a)] {
        let (state, attrs) = me.qp.query().expect("the QP exists");
        assert_eq!(state, QpState::Rts);
        assert_eq!(attrs.peer_ack_delay_us, peer.ctx.ack_delay_us());
        assert!(attrs.peer_ack_delay_us > 0, "weft delays ACKs by default");
    }
    let by_hand = side(LinkKind::Udp, Progress::Thread, QpType::Rc, 4096);
    let (_, attrs) = by_hand.qp.query().expect("the QP exists");
    assert_eq!(
        attrs.peer_ack_delay_us, 0,
        "not known until a handshake says"
    );
}
