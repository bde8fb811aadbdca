//! The router's TOML configuration and route files.
//!
//! ```toml
//! [router]                       # optional
//! architecture = "push"          # push | pull | central
//! control_socket = "/run/weft-router.sock"
//! busy_poll_us = 50              # an idle thread polls this long before it blocks
//! # workers = 1                  # port threads (default: one per port, up to the
//! #                              # CPUs this process may run on)
//!
//! [[port]]
//! name = "left"
//! interface = "veth-a"           # Linux interface; afpacket by default
//! addresses = ["198.18.1.1/24", "2001:2:0:1::1/64"]
//! # ring = "v2"                  # afpacket: TPACKET_V2 (default, a frame is seen at once)
//! #                              # or "v3" (blocks; up to 1-5 ms late when traffic is light)
//! # backend = "afxdp"            # AF_XDP instead of AF_PACKET,
//! # xdp_mode = "generic"         # with the XDP program in generic (default) or native mode
//! # xdp_rx_frames = 8192         # afxdp: receive ring depth (a power of two, 64-32768)
//! # xdp_forward = false          # afxdp, generic mode: plain IPv4/IPv6 transit is
//! #                              # forwarded in the XDP hook (weft_link::xdp_fwd) unless
//! #                              # false; the rest reaches the pipeline. Native mode:
//! #                              # off unless true (see PortConfig::xdp_forward)
//! # fast_path = "tc"             # the forwarding fast path and its hook: "xdp" (afxdp
//! #                              # ports; the same as xdp_forward = true), "tc" (afpacket
//! #                              # ports: tc ingress, weft_link::afpacket_tc) or "off".
//! #                              # Default: xdp on afxdp ports in generic mode, else off
//! #                              # (see PortConfig::fast_path)
//!
//! [[port]]                       # a port to another weft process on this host
//! name = "to-r2"
//! backend = "shm"                # shared-memory rings (weft_link::ShmFrameLink)
//! interface = "127.0.0.1:7001"   # for shm: this port's name (an ip:port, only a name)
//! peer = "127.0.0.1:7002"        # the other process's port name
//! addresses = ["198.18.9.1/30"]
//!
//! [[route]]
//! prefix = "198.19.0.0/16"
//! via = "198.18.2.2"
//!
//! [[route_file]]                 # full tables
//! path = "routes.txt"            # relative to the config file
//! format = "prefix-next-hop"     # lines "prefix next-hop"
//! # or: format = "bgpas" (lines "prefix asn", iptrie's bgpas.lpm) with
//! # next_hops = ["198.18.2.2", "198.18.3.2"]: AS n goes to next_hops[n % len]
//! ```
#![forbid(unsafe_code)]

use crate::dataplane::Architecture;
use crate::fib::{IpPrefix, NextHop};
use crate::pipeline::{PortSpec, Router};
use serde::Deserialize;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use weft_link::afpacket::{AfPacket, RingConfig, RingVersion};
use weft_link::afpacket_tc::AfPacketTc;
use weft_link::afxdp::{AfXdpLink, XdpConfig};
use weft_link::shm::{mac_for_name, ShmFrameLink, ShmOptions};
use weft_link::xdp_fwd::FastPath;
use weft_link::{BufferPool, Link};

/// The whole file.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Router-wide settings.
    #[serde(default)]
    pub router: RouterSection,
    /// Ports, in port-id order.
    #[serde(rename = "port")]
    pub ports: Vec<PortConfig>,
    /// Static routes.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteConfig>,
    /// Route files.
    #[serde(default, rename = "route_file")]
    pub route_files: Vec<RouteFileConfig>,
    /// `[cluster]`: this file describes a cluster of nodes that act as one router
    /// (see [`crate::cluster`]); absent, the single-box router.
    #[serde(default)]
    pub cluster: Option<crate::cluster::config::ClusterSection>,
}

/// `[router]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouterSection {
    /// push (default), pull or central.
    pub architecture: Option<String>,
    /// Path of the control socket (default `/run/weft-router.sock`).
    pub control_socket: Option<PathBuf>,
    /// Microseconds an idle data plane thread keeps polling before it blocks
    /// ([`crate::Options::busy_poll`]; default 50).
    pub busy_poll_us: Option<u64>,
    /// Port workers, each serving its share of the ports ([`crate::Options::workers`];
    /// default: one per port up to the CPUs the process may run on). At least 1;
    /// more than the ports is the same as one per port.
    pub workers: Option<std::num::NonZeroUsize>,
}

/// `[[port]]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Port name.
    pub name: String,
    /// Linux interface (for `shm`: this port's name, an `ip:port`).
    pub interface: String,
    /// `afpacket` (default), `afxdp` or `shm`.
    #[serde(default)]
    pub backend: Option<String>,
    /// For `afxdp`: `generic` (default) or `native`.
    #[serde(default)]
    pub xdp_mode: Option<String>,
    /// For `afxdp`: run the forwarding fast path in this port's XDP hook
    /// ([`weft_link::xdp_fwd`]): plain transit packets are forwarded there, in the
    /// kernel, from weft's routes and resolved neighbours; everything else reaches
    /// the pipeline as before. Unset: on in generic XDP mode (falling back to the
    /// pipeline alone, with a warning, when the program cannot be loaded), off in
    /// native mode; see [`PortConfig::xdp_forward`].
    #[serde(default)]
    pub xdp_forward: Option<bool>,
    /// The forwarding fast path ([`weft_link::xdp_fwd`]) and its hook: `xdp` (afxdp
    /// ports, the same as `xdp_forward = true`), `tc` (afpacket ports: the program at
    /// tc ingress, [`weft_link::afpacket_tc`]) or `off`. Not together with
    /// `xdp_forward`. Unset: as `xdp_forward` says, or its default; see
    /// [`PortConfig::fast_path`].
    #[serde(default)]
    pub fast_path: Option<String>,
    /// For `afxdp`: the depth of each queue's receive ring, which is also its fill
    /// ring's depth and its receive chunks in the UMEM (a power of two,
    /// [`XDP_RX_FRAMES_MIN`]..=[`XDP_RX_FRAMES_MAX`]; default
    /// [`XDP_RX_FRAMES_DEFAULT`]).
    #[serde(default)]
    pub xdp_rx_frames: Option<u32>,
    /// For `afpacket`: the ring layout, `v2` (default) or `v3`.
    #[serde(default)]
    pub ring: Option<String>,
    /// For `shm`: the name (`ip:port`) of the port of the other weft process.
    #[serde(default)]
    pub peer: Option<String>,
    /// Addresses with prefix lengths.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// In a cluster: the id of the node that owns this port (required there, refused
    /// without `[cluster]`).
    #[serde(default)]
    pub node: Option<u32>,
}

/// How a port reaches its Linux interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `AF_PACKET` with rings of this layout.
    AfPacket(RingVersion),
    /// `AF_XDP` with these ring sizes and the redirect program in this XDP mode.
    AfXdp(XdpConfig),
    /// Shared-memory rings to the port named `peer` of another weft process on this
    /// host; the port's `interface` is its own name.
    Shm {
        /// The other end's port name.
        peer: SocketAddr,
    },
}

/// Where a port runs the forwarding fast path ([`PortConfig::fast_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FastPathHook {
    /// Not at all: every frame reaches the pipeline.
    Off,
    /// In the XDP hook, slow path to the port's `AF_XDP` socket (afxdp ports).
    Xdp,
    /// At tc ingress, slow path to the port's per-protocol packet sockets
    /// (afpacket ports; [`weft_link::afpacket_tc`]).
    Tc,
}

/// Largest frame on an shm port: Ethernet's 1514, so routers on either side agree on
/// the MTU whatever their buffer sizes.
pub const SHM_MAX_FRAME: usize = 1514;

/// `xdp_rx_frames` when the port does not say: 8 192, four times the link's own
/// default ([`XdpConfig::default`], 2 048).
///
/// The router's zero-loss rate on a shared core is set by the longest time its port
/// thread does not run (stalls of 0.3-3.7 ms on this sandbox's core 1; docs/results/
/// router.md §3.3e), and what arrives meanwhile waits in the receive ring: 2 048
/// slots are 5 ms at 400 kpps. Measured 2026-11-29 (§3.3f, generic XDP over veth):
/// in 10-s flat-out trials at 64 B (398-435 kpps) 2 048 slots lost 6 601 and 1 503
/// frames at the AF_XDP socket, 8 192 and 16 384 none in two trials each; in three
/// 1-s RFC 2544 rounds per depth (64/512/1518 B) the socket dropped 374-10 627
/// frames per run with 2 048, and 0 in two of three runs with 8 192 (the third met a
/// ~160 ms stall). weft's 1-s zero-loss kpps did not change (it is at the
/// generator's rate), nor did p50/p99 at the kernel's rate beyond noise (the ring
/// never held 2 048 frames at that rate). 16 384 showed nothing more and doubles
/// the UMEM. Cost: 8 192 × 2 KiB = 16 MiB of UMEM per receive queue (locked memory).
pub const XDP_RX_FRAMES_DEFAULT: u32 = 8192;

/// Smallest `xdp_rx_frames`.
pub const XDP_RX_FRAMES_MIN: u32 = 64;

/// Largest `xdp_rx_frames`: 32 768 chunks of 2 KiB are 64 MiB of UMEM per queue.
pub const XDP_RX_FRAMES_MAX: u32 = 32_768;

/// Ring slots per direction of an shm port.
pub const SHM_SLOTS: usize = 1024;

impl Backend {
    /// Open `interface` with this backend, receiving into `pool`.
    pub fn open(self, interface: &str, pool: BufferPool) -> io::Result<Box<dyn Link>> {
        self.open_with_fast_path(interface, pool, None)
    }

    /// [`Backend::open`]; given `fast`, an `afxdp` port runs the forwarding fast path
    /// over its maps in the XDP hook, an `afpacket` port at tc ingress
    /// ([`weft_link::afpacket_tc`]); shm ports ignore it.
    pub fn open_with_fast_path(
        self,
        interface: &str,
        pool: BufferPool,
        fast: Option<&FastPath>,
    ) -> io::Result<Box<dyn Link>> {
        Ok(match self {
            Backend::AfPacket(version) => {
                let cfg = match version {
                    RingVersion::V2 => RingConfig::default(),
                    RingVersion::V3 => RingConfig::v3(),
                };
                match fast {
                    Some(f) => Box::new(AfPacketTc::open(interface, pool, cfg, f)?),
                    None => Box::new(AfPacket::with_config(interface, pool, cfg)?),
                }
            }
            Backend::AfXdp(cfg) => Box::new(AfXdpLink::with_fast_path(interface, pool, cfg, fast)?),
            Backend::Shm { peer } => {
                let local: SocketAddr = interface.parse().map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("shm port name {interface:?} is not an ip:port"),
                    )
                })?;
                Box::new(ShmFrameLink::bind(
                    local,
                    peer,
                    mac_for_name(local),
                    ShmOptions {
                        pool: Some(pool),
                        slot_size: SHM_MAX_FRAME,
                        slots: SHM_SLOTS,
                        icrc: false,
                        ..ShmOptions::default()
                    },
                )?)
            }
        })
    }
}

impl PortConfig {
    /// The backend this port asks for.
    pub fn backend(&self) -> Result<Backend, ConfigError> {
        let bad = |problem| self.error(problem);
        let only_for = |key, backend| bad(PortProblem::OnlyFor { key, backend });
        let mode = self.xdp_mode.as_deref();
        let backend = self.backend.as_deref().unwrap_or("afpacket");
        if self.peer.is_some() && backend != "shm" {
            return Err(only_for("peer", "shm"));
        }
        if self.ring.is_some() && backend != "afpacket" {
            return Err(only_for("ring", "afpacket"));
        }
        if self.xdp_rx_frames.is_some() && backend != "afxdp" {
            return Err(only_for("xdp_rx_frames", "afxdp"));
        }
        if self.xdp_forward.is_some() && backend != "afxdp" {
            return Err(only_for("xdp_forward", "afxdp"));
        }
        match self.fast_path.as_deref() {
            None => {}
            Some(_) if self.xdp_forward.is_some() => {
                return Err(bad(PortProblem::FastPathTwice));
            }
            Some("off") => {}
            Some("xdp") if backend != "afxdp" => {
                return Err(only_for("fast_path = \"xdp\"", "afxdp"))
            }
            Some("tc") if backend != "afpacket" => {
                return Err(only_for("fast_path = \"tc\"", "afpacket"))
            }
            Some("xdp" | "tc") => {}
            Some(v) => {
                return Err(bad(PortProblem::UnknownFastPath {
                    value: v.to_string(),
                }))
            }
        }
        match backend {
            "shm" => {
                if mode.is_some() {
                    return Err(only_for("xdp_mode", "afxdp"));
                }
                if self.interface.parse::<SocketAddr>().is_err() {
                    return Err(bad(PortProblem::ShmNameNotAddr {
                        value: self.interface.clone(),
                    }));
                }
                let peer = self
                    .peer
                    .as_deref()
                    .ok_or_else(|| bad(PortProblem::ShmPeerMissing))?;
                let peer = peer.parse().map_err(|_| {
                    bad(PortProblem::ShmPeerNotAddr {
                        value: peer.to_string(),
                    })
                })?;
                Ok(Backend::Shm { peer })
            }
            "afpacket" if mode.is_none() => {
                let ring = self.ring.as_deref().unwrap_or("v2");
                Ok(Backend::AfPacket(ring.parse().map_err(|_| {
                    bad(PortProblem::UnknownRing {
                        value: ring.to_string(),
                    })
                })?))
            }
            "afpacket" => Err(only_for("xdp_mode", "afxdp")),
            "afxdp" => {
                let mode = mode.unwrap_or("generic");
                let mode = mode.parse().map_err(|_| {
                    bad(PortProblem::UnknownXdpMode {
                        value: mode.to_string(),
                    })
                })?;
                let n = self.xdp_rx_frames.unwrap_or(XDP_RX_FRAMES_DEFAULT);
                // The kernel takes only powers of two for ring sizes.
                if !n.is_power_of_two() || !(XDP_RX_FRAMES_MIN..=XDP_RX_FRAMES_MAX).contains(&n) {
                    return Err(bad(PortProblem::BadXdpRxFrames { value: n }));
                }
                Ok(Backend::AfXdp(XdpConfig {
                    mode,
                    rx_frames: n,
                    ..XdpConfig::default()
                }))
            }
            b => Err(bad(PortProblem::UnknownBackend {
                value: b.to_string(),
            })),
        }
    }

    /// Whether this port runs the XDP forwarding fast path: `xdp_forward` when given
    /// (afxdp ports only; [`PortConfig::backend`] refuses it elsewhere), and when not,
    /// on for afxdp ports in generic XDP mode (the default mode) and off otherwise.
    ///
    /// Not by default in native mode: a native `XDP_REDIRECT` hands the frame to the
    /// egress driver's `ndo_xdp_xmit`, and a device that cannot take it drops it
    /// after the program counted it forwarded — a veth whose peer runs no NAPI (no
    /// XDP program, GRO off) delivered 0 of 417 k redirected frames
    /// (docs/results/router.md §3.3i). Generic mode transmits through the egress
    /// device's ordinary path, which every device has.
    pub fn xdp_forward(&self) -> bool {
        if let Some(hook) = self.fast_path.as_deref() {
            return hook == "xdp";
        }
        match self.xdp_forward {
            Some(on) => on,
            None => {
                self.backend.as_deref() == Some("afxdp")
                    && self.xdp_mode.as_deref().is_none_or(|m| m == "generic")
            }
        }
    }

    /// Whether the config said `xdp_forward = …` or `fast_path = …` for this port:
    /// then a fast path that cannot be set up is an error, where the default falls
    /// back to the pipeline alone with a warning.
    pub fn xdp_forward_explicit(&self) -> bool {
        self.xdp_forward.is_some() || self.fast_path.is_some()
    }

    /// Where this port runs the fast path: `fast_path` when given (checked by
    /// [`PortConfig::backend`]: `xdp` for afxdp ports, `tc` for afpacket ports);
    /// else XDP where [`PortConfig::xdp_forward`] says so, and nowhere otherwise.
    /// The tc hook is not the default for afpacket ports (docs/results/router.md
    /// §3.3j).
    pub fn fast_path(&self) -> FastPathHook {
        match self.fast_path.as_deref() {
            Some("tc") => FastPathHook::Tc,
            Some("xdp") => FastPathHook::Xdp,
            Some(_) => FastPathHook::Off,
            None if self.xdp_forward() => FastPathHook::Xdp,
            None => FastPathHook::Off,
        }
    }

    fn error(&self, problem: PortProblem) -> ConfigError {
        ConfigError::Port {
            port: self.name.clone(),
            problem,
        }
    }
}

/// `[[route]]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Destination prefix.
    pub prefix: String,
    /// Next hop, on a connected network.
    pub via: String,
}

/// `[[route_file]]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouteFileConfig {
    /// Path (relative paths are relative to the config file).
    pub path: PathBuf,
    /// `prefix-next-hop` (default) or `bgpas`.
    #[serde(default)]
    pub format: Option<String>,
    /// For `bgpas`: AS n is routed via `next_hops[n % len]`.
    #[serde(default)]
    pub next_hops: Vec<String>,
}

/// A configuration problem: which file, section, key, line and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A file (the config or a route file) could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why, as the OS says it.
        error: String,
    },
    /// Not TOML, or a key or value the format does not have (the toml crate's
    /// message, with line and column).
    Toml {
        /// The toml crate's message.
        message: String,
    },
    /// No `[[port]]` section.
    NoPorts,
    /// Two ports with one name.
    DuplicatePort {
        /// The name.
        name: String,
    },
    /// `[router] architecture` is not push, pull or central.
    UnknownArchitecture {
        /// The value given.
        value: String,
    },
    /// A `[[port]]` is wrong.
    Port {
        /// The port's name.
        port: String,
        /// What is wrong.
        problem: PortProblem,
    },
    /// A `[[route]]` is wrong.
    Route {
        /// The route's `prefix` as written.
        prefix: String,
        /// What is wrong.
        problem: RouteProblem,
    },
    /// A `[[route_file]]` is wrong.
    RouteFile {
        /// The file.
        path: PathBuf,
        /// Where and what.
        error: RouteFileError,
    },
    /// `[cluster]`, a `[[cluster.node]]`, a port's `node` or `--node` is wrong.
    Cluster(crate::cluster::config::ClusterProblem),
}

/// What is wrong with a `[[port]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortProblem {
    /// `backend` is not afpacket, afxdp or shm.
    UnknownBackend {
        /// The value given.
        value: String,
    },
    /// `key` is only for `backend`, and the port has another backend.
    OnlyFor {
        /// The key given.
        key: &'static str,
        /// The backend it belongs to.
        backend: &'static str,
    },
    /// An shm port's `interface` (its name) is not an `ip:port`.
    ShmNameNotAddr {
        /// The value given.
        value: String,
    },
    /// An shm port without `peer`.
    ShmPeerMissing,
    /// An shm port's `peer` is not an `ip:port`.
    ShmPeerNotAddr {
        /// The value given.
        value: String,
    },
    /// `xdp_mode` is not generic or native.
    UnknownXdpMode {
        /// The value given.
        value: String,
    },
    /// `xdp_rx_frames` is not a power of two in
    /// [`XDP_RX_FRAMES_MIN`]..=[`XDP_RX_FRAMES_MAX`].
    BadXdpRxFrames {
        /// The value given.
        value: u32,
    },
    /// `fast_path` is not xdp, tc or off.
    UnknownFastPath {
        /// The value given.
        value: String,
    },
    /// Both `fast_path` and `xdp_forward`.
    FastPathTwice,
    /// `ring` is not v2 or v3.
    UnknownRing {
        /// The value given.
        value: String,
    },
    /// An entry of `addresses` without `/length`.
    AddressWithoutLength {
        /// The entry.
        value: String,
    },
    /// An entry of `addresses` whose address does not parse.
    BadAddress {
        /// The entry.
        value: String,
    },
    /// An entry of `addresses` whose length does not parse or is too long for its
    /// family.
    BadPrefixLength {
        /// The entry.
        value: String,
    },
}

/// What is wrong with a route, in `[[route]]` or a route file line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteProblem {
    /// The prefix does not parse.
    BadPrefix {
        /// Why, as the prefix parser says it (it names the value).
        reason: String,
    },
    /// The next hop is not an address.
    BadNextHop {
        /// The value given.
        value: String,
    },
    /// The next hop is not on a network of any port.
    NextHopNotConnected {
        /// The next hop.
        via: IpAddr,
    },
    /// The router refused the route (as its route table says why).
    Rejected {
        /// The router's reason.
        reason: String,
    },
    /// A route file line without exactly two fields.
    FieldCount,
    /// A `bgpas` line's AS number does not parse.
    BadAsNumber {
        /// The value given.
        value: String,
    },
    /// A `bgpas` prefix whose family has no entry in `next_hops`.
    NoNextHopOfFamily,
    /// `format` is not prefix-next-hop or bgpas.
    UnknownFormat {
        /// The value given.
        value: String,
    },
}

/// A route file problem: the line (1-based; none for the file's settings) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteFileError {
    /// The line, counting from 1.
    pub line: Option<usize>,
    /// What is wrong with it.
    pub problem: RouteProblem,
}

impl std::fmt::Display for PortProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortProblem::UnknownBackend { value } => {
                write!(f, "unknown backend {value:?} (afpacket, afxdp, shm)")
            }
            PortProblem::OnlyFor { key, backend } => {
                write!(f, "{key} is for backend {backend:?}")
            }
            PortProblem::ShmNameNotAddr { value } => write!(
                f,
                "for shm, interface is this port's name, an ip:port (not {value:?})"
            ),
            PortProblem::ShmPeerMissing => f.write_str("shm needs peer = \"ip:port\""),
            PortProblem::ShmPeerNotAddr { value } => {
                write!(f, "peer {value:?} is not an ip:port")
            }
            PortProblem::UnknownXdpMode { value } => {
                write!(f, "unknown xdp_mode {value:?} (generic, native)")
            }
            PortProblem::BadXdpRxFrames { value } => write!(
                f,
                "xdp_rx_frames {value} is not a power of two from \
                 {XDP_RX_FRAMES_MIN} to {XDP_RX_FRAMES_MAX}"
            ),
            PortProblem::UnknownFastPath { value } => {
                write!(f, "unknown fast_path {value:?} (xdp, tc, off)")
            }
            PortProblem::FastPathTwice => {
                f.write_str("fast_path and xdp_forward both given: fast_path alone says it")
            }
            PortProblem::UnknownRing { value } => {
                write!(f, "unknown ring {value:?} (v2, v3)")
            }
            PortProblem::AddressWithoutLength { value } => {
                write!(f, "address {value:?} needs a /length")
            }
            PortProblem::BadAddress { value } => write!(f, "bad address {value:?}"),
            PortProblem::BadPrefixLength { value } => write!(f, "bad length in {value:?}"),
        }
    }
}

impl std::fmt::Display for RouteProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteProblem::BadPrefix { reason } => f.write_str(reason),
            RouteProblem::BadNextHop { value } => write!(f, "bad next hop {value:?}"),
            RouteProblem::NextHopNotConnected { via } => {
                write!(f, "next hop {via} is not on a connected network")
            }
            RouteProblem::Rejected { reason } => f.write_str(reason),
            RouteProblem::FieldCount => f.write_str("expected two fields"),
            RouteProblem::BadAsNumber { value } => write!(f, "bad AS number {value:?}"),
            RouteProblem::NoNextHopOfFamily => {
                f.write_str("no next hop of this family in next_hops")
            }
            RouteProblem::UnknownFormat { value } => {
                write!(f, "unknown route file format {value:?}")
            }
        }
    }
}

impl std::fmt::Display for RouteFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(n) => write!(f, "line {n}: {}", self.problem),
            None => write!(f, "{}", self.problem),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Read { path, error } => write!(f, "{}: {error}", path.display()),
            ConfigError::Toml { message } => write!(f, "config: {message}"),
            ConfigError::NoPorts => f.write_str("config: at least one [[port]] is needed"),
            ConfigError::DuplicatePort { name } => {
                write!(f, "config: port name {name:?} used twice")
            }
            ConfigError::UnknownArchitecture { value } => {
                write!(
                    f,
                    "config: unknown architecture {value:?} (push, pull, central)"
                )
            }
            ConfigError::Port { port, problem } => write!(f, "port {port}: {problem}"),
            ConfigError::Route { prefix, problem } => write!(f, "route {prefix}: {problem}"),
            ConfigError::RouteFile { path, error } => write!(f, "{}: {error}", path.display()),
            ConfigError::Cluster(problem) => write!(f, "cluster: {problem}"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl std::error::Error for RouteFileError {}

impl Config {
    /// Parse TOML text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| ConfigError::Toml {
            message: e.to_string(),
        })?;
        if c.ports.is_empty() {
            return Err(ConfigError::NoPorts);
        }
        for (i, p) in c.ports.iter().enumerate() {
            if c.ports[..i].iter().any(|q| q.name == p.name) {
                return Err(ConfigError::DuplicatePort {
                    name: p.name.clone(),
                });
            }
            p.backend()?;
        }
        c.architecture()?;
        crate::cluster::config::validate(&c).map_err(ConfigError::Cluster)?;
        Ok(c)
    }

    /// Read and parse a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::parse(&read(path)?)
    }

    /// The chosen architecture.
    pub fn architecture(&self) -> Result<Architecture, ConfigError> {
        let value = self.router.architecture.as_deref().unwrap_or("push");
        value.parse().map_err(|_| ConfigError::UnknownArchitecture {
            value: value.to_string(),
        })
    }

    /// Port specs, given each interface's MAC and largest frame.
    pub fn port_specs(&self, link_info: &[([u8; 6], usize)]) -> Result<Vec<PortSpec>, ConfigError> {
        self.ports
            .iter()
            .zip(link_info)
            .map(|(p, &(mac, max_frame))| {
                let mut spec = PortSpec {
                    name: p.name.clone(),
                    mac: weft_wire::EthernetAddress(mac),
                    v4: Vec::new(),
                    v6: Vec::new(),
                    max_frame,
                };
                for a in &p.addresses {
                    let value = a.clone();
                    let (addr, len) = a.split_once('/').ok_or_else(|| {
                        p.error(PortProblem::AddressWithoutLength {
                            value: value.clone(),
                        })
                    })?;
                    let addr: IpAddr = addr.parse().map_err(|_| {
                        p.error(PortProblem::BadAddress {
                            value: value.clone(),
                        })
                    })?;
                    let bad_length = || {
                        p.error(PortProblem::BadPrefixLength {
                            value: value.clone(),
                        })
                    };
                    let len: u8 = len.parse().map_err(|_| bad_length())?;
                    match addr {
                        IpAddr::V4(v) if len <= 32 => spec.v4.push((v, len)),
                        IpAddr::V6(v) if len <= 128 => spec.v6.push((v, len)),
                        _ => return Err(bad_length()),
                    }
                }
                Ok(spec)
            })
            .collect()
    }

    /// Install the static routes and route files into `router`; returns how many
    /// routes were added. `base` is the directory relative paths start from.
    pub fn install_routes(&self, router: &Router, base: &Path) -> Result<usize, ConfigError> {
        let mut n = 0;
        for r in &self.routes {
            let bad = |problem| ConfigError::Route {
                prefix: r.prefix.clone(),
                problem,
            };
            let prefix = r.prefix.parse::<IpPrefix>().map_err(|e| {
                bad(RouteProblem::BadPrefix {
                    reason: e.to_string(),
                })
            })?;
            let via: IpAddr = r.via.parse().map_err(|_| {
                bad(RouteProblem::BadNextHop {
                    value: r.via.clone(),
                })
            })?;
            router.add_route(prefix, via).map_err(|e| {
                bad(RouteProblem::Rejected {
                    reason: e.to_string(),
                })
            })?;
            n += 1;
        }
        for f in &self.route_files {
            let path = if f.path.is_absolute() {
                f.path.clone()
            } else {
                base.join(&f.path)
            };
            let text = read(&path)?;
            let routes = parse_route_file(
                &text,
                f.format.as_deref().unwrap_or("prefix-next-hop"),
                &f.next_hops,
                router,
            )
            .map_err(|error| ConfigError::RouteFile {
                path: path.clone(),
                error,
            })?;
            n += router
                .bulk_insert(routes)
                .map_err(|e| ConfigError::RouteFile {
                    path: path.clone(),
                    error: RouteFileError {
                        line: None,
                        problem: RouteProblem::Rejected {
                            reason: e.to_string(),
                        },
                    },
                })?;
        }
        Ok(n)
    }
}

/// Read a file, or say which and why not.
fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_path_buf(),
        error: e.to_string(),
    })
}

/// Parse a route file into (prefix, next hop) pairs, with weft-lpm's route-file
/// reader ([`weft_lpm::routes::lines`]): blank lines and `#` comments are skipped;
/// anything else that does not parse is an error naming its line.
pub fn parse_route_file(
    text: &str,
    format: &str,
    next_hops: &[String],
    router: &Router,
) -> Result<Vec<(IpPrefix, NextHop)>, RouteFileError> {
    let file = |problem| RouteFileError {
        line: None,
        problem,
    };
    if format != "prefix-next-hop" && format != "bgpas" {
        return Err(file(RouteProblem::UnknownFormat {
            value: format.to_string(),
        }));
    }
    let resolve = |via: IpAddr| -> Result<NextHop, RouteProblem> {
        let port = router
            .connected_port(via)
            .ok_or(RouteProblem::NextHopNotConnected { via })?;
        Ok(NextHop {
            port,
            via: Some(via),
        })
    };
    let hops: Vec<(IpAddr, NextHop)> = next_hops
        .iter()
        .map(|h| {
            let a: IpAddr = h
                .parse()
                .map_err(|_| file(RouteProblem::BadNextHop { value: h.clone() }))?;
            Ok((a, resolve(a).map_err(file)?))
        })
        .collect::<Result<_, RouteFileError>>()?;
    let mut out = Vec::new();
    for line in weft_lpm::routes::lines(text) {
        let line = line.map_err(|e| RouteFileError {
            line: Some(e.line()),
            problem: match e {
                weft_lpm::routes::RouteLineError::Fields { .. } => RouteProblem::FieldCount,
                weft_lpm::routes::RouteLineError::NoLength { .. } => RouteProblem::BadPrefix {
                    reason: "the prefix needs a /length".into(),
                },
                weft_lpm::routes::RouteLineError::Prefix { error, .. } => RouteProblem::BadPrefix {
                    reason: error.to_string(),
                },
            },
        })?;
        let (i, prefix, second) = (line.line, line.prefix, line.value);
        let at = |problem| RouteFileError {
            line: Some(i),
            problem,
        };
        let nh = match format {
            "prefix-next-hop" => {
                let via: IpAddr = second.parse().map_err(|_| {
                    at(RouteProblem::BadNextHop {
                        value: second.to_string(),
                    })
                })?;
                resolve(via).map_err(at)?
            }
            _ => {
                let asn: u64 = second.parse().map_err(|_| {
                    at(RouteProblem::BadAsNumber {
                        value: second.to_string(),
                    })
                })?;
                // One family's next hops serve its prefixes.
                let fam: Vec<&NextHop> = hops
                    .iter()
                    .filter(|(a, _)| a.is_ipv4() == prefix.addr().is_ipv4())
                    .map(|(_, n)| n)
                    .collect();
                if fam.is_empty() {
                    return Err(at(RouteProblem::NoNextHopOfFamily));
                }
                *fam[(asn % fam.len() as u64) as usize]
            }
        };
        out.push((prefix, nh));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::RouterConfig;
    use weft_link::afxdp::XdpMode;

    const EXAMPLE: &str = r#"
[[port]]
name = "left"
interface = "veth-a"                                # Linux interface; afpacket by default
addresses = ["198.18.1.1/24", "2001:2:0:1::1/64"]   # connected routes follow from these
[[port]]
name = "right"
interface = "veth-b"
addresses = ["198.18.2.1/24", "2001:2:0:2::1/64"]
[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"
"#;

    #[test]
    fn the_issue_example_parses_and_installs() {
        let c = Config::parse(EXAMPLE).expect("parse");
        assert_eq!(c.architecture().expect("arch"), Architecture::Push);
        let specs = c
            .port_specs(&[([2, 0, 0, 0, 0, 1], 1514), ([2, 0, 0, 0, 0, 2], 1514)])
            .expect("specs");
        assert_eq!(specs[0].v4, vec![("198.18.1.1".parse().expect("a"), 24)]);
        assert_eq!(specs[1].v6.len(), 1);
        let r = Router::new(specs, RouterConfig::default());
        assert_eq!(c.install_routes(&r, Path::new(".")).expect("routes"), 1);
        let nh = r.fib().lookup("198.19.3.4".parse().expect("a"));
        assert_eq!(
            nh,
            Some(NextHop {
                port: 1,
                via: Some("198.18.2.2".parse().expect("a"))
            })
        );
    }

    #[test]
    fn fast_path_names_the_hook_and_each_hook_its_backend() {
        let port = |extra: &str| {
            EXAMPLE.replacen("name = \"left\"", &format!("name = \"left\"\n{extra}"), 1)
        };
        let hook = |extra: &str| {
            let c = Config::parse(&port(extra)).expect(extra);
            (c.ports[0].fast_path(), c.ports[0].xdp_forward_explicit())
        };
        // Defaults: xdp on generic afxdp ports, off on afpacket ports.
        assert_eq!(hook(""), (FastPathHook::Off, false));
        assert_eq!(hook("backend = \"afxdp\""), (FastPathHook::Xdp, false));
        assert_eq!(hook("fast_path = \"tc\""), (FastPathHook::Tc, true));
        assert_eq!(
            hook("backend = \"afpacket\"\nring = \"v3\"\nfast_path = \"tc\""),
            (FastPathHook::Tc, true)
        );
        assert_eq!(hook("fast_path = \"off\""), (FastPathHook::Off, true));
        assert_eq!(
            hook("backend = \"afxdp\"\nfast_path = \"xdp\""),
            (FastPathHook::Xdp, true)
        );
        assert_eq!(
            hook("backend = \"afxdp\"\nfast_path = \"off\""),
            (FastPathHook::Off, true)
        );
        // The old key keeps its meaning.
        assert_eq!(
            hook("backend = \"afxdp\"\nxdp_forward = false"),
            (FastPathHook::Off, true)
        );
        let problem = |extra: &str| match Config::parse(&port(extra)) {
            Err(ConfigError::Port { problem, .. }) => problem,
            other => panic!("{extra}: {other:?}"),
        };
        assert_eq!(
            problem("fast_path = \"xdp\""),
            PortProblem::OnlyFor {
                key: "fast_path = \"xdp\"",
                backend: "afxdp"
            }
        );
        assert_eq!(
            problem("backend = \"afxdp\"\nfast_path = \"tc\""),
            PortProblem::OnlyFor {
                key: "fast_path = \"tc\"",
                backend: "afpacket"
            }
        );
        assert_eq!(
            problem("fast_path = \"ebpf\""),
            PortProblem::UnknownFastPath {
                value: "ebpf".into()
            }
        );
        assert_eq!(
            problem("backend = \"afxdp\"\nxdp_forward = true\nfast_path = \"xdp\""),
            PortProblem::FastPathTwice
        );
    }

    #[test]
    fn xdp_forward_is_on_by_default_for_generic_afxdp_ports_and_only_for_afxdp_ports() {
        let port = |extra: &str| {
            EXAMPLE.replacen("name = \"left\"", &format!("name = \"left\"\n{extra}"), 1)
        };
        // Default: on for an afxdp port in generic mode (given or defaulted), not
        // asked for explicitly; off for afpacket ports and for native mode.
        for extra in [
            "backend = \"afxdp\"",
            "backend = \"afxdp\"\nxdp_mode = \"generic\"",
        ] {
            let c = Config::parse(&port(extra)).expect("afxdp");
            assert!(c.ports[0].xdp_forward(), "{extra}");
            assert!(!c.ports[0].xdp_forward_explicit(), "{extra}");
            assert!(!c.ports[1].xdp_forward(), "the afpacket port");
        }
        let c = Config::parse(&port("backend = \"afxdp\"\nxdp_mode = \"native\"")).expect("native");
        assert!(!c.ports[0].xdp_forward(), "native mode: off unless asked");
        let c = Config::parse(&port(
            "backend = \"afxdp\"\nxdp_mode = \"native\"\nxdp_forward = true",
        ))
        .expect("native, asked");
        assert!(c.ports[0].xdp_forward());
        let c = Config::parse(&port("backend = \"afxdp\"\nxdp_forward = true")).expect("on");
        assert!(c.ports[0].xdp_forward());
        assert!(c.ports[0].xdp_forward_explicit());
        assert!(c.ports[0].backend().is_ok());
        assert!(!c.ports[1].xdp_forward());
        let c = Config::parse(&port("backend = \"afxdp\"\nxdp_forward = false")).expect("off");
        assert!(!c.ports[0].xdp_forward(), "false turns it off");
        assert!(c.ports[0].xdp_forward_explicit());
        assert!(Config::parse(&port("backend = \"afxdp\"\nxdp_forward = \"yes\"")).is_err());
        for extra in [
            "xdp_forward = true",
            "backend = \"afpacket\"\nxdp_forward = false",
        ] {
            let err = Config::parse(&port(extra)).expect_err("afpacket port");
            assert!(
                matches!(
                    &err,
                    ConfigError::Port {
                        problem: PortProblem::OnlyFor {
                            key: "xdp_forward",
                            backend: "afxdp"
                        },
                        ..
                    }
                ),
                "{extra}: {err:?}"
            );
        }
    }

    #[test]
    fn xdp_rx_frames_sets_the_receive_depth_and_refuses_what_the_kernel_would() {
        let port = |extra: &str| {
            EXAMPLE.replacen("name = \"left\"", &format!("name = \"left\"\n{extra}"), 1)
        };
        let c = Config::parse(&port("backend = \"afxdp\"\nxdp_rx_frames = 2048")).expect("2048");
        assert_eq!(
            c.ports[0].backend(),
            Ok(Backend::AfXdp(XdpConfig {
                rx_frames: 2048,
                ..XdpConfig::default()
            }))
        );
        let c = Config::parse(&port("backend = \"afxdp\"")).expect("default");
        assert_eq!(
            c.ports[0].backend(),
            Ok(Backend::AfXdp(XdpConfig {
                rx_frames: XDP_RX_FRAMES_DEFAULT,
                ..XdpConfig::default()
            })),
            "no key: the router's default depth"
        );
        assert_ne!(XDP_RX_FRAMES_DEFAULT, XdpConfig::default().rx_frames);
        for (v, why) in [
            ("3000", "not a power of two"),
            ("0", "zero"),
            ("32", "below the minimum"),
            ("65536", "above the maximum"),
        ] {
            let err = Config::parse(&port(&format!("backend = \"afxdp\"\nxdp_rx_frames = {v}")))
                .expect_err(why);
            assert!(
                matches!(
                    &err,
                    ConfigError::Port {
                        problem: PortProblem::BadXdpRxFrames { .. },
                        ..
                    }
                ),
                "{v}: {err:?}"
            );
            assert!(err.to_string().contains("xdp_rx_frames"), "{err}");
        }
        for v in ["-1", "4294967296", "\"8192\"", "8192.0"] {
            assert!(
                Config::parse(&port(&format!("backend = \"afxdp\"\nxdp_rx_frames = {v}"))).is_err(),
                "{v}: not a u32"
            );
        }
        let err = Config::parse(&port("xdp_rx_frames = 4096")).expect_err("afpacket port");
        assert!(
            matches!(
                &err,
                ConfigError::Port {
                    problem: PortProblem::OnlyFor {
                        key: "xdp_rx_frames",
                        backend: "afxdp"
                    },
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn mistakes_are_reported_not_ignored() {
        assert!(Config::parse("").is_err());
        assert!(Config::parse(&EXAMPLE.replace("interface", "iface")).is_err());
        let bad_arch = format!("[router]\narchitecture = \"sideways\"\n{EXAMPLE}");
        assert!(Config::parse(&bad_arch).is_err());
        let xdp = |extra: &str| {
            EXAMPLE.replacen("name = \"left\"", &format!("name = \"left\"\n{extra}"), 1)
        };
        let c = Config::parse(&xdp("backend = \"afxdp\"")).expect("afxdp");
        let generic = XdpConfig {
            rx_frames: XDP_RX_FRAMES_DEFAULT,
            ..XdpConfig::default()
        };
        assert_eq!(generic.mode, XdpMode::Generic);
        assert_eq!(c.ports[0].backend(), Ok(Backend::AfXdp(generic)));
        assert_eq!(c.ports[1].backend(), Ok(Backend::AfPacket(RingVersion::V2)));
        let c = Config::parse(&xdp("backend = \"afxdp\"\nxdp_mode = \"native\"")).expect("native");
        assert_eq!(
            c.ports[0].backend(),
            Ok(Backend::AfXdp(XdpConfig {
                mode: XdpMode::Native,
                rx_frames: XDP_RX_FRAMES_DEFAULT,
                ..XdpConfig::default()
            }))
        );
        let c = Config::parse(&xdp("ring = \"v3\"")).expect("v3");
        assert_eq!(c.ports[0].backend(), Ok(Backend::AfPacket(RingVersion::V3)));
        let c = Config::parse(&xdp("backend = \"afpacket\"\nring = \"v2\"")).expect("v2");
        assert_eq!(c.ports[0].backend(), Ok(Backend::AfPacket(RingVersion::V2)));
        assert!(
            Config::parse(&xdp("ring = \"v1\"")).is_err(),
            "unknown ring"
        );
        assert!(
            Config::parse(&xdp("backend = \"afxdp\"\nring = \"v2\"")).is_err(),
            "ring without afpacket"
        );
        let c = Config::parse(&format!("[router]\nbusy_poll_us = 0\n{EXAMPLE}")).expect("busy");
        assert_eq!(c.router.busy_poll_us, Some(0));
        assert_eq!(c.router.workers, None, "workers: automatic by default");
        let c = Config::parse(&format!("[router]\nworkers = 1\n{EXAMPLE}")).expect("workers");
        assert_eq!(c.router.workers.map(std::num::NonZeroUsize::get), Some(1));
        assert!(
            Config::parse(&format!("[router]\nworkers = 0\n{EXAMPLE}")).is_err(),
            "no workers"
        );
        assert!(Config::parse(&xdp("backend = \"dpdk\"")).is_err());
        assert!(Config::parse(&xdp("backend = \"afxdp\"\nxdp_mode = \"offload\"")).is_err());
        assert!(
            Config::parse(&xdp("xdp_mode = \"native\"")).is_err(),
            "xdp_mode without afxdp"
        );
        let with = |iface: &str, extra: &str| {
            EXAMPLE.replacen("veth-a", iface, 1).replacen(
                "name = \"left\"",
                &format!("name = \"left\"\nbackend = \"shm\"\n{extra}"),
                1,
            )
        };
        let c = Config::parse(&with("127.0.0.1:7001", "peer = \"127.0.0.1:7002\"")).expect("shm");
        assert_eq!(
            c.ports[0].backend(),
            Ok(Backend::Shm {
                peer: "127.0.0.1:7002".parse().expect("a")
            })
        );
        assert!(
            Config::parse(&with("127.0.0.1:7001", "")).is_err(),
            "shm without peer"
        );
        assert!(
            Config::parse(&with("veth-a", "peer = \"127.0.0.1:7002\"")).is_err(),
            "name not ip:port"
        );
        assert!(Config::parse(&with("127.0.0.1:7001", "peer = \"nowhere\"")).is_err());
        assert!(
            Config::parse(&xdp("peer = \"127.0.0.1:7002\"")).is_err(),
            "peer without shm"
        );
        let c = Config::parse(&EXAMPLE.replace("198.18.2.2", "203.0.113.1")).expect("parse");
        let specs = c
            .port_specs(&[([2, 0, 0, 0, 0, 1], 1514), ([2, 0, 0, 0, 0, 2], 1514)])
            .expect("specs");
        let r = Router::new(specs, RouterConfig::default());
        let e = c
            .install_routes(&r, Path::new("."))
            .expect_err("unconnected next hop");
        assert_eq!(
            e,
            ConfigError::Route {
                prefix: "198.19.0.0/16".into(),
                problem: RouteProblem::Rejected {
                    reason: "next hop 203.0.113.1 is not on a connected network".into()
                }
            }
        );
        assert!(e.to_string().contains("not on a connected network"), "{e}");
    }

    #[test]
    fn each_mistake_is_its_own_variant_and_its_message_names_the_value() {
        let port = |extra: &str| {
            EXAMPLE.replacen("name = \"left\"", &format!("name = \"left\"\n{extra}"), 1)
        };
        let left = |problem| ConfigError::Port {
            port: "left".into(),
            problem,
        };
        let cases = [
            (
                "port = []".into(),
                ConfigError::NoPorts,
                "at least one [[port]]",
            ),
            (
                EXAMPLE.replace("\"right\"", "\"left\""),
                ConfigError::DuplicatePort {
                    name: "left".into(),
                },
                "port name \"left\" used twice",
            ),
            (
                format!("[router]\narchitecture = \"sideways\"\n{EXAMPLE}"),
                ConfigError::UnknownArchitecture {
                    value: "sideways".into(),
                },
                "unknown architecture \"sideways\" (push, pull, central)",
            ),
            (
                port("backend = \"dpdk\""),
                left(PortProblem::UnknownBackend {
                    value: "dpdk".into(),
                }),
                "port left: unknown backend \"dpdk\" (afpacket, afxdp, shm)",
            ),
            (
                port("backend = \"afxdp\"\nxdp_rx_frames = 3000"),
                left(PortProblem::BadXdpRxFrames { value: 3000 }),
                "port left: xdp_rx_frames 3000 is not a power of two from 64 to 32768",
            ),
            (
                port("xdp_mode = \"native\""),
                left(PortProblem::OnlyFor {
                    key: "xdp_mode",
                    backend: "afxdp",
                }),
                "port left: xdp_mode is for backend \"afxdp\"",
            ),
            (
                port("backend = \"afxdp\"\nxdp_mode = \"offload\""),
                left(PortProblem::UnknownXdpMode {
                    value: "offload".into(),
                }),
                "port left: unknown xdp_mode \"offload\" (generic, native)",
            ),
            (
                port("backend = \"shm\"\npeer = \"127.0.0.1:7002\""),
                left(PortProblem::ShmNameNotAddr {
                    value: "veth-a".into(),
                }),
                "port left: for shm, interface is this port's name, an ip:port (not \"veth-a\")",
            ),
        ];
        for (text, want, message) in cases {
            let e = Config::parse(&text).expect_err(message);
            assert_eq!(e, want);
            assert!(e.to_string().contains(message), "{e} lacks {message}");
        }
        let e = Config::parse(&EXAMPLE.replace("interface", "iface")).expect_err("unknown key");
        assert!(
            matches!(&e, ConfigError::Toml { message } if message.contains("iface")),
            "{e}"
        );
        let addresses = |a: &str| {
            let c = Config::parse(&EXAMPLE.replace("\"198.18.1.1/24\"", a)).expect("parses");
            c.port_specs(&[([2, 0, 0, 0, 0, 1], 1514), ([2, 0, 0, 0, 0, 2], 1514)])
                .expect_err(a)
        };
        assert_eq!(
            addresses("\"198.18.1.1\""),
            left(PortProblem::AddressWithoutLength {
                value: "198.18.1.1".into()
            })
        );
        assert_eq!(
            addresses("\"198.18.1.300/24\""),
            left(PortProblem::BadAddress {
                value: "198.18.1.300/24".into()
            })
        );
        let e = addresses("\"198.18.1.1/33\"");
        assert_eq!(
            e,
            left(PortProblem::BadPrefixLength {
                value: "198.18.1.1/33".into()
            })
        );
        assert_eq!(e.to_string(), "port left: bad length in \"198.18.1.1/33\"");
        let missing =
            Config::load(Path::new("/nonexistent/weft-router.toml")).expect_err("no file");
        assert!(
            matches!(&missing, ConfigError::Read { path, .. } if path == Path::new("/nonexistent/weft-router.toml")),
            "{missing}"
        );
    }

    #[test]
    fn route_files_in_both_formats() {
        let c = Config::parse(EXAMPLE).expect("parse");
        let specs = c
            .port_specs(&[([2, 0, 0, 0, 0, 1], 1514), ([2, 0, 0, 0, 0, 2], 1514)])
            .expect("specs");
        let r = Router::new(specs, RouterConfig::default());
        let plain = "# comment\n10.0.0.0/8 198.18.2.2\n\n2001:db8::/32 2001:2:0:1::2\n";
        let v = parse_route_file(plain, "prefix-next-hop", &[], &r).expect("plain");
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].1.port, 0);
        let bgp = "1.0.0.0/24 13335\n1.0.4.0/22 38802\n2001:200::/32 2500\n";
        let hops = [
            "198.18.1.2".to_string(),
            "198.18.2.2".to_string(),
            "2001:2:0:2::2".to_string(),
        ];
        let v = parse_route_file(bgp, "bgpas", &hops, &r).expect("bgpas");
        assert_eq!(v[0].1.port, 1, "13335 is odd: second v4 next hop");
        assert_eq!(v[1].1.port, 0, "38802 is even: first v4 next hop");
        assert_eq!(v[2].1.port, 1, "the only v6 next hop");
        let e = parse_route_file("1.0.0.0/24\n", "bgpas", &hops, &r).expect_err("one field");
        assert_eq!(e.line, Some(1));
        assert_eq!(e.problem, RouteProblem::FieldCount);
        assert!(e.to_string().contains("line 1"));
        assert!(parse_route_file("1.0.0.0/24 x\n", "bgpas", &hops, &r).is_err());
        assert_eq!(
            parse_route_file("1.0.0.0/24 x\n", "bgpas", &hops, &r),
            Err(RouteFileError {
                line: Some(1),
                problem: RouteProblem::BadAsNumber { value: "x".into() }
            })
        );
        let e = parse_route_file("\n10.0.0.0/8 203.0.113.1\n", "prefix-next-hop", &[], &r)
            .expect_err("unconnected");
        assert_eq!(
            e.to_string(),
            "line 2: next hop 203.0.113.1 is not on a connected network"
        );
        assert_eq!(
            parse_route_file("", "csv", &[], &r).map_err(|e| e.problem),
            Err(RouteProblem::UnknownFormat {
                value: "csv".into()
            })
        );
    }
}
