//! `weft baseline` end to end: both sides on this host (`--local`, the server as a
//! child process), JSON lines out. Every run is small and the whole test is bounded.
// Runs a benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs weft with `args`, killing it after `limit`; returns stdout (asserting success).
fn weft(args: &[&str], limit: Duration) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "weft {args:?} ran over {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "weft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn records(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn tcp_lat_local_json() {
    let out = weft(
        &[
            "baseline", "tcp-lat", "--local", "--size", "64", "--iters", "200", "--json",
        ],
        LIMIT,
    );
    let rs = records(&out);
    assert_eq!(rs.len(), 1, "{out}");
    let r = &rs[0];
    assert_eq!(r["system"], "kernel-tcp");
    assert_eq!(r["test"], "tcp-lat");
    assert_eq!(r["link"], "loopback");
    assert_eq!(r["qp"], "stream");
    assert_eq!(r["size"], 64);
    assert_eq!(r["iters"], 200);
    assert_eq!(r["method"], "rtt/2");
    for k in ["p50_us", "p90_us", "p99_us", "mean_us", "min_us", "max_us"] {
        assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {r}");
    }
    // 200 samples cannot resolve p99.9.
    assert!(r["p999_us"].is_null(), "{r}");
    let (min, p50, max) = (
        r["min_us"].as_f64().unwrap(),
        r["p50_us"].as_f64().unwrap(),
        r["max_us"].as_f64().unwrap(),
    );
    assert!(min <= p50 && p50 <= max, "{r}");
}

#[test]
fn udp_lat_symmetric_and_sweep_bounds() {
    let out = weft(
        &[
            "baseline",
            "udp-lat",
            "--local",
            "--size",
            "2",
            "--iters",
            "300",
            "--symmetric",
            "--json",
        ],
        LIMIT,
    );
    let r = &records(&out)[0];
    assert_eq!(r["method"], "symmetric");
    assert_eq!(r["system"], "kernel-udp");
    assert!(r["p50_us"].as_f64().unwrap() > 0.0, "{r}");
}

#[test]
fn bandwidth_local_json() {
    let out = weft(
        &[
            "baseline", "tcp-bw", "--local", "--size", "4096", "--iters", "500", "--json",
        ],
        LIMIT,
    );
    let r = &records(&out)[0];
    assert_eq!(r["iters"], 500);
    assert!(r["mb_per_s"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["mmsg_per_s"].as_f64().unwrap() > 0.0, "{r}");

    let out = weft(
        &[
            "baseline", "udp-bw", "--local", "--size", "1024", "--iters", "500", "--json",
        ],
        LIMIT,
    );
    let r = &records(&out)[0];
    assert!(r["mb_per_s"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["lost"].is_u64(), "UDP reports its loss: {r}");
    assert!(r["sender_mb_per_s"].as_f64().is_some(), "{r}");
}

#[test]
fn table_output_is_perftest_like() {
    let out = weft(
        &[
            "baseline", "tcp-lat", "--local", "--iters", "100", "--quiet",
        ],
        LIMIT,
    );
    assert!(out.contains("#bytes") && out.contains("t_p50[us]"), "{out}");
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("2 ")),
        "{out}"
    );
}

#[test]
fn no_server_is_an_error_not_a_hang() {
    // Nothing listens on port 1 of loopback: the client fails at once.
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["baseline", "tcp-lat", "127.0.0.1", "--port", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
