//! The scaled-out router: weft router nodes joined by an RDMA interconnect, acting as
//! one router (the system of "RoCE interconnect for scaled-out software routers",
//! RouteBricks-style).
//!
//! Every node holds the whole configuration: all ports (each owned by one node), the
//! whole FIB. A node runs the usual data plane for its own ports, plus one
//! interconnect thread ([`node`]). A packet whose route leaves by another node's port
//! is validated and looked up at the ingress node (TTL checked, not decremented; a
//! TTL-1 packet is answered with time exceeded there) and handed, unfinished, to the
//! interconnect; the owner of the egress port finishes it (neighbour resolution,
//! fragmentation or too big, TTL − 1, MACs). So the TTL drops once across the
//! cluster, traceroute shows one hop, ICMP errors come from the cluster's addresses
//! (the ingress port's, whichever node sends them), and ARP/ND for a port is answered
//! by the node that owns its interface.
//!
//! - [`config`]: `[cluster]`, the nodes, port ownership, `--node`;
//! - [`batch`]: the message format (per-packet header, split);
//! - [`balance`]: direct, VLB, Direct-VLB; flow buckets; reordering count;
//! - [`fabric`]: the weft-verbs UC/RC SEND/RECV interconnect;
//! - [`node`]: the interconnect thread (batching, flushing, relaying, counters).
#![forbid(unsafe_code)]

pub mod balance;
pub mod batch;
pub mod config;
pub mod fabric;
pub mod node;
