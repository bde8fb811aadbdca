//! `weft router bench` and `weft router rfc2544`: the router's benchmarks. `bench`
//! measures the per-packet pipeline with a full BGP table and the push/pull/central
//! architectures in memory ([`bench`]); `rfc2544` measures throughput and latency
//! between two network namespaces through whatever forwards between them ([`loadgen`]).
//! Running and controlling the router is weft-router's `daemon`, not this module.

pub mod bench;
pub mod loadgen;

use anyhow::{bail, Context};
use bench::Pattern;
use std::path::PathBuf;
use std::time::Duration;
use weft_router::Architecture;

/// Arguments of `weft router rfc2544`.
#[derive(Debug, clap::Args)]
pub struct Rfc2544Args {
    /// Sender's namespace and interface.
    #[arg(long, default_value = "weft-ha")]
    tx_ns: String,
    #[arg(long, default_value = "weft-a0")]
    tx_dev: String,
    /// Receiver's namespace and interface.
    #[arg(long, default_value = "weft-hb")]
    rx_ns: String,
    #[arg(long, default_value = "weft-b0")]
    rx_dev: String,
    /// MAC of the forwarder's ingress port.
    #[arg(long)]
    dst_mac: String,
    #[arg(long, default_value = "198.18.1.2")]
    src_ip: std::net::Ipv4Addr,
    /// Routed towards the receiver but not owned by it (198.19.0.0/16 via host B), so
    /// the receiving host drops it silently after the capture sees it.
    #[arg(long, default_value = "198.19.0.2")]
    dst_ip: std::net::Ipv4Addr,
    /// Frame sizes with FCS (RFC 2544 §9.1).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1280,1518"
    )]
    sizes: Vec<usize>,
    /// Seconds per trial.
    #[arg(long, default_value_t = 1.0)]
    trial_secs: f64,
    /// Binary search steps.
    #[arg(long, default_value_t = 7)]
    steps: u32,
    /// Label for the output rows.
    #[arg(long, default_value = "")]
    label: String,
}

/// Arguments of `weft router bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// `prefix asn` table (default: iptrie 0.11's benches/bgpas.lpm from the cargo
    /// registry; a synthetic 1M-prefix table if neither exists).
    #[arg(long)]
    table: Option<PathBuf>,
    /// Frame size without FCS (60 = a 64-byte packet on the wire).
    #[arg(long, default_value_t = 60)]
    size: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0)]
    secs: f64,
    /// Only the per-core pipeline rate.
    #[arg(long)]
    pipeline_only: bool,
}

/// Runs `weft router bench`.
pub fn run_bench(b: BenchArgs) -> anyhow::Result<()> {
    let table = match b.table.or_else(bench::find_bgpas) {
        Some(p) => {
            let t = bench::load_bgpas(&p).with_context(|| format!("{}", p.display()))?;
            eprintln!("table: {} ({} prefixes)", p.display(), t.len());
            t
        }
        None => {
            eprintln!("table: bgpas.lpm not found; using a synthetic 1,000,000-prefix table");
            bench::synthetic_table(1_000_000, 1)
        }
    };
    let secs = Duration::from_secs_f64(b.secs.max(0.05));
    let t = std::time::Instant::now();
    let router = bench::bench_router(&table, 2, &[1]);
    let (v4, v6) = router.fib().len();
    eprintln!(
        "fib: {v4} ipv4 routes ({v6} ipv6 not used) built in {:.2}s",
        t.elapsed().as_secs_f64()
    );
    let dsts = bench::destinations(&router, &table, 8192, &[1], 42);
    let frames: Vec<Vec<u8>> = dsts
        .iter()
        .map(|d| bench::udp_frame(0, *d, b.size))
        .collect();
    // Counted by the process's counting allocator, switched on for this loop only.
    let counting = crate::alloc_count::Measurement::start()?;
    let r = bench::pipeline_rate_counting(&router, &frames, secs, &|| counting.allocations());
    drop(counting);
    println!(
        "pipeline, 1 core, {}-byte frames, {} random destinations: {:.2} Mpps ({:.0} ns/packet), {} of {} forwarded; FIB lookup alone {:.2} M/s",
        b.size + 4,
        frames.len(),
        r.mpps,
        1e3 / r.mpps.max(1e-9),
        r.forwarded,
        r.packets,
        r.lookup_mlps
    );
    // The process's counting allocator: nothing else runs during the loop.
    println!(
        "pipeline heap allocations: {} in {} packets",
        r.allocations, r.packets
    );
    if b.pipeline_only {
        return Ok(());
    }
    for pattern in [
        Pattern::OneInOneOut,
        Pattern::TwoInTwoOut,
        Pattern::TwoInTwoOutMix,
    ] {
        for arch in [
            Architecture::Push,
            Architecture::Pull,
            Architecture::Central,
        ] {
            let r = bench::architecture_rate(&table, arch, pattern, b.size, secs)?;
            println!(
                "{pattern:13} {arch:8} {:.2} Mpps delivered ({:.2} Mpps offered, {:.1}% delivered)",
                r.mpps,
                r.offered_mpps,
                r.delivered_share * 100.0
            );
        }
    }
    Ok(())
}

/// Runs `weft router rfc2544`.
pub fn run_rfc2544(a: Rfc2544Args) -> anyhow::Result<()> {
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = a.dst_mac.trim().split(':').collect();
    if parts.len() != 6 {
        bail!("--dst-mac: expected aa:bb:cc:dd:ee:ff");
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).context("--dst-mac")?;
    }
    let ep = loadgen::Endpoints {
        tx_ns: a.tx_ns,
        tx_dev: a.tx_dev,
        rx_ns: a.rx_ns,
        rx_dev: a.rx_dev,
        dst_mac: weft_wire::EthernetAddress(mac),
        src_ip: a.src_ip,
        dst_ip: a.dst_ip,
    };
    let len = Duration::from_secs_f64(a.trial_secs.max(0.1));
    // Warm-up: let the forwarder resolve the next hop.
    let _ = loadgen::trial(&ep, 60, Some(1000.0), Duration::from_millis(300))?;
    println!("| forwarder | frame (B) | zero-loss rate (kpps) | Mbit/s | flat-out sent (kpps) | flat-out delivered | latency p50 (us) | p99 (us) |");
    println!("|---|---|---|---|---|---|---|---|");
    for size in a.sizes {
        let (rate, at, flat) = loadgen::zero_loss(&ep, size.saturating_sub(4), len, a.steps)?;
        // Latency at the zero-loss rate, from a trial of its own.
        let lat = if rate > 0.0 {
            loadgen::trial(&ep, size.saturating_sub(4), Some(rate), len)?
        } else {
            at
        };
        println!(
            "| {} | {size} | {:.1} | {:.1} | {:.1} | {:.1}% | {:.0} | {:.0} |",
            a.label,
            rate / 1e3,
            rate * (size as f64 + 20.0) * 8.0 / 1e6,
            flat.tx_pps / 1e3,
            100.0 * flat.delivered_share(),
            lat.latency_us(50.0),
            lat.latency_us(99.0),
        );
    }
    Ok(())
}
