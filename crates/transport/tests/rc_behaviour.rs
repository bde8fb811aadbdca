//! RC behaviour that is not about errors: the AckReq policy and ACK coalescing, the
//! selective mode resending only holes (WRITE and READ), fences, inline data,
//! unsignaled completions, the message length limit, and fair scheduling across QPs.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, LinkConfig, Pair, Seen, Side};
use weft_transport::{Config, Mtu, QpType, Recovery, Region, SendWr, Sge, WcStatus, WrOp};

const MEM: u64 = 4 << 20;

fn pair(config: Config) -> Pair {
    Pair::new(
        config,
        MEM as usize,
        LinkConfig::clean(5),
        LinkConfig::clean(5),
        3,
    )
}

#[test]
fn ack_req_every_interval_and_coalesced_acks() {
    let mut p = pair(Config::default());
    let o = ConnectOptions {
        mtu: Mtu::M256,
        max_inflight: 1024,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    // One WRITE of 64 packets: AckReq on every 16th PSN and the last, so at most 5 ACKs.
    let wr = SendWr::new(
        1,
        WrOp::Write {
            remote: remote(&rb, rb.addr),
            imm: None,
        },
        vec![sge(&ra, ra.addr, 64 * 256)],
    );
    p.a.post_send(c.qpn_a, wr).unwrap();
    settle(&mut p, 100_000);
    assert_eq!(completions(&mut p, Side::A)[0].status, WcStatus::Success);
    let acks = p.b.stats().acks_sent;
    assert!(
        (1..=5).contains(&acks),
        "{acks} ACKs for one 64-packet WRITE"
    );
    // 200 one-packet WRITEs posted at once: each asks for an ACK, and the responder
    // answers all that arrived together with one.
    for i in 0..200 {
        let wr = SendWr::new(
            i,
            WrOp::Write {
                remote: remote(&rb, rb.addr + i * 8),
                imm: None,
            },
            vec![sge(&ra, ra.addr, 8)],
        );
        p.a.post_send(c.qpn_a, wr).unwrap();
    }
    settle(&mut p, 100_000);
    assert_eq!(completions(&mut p, Side::A).len(), 200);
    let acks = p.b.stats().acks_sent - acks;
    assert!(acks < 200 && acks > 0, "{acks} ACKs for 200 messages");
}

/// Drop one chosen request packet of a 32-packet WRITE.
fn one_loss_write(recovery: Recovery) -> (u64, u64, u64) {
    let mut p = pair(Config::default());
    let o = ConnectOptions {
        mtu: Mtu::M1024,
        recovery,
        max_inflight: 64,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    let data = pattern(5, 32 * 1024);
    p.a.mem_mut().fill(ra.addr, &data);
    p.ab.drop_nth.insert(5);
    let wr = SendWr::new(
        1,
        WrOp::Write {
            remote: remote(&rb, rb.addr),
            imm: None,
        },
        vec![sge(&ra, ra.addr, 32 * 1024)],
    );
    p.a.post_send(c.qpn_a, wr).unwrap();
    settle(&mut p, 1_000_000);
    assert_eq!(completions(&mut p, Side::A)[0].status, WcStatus::Success);
    assert_eq!(p.b.mem().bytes(rb.addr, data.len()), data.as_slice());
    // Every WRITE packet that arrived ahead of the hole was placed on arrival.
    assert_eq!(
        p.b.stats().placed_out_of_order,
        if recovery == Recovery::Selective {
            p.b.stats().out_of_sequence
        } else {
            0
        }
    );
    (
        p.a.stats().retransmitted_packets,
        p.a.stats().timeouts,
        p.b.stats().placed_out_of_order,
    )
}

#[test]
fn selective_resends_only_the_hole() {
    let (sel, sel_timeouts, placed) = one_loss_write(Recovery::Selective);
    let (gbn, _, _) = one_loss_write(Recovery::GoBackN);
    // Packets behind the hole went straight to their addresses until the resent one
    // arrived (one round trip, while the rest of the 32 were still on the wire).
    assert!(placed >= 10, "{placed}");
    assert_eq!(sel, 1, "selective resent {sel} packets for one loss");
    assert_eq!(sel_timeouts, 0);
    // Go-back-N resends the lost packet and everything after it that was in flight.
    assert!(gbn >= 10, "go-back-N resent only {gbn}");
}

#[test]
fn selective_read_places_out_of_order_and_asks_for_the_hole_only() {
    let mut p = pair(Config::default());
    let o = ConnectOptions {
        mtu: Mtu::M1024,
        recovery: Recovery::Selective,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    let data = pattern(6, 24 * 1024);
    p.b.mem_mut().fill(rb.addr, &data);
    // B -> A carries the 24 READ responses; lose the 7th.
    p.ba.drop_nth.insert(7);
    let wr = SendWr::new(
        1,
        WrOp::Read {
            remote: remote(&rb, rb.addr),
        },
        vec![sge(&ra, ra.addr, 24 * 1024)],
    );
    p.a.post_send(c.qpn_a, wr).unwrap();
    // A later WRITE makes B's ACK reveal the hole without a timeout.
    let w2 = SendWr::new(
        2,
        WrOp::Write {
            remote: remote(&rb, rb.addr + 100_000),
            imm: None,
        },
        vec![sge(&ra, ra.addr + 100_000, 8)],
    );
    p.a.post_send(c.qpn_a, w2).unwrap();
    settle(&mut p, 1_000_000);
    let ca = completions(&mut p, Side::A);
    assert_eq!(
        ca.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(p.a.mem().bytes(ra.addr, data.len()), data.as_slice());
    assert_eq!(p.b.stats().read_responses_sent, 25, "one response resent");
    assert_eq!(
        p.a.stats().retransmitted_packets,
        1,
        "one single-packet READ request"
    );
}

#[test]
fn fence_waits_for_the_read() {
    let mut p = pair(Config::default());
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    let data = pattern(7, 3000);
    p.b.mem_mut().fill(rb.addr, &data);
    p.a.mem_mut().fill(ra.addr, &[0u8; 3000]);
    p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr + 10_000, 4096)]))
        .unwrap();
    // READ into L, then SEND from L: only the fence makes the SEND carry the READ data.
    p.a.post_send(
        c.qpn_a,
        SendWr::new(
            1,
            WrOp::Read {
                remote: remote(&rb, rb.addr),
            },
            vec![sge(&ra, ra.addr, 3000)],
        ),
    )
    .unwrap();
    let mut s = send(2, vec![sge(&ra, ra.addr, 3000)]);
    s.fence = true;
    p.a.post_send(c.qpn_a, s).unwrap();
    settle(&mut p, 100_000);
    assert_eq!(completions(&mut p, Side::B)[0].byte_len, 3000);
    assert_eq!(p.b.mem().bytes(rb.addr + 10_000, 3000), data.as_slice());
}

#[test]
fn inline_data_is_captured_at_post_and_unsignaled_sends_stay_silent() {
    let mut p = pair(Config::default());
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    p.a.mem_mut().fill(ra.addr, b"original");
    p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr, 64)]))
        .unwrap();
    let mut s = send(1, vec![sge(&ra, ra.addr, 8)]);
    s.inline = true;
    s.signaled = false;
    p.a.post_send(c.qpn_a, s).unwrap();
    p.a.mem_mut().fill(ra.addr, b"CHANGED!");
    let mut w = SendWr::new(
        2,
        WrOp::Write {
            remote: remote(&rb, rb.addr + 64),
            imm: None,
        },
        vec![sge(&ra, ra.addr, 8)],
    );
    w.signaled = true;
    p.a.post_send(c.qpn_a, w).unwrap();
    settle(&mut p, 100_000);
    assert_eq!(p.b.mem().bytes(rb.addr, 8), b"original");
    assert_eq!(p.b.mem().bytes(rb.addr + 64, 8), b"CHANGED!");
    let ca = completions(&mut p, Side::A);
    assert_eq!(ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![2]);
}

/// Inline payloads live in the requester's byte ring from post to retirement: many
/// inline SENDs of varied lengths (one and several packets), gathered by the transport
/// or handed over pre-gathered, mixed with SENDs from registered memory, over a lossy
/// link (so packets are built again from the ring after later posts), arrive byte for
/// byte while the ring wraps many times.
#[test]
fn inline_payloads_survive_the_ring_wrapping_and_retransmission() {
    let config = Config {
        max_inline: 700,
        ..Config::default()
    };
    let mut p = Pair::new(
        config,
        MEM as usize,
        LinkConfig::clean(5).with_loss(0.05),
        LinkConfig::clean(5).with_loss(0.05),
        11,
    );
    let o = ConnectOptions {
        mtu: Mtu::M256,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    const N: u64 = 300;
    const SLOT: u64 = 1024;
    let len_of = |k: u64| (k * 37 % 700 + 1) as usize;
    for k in 0..N {
        p.b.post_recv(
            c.qpn_b,
            recv(k, vec![sge(&rb, rb.addr + k * SLOT, SLOT as u32)]),
        )
        .unwrap();
    }
    let mut k = 0;
    while k < N {
        // A window of up to 8 posts, then let the link carry them.
        for _ in 0..8.min(N - k) {
            let data = pattern(k, len_of(k));
            let src = ra.addr + k * SLOT;
            p.a.mem_mut().fill(src, &data);
            let mut s = send(k, vec![sge(&ra, src, data.len() as u32)]);
            match k % 3 {
                0 => {
                    s.inline = true;
                    p.a.post_send(c.qpn_a, s).unwrap();
                    // Captured at post: changing the source now must not show.
                    p.a.mem_mut().fill(src, &vec![0xee; data.len()]);
                }
                1 => p.a.post_send_inline(c.qpn_a, s, &data).unwrap(),
                _ => p.a.post_send(c.qpn_a, s).unwrap(),
            }
            k += 1;
        }
        settle(&mut p, 10_000_000);
    }
    let ca = completions(&mut p, Side::A);
    assert_eq!(ca.len() as u64, N);
    assert!(ca.iter().all(|c| c.status == WcStatus::Success));
    let cb = completions(&mut p, Side::B);
    assert_eq!(cb.len() as u64, N);
    for c in &cb {
        let k = c.wr_id;
        assert_eq!(c.byte_len as usize, len_of(k), "message {k}");
        assert_eq!(
            p.b.mem().bytes(rb.addr + k * SLOT, len_of(k)),
            &pattern(k, len_of(k))[..],
            "message {k}"
        );
    }
    assert!(
        p.a.stats().retransmitted_packets > 0,
        "the link lost nothing"
    );
}

#[test]
fn pre_gathered_inline_data_is_sent_without_touching_registered_memory() {
    let mut p = pair(Config::default());
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let (_, rb) = big_regions(&mut p, MEM);
    p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr, 64)]))
        .unwrap();
    // The SGE list names a key that does not exist: it must be ignored.
    let bogus = Sge {
        addr: 0,
        len: 999,
        lkey: 0xdead_beef,
    };
    p.a.post_send_inline(c.qpn_a, send(7, vec![bogus]), b"gathered")
        .unwrap();
    let too_big = vec![0u8; Config::default().max_inline + 1];
    assert_eq!(
        p.a.post_send_inline(c.qpn_a, send(8, vec![]), &too_big),
        Err(weft_transport::PostError::InlineTooLarge)
    );
    settle(&mut p, 100_000);
    assert_eq!(p.b.mem().bytes(rb.addr, 8), b"gathered");
    let cb = completions(&mut p, Side::B);
    assert_eq!((cb[0].wr_id, cb[0].byte_len), (1, 8));
    let ca = completions(&mut p, Side::A);
    assert_eq!((ca[0].wr_id, ca[0].status), (7, WcStatus::Success));
}

#[test]
fn message_length_limit_is_configurable() {
    let mut p = pair(Config {
        max_msg_len: 4096,
        ..Config::default()
    });
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let (ra, _) = big_regions(&mut p, MEM);
    p.a.post_send(c.qpn_a, send(1, vec![sge(&ra, ra.addr, 4097)]))
        .unwrap();
    let ca = wait_completions(&mut p, Side::A, 1, 10_000);
    assert_eq!(ca[0].status, WcStatus::LocLenErr);
}

/// Drive `p` (for at most one simulated second) until each `(side, wr_id)` of `want`
/// completed; when each did. Every completion of either side must succeed.
fn completed_at<const N: usize>(
    p: &mut Pair,
    want: [(Side, u64); N],
) -> [weft_transport::Instant; N] {
    let mut at = [None; N];
    let deadline = weft_transport::Instant(p.now.micros() + 1_000_000);
    p.drive(deadline, |p| {
        for side in [Side::A, Side::B] {
            let ep = match side {
                Side::A => &mut p.a,
                Side::B => &mut p.b,
            };
            while let Some(c) = ep.poll_completion() {
                assert_eq!(c.status, WcStatus::Success, "{side:?}: {c:?}");
                for (i, w) in want.iter().enumerate() {
                    if *w == (side, c.wr_id) {
                        at[i] = Some(p.now);
                    }
                }
            }
        }
        at.iter().all(Option::is_some)
    });
    at.map(|t| t.expect("completed within a simulated second"))
}

#[test]
fn small_messages_are_not_starved_by_a_bulk_transfer() {
    let mut p = pair(Config::default());
    let o = ConnectOptions {
        mtu: Mtu::M4096,
        max_inflight: 1024,
        ..ConnectOptions::default()
    };
    let bulk = p.connect(QpType::Rc, &o);
    let small = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    // 2 MiB WRITE first, then 20 small WRITEs on another QP.
    let to = remote(&rb, rb.addr);
    p.a.post_send(bulk.qpn_a, write(1, to, vec![sge(&ra, ra.addr, 2 << 20)]))
        .unwrap();
    for i in 0..20 {
        let to = remote(&rb, rb.addr + (3 << 20) + i * 64);
        p.a.post_send(small.qpn_a, write(100 + i, to, vec![sge(&ra, ra.addr, 64)]))
            .unwrap();
    }
    let [s, b] = completed_at(&mut p, [(Side::A, 119), (Side::A, 1)]);
    // The bulk transfer takes ≈ 1.7 ms at 10 Gbit/s; the small ones finish within a
    // small fraction of it.
    assert!(
        s.micros() * 10 < b.micros(),
        "small done at {s:?}, bulk at {b:?}"
    );
}

/// With a quantum no QP uses up (the study's FIFO scheduler), a bulk WRITE whose
/// window keeps opening holds the round robin's turn for as long as it has data. The
/// ACKs its endpoint owes for another QP's incoming SENDs must not wait behind it:
/// they go ahead of the turns, so the peer's SENDs complete long before the bulk
/// transfer, and the peer's requester never times out (a wait past its retry count
/// ended the study's Fig. 5 FIFO point with `RetryExcErr`).
#[test]
fn acks_do_not_wait_behind_another_qps_turn() {
    let fifo = Config {
        drr_quantum: u32::MAX,
        ..Config::default()
    };
    let mut p = pair(fifo);
    let o = ConnectOptions {
        mtu: Mtu::M4096,
        max_inflight: 1024,
        ..ConnectOptions::default()
    };
    let bulk = p.connect(QpType::Rc, &o);
    let small = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    for i in 0..20 {
        p.a.post_recv(
            small.qpn_a,
            recv(200 + i, vec![sge(&ra, ra.addr + (3 << 20) + i * 64, 64)]),
        )
        .unwrap();
    }
    let to = remote(&rb, rb.addr);
    p.a.post_send(bulk.qpn_a, write(1, to, vec![sge(&ra, ra.addr, 3 << 20)]))
        .unwrap();
    // Let the bulk transfer take the turn first, then B sends to A's other QP.
    p.step();
    for i in 0..20 {
        p.b.post_send(
            small.qpn_b,
            send(100 + i, vec![sge(&rb, rb.addr + (3 << 20), 64)]),
        )
        .unwrap();
    }
    let [s, b] = completed_at(&mut p, [(Side::B, 119), (Side::A, 1)]);
    assert!(
        s.micros() * 10 < b.micros(),
        "B's SENDs completed at {s:?}, A's bulk WRITE at {b:?}"
    );
    assert_eq!(p.b.stats().timeouts, 0);
    assert_eq!(p.b.stats().retransmitted_packets, 0);
}

#[test]
fn sqd_finishes_what_started_and_starts_nothing_new() {
    use weft_transport::{QpAttr, QpState};
    let mut p = pair(Config::default());
    let o = ConnectOptions {
        mtu: Mtu::M1024,
        max_inflight: 1024,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    let w = |id: u64, off: u64| {
        SendWr::new(
            id,
            WrOp::Write {
                remote: remote(&rb, rb.addr + off),
                imm: None,
            },
            vec![sge(&ra, ra.addr, 64 * 1024)],
        )
    };
    p.a.post_send(c.qpn_a, w(1, 0)).unwrap();
    // Let the first WRITE start, then drain the send queue.
    p.step();
    p.a.modify_qp(
        c.qpn_a,
        &QpAttr {
            state: Some(QpState::Sqd),
            ..QpAttr::default()
        },
    )
    .unwrap();
    p.a.post_send(c.qpn_a, w(2, 1 << 20)).unwrap();
    settle(&mut p, 100_000);
    let done: Vec<_> = completions(&mut p, Side::A)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(done, vec![(1, WcStatus::Success)]);
    // Back to RTS: the second one goes.
    p.a.modify_qp(
        c.qpn_a,
        &QpAttr {
            state: Some(QpState::Rts),
            ..QpAttr::default()
        },
    )
    .unwrap();
    settle(&mut p, 100_000);
    let done: Vec<_> = completions(&mut p, Side::A)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(done, vec![(2, WcStatus::Success)]);
}

/// BTH opcodes (the first byte of an IB packet): RC SEND Only and RC Acknowledge.
const RC_SEND_ONLY: u8 = 0x04;
const RC_ACK: u8 = 0x11;

/// The opcodes of everything `side` transmits now, in order (nothing delivered).
fn transmit_opcodes(p: &mut Pair, side: Side) -> Vec<(u8, weft_wire::roce::IcrcPath, Vec<u8>)> {
    let now = p.now;
    let mut buf = vec![0u8; 8192];
    std::iter::from_fn(|| {
        let t = p.ep(side).poll_transmit(now, &mut buf)?;
        Some((buf[0], t.path, buf[..t.len].to_vec()))
    })
    .take(64)
    .collect()
}

/// A request-reply exchange: B owes A an ACK for A's SEND when B's application posts
/// its replies. The first reply packet goes ahead of the ACK (so a segmentation-
/// offload link sends both as one run), and the ACK follows at once, before any
/// further request packet, however many replies are queued.
#[test]
fn a_lone_ack_waits_behind_one_request_packet_at_most() {
    for replies in 0..4u64 {
        let mut p = pair(Config::default());
        let c = p.connect(QpType::Rc, &ConnectOptions::default());
        let (ra, rb) = big_regions(&mut p, MEM);
        p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr, 64)]))
            .unwrap();
        for i in 0..replies {
            p.a.post_recv(
                c.qpn_a,
                recv(10 + i, vec![sge(&ra, ra.addr + 4096 * (i + 1), 64)]),
            )
            .unwrap();
        }
        p.a.post_send(c.qpn_a, send(1, vec![sge(&ra, ra.addr, 64)]))
            .unwrap();
        let sent = transmit_opcodes(&mut p, Side::A);
        assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), [RC_SEND_ONLY]);
        let now = p.now;
        for (_, path, bytes) in &sent {
            p.b.handle_packet(now, path, bytes);
        }
        for i in 0..replies {
            p.b.post_send(c.qpn_b, send(20 + i, vec![sge(&rb, rb.addr + 64, 64)]))
                .unwrap();
        }
        let out = transmit_opcodes(&mut p, Side::B);
        let mut want = Vec::new();
        if replies > 0 {
            want.push(RC_SEND_ONLY);
        }
        want.push(RC_ACK);
        want.extend((1..replies).map(|_| RC_SEND_ONLY));
        assert_eq!(
            out.iter().map(|s| s.0).collect::<Vec<_>>(),
            want,
            "{replies} replies"
        );
        // Delivered, everything completes: A's SEND by that ACK, B's replies by A's.
        let now = p.now;
        for (_, path, bytes) in &out {
            p.a.handle_packet(now, path, bytes);
        }
        settle(&mut p, 1_000_000);
        let ca = completions(&mut p, Side::A);
        let cb = completions(&mut p, Side::B);
        assert_eq!(ca.len() as u64, 1 + replies, "{replies} replies: {ca:?}");
        assert_eq!(cb.len() as u64, 1 + replies, "{replies} replies: {cb:?}");
        assert!(ca.iter().chain(&cb).all(|c| c.status == WcStatus::Success));
    }
}

/// Drive until `side` completes receive `wr_id` (or 10 simulated seconds pass),
/// keeping every send completion of either side in `sends`; the receive's status.
fn wait_recv(
    p: &mut Pair,
    side: Side,
    wr_id: u64,
    sends: &mut [Vec<(u64, WcStatus)>; 2],
) -> Option<WcStatus> {
    let deadline = weft_transport::Instant(p.now.micros() + 10_000_000);
    let mut got = None;
    p.drive(deadline, |p| {
        for (i, s) in [Side::A, Side::B].into_iter().enumerate() {
            while let Some(c) = p.ep(s).poll_completion() {
                if c.opcode.is_recv() {
                    if s == side && c.wr_id == wr_id {
                        got = Some(c.status);
                    }
                } else {
                    sends[i].push((c.wr_id, c.status));
                }
            }
        }
        got.is_some()
    });
    got
}

/// Ping-pong over lossy links in both directions (seeded): each side's reply goes
/// ahead of its ACK, and the retransmission timers still recover every loss, so every
/// SEND arrives, in order, with its data, and every signaled one (a third) completes
/// on its sender. With a local ACK timeout of 14 (67 ms) the unsignaled SENDs leave
/// AckReq clear and are acknowledged by delayed ACKs, lost ones included.
#[test]
fn ping_pong_under_loss_completes_every_request() {
    for (seed, timeout) in (1..=4u64).flat_map(|s| [(s, 5u8), (s, 14)]) {
        let mut p = Pair::new(
            Config::default(),
            MEM as usize,
            LinkConfig::clean(5).with_loss(0.1),
            LinkConfig::clean(5).with_loss(0.1),
            seed,
        );
        let o = ConnectOptions {
            timeout,
            ..ConnectOptions::default()
        };
        let c = p.connect(QpType::Rc, &o);
        let (ra, rb) = big_regions(&mut p, MEM);
        let rounds = 100u64;
        let mut sends = [Vec::new(), Vec::new()];
        for r in 0..rounds {
            let ping = pattern(2 * r, 64);
            let pong = pattern(2 * r + 1, 64);
            p.a.mem_mut().fill(ra.addr, &ping);
            p.b.post_recv(c.qpn_b, recv(r, vec![sge(&rb, rb.addr + 4096, 64)]))
                .unwrap();
            p.a.post_recv(c.qpn_a, recv(r, vec![sge(&ra, ra.addr + 4096, 64)]))
                .unwrap();
            let mut s = send(r, vec![sge(&ra, ra.addr, 64)]);
            s.signaled = r % 3 == 0;
            p.a.post_send(c.qpn_a, s).unwrap();
            let got = wait_recv(&mut p, Side::B, r, &mut sends);
            assert_eq!(got, Some(WcStatus::Success), "seed {seed} round {r}: ping");
            assert_eq!(p.b.mem().bytes(rb.addr + 4096, 64), &ping[..]);
            p.b.mem_mut().fill(rb.addr, &pong);
            let mut s = send(r, vec![sge(&rb, rb.addr, 64)]);
            s.signaled = r % 3 == 0;
            p.b.post_send(c.qpn_b, s).unwrap();
            let got = wait_recv(&mut p, Side::A, r, &mut sends);
            assert_eq!(got, Some(WcStatus::Success), "seed {seed} round {r}: pong");
            assert_eq!(p.a.mem().bytes(ra.addr + 4096, 64), &pong[..]);
        }
        settle(&mut p, 10_000_000);
        for (i, side) in [Side::A, Side::B].into_iter().enumerate() {
            sends[i].extend(
                completions(&mut p, side)
                    .iter()
                    .map(|c| (c.wr_id, c.status)),
            );
            assert_eq!(
                sends[i],
                (0..rounds)
                    .filter(|r| r % 3 == 0)
                    .map(|r| (r, WcStatus::Success))
                    .collect::<Vec<_>>(),
                "seed {seed}: side {side:?}'s SENDs"
            );
        }
        assert!(
            p.ab.stats.lost > 0 && p.ba.stats.lost > 0,
            "seed {seed}: no loss"
        );
        assert!(
            p.a.is_idle() && p.b.is_idle(),
            "seed {seed}: every WQE retired"
        );
    }
}

/// BTH fields of a packet: opcode, AckReq, PSN (24 bits).
fn bth(bytes: &[u8]) -> (u8, bool, u32) {
    let psn = u32::from_be_bytes([0, bytes[9], bytes[10], bytes[11]]);
    (bytes[0], bytes[8] & 0x80 != 0, psn)
}

/// What the driver below saw: when B received each request PSN, and each ACK B sent
/// (time, PSN acknowledged through).
#[derive(Default)]
struct AckLog {
    arrivals: Vec<(u64, u32)>,
    acks: Vec<(u64, u32)>,
    asked: u64,
    unasked: u64,
}

/// Run the pair until virtual time `until` (µs), recording A's requests (AckReq or
/// not), B's arrivals and B's ACKs.
fn run_logged(p: &mut Pair, log: &mut AckLog, until: u64) {
    let mut seen = |s: Seen<'_>| match s {
        Seen::Sent {
            from: Side::A,
            bytes,
            ..
        } => {
            if bth(bytes).1 {
                log.asked += 1;
            } else {
                log.unasked += 1;
            }
        }
        Seen::Sent {
            from: Side::B,
            now,
            bytes,
        } => {
            let (op, _, psn) = bth(bytes);
            assert_eq!(op, RC_ACK, "B only acknowledges");
            log.acks.push((now.micros(), psn));
        }
        Seen::Arrived {
            to: Side::B,
            now,
            bytes,
        } => log.arrivals.push((now.micros(), bth(bytes).2)),
        Seen::Arrived { to: Side::A, .. } => {}
    };
    let end = weft_transport::Instant(until);
    while p.now < end && p.step_with(Some(end), &mut seen) {}
}

/// Unsignaled SENDs with a local ACK timeout far above the delayed-ACK bound: they go
/// without AckReq (but every `ack_req_interval`-th PSN and the signaled ones ask),
/// B acknowledges each within `ack_delay_us` of its arrival (never later), one ACK
/// covers several messages, and every WQE retires without a timeout or a resend.
#[test]
fn delayed_acks_cover_every_unasked_message_within_the_bound() {
    for seed in 1..=3u64 {
        let config = Config::default();
        let delay = config.ack_delay_us;
        let mut p = Pair::new(
            config,
            MEM as usize,
            LinkConfig::clean(5),
            LinkConfig::clean(5),
            seed,
        );
        let o = ConnectOptions {
            timeout: 14,
            psn_a: 0,
            depth: 1024,
            ..ConnectOptions::default()
        };
        let c = p.connect(QpType::Rc, &o);
        let (ra, rb) = big_regions(&mut p, MEM);
        let msgs = 300u64;
        for i in 0..msgs {
            p.b.post_recv(c.qpn_b, recv(i, vec![sge(&rb, rb.addr, 64)]))
                .unwrap();
        }
        let mut rng = weft_transport::sim::Rng::new(seed);
        let mut log = AckLog::default();
        let mut signaled = 0;
        for i in 0..msgs {
            let mut s = send(i, vec![sge(&ra, ra.addr, 64)]);
            s.signaled = rng.chance(0.2);
            signaled += u64::from(s.signaled);
            p.a.post_send(c.qpn_a, s).unwrap();
            // Gaps of 0-40 µs, some of them longer than the delay.
            let longest = if rng.chance(0.1) { 200 } else { 40 };
            let until = p.now.micros() + rng.range(0, longest);
            run_logged(&mut p, &mut log, until);
        }
        let end = p.now.micros() + 100_000;
        run_logged(&mut p, &mut log, end);
        assert!(p.a.is_idle(), "seed {seed}: every WQE retired");
        let ca = completions(&mut p, Side::A);
        assert_eq!(ca.len() as u64, signaled, "seed {seed}");
        assert!(ca.iter().all(|c| c.status == WcStatus::Success));
        assert_eq!(completions(&mut p, Side::B).len() as u64, msgs);
        assert_eq!(p.a.stats().timeouts, 0, "seed {seed}");
        assert_eq!(p.a.stats().retransmitted_packets, 0, "seed {seed}");
        assert_eq!(log.arrivals.len() as u64, msgs);
        assert!(
            log.unasked > msgs / 2,
            "seed {seed}: {} unasked",
            log.unasked
        );
        // The bound: each arrival is covered by an ACK sent at most `delay` later.
        for &(t, psn) in &log.arrivals {
            let acked = log
                .acks
                .iter()
                .find(|&&(at, through)| at >= t && through >= psn)
                .unwrap_or_else(|| panic!("seed {seed}: PSN {psn} never acknowledged"));
            assert!(
                acked.0 <= t + delay,
                "seed {seed}: PSN {psn} arrived at {t} µs, acknowledged at {} µs",
                acked.0
            );
        }
        assert!(
            (log.acks.len() as u64) * 4 < msgs * 3,
            "seed {seed}: {} ACKs for {msgs} messages",
            log.acks.len()
        );
    }
}

/// A pair connected with `o`, and one unsignaled 64 B SEND posted on A (not sent yet).
fn one_unsignaled_send(config: Config, o: &ConnectOptions) -> Pair {
    let mut p = pair(config);
    let c = p.connect(QpType::Rc, o);
    let (ra, _) = big_regions(&mut p, MEM);
    let mut s = send(1, vec![sge(&ra, ra.addr, 64)]);
    s.signaled = false;
    p.a.post_send(c.qpn_a, s).unwrap();
    p
}

/// Where the delayed ACK is not allowed, every message still asks: a local ACK timeout
/// shorter than the margin, a send queue at least half full, a peer whose responder
/// does not delay (`ack_delay_us` 0), or a peer that never announced its bound (Linux
/// rdma_rxe, or any peer brought up without weft's connection manager).
#[test]
fn messages_ask_for_their_ack_unless_the_delay_is_safe() {
    let asked = |config: Config, timeout: u8, depth: usize, announce_ack_delay: bool| {
        let o = ConnectOptions {
            timeout,
            depth,
            announce_ack_delay,
            ..ConnectOptions::default()
        };
        let mut p = one_unsignaled_send(config, &o);
        let out = transmit_opcodes(&mut p, Side::A);
        assert_eq!(out.len(), 1);
        bth(&out[0].2).1
    };
    let d = Config::default();
    assert!(
        !asked(d.clone(), 14, 64, true),
        "the safe case leaves AckReq clear"
    );
    assert!(
        !asked(d.clone(), 0, 64, true),
        "an infinite timeout is safe too"
    );
    assert!(asked(d.clone(), 5, 64, true), "131 µs timeout < 8 x 64 µs");
    assert!(
        asked(d.clone(), 14, 2, true),
        "one WQE fills half of a 2-deep queue"
    );
    assert!(
        asked(d.clone(), 14, 64, false),
        "a peer that never announced a delayed-ACK bound: every message asks"
    );
    let off = Config {
        ack_delay_us: 0,
        ..Config::default()
    };
    assert!(
        asked(off, 14, 64, true),
        "a peer without delayed ACK: every message asks"
    );
}

/// A responder that acknowledges only the packets that ask (Linux rxe does so) never
/// leaves a message sent without AckReq unacknowledged for good: once the local ACK
/// timeout expires, the resent packet asks.
#[test]
fn a_resent_message_always_asks_for_its_ack() {
    let o = ConnectOptions {
        timeout: 14,
        depth: 64,
        ..ConnectOptions::default()
    };
    let mut p = one_unsignaled_send(Config::default(), &o);
    let mut buf = vec![0u8; 8192];
    let t = p.a.poll_transmit(p.now, &mut buf).expect("the SEND");
    let (_, asked, psn) = bth(&buf[..t.len]);
    assert!(!asked, "the first transmission leaves AckReq clear");
    // Nothing answers: the peer acknowledges only what asks.
    let due = p.a.poll_timeout().expect("the retransmission timer");
    p.now = due;
    p.a.handle_timeout(due);
    let t = p.a.poll_transmit(due, &mut buf).expect("the resend");
    let (_, asked_again, psn_again) = bth(&buf[..t.len]);
    assert_eq!(psn_again, psn, "the same packet");
    assert!(asked_again, "the resend asks for its ACK");
    assert_eq!(p.a.stats().retransmitted_packets, 1);
}

/// A driver about to sleep asks for the ACKs its responders owe
/// (`Endpoint::ack_owed_now`): the delayed ACK of a message that did not ask for one
/// is queued at once, before its deadline, its timer entry goes (so the driver's
/// next deadline is not the ACK's), and the requester's WQE retires with no
/// timeout. Without the call the ACK waits for its deadline.
#[test]
fn owed_acks_leave_at_once_when_the_driver_asks() {
    let o = ConnectOptions {
        timeout: 14,
        depth: 64,
        ..ConnectOptions::default()
    };
    let mut p = pair(Config::default());
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr, 64)]))
        .unwrap();
    let mut s = send(1, vec![sge(&ra, ra.addr, 64)]);
    s.signaled = false;
    p.a.post_send(c.qpn_a, s).unwrap();
    // Run until B has taken the SEND.
    let mut unasked = None;
    while unasked.is_none() {
        assert!(
            p.step_with(None, &mut |s| {
                if let Seen::Arrived {
                    to: Side::B, bytes, ..
                } = s
                {
                    unasked = Some(!bth(bytes).1);
                }
            }),
            "the SEND never arrived"
        );
    }
    assert_eq!(unasked, Some(true), "the SEND left AckReq clear");
    assert_eq!(completions(&mut p, Side::B).len(), 1);
    let due = p.b.poll_timeout().expect("the delayed ACK's timer");
    assert!(due > p.now, "the ACK is not due yet");
    assert!(
        transmit_opcodes(&mut p, Side::B).is_empty(),
        "without the call the ACK waits for its deadline"
    );
    assert_eq!(p.b.ack_owed_now(p.now), 1);
    assert_eq!(p.b.poll_timeout(), None, "the ACK's timer entry is gone");
    let out = transmit_opcodes(&mut p, Side::B);
    assert_eq!(out.len(), 1, "the ACK leaves now");
    assert_eq!(out[0].0, RC_ACK);
    assert_eq!(p.b.ack_owed_now(p.now), 0, "nothing owed any more");
    // A takes the ACK: its WQE retires without its timer.
    let a = p.a.poll_timeout().expect("A's retransmission timer");
    // The link hands the packet over with the sender's path, as the simulation does.
    let (_, path, bytes) = &out[0];
    p.a.handle_packet(p.now, path, bytes);
    assert!(p.a.is_idle(), "A's WQE retired on the early ACK");
    assert!(p.a.poll_timeout().is_none_or(|t| t >= a));
    settle(&mut p, 1_000_000);
    assert_eq!(p.a.stats().timeouts, 0);
    assert_eq!(p.a.stats().retransmitted_packets, 0);
}

/// Everything `side` transmits now, through one [`Endpoint::poll_transmit_burst`]
/// (the verbs engine's path): opcode, destination QPN, PSN, path and bytes, in order.
fn transmit_burst(
    p: &mut Pair,
    side: Side,
) -> Vec<(u8, u32, u32, weft_wire::roce::IcrcPath, Vec<u8>)> {
    struct Out {
        buf: Vec<u8>,
        sent: Vec<(u8, u32, u32, weft_wire::roce::IcrcPath, Vec<u8>)>,
    }
    impl weft_transport::TxBuffers for Out {
        fn next_buffer(&mut self) -> Option<&mut [u8]> {
            (self.sent.len() < 64).then_some(&mut self.buf[..])
        }
        fn written(&mut self, t: weft_transport::Transmit) -> bool {
            let b = &self.buf[..t.len];
            let qpn = u32::from_be_bytes([0, b[5], b[6], b[7]]);
            self.sent.push((b[0], qpn, bth(b).2, t.path, b.to_vec()));
            true
        }
    }
    let mut out = Out {
        buf: vec![0; 8192],
        sent: Vec::new(),
    };
    let now = p.now;
    p.ep(side).poll_transmit_burst(now, &mut out);
    out.sent
}

/// Hand `out` (what B transmitted) to A at the pair's time.
fn deliver_to_a(p: &mut Pair, out: &[(u8, u32, u32, weft_wire::roce::IcrcPath, Vec<u8>)]) {
    for (_, _, _, path, bytes) in out {
        p.a.handle_packet(p.now, path, bytes);
    }
}

/// The pair for the ACK ride-along tests: delayed ACKs on (the default delay), and
/// `Config::ack_rides_reply` as `rides`.
fn ride_pair(rides: bool) -> Pair {
    pair(Config {
        ack_rides_reply: rides,
        ..Config::default()
    })
}

/// Connection options under which an unsignaled SEND leaves AckReq clear (a local
/// ACK timeout long enough for the peer's delay, see `Config::ack_delay_us`).
fn ride_opts() -> ConnectOptions {
    ConnectOptions {
        timeout: 14,
        depth: 64,
        ..ConnectOptions::default()
    }
}

/// A's unsignaled SEND on `c`, taken by B at `at` (µs); B owes its delayed ACK.
/// Returns the SEND's PSN.
fn unasked_send_at(p: &mut Pair, c: &weft_transport::sim::Connection, ra: &Region, at: u64) -> u32 {
    let mut s = send(1, vec![sge(ra, ra.addr, 64)]);
    s.signaled = false;
    p.a.post_send(c.qpn_a, s).unwrap();
    let sent = transmit_burst(p, Side::A);
    assert_eq!(sent.len(), 1);
    let (op, _, psn, path, bytes) = &sent[0];
    assert_eq!(*op, RC_SEND_ONLY);
    assert!(!bth(bytes).1, "the SEND leaves AckReq clear");
    p.b.handle_packet(weft_transport::Instant(at), path, bytes);
    *psn
}

/// B's application answers on `c` (one unsignaled SEND; A has a receive for it).
fn reply(p: &mut Pair, c: &weft_transport::sim::Connection, ra: &Region, rb: &Region, id: u64) {
    p.a.post_recv(c.qpn_a, recv(id, vec![sge(ra, ra.addr + 4096, 64)]))
        .unwrap();
    let mut s = send(id, vec![sge(rb, rb.addr + 64, 64)]);
    s.signaled = false;
    p.b.post_send(c.qpn_b, s).unwrap();
}

/// With `Config::ack_rides_reply`, the delayed ACK of a sparse peer's request (here
/// the QP's first) leaves right behind the reply, in the same transmit, not at its
/// deadline: the ACK is the packet after the reply, it acknowledges the request, its
/// timer entry is gone (B's next deadline is the reply's own retransmission timer),
/// and A's SEND retires on it with no timeout. Without the flag the ACK stays owed
/// and the reply leaves alone.
#[test]
fn a_reply_to_a_sparse_request_carries_its_ack_when_asked_to() {
    for rides in [true, false] {
        let mut p = ride_pair(rides);
        let c = p.connect(QpType::Rc, &ride_opts());
        let (ra, rb) = big_regions(&mut p, MEM);
        p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr, 64)]))
            .unwrap();
        let now = p.now.micros();
        let psn = unasked_send_at(&mut p, &c, &ra, now);
        let due = p.b.poll_timeout().expect("B owes the delayed ACK");
        assert!(transmit_burst(&mut p, Side::B).is_empty(), "the ACK waits");
        reply(&mut p, &c, &ra, &rb, 2);
        let out = transmit_burst(&mut p, Side::B);
        let ops: Vec<u8> = out.iter().map(|o| o.0).collect();
        if !rides {
            assert_eq!(ops, [RC_SEND_ONLY], "flag off: the reply alone");
            assert_eq!(p.b.poll_timeout(), Some(due), "the ACK is still owed");
            assert_eq!(p.b.stats().acks_with_reply, 0);
            continue;
        }
        assert_eq!(
            ops,
            [RC_SEND_ONLY, RC_ACK],
            "the reply, then its request's ACK"
        );
        assert_eq!(out[1].2, psn, "the ACK covers the SEND");
        assert_eq!(out[1].1, c.qpn_a, "to the requesting QP");
        assert_eq!(p.b.stats().acks_with_reply, 1);
        assert_eq!(p.b.stats().acks_sent, 1);
        assert!(
            p.b.poll_timeout().is_some_and(|t| t > due),
            "the ACK's timer entry is gone; the reply's own timer is later"
        );
        deliver_to_a(&mut p, &out);
        assert_eq!(
            p.a.stats().messages_completed,
            1,
            "A's SEND retired on the ACK"
        );
        settle(&mut p, 1_000_000);
        assert_eq!(p.a.stats().timeouts + p.b.stats().timeouts, 0);
        assert_eq!(p.b.stats().acks_with_reply, 1);
    }
}

/// The same through the turn of a lone QP (`Endpoint::poll_transmit_alone`, the
/// verbs engine's flush of a post): the reply is its packet, and the ACK is still
/// ready after it (`may_transmit`), the next packet the endpoint writes.
#[test]
fn a_lone_turn_leaves_the_riding_ack_ready_behind_the_reply() {
    let mut p = ride_pair(true);
    let c = p.connect(QpType::Rc, &ride_opts());
    let (ra, rb) = big_regions(&mut p, MEM);
    p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr, 64)]))
        .unwrap();
    let now = p.now.micros();
    unasked_send_at(&mut p, &c, &ra, now);
    reply(&mut p, &c, &ra, &rb, 2);
    let slot = p.b.qp_slot(c.qpn_b).unwrap();
    let mut buf = vec![0u8; 8192];
    let t =
        p.b.poll_transmit_alone(p.now, slot, &mut buf)
            .expect("the reply");
    assert_eq!(buf[0], RC_SEND_ONLY);
    assert_eq!(t.qpn, c.qpn_b);
    assert!(p.b.may_transmit(), "the ACK is ready behind it");
    let out = transmit_burst(&mut p, Side::B);
    assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), [RC_ACK]);
    assert!(!p.b.may_transmit());
}

/// A request that came within the ACK delay of its QP's previous one (a dense
/// ping-pong, a stream) leaves its ACK owed, to cover the next requests too: the
/// reply goes alone. At exactly the delay the stretch counts as quiet and the ACK
/// rides.
#[test]
fn a_dense_request_keeps_its_ack_owed_behind_the_reply() {
    let delay = Config::default().ack_delay_us;
    for (gap, rides) in [(1, false), (delay - 1, false), (delay, true)] {
        let mut p = ride_pair(true);
        let c = p.connect(QpType::Rc, &ride_opts());
        let (ra, rb) = big_regions(&mut p, MEM);
        for i in 0..2 {
            p.b.post_recv(c.qpn_b, recv(1 + i, vec![sge(&rb, rb.addr, 64)]))
                .unwrap();
        }
        // A signaled SEND first (it asks for its ACK, which leaves at once) ...
        p.a.post_send(c.qpn_a, send(1, vec![sge(&ra, ra.addr, 64)]))
            .unwrap();
        let sent = transmit_burst(&mut p, Side::A);
        let t0 = p.now.micros();
        for (_, _, _, path, bytes) in &sent {
            assert!(bth(bytes).1, "a signaled SEND asks");
            p.b.handle_packet(weft_transport::Instant(t0), path, bytes);
        }
        let acked = transmit_burst(&mut p, Side::B);
        assert_eq!(acked.iter().map(|o| o.0).collect::<Vec<_>>(), [RC_ACK]);
        deliver_to_a(&mut p, &acked);
        // ... then an unsignaled one `gap` µs later.
        p.now = weft_transport::Instant(t0 + gap);
        unasked_send_at(&mut p, &c, &ra, t0 + gap);
        let due = p.b.poll_timeout().expect("B owes the second's ACK");
        reply(&mut p, &c, &ra, &rb, 3);
        let out = transmit_burst(&mut p, Side::B);
        let ops: Vec<u8> = out.iter().map(|o| o.0).collect();
        if rides {
            assert_eq!(
                ops,
                [RC_SEND_ONLY, RC_ACK],
                "gap {gap}: quiet, the ACK rides"
            );
            assert_eq!(p.b.stats().acks_with_reply, 1);
        } else {
            assert_eq!(ops, [RC_SEND_ONLY], "gap {gap}: dense, the reply alone");
            assert_eq!(
                p.b.poll_timeout(),
                Some(due),
                "gap {gap}: the ACK is still owed"
            );
            assert_eq!(p.b.stats().acks_with_reply, 0);
        }
        deliver_to_a(&mut p, &out);
        settle(&mut p, 1_000_000);
        assert_eq!(p.a.stats().timeouts, 0, "gap {gap}");
        assert_eq!(p.a.stats().messages_completed, 2, "gap {gap}");
    }
}

/// The rule is per QP: a sparse QP's request is judged by that QP's previous
/// request, not by a dense QP's packets beside it, and its reply carries only its
/// own ACK. Here B's QP 2 takes two requests within the delay (dense) just before
/// QP 1 takes its first (sparse). QP 1's reply leaves with QP 1's ACK, QP 2's ACK
/// stays owed; QP 2's reply then leaves alone. Both replies in one burst: the same.
#[test]
fn each_qp_rides_only_its_own_ack() {
    for together in [false, true] {
        let mut p = ride_pair(true);
        let c1 = p.connect(QpType::Rc, &ride_opts());
        let c2 = p.connect(QpType::Rc, &ride_opts());
        let (ra, rb) = big_regions(&mut p, MEM);
        for c in [&c1, &c2] {
            for i in 0..2 {
                p.b.post_recv(c.qpn_b, recv(1 + i, vec![sge(&rb, rb.addr, 64)]))
                    .unwrap();
            }
        }
        let t0 = p.now.micros();
        p.a.post_send(c2.qpn_a, send(1, vec![sge(&ra, ra.addr, 64)]))
            .unwrap();
        for (_, _, _, path, bytes) in &transmit_burst(&mut p, Side::A) {
            p.b.handle_packet(weft_transport::Instant(t0), path, bytes);
        }
        let acked = transmit_burst(&mut p, Side::B);
        assert_eq!(acked.len(), 1, "QP 2's asked-for ACK");
        deliver_to_a(&mut p, &acked);
        unasked_send_at(&mut p, &c2, &ra, t0 + 1);
        let psn1 = unasked_send_at(&mut p, &c1, &ra, t0 + 2);
        reply(&mut p, &c1, &ra, &rb, 3);
        if together {
            reply(&mut p, &c2, &ra, &rb, 4);
        }
        let out = transmit_burst(&mut p, Side::B);
        let got: Vec<(u8, u32)> = out.iter().map(|o| (o.0, o.1)).collect();
        let mut want = vec![(RC_SEND_ONLY, c1.qpn_a), (RC_ACK, c1.qpn_a)];
        if together {
            want.push((RC_SEND_ONLY, c2.qpn_a));
        }
        assert_eq!(got, want, "together {together}");
        assert_eq!(out[1].2, psn1, "QP 1's ACK covers QP 1's SEND");
        assert_eq!(p.b.stats().acks_with_reply, 1);
        assert_eq!(p.b.stats().acks_sent, 2, "QP 2's second ACK is still owed");
        assert!(p.b.poll_timeout().is_some());
        deliver_to_a(&mut p, &out);
        if !together {
            reply(&mut p, &c2, &ra, &rb, 4);
            let out = transmit_burst(&mut p, Side::B);
            let got: Vec<(u8, u32)> = out.iter().map(|o| (o.0, o.1)).collect();
            assert_eq!(got, [(RC_SEND_ONLY, c2.qpn_a)], "QP 2's reply alone");
            deliver_to_a(&mut p, &out);
        }
        assert_eq!(p.b.stats().acks_with_reply, 1);
        settle(&mut p, 1_000_000);
        assert_eq!(p.a.stats().timeouts, 0);
        assert_eq!(p.a.stats().messages_completed, 3);
    }
}
