//! The learned budgets of thread progress (docs/verbs.md, "Progress"): pure functions of
//! what the engine thread observed, so that the policy is tested without a clock.
//!
//! - [`GapHistory`]: how long an idle engine thread spins before it blocks, from the
//!   recent gaps between the passes that found work (spin-then-block as rsocket and
//!   DPDK's power management do, with the spin learned instead of fixed).
//! - [`QuietGap`]: how long an application may leave its completion queues unpolled
//!   before the engine thread, standing by for it, serves the link itself.

use std::cell::Cell;
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

    /// True when nearly all the recorded values (7 in 8) are longer than `cap`
    /// (false before four values).
    pub(crate) fn nearly_all_beyond(&self, cap: Duration) -> bool {
        if self.len < 4 {
            return false;
        }
        let beyond = self.gaps[..self.len]
            .iter()
            .filter(|&&g| u128::from(g) > cap.as_nanos())
            .count();
        beyond * 8 >= self.len * 7
    }

    /// True when, on the recorded gaps, blocking at once would have cost less than
    /// spinning `spin` first, a blocked thread's wake-up costing `wake` (false before
    /// four values).
    ///
    /// The cost of a wait in time (CPU spent spinning, latency added by a wake-up):
    /// a gap within the spin costs the gap (the spin found it); a longer one the
    /// whole spin and then the wake-up; blocking at once costs the wake-up, always.
    /// So spinning pays when the short gaps' saving (a wake-up less their length)
    /// outweighs the spins the long ones waste. With the spin one wake-up long:
    /// when more than about half the recent gaps were short.
    pub(crate) fn block_pays(&self, spin: Duration, wake: Duration) -> bool {
        if self.len < 4 {
            return false;
        }
        let s = spin.as_nanos();
        let w = wake.as_nanos();
        let spinning: u128 = self.gaps[..self.len]
            .iter()
            .map(|&g| {
                let g = u128::from(g);
                if g <= s {
                    g
                } else {
                    s + w
                }
            })
            .sum();
        spinning > w * self.len as u128
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
/// cap. So a saturated stream spins; a sparse one would spin about one wake-up and
/// block, and [`SpinBudget::next_spin`] blocks it at once instead.
///
/// [`SpinBudget::next_spin`] blocks at once where a spin would not pay:
/// - nearly all recent gaps (7 in 8) outlast the cap (an idle server's 10 ms
///   waits): a spin rarely finds the event and wastes itself on every other wait.
///   Not merely most of them: beside CPU hogs, where a peer is often preempted for
///   milliseconds, blocking at once on the median took the p50 of a ping-pong
///   from 4 µs to 48–206 µs (it then waits for the peer's wake-ups too);
/// - or the gaps are longer than the spin's worth — blocking at once would have
///   cost less on them: a wait within the spin saves a wake-up less its length,
///   one beyond it wastes the whole spin (`GapHistory::block_pays`) — *and* the
///   application is paced by its own work: between waits it is away for at least
///   `PACED` (4) times as long as it waits (the medians; a client that pauses 10 ms
///   between requests whose replies take 120 µs). A paced application's rate is
///   set by its own work, so a wake-up's latency does not slow it and only CPU
///   counts, where a spin costs its whole length and a wake-up a context switch.
///   An application that comes straight back (a ping-pong, a saturated stream) is
///   never blocked at once this way: there its own blocking makes the gaps long —
///   a peer waits for its wake-up, its engine thread has to take over — so
///   long gaps would keep it blocking for good (16 requests in flight over shm
///   fell from ~890 k to 380 k operations/s so).
///
/// Both need the spins to agree: blocking at once must also have paid on what
/// the recent spins found (a spin's gap, or none within it), a history that this
/// thread's own blocking does not lengthen. Beside CPU hogs, where spins found
/// most replies within microseconds, blocking at once on the gaps alone took a
/// ping-pong's p50 from 4 µs to 44 µs (blocked, it waits for the peer's wake-ups
/// and its own engine thread, and such gaps look long), a saturated stream's
/// throughput down by a fifth. Fewer than four spins known: spin.
///
/// A blocked wait still records its gap (until the event fired), so when the gaps
/// become short again the history shows it within a few waits and the spin comes
/// back.
#[derive(Debug, Clone)]
pub struct SpinBudget {
    cap: Duration,
    gaps: GapHistory,
    /// Recent wake-ups: from the event firing to this thread running.
    wakes: GapHistory,
    /// Recent times away: from the end of a wait to the start of the next.
    aways: GapHistory,
    /// What the recent spins found: a spun period's gap, or "longer" for a spin
    /// that ended without the event. Unlike `gaps`, not lengthened by this
    /// thread's own blocking (its engine thread taking over, its peer waiting for
    /// its wake-up).
    spins: GapHistory,
    /// Of the recent gaps that outlasted the learned spin, those that ended within
    /// the cap less those that ended beyond it, within ±[`REACH_MAX`].
    reach: i8,
    /// The recent waits that ended with a batch (more than one event) less those
    /// that ended with one or none, within ±[`REACH_MAX`] ([`SpinBudget::found`]).
    batched: i8,
    /// `reach` against the batch spin ([`SpinBudget::batch_spin`]): of the recent
    /// gaps that outlasted the learned spin, those that ended within that spin
    /// less those beyond it.
    batch_reach: i8,
    /// What the batch spin cost and found since it was last judged, and its rest
    /// after it did not pay ([`BatchLedger`]).
    ledger: BatchLedger,
    /// Whether the last [`SpinBudget::next_wait_spin`] chose the batch spin: the
    /// wait that follows, and the batches found at once after it, go to `ledger`.
    batch_spin: Cell<bool>,
    /// The learned spin as the last [`SpinBudget::next_wait_spin`] that did not
    /// spin the cap found it (the cap before any).
    learned: Cell<Duration>,
    /// [`SpinBudget::next_wait_spin`]'s decision to spin longer than learned (but
    /// for `reach`): the cap, or a wake-up longer than the cap; whether the
    /// application is busy (away less than the cap between its waits); and the
    /// waits left before it decides again.
    extend: Cell<(u8, Option<Duration>, bool)>,
}

/// [`SpinBudget::next_wait_spin`] decides whether to spin the cap every this many
/// waits.
const EXTEND_EVERY: u8 = 8;

/// [`SpinBudget::next_wait_spin`]'s longest spin, in caps, where wake-ups cost more
/// than the cap.
const WAKE_SPIN_CAPS: u32 = 4;

/// [`SpinBudget::next_wait_spin`]'s spin, in caps, for an application behind a
/// stream (its waits end with batches). Beside a CPU hog a peer is off its core
/// for whole scheduler ticks (4 ms at this kernel's 250 Hz; its spun waits found
/// replies after 4–8 ms), so the spin covers a few of them.
const BATCH_SPIN_CAPS: u32 = 16;

/// The batch spin's bound unless the cap is longer: a few scheduler ticks (4 ms
/// here).
const BATCH_SPIN_MAX: Duration = Duration::from_millis(16);

/// The batch spin is judged ([`BatchLedger`]) after this many events found
/// under it…
const BATCH_JUDGE_EVENTS: u64 = 4096;

/// …or after this many batch spins' worth of spinning (256 ms at the default
/// cap), whichever comes first. Beside one CPU hog the stream stalled for 60–140
/// ms at a time (both processes, their engine threads and the hog on two cores:
/// 150–550 events in 64 ms of batch spin, where the stream's own pace is 4 096
/// in 0.5–11 ms); judged after 64 ms those stalls rested the batch spin and let
/// both sides fall back to blocking (229 k round trips/s against 366 k without
/// the ledger). Over 256 ms they are judged with the stream around them.
const BATCH_JUDGE_SPINS: u32 = 16;

/// Waits the batch spin rests after it first did not pay; each further failure in
/// a row doubles it, up to [`BATCH_REST_MAX`].
const BATCH_REST_MIN: u32 = 64;

/// The longest rest of the batch spin, in waits.
const BATCH_REST_MAX: u32 = 4096;

/// Whether [`SpinBudget`]'s batch spin pays for itself, judged on what it did, not
/// on the gaps: the time spun in the waits made with it against the events they
/// and the batches found at once between them delivered. It pays while it spins
/// less per event than a wake-up per event would cost: behind a stream that it
/// brings back to its pace (both sides spinning, beside one CPU hog), a few µs an
/// event with a few ticks of 4 ms among them; spinning through a slow peer's own
/// gaps (a server answering every 5 ms with two events), 2.5 ms an event. The
/// judgment waits for [`BATCH_JUDGE_EVENTS`] events or [`BATCH_JUDGE_SPINS`]
/// batch spins of spinning, so the first spins of an escape from both sides
/// blocking — each a wake-up chain long, the peer still blocked — are judged with
/// the stream they bring back. A batch spin that did not pay rests (the learned
/// spin serves) for [`BATCH_REST_MIN`] waits, doubling while it keeps failing.
#[derive(Debug, Clone, Default)]
struct BatchLedger {
    /// Time spun in waits made with the batch spin since the last judgment.
    spent: Duration,
    /// Events found by those waits and by the batches found at once after them.
    got: u64,
    /// Waits left before the batch spin may be made again.
    rest: u32,
    /// The rest after the next judgment that finds it did not pay (0: the first).
    next_rest: u32,
}

impl BatchLedger {
    /// A wait made with the batch spin spun `spun` (wall time: a tick spent off
    /// the core mid-spin counts, which errs towards resting beside CPU hogs).
    fn spun(&mut self, spun: Duration) {
        self.spent = self.spent.saturating_add(spun);
    }

    /// That wait, or a poll after it, found `n` events: whether it is time to
    /// judge ([`BatchLedger::judge`]), the wait's spin and its events both in.
    fn found(&mut self, n: usize, batch_spin: Duration) -> bool {
        self.got = self.got.saturating_add(n as u64);
        self.got >= BATCH_JUDGE_EVENTS || self.spent >= batch_spin.saturating_mul(BATCH_JUDGE_SPINS)
    }

    /// A wait ended: one fewer to rest.
    fn waited(&mut self) {
        self.rest = self.rest.saturating_sub(1);
    }

    /// Whether the batch spin may be made.
    fn ready(&self) -> bool {
        self.rest == 0
    }

    /// Judge what was added against `wake` a wake-up per event (not per wait: a
    /// stream of 16 events every 600 µs pays, 37 µs an event, though one wake-up
    /// would serve each batch — spinning there keeps the peer's answers prompt, the
    /// point of the batch spin), and start again. Whether it now rests.
    fn judge(&mut self, wake: Duration) -> bool {
        let pays = self.spent.as_nanos() <= wake.as_nanos() * u128::from(self.got);
        if pays {
            self.next_rest = 0;
        } else {
            self.rest = self.next_rest.max(BATCH_REST_MIN);
            self.next_rest = (self.rest * 2).min(BATCH_REST_MAX);
        }
        self.spent = Duration::ZERO;
        self.got = 0;
        !pays
    }
}

/// The bound of [`SpinBudget`]'s `reach`: a few outliers of the other kind turn it.
const REACH_MAX: i8 = 4;

/// One step of a [`SpinBudget`] tally (`reach`, `batch_reach`, `batched`): up or
/// down by one, within ±[`REACH_MAX`].
fn tally(r: i8, up: bool) -> i8 {
    if up {
        (r + 1).min(REACH_MAX)
    } else {
        (r - 1).max(-REACH_MAX)
    }
}

/// An application away between its waits for at least this many times as long as
/// it waits (the medians) is paced by its own work ([`SpinBudget::next_spin`]).
pub const PACED: u32 = 4;

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
            aways: GapHistory::default(),
            spins: GapHistory::default(),
            reach: 0,
            batched: 0,
            batch_reach: 0,
            ledger: BatchLedger::default(),
            batch_spin: Cell::new(false),
            learned: Cell::new(cap),
            extend: Cell::new((0, None, false)),
        }
    }

    /// The longest spin.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The spin of an application behind a stream ([`SpinBudget::next_wait_spin`]):
    /// `BATCH_SPIN_CAPS` caps, at most [`BATCH_SPIN_MAX`] unless the cap is longer.
    fn batch_spin(&self) -> Duration {
        self.cap
            .saturating_mul(BATCH_SPIN_CAPS)
            .min(BATCH_SPIN_MAX)
            .max(self.cap)
    }

    /// Whether the last [`SpinBudget::next_wait_spin`] chose the batch spin (an
    /// application behind a stream).
    pub fn chose_batch_spin(&self) -> bool {
        self.batch_spin.get()
    }

    /// The wake-up cost: the 75th percentile of the recent measured wake-ups, or
    /// [`SpinBudget::ASSUMED_WAKE`] before four were measured.
    pub fn wake_cost(&self) -> Duration {
        self.wakes.p75().unwrap_or(SpinBudget::ASSUMED_WAKE)
    }

    /// How long to spin in the next idle period before blocking.
    pub fn spin(&self) -> Duration {
        self.spin_with(self.wake_cost())
    }

    /// [`SpinBudget::spin`] with the wake-up cost known (each is a sort of a history).
    fn spin_with(&self, wake: Duration) -> Duration {
        self.gaps.spin_budget(self.cap).max(wake).min(self.cap)
    }

    /// The spin of the next idle period, zero to block at once (see
    /// [`SpinBudget`]): [`SpinBudget::spin`], unless nearly all recent gaps outlast
    /// the cap, or blocking at once would have cost less on them and the application is
    /// paced by its own work (`PACED`).
    pub fn next_spin(&self) -> Duration {
        let wake = self.wake_cost();
        let spin = self.spin_with(wake);
        if !self.gaps.block_pays(spin, wake) || !self.spins.block_pays(spin, wake) {
            return spin;
        }
        if self.gaps.nearly_all_beyond(self.cap) {
            return Duration::ZERO;
        }
        match (self.gaps.quartiles(), self.aways.quartiles()) {
            (Some((gap, _)), Some((away, _)))
                if u128::from(away) >= u128::from(gap) * u128::from(PACED) =>
            {
                Duration::ZERO
            }
            _ => spin,
        }
    }

    /// [`SpinBudget::next_spin`] for an application's completion waits under thread
    /// progress ([`crate::Waiter`]): the whole cap when the application comes
    /// straight back to wait — its median time away between waits is shorter than a
    /// wake-up (a saturated stream, a ping-pong) — while long gaps are the exception
    /// (the 75th percentile of the recent gaps within a quarter of the cap) and, of
    /// the recent gaps that outlasted the learned spin, no more ended beyond the cap
    /// than within it (a spin through them would have found them).
    ///
    /// Such an application's rate is its waits' latency, and there a rare long gap
    /// (its peer preempted for a moment) that outlasted the learned spin blocked it.
    /// A blocked application costs more than its own wake-up: its engine thread takes
    /// the link over and fires the channel, and its peer's next requests wait for both.
    /// At 16 requests in flight over shm that was 100–300 blocked waits per 500 000
    /// requests, a p99.9 of 0.2–1.2 ms and 10–20 % of the rate against busy polling
    /// (docs/results/study.md, "An application that comes straight back spins the
    /// cap"). Such an application spins between its waits' events anyway; the cap
    /// is spent only on the outliers, and only while spinning on finds them.
    ///
    /// And `BATCH_SPIN_CAPS` caps when the application is busy (away less than the
    /// cap between waits) and its recent waits ended with batches
    /// ([`SpinBudget::found`]): behind a stream, where both sides blocking is an
    /// equilibrium of their own making (see the body). A loop that blocks only itself (weft-rpc's server heads
    /// and dispatcher) keeps [`SpinBudget::next_spin`].
    pub fn next_wait_spin(&self) -> Duration {
        let (left, extend, busy) = self.extend.get();
        let (extend, busy) = if left == 0 {
            // The inputs are histories of 16 waits: deciding again every
            // `EXTEND_EVERY` waits saves their sorts on the others (a ping-pong
            // waits on every message; the sorts cost it ~0.1 µs a round trip).
            let away = self.aways.quartiles().map(|(away, _)| u128::from(away));
            let straight_back = away.is_some_and(|a| a < self.wake_cost().as_nanos());
            let busy = away.is_some_and(|a| a < self.cap.as_nanos());
            // Long gaps must be the exception: three in four within a quarter of
            // the cap (the learned spin covers them). A server whose every other
            // wait is its client's 10 ms pause would spin the cap on each of those.
            let rare_long = self
                .gaps
                .quartiles()
                .is_some_and(|(_, p75)| u128::from(p75) * 4 <= self.cap.as_nanos());
            // And spinning on through them must find them (`reach`).
            //
            // Where a wake-up costs more than the cap (the cores are contended: beside
            // CPU hogs a woken thread waits for a time slice), an application that
            // comes straight back spins one wake-up, long gaps or not: blocking costs
            // it the wake-up and its peer the engine thread's takeover, so a spin of
            // that length is spin-then-block's 2-competitive choice. At most
            // `WAKE_SPIN_CAPS` caps.
            let wake = self.wake_cost();
            let e = if straight_back && wake > self.cap {
                Some(wake.min(self.cap.saturating_mul(WAKE_SPIN_CAPS)))
            } else {
                (straight_back && rare_long).then_some(self.cap)
            };
            self.extend.set((EXTEND_EVERY - 1, e, busy));
            (e, busy)
        } else {
            self.extend.set((left - 1, extend, busy));
            (extend, busy)
        };
        // Where the waits end with batches (`batched`, [`SpinBudget::found`]),
        // events queue up while the application waits: it is behind a stream that
        // does not wait for it (16 requests in flight), and its rate is what its
        // waits cost. There the gaps are not independent of the waiter: a blocked
        // side's peer waits for its wake-ups (its engine thread's, then its own)
        // and blocks in turn, and with both sides blocking every gap is two
        // wake-up chains long, beyond any spin learned from them. Beside one CPU
        // hog that equilibrium ran 26–33 k round trips/s against busy polling's
        // 280–360 k, its blocked waits' gaps 1.1 ms at the median
        // (docs/results/study.md, "The adaptive collapse, broken"). So such an
        // application, when busy (not paced by its own work), spins
        // `BATCH_SPIN_CAPS` caps: one side that spins through its peer's wake-ups
        // answers at once, the peer's next waits end within its spin, and both
        // spin again. A wait that blocks or times out clears `batched` (`blocked`,
        // `timed_out`) until the next batch, so a stream that stops, its waits
        // then ending with one event, costs one such spin; while the long gaps
        // outlast it more often than not (`batch_reach`: bursts with 20 ms pauses
        // between them) it is not made; and where it spins more per event than a
        // wake-up per event would cost — a peer whose own gaps are shorter than
        // this spin and whose events come in batches, a server answering every
        // 5 ms with two messages — it rests (`ledger`, [`BatchLedger`]). A guard
        // on the gaps instead (those under the batch spin beyond the cap counted
        // against it) undid the escape, whose first spins are a wake-up chain long
        // and then a tick (docs/results/study.md, "A hazard, and a guard that
        // failed").
        let batch = busy && self.batched > 0 && self.batch_reach >= 0 && self.ledger.ready();
        self.batch_spin.set(batch);
        if batch {
            return self.batch_spin();
        }
        // Of the recent gaps that outlasted the learned spin, no more ended beyond
        // the cap than within it: a server whose clients come in bursts with 20 ms
        // between them would spin the cap at every pause and find nothing.
        // (`reach` counts gaps against the cap; a spin of a wake-up beyond it is
        // bounded by the wake-up, not by what spinning on found.)
        if let Some(spin) = extend {
            if self.reach >= 0 || spin > self.cap {
                return spin;
            }
        }
        let spin = self.next_spin();
        self.learned.set(spin);
        spin
    }

    /// Keep `reach` (see [`SpinBudget::next_wait_spin`]) for a gap about to be
    /// recorded: one that outlasted the learned spin (as the last
    /// [`SpinBudget::next_wait_spin`] that did not spin the cap found it) counts up
    /// if it ended within the cap, down if beyond. Gaps are rarely that long in a saturated stream, so this
    /// remembers them longer than the history of [`GAPS`] does.
    fn reach_by(&mut self, gap: Duration) {
        if gap > self.learned.get() {
            self.reach = tally(self.reach, gap <= self.cap);
            self.batch_reach = tally(self.batch_reach, gap <= self.batch_spin());
        }
    }

    /// A wait ended having spun `spun`: the batch spin's ledger keeps it if the
    /// wait was made with it, and counts down its rest.
    fn wait_ended(&mut self, spun: Duration) {
        self.ledger.waited();
        if self.batch_spin.get() {
            self.ledger.spun(spun);
        }
    }

    /// A wait ended without its event after `waited`, having spun `spun` of it: the
    /// gap was at least that long, and a spin that ran found nothing. Without it a
    /// loop of waits that time out would look like an application that comes
    /// straight back with short gaps and spin the cap on every one
    /// ([`SpinBudget::next_wait_spin`]).
    pub fn timed_out(&mut self, spun: Duration, waited: Duration) {
        self.wait_ended(spun);
        self.batched = 0;
        if !spun.is_zero() {
            self.spins.record_long();
        }
        self.reach_by(waited);
        self.gaps.record(waited);
    }

    /// A wait that waited ended with `n` events (0: it timed out), or one that found
    /// `n` > 1 at once: more than one means events queued up while it waited or was
    /// away ([`SpinBudget::next_wait_spin`]). An application that takes one event
    /// per wait is never seen batched.
    pub fn found(&mut self, n: usize) {
        self.batched = tally(self.batched, n > 1);
        // What a wait made with the batch spin, or a poll after one, found; judged
        // when enough is known. A judgment that rests it ends its period: later
        // polls credit nothing until the batch spin is made again.
        if self.batch_spin.get()
            && self.ledger.found(n, self.batch_spin())
            && self.ledger.judge(self.wake_cost())
        {
            self.batch_spin.set(false);
        }
    }

    /// The application was away `away` between the end of its last wait and the
    /// start of this one.
    pub fn away(&mut self, away: Duration) {
        self.aways.record(away);
    }

    /// An idle period ended with an event found while spinning, `gap` after it began.
    pub fn spun(&mut self, gap: Duration) {
        self.wait_ended(gap);
        self.reach_by(gap);
        self.gaps.record(gap);
        self.spins.record(gap);
    }

    /// An idle period ended with an event after the thread blocked: it had spun
    /// `spun`, then the event fired `slept` after it went to block. `wake`: from the
    /// firing to the thread running, when the event woke it (`None` when the event was
    /// there before it slept, or is not known).
    pub fn blocked(&mut self, spun: Duration, slept: Duration, wake: Option<Duration>) {
        if let Some(w) = wake {
            self.wakes.record(w);
        }
        self.wait_ended(spun);
        self.batched = 0;
        if !spun.is_zero() {
            self.spins.record_long();
        }
        self.reach_by(spun + slept);
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
/// - a takeover after which the engine found work before the application came back,
///   and which found it gone off with its completions (it waits on the engine, e.g.
///   spinning on memory for a WRITE): halve it ([`QuietGap::takeover_served`]; one
///   that found it preempted in its polling loop leaves the gap as it is).
///
/// So an application that polls for everything it waits for pushes the gap to
/// [`QuietGap::MAX`] (a wake-up per 4 ms at most), and one that stops polling
/// and waits for a one-sided operation pulls it to [`QuietGap::MIN`].
///
/// The gap alone cannot serve such an application quickly: its polls for its own
/// sends' completions look like "still polling" and keep the gap near the round trip
/// (a gap of 100 µs was a 135 µs `ib_write_lat` over udp). So the quiet gap also
/// learns whether to watch the link while standing by ([`QuietGap::watch_link`]):
/// armed by a takeover that served the application, disarmed after a few arrivals
/// that the application was polling for anyway ([`QuietGap::arrival_while_polling`])
/// or after which a served takeover found it preempted in its polling loop
/// ([`QuietGap::takeover_served`]), so an application that polls for everything pays
/// no wake-up per message.
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
    /// The longest. Each stand-by look is a wake-up, and on a machine whose cores
    /// are all busy (two spinning applications on two cores, or CPU hogs) each
    /// wake-up preempts a thread that works: at 1 ms (the fixed window this policy
    /// replaced) the two engine threads of a 16-deep stream beside a flow of 4 MB
    /// WRITEs over udp woke 1 000 times a second each and the application threads
    /// were preempted as often (against 40 a second with inline progress), and
    /// beside CPU hogs an application preempted for a slice was taken over after
    /// every one. The price: an application that polled for everything and then
    /// starts waiting for what it does not poll for (spinning on memory for a
    /// peer's WRITE) waits up to 4 ms, not 1, for the first takeover; later ones
    /// come sooner as takeovers halve the gap. That switch from the ceiling was not
    /// measured: the write-lat runs start from the 100 µs starting gap
    /// (docs/results/study.md, "Stand-by looks every 4 ms").
    pub(crate) const MAX: Duration = Duration::from_millis(4);
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
    ///
    /// A served takeover that found the application preempted in its polling loop
    /// also counts against an armed watch, as an arrival it polled for does: the
    /// application polls for its arrivals, and only lost its core. On a machine with
    /// no idle core, the watch's own wake-up for an arrival is what takes the core
    /// from a spinning application (or its peer), so each such arrival then found it
    /// not polling: counted as nothing, they kept the watch armed for a whole run
    /// (1 000–3 000 link takeovers in 20 000 udp round trips, the p90 three to four
    /// times the good runs'; docs/results/verbs.md, "The link watch that stayed
    /// armed").
    ///
    /// Nor does such a takeover halve the gap: the application will poll again once
    /// it has its core back, and on a machine with no idle core the thread's own
    /// timed wake-ups are what take the core from it. Halving on them held the gap at
    /// its 10 µs floor for whole runs once the watch was gone (1 200–1 700 takeovers
    /// in 20 000 round trips, the same p90 as the armed watch's).
    pub(crate) fn takeover_served(&mut self, left: bool) {
        if left {
            self.gap = (self.gap / 2).max(QuietGap::MIN);
            self.watch = QuietGap::WATCH_ARRIVALS;
        } else {
            self.watch = self.watch.saturating_sub(1);
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

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn blocking_pays_when_most_gaps_outlast_the_spin() {
        let mut h = GapHistory::default();
        // Too few to judge: spin.
        for _ in 0..3 {
            h.record(10 * MS);
        }
        assert!(!h.block_pays(40 * US, 40 * US));
        for _ in 0..13 {
            h.record(10 * MS);
        }
        // Every gap outlasts the spin: each wastes it.
        assert!(h.block_pays(40 * US, 40 * US));
        // However short the spin, it is never cheaper than blocking at once there.
        assert!(h.block_pays(US, 40 * US));
        // Short gaps: spinning finds them for less than a wake-up.
        let mut h = GapHistory::default();
        for _ in 0..16 {
            h.record(5 * US);
        }
        assert!(!h.block_pays(40 * US, 40 * US));
        // Gaps longer than a wake-up but within a long spin (a client whose replies
        // come after its peer's wake-ups): spinning through them costs more than a
        // wake-up each.
        let mut h = GapHistory::default();
        for _ in 0..16 {
            h.record(120 * US);
        }
        assert!(h.block_pays(480 * US, 40 * US));
        // ... unless waking up costs more than that (CPU hogs).
        assert!(!h.block_pays(480 * US, 2 * MS));
        // Half short, half long, the spin a wake-up: 8 × 5 + 8 × (40 + 40) = 680 µs
        // against 16 × 40 = 640: block; one more short gap tips it.
        let mut h = GapHistory::default();
        for _ in 0..8 {
            h.record(10 * MS);
        }
        for _ in 0..8 {
            h.record(5 * US);
        }
        assert!(h.block_pays(40 * US, 40 * US));
        h.record(5 * US);
        assert!(!h.block_pays(40 * US, 40 * US));
    }

    /// One wait of a toy ping-pong: the application was away `away` since its last
    /// wait, the event comes `t` after this one began, and a blocked waiter wakes
    /// `wake` after it. True when the spin found it.
    fn toy_wait(b: &mut SpinBudget, away: Duration, t: Duration, wake: Duration) -> bool {
        b.away(away);
        let spin = b.next_spin();
        if t <= spin {
            b.spun(t);
            true
        } else {
            b.blocked(spin, t - spin, Some(wake));
            false
        }
    }

    /// The same wait as [`toy_wait`] for an application's waiter (its spin from
    /// `next_wait_spin`); returns the spin it chose.
    fn toy_app_wait(b: &mut SpinBudget, away: Duration, t: Duration, wake: Duration) -> Duration {
        b.away(away);
        let spin = b.next_wait_spin();
        if t <= spin {
            b.spun(t);
        } else {
            b.blocked(spin, t - spin, Some(wake));
        }
        spin
    }

    #[test]
    fn next_spin_blocks_at_once_on_long_waits_and_spins_again_when_they_shorten() {
        let wake = 40 * US;
        let mut b = SpinBudget::default();
        // Nothing known: the cap, as `spin`.
        assert_eq!(b.next_spin(), SpinBudget::DEFAULT_CAP);
        // An idle server: every request 10 ms after the last; it comes straight back
        // to wait after replying.
        for _ in 0..16 {
            toy_wait(&mut b, US, 10 * MS, wake);
        }
        assert_eq!(b.spin(), wake, "spin would still spin a wake-up");
        assert_eq!(b.next_spin(), Duration::ZERO);
        // Requests come back to back (a blocked wait records when its event fired,
        // not its own wake-up): at the third short gap fewer than 7 in 8 outlast
        // the cap, and the server is not paced by its own work, so it spins again.
        let mut short = 0;
        while b.next_spin().is_zero() {
            b.away(US);
            b.blocked(Duration::ZERO, 5 * US, Some(wake));
            short += 1;
            assert!(short <= GAPS, "never spun again");
        }
        assert_eq!(short, 3);
        // Saturated: found while spinning, and it keeps spinning.
        for _ in 0..100 {
            assert!(toy_wait(&mut b, US, 3 * US, wake));
        }
        assert_eq!(b.next_spin(), wake);
        // An application's waiter would spin the whole cap there (it comes straight
        // back), but its 10 ms waits above outlasted the cap: a spin through a long
        // gap is not known to find it, so the learned spin.
        assert_eq!(b.next_wait_spin(), wake);
        // A gap found within the cap after all (spun through by a longer spin)
        // turns it.
        for _ in 0..=REACH_MAX {
            b.away(US);
            b.spun(600 * US);
            for _ in 0..15 {
                assert!(toy_wait(&mut b, US, 3 * US, wake));
            }
        }
        assert_eq!(b.next_wait_spin(), SpinBudget::DEFAULT_CAP);
        // Beside CPU hogs the peer is sometimes preempted (half the waits 5 ms), but
        // a wake-up costs milliseconds too: blocking at once does not pay.
        let mut b = SpinBudget::default();
        for i in 0..64 {
            let t = if i % 2 == 0 { 7 * US } else { 5 * MS };
            b.away(US);
            b.blocked(Duration::ZERO, t, Some(3 * MS));
        }
        assert_eq!(b.next_spin(), SpinBudget::DEFAULT_CAP);
        // Worse: 10 in 16 waits 5 ms, wake-ups quick, and itself preempted for
        // 3 ms between waits. Blocking at once would pay on these waits, but most
        // are not beyond the cap and it is not paced by its own work: it spins.
        let mut b = SpinBudget::default();
        for i in 0..16 {
            let t = if i < 10 { 5 * MS } else { 7 * US };
            b.away(3 * MS);
            b.blocked(Duration::ZERO, t, Some(wake));
        }
        assert!(b.gaps.block_pays(b.spin(), wake));
        assert_eq!(b.next_spin(), wake);
    }

    #[test]
    fn gaps_longer_than_a_wake_up_block_at_once_only_an_application_paced_by_its_work() {
        let wake = 40 * US;
        // Replies 120 µs after the request: spinning through them costs three
        // wake-ups each.
        let waits = |away: Duration| {
            let mut b = SpinBudget::default();
            // Its first spins found them too, 120 µs after they began.
            for _ in 0..4 {
                b.away(away);
                b.spun(120 * US);
            }
            for _ in 0..16 {
                b.away(away);
                b.blocked(Duration::ZERO, 120 * US, Some(wake));
            }
            b
        };
        // A client that pauses 10 ms after each reply: its rate is its pauses'.
        let paced = waits(10 * MS);
        assert_eq!(paced.spin(), 480 * US);
        assert_eq!(paced.next_spin(), Duration::ZERO);
        // Away four times its waits: still paced; a little less: not.
        assert_eq!(waits(480 * US).next_spin(), Duration::ZERO);
        assert_eq!(waits(479 * US).next_spin(), 480 * US);
        // Straight back (a saturated stream whose own blocking made its gaps long:
        // its engine thread takes over late): keep spinning.
        assert_eq!(waits(2 * US).next_spin(), 480 * US);
        // Nothing known of its time away: spin.
        let mut b = SpinBudget::default();
        for _ in 0..16 {
            b.spun(120 * US);
        }
        assert_eq!(b.next_spin(), 480 * US);
        // Paced, its blocked waits long, but its spins found the events within
        // 4 µs (beside CPU hogs: blocked, it waits for its peer's wake-ups and its
        // own engine thread's takeover): spin.
        let mut b = SpinBudget::default();
        for _ in 0..8 {
            b.away(10 * MS);
            b.spun(4 * US);
        }
        for _ in 0..16 {
            b.away(10 * MS);
            b.blocked(Duration::ZERO, 120 * US, Some(wake));
        }
        assert!(b.gaps.block_pays(b.spin(), wake));
        assert_eq!(b.next_spin(), 480 * US);
        // Fewer than four spins known: spin.
        let mut b = SpinBudget::default();
        for _ in 0..3 {
            b.away(10 * MS);
            b.spun(120 * US);
        }
        for _ in 0..16 {
            b.away(10 * MS);
            b.blocked(Duration::ZERO, 120 * US, Some(wake));
        }
        assert_eq!(b.next_spin(), 480 * US);
        b.spun(120 * US);
        for _ in 0..16 {
            b.away(10 * MS);
            b.blocked(Duration::ZERO, 120 * US, Some(wake));
        }
        assert_eq!(b.next_spin(), Duration::ZERO);
    }

    #[test]
    fn where_wake_ups_cost_more_than_the_cap_a_straight_back_waiter_spins_one() {
        // Beside CPU hogs: a ping-pong straight back to wait, most replies within
        // 2 µs, one in four after 5 ms (the peer off its core for a time slice),
        // blocked wake-ups of 3 ms (woken, it waits for a slice too).
        let mut b = SpinBudget::default();
        for i in 0..64 {
            toy_app_wait(&mut b, US, if i % 4 == 3 { 5 * MS } else { 2 * US }, 3 * MS);
        }
        assert_eq!(b.wake_cost(), 3 * MS);
        assert_eq!(b.next_wait_spin(), 3 * MS, "one wake-up, beyond the cap");
        // Slower wake-ups still: at most four caps.
        let mut slow = b.clone();
        for _ in 0..GAPS {
            toy_app_wait(&mut slow, US, 10 * MS, 9 * MS);
        }
        for _ in 0..EXTEND_EVERY {
            slow.next_wait_spin();
        }
        assert_eq!(slow.next_wait_spin(), 4 * SpinBudget::DEFAULT_CAP);
        // Paced (away 10 ms between waits): not straight back, no long spin.
        let mut p = b.clone();
        for _ in 0..GAPS {
            p.away(10 * MS);
        }
        for _ in 0..EXTEND_EVERY {
            p.next_wait_spin();
        }
        assert!(p.next_wait_spin() <= SpinBudget::DEFAULT_CAP);
        // Quick wake-ups again (the hogs gone), measured on the waits that outlast
        // the spin: the cap at most. (Waits that the long spin still finds measure
        // no wake-up, so the spin stays until one outlasts it: spent on waits that
        // it finds.)
        let mut q = b.clone();
        for _ in 0..64 {
            toy_app_wait(&mut q, US, 10 * MS, 40 * US);
        }
        assert!(q.next_wait_spin() <= SpinBudget::DEFAULT_CAP);
    }

    #[test]
    fn an_application_that_comes_straight_back_spins_through_a_rare_long_gap() {
        let wake = 40 * US;
        let wait = |b: &mut SpinBudget, away: Duration, t: Duration| {
            toy_app_wait(b, away, t, wake);
        };
        // A saturated stream: back to wait 1 µs after each wait, events within 5 µs,
        // one wait in sixteen 600 µs (its peer preempted for a moment).
        let mut b = SpinBudget::default();
        for i in 0..64 {
            let t = if i % 16 == 15 { 600 * US } else { 5 * US };
            wait(&mut b, US, t);
        }
        assert_eq!(b.next_spin(), wake, "the learned spin would block on it");
        assert_eq!(b.next_wait_spin(), SpinBudget::DEFAULT_CAP, "spun through");
        // The same gaps, the application away 50 µs (more than a wake-up) between
        // waits: the learned spin.
        let mut p = b.clone();
        for _ in 0..GAPS {
            p.away(50 * US);
            p.next_wait_spin();
        }
        assert_eq!(p.next_wait_spin(), p.next_spin());
        // Straight back, every other wait 10 ms (a server whose client pauses, and
        // which also waits for its replies' completions): the learned spin, not the
        // cap on each long wait.
        let mut s = SpinBudget::default();
        for i in 0..64 {
            wait(&mut s, US, if i % 2 == 0 { 10 * MS } else { 5 * US });
        }
        assert_eq!(s.next_wait_spin(), s.next_spin());
        assert!(s.next_wait_spin() <= wake);
        // Straight back, bursts of eight quick waits and then a 20 ms pause (a
        // server whose client works in bursts): a spin through the pauses would
        // find nothing, so the learned spin.
        let mut s = SpinBudget::default();
        for i in 0..64 {
            wait(&mut s, US, if i % 8 == 7 { 20 * MS } else { 5 * US });
        }
        assert_eq!(s.next_wait_spin(), s.next_spin());
        // Waits that time out (a loop polling with a 10 ms timeout, nothing
        // arriving) count as long gaps: after a few, the learned spin.
        let mut s = b.clone();
        let mut capped = 0;
        for _ in 0..GAPS {
            s.away(US);
            let spin = s.next_wait_spin();
            capped += usize::from(spin == SpinBudget::DEFAULT_CAP);
            s.timed_out(spin, 10 * MS);
        }
        // As many as it had seen long gaps found within the cap (at most
        // `REACH_MAX`), and the one that turns it.
        assert!(
            capped <= usize::from(REACH_MAX.unsigned_abs()) + 2,
            "{capped} timed-out waits spun the cap"
        );
        assert_eq!(s.next_wait_spin(), s.next_spin());
        // Straight back, nearly every wait outlasting the cap (an idle server):
        // block at once.
        for _ in 0..GAPS {
            wait(&mut b, US, 10 * MS);
        }
        assert_eq!(b.next_wait_spin(), Duration::ZERO);
    }

    #[test]
    fn a_busy_waiter_behind_a_stream_spins_through_its_peers_wake_ups() {
        let wake = 40 * US;
        let batch_spin = SpinBudget::default().batch_spin();
        assert_eq!(batch_spin, SpinBudget::DEFAULT_CAP * BATCH_SPIN_CAPS);
        // Both sides of a saturated stream blocking, beside a CPU hog: back to wait
        // 5 µs after each wait, every wait 1.1 ms (the peer's engine thread and
        // application waking in turn), each ending with 16 events queued.
        // (24 waits: the batch spin is on from the 9th, `EXTEND_EVERY`; a toy
        // whose gaps stay 1.1 ms under it would have it judged not to pay after
        // 256 ms of it, 69 µs an event, as a peer that spinning does not bring back
        // would: see the next test.)
        let mut b = SpinBudget::default();
        for _ in 0..24 {
            toy_app_wait(&mut b, 5 * US, 1100 * US, wake);
            b.found(16);
        }
        assert_eq!(b.next_wait_spin(), batch_spin, "spins through the 1.1 ms");
        // Without the batches (one event a wait: a ping-pong) the same gaps keep
        // the learned spin, which blocks on them.
        let mut single = SpinBudget::default();
        for _ in 0..64 {
            toy_app_wait(&mut single, 5 * US, 1100 * US, wake);
            single.found(1);
        }
        assert!(single.next_wait_spin() < 1100 * US);
        // The stream stops: the first wait's spin runs out (it blocks, then finds
        // the one event of a sparse exchange) and the next does not spin long.
        let mut stop = b.clone();
        stop.away(5 * US);
        let spin = stop.next_wait_spin();
        assert_eq!(spin, batch_spin);
        stop.blocked(spin, 10 * MS, Some(wake));
        stop.found(1);
        assert!(stop.next_wait_spin() < batch_spin, "one long spin per stop");
        // Back to batches after a spin ran out (the peer off its core longer than
        // the spin): the next batch turns it on again.
        stop.away(5 * US);
        stop.blocked(Duration::ZERO, 10 * US, Some(wake));
        stop.found(16);
        assert_eq!(stop.next_wait_spin(), batch_spin);
        // Bursts of batched waits with 20 ms pauses between them (a client that
        // works in bursts): the long spin is made at as many pauses as it had
        // found long gaps within it (at most `REACH_MAX`) and the one that turns
        // it, then no more.
        let mut bursts = b.clone();
        let (mut long_spins, mut late) = (0, 0);
        for i in 0..64 {
            bursts.away(5 * US);
            let spin = bursts.next_wait_spin();
            if i % 8 == 7 && spin == batch_spin {
                long_spins += 1;
                late += usize::from(i >= 48);
            }
            if i % 8 == 7 {
                bursts.blocked(spin, 20 * MS - spin.min(20 * MS), Some(wake));
                bursts.found(1);
            } else {
                bursts.spun(5 * US);
                bursts.found(16);
            }
        }
        assert!(long_spins <= usize::from(REACH_MAX.unsigned_abs()) + 1);
        assert_eq!(late, 0, "pauses the long spin would waste");
        // Paced by its own work (away 10 ms between waits), batches or not: no
        // long spin once that is known (decided every `EXTEND_EVERY` waits).
        let mut paced = b.clone();
        for _ in 0..GAPS {
            paced.away(10 * MS);
            paced.found(16);
        }
        for _ in 0..EXTEND_EVERY {
            paced.next_wait_spin();
        }
        assert!(paced.next_wait_spin() < batch_spin);
    }

    /// A busy waiter whose waits end with 16 events after 1.1 ms (both sides of a
    /// stream blocking, beside a CPU hog): the batch spin is on.
    fn behind_a_blocked_stream() -> SpinBudget {
        let mut b = SpinBudget::default();
        for _ in 0..24 {
            toy_app_wait(&mut b, 5 * US, 1100 * US, 40 * US);
            b.found(16);
        }
        assert_eq!(b.next_wait_spin(), b.batch_spin());
        b
    }

    #[test]
    fn the_batch_spin_keeps_a_stream_it_brings_back_and_rests_on_a_slow_peers_gaps() {
        let wake = 40 * US;
        // The escape: after a wait that blocked, the next is 1.1 ms (the peer
        // still waking); after one spun through, the peer answers at once and the
        // gaps are the stream's own (5 µs, 16 events each), one in 8 the peer off
        // its core for a 4 ms tick. ~32 µs spun an event: it pays, and every wait
        // spins long, across many judgments.
        let mut b = behind_a_blocked_stream();
        let batch_spin = b.batch_spin();
        let mut blocked_before = true;
        for i in 0..2048 {
            let t = if blocked_before {
                1100 * US
            } else if i % 8 == 7 {
                4 * MS
            } else {
                5 * US
            };
            let spin = toy_app_wait(&mut b, 5 * US, t, wake);
            b.found(16);
            assert_eq!(spin, batch_spin, "wait {i}");
            blocked_before = t > spin;
        }
        // A server whose waits end with two events every 5 ms (its peer takes
        // 5 ms: 2.5 ms spun an event where a wake-up costs 40 µs). The batch spin
        // is judged after `BATCH_JUDGE_SPINS` batch spins' worth of spinning (52
        // waits) and rests `BATCH_REST_MIN` waits, then twice that each time it
        // fails again.
        let mut slow = b.clone();
        let mut long = Vec::new();
        for i in 0..2000 {
            let spin = toy_app_wait(&mut slow, 5 * US, 5 * MS, wake);
            slow.found(2);
            if spin == batch_spin {
                long.push(i);
            }
        }
        let per_try = 52;
        let first = long.iter().zip(0..).take_while(|(&i, k)| i == *k).count();
        assert!((1..=per_try).contains(&first), "{long:?}");
        let next = long.get(first).copied();
        assert!(
            next.is_some_and(|i| i >= first + BATCH_REST_MIN as usize),
            "rested, then tried again: {long:?}"
        );
        assert!(
            long.len() <= 6 * per_try,
            "{} long spins of 2000",
            long.len()
        );
        let last = long[long.len() - 1];
        assert!(
            2000 - last > 512,
            "the rests doubled: last long spin at wait {last}"
        );
        // Back behind a stream that the batch spin serves: it pays again, and
        // after the rest the waits spin long for good.
        let mut back = slow.clone();
        let mut spins = Vec::new();
        for _ in 0..8192 {
            let spin = toy_app_wait(&mut back, 5 * US, 5 * US, wake);
            back.found(16);
            spins.push(spin == batch_spin);
        }
        assert!(spins[4096..].iter().all(|&s| s), "spins long again");
    }

    #[test]
    fn the_batch_spin_is_sixteen_caps_at_most_16_ms_and_never_below_the_cap() {
        assert_eq!(SpinBudget::new(100 * US).batch_spin(), 1600 * US);
        assert_eq!(SpinBudget::new(10 * MS).batch_spin(), 16 * MS);
        assert_eq!(SpinBudget::new(50 * MS).batch_spin(), 50 * MS);
    }

    /// A toy ping-pong of two adaptive waiters: a side's wait is the round trip,
    /// plus its peer's two wake-ups (engine thread, application) when the peer
    /// blocked for the message before. `idle`: the client pauses 10 ms after each
    /// reply (the idle phase), so the server's waits are 10 ms and it always blocks,
    /// and the client's waits include its wake-ups whatever the client does.
    /// Returns, per side, the waits found while spinning over the last `tail`
    /// rounds.
    fn ping_pong(
        client: &mut SpinBudget,
        server: &mut SpinBudget,
        rounds: usize,
        tail: usize,
        idle: bool,
    ) -> (usize, usize) {
        let (rtt, wake, turn) = (10 * US, 40 * US, US);
        let mut client_spun = true;
        let mut found = (0, 0);
        for r in 0..rounds {
            let t = if idle {
                10 * MS
            } else if client_spun {
                rtt
            } else {
                rtt + 2 * wake
            };
            let server_spun = toy_wait(server, turn, t, wake);
            let t = if server_spun { rtt } else { rtt + 2 * wake };
            let away = if idle { 10 * MS } else { turn };
            client_spun = toy_wait(client, away, t, wake);
            if r >= rounds - tail {
                found.0 += usize::from(client_spun);
                found.1 += usize::from(server_spun);
            }
        }
        found
    }

    #[test]
    fn two_peers_in_a_ping_pong_that_both_blocked_spin_again() {
        // Both blocked, each waiting for the other's wake-ups (90 µs).
        let (mut client, mut server) = (SpinBudget::default(), SpinBudget::default());
        for b in [&mut client, &mut server] {
            for _ in 0..16 {
                b.away(US);
                b.blocked(Duration::ZERO, 90 * US, Some(40 * US));
            }
        }
        assert_eq!(
            ping_pong(&mut client, &mut server, 200, 100, false),
            (100, 100),
            "both spin"
        );
    }

    #[test]
    fn in_the_idle_phase_both_sides_block_at_once() {
        let (mut client, mut server) = (SpinBudget::default(), SpinBudget::default());
        let rounds = 200;
        let (client_spun, server_spun) =
            ping_pong(&mut client, &mut server, rounds, rounds - 8, true);
        assert_eq!(server_spun, 0, "10 ms gaps: the server never spins");
        assert_eq!(
            client_spun, 0,
            "replies take 90 µs whatever the client does: it blocks at once"
        );
        assert_eq!(client.next_spin(), Duration::ZERO);
        assert!(!client.spin().is_zero(), "where spinning is the default");
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
        assert_eq!(q.get(), QuietGap::MAX / 2);
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
        // neither halves the gap nor arms the watch.
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

    /// The bad mode of issues 13/16: two spinning ping-pong programs on two cores,
    /// the watch armed once. Each arrival wakes the engine thread, whose wake-up takes
    /// a core from a spinning application: the application has not polled for 3 µs,
    /// so the arrival is a link takeover, served, and it found the application in
    /// its polling loop (its last poll was empty). Such takeovers must disarm the
    /// watch as polled arrivals do; counted as nothing, every arrival of the run was
    /// a takeover.
    #[test]
    fn takeovers_that_found_the_application_preempted_in_its_loop_disarm_the_watch() {
        let mut q = QuietGap::default();
        q.takeover_served(true);
        assert!(q.watch_link());
        let mut takeovers = 0;
        while q.watch_link() && takeovers < 1000 {
            // An arrival the application was not polling for at that moment
            // (preempted), served by the takeover.
            q.takeover_served(false);
            takeovers += 1;
        }
        assert_eq!(
            takeovers,
            usize::from(QuietGap::WATCH_ARRIVALS),
            "the watch stayed armed through {takeovers} takeovers of a polling application"
        );
        // Nor do they pull the gap down: the thread's own wake-ups every gap would
        // then preempt the application and confirm themselves.
        for _ in 0..10 {
            q.app_still_polling();
        }
        let before = q.get();
        assert!(before > QuietGap::MIN);
        for _ in 0..100 {
            q.takeover_served(false);
        }
        assert_eq!(
            q.get(),
            before,
            "takeovers of a preempted application halved the gap"
        );
        // Mixed with arrivals it polled for: disarmed sooner, never later.
        let mut q = QuietGap::default();
        q.takeover_served(true);
        for _ in 0..QuietGap::WATCH_ARRIVALS / 2 {
            q.arrival_while_polling();
            q.takeover_served(false);
        }
        assert!(!q.watch_link());
        // An application that waits on the engine (ib_write_lat) re-arms it with
        // every WRITE it leaves to the engine, whatever else happens in the round.
        let mut q = QuietGap::default();
        for _ in 0..100 {
            q.takeover_served(true);
            q.takeover_served(false);
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
