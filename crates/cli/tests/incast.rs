//! `weft incast` end to end on loopback, no bottleneck: a receiver, one bulk sender and
//! one probe, each its own process, congestion control on. Every WRITE completes, the
//! controller takes RTT samples, and the rows carry the fields scripts/incast.sh and
//! docs/results/incast.md read. It checks that the tool works, not how fast: no
//! timing is asserted (the measurement through a bottleneck is scripts/incast.sh).
// Runs a benchmark subcommand: only the default (`bench`) build of weft has it.
#![cfg(feature = "bench")]

use std::process::{Command, Stdio};
use std::time::Duration;

use weft_testkit::process::{output_within, Reaped};

fn json_rows(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn a_bulk_sender_and_a_probe_complete_every_write_with_the_delay_window() {
    let exe = env!("CARGO_BIN_EXE_weft");
    // A free port for the connection manager (released just before the server binds
    // it; nothing else on this host picks ports from this test's range meanwhile).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let server = Reaped(
        Command::new(exe)
            .args(["incast", "server", "--cc", "delay", "--listen", &listen])
            .args(["--conns", "2", "--timeout-s", "60"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the incast server"),
    );
    // Give the server a moment to listen; a refused connect fails the client and
    // this test.
    std::thread::sleep(Duration::from_millis(500));
    let client = |role: &str, size: &str| {
        let mut c = Command::new(exe);
        c.args(["incast", "client", "--cc", "delay", "--server", &listen])
            .args(["--role", role, "--size", size, "--seconds", "1"]);
        c
    };
    let (bulk, probe) = std::thread::scope(|s| {
        let b = s.spawn(|| {
            output_within(
                &mut client("bulk", "65536"),
                "incast bulk client",
                Duration::from_secs(60),
            )
        });
        let p = s.spawn(|| {
            output_within(
                &mut client("probe", "64"),
                "incast probe client",
                Duration::from_secs(60),
            )
        });
        (b.join().expect("bulk"), p.join().expect("probe"))
    });
    for (what, out) in [("bulk", &bulk), ("probe", &probe)] {
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut server = server;
    let status = server.wait_for("incast server", Duration::from_secs(60));
    let mut server_out = Vec::new();
    if let Some(mut o) = server.0.stdout.take() {
        std::io::Read::read_to_end(&mut o, &mut server_out).expect("server stdout");
    }
    assert!(status.success(), "the server failed");
    let srv = json_rows(&server_out);
    assert_eq!(srv.len(), 1, "one server row");
    assert_eq!(srv[0]["role"], "server");
    assert!(
        srv[0]["rx_packets"].as_u64().unwrap_or(0) > 0,
        "{:?}",
        srv[0]
    );

    for (role, out) in [("bulk", &bulk), ("probe", &probe)] {
        let rows = json_rows(&out.stdout);
        assert_eq!(rows.len(), 1, "{role}: one row");
        let r = &rows[0];
        assert_eq!(r["role"], role);
        assert_eq!(r["cc"], "delay");
        assert_eq!(r["failed"].as_u64(), Some(0), "{role}: {r}");
        assert!(r["completed"].as_u64().unwrap_or(0) > 0, "{role}: {r}");
        assert!(
            r["goodput_mbit_s"].as_f64().unwrap_or(0.0) > 0.0,
            "{role}: {r}"
        );
        assert!(
            r["cc_rtt_samples"].as_u64().unwrap_or(0) > 0,
            "{role}: the delay window took no RTT sample: {r}"
        );
        let w = r["window"].as_f64().unwrap_or(0.0);
        assert!((1.0..=64.0).contains(&w), "{role}: window {w}: {r}");
    }
    let p = &json_rows(&probe.stdout)[0];
    let (p50, p99) = (p["p50_us"].as_u64(), p["p99_us"].as_u64());
    assert!(p["probes"].as_u64().unwrap_or(0) > 0, "{p}");
    assert!(p50.is_some() && p50 <= p99, "probe percentiles: {p}");
}
