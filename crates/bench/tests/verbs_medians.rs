//! scripts/verbs_medians.py, which scripts/verbs-perf.sh uses: tagging records with
//! their round and variant, medians with their spread across alternating rounds, and
//! the target table (weft's median against the best peer median of the same rounds).

use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/verbs_medians.py")
}

fn run(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("python3")
        .arg(script())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (installed on Debian; scripts/setup.sh needs it too)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn lat(variant: &str, system: &str, test: &str, round: u64, p50: f64) -> Value {
    json!({"system": system, "test": test, "link": "shm", "qp": "rc", "size": 64, "iters": 100,
           "method": "rtt/2", "p50_us": p50, "p90_us": null, "p99_us": p50 * 2.0, "p999_us": null,
           "mean_us": p50, "min_us": p50, "max_us": p50, "round": round, "variant": variant})
}

#[test]
fn tag_adds_round_variant_and_a_peers_whole_process_cpu() {
    let rec = r#"{"system":"ucx-posix","test":"tag_lat","link":"shm","qp":"tag","size":64,"iters":1000,"method":"rtt/2","p50_us":0.2,"mean_us":0.2}"#;
    let out = run(
        &[
            "tag",
            "--round",
            "3",
            "--variant",
            "ucx-posix",
            "--cpu-s",
            "0.5",
            "--ops",
            "1000",
        ],
        rec,
    );
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["round"], 3);
    assert_eq!(v["variant"], "ucx-posix");
    assert_eq!(v["cpu_us_per_op_total"], 500.0);
    assert_eq!(v["ops_per_cpu_s"], 2000.0);
    assert_eq!(v["cpu_scope"], "whole process");
    // Still a weft record (unknown keys are allowed).
    assert_eq!(
        weft_bench::perf::record::parse_lines(&out).unwrap().len(),
        1
    );
}

#[test]
fn summary_takes_medians_per_variant_and_compares_medians_of_the_same_rounds() {
    let mut lines = Vec::new();
    // Three alternating rounds: weft, peer, weft, peer, ...; weft's best (0.9) must
    // not stand against the peer's single sample: the medians are 1.5 and 0.25.
    for (round, w, u) in [(1, 1.5, 0.2), (2, 0.9, 0.3), (3, 2.0, 0.25)] {
        lines.push(lat("weft-shm-inline", "weft", "send-lat", round, w).to_string());
        lines.push(lat("ucx-posix", "ucx-posix", "tag_lat", round, u).to_string());
    }
    // A write-lat record of the same variant and size must not enter send-lat's median.
    lines.push(lat("weft-shm-inline", "weft", "write-lat", 1, 0.1).to_string());
    let dir = std::env::temp_dir().join(format!("verbs-medians-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("rounds.jsonl");
    std::fs::write(&f, lines.join("\n")).unwrap();
    let md = run(&["summary", f.to_str().unwrap()], "");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(md.contains("Rounds: 3."), "{md}");
    assert!(
        md.contains("| shm 64 B SEND one-way p50 ≤ 2 × UCX posix tag_lat | weft-shm-inline | 1.50 [0.900–2.00] | ucx-posix | 0.250 [0.200–0.300] | 6.00 | **no** |"),
        "{md}"
    );
    assert!(
        md.contains("| weft-shm-inline | write-lat | 64 | 0.100 [0.100–0.100]"),
        "{md}"
    );
}

#[test]
fn core_labels_a_sample_by_the_probes_around_it() {
    let rec = lat("ucx-posix", "ucx-posix", "tag_lat", 1, 0.1).to_string();
    let state = |before: &str, after: &str| {
        let out = run(
            &[
                "core",
                "--before",
                before,
                "--after",
                after,
                "--threshold-ns",
                "120",
            ],
            &rec,
        );
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["core_threshold_ns"], 120.0);
        v["core_state"].as_str().unwrap().to_string()
    };
    assert_eq!(state("50.5", "119.9"), "fast");
    assert_eq!(state("120", "250"), "slow");
    assert_eq!(state("50", "250"), "mixed");
    // A failed probe leaves its value empty: the state is unknown, never guessed.
    assert_eq!(state("50", ""), "unknown");
}

#[test]
fn summary_splits_the_targets_by_machine_state_and_names_a_disagreement() {
    // Weft 0.6 fast / 1.1 slow; UCX 0.1 fast / 0.5 slow, so the headline mixes states
    // and the split shows 6x fast and 2.2x slow: both miss the 2x target, no disagreement. The
    // message rate target disagrees: weft 3 M/s in both, UCX 20 fast and 2 slow.
    let mut lines = Vec::new();
    let tagged = |mut r: Value, slow: bool| {
        let ns = if slow { 250.0 } else { 50.0 };
        r["core_ns_before"] = json!(ns);
        r["core_ns_after"] = json!(ns);
        r["core_threshold_ns"] = json!(120.0);
        r["core_state"] = json!(if slow { "slow" } else { "fast" });
        r.to_string()
    };
    let bw = |variant: &str, test: &str, round: u64, mmsg: f64| {
        json!({"system": variant, "test": test, "link": "shm", "qp": "rc", "size": 64,
               "mb_per_s": mmsg * 64.0, "mmsg_per_s": mmsg, "round": round, "variant": variant})
    };
    for (round, slow) in [(1, false), (2, false), (3, true)] {
        let (w, u) = if slow { (1.1, 0.5) } else { (0.6, 0.1) };
        lines.push(tagged(
            lat("weft-shm-inline", "weft", "send-lat", round, w),
            slow,
        ));
        lines.push(tagged(
            lat("ucx-posix", "ucx-posix", "tag_lat", round, u),
            slow,
        ));
        let u = if slow { 2.0 } else { 20.0 };
        lines.push(tagged(bw("weft-shm-inline", "send-bw", round, 3.0), slow));
        lines.push(tagged(bw("ucx-posix", "tag_bw", round, u), slow));
    }
    let dir = std::env::temp_dir().join(format!("verbs-medians-core-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("rounds.jsonl");
    std::fs::write(&f, lines.join("\n")).unwrap();
    let md = run(&["summary", f.to_str().unwrap()], "");
    let _ = std::fs::remove_dir_all(&dir);
    // The headline keeps every sample.
    assert!(
        md.contains("| shm 64 B SEND one-way p50 ≤ 2 × UCX posix tag_lat | weft-shm-inline | 0.600 [0.600–1.10] | ucx-posix | 0.100 [0.100–0.500] | 6.00 | **no** |"),
        "{md}"
    );
    assert!(
        md.contains("| shm 64 B SEND one-way p50 ≤ 2 × UCX posix tag_lat | weft-shm-inline | ucx-posix | 0.600 (2) | 0.100 (2) | 6.00 | **no** | 1.10 (1) | 0.500 (1) | 2.20 | **no** |"),
        "{md}"
    );
    assert!(
        md.contains("| shm 64 B SEND message rate ≥ 0.5 × UCX posix tag_bw 64 B | weft-shm-inline | ucx-posix | 3.00 (2) | 20.0 (2) | 0.150 | **no** | 3.00 (1) | 2.00 (1) | 1.50 | yes |"),
        "{md}"
    );
    assert!(
        md.contains("**The states disagree** on shm 64 B SEND message rate ≥ 0.5 × UCX posix tag_bw 64 B, weft-shm-inline: fast says not met (0.150), slow says met (1.50)."),
        "{md}"
    );
    assert!(!md.contains("disagree** on shm 64 B SEND one-way"), "{md}");
    assert!(md.contains("Samples: fast 8, slow 4."), "{md}");
}
