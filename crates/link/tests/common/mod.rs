#![allow(dead_code)] // each test binary uses its own subset of these helpers
//! Shared by the link tests that need a real veth pair: a network namespace this
//! test creates (and removes on drop, also on failure) with the pair inside.

use std::process::{Command, Stdio};

/// Root, with iproute2: else the test prints why and passes.
pub fn can_run() -> Result<(), &'static str> {
    if !is_root() {
        return Err("needs root (network namespaces)");
    }
    if !sh(&["ip", "-V"]) {
        return Err("needs iproute2");
    }
    Ok(())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A namespace `name` holding the veth pair `a` – `b`, both up with IPv6 off (no
/// router solicitations in the way). Removed on drop.
pub struct VethNs {
    name: &'static str,
}

impl VethNs {
    pub fn new(name: &'static str, a: &str, b: &str) -> VethNs {
        VethNs::with_queues(name, a, b, 1)
    }

    /// The same with `queues` receive and transmit queues on each end.
    pub fn with_queues(name: &'static str, a: &str, b: &str, queues: u32) -> VethNs {
        let _ = Command::new("ip")
            .args(["netns", "del", name])
            .stderr(Stdio::null())
            .status();
        assert!(sh(&["ip", "netns", "add", name]), "ip netns add {name}");
        let ns = VethNs { name };
        let q = queues.to_string();
        let nq = ["numrxqueues", &q, "numtxqueues", &q];
        let mut add = vec!["ip", "link", "add", a];
        add.extend_from_slice(&nq);
        add.extend_from_slice(&["type", "veth", "peer", "name", b]);
        add.extend_from_slice(&nq);
        assert!(ns.run(&add), "{add:?}");
        for d in [a, b] {
            let _ = ns.run(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{d}.disable_ipv6=1"),
            ]);
            assert!(ns.run(&["ip", "link", "set", d, "up"]));
        }
        ns
    }

    /// Run a command inside the namespace; true on success.
    pub fn run(&self, args: &[&str]) -> bool {
        let mut v = vec!["ip", "netns", "exec", self.name];
        v.extend_from_slice(args);
        sh(&v)
    }

    /// A command's standard output inside the namespace.
    pub fn output(&self, args: &[&str]) -> String {
        let o = Command::new("ip")
            .args(["netns", "exec", self.name])
            .args(args)
            .output()
            .expect("ip netns exec");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Move the calling thread into the namespace (the test binary's other threads
    /// stay out).
    pub fn enter(&self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(format!("/run/netns/{}", self.name))?;
        weft_link::afpacket::setns_net(f.as_raw_fd())
    }
}

impl Drop for VethNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", self.name])
            .status();
    }
}
