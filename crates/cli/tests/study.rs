//! `weft study --quick --json` end to end: every part of the study runs (a tiny
//! subset of it: two sizes, one hog, one Fig. 5 verb, two MTUs, a 1 MiB flow, one
//! round of the phased trace) and its rows carry
//! the fields `weft report` and docs/results/study.md read, with sane values. This
//! checks that the study measures, not what it measures: no timing is asserted.
// Runs a benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use weft_testkit::process::output_within;

fn num(r: &serde_json::Value, k: &str) -> Option<f64> {
    r.get(k).and_then(serde_json::Value::as_f64)
}

#[test]
fn quick_study_rows_have_every_figure_and_sane_numbers() {
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_weft")).args(["study", "--quick", "--json", "-q"]),
        "weft study --quick",
        Duration::from_secs(360),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "weft study --quick: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let (rows, sums): (Vec<_>, Vec<_>) = all.into_iter().partition(|r| r["study"] == "weft");
    let figures: BTreeSet<&str> = rows.iter().filter_map(|r| r["figure"].as_str()).collect();
    assert_eq!(
        figures,
        BTreeSet::from(["fig1", "fig2", "fig3", "fig4", "fig5", "mtu", "phased"]),
        "{stdout}"
    );
    check_phased(&rows, &sums);
    let verbs: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r["figure"] == "fig1")
        .filter_map(|r| r["verb"].as_str())
        .collect();
    assert_eq!(
        verbs,
        BTreeSet::from([
            "READ-Intr",
            "READ-Poll",
            "WRITE/SEND-Poll",
            "SEND/SEND-Intr",
            "SEND/SEND-Poll"
        ])
    );
    for r in &rows {
        assert!(r.get("error").is_none(), "{r}");
        assert_eq!(r["study"], "weft", "{r}");
        for k in [
            "link",
            "verb",
            "size",
            "outstanding",
            "hogs",
            "mtu",
            "scheduler",
            "iters",
        ] {
            assert!(r.get(k).is_some(), "{k} missing: {r}");
        }
        // A point that hit its time limit on a loaded machine may have too few
        // samples for p90 (10) or p99 (100): those are null, never made up.
        let p50 = num(r, "p50_us").expect("p50_us");
        assert!(p50 > 0.0, "{r}");
        let p90 = num(r, "p90_us").unwrap_or(f64::INFINITY);
        assert!(p50 <= p90, "{r}");
        if let Some(p99) = num(r, "p99_us") {
            assert!(p90 <= p99, "{r}");
        }
        if r["iters"].as_u64() >= Some(100) {
            assert!(num(r, "p99_us").is_some(), "{r}");
        }
        for k in ["ops_per_s", "mb_per_s"] {
            assert!(num(r, k).is_some_and(|v| v > 0.0), "{k}: {r}");
        }
        let fig = r["figure"].as_str().unwrap_or("");
        let hogs = r["hogs"].as_u64().unwrap_or(0);
        match fig {
            "fig1" | "fig2" => assert_eq!(hogs, 0, "{r}"),
            "fig3" | "fig4" => assert!(hogs >= 1, "{r}"),
            _ => {}
        }
        let w = r["outstanding"].as_u64().unwrap_or(0);
        match fig {
            "fig1" | "fig3" | "mtu" => assert_eq!(w, 1, "{r}"),
            "phased" => match r["phase"].as_str() {
                Some("idle" | "hogs") => assert_eq!(w, 1, "{r}"),
                _ => assert_eq!(w, 16, "{r}"),
            },
            _ => assert_eq!(w, 16, "{r}"),
        }
        if fig == "fig5" || fig == "mtu" {
            // The flow beside a short run may complete no WRITE at all (0 MB/s).
            assert!(num(r, "bulk_mb_per_s").is_some_and(|v| v >= 0.0), "{r}");
            for k in ["bulk_isolated_mb_per_s", "isolated_ops_per_s"] {
                assert!(num(r, k).is_some_and(|v| v > 0.0), "{k}: {r}");
            }
            if let (Some(q), Some(p99), Some(alone)) = (
                num(r, "p99_ratio"),
                num(r, "p99_us"),
                num(r, "isolated_p99_us"),
            ) {
                assert!((q - p99 / alone).abs() <= 1e-9 * q.max(1.0), "{r}");
            }
            let j = num(r, "jain").expect("jain");
            assert!(
                (0.5..=1.0 + 1e-9).contains(&j),
                "Jain's index of two flows: {r}"
            );
            assert!(num(r, "bulk_loss").is_some_and(|l| l <= 1.0), "{r}");
        }
    }
    let scheds: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r["figure"] == "fig5")
        .filter_map(|r| r["scheduler"].as_str())
        .collect();
    assert_eq!(scheds, BTreeSet::from(["drr", "fifo"]));
    let mtus: BTreeSet<u64> = rows
        .iter()
        .filter(|r| r["figure"] == "mtu")
        .filter_map(|r| r["mtu"].as_u64())
        .collect();
    assert_eq!(mtus, BTreeSet::from([1024, 4096]));
}

const PHASES: [&str; 4] = ["idle", "saturated", "hogs", "background"];
const CONFIGS: [&str; 4] = ["poll-inline", "poll-thread", "block", "adaptive"];

/// The phased trace: a row per phase and configuration (one round; the hogs phase a row
/// per window of the round, numbered 1..=4), each with the CPU it used; a summary per
/// phase and configuration in which the phase's oracle
/// (a static configuration) stands at 1.0 and nothing beats it by more than the
/// adaptive one may; and a trace score per configuration.
fn check_phased(rows: &[serde_json::Value], sums: &[serde_json::Value]) {
    for phase in PHASES {
        for config in CONFIGS {
            let r: Vec<_> = rows
                .iter()
                .filter(|r| r["figure"] == "phased" && r["phase"] == phase && r["verb"] == config)
                .collect();
            let mut windows: Vec<u64> = r.iter().filter_map(|r| r["window"].as_u64()).collect();
            windows.sort_unstable();
            if phase == "hogs" {
                assert_eq!(
                    windows,
                    [1, 2, 3, 4],
                    "{phase} {config}: one round, 4 windows"
                );
            } else {
                assert_eq!(r.len(), 1, "{phase} {config}: one round, one row");
                assert!(windows.is_empty(), "{:?}", r[0]);
            }
            for r in &r {
                assert_eq!(r["round"], 1, "{r:?}");
                assert!(num(r, "cpu_cores").is_some_and(|c| c > 0.0), "{r:?}");
                let hogs = r["hogs"].as_u64().unwrap_or(0);
                assert_eq!(hogs >= 1, phase == "hogs", "{r:?}");
            }
            let s: Vec<_> = sums
                .iter()
                .filter(|s| s["phase"] == phase && s["config"] == config)
                .collect();
            assert_eq!(s.len(), 1, "{phase} {config}: one summary");
            assert_eq!(s[0]["study"], "weft-phased-summary", "{:?}", s[0]);
            assert_eq!(s[0]["rounds"], 1, "{:?}", s[0]);
            let oracle = s[0]["oracle"].as_str().expect("oracle");
            assert_ne!(oracle, "adaptive", "the oracle is a static configuration");
            let v = num(s[0], "vs_oracle").expect("vs_oracle");
            if config == oracle {
                assert!((v - 1.0).abs() < 1e-9, "{:?}", s[0]);
            } else if config != "adaptive" {
                assert!(
                    v >= 1.0 - 1e-9,
                    "no static configuration beats the oracle: {:?}",
                    s[0]
                );
            }
        }
    }
    for config in CONFIGS {
        let t: Vec<_> = sums
            .iter()
            .filter(|s| s["phase"] == "trace" && s["config"] == config)
            .collect();
        assert_eq!(t.len(), 1, "{config}: one trace score");
        assert!(num(t[0], "median").is_some_and(|g| g > 0.0), "{:?}", t[0]);
    }
    assert_eq!(sums.len(), PHASES.len() * CONFIGS.len() + CONFIGS.len());
}
