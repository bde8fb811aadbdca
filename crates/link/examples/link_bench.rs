//! Datagrams per second through the datagram links, sender and receiver on two threads,
//! with std's one-at-a-time `UdpSocket::send_to`/`recv_from` as the baseline in the same
//! run:
//!
//! ```sh
//! cargo run --release -p weft-link --example link_bench -- [seconds per case, default 2]
//! ```
//!
//! The rate is what the *receiver* got, from its first to its last datagram: UDP drops
//! what the receiver cannot keep up with (the loss column says how much), the shm
//! link pushes back instead (the sender finds the ring full).
// Thread CPU time comes from clock_gettime, which std does not offer.
#![allow(unsafe_code)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::datagram::path_between;
use weft_link::{Datagram, DatagramLink, ShmLink, ShmOptions, UdpLink, UdpOptions};

#[derive(Debug, Clone, Copy)]
struct Run {
    sent: u64,
    received: u64,
    rate: f64,
    /// CPU time of the sending and the receiving thread per datagram received, ns.
    tx_cpu_ns: f64,
    rx_cpu_ns: f64,
}

/// CPU time this thread has used. On a shared machine the wall-clock rate depends on
/// what else runs; CPU time per datagram much less so.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Receive until `stop` is set and nothing came for 100 ms; returns (count, first, last).
/// `recv(true)` may block briefly: the weft links spin 64 empty polls, then wait (as
/// the verbs engine does), so a receiver sharing a core with its sender yields it.
fn receive_loop(
    mut recv: impl FnMut(bool) -> usize,
    stop: &AtomicBool,
) -> (u64, Option<Instant>, Option<Instant>) {
    let (mut n, mut first, mut last) = (0u64, None, None);
    let mut idle_since = Instant::now();
    let mut empty = 0u32;
    loop {
        let k = recv(empty >= 64);
        if k > 0 {
            let now = Instant::now();
            n += k as u64;
            first.get_or_insert(now);
            last = Some(now);
            idle_since = now;
            empty = 0;
        } else {
            empty += 1;
            if empty % 64 == 0
                && stop.load(Ordering::Relaxed)
                && idle_since.elapsed() > Duration::from_millis(100)
            {
                return (n, first, last);
            }
        }
    }
}

fn finish(
    (sent, tx_cpu): (u64, Duration),
    (received, first, last): (u64, Option<Instant>, Option<Instant>),
    rx_cpu: Duration,
) -> Run {
    let secs = match (first, last) {
        (Some(f), Some(l)) => l.duration_since(f).as_secs_f64().max(1e-9),
        _ => 1.0,
    };
    let per = |d: Duration| d.as_nanos() as f64 / received.max(1) as f64;
    Run {
        sent,
        received,
        rate: received as f64 / secs,
        tx_cpu_ns: per(tx_cpu),
        rx_cpu_ns: per(rx_cpu),
    }
}

fn std_udp(size: usize, dur: Duration) -> Run {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    rx.set_read_timeout(Some(Duration::from_millis(10)))
        .expect("timeout");
    let to = rx.local_addr().expect("addr");
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let sender = std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let buf = vec![7u8; size];
        let t = Instant::now();
        let cpu = thread_cpu();
        let mut n = 0u64;
        while t.elapsed() < dur {
            if tx.send_to(&buf, to).is_ok() {
                n += 1;
            }
        }
        let cpu = thread_cpu() - cpu;
        s2.store(true, Ordering::Relaxed);
        (n, cpu)
    });
    let mut buf = vec![0u8; 65536];
    let cpu = thread_cpu();
    let got = receive_loop(|_| usize::from(rx.recv_from(&mut buf).is_ok()), &stop);
    let cpu = thread_cpu() - cpu;
    finish(sender.join().expect("sender"), got, cpu)
}

fn fill(l: &impl DatagramLink, to: SocketAddr, size: usize, n: usize, out: &mut Vec<Datagram>) {
    let path = path_between(l.local_addr(), to).expect("family");
    let payload = vec![7u8; size];
    let mut bufs = Vec::with_capacity(n);
    l.pool().alloc_burst(n, &mut bufs);
    for mut b in bufs {
        assert!(b.copy_from(&payload));
        out.push(Datagram { buf: b, path });
    }
}

fn weft<L: DatagramLink + 'static>(mut a: L, mut b: L, size: usize, dur: Duration) -> Run {
    let to = b.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let sender = std::thread::spawn(move || {
        let mut v = Vec::with_capacity(64);
        let t = Instant::now();
        let cpu = thread_cpu();
        let mut n = 0u64;
        while t.elapsed() < dur {
            if v.len() < 32 {
                fill(&a, to, size, 32 - v.len(), &mut v);
            }
            let k = a.send_burst(&mut v).expect("send");
            if k == 0 {
                // Full: let the receiver have the core if it shares ours.
                std::thread::yield_now();
            }
            n += k as u64;
        }
        let cpu = thread_cpu() - cpu;
        s2.store(true, Ordering::Relaxed);
        // Keep the sender's end (and for shm, its connection) alive until the receiver
        // has drained.
        std::thread::sleep(Duration::from_millis(300));
        ((n - a.stats().tx_dropped, cpu), a)
    });
    let mut v = Vec::with_capacity(64);
    let cpu = thread_cpu();
    let got = receive_loop(
        |idle| {
            v.clear();
            if idle {
                b.wait(Duration::from_millis(1), None).expect("wait");
            }
            b.recv_burst(&mut v, 64).expect("recv")
        },
        &stop,
    );
    let cpu = thread_cpu() - cpu;
    let (sent, _a) = sender.join().expect("sender");
    finish(sent, got, cpu)
}

fn row(name: &str, size: usize, r: Run, base: Option<f64>) {
    let loss = if r.sent > 0 {
        100.0 * (1.0 - r.received as f64 / r.sent as f64)
    } else {
        0.0
    };
    let ratio = base.map_or("baseline".to_string(), |b| format!("{:.2}x", r.rate / b));
    println!(
        "| {name} | {size} | {:.0} | {:.2} | {:.1} % | {ratio} | {:.0} | {:.0} |",
        r.rate,
        r.rate * size as f64 * 8.0 / 1e9,
        loss.max(0.0),
        r.tx_cpu_ns,
        r.rx_cpu_ns
    );
}

/// One-way latency (round trip / 2) of one datagram bounced between two threads, each
/// spinning on its own link: the floor the link puts under a verbs ping-pong. The raw
/// baseline bounces the same bytes through one shared line pair with a sequence word
/// (the shape of UCX posix's FIFO element), so the difference is the link's own cost.
fn latency(size: usize, iters: usize) {
    use std::sync::atomic::AtomicU64;
    fn pct(mut v: Vec<f64>) -> (f64, f64) {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() * 99 / 100])
    }
    // Raw: two mailboxes of 4 lines each, seq word in the first.
    let boxes: Arc<Vec<AtomicU64>> = Arc::new((0..64).map(|_| AtomicU64::new(0)).collect());
    let words = size.div_ceil(8).min(31);
    let b2 = Arc::clone(&boxes);
    let echo = std::thread::spawn(move || {
        for i in 1..=iters as u64 {
            while b2[0].load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            for w in 1..=words {
                b2[32 + w].store(b2[w].load(Ordering::Relaxed), Ordering::Relaxed);
            }
            b2[32].store(i, Ordering::Release);
        }
    });
    let mut raw = Vec::with_capacity(iters);
    for i in 1..=iters as u64 {
        let t = Instant::now();
        for w in 1..=words {
            boxes[w].store(i, Ordering::Relaxed);
        }
        boxes[0].store(i, Ordering::Release);
        while boxes[32].load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        raw.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    echo.join().expect("echo");
    let (r50, r99) = pct(raw);
    println!("raw shared lines, {size} B: one-way p50 {r50:.0} ns, p99 {r99:.0} ns");

    let pid = std::process::id();
    let port = (pid % 50_000) as u16 + 10_000;
    let na = SocketAddr::new([127, 0, 9, 101].into(), port);
    let nb = SocketAddr::new([127, 0, 9, 102].into(), port);
    let mut a = ShmLink::bind(na, ShmOptions::default()).expect("shm");
    let mut b = ShmLink::bind(nb, ShmOptions::default()).expect("shm");
    let back = path_between(nb, na).expect("path");
    let echo = std::thread::spawn(move || {
        let mut v = Vec::with_capacity(4);
        let mut n = 0;
        while n < iters + 100 {
            v.clear();
            if b.recv_burst(&mut v, 4).expect("recv") == 0 {
                continue;
            }
            n += v.len();
            for d in &mut v {
                d.path = back;
            }
            while !v.is_empty() {
                b.send_burst(&mut v).expect("send");
            }
        }
        b
    });
    let mut v = Vec::with_capacity(4);
    let mut got = Vec::with_capacity(4);
    let mut lat = Vec::with_capacity(iters);
    for i in 0..iters + 100 {
        fill(&a, nb, size, 1, &mut v);
        let t = Instant::now();
        while !v.is_empty() {
            a.send_burst(&mut v).expect("send");
        }
        loop {
            got.clear();
            if a.recv_burst(&mut got, 4).expect("recv") > 0 {
                break;
            }
        }
        if i >= 100 {
            lat.push(t.elapsed().as_nanos() as f64 / 2.0);
        }
    }
    let _b = echo.join().expect("echo");
    let (s50, s99) = pct(lat);
    println!("weft shm link, {size} B: one-way p50 {s50:.0} ns, p99 {s99:.0} ns");
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let dur = Duration::from_secs_f64(secs);
    let only = std::env::args().nth(2).unwrap_or_default();
    if only == "lat" {
        latency(88, 200_000);
        return;
    }
    let pid = std::process::id();
    println!(
        "| link | datagram bytes | received datagrams/s | Gbit/s | loss | vs std UdpSocket \
         | sender CPU ns/datagram | receiver CPU ns/datagram |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (i, size) in [64usize, 4096].into_iter().enumerate() {
        let base = std_udp(size, dur);
        row("std UdpSocket send_to/recv_from", size, base, None);
        if only == "shm" {
            let port = (pid % 50_000) as u16 + 10_000;
            let na = SocketAddr::new([127, 0, 9, 2 * i as u8 + 1].into(), port);
            let nb = SocketAddr::new([127, 0, 9, 2 * i as u8 + 2].into(), port);
            let a = ShmLink::bind(na, ShmOptions::default()).expect("shm");
            let b = ShmLink::bind(nb, ShmOptions::default()).expect("shm");
            row("weft shm", size, weft(a, b, size, dur), Some(base.rate));
            continue;
        }
        let opts = UdpOptions::default();
        let a = UdpLink::bind("127.0.0.1:0".parse().expect("addr"), opts.clone()).expect("udp");
        let b = UdpLink::bind("127.0.0.1:0".parse().expect("addr"), opts).expect("udp");
        row(
            "weft udp (sendmmsg/recvmmsg, 32/64 per call)",
            size,
            weft(a, b, size, dur),
            Some(base.rate),
        );
        let port = (pid % 50_000) as u16 + 10_000;
        let na = SocketAddr::new([127, 0, 9, 2 * i as u8 + 1].into(), port);
        let nb = SocketAddr::new([127, 0, 9, 2 * i as u8 + 2].into(), port);
        let a = ShmLink::bind(na, ShmOptions::default()).expect("shm");
        let b = ShmLink::bind(nb, ShmOptions::default()).expect("shm");
        row(
            "weft shm (two threads, 256-slot rings)",
            size,
            weft(a, b, size, dur),
            Some(base.rate),
        );
    }
}
