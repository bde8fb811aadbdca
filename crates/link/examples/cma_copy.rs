//! What one copy over cross-memory attach costs against memcpy, on this machine: the
//! numbers the shm link's one-copy path and its threshold rest on.
//!
//! ```text
//! cargo run --release -p weft-link --example cma_copy [-- MILLIS_PER_CELL]
//! ```
//!
//! The program re-runs itself as a child that holds a 1 MiB buffer and prints its
//! address; the parent then copies `size` bytes of it per message, with every method,
//! into one destination buffer, and prints GB/s and ns per message:
//!
//! - `memcpy`: one copy between two buffers of the parent (the floor of any copy);
//! - `2x memcpy/4K`: today's shm path, region → ring slot → region, 4 KiB a packet;
//! - `cma 1 call`: one `process_vm_readv` of the whole message from the child;
//! - `cma 4K iov`: one call with one 4 KiB span per packet (at most 64 spans);
//! - `cma call/4K`: one call per 4 KiB packet.
//!
//! Every method reads the same sizes; times are wall clock on a loaded, shared
//! machine, so run it more than once and print `uptime` beside it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use weft_link::cma::{self, Span, MAX_SPANS};

const MAX: usize = 1 << 20;
const PAGE: usize = 4096;

fn child() {
    let buf: Vec<u8> = (0..MAX).map(|i| (i * 7 + 3) as u8).collect();
    println!("{}", buf.as_ptr() as u64);
    std::io::stdout().flush().expect("stdout");
    // Hold the buffer until the parent closes our stdin.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    std::hint::black_box(&buf);
}

/// Runs `f` (one message) for about `budget`; returns ns per message.
fn time(budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..16 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for _ in 0..32 {
            f();
        }
        n += 32;
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        return child();
    }
    let millis: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(300);
    let budget = Duration::from_millis(millis);
    let mut kid = Command::new(&args[0])
        .arg("child")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let mut line = String::new();
    BufReader::new(kid.stdout.take().expect("child stdout"))
        .read_line(&mut line)
        .expect("child address");
    let remote: u64 = line.trim().parse().expect("child address");
    let pid = kid.id() as i32;

    let src: Vec<u8> = (0..MAX).map(|i| (i * 7 + 3) as u8).collect();
    let mut dst = vec![0u8; MAX];
    let mut slot = vec![0u8; PAGE];
    // Correctness once: the child's bytes arrive.
    cma::read(
        pid,
        &mut dst,
        &[Span {
            addr: remote,
            len: MAX as u64,
        }],
    )
    .expect("cma read");
    assert_eq!(dst, src, "cross-memory copy is byte-exact");

    println!("# cma_copy: {millis} ms per cell; load {}", load());
    println!("| size | method | GB/s | ns/msg |");
    println!("| --- | --- | --- | --- |");
    for size in [1024, 2048, 4096, 8192, 16384, 32768, 65536, 262_144, MAX] {
        let pages = size.div_ceil(PAGE);
        let row = |name: &str, ns: f64| {
            println!("| {size} | {name} | {:.2} | {ns:.0} |", size as f64 / ns);
        };
        row(
            "memcpy",
            time(budget, || {
                dst[..size].copy_from_slice(&src[..size]);
                std::hint::black_box(&dst);
            }),
        );
        row(
            "2x memcpy/4K",
            time(budget, || {
                for p in 0..pages {
                    let (a, b) = (p * PAGE, ((p + 1) * PAGE).min(size));
                    slot[..b - a].copy_from_slice(&src[a..b]);
                    dst[a..b].copy_from_slice(&slot[..b - a]);
                }
                std::hint::black_box(&dst);
            }),
        );
        let whole = [Span {
            addr: remote,
            len: size as u64,
        }];
        row(
            "cma 1 call",
            time(budget, || {
                cma::read(pid, &mut dst[..size], &whole).expect("cma");
            }),
        );
        if pages <= MAX_SPANS {
            let spans: Vec<Span> = (0..pages)
                .map(|p| Span {
                    addr: remote + (p * PAGE) as u64,
                    len: (PAGE.min(size - p * PAGE)) as u64,
                })
                .collect();
            row(
                "cma 4K iov",
                time(budget, || {
                    cma::read(pid, &mut dst[..size], &spans).expect("cma");
                }),
            );
        }
        row(
            "cma call/4K",
            time(budget, || {
                for p in 0..pages {
                    let (a, b) = (p * PAGE, ((p + 1) * PAGE).min(size));
                    let s = [Span {
                        addr: remote + a as u64,
                        len: (b - a) as u64,
                    }];
                    cma::read(pid, &mut dst[a..b], &s).expect("cma");
                }
            }),
        );
    }
    println!("# load after {}", load());
    drop(kid.stdin.take());
    let _ = kid.wait();
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
