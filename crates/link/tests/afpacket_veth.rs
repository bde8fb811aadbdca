//! AF_PACKET over a real veth pair inside a network namespace this test creates.
//! Needs root and iproute2; prints "skipped: …" and passes without them.

use std::process::Command;
use std::time::{Duration, Instant};
use weft_link::afpacket::AfPacket;
use weft_link::{BufferPool, Link};

const NS: &str = "weft-linktest";

struct Netns;

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", NS]).status();
    }
}

fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .status()
        .is_ok_and(|s| s.success())
}

fn in_ns(args: &[&str]) -> bool {
    let mut v = vec!["ip", "netns", "exec", NS];
    v.extend_from_slice(args);
    sh(&v)
}

/// Enter the namespace on this thread (the test binary's other threads stay out).
fn enter_ns() -> std::io::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{NS}"))?;
    nix_setns(&f)
}

fn nix_setns(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    weft_link::afpacket::setns_net(f.as_raw_fd())
}

#[test]
fn frames_cross_a_veth_pair_both_ways_in_bursts() {
    if !is_root() || !sh(&["ip", "-V"]) {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let _ = Command::new("ip").args(["netns", "del", NS]).status();
    assert!(sh(&["ip", "netns", "add", NS]));
    let _guard = Netns;
    assert!(in_ns(&[
        "ip", "link", "add", "wl0", "type", "veth", "peer", "name", "wl1"
    ]));
    assert!(in_ns(&["ip", "link", "set", "wl0", "up"]));
    assert!(in_ns(&["ip", "link", "set", "wl1", "up"]));
    let t = std::thread::spawn(|| {
        enter_ns().expect("setns");
        let pool = BufferPool::new(512, 2048);
        let mut a = AfPacket::open("wl0", pool.clone()).expect("open wl0");
        let mut b = AfPacket::open("wl1", pool.clone()).expect("open wl1");
        let mut frame = vec![0u8; 100];
        frame[..6].copy_from_slice(&b.info().mac);
        frame[6..12].copy_from_slice(&a.info().mac);
        frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
        let mut tx = Vec::new();
        for i in 0..100u8 {
            let mut buf = pool.alloc().expect("buffer");
            frame[20] = i;
            assert!(buf.copy_from(&frame));
            tx.push(buf);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !tx.is_empty() && Instant::now() < deadline {
            a.send_burst(&mut tx).expect("send");
        }
        let mut rx = Vec::new();
        while rx.len() < 100 && Instant::now() < deadline {
            if b.recv_burst(&mut rx, 32).expect("recv") == 0 {
                b.wait(Duration::from_millis(10)).expect("wait");
            }
        }
        let seq: Vec<u8> = rx
            .iter()
            .filter(|f| f.len() >= 100 && f[12..14] == [0x88, 0xb5])
            .map(|f| f[20])
            .collect();
        assert_eq!(seq, (0..100).collect::<Vec<u8>>(), "every frame, in order");
        // The sender does not see its own frames.
        let mut own = Vec::new();
        a.recv_burst(&mut own, 32).expect("recv");
        assert!(own.iter().all(|f| f.get(12..14) != Some(&[0x88, 0xb5][..])));
        assert_eq!(a.stats().tx_frames, 100);
        drop(rx);
        drop(own);
        // A link keeps a few spare receive buffers while it lives.
        drop(a);
        drop(b);
        assert_eq!(pool.available(), 512, "every buffer went back to the pool");
    });
    t.join().expect("test thread");
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
