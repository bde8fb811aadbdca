//! The learned budgets of thread progress (docs/verbs.md, "Progress"): pure functions of
//! what the engine thread observed, so that the policy is tested without a clock.
//!
//! - [`GapHistory`]: how long an idle engine thread spins before it blocks, from the
//!   recent gaps between the passes that found work (spin-then-block as rsocket and
//!   DPDK's power management do, with the spin learned instead of fixed).
//! - [`QuietGap`]: how long an application may leave its completion queues unpolled
//!   before the engine thread, standing by for it, serves the link itself.

use std::time::Duration;

/// Gaps remembered by [`GapHistory`].
pub(crate) const GAPS: usize = 16;

/// The shortest spin worth making when gaps are short: less than a blocked thread's
/// wake-up (about 10 µs unloaded, much more on a loaded machine), so a spin this long
/// costs less than the wake-up it may save. It also keeps tiny gaps (a pass that only
/// retired an ACK right after the last work) from shrinking the spin below the gap
/// that matters, the next request.
pub(crate) const MIN_SPIN: Duration = Duration::from_micros(20);

/// Idle periods that spin the whole cap to measure the gaps however short the learned
/// budget became: one in this many ([`GapHistory::explore`]).
const EXPLORE_EVERY: u64 = 8;

/// The recent gaps between passes that found work, as the engine thread saw them.
///
/// A gap ends with work or with the application polling again (the thread then
/// stands by; had it blocked instead, it would hold the engine asleep and the
/// application's polls could not run passes until it woke). A gap is known exactly
/// when it ended while the thread spun. When it spun the whole cap and then blocked, the gap is longer than the cap ([`GapHistory::record_long`]).
/// When it blocked earlier, nothing is recorded: the time it then slept includes its own
/// wake-up, which says nothing about the traffic (and recording it would keep a thread
/// that blocks once blocking forever). Every [`EXPLORE_EVERY`]th idle period spins the
/// whole cap, so short gaps are seen again after the budget fell to zero.
#[derive(Debug, Clone, Default)]
pub(crate) struct GapHistory {
    /// Nanoseconds; `u64::MAX` for "longer than the cap".
    gaps: [u64; GAPS],
    len: usize,
    next: usize,
    idle_periods: u64,
}

impl GapHistory {
    /// A gap the thread measured while it spun.
    pub(crate) fn record(&mut self, gap: Duration) {
        self.push(gap.as_nanos().min(u64::MAX as u128 - 1) as u64);
    }

    /// The thread spun its whole cap without work and blocked.
    pub(crate) fn record_long(&mut self) {
        self.push(u64::MAX);
    }

    fn push(&mut self, ns: u64) {
        self.gaps[self.next] = ns;
        self.next = (self.next + 1) % GAPS;
        self.len = (self.len + 1).min(GAPS);
    }

    /// Start an idle period: true when this one should spin the whole cap to measure.
    pub(crate) fn explore(&mut self) -> bool {
        self.idle_periods += 1;
        self.idle_periods % EXPLORE_EVERY == 0
    }

    /// The 75th percentile of the recorded values (`None` before four). A value
    /// "longer than the cap" ([`GapHistory::record_long`]) counts as the longest.
    pub(crate) fn p75(&self) -> Option<Duration> {
        self.quartiles().map(|(_, p75)| Duration::from_nanos(p75))
    }

    /// The median and the 75th percentile in ns (`None` before four values).
    fn quartiles(&self) -> Option<(u64, u64)> {
        if self.len < 4 {
            return None;
        }
        let mut sorted = self.gaps;
        let sorted = &mut sorted[..self.len];
        sorted.sort_unstable();
        Some((
            sorted[self.len.div_ceil(2) - 1],
            sorted[(self.len * 3).div_ceil(4) - 1],
        ))
    }

    /// How long to spin before blocking, at most `cap`.
    ///
    /// With fewer than 4 gaps known: `cap`. Otherwise four times the 75th percentile of
    /// the gaps (at least [`MIN_SPIN`]), if that percentile is within `cap`; else the
    /// same of the median if the median is; else zero — most gaps outlast any spin worth its CPU, so block at
    /// once. Four times, because a gap that ends just after the spin costs a wake-up
    /// (tens of microseconds, milliseconds on a loaded machine) while a longer spin
    /// costs only the gaps it misses: a peer preempted for a moment must not make
    /// the thread block on every exchange.
    pub(crate) fn spin_budget(&self, cap: Duration) -> Duration {
        let Some((p50, p75)) = self.quartiles() else {
            return cap;
        };
        let cap_ns = cap.as_nanos().min(u64::MAX as u128 - 1) as u64;
        for q in [p75, p50] {
            if q <= cap_ns {
                return Duration::from_nanos(q.saturating_mul(4).min(cap_ns))
                    .max(MIN_SPIN.min(cap));
            }
        }
        Duration::ZERO
    }
}

/// Spin-then-block's learned spin for a thread that waits for events of its own: an
/// application's completion wait ([`crate::Waiter`]) or a loop such as weft-rpc's
/// server heads and client dispatcher.
///
/// Every idle period that ends in an event is recorded: ended while spinning, its
/// length ([`SpinBudget::spun`]); ended after blocking, the time until the event
/// *fired* and, separately, the wake-up from firing to running
/// ([`SpinBudget::blocked`]). A blocked period's own length includes its wake-up —
/// tens of µs on a quiet machine, milliseconds beside CPU hogs — and recording that
/// as the gap kept a thread that blocked once blocking for good.
///
/// The spin ([`SpinBudget::spin`]) is at least one wake-up (spin-then-block's
/// classic bound: a wait that outlasts the spin costs at most twice what blocking at
/// once would have), four times the 75th percentile of the recent gaps when they are
/// short (else of the median; none when most gaps outlast the cap), and at most the
/// cap. So a saturated stream spins, a sparse one spins about one wake-up and blocks.
#[derive(Debug, Clone)]
pub struct SpinBudget {
    cap: Duration,
    gaps: GapHistory,
    /// Recent wake-ups: from the event firing to this thread running.
    wakes: GapHistory,
}

impl Default for SpinBudget {
    fn default() -> SpinBudget {
        SpinBudget::new(SpinBudget::DEFAULT_CAP)
    }
}

impl SpinBudget {
    /// The longest spin by default. Well above a cross-core wake-up (38 µs quiet,
    /// 118 µs loaded: docs/results/ibverbs.md, "Link watch"), so a blocked wait of a
    /// short gap, wake-up included, still falls under it; and long enough that a peer
    /// preempted by CPU hogs, or replies queued behind a large transfer, keep the
    /// waiter spinning — there a wake-up costs more than the spin
    /// (docs/results/study.md, "The adaptive run").
    pub const DEFAULT_CAP: Duration = Duration::from_millis(1);

    /// The wake-up cost assumed before any was measured: a cross-core wake-up on a
    /// quiet machine.
    pub const ASSUMED_WAKE: Duration = Duration::from_micros(40);

    /// A learner whose spin is at most `cap`.
    pub fn new(cap: Duration) -> SpinBudget {
        SpinBudget {
            cap,
            gaps: GapHistory::default(),
            wakes: GapHistory::default(),
        }
    }

    /// The longest spin.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The wake-up cost: the 75th percentile of the recent measured wake-ups, or
    /// [`SpinBudget::ASSUMED_WAKE`] before four were measured.
    pub fn wake_cost(&self) -> Duration {
        self.wakes.p75().unwrap_or(SpinBudget::ASSUMED_WAKE)
    }

    /// How long to spin in the next idle period before blocking.
    pub fn spin(&self) -> Duration {
        self.gaps
            .spin_budget(self.cap)
            .max(self.wake_cost())
            .min(self.cap)
    }

    /// An idle period ended with an event found while spinning, `gap` after it began.
    pub fn spun(&mut self, gap: Duration) {
        self.gaps.record(gap);
    }

    /// An idle period ended with an event after the thread blocked: it had spun
    /// `spun`, then the event fired `slept` after it went to block. `wake`: from the
    /// firing to the thread running, when the event woke it (`None` when the event was
    /// there before it slept, or is not known).
    pub fn blocked(&mut self, spun: Duration, slept: Duration, wake: Option<Duration>) {
        if let Some(w) = wake {
            self.wakes.record(w);
        }
        self.gaps.record(spun + slept);
    }
}

/// How long the application must leave its queues unpolled before a standing-by
/// engine thread takes over, learned additively-up, multiplicatively-down:
///
/// - a stand-by check that finds the application still polling cost a wake-up for
///   nothing: wait a quarter longer next time ([`QuietGap::app_still_polling`]);
/// - a takeover after which the application came back before the engine found any
///   work: likewise ([`QuietGap::takeover_idle`]);
/// - a takeover after which the engine found work before the application came back
///   (the application waits on the engine, e.g. spinning on memory for a WRITE):
///   halve it ([`QuietGap::takeover_served`]).
///
/// So an application that polls for everything it waits for pushes the gap to
/// [`QuietGap::MAX`] (a wake-up per millisecond at most), and one that stops polling
/// and waits for a one-sided operation pulls it to [`QuietGap::MIN`].
///
/// The gap alone cannot serve such an application quickly: its polls for its own
/// sends' completions look like "still polling" and keep the gap near the round trip
/// (a gap of 100 µs was a 135 µs `ib_write_lat` over udp). So the quiet gap also
/// learns whether to watch the link while standing by ([`QuietGap::watch_link`]):
/// armed by a takeover that served the application, disarmed after a few arrivals
/// that the application was polling for anyway ([`QuietGap::arrival_while_polling`]),
/// so an application that polls for everything pays no wake-up per message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuietGap {
    gap: Duration,
    /// Arrivals while the application polls that the link watch may still cost
    /// before it is disarmed; 0: disarmed.
    watch: u8,
}

impl Default for QuietGap {
    fn default() -> QuietGap {
        QuietGap {
            gap: QuietGap::START,
            watch: 0,
        }
    }
}

impl QuietGap {
    /// The shortest gap: a timed wake-up this often is the most a standing-by engine
    /// thread costs.
    pub(crate) const MIN: Duration = Duration::from_micros(10);
    /// The longest: the fixed window this policy replaced.
    pub(crate) const MAX: Duration = Duration::from_millis(1);
    const START: Duration = Duration::from_micros(100);

    /// The current gap.
    pub(crate) fn get(&self) -> Duration {
        self.gap
    }

    fn grow(&mut self) {
        self.gap = (self.gap + self.gap / 4).min(QuietGap::MAX);
    }

    /// A stand-by check found the application polled within the gap.
    pub(crate) fn app_still_polling(&mut self) {
        self.grow();
    }

    /// The application came back without the engine having found work.
    pub(crate) fn takeover_idle(&mut self) {
        self.grow();
    }

    /// The engine found work after a takeover, before the application came back.
    /// `left`: the application had taken completions and not polled since, so it
    /// waits on the engine (arms the link watch); otherwise it was only preempted in
    /// its polling loop, and arming the watch then would let the watch's own
    /// wake-ups, preempting it, re-arm the watch.
    pub(crate) fn takeover_served(&mut self, left: bool) {
        self.gap = (self.gap / 2).max(QuietGap::MIN);
        if left {
            self.watch = QuietGap::WATCH_ARRIVALS;
        }
    }

    /// Arrivals on the link that the application polled for itself, after which a
    /// takeover's link watch is disarmed.
    const WATCH_ARRIVALS: u8 = 8;

    /// True when a standing-by engine thread should also wake for packets arriving
    /// on the link, and take over at once when the application is not polling: the
    /// last takeovers served an application that waits on the engine.
    pub(crate) fn watch_link(&self) -> bool {
        self.watch > 0
    }

    /// The link watch woke the thread for an arrival the application was polling for.
    pub(crate) fn arrival_while_polling(&mut self) {
        self.watch = self.watch.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn without_history_the_budget_is_the_cap() {
        let mut h = GapHistory::default();
        assert_eq!(h.spin_budget(50 * US), 50 * US);
        for _ in 0..3 {
            h.record(2 * US);
        }
        assert_eq!(h.spin_budget(50 * US), 50 * US);
    }

    #[test]
    fn short_gaps_give_four_times_their_75th_percentile() {
        let mut h = GapHistory::default();
        for g in [1, 2, 3, 4, 5, 6, 7, 8] {
            h.record(g * US);
        }
        // p75 of 1..=8 is 6 µs.
        assert_eq!(h.spin_budget(50 * US), 24 * US);
        // Never above the cap.
        assert_eq!(h.spin_budget(7 * US), 7 * US);
    }

    #[test]
    fn mostly_long_gaps_block_at_once_and_half_short_spin_the_median() {
        let mut h = GapHistory::default();
        for _ in 0..16 {
            h.record_long();
        }
        assert_eq!(h.spin_budget(50 * US), Duration::ZERO);
        // Half the recent gaps short (4 µs): four times the median.
        for _ in 0..8 {
            h.record(4 * US);
        }
        assert_eq!(h.spin_budget(50 * US), 20 * US);
        // At least MIN_SPIN, however short the gaps, but never above the cap.
        let mut h = GapHistory::default();
        for _ in 0..16 {
            h.record(Duration::from_nanos(300));
        }
        assert_eq!(h.spin_budget(50 * US), MIN_SPIN);
        assert_eq!(h.spin_budget(5 * US), 5 * US);
        // Gaps longer than the cap, measured, count as long too.
        let mut h = GapHistory::default();
        for _ in 0..16 {
            h.record(80 * US);
        }
        assert_eq!(h.spin_budget(50 * US), Duration::ZERO);
    }

    #[test]
    fn the_history_forgets_beyond_its_length() {
        let mut h = GapHistory::default();
        for _ in 0..GAPS {
            h.record_long();
        }
        for _ in 0..GAPS {
            h.record(2 * US);
        }
        assert_eq!(h.spin_budget(50 * US), MIN_SPIN);
    }

    #[test]
    fn the_75th_percentile_needs_four_values() {
        let mut h = GapHistory::default();
        for us in [40, 10, 30] {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.p75(), None);
        h.record(Duration::from_micros(20));
        assert_eq!(h.p75(), Some(Duration::from_micros(30)));
    }

    #[test]
    fn one_idle_period_in_eight_explores() {
        let mut h = GapHistory::default();
        let explored = (0..64).filter(|_| h.explore()).count();
        assert_eq!(explored, 8);
    }

    #[test]
    fn spin_budget_spins_for_short_gaps_and_a_wake_up_for_long_ones() {
        let mut b = SpinBudget::new(500 * US);
        // Nothing known: the cap.
        assert_eq!(b.spin(), 500 * US);
        // Back-to-back events found while spinning: four times their p75.
        for _ in 0..16 {
            b.spun(10 * US);
        }
        assert_eq!(b.spin(), 40 * US);
        for _ in 0..16 {
            b.spun(30 * US);
        }
        assert_eq!(b.spin(), 120 * US);
        // Sparse events (slept 5 ms each, woke in 15 µs): one wake-up, then block.
        for _ in 0..16 {
            b.blocked(120 * US, 5 * Duration::from_millis(1), Some(15 * US));
        }
        assert_eq!(b.wake_cost(), 15 * US);
        assert_eq!(b.spin(), 15 * US);
        // Slow wake-ups (a loaded machine) make it spin longer, up to the cap.
        for _ in 0..16 {
            b.blocked(
                15 * US,
                5 * Duration::from_millis(1),
                Some(2 * Duration::from_millis(1)),
            );
        }
        assert_eq!(b.spin(), 500 * US);
        // A blocked period whose event fired soon after it slept counts as a short gap.
        let mut b = SpinBudget::new(500 * US);
        for _ in 0..16 {
            b.blocked(40 * US, 10 * US, None);
        }
        assert_eq!(b.spin(), 200 * US);
    }

    #[test]
    fn the_quiet_gap_grows_by_quarters_to_the_max_and_halves_to_the_min() {
        let mut q = QuietGap::default();
        assert_eq!(q.get(), 100 * US);
        q.app_still_polling();
        assert_eq!(q.get(), 125 * US);
        q.takeover_idle();
        assert_eq!(q.get(), 156_250 * Duration::from_nanos(1));
        for _ in 0..100 {
            q.app_still_polling();
        }
        assert_eq!(q.get(), QuietGap::MAX);
        q.takeover_served(true);
        assert_eq!(q.get(), 500 * US);
        for _ in 0..100 {
            q.takeover_served(true);
        }
        assert_eq!(q.get(), QuietGap::MIN);
    }

    #[test]
    fn a_served_takeover_arms_the_link_watch_and_polled_arrivals_disarm_it() {
        let mut q = QuietGap::default();
        assert!(
            !q.watch_link(),
            "an application that polls never pays for it"
        );
        q.takeover_served(true);
        assert!(q.watch_link());
        for _ in 0..QuietGap::WATCH_ARRIVALS - 1 {
            q.arrival_while_polling();
            assert!(q.watch_link());
        }
        q.arrival_while_polling();
        assert!(!q.watch_link());
        // A takeover that found the application preempted in its polling loop
        // halves the gap but does not arm the watch.
        let before = q.get();
        q.takeover_served(false);
        assert!(!q.watch_link());
        assert!(q.get() <= before);
        // ib_write_lat: every round one arrival it polls for (its ACK) and one it
        // leaves to the engine (the peer's WRITE): the watch stays armed.
        q.takeover_served(true);
        for _ in 0..100 {
            q.arrival_while_polling();
            q.takeover_served(true);
            assert!(q.watch_link());
        }
    }

    #[test]
    fn a_ping_pong_that_waits_on_memory_settles_near_the_min() {
        // Per round: the application polls for its ACK for 8 µs (shorter than the gap:
        // no stand-by check lands in it), then spins on memory; the engine takes over
        // and finds the peer's WRITE.
        let mut q = QuietGap::default();
        for _ in 0..20 {
            let polling = 8 * US;
            let mut waited = Duration::ZERO;
            while waited + q.get() < polling {
                waited += q.get();
                q.app_still_polling();
            }
            q.takeover_served(true);
        }
        assert!(q.get() <= 20 * US, "{:?}", q.get());
        // An application that polls for everything: every check finds it polling.
        for _ in 0..40 {
            q.app_still_polling();
        }
        assert_eq!(q.get(), QuietGap::MAX);
    }
}
