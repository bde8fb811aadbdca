//! The router between real Linux hosts: network namespaces joined by veth pairs
//! (scripts/netns-router.sh), `weft router` on AF_PACKET ports in the middle (AF_XDP
//! ports in the `afxdp_` tests; two `weft router` processes joined by an shm port in
//! `two_router_processes_…`), and ping, traceroute, iperf3 and scapy on the hosts.
//!
//! Needs root, iproute2, iputils-ping, and per test traceroute, iperf3 or Debian's
//! python3-scapy; without them a test fails under CI and is a counted skip elsewhere
//! (weft-testkit). Tests run one at a time, across processes too (one topology;
//! `weft_testkit::netns_turn`), every command is bounded by `timeout`, and the
//! namespaces and the router process are removed by Drop guards even on failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for its turn at the namespaces (another run may hold it).
const TURN_WAIT: Duration = Duration::from_secs(900);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/netns-router.sh")
}

/// `Ok` when the test can run, else why not.
fn prerequisites(tools: &[&str]) -> Result<(), String> {
    weft_testkit::root()?;
    for t in ["ip", "ping", "timeout"].iter().chain(tools) {
        weft_testkit::tool(t)?;
    }
    Ok(())
}

/// Where AF_XDP cannot be opened: fails under CI, a counted skip elsewhere (with the
/// kernel's reason).
macro_rules! require_af_xdp {
    () => {
        if weft_testkit::require("AF_XDP on this kernel", weft_link::afxdp::probe()).is_none() {
            return;
        }
    };
}

/// Root and these tools: fails under CI without them, a counted skip elsewhere.
macro_rules! require {
    ($($tool:expr),*) => {
        if weft_testkit::require("network namespaces", prerequisites(&[$($tool),*])).is_none() {
            return;
        }
    };
}

/// Run `args` inside namespace `ns`, killed after `secs`.
fn ns(ns: &str, secs: u32, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg(secs.to_string())
        .args(["ip", "netns", "exec", ns])
        .args(args)
        .output()
        .expect("spawn timeout/ip")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The topology, torn down on drop.
struct Topology;

impl Topology {
    /// With offloads off on every veth.
    fn up(mode: &str) -> Topology {
        Topology::up_with(mode, "off")
    }

    /// `offloads`: `off`, or `default` (veth's: checksum offload and TSO on).
    fn up_with(mode: &str, offloads: &str) -> Topology {
        let o = Command::new("timeout")
            .args(["60", "bash"])
            .arg(script())
            .args(["up", mode, offloads])
            .output()
            .expect("run netns-router.sh");
        let t = Topology;
        assert!(o.status.success(), "topology up: {}", text(&o));
        t
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new("timeout")
            .args(["60", "bash"])
            .arg(script())
            .arg("down")
            .status();
    }
}

/// `weft router` in the router namespace, stopped with SIGTERM on drop.
struct RouterProc {
    child: Child,
    socket: PathBuf,
    dir: PathBuf,
    /// Reaped by [`RouterProc::stop`]: nothing left for drop to signal.
    exited: bool,
}

impl RouterProc {
    /// On AF_PACKET ports.
    fn start(extra_config: &str) -> RouterProc {
        RouterProc::start_on(&["3"], extra_config)
    }

    /// `config_args`: the arguments of `netns-router.sh config` (ports, backend, XDP
    /// mode).
    fn start_on(config_args: &[&str], extra_config: &str) -> RouterProc {
        let cfg = Command::new("bash")
            .arg(script())
            .arg("config")
            .args(config_args)
            .output()
            .expect("config");
        let mut body = String::from_utf8_lossy(&cfg.stdout).into_owned();
        body.push_str(extra_config);
        RouterProc::start_config("router", &body, "left")
    }

    /// With this whole config; `name` keeps several routers' files apart, and the
    /// router is up once `show ports` lists `first_port`.
    fn start_config(name: &str, body: &str, first_port: &str) -> RouterProc {
        let dir =
            std::env::temp_dir().join(format!("weft-router-netns-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let config = dir.join("router.toml");
        std::fs::write(&config, body).expect("write config");
        let socket = dir.join("ctl.sock");
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                "weft-r",
                env!("CARGO_BIN_EXE_weft"),
                "router",
                "--config",
            ])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn weft router");
        let r = RouterProc {
            child,
            socket,
            dir,
            exited: false,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if r.ctl("show ports").contains(first_port) {
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("router did not come up");
    }

    fn ctl(&self, cmd: &str) -> String {
        let o = Command::new("timeout")
            .args([
                "10",
                env!("CARGO_BIN_EXE_weft"),
                "router",
                "ctl",
                "--socket",
            ])
            .arg(&self.socket)
            .args(cmd.split_whitespace())
            .output()
            .expect("weft router ctl");
        text(&o)
    }

    fn counter(&self, name: &str) -> u64 {
        let all = self.ctl("show counters all");
        all.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no counter {name} in {all}"))
    }

    /// Packets forwarded by weft's pipeline and by the XDP fast path together (the
    /// latter 0 where no port runs it). The fast path's counters are published
    /// every 50 ms: waits for one publication first.
    fn forwarded_both_paths(&self) -> u64 {
        std::thread::sleep(Duration::from_millis(150));
        let all = self.ctl("show counters all");
        let get = |name: &str| -> u64 {
            all.lines()
                .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        get("forwarded") + get("xdp_forwarded")
    }
}

impl RouterProc {
    /// Send `signal` (INT or TERM) and wait for the foreground process to end: true
    /// when it exited on its own with status 0 within 10 s.
    fn stop(&mut self, signal: &str) -> bool {
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = true;
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for RouterProc {
    fn drop(&mut self) {
        if self.exited {
            let _ = std::fs::remove_dir_all(&self.dir);
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self.dir);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `traceroute -n` from host A to `to`, one probe per hop, at most 5 hops: the whole
/// output and its hop lines.
fn traceroute_from_host_a(to: &str) -> (String, Vec<String>) {
    let o = ns(
        "weft-ha",
        30,
        &["traceroute", "-n", "-q", "1", "-w", "2", "-m", "5", to],
    );
    let t = text(&o);
    let hops = t.lines().skip(1).map(str::to_owned).collect();
    (t, hops)
}

/// A traceroute from host A to `to` shows the router (198.18.1.1) as hop 1 and `to`
/// as hop 2: weft answered the TTL-1 probe with time exceeded and forwarded the rest.
fn traceroute_shows_router_then(to: &str) {
    let (t, hops) = traceroute_from_host_a(to);
    assert!(
        hops.first().is_some_and(|l| l.contains("198.18.1.1")),
        "hop 1 is the router: {t}"
    );
    assert!(
        hops.get(1).is_some_and(|l| l.contains(to)),
        "hop 2 is the destination: {t}"
    );
}

fn ping_ok(from: &str, args: &[&str]) -> String {
    let mut a = vec!["ping", "-c", "3", "-i", "0.2", "-W", "2"];
    a.extend_from_slice(args);
    let o = ns(from, 20, &a);
    let t = text(&o);
    assert!(
        o.status.success() && t.contains(" 0% packet loss"),
        "ping {args:?} from {from}: {t}"
    );
    t
}

#[test]
fn ping_across_and_to_the_router_over_ipv4_and_ipv6() {
    require!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let r = RouterProc::start("");
    pings_across(&r);
}

#[test]
fn afxdp_ports_ping_across_over_ipv4_and_ipv6() {
    require!();
    require_af_xdp!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    // The default config of an afxdp port: the XDP fast path is on (generic mode).
    let r = RouterProc::start_on(&["3", "afxdp"], "");
    let xdp = text(&ns("weft-r", 5, &["ip", "link", "show", "weft-ra"]));
    assert!(
        xdp.contains("xdpgeneric"),
        "weft-ra runs the generic XDP program: {xdp}"
    );
    pings_across(&r);
    assert!(
        xdp_counter(&r, "xdp_forwarded") > 0,
        "the fast path is on by default on afxdp ports and forwarded the echoes"
    );
}

/// Hosts A and B ping each other, the far network and the router, IPv4 and IPv6.
fn pings_across(r: &RouterProc) {
    for dst in ["198.18.2.2", "198.19.0.1", "198.18.1.1", "198.18.2.1"] {
        ping_ok("weft-ha", &[dst]);
    }
    for dst in [
        "2001:2:0:2::2",
        "2001:2:0:100::1",
        "2001:2:0:1::1",
        "2001:2:0:2::1",
    ] {
        ping_ok("weft-ha", &["-6", dst]);
    }
    ping_ok("weft-hb", &["198.18.1.2"]);
    ping_ok("weft-hb", &["-6", "2001:2:0:1::2"]);
    assert!(r.counter("echo_replied") >= 12);
    assert!(r.forwarded_both_paths() >= 24);
    assert!(
        r.counter("arp_replied") >= 1,
        "hosts resolved the router by ARP"
    );
    assert!(
        r.counter("nd_adverts_sent") >= 1,
        "hosts resolved the router by ND"
    );
    let n = r.ctl("show neighbors");
    assert!(
        n.contains("right 198.18.2.2") && n.contains("reachable"),
        "{n}"
    );
}

#[test]
fn traceroute_shows_the_router_hop() {
    require!("traceroute");
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let r = RouterProc::start("");
    traceroute_shows_router_then("198.19.0.1");
    let o = ns(
        "weft-ha",
        30,
        &[
            "traceroute",
            "-6",
            "-n",
            "-q",
            "1",
            "-w",
            "2",
            "-m",
            "5",
            "2001:2:0:100::1",
        ],
    );
    let t = text(&o);
    let hops: Vec<&str> = t.lines().skip(1).collect();
    assert!(
        hops.first().is_some_and(|l| l.contains("2001:2:0:1::1")),
        "IPv6 hop 1: {t}"
    );
    assert!(
        hops.get(1).is_some_and(|l| l.contains("2001:2:0:100::1")),
        "IPv6 hop 2: {t}"
    );
    assert!(r.counter("icmp_time_exceeded_sent") >= 2);
    // traceroute to the router itself ends with port unreachable from it.
    let o = ns(
        "weft-ha",
        30,
        &[
            "traceroute",
            "-n",
            "-q",
            "1",
            "-w",
            "2",
            "-m",
            "3",
            "198.18.2.1",
        ],
    );
    let t = text(&o);
    assert!(
        t.lines().nth(1).is_some_and(|l| l.contains("198.18.2.1")),
        "{t}"
    );
    assert!(r.counter("icmp_unreachable_sent") >= 1);
}

/// Sends the malformed packets with scapy from host A; prints one JSON line.
const SCAPY: &str = r#"
import json, sys
from scapy.all import Ether, Dot1Q, IP, UDP, ICMP, Raw, IPOption_RR, IPOption_LSRR, sendp, srp1, conf
conf.verb = 0
iface, rmac, n = "weft-a0", sys.argv[1], 5
src, dst = "198.18.1.2", "198.19.0.1"
def eth(p): return Ether(dst=rmac) / p
bad_checksum = eth(IP(src=src, dst=dst, chksum=0x1234) / UDP(dport=9) / Raw(b"x" * 10))
# IHL 15 (60 bytes) in a 28-byte packet: the header is longer than the frame.
short = Ether(dst=rmac, type=0x0800) / Raw(bytes(IP(src=src, dst=dst, ihl=15) / UDP(dport=9)))
options = eth(IP(src=src, dst=dst, options=[IPOption_RR()]) / UDP(dport=9) / Raw(b"y" * 10))
source_route = eth(IP(src=src, dst=dst, options=[IPOption_LSRR(routers=["198.18.2.2"])]) / UDP(dport=9))
# 802.1Q-tagged (VLAN 7): the router's ports are untagged.
tagged = Ether(dst=rmac) / Dot1Q(vlan=7) / IP(src=src, dst=dst) / UDP(dport=9)
for p in (bad_checksum, short, options, source_route, tagged):
    sendp(p, iface=iface, count=n)
ans = srp1(eth(IP(src=src, dst=dst, ttl=1) / UDP(sport=40000, dport=33434)), iface=iface, timeout=3)
te = ans is not None and ans.haslayer(ICMP) and ans[ICMP].type == 11 and ans[IP].src == "198.18.1.1"
print(json.dumps({"time_exceeded": bool(te)}))
"#;

#[test]
fn malformed_packets_are_dropped_or_answered_and_counted() {
    require!();
    if !Path::new("/usr/bin/python3").exists()
        || !Command::new("/usr/bin/python3")
            .args(["-c", "import scapy.all"])
            .status()
            .is_ok_and(|s| s.success())
    {
        weft_testkit::skip(
            "/usr/bin/python3 with scapy not installed (scripts/setup.sh installs python3-scapy)",
        );
        return;
    }
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let r = RouterProc::start("");
    // Let the router learn host A and B first (so the ICMP reply need not wait).
    ping_ok("weft-ha", &["198.19.0.1"]);
    let rmac = text(&ns("weft-r", 5, &["cat", "/sys/class/net/weft-ra/address"]));
    let names = [
        "drop_ipv4_bad_checksum",
        "drop_ipv4_truncated",
        "ipv4_options_forwarded",
        "drop_ipv4_source_route",
        "drop_ttl_exceeded",
        "icmp_time_exceeded_sent",
        "drop_vlan_tagged",
    ];
    let before: Vec<u64> = names.iter().map(|n| r.counter(n)).collect();
    let b_rx_before = text(&ns(
        "weft-hb",
        5,
        &["cat", "/sys/class/net/weft-b0/statistics/rx_packets"],
    ));
    let o = ns(
        "weft-ha",
        60,
        &["/usr/bin/python3", "-c", SCAPY, rmac.trim()],
    );
    let t = text(&o);
    assert!(o.status.success(), "scapy: {t}");
    assert!(
        t.contains(r#""time_exceeded": true"#),
        "TTL 1 answered with time exceeded from 198.18.1.1: {t}"
    );
    let after: Vec<u64> = names.iter().map(|n| r.counter(n)).collect();
    let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // Record-route packets are forwarded; host B's port-unreachable answers echo the
    // option (Linux does), so 5 or 10 forwarded-with-options.
    let options = delta[2];
    assert!(
        (5..=10).contains(&options),
        "ipv4_options_forwarded +{options}"
    );
    let delta = [delta[0], delta[1], delta[3], delta[4], delta[5], delta[6]];
    assert_eq!(
        delta,
        [5, 5, 5, 1, 1, 5],
        "{names:?} without ipv4_options_forwarded"
    );
    let b_rx_after = text(&ns(
        "weft-hb",
        5,
        &["cat", "/sys/class/net/weft-b0/statistics/rx_packets"],
    ));
    let grew = b_rx_after.trim().parse::<u64>().unwrap_or(0)
        - b_rx_before.trim().parse::<u64>().unwrap_or(0);
    assert!(
        grew >= 5,
        "the packets with record-route reached host B ({grew} frames)"
    );
}

#[test]
fn iperf3_tcp_across_the_router() {
    require!("iperf3");
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let r = RouterProc::start("");
    iperf3_across(&r, "AF_PACKET");
}

#[test]
fn afxdp_ports_carry_iperf3_tcp() {
    require!("iperf3");
    require_af_xdp!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    // Through weft's pipeline: the fast path (on by default) turned off.
    let r = RouterProc::start_config("router", &afxdp_config(Some(false)), "left");
    iperf3_across(&r, "AF_XDP");
    // The frames came through the AF_XDP sockets: the port's own counters.
    let links = r.ctl("show links");
    let left_rx: u64 = links
        .lines()
        .find_map(|l| l.strip_prefix("left "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(left_rx > 1000, "{links}");
}

/// iperf3 TCP from host A to host B for 3 s.
fn iperf3_across(r: &RouterProc, ports: &str) {
    iperf3_to(r, ports, "198.18.2.2");
}

/// iperf3 TCP from host A to `dst` on host B for 3 s: it completes and moves data.
fn iperf3_to(r: &RouterProc, ports: &str, dst: &str) {
    let mut server = Command::new("timeout")
        .args(["30", "ip", "netns", "exec", "weft-hb", "iperf3", "-s", "-1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    std::thread::sleep(Duration::from_millis(500));
    let o = ns("weft-ha", 30, &["iperf3", "-c", dst, "-t", "3", "-J"]);
    let _ = server.wait();
    let t = text(&o);
    assert!(o.status.success(), "iperf3: {t}");
    let bps = t
        .split("\"sum_received\"")
        .nth(1)
        .and_then(|s| s.split("\"bits_per_second\":").nth(1))
        .and_then(|s| s.split([',', '\n', '}']).next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("iperf3 JSON has sum_received.bits_per_second");
    eprintln!(
        "iperf3 TCP to {dst} through weft router on {ports} ports: {:.0} Mbit/s",
        bps / 1e6
    );
    assert!(bps > 1e6, "TCP made progress: {bps} bit/s");
    assert!(r.counter("forwarded") > 1000);
}

/// Host B's count of TCP segments that arrived with a wrong checksum
/// (`TcpInCsumErrors`, the `InCsumErrors` column of `Tcp:` in its /proc/net/snmp).
fn host_b_tcp_csum_errors() -> u64 {
    let snmp = text(&ns("weft-hb", 5, &["cat", "/proc/net/snmp"]));
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (Some(names), Some(values)) = (tcp.next(), tcp.next()) else {
        panic!("no Tcp lines in host B's /proc/net/snmp: {snmp}");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find_map(|(n, v)| (n == "InCsumErrors").then(|| v.parse().ok()).flatten())
        .unwrap_or_else(|| panic!("no Tcp InCsumErrors in {snmp}"))
}

/// One column of `show links` for a port.
fn link_counter(r: &RouterProc, port: &str, column: &str) -> u64 {
    let links = r.ctl("show links");
    let mut lines = links.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let at = header
        .iter()
        .position(|h| *h == column)
        .unwrap_or_else(|| panic!("no column {column} in {links}"));
    lines
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&port))
        .and_then(|w| w.get(at).and_then(|v| v.parse().ok()))
        .unwrap_or_else(|| panic!("no {column} for {port} in {links}"))
}

/// Issue 20: with veth's default offloads (checksum offload and TSO on) the hosts
/// send partial checksums and TCP super-frames; the router's ports must finish them
/// as a NIC would, or the far host drops every segment (`TcpInCsumErrors`).
fn tcp_with_default_offloads(r: &RouterProc, ports: &str) {
    let tx_csum = text(&ns("weft-ha", 5, &["ethtool", "-k", "weft-a0"]));
    assert!(
        tx_csum.contains("tx-checksumming: on") && tx_csum.contains("tcp-segmentation-offload: on"),
        "the topology keeps veth's default offloads: {tx_csum}"
    );
    let errors_before = host_b_tcp_csum_errors();
    iperf3_to(r, ports, "198.18.2.2");
    iperf3_to(r, ports, "2001:2:0:2::2");
    let errors = host_b_tcp_csum_errors() - errors_before;
    assert_eq!(errors, 0, "host B counted TcpInCsumErrors");
    // The work was there to do, and the ports did it.
    let completed = link_counter(r, "left", "rx_csum_completed");
    let segmented = link_counter(r, "left", "rx_gso_segmented");
    eprintln!("{ports}: left port completed {completed} checksums, split {segmented} super-frames");
    assert!(
        completed > 0,
        "partial checksums arrived and were completed"
    );
    assert!(
        segmented > 0,
        "TSO super-frames arrived and were split: {}",
        r.ctl("show links")
    );
}

#[test]
fn iperf3_tcp_across_the_router_with_default_veth_offloads() {
    require!("iperf3", "ethtool");
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up_with("weft", "default");
    let r = RouterProc::start("");
    tcp_with_default_offloads(&r, "AF_PACKET");
}

#[test]
fn afxdp_ports_carry_iperf3_tcp_with_default_veth_offloads() {
    require!("iperf3", "ethtool");
    require_af_xdp!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up_with("weft", "default");
    let r = RouterProc::start_on(&["3", "afxdp"], "");
    tcp_with_default_offloads(&r, "AF_XDP (generic)");
}

/// `weft router --config CONFIG --socket SOCKET` in the router namespace, expected to
/// exit by itself within 20 s: its exit code and output.
fn second_router(config: &Path, socket: &Path) -> (Option<i32>, String) {
    let o = Command::new("timeout")
        .args([
            "20",
            "ip",
            "netns",
            "exec",
            "weft-r",
            env!("CARGO_BIN_EXE_weft"),
        ])
        .arg("router")
        .arg("--config")
        .arg(config)
        .arg("--socket")
        .arg(socket)
        .output()
        .expect("spawn second weft router");
    (o.status.code(), text(&o))
}

/// Issue 20: a second router on the same config, or on the same control socket,
/// refuses to start, names what is taken and by which process, and leaves the first
/// running with its control socket.
#[test]
fn a_second_router_on_the_same_interfaces_or_socket_refuses_to_start() {
    require!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    // Ports to hosts A and B only: host C's interface stays free for the second.
    let r = RouterProc::start_on(&["2"], "");
    let pid = format!("(pid {})", r.child.id());
    let (code, t) = second_router(&r.dir.join("router.toml"), &r.socket);
    assert!(
        code.is_some_and(|c| c != 0 && c != 124),
        "exited by itself, non-zero ({code:?}): {t}"
    );
    assert!(
        t.contains("interface weft-ra is in use by another weft router") && t.contains(&pid),
        "names the interface and the first router's {pid}: {t}"
    );
    // The same socket with other interfaces: the socket is what is taken.
    let other = r.dir.join("other.toml");
    std::fs::write(
        &other,
        "[[port]]\nname = \"solo\"\ninterface = \"weft-rc\"\naddresses = [\"198.18.3.1/24\"]\n",
    )
    .expect("write other config");
    let (code, t) = second_router(&other, &r.socket);
    assert!(code.is_some_and(|c| c != 0 && c != 124), "{code:?}: {t}");
    assert!(
        t.contains(&format!(
            "control socket {} is in use by another weft router",
            r.socket.display()
        )) && t.contains(&pid),
        "names the socket and the first router's {pid}: {t}"
    );
    // The first router kept its socket and forwards alone (no duplicate replies).
    assert!(
        r.socket.exists(),
        "the first router's control socket is still there"
    );
    assert!(r.ctl("show ports").contains("left"), "ctl still answers");
    let p = ping_ok("weft-ha", &["198.18.2.2"]);
    assert!(!p.contains("DUP!"), "{p}");
}

#[test]
fn a_route_changed_mid_flow_moves_the_traffic() {
    require!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let r = RouterProc::start("");
    let rx = |host: &str, dev: &str| -> u64 {
        text(&ns(
            host,
            5,
            &[
                "cat",
                &format!("/sys/class/net/{dev}/statistics/rx_packets"),
            ],
        ))
        .trim()
        .parse()
        .unwrap_or(0)
    };
    ping_ok("weft-ha", &["198.19.0.1"]);
    let flow = Command::new("timeout")
        .args([
            "30",
            "ip",
            "netns",
            "exec",
            "weft-ha",
            "ping",
            "-c",
            "200",
            "-i",
            "0.01",
            "-W",
            "1",
            "198.19.0.1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ping flow");
    std::thread::sleep(Duration::from_millis(800));
    let (b0, c0) = (rx("weft-hb", "weft-b0"), rx("weft-hc", "weft-c0"));
    let answer = r.ctl("route add 198.19.0.0/16 via 198.18.3.2");
    assert!(answer.starts_with("ok"), "{answer}");
    let o = flow.wait_with_output().expect("ping flow");
    let t = text(&o);
    let (b1, c1) = (rx("weft-hb", "weft-b0"), rx("weft-hc", "weft-c0"));
    let received: u64 = t
        .split(" received")
        .next()
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    eprintln!("route change mid-flow: {received}/200 replies; host B +{} frames after the change, host C +{}", b1 - b0, c1 - c0);
    assert!(c1 - c0 >= 50, "traffic moved to host C: {t}");
    assert!(b1 - b0 <= 10, "and left host B");
    assert!(
        received >= 190,
        "at most a few replies lost while the route moved: {t}"
    );
}

/// The MTU of the link to host B, on both of its ends (veth drops frames larger than
/// the receiving end's MTU, so both must agree).
fn set_b_mtu(mtu: u32) {
    let m = mtu.to_string();
    for (n, dev) in [("weft-r", "weft-rb"), ("weft-hb", "weft-b0")] {
        let o = ns(n, 5, &["ip", "link", "set", "dev", dev, "mtu", &m]);
        assert!(o.status.success(), "mtu on {dev}: {}", text(&o));
    }
}

/// A ping from host A with DF set (`args` add size, family, destination) that cannot
/// cross the 1400-byte link: it fails, and host A learned the MTU from the router's
/// fragmentation-needed or packet-too-big (RFC 1191, RFC 8201).
fn too_big_from_host_a(args: &[&str]) {
    let mut a = vec!["ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do"];
    a.extend_from_slice(args);
    let o = ns("weft-ha", 20, &a);
    let t = text(&o);
    assert!(!o.status.success(), "ping {args:?} with DF crossed: {t}");
    assert!(
        t.contains("mtu = 1400") || t.contains("mtu=1400"),
        "host A did not learn the MTU from ping {args:?}: {t}"
    );
}

#[test]
fn a_smaller_mtu_towards_host_b_fragments_or_answers_too_big() {
    require!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    set_b_mtu(1400);
    let r = RouterProc::start("");
    let ports = r.ctl("show ports");
    assert!(
        ports.contains("right") && ports.contains("mtu 1400"),
        "{ports}"
    );
    ping_ok("weft-ha", &["198.18.2.2"]);
    ping_ok("weft-ha", &["198.19.0.1"]);
    // Without DF: host A sends 3028 bytes as two 1500-byte fragments and a small one;
    // the router splits each 1500-byte one again for the 1400-byte link (RFC 791),
    // host B reassembles and answers. A destination of its own, so no path MTU host A
    // learns below can make it fragment for the router.
    ping_ok("weft-ha", &["-M", "dont", "-s", "3000", "198.19.0.1"]);
    assert!(
        r.counter("ipv4_fragmented") >= 6,
        "two fragments of each of 3 echoes split again"
    );
    // With DF: fragmentation needed, carrying the next hop's MTU (RFC 1191).
    let too_big_before = r.counter("icmp_too_big_sent");
    too_big_from_host_a(&["-s", "1400", "198.18.2.2"]);
    // 1400 bytes with DF fit exactly.
    ping_ok("weft-ha", &["-M", "do", "-s", "1372", "198.18.2.2"]);
    // IPv6: packet too big (routers never fragment IPv6).
    too_big_from_host_a(&["-6", "-s", "1400", "2001:2:0:2::2"]);
    ping_ok(
        "weft-ha",
        &["-6", "-M", "do", "-s", "1352", "2001:2:0:2::2"],
    );
    assert!(r.counter("icmp_too_big_sent") >= too_big_before + 2);
    assert!(r.counter("drop_too_big") >= 2);
}

/// Router 1 (host A's side) and router 2 (host B's side) in the router namespace, one
/// process each, joined by an shm port (abstract unix sockets belong to a namespace,
/// so both live in weft-r).
const R1_CONFIG: &str = r#"
[[port]]
name = "left"
interface = "weft-ra"
addresses = ["198.18.1.1/24", "2001:2:0:1::1/64"]

[[port]]
name = "to-r2"
backend = "shm"
interface = "127.0.0.1:7101"
peer = "127.0.0.1:7102"
addresses = ["198.18.9.1/30", "2001:2:0:9::1/64"]

[[route]]
prefix = "198.18.2.0/24"
via = "198.18.9.2"

[[route]]
prefix = "198.19.0.0/16"
via = "198.18.9.2"

[[route]]
prefix = "2001:2:0:2::/64"
via = "2001:2:0:9::2"
"#;

const R2_CONFIG: &str = r#"
[[port]]
name = "to-r1"
backend = "shm"
interface = "127.0.0.1:7102"
peer = "127.0.0.1:7101"
addresses = ["198.18.9.2/30", "2001:2:0:9::2/64"]

[[port]]
name = "right"
interface = "weft-rb"
addresses = ["198.18.2.1/24", "2001:2:0:2::1/64"]

[[route]]
prefix = "198.18.1.0/24"
via = "198.18.9.1"

[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"

[[route]]
prefix = "2001:2:0:1::/64"
via = "2001:2:0:9::1"
"#;

#[test]
fn two_router_processes_joined_by_an_shm_port_carry_pings_and_stop_on_signals() {
    require!("traceroute");
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let mut r1 = RouterProc::start_config("r1", R1_CONFIG, "to-r2");
    let mut r2 = RouterProc::start_config("r2", R2_CONFIG, "to-r1");
    // Host A → router 1 → shm → router 2 → host B, and back; the routers' own
    // addresses on both sides of the shm link answer too.
    for dst in ["198.18.2.2", "198.19.0.1", "198.18.9.2", "198.18.2.1"] {
        ping_ok("weft-ha", &[dst]);
    }
    ping_ok("weft-hb", &["198.18.1.2"]);
    ping_ok("weft-ha", &["-6", "2001:2:0:2::2"]);
    ping_ok("weft-hb", &["-6", "2001:2:0:1::2"]);
    let (t, hops) = traceroute_from_host_a("198.18.2.2");
    let hops: Vec<&str> = hops.iter().map(String::as_str).collect();
    assert!(
        hops.first().is_some_and(|l| l.contains("198.18.1.1"))
            && hops.get(1).is_some_and(|l| l.contains("198.18.9.2"))
            && hops.get(2).is_some_and(|l| l.contains("198.18.2.2")),
        "router 1, router 2 (its shm side), host B: {t}"
    );
    // Both routers forwarded the pings across the shm link, both ways.
    for r in [&r1, &r2] {
        assert!(r.counter("forwarded") >= 12, "{}", r.ctl("show counters"));
    }
    let n = r1.ctl("show neighbors");
    assert!(n.contains("to-r2 198.18.9.2"), "{n}");
    let n = r2.ctl("show neighbors");
    assert!(n.contains("to-r1 198.18.9.1"), "{n}");
    // `weft router` runs in the foreground until SIGINT or SIGTERM, then exits 0.
    assert!(r1.stop("INT"), "router 1 exits cleanly on SIGINT");
    assert!(r2.stop("TERM"), "router 2 exits cleanly on SIGTERM");
}

/// `netns-router.sh config 3 afxdp` with `xdp_forward = true` on every port.
fn xdp_forward_config() -> String {
    afxdp_config(Some(true))
}

/// `netns-router.sh config 3 afxdp`, with `xdp_forward = …` on every port when given.
fn afxdp_config(xdp_forward: Option<bool>) -> String {
    let cfg = Command::new("bash")
        .arg(script())
        .args(["config", "3", "afxdp"])
        .output()
        .expect("config");
    let cfg = String::from_utf8_lossy(&cfg.stdout).into_owned();
    match xdp_forward {
        Some(on) => cfg.replace(
            "backend = \"afxdp\"\n",
            &format!("backend = \"afxdp\"\nxdp_forward = {on}\n"),
        ),
        None => cfg,
    }
}

fn rx_packets(ns_name: &str, dev: &str) -> u64 {
    text(&ns(
        ns_name,
        5,
        &[
            "cat",
            &format!("/sys/class/net/{dev}/statistics/rx_packets"),
        ],
    ))
    .trim()
    .parse()
    .unwrap_or(0)
}

/// A fast-path counter: the daemon publishes them every 50 ms, so wait for one
/// publication after the traffic that should have moved it.
fn xdp_counter(r: &RouterProc, name: &str) -> u64 {
    std::thread::sleep(Duration::from_millis(150));
    r.counter(name)
}

/// Twenty IPv4 pings from host A across the router (198.19.0.1, routed via host B),
/// once the next hop is resolved (the first ping's ARP goes through weft's slow path):
/// none lost. Returns how much the fast path's `xdp_forwarded` and the pipeline's
/// `forwarded` rose over the twenty.
fn ipv4_transit_pings(r: &RouterProc) -> (u64, u64) {
    ping_ok("weft-ha", &["198.19.0.1"]);
    std::thread::sleep(Duration::from_millis(300));
    let fast = xdp_counter(r, "xdp_forwarded");
    let piped = r.counter("forwarded");
    let o = ns(
        "weft-ha",
        20,
        &["ping", "-c", "20", "-i", "0.02", "-W", "2", "198.19.0.1"],
    );
    let t = text(&o);
    assert!(t.contains(" 0% packet loss"), "{t}");
    (
        xdp_counter(r, "xdp_forwarded") - fast,
        r.counter("forwarded") - piped,
    )
}

/// Ten IPv6 pings from host A across the router (2001:2:0:100::1, behind host B), once
/// the next hop is resolved (the first ping's ND goes through weft's slow path): none
/// lost, and the fast path's `xdp_forwarded` rose by at least `min` (requests, and
/// replies where the return port runs it too).
fn ipv6_transit_takes_the_fast_path(r: &RouterProc, min: u64) {
    ping_ok("weft-ha", &["-6", "2001:2:0:100::1"]);
    std::thread::sleep(Duration::from_millis(300));
    let before = xdp_counter(r, "xdp_forwarded");
    let o = ns(
        "weft-ha",
        20,
        &[
            "ping",
            "-6",
            "-c",
            "10",
            "-i",
            "0.05",
            "-W",
            "2",
            "2001:2:0:100::1",
        ],
    );
    assert!(text(&o).contains(" 0% packet loss"), "{}", text(&o));
    assert!(xdp_counter(r, "xdp_forwarded") - before >= min);
}

/// The XDP fast path (`xdp_forward = true`): routed IPv4 and IPv6 transit crosses
/// in the kernel (its counter rises), while TTL expiry still gets weft's time exceeded
/// (traceroute shows the router), the router's own addresses still work through
/// weft's pipeline, and a route changed with `ctl` moves the
/// fast path's traffic too.
#[test]
fn xdp_forward_ports_forward_in_the_kernel_and_leave_the_rest_to_weft() {
    require!("traceroute");
    require_af_xdp!();
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let r = RouterProc::start_config("router", &xdp_forward_config(), "left");
    let xdp = text(&ns("weft-r", 5, &["ip", "link", "show", "weft-ra"]));
    assert!(xdp.contains("xdpgeneric"), "{xdp}");
    // The first packets resolve 198.18.2.2 through weft; the daemon then fills the
    // next hop (every 50 ms).
    let (fast, _) = ipv4_transit_pings(&r);
    // Host A → 198.19.0.1 is routed via 198.18.2.2: the fast path; the replies to
    // host A, a resolved neighbour on a connected network, too.
    assert!(
        fast >= 20,
        "xdp_forwarded +{fast}: {}",
        r.ctl("show counters")
    );
    // TTL 1 goes to the slow path, and weft answers it.
    traceroute_shows_router_then("198.19.0.1");
    assert!(xdp_counter(&r, "xdp_slow_ttl") >= 1);
    assert!(r.counter("icmp_time_exceeded_sent") >= 1);
    // The router itself and IPv6: the pipeline; a connected host: either.
    let local = xdp_counter(&r, "xdp_slow_local_or_connected");
    for dst in ["198.18.1.1", "198.18.2.2"] {
        ping_ok("weft-ha", &[dst]);
    }
    assert!(xdp_counter(&r, "xdp_slow_local_or_connected") - local >= 3);
    // IPv6 transit: the fast path too, once 2001:2:0:2::2 is resolved.
    ipv6_transit_takes_the_fast_path(&r, 10);
    assert!(xdp_counter(&r, "xdp_slow_not_ip") >= 1, "ARP reaches weft");
    // No route: weft's unreachable (ping reports it).
    let o = ns(
        "weft-ha",
        10,
        &["ping", "-c", "1", "-W", "2", "203.0.113.1"],
    );
    assert!(!o.status.success());
    assert!(xdp_counter(&r, "xdp_slow_no_route") >= 1);
    // Move the far network to host C: the fast path follows within its sync period.
    let c_before = rx_packets("weft-hc", "weft-c0");
    let moved = r.ctl("route add 198.19.0.0/16 via 198.18.3.2");
    assert!(moved.starts_with("ok"), "{moved}");
    ping_ok("weft-ha", &["198.19.0.1"]);
    std::thread::sleep(Duration::from_millis(300));
    let b_before = rx_packets("weft-hb", "weft-b0");
    let fast_before = xdp_counter(&r, "xdp_forwarded");
    let o = ns(
        "weft-ha",
        20,
        &["ping", "-c", "20", "-i", "0.02", "-W", "2", "198.19.0.1"],
    );
    assert!(text(&o).contains(" 0% packet loss"), "{}", text(&o));
    assert!(xdp_counter(&r, "xdp_forwarded") - fast_before >= 20);
    assert!(rx_packets("weft-hc", "weft-c0") - c_before >= 20);
    assert!(
        rx_packets("weft-hb", "weft-b0") - b_before <= 2,
        "host B no longer gets the far network's traffic"
    );
}

/// `netns-router.sh config 3` (AF_PACKET ports) with `fast_path = "tc"` on every port.
fn tc_fast_path_config() -> String {
    let cfg = Command::new("bash")
        .arg(script())
        .args(["config", "3"])
        .output()
        .expect("config");
    let cfg = String::from_utf8_lossy(&cfg.stdout).into_owned();
    let mut out = String::new();
    for line in cfg.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("interface = ") {
            out.push_str("fast_path = \"tc\"\n");
        }
    }
    out
}

/// The fast path at tc ingress on AF_PACKET ports (`fast_path = "tc"`): routed IPv4
/// and IPv6 transit crosses in the kernel (the fast path's counter rises, the
/// pipeline's `forwarded` does not: the packet sockets, bound to IPv4, IPv6 and ARP,
/// see only what tc let through), while ARP, the router's own addresses, TTL expiry
/// and IPv6 to the router reach weft's pipeline, once each.
#[test]
fn tc_fast_path_on_afpacket_ports_forwards_in_the_kernel_and_leaves_the_rest_to_weft() {
    require!("traceroute");
    let _one = weft_testkit::netns_turn(TURN_WAIT);
    let _topo = Topology::up("weft");
    let cfg = tc_fast_path_config();
    assert_eq!(cfg.matches("fast_path = \"tc\"").count(), 3, "{cfg}");
    let r = RouterProc::start_config("router", &cfg, "left");
    // The first packets resolve 198.18.2.2 through weft (ARP: the slow path); the
    // daemon then fills the next hop (every 50 ms).
    let (fast, also) = ipv4_transit_pings(&r);
    // 20 echoes out, 20 replies back, both routed: the fast path.
    assert!(
        fast >= 40,
        "xdp_forwarded +{fast}: {}",
        r.ctl("show counters")
    );
    // Not also the pipeline: a frame tc redirected never reaches the sockets.
    assert!(
        also <= 2,
        "the pipeline forwarded {also} of them too: {}",
        r.ctl("show counters")
    );
    // ARP reached weft (resolution above), through the slow path.
    assert!(xdp_counter(&r, "xdp_slow_not_ip") >= 1);
    // The router's addresses: the pipeline answers, exactly once per echo.
    let replied = r.counter("echo_replied");
    let o = ns(
        "weft-ha",
        10,
        &["ping", "-c", "5", "-i", "0.05", "-W", "2", "198.18.1.1"],
    );
    assert!(text(&o).contains(" 0% packet loss"), "{}", text(&o));
    assert!(!text(&o).contains("DUP!"), "{}", text(&o));
    let answered = r.counter("echo_replied") - replied;
    assert_eq!(answered, 5, "{}", r.ctl("show counters"));
    ping_ok("weft-ha", &["-6", "2001:2:0:1::1"]);
    // TTL 1: the slow path, and weft's time exceeded.
    traceroute_shows_router_then("198.19.0.1");
    assert!(xdp_counter(&r, "xdp_slow_ttl") >= 1);
    assert!(r.counter("icmp_time_exceeded_sent") >= 1);
    // IPv6 transit: the fast path too, once 2001:2:0:2::2 is resolved (ND: the
    // IPv6 socket's slow path).
    ipv6_transit_takes_the_fast_path(&r, 20);
}
