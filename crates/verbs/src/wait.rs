//! Waiting for completions as an application does: busy polling, blocking on a
//! completion channel, or adapting between the two ([`WaitMode`]).
//!
//! The adaptive wait is spin-then-block on the application's side (rsocket's
//! polling window, DPDK's power management), with the spin learned rather than
//! fixed, by the learner the engine thread uses for its own idle periods
//! ([`SpinBudget`]). Every wait records how long the completion took to exist: a
//! wait that ended while spinning, its own length; one that blocked, the time the
//! engine fired the channel, not the time this thread woke up. A blocked wait's
//! own length includes its wake-up — tens of µs on a quiet machine, milliseconds
//! beside CPU hogs or a busy engine — and recording that kept a waiter that
//! blocked once blocking for good in those runs (the peer's replies wait on this
//! side's wake-up too, so every wait then looks long). The wake-ups themselves
//! (firing to running) are recorded too, and the spin is never shorter than one:
//! spin-then-block's classic bound, a wait that outlasts the spin costs at most
//! twice what blocking at once would have. So a saturated stream spins (as busy
//! polling does), and where wake-ups are slow (a busy engine beside a large
//! transfer) it spins up to the 1 ms cap (docs/results/study.md, "The adaptive
//! run"). An application that comes straight back to wait (away less than a
//! wake-up between waits) spins the whole cap while long waits are rare and spinning
//! on through them finds them, so such a wait does not block it
//! ([`SpinBudget::next_wait_spin`]). An application behind a stream — its waits end
//! with batches of completions, queued while it waited or was away — spins through gaps of several
//! scheduler ticks: there its own blocking is what lengthens the gaps (its peer waits
//! for its wake-ups and blocks in turn), and beside one CPU hog both sides of a
//! saturated stream settled into blocking at a tenth of busy polling's rate
//! (docs/results/study.md, "The adaptive collapse, broken"); that long spin rests
//! where it costs more per completion than a wake-up per completion would (a slow
//! peer's own gaps: "The batch spin's ledger"). A wait that times out counts as a long one. When most recent waits outlasted the spin — a sparse stream, or replies
//! that come after the peer's own wake-ups — spinning would cost more than the
//! wake-ups it saves, and the waiter blocks at once: a wait within the spin saves a
//! wake-up less its length, one beyond it wastes the whole spin
//! ([`SpinBudget::next_spin`]). Blocked waits keep recording their gaps, so the
//! spin comes back when they shorten.

use std::time::{Duration, Instant};

use weft_transport::Completion;

use crate::adapt::SpinBudget;
use crate::cq::{CompletionChannel, CompletionQueue};
use crate::Error;

/// Polls between two looks at the clock in a busy-polling wait ([`WaitMode::Poll`]);
/// a power of two.
const POLLS_PER_CLOCK: u32 = 16;
const _: () = assert!(POLLS_PER_CLOCK.is_power_of_two());

/// A step between two polls of a spin longer than this was time the thread spent
/// off its core (preempted), not spinning: far above a poll of an empty queue (well
/// under a µs) and below a time slice (milliseconds).
const PREEMPTED: Duration = Duration::from_micros(50);

/// The end of a spin after a step from one poll (`last`) to the next (`now`): a step
/// longer than [`PREEMPTED`] moves it on by the step, never past `deadline`. The
/// spin's budget is time spent spinning: beside CPU hogs a spin that was preempted
/// for a time slice otherwise ran out while off its core and blocked at its first
/// poll back, though its peer had the same slice to run in and was about to answer
/// — so every preemption cost a blocked wait too (its engine thread's takeover, its
/// peer's wait for its wake-up).
fn spin_end_after(end: Instant, last: Instant, now: Instant, deadline: Instant) -> Instant {
    let step = now.saturating_duration_since(last);
    if step <= PREEMPTED || end >= deadline {
        return end;
    }
    end.checked_add(step).map_or(deadline, |e| e.min(deadline))
}

/// How [`Waiter::wait`] waits when the queue is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WaitMode {
    /// Spin on the queue (lowest latency; a core per waiting thread).
    Poll,
    /// Arm the queue and sleep on its completion channel (no CPU while waiting; a
    /// wake-up per wait).
    Block,
    /// Spin for a budget learned from the recent waits (at most
    /// [`Waiter::spin_cap`]; 16 times it behind a stream, and up to 4 times it
    /// where wake-ups cost more: [`SpinBudget::next_wait_spin`]), then block.
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
    /// Of the waits, blocked at once without spinning (an adaptive waiter whose
    /// recent waits outlasted any spin worth making; a blocking one always).
    pub at_once: u64,
    /// Of the waits, made with the long spin of an adaptive waiter behind a stream
    /// (its waits, or its polls, found batches of completions:
    /// [`SpinBudget::next_wait_spin`]).
    pub batch_spins: u64,
}

/// Waits for completions on one queue in a [`WaitMode`].
#[derive(Debug, Clone)]
pub struct Waiter {
    mode: WaitMode,
    learn: SpinBudget,
    stats: WaitStats,
    /// When the last wait (one that found the queue empty) ended: the time the
    /// application is away between waits is learned from it.
    last_end: Option<Instant>,
}

impl Waiter {
    /// The adaptive wait's longest spin by default. Well above a cross-core wake-up
    /// (38 µs quiet, 118 µs loaded: docs/results/ibverbs.md, "Link watch"), so a
    /// blocked wait of a short gap, wake-up included, still falls under it; and
    /// long enough that a peer preempted by CPU hogs, or replies queued behind a
    /// large transfer, keep the waiter spinning — there a wake-up costs more than
    /// the spin (docs/results/study.md, "The adaptive run").
    pub const DEFAULT_SPIN_CAP: Duration = SpinBudget::DEFAULT_CAP;

    /// The wake-up cost assumed before any was measured: a cross-core wake-up on a
    /// quiet machine.
    pub const ASSUMED_WAKE: Duration = SpinBudget::ASSUMED_WAKE;

    /// A waiter in `mode` with the default spin cap.
    pub fn new(mode: WaitMode) -> Waiter {
        Waiter::with_spin_cap(mode, Waiter::DEFAULT_SPIN_CAP)
    }

    /// A waiter whose adaptive spin is learned up to `cap` (and extended past it
    /// behind a stream or where wake-ups cost more, [`SpinBudget::next_wait_spin`]).
    pub fn with_spin_cap(mode: WaitMode, cap: Duration) -> Waiter {
        Waiter {
            mode,
            learn: SpinBudget::new(cap),
            stats: WaitStats::default(),
            last_end: None,
        }
    }

    /// Its mode.
    pub fn mode(&self) -> WaitMode {
        self.mode
    }

    /// The adaptive wait's longest spin.
    pub fn spin_cap(&self) -> Duration {
        self.learn.cap()
    }

    /// How its waits ended so far.
    pub fn stats(&self) -> WaitStats {
        self.stats
    }

    /// The adaptive spin: as long as a wake-up costs here (spin-then-block's
    /// classic bound: a wait that outlasts the spin costs at most twice what blocking
    /// at once would have), longer when the recent waits were short
    /// (four times their 75th percentile), at most the
    /// cap. Wake-ups measured [`Waiter::ASSUMED_WAKE`] on a quiet machine and
    /// milliseconds beside CPU hogs or a busy engine: there the waiter keeps
    /// spinning, which is what kept the latency in those runs. None at all when,
    /// on the recent waits, blocking at once would have cost less
    /// ([`SpinBudget::next_spin`]). The whole cap when the application comes
    /// straight back to wait, long waits are rare and spinning on through them has
    /// found them; 16 caps (at most 16 ms unless the cap is longer) when its waits
    /// end with batches — completions queued while it waited or was away, seen
    /// only when it polls for more than one (`max` > 1) — and it is busy, resting
    /// where that spin costs more per completion than a wake-up
    /// ([`SpinBudget::next_wait_spin`]).
    fn adaptive_spin(&self) -> Duration {
        self.learn.next_wait_spin()
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
            // Completions that queued up while the application was away are a batch
            // too (a client that spends longer sending its requests than it waits
            // for their replies: over udp beside a CPU hog its waits each ended
            // with one completion, docs/results/study.md, "The adaptive collapse,
            // broken"); one found at once says nothing.
            if n > 1 && self.mode == WaitMode::Adaptive {
                self.learn.found(n);
            }
            return Ok(n);
        }
        let channel = match (self.mode.needs_channel(), channel) {
            (true, None) => return Err(Error::NoChannel),
            (_, ch) => ch,
        };
        let start = Instant::now();
        if self.mode == WaitMode::Adaptive {
            if let Some(end) = self.last_end {
                self.learn.away(start.saturating_duration_since(end));
            }
        }
        let r = self.wait_empty(cq, channel, out, max, timeout, start);
        if self.mode == WaitMode::Adaptive {
            // How many completions the wait ended with: more than one queued up
            // while it waited (a batch, `SpinBudget::found`).
            if let Ok(n) = r {
                self.learn.found(n);
            }
            // A clock read per wait only where it is used: busy polling's one-way
            // latency over shm is 0.6 µs.
            self.last_end = Some(Instant::now());
        }
        r
    }

    /// [`Waiter::wait`] once the first poll found the queue empty, from `start`.
    fn wait_empty(
        &mut self,
        cq: &mut CompletionQueue,
        channel: Option<&CompletionChannel>,
        out: &mut Vec<Completion>,
        max: usize,
        timeout: Duration,
        start: Instant,
    ) -> Result<usize, Error> {
        let deadline = crate::deadline_after(timeout);
        let spin = match self.mode {
            WaitMode::Poll => timeout,
            WaitMode::Block => Duration::ZERO,
            WaitMode::Adaptive => self.adaptive_spin(),
        };
        self.stats.waits += 1;
        if spin.is_zero() {
            self.stats.at_once += 1;
        }
        if self.mode == WaitMode::Adaptive && self.learn.chose_batch_spin() {
            self.stats.batch_spins += 1;
        }
        // Spin (not at all when blocking at once: a completion that came since the
        // first poll is found by the poll after arming).
        let mut spin_end = if spin >= timeout {
            deadline
        } else {
            start + spin
        };
        // Busy polling spins to the timeout, seconds away: the clock every
        // [`POLLS_PER_CLOCK`] polls is plenty, and so is the pause hint. A clock read
        // (some 30 ns here) and a pause (15 ns) on every turn made the turn half again
        // as long as an empty poll (itself a progress pass), and a completion that
        // arrives waits on average half a turn to be found (shm one-way p50 0.97x
        // without them, ABAB). An adaptive spin's end is microseconds away: the clock
        // and the pause on every poll.
        // A mask, not a modulo by a variable: a division on every adaptive poll.
        let skip = if self.mode == WaitMode::Poll {
            POLLS_PER_CLOCK - 1
        } else {
            0
        };
        let mut polls = 0u32;
        let mut last = start;
        while !spin.is_zero() {
            let n = cq.poll(out, max);
            if n > 0 {
                self.stats.spun += 1;
                if self.mode == WaitMode::Adaptive {
                    self.learn.spun(start.elapsed());
                }
                return Ok(n);
            }
            polls = polls.wrapping_add(1);
            if polls & skip != 0 {
                continue;
            }
            let now = Instant::now();
            if self.mode == WaitMode::Adaptive {
                spin_end = spin_end_after(spin_end, last, now, deadline);
                last = now;
            }
            if now >= spin_end {
                break;
            }
            std::hint::spin_loop();
        }
        let Some(channel) = channel else {
            return Ok(0);
        };
        if spin_end >= deadline && Instant::now() >= deadline {
            // The spin ran to the timeout.
            if self.mode == WaitMode::Adaptive {
                self.learn.timed_out(start.elapsed(), start.elapsed());
            }
            return Ok(0);
        }
        // The same clock as the engine's firing time, read only on the way to block.
        let blocked_at = weft_link::monotonic_micros();
        // What the spin took: nothing when it blocked at once. Its first poll and
        // the arming are not a spin, and `SpinBudget::blocked` counts any spin here
        // as one that failed (the history that keeps a waiter spinning beside CPU
        // hogs once its own blocking has lengthened its gaps).
        let spun = if spin.is_zero() {
            Duration::ZERO
        } else {
            start.elapsed()
        };
        // Block: arm, look once more (a completion that raced with arming fires no
        // event), sleep on the channel.
        loop {
            cq.req_notify();
            let n = cq.poll(out, max);
            if n > 0 {
                self.stats.blocked += 1;
                if self.mode == WaitMode::Adaptive {
                    // Fired after this thread went to block: the wait lasted until
                    // then, and the rest was the wake-up. Otherwise the completion
                    // was there when it armed.
                    let fired = cq.fired_us();
                    let wake = (fired >= blocked_at).then(|| {
                        let woke = weft_link::monotonic_micros();
                        Duration::from_micros(woke.saturating_sub(fired))
                    });
                    let after = Duration::from_micros(fired.saturating_sub(blocked_at));
                    self.learn.blocked(spun, after, wake);
                }
                return Ok(n);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if self.mode == WaitMode::Adaptive {
                    self.learn.timed_out(spun, start.elapsed());
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn a_spin_preempted_for_a_time_slice_spins_on_for_as_long_after_it() {
        let t0 = Instant::now();
        let end = t0 + 1000 * US;
        let far = t0 + 1_000_000 * US;
        // Polls a fraction of a µs apart, or a slow one of 50 µs: spinning, the end
        // stays.
        assert_eq!(spin_end_after(end, t0, t0 + US, far), end);
        assert_eq!(spin_end_after(end, t0, t0 + 50 * US, far), end);
        // Off the core for a 3 ms slice from 200 µs into the spin: the end moves on
        // by the 3 ms, so 800 µs of spinning are left after it.
        let back = t0 + 3200 * US;
        let moved = spin_end_after(end, t0 + 200 * US, back, far);
        assert_eq!(moved, end + 3000 * US);
        assert_eq!(moved - back, 800 * US);
        // Never past the wait's deadline.
        let deadline = t0 + 2000 * US;
        assert_eq!(spin_end_after(end, t0 + 200 * US, back, deadline), deadline);
        assert_eq!(spin_end_after(deadline, t0, back, deadline), deadline);
    }
}
