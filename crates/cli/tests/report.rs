//! `weft report` turns JSON lines into PNG plots and a markdown table.
// Runs a benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use std::process::Command;

const RECORDS: &str = r#"{"system":"kernel-tcp","test":"tcp-lat","link":"loopback","qp":"stream","size":2,"iters":1000,"method":"rtt/2","p50_us":12.0,"p90_us":14.0,"p99_us":20.0,"p999_us":40.0,"mean_us":12.5,"min_us":9.0,"max_us":50.0}
{"system":"kernel-tcp","test":"tcp-lat","link":"loopback","qp":"stream","size":1024,"iters":1000,"method":"rtt/2","p50_us":13.0,"p90_us":15.0,"p99_us":22.0,"p999_us":44.0,"mean_us":13.5,"min_us":9.5,"max_us":60.0}
{"system":"ucx-posix","test":"tag_lat","link":"shm","qp":"tag","size":2,"iters":2000,"method":"rtt/2","p50_us":0.7,"p90_us":null,"p99_us":null,"p999_us":null,"mean_us":0.9,"min_us":null,"max_us":null}
{"system":"ucx-posix","test":"tag_lat","link":"shm","qp":"tag","size":1024,"iters":2000,"method":"rtt/2","p50_us":1.5,"p90_us":null,"p99_us":null,"p999_us":null,"mean_us":1.9,"min_us":null,"max_us":null}
{"system":"libfabric-tcp","test":"pingpong","link":"loopback","qp":"msg","size":2,"iters":2000,"method":"rtt/2","p50_us":null,"p90_us":null,"p99_us":null,"p999_us":null,"mean_us":15.0,"min_us":null,"max_us":null}
{"system":"kernel-tcp","test":"tcp-bw","link":"loopback","qp":"stream","size":2,"iters":5000,"mb_per_s":0.1,"mmsg_per_s":0.05}
{"system":"kernel-tcp","test":"tcp-bw","link":"loopback","qp":"stream","size":1048576,"iters":1000,"mb_per_s":1500.0,"mmsg_per_s":0.0014}
{"system":"ucx-posix","test":"tag_bw","link":"shm","qp":"tag","size":1048576,"iters":1000,"mb_per_s":3000.0,"mmsg_per_s":0.0028}
{"system":"libfabric-shm","test":"pingpong","link":"shm","qp":"rdm","size":2,"iters":0,"error":"fi_pingpong exit 1: boom"}
"#;

fn check_png(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert!(
        bytes.len() > 10_000,
        "{} is only {} bytes",
        path.display(),
        bytes.len()
    );
}

fn run(extra: &[&str]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "weft-report-test-{}-{}",
        std::process::id(),
        extra.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.jsonl");
    std::fs::write(&input, RECORDS).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["report", "--out"])
        .arg(dir.join("out"))
        .args(extra)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn plots_and_markdown() {
    let dir = run(&[]);
    let out = dir.join("out");
    for f in [
        "perf-latency.png",
        "perf-latency-p99.png",
        "perf-bandwidth.png",
    ] {
        check_png(&out.join(f));
    }
    let md = std::fs::read_to_string(out.join("perf.md")).unwrap();
    // The reference defaults to ucx-posix/shm; ratios are against it.
    assert!(md.contains("ratio to `ucx-posix/shm`"), "{md}");
    assert!(md.contains("| 2 | 12.0 (17.14x) |"), "{md}");
    assert!(
        md.contains("15.0†"),
        "a mean standing in for a median is marked: {md}"
    );
    assert!(
        md.contains("fi_pingpong exit 1: boom"),
        "failed runs are listed: {md}"
    );
    assert!(md.contains("perf-bandwidth.png"), "{md}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn plots_without_text() {
    let dir = run(&[
        "--no-text",
        "--reference",
        "kernel-tcp/loopback",
        "--name",
        "x",
    ]);
    let out = dir.join("out");
    check_png(&out.join("x-latency.png"));
    check_png(&out.join("x-bandwidth.png"));
    let md = std::fs::read_to_string(out.join("x.md")).unwrap();
    assert!(
        md.contains("| 2 | 12.0 |"),
        "the reference has no ratio: {md}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The committed results of lpm-bench, rpc-bench and the RFC 2544 runs: the plots the
/// docs show come from `weft report`, the one plotting path.
#[test]
fn lpm_rpc_and_router_results_are_plotted() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("weft-report-kinds-{}", std::process::id()));
    let report = |file: &str, name: &str| {
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["report", "--quiet", "--name", name, "--out"])
            .arg(&out)
            .arg(root.join(file))
            .output()
            .unwrap()
    };
    for (file, name, pngs) in [
        ("docs/results/lpm-sweep.jsonl", "lpm", &["lpm.png"][..]),
        (
            "docs/results/rpc-bench.jsonl",
            "rpc",
            &["rpc-null.png", "rpc-metadata.png"][..],
        ),
        ("docs/results/router-e2e.md", "e2e", &["e2e.png"][..]),
    ] {
        let o = report(file, name);
        assert!(o.status.success(), "{file}: {o:?}");
        for png in pngs {
            check_png(&out.join(png));
        }
        // Only perf records get a markdown table: results docs beside the plots are
        // written by hand and must not be overwritten.
        assert!(
            !out.join(format!("{name}.md")).exists(),
            "{file} wrote markdown"
        );
    }
    // lpm-bench rows without --sweep have nothing to plot, and say so.
    let o = report("docs/results/lpm-bench.jsonl", "lpm-nosweep");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--sweep"),
        "{o:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
