//! The README's main job runs and its wire step holds together: every frame it writes
//! decodes with a good ICRC, tshark (installed by scripts/setup.sh) dissects every one,
//! every simulated RDMA WRITE completes intact in both recovery modes, and the verbs
//! step measures weft over udp and shm beside kernel TCP and plots it.
// Runs a benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use std::process::Command;

#[test]
fn demo_runs_and_its_capture_checks_out() {
    let out_dir = std::env::temp_dir().join(format!("weft-demo-test-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "demo",
            "--json",
            "--seconds",
            "0.05",
            "--messages",
            "200",
            "--perf-iters",
            "300",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let frames = v["wire"]["frames"].as_u64().unwrap();
    assert_eq!(frames, 76, "38 opcodes over IPv4 and IPv6");
    assert_eq!(v["wire"]["decoded_icrc_ok"], frames);
    assert_eq!(
        v["wire"]["tshark_dissected"], frames,
        "tshark missing or disagreeing"
    );
    assert!(v["icrc"]["weft_icrc_gb_per_s"].as_f64().unwrap() > 0.0);
    for run in v["transport"]["runs"].as_array().unwrap() {
        assert_eq!(run["completed"], 200, "{run}");
        assert_eq!(run["failed"], 0, "{run}");
        assert_eq!(run["intact"], true, "{run}");
    }
    let lpm = v["lpm"].as_array().unwrap();
    assert_eq!(lpm.len(), 2, "ipv4 and ipv6");
    for l in lpm {
        assert!(l["routes"].as_u64().unwrap() > 0, "{l}");
        assert!(l["weft_bytes"].as_u64().unwrap() > 0, "{l}");
    }
    // The verbs step: weft over udp and shm and kernel TCP measured every size, and
    // the report drew the plots.
    let verbs = v["verbs"].as_array().unwrap();
    assert_eq!(verbs.len(), 4, "{verbs:?}");
    for r in verbs {
        for k in ["weft_udp", "weft_shm", "kernel_tcp"] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k} missing: {r}");
        }
    }
    let plots = v["plots"].as_array().unwrap();
    assert!(plots.len() >= 2, "{plots:?}");
    for p in plots {
        let bytes = std::fs::read(p.as_str().unwrap()).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{p} is not a PNG");
    }
    // The rpc step: weft-rpc over shm and udp beside gRPC (tonic), 1 and 32
    // outstanding, every row measured on both systems.
    let rpc = v["rpc"].as_array().unwrap();
    assert_eq!(rpc.len(), 4, "{rpc:?}");
    for r in rpc {
        for k in [
            "weft_ops_per_s",
            "weft_p50_us",
            "grpc_ops_per_s",
            "grpc_p50_us",
        ] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k} missing: {r}");
        }
    }
    assert!(out_dir.join("roce-every-opcode.pcap").exists());
    std::fs::remove_dir_all(&out_dir).ok();
}
