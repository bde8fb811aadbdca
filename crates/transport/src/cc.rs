//! Congestion control of one RC requester: a delay-based congestion window in
//! packets, after Swift (Kumar et al., SIGCOMM 2020).
//!
//! Why delay and not ECN (DCQCN): the signal must reach the sans-IO core on every
//! link weft runs on. A UDP socket sees no ECN bits unless the driver enables
//! `IP_RECVTOS` and carries the TOS byte up with every packet, and shm has no queue
//! to mark at all; a round-trip time the requester measures itself — from its own
//! send time of a PSN to the ACK that covers it — needs nothing from the kernel and
//! no cooperation from the peer (any RoCEv2 responder, rdma_rxe included, answers an
//! AckReq). RoCEv2 CNPs are still only counted ([`crate::Stats::cnp_received`]).
//!
//! The rules, per RC QP (Swift §3.1, without its pacing below one packet and its
//! flow-count scaling of the target):
//! - the window starts at the QP's `max_inflight` (RoCE starts at line rate) and
//!   stays within `[min_window, max_inflight]`; the requester sends while
//!   `send_psn < una + floor(window)`;
//! - an ACK whose RTT is below `target_delay_us` grows it by `additive_increase`
//!   packets per window of acknowledged packets (`ai · acked / window`): one packet per
//!   round trip by default;
//! - an ACK at or above the target shrinks it once per round trip by
//!   `beta · (rtt − target) / rtt`, at most by `max_decrease`: the farther over the
//!   target, the harder, never more than halved by default;
//! - a loss (a NAK-sequence, or a SACK in selective mode) shrinks it by `max_decrease`
//!   once per round trip; a retransmission timeout, always.
//!
//! An RTT sample comes only from a first transmission that asked for the ACK
//! (Karn's rule: a resent PSN's ACK cannot say which copy it answers), so a round
//! trip gives one sample per AckReq (every `ack_req_interval` PSNs, every message's
//! last packet, and the packet that fills the window). The window is a float; no
//! arithmetic here can panic, and a NaN or infinite input leaves the window within
//! its bounds.

use crate::time::Instant;

/// What an endpoint does about congestion ([`crate::Config::congestion`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CongestionControl {
    /// A fixed window: every RC QP sends up to its `max_inflight` PSNs.
    Off,
    /// A delay-based window per RC QP (this module's doc).
    Delay(DelayControl),
}

/// The parameters of the delay-based window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelayControl {
    /// The round-trip time (µs) the window steers to: below it the window grows, at or
    /// above it shrinks. It must exceed the path's unloaded RTT (a software stack's
    /// included) by the queue one may build; docs/results/incast.md has the values
    /// measured.
    pub target_delay_us: u64,
    /// Packets added per round trip while under the target.
    pub additive_increase: f64,
    /// How hard a sample over the target shrinks the window (Swift's β).
    pub beta: f64,
    /// The largest fraction one decrease takes (Swift's max_mdf).
    pub max_decrease: f64,
    /// The smallest window, in packets (at least 1: below one packet Swift paces,
    /// which weft does not).
    pub min_window: f64,
}

impl Default for DelayControl {
    fn default() -> DelayControl {
        DelayControl {
            target_delay_us: 200,
            additive_increase: 1.0,
            beta: 0.8,
            max_decrease: 0.5,
            min_window: 1.0,
        }
    }
}

/// A QP's congestion state, as [`crate::Endpoint::congestion`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CongestionState {
    /// The window in packets (fractional); the QP's `max_inflight` when off.
    pub window: f64,
    /// The last RTT sample (µs), 0 before the first.
    pub last_rtt_us: u64,
    /// The smallest RTT sample (µs), 0 before the first.
    pub min_rtt_us: u64,
    /// RTT samples taken.
    pub rtt_samples: u64,
    /// Times the window shrank.
    pub decreases: u64,
}

/// The window of one requester.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    window: f64,
    /// The ceiling: the QP's `max_inflight`.
    max: f64,
    last_decrease: Option<Instant>,
    last_rtt_us: u64,
    min_rtt_us: u64,
    samples: u64,
    decreases: u64,
}

impl Window {
    /// A window at its ceiling of `max` packets.
    pub fn new(max: u32) -> Window {
        let max = f64::from(max.max(1));
        Window {
            window: max,
            max,
            last_decrease: None,
            last_rtt_us: 0,
            min_rtt_us: 0,
            samples: 0,
            decreases: 0,
        }
    }

    /// PSNs the requester may have in flight: the window rounded down, at least 1.
    pub fn packets(&self) -> u64 {
        // `as` saturates and maps NaN to 0; the bounds keep it finite anyway.
        (self.window as u64).max(1)
    }

    pub fn state(&self) -> CongestionState {
        CongestionState {
            window: self.window,
            last_rtt_us: self.last_rtt_us,
            min_rtt_us: self.min_rtt_us,
            rtt_samples: self.samples,
            decreases: self.decreases,
        }
    }

    fn clamp(&mut self, c: &DelayControl) {
        let lo = if c.min_window.is_finite() {
            c.min_window.clamp(1.0, self.max)
        } else {
            1.0
        };
        self.window = if self.window.is_nan() {
            lo
        } else {
            self.window.max(lo).min(self.max)
        };
    }

    /// At most one decrease per round trip (the last sample's; any time before the
    /// first sample).
    fn may_decrease(&self, now: Instant) -> bool {
        self.last_decrease
            .is_none_or(|t| now - t >= self.last_rtt_us)
    }

    fn shrink(&mut self, c: &DelayControl, now: Instant, factor: f64) -> bool {
        if factor.is_nan() || factor >= 1.0 {
            return false;
        }
        self.window *= factor.max(0.0);
        self.clamp(c);
        self.last_decrease = Some(now);
        self.decreases += 1;
        true
    }

    /// The fraction a decrease keeps at most: `1 - max_decrease`, sane if it is not.
    fn floor_factor(c: &DelayControl) -> f64 {
        let m = if c.max_decrease.is_finite() {
            c.max_decrease.clamp(0.0, 1.0)
        } else {
            0.5
        };
        1.0 - m
    }

    /// An ACK answered a first transmission after `rtt_us`, and `acked` PSNs became
    /// delivered. Returns true when the window shrank.
    pub fn on_rtt(&mut self, c: &DelayControl, now: Instant, rtt_us: u64, acked: u64) -> bool {
        self.samples += 1;
        self.last_rtt_us = rtt_us;
        if self.min_rtt_us == 0 || rtt_us < self.min_rtt_us {
            self.min_rtt_us = rtt_us;
        }
        let target = c.target_delay_us;
        if rtt_us < target {
            let ai = if c.additive_increase.is_finite() {
                c.additive_increase.max(0.0)
            } else {
                0.0
            };
            let acked = acked as f64;
            self.window += if self.window >= 1.0 {
                ai * acked / self.window
            } else {
                ai * acked
            };
            self.clamp(c);
            return false;
        }
        if !self.may_decrease(now) {
            return false;
        }
        let beta = if c.beta.is_finite() {
            c.beta.max(0.0)
        } else {
            0.0
        };
        let excess = (rtt_us - target) as f64 / (rtt_us.max(1)) as f64;
        let factor = (1.0 - beta * excess).max(Self::floor_factor(c));
        self.shrink(c, now, factor)
    }

    /// A loss signal (NAK-sequence, SACK). Returns true when the window shrank.
    pub fn on_loss(&mut self, c: &DelayControl, now: Instant) -> bool {
        if !self.may_decrease(now) {
            return false;
        }
        self.shrink(c, now, Self::floor_factor(c))
    }

    /// A retransmission timeout: always shrinks.
    pub fn on_timeout(&mut self, c: &DelayControl, now: Instant) -> bool {
        self.shrink(c, now, Self::floor_factor(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_under_target_by_one_packet_per_window() {
        let c = DelayControl::default();
        let mut w = Window::new(64);
        w.window = 10.0;
        for _ in 0..10 {
            assert!(!w.on_rtt(&c, Instant(0), 50, 1));
        }
        // Ten ACKs of one packet at window ~10: about one packet more.
        assert!((w.window - 11.0).abs() < 0.1, "{}", w.window);
        assert_eq!(w.packets(), 10);
    }

    #[test]
    fn shrinks_in_proportion_to_the_excess_once_per_rtt() {
        let c = DelayControl::default();
        let mut w = Window::new(64);
        // rtt 400 against target 200: 1 - 0.8 * 200/400 = 0.6.
        assert!(w.on_rtt(&c, Instant(1000), 400, 1));
        assert!((w.window - 64.0 * 0.6).abs() < 1e-9);
        // Within the same round trip: no second decrease.
        assert!(!w.on_rtt(&c, Instant(1200), 400, 1));
        assert!(w.on_rtt(&c, Instant(1400), 400, 1));
        // Far over the target: at most halved (a round trip of this sample later).
        let before = w.window;
        assert!(!w.on_rtt(&c, Instant(100_000), 1_000_000, 1));
        assert!(w.on_rtt(&c, Instant(1_200_000), 1_000_000, 1));
        assert!((w.window - before * 0.5).abs() < 1e-9);
        assert_eq!(w.state().decreases, 3);
    }

    #[test]
    fn stays_within_bounds_on_any_input() {
        let bad = DelayControl {
            target_delay_us: 0,
            additive_increase: f64::NAN,
            beta: f64::INFINITY,
            max_decrease: f64::NAN,
            min_window: f64::NEG_INFINITY,
        };
        let huge = DelayControl {
            target_delay_us: u64::MAX,
            additive_increase: 1e300,
            beta: -5.0,
            max_decrease: 7.0,
            min_window: 1e9,
        };
        for c in [bad, huge, DelayControl::default()] {
            let mut w = Window::new(32);
            for (i, rtt) in [0, 1, u64::MAX, 5, u64::MAX / 2, 0].into_iter().enumerate() {
                let now = Instant(u64::MAX / 8 * i as u64);
                w.on_rtt(&c, now, rtt, u64::MAX);
                w.on_loss(&c, now);
                w.on_timeout(&c, now);
                assert!(w.window >= 1.0 && w.window <= 32.0, "{c:?}: {}", w.window);
                assert!((1..=32).contains(&w.packets()));
            }
        }
    }

    #[test]
    fn timeouts_reach_the_floor_and_losses_are_rate_limited() {
        let c = DelayControl::default();
        let mut w = Window::new(64);
        w.on_rtt(&c, Instant(0), 100, 1); // a 100 µs round trip
        assert!(w.on_loss(&c, Instant(10)));
        assert!(!w.on_loss(&c, Instant(50)));
        assert!(w.on_loss(&c, Instant(200)));
        for t in 0..10 {
            w.on_timeout(&c, Instant(300 + t));
        }
        assert_eq!(w.packets(), 1);
        assert_eq!(w.window, 1.0);
    }
}
