//! Incast through one shared bottleneck (`sim::run_incast`): without congestion
//! control the senders overflow the switch buffer and go-back-N collapses goodput;
//! with the delay-based window the queue stays short, retransmissions fall by an order
//! of magnitude and goodput stays near the line rate. Virtual time: deterministic, not
//! a timed test.
mod common;
use common::assert_no_stray_writes;
use weft_transport::sim::{
    run_incast, run_mix, ConnectOptions, IncastConfig, LinkConfig, MixConfig, OpMix, Pair,
};
use weft_transport::{Config, CongestionControl, DelayControl, QpType, Recovery};

fn delay(target_delay_us: u64) -> CongestionControl {
    CongestionControl::Delay(DelayControl {
        target_delay_us,
        ..DelayControl::default()
    })
}

fn incast(senders: usize, cc: CongestionControl, recovery: Recovery, seed: u64) -> IncastConfig {
    let mut c = IncastConfig {
        senders,
        recovery,
        seed,
        ..IncastConfig::default()
    };
    c.config.congestion = cc;
    c
}

#[test]
fn delay_window_prevents_congestion_collapse() {
    let limit = IncastConfig::default().bottleneck.queue_limit_bytes;
    for (senders, seed) in [(8, 1), (16, 2)] {
        let off = run_incast(&incast(
            senders,
            CongestionControl::Off,
            Recovery::GoBackN,
            seed,
        ));
        let on = run_incast(&incast(senders, delay(30), Recovery::GoBackN, seed));
        let msgs = senders as u64 * IncastConfig::default().messages;
        assert_eq!((on.completed, on.failed), (msgs, 0), "{on:?}");
        assert!(on.intact, "{on:?}");
        // The scenario is congested: without control the buffer overflows, goodput
        // collapses to a fraction of the line rate, and QPs that run out of retries
        // (retry_cnt 7) fail with RetryExcErr.
        assert_eq!(off.completed + off.failed, msgs, "{off:?}");
        assert!(
            off.queue_drops > 1000 && off.goodput_fraction < 0.5,
            "{off:?}"
        );
        // With it: near line rate, far fewer retransmissions, a short queue, and small
        // messages beside the flows wait less.
        assert!(on.goodput_fraction > 0.85, "{on:?}");
        assert!(
            on.retransmissions * 10 < off.retransmissions,
            "{on:?}\n{off:?}"
        );
        assert!(on.queue_drops * 10 < off.queue_drops, "{on:?}\n{off:?}");
        assert!(on.mean_queue_bytes * 2 < limit, "{on:?}");
        assert!(
            on.probe_p50_us * 3 / 2 < off.probe_p50_us,
            "{on:?}\n{off:?}"
        );
        assert!(on.rtt_samples > 0 && on.decreases > 0, "{on:?}");
        assert!(off.rtt_samples == 0 && off.decreases == 0, "{off:?}");
        // Every window ended inside its bounds, most of them below the fixed one.
        assert!(
            on.final_windows.iter().all(|&w| (1.0..=64.0).contains(&w)),
            "{on:?}"
        );
        assert!(off.final_windows.iter().all(|&w| w == 64.0), "{off:?}");
    }
}

#[test]
fn selective_recovery_gains_too() {
    let off = run_incast(&incast(8, CongestionControl::Off, Recovery::Selective, 3));
    let on = run_incast(&incast(8, delay(30), Recovery::Selective, 3));
    assert!(on.intact && off.intact, "{on:?}\n{off:?}");
    assert!(
        on.retransmissions * 4 < off.retransmissions,
        "{on:?}\n{off:?}"
    );
    assert!(on.goodput_fraction > 0.85, "{on:?}");
}

#[test]
fn incast_is_deterministic() {
    let c = incast(4, delay(30), Recovery::GoBackN, 7);
    assert_eq!(run_incast(&c), run_incast(&c));
}

#[test]
fn one_sender_under_the_target_keeps_the_full_window() {
    // A single flow through an unloaded bottleneck never sees its RTT reach a generous
    // target: the window stays at max_inflight and nothing is resent.
    let mut c = incast(1, delay(1000), Recovery::GoBackN, 4);
    c.probe_interval_us = 0;
    let r = run_incast(&c);
    assert!(
        r.intact && r.retransmissions == 0 && r.decreases == 0,
        "{r:?}"
    );
    assert_eq!(r.final_windows, vec![64.0]);
    assert!(r.goodput_fraction > 0.9, "{r:?}");
}

/// The invariants of tests/invariants.rs with a window that moves all the time (a
/// target below the path's RTT): every operation still completes exactly once, intact,
/// under loss, duplication, reordering and corruption.
#[test]
fn invariants_hold_with_a_moving_window() {
    for (seed, recovery) in [
        (1u64, Recovery::GoBackN),
        (2, Recovery::Selective),
        (3, Recovery::GoBackN),
        (4, Recovery::Selective),
    ] {
        let link = LinkConfig {
            loss: 0.01,
            duplicate: 0.01,
            reorder: 0.02,
            corrupt: 0.005,
            delay_us: 5,
            jitter_us: 3,
            ..LinkConfig::default()
        };
        let config = Config {
            congestion: delay(8 + seed),
            ..Config::default()
        };
        let mut p = Pair::new(config, 8 << 20, link, link, seed);
        let o = ConnectOptions {
            recovery,
            ..ConnectOptions::default()
        };
        let c = p.connect(QpType::Rc, &o);
        let cfg = MixConfig {
            ops: 300,
            max_len: 9000,
            window: 16,
            mix: OpMix::ALL,
            seed,
            time_limit_us: 200_000_000,
            unreliable: false,
            recvs: 0,
        };
        let r = run_mix(&mut p, &c, &cfg);
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        assert_eq!(r.completed, 300);
        let st = p.a.stats();
        assert!(st.cc_decreases > 0 && st.cc_rtt_samples > 0, "{st:?}");
        let w = p.a.congestion(c.qpn_a).map(|s| s.window).unwrap_or(0.0);
        assert!((1.0..=64.0).contains(&w), "{w}");
        assert_no_stray_writes(p.a.mem());
        assert_no_stray_writes(p.b.mem());
    }
}
