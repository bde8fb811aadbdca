//! The router's benchmarks. `weft router bench` (here, over [`bench`](mod@bench)) measures the
//! per-packet pipeline with a full BGP table and the push/pull/central architectures
//! in memory; `weft router rfc2544` ([`loadgen`]) measures throughput and latency
//! between two network namespaces through whatever forwards between them.
//! Running and controlling the router is weft-router's `daemon`, not this module.

pub mod bench;
pub mod cluster;
pub mod cluster_balance;
pub mod cluster_latency;
pub mod loadgen;

pub use loadgen::{run_rfc2544, Rfc2544Args, Rfc2544Row};

use anyhow::Context;
use bench::Pattern;
use std::path::PathBuf;
use std::time::Duration;
use weft_router::Architecture;

/// Arguments of `weft router bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// `prefix asn` table (default: iptrie 0.11's benches/bgpas.lpm from the cargo
    /// registry; a synthetic 1M-prefix table if neither exists).
    #[arg(long)]
    table: Option<PathBuf>,
    /// Frame size without FCS (60 = a 64-byte packet on the wire). With `--cluster`,
    /// a comma-separated list of packet sizes.
    #[arg(long, value_delimiter = ',', default_value = "60")]
    size: Vec<usize>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0)]
    secs: f64,
    /// Only the per-core pipeline rate.
    #[arg(long)]
    pipeline_only: bool,
    /// The cluster's interconnect instead (docs/cluster.md): one node sends packets
    /// to another over a weft-verbs UC queue pair, batched or not.
    #[arg(long)]
    cluster: bool,
    /// With `--cluster`: udp, shm or both (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "udp,shm")]
    interconnect: Vec<String>,
    /// With `--cluster`: packets per message (comma-separated, 1..32).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    batch: Vec<usize>,
    /// With `--cluster`: sge, memcpy, unbatched, and the router's own path: router
    /// (its `VerbsFabric`, zero-copy gather from its registered pool), router-copy
    /// (the same with packets in an unregistered pool, so each is copied)
    /// (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "sge,memcpy,unbatched")]
    mode: Vec<cluster::Mode>,
    /// With `--cluster`: one JSON object per line and configuration.
    #[arg(long)]
    json: bool,
    /// With `--cluster`: rounds of every configuration; each round runs the modes
    /// (or, with `--latency`, the batch sizes) in the opposite order of the last
    /// (ABAB), every row says its round.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// With `--cluster`: one-way latency with the paper's symmetric timestamps
    /// instead of throughput (`--path`, `--gap-us`).
    #[arg(long)]
    latency: bool,
    /// With `--latency`: interconnect (one SEND of a full batch, the paper's Fig. 10)
    /// and/or router (through two real cluster nodes, the plan's batch).
    #[arg(long, value_delimiter = ',', default_value = "interconnect,router")]
    path: Vec<String>,
    /// With `--latency`: pause between probes, µs (one probe in flight: low load).
    #[arg(long, default_value_t = 100)]
    gap_us: u64,
    /// With `--cluster`: interconnect messages and crossings per external packet
    /// for direct, VLB and Direct-VLB under uniform and hot-spot traffic (a model of
    /// `--nodes` nodes driven by the cluster's balancing code).
    #[arg(long)]
    balance: bool,
    /// With `--cluster`: per size, what copying a packet into a registered send slot
    /// costs (what the router's interconnect does today instead of a zero-copy
    /// gather).
    #[arg(long)]
    copy_cost: bool,
    /// With `--balance`: nodes.
    #[arg(long, default_value_t = 8)]
    nodes: u8,
    /// With `--balance`: external packets per node per tick (a tick is 1 µs; a
    /// directed internal link serves 2/nodes packets per tick).
    #[arg(long, default_value_t = 0.6)]
    load: f64,
    /// With `--balance`: share of each node's packets to its hot node.
    #[arg(long, default_value_t = 0.8)]
    hot: f64,
    /// With `--balance`: µs per gather round (one pass of the interconnect thread:
    /// the end of an ingress burst).
    #[arg(long, default_value_t = 20)]
    round_us: u64,
    /// With `--balance`: ticks simulated per configuration.
    #[arg(long, default_value_t = 200_000)]
    ticks: u64,
}

/// Runs `weft router bench`.
pub fn run_bench(b: BenchArgs) -> anyhow::Result<()> {
    let secs = Duration::from_secs_f64(b.secs.max(0.05));
    if b.cluster {
        let links = b
            .interconnect
            .iter()
            .map(|l| match l.as_str() {
                "udp" => Ok(weft_verbs::LinkKind::Udp),
                "shm" => Ok(weft_verbs::LinkKind::Shm),
                other => anyhow::bail!("unknown interconnect {other:?} (udp, shm)"),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        if b.copy_cost {
            for &size in &b.size {
                let r = cluster::copy_cost(size)?;
                if b.json {
                    println!("{}", serde_json::to_string(&r)?);
                } else {
                    println!(
                        "{:5} B: {:.1} ns per packet copied",
                        r.size, r.ns_per_packet
                    );
                }
            }
            return Ok(());
        }
        if b.balance {
            return cluster_balance::run(
                b.nodes, &b.batch, b.load, b.hot, b.round_us, b.ticks, b.json,
            );
        }
        if b.latency {
            let paths: Vec<&str> = b.path.iter().map(String::as_str).collect();
            let gap = Duration::from_micros(b.gap_us);
            return cluster_latency::run(
                &links, &b.size, &b.batch, &paths, secs, gap, b.repeat, b.json,
            );
        }
        return cluster::run(&links, &b.size, &b.batch, &b.mode, secs, b.repeat, b.json);
    }
    let [size] = b.size[..] else {
        anyhow::bail!("--size takes one value without --cluster");
    };
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
    let t = std::time::Instant::now();
    let router = bench::bench_router(&table, 2, &[1]);
    let (v4, v6) = router.fib().len();
    eprintln!(
        "fib: {v4} ipv4 routes ({v6} ipv6 not used) built in {:.2}s",
        t.elapsed().as_secs_f64()
    );
    let dsts = bench::destinations(&router, &table, 8192, &[1], 42);
    let frames: Vec<Vec<u8>> = dsts.iter().map(|d| bench::udp_frame(0, *d, size)).collect();
    // Counted by the process's counting allocator, switched on for this loop only.
    let counting = crate::alloc_count::Measurement::start()?;
    let r = bench::pipeline_rate_counting(&router, &frames, secs, &|| counting.allocations());
    drop(counting);
    println!(
        "pipeline, 1 core, {}-byte frames, {} random destinations: {:.2} Mpps ({:.0} ns/packet), {} of {} forwarded; FIB lookup alone {:.2} M/s",
        size + 4,
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
            let r = bench::architecture_rate(&table, arch, pattern, size, secs)?;
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
