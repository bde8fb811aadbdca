//! How an idle loop (a server's cluster head, a client's dispatcher) waits for its
//! next event: spin, then block on its completion channel (or park, with inline
//! progress). The spin is learned by default ([`IdleSpin::Adaptive`]) from the
//! loop's own recent gaps between events and its measured wake-ups, by the learner
//! weft-verbs' adaptive completion wait uses ([`weft_verbs::SpinBudget`]).

use std::time::{Duration, Instant};
use weft_verbs::SpinBudget;

/// How long an idle loop (a server's cluster head, a client's dispatcher) spins
/// before it blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdleSpin {
    /// Learned ([`weft_verbs::SpinBudget`]): at least one measured wake-up, four
    /// times the recent short gaps between events, at most `cap`. Back-to-back
    /// requests keep the loop spinning; sparse ones (gaps beyond the cap) make it
    /// spin about one wake-up and block.
    Adaptive {
        /// The longest spin.
        cap: Duration,
    },
    /// Always this long, whatever the traffic (weft-rpc's constant before issue 16:
    /// [`IdleSpin::FIXED_BEFORE`]).
    Fixed(Duration),
}

impl Default for IdleSpin {
    fn default() -> IdleSpin {
        IdleSpin::Adaptive {
            cap: SpinBudget::DEFAULT_CAP,
        }
    }
}

impl IdleSpin {
    /// The fixed spin weft-rpc used before it learned one (50 µs).
    pub const FIXED_BEFORE: IdleSpin = IdleSpin::Fixed(Duration::from_micros(50));
}

/// The learned spin yields the CPU once in this many turns ([`IdleLoop::pause`]).
const POLITE_EVERY: u32 = 16;

/// How an idle loop's idle periods ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IdleCounts {
    /// Ended with an event found while spinning.
    pub spun: u64,
    /// Ended with an event after the loop blocked.
    pub blocked: u64,
}

/// What an idle loop does after a poll that found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Keep spinning: poll again.
    Spin,
    /// The spin is over: arm the completion channel and poll once more (an event
    /// that came before arming fires nothing), then block if that poll is empty.
    Arm,
    /// Block (the channel is armed): on the channel, or park without one.
    Block,
}

/// One loop's idle state: the current idle period, the learner, the counts.
#[derive(Debug, Clone)]
pub(crate) struct IdleLoop {
    spin: IdleSpin,
    learn: SpinBudget,
    /// The current idle period: when it began.
    since: Option<Instant>,
    /// Its spin.
    budget: Duration,
    /// How long it spun before it first blocked.
    spun_for: Duration,
    /// When it first and last went to block (`weft_verbs::monotonic_micros`; 0:
    /// not yet).
    first_block_us: u64,
    last_block_us: u64,
    armed: bool,
    /// Whether the loop blocks on a completion channel (else it yields and parks:
    /// nothing to arm).
    channel: bool,
    /// Spins so far, for [`IdleLoop::pause`].
    spins: u32,
    counts: IdleCounts,
}

impl IdleLoop {
    /// `channel`: the loop blocks on a completion channel, which it arms first.
    pub(crate) fn new(spin: IdleSpin, channel: bool) -> IdleLoop {
        let cap = match spin {
            IdleSpin::Adaptive { cap } => cap,
            IdleSpin::Fixed(d) => d,
        };
        IdleLoop {
            spin,
            learn: SpinBudget::new(cap),
            since: None,
            budget: Duration::ZERO,
            spun_for: Duration::ZERO,
            first_block_us: 0,
            last_block_us: 0,
            armed: false,
            channel,
            spins: 0,
            counts: IdleCounts::default(),
        }
    }

    /// The spin of the next idle period.
    pub(crate) fn budget(&self) -> Duration {
        match self.spin {
            IdleSpin::Adaptive { .. } => self.learn.spin(),
            IdleSpin::Fixed(d) => d,
        }
    }

    pub(crate) fn counts(&self) -> IdleCounts {
        self.counts
    }

    /// How long the current idle period has lasted (zero when busy).
    pub(crate) fn idle_for(&self) -> Duration {
        self.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// One turn of the spin. The learned spin may last up to its cap (1 ms by
    /// default), so it yields the CPU every [`POLITE_EVERY`]th turn: on a machine
    /// with more busy threads than cores, a millisecond of pure spinning keeps the
    /// threads this loop waits for (the caller it must wake, the peer) off the CPU
    /// (measured: p99 about 1 ms with 32 calls in flight on 2 cores). A fixed spin
    /// spins as before.
    pub(crate) fn pause(&mut self) {
        self.spins = self.spins.wrapping_add(1);
        if matches!(self.spin, IdleSpin::Adaptive { .. }) && self.spins % POLITE_EVERY == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    /// A poll found nothing.
    pub(crate) fn empty(&mut self) -> Next {
        let since = match self.since {
            Some(s) => s,
            None => {
                self.budget = self.budget();
                self.first_block_us = 0;
                self.armed = false;
                let now = Instant::now();
                self.since = Some(now);
                now
            }
        };
        if self.first_block_us == 0 && !self.armed && since.elapsed() < self.budget {
            return Next::Spin;
        }
        if self.first_block_us == 0 {
            self.spun_for = since.elapsed();
        }
        if !self.armed && self.channel {
            self.armed = true;
            return Next::Arm;
        }
        // Blocks now; the next empty poll (after a timeout or an event that brought
        // nothing this loop takes) arms again.
        self.armed = false;
        self.last_block_us = weft_verbs::monotonic_micros();
        if self.first_block_us == 0 {
            self.first_block_us = self.last_block_us;
        }
        Next::Block
    }

    /// A poll found work. `fired_us`: when the loop's completion channel last
    /// fired (`None` without a channel). True when it ended an idle period.
    pub(crate) fn event(&mut self, fired_us: Option<u64>) -> bool {
        let Some(since) = self.since.take() else {
            return false;
        };
        self.armed = false;
        if self.first_block_us == 0 {
            self.counts.spun += 1;
            self.learn.spun(since.elapsed());
            return true;
        }
        self.counts.blocked += 1;
        let now_us = weft_verbs::monotonic_micros();
        let (slept, wake) = match fired_us {
            // It fired while the loop slept the last time: the rest was the wake-up.
            Some(f) if f >= self.last_block_us => (
                f.saturating_sub(self.first_block_us),
                Some(Duration::from_micros(now_us.saturating_sub(f))),
            ),
            // It fired during an earlier sleep of this period, or it was there
            // before the loop slept.
            Some(f) => (f.saturating_sub(self.first_block_us), None),
            // No channel (inline progress: the loop parks): the time until it
            // found the work, an upper bound.
            None => (now_us.saturating_sub(self.first_block_us), None),
        };
        self.learn
            .blocked(self.spun_for, Duration::from_micros(slept), wake);
        self.first_block_us = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_spin_is_its_value_and_the_default_learns() {
        assert_eq!(
            IdleLoop::new(IdleSpin::FIXED_BEFORE, true).budget(),
            50 * Duration::from_micros(1)
        );
        let cap = Duration::from_micros(300);
        // Nothing learned yet: the cap.
        assert_eq!(
            IdleLoop::new(IdleSpin::Adaptive { cap }, true).budget(),
            cap
        );
    }

    #[test]
    fn an_idle_period_spins_then_arms_then_blocks_and_counts_how_it_ended() {
        let mut l = IdleLoop::new(IdleSpin::Fixed(Duration::ZERO), true);
        // A zero spin arms at once, then blocks.
        assert_eq!(l.empty(), Next::Arm);
        assert_eq!(l.empty(), Next::Block);
        // A timeout, nothing found: arm and look again, then block again.
        assert_eq!(l.empty(), Next::Arm);
        assert_eq!(l.empty(), Next::Block);
        l.event(None);
        assert_eq!(
            l.counts(),
            IdleCounts {
                spun: 0,
                blocked: 1
            }
        );
        // Without a channel there is nothing to arm: it blocks (yields, parks).
        let mut nc = IdleLoop::new(IdleSpin::Fixed(Duration::ZERO), false);
        assert_eq!(nc.empty(), Next::Block);
        assert_eq!(nc.empty(), Next::Block);
        assert!(nc.event(None));
        assert_eq!(nc.counts().blocked, 1);
        // A spin long enough to catch the next event.
        let mut l = IdleLoop::new(IdleSpin::Fixed(Duration::from_secs(60)), true);
        assert_eq!(l.empty(), Next::Spin);
        assert_eq!(l.empty(), Next::Spin);
        l.event(None);
        assert_eq!(
            l.counts(),
            IdleCounts {
                spun: 1,
                blocked: 0
            }
        );
        // Work without an idle period in between counts nothing.
        l.event(None);
        assert_eq!(
            l.counts(),
            IdleCounts {
                spun: 1,
                blocked: 0
            }
        );
    }

    #[test]
    fn events_found_at_once_shrink_the_learned_spin_below_the_cap() {
        let cap = Duration::from_secs(1);
        let mut l = IdleLoop::new(IdleSpin::Adaptive { cap }, true);
        for _ in 0..16 {
            assert_eq!(l.empty(), Next::Spin);
            l.event(None);
        }
        // Gaps of microseconds: the spin is about a wake-up, far below the cap.
        assert!(l.budget() < Duration::from_millis(10), "{:?}", l.budget());
    }
}
