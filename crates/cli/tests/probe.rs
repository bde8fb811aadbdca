//! `weft probe` end to end: it runs within its budget and prints one JSON line whose
//! one-way latency is a positive number of nanoseconds. (What the number is, is a
//! measurement: docs/results/verbs.md; here only that the probe ran and measured.)
// A benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use serde_json::Value;
use std::process::Command;

#[test]
fn probe_json_reports_a_positive_one_way_latency() {
    let two_cpus = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    // `timeout` bounds the test whatever the probe does; its own budget is 2 s here
    // (tests may share the CPUs with other tests' threads).
    let out = Command::new("timeout")
        .args(["30", env!("CARGO_BIN_EXE_weft"), "probe", "--json"])
        .args([
            "--round-trips",
            "20000",
            "--batches",
            "5",
            "--budget-ms",
            "2000",
        ])
        .output()
        .expect("run weft probe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !two_cpus {
        // One CPU: the probe refuses, and says why.
        assert!(!out.status.success(), "{out:?}");
        assert!(stderr.contains("needs two CPUs"), "{stderr}");
        return;
    }
    assert!(out.status.success(), "weft probe: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let r: Value = serde_json::from_str(lines[0]).expect("one JSON line");
    assert_eq!(r["probe"], "core-to-core");
    let one_way = r["one_way_ns"].as_f64().expect("one_way_ns");
    assert!(one_way > 0.0 && one_way.is_finite(), "{r}");
    let (min, max) = (r["min_ns"].as_f64().unwrap(), r["max_ns"].as_f64().unwrap());
    assert!(min <= one_way && one_way <= max, "{r}");
    let batches = r["batch_ns"].as_array().expect("batch_ns");
    assert!(!batches.is_empty() && batches.len() <= 5, "{r}");
    let cpus = r["cpus"].as_array().expect("cpus");
    assert_eq!(cpus.len(), 2);
    assert_ne!(cpus[0], cpus[1]);
}

#[test]
fn probe_prints_one_human_line_by_default() {
    if !std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2) {
        return; // the refusal is checked above
    }
    let out = Command::new("timeout")
        .args(["30", env!("CARGO_BIN_EXE_weft"), "probe"])
        .args([
            "--round-trips",
            "2000",
            "--batches",
            "2",
            "--budget-ms",
            "2000",
        ])
        .output()
        .expect("run weft probe");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(stdout.starts_with("core-to-core one-way CPU "), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
}
