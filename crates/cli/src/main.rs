//! `weft`: the command-line front end — capture decoding, benchmarks, the demo.
#![forbid(unsafe_code)]

mod alloc_count;
mod baseline;
mod demo;
mod demo_rpc;
mod lpm_bench;
mod perf_cmd;
mod report;
mod router;
mod rpc_bench;

use clap::{Parser, Subcommand};
use weft::decode;

/// Counts live heap bytes so lpm-bench measures every implementation's memory alike.
#[global_allocator]
static ALLOC: &stats_alloc::StatsAlloc<std::alloc::System> = alloc_count::ALLOC;

/// weft: the RDMA programming model on commodity Ethernet.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the one-host demonstration of what weft can do today.
    Demo(demo::Args),
    /// Decode the RoCEv2 packets in a pcap or pcapng capture.
    Decode(decode::Args),
    /// Benchmark weft-lpm against the Rust LPM crates on the same table and keys.
    LpmBench(lpm_bench::Args),
    /// Run the IP router, control a running one, or benchmark it.
    Router(router::Args),
    /// Kernel-socket baselines (TCP/UDP latency and bandwidth) in weft perf's format.
    /// perftest for weft: latency and bandwidth of verbs over the udp or shm link.
    Perf(perf_cmd::Args),
    Baseline(baseline::Args),
    /// Plots and a markdown table from perf / baseline / peers JSON lines.
    Report(report::Args),
    /// weft-rpc throughput and latency (null RPC, namenode mix), beside gRPC (tonic).
    RpcBench(rpc_bench::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Demo(args) => demo::run(args),
        Command::Decode(args) => decode::run(args),
        Command::LpmBench(args) => lpm_bench::run(args),
        Command::Router(args) => router::run(args),
        Command::Perf(args) => perf_cmd::run(args),
        Command::Baseline(args) => baseline::run(args),
        Command::Report(args) => report::run(args),
        Command::RpcBench(args) => rpc_bench::run(args),
    }
}
