//! `weft incast`: many senders into one receiver over weft verbs, for the
//! congestion-control measurement of docs/results/incast.md
//! (`scripts/incast.sh` runs it through a bottleneck it builds).
//!
//! - `weft incast server`: one device, one memory region clients may WRITE, and
//!   `--conns` RC connections accepted through the connection manager. It posts
//!   nothing: the engine serves the WRITEs. It exits when every client has
//!   disconnected (or after `--timeout-s`), printing its counters as one JSON line.
//! - `weft incast client --role bulk`: keeps `--depth` WRITEs of `--size` bytes
//!   outstanding from `--start-at-ms` (a wall-clock instant the driver gives every
//!   client, so their runs overlap) for `--seconds`; counts the bytes whose WRITE
//!   completed within that time.
//! - `weft incast client --role probe`: one small WRITE at a time, one every
//!   `--interval-us`, each timed from its post to its completion: the small-message
//!   latency beside the flows.
//!
//! Every process waits on a completion channel (blocking), never busy-polls: 18
//! processes share the machine's cores. Each client prints one JSON line: what it
//! completed, its transport counters (retransmitted packets, timeouts, RTT samples,
//! window decreases) and its QP's congestion window at the end.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context as _};
use serde_json::json;
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionChannel, CompletionQueue, CongestionControl, Context, DelayControl,
    DeviceConfig, Mtu, QpInitAttr, QpState, QpType, QueuePair, SendWr, WaitMode, Waiter, WcStatus,
    WrOp,
};

/// `weft incast`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub role: Role,
}

/// Congestion control of a process's RC QPs, as `--cc` names it (`weft incast`,
/// `weft perf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CcArg {
    /// A fixed window: `max_inflight` PSNs per RC QP (the transport's default).
    Off,
    /// weft-transport's delay-based window (`weft_transport::cc`, after Swift).
    Delay,
}

impl CcArg {
    /// The name `--cc` takes and the JSON rows carry.
    pub fn name(self) -> &'static str {
        match self {
            CcArg::Off => "off",
            CcArg::Delay => "delay",
        }
    }

    /// The transport's setting; `target_us` is the delay controller's target RTT.
    pub fn control(self, target_us: u64) -> CongestionControl {
        match self {
            CcArg::Off => CongestionControl::Off,
            CcArg::Delay => CongestionControl::Delay(DelayControl {
                target_delay_us: target_us,
                ..DelayControl::default()
            }),
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum Role {
    /// The receiver: accepts the senders' connections and serves their WRITEs.
    Server(ServerArgs),
    /// A sender: bulk WRITEs or small timed ones.
    Client(ClientArgs),
}

/// What both roles set up.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Device (`udp:IP:PORT`, `udp`, `shm`, …).
    #[arg(long, default_value = "udp")]
    pub dev: String,
    /// Congestion control of this process's RC QPs: off or delay.
    #[arg(long, value_enum, default_value_t = CcArg::Off)]
    pub cc: CcArg,
    /// The delay controller's target round-trip time, µs.
    #[arg(long, default_value_t = DelayControl::default().target_delay_us)]
    pub target_us: u64,
    /// Path MTU (bytes).
    #[arg(long, default_value_t = 1024)]
    pub mtu: usize,
    /// PSNs in flight cap (the connection manager's default is 64).
    #[arg(long, default_value_t = 64)]
    pub max_inflight: u32,
}

#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub common: Common,
    /// Connection manager address to listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Connections to accept.
    #[arg(long)]
    pub conns: usize,
    /// Bytes of the region clients WRITE into.
    #[arg(long, default_value_t = 1 << 20)]
    pub region: usize,
    /// Give up after this long.
    #[arg(long, default_value_t = 120)]
    pub timeout_s: u64,
}

#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    #[command(flatten)]
    pub common: Common,
    /// The server's connection manager address.
    #[arg(long)]
    pub server: SocketAddr,
    /// bulk or probe.
    #[arg(long, default_value = "bulk")]
    pub role: String,
    /// Bytes per WRITE.
    #[arg(long, default_value_t = 65536)]
    pub size: u32,
    /// WRITEs outstanding (bulk).
    #[arg(long, default_value_t = 4)]
    pub depth: usize,
    /// Length of the measured run.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Start posting at this wall-clock instant (ms since the Unix epoch); 0: at once.
    #[arg(long, default_value_t = 0)]
    pub start_at_ms: u64,
    /// Microseconds between the starts of the probe's WRITEs.
    #[arg(long, default_value_t = 1000)]
    pub interval_us: u64,
    /// A label copied into the output line.
    #[arg(long, default_value = "")]
    pub label: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.role {
        Role::Server(a) => server(a),
        Role::Client(a) => client(a),
    }
}

fn device(c: &Common) -> anyhow::Result<Context> {
    let mut cfg = DeviceConfig::parse(&c.dev).map_err(|e| anyhow!("device {}: {e}", c.dev))?;
    cfg.transport.congestion = c.cc.control(c.target_us);
    Context::open_with(cfg).map_err(|e| anyhow!("opening {}: {e}", c.dev))
}

fn param(c: &Common) -> anyhow::Result<ConnParam> {
    Ok(ConnParam {
        path_mtu: Mtu::from_bytes(c.mtu).ok_or_else(|| anyhow!("--mtu {}", c.mtu))?,
        max_inflight: c.max_inflight,
        ..ConnParam::default()
    })
}

fn server(a: ServerArgs) -> anyhow::Result<()> {
    let ctx = device(&a.common)?;
    let pd = ctx.alloc_pd();
    let mr = pd.alloc_mr(a.region, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let mut private_data = mr.addr().to_be_bytes().to_vec();
    private_data.extend_from_slice(&mr.rkey().to_be_bytes());
    private_data.extend_from_slice(&(a.region as u64).to_be_bytes());
    let p = ConnParam {
        access: Access::REMOTE_WRITE,
        private_data,
        ..param(&a.common)?
    };
    let listener = Listener::bind(&ctx, a.listen).context("listening")?;
    eprintln!(
        "incast server: {} connections on {} (device {})",
        a.conns,
        listener.local_addr()?,
        ctx.local_addr()
    );
    let deadline = Instant::now() + Duration::from_secs(a.timeout_s);
    let cq = CompletionQueue::new(&ctx, 16, None);
    let mut held = Vec::new();
    while held.len() < a.conns {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("only {} of {} clients connected", held.len(), a.conns);
        }
        let req = listener.get_request(left).context("waiting for a client")?;
        let mut qp = pd.create_qp(&cq, &cq, None, QpInitAttr::new(QpType::Rc))?;
        let conn = req.accept(&mut qp, &p)?;
        held.push((qp, conn));
    }
    // The clients disconnect when done; each QP then goes to ERR.
    while Instant::now() < deadline
        && held
            .iter()
            .any(|(qp, _)| qp.query().is_some_and(|(s, _)| s != QpState::Err))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = ctx.stats();
    println!(
        "{}",
        json!({
            "role": "server",
            "cc": a.common.cc.name(),
            "rx_packets": st.transport.rx_packets,
            "duplicate_requests": st.transport.duplicate_requests,
            "out_of_sequence": st.transport.out_of_sequence,
            "seq_naks_sent": st.transport.seq_naks_sent,
            "link_rx_dropped": st.link.rx_dropped,
        })
    );
    Ok(())
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn client(a: ClientArgs) -> anyhow::Result<()> {
    let probe = match a.role.as_str() {
        "bulk" => false,
        "probe" => true,
        other => bail!("--role {other:?}: bulk or probe"),
    };
    let ctx = device(&a.common)?;
    let pd = ctx.alloc_pd();
    let ch = CompletionChannel::new(&ctx)?;
    let depth = if probe { 1 } else { a.depth.max(1) };
    let mut cq = CompletionQueue::new(&ctx, depth * 2 + 4, Some(&ch));
    let init = QpInitAttr {
        max_send_wr: depth + 4,
        ..QpInitAttr::new(QpType::Rc)
    };
    let mut qp: QueuePair = pd.create_qp(&cq, &cq, None, init)?;
    let conn = cm::connect(&mut qp, a.server, &param(&a.common)?).context("connecting")?;
    let pdata = &conn.remote().private_data;
    let field = |r: std::ops::Range<usize>| {
        pdata
            .get(r)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    };
    let (Some(raddr), Some(rkey), Some(rlen)) = (
        field(0..8),
        pdata
            .get(8..12)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes),
        field(12..20),
    ) else {
        bail!("the server sent no address, rkey and length");
    };
    let size = u64::from(a.size);
    if size * depth as u64 > rlen {
        bail!("{depth} × {size} bytes do not fit the server's {rlen}-byte region");
    }
    let mr = pd.alloc_mr(a.size as usize * depth, Access::LOCAL_WRITE);

    // Start together with the other clients.
    if a.start_at_ms > 0 {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if a.start_at_ms > now_ms {
            std::thread::sleep(Duration::from_millis(a.start_at_ms - now_ms));
        }
    }
    let st0 = ctx.stats().transport;
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(a.seconds.max(0.0));
    let write = |i: u64| {
        let slot = i % depth as u64;
        SendWr::new(
            i,
            WrOp::Write {
                remote: weft_verbs::RemoteAddr {
                    addr: raddr + slot * size,
                    rkey,
                },
                imm: None,
            },
            [mr.sge((slot * size) as usize, a.size)],
        )
    };
    let (mut posted, mut completed, mut failed, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let mut first_error = None;
    let mut lat_us: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    // Blocking, never spinning: 18 processes share two cores.
    let mut waiter = Waiter::new(WaitMode::Block);
    let mut sent_at = Instant::now();
    let mut next_probe = t0;
    loop {
        let now = Instant::now();
        let outstanding = posted - completed - failed;
        if now >= end || failed > 0 {
            if outstanding == 0 || now >= end + Duration::from_secs(10) {
                break;
            }
        } else if probe {
            if outstanding == 0 {
                if now < next_probe {
                    std::thread::sleep(next_probe - now);
                }
                sent_at = Instant::now();
                next_probe = sent_at + Duration::from_micros(a.interval_us);
                qp.post_send([write(posted)])?;
                posted += 1;
            }
        } else {
            let n = depth as u64 - outstanding;
            if n > 0 {
                qp.post_send((posted..posted + n).map(write))?;
                posted += n;
            }
        }
        out.clear();
        waiter.wait(&mut cq, Some(&ch), &mut out, 64, Duration::from_millis(100))?;
        let at = Instant::now();
        for c in &out {
            if c.status == WcStatus::Success {
                completed += 1;
                if at <= end {
                    bytes += size;
                }
                if probe {
                    lat_us.push(at.duration_since(sent_at).as_micros() as u64);
                }
            } else {
                failed += 1;
                first_error.get_or_insert(format!("{:?}", c.status));
            }
        }
    }
    let elapsed = a.seconds.max(1e-9);
    let st = ctx.stats().transport;
    let cc = qp.congestion().unwrap_or_default();
    lat_us.sort_unstable();
    println!(
        "{}",
        json!({
            "role": a.role,
            "label": a.label,
            "cc": a.common.cc.name(),
            "target_us": a.common.target_us,
            "size": a.size,
            "depth": depth,
            "seconds": a.seconds,
            "completed": completed,
            "failed": failed,
            "first_error": first_error,
            "bytes": bytes,
            "goodput_mbit_s": bytes as f64 * 8.0 / elapsed / 1e6,
            "tx_packets": st.tx_packets - st0.tx_packets,
            "retransmitted_packets": st.retransmitted_packets - st0.retransmitted_packets,
            "timeouts": st.timeouts - st0.timeouts,
            "seq_naks_received": st.seq_naks_received - st0.seq_naks_received,
            "cc_rtt_samples": st.cc_rtt_samples - st0.cc_rtt_samples,
            "cc_decreases": st.cc_decreases - st0.cc_decreases,
            "window": cc.window,
            "min_rtt_us": cc.min_rtt_us,
            "last_rtt_us": cc.last_rtt_us,
            "probes": lat_us.len(),
            "p50_us": percentile(&lat_us, 0.50),
            "p99_us": percentile(&lat_us, 0.99),
            "max_us": lat_us.last().copied().unwrap_or(0),
        })
    );
    conn.disconnect();
    Ok(())
}
