//! weft-router: an IP router built the way the P2PNIC paper (Ueno et al., "A
//! NIC-driven Architecture for High-speed IP Packet Forwarding on General-purpose
//! Servers") builds one in NICs — each ingress worker looks the route up and writes
//! the packet straight into the egress port's descriptor ring — in software, over
//! weft-link ports.
//!
//! It owns: the per-packet [`pipeline`] (ARP/ND, validation, ICMP, LPM, TTL, MAC
//! rewrite), the [`fib`], the [`neighbor`] table, [`counters`] for every drop reason,
//! the [`dataplane`] threads in three architectures (push = P2PNIC-Wr, pull =
//! P2PNIC-Rd, central = the CPU-driven baseline), the TOML [`config`], the [`ctl`]
//! control socket, the one-router-per-interface [`instance`] lock, the [`daemon`]
//! that `weft router` runs (configuration, ports, signals), and [`fastpath`], which
//! keeps the XDP forwarding fast path's maps (weft-link's `xdp_fwd`) in step with the
//! FIB and the neighbours.
//!
//! Its benchmarks (the in-memory pipeline and architecture rates, the RFC 2544 load
//! generator) are weft-bench's: nothing here exists only to be measured.
//!
//! It must not touch: header layouts (weft-wire's) or link I/O (weft-link's).
#![forbid(unsafe_code)]

pub mod cluster;
pub mod config;
pub mod counters;
pub mod ctl;
pub mod daemon;
pub mod dataplane;
pub mod fastpath;
pub mod fib;
pub mod instance;
pub mod neighbor;
pub mod pipeline;

pub use counters::Counter;
pub use dataplane::{Architecture, Dataplane, Options};
pub use fib::{Fib, IpPrefix, NextHop, PortId};
pub use pipeline::{Forward, Outbox, PortSpec, Router, RouterConfig, Worker};
