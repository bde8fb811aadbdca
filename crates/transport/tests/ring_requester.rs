//! The requester's side of the shm ring mode ([`weft_transport::ring`]), end to end in
//! the simulator's model of an shm connection (`Pair::use_rings`): A's SENDs and WRITEs
//! travel as descriptors, complete when B's consumer releases them, come back as
//! ERRORs when B refuses them; READs and atomics of the same QP still travel as
//! packets, over links that lose them.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, LinkConfig, Pair, Side};
use weft_transport::{
    Completion, Config, Instant, QpState, QpType, RemoteAddr, RingTag, SendWr, WcOpcode, WcStatus,
    WrOp,
};

const MEM: u64 = 1 << 20;
const LIMIT_US: u64 = 5_000_000;

struct Setup {
    p: Pair,
    qa: u32,
    qb: u32,
    ra: weft_transport::Region,
    rb: weft_transport::Region,
}

/// A connected pair in ring mode: rings with `delay_us` and up to `lag_us` of consumer
/// lag; packets (READs, atomics) over links with `loss`.
fn setup(o: &ConnectOptions, delay_us: u64, lag_us: u64, loss: f64, seed: u64) -> Setup {
    let mut p = Pair::new(
        Config::default(),
        MEM as usize,
        LinkConfig::clean(5).with_loss(loss),
        LinkConfig::clean(5).with_loss(loss),
        seed,
    );
    let c = p.connect(QpType::Rc, o);
    let (ra, rb) = big_regions(&mut p, MEM);
    p.use_rings(&c, delay_us, lag_us, seed ^ 0x5a5a);
    Setup {
        p,
        qa: c.qpn_a,
        qb: c.qpn_b,
        ra,
        rb,
    }
}

impl Setup {
    /// A's SEND of `data` (copied to A's region at `off`), inline or gathered.
    fn post_send(&mut self, wr_id: u64, off: u64, data: &[u8], inline: bool) {
        let addr = self.ra.addr + off;
        self.p.a.mem_mut().fill(addr, data);
        let mut wr = send(wr_id, vec![sge(&self.ra, addr, data.len() as u32)]);
        wr.inline = inline;
        self.p.a.post_send(self.qa, wr).unwrap();
    }

    /// A's WRITE of `data` (at A's `off`) to B's region at `to`.
    fn post_write(&mut self, wr_id: u64, off: u64, data: &[u8], to: u64, imm: Option<u32>) {
        let addr = self.ra.addr + off;
        self.p.a.mem_mut().fill(addr, data);
        let wr = SendWr::new(
            wr_id,
            WrOp::Write {
                remote: remote(&self.rb, self.rb.addr + to),
                imm,
            },
            vec![sge(&self.ra, addr, data.len() as u32)],
        );
        self.p.a.post_send(self.qa, wr).unwrap();
    }

    fn post_recv(&mut self, wr_id: u64, off: u64, len: u32) {
        let s = sge(&self.rb, self.rb.addr + off, len);
        self.p.b.post_recv(self.qb, recv(wr_id, vec![s])).unwrap();
    }

    fn wait(&mut self, side: Side, n: usize) -> Vec<Completion> {
        wait_completions(&mut self.p, side, n, LIMIT_US)
    }
}

fn ids(c: &[Completion]) -> Vec<u64> {
    c.iter().map(|c| c.wr_id).collect()
}

#[test]
fn sends_and_writes_travel_as_descriptors_and_complete_when_released() {
    let mut s = setup(&ConnectOptions::default(), 1, 0, 0.0, 1);
    for i in 0..8 {
        s.post_recv(100 + i, i * 256, 256);
    }
    for i in 0..8u64 {
        let data = pattern(i, 40 + i as usize * 20);
        if i % 2 == 0 {
            s.post_send(i, i * 256, &data, i % 4 == 0);
        } else {
            s.post_write(
                i,
                i * 256,
                &data,
                0x4_0000 + i * 256,
                (i == 7).then_some(77),
            );
        }
    }
    let a = s.wait(Side::A, 8);
    assert_eq!(ids(&a), (0..8).collect::<Vec<_>>());
    assert!(a.iter().all(|c| c.status == WcStatus::Success));
    // Four SENDs and one WRITE with immediate took B's receives, in order.
    let b = s.wait(Side::B, 5);
    assert_eq!(ids(&b), [100, 101, 102, 103, 104]);
    assert_eq!(b[4].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(b[4].imm, Some(77));
    for i in 0..8u64 {
        let data = pattern(i, 40 + i as usize * 20);
        let at = if i % 2 == 0 {
            s.rb.addr + (i / 2) * 256
        } else {
            s.rb.addr + 0x4_0000 + i * 256
        };
        assert_eq!(read_mem(s.p.b.mem(), at, data.len()), data, "message {i}");
    }
    // Nothing went as a packet either way: no request, no ACK.
    assert_eq!((s.p.ab.stats.sent, s.p.ba.stats.sent), (0, 0));
    assert_eq!(s.p.a.stats().ring_sent, 8);
    assert_eq!(s.p.ring_stats().unwrap().executed, 8);
    assert_no_stray_writes(s.p.b.mem());
}

/// RNR, ring style: SENDs posted before B has receives are refused one at a time; the
/// ones behind the refused one are discarded by B and their releases ignored by A
/// (a new epoch); A sends again from the refused one after its RNR timer; every
/// message lands once, in order.
#[test]
fn an_rnr_sends_the_requester_back_to_the_refused_message_and_nothing_is_lost() {
    let o = ConnectOptions {
        rnr_retry: 7,
        ..ConnectOptions::default()
    };
    let mut s = setup(&o, 1, 3, 0.0, 2);
    for i in 0..12u64 {
        s.post_send(i, i * 64, &pattern(i, 48), true);
    }
    // Let the first refusals happen, then post the receives a few at a time.
    settle(&mut s.p, 200);
    for i in 0..12u64 {
        s.post_recv(100 + i, i * 64, 64);
        settle(&mut s.p, 30 * (i % 3));
    }
    let a = s.wait(Side::A, 12);
    assert_eq!(ids(&a), (0..12).collect::<Vec<_>>());
    assert!(a.iter().all(|c| c.status == WcStatus::Success), "{a:?}");
    let b = s.wait(Side::B, 12);
    assert_eq!(ids(&b), (100..112).collect::<Vec<_>>());
    for i in 0..12u64 {
        assert_eq!(
            read_mem(s.p.b.mem(), s.rb.addr + i * 64, 48),
            pattern(i, 48)
        );
    }
    assert!(s.p.a.stats().rnr_naks_received > 0);
    assert!(s.p.ring_stats().unwrap().errors > 0);
    assert_eq!(s.p.a.qp_state(s.qa), Some(QpState::Rts));
}

#[test]
fn an_exhausted_rnr_budget_fails_the_message_and_flushes_the_rest() {
    let o = ConnectOptions {
        rnr_retry: 2,
        ..ConnectOptions::default()
    };
    let mut s = setup(&o, 1, 0, 0.0, 3);
    for i in 0..3u64 {
        s.post_send(i, i * 64, b"never received", true);
    }
    let a = s.wait(Side::A, 3);
    assert_eq!(
        a.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [
            (0, WcStatus::RnrRetryExcErr),
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(s.p.a.qp_state(s.qa), Some(QpState::Err));
    // Three refusals: the first and its two retries.
    assert_eq!(s.p.a.stats().rnr_naks_received, 3);
}

#[test]
fn a_write_the_peer_refuses_fails_with_its_nak_and_ends_both_qps() {
    let mut s = setup(&ConnectOptions::default(), 1, 0, 0.0, 4);
    s.post_write(1, 0, b"fine", 0, None);
    // An rkey B never gave out.
    let bad = SendWr::new(
        2,
        WrOp::Write {
            remote: RemoteAddr {
                addr: s.rb.addr,
                rkey: s.rb.rkey ^ 0x55,
            },
            imm: None,
        },
        vec![sge(&s.ra, s.ra.addr, 4)],
    );
    s.p.a.post_send(s.qa, bad).unwrap();
    s.post_write(3, 64, b"late", 64, None);
    let a = s.wait(Side::A, 3);
    assert_eq!(
        a.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [
            (1, WcStatus::Success),
            (2, WcStatus::RemAccessErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(s.p.a.qp_state(s.qa), Some(QpState::Err));
    assert_eq!(s.p.b.qp_state(s.qb), Some(QpState::Err));
    assert_eq!(read_mem(s.p.b.mem(), s.rb.addr, 4), b"fine");
    assert_ne!(read_mem(s.p.b.mem(), s.rb.addr + 64, 4), b"late");
}

/// A ring-mode QP still does READs and atomics, as packets, over a link that loses
/// them; a message of the other kind waits until what is in flight completed, so B
/// sees one stream in PSN order.
#[test]
fn reads_and_atomics_go_as_packets_between_descriptors_in_order() {
    let mut s = setup(&ConnectOptions::default(), 2, 4, 0.2, 5);
    s.p.b.mem_mut().fill(s.rb.addr + 0x8000, &pattern(9, 3000));
    s.p.b
        .mem_mut()
        .fill(s.rb.addr + 0x9000, &5u64.to_le_bytes());
    let mut want = Vec::new();
    for round in 0..4u64 {
        let id = round * 10;
        s.post_recv(id, round * 128, 128);
        s.post_send(id, round * 128, &pattern(id, 100), round % 2 == 0);
        let read = SendWr::new(
            id + 1,
            WrOp::Read {
                remote: remote(&s.rb, s.rb.addr + 0x8000),
            },
            vec![sge(&s.ra, s.ra.addr + 0x1_0000 + round * 0x1000, 3000)],
        );
        s.p.a.post_send(s.qa, read).unwrap();
        let add = SendWr::new(
            id + 2,
            WrOp::FetchAdd {
                remote: remote(&s.rb, s.rb.addr + 0x9000),
                add: 1,
            },
            vec![sge(&s.ra, s.ra.addr + 0x2_0000 + round * 8, 8)],
        );
        s.p.a.post_send(s.qa, add).unwrap();
        s.post_write(
            id + 3,
            0x3_0000 + round * 64,
            &pattern(id + 3, 64),
            0x6000 + round * 64,
            None,
        );
        want.extend([id, id + 1, id + 2, id + 3]);
    }
    let a = s.wait(Side::A, want.len());
    assert_eq!(ids(&a), want);
    assert!(a.iter().all(|c| c.status == WcStatus::Success), "{a:?}");
    for round in 0..4u64 {
        let got = read_mem(s.p.a.mem(), s.ra.addr + 0x1_0000 + round * 0x1000, 3000);
        assert_eq!(got, pattern(9, 3000));
        let old = read_mem(s.p.a.mem(), s.ra.addr + 0x2_0000 + round * 8, 8);
        assert_eq!(u64::from_le_bytes(old.try_into().unwrap()), 5 + round);
        let id = round * 10;
        assert_eq!(
            read_mem(s.p.b.mem(), s.rb.addr + round * 128, 100),
            pattern(id, 100)
        );
        assert_eq!(
            read_mem(s.p.b.mem(), s.rb.addr + 0x6000 + round * 64, 64),
            pattern(id + 3, 64)
        );
    }
    // The SENDs and WRITEs were descriptors; the READs and atomics were not.
    assert_eq!(s.p.a.stats().ring_sent, 8);
    assert!(s.p.ab.stats.sent >= 8);
}

/// A descriptor for a QP that takes none (here in ERR) is refused, not dropped: its
/// release alone would have told A that B executed it (found by review, session 34).
#[test]
fn a_descriptor_for_a_qp_in_error_fails_instead_of_completing() {
    let mut s = setup(&ConnectOptions::default(), 1, 0, 0.0, 9);
    s.post_recv(100, 0, 64);
    s.p.b
        .modify_qp(
            s.qb,
            &weft_transport::QpAttr {
                state: Some(QpState::Err),
                ..weft_transport::QpAttr::default()
            },
        )
        .unwrap();
    s.post_send(1, 0, b"x", true);
    let a = s.wait(Side::A, 1);
    assert_eq!((a[0].wr_id, a[0].status), (1, WcStatus::RemOpErr));
    assert_eq!(s.p.a.qp_state(s.qa), Some(QpState::Err));
}

/// The direct post (`SendQueue::post_ring`, the verbs engine's doorbell) writes the
/// descriptor at once, and its ACK timer runs from the driver's clock, not from a
/// send queue's time zero (found by review, session 34: every ping-pong message's
/// timer had already run out).
#[test]
fn a_direct_post_writes_its_descriptor_and_times_it_from_now() {
    let mut s = setup(&ConnectOptions::default(), 1, 0, 0.0, 10);
    let addr = s.ra.addr;
    s.p.a.mem_mut().fill(addr, b"direct");
    let mut wr = send(7, vec![sge(&s.ra, addr, 6)]);
    wr.inline = true;
    let now = Instant(1_000_000);
    let mut buf = vec![0u8; 4096 + weft_transport::MAX_OVERHEAD];
    let (len, tag) =
        s.p.a
            .send_queue(s.qa)
            .unwrap()
            .post_ring(now, &mut wr, None, &mut buf)
            .unwrap()
            .expect("written at once");
    assert_eq!(tag.qpn(), s.qa);
    let (d, payload) = weft_wire::ring::RingDescriptor::parse(&buf[..len]).unwrap();
    assert_eq!((d.dest_qpn, payload), (s.qb, &b"direct"[..]));
    let t = s.p.a.poll_timeout().expect("its ACK timer");
    assert!(t > now, "the timer runs from now: {t:?}");
    // Released, it completes.
    s.p.a.ring_released(now, tag);
    let a = completions(&mut s.p, Side::A);
    assert_eq!((a[0].wr_id, a[0].status), (7, WcStatus::Success));
}

#[test]
fn a_dead_connection_fails_what_was_not_released() {
    let mut s = setup(&ConnectOptions::default(), 50, 0, 0.0, 6);
    for i in 0..4u64 {
        s.post_recv(100 + i, i * 64, 64);
        s.post_send(i, i * 64, b"x", true);
    }
    // On the ring, not yet taken: the peer dies.
    settle(&mut s.p, 10);
    s.p.kill_rings();
    let a = s.wait(Side::A, 4);
    assert_eq!(
        a.iter().map(|c| c.status).collect::<Vec<_>>(),
        [
            WcStatus::RetryExcErr,
            WcStatus::WrFlushErr,
            WcStatus::WrFlushErr,
            WcStatus::WrFlushErr
        ]
    );
    assert_eq!(s.p.a.qp_state(s.qa), Some(QpState::Err));
}

/// A peer that stops taking from its ring: A's local ACK timer runs as RC's does for
/// a silent peer, `retry_cnt` times, and then the message fails. Nothing is sent
/// again (the ring lost nothing).
#[test]
fn a_peer_that_stops_taking_fails_the_message_after_the_retry_budget() {
    let o = ConnectOptions {
        timeout: 5,
        retry_cnt: 3,
        ..ConnectOptions::default()
    };
    let mut s = setup(&o, 100_000_000, 0, 0.0, 7);
    s.post_recv(100, 0, 64);
    s.post_send(1, 0, b"x", true);
    let a = s.wait(Side::A, 1);
    assert_eq!((a[0].wr_id, a[0].status), (1, WcStatus::RetryExcErr));
    assert_eq!(s.p.a.stats().timeouts, 4);
    assert_eq!(
        s.p.a.stats().ring_sent,
        1,
        "a ring descriptor is never resent"
    );
}

/// Releases that name nothing in flight — forged, for a message already complete, or
/// for one not sent — change nothing.
#[test]
fn a_release_that_names_nothing_in_flight_is_ignored() {
    let mut s = setup(&ConnectOptions::default(), 60, 0, 0.0, 8);
    s.post_recv(100, 0, 64);
    s.post_send(1, 0, b"x", true);
    settle(&mut s.p, 10);
    let now = s.p.now;
    let psn = ConnectOptions::default().psn_a;
    // The next PSN (not sent), a far one, another QP, the right PSN with a wrong epoch.
    for raw in [
        u64::from(s.qa) | (u64::from(psn + 1) << 32),
        u64::from(s.qa) | (0x77_7777 << 32),
        u64::from(s.qa ^ 1) | (u64::from(psn) << 32),
        u64::from(s.qa) | (9 << 24) | (u64::from(psn) << 32),
    ] {
        s.p.a.ring_released(now, RingTag::from_raw(raw));
        s.p.a.ring_lost(now, RingTag::from_raw(raw));
    }
    assert!(completions(&mut s.p, Side::A).is_empty());
    assert_eq!(s.p.a.qp_state(s.qa), Some(QpState::Rts));
    assert_eq!(s.p.a.stats().ring_stale, 8);
    // The real release still completes it.
    let a = s.wait(Side::A, 1);
    assert_eq!((a[0].wr_id, a[0].status), (1, WcStatus::Success));
}

/// Seeded runs of random mixes (SENDs inline or not, WRITEs with and without
/// immediate, READs; receives posted late enough for RNRs; consumer lag; lossy links
/// for the packets): every message completes once, successfully, in order, and B's
/// memory holds what A sent. Any failure replays from its seed.
#[test]
fn seeded_mixes_complete_in_order_with_the_right_bytes() {
    let (mut rnrs, mut discarded, mut stale, mut lost) = (0, 0, 0, 0);
    for seed in 0..40u64 {
        let mut rng = weft_transport::sim::Rng::new(seed);
        let o = ConnectOptions {
            rnr_retry: 7,
            min_rnr_timer: 1 + (seed % 3) as u8,
            ..ConnectOptions::default()
        };
        let loss = [0.0, 0.05, 0.2][(seed % 3) as usize];
        let mut s = setup(&o, 1 + rng.range(0, 3), rng.range(0, 20), loss, seed);
        let n = 30 + rng.range(0, 30);
        let mut recvs = 0u64;
        let mut want_b = Vec::new();
        let mut checks = Vec::new();
        for i in 0..n {
            let len = rng.range(0, 1100) as usize;
            let data = pattern(seed * 1000 + i, len);
            match rng.range(0, 4) {
                0 | 1 => {
                    s.post_send(i, i * 0x800, &data, len <= 256 && rng.chance(0.5));
                    want_b.push(i);
                    checks.push((0x4_0000 + want_b.len() as u64 * 0x800, data));
                }
                2 => {
                    let imm = rng.chance(0.3).then_some(i as u32);
                    let to = 0x8_0000 + i * 0x800;
                    s.post_write(i, i * 0x800, &data, to, imm);
                    if imm.is_some() {
                        want_b.push(i);
                    }
                    checks.push((to, data));
                }
                _ => {
                    let wr = SendWr::new(
                        i,
                        WrOp::Read {
                            remote: remote(&s.rb, s.rb.addr + 0xC_0000),
                        },
                        vec![sge(&s.ra, s.ra.addr + 0x8_0000 + i * 0x800, len as u32)],
                    );
                    s.p.a.post_send(s.qa, wr).unwrap();
                }
            }
            // Receives trail the posts, sometimes far enough for an RNR.
            while recvs < want_b.len() as u64 && rng.chance(0.7) {
                recvs += 1;
                s.post_recv(recvs, 0x4_0000 + recvs * 0x800, 0x800);
            }
            if rng.chance(0.3) {
                settle(&mut s.p, rng.range(0, 40));
            }
        }
        while recvs < want_b.len() as u64 {
            recvs += 1;
            s.post_recv(recvs, 0x4_0000 + recvs * 0x800, 0x800);
        }
        let a = s.wait(Side::A, n as usize);
        assert_eq!(ids(&a), (0..n).collect::<Vec<_>>(), "seed {seed}");
        assert!(
            a.iter().all(|c| c.status == WcStatus::Success),
            "seed {seed}: {a:?}"
        );
        let b = s.wait(Side::B, want_b.len());
        assert_eq!(b.len(), want_b.len(), "seed {seed}");
        assert!(b.iter().all(|c| c.status == WcStatus::Success));
        for (to, data) in checks {
            assert_eq!(
                read_mem(s.p.b.mem(), s.rb.addr + to, data.len()),
                data,
                "seed {seed} at {to:#x}"
            );
        }
        assert_no_stray_writes(s.p.b.mem());
        assert!(s.p.now < Instant(LIMIT_US * 4), "seed {seed} ran long");
        rnrs += s.p.a.stats().rnr_naks_received;
        discarded += s.p.ring_stats().unwrap().discarded;
        stale += s.p.a.stats().ring_stale;
        lost += s.p.ab.stats.lost + s.p.ba.stats.lost;
    }
    // The runs met what the test is for: refusals, descriptors discarded behind them
    // (whose releases A ignored), and lost packets.
    assert!(
        rnrs > 20 && discarded > 10 && stale > 20 && lost > 20,
        "{rnrs} {discarded} {stale} {lost}"
    );
}
