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
//! control socket, the one-router-per-interface [`instance`] lock and the in-memory
//! [`bench`](mod@bench).
//!
//! It must not touch: header layouts (weft-wire's) or link I/O (weft-link's).
#![forbid(unsafe_code)]

pub mod bench;
pub mod config;
pub mod counters;
pub mod ctl;
pub mod dataplane;
pub mod fib;
pub mod instance;
pub mod loadgen;
pub mod neighbor;
pub mod pipeline;

pub use counters::Counter;
pub use dataplane::{Architecture, Dataplane, Options};
pub use fib::{Fib, IpPrefix, NextHop, PortId};
pub use pipeline::{Forward, Outbox, PortSpec, Router, RouterConfig, Worker};
