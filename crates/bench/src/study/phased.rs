//! The adaptive run of issue 16: a trace of phases — idle, saturated, CPU hogs, a
//! large background flow — each run with every static configuration of who drives
//! the engine and how the application waits, and with weft's adaptive one. Per
//! phase one figure of merit; the best static configuration of a phase is that
//! phase's oracle; a configuration's score over the trace is the geometric mean of
//! its figure against the oracle's (1.0: the oracle in every phase).
//!
//! Rounds alternate the order of the configurations (ABAB … then BABA …), and a
//! figure is the median of its rounds.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::{perf, Hogs, Point, Row, Setup, Steps, BESIDE_ITERS, DEFAULT_MTU};
use crate::perf::record::Record;
use crate::rpc_bench::median_spread;

/// Who drives the engine and how the application waits.
#[derive(Debug, Clone, Copy)]
pub(super) struct Config {
    pub label: &'static str,
    progress: &'static str,
    wait: &'static str,
    /// False for weft's adaptive configuration (the candidate, not an oracle).
    pub fixed: bool,
}

pub(super) const CONFIGS: [Config; 4] = [
    Config {
        label: "poll-inline",
        progress: "inline",
        wait: "poll",
        fixed: true,
    },
    Config {
        label: "poll-thread",
        progress: "thread",
        wait: "poll",
        fixed: true,
    },
    Config {
        label: "block",
        progress: "thread",
        wait: "block",
        fixed: true,
    },
    Config {
        label: "adaptive",
        progress: "thread",
        wait: "adaptive",
        fixed: false,
    },
];

/// A phase of the trace and its figure of merit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// A sparse ping-pong (a 10 ms pause after each round): CPU cores both processes
    /// use, lower is better.
    Idle,
    /// 16 operations in flight back to back: operations per second, higher is better.
    Saturated,
    /// One operation at a time beside a busy loop per core: the mean round trip
    /// (the phase's time over its round trips, pooled over its windows), lower is
    /// better.
    Hogs,
    /// 16 in flight beside a flow of large WRITEs on the same device: the small
    /// operations' p99, lower is better.
    Background,
}

pub(super) const PHASES: [Phase; 4] = [
    Phase::Idle,
    Phase::Saturated,
    Phase::Hogs,
    Phase::Background,
];

/// The idle phase's pause after each round.
const IDLE_PAUSE_US: u64 = 10_000;
/// Operations of the saturated and background phases per `--iters`.
const LONG: u64 = 250;
/// Windows of the hogs phase per configuration and round: `weft perf` children of
/// their own, each with this share of the phase's round trips and time limit. Beside
/// busy loops the scheduler's placement of the two processes (on one core or two,
/// time slices in step or not) holds for a child's whole run and decides it, so a
/// round is several draws of it, pooled.
pub(super) const HOGS_WINDOWS: usize = 4;

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Saturated => "saturated",
            Phase::Hogs => "hogs",
            Phase::Background => "background",
        }
    }

    /// The figure's name and whether higher is better.
    pub fn metric(self) -> (&'static str, bool) {
        match self {
            Phase::Idle => ("cpu_cores", false),
            Phase::Saturated => ("ops_per_s", true),
            Phase::Hogs => ("rtt_mean_us", false),
            Phase::Background => ("p99_us", false),
        }
    }

    /// The figure of a measured row.
    pub fn value(self, r: &Row) -> Option<f64> {
        match self {
            Phase::Idle => r.cpu_cores,
            Phase::Saturated => r.ops_per_s,
            Phase::Hogs => r.rtt_mean_us(),
            Phase::Background => r.p99_us,
        }
    }

    /// `weft perf` children per configuration and round.
    pub fn windows(self) -> usize {
        if self == Phase::Hogs {
            HOGS_WINDOWS
        } else {
            1
        }
    }

    /// The figure of one round from its rows (one per window). The hogs phase pools
    /// its windows: their time over their round trips, as one run of the same length
    /// would have measured (a window the hogs stalled counts for its time, not as a
    /// figure of its own). Other phases have one row a round.
    fn round_value(self, rows: &[&Row]) -> Option<f64> {
        if self != Phase::Hogs {
            return rows.first().and_then(|r| self.value(r));
        }
        let (mut us, mut n) = (0.0, 0u64);
        for r in rows {
            us += r.iters as f64 * r.rtt_mean_us()?;
            n += r.iters;
        }
        (n > 0).then(|| us / n as f64)
    }

    fn hogs(self, s: &Setup) -> usize {
        if self == Phase::Hogs {
            s.hogs
        } else {
            0
        }
    }

    /// The `weft perf` child of this phase in configuration `c`.
    fn point(self, s: &Setup, c: &Config) -> Point {
        let mut flags: Vec<String> = vec![
            "--progress".into(),
            c.progress.into(),
            "--wait".into(),
            c.wait.into(),
        ];
        let (outstanding, bulk, iters) = match self {
            Phase::Idle => {
                flags.extend(["--pause-us".into(), IDLE_PAUSE_US.to_string()]);
                // About a second of pauses (the time limit also bounds it).
                (None, None, (s.iters / 20).max(20))
            }
            // Long enough to last about the time limit (a point of a few ms would
            // see the hogs or the flow for a handful of scheduler slices); the time
            // limit ends it sooner on a slow configuration.
            Phase::Saturated => (Some(super::SATURATED), None, s.iters * LONG),
            Phase::Hogs => (
                None,
                None,
                (s.iters * BESIDE_ITERS / HOGS_WINDOWS as u64).max(1),
            ),
            Phase::Background => (Some(super::SATURATED), Some(s.bulk_size), s.iters * LONG),
        };
        Point {
            test: "send-lat",
            flags,
            sizes: vec![64],
            outstanding,
            mtu: DEFAULT_MTU,
            scheduler: "drr",
            bulk,
            iters,
            time_limit: (self == Phase::Hogs).then(|| s.time_limit / HOGS_WINDOWS as f64),
        }
    }
}

/// A configuration's figure in one phase over the rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Always "weft-phased-summary".
    pub study: String,
    pub link: String,
    pub phase: String,
    pub config: String,
    pub metric: String,
    pub higher_is_better: bool,
    /// Median over the rounds, and its spread.
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub rounds: usize,
    /// This configuration's figure against the best static configuration's (cost
    /// orientation: 1.0 is the oracle, 1.1 is 10 % worse, below 1 better).
    pub vs_oracle: Option<f64>,
    /// The phase's oracle: the best static configuration.
    pub oracle: Option<String>,
    /// CPU µs of both processes per operation (median over the rounds).
    pub cpu_us_per_op: Option<f64>,
}

/// Runs the trace: `rounds` rounds, each phase in turn, every configuration per
/// phase (alternating order). Emits a row per point through `emit` and returns the
/// summaries (per phase and configuration, then a "trace" row per configuration).
pub(super) fn run(
    s: &Setup,
    rounds: usize,
    steps: &mut Steps,
    mut emit: impl FnMut(Row) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Summary>> {
    let mut rows: Vec<Row> = Vec::new();
    for round in 0..rounds {
        for phase in PHASES {
            let hogs = phase.hogs(s);
            let budget = s.budget(1) * (CONFIGS.len() * phase.windows()) as u32;
            let _hogs = (hogs > 0).then(|| Hogs::start(hogs, budget));
            // Windows (the hogs phase's) take the configurations in turn, in an
            // order that alternates from window to window as from round to round.
            for w in 0..phase.windows() {
                for c in super::alternating(&CONFIGS, round + w) {
                    steps.step(&format!(
                        "phased round {}/{rounds}: {} with {}{}",
                        round + 1,
                        phase.name(),
                        c.label,
                        if phase.windows() > 1 {
                            format!(", window {}/{}", w + 1, phase.windows())
                        } else {
                            String::new()
                        }
                    ));
                    let p = phase.point(s, c);
                    for r in perf(s, &p) {
                        let mut row = phase_row(s, phase, c, &p, hogs, round, &r);
                        row.window = (phase.windows() > 1).then_some(w as u32 + 1);
                        rows.push(row.clone());
                        emit(row)?;
                    }
                }
            }
        }
    }
    Ok(summarize(s.link, &rows))
}

fn phase_row(
    s: &Setup,
    phase: Phase,
    c: &Config,
    p: &Point,
    hogs: usize,
    round: usize,
    r: &Record,
) -> Row {
    let mut row = super::to_row(s, "phased", c.label, p, hogs, r);
    // A plain ping-pong (idle, hogs) has one operation in flight.
    row.outstanding = p.outstanding.unwrap_or(1);
    row.phase = Some(phase.name().into());
    row.round = Some(round as u32 + 1);
    // Cores both processes kept busy: CPU per operation times operations per
    // second (the rate counts the idle phase's pauses).
    row.cpu_cores = match (row.cpu_us_per_op, row.ops_per_s) {
        (Some(c), Some(x)) => Some(c * x / 1e6),
        _ => None,
    };
    row
}

/// Medians per phase and configuration, each against the phase's best static
/// configuration, and the trace's score per configuration.
pub(super) fn summarize(link: &str, rows: &[Row]) -> Vec<Summary> {
    let mut out = Vec::new();
    // (config, per-phase cost ratios) for the trace score.
    let mut ratios: Vec<(&str, Vec<f64>)> = CONFIGS.iter().map(|c| (c.label, Vec::new())).collect();
    for phase in PHASES {
        let (metric, higher) = phase.metric();
        let mut per: Vec<Summary> = CONFIGS
            .iter()
            .map(|c| {
                let mine: Vec<&Row> = rows
                    .iter()
                    .filter(|r| {
                        r.phase.as_deref() == Some(phase.name())
                            && r.verb == c.label
                            && r.error.is_none()
                    })
                    .collect();
                // One figure a round (the hogs phase pools its windows).
                let mut by_round: BTreeMap<Option<u32>, Vec<&Row>> = BTreeMap::new();
                for r in &mine {
                    by_round.entry(r.round).or_default().push(r);
                }
                let vals: Vec<f64> = by_round
                    .values()
                    .filter_map(|v| phase.round_value(v))
                    .collect();
                let cpu: Vec<f64> = mine.iter().filter_map(|r| r.cpu_us_per_op).collect();
                let ms = median_spread(&vals);
                Summary {
                    study: "weft-phased-summary".into(),
                    link: link.into(),
                    phase: phase.name().into(),
                    config: c.label.into(),
                    metric: metric.into(),
                    higher_is_better: higher,
                    median: ms.map(|m| m.0),
                    min: ms.map(|m| m.1),
                    max: ms.map(|m| m.2),
                    rounds: vals.len(),
                    cpu_us_per_op: median_spread(&cpu).map(|m| m.0),
                    ..Summary::default()
                }
            })
            .collect();
        // The oracle: the best static configuration's median.
        let oracle = per
            .iter()
            .zip(&CONFIGS)
            .filter(|(s, c)| c.fixed && s.median.is_some())
            .map(|(s, _)| (s.config.clone(), s.median.unwrap_or(f64::NAN)))
            .reduce(|a, b| {
                let better = if higher { b.1 > a.1 } else { b.1 < a.1 };
                if better {
                    b
                } else {
                    a
                }
            });
        for (sm, (_, r)) in per.iter_mut().zip(ratios.iter_mut()) {
            if let (Some((name, best)), Some(v)) = (&oracle, sm.median) {
                let cost = cost_ratio(v, *best, higher);
                sm.vs_oracle = cost;
                sm.oracle = Some(name.clone());
                if let Some(x) = cost {
                    r.push(x);
                }
            }
        }
        out.extend(per);
    }
    for (config, r) in ratios {
        let score = (r.len() == PHASES.len()).then(|| geomean(&r));
        out.push(Summary {
            study: "weft-phased-summary".into(),
            link: link.into(),
            phase: "trace".into(),
            config: config.into(),
            metric: "geomean_vs_oracle".into(),
            higher_is_better: false,
            median: score,
            rounds: r.len(),
            ..Summary::default()
        });
    }
    out
}

/// `v` against `best` as a cost: v/best when lower is better, best/v when higher
/// is. Zero against zero is a tie; anything against a zero cost is unbounded.
fn cost_ratio(v: f64, best: f64, higher: bool) -> Option<f64> {
    let (num, den) = if higher { (best, v) } else { (v, best) };
    if !(num.is_finite() && den.is_finite()) || num < 0.0 || den < 0.0 {
        return None;
    }
    if den == 0.0 {
        return (num == 0.0).then_some(1.0);
    }
    Some(num / den)
}

fn geomean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

/// The summaries as a table.
pub(super) fn print_summary(sums: &[Summary]) {
    println!("\nPhased trace: medians over the rounds, against the best static configuration");
    println!(
        " {:<11} {:<12} {:<17} {:>12} {:>22} {:>10} {:>9}",
        "phase", "config", "metric", "median", "spread", "vs oracle", "cpu us/op"
    );
    let f = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
    for s in sums {
        println!(
            " {:<11} {:<12} {:<17} {:>12} {:>22} {:>10} {:>9}",
            s.phase,
            s.config,
            s.metric,
            f(s.median),
            match (s.min, s.max) {
                (Some(a), Some(b)) => format!("{a:.4} … {b:.4}"),
                _ => "-".into(),
            },
            s.vs_oracle
                .map_or_else(|| "-".into(), |v| format!("{v:.2}x")),
            s.cpu_us_per_op
                .map_or_else(|| "-".into(), |v| format!("{v:.2}")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(phase: Phase, config: &str, round: u32, v: f64) -> Row {
        let mut r = Row {
            figure: "phased".into(),
            verb: config.into(),
            phase: Some(phase.name().into()),
            round: Some(round),
            ..Row::default()
        };
        match phase {
            Phase::Idle => r.cpu_cores = Some(v),
            Phase::Saturated => r.ops_per_s = Some(v),
            Phase::Hogs => {
                r.ops_per_s = Some(1e6 / v);
                r.iters = 1000;
            }
            Phase::Background => r.p99_us = Some(v),
        }
        r
    }

    /// A window of the hogs phase: `iters` round trips of `rtt_us` each.
    fn window(config: &str, round: u32, window: u32, iters: u64, rtt_us: f64) -> Row {
        Row {
            figure: "phased".into(),
            verb: config.into(),
            phase: Some("hogs".into()),
            round: Some(round),
            window: Some(window),
            iters,
            ops_per_s: Some(1e6 / rtt_us),
            ..Row::default()
        }
    }

    #[test]
    fn the_hogs_phase_pools_its_windows_per_round_and_takes_the_median_of_rounds() {
        let mut rows = Vec::new();
        for c in CONFIGS {
            for round in 1..=3 {
                for w in 1..=4 {
                    rows.push(window(c.label, round, w, 10_000, 10.0));
                }
            }
        }
        // Adaptive, round 1: three quick windows and one the hogs stalled (500 round
        // trips of 4 ms): the round's figure is its time over its round trips, not
        // the stalled window's 4 ms nor the others' 10 µs.
        rows.retain(|r| !(r.verb == "adaptive" && r.round == Some(1) && r.window == Some(4)));
        rows.push(window("adaptive", 1, 4, 500, 4000.0));
        // Round 2: every window stalled.
        rows.retain(|r| !(r.verb == "adaptive" && r.round == Some(2)));
        for w in 1..=4 {
            rows.push(window("adaptive", 2, w, 500, 4000.0));
        }
        let s = summarize("shm", &rows);
        let a = s
            .iter()
            .find(|x| x.phase == "hogs" && x.config == "adaptive")
            .expect("summary");
        assert_eq!(a.metric, "rtt_mean_us");
        assert_eq!(a.rounds, 3, "one figure a round, not one a window");
        let round1 = (3.0 * 10_000.0 * 10.0 + 500.0 * 4000.0) / 30_500.0;
        assert!((a.median.unwrap() - round1).abs() < 1e-6, "{a:?}");
        assert!((a.min.unwrap() - 10.0).abs() < 1e-9, "{a:?}");
        assert!((a.max.unwrap() - 4000.0).abs() < 1e-6, "{a:?}");
        assert!((a.vs_oracle.unwrap() - round1 / 10.0).abs() < 1e-6, "{a:?}");
        // A window without a rate leaves its round without a figure.
        let mut r = window("poll-inline", 1, 1, 0, 10.0);
        r.ops_per_s = None;
        assert_eq!(Phase::Hogs.round_value(&[&r]), None);
    }

    #[test]
    fn the_oracle_is_the_best_static_configuration_per_phase_and_the_score_its_geomean() {
        let mut rows = Vec::new();
        // Per phase: poll-inline, poll-thread, block, adaptive (two rounds, the
        // second one's figures double, so the medians are 1.5x the first's).
        let figs = [
            (Phase::Idle, [2.0, 1.0, 0.01, 0.02]),
            (Phase::Saturated, [100.0, 80.0, 20.0, 90.0]),
            (Phase::Hogs, [1000.0, 800.0, 40.0, 44.0]),
            (Phase::Background, [50.0, 60.0, 70.0, 50.0]),
        ];
        for (phase, v) in figs {
            for (c, x) in CONFIGS.iter().zip(v) {
                rows.push(row(phase, c.label, 1, x));
                rows.push(row(phase, c.label, 2, 2.0 * x));
            }
        }
        let s = summarize("udp", &rows);
        let get = |phase: &str, config: &str| {
            s.iter()
                .find(|x| x.phase == phase && x.config == config)
                .cloned()
                .expect("summary")
        };
        let a = get("idle", "adaptive");
        assert_eq!(a.oracle.as_deref(), Some("block"));
        assert!((a.vs_oracle.unwrap() - 2.0).abs() < 1e-9, "{a:?}");
        assert!(
            (a.median.unwrap() - 0.03).abs() < 1e-9,
            "median of 0.02, 0.04"
        );
        // Higher is better: the oracle is the highest rate, the ratio best / value.
        let a = get("saturated", "adaptive");
        assert_eq!(a.oracle.as_deref(), Some("poll-inline"));
        assert!((a.vs_oracle.unwrap() - 100.0 / 90.0).abs() < 1e-9, "{a:?}");
        // The adaptive configuration is never its own oracle, even when better.
        assert_eq!(get("hogs", "adaptive").oracle.as_deref(), Some("block"));
        assert!((get("background", "adaptive").vs_oracle.unwrap() - 1.0).abs() < 1e-9);
        let t = get("trace", "adaptive");
        let want = (2.0f64 * (100.0 / 90.0) * 1.1 * 1.0).powf(0.25);
        assert!((t.median.unwrap() - want).abs() < 1e-9, "{t:?} vs {want}");
        // poll-inline: idle 200x, saturated 1x, hogs 25x, background 1x.
        let want = (200.0f64 * 25.0).powf(0.25);
        assert!((get("trace", "poll-inline").median.unwrap() - want).abs() < 1e-6);
    }

    #[test]
    fn failed_points_are_left_out_and_a_config_missing_a_phase_gets_no_score() {
        let mut rows = Vec::new();
        for phase in PHASES {
            for c in CONFIGS {
                let mut r = row(phase, c.label, 1, 1.0);
                if phase == Phase::Hogs && c.label == "block" {
                    r.error = Some("timed out".into());
                }
                rows.push(r);
            }
        }
        let s = summarize("shm", &rows);
        let block = s
            .iter()
            .find(|x| x.phase == "trace" && x.config == "block")
            .expect("trace row");
        assert_eq!((block.median, block.rounds), (None, 3));
        let hog = s
            .iter()
            .find(|x| x.phase == "hogs" && x.config == "block")
            .expect("row");
        assert_eq!((hog.median, hog.rounds), (None, 0));
    }

    #[test]
    fn cost_ratios_handle_zero_and_orientation() {
        assert_eq!(cost_ratio(0.0, 0.0, false), Some(1.0));
        assert_eq!(cost_ratio(1.0, 0.0, false), None);
        assert_eq!(cost_ratio(50.0, 100.0, true), Some(2.0));
        assert_eq!(cost_ratio(3.0, 2.0, false), Some(1.5));
    }
}
