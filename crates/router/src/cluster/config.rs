//! `[cluster]`: the nodes, the interconnect and how ports are owned.
//!
//! ```toml
//! [cluster]
//! interconnect = "udp"       # weft verbs over udp (RoCEv2), or "shm"
//! batch = 16                 # most packets per interconnect SEND, 1..32, one SGE each
//! balance = "direct"         # direct | vlb | direct-vlb
//! # transport = "uc"         # uc (default, the paper's) | rc
//! # delay_us = 50            # longest a packet waits for its batch to fill
//! # cm_port = 18650          # TCP port of the connection manager on each node address
//! [[cluster.node]]
//! id = 1
//! address = "198.18.100.1"   # the node's interconnect address
//! ```
//!
//! Every `[[port]]` then names its `node`. The whole file is checked by
//! [`validate`] when it is parsed; [`ClusterPlan::for_node`] checks `--node`.
#![forbid(unsafe_code)]

use crate::config::Config;
use serde::Deserialize;
use std::net::IpAddr;
use std::time::Duration;

/// Most packets in one interconnect message (the paper's largest SGE list).
pub const MAX_BATCH: usize = 32;
/// Largest node id (the per-packet header carries it in a byte).
pub const MAX_NODE_ID: u32 = 255;
/// Default TCP port of the connection manager on each node's address.
pub const DEFAULT_CM_PORT: u16 = 18650;
/// Default bound on how long a packet waits for its batch to fill.
pub const DEFAULT_DELAY: Duration = Duration::from_micros(50);

/// `[cluster]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// `udp` (default) or `shm`.
    #[serde(default)]
    pub interconnect: Option<String>,
    /// Packets per SEND, 1..=32 (default 16).
    #[serde(default)]
    pub batch: Option<i64>,
    /// `direct` (default), `vlb` or `direct-vlb`.
    #[serde(default)]
    pub balance: Option<String>,
    /// `uc` (default) or `rc`.
    #[serde(default)]
    pub transport: Option<String>,
    /// Delay bound in microseconds (default 50, at most 10 000).
    #[serde(default)]
    pub delay_us: Option<i64>,
    /// Connection manager TCP port (default 18650).
    #[serde(default)]
    pub cm_port: Option<u16>,
    /// The nodes.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeConfig>,
}

/// `[[cluster.node]]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// 1..=255, unique.
    pub id: i64,
    /// Interconnect address (udp: the device's IP, RoCEv2 port 4791; shm: the shm
    /// device's name is this address, port 4791), unique.
    pub address: String,
}

/// Which link the interconnect's verbs devices use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interconnect {
    /// RoCEv2 over UDP.
    Udp,
    /// Shared-memory rings (all nodes on one host).
    Shm,
}

/// How a packet crosses the cluster (RouteBricks §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    /// Ingress node → egress node.
    Direct,
    /// Ingress → a random intermediate node → egress (Valiant load balancing).
    Vlb,
    /// Direct while the direct path keeps up; flows that arrive while it is loaded
    /// take a VLB path.
    DirectVlb,
}

/// Queue pair type of the interconnect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Unreliable connected (the paper's choice: a lost message is lost).
    Uc,
    /// Reliable connected.
    Rc,
}

/// What is wrong with the cluster description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterProblem {
    /// `interconnect` is not udp or shm.
    UnknownInterconnect(String),
    /// `batch` outside 1..=32.
    BadBatch(i64),
    /// `balance` is not direct, vlb or direct-vlb.
    UnknownBalance(String),
    /// `transport` is not uc or rc.
    UnknownTransport(String),
    /// `delay_us` outside 0..=10000.
    BadDelay(i64),
    /// No `[[cluster.node]]`.
    NoNodes,
    /// A node id outside 1..=255.
    BadNodeId(i64),
    /// Two nodes with one id.
    DuplicateNode(i64),
    /// A node address that is not an IP address.
    BadNodeAddress(String),
    /// Two nodes with one address.
    DuplicateAddress(String),
    /// A port without `node` in a cluster.
    PortWithoutNode(String),
    /// A port whose `node` is not a node of the cluster.
    PortOnUnknownNode {
        /// The port.
        port: String,
        /// Its `node`.
        node: u32,
    },
    /// A port with `node` but no `[cluster]`.
    NodeWithoutCluster(String),
    /// `--node N` without `[cluster]`.
    NodeArgWithoutCluster,
    /// `[cluster]` without `--node N`.
    NodeArgMissing,
    /// `--node N` names no node.
    NotANode(u32),
}

impl std::fmt::Display for ClusterProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use ClusterProblem as P;
        match self {
            P::UnknownInterconnect(v) => write!(f, "unknown interconnect {v:?} (udp, shm)"),
            P::BadBatch(v) => write!(f, "batch {v} is not in 1..={MAX_BATCH}"),
            P::UnknownBalance(v) => write!(f, "unknown balance {v:?} (direct, vlb, direct-vlb)"),
            P::UnknownTransport(v) => write!(f, "unknown transport {v:?} (uc, rc)"),
            P::BadDelay(v) => write!(f, "delay_us {v} is not in 0..=10000"),
            P::NoNodes => f.write_str("at least one [[cluster.node]] is needed"),
            P::BadNodeId(v) => write!(f, "node id {v} is not in 1..={MAX_NODE_ID}"),
            P::DuplicateNode(v) => write!(f, "node id {v} used twice"),
            P::BadNodeAddress(v) => write!(f, "node address {v:?} is not an IP address"),
            P::DuplicateAddress(v) => write!(f, "node address {v} used twice"),
            P::PortWithoutNode(p) => write!(f, "port {p} needs node = ID in a cluster"),
            P::PortOnUnknownNode { port, node } => {
                write!(f, "port {port}: node {node} is not a [[cluster.node]]")
            }
            P::NodeWithoutCluster(p) => write!(f, "port {p} has node but there is no [cluster]"),
            P::NodeArgWithoutCluster => f.write_str("--node is for a file with [cluster]"),
            P::NodeArgMissing => f.write_str("the file has [cluster]: pass --node ID"),
            P::NotANode(n) => write!(f, "--node {n} is not a [[cluster.node]]"),
        }
    }
}

/// The cluster as one node runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPlan {
    /// This node's id.
    pub me: u8,
    /// Every node (id, interconnect address), in file order.
    pub nodes: Vec<(u8, IpAddr)>,
    /// Owner node of each port, in port order.
    pub owner: Vec<u8>,
    /// The link.
    pub interconnect: Interconnect,
    /// Packets per SEND.
    pub batch: usize,
    /// Balancing.
    pub balance: Balance,
    /// QP type.
    pub transport: Transport,
    /// Delay bound.
    pub delay: Duration,
    /// Connection manager TCP port.
    pub cm_port: u16,
}

impl ClusterPlan {
    /// The plan for node `node`; `Ok(None)` for a file without `[cluster]` and no
    /// `--node` (the single-box router).
    pub fn for_node(c: &Config, node: Option<u32>) -> Result<Option<ClusterPlan>, ClusterProblem> {
        let Some(s) = &c.cluster else {
            return match node {
                Some(_) => Err(ClusterProblem::NodeArgWithoutCluster),
                None => Ok(None),
            };
        };
        let node = node.ok_or(ClusterProblem::NodeArgMissing)?;
        let parsed = parse_section(s)?;
        let me = u8::try_from(node)
            .ok()
            .filter(|m| parsed.nodes.iter().any(|(id, _)| id == m))
            .ok_or(ClusterProblem::NotANode(node))?;
        let owner = c
            .ports
            .iter()
            .map(|p| {
                p.node
                    .and_then(|n| u8::try_from(n).ok())
                    .ok_or_else(|| ClusterProblem::PortWithoutNode(p.name.clone()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Some(ClusterPlan {
            me,
            owner,
            ..parsed
        }))
    }

    /// True when this node owns port `port`.
    pub fn owns(&self, port: usize) -> bool {
        self.owner.get(port) == Some(&self.me)
    }

    /// The other nodes' ids.
    pub fn peers(&self) -> impl Iterator<Item = u8> + '_ {
        self.nodes
            .iter()
            .map(|&(id, _)| id)
            .filter(move |&id| id != self.me)
    }

    /// A node's interconnect address.
    pub fn address(&self, id: u8) -> Option<IpAddr> {
        self.nodes.iter().find(|(n, _)| *n == id).map(|&(_, a)| a)
    }
}

/// The section's settings and nodes, checked (`me` and `owner` left empty).
fn parse_section(s: &ClusterSection) -> Result<ClusterPlan, ClusterProblem> {
    use ClusterProblem as P;
    let interconnect = match s.interconnect.as_deref().unwrap_or("udp") {
        "udp" => Interconnect::Udp,
        "shm" => Interconnect::Shm,
        v => return Err(P::UnknownInterconnect(v.into())),
    };
    let batch = s.batch.unwrap_or(16);
    if !(1..=MAX_BATCH as i64).contains(&batch) {
        return Err(P::BadBatch(batch));
    }
    let balance = match s.balance.as_deref().unwrap_or("direct") {
        "direct" => Balance::Direct,
        "vlb" => Balance::Vlb,
        "direct-vlb" => Balance::DirectVlb,
        v => return Err(P::UnknownBalance(v.into())),
    };
    let transport = match s.transport.as_deref().unwrap_or("uc") {
        "uc" => Transport::Uc,
        "rc" => Transport::Rc,
        v => return Err(P::UnknownTransport(v.into())),
    };
    let delay = match s.delay_us {
        None => DEFAULT_DELAY,
        Some(d) if (0..=10_000).contains(&d) => Duration::from_micros(d as u64),
        Some(d) => return Err(P::BadDelay(d)),
    };
    if s.nodes.is_empty() {
        return Err(P::NoNodes);
    }
    let mut nodes: Vec<(u8, IpAddr)> = Vec::new();
    for n in &s.nodes {
        let id = u8::try_from(n.id)
            .ok()
            .filter(|&i| i >= 1)
            .ok_or(P::BadNodeId(n.id))?;
        let addr: IpAddr = n
            .address
            .parse()
            .map_err(|_| P::BadNodeAddress(n.address.clone()))?;
        if nodes.iter().any(|&(i, _)| i == id) {
            return Err(P::DuplicateNode(n.id));
        }
        if nodes.iter().any(|&(_, a)| a == addr) {
            return Err(P::DuplicateAddress(addr.to_string()));
        }
        nodes.push((id, addr));
    }
    Ok(ClusterPlan {
        me: 0,
        nodes,
        owner: Vec::new(),
        interconnect,
        batch: batch as usize,
        balance,
        transport,
        delay,
        cm_port: s.cm_port.unwrap_or(DEFAULT_CM_PORT),
    })
}

/// Check the cluster description of a parsed file (everything but `--node`).
pub fn validate(c: &Config) -> Result<(), ClusterProblem> {
    let Some(s) = &c.cluster else {
        if let Some(p) = c.ports.iter().find(|p| p.node.is_some()) {
            return Err(ClusterProblem::NodeWithoutCluster(p.name.clone()));
        }
        return Ok(());
    };
    let plan = parse_section(s)?;
    for p in &c.ports {
        let n = p
            .node
            .ok_or_else(|| ClusterProblem::PortWithoutNode(p.name.clone()))?;
        if !plan.nodes.iter().any(|&(id, _)| u32::from(id) == n) {
            return Err(ClusterProblem::PortOnUnknownNode {
                port: p.name.clone(),
                node: n,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigError;

    /// The issue's example, verbatim.
    pub(crate) const EXAMPLE: &str = r#"
[cluster]
interconnect = "udp"       # weft verbs over udp (RoCEv2), or "shm"
batch = 16                 # most packets per interconnect SEND, 1..32, one SGE each
balance = "direct"         # direct | vlb | direct-vlb (RouteBricks)
[[cluster.node]]
id = 1
address = "198.18.100.1"   # the node's interconnect address (udp)
[[cluster.node]]
id = 2
address = "198.18.100.2"
[[port]]
node = 1
name = "left"
interface = "veth-a"
addresses = ["198.18.1.1/24", "2001:2:0:1::1/64"]
[[port]]
node = 2
name = "right"
interface = "veth-b"
addresses = ["198.18.2.1/24", "2001:2:0:2::1/64"]
[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"
"#;

    #[test]
    fn the_issue_example_gives_each_node_its_ports() {
        let c = Config::parse(EXAMPLE).expect("parse");
        let p1 = ClusterPlan::for_node(&c, Some(1))
            .expect("ok")
            .expect("cluster");
        assert_eq!(p1.me, 1);
        assert_eq!(p1.owner, vec![1, 2]);
        assert!(p1.owns(0) && !p1.owns(1));
        assert_eq!(p1.peers().collect::<Vec<_>>(), vec![2]);
        assert_eq!(p1.interconnect, Interconnect::Udp);
        assert_eq!((p1.batch, p1.balance), (16, Balance::Direct));
        assert_eq!(p1.transport, Transport::Uc);
        assert_eq!(p1.address(2), Some("198.18.100.2".parse().expect("a")));
        let p2 = ClusterPlan::for_node(&c, Some(2))
            .expect("ok")
            .expect("cluster");
        assert!(!p2.owns(0) && p2.owns(1));
    }

    #[test]
    fn without_cluster_the_single_box_router_is_unchanged() {
        let single = r#"
[[port]]
name = "left"
interface = "veth-a"
"#;
        let c = Config::parse(single).expect("parse");
        assert_eq!(ClusterPlan::for_node(&c, None), Ok(None));
        assert_eq!(
            ClusterPlan::for_node(&c, Some(1)),
            Err(ClusterProblem::NodeArgWithoutCluster)
        );
        let with_node = single.replace("name = \"left\"", "name = \"left\"\nnode = 1");
        assert_eq!(
            Config::parse(&with_node),
            Err(ConfigError::Cluster(ClusterProblem::NodeWithoutCluster(
                "left".into()
            )))
        );
    }

    #[test]
    fn every_bad_cluster_is_an_error_naming_the_value() {
        let cluster = |from: &str, to: &str| {
            let t = EXAMPLE.replacen(from, to, 1);
            assert_ne!(t, EXAMPLE, "{from} not in the example");
            match Config::parse(&t) {
                Err(ConfigError::Cluster(p)) => p,
                other => panic!("{to}: {other:?}"),
            }
        };
        use ClusterProblem as P;
        let cases = [
            (
                cluster("\"udp\"  ", "\"tcp\"  "),
                P::UnknownInterconnect("tcp".into()),
                "unknown interconnect \"tcp\"",
            ),
            (
                cluster("batch = 16", "batch = 0"),
                P::BadBatch(0),
                "batch 0",
            ),
            (
                cluster("batch = 16", "batch = 33"),
                P::BadBatch(33),
                "1..=32",
            ),
            (
                cluster("batch = 16", "batch = -1"),
                P::BadBatch(-1),
                "batch -1",
            ),
            (
                cluster("\"direct\" ", "\"random\" "),
                P::UnknownBalance("random".into()),
                "unknown balance",
            ),
            (
                cluster("batch = 16", "batch = 16\ntransport = \"ud\""),
                P::UnknownTransport("ud".into()),
                "unknown transport \"ud\"",
            ),
            (
                cluster("batch = 16", "batch = 16\ndelay_us = 20000"),
                P::BadDelay(20000),
                "delay_us 20000",
            ),
            (
                cluster("id = 2", "id = 1"),
                P::DuplicateNode(1),
                "node id 1 used twice",
            ),
            (cluster("id = 2", "id = 0"), P::BadNodeId(0), "node id 0"),
            (
                cluster("id = 2", "id = 256"),
                P::BadNodeId(256),
                "node id 256",
            ),
            (
                cluster("\"198.18.100.2\"", "\"198.18.100.1\""),
                P::DuplicateAddress("198.18.100.1".into()),
                "used twice",
            ),
            (
                cluster("\"198.18.100.2\"", "\"node-two\""),
                P::BadNodeAddress("node-two".into()),
                "\"node-two\"",
            ),
            (
                cluster("node = 2\n", ""),
                P::PortWithoutNode("right".into()),
                "port right needs node",
            ),
            (
                cluster("node = 2\n", "node = 7\n"),
                P::PortOnUnknownNode {
                    port: "right".into(),
                    node: 7,
                },
                "node 7 is not",
            ),
        ];
        for (got, want, message) in cases {
            assert_eq!(got, want);
            let text = ConfigError::Cluster(got).to_string();
            assert!(text.contains(message), "{text} lacks {message}");
        }
        // No nodes at all.
        let none = EXAMPLE
            .replace("[[cluster.node]]\nid = 1\naddress = \"198.18.100.1\"   # the node's interconnect address (udp)\n", "")
            .replace("[[cluster.node]]\nid = 2\naddress = \"198.18.100.2\"\n", "");
        assert!(!none.contains("cluster.node"), "{none}");
        assert_eq!(Config::parse(&none), Err(ConfigError::Cluster(P::NoNodes)));
        // Unknown keys are TOML errors.
        assert!(matches!(
            Config::parse(&EXAMPLE.replace("batch = 16", "batches = 16")),
            Err(ConfigError::Toml { .. })
        ));
        assert!(matches!(
            Config::parse(&EXAMPLE.replace("batch = 16", "batch = \"many\"")),
            Err(ConfigError::Toml { .. })
        ));
        // --node.
        let c = Config::parse(EXAMPLE).expect("parse");
        assert_eq!(ClusterPlan::for_node(&c, None), Err(P::NodeArgMissing));
        assert_eq!(ClusterPlan::for_node(&c, Some(3)), Err(P::NotANode(3)));
        assert_eq!(ClusterPlan::for_node(&c, Some(300)), Err(P::NotANode(300)));
    }

    #[test]
    fn the_options_and_their_defaults() {
        let t = EXAMPLE
            .replace("\"udp\"  ", "\"shm\"  ")
            .replace("\"direct\" ", "\"direct-vlb\" ")
            .replace(
                "batch = 16",
                "batch = 32\ntransport = \"rc\"\ndelay_us = 5\ncm_port = 19000",
            );
        let c = Config::parse(&t).expect("parse");
        let p = ClusterPlan::for_node(&c, Some(2))
            .expect("ok")
            .expect("some");
        assert_eq!(p.interconnect, Interconnect::Shm);
        assert_eq!(p.balance, Balance::DirectVlb);
        assert_eq!((p.batch, p.transport), (32, Transport::Rc));
        assert_eq!((p.delay, p.cm_port), (Duration::from_micros(5), 19000));
        let bare = "[cluster]\n[[cluster.node]]\nid = 9\naddress = \"2001:2::9\"\n[[port]]\nname = \"p\"\ninterface = \"x\"\nnode = 9\n";
        let c = Config::parse(bare).expect("parse");
        let p = ClusterPlan::for_node(&c, Some(9))
            .expect("ok")
            .expect("some");
        assert_eq!(
            (p.interconnect, p.batch, p.balance, p.delay, p.cm_port),
            (
                Interconnect::Udp,
                16,
                Balance::Direct,
                DEFAULT_DELAY,
                DEFAULT_CM_PORT
            )
        );
        let vlb = Config::parse(&EXAMPLE.replace("\"direct\" ", "\"vlb\" ")).expect("vlb");
        assert_eq!(
            ClusterPlan::for_node(&vlb, Some(1))
                .expect("ok")
                .expect("some")
                .balance,
            Balance::Vlb
        );
    }
}
