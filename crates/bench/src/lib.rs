//! weft-bench: everything in weft that exists to be measured or shown, kept apart from
//! the libraries and the user's tool (as rustls keeps its bench code apart).
//!
//! It owns, each beside its `weft` subcommand's arguments and `run`:
//! - [`perf`], the measurement harness (records, statistics, tables, `--local`), and
//!   [`perf_cmd`] (`weft perf`, perftest for weft verbs) and [`baseline`] (`weft
//!   baseline`, kernel TCP/UDP in the same format);
//! - [`rpc_bench`] (`weft rpc-bench`): weft-rpc beside gRPC, with the hand-written tonic
//!   service, and the namenode example service it loads ([`namenode`], weft-rpc's
//!   example);
//! - [`lpm_bench`] (`weft lpm-bench`): weft-lpm beside the peer LPM crates;
//! - [`router`] (`weft router bench`, `weft router rfc2544`): the in-memory pipeline and
//!   architecture benchmarks and the RFC 2544 load generator;
//! - [`report`] (`weft report`): the one plotting path, PNGs and markdown from the JSON
//!   lines and tables the benchmarks write;
//! - [`study`] (`weft study`): the cluster-configuration paper's measurements, driving
//!   `weft perf` children;
//! - [`incast_cmd`] (`weft incast`): many sender processes into one receiver, the
//!   congestion-control measurement (`scripts/incast.sh`);
//! - [`probe`] (`weft probe`): the one-way cache-line latency between two CPUs, the
//!   machine state the shared-memory comparisons are labelled with;
//! - [`demo`] (`weft demo`), which runs the others;
//! - [`alloc_count`], the counting allocator that memory measurements switch on.
//!
//! It must not touch: the libraries' internals (it uses their public APIs only), and
//! nothing in the libraries or in the user's tool (`weft --no-default-features`)
//! depends on it. Its only unsafe code is the allocator's `GlobalAlloc` forwarding and
//! the two libc calls that read a process's CPU-time clock (`perf::cpu`).
#![deny(unsafe_code)]
// The records and tables here are benchmark output, documented by the JSON keys and
// column names they print (docs/results); their fields are not a library API.
#![allow(missing_docs)]

pub mod alloc_count;
pub mod baseline;
pub mod demo;
pub mod demo_rpc;
pub mod incast_cmd;
pub mod lpm_bench;
/// The namenode example service of weft-rpc (`crates/rpc/examples/namenode/`): one
/// source file serves the example, weft-rpc's tests, the fuzz target and this bench.
#[path = "../../rpc/examples/namenode/service.rs"]
pub mod namenode;
pub mod perf;
pub mod perf_cmd;
pub mod plots;
pub mod probe;
pub mod report;
pub mod router;
pub mod rpc_bench;
pub mod study;
