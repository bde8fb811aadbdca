//! The router's TOML configuration and route files.
//!
//! ```toml
//! [router]                       # optional
//! architecture = "push"          # push | pull | central
//! control_socket = "/run/weft-router.sock"
//!
//! [[port]]
//! name = "left"
//! interface = "veth-a"           # Linux interface; afpacket by default
//! addresses = ["198.18.1.1/24", "2001:2:0:1::1/64"]
//! # backend = "afxdp"            # AF_XDP instead of AF_PACKET,
//! # xdp_mode = "generic"         # with the XDP program in generic (default) or native mode
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
use weft_link::afpacket::AfPacket;
use weft_link::afxdp::{AfXdpLink, XdpConfig, XdpMode};
use weft_link::shm::{mac_for_name, ShmFrameLink, ShmOptions};
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
}

/// `[router]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouterSection {
    /// push (default), pull or central.
    pub architecture: Option<String>,
    /// Path of the control socket (default `/run/weft-router.sock`).
    pub control_socket: Option<PathBuf>,
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
    /// For `shm`: the name (`ip:port`) of the port of the other weft process.
    #[serde(default)]
    pub peer: Option<String>,
    /// Addresses with prefix lengths.
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// How a port reaches its Linux interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `AF_PACKET` with `TPACKET_V3` rings.
    AfPacket,
    /// `AF_XDP` with the redirect program in this XDP mode.
    AfXdp(XdpMode),
    /// Shared-memory rings to the port named `peer` of another weft process on this
    /// host; the port's `interface` is its own name.
    Shm {
        /// The other end's port name.
        peer: SocketAddr,
    },
}

/// Largest frame on an shm port: Ethernet's 1514, so routers on either side agree on
/// the MTU whatever their buffer sizes.
pub const SHM_MAX_FRAME: usize = 1514;

/// Ring slots per direction of an shm port.
pub const SHM_SLOTS: usize = 1024;

impl Backend {
    /// Open `interface` with this backend, receiving into `pool`.
    pub fn open(self, interface: &str, pool: BufferPool) -> io::Result<Box<dyn Link>> {
        Ok(match self {
            Backend::AfPacket => Box::new(AfPacket::open(interface, pool)?),
            Backend::AfXdp(mode) => Box::new(AfXdpLink::with_config(
                interface,
                pool,
                XdpConfig {
                    mode,
                    ..XdpConfig::default()
                },
            )?),
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
        let mode = self.xdp_mode.as_deref();
        let backend = self.backend.as_deref().unwrap_or("afpacket");
        if self.peer.is_some() && backend != "shm" {
            return Err(err(format!(
                "port {}: peer is for backend \"shm\"",
                self.name
            )));
        }
        match backend {
            "shm" => {
                if mode.is_some() {
                    return Err(err(format!(
                        "port {}: xdp_mode is for backend \"afxdp\"",
                        self.name
                    )));
                }
                let bad = |what: &str| err(format!("port {}: {what}", self.name));
                if self.interface.parse::<SocketAddr>().is_err() {
                    return Err(bad("for shm, interface is this port's name, an ip:port"));
                }
                let peer = self
                    .peer
                    .as_deref()
                    .ok_or_else(|| bad("shm needs peer = \"ip:port\""))?
                    .parse()
                    .map_err(|_| bad("peer is not an ip:port"))?;
                Ok(Backend::Shm { peer })
            }
            "afpacket" if mode.is_none() => Ok(Backend::AfPacket),
            "afpacket" => Err(err(format!(
                "port {}: xdp_mode is for backend \"afxdp\"",
                self.name
            ))),
            "afxdp" => Ok(Backend::AfXdp(
                mode.unwrap_or("generic")
                    .parse()
                    .map_err(|e| err(format!("port {}: {e}", self.name)))?,
            )),
            b => Err(err(format!(
                "port {}: unknown backend {b:?} (afpacket, afxdp, shm)",
                self.name
            ))),
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

/// A configuration problem, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn err(s: impl Into<String>) -> ConfigError {
    ConfigError(s.into())
}

impl Config {
    /// Parse TOML text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| err(format!("config: {e}")))?;
        if c.ports.is_empty() {
            return Err(err("config: at least one [[port]] is needed"));
        }
        for (i, p) in c.ports.iter().enumerate() {
            if c.ports[..i].iter().any(|q| q.name == p.name) {
                return Err(err(format!("config: port name {:?} used twice", p.name)));
            }
            p.backend()?;
        }
        c.architecture()?;
        Ok(c)
    }

    /// Read and parse a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        Config::parse(&text)
    }

    /// The chosen architecture.
    pub fn architecture(&self) -> Result<Architecture, ConfigError> {
        self.router
            .architecture
            .as_deref()
            .unwrap_or("push")
            .parse()
            .map_err(err)
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
                    let (addr, len) = a.split_once('/').ok_or_else(|| {
                        err(format!("port {}: address {a:?} needs a /length", p.name))
                    })?;
                    let addr: IpAddr = addr
                        .parse()
                        .map_err(|_| err(format!("port {}: bad address {a:?}", p.name)))?;
                    let len: u8 = len
                        .parse()
                        .map_err(|_| err(format!("port {}: bad length in {a:?}", p.name)))?;
                    match addr {
                        IpAddr::V4(v) if len <= 32 => spec.v4.push((v, len)),
                        IpAddr::V6(v) if len <= 128 => spec.v6.push((v, len)),
                        _ => return Err(err(format!("port {}: bad length in {a:?}", p.name))),
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
            let prefix: IpPrefix = r.prefix.parse().map_err(|e| err(format!("route: {e}")))?;
            let via: IpAddr = r
                .via
                .parse()
                .map_err(|_| err(format!("route {}: bad next hop {:?}", r.prefix, r.via)))?;
            router
                .add_route(prefix, via)
                .map_err(|e| err(format!("route {}: {e}", r.prefix)))?;
            n += 1;
        }
        for f in &self.route_files {
            let path = if f.path.is_absolute() {
                f.path.clone()
            } else {
                base.join(&f.path)
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|e| err(format!("{}: {e}", path.display())))?;
            let routes = parse_route_file(
                &text,
                f.format.as_deref().unwrap_or("prefix-next-hop"),
                &f.next_hops,
                router,
            )
            .map_err(|e| err(format!("{}: {}", path.display(), e.0)))?;
            n += router
                .bulk_insert(routes)
                .map_err(|e| err(format!("{}: {e}", path.display())))?;
        }
        Ok(n)
    }
}

/// Parse a route file into (prefix, next hop) pairs, with weft-lpm's route-file
/// reader ([`weft_lpm::routes::lines`]): blank lines and `#` comments are skipped;
/// anything else that does not parse is an error naming its line.
pub fn parse_route_file(
    text: &str,
    format: &str,
    next_hops: &[String],
    router: &Router,
) -> Result<Vec<(IpPrefix, NextHop)>, ConfigError> {
    let resolve = |via: IpAddr| -> Result<NextHop, ConfigError> {
        let port = router
            .connected_port(via)
            .ok_or_else(|| err(format!("next hop {via} is not on a connected network")))?;
        Ok(NextHop {
            port,
            via: Some(via),
        })
    };
    let hops: Vec<(IpAddr, NextHop)> = next_hops
        .iter()
        .map(|h| {
            let a: IpAddr = h.parse().map_err(|_| err(format!("bad next hop {h:?}")))?;
            Ok((a, resolve(a)?))
        })
        .collect::<Result<_, ConfigError>>()?;
    let mut out = Vec::new();
    for line in weft_lpm::routes::lines(text) {
        let line = line.map_err(|e| err(e.to_string()))?;
        let (i, prefix, second) = (line.line, line.prefix, line.value);
        let nh = match format {
            "prefix-next-hop" => {
                let via: IpAddr = second
                    .parse()
                    .map_err(|_| err(format!("line {i}: bad next hop {second:?}")))?;
                resolve(via).map_err(|e| err(format!("line {i}: {}", e.0)))?
            }
            "bgpas" => {
                let asn: u64 = second
                    .parse()
                    .map_err(|_| err(format!("line {i}: bad AS number {second:?}")))?;
                // One family's next hops serve its prefixes.
                let fam: Vec<&NextHop> = hops
                    .iter()
                    .filter(|(a, _)| a.is_ipv4() == prefix.addr().is_ipv4())
                    .map(|(_, n)| n)
                    .collect();
                if fam.is_empty() {
                    return Err(err(format!(
                        "line {i}: no next hop of this family in next_hops"
                    )));
                }
                *fam[(asn % fam.len() as u64) as usize]
            }
            other => return Err(err(format!("unknown route file format {other:?}"))),
        };
        out.push((prefix, nh));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::RouterConfig;

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
    fn mistakes_are_reported_not_ignored() {
        assert!(Config::parse("").is_err());
        assert!(Config::parse(&EXAMPLE.replace("interface", "iface")).is_err());
        let bad_arch = format!("[router]\narchitecture = \"sideways\"\n{EXAMPLE}");
        assert!(Config::parse(&bad_arch).is_err());
        let xdp = |extra: &str| {
            EXAMPLE.replacen("name = \"left\"", &format!("name = \"left\"\n{extra}"), 1)
        };
        let c = Config::parse(&xdp("backend = \"afxdp\"")).expect("afxdp");
        assert_eq!(c.ports[0].backend(), Ok(Backend::AfXdp(XdpMode::Generic)));
        assert_eq!(c.ports[1].backend(), Ok(Backend::AfPacket));
        let c = Config::parse(&xdp("backend = \"afxdp\"\nxdp_mode = \"native\"")).expect("native");
        assert_eq!(c.ports[0].backend(), Ok(Backend::AfXdp(XdpMode::Native)));
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
        assert!(e.0.contains("not on a connected network"), "{e}");
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
        assert!(e.0.contains("line 1"));
        assert!(parse_route_file("1.0.0.0/24 x\n", "bgpas", &hops, &r).is_err());
    }
}
