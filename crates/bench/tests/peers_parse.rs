//! scripts/peers_parse.py on real outputs of ucx_perftest and fi_pingpong, captured on
//! the project's machine (crates/bench/tests/fixtures/peers/): the numbers land in
//! weft's record shape with weft's units, and failures become error records.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn parse(args: &[&str], fixture: &str) -> Value {
    let input = std::fs::File::open(
        root()
            .join("crates/bench/tests/fixtures/peers")
            .join(fixture),
    )
    .unwrap();
    let out = Command::new("python3")
        .arg(root().join("scripts/peers_parse.py"))
        .args(args)
        .stdin(Stdio::from(input))
        .output()
        .expect("python3 (installed on Debian; scripts/setup.sh needs it too)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // Every line the converter writes is a weft record.
    assert_eq!(
        weft_bench::perf::record::parse_lines(&text).unwrap().len(),
        1
    );
    serde_json::from_str(text.trim()).unwrap()
}

fn meta<'a>(
    tool: &'a str,
    system: &'a str,
    link: &'a str,
    qp: &'a str,
    test: &'a str,
    size: &'a str,
    iters: &'a str,
) -> Vec<&'a str> {
    vec![
        tool, "--system", system, "--link", link, "--qp", qp, "--test", test, "--size", size,
        "--iters", iters,
    ]
}

#[test]
fn ucx_tag_lat() {
    let v = parse(
        &meta("ucx", "ucx-posix", "shm", "tag", "tag_lat", "64", "2000"),
        "ucx-posix-tag_lat-64.txt",
    );
    assert_eq!(v["system"], "ucx-posix");
    assert_eq!(v["size"], 64);
    assert_eq!(v["iters"], 2000);
    assert_eq!(v["method"], "rtt/2");
    // "50.0%ile" 0.632, overall average 34.899 µs: already one-way.
    assert_eq!(v["p50_us"], 0.632);
    assert_eq!(v["mean_us"], 34.899);
    for k in ["p90_us", "p99_us", "p999_us", "min_us", "max_us"] {
        assert!(v[k].is_null(), "ucx_perftest does not give {k}: {v}");
    }
}

#[test]
fn ucx_tag_bw_is_rescaled_to_megabytes_of_a_million_bytes() {
    let v = parse(
        &meta(
            "ucx", "ucx-tcp", "loopback", "tag", "tag_bw", "32768", "2000",
        ),
        "ucx-tcp-tag_bw-32768.txt",
    );
    // ucx_perftest: 69.80 "MB/s" of 2^20 bytes, 2234 msg/s.
    let mb = v["mb_per_s"].as_f64().unwrap();
    assert!((mb - 69.80 * 1.048576).abs() < 1e-9, "{v}");
    assert!((v["mmsg_per_s"].as_f64().unwrap() - 0.002234).abs() < 1e-12);
    // Cross-check: messages/s x size agrees with the rescaled rate to 0.5 %.
    assert!((2234.0 * 32768.0 / 1e6 / mb - 1.0).abs() < 0.005, "{v}");
    assert!(v.get("p50_us").is_none());
}

#[test]
fn fi_pingpong_gives_a_mean() {
    let v = parse(
        &meta(
            "fi",
            "libfabric-tcp",
            "loopback",
            "msg",
            "pingpong",
            "64",
            "2000",
        ),
        "libfabric-tcp-pingpong-64.txt",
    );
    assert_eq!(v["mean_us"], 181.19);
    assert!(v["p50_us"].is_null());
    assert_eq!(v["iters"], 2000);
}

#[test]
fn failures_become_error_records() {
    let mut a = meta(
        "fi",
        "libfabric-tcp",
        "loopback",
        "dgram",
        "pingpong",
        "64",
        "100",
    );
    a.extend(["--rc", "103"]);
    let v = parse(&a, "libfabric-tcp-dgram-fail.txt");
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains("exit 103") && e.contains("No data available"),
        "{e}"
    );
    assert!(v.get("mean_us").is_none());

    let mut a = meta(
        "ucx",
        "ucx-nosuch",
        "loopback",
        "tag",
        "tag_lat",
        "64",
        "100",
    );
    a.extend(["--rc", "255"]);
    let v = parse(&a, "ucx-nosuch-tls-fail.txt");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("no usable transports"),
        "{v}"
    );
    // A zero exit with no result row is a failure too.
    let v = parse(
        &meta(
            "ucx",
            "ucx-nosuch",
            "loopback",
            "tag",
            "tag_lat",
            "64",
            "100",
        ),
        "ucx-nosuch-tls-fail.txt",
    );
    assert!(v["error"].is_string(), "{v}");
}
