//! Limits and spec corners: 32 SGEs, a 2 GiB message (through a memory that stores
//! nothing), MSN in ACKs, NAK Remote Operational Error, atomic replay from responder
//! resources.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, Pair, Side};
use weft_transport::{
    Access, AccessError, AtomicOp, Config, Endpoint, Instant, Key, Memory, Mtu, PostError, QpType,
    SendWr, Sge, WcStatus, WrOp,
};
use weft_wire::roce::{BthRepr, IbPacket, IbPacketRepr, Opcode, Psn, Syndrome};

const MEM: u64 = 1 << 20;

fn pair() -> Pair {
    clean_pair(MEM as usize, 11)
}

#[test]
fn thirty_two_sges_gather_and_scatter_thirty_three_refused() {
    let mut p = pair();
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    let data = pattern(3, 32 * 100);
    p.a.mem_mut().fill(ra.addr, &data);
    // 32 SGEs of 100 bytes, in reverse order in memory.
    let sges: Vec<Sge> = (0..32)
        .map(|i| sge(&ra, ra.addr + (31 - i) * 100, 100))
        .collect();
    let recvs: Vec<Sge> = (0..32).map(|i| sge(&rb, rb.addr + i * 1000, 100)).collect();
    p.b.post_recv(c.qpn_b, recv(1, recvs)).unwrap();
    p.a.post_send(c.qpn_a, send(1, sges.clone())).unwrap();
    settle(&mut p, 100_000);
    assert_eq!(completions(&mut p, Side::B)[0].byte_len, 3200);
    for i in 0..32u64 {
        let src = (31 - i) as usize * 100;
        assert_eq!(
            p.b.mem().bytes(rb.addr + i * 1000, 100),
            &data[src..src + 100]
        );
    }
    let mut too_many = sges;
    too_many.push(sge(&ra, ra.addr, 1));
    assert_eq!(
        p.a.post_send(c.qpn_a, send(2, too_many)),
        Err(PostError::TooManySge)
    );
}

/// Memory that stores nothing: reads synthesise bytes from the address, writes are
/// compared against the same function and counted. Lets a 2 GiB message run in a test.
#[derive(Debug, Default)]
struct Synthetic {
    written: u64,
    mismatches: u64,
}

/// The byte "stored" at `addr`: changes every byte and every 4 KiB page, so a packet
/// placed at the wrong offset or page shows.
fn byte_at(addr: u64) -> u8 {
    (addr as u8).wrapping_add((addr >> 12) as u8)
}

const BASE: u64 = 1 << 40;
const LEN: u64 = 1 << 31;

impl Memory for Synthetic {
    fn check(&self, _: Key, pd: u32, addr: u64, len: u64, _: Access) -> Result<(), AccessError> {
        if pd != 1 {
            return Err(AccessError::WrongPd);
        }
        match addr.checked_add(len) {
            Some(end) if addr >= BASE && end <= BASE + LEN => Ok(()),
            _ => Err(AccessError::OutOfBounds),
        }
    }
    fn read(
        &self,
        k: Key,
        pd: u32,
        addr: u64,
        out: &mut [u8],
        n: Access,
    ) -> Result<(), AccessError> {
        self.check(k, pd, addr, out.len() as u64, n)?;
        // Page by page, so the inner loop is a plain byte ramp the compiler vectorises.
        let mut a = addr;
        for chunk in out.chunks_mut(4096) {
            let (first, rest) = chunk.split_at_mut((4096 - (a % 4096) as usize).min(chunk.len()));
            for part in [first, rest] {
                let base = byte_at(a);
                for (i, b) in part.iter_mut().enumerate() {
                    *b = base.wrapping_add(i as u8);
                }
                a += part.len() as u64;
            }
        }
        Ok(())
    }
    fn write(
        &mut self,
        k: Key,
        pd: u32,
        addr: u64,
        data: &[u8],
        n: Access,
    ) -> Result<(), AccessError> {
        self.check(k, pd, addr, data.len() as u64, n)?;
        self.written += data.len() as u64;
        let mut expected = vec![0u8; data.len()];
        self.read(k, pd, addr, &mut expected, n)?;
        if expected != data {
            self.mismatches += 1;
        }
        Ok(())
    }
    fn atomic(&mut self, _: Key, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
        Err(AccessError::AccessDenied)
    }
}

#[test]
fn two_gib_write_in_one_message() {
    use weft_transport::{QpAttr, QpInit, QpState};
    let mut a = Endpoint::new(Config::default(), Synthetic::default());
    let mut b = Endpoint::new(
        Config {
            qpn_seed: 99,
            ..Config::default()
        },
        Synthetic::default(),
    );
    let init = QpInit {
        qp_type: QpType::Rc,
        pd: 1,
        max_send_wr: 4,
        max_recv_wr: 4,
        srq: None,
    };
    let qa = a.create_qp(init).unwrap();
    let qb = b.create_qp(init).unwrap();
    for (ep, me, peer, side) in [(&mut a, qa, qb, Side::A), (&mut b, qb, qa, Side::B)] {
        for s in [
            QpAttr {
                state: Some(QpState::Init),
                pkey: Some(0xffff),
                access: Some(Access::ALL),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rtr),
                path: Some(Pair::path(side, me)),
                path_mtu: Some(Mtu::M4096),
                dest_qpn: Some(peer),
                rq_psn: Some(Psn::new(0xff_ff00)),
                max_dest_rd_atomic: Some(1),
                min_rnr_timer: Some(1),
                max_inflight: Some(256),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rts),
                sq_psn: Some(Psn::new(0xff_ff00)),
                timeout: Some(10),
                retry_cnt: Some(7),
                rnr_retry: Some(7),
                max_rd_atomic: Some(1),
                ..QpAttr::default()
            },
        ] {
            ep.modify_qp(me, &s).unwrap();
        }
    }
    // A WRITE of exactly 2^31 bytes from A's [BASE, BASE + 2 GiB) to the same addresses on B.
    let wr = SendWr::new(
        1,
        WrOp::Write {
            remote: weft_transport::RemoteAddr {
                addr: BASE,
                rkey: 1,
            },
            imm: None,
        },
        vec![Sge {
            addr: BASE,
            len: LEN as u32,
            lkey: 1,
        }],
    );
    a.post_send(qa, wr).unwrap();
    // A lossless wire without a simulator: hand every packet straight across.
    let mut buf = vec![0u8; 4096 + weft_transport::MAX_OVERHEAD];
    let mut now = 0u64;
    let done = loop {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(Instant(now), &mut buf) {
            b.handle_packet(Instant(now), &t.path, &buf[..t.len]);
            moved = true;
        }
        while let Some(t) = b.poll_transmit(Instant(now), &mut buf) {
            a.handle_packet(Instant(now), &t.path, &buf[..t.len]);
            moved = true;
        }
        if let Some(c) = a.poll_completion() {
            break c;
        }
        assert!(moved, "stalled");
        now += 1;
    };
    assert_eq!(done.status, WcStatus::Success);
    assert_eq!(done.byte_len, 1 << 31);
    assert_eq!(b.mem().written, LEN);
    assert_eq!(b.mem().mismatches, 0, "writes that differ from the source");
    // 2^31 / 4096 packets; the PSN wrapped on the way.
    assert_eq!(a.stats().tx_packets, LEN / 4096);
    // One byte more is over the default 2^31 limit.
    let wr = SendWr::new(
        2,
        WrOp::Send { imm: None },
        vec![
            Sge {
                addr: BASE,
                len: u32::MAX,
                lkey: 1,
            },
            Sge {
                addr: BASE,
                len: 2,
                lkey: 1,
            },
        ],
    );
    a.post_send(qa, wr).unwrap();
    let mut buf2 = vec![0u8; 8192];
    let _ = a.poll_transmit(Instant(now), &mut buf2);
    assert_eq!(a.poll_completion().unwrap().status, WcStatus::LocLenErr);
}

#[test]
fn acks_carry_the_message_sequence_number() {
    let mut p = pair();
    let o = ConnectOptions::default();
    let c = p.connect(QpType::Rc, &o);
    let (_, rb) = big_regions(&mut p, MEM);
    for i in 0..3 {
        p.b.post_recv(c.qpn_b, recv(i, vec![sge(&rb, rb.addr + i * 64, 64)]))
            .unwrap();
    }
    let from = Pair::path(Side::A, c.qpn_a);
    let mut buf = vec![0u8; 8192];
    for i in 0..3u32 {
        let mut r = IbPacketRepr::new(BthRepr::new(
            Opcode::RC_SEND_ONLY,
            c.qpn_b,
            Psn::new(o.psn_a).add(i),
        ));
        r.bth.ack_req = true;
        let mut pkt = vec![0u8; r.buffer_len(4)];
        let n = r.emit(&mut pkt, b"msg!").unwrap();
        from.fill(&mut pkt[..n]).unwrap();
        p.b.handle_packet(p.now, &from, &pkt);
        // Answer each before the next arrives, so nothing is coalesced.
        let t = p.b.poll_transmit(p.now, &mut buf).unwrap();
        let ack = IbPacketRepr::parse(&IbPacket::new_checked(&buf[..t.len]).unwrap()).unwrap();
        let aeth = ack.aeth.unwrap();
        assert_eq!(aeth.msn, i + 1);
        assert_eq!(ack.bth.psn, Psn::new(o.psn_a).add(i));
        // Receives posted: 3 - (i + 1) left, advertised as end-to-end credits.
        let left = 2 - i;
        assert_eq!(
            aeth.syndrome,
            Syndrome::Ack {
                credit_code: weft_wire::roce::ext::code_from_credits(left)
            }
        );
    }
}

#[test]
fn receive_buffer_protection_error_is_nak_remote_operational() {
    let mut p = pair();
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let ra = reg(&mut p, Side::A, 4096, 65536, Access::ALL, 1);
    // The receive names a region B cannot write locally.
    let ro = reg(&mut p, Side::B, 4096, 1024, Access::NONE, 1);
    p.b.post_recv(c.qpn_b, recv(5, vec![sge(&ro, ro.addr, 64)]))
        .unwrap();
    p.a.post_send(c.qpn_a, send(1, vec![sge(&ra, ra.addr, 10)]))
        .unwrap();
    let ca = wait_completions(&mut p, Side::A, 1, 100_000);
    assert_eq!(ca[0].status, WcStatus::RemOpErr);
    let cb = completions(&mut p, Side::B);
    assert_eq!((cb[0].wr_id, cb[0].status), (5, WcStatus::LocProtErr));
}

#[test]
fn lost_atomic_ack_is_replayed_not_executed_twice() {
    let mut p = pair();
    let c = p.connect(
        QpType::Rc,
        &ConnectOptions {
            timeout: 4,
            ..ConnectOptions::default()
        },
    );
    let (ra, rb) = big_regions(&mut p, MEM);
    p.b.mem_mut().fill(rb.addr, &100u64.to_le_bytes());
    // B's first packet is the atomic ACK: lose it.
    p.ba.drop_nth.insert(1);
    let wr = SendWr::new(
        1,
        WrOp::FetchAdd {
            remote: remote(&rb, rb.addr),
            add: 5,
        },
        vec![sge(&ra, ra.addr, 8)],
    );
    p.a.post_send(c.qpn_a, wr).unwrap();
    let ca = wait_completions(&mut p, Side::A, 1, 1_000_000);
    assert_eq!(ca[0].status, WcStatus::Success);
    assert_eq!(p.a.stats().timeouts, 1);
    assert_eq!(p.b.stats().duplicate_requests, 1);
    assert_eq!(p.a.mem().bytes(ra.addr, 8), 100u64.to_le_bytes());
    assert_eq!(
        p.b.mem().bytes(rb.addr, 8),
        105u64.to_le_bytes(),
        "executed twice"
    );
}

/// `post_recvs` takes requests only while the receive queue has room and leaves the
/// rest with the caller; a request over the SGE cap is taken and refused with the
/// count of those before it; a QP on an SRQ takes nothing. The posted receives are
/// used in posting order.
#[test]
fn post_recvs_takes_what_fits_and_leaves_the_rest() {
    let mut p = pair();
    let o = ConnectOptions {
        depth: 4,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    let mut wrs = (0..6u64).map(|i| recv(10 + i, vec![sge(&rb, rb.addr + i * 64, 64)]));
    assert_eq!(p.b.post_recvs(c.qpn_b, 32, &mut wrs), Ok(4));
    assert_eq!(p.b.rq_room(c.qpn_b), Some(0));
    // The two that did not fit are still in the iterator, and a full queue takes none.
    assert_eq!(p.b.post_recvs(c.qpn_b, 32, &mut wrs), Ok(0));
    assert_eq!(wrs.map(|w| w.wr_id).collect::<Vec<_>>(), [14, 15]);
    for i in 0..2u64 {
        p.a.post_send(c.qpn_a, send(i, vec![sge(&ra, ra.addr, 64)]))
            .unwrap();
    }
    settle(&mut p, 100_000);
    let got: Vec<u64> = completions(&mut p, Side::B)
        .iter()
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(got, [10, 11]);
    // Two slots free: the first request has too many SGEs for a cap of 1, after one
    // posted.
    let two = vec![sge(&rb, rb.addr, 8), sge(&rb, rb.addr + 8, 8)];
    let mut wrs = [
        recv(20, vec![sge(&rb, rb.addr, 64)]),
        recv(21, two),
        recv(22, vec![sge(&rb, rb.addr, 64)]),
    ]
    .into_iter();
    assert_eq!(
        p.b.post_recvs(c.qpn_b, 1, &mut wrs),
        Err((1, PostError::TooManySge))
    );
    assert_eq!(wrs.map(|w| w.wr_id).collect::<Vec<_>>(), [22]);
    assert_eq!(p.b.rq_room(c.qpn_b), Some(1));
    // An unknown QP takes nothing.
    let mut wrs = [recv(30, vec![sge(&rb, rb.addr, 64)])].into_iter();
    assert_eq!(
        p.b.post_recvs(0xdead, 32, &mut wrs),
        Err((0, PostError::UnknownQp(0xdead)))
    );
    assert_eq!(wrs.count(), 1);
}

/// A QP on an SRQ takes no receives through `post_recvs`.
#[test]
fn post_recvs_on_a_qp_with_an_srq_takes_nothing() {
    let mut p = pair();
    let o = ConnectOptions {
        srq_b: true,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (_, rb) = big_regions(&mut p, MEM);
    let mut wrs = [recv(1, vec![sge(&rb, rb.addr, 64)])].into_iter();
    assert_eq!(
        p.b.post_recvs(c.qpn_b, 32, &mut wrs),
        Err((0, PostError::UsesSrq))
    );
    assert_eq!(wrs.count(), 1);
}

/// A borrowed send queue posts like `post_send`: its room counts down, the requests
/// arrive in posting order, and a post over the queue's depth is refused; an unknown
/// QP lends none.
#[test]
fn a_borrowed_send_queue_posts_in_order_and_keeps_the_depth() {
    let mut p = pair();
    let o = ConnectOptions {
        depth: 4,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    for i in 0..4u64 {
        p.b.post_recv(c.qpn_b, recv(i, vec![sge(&rb, rb.addr + i * 64, 64)]))
            .unwrap();
    }
    assert!(p.a.send_queue(0xdead).is_none());
    {
        let mut sq = p.a.send_queue(c.qpn_a).unwrap();
        assert_eq!(sq.room(), 4);
        for i in 0..3u64 {
            sq.post(send(10 + i, vec![sge(&ra, ra.addr, 64)])).unwrap();
        }
        sq.post_inline(send(13, vec![]), &[7u8; 16]).unwrap();
        assert_eq!(sq.room(), 0);
        assert_eq!(
            sq.post(send(14, vec![sge(&ra, ra.addr, 64)])),
            Err(PostError::QueueFull)
        );
        // Posted by reference and refused, inline or not: the request is left as it
        // came, so its owner may post it again.
        let mut wr = send(15, vec![sge(&ra, ra.addr, 64)]);
        let before = wr.clone();
        assert_eq!(
            sq.post_from(&mut wr, Some(&[1u8; 8])),
            Err(PostError::QueueFull)
        );
        assert_eq!(sq.post_from(&mut wr, None), Err(PostError::QueueFull));
        assert_eq!(wr, before);
    }
    settle(&mut p, 100_000);
    let sent: Vec<u64> = completions(&mut p, Side::A)
        .iter()
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(sent, [10, 11, 12, 13]);
    let got = completions(&mut p, Side::B);
    let lens: Vec<(u64, u32)> = got.iter().map(|c| (c.wr_id, c.byte_len)).collect();
    assert_eq!(lens, [(0, 64), (1, 64), (2, 64), (3, 16)]);
    assert_eq!(read_mem(p.b.mem(), rb.addr + 3 * 64, 16), [7u8; 16]);
}
