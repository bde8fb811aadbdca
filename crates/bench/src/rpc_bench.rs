//! `weft rpc-bench`: weft-rpc throughput and latency beside gRPC (tonic) in the same
//! run.
//!
//! Workloads: the null RPC (a `--size`-byte payload echoed back, 16–32 B by
//! default) and the metadata mix of the namenode example service
//! (weft-rpc's namenode example, [`crate::namenode`]: getFileStatus, getBlockLocations, create, rename,
//! delete). Each configuration runs `--clients` client threads (weft: one
//! connection each, direct completion processing, inline progress; gRPC: one HTTP/2
//! channel each on a 2-worker tokio runtime) that keep `--outstanding` calls in
//! flight per client, for `--seconds` after `--warmup`. Every call's latency is
//! recorded; percentiles are exact (nearest rank).
//!
//! `--local` runs the server as a child process of this binary on this host (one per
//! link and cluster count, and with `--baseline grpc` one gRPC server over loopback
//! TCP and one over a unix domain socket, the kernel's cheapest stream between two
//! processes on a host and so gRPC's counterpart of weft's shm link). The gRPC
//! server runs the *same* service object: one gRPC method whose request is the weft
//! method id and payload, with a bytes codec (no protobuf), on a 2-worker tokio
//! runtime.
//!
//! `--rounds N` measures every configuration N times, alternating the systems within
//! each round (gRPC tcp, gRPC unix, weft …, then again), and prints the median of
//! each with its min–max spread: one sample of each system never stands against the
//! best of several of another. Every row carries the CPU time of the client process
//! and (with `--local`) of its server over the measured seconds, per call, and calls
//! per CPU-second of both, so a spinning server shows beside a sleeping one.

use crate::namenode::{NamenodeServer, Namespace, Workload};
use crate::perf::local::{announce_ready, LocalServer};
use crate::perf::stats::percentile;
use anyhow::{bail, Context as _};
use serde::Serialize;
use std::collections::HashMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_rpc::{
    Batching, CallContext, Client, ClientConfig, Exec, IdleSpin, LinkKind, Method, Mode, Progress,
    Server, ServerConfig, Service, Status,
};

/// The null method's id.
pub const NULL: u32 = 1;

/// Arguments of `weft rpc-bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON object per configuration on stdout (the ratio table goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Run the servers on this host as child processes.
    #[arg(long)]
    pub local: bool,
    /// Links for weft: udp, shm (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "shm,udp")]
    pub link: Vec<String>,
    /// Also run the same service in gRPC (tonic), over loopback TCP and over a unix
    /// domain socket: `grpc`.
    #[arg(long)]
    pub baseline: Option<String>,
    /// Measure every configuration this many times, the systems alternating within
    /// each round; the summary gives medians and min–max.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Client threads (connections).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub clients: Vec<usize>,
    /// Calls in flight per client.
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    pub outstanding: Vec<usize>,
    /// Null-RPC payload bytes.
    #[arg(long, value_delimiter = ',', default_value = "32")]
    pub size: Vec<usize>,
    /// Workloads: null, metadata, sizes (weft only: null calls cycling through every
    /// `--size` on each connection).
    #[arg(long, value_delimiter = ',', default_value = "null,metadata")]
    pub mix: Vec<String>,
    /// weft server clusters.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub clusters: Vec<usize>,
    /// weft client batching: off (a message per call), adaptive (the default: calls
    /// leave at once while nothing is unanswered and share messages while something
    /// is), on (calls always wait for a full batch or a waiting caller).
    #[arg(long, value_delimiter = ',', default_value = "adaptive")]
    pub batch: Vec<String>,
    /// weft client completion processing (DaRPC §4.3): direct, dispatched.
    #[arg(long, value_delimiter = ',', default_value = "direct")]
    pub mode: Vec<String>,
    /// Measured seconds per configuration.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Unmeasured seconds before each configuration.
    #[arg(long, default_value_t = 0.2)]
    pub warmup: f64,
    /// A running weft server (`weft rpc-bench --serve weft`) instead of `--local`.
    #[arg(long)]
    pub server: Option<SocketAddr>,
    /// A running gRPC server (`weft rpc-bench --serve grpc`) instead of `--local`.
    #[arg(long)]
    pub grpc_server: Option<SocketAddr>,
    /// Run only a server instead of benchmarking: weft or grpc. It prints a ready line
    /// with its port; point `--server` or `--grpc-server` of another run at it.
    #[arg(long, value_name = "SYSTEM")]
    pub serve: Option<String>,
    /// With `--serve`: the server's TCP port (0: any).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// With `--serve grpc`: listen on this unix domain socket instead of TCP (the
    /// ready line then says port 0).
    #[arg(long)]
    pub unix: Option<std::path::PathBuf>,
    /// weft's adaptive choices (issue 16): `on` (the default: learned idle spins,
    /// inline and rendezvous sizes from measured costs) or `off` (the constants
    /// before: a 50 µs idle spin, the protocol's limits as thresholds). Both the
    /// client and the `--local` server.
    #[arg(long, default_value = "on")]
    pub adapt: String,
    /// weft progress of client and server: inline (each poller runs the engine) or
    /// thread (an engine thread per device; the server heads block on completion
    /// channels).
    #[arg(long, default_value = "inline")]
    pub progress: String,
    /// weft receive buffer bytes, client and server (larger messages go by
    /// rendezvous).
    #[arg(long, default_value_t = 4096)]
    pub buffer: usize,
    /// Instead of calls: connect one client per `--clients` to each weft server,
    /// make 100 calls, then measure the CPU of both processes over this many idle
    /// seconds.
    #[arg(long)]
    pub idle: Option<f64>,
    /// weft clients sleep this many µs before each call (sparse load: with
    /// `--outstanding 1`, one call per pause plus round trip).
    #[arg(long, default_value_t = 0)]
    pub pace: u64,
}

/// weft's settings shared by client and server.
#[derive(Debug, Clone, Copy)]
struct Knobs {
    adapt: bool,
    thread: bool,
    buffer: usize,
    pace: Duration,
    /// `--size`, for `--mix sizes`.
    sizes: &'static [usize],
}

impl Knobs {
    fn of(args: &Args) -> anyhow::Result<Knobs> {
        let adapt = match args.adapt.as_str() {
            "on" => true,
            "off" => false,
            a => bail!("unknown --adapt {a:?} (on or off)"),
        };
        let thread = match args.progress.as_str() {
            "inline" => false,
            "thread" => true,
            p => bail!("unknown --progress {p:?} (inline or thread)"),
        };
        Ok(Knobs {
            adapt,
            thread,
            buffer: args.buffer,
            pace: Duration::from_micros(args.pace),
            // Once per run; the process ends soon after.
            sizes: Box::leak(args.size.clone().into_boxed_slice()),
        })
    }

    fn server(&self, cfg: &mut ServerConfig) {
        cfg.device.progress = self.progress();
        cfg.buffer_size = self.buffer;
        cfg.adaptive_thresholds = self.adapt;
        if !self.adapt {
            cfg.idle_spin = IdleSpin::FIXED_BEFORE;
        }
    }

    fn client(&self, cfg: &mut ClientConfig) {
        cfg.device.progress = self.progress();
        cfg.buffer_size = self.buffer;
        cfg.adaptive_thresholds = self.adapt;
        if !self.adapt {
            cfg.idle_spin = IdleSpin::FIXED_BEFORE;
        }
    }

    fn progress(&self) -> Progress {
        if self.thread {
            Progress::Thread
        } else {
            Progress::Inline
        }
    }
}

/// One configuration's result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub system: &'static str,
    pub link: String,
    pub mix: String,
    pub clients: usize,
    pub outstanding: usize,
    pub size: usize,
    pub clusters: usize,
    /// weft: the client's batching policy (off, adaptive, on); gRPC: "-".
    pub batch: &'static str,
    /// Whether calls may share a message (older rows carry only this: on or off).
    pub batching: bool,
    /// weft: direct or dispatched completion processing; gRPC: "-".
    pub mode: String,
    pub calls: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    /// Which of `--rounds` this is (0-based).
    pub round: usize,
    /// weft: `--adapt` (on or off); gRPC: "-".
    pub adapt: String,
    /// weft: `--pace` (µs before each call); gRPC: 0.
    pub pace_us: u64,
    /// CPU µs per call of the client process over the measured seconds.
    pub cpu_client_us_per_call: Option<f64>,
    /// The same of the server process (`--local` only).
    pub cpu_server_us_per_call: Option<f64>,
    /// Calls per CPU-second of both processes (the client's alone without
    /// `--local`).
    pub calls_per_cpu_s: Option<f64>,
}

/// The service both servers run: the null method (echo) and the namenode.
#[derive(Debug)]
pub struct BenchService {
    nn: NamenodeServer<Namespace>,
}

impl BenchService {
    pub fn new() -> BenchService {
        BenchService {
            nn: NamenodeServer::new(Namespace::default()),
        }
    }
}

impl Default for BenchService {
    fn default() -> Self {
        BenchService::new()
    }
}

impl Service for BenchService {
    fn methods(&self) -> Vec<Method> {
        let mut m = self.nn.methods();
        m.push(Method {
            id: NULL,
            name: "null".into(),
            exec: Exec::InPlace,
        });
        m
    }

    fn call(&self, cx: &CallContext<'_>, req: &[u8], resp: &mut Vec<u8>) -> Result<(), Status> {
        if cx.method() == NULL {
            resp.extend_from_slice(req);
            return Ok(());
        }
        self.nn.call(cx, req, resp)
    }
}

fn link_kind(s: &str) -> anyhow::Result<LinkKind> {
    match s {
        "udp" => Ok(LinkKind::Udp),
        "shm" => Ok(LinkKind::Shm),
        _ => bail!("unknown link {s:?} (udp or shm)"),
    }
}

/// The weft server of the benchmark: inline progress (each head runs its device's
/// engine), 64-deep rings.
/// A benchmark client's configuration: `knobs`, direct or dispatched, a 64-slot ring,
/// a 10 s default timeout.
fn bench_client(kind: LinkKind, knobs: Knobs, dispatched: bool) -> ClientConfig {
    let mut cfg = ClientConfig::new(kind);
    knobs.client(&mut cfg);
    cfg.mode = if dispatched {
        Mode::Dispatched
    } else {
        Mode::Direct
    };
    cfg.ring = 64;
    cfg.default_timeout = Some(Duration::from_secs(10));
    cfg
}

fn weft_server_config(link: LinkKind, clusters: usize, knobs: Knobs) -> ServerConfig {
    let mut cfg = ServerConfig::new(link);
    knobs.server(&mut cfg);
    cfg.clusters = clusters;
    cfg.ring = 64;
    cfg.workers = 1;
    cfg.max_in_flight = 1 << 16;
    cfg
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(what) = args.serve.as_deref() {
        return serve(what, &args);
    }
    if !args.local && args.server.is_none() && args.grpc_server.is_none() {
        bail!("give --local (servers on this host) or --server / --grpc-server");
    }
    let mut rows = Vec::new();
    let emit = |r: &Row| -> anyhow::Result<()> {
        if args.json {
            println!("{}", serde_json::to_string(r)?);
        } else {
            eprintln!(
                "[round {}] {} {:>10.0} ops/s  p50 {:>8.1} us  p99 {:>8.1} us  {:>8.0} calls/CPU-s",
                r.round,
                variant(r),
                r.ops_per_s,
                r.p50_us,
                r.p99_us,
                r.calls_per_cpu_s.unwrap_or(0.0)
            );
        }
        Ok(())
    };
    let plan = |mixes: &[String]| -> Vec<(String, usize, usize, usize)> {
        let mut v = Vec::new();
        for mix in mixes {
            let sizes: Vec<usize> = if mix == "null" {
                args.size.clone()
            } else {
                vec![0]
            };
            for &size in &sizes {
                for &clients in &args.clients {
                    for &outstanding in &args.outstanding {
                        v.push((mix.clone(), clients, outstanding, size));
                    }
                }
            }
        }
        v
    };
    for m in &args.mix {
        if m != "null" && m != "metadata" && m != "sizes" {
            bail!("unknown mix {m:?} (null, metadata or sizes)");
        }
    }
    let secs = Duration::from_secs_f64(args.seconds);
    let warm = Duration::from_secs_f64(args.warmup);
    let grpc_on = args.baseline.as_deref() == Some("grpc") || args.grpc_server.is_some();
    if let Some(b) = args.baseline.as_deref().filter(|b| *b != "grpc") {
        bail!("unknown baseline {b:?} (grpc)");
    }
    if grpc_on && args.mix.iter().any(|m| m == "sizes") {
        bail!("--mix sizes is weft only (no --baseline / --grpc-server)");
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    // Every server first (weft per link and cluster count, and gRPC), so each
    // workload is measured on all systems back to back: a shared machine's load
    // drifts over minutes, and neighbours in time see the same load.
    let mut children = Vec::new();
    let mut pids: Vec<Option<u32>> = vec![None];
    let mut weft_servers = Vec::new();
    for link in &args.link {
        let kind = link_kind(link)?;
        for &clusters in &args.clusters {
            let addr = match args.server {
                Some(a) => a,
                None => {
                    let child = LocalServer::spawn(
                        &[
                            "rpc-bench".into(),
                            "--serve".into(),
                            "weft".into(),
                            "--link".into(),
                            OsString::from(link),
                            "--clusters".into(),
                            OsString::from(clusters.to_string()),
                            "--adapt".into(),
                            OsString::from(&args.adapt),
                            "--progress".into(),
                            OsString::from(&args.progress),
                            "--buffer".into(),
                            OsString::from(args.buffer.to_string()),
                        ],
                        Duration::from_secs(20),
                    )?;
                    let a = SocketAddr::from(([127, 0, 0, 1], child.port));
                    pids.push(child.pid());
                    children.push(child);
                    a
                }
            };
            weft_servers.push((
                link.clone(),
                kind,
                clusters,
                addr,
                *pids.last().unwrap_or(&None),
            ));
        }
    }
    let knobs = Knobs::of(&args)?;
    if let Some(idle) = args.idle {
        let secs = Duration::from_secs_f64(idle);
        let clients = args.clients.first().copied().unwrap_or(1);
        for (link, kind, _, addr, pid) in &weft_servers {
            for mode in &args.mode {
                let dispatched = mode == "dispatched";
                let (client, server) =
                    idle_run(*kind, *addr, *pid, dispatched, knobs, clients, secs)
                        .with_context(|| format!("weft {link} idle"))?;
                let row = IdleRow {
                    link: link.clone(),
                    mode: mode.clone(),
                    adapt: args.adapt.clone(),
                    progress: args.progress.clone(),
                    clients,
                    seconds: idle,
                    client_cores: client,
                    server_cores: server,
                };
                if args.json {
                    println!("{}", serde_json::to_string(&row)?);
                }
                eprintln!(
                    "idle {link} {mode} adapt {} progress {} x{clients}: client {:.2} % of a core, server {} % of a core",
                    args.adapt,
                    args.progress,
                    client * 100.0,
                    server.map_or("-".into(), |s| format!("{:.2}", s * 100.0)),
                );
            }
        }
        return Ok(());
    }
    // gRPC servers: loopback TCP (or the given --grpc-server), and with --local one
    // on a unix domain socket.
    let mut grpc_targets: Vec<(GrpcTarget, Option<u32>)> = Vec::new();
    let uds_dir = std::env::temp_dir().join(format!("weft-rpc-bench-{}", std::process::id()));
    if grpc_on {
        match args.grpc_server {
            Some(a) => grpc_targets.push((GrpcTarget::Tcp(a), None)),
            None => {
                let child = LocalServer::spawn(
                    &["rpc-bench".into(), "--serve".into(), "grpc".into()],
                    Duration::from_secs(20),
                )?;
                let a = SocketAddr::from(([127, 0, 0, 1], child.port));
                grpc_targets.push((GrpcTarget::Tcp(a), child.pid()));
                children.push(child);
                std::fs::create_dir_all(&uds_dir)?;
                let path = uds_dir.join("grpc.sock");
                let child = LocalServer::spawn(
                    &[
                        "rpc-bench".into(),
                        "--serve".into(),
                        "grpc".into(),
                        "--unix".into(),
                        path.clone().into_os_string(),
                    ],
                    Duration::from_secs(20),
                )?;
                grpc_targets.push((GrpcTarget::Unix(path), child.pid()));
                children.push(child);
            }
        }
    }
    for round in 0..args.rounds {
        for (mix, clients, outstanding, size) in plan(&args.mix) {
            for (target, pid) in &grpc_targets {
                let cpu = Arc::new(CpuWindow::new(*pid));
                let r = grpc_run(target, &mix, clients, outstanding, size, warm, secs, &cpu)
                    .with_context(|| {
                        format!("grpc {} {mix} {clients}x{outstanding}", target.link())
                    })?;
                let mut row = row(
                    "grpc",
                    target.link(),
                    &mix,
                    clients,
                    outstanding,
                    size,
                    1,
                    None,
                    r,
                );
                row.round = round;
                emit(&row)?;
                rows.push(row);
            }
            for (link, kind, clusters, addr, pid) in &weft_servers {
                for b in &args.batch {
                    for mode in &args.mode {
                        let batching: Batching = b.parse().map_err(anyhow::Error::msg)?;
                        let dispatched = match mode.as_str() {
                            "direct" => false,
                            "dispatched" => true,
                            m => bail!("unknown mode {m:?} (direct or dispatched)"),
                        };
                        let cpu = Arc::new(CpuWindow::new(*pid));
                        let r = weft_run(
                            *kind,
                            *addr,
                            &mix,
                            (clients, outstanding, size),
                            (batching, dispatched),
                            knobs,
                            warm,
                            secs,
                            &cpu,
                        )
                        .with_context(|| format!("weft {link} {mix} {clients}x{outstanding}"))?;
                        let mut row = row(
                            "weft",
                            link,
                            &mix,
                            clients,
                            outstanding,
                            size,
                            *clusters,
                            Some(batching),
                            r,
                        );
                        row.mode = mode.clone();
                        row.adapt = args.adapt.clone();
                        row.pace_us = args.pace;
                        row.round = round;
                        emit(&row)?;
                        rows.push(row);
                    }
                }
            }
        }
    }
    drop(children);
    let _ = std::fs::remove_dir_all(&uds_dir);
    let med = medians(&rows);
    print_medians(&med, args.rounds);
    ratios(&med);
    Ok(())
}

/// What `--idle` measured: the CPU of both processes while connected and idle.
#[derive(Debug, Clone, Serialize)]
struct IdleRow {
    link: String,
    mode: String,
    adapt: String,
    progress: String,
    clients: usize,
    seconds: f64,
    /// CPU of the client process over the idle seconds, in cores.
    client_cores: f64,
    /// The same of the server process (`--local` only).
    server_cores: Option<f64>,
}

/// Connect `clients` clients, make 100 calls on each, let everything settle, then
/// read both processes' CPU clocks across `secs` of idleness. In cores.
fn idle_run(
    kind: LinkKind,
    addr: SocketAddr,
    server_pid: Option<u32>,
    dispatched: bool,
    knobs: Knobs,
    clients: usize,
    secs: Duration,
) -> anyhow::Result<(f64, Option<f64>)> {
    use crate::perf::cpu::process_cpu;
    let mut conns = Vec::new();
    for _ in 0..clients {
        let c = Client::connect(addr, bench_client(kind, knobs, dispatched))?;
        for _ in 0..100 {
            c.call(NULL, b"before the idle seconds").wait()?;
        }
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(200));
    let (c0, s0) = (
        process_cpu(None),
        server_pid.and_then(|p| process_cpu(Some(p))),
    );
    let t0 = Instant::now();
    std::thread::sleep(secs);
    let (c1, s1) = (
        process_cpu(None),
        server_pid.and_then(|p| process_cpu(Some(p))),
    );
    let wall = t0.elapsed().as_secs_f64();
    let cores =
        |a: Option<Duration>, b: Option<Duration>| Some(b?.saturating_sub(a?).as_secs_f64() / wall);
    drop(conns);
    Ok((cores(c0, c1).unwrap_or(0.0), cores(s0, s1)))
}

/// Where a gRPC client connects.
#[derive(Debug, Clone)]
enum GrpcTarget {
    Tcp(SocketAddr),
    Unix(std::path::PathBuf),
}

impl GrpcTarget {
    fn link(&self) -> &'static str {
        match self {
            GrpcTarget::Tcp(_) => "tcp",
            GrpcTarget::Unix(_) => "unix",
        }
    }
}

/// The CPU clocks of this process and the server around the measured seconds: the
/// runner calls [`CpuWindow::start`] when the measured window opens and
/// [`CpuWindow::stop`] when it closes (once each; later calls are ignored).
#[derive(Debug)]
struct CpuWindow {
    peer: Option<u32>,
    start: std::sync::OnceLock<crate::perf::cpu::CpuStart>,
    end: std::sync::OnceLock<(Duration, Option<Duration>)>,
}

impl CpuWindow {
    fn new(peer: Option<u32>) -> CpuWindow {
        CpuWindow {
            peer,
            start: std::sync::OnceLock::new(),
            end: std::sync::OnceLock::new(),
        }
    }
    fn start(&self) {
        self.start
            .get_or_init(|| crate::perf::cpu::CpuStart::now(self.peer));
    }
    fn stop(&self) {
        use crate::perf::cpu::process_cpu;
        self.end.get_or_init(|| {
            (
                process_cpu(None).unwrap_or_default(),
                self.peer.and_then(|p| process_cpu(Some(p))),
            )
        });
    }
    /// A sampler thread that opens the window at `from` and closes it at `until`.
    fn sample(self: &Arc<Self>, from: Instant, until: Instant) -> std::thread::JoinHandle<()> {
        let w = Arc::clone(self);
        std::thread::spawn(move || {
            std::thread::sleep(from.saturating_duration_since(Instant::now()));
            w.start();
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            w.stop();
        })
    }
    /// Per-call figures for `calls` calls, if both ends were read.
    fn per_call(&self, calls: u64) -> Option<crate::perf::cpu::CpuUse> {
        let s = self.start.get()?;
        let &(c1, s1) = self.end.get()?;
        s.until(c1, s1, calls)
    }
}

/// The key a configuration is summarised under: everything but the round.
type ConfigKey = (
    &'static str,
    String,
    String,
    usize,
    usize,
    usize,
    usize,
    &'static str,
    String,
);

fn config_key(r: &Row) -> ConfigKey {
    (
        r.system,
        r.link.clone(),
        r.mix.clone(),
        r.clients,
        r.outstanding,
        r.size,
        r.clusters,
        r.batch,
        r.mode.clone(),
    )
}

/// The median of `v` (the mean of the middle two for an even count) and its min and
/// max; `None` for no values.
pub fn median_spread(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let m = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some((m, s[0], s[n - 1]))
}

/// One configuration across its rounds: the median row (each figure the median of
/// its own rounds) and the throughput's min and max.
#[derive(Debug, Clone)]
struct Summary {
    row: Row,
    rounds: usize,
    ops_min: f64,
    ops_max: f64,
    p50_min: f64,
    p50_max: f64,
}

fn medians(rows: &[Row]) -> Vec<Summary> {
    let mut keys: Vec<ConfigKey> = Vec::new();
    let mut by: HashMap<ConfigKey, Vec<&Row>> = HashMap::new();
    for r in rows {
        let k = config_key(r);
        if !by.contains_key(&k) {
            keys.push(k.clone());
        }
        by.entry(k).or_default().push(r);
    }
    keys.into_iter()
        .filter_map(|k| {
            let rs = &by[&k];
            let col = |f: &dyn Fn(&Row) -> Option<f64>| {
                median_spread(&rs.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            let (ops, ops_min, ops_max) = col(&|r| Some(r.ops_per_s))?;
            let (p50, p50_min, p50_max) = col(&|r| Some(r.p50_us))?;
            let mut row = rs[0].clone();
            row.ops_per_s = ops;
            row.p50_us = p50;
            row.p99_us = col(&|r| Some(r.p99_us)).map_or(0.0, |m| m.0);
            row.mean_us = col(&|r| Some(r.mean_us)).map_or(0.0, |m| m.0);
            row.calls_per_cpu_s = col(&|r| r.calls_per_cpu_s).map(|m| m.0);
            row.cpu_client_us_per_call = col(&|r| r.cpu_client_us_per_call).map(|m| m.0);
            row.cpu_server_us_per_call = col(&|r| r.cpu_server_us_per_call).map(|m| m.0);
            Some(Summary {
                row,
                rounds: rs.len(),
                ops_min,
                ops_max,
                p50_min,
                p50_max,
            })
        })
        .collect()
}

/// What a row measured, in words: system, link, mix, load, size, batching, mode.
fn variant(r: &Row) -> String {
    format!(
        "{:>5} {:>4} {:>8} clients {:>2} outstanding {:>3} size {:>3} clusters {} batch {:<8} {:<10}",
        r.system,
        r.link,
        r.mix,
        r.clients,
        r.outstanding,
        r.size,
        r.clusters,
        r.batch,
        r.mode,
    )
}

fn print_medians(med: &[Summary], rounds: usize) {
    eprintln!(
        "\nmedians of {rounds} alternating round(s), [min–max]; CPU per call of client + server:"
    );
    for s in med {
        let r = &s.row;
        eprintln!(
            "{} {:>9.0} ops/s [{:.0}–{:.0}]  p50 {:>7.1} us [{:.1}–{:.1}]  p99 {:>7.1} us  CPU {} + {} us/call  {} calls/CPU-s  (n={})",
            variant(r),
            r.ops_per_s,
            s.ops_min,
            s.ops_max,
            r.p50_us,
            s.p50_min,
            s.p50_max,
            r.p99_us,
            r.cpu_client_us_per_call.map_or("-".into(), |c| format!("{c:.1}")),
            r.cpu_server_us_per_call.map_or("-".into(), |c| format!("{c:.1}")),
            r.calls_per_cpu_s.map_or("-".into(), |c| format!("{c:.0}")),
            s.rounds
        );
    }
}

/// What a run measured.
#[derive(Debug, Default)]
struct Measured {
    calls: u64,
    seconds: f64,
    lat_ns: Vec<f64>,
    /// CPU of both processes over the measured seconds, per call.
    cpu: Option<crate::perf::cpu::CpuUse>,
}

#[allow(clippy::too_many_arguments)]
fn row(
    system: &'static str,
    link: &str,
    mix: &str,
    clients: usize,
    outstanding: usize,
    size: usize,
    clusters: usize,
    batching: Option<Batching>,
    mut m: Measured,
) -> Row {
    m.lat_ns.sort_by(f64::total_cmp);
    let (p50, p99, mean) = if m.lat_ns.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            percentile(&m.lat_ns, 50.0) / 1e3,
            percentile(&m.lat_ns, 99.0) / 1e3,
            m.lat_ns.iter().sum::<f64>() / m.lat_ns.len() as f64 / 1e3,
        )
    };
    Row {
        system,
        link: link.to_string(),
        mix: mix.to_string(),
        clients,
        outstanding,
        size,
        clusters,
        batch: batching.map_or("-", Batching::name),
        batching: batching.is_some_and(|b| b != Batching::Off),
        mode: if system == "weft" { "direct" } else { "-" }.to_string(),
        calls: m.calls,
        seconds: m.seconds,
        ops_per_s: m.calls as f64 / m.seconds.max(1e-9),
        p50_us: p50,
        p99_us: p99,
        mean_us: mean,
        round: 0,
        adapt: "-".to_string(),
        pace_us: 0,
        cpu_client_us_per_call: m.cpu.map(|c| c.cpu_client_us_per_op),
        cpu_server_us_per_call: m.cpu.and_then(|c| c.cpu_server_us_per_op),
        calls_per_cpu_s: m.cpu.map(|c| c.ops_per_cpu_s),
    }
}

/// The ratio table: each weft median against the gRPC medians (tcp and unix) of the
/// same workload and concurrency.
fn ratios(med: &[Summary]) {
    let rows: Vec<&Row> = med.iter().map(|s| &s.row).collect();
    for glink in ["tcp", "unix"] {
        let grpc: HashMap<(String, usize, usize, usize), &Row> = rows
            .iter()
            .filter(|r| r.system == "grpc" && r.link == glink)
            .map(|r| ((r.mix.clone(), r.clients, r.outstanding, r.size), *r))
            .collect();
        if grpc.is_empty() {
            continue;
        }
        eprintln!("\nweft against gRPC (tonic) over {glink}, same workload and concurrency, same run, medians:");
        eprintln!(
            "{:<4} {:<8} {:>7} {:>11} {:>4} {:>8} {:>8} {:<10} {:>14} {:>14}",
            "link",
            "mix",
            "clients",
            "outstanding",
            "size",
            "clusters",
            "batch",
            "mode",
            "throughput x",
            "p50 latency x"
        );
        for r in rows.iter().filter(|r| r.system == "weft") {
            if let Some(g) = grpc.get(&(r.mix.clone(), r.clients, r.outstanding, r.size)) {
                eprintln!(
                    "{:<4} {:<8} {:>7} {:>11} {:>4} {:>8} {:>8} {:<10} {:>14.1} {:>14.3}",
                    r.link,
                    r.mix,
                    r.clients,
                    r.outstanding,
                    r.size,
                    r.clusters,
                    r.batch,
                    r.mode,
                    r.ops_per_s / g.ops_per_s.max(1e-9),
                    r.p50_us / g.p50_us.max(1e-9)
                );
            }
        }
    }
}

/// The request stream of one client.
struct Requests {
    mix: bool,
    payload: Vec<u8>,
    /// `--mix sizes`: the payload sizes to cycle through on one connection.
    cycle: Vec<usize>,
    work: Workload,
    i: u64,
}

impl Requests {
    fn new(mix: &str, size: usize, client: usize, sizes: &[usize]) -> Requests {
        let cycle: Vec<usize> = if mix == "sizes" {
            sizes.to_vec()
        } else {
            Vec::new()
        };
        let largest = cycle.iter().copied().max().unwrap_or(size);
        Requests {
            mix: mix == "metadata",
            cycle,
            payload: (0..largest).map(|i| i as u8).collect(),
            work: Workload::new(client),
            i: 0,
        }
    }

    /// The setup call (the workload's directory), if any.
    fn setup(&self) -> Option<(u32, Vec<u8>)> {
        self.mix.then(|| {
            (
                weft_rpc::method_id("Namenode", "mkdirs"),
                weft_rpc::codec::to_vec(&(self.work.dir.clone(),)).unwrap_or_default(),
            )
        })
    }

    fn next(&mut self) -> (u32, Vec<u8>) {
        let i = self.i;
        self.i += 1;
        if self.mix {
            self.work.mix_request(i)
        } else if self.cycle.is_empty() {
            (NULL, self.payload.clone())
        } else {
            let n = self.cycle[(i % self.cycle.len() as u64) as usize];
            (NULL, self.payload[..n].to_vec())
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn weft_run(
    kind: LinkKind,
    addr: SocketAddr,
    mix: &str,
    (clients, outstanding, size): (usize, usize, usize),
    (batching, dispatched): (Batching, bool),
    knobs: Knobs,
    warm: Duration,
    secs: Duration,
    cpu: &Arc<CpuWindow>,
) -> anyhow::Result<Measured> {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The client threads and this one: this one times the CPU window.
    let barrier = Arc::new(std::sync::Barrier::new(clients + 1));
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let barrier = Arc::clone(&barrier);
            let mix = mix.to_string();
            std::thread::spawn(move || -> anyhow::Result<Measured> {
                // Dispatched: a dispatcher thread polls (and runs the engine) and
                // this thread sleeps in `take` when it has all its calls out.
                let mut cfg = bench_client(kind, knobs, dispatched);
                cfg.batching = batching;
                cfg.max_batch = 16;
                let client = Client::connect(addr, cfg)?;
                // Each run gets fresh workload directories.
                let mut reqs = Requests::new(&mix, size, run * 1000 + c, knobs.sizes);
                if let Some((m, p)) = reqs.setup() {
                    client.call(m, &p).wait()?;
                }
                barrier.wait();
                let start = Instant::now();
                let from = start + warm;
                let until = from + secs;
                let mut stream = client.stream();
                let mut issued: HashMap<u64, Instant> = HashMap::with_capacity(outstanding * 2);
                let mut out = Measured::default();
                let mut now = Instant::now();
                while now < until {
                    while stream.outstanding() < outstanding {
                        if !knobs.pace.is_zero() {
                            std::thread::sleep(knobs.pace);
                        }
                        let (m, p) = reqs.next();
                        let id = stream.call(m, &p)?;
                        issued.insert(id, Instant::now());
                    }
                    loop {
                        let got = if dispatched && stream.outstanding() >= outstanding {
                            stream.take()
                        } else {
                            stream.poll()
                        };
                        let Some((id, r)) = got else {
                            break;
                        };
                        r.with_context(|| format!("call {id}"))?;
                        now = Instant::now();
                        if let Some(t0) = issued.remove(&id) {
                            if t0 >= from && now <= until {
                                out.calls += 1;
                                out.lat_ns.push(now.duration_since(t0).as_nanos() as f64);
                            }
                        }
                        if stream.outstanding() < outstanding / 2 + 1 {
                            break;
                        }
                    }
                    now = Instant::now();
                }
                while let Some((_, r)) = stream.take() {
                    r?;
                }
                out.seconds = secs.as_secs_f64();
                if std::env::var_os("WEFT_RPC_BENCH_DEBUG").is_some() {
                    eprintln!(
                        "client {c}: {:?}\n{:?}",
                        client.stats(),
                        client.context().stats()
                    );
                }
                Ok(out)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let sampler = cpu.sample(start + warm, start + warm + secs);
    let mut total = Measured::default();
    for h in handles {
        let m = h
            .join()
            .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
        total.calls += m.calls;
        total.seconds = total.seconds.max(m.seconds);
        total.lat_ns.extend(m.lat_ns);
    }
    let _ = sampler.join();
    total.cpu = cpu.per_call(total.calls);
    Ok(total)
}

// ---- gRPC (tonic) --------------------------------------------------------------

mod grpc {
    use super::BenchService;
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};
    use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
    use weft_rpc::{CallContext, Service};

    /// The one method's path.
    pub const PATH: &str = "/weft.Bench/Call";

    /// Messages are raw bytes (the weft method id and payload, as weft sends them).
    #[derive(Debug, Clone, Copy, Default)]
    pub struct BytesCodec;

    #[derive(Debug)]
    pub struct BytesEnc;
    #[derive(Debug)]
    pub struct BytesDec;

    impl Encoder for BytesEnc {
        type Item = Vec<u8>;
        type Error = tonic::Status;
        fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
            use bytes::BufMut;
            dst.put_slice(&item);
            Ok(())
        }
    }

    impl Decoder for BytesDec {
        type Item = Vec<u8>;
        type Error = tonic::Status;
        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
            use bytes::Buf;
            let mut v = vec![0u8; src.remaining()];
            src.copy_to_slice(&mut v);
            Ok(Some(v))
        }
    }

    impl Codec for BytesCodec {
        type Encode = Vec<u8>;
        type Decode = Vec<u8>;
        type Encoder = BytesEnc;
        type Decoder = BytesDec;
        fn encoder(&mut self) -> BytesEnc {
            BytesEnc
        }
        fn decoder(&mut self) -> BytesDec {
            BytesDec
        }
    }

    /// The hand-written equivalent of tonic-build's server glue for one unary
    /// method.
    #[derive(Debug, Clone)]
    pub struct BenchGrpc(pub Arc<BenchService>);

    struct CallSvc(Arc<BenchService>);

    impl tonic::server::UnaryService<Vec<u8>> for CallSvc {
        type Response = Vec<u8>;
        type Future = std::future::Ready<Result<tonic::Response<Vec<u8>>, tonic::Status>>;
        fn call(&mut self, req: tonic::Request<Vec<u8>>) -> Self::Future {
            let b = req.into_inner();
            let r = if b.len() < 4 {
                Err(tonic::Status::invalid_argument("short request"))
            } else {
                let m = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                let mut resp = Vec::new();
                match self.0.call(&CallContext::detached(m), &b[4..], &mut resp) {
                    Ok(()) => Ok(tonic::Response::new(resp)),
                    Err(e) => Err(tonic::Status::internal(e.to_string())),
                }
            };
            std::future::ready(r)
        }
    }

    type BoxFut<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

    impl<B> tower_service::Service<http::Request<B>> for BenchGrpc
    where
        B: http_body::Body + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        type Response = http::Response<tonic::body::Body>;
        type Error = Infallible;
        type Future = BoxFut<Self::Response>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            if req.uri().path() == PATH {
                let svc = Arc::clone(&self.0);
                Box::pin(async move {
                    let mut grpc = tonic::server::Grpc::new(BytesCodec);
                    Ok(grpc.unary(CallSvc(svc), req).await)
                })
            } else {
                Box::pin(
                    async move { Ok(tonic::Status::unimplemented("no such method").into_http()) },
                )
            }
        }
    }
}

fn grpc_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// A tonic connector for a unix domain socket (the URI is ignored).
#[derive(Debug, Clone)]
struct UnixConnector(std::path::PathBuf);

impl tower_service::Service<http::Uri> for UnixConnector {
    type Response = hyper_util::rt::TokioIo<tokio::net::UnixStream>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;
    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, _uri: http::Uri) -> Self::Future {
        let path = self.0.clone();
        Box::pin(async move {
            tokio::net::UnixStream::connect(path)
                .await
                .map(hyper_util::rt::TokioIo::new)
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn grpc_run(
    target: &GrpcTarget,
    mix: &str,
    clients: usize,
    outstanding: usize,
    size: usize,
    warm: Duration,
    secs: Duration,
    cpu: &Arc<CpuWindow>,
) -> anyhow::Result<Measured> {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let rt = grpc_runtime()?;
    rt.block_on(async move {
        let path: http::uri::PathAndQuery = grpc::PATH.parse()?;
        let mut channels = Vec::new();
        for _ in 0..clients {
            let ch = match target {
                GrpcTarget::Tcp(addr) => {
                    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
                        .tcp_nodelay(true)
                        .connect()
                        .await?
                }
                GrpcTarget::Unix(path) => {
                    tonic::transport::Endpoint::from_static("http://localhost")
                        .connect_with_connector(UnixConnector(path.clone()))
                        .await?
                }
            };
            channels.push(ch);
        }
        let start = Instant::now() + Duration::from_millis(50);
        let from = start + warm;
        let until = from + secs;
        let sampler = cpu.sample(from, until);
        let mut tasks = Vec::new();
        for (c, ch) in channels.into_iter().enumerate() {
            for t in 0..outstanding {
                let ch = ch.clone();
                let path = path.clone();
                let mix = mix.to_string();
                // A workload per task: gRPC gives no order between a channel's
                // concurrent calls, so each task runs its own sequence.
                let mut reqs = Requests::new(&mix, size, 500_000 + run * 10_000 + c * 100 + t, &[]);
                tasks.push(tokio::spawn(async move {
                    let mut grpc = tonic::client::Grpc::new(ch);
                    let call = |m: u32, p: Vec<u8>| {
                        let mut b = Vec::with_capacity(4 + p.len());
                        b.extend_from_slice(&m.to_be_bytes());
                        b.extend_from_slice(&p);
                        b
                    };
                    if let Some((m, p)) = reqs.setup() {
                        grpc.ready().await?;
                        grpc.unary(
                            tonic::Request::new(call(m, p)),
                            path.clone(),
                            grpc::BytesCodec,
                        )
                        .await?;
                    }
                    tokio::time::sleep_until(start.into()).await;
                    let mut out = Measured::default();
                    loop {
                        let t0 = Instant::now();
                        if t0 >= until {
                            break;
                        }
                        let (m, p) = reqs.next();
                        grpc.ready().await?;
                        grpc.unary(
                            tonic::Request::new(call(m, p)),
                            path.clone(),
                            grpc::BytesCodec,
                        )
                        .await?;
                        let now = Instant::now();
                        if t0 >= from && now <= until {
                            out.calls += 1;
                            out.lat_ns.push(now.duration_since(t0).as_nanos() as f64);
                        }
                    }
                    out.seconds = secs.as_secs_f64();
                    Ok::<Measured, anyhow::Error>(out)
                }));
            }
        }
        let mut total = Measured::default();
        for t in tasks {
            let m = t.await??;
            total.calls += m.calls;
            total.seconds = total.seconds.max(m.seconds);
            total.lat_ns.extend(m.lat_ns);
        }
        let _ = sampler.join();
        total.cpu = cpu.per_call(total.calls);
        Ok(total)
    })
}

fn serve(what: &str, args: &Args) -> anyhow::Result<()> {
    match what {
        "weft" => {
            let link = args.link.first().map_or("shm", String::as_str);
            let kind = link_kind(link)?;
            let clusters = args.clusters.first().copied().unwrap_or(1);
            let server = Server::start(
                Arc::new(BenchService::new()),
                weft_server_config(kind, clusters, Knobs::of(args)?),
                SocketAddr::from(([127, 0, 0, 1], args.port)),
            )?;
            announce_ready(server.local_addr().port())?;
            loop {
                std::thread::park();
            }
        }
        "grpc" if args.unix.is_some() => {
            let path = args.unix.clone().unwrap_or_default();
            let _ = std::fs::remove_file(&path);
            let rt = grpc_runtime()?;
            rt.block_on(async {
                let listener = tokio::net::UnixListener::bind(&path)
                    .with_context(|| format!("binding {}", path.display()))?;
                announce_ready(0)?;
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
                tonic::transport::Server::builder()
                    .serve_with_incoming(grpc::BenchGrpc(Arc::new(BenchService::new())), incoming)
                    .await?;
                Ok(())
            })
        }
        "grpc" => {
            let rt = grpc_runtime()?;
            rt.block_on(async {
                let incoming = tonic::transport::server::TcpIncoming::bind(SocketAddr::from((
                    [127, 0, 0, 1],
                    args.port,
                )))
                .map_err(|e| anyhow::anyhow!("binding: {e}"))?
                .with_nodelay(Some(true));
                announce_ready(incoming.local_addr()?.port())?;
                tonic::transport::Server::builder()
                    .serve_with_incoming(grpc::BenchGrpc(Arc::new(BenchService::new())), incoming)
                    .await?;
                Ok(())
            })
        }
        other => bail!("unknown server {other:?} (weft or grpc)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median_spread(&[]), None);
        assert_eq!(median_spread(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(median_spread(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(median_spread(&[f64::NAN, 5.0]), Some((5.0, 5.0, 5.0)));
    }

    fn r(system: &'static str, link: &str, round: usize, ops: f64) -> Row {
        let mut row = row(
            system,
            link,
            "null",
            1,
            1,
            32,
            1,
            (system == "weft").then_some(Batching::Adaptive),
            Measured::default(),
        );
        row.round = round;
        row.ops_per_s = ops;
        row.p50_us = 1e6 / ops;
        row
    }

    #[test]
    fn medians_keep_systems_and_links_apart_and_take_each_configs_own_rounds() {
        let rows = vec![
            r("grpc", "tcp", 0, 30.0),
            r("grpc", "unix", 0, 50.0),
            r("weft", "shm", 0, 600.0),
            r("grpc", "tcp", 1, 10.0),
            r("grpc", "unix", 1, 40.0),
            r("weft", "shm", 1, 200.0),
            r("grpc", "tcp", 2, 20.0),
            r("grpc", "unix", 2, 45.0),
            r("weft", "shm", 2, 700.0),
        ];
        let m = medians(&rows);
        let got: Vec<(&str, &str, f64, f64, f64, usize)> = m
            .iter()
            .map(|s| {
                (
                    s.row.system,
                    s.row.link.as_str(),
                    s.row.ops_per_s,
                    s.ops_min,
                    s.ops_max,
                    s.rounds,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("grpc", "tcp", 20.0, 10.0, 30.0, 3),
                ("grpc", "unix", 45.0, 40.0, 50.0, 3),
                ("weft", "shm", 600.0, 200.0, 700.0, 3),
            ]
        );
    }
}
