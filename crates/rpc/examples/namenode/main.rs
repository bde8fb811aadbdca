//! The namenode example service and a load generator with the operations of
//! Hadoop's `NNThroughputBenchmark` (create, mkdirs, open, fileStatus, rename,
//! delete), run in that order, each by `--threads` threads with their own
//! connection and directory, synchronously (one call at a time per thread), through
//! the typed client stub that `weft_rpc::service!` generates.
//!
//! ```text
//! cargo run --release -p weft-rpc --example namenode -- --link shm --threads 4 --files 2000
//! cargo run --release -p weft-rpc --example namenode -- --serve 127.0.0.1:8020     # server only
//! cargo run --release -p weft-rpc --example namenode -- --server 127.0.0.1:8020    # load only
//! ```
//!
//! Output follows NNThroughputBenchmark's per-operation stats block.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
#[allow(dead_code)] // shared with weft-rpc's tests and the fuzz target (fuzz_calls)
mod service;

use service::{NamenodeClient, NamenodeServer, Namespace, Op, Workload};
use weft_rpc::{Client, ClientConfig, LinkKind, Progress, Server, ServerConfig};

struct Opts {
    link: LinkKind,
    threads: usize,
    files: u64,
    ops: Vec<Op>,
    serve: Option<SocketAddr>,
    server: Option<SocketAddr>,
    clusters: usize,
}

const USAGE: &str = "usage: namenode [--link udp|shm] [--threads N] [--files N] [--clusters N] \
                     [--op NAME|all] [--serve IP:PORT | --server IP:PORT]";

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        link: LinkKind::Shm,
        threads: 2,
        files: 1000,
        ops: Op::ALL.to_vec(),
        serve: None,
        server: None,
        clusters: 1,
    };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut v = || a.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--link" => {
                o.link = match v()?.as_str() {
                    "udp" => LinkKind::Udp,
                    "shm" => LinkKind::Shm,
                    x => return Err(format!("--link: unknown link {x:?} (udp or shm)")),
                }
            }
            "--threads" => o.threads = v()?.parse().map_err(|e| format!("{e}"))?,
            "--files" => o.files = v()?.parse().map_err(|e| format!("{e}"))?,
            "--clusters" => o.clusters = v()?.parse().map_err(|e| format!("{e}"))?,
            "--op" => {
                let s = v()?;
                if s != "all" {
                    o.ops = vec![Op::parse(&s).ok_or(format!("unknown op {s}"))?];
                }
            }
            "--serve" | "--server" => {
                let s = v()?;
                let at = s
                    .parse()
                    .map_err(|_| format!("{k}: bad address {s:?}: expected IP:PORT"))?;
                if k == "--serve" {
                    o.serve = Some(at);
                } else {
                    o.server = Some(at);
                }
            }
            x => return Err(format!("unknown option {x:?}")),
        }
    }
    Ok(o)
}

fn start_server(o: &Opts, at: SocketAddr) -> Result<Server, weft_rpc::Status> {
    let mut cfg = ServerConfig::new(o.link);
    cfg.device.progress = Progress::Inline;
    cfg.clusters = o.clusters;
    Server::start(Arc::new(NamenodeServer::new(Namespace::default())), cfg, at)
}

/// One thread's share of operation `op`: `files` calls on its own directory.
fn run_op(nn: &NamenodeClient, w: &Workload, op: Op, files: u64) -> Result<Duration, String> {
    let t = Instant::now();
    let fail = |e: &dyn std::fmt::Debug| format!("{} failed: {e:?}", op.name());
    for n in 0..files {
        match op {
            Op::Create => {
                nn.create(w.file(n), 3, 128 << 20, true)
                    .wait()
                    .map_err(|e| fail(&e))?
                    .map_err(|e| fail(&e))?;
            }
            Op::Mkdirs => {
                nn.mkdirs(format!("{}/dir{n:08}", w.dir))
                    .wait()
                    .map_err(|e| fail(&e))?
                    .map_err(|e| fail(&e))?;
            }
            Op::Open => {
                nn.get_block_locations(w.file(n), 0, 1 << 30)
                    .wait()
                    .map_err(|e| fail(&e))?
                    .map_err(|e| fail(&e))?;
            }
            Op::FileStatus => {
                nn.get_file_status(w.file(n))
                    .wait()
                    .map_err(|e| fail(&e))?
                    .map_err(|e| fail(&e))?;
            }
            Op::Rename => {
                nn.rename(w.file(n), w.renamed(n))
                    .wait()
                    .map_err(|e| fail(&e))?
                    .map_err(|e| fail(&e))?;
            }
            Op::Delete => {
                nn.delete(w.renamed(n), false)
                    .wait()
                    .map_err(|e| fail(&e))?
                    .map_err(|e| fail(&e))?;
            }
        }
    }
    Ok(t.elapsed())
}

fn main() -> std::process::ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("namenode: {e}");
            eprintln!("{USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(o) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("namenode: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(o: Opts) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(at) = o.serve {
        let s = start_server(&o, at)?;
        eprintln!("namenode serving on {} ({:?})", s.local_addr(), o.link);
        loop {
            std::thread::park();
        }
    }
    let local = match o.server {
        Some(_) => None,
        None => Some(start_server(&o, "127.0.0.1:0".parse()?)?),
    };
    let at = o
        .server
        .or(local.as_ref().map(Server::local_addr))
        .ok_or("no server")?;
    let clients: Vec<(NamenodeClient, Workload)> = (0..o.threads)
        .map(|t| -> Result<_, weft_rpc::Status> {
            let mut cfg = ClientConfig::new(o.link);
            cfg.device.progress = Progress::Inline;
            cfg.default_timeout = Some(Duration::from_secs(10));
            let nn = NamenodeClient::new(Client::connect(at, cfg)?);
            let w = Workload::new(std::process::id() as usize % 1000 * 100 + t);
            nn.mkdirs(w.dir.clone())
                .wait()?
                .map_err(|e| weft_rpc::Status::internal(format!("{e:?}")))?;
            Ok((nn, w))
        })
        .collect::<Result<_, _>>()?;
    for &op in &o.ops {
        // Open, fileStatus and rename need the files: create them untimed when
        // the run does not include create.
        if !o.ops.contains(&Op::Create) && matches!(op, Op::Open | Op::FileStatus | Op::Rename) {
            for (nn, w) in &clients {
                run_op(nn, w, Op::Create, o.files)?;
            }
        }
        let t = Instant::now();
        let times: Vec<Result<Duration, String>> = std::thread::scope(|s| {
            let hs: Vec<_> = clients
                .iter()
                .map(|(nn, w)| s.spawn(move || run_op(nn, w, op, o.files)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
                .collect()
        });
        let wall = t.elapsed().as_secs_f64();
        let mut total = 0.0;
        for r in times {
            total += r?.as_secs_f64();
        }
        let n = o.files * o.threads as u64;
        println!("--- {} stats  ---", op.name());
        println!("# operations: {n}");
        println!("Elapsed Time: {:.0} ms", wall * 1e3);
        println!(" Ops per sec: {:.0}", n as f64 / wall);
        println!("Average Time: {:.1} us", total / n as f64 * 1e6);
    }
    if let Some(s) = &local {
        for m in s.metrics().snapshot().values().filter(|m| m.calls > 0) {
            println!(
                "server {:<20} calls {:>8}  errors {:>3}  p50 {:>6.1} us  p99 {:>6.1} us",
                m.name,
                m.calls,
                m.calls - m.ok,
                m.latency.percentile(50.0).unwrap_or_default().as_secs_f64() * 1e6,
                m.latency.percentile(99.0).unwrap_or_default().as_secs_f64() * 1e6
            );
        }
    }
    Ok(())
}
