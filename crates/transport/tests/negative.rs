//! Negative tests: every refusal gives the NAK or completion status IBTA names, nothing
//! outside a registered region changes, and nothing panics.
mod common;
use common::*;
use weft_transport::qp::{AttrName, ModifyError};
use weft_transport::sim::{ConnectOptions, Connection, LinkConfig, Pair, Side};
use weft_transport::{
    Access, Config, Instant, Mtu, PostError, QpAttr, QpState, QpType, SendWr, WcOpcode, WcStatus,
    WrOp,
};
use weft_wire::roce::{
    AethRepr, BthRepr, IbPacket, IbPacketRepr, NakCode, Opcode, Psn, RethRepr, Syndrome,
};

const MEM: u64 = 1 << 20;

fn setup(o: &ConnectOptions) -> (Pair, Connection) {
    let mut p = clean_pair(MEM as usize, 9);
    let c = p.connect(QpType::Rc, o);
    (p, c)
}

/// Post one work request on A and run until A completes it; returns A's completions.
fn run_one(p: &mut Pair, c: &Connection, wr: SendWr) -> Vec<weft_transport::Completion> {
    p.a.post_send(c.qpn_a, wr).unwrap();
    let got = wait_completions(p, Side::A, 1, 5_000_000);
    settle(p, 100_000);
    let mut all = got;
    all.extend(completions(p, Side::A));
    all
}

fn write_to(
    b: &weft_transport::Region,
    addr: u64,
    src: &weft_transport::Region,
    len: u32,
) -> SendWr {
    SendWr::new(
        1,
        WrOp::Write {
            remote: remote(b, addr),
            imm: None,
        },
        vec![sge(src, src.addr, len)],
    )
}

/// A remote-access refusal: A completes with RemAccessErr, both QPs end in ERR, and B's
/// memory was not written at all.
fn assert_remote_access_refused(p: &mut Pair, c: &Connection, wr: SendWr) {
    let writes_before = p.b.mem().write_count();
    let got = run_one(p, c, wr);
    assert_eq!(got[0].status, WcStatus::RemAccessErr, "{got:?}");
    assert_eq!(p.b.stats().fatal_naks_sent, 1);
    assert_eq!(p.a.qp_state(c.qpn_a), Some(QpState::Err));
    assert_eq!(p.b.qp_state(c.qpn_b), Some(QpState::Err));
    assert_eq!(
        p.b.mem().write_count(),
        writes_before,
        "responder wrote despite refusal"
    );
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn bad_rkey() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    let mut wr = write_to(&rb, rb.addr, &ra, 100);
    if let WrOp::Write { remote, .. } = &mut wr.op {
        remote.rkey ^= 0x5a5a;
    }
    assert_remote_access_refused(&mut p, &c, wr);
}

#[test]
fn out_of_bounds_write_and_read() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let ra = reg(&mut p, Side::A, 4096, 65536, Access::ALL, 1);
    let rb = reg(&mut p, Side::B, 4096, 4096, Access::ALL, 1);
    // One byte past the end.
    assert_remote_access_refused(&mut p, &c, write_to(&rb, rb.addr + 1, &ra, 4096));

    let (mut p, c) = setup(&ConnectOptions::default());
    let ra = reg(&mut p, Side::A, 4096, 65536, Access::ALL, 1);
    let rb = reg(&mut p, Side::B, 4096, 4096, Access::ALL, 1);
    let wr = SendWr::new(
        2,
        WrOp::Read {
            remote: remote(&rb, rb.addr - 8),
        },
        vec![sge(&ra, ra.addr, 64)],
    );
    assert_remote_access_refused(&mut p, &c, wr);
    // The READ target on A was not touched either.
    assert_eq!(p.a.mem().write_count(), 0);
}

/// Builds a work request from A's and B's regions.
type MakeWr = fn(&weft_transport::Region, &weft_transport::Region) -> SendWr;

#[test]
fn missing_access_flags() {
    let cases: [(Access, MakeWr); 3] = [
        (
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            |ra, rb| write_to(rb, rb.addr, ra, 64),
        ),
        (
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            |ra, rb| {
                SendWr::new(
                    3,
                    WrOp::Read {
                        remote: remote(rb, rb.addr),
                    },
                    vec![sge(ra, ra.addr, 64)],
                )
            },
        ),
        (
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            |ra, rb| {
                SendWr::new(
                    4,
                    WrOp::FetchAdd {
                        remote: remote(rb, rb.addr),
                        add: 1,
                    },
                    vec![sge(ra, ra.addr, 8)],
                )
            },
        ),
    ];
    for (access, make) in cases {
        let (mut p, c) = setup(&ConnectOptions::default());
        let ra = reg(&mut p, Side::A, 4096, 65536, Access::ALL, 1);
        let rb = reg(&mut p, Side::B, 4096, 65536, access, 1);
        let wr = make(&ra, &rb);
        assert_remote_access_refused(&mut p, &c, wr);
    }
}

#[test]
fn qp_without_remote_write_right() {
    let o = ConnectOptions {
        access: Access::REMOTE_READ,
        ..ConnectOptions::default()
    };
    let (mut p, c) = setup(&o);
    let (ra, rb) = big_regions(&mut p, MEM);
    assert_remote_access_refused(&mut p, &c, write_to(&rb, rb.addr, &ra, 64));
}

#[test]
fn wrong_protection_domain() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let ra = reg(&mut p, Side::A, 4096, 65536, Access::ALL, 1);
    let rb = reg(&mut p, Side::B, 4096, 65536, Access::ALL, 2);
    assert_remote_access_refused(&mut p, &c, write_to(&rb, rb.addr, &ra, 64));
}

#[test]
fn misaligned_atomic_is_invalid_request() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    let wr = SendWr::new(
        5,
        WrOp::CompareSwap {
            remote: remote(&rb, rb.addr + 4),
            compare: 0,
            swap: 1,
        },
        vec![sge(&ra, ra.addr, 8)],
    );
    let got = run_one(&mut p, &c, wr);
    assert_eq!(got[0].status, WcStatus::RemInvReqErr);
    assert_eq!(p.b.mem().write_count(), 0);
}

#[test]
fn send_longer_than_receive_buffer() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    p.b.post_recv(c.qpn_b, recv(70, vec![sge(&rb, rb.addr, 100)]))
        .unwrap();
    p.b.post_recv(c.qpn_b, recv(71, vec![sge(&rb, rb.addr + 100, 100)]))
        .unwrap();
    let got = run_one(&mut p, &c, send(6, vec![sge(&ra, ra.addr, 101)]));
    assert_eq!(got[0].status, WcStatus::RemInvReqErr);
    let cb = completions(&mut p, Side::B);
    assert_eq!(cb[0].wr_id, 70);
    assert_eq!(cb[0].status, WcStatus::LocLenErr);
    // ERR flushes the receive that was never used.
    assert_eq!(cb[1].wr_id, 71);
    assert_eq!(cb[1].status, WcStatus::WrFlushErr);
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn bad_lkey_is_a_local_protection_error_and_flushes_the_rest() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    let mut bad = sge(&ra, ra.addr, 64);
    bad.lkey ^= 1;
    p.a.post_send(c.qpn_a, write_to(&rb, rb.addr, &ra, 64))
        .unwrap();
    p.a.post_send(
        c.qpn_a,
        SendWr::new(
            2,
            WrOp::Write {
                remote: remote(&rb, rb.addr),
                imm: None,
            },
            vec![bad],
        ),
    )
    .unwrap();
    p.a.post_send(c.qpn_a, write_to(&rb, rb.addr + 64, &ra, 64))
        .unwrap();
    let got = wait_completions(&mut p, Side::A, 3, 1_000_000);
    let st: Vec<_> = got.iter().map(|c| c.status).collect();
    assert_eq!(
        st,
        vec![
            WcStatus::Success,
            WcStatus::LocProtErr,
            WcStatus::WrFlushErr
        ]
    );
    assert_eq!(p.a.qp_state(c.qpn_a), Some(QpState::Err));
}

#[test]
fn rnr_with_no_receive_posted_exhausts_rnr_retry() {
    let o = ConnectOptions {
        rnr_retry: 3,
        min_rnr_timer: 1, // 10 µs
        ..ConnectOptions::default()
    };
    let (mut p, c) = setup(&o);
    let (ra, _) = big_regions(&mut p, MEM);
    let got = run_one(&mut p, &c, send(8, vec![sge(&ra, ra.addr, 10)]));
    assert_eq!(got[0].status, WcStatus::RnrRetryExcErr);
    // The first attempt plus three retries, each refused.
    assert_eq!(p.b.stats().rnr_naks_sent, 4);
    assert_eq!(p.a.stats().rnr_naks_received, 4);
}

#[test]
fn rnr_then_receive_posted_succeeds_with_infinite_rnr_retry() {
    let o = ConnectOptions {
        rnr_retry: 7,
        min_rnr_timer: 14, // 960 µs
        ..ConnectOptions::default()
    };
    let (mut p, c) = setup(&o);
    let (ra, rb) = big_regions(&mut p, MEM);
    p.a.mem_mut().fill(ra.addr, b"hello");
    p.a.post_send(c.qpn_a, send(9, vec![sge(&ra, ra.addr, 5)]))
        .unwrap();
    // Let several RNR rounds pass before a receive appears.
    let deadline = Instant(p.now.micros() + 5_000);
    p.drive(deadline, |_| false);
    assert!(p.b.stats().rnr_naks_sent >= 4);
    let t_post = p.now;
    p.b.post_recv(c.qpn_b, recv(90, vec![sge(&rb, rb.addr, 64)]))
        .unwrap();
    let got = wait_completions(&mut p, Side::A, 1, 1_000_000);
    assert_eq!(got[0].status, WcStatus::Success);
    // Recovery waited for the RNR timer (960 µs), no more.
    assert!(p.now - t_post <= 960 + 100, "took {}", p.now - t_post);
    assert_eq!(p.b.mem().bytes(rb.addr, 5), b"hello");
}

/// rdma_rxe's responder, having refused PSN p with an RNR NAK, answers the packets
/// sent after p with a sequence NAK for p. That NAK is no loss: however many RNR
/// rounds pass, and whether it arrives during the RNR wait or after it, it must not
/// use up retry_cnt (found against rxe: a three-packet SEND failed with RetryExcErr
/// though rnr_retry was 7, infinite).
#[test]
fn a_sequence_nak_for_the_psn_an_rnr_nak_refused_costs_no_retry() {
    let o = ConnectOptions {
        retry_cnt: 2,
        rnr_retry: 7,
        ..ConnectOptions::default()
    };
    let (mut p, c) = setup(&o);
    let (psn, from) = one_send_posted(&mut p, &c, &o);
    let nak = |syndrome| answer_from_b(&c, psn, &from, syndrome);
    let mut buf = vec![0u8; 8192];
    let rounds = 6; // more than retry_cnt + 1
    for round in 0..rounds {
        // A (re)sends the SEND; B's answers are made here.
        let t = p.a.poll_transmit(p.now, &mut buf).expect("A sends");
        let sent = IbPacketRepr::parse(&IbPacket::new_checked(&buf[..t.len]).unwrap()).unwrap();
        assert_eq!(
            sent.bth.psn, psn,
            "round {round}: A resends from the refused PSN"
        );
        p.a.handle_packet(p.now, &from, &nak(Syndrome::RnrNak { timer: 1 }));
        let seq_nak = nak(Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR));
        let late = round % 2 == 1;
        if !late {
            p.a.handle_packet(p.now, &from, &seq_nak);
        }
        // Nothing more until the RNR timer (10 µs) runs out.
        assert!(
            p.a.poll_transmit(p.now, &mut buf).is_none(),
            "round {round}"
        );
        p.now = Instant(p.now.micros() + 20);
        p.a.handle_timeout(p.now);
        if late {
            // After the RNR wait, before the resend leaves (a slow responder).
            p.a.handle_packet(p.now, &from, &seq_nak);
        }
    }
    assert!(completions(&mut p, Side::A).is_empty(), "no RetryExcErr");
    assert_eq!(p.a.qp_state(c.qpn_a), Some(QpState::Rts));
    assert_eq!(p.a.stats().seq_naks_received, rounds);
    // The receive finally posted: B acknowledges, the SEND completes.
    p.a.poll_transmit(p.now, &mut buf).expect("A sends again");
    p.a.handle_packet(p.now, &from, &nak(Syndrome::Ack { credit_code: 31 }));
    let got = completions(&mut p, Side::A);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].status, WcStatus::Success);
}

/// After an RNR wait, the resend of the refused PSN is lost and the responder answers
/// the later packets with a sequence NAK for it: the requester resends at once (no
/// retry charged), without waiting for the ACK timeout, which here is infinite.
#[test]
fn a_resend_lost_after_an_rnr_wait_is_resent_at_the_next_sequence_nak() {
    let o = ConnectOptions {
        retry_cnt: 1,
        rnr_retry: 7,
        timeout: 0,
        ..ConnectOptions::default()
    };
    let (mut p, c) = setup(&o);
    let (psn, from) = one_send_posted(&mut p, &c, &o);
    let nak = |syndrome| answer_from_b(&c, psn, &from, syndrome);
    let mut buf = vec![0u8; 8192];
    p.a.poll_transmit(p.now, &mut buf).expect("A sends");
    p.a.handle_packet(p.now, &from, &nak(Syndrome::RnrNak { timer: 1 }));
    p.now = Instant(p.now.micros() + 20);
    p.a.handle_timeout(p.now);
    // The resend at the end of the wait leaves, and is lost.
    let t =
        p.a.poll_transmit(p.now, &mut buf)
            .expect("A resends after the wait");
    let sent = IbPacketRepr::parse(&IbPacket::new_checked(&buf[..t.len]).unwrap()).unwrap();
    assert_eq!(sent.bth.psn, psn);
    // B saw a later packet instead and asks for psn again: A resends now.
    p.a.handle_packet(
        p.now,
        &from,
        &nak(Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR)),
    );
    let t =
        p.a.poll_transmit(p.now, &mut buf)
            .expect("A resends at the sequence NAK, not at a timeout that never comes");
    let sent = IbPacketRepr::parse(&IbPacket::new_checked(&buf[..t.len]).unwrap()).unwrap();
    assert_eq!(sent.bth.psn, psn);
    // No retry was charged: retry_cnt 1 still allows B's ACK to complete the SEND.
    p.a.handle_packet(p.now, &from, &nak(Syndrome::Ack { credit_code: 31 }));
    let got = completions(&mut p, Side::A);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].status, WcStatus::Success);
}

#[test]
fn retry_exhaustion_on_a_dead_link() {
    let o = ConnectOptions {
        timeout: 10, // 4.194 ms
        retry_cnt: 2,
        ..ConnectOptions::default()
    };
    let mut p = Pair::new(
        Config::default(),
        MEM as usize,
        LinkConfig::clean(5).with_loss(1.0),
        LinkConfig::clean(5),
        9,
    );
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    let t0 = p.now;
    let got = run_one(&mut p, &c, write_to(&rb, rb.addr, &ra, 64));
    assert_eq!(got[0].status, WcStatus::RetryExcErr);
    assert_eq!(p.a.stats().timeouts, 3);
    // Three timeouts of 4.096 µs × 2^10 = 4194.304 µs, at microsecond resolution.
    let per = weft_transport::local_ack_timeout_micros(10).unwrap();
    assert_eq!(per, 4195);
    assert!(p.now - t0 >= 3 * per && p.now - t0 < 3 * per + 200);
}

#[test]
fn too_many_outstanding_reads_is_invalid_request() {
    let o = ConnectOptions {
        rd_atomic: 4,
        ..ConnectOptions::default()
    };
    let (mut p, c) = setup(&o);
    let (ra, rb) = big_regions(&mut p, MEM);
    // B accepts only one outstanding READ; A believes it may have four.
    // max_dest_rd_atomic may change only in SQD (IBTA §10.3.1 / ibv_modify_qp).
    for attr in [
        QpAttr {
            state: Some(QpState::Sqd),
            ..QpAttr::default()
        },
        QpAttr {
            max_dest_rd_atomic: Some(1),
            ..QpAttr::default()
        },
        QpAttr {
            state: Some(QpState::Rts),
            ..QpAttr::default()
        },
    ] {
        p.b.modify_qp(c.qpn_b, &attr).unwrap();
    }
    assert_eq!(
        p.b.modify_qp(
            c.qpn_b,
            &QpAttr {
                max_dest_rd_atomic: Some(2),
                ..QpAttr::default()
            }
        ),
        Err(ModifyError::NotModifiable(AttrName::MaxDestRdAtomic))
    );
    for i in 0..3 {
        let wr = SendWr::new(
            i,
            WrOp::Read {
                remote: remote(&rb, rb.addr),
            },
            vec![sge(&ra, ra.addr + i * 200_000, 200_000)],
        );
        p.a.post_send(c.qpn_a, wr).unwrap();
    }
    let got = wait_completions(&mut p, Side::A, 3, 1_000_000);
    assert!(
        got.iter().any(|c| c.status == WcStatus::RemInvReqErr),
        "{got:?}"
    );
}

#[test]
fn entering_err_flushes_everything() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    for i in 0..3 {
        p.a.post_send(c.qpn_a, write_to(&rb, rb.addr, &ra, 64))
            .unwrap();
        p.a.post_recv(c.qpn_a, recv(100 + i, vec![sge(&ra, ra.addr, 64)]))
            .unwrap();
    }
    p.a.modify_qp(
        c.qpn_a,
        &QpAttr {
            state: Some(QpState::Err),
            ..QpAttr::default()
        },
    )
    .unwrap();
    let got = completions(&mut p, Side::A);
    assert_eq!(got.len(), 6);
    assert!(got.iter().all(|c| c.status == WcStatus::WrFlushErr));
    assert_eq!(got.iter().filter(|c| c.opcode == WcOpcode::Recv).count(), 3);
    // Posting in ERR completes at once with a flush error.
    p.a.post_send(c.qpn_a, write_to(&rb, rb.addr, &ra, 64))
        .unwrap();
    assert_eq!(
        p.a.poll_completion().map(|c| c.status),
        Some(WcStatus::WrFlushErr)
    );
}

#[test]
fn invalid_transitions_and_posts_are_error_values() {
    let mut p = clean_pair(MEM as usize, 1);
    let qpn =
        p.a.create_qp(weft_transport::QpInit {
            qp_type: QpType::Rc,
            pd: 1,
            max_send_wr: 1,
            max_recv_wr: 1,
            srq: None,
        })
        .unwrap();
    assert_eq!(
        p.a.modify_qp(
            qpn,
            &QpAttr {
                state: Some(QpState::Rts),
                ..QpAttr::default()
            }
        ),
        Err(ModifyError::InvalidTransition {
            from: QpState::Reset,
            to: QpState::Rts
        })
    );
    assert_eq!(
        p.a.modify_qp(
            qpn,
            &QpAttr {
                state: Some(QpState::Init),
                pkey: Some(0xffff),
                ..QpAttr::default()
            }
        ),
        Err(ModifyError::MissingAttr(AttrName::Access))
    );
    assert_eq!(p.a.qp_state(qpn), Some(QpState::Reset));
    assert_eq!(
        p.a.post_send(qpn, send(1, vec![])),
        Err(PostError::InvalidState(QpState::Reset))
    );
    assert_eq!(
        p.a.post_send(0x77, send(1, vec![])),
        Err(PostError::UnknownQp(0x77))
    );
}

// ------------------------------------------------------------ crafted packets

/// A posted 10-byte SEND from A, for the RNR tests: its PSN and B's path, whose
/// answers the tests craft with [`answer_from_b`].
fn one_send_posted(
    p: &mut Pair,
    c: &Connection,
    o: &ConnectOptions,
) -> (Psn, weft_wire::roce::IcrcPath) {
    let (ra, _) = big_regions(p, MEM);
    p.a.post_send(c.qpn_a, send(5, vec![sge(&ra, ra.addr, 10)]))
        .unwrap();
    (Psn::new(o.psn_a), Pair::path(Side::B, c.qpn_b))
}

/// An ACK or NAK from B for `psn`, as B would send it.
fn answer_from_b(
    c: &Connection,
    psn: Psn,
    from: &weft_wire::roce::IcrcPath,
    syndrome: Syndrome,
) -> Vec<u8> {
    let mut r = IbPacketRepr::new(BthRepr::new(Opcode::RC_ACK, c.qpn_a, psn));
    r.aeth = Some(AethRepr { syndrome, msn: 0 });
    craft(&r, b"", from)
}

fn craft(repr: &IbPacketRepr, payload: &[u8], from: &weft_wire::roce::IcrcPath) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut buf, payload).unwrap();
    from.fill(&mut buf[..n]).unwrap();
    buf
}

/// B's next outgoing packet, parsed.
fn next_from_b(p: &mut Pair) -> Option<IbPacketRepr> {
    let mut buf = vec![0u8; 8192];
    let t = p.b.poll_transmit(p.now, &mut buf)?;
    let pkt = IbPacket::new_checked(&buf[..t.len]).unwrap();
    Some(IbPacketRepr::parse(&pkt).unwrap())
}

#[test]
fn unknown_qp_number_is_counted_and_dropped() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let from = Pair::path(Side::A, c.qpn_a);
    let mut r = IbPacketRepr::new(BthRepr::new(
        Opcode::RC_SEND_ONLY,
        c.qpn_b ^ 0x40_0000,
        Psn::new(0),
    ));
    r.bth.ack_req = true;
    p.b.handle_packet(p.now, &from, &craft(&r, b"x", &from));
    assert_eq!(p.b.stats().unknown_qpn, 1);
    assert!(next_from_b(&mut p).is_none());
}

#[test]
fn psn_far_outside_the_window_gets_a_sequence_nak() {
    let o = ConnectOptions::default();
    let (mut p, c) = setup(&o);
    let from = Pair::path(Side::A, c.qpn_a);
    let epsn = Psn::new(o.psn_a);
    let far = epsn.add(1 << 22);
    let mut r = IbPacketRepr::new(BthRepr::new(Opcode::RC_WRITE_ONLY, c.qpn_b, far));
    r.reth = Some(RethRepr {
        va: 0,
        rkey: 0,
        dma_len: 1,
    });
    p.b.handle_packet(p.now, &from, &craft(&r, b"x", &from));
    let nak = next_from_b(&mut p).expect("a NAK");
    assert_eq!(nak.bth.opcode, Opcode::RC_ACK);
    assert_eq!(nak.bth.psn, epsn);
    assert_eq!(
        nak.aeth.unwrap().syndrome,
        Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR)
    );
    // Only one NAK per gap: a second far packet is dropped silently.
    p.b.handle_packet(p.now, &from, &craft(&r, b"x", &from));
    assert!(next_from_b(&mut p).is_none());
    assert_eq!(p.b.mem().write_count(), 0);
}

#[test]
fn malformed_headers_are_counted_never_panic() {
    let (mut p, c) = setup(&ConnectOptions::default());
    let from = Pair::path(Side::A, c.qpn_a);
    let mut r = IbPacketRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, c.qpn_b, Psn::new(0)));
    r.bth.ack_req = true;
    let good = craft(&r, b"abcdef", &from);
    let mut cases: Vec<Vec<u8>> = vec![vec![], good[..11].to_vec(), good[..15].to_vec()];
    // Unknown opcode.
    let mut v = good.clone();
    v[0] = 0x1e;
    from.fill(&mut v).unwrap();
    cases.push(v);
    // Pad count larger than the payload.
    let mut v = craft(
        &IbPacketRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, c.qpn_b, Psn::new(0))),
        b"",
        &from,
    );
    v[1] |= 0x30;
    from.fill(&mut v).unwrap();
    cases.push(v);
    // Transport version 1.
    let mut v = good.clone();
    v[1] |= 0x01;
    from.fill(&mut v).unwrap();
    cases.push(v);
    // A READ request opcode with a payload.
    let mut v = good.clone();
    v[0] = Opcode::RC_READ_REQUEST.0;
    from.fill(&mut v).unwrap();
    cases.push(v);
    let n = cases.len() as u64;
    for v in &cases {
        p.b.handle_packet(p.now, &from, v);
    }
    assert_eq!(p.b.stats().malformed, n);
    // A flipped bit fails the ICRC.
    let mut v = good.clone();
    v[13] ^= 4;
    p.b.handle_packet(p.now, &from, &v);
    assert_eq!(p.b.stats().icrc_errors, 1);
    // A UC opcode to an RC QP.
    let mut v = good.clone();
    v[0] = Opcode::UC_SEND_ONLY.0;
    from.fill(&mut v).unwrap();
    p.b.handle_packet(p.now, &from, &v);
    assert_eq!(p.b.stats().wrong_transport, 1);
    assert!(next_from_b(&mut p).is_none());
    assert_eq!(p.b.qp_state(c.qpn_b), Some(QpState::Rts));
}

#[test]
fn icrc_check_can_be_switched_off() {
    let config = Config {
        check_icrc: false,
        ..Config::default()
    };
    let mut p = Pair::new(
        config,
        MEM as usize,
        LinkConfig::clean(5),
        LinkConfig::clean(5),
        1,
    );
    let o = ConnectOptions {
        mtu: Mtu::M256,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let from = Pair::path(Side::A, c.qpn_a);
    let mut r = IbPacketRepr::new(BthRepr::new(
        Opcode::RC_SEND_ONLY,
        c.qpn_b,
        Psn::new(o.psn_a),
    ));
    r.bth.ack_req = true;
    let mut v = craft(&r, b"abc", &from);
    let n = v.len();
    v[n - 1] ^= 0xff; // wrong ICRC, accepted anyway
    p.b.handle_packet(p.now, &from, &v);
    assert_eq!(p.b.stats().icrc_errors, 0);
    // No receive posted: the packet reached the responder, which answers RNR.
    let nak = next_from_b(&mut p).unwrap();
    assert!(matches!(
        nak.aeth.unwrap().syndrome,
        Syndrome::RnrNak { .. }
    ));
}

/// The ICRC of a later segment of a UDP GSO send is computed for identification k: an
/// endpoint told to expect GSO peers (`icrc_ids`) accepts it and counts it, and one
/// left at the default (identification 0 only) drops it as an ICRC error.
#[test]
fn a_gso_segments_icrc_is_accepted_only_where_gso_peers_are_expected() {
    for (ids, accepted) in [(1u16, false), (weft_wire::roce::GSO_MAX_SEGMENTS, true)] {
        let config = Config {
            icrc_ids: ids,
            ..Config::default()
        };
        let mut p = Pair::new(
            config,
            MEM as usize,
            LinkConfig::clean(5),
            LinkConfig::clean(5),
            1,
        );
        let o = ConnectOptions {
            mtu: Mtu::M256,
            ..ConnectOptions::default()
        };
        let c = p.connect(QpType::Rc, &o);
        let from = Pair::path(Side::A, c.qpn_a);
        let mut r = IbPacketRepr::new(BthRepr::new(
            Opcode::RC_SEND_ONLY,
            c.qpn_b,
            Psn::new(o.psn_a),
        ));
        r.bth.ack_req = true;
        let mut v = craft(&r, b"abc", &from);
        // Segment 5 of a GSO send: its ICRC is the one for identification 5.
        let deltas = weft_wire::roce::Ipv4IdDeltas::new(v.len() - 4);
        assert!(deltas.apply(&mut v, 5));
        p.b.handle_packet(p.now, &from, &v);
        let st = p.b.stats();
        assert_eq!(
            (st.icrc_segment_id, st.icrc_errors),
            if accepted { (1, 0) } else { (0, 1) }
        );
    }
}

/// A by-reference WRITE (a WRITE Only whose RETH names more than an MTU; its payload
/// a span list, `weft_transport::byref`) to memory that cannot pull from the sender —
/// any peer on a link without cross-memory attach, or a hostile one — is answered with
/// a Remote Access NAK and writes nothing; a span list longer than the rest of the
/// message the RETH names is an Invalid Request. Neither reads a byte of anyone's memory.
#[test]
fn a_by_reference_write_that_cannot_be_pulled_is_nacked_and_writes_nothing() {
    for (spans_total, want) in [
        (100_000u64, NakCode::REMOTE_ACCESS_ERROR),
        (100_001, NakCode::INVALID_REQUEST),
    ] {
        let o = ConnectOptions::default();
        let (mut p, c) = setup(&o);
        let (_, rb) = big_regions(&mut p, MEM);
        let writes_before = p.b.mem().write_count();
        let from = Pair::path(Side::A, c.qpn_a);
        let mut r = IbPacketRepr::new(BthRepr::new(
            Opcode::RC_WRITE_ONLY,
            c.qpn_b,
            Psn::new(o.psn_a),
        ));
        r.bth.ack_req = true;
        r.reth = Some(RethRepr {
            va: rb.addr,
            rkey: rb.rkey,
            dma_len: 100_000,
        });
        // One span of the "sender's" memory: address, then length, big-endian.
        let mut span = 0x7f00_0000_0000u64.to_be_bytes().to_vec();
        span.extend_from_slice(&spans_total.to_be_bytes());
        p.b.handle_packet(p.now, &from, &craft(&r, &span, &from));
        let nak = next_from_b(&mut p).expect("a NAK");
        assert_eq!(nak.aeth.unwrap().syndrome, Syndrome::Nak(want));
        assert_eq!(p.b.mem().write_count(), writes_before, "a byte moved");
        assert_eq!(p.b.stats().by_reference_received, 0);
        let failed = u64::from(want == NakCode::REMOTE_ACCESS_ERROR);
        assert_eq!(p.b.stats().by_reference_failed, failed);
    }
}

/// A by-reference WRITE on a QP that shares its endpoint with another sending QP keeps
/// at most `byref::WINDOW` chunks in flight, though the QP's window (64 PSNs) would take
/// the whole 4 MiB message: each chunk in flight is a copy queued at the receiver ahead
/// of every other QP's packets on the link. As ACKs come back the rest follow, never
/// more than the window out, and the WRITE completes. Alone on its endpoint it uses
/// the QP's whole window.
#[test]
fn a_by_reference_write_beside_another_qp_keeps_at_most_its_window_of_chunks_in_flight() {
    let window = weft_transport::byref::WINDOW;
    let (first, most) = by_reference_write(true);
    assert_eq!((first, most), (window, window), "beside another QP");
    let max_inflight = u64::from(ConnectOptions::default().max_inflight);
    let (first, most) = by_reference_write(false);
    assert_eq!((first, most), (max_inflight, max_inflight), "alone");
}

/// A 4 MiB by-reference WRITE from A, every chunk acknowledged one at a time as B would
/// (B itself cannot pull in the simulator); `beside`: a second QP of A has a SEND
/// queued when the first chunk goes. Returns the chunks sent before the first ACK, and
/// the most in flight at any time. Asserts the WRITE completes.
fn by_reference_write(beside: bool) -> (u64, u64) {
    const LEN: u64 = 4 << 20;
    let config = Config {
        by_reference_min: 0,
        ..Config::default()
    };
    let mut p = Pair::new(
        config,
        2 * LEN as usize,
        LinkConfig::clean(5),
        LinkConfig::clean(5),
        9,
    );
    let o = ConnectOptions::default();
    let c = p.connect(QpType::Rc, &o);
    let other = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, 2 * LEN);
    p.a.mem_mut().set_nameable(true);
    assert!(p.a.set_by_reference(c.qpn_a, true));
    p.a.post_send(
        c.qpn_a,
        write(1, remote(&rb, rb.addr), vec![sge(&ra, ra.addr, LEN as u32)]),
    )
    .unwrap();
    if beside {
        p.a.post_send(other.qpn_a, send(2, vec![sge(&ra, ra.addr, 16)]))
            .unwrap();
    }
    let chunks = LEN / weft_transport::byref::CHUNK;
    assert!(chunks >= u64::from(o.max_inflight));
    let from_b = Pair::path(Side::B, c.qpn_b);
    let mut buf = vec![0u8; 8192];
    let (mut sent, mut acked, mut most, mut first) = (0u64, 0u64, 0u64, None);
    while acked < chunks {
        while let Some(t) = p.a.poll_transmit(p.now, &mut buf) {
            let r = IbPacketRepr::parse(&IbPacket::new_checked(&buf[..t.len]).unwrap()).unwrap();
            if r.bth.dest_qp != c.qpn_b {
                continue; // the other QP's SEND
            }
            assert_eq!(r.bth.opcode, Opcode::RC_WRITE_ONLY);
            assert!(r.reth.unwrap().dma_len > 1024, "a chunk goes by reference");
            assert_eq!(r.bth.psn, Psn::new(o.psn_a).add(sent as u32));
            sent += 1;
        }
        most = most.max(sent - acked);
        first.get_or_insert(sent);
        assert!(sent > acked, "nothing in flight, nothing sent");
        // B acknowledges the oldest chunk in flight.
        let ack = answer_from_b(
            &c,
            Psn::new(o.psn_a).add(acked as u32),
            &from_b,
            Syndrome::Ack { credit_code: 31 },
        );
        p.a.handle_packet(p.now, &from_b, &ack);
        acked += 1;
    }
    assert_eq!(sent, chunks);
    let got: Vec<_> = completions(&mut p, Side::A)
        .into_iter()
        .filter(|w| w.wr_id == 1)
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].status, WcStatus::Success);
    assert_eq!(p.a.stats().by_reference_sent, 1);
    (first.unwrap_or(0), most)
}

/// What a device's completion sink hears, in order: completions and error entries.
#[derive(Debug, Default)]
struct Heard(Vec<(Option<WcStatus>, u32)>);

impl weft_transport::CompletionSink for Heard {
    fn complete(&mut self, c: weft_transport::Completion) {
        self.0.push((Some(c.status), c.qpn));
    }
    fn qp_error(&mut self, qpn: u32) {
        self.0.push((None, qpn));
    }
}

/// A QP the transport moves to ERR by itself (here its retries against a peer that
/// never answers run out) tells the sink, before the completions it flushes; so does
/// a modify to ERR, and nothing else does (not the bring-up, not a reset). A device
/// that hands receives over through queues of its own learns so that a receive
/// posted afterwards is due at once (flushed), not with the next packet.
#[test]
fn the_sink_hears_when_a_qp_enters_error_by_itself_or_by_a_modify() {
    use weft_transport::{Bringup, Endpoint, QpAttr, QpInit, Recovery, VecMemory};
    let mut ep = Endpoint::with_sink(
        Config::default(),
        VecMemory::new(0x1000, 4096, 0, 1),
        Heard::default(),
    );
    let qpn = ep
        .create_qp(QpInit {
            qp_type: QpType::Rc,
            pd: 1,
            max_send_wr: 4,
            max_recv_wr: 4,
            srq: None,
        })
        .unwrap();
    let up = Bringup {
        access: Access::ALL,
        qkey: 0,
        path_mtu: Mtu::M1024,
        path: Some(Pair::path(Side::B, 7)),
        dest_qpn: 7,
        rq_psn: 0,
        sq_psn: 0,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
        timeout: 1,
        retry_cnt: 1,
        rnr_retry: 0,
        recovery: Recovery::GoBackN,
        max_inflight: 4,
        peer_ack_delay_us: 0,
    };
    for s in up.steps(QpType::Rc) {
        ep.modify_qp(qpn, &s).unwrap();
    }
    let recv = weft_transport::RecvWr {
        wr_id: 2,
        sg_list: Default::default(),
    };
    ep.post_recv(qpn, recv).unwrap();
    ep.post_send(qpn, SendWr::new(1, WrOp::Send { imm: None }, vec![]))
        .unwrap();
    assert!(ep.sink().0.is_empty(), "{:?}", ep.sink().0);
    // The SEND leaves and is lost, as is its one retry.
    let mut buf = vec![0u8; 8192];
    let mut now = Instant(0);
    for _ in 0..100 {
        while ep.poll_transmit(now, &mut buf).is_some() {}
        if ep.qp_state(qpn) == Some(QpState::Err) {
            break;
        }
        now = ep.poll_timeout().expect("the retry timer");
        ep.handle_timeout(now);
    }
    assert_eq!(ep.qp_state(qpn), Some(QpState::Err));
    assert_eq!(
        ep.sink().0,
        [
            (None, qpn),
            (Some(WcStatus::RetryExcErr), qpn),
            (Some(WcStatus::WrFlushErr), qpn)
        ]
    );
    ep.sink_mut().0.clear();
    // Reset and bring-up again: no error; a modify to ERR: one.
    ep.modify_qp(
        qpn,
        &QpAttr {
            state: Some(QpState::Reset),
            ..QpAttr::default()
        },
    )
    .unwrap();
    for s in up.steps(QpType::Rc) {
        ep.modify_qp(qpn, &s).unwrap();
    }
    assert!(ep.sink().0.is_empty(), "{:?}", ep.sink().0);
    ep.modify_qp(
        qpn,
        &QpAttr {
            state: Some(QpState::Err),
            ..QpAttr::default()
        },
    )
    .unwrap();
    assert_eq!(ep.sink().0, [(None, qpn)]);
}
