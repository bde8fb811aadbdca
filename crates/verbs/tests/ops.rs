//! Every verbs operation between two devices in this process, over the udp link, with
//! an engine thread and with inline progress.

mod common;

use common::*;
use weft_verbs::{LinkKind, Progress, QpType, RecvWr, SendWr, WcOpcode, WrOp};

fn send_recv(kind: LinkKind, progress: Progress) {
    let (mut a, mut b) = pair(kind, progress, QpType::Rc, 1 << 20);
    b.qp.post_recv([RecvWr {
        wr_id: 9,
        sg_list: [b.mr.sge(0, 64 * 1024)].into(),
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

fn write_read_atomics(kind: LinkKind, progress: Progress) {
    let (mut a, b) = pair(kind, progress, QpType::Rc, 1 << 20);
    let drive = [&b.ctx];
    // WRITE 100 KB into b at offset 4096: b never polls (a passive target).
    let data: Vec<u8> = (0..100_000u32).map(|i| (i ^ (i >> 8)) as u8).collect();
    a.mr.write(0, &data).unwrap();
    a.qp.post_send([SendWr::new(
        1,
        WrOp::Write {
            remote: b.mr.remote(4096),
            imm: None,
        },
        vec![a.mr.sge(0, 100_000)],
    )])
    .unwrap();
    assert_eq!(
        ok_driving(&mut a.cq, 1, &drive)[0].opcode,
        WcOpcode::RdmaWrite
    );
    assert_eq!(b.mr.to_vec(4096, 100_000).unwrap(), data);
    // READ it back into a at offset 200_000.
    a.qp.post_send([SendWr::new(
        2,
        WrOp::Read {
            remote: b.mr.remote(4096),
        },
        vec![a.mr.sge(200_000, 100_000)],
    )])
    .unwrap();
    let c = ok_driving(&mut a.cq, 1, &drive);
    assert_eq!((c[0].opcode, c[0].byte_len), (WcOpcode::RdmaRead, 100_000));
    assert_eq!(a.mr.to_vec(200_000, 100_000).unwrap(), data);
    // Atomics on an 8-byte word of b.
    b.mr.store_u64(0, 40).unwrap();
    a.qp.post_send([
        SendWr::new(
            3,
            WrOp::FetchAdd {
                remote: b.mr.remote(0),
                add: 2,
            },
            vec![a.mr.sge(300_000, 8)],
        ),
        SendWr::new(
            4,
            WrOp::CompareSwap {
                remote: b.mr.remote(0),
                compare: 42,
                swap: 7,
            },
            vec![a.mr.sge(300_008, 8)],
        ),
        SendWr::new(
            5,
            WrOp::CompareSwap {
                remote: b.mr.remote(0),
                compare: 42,
                swap: 99,
            },
            vec![a.mr.sge(300_016, 8)],
        ),
    ])
    .unwrap();
    let c = ok_driving(&mut a.cq, 3, &drive);
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.opcode)).collect::<Vec<_>>(),
        vec![
            (3, WcOpcode::FetchAdd),
            (4, WcOpcode::CompSwap),
            (5, WcOpcode::CompSwap)
        ]
    );
    assert_eq!(a.mr.load_u64(300_000).unwrap(), 40);
    assert_eq!(a.mr.load_u64(300_008).unwrap(), 42);
    assert_eq!(
        a.mr.load_u64(300_016).unwrap(),
        7,
        "second CAS sees the first's swap"
    );
    assert_eq!(b.mr.load_u64(0).unwrap(), 7);
}

#[test]
fn rc_write_read_atomics_against_a_passive_target_udp() {
    write_read_atomics(LinkKind::Udp, Progress::Thread);
}

#[test]
fn rc_write_read_atomics_inline_progress_udp() {
    write_read_atomics(LinkKind::Udp, Progress::Inline);
}

#[test]
fn write_with_imm_consumes_a_receive_and_multi_sge_gathers_and_scatters() {
    let (mut a, mut b) = pair(LinkKind::Udp, Progress::Thread, QpType::Rc, 1 << 16);
    a.mr.write(0, b"head-").unwrap();
    a.mr.write(100, b"middle-").unwrap();
    a.mr.write(200, b"tail").unwrap();
    // Scatter the SEND over three receive SGEs of 4, 4 and 64 bytes.
    b.qp.post_recv([RecvWr {
        wr_id: 1,
        sg_list: [b.mr.sge(1000, 4), b.mr.sge(2000, 4), b.mr.sge(3000, 64)].into(),
    }])
    .unwrap();
    b.qp.post_recv([RecvWr {
        wr_id: 2,
        sg_list: Default::default(),
    }])
    .unwrap();
    let gather = vec![a.mr.sge(0, 5), a.mr.sge(100, 7), a.mr.sge(200, 4)];
    a.qp.post_send([
        SendWr::new(10, WrOp::Send { imm: None }, gather.clone()),
        SendWr::new(
            11,
            WrOp::Write {
                remote: b.mr.remote(5000),
                imm: Some(77),
            },
            gather,
        ),
    ])
    .unwrap();
    ok(&mut a.cq, 2);
    let c = ok(&mut b.cq, 2);
    assert_eq!(
        (c[0].wr_id, c[0].opcode, c[0].byte_len),
        (1, WcOpcode::Recv, 16)
    );
    assert_eq!(b.mr.to_vec(1000, 4).unwrap(), b"head");
    assert_eq!(b.mr.to_vec(2000, 4).unwrap(), b"-mid");
    assert_eq!(b.mr.to_vec(3000, 8).unwrap(), b"dle-tail");
    assert_eq!(
        (c[1].wr_id, c[1].opcode, c[1].imm),
        (2, WcOpcode::RecvRdmaWithImm, Some(77))
    );
    assert_eq!(b.mr.to_vec(5000, 16).unwrap(), b"head-middle-tail");
}

#[test]
fn inline_sends_may_reuse_their_buffer_at_once_and_unsignaled_sends_stay_silent() {
    let (mut a, mut b) = pair(LinkKind::Udp, Progress::Thread, QpType::Rc, 1 << 16);
    b.qp.post_recv((0..2).map(|i| RecvWr {
        wr_id: i,
        sg_list: [b.mr.sge(i as usize * 100, 100)].into(),
    }))
    .unwrap();
    a.mr.write(0, b"first").unwrap();
    let mut s = SendWr::new(1, WrOp::Send { imm: None }, vec![a.mr.sge(0, 5)]);
    s.inline = true;
    s.signaled = false;
    a.qp.post_send([s]).unwrap();
    a.mr.write(0, b"XXXXX").unwrap();
    let mut s = SendWr::new(2, WrOp::Send { imm: None }, vec![a.mr.sge(0, 5)]);
    s.inline = true;
    a.qp.post_send([s]).unwrap();
    let c = ok(&mut a.cq, 1);
    assert_eq!(c[0].wr_id, 2, "only the signaled send completes");
    ok(&mut b.cq, 2);
    assert_eq!(b.mr.to_vec(0, 5).unwrap(), b"first");
    assert_eq!(b.mr.to_vec(100, 5).unwrap(), b"XXXXX");
    // Inline data from memory the QP's domain does not own is refused at post time.
    let other = a.ctx.alloc_pd().alloc_mr(64, weft_verbs::Access::ALL);
    let mut s = SendWr::new(3, WrOp::Send { imm: None }, vec![other.sge(0, 5)]);
    s.inline = true;
    assert!(matches!(
        a.qp.post_send([s]),
        Err(weft_verbs::Error::InlineAccess(_))
    ));
}

#[test]
fn rc_send_with_imm_over_shm_engine_thread() {
    send_recv(LinkKind::Shm, Progress::Thread);
}

#[test]
fn rc_send_with_imm_over_shm_inline_progress() {
    send_recv(LinkKind::Shm, Progress::Inline);
}

#[test]
fn rc_write_read_atomics_against_a_passive_target_shm() {
    write_read_atomics(LinkKind::Shm, Progress::Thread);
}

#[test]
fn one_listener_accepts_queue_pairs_of_other_devices() {
    // A server with one device per core behind one listener: the listener's device
    // takes the request, a second device's QP accepts it, and traffic flows between
    // the client and that second device.
    use weft_verbs::cm::{self, ConnParam, Listener};
    for kind in [LinkKind::Udp, LinkKind::Shm] {
        let front = device(kind, Progress::Thread);
        let mut back = side(kind, Progress::Thread, QpType::Rc, 4096);
        let mut client = side(kind, Progress::Thread, QpType::Rc, 4096);
        let listener = Listener::bind(&front, "127.0.0.1:0".parse().unwrap()).unwrap();
        let at = listener.local_addr().unwrap();
        let param = ConnParam::default();
        let (conn_back, conn_client) = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let req = listener.get_request(T).unwrap();
                assert_eq!(req.context().local_addr(), front.local_addr());
                req.accept(&mut back.qp, &param).unwrap()
            });
            let c = cm::connect(&mut client.qp, at, &param).unwrap();
            (h.join().unwrap(), c)
        });
        assert_eq!(conn_client.remote().addr, back.ctx.local_addr());
        back.qp
            .post_recv([RecvWr {
                wr_id: 1,
                sg_list: [back.mr.sge(0, 64)].into(),
            }])
            .unwrap();
        client.mr.write(0, b"to the second device").unwrap();
        client
            .qp
            .post_send([SendWr::new(
                2,
                WrOp::Send { imm: None },
                vec![client.mr.sge(0, 20)],
            )])
            .unwrap();
        ok(&mut client.cq, 1);
        let c = ok(&mut back.cq, 1);
        assert_eq!(c[0].byte_len, 20);
        assert_eq!(back.mr.to_vec(0, 20).unwrap(), b"to the second device");
        drop((conn_back, conn_client));
    }
}

/// With inline progress a send goes straight into the transport while its QP's ring is
/// empty (the doorbell path) and through the ring when the transport's queue is full or
/// the ring already holds requests. The peer must see every message in posting order,
/// inline payloads as they were at post time, and the sends complete in order.
#[test]
fn sends_keep_their_order_when_the_doorbell_path_falls_back_to_the_ring() {
    // A send queue of 8: a burst of 12 fills the transport, then the ring.
    let (mut a, mut b) = small_send_queue_pair(8, 64 * 32);
    const N: u64 = 24;
    b.qp.post_recv(slot_recvs(&b.mr, N)).unwrap();
    // Request i carries 16 bytes of value i; every third one is not inline (read from
    // the region when it is sent, so its bytes stay put).
    let wr = |i: u64| {
        let mut s = SendWr::new(i, WrOp::Send { imm: None }, [a.mr.sge(i as usize * 64, 16)]);
        s.inline = i % 3 != 0;
        s
    };
    let scribble = |range: std::ops::Range<u64>| {
        for i in range.filter(|i| i % 3 != 0) {
            a.mr.write(i as usize * 64, &[0xee; 16]).unwrap();
        }
    };
    for i in 0..N {
        a.mr.write(i as usize * 64, &[i as u8; 16]).unwrap();
    }
    // One message both ways first: the shm link connects on first use, and these
    // steps need packets to arrive in the pass after they leave.
    a.qp.post_send([wr(0)]).unwrap();
    let mut sent = ok_driving(&mut a.cq, 1, &[&b.ctx]);
    // 8 fit the transport, 6 wait in the ring.
    a.qp.post_send((1..15).map(wr)).unwrap();
    scribble(1..15);
    // The first 8 go out, the peer takes them and ACKs, the ACK frees the
    // transport's queue: room there, 6 still in the ring.
    a.ctx.progress();
    b.ctx.progress();
    b.ctx.progress();
    a.ctx.progress();
    // These must queue behind the 6, not overtake them through the free room.
    a.qp.post_send((15..16).map(wr)).unwrap();
    scribble(15..16);
    sent.extend(ok_driving(&mut a.cq, 15, &[&b.ctx]));
    a.qp.post_send((16..N).map(wr)).unwrap();
    scribble(16..N);
    sent.extend(ok_driving(&mut a.cq, (N - 16) as usize, &[&b.ctx]));
    let got = ok_driving(&mut b.cq, N as usize, &[&a.ctx]);
    let ids = |v: &[weft_verbs::Completion]| v.iter().map(|c| c.wr_id).collect::<Vec<_>>();
    assert_eq!(
        ids(&sent),
        (0..N).collect::<Vec<_>>(),
        "send completion order"
    );
    assert_eq!(ids(&got), (0..N).collect::<Vec<_>>(), "receive order");
    for i in 0..N {
        assert_eq!(
            b.mr.to_vec(i as usize * 64, 16).unwrap(),
            vec![i as u8; 16],
            "message {i}"
        );
    }
}

/// An iterator whose size hint says "empty" whatever it holds: a wrong hint, which
/// `Iterator` allows.
struct WrongHint<I>(I);

impl<I: Iterator> Iterator for WrongHint<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        self.0.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(0))
    }
}

/// `post_send` of an empty list returns at once, but what decides "empty" is the
/// iterator's first item, not its size hint: every request it yields is posted, on
/// the doorbell path (inline progress) and through the ring (engine thread).
#[test]
fn post_send_posts_what_the_iterator_yields_whatever_its_size_hint_says() {
    for progress in [Progress::Inline, Progress::Thread] {
        let (mut a, mut b) = pair(LinkKind::Shm, progress, QpType::Rc, 4096);
        b.qp.post_recv(slot_recvs(&b.mr, 2)).unwrap();
        a.qp.post_send(std::iter::empty::<SendWr>()).unwrap();
        let wrs =
            (0..2u64).map(|i| SendWr::new(10 + i, WrOp::Send { imm: None }, [a.mr.sge(0, 64)]));
        a.qp.post_send(WrongHint(wrs)).unwrap();
        let ca = ok_driving(&mut a.cq, 2, &[&b.ctx]);
        assert_eq!(
            ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            vec![10, 11],
            "{progress:?}"
        );
        ok_driving(&mut b.cq, 2, &[&a.ctx]);
    }
}

/// Requests posted borrowed (`&wrs`, `[&wr]`, as `ibv_post_send` takes them) are read
/// in place and their gather lists copied: what arrives is theirs, a three-entry list
/// (copied to the heap) and an inline payload included, and an unsignaled one
/// completes nothing; with inline progress and with an engine thread.
#[test]
fn borrowed_send_requests_deliver_their_own_bytes() {
    for progress in [Progress::Inline, Progress::Thread] {
        let (mut a, mut b) = pair(LinkKind::Shm, progress, QpType::Rc, 4096);
        let payload: Vec<u8> = (0..64u8).map(|i| i ^ 0x5a).collect();
        a.mr.write(0, &payload).unwrap();
        b.qp.post_recv(slot_recvs(&b.mr, 4)).unwrap();
        let mut wrs = vec![
            SendWr::new(20, WrOp::Send { imm: None }, [a.mr.sge(0, 64)]),
            inline_send(&a.mr, 21),
            SendWr::new(
                22,
                WrOp::Send { imm: None },
                [a.mr.sge(40, 8), a.mr.sge(8, 8), a.mr.sge(24, 8)],
            ),
        ];
        wrs[0].signaled = false;
        a.qp.post_send(&wrs).unwrap();
        let one = SendWr::new(23, WrOp::Send { imm: None }, [a.mr.sge(8, 32)]);
        a.qp.post_send([&one]).unwrap();
        let ca = ok_driving(&mut a.cq, 3, &[&b.ctx]);
        assert_eq!(
            ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            vec![21, 22, 23],
            "{progress:?}: the unsignaled request completes nothing"
        );
        let cb = ok_driving(&mut b.cq, 4, &[&a.ctx]);
        assert_eq!(
            cb.iter().map(|c| c.byte_len).collect::<Vec<_>>(),
            vec![64, 16, 24, 32],
            "{progress:?}"
        );
        let got = |slot: usize, n: usize| b.mr.to_vec(slot * 64, n).unwrap();
        assert_eq!(got(0, 64), payload, "{progress:?}: the gathered SEND");
        assert_eq!(got(1, 16), payload[..16], "{progress:?}: the inline SEND");
        let three = [&payload[40..48], &payload[8..16], &payload[24..32]].concat();
        assert_eq!(got(2, 24), three, "{progress:?}: the three-entry list");
        assert_eq!(got(3, 32), payload[8..40], "{progress:?}: `[&wr]`");
    }
}

/// A borrowed list longer than the send queue's room: the first requests take the
/// doorbell path, the rest the ring (each copied into its slot), in order, each
/// message its own request's bytes.
#[test]
fn a_borrowed_list_that_overflows_the_send_queue_keeps_its_order_through_the_ring() {
    let (mut a, mut b) = small_send_queue_pair(4, 64 * 16);
    const N: u64 = 7;
    b.qp.post_recv(slot_recvs(&b.mr, N + 1)).unwrap();
    for i in 0..=N {
        a.mr.write(i as usize * 64, &[i as u8 + 1; 16]).unwrap();
    }
    // One message first: the shm link connects on first use.
    a.qp.post_send([&SendWr::new(0, WrOp::Send { imm: None }, [a.mr.sge(0, 16)])])
        .unwrap();
    let mut sent = ok_driving(&mut a.cq, 1, &[&b.ctx]);
    // 4 fit the transport, 3 wait in the ring; odd ones inline.
    let wrs: Vec<SendWr> = (1..=N)
        .map(|i| {
            let mut s = SendWr::new(i, WrOp::Send { imm: None }, [a.mr.sge(i as usize * 64, 16)]);
            s.inline = i % 2 == 1;
            s
        })
        .collect();
    let drained = a.ctx.stats().engine.qp_rings_drained;
    a.qp.post_send(&wrs).unwrap();
    sent.extend(ok_driving(&mut a.cq, N as usize, &[&b.ctx]));
    assert!(
        a.ctx.stats().engine.qp_rings_drained > drained,
        "the ring took part"
    );
    let got = ok_driving(&mut b.cq, N as usize + 1, &[&a.ctx]);
    let ids = |v: &[weft_verbs::Completion]| v.iter().map(|c| c.wr_id).collect::<Vec<_>>();
    assert_eq!(
        ids(&sent),
        (0..=N).collect::<Vec<_>>(),
        "send completion order"
    );
    assert_eq!(ids(&got), (0..=N).collect::<Vec<_>>(), "receive order");
    for i in 0..=N {
        assert_eq!(
            b.mr.to_vec(i as usize * 64, 16).unwrap(),
            vec![i as u8 + 1; 16],
            "message {i}"
        );
    }
}

/// Two connected shm sides with inline progress, `a`'s QP with a send queue of
/// `depth` (to make a list overflow it into the ring); `mem` bytes of region each.
fn small_send_queue_pair(depth: usize, mem: usize) -> (Side, Side) {
    let mut a = side(LinkKind::Shm, Progress::Inline, QpType::Rc, mem);
    let mut init = weft_verbs::QpInitAttr::new(QpType::Rc);
    init.max_send_wr = depth;
    a.qp = a.pd.create_qp(&a.cq, &a.cq, None, init).expect("create qp");
    let b = side(LinkKind::Shm, Progress::Inline, QpType::Rc, mem);
    connect_sides(a, b, &weft_verbs::cm::ConnParam::default())
}

/// Receives 0..n, each into its own 64-byte slot of `mr`.
fn slot_recvs(mr: &weft_verbs::MemoryRegion, n: u64) -> impl Iterator<Item = RecvWr> + '_ {
    (0..n).map(|i| RecvWr {
        wr_id: i,
        sg_list: [mr.sge(i as usize * 64, 64)].into(),
    })
}

/// An inline 16-byte SEND of the first bytes of `mr`.
fn inline_send(mr: &weft_verbs::MemoryRegion, wr_id: u64) -> SendWr {
    let mut w = SendWr::new(wr_id, WrOp::Send { imm: None }, [mr.sge(0, 16)]);
    w.inline = true;
    w
}

/// The application waits: two empty polls of `cq` (with inline progress each runs a
/// pass), so its next post follows a wait.
fn waits(cq: &mut weft_verbs::CompletionQueue) {
    let mut none = Vec::new();
    assert_eq!(cq.poll(&mut none, 1), 0);
    assert_eq!(cq.poll(&mut none, 1), 0);
}

/// Poll `cq` (inline progress: each empty poll is a pass of its own device only) up
/// to `polls` times for one completion.
fn one_without_driving(cq: &mut weft_verbs::CompletionQueue, polls: usize) -> Option<u64> {
    let mut out = Vec::new();
    (0..polls).find_map(|_| (cq.poll(&mut out, 1) > 0).then(|| out[0].wr_id))
}

/// With inline progress, a post that follows a wait (its application polled since the
/// QP's last post) on a QP with less than half its window in use goes onto the link
/// from `post_send` itself: the peer receives it while the sender runs no pass. Posts
/// back to back wait for the next pass (one burst for many), and so does a post on a
/// QP whose window is half full, waited or not.
#[test]
fn a_post_after_a_wait_leaves_from_post_send_and_a_stream_waits_for_the_pass() {
    let mut a = side(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096);
    let mut init = weft_verbs::QpInitAttr::new(QpType::Rc);
    init.max_send_wr = 8;
    a.qp = a.pd.create_qp(&a.cq, &a.cq, None, init).expect("create qp");
    let b = side(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096);
    let (mut a, mut b) = connect_sides(a, b, &weft_verbs::cm::ConnParam::default());
    b.qp.post_recv(slot_recvs(&b.mr, 32)).unwrap();
    let wr = |i: u64| inline_send(&a.mr, i);
    let flushes = |a: &Side| a.ctx.stats().engine.post_flushes;
    // One message both ways first: the shm link connects on first use.
    a.qp.post_send([wr(0)]).unwrap();
    ok_driving(&mut a.cq, 1, &[&b.ctx]);
    ok_driving(&mut b.cq, 1, &[&a.ctx]);

    // The application waits (two empty polls), then posts: the post leaves at once.
    waits(&mut a.cq);
    let before = flushes(&a);
    a.qp.post_send([wr(1)]).unwrap();
    assert_eq!(flushes(&a), before + 1, "a post after a wait is flushed");
    assert_eq!(
        one_without_driving(&mut b.cq, 10_000),
        Some(1),
        "the peer receives it with no pass of the sender's"
    );
    ok_driving(&mut a.cq, 1, &[&b.ctx]);

    // Three posts back to back, after a wait: the first leaves at once, the other two
    // wait for the sender's next pass.
    waits(&mut a.cq);
    let before = flushes(&a);
    for i in 2..5 {
        a.qp.post_send([wr(i)]).unwrap();
    }
    assert_eq!(
        flushes(&a),
        before + 1,
        "posts back to back are not flushed"
    );
    assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(2));
    assert_eq!(
        one_without_driving(&mut b.cq, 1_000),
        None,
        "the stream's rest waits for the sender's pass"
    );
    let cb = ok_driving(&mut b.cq, 2, &[&a.ctx]);
    assert_eq!(cb.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![3, 4]);
    ok_driving(&mut a.cq, 3, &[&b.ctx]);

    // A half-full window: four requests out (the peer runs no pass, so none is
    // acknowledged), the sender waits, and its next post is left to the pass.
    for i in 5..9 {
        a.qp.post_send([wr(i)]).unwrap();
    }
    waits(&mut a.cq);
    let before = flushes(&a);
    a.qp.post_send([wr(9)]).unwrap();
    assert_eq!(flushes(&a), before, "a half-full window is not flushed");
    // Everything arrives, in order, and completes.
    let cb = ok_driving(&mut b.cq, 5, &[&a.ctx]);
    assert_eq!(
        cb.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![5, 6, 7, 8, 9]
    );
    ok_driving(&mut a.cq, 5, &[&b.ctx]);
}

/// A flushed post whose message is several packets, and a flushed list of two: the
/// flush writes the first packet by the QP's own turn and hands it to the shm link on
/// its own, and what is still ready after it (the message's other packets, the
/// list's second request) leaves in the same flush. The peer gets all of it, in
/// order and intact, while the sender runs no pass; a lone packet of a ping-pong
/// leaves the same way (the link's send counter moves by one per flush).
#[test]
fn a_flushed_post_sends_all_that_is_ready_not_only_its_first_packet() {
    let (mut a, mut b) = pair(LinkKind::Shm, Progress::Inline, QpType::Rc, 1 << 16);
    let big = |i: u64| RecvWr {
        wr_id: i,
        sg_list: [b.mr.sge(i as usize * 8192, 8192)].into(),
    };
    b.qp.post_recv((0..6).map(big)).unwrap();
    let msg: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    a.mr.write(0, &msg).unwrap();
    let send = |i: u64, len: u32| SendWr::new(i, WrOp::Send { imm: None }, [a.mr.sge(0, len)]);
    let flushes = |a: &Side| a.ctx.stats().engine.post_flushes;
    // One message first: the shm link connects on first use.
    a.qp.post_send([send(0, 16)]).unwrap();
    ok_driving(&mut a.cq, 1, &[&b.ctx]);
    ok_driving(&mut b.cq, 1, &[&a.ctx]);
    let frames = |a: &Side| a.ctx.stats().link.tx_frames;

    // A lone small message after a wait: one flush, one datagram.
    waits(&mut a.cq);
    let (f0, t0) = (flushes(&a), frames(&a));
    a.qp.post_send([send(1, 64)]).unwrap();
    assert_eq!((flushes(&a), frames(&a)), (f0 + 1, t0 + 1));
    assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(1));
    ok_driving(&mut a.cq, 1, &[&b.ctx]);

    // 5000 bytes (several packets at the default MTU) after a wait.
    waits(&mut a.cq);
    let (f0, t0) = (flushes(&a), frames(&a));
    a.qp.post_send([send(2, 5000)]).unwrap();
    assert_eq!(flushes(&a), f0 + 1);
    assert!(frames(&a) >= t0 + 2, "every packet of the message left");
    assert_eq!(
        one_without_driving(&mut b.cq, 10_000),
        Some(2),
        "the whole message arrives with no pass of the sender's"
    );
    let mut got = vec![0u8; 5000];
    b.mr.read(2 * 8192, &mut got).unwrap();
    assert_eq!(got, msg);
    ok_driving(&mut a.cq, 1, &[&b.ctx]);

    // A list of two after a wait: both leave in the flush.
    waits(&mut a.cq);
    a.qp.post_send([send(3, 64), send(4, 3000)]).unwrap();
    assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(3));
    assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(4));
    let mut got = vec![0u8; 3000];
    b.mr.read(4 * 8192, &mut got).unwrap();
    assert_eq!(got, msg[..3000]);
    ok_driving(&mut a.cq, 2, &[&b.ctx]);
}

/// Posts of several QPs in one pass (a reap that freed several QPs' windows, then a
/// post to each, as perftest's `-q` loop does), inline progress: the first, which
/// follows a wait, leaves from `post_send`; the others join the sender's next pass,
/// one burst for them all, though each of their QPs waited too.
#[test]
fn posts_of_several_qps_in_one_pass_flush_once() {
    use weft_verbs::cm::{self, ConnParam, Listener};
    let a = side(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096);
    let b = side(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096);
    let (mut a, mut b) = connect_sides(a, b, &ConnParam::default());
    // A second pair of QPs between the same two devices.
    let init = weft_verbs::QpInitAttr::new(QpType::Rc);
    let mut a2 = a.pd.create_qp(&a.cq, &a.cq, None, init).unwrap();
    let mut b2 = b.pd.create_qp(&b.cq, &b.cq, None, init).unwrap();
    let listener = Listener::bind(&b.ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = listener.local_addr().unwrap();
    let param = ConnParam::default();
    let _conns = std::thread::scope(|s| {
        let h = s.spawn(|| {
            listener
                .get_request(T)
                .unwrap()
                .accept(&mut b2, &param)
                .unwrap()
        });
        let c = cm::connect(&mut a2, at, &param).unwrap();
        (h.join().unwrap(), c)
    });
    let recvs = |from: u64| {
        (from..from + 4).map(|i| RecvWr {
            wr_id: i,
            sg_list: [b.mr.sge(i as usize * 64, 64)].into(),
        })
    };
    b.qp.post_recv(recvs(0)).unwrap();
    b2.post_recv(recvs(10)).unwrap();
    let wr = |i: u64| inline_send(&a.mr, i);
    let flushes = |a: &Side| a.ctx.stats().engine.post_flushes;
    // One message on each pair first (the shm link connects on first use).
    a.qp.post_send([wr(0)]).unwrap();
    a2.post_send([wr(10)]).unwrap();
    ok_driving(&mut a.cq, 2, &[&b.ctx]);
    ok_driving(&mut b.cq, 2, &[&a.ctx]);

    // The application waits (two empty polls), then posts to each QP in turn.
    waits(&mut a.cq);
    let before = flushes(&a);
    a.qp.post_send([wr(1)]).unwrap();
    a2.post_send([wr(11)]).unwrap();
    assert_eq!(
        flushes(&a),
        before + 1,
        "the second QP's post in the same pass is not flushed"
    );
    assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(1));
    assert_eq!(
        one_without_driving(&mut b.cq, 1_000),
        None,
        "the second QP's message waits for the sender's pass"
    );
    let cb = ok_driving(&mut b.cq, 1, &[&a.ctx]);
    assert_eq!(cb[0].wr_id, 11);
    ok_driving(&mut a.cq, 2, &[&b.ctx]);

    // The control: the second QP's post alone after a wait is flushed.
    waits(&mut a.cq);
    let before = flushes(&a);
    a2.post_send([wr(12)]).unwrap();
    assert_eq!(
        flushes(&a),
        before + 1,
        "a lone post after a wait is flushed"
    );
    assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(12));
    ok_driving(&mut a.cq, 1, &[&b.ctx]);
}

/// Over shm (a link whose sends are memory writes) without the ring mode, the ACK
/// that a received request asks for leaves in the pass that received it: the
/// receiver runs that one pass, and the sender's next pass already finds the ACK and
/// completes its signaled SEND.
#[test]
fn over_shm_the_ack_a_request_asks_for_leaves_in_the_pass_that_received_it() {
    let a = side_ring(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096, false);
    let b = side_ring(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096, false);
    let (mut a, mut b) = connect_sides(a, b, &weft_verbs::cm::ConnParam::default());
    assert!(!a.conn.as_ref().unwrap().remote().ring);
    b.qp.post_recv(slot_recvs(&b.mr, 8)).unwrap();
    let wr = |i: u64| {
        let s = inline_send(&a.mr, i);
        assert!(s.signaled, "a signaled SEND asks for its ACK");
        s
    };
    // One message both ways first: the shm link connects on first use.
    a.qp.post_send([wr(0)]).unwrap();
    ok_driving(&mut a.cq, 1, &[&b.ctx]);
    ok_driving(&mut b.cq, 1, &[&a.ctx]);
    for i in 1..4 {
        // The sender waits, so its post leaves from `post_send` (no pass of its own).
        waits(&mut a.cq);
        a.qp.post_send([wr(i)]).unwrap();
        let before = b.ctx.stats().engine.tx_after_rx;
        // The receiver's passes until the one that received the SEND (it publishes
        // the receive's completion, so the loop stops right after it).
        assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(i));
        // One pass of the sender's: the ACK is there.
        assert_eq!(
            one_without_driving(&mut a.cq, 1),
            Some(i),
            "the ACK left with the receiving pass"
        );
        assert_eq!(b.ctx.stats().engine.tx_after_rx, before + 1);
    }
}

/// The same in the ring mode: no ACK at all — the receiver's
/// pass that took the SEND releases its ring item, and the sender's next pass reads
/// the release (a signaled SEND's release is one the transport waits for) and
/// completes it. Nothing travels back as a packet.
#[test]
fn over_shm_in_ring_mode_the_release_of_the_receiving_pass_completes_the_send() {
    let a = side_ring(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096, true);
    let b = side_ring(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096, true);
    let (mut a, mut b) = connect_sides(a, b, &weft_verbs::cm::ConnParam::default());
    assert!(a.conn.as_ref().unwrap().remote().ring);
    b.qp.post_recv(slot_recvs(&b.mr, 8)).unwrap();
    let wr = |i: u64| {
        let s = inline_send(&a.mr, i);
        assert!(s.signaled);
        s
    };
    a.qp.post_send([wr(0)]).unwrap();
    ok_driving(&mut a.cq, 1, &[&b.ctx]);
    ok_driving(&mut b.cq, 1, &[&a.ctx]);
    let (tx_a, tx_b) = (
        a.ctx.stats().transport.tx_packets,
        b.ctx.stats().transport.tx_packets,
    );
    for i in 1..4 {
        waits(&mut a.cq);
        a.qp.post_send([wr(i)]).unwrap();
        assert_eq!(one_without_driving(&mut b.cq, 10_000), Some(i));
        assert_eq!(
            one_without_driving(&mut a.cq, 1),
            Some(i),
            "the release of the receiving pass completes the SEND"
        );
    }
    // Three descriptors from a, nothing from b: no ACK.
    assert_eq!(a.ctx.stats().transport.ring_sent, 4);
    assert_eq!(a.ctx.stats().transport.tx_packets - tx_a, 3);
    assert_eq!(b.ctx.stats().transport.tx_packets, tx_b);
}

/// With nobody else in the engine and nothing in its receive ring, `post_recv` puts
/// each receive straight into the transport (no ring, no listing of the QP for the
/// next pass). What the transport has no room for takes the ring, behind it: the
/// receives are consumed in posting order either way.
#[test]
fn receives_go_straight_to_the_transport_and_keep_their_order_through_the_ring() {
    let a = side(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096);
    let mut b = side(LinkKind::Shm, Progress::Inline, QpType::Rc, 4096);
    let mut init = weft_verbs::QpInitAttr::new(QpType::Rc);
    init.max_recv_wr = 4;
    b.qp = b.pd.create_qp(&b.cq, &b.cq, None, init).expect("create qp");
    let (mut a, mut b) = connect_sides(a, b, &weft_verbs::cm::ConnParam::default());
    let recv = |i: u64| RecvWr {
        wr_id: 100 + i,
        sg_list: [b.mr.sge(i as usize * 64, 64)].into(),
    };
    // One receive on an idle QP: the transport has it, the next pass drains no ring.
    b.qp.post_recv([recv(0)]).unwrap();
    let drained = b.ctx.stats().engine.qp_rings_drained;
    b.ctx.progress();
    assert_eq!(
        b.ctx.stats().engine.qp_rings_drained,
        drained,
        "no ring to drain"
    );
    // Seven more: three fill the transport's queue of four, four take the ring.
    b.qp.post_recv((1..8).map(recv)).unwrap();
    for i in 0..8u64 {
        a.mr.write(i as usize * 16, &[i as u8 + 1; 16]).unwrap();
    }
    for i in 0..8u64 {
        let s = SendWr::new(i, WrOp::Send { imm: None }, [a.mr.sge(i as usize * 16, 16)]);
        a.qp.post_send([s]).unwrap();
    }
    let cb = ok_driving(&mut b.cq, 8, &[&a.ctx]);
    assert_eq!(
        cb.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        (100..108).collect::<Vec<_>>(),
        "receives consumed in posting order"
    );
    assert!(
        b.ctx.stats().engine.qp_rings_drained > drained,
        "the rest came through the ring"
    );
    for i in 0..8usize {
        let mut got = [0u8; 16];
        b.mr.read(i * 64, &mut got).unwrap();
        assert_eq!(
            got,
            [i as u8 + 1; 16],
            "message {i} in receive {i}'s buffer"
        );
    }
    ok_driving(&mut a.cq, 8, &[&b.ctx]);
}

/// A list with a request the synchronous checks refuse: the error names its index
/// (ibverbs' `bad_wr`), the requests before it are posted and complete, and the ones
/// after it are not posted. Sends and receives, on the doorbell path (inline
/// progress) and through the rings (engine thread).
#[test]
fn a_refused_request_in_a_list_names_its_index_and_the_ones_before_it_are_posted() {
    for progress in [Progress::Inline, Progress::Thread] {
        let a = side(LinkKind::Shm, progress, QpType::Rc, 4096);
        let mut b = side(LinkKind::Shm, progress, QpType::Rc, 4096);
        let mut init = weft_verbs::QpInitAttr::new(QpType::Rc);
        init.max_sge = 1;
        b.qp = b.pd.create_qp(&b.cq, &b.cq, None, init).expect("create qp");
        let (mut a, mut b) = connect_sides(a, b, &weft_verbs::cm::ConnParam::default());
        // Receives: the second has two SGEs against the QP's one.
        let two = RecvWr {
            wr_id: 99,
            sg_list: [b.mr.sge(1024, 8), b.mr.sge(2048, 8)].into(),
        };
        let r = b.qp.post_recv(
            slot_recvs(&b.mr, 1)
                .chain([two])
                .chain(slot_recvs(&b.mr, 3)),
        );
        assert!(
            matches!(
                r,
                Err(weft_verbs::Error::PostList {
                    index: 1,
                    error: weft_transport::PostError::TooManySge
                })
            ),
            "{progress:?}: {r:?}"
        );
        // Sends: the second is inline and longer than the QP's inline limit.
        let mut long = SendWr::new(21, WrOp::Send { imm: None }, [a.mr.sge(0, 300)]);
        long.inline = true;
        let r =
            a.qp.post_send([inline_send(&a.mr, 20), long, inline_send(&a.mr, 22)]);
        assert!(
            matches!(
                r,
                Err(weft_verbs::Error::PostList {
                    index: 1,
                    error: weft_transport::PostError::InlineTooLarge
                })
            ),
            "{progress:?}: {r:?}"
        );
        // Only the first of each list was posted: one SEND, into receive 0.
        let ca = ok_driving(&mut a.cq, 1, &[&b.ctx]);
        assert_eq!(ca[0].wr_id, 20, "{progress:?}");
        let cb = ok_driving(&mut b.cq, 1, &[&a.ctx]);
        assert_eq!(cb[0].wr_id, 0, "{progress:?}");
        // Nothing else is queued: a second SEND finds no receive (RNR), so the
        // sender's queue holds it; one more receive lets it through.
        a.qp.post_send([inline_send(&a.mr, 23)]).unwrap();
        b.qp.post_recv(slot_recvs(&b.mr, 2).skip(1)).unwrap();
        let ca = ok_driving(&mut a.cq, 1, &[&b.ctx]);
        assert_eq!(ca[0].wr_id, 23, "{progress:?}");
        let cb = ok_driving(&mut b.cq, 1, &[&a.ctx]);
        assert_eq!(cb[0].wr_id, 1, "{progress:?}");
    }
}

/// With inline progress a poll that finds its queue empty runs the pass, and that
/// pass puts the queue's completions straight into the poll's vector while it has
/// room; the rest take the ring. Polled three at a time, 40 receives still arrive
/// once each and in order, some each way.
#[test]
fn a_polls_own_pass_hands_over_straight_and_the_ring_keeps_the_rest_in_order() {
    let (mut a, mut b) = pair(LinkKind::Shm, Progress::Inline, QpType::Rc, 1 << 16);
    let n = 40u64;
    b.qp.post_recv((0..n).map(|i| RecvWr {
        wr_id: i,
        sg_list: [b.mr.sge(i as usize * 64, 64)].into(),
    }))
    .unwrap();
    a.qp.post_send((0..n).map(|i| {
        let mut s = SendWr::new(i, WrOp::Send { imm: None }, vec![a.mr.sge(0, 8)]);
        s.inline = true;
        s
    }))
    .unwrap();
    // All 40 on the link before b looks, so b's first pass receives them together.
    a.ctx.progress();
    let deadline = std::time::Instant::now() + T;
    let mut got = Vec::new();
    while (got.len() as u64) < n && std::time::Instant::now() < deadline {
        let before = got.len();
        let k = b.cq.poll(&mut got, 3);
        assert!(
            k <= 3 && got.len() == before + k,
            "a poll takes at most its max"
        );
        a.ctx.progress();
    }
    let ids: Vec<u64> = got.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
    let direct = b.ctx.stats().engine.cq_direct;
    assert!(
        direct > 0 && direct < n,
        "some straight, some through the ring: {direct}"
    );
    ok_driving(&mut a.cq, n as usize, &[&b.ctx]);
}

/// A queue armed on a channel still fires it when a poll's own pass completes into
/// it: the completion then takes the ring (which publishes and fires), and the poll
/// still returns it.
#[test]
fn an_armed_queue_fires_its_channel_when_its_own_poll_runs_the_pass() {
    let (ch, mut a, mut b) = channel_pair();
    b.qp.post_recv([RecvWr {
        wr_id: 5,
        sg_list: [b.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    b.cq.req_notify();
    let mut s = SendWr::new(1, WrOp::Send { imm: None }, vec![a.mr.sge(0, 8)]);
    s.inline = true;
    a.qp.post_send([s]).unwrap();
    a.ctx.progress();
    let got = collect(&mut b.cq, 1, &[&a.ctx]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].wr_id, 5);
    assert_eq!(
        ch.get_cq_event(std::time::Duration::ZERO).ok(),
        Some(b.cq.id()),
        "the armed queue's channel fired"
    );
    ok_driving(&mut a.cq, 1, &[&b.ctx]);
}

/// A connected RC pair over shm (inline progress) whose receiver `b` completes into a
/// queue on the returned channel.
fn channel_pair() -> (weft_verbs::CompletionChannel, Side, Side) {
    let ctx = device(LinkKind::Shm, Progress::Inline);
    let ch = weft_verbs::CompletionChannel::new(&ctx).unwrap();
    let cq = weft_verbs::CompletionQueue::new(&ctx, 64, Some(&ch));
    let b = side_with_cq(ctx, cq, QpType::Rc, 1 << 12);
    let a = side(LinkKind::Shm, Progress::Inline, QpType::Rc, 1 << 12);
    let (a, b) = connect_sides(a, b, &weft_verbs::cm::ConnParam::default());
    (ch, a, b)
}

/// A completion channel's descriptor reads ready while an event waits, and a look
/// that finds none leaves it quiet: a program that watches it in its own epoll set and
/// takes events without blocking (UCX's async thread, `ibv_get_cq_event` on an
/// `O_NONBLOCK` channel) must not find it readable for good, or its loop spins.
#[test]
fn a_channel_reads_ready_while_an_event_waits_and_goes_quiet_on_a_miss() {
    use std::os::fd::AsFd;
    let readable = |ch: &weft_verbs::CompletionChannel| {
        weft_link::wake::poll_readable(&[ch.as_fd()], std::time::Duration::ZERO).unwrap() & 1 != 0
    };
    let (ch, mut a, mut b) = channel_pair();
    assert!(!readable(&ch), "readable before any event");
    // Two events queued (the queue re-armed after the first fired), then taken one at
    // a time.
    for wr_id in [5, 6] {
        b.qp.post_recv([RecvWr {
            wr_id,
            sg_list: [b.mr.sge(0, 64)].into(),
        }])
        .unwrap();
        b.cq.req_notify();
        let mut s = SendWr::new(wr_id, WrOp::Send { imm: None }, vec![a.mr.sge(0, 8)]);
        s.inline = true;
        a.qp.post_send([s]).unwrap();
        a.ctx.progress();
        let got = collect(&mut b.cq, 1, &[&a.ctx]);
        assert_eq!(got[0].wr_id, wr_id);
        assert!(
            readable(&ch),
            "an event waits, the descriptor must be readable"
        );
    }
    for _ in 0..2 {
        assert_eq!(
            ch.get_cq_event(std::time::Duration::ZERO).ok(),
            Some(b.cq.id())
        );
    }
    // Takes do not drain (a system call per event); the look that finds none does.
    assert!(ch.get_cq_event(std::time::Duration::ZERO).is_err());
    assert!(!readable(&ch), "a miss must leave it quiet");
    // A stray count with no event (a write by the program; or an event announced
    // after its taker emptied the queue): the next look settles it, waiting or not.
    let poke = || {
        use std::io::Write;
        let mut f = std::fs::File::from(ch.as_fd().try_clone_to_owned().unwrap());
        f.write_all(&1u64.to_ne_bytes()).unwrap();
        assert!(readable(&ch));
    };
    poke();
    assert!(ch.get_cq_event(std::time::Duration::ZERO).is_err());
    assert!(
        !readable(&ch),
        "a look without waiting must settle a stray count"
    );
    poke();
    assert!(ch
        .get_cq_event(std::time::Duration::from_millis(20))
        .is_err());
    assert!(!readable(&ch), "a wait must settle a stray count");
    ok_driving(&mut a.cq, 2, &[&b.ctx]);
}

/// Two threads blocked on one channel under thread progress, one event: exactly one
/// of them takes it, the other's wait ends in its timeout, and the descriptor is quiet
/// after (the taker drained it; a woken loser settles nothing left).
#[test]
fn two_waiters_on_one_channel_share_one_event_and_leave_it_quiet() {
    use std::os::fd::AsFd;
    use std::time::Duration;
    let ctx = device(LinkKind::Shm, Progress::Thread);
    let ch = weft_verbs::CompletionChannel::new(&ctx).unwrap();
    let cq = weft_verbs::CompletionQueue::new(&ctx, 64, Some(&ch));
    let b = side_with_cq(ctx, cq, QpType::Rc, 1 << 12);
    let a = side(LinkKind::Shm, Progress::Thread, QpType::Rc, 1 << 12);
    let (mut a, mut b) = connect_sides(a, b, &weft_verbs::cm::ConnParam::default());
    b.qp.post_recv([RecvWr {
        wr_id: 7,
        sg_list: [b.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    b.cq.req_notify();
    let got = std::thread::scope(|s| {
        let waiters: Vec<_> = (0..2)
            .map(|_| s.spawn(|| ch.get_cq_event(Duration::from_millis(300)).ok()))
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        let mut m = SendWr::new(7, WrOp::Send { imm: None }, vec![a.mr.sge(0, 8)]);
        m.inline = true;
        a.qp.post_send([m]).unwrap();
        waiters
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect::<Vec<_>>()
    });
    let ids: Vec<u32> = got.iter().flatten().copied().collect();
    assert_eq!(
        ids,
        vec![b.cq.id()],
        "exactly one waiter takes the one event"
    );
    assert_eq!(
        weft_link::wake::poll_readable(&[ch.as_fd()], Duration::ZERO).unwrap() & 1,
        0,
        "the descriptor must be quiet with no event left"
    );
    let got = collect(&mut b.cq, 1, &[]);
    assert_eq!(got[0].wr_id, 7);
    ok_driving(&mut a.cq, 1, &[]);
}
