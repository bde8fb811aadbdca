//! `cargo install --path crates/cli --no-default-features` is the user's tool: router,
//! router ctl, decode. Its dependency graph must hold none of the benchmarks' weight
//! (tonic, tokio, plotters, the competing LPM crates, the bench crate itself). Asked
//! of cargo's own resolver (`cargo tree`, offline, under a time limit), so a
//! dependency that creeps back in fails here.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Packages only the benchmarks may pull in.
const BENCH_ONLY: &[&str] = &[
    "weft-bench",
    "tonic",
    "tokio",
    "h2",
    "hyper",
    "plotters",
    "iptrie",
    "prefix-trie",
    "poptrie",
    "ip_network_table-deps-treebitmap",
    "socket2",
    "stats_alloc",
];

/// `cargo tree` of the weft package with `features`, one package name per line.
fn packages(features: &[&str]) -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let mut child = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}", "--manifest-path", manifest, "-p", "weft"])
        .args(features)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cargo tree");
    // The resolver answers in well under a second from the lock file; a minute means
    // something is wrong, and the test says so instead of hanging.
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait for cargo tree").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("cargo tree took over 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("cargo tree output");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_tool_without_default_features_builds_no_benchmark_dependency() {
    let lean = packages(&["--no-default-features"]);
    // What the tool is made of is there (so an empty or failed listing cannot pass)…
    for needed in ["weft", "weft-router", "weft-pcap", "weft-wire", "clap"] {
        assert!(
            lean.iter().any(|p| p == needed),
            "{needed} missing: {lean:?}"
        );
    }
    // …and nothing only the benchmarks need.
    for p in BENCH_ONLY {
        assert!(
            !lean.iter().any(|q| q == p),
            "{p} is in `weft --no-default-features`: {lean:?}"
        );
    }
    // The default build does have the benchmarks: the list above names real packages.
    let full = packages(&[]);
    for p in [
        "weft-bench",
        "tonic",
        "tokio",
        "plotters",
        "iptrie",
        "poptrie",
    ] {
        assert!(full.iter().any(|q| q == p), "{p} not in the default build");
    }
}
