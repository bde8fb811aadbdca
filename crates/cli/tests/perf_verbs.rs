//! `weft perf` end to end: both sides on this host (`--local`), every test over udp
//! and shm, UC and UD, the completion-channel and engine-thread modes, and the JSON
//! shape the harness promises. Sizes and iterations are small: this checks that the
//! tool measures, not what it measures.
// Runs a benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use std::process::Command;

/// One `weft perf --local` at a time: each runs two busy-polling processes, and CI
/// has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `weft perf ARGS --local MORE`, one at a time.
fn run_local(args: &[&str], more: &[&str]) -> std::process::Output {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("perf")
        .args(args)
        .arg("--local")
        .args(more)
        .output()
        .unwrap()
}

fn perf(args: &[&str]) -> Vec<serde_json::Value> {
    let out = run_local(args, &["--json", "-q"]);
    assert!(
        out.status.success(),
        "weft perf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert!(!recs.is_empty());
    for r in &recs {
        assert!(r.get("error").is_none(), "{args:?}: {r}");
        for k in ["test", "link", "qp", "size", "iters"] {
            assert!(r.get(k).is_some(), "{k} missing: {r}");
        }
    }
    recs
}

fn latency_ok(r: &serde_json::Value) {
    for k in ["p50_us", "p90_us", "p99_us", "mean_us", "min_us", "max_us"] {
        assert!(r[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {r}");
    }
    assert!(r["min_us"].as_f64() <= r["p50_us"].as_f64(), "{r}");
    assert!(r["p50_us"].as_f64() <= r["max_us"].as_f64(), "{r}");
}

fn bandwidth_ok(r: &serde_json::Value) {
    for k in ["mb_per_s", "mmsg_per_s"] {
        assert!(r[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {r}");
    }
}

#[test]
fn every_latency_test_measures_over_udp_and_shm() {
    for link in ["udp", "shm"] {
        for test in ["send-lat", "write-lat", "read-lat", "atomic-lat"] {
            let r = perf(&[test, "--link", link, "--size", "64", "-n", "200"]);
            assert_eq!(
                (r[0]["test"].as_str(), r[0]["link"].as_str()),
                (Some(test), Some(link))
            );
            latency_ok(&r[0]);
        }
    }
}

#[test]
fn every_bandwidth_test_measures_over_udp_and_shm() {
    for link in ["udp", "shm"] {
        for test in ["send-bw", "write-bw", "read-bw"] {
            let r = perf(&[test, "--link", link, "--size", "8192", "-n", "300"]);
            bandwidth_ok(&r[0]);
        }
    }
}

#[test]
fn many_qps_in_either_order_complete_and_report_their_window_and_memory() {
    for order in ["burst", "spread"] {
        for test in ["send-bw", "write-bw"] {
            let r = perf(&[
                test,
                "--link",
                "shm",
                "--size",
                "64",
                "-n",
                "2000",
                "--qps",
                "8",
                "--tx-depth",
                "4",
                "--qps-order",
                order,
            ]);
            bandwidth_ok(&r[0]);
            assert_eq!(r[0]["qps"], 8, "{}", r[0]);
            assert_eq!(r[0]["qp_window"], 4, "{}", r[0]);
            assert_eq!(r[0]["qps_order"], order, "{}", r[0]);
            for k in ["client_bytes_per_qp", "server_bytes_per_qp_connected"] {
                assert!(r[0][k].as_u64().is_some(), "{k}: {}", r[0]);
            }
        }
    }
}

#[test]
fn uc_ud_events_engine_thread_symmetric_and_a_sweep() {
    latency_ok(&perf(&["send-lat", "--qp", "ud", "--size", "512", "-n", "200"])[0]);
    bandwidth_ok(&perf(&["write-bw", "--qp", "uc", "--size", "4096", "-n", "200"])[0]);
    latency_ok(&perf(&["send-lat", "--event", "--progress", "thread", "-n", "200"])[0]);
    let s = perf(&["send-lat", "--symmetric", "-n", "200"]);
    assert_eq!(s[0]["method"], "symmetric", "{}", s[0]);
    latency_ok(&s[0]);
    let sweep = perf(&[
        "read-lat",
        "--link",
        "shm",
        "--all",
        "-n",
        "20",
        "--time-limit",
        "1",
    ]);
    let sizes: Vec<u64> = sweep.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes.first(), Some(&2));
    assert_eq!(sizes.last(), Some(&(8 << 20)));
}

#[test]
fn a_write_lat_cut_short_by_its_time_limit_ends_the_server_cleanly() {
    let out = run_local(
        &["write-lat", "--link", "shm", "-n", "100000000"],
        &["--time-limit", "0.3", "--json", "-q"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect("one row");
    assert!(
        row["note"]
            .as_str()
            .is_some_and(|n| n.contains("time limit")),
        "the client says it stopped early: {row}"
    );
    // The server saw the client hang up; it did not wait out a round that never came.
    assert!(!err.contains("never arrived"), "{err}");
}

#[test]
fn impossible_combinations_are_refused_with_a_reason() {
    for (args, reason) in [
        (&["read-lat", "--qp", "ud"][..], "UD carries SENDs only"),
        // An order of posts over QPs means nothing for one QP.
        (
            &["send-bw", "--qps-order", "spread"][..],
            "--qps-order orders posts",
        ),
        // 65 536 QPs at perftest's window of 128 would be 8 M requests in flight.
        (
            &["send-bw", "--qps", "65536"][..],
            "requests in flight; at most",
        ),
    ] {
        // Were a check to let one through, the run still ends soon.
        let out = run_local(args, &["-n", "100", "--time-limit", "2"]);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(reason), "{args:?}: {err}");
    }
}
