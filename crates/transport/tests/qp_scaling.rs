//! The endpoint's cost does not grow with idle QPs: the scheduler and the timer walk
//! visit only QPs with something to do. Counted ([`Stats::qp_visits`]), not timed.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, LinkConfig, Pair, Side};
use weft_transport::{Config, Instant, QpType, WcStatus, MAX_OVERHEAD};

const MEM: u64 = 1 << 20;

/// What `n` connected RC QPs cost: (visits of an idle round of calls, visits of one
/// SEND and its ACK on the last QP), summed over both sides.
fn costs(n: usize) -> (u64, u64) {
    let mut p = clean_pair(MEM as usize, 3);
    let (ra, rb) = big_regions(&mut p, MEM);
    let o = ConnectOptions {
        depth: 16,
        ..ConnectOptions::default()
    };
    let conns: Vec<_> = (0..n).map(|_| p.connect(QpType::Rc, &o)).collect();
    // Bringing a QP up queues it once (a state change is an input); the first calls
    // find nothing to send and let go of every one.
    settle(&mut p, 10_000);
    let visits = |p: &Pair| p.a.stats().qp_visits + p.b.stats().qp_visits;

    // An idle round: everything an engine pass asks the endpoint.
    let before = visits(&p);
    let mut buf = vec![0u8; 4096 + MAX_OVERHEAD];
    let later = Instant(p.now.micros() + 1_000_000);
    for side in [Side::A, Side::B] {
        let ep = p.ep(side);
        assert_eq!(ep.poll_transmit(later, &mut buf), None);
        assert_eq!(ep.poll_timeout(), None);
        ep.handle_timeout(later);
    }
    let idle = visits(&p) - before;

    // One SEND on the last QP, its ACK, and its timer armed and cancelled.
    let c = conns[n - 1];
    let before = visits(&p);
    p.b.post_recv(c.qpn_b, recv(1, vec![sge(&rb, rb.addr, 64)]))
        .unwrap();
    p.a.post_send(c.qpn_a, send(2, vec![sge(&ra, ra.addr, 64)]))
        .unwrap();
    assert!(
        p.a.poll_timeout().is_none(),
        "no timer before the send leaves"
    );
    let got = wait_completions(&mut p, Side::A, 1, 100_000);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].status, WcStatus::Success);
    settle(&mut p, 100_000);
    // The ACK cancelled the timer lazily: its entry stays until its time, when one
    // visit to its QP finds nothing due (no timeout, no retransmission) and drops it.
    let stale = p.a.poll_timeout().expect("the cancelled timer's entry");
    p.a.handle_timeout(stale);
    assert_eq!(p.a.stats().timeouts, 0);
    assert_eq!(p.a.poll_timeout(), None, "the stale entry was dropped");
    let mut buf = vec![0u8; 4096 + MAX_OVERHEAD];
    assert_eq!(
        p.a.poll_transmit(stale, &mut buf),
        None,
        "nothing to resend"
    );
    let one = visits(&p) - before;
    (idle, one)
}

#[test]
fn idle_qps_cost_nothing_and_one_message_costs_the_same_among_4096() {
    let (idle1, one1) = costs(1);
    let (idle4096, one4096) = costs(4096);
    assert_eq!(idle1, 0);
    assert_eq!(idle4096, 0, "an idle round visited QPs");
    assert!(one1 > 0);
    assert_eq!(
        one1, one4096,
        "one message among 4096 QPs visited more QPs than alone"
    );
}

#[test]
fn a_due_timer_visits_only_its_qp() {
    let mut p = Pair::new(
        Config::default(),
        MEM as usize,
        // Everything A sends is lost: the SEND times out and is retransmitted.
        LinkConfig::clean(5).with_loss(1.0),
        LinkConfig::clean(5),
        5,
    );
    let (ra, _rb) = big_regions(&mut p, MEM);
    let o = ConnectOptions {
        depth: 16,
        ..ConnectOptions::default()
    };
    let conns: Vec<_> = (0..1024).map(|_| p.connect(QpType::Rc, &o)).collect();
    settle(&mut p, 10_000);
    let c = conns[500];
    p.a.post_send(c.qpn_a, send(2, vec![sge(&ra, ra.addr, 64)]))
        .unwrap();
    let mut buf = vec![0u8; 4096 + MAX_OVERHEAD];
    let now = p.now;
    assert!(p.a.poll_transmit(now, &mut buf).is_some());
    let due = p.a.poll_timeout().expect("the SEND armed a timer");
    let before = p.a.stats().qp_visits;
    p.a.handle_timeout(due);
    assert_eq!(p.a.stats().timeouts, 1);
    assert_eq!(
        p.a.stats().qp_visits - before,
        1,
        "the timer walk visited other QPs"
    );
    // The retransmission is queued: one visit finds it.
    let before = p.a.stats().qp_visits;
    assert!(p.a.poll_transmit(due, &mut buf).is_some());
    assert_eq!(p.a.stats().qp_visits - before, 1);
    assert!(p.a.poll_timeout().is_some_and(|t| t > due), "re-armed");
}
