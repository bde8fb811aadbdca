//! `weft`: the command-line front end — capture decoding, benchmarks, the demo.
#![forbid(unsafe_code)]

mod demo;
mod lpm_bench;

use clap::{Parser, Subcommand};
use weft::decode;

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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Demo(args) => demo::run(args),
        Command::Decode(args) => decode::run(args),
        Command::LpmBench(args) => lpm_bench::run(args),
    }
}
