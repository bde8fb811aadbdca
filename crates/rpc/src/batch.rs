//! Which rule [`Batching::Adaptive`](crate::Batching::Adaptive) holds calls by,
//! chosen from the calls' latency measured on the connection (issue 16). Pure: fed
//! with samples, so the choice is tested without a clock.
//!
//! Two rules:
//! - [`Rule::Nagle`]: a call leaves at once while nothing is unanswered; while
//!   something is, it waits for the next flush (a waiting caller, an answer, a full
//!   batch). A lone call never waits.
//! - [`Rule::Gather`]: every call waits for the next flush, the first one too
//!   (static batching's rule, DaRPC §6.1).
//!
//! Neither wins everywhere (docs/results/rpc.md, "Batching that follows the load"):
//! with two calls outstanding over udp, Nagle sends one call a message forever (each
//! new call finds the other unanswered and leaves alone at the caller's next wait),
//! where Gather settles into pairs and halves the messages, 1.19x the calls per
//! second; over shm, where a message costs little, the same pairing loses the overlap
//! of the two calls (0.85x). Which one pays depends on a message's cost on the
//! running link and on how the caller issues its calls, so it is measured.
//!
//! The measure is the calls' mean latency (start to completion) over an epoch of
//! [`EPOCH`] calls under one rule: with a fixed number of calls outstanding, the
//! rate is that number over the mean latency (Little's law), so the lower mean is
//! the higher rate; with calls paced from outside it is the latency itself. The
//! picker runs the rule in force, and every `interval` epochs tries the other for one
//! epoch; it switches when that epoch's mean, and then the next one's, undercut the
//! recent mean of the rule in force by [`MARGIN`] (a call counts as at most [`CLIP`]
//! times that mean, so a preemption does not decide). A try that loses doubles the interval (up to
//! [`MAX_INTERVAL`] epochs, so a lost try costs at most 1/[`MAX_INTERVAL`] of the
//! calls); a switch, or a change in the load (the mean number of calls pending at a
//! call's start moved by more than [`LOAD_CHANGE`]x), brings it back to
//! [`MIN_INTERVAL`]. While the calls are lone (fewer than [`CROWD`] pending on
//! average), Gather can only delay them: the picker keeps Nagle and tries nothing.

/// Calls per epoch.
pub(crate) const EPOCH: u32 = 64;
/// The first calls of an epoch are not measured: the rule's pattern (pairs, or
/// singles) takes a few calls to set in after a change.
pub(crate) const SETTLE: u32 = 8;
/// A try must undercut the rule in force by this fraction to replace it.
pub(crate) const MARGIN: f64 = 0.08;
/// Epochs between tries, at least ...
pub(crate) const MIN_INTERVAL: u32 = 4;
/// ... and at most.
pub(crate) const MAX_INTERVAL: u32 = 128;
/// Mean calls pending at a call's start below which calls count as lone.
pub(crate) const CROWD: f64 = 1.5;
/// A change of the load by this factor (either way) restarts the tries.
pub(crate) const LOAD_CHANGE: f64 = 1.5;
/// Weight of the newest epoch in the rule in force's mean.
const ALPHA: f64 = 0.25;
/// A call's latency counts as at most this many times the rule in force's mean: one
/// preemption (milliseconds against microseconds) must not decide an epoch.
const CLIP: f64 = 4.0;
/// Weight of the newest call in the load's mean.
const LOAD_ALPHA: f64 = 1.0 / 32.0;

/// A batching rule (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Hold a call only while something is unanswered.
    Nagle,
    /// Hold every call until the next flush.
    Gather,
}

impl Rule {
    fn other(self) -> Rule {
        match self {
            Rule::Nagle => Rule::Gather,
            Rule::Gather => Rule::Nagle,
        }
    }
}

/// What the picker did, for the client's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PickerStats {
    /// Epochs run under the other rule, to measure it.
    pub tries: u64,
    /// Tries that won: the rule in force changed.
    pub switches: u64,
}

/// Chooses the rule (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct RulePicker {
    /// The rule in force.
    rule: Rule,
    /// This epoch runs the other rule.
    trying: bool,
    /// The last epoch was a try that won: this one tries again before the switch.
    confirming: bool,
    /// Calls finished in this epoch, and the measured ones' latency sum (ns).
    calls: u32,
    measured: u32,
    sum_ns: f64,
    /// The rule in force's recent mean latency per call (ns).
    mean_ns: Option<f64>,
    /// Epochs between tries, and epochs since the last one.
    interval: u32,
    since: u32,
    /// Mean calls pending at a call's start, and its value at the last try.
    load: f64,
    load_at_try: f64,
    stats: PickerStats,
}

impl Default for RulePicker {
    fn default() -> RulePicker {
        RulePicker {
            rule: Rule::Nagle,
            trying: false,
            confirming: false,
            calls: 0,
            measured: 0,
            sum_ns: 0.0,
            mean_ns: None,
            interval: MIN_INTERVAL,
            since: 0,
            load: 1.0,
            load_at_try: 1.0,
            stats: PickerStats::default(),
        }
    }
}

impl RulePicker {
    /// The rule for a call enqueued now.
    pub(crate) fn rule(&self) -> Rule {
        if self.trying {
            self.rule.other()
        } else {
            self.rule
        }
    }

    /// The rule in force (not the one on trial).
    #[cfg(test)]
    pub(crate) fn in_force(&self) -> Rule {
        self.rule
    }

    /// Counters.
    pub(crate) fn stats(&self) -> PickerStats {
        self.stats
    }

    /// A call starts with `pending` calls pending on the connection, itself included.
    pub(crate) fn started(&mut self, pending: usize) {
        self.load += LOAD_ALPHA * (pending as f64 - self.load);
    }

    /// A call finished after `ns` nanoseconds.
    pub(crate) fn finished(&mut self, ns: f64) {
        if !ns.is_finite() || ns < 0.0 {
            return;
        }
        self.calls += 1;
        if self.calls > SETTLE {
            self.measured += 1;
            self.sum_ns += self.mean_ns.map_or(ns, |m| ns.min(CLIP * m));
        }
        if self.calls >= EPOCH {
            self.end_epoch();
        }
    }

    fn end_epoch(&mut self) {
        let mean = (self.measured > 0).then(|| self.sum_ns / f64::from(self.measured));
        self.calls = 0;
        self.measured = 0;
        self.sum_ns = 0.0;
        let Some(mean) = mean else {
            return;
        };
        if self.trying {
            self.since = 0;
            self.stats.tries += 1;
            match self.mean_ns {
                Some(cur) if mean < cur * (1.0 - MARGIN) => {
                    if self.confirming {
                        self.trying = false;
                        self.confirming = false;
                        self.rule = self.rule.other();
                        self.mean_ns = Some(mean);
                        self.interval = MIN_INTERVAL;
                        self.stats.switches += 1;
                    } else {
                        // Won once: one more epoch of it before the switch, so a
                        // lucky epoch alone does not move the rule.
                        self.confirming = true;
                    }
                }
                _ => {
                    self.trying = false;
                    self.confirming = false;
                    self.interval = (self.interval * 2).min(MAX_INTERVAL);
                }
            }
            return;
        }
        self.mean_ns = Some(match self.mean_ns {
            Some(m) => m + ALPHA * (mean - m),
            None => mean,
        });
        if self.load < CROWD {
            // Lone calls: Gather could only delay them.
            self.rule = Rule::Nagle;
            self.since = 0;
            return;
        }
        let ratio = self.load / self.load_at_try;
        if !(1.0 / LOAD_CHANGE..=LOAD_CHANGE).contains(&ratio) {
            self.interval = MIN_INTERVAL;
        }
        self.since += 1;
        if self.since >= self.interval {
            self.trying = true;
            self.load_at_try = self.load;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `epochs` epochs with `pending` calls pending at each start, each call
    /// taking `nagle` or `gather` ns by the rule it ran under.
    fn run(p: &mut RulePicker, epochs: u32, pending: usize, nagle: f64, gather: f64) {
        for _ in 0..epochs * EPOCH {
            p.started(pending);
            let ns = match p.rule() {
                Rule::Nagle => nagle,
                Rule::Gather => gather,
            };
            p.finished(ns);
        }
    }

    #[test]
    fn lone_calls_stay_on_nagle_and_nothing_is_tried() {
        let mut p = RulePicker::default();
        // Gather would look cheaper, but a lone call only waits under it.
        run(&mut p, 200, 1, 5000.0, 1000.0);
        assert_eq!(p.in_force(), Rule::Nagle);
        assert_eq!(p.stats().tries, 0);
    }

    #[test]
    fn gather_wins_where_its_calls_finish_sooner_and_nagle_returns_when_they_do_not() {
        let mut p = RulePicker::default();
        // Two outstanding over udp: pairs beat singles by ~19 %.
        run(&mut p, 40, 2, 10_900.0, 9_100.0);
        assert_eq!(p.in_force(), Rule::Gather);
        assert_eq!(p.stats().switches, 1);
        assert!(
            p.stats().tries >= 2,
            "a switch is confirmed by a second try"
        );
        // The link changes (shm): pairs now lose the overlap.
        run(&mut p, 600, 2, 3_000.0, 3_800.0);
        assert_eq!(p.in_force(), Rule::Nagle);
        assert_eq!(p.stats().switches, 2);
    }

    #[test]
    fn a_try_that_loses_doubles_the_interval_up_to_its_bound() {
        let mut p = RulePicker::default();
        run(&mut p, 2000, 8, 3_000.0, 3_800.0);
        assert_eq!(p.in_force(), Rule::Nagle);
        assert_eq!(p.interval, MAX_INTERVAL);
        // 4 + 8 + ... + 128 epochs, then one try per 128: few tries in 2 000 epochs.
        let tries = p.stats().tries;
        assert!((5..=25).contains(&tries), "{tries} tries");
        // Near-equal costs (within the margin) never switch.
        run(&mut p, 2000, 8, 3_000.0, 2_900.0);
        assert_eq!(p.in_force(), Rule::Nagle);
        assert_eq!(p.stats().switches, 0);
    }

    #[test]
    fn a_change_of_load_restarts_the_tries() {
        let mut p = RulePicker::default();
        run(&mut p, 1000, 2, 3_000.0, 3_800.0);
        assert_eq!(p.interval, MAX_INTERVAL);
        // The load grows to 32 outstanding, where gathering pays.
        run(&mut p, 40, 32, 40_000.0, 30_000.0);
        assert_eq!(p.in_force(), Rule::Gather);
    }

    #[test]
    fn one_lucky_epoch_does_not_switch_and_a_preemption_does_not_decide() {
        let mut p = RulePicker::default();
        run(&mut p, 4, 2, 3_000.0, 3_800.0);
        // The first try (epoch 5) runs Gather; make its epoch look fast by luck.
        assert_eq!(p.rule(), Rule::Gather);
        for _ in 0..EPOCH {
            p.started(2);
            p.finished(1_000.0);
        }
        // Won once: tried again, not switched.
        assert_eq!((p.in_force(), p.rule()), (Rule::Nagle, Rule::Gather));
        run(&mut p, 1, 2, 3_000.0, 3_800.0);
        assert_eq!((p.in_force(), p.rule()), (Rule::Nagle, Rule::Nagle));
        assert_eq!(p.stats().switches, 0);
        // A preempted call (10 ms) in an epoch of the rule in force counts as 4x the
        // mean, not as 10 ms: the next try of the dearer rule still loses.
        let mut p = RulePicker::default();
        run(&mut p, 4, 2, 3_000.0, 3_800.0);
        assert_eq!(p.rule(), Rule::Gather);
        run(&mut p, 1, 2, 3_000.0, 3_800.0); // the try, lost
        for i in 0..EPOCH {
            p.started(2);
            p.finished(if i == EPOCH - 1 { 1e7 } else { 3_000.0 });
        }
        run(&mut p, 40, 2, 3_000.0, 3_800.0);
        assert_eq!(p.stats().switches, 0);
    }

    #[test]
    fn bad_samples_are_ignored() {
        let mut p = RulePicker::default();
        p.started(2);
        p.finished(f64::NAN);
        p.finished(-1.0);
        p.finished(f64::INFINITY);
        assert_eq!(p.calls, 0);
    }
}
