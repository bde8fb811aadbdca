//! The control socket: a Unix stream socket taking one command line per connection
//! and answering in text, then closing. The commands are [`COMMANDS`] (also shown by
//! `weft router ctl --help` and docs/router.md). Answers to bad commands start with
//! `error:`.
#![forbid(unsafe_code)]

use crate::fib::IpPrefix;
use crate::pipeline::Router;
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Every command and its answer: the one list, shown by `weft router ctl --help`.
pub const COMMANDS: &str = "\
Commands:
  route add PREFIX via ADDR   add or replace a route (traffic keeps flowing)
  route del PREFIX            remove a route
  show counters [all]         the router's nonzero counters (or all): name value
  show neighbors              the neighbour cache: port ip mac state expires queued
  show routes [LIMIT]         the totals and the first LIMIT routes (default 100)
  show ports                  the ports as configured: name mac mtu addresses
  show links                  per port, below the router: frames in and out, drops
                              (kernel ring overflow, full transmit ring), offload
                              work finished for the sender (partial checksums
                              completed, super-frames split), mean receive-ring
                              wait
  show interconnect           a cluster node: per peer node, up or not, messages,
                              packets, bytes and packets per message sent and
                              received, drops, packets reordered
";

/// Longest command line accepted.
const MAX_LINE: u64 = 4096;

/// Run one command against `router`; the answer text.
pub fn execute(router: &Router, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["route", "add", prefix, "via", via] => {
            let Ok(p) = prefix.parse::<IpPrefix>() else {
                return format!("error: bad prefix {prefix:?}\n");
            };
            let Ok(v) = via.parse::<IpAddr>() else {
                return format!("error: bad next hop {via:?}\n");
            };
            match router.add_route(p, v) {
                Ok(Some(old)) => format!(
                    "ok: {p} via {v} (replaced port {} via {:?})\n",
                    old.port, old.via
                ),
                Ok(None) => format!("ok: {p} via {v}\n"),
                Err(e) => format!("error: {e}\n"),
            }
        }
        ["route", "del", prefix] => {
            let Ok(p) = prefix.parse::<IpPrefix>() else {
                return format!("error: bad prefix {prefix:?}\n");
            };
            match router.remove_route(p) {
                Some(_) => format!("ok: removed {p}\n"),
                None => format!("error: no route {p}\n"),
            }
        }
        ["show", "counters", rest @ ..] => {
            let all = rest == ["all"];
            let mut s = String::new();
            for (c, v) in router.counters() {
                if all || v != 0 {
                    let _ = writeln!(s, "{} {v}", c.name());
                }
            }
            // The XDP fast path's, beside the pipeline's (ports with xdp_forward).
            for (name, v) in router.fast_path_counters() {
                if all || v != 0 {
                    let _ = writeln!(s, "{name} {v}");
                }
            }
            s
        }
        ["show", "neighbors" | "neighbours"] => {
            let mut s = String::new();
            let names: Vec<String> = router.ports().map(|p| p.name.clone()).collect();
            for n in router.neighbors(Instant::now()) {
                let mac = n.mac.map_or("-".to_string(), |m| m.to_string());
                let port = names.get(n.port).map_or("?", String::as_str);
                let _ = writeln!(
                    s,
                    "{port} {} {mac} {} {:.1}s queued={}",
                    n.ip, n.state, n.expires_in, n.queued
                );
            }
            s
        }
        ["show", "routes", rest @ ..] => {
            let limit = rest
                .first()
                .and_then(|l| l.parse().ok())
                .unwrap_or(100usize);
            let fib = router.fib();
            let (v4, v6) = fib.len();
            let names: Vec<String> = router.ports().map(|p| p.name.clone()).collect();
            let mut s = format!("routes: {v4} ipv4, {v6} ipv6\n");
            for (p, nh) in router.routes(limit) {
                let port = names.get(nh.port).map_or("?", String::as_str);
                match nh.via {
                    Some(v) => {
                        let _ = writeln!(s, "{p} via {v} dev {port}");
                    }
                    None => {
                        let _ = writeln!(s, "{p} dev {port} connected");
                    }
                }
            }
            s
        }
        ["show", "interconnect"] => {
            let peers = router.interconnect_stats();
            if peers.is_empty() {
                return "no interconnect (not a cluster node, or no peer yet)\n".into();
            }
            let mut s = String::new();
            for (peer, rows) in peers {
                s.push_str(&peer);
                for (name, v) in rows {
                    match name.strip_suffix("_x100") {
                        Some(n) => {
                            let _ = write!(s, " {n}={}.{:02}", v / 100, v % 100);
                        }
                        None => {
                            let _ = write!(s, " {name}={v}");
                        }
                    }
                }
                s.push('\n');
            }
            s
        }
        ["show", "links"] => {
            let mut s = String::from(
                "port rx_frames tx_frames rx_dropped tx_ring_full tx_dropped \
                 rx_csum_completed rx_gso_segmented rx_ring_wait_avg_ns\n",
            );
            for (name, l) in router.link_stats() {
                let _ = writeln!(
                    s,
                    "{name} {} {} {} {} {} {} {} {}",
                    l.rx_frames,
                    l.tx_frames,
                    l.rx_dropped,
                    l.tx_ring_full,
                    l.tx_dropped,
                    l.rx_csum_completed,
                    l.rx_gso_segmented,
                    l.rx_ring_wait_ns.checked_div(l.rx_ring_timed).unwrap_or(0)
                );
            }
            s
        }
        ["show", "ports"] => {
            let mut s = String::new();
            for p in router.ports() {
                let addrs: Vec<String> =
                    p.v4.iter()
                        .map(|(a, l)| format!("{a}/{l}"))
                        .chain(p.v6.iter().map(|(a, l)| format!("{a}/{l}")))
                        .collect();
                let _ = writeln!(
                    s,
                    "{} {} mtu {} {}",
                    p.name,
                    p.mac,
                    p.max_frame.saturating_sub(14),
                    addrs.join(" ")
                );
            }
            s
        }
        _ => format!("error: unknown command {line:?}\n{COMMANDS}"),
    }
}

/// A running control socket; dropping it stops the thread and removes the socket
/// (only while the path is still this socket: never another router's).
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    /// (device, inode) of the socket file we bound.
    file: Option<(u64, u64)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Listen on `path`. A stale socket file there (nothing accepts on it) is
    /// replaced; one where a process accepts is an error
    /// ([`crate::instance::free_control_socket`]).
    pub fn start(path: &Path, router: Arc<Router>) -> io::Result<ControlServer> {
        crate::instance::free_control_socket(path).map_err(|e| {
            let kind = match e {
                crate::instance::InstanceError::ControlSocketInUse { .. } => {
                    io::ErrorKind::AddrInUse
                }
                _ => io::ErrorKind::Other,
            };
            io::Error::new(kind, e)
        })?;
        let listener = UnixListener::bind(path)?;
        let file = file_id(path);
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("weft-ctl".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let _ = serve_one(s, &router);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            file,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.file.is_some() && file_id(&self.path) == self.file {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The device and inode of the file at `path`: which socket file it is.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

fn serve_one(s: UnixStream, router: &Router) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut line = String::new();
    BufReader::new((&s).take(MAX_LINE)).read_line(&mut line)?;
    let answer = execute(router, line.trim());
    (&s).write_all(answer.as_bytes())
}

use std::io::Read as _;

/// Send one command to the socket at `path`; the answer.
pub fn request(path: &Path, line: &str) -> io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(line.as_bytes())?;
    s.write_all(b"\n")?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{PortSpec, RouterConfig};
    use weft_wire::EthernetAddress;

    fn router() -> Arc<Router> {
        Router::new(
            vec![PortSpec {
                name: "left".into(),
                mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
                v4: vec![("198.18.1.1".parse().expect("a"), 24)],
                v6: vec![],
                max_frame: 1514,
            }],
            RouterConfig::default(),
        )
    }

    #[test]
    fn route_changes_take_effect_before_the_answer_and_free_next_hops() {
        let r = router();
        let a = "198.19.4.5".parse().expect("a");
        assert_eq!(r.fib().next_hops(), 1, "the connected route's next hop");
        assert!(execute(&r, "route add 198.19.0.0/16 via 198.18.1.2").starts_with("ok"));
        assert_eq!(
            r.fib().lookup(a).and_then(|n| n.via),
            Some("198.18.1.2".parse().expect("a"))
        );
        assert_eq!(r.fib().next_hops(), 2);
        // Re-pointed: the old neighbour's entry is freed with its last route.
        assert!(execute(&r, "route add 198.19.0.0/16 via 198.18.1.3").contains("replaced"));
        assert_eq!(
            r.fib().lookup(a).and_then(|n| n.via),
            Some("198.18.1.3".parse().expect("a"))
        );
        assert_eq!(r.fib().next_hops(), 2);
        assert!(execute(&r, "route del 198.19.0.0/16").starts_with("ok"));
        assert_eq!(r.fib().lookup(a), None);
        assert_eq!(r.fib().next_hops(), 1);
    }

    #[test]
    fn commands_change_and_show_the_router() {
        let r = router();
        assert!(execute(&r, "route add 198.19.0.0/16 via 198.18.1.2").starts_with("ok"));
        assert!(execute(&r, "route add 198.19.0.0/16 via 198.18.1.3").contains("replaced"));
        assert!(execute(&r, "route add 198.20.0.0/16 via 203.0.113.1").starts_with("error"));
        assert!(execute(&r, "route add nonsense via 198.18.1.3").starts_with("error"));
        let routes = execute(&r, "show routes");
        assert!(
            routes.contains("198.19.0.0/16 via 198.18.1.3 dev left"),
            "{routes}"
        );
        assert!(
            routes.contains("198.18.1.0/24 dev left connected"),
            "{routes}"
        );
        assert!(execute(&r, "route del 198.19.0.0/16").starts_with("ok"));
        assert!(execute(&r, "route del 198.19.0.0/16").starts_with("error"));
        assert!(execute(&r, "show counters all").contains("drop_ipv4_bad_checksum 0"));
        assert!(execute(&r, "show ports").contains("left 02:00:00:00:00:01 mtu 1500 198.18.1.1/24"));
        assert!(execute(&r, "frobnicate").starts_with("error"));
        // The list the error shows is the one --help shows, and every command in it
        // is answered.
        assert!(execute(&r, "frobnicate").contains(COMMANDS));
        for cmd in COMMANDS.lines().skip(1) {
            let Some(cmd) = cmd.strip_prefix("  ").and_then(|c| c.split("  ").next()) else {
                continue;
            };
            if cmd.trim().is_empty() || cmd.starts_with("route") {
                continue;
            }
            let cmd = cmd.replace(" [all]", "").replace(" [LIMIT]", "");
            let answer = execute(&r, &cmd);
            assert!(!answer.starts_with("error"), "{cmd}: {answer}");
        }
        r.publish_link_stats(
            0,
            weft_link::LinkStats {
                rx_dropped: 7,
                rx_csum_completed: 3,
                rx_gso_segmented: 2,
                rx_ring_wait_ns: 9000,
                rx_ring_timed: 3,
                ..Default::default()
            },
        );
        let links = execute(&r, "show links");
        assert!(links.contains("left 0 0 7 0 0 3 2 3000"), "{links}");
        assert!(links.starts_with("port rx_frames tx_frames rx_dropped tx_ring_full tx_dropped rx_csum_completed rx_gso_segmented rx_ring_wait_avg_ns\n"), "{links}");
    }

    #[test]
    fn the_socket_answers_one_command_per_connection() {
        let dir = std::env::temp_dir().join(format!("weft-ctl-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("ctl.sock");
        let r = router();
        let server = ControlServer::start(&path, Arc::clone(&r)).expect("server");
        let a = request(&path, "route add 10.0.0.0/8 via 198.18.1.9").expect("request");
        assert!(a.starts_with("ok"), "{a}");
        assert!(r.fib().lookup("10.1.2.3".parse().expect("a")).is_some());
        drop(server);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_second_server_on_a_live_path_is_refused_and_never_removes_it() {
        let dir = std::env::temp_dir().join(format!("weft-ctl-test2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("ctl.sock");
        let first = ControlServer::start(&path, router()).expect("first");
        let e = ControlServer::start(&path, router()).expect_err("second");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains("in use"), "{e}");
        assert!(request(&path, "show ports")
            .expect("first answers")
            .contains("left"));
        // A server whose path was taken over does not remove the new owner's socket.
        std::fs::remove_file(&path).expect("unlink");
        let second = ControlServer::start(&path, router()).expect("path free again");
        drop(first);
        assert!(
            path.exists(),
            "the first server left the second's socket alone"
        );
        assert!(request(&path, "show ports").is_ok());
        drop(second);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
