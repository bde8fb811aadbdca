//! How an idle loop (a server's cluster head, a client's dispatcher) waits for its
//! next event: spin, then block on its completion channel (or park, with inline
//! progress). The spin is learned by default ([`IdleSpin::Adaptive`]) from the
//! loop's own recent gaps between events and its measured wake-ups, by the learner
//! weft-verbs' adaptive completion wait uses ([`weft_verbs::SpinBudget`]), and fed
//! as that wait feeds it: every idle period that ends in an event is recorded as
//! spun (its length) or blocked (what it spun, the time until the event fired, the
//! wake-up), and the time the loop was busy between two idle periods as its time
//! away. The spin is [`SpinBudget::next_spin`]'s: none at all when, on the recent
//! periods, blocking at once would have cost less (nearly all of them outlast the
//! cap, as an idle server's do).

use std::time::{Duration, Instant};
use weft_verbs::SpinBudget;

/// How long an idle loop (a server's cluster head, a client's dispatcher) spins
/// before it blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdleSpin {
    /// Learned ([`weft_verbs::SpinBudget::next_spin`]): at least one measured
    /// wake-up, four times the recent short gaps between events, at most `cap`; none
    /// where blocking at once pays. Back-to-back requests keep the loop spinning;
    /// sparse ones (nearly all gaps beyond the cap) make it block at once.
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
    /// When the last idle period ended (learned spin only): the loop's time busy
    /// between periods is the learner's time away.
    last_end: Option<Instant>,
    /// Its spin (before the first, the spin of the first).
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
        let mut l = IdleLoop {
            spin,
            learn: SpinBudget::new(cap),
            since: None,
            last_end: None,
            budget: Duration::ZERO,
            spun_for: Duration::ZERO,
            first_block_us: 0,
            last_block_us: 0,
            armed: false,
            channel,
            spins: 0,
            counts: IdleCounts::default(),
        };
        l.budget = l.next_budget();
        l
    }

    /// The spin of the current or last idle period (zero: it blocked at once), for
    /// the stats: read on every event, so it is not computed again (the learner's
    /// rule sorts its histories; on the head's path to a request that arrived).
    pub(crate) fn budget(&self) -> Duration {
        self.budget
    }

    /// The spin of the next idle period (zero: block at once): computed once per
    /// period, as it begins.
    fn next_budget(&self) -> Duration {
        match self.spin {
            IdleSpin::Adaptive { .. } => self.learn.next_spin(),
            IdleSpin::Fixed(d) => d,
        }
    }

    fn adaptive(&self) -> bool {
        matches!(self.spin, IdleSpin::Adaptive { .. })
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
        if self.adaptive() && self.spins % POLITE_EVERY == 0 {
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
                let now = Instant::now();
                if let Some(end) = self.last_end.take() {
                    self.learn.away(now.saturating_duration_since(end));
                }
                self.budget = self.next_budget();
                self.first_block_us = 0;
                self.armed = false;
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
        let adaptive = self.adaptive();
        if self.first_block_us == 0 {
            self.counts.spun += 1;
            let now = Instant::now();
            self.learn.spun(now.saturating_duration_since(since));
            if adaptive {
                self.last_end = Some(now);
            }
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
        // A period that blocked at once spun nothing: the learner's record of
        // what its spins found takes only real spins.
        let spun = if self.budget.is_zero() {
            Duration::ZERO
        } else {
            self.spun_for
        };
        self.learn.blocked(spun, Duration::from_micros(slept), wake);
        self.first_block_us = 0;
        if adaptive {
            self.last_end = Some(Instant::now());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_spin_is_its_value_and_the_default_learns() {
        assert_eq!(
            IdleLoop::new(IdleSpin::FIXED_BEFORE, true).next_budget(),
            50 * Duration::from_micros(1)
        );
        let cap = Duration::from_micros(300);
        // Nothing learned yet: the cap.
        assert_eq!(
            IdleLoop::new(IdleSpin::Adaptive { cap }, true).next_budget(),
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

    const US: Duration = Duration::from_micros(1);
    const MS: Duration = Duration::from_millis(1);
    const WAKE: Duration = Duration::from_micros(40);

    /// An adaptive loop (default cap) whose learner saw `first` idle periods spin
    /// (found their event `gap` after they began, or, `gap` beyond the cap, spun a
    /// wake-up and blocked), then `periods` that blocked at once; each began `away`
    /// after the last one ended, its event `gap` after it began.
    fn learned(first: usize, periods: usize, away: Duration, gap: Duration) -> IdleLoop {
        let mut l = IdleLoop::new(IdleSpin::default(), true);
        for _ in 0..first {
            l.learn.away(away);
            if gap <= SpinBudget::DEFAULT_CAP {
                l.learn.spun(gap);
            } else {
                l.learn.blocked(WAKE, gap - WAKE, Some(WAKE));
            }
        }
        for _ in 0..periods {
            l.learn.away(away);
            l.learn.blocked(Duration::ZERO, gap, Some(WAKE));
        }
        l
    }

    /// The first empty poll of an idle period: spin, or arm at once (no spin).
    fn starts_by(l: &mut IdleLoop) -> Next {
        let n = l.empty();
        l.since = None;
        n
    }

    #[test]
    fn an_idle_loop_blocks_at_once_where_the_old_rule_spun_a_wake_up() {
        // An idle server: a request every 10 ms, the head straight back after each.
        let mut l = learned(4, 16, 2 * US, 10 * MS);
        assert_eq!(l.learn.spin(), WAKE, "the old rule spun a wake-up");
        assert_eq!(l.next_budget(), Duration::ZERO);
        assert_eq!(starts_by(&mut l), Next::Arm, "no spin: arm at once");
        // Without a channel (inline progress) it goes straight to block.
        let mut nc = learned(4, 16, 2 * US, 10 * MS);
        nc.channel = false;
        assert_eq!(starts_by(&mut nc), Next::Block);
        // A fixed spin keeps its value whatever its learner saw.
        let mut f = learned(4, 16, 2 * US, 10 * MS);
        f.spin = IdleSpin::FIXED_BEFORE;
        assert_eq!(f.next_budget(), 50 * US);
        assert_eq!(starts_by(&mut f), Next::Spin);
    }

    #[test]
    fn a_paced_dispatcher_blocks_at_once_a_ping_pong_spins() {
        // Replies 120 µs after the request (three wake-ups of spin each), and the
        // loop away 10 ms between them (a dispatcher whose caller works between
        // calls): paced, block at once.
        let mut paced = learned(4, 16, 10 * MS, 120 * US);
        assert_eq!(paced.learn.spin(), 480 * US);
        assert_eq!(paced.next_budget(), Duration::ZERO);
        assert_eq!(starts_by(&mut paced), Next::Arm);
        // The same gaps, the loop straight back (a server head under a client that
        // pauses 120 µs: the head cannot tell its client's pauses from a slow
        // peer's): it spins.
        let mut head = learned(4, 16, 2 * US, 120 * US);
        assert_eq!(head.next_budget(), 480 * US);
        assert_eq!(starts_by(&mut head), Next::Spin);
        // Back to back: gaps of a few µs, found while spinning.
        let mut b2b = learned(16, 0, 2 * US, 3 * US);
        assert_eq!(b2b.next_budget(), WAKE);
        assert_eq!(starts_by(&mut b2b), Next::Spin);
        // An idle loop whose requests come back to back again spins within a
        // few periods (blocked periods record when the event fired, not the
        // loop's own wake-up).
        let mut l = learned(4, 16, 2 * US, 10 * MS);
        let mut n = 0;
        while l.next_budget().is_zero() {
            l.learn.away(2 * US);
            l.learn.blocked(Duration::ZERO, 5 * US, Some(WAKE));
            n += 1;
            assert!(n <= 16, "never spun again");
        }
        assert_eq!(starts_by(&mut l), Next::Spin);
    }

    #[test]
    fn the_loop_feeds_its_learner_time_away_and_blocked_at_once_periods() {
        let mut l = learned(4, 16, 2 * US, 10 * MS);
        assert!(l.next_budget().is_zero());
        // Real periods of this loop: blocked at once, their event there before
        // the loop slept (fired long ago): the blocked count grows, and an
        // at-once period records no spin.
        for _ in 0..2 {
            assert_eq!(l.empty(), Next::Arm);
            assert_eq!(l.empty(), Next::Block);
            assert!(l.event(Some(0)));
            assert!(l.last_end.is_some(), "the end of a period is kept");
        }
        assert_eq!(l.counts().blocked, 2);
        // The next period takes the time away from the last one's end.
        l.empty();
        assert!(l.last_end.is_none());
        assert!(l.since.is_some());
        // A fixed spin keeps no end (no clock read for it).
        let mut f = IdleLoop::new(IdleSpin::FIXED_BEFORE, true);
        f.empty();
        f.event(None);
        assert!(f.last_end.is_none());
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
        assert!(
            l.next_budget() < Duration::from_millis(10),
            "{:?}",
            l.next_budget()
        );
    }
}
