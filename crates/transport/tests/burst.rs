//! `Endpoint::poll_transmit_burst` writes the packets that as many `poll_transmit`
//! calls would, in the same order: the same seeded run of several QPs each way (owed
//! ACKs beside requests, deficit round robin, multi-packet messages, loss, reordering,
//! duplication, corruption) is driven packet by packet and in bursts of several sizes,
//! and every packet both endpoints send, with its time, must be identical, and so must
//! every completion and every counter of both endpoints (the scheduler's visits too).
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, LinkConfig, Pair, Seen, Side};
use weft_transport::{Completion, Config, QpType, Stats, WcStatus};

const MEM: u64 = 4 << 20;
const QPS: usize = 3;
/// Messages each side posts on each QP.
const MSGS: u64 = 24;

/// `rate`: bytes per µs; a slow link makes the driver stop a burst for want of room.
fn faulty(rate: u64) -> LinkConfig {
    LinkConfig {
        rate_bytes_per_us: rate,
        loss: 0.02,
        duplicate: 0.01,
        reorder: 0.02,
        reorder_delay_us: 15,
        corrupt: 0.005,
        delay_us: 5,
        jitter_us: 2,
        ..LinkConfig::default()
    }
}

/// Everything both sides sent (side, time in µs, bytes), their completions, and their
/// counters.
type Trace = (
    Vec<(u8, u64, Vec<u8>)>,
    Vec<Completion>,
    Vec<Completion>,
    (Stats, Stats),
);

/// How the run's endpoints transmit.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tx {
    /// One `poll_transmit` a packet.
    Single,
    /// `poll_transmit_burst`, at most this many a call.
    Burst(usize),
    /// One `poll_transmit_alone` a packet, naming slots `0..k` in turn.
    Alone(u32),
}

fn run(seed: u64, rate: u64, tx: Tx) -> Trace {
    run_qps(seed, rate, tx, QPS)
}

fn run_qps(seed: u64, rate: u64, tx: Tx, qps: usize) -> Trace {
    run_with(seed, rate, tx, qps, false)
}

/// [`run_qps`]; with `rides`, owed ACKs ride along with their QP's next request
/// packet (`Config::ack_rides_reply`) and every fourth message of each side is
/// unsignaled (its AckReq clear, so its ACK is owed, not asked for).
fn run_with(seed: u64, rate: u64, tx: Tx, qps: usize, rides: bool) -> Trace {
    let mut p = Pair::new(
        Config {
            ack_rides_reply: rides,
            ..Config::default()
        },
        MEM as usize,
        faulty(rate),
        faulty(rate),
        seed,
    );
    match tx {
        Tx::Single => {}
        Tx::Burst(k) => p.transmit_in_bursts(Some(k)),
        Tx::Alone(k) => p.transmit_alone(Some(k)),
    }
    let (ra, rb) = big_regions(&mut p, MEM);
    let mut o = ConnectOptions {
        max_inflight: 16,
        ..ConnectOptions::default()
    };
    if rides {
        // A local ACK timeout long enough for the peer's ACK delay: unsignaled
        // messages leave AckReq clear (`Config::ack_delay_us`).
        o.timeout = 14;
    }
    let conns: Vec<_> = (0..qps).map(|_| p.connect(QpType::Rc, &o)).collect();
    // Sizes from one packet to many (MTU 1024): small messages beside long ones, so
    // the round robin's deficit runs out mid-message and turns pass between QPs.
    let size = |i: u64, q: usize| [64u32, 3000, 64, 20_000, 700, 9000][(i as usize + q) % 6];
    for (q, c) in conns.iter().enumerate() {
        for i in 0..MSGS {
            let len = size(i, q);
            let at = ((q as u64 * MSGS + i) * 32_768) % (MEM - 32_768);
            let id = (q as u64) << 32 | i;
            p.b.post_recv(c.qpn_b, recv(id, vec![sge(&rb, rb.addr + at, 32_768)]))
                .unwrap();
            p.a.post_recv(c.qpn_a, recv(id, vec![sge(&ra, ra.addr + at, 32_768)]))
                .unwrap();
            let mut wa = if i % 3 == 2 {
                write(
                    id,
                    remote(&rb, rb.addr + at),
                    vec![sge(&ra, ra.addr + at, len)],
                )
            } else {
                send(id, vec![sge(&ra, ra.addr + at, len)])
            };
            let mut wb = send(id, vec![sge(&rb, rb.addr + at, len)]);
            if rides && i % 4 == 1 {
                wa.signaled = false;
                wb.signaled = false;
            }
            p.a.post_send(c.qpn_a, wa).unwrap();
            p.b.post_send(c.qpn_b, wb).unwrap();
        }
    }
    let mut sent = Vec::new();
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    for _ in 0..2_000_000 {
        let more = p.step_with(None, &mut |s| {
            if let Seen::Sent { from, now, bytes } = s {
                sent.push((from as u8, now.micros(), bytes.to_vec()));
            }
        });
        ca.extend(completions(&mut p, Side::A));
        cb.extend(completions(&mut p, Side::B));
        if !more {
            break;
        }
    }
    let stats = (p.a.stats().clone(), p.b.stats().clone());
    (sent, ca, cb, stats)
}

#[test]
fn bursts_send_the_packets_of_single_calls_in_the_same_order() {
    // 1250 B/µs is the simulator's 10 Gb/s; 100 B/µs keeps the link busy, so bursts
    // end for want of room as often as for want of packets.
    for (seed, rate) in [(1, 1250), (7, 1250), (42, 1250), (3, 100), (9, 100)] {
        let (sent, ca, cb, stats) = run(seed, rate, Tx::Single);
        // The run did what it is for: every message of both sides completed, over
        // lossy links (so retransmissions are in the trace too).
        let sends = QPS * MSGS as usize;
        let ok = |c: &[Completion]| c.iter().filter(|c| c.status == WcStatus::Success).count();
        assert_eq!(ok(&ca), 2 * sends, "seed {seed}: A's sends and receives");
        assert_eq!(
            ok(&cb),
            sends + sends * 2 / 3,
            "seed {seed}: B's sends and receives"
        );
        assert!(
            sent.len() > 2 * sends * 5,
            "seed {seed}: {} packets",
            sent.len()
        );
        for k in [1, 2, 5, 64] {
            let (bsent, bca, bcb, bstats) = run(seed, rate, Tx::Burst(k));
            assert_eq!(
                bsent.len(),
                sent.len(),
                "seed {seed}, bursts of {k}: packet count"
            );
            if let Some(i) = (0..sent.len()).find(|&i| sent[i] != bsent[i]) {
                let at = |t: &(u8, u64, Vec<u8>)| (t.0, t.1, t.2.len());
                panic!(
                    "seed {seed}, bursts of {k}: packet {i} (side, µs, length) {:?}, in bursts {:?}",
                    at(&sent[i]),
                    at(&bsent[i])
                );
            }
            assert_eq!(bca, ca, "seed {seed}, bursts of {k}: A's completions");
            assert_eq!(bcb, cb, "seed {seed}, bursts of {k}: B's completions");
            assert_eq!(
                bstats.0, stats.0,
                "seed {seed}, bursts of {k}: A's counters"
            );
            assert_eq!(
                bstats.1, stats.1,
                "seed {seed}, bursts of {k}: B's counters"
            );
        }
    }
}

/// `poll_transmit_alone` writes the packets `poll_transmit` would, whichever slot it
/// is told: the lone queued QP's (its turn taken directly), another's, or none (then it
/// is `poll_transmit`). One QP each way (the turn taken directly most of the time) and
/// several (a QP alone in the queue now and then), over the lossy links above: every
/// packet with its time, every completion and every counter must be the same.
#[test]
fn a_lone_qps_direct_turn_sends_the_packets_of_single_calls() {
    for (seed, rate) in [(1, 1250), (5, 1250), (3, 100)] {
        for qps in [1, QPS] {
            let (sent, ca, cb, stats) = run_qps(seed, rate, Tx::Single, qps);
            let sends = qps * MSGS as usize;
            assert!(
                sent.len() > 2 * sends * 5,
                "seed {seed}: {} packets",
                sent.len()
            );
            for k in [1, 2, 4] {
                let (asent, aca, acb, astats) = run_qps(seed, rate, Tx::Alone(k), qps);
                let what = format!("seed {seed}, {qps} QPs, slots 0..{k}");
                assert_eq!(asent.len(), sent.len(), "{what}: packet count");
                if let Some(i) = (0..sent.len()).find(|&i| sent[i] != asent[i]) {
                    let at = |t: &(u8, u64, Vec<u8>)| (t.0, t.1, t.2.len());
                    panic!(
                        "{what}: packet {i} {:?}, alone {:?}",
                        at(&sent[i]),
                        at(&asent[i])
                    );
                }
                assert_eq!(aca, ca, "{what}: A's completions");
                assert_eq!(acb, cb, "{what}: B's completions");
                assert_eq!(astats.0, stats.0, "{what}: A's counters");
                assert_eq!(astats.1, stats.1, "{what}: B's counters");
            }
        }
    }
}

/// The same three ways of transmitting (single calls, bursts, a lone QP's direct turn)
/// with owed ACKs riding along with their QP's next request packet
/// (`Config::ack_rides_reply`): a ride queues the ACK inside a turn, as the QP's next
/// packet, and every way must send the same packets at the same times, and end with
/// the same completions and counters. The runs do ride (`Stats::acks_with_reply`).
#[test]
fn riding_acks_leave_the_same_way_in_bursts_and_lone_turns() {
    let mut rode = 0;
    for (seed, rate) in [(1, 1250), (7, 1250), (3, 100)] {
        for qps in [1, QPS] {
            let (sent, ca, cb, stats) = run_with(seed, rate, Tx::Single, qps, true);
            rode += stats.0.acks_with_reply + stats.1.acks_with_reply;
            assert!(
                ca.iter().chain(&cb).all(|c| c.status == WcStatus::Success),
                "seed {seed}, {qps} QPs: every message went through"
            );
            assert_eq!(stats.0.messages_completed, (qps as u64) * MSGS);
            assert_eq!(stats.1.messages_completed, (qps as u64) * MSGS);
            for tx in [
                Tx::Burst(1),
                Tx::Burst(5),
                Tx::Burst(64),
                Tx::Alone(1),
                Tx::Alone(4),
            ] {
                let (osent, oca, ocb, ostats) = run_with(seed, rate, tx, qps, true);
                let what = format!("seed {seed}, {qps} QPs, {tx:?}");
                assert_eq!(osent.len(), sent.len(), "{what}: packet count");
                if let Some(i) = (0..sent.len()).find(|&i| sent[i] != osent[i]) {
                    let at = |t: &(u8, u64, Vec<u8>)| (t.0, t.1, t.2.len());
                    panic!(
                        "{what}: packet {i} {:?}, here {:?}",
                        at(&sent[i]),
                        at(&osent[i])
                    );
                }
                assert_eq!(oca, ca, "{what}: A's completions");
                assert_eq!(ocb, cb, "{what}: B's completions");
                assert_eq!(ostats.0, stats.0, "{what}: A's counters");
                assert_eq!(ostats.1, stats.1, "{what}: B's counters");
            }
        }
    }
    assert!(rode > 0, "no ACK rode along in any run");
}
