//! The demo's RPC step: `weft rpc-bench --local` on the null RPC, weft-rpc over shm
//! and udp beside gRPC (tonic) over loopback TCP, same concurrency, same run.

use anyhow::Context as _;
use serde::Serialize;
use std::process::Command;

/// One weft configuration against gRPC at the same concurrency.
#[derive(Debug, Serialize)]
pub struct RpcRow {
    pub link: String,
    pub clients: u64,
    pub outstanding: u64,
    /// The client's batching policy (the default, adaptive).
    pub batch: String,
    pub weft_ops_per_s: f64,
    pub weft_p50_us: f64,
    pub grpc_ops_per_s: f64,
    pub grpc_p50_us: f64,
    pub throughput_ratio: f64,
    pub p50_ratio: f64,
}

/// Run the RPC step (about 10 s at one second per configuration).
pub fn rpc_step(seconds: f64) -> anyhow::Result<Vec<RpcRow>> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let secs = format!("{:.2}", seconds.clamp(0.2, 5.0));
    let out = Command::new(exe)
        .args([
            "rpc-bench",
            "--local",
            "--json",
            "--baseline",
            "grpc",
            "--link",
            "shm,udp",
            "--clients",
            "1",
            "--outstanding",
            "1,32",
            "--mix",
            "null",
            "--size",
            "32",
            "--batch",
            "adaptive",
            "--seconds",
            &secs,
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .context("running weft rpc-bench")?;
    if !out.status.success() {
        anyhow::bail!("weft rpc-bench failed ({})", out.status);
    }
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let num = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(0.0);
    let mut result = Vec::new();
    for w in rows.iter().filter(|r| r["system"] == "weft") {
        let Some(g) = rows.iter().find(|g| {
            g["system"] == "grpc"
                && g["link"] == "tcp"
                && g["clients"] == w["clients"]
                && g["outstanding"] == w["outstanding"]
        }) else {
            continue;
        };
        result.push(RpcRow {
            link: w["link"].as_str().unwrap_or_default().to_string(),
            clients: w["clients"].as_u64().unwrap_or(0),
            outstanding: w["outstanding"].as_u64().unwrap_or(0),
            batch: w["batch"].as_str().unwrap_or("-").to_string(),
            weft_ops_per_s: num(w, "ops_per_s"),
            weft_p50_us: num(w, "p50_us"),
            grpc_ops_per_s: num(g, "ops_per_s"),
            grpc_p50_us: num(g, "p50_us"),
            throughput_ratio: num(w, "ops_per_s") / num(g, "ops_per_s").max(1e-9),
            p50_ratio: num(w, "p50_us") / num(g, "p50_us").max(1e-9),
        });
    }
    Ok(result)
}

/// The step's lines of the demo's summary.
pub fn print(rows: &[RpcRow]) {
    for r in rows {
        println!(
            "rpc    null RPC 32 B, {} client x {:>2} outstanding, weft {}: {:>9.0} calls/s p50 {:>7.1} us; gRPC (tonic) {:>7.0} calls/s p50 {:>7.1} us; {:.1}x throughput, {:.3}x latency",
            r.clients,
            r.outstanding,
            r.link,
            r.weft_ops_per_s,
            r.weft_p50_us,
            r.grpc_ops_per_s,
            r.grpc_p50_us,
            r.throughput_ratio,
            r.p50_ratio
        );
    }
}
