//! `weft router bench`: the in-memory pipeline measurement runs, forwards every frame
//! it generates, and — counted by the `weft` binary's global allocator — makes no heap
//! allocation per packet once warm (the issue's "pooled buffers, no allocation per
//! packet"). No timing is asserted.
// Runs a benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use std::process::Command;

#[test]
fn the_pipeline_forwards_every_frame_without_a_heap_allocation_per_packet() {
    let dir = std::env::temp_dir().join(format!("weft-router-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // A small `prefix asn` table (the bgpas.lpm format) in public IPv4 space.
    let mut table = String::new();
    for a in 20u32..40 {
        for b in 0u32..100 {
            table.push_str(&format!("{a}.{b}.0.0/16 {}\n", a * 100 + b));
            table.push_str(&format!("{a}.{b}.128.0/20 {}\n", a + b));
        }
    }
    let path = dir.join("table.lpm");
    std::fs::write(&path, table).expect("write table");
    let o = Command::new("timeout")
        .args(["120", env!("CARGO_BIN_EXE_weft"), "router", "bench"])
        .args(["--pipeline-only", "--secs", "0.3", "--table"])
        .arg(&path)
        .output()
        .expect("run weft router bench");
    let _ = std::fs::remove_dir_all(&dir);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // "…, N of N forwarded; …"
    let (fwd, total) = out
        .split(" forwarded")
        .next()
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|s| s.split_once(" of "))
        .map(|(a, b)| (a.trim().to_owned(), b.trim().to_owned()))
        .unwrap_or_else(|| panic!("no forwarded count in {out}"));
    assert_eq!(fwd, total, "every frame forwarded: {out}");
    assert!(total.parse::<u64>().unwrap_or(0) > 1000, "{out}");
    assert!(
        out.contains("pipeline heap allocations: 0 in "),
        "no allocation per packet: {out}"
    );
}
