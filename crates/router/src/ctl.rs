//! The control socket: a Unix stream socket taking one command line per connection
//! and answering in text, then closing. Commands:
//!
//! ```text
//! route add PREFIX via ADDR     add or replace (traffic keeps flowing)
//! route del PREFIX              remove
//! show counters [all]           nonzero counters (or all), "name value" lines
//! show neighbors                port ip mac state expires queued
//! show routes [LIMIT]           the first LIMIT routes (default 100) and the totals
//! show ports                    name mac addresses
//! show links                    per port: frames in and out, drops below the router
//!                               (kernel ring overflow, full transmit ring)
//! ```
//! Answers to bad commands start with `error:`.
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
        ["show", "links"] => {
            let mut s =
                String::from("port rx_frames tx_frames rx_dropped tx_ring_full tx_dropped\n");
            for (name, l) in router.link_stats() {
                let _ = writeln!(
                    s,
                    "{name} {} {} {} {} {}",
                    l.rx_frames, l.tx_frames, l.rx_dropped, l.tx_ring_full, l.tx_dropped
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
        _ => "error: unknown command (route add|del, show counters|neighbors|routes|ports|links)\n"
            .to_string(),
    }
}

/// A running control socket; dropping it stops the thread and removes the socket.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Listen on `path` (a stale socket file there is replaced).
    pub fn start(path: &Path, router: Arc<Router>) -> io::Result<ControlServer> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
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
        let _ = std::fs::remove_file(&self.path);
    }
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
        r.publish_link_stats(
            0,
            weft_link::LinkStats {
                rx_dropped: 7,
                ..Default::default()
            },
        );
        assert!(execute(&r, "show links").contains("left 0 0 7 0 0"));
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
}
