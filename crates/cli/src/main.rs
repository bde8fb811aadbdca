//! `weft`: the command-line front end. It parses arguments and dispatches; the work is
//! in the libraries: weft-router (`router`: the daemon and its control socket),
//! weft-pcap (`decode`), and with the `bench` feature (on by default) weft-bench (the
//! demo, the benchmarks and their report).
//!
//! Each subcommand's clap `Args` live beside its `run` in the library that owns it, so
//! a flag, its default and its help are written once, next to the code that reads
//! them; this file only composes them. `weft router` is composed here because its
//! subcommands come from two crates: running and controlling the router are
//! weft-router's, benchmarking it is weft-bench's.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use weft_pcap::decode;
use weft_router::daemon;

/// Counts heap bytes and allocations while a memory measurement runs (lpm-bench's
/// memory, the router bench's allocations per packet); otherwise one relaxed load per
/// allocation. Only the benchmarks need it, so the user's tool goes without.
#[cfg(feature = "bench")]
#[global_allocator]
static ALLOC: weft_bench::alloc_count::CountingAlloc = weft_bench::alloc_count::CountingAlloc;

/// weft: the RDMA programming model on commodity Ethernet.
#[derive(Debug, Parser)]
#[command(name = "weft", version)]
#[cfg_attr(
    feature = "bench",
    command(
        about = "weft: the RDMA programming model on commodity Ethernet. Runs and \
    controls the IP router, decodes RoCEv2 captures, and runs the demo and the benchmarks \
    (verbs perf and kernel baselines, RPC beside gRPC, LPM beside the Rust crates, the \
    router) and plots their results."
    )
)]
#[cfg_attr(
    not(feature = "bench"),
    command(
        about = "weft: the RDMA programming model on commodity Ethernet. Runs and \
    controls the IP router and decodes RoCEv2 captures (built without the benchmarks)."
    )
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the IP router, or control a running one (`ctl`).
    #[cfg_attr(
        feature = "bench",
        command(
            about = "Run the IP router, control a running one (`ctl`), or benchmark it \
        (`bench`, `rfc2544`)"
        )
    )]
    Router(RouterArgs),
    /// Decode the RoCEv2 packets in a pcap or pcapng capture.
    Decode(decode::Args),
    /// Run an unmodified libibverbs program (perftest, ibv_rc_pingpong, …) on weft.
    Exec(weft_ibverbs::exec::Args),
    /// Run the one-host demonstration of what weft can do today.
    #[cfg(feature = "bench")]
    Demo(weft_bench::demo::Args),
    /// Latency and bandwidth of weft verbs over the udp or shm link (perftest for weft).
    #[cfg(feature = "bench")]
    Perf(weft_bench::perf_cmd::Args),
    /// Many senders into one receiver (incast) over weft verbs, with or without
    /// congestion control (scripts/incast.sh drives it through a bottleneck).
    #[cfg(feature = "bench")]
    Incast(weft_bench::incast_cmd::Args),
    /// The cluster-configuration paper's study with weft (verbs, polling, CPU hogs, fairness, MTU).
    #[cfg(feature = "bench")]
    Study(weft_bench::study::Args),
    /// Kernel TCP and UDP latency and bandwidth, the baseline for perf, in its format.
    #[cfg(feature = "bench")]
    Baseline(weft_bench::baseline::Args),
    /// One-way latency of a cache line between two CPUs (the machine state
    /// scripts/verbs-perf.sh records beside every shared-memory sample).
    #[cfg(feature = "bench")]
    Probe(weft_bench::probe::Args),
    /// weft-rpc throughput and latency (null RPC, namenode mix), beside gRPC (tonic).
    #[cfg(feature = "bench")]
    RpcBench(weft_bench::rpc_bench::Args),
    /// Benchmark weft-lpm against the Rust LPM crates on the same table and keys.
    #[cfg(feature = "bench")]
    LpmBench(weft_bench::lpm_bench::Args),
    /// Plots (PNG) and a markdown table from the results the benchmarks write.
    #[cfg(feature = "bench")]
    Report(weft_bench::report::Args),
}

/// `weft router`: with `--config`, run the router; or one of its subcommands.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "A two-host example, the configuration reference, the ctl commands and \
                  the counters: docs/router.md"
)]
struct RouterArgs {
    #[command(subcommand)]
    command: Option<RouterCommand>,
    #[command(flatten)]
    run: daemon::Args,
}

// Parsed once per run: the size of its largest variant costs nothing, and boxing
// clap's argument structs would only add noise at every use.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum RouterCommand {
    /// Send one command to a running router's control socket.
    Ctl(daemon::CtlArgs),
    /// In-memory benchmarks: the per-packet pipeline with a full BGP table, and the
    /// push/pull/central architectures between generator and sink ports.
    #[cfg(feature = "bench")]
    Bench(weft_bench::router::BenchArgs),
    /// RFC 2544 throughput (zero loss, binary search) and latency between two network
    /// namespaces, through whatever forwards between them (weft or the kernel).
    #[cfg(feature = "bench")]
    Rfc2544(weft_bench::router::Rfc2544Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Router(args) => match args.command {
            None => daemon::run(args.run),
            Some(RouterCommand::Ctl(c)) => daemon::ctl(c),
            #[cfg(feature = "bench")]
            Some(RouterCommand::Bench(b)) => weft_bench::router::run_bench(b),
            #[cfg(feature = "bench")]
            Some(RouterCommand::Rfc2544(a)) => weft_bench::router::run_rfc2544(a),
        },
        Command::Decode(args) => decode::run(args),
        Command::Exec(args) => Ok(weft_ibverbs::exec::run(args)?),
        #[cfg(feature = "bench")]
        Command::Demo(args) => weft_bench::demo::run(args),
        #[cfg(feature = "bench")]
        Command::Perf(args) => weft_bench::perf_cmd::run(args),
        #[cfg(feature = "bench")]
        Command::Incast(args) => weft_bench::incast_cmd::run(args),
        #[cfg(feature = "bench")]
        Command::Study(args) => weft_bench::study::run(args),
        #[cfg(feature = "bench")]
        Command::Baseline(args) => weft_bench::baseline::run(args),
        #[cfg(feature = "bench")]
        Command::Probe(args) => weft_bench::probe::run(args),
        #[cfg(feature = "bench")]
        Command::RpcBench(args) => weft_bench::rpc_bench::run(args),
        #[cfg(feature = "bench")]
        Command::LpmBench(args) => weft_bench::lpm_bench::run(args),
        #[cfg(feature = "bench")]
        Command::Report(args) => weft_bench::report::run(args),
    }
}
