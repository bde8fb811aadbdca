//! Waiting for completions as an application does: busy polling, blocking on a
//! completion channel, or adapting between the two ([`WaitMode`]).
//!
//! The adaptive wait is spin-then-block on the application's side (rsocket's
//! polling window, DPDK's power management), with the spin learned rather than
//! fixed, by the learner the engine thread uses for its own idle periods
//! ([`GapHistory`]). Every wait records how long it took, spun or blocked: a
//! blocked wait's time includes its own wake-up (tens of µs quiet, a hundred and
//! more loaded), which is why the cap is several wake-ups long — a stream whose
//! waits are short but blocked once still measures under the cap and goes back to
//! spinning, instead of blocking forever on the wake-ups it causes (the peer's
//! replies wait on this side's wake-up too). So a saturated stream spins (as busy
//! polling does), a sparse one blocks at once (≈ no CPU while idle), and the
//! middle ground — gaps of 50–200 µs — spins, paying CPU for latency.

use std::time::{Duration, Instant};

use weft_transport::Completion;

use crate::adapt::GapHistory;
use crate::cq::{CompletionChannel, CompletionQueue};
use crate::Error;

/// How [`Waiter::wait`] waits when the queue is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WaitMode {
    /// Spin on the queue (lowest latency; a core per waiting thread).
    Poll,
    /// Arm the queue and sleep on its completion channel (no CPU while waiting; a
    /// wake-up per wait).
    Block,
    /// Spin for a budget learned from the recent waits (at most
    /// [`Waiter::spin_cap`]), then block.
    #[default]
    Adaptive,
}

impl WaitMode {
    /// Whether the mode needs a completion channel.
    pub fn needs_channel(self) -> bool {
        self != WaitMode::Poll
    }
}

/// What a [`Waiter`] did: how its waits ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitStats {
    /// Calls that found the queue empty and waited.
    pub waits: u64,
    /// Of those, ended while spinning.
    pub spun: u64,
    /// Of those, ended after blocking on the channel.
    pub blocked: u64,
}

/// Waits for completions on one queue in a [`WaitMode`].
#[derive(Debug, Clone)]
pub struct Waiter {
    mode: WaitMode,
    cap: Duration,
    gaps: GapHistory,
    stats: WaitStats,
}

impl Waiter {
    /// The adaptive wait's longest spin by default: a few cross-core wake-ups (38 µs
    /// quiet, 118 µs loaded: docs/results/ibverbs.md, "Link watch"), so a blocked
    /// wait of a short gap, wake-up included, still falls under it.
    pub const DEFAULT_SPIN_CAP: Duration = Duration::from_micros(200);

    /// A waiter in `mode` with the default spin cap.
    pub fn new(mode: WaitMode) -> Waiter {
        Waiter::with_spin_cap(mode, Waiter::DEFAULT_SPIN_CAP)
    }

    /// A waiter whose adaptive spin is at most `cap`.
    pub fn with_spin_cap(mode: WaitMode, cap: Duration) -> Waiter {
        Waiter {
            mode,
            cap,
            gaps: GapHistory::default(),
            stats: WaitStats::default(),
        }
    }

    /// Its mode.
    pub fn mode(&self) -> WaitMode {
        self.mode
    }

    /// The adaptive wait's longest spin.
    pub fn spin_cap(&self) -> Duration {
        self.cap
    }

    /// How its waits ended so far.
    pub fn stats(&self) -> WaitStats {
        self.stats
    }

    /// Append up to `max` completions of `cq` to `out`, waiting up to `timeout` for at
    /// least one; returns how many (0: timed out). [`WaitMode::Block`] and
    /// [`WaitMode::Adaptive`] need the queue's `channel` ([`Error::NoChannel`] without);
    /// they consume the channel's events (acknowledged on `cq`), so the channel must
    /// serve this queue alone.
    pub fn wait(
        &mut self,
        cq: &mut CompletionQueue,
        channel: Option<&CompletionChannel>,
        out: &mut Vec<Completion>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, Error> {
        let n = cq.poll(out, max);
        if n > 0 {
            return Ok(n);
        }
        let channel = match (self.mode.needs_channel(), channel) {
            (true, None) => return Err(Error::NoChannel),
            (_, ch) => ch,
        };
        let start = Instant::now();
        let deadline = start + timeout;
        let spin = match self.mode {
            WaitMode::Poll => timeout,
            WaitMode::Block => Duration::ZERO,
            WaitMode::Adaptive => self.gaps.spin_budget(self.cap),
        };
        self.stats.waits += 1;
        // Spin.
        let spin_end = start + spin.min(timeout);
        loop {
            let n = cq.poll(out, max);
            if n > 0 {
                self.stats.spun += 1;
                if self.mode == WaitMode::Adaptive {
                    self.gaps.record(start.elapsed());
                }
                return Ok(n);
            }
            if Instant::now() >= spin_end {
                break;
            }
            std::hint::spin_loop();
        }
        let Some(channel) = channel else {
            return Ok(0);
        };
        // Block: arm, look once more (a completion that raced with arming fires no
        // event), sleep on the channel.
        loop {
            cq.req_notify();
            let n = cq.poll(out, max);
            if n > 0 {
                self.stats.blocked += 1;
                if self.mode == WaitMode::Adaptive {
                    self.gaps.record(start.elapsed());
                }
                return Ok(n);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(0);
            }
            match channel.get_cq_event(left) {
                Ok(_) => cq.ack_events(1),
                Err(Error::Timeout) => {}
                Err(e) => return Err(e),
            }
        }
    }
}
