//! rc_pingpong, the weft way: two processes bounce a message over an RC queue pair
//! (SEND/RECV) and print the round-trip statistics, like `ibv_rc_pingpong`.
//!
//! ```text
//! server:  cargo run --release -p weft-verbs --example rc_pingpong
//! client:  cargo run --release -p weft-verbs --example rc_pingpong -- 127.0.0.1:18515
//! options: --link udp|shm  --size N  --iters N  --inline-progress  --stats
//!          --listen IP:PORT (server: where the connection manager listens)
//! ```
//!
//! Each side's device takes a loopback address of its own on RoCEv2's UDP port 4791
//! (printed at start), so `tcpdump -i lo udp port 4791` sees the traffic.

mod common;

use common::Cli;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, Progress, QpInitAttr, QpType, RecvWr,
    SendWr, WcStatus, WrOp,
};

const USAGE: &str =
    "[SERVER_IP:PORT] [--link udp|shm] [--size N] [--iters N] [--inline-progress] [--stats] [--listen IP:PORT]";

struct Opts {
    link: LinkKind,
    size: usize,
    iters: usize,
    progress: Progress,
    stats: bool,
    server: Option<SocketAddr>,
    listen: SocketAddr,
}

fn main() -> ExitCode {
    let mut cli = Cli::new("rc_pingpong", USAGE);
    let mut o = Opts {
        link: LinkKind::Udp,
        size: 64,
        iters: 10_000,
        progress: Progress::Thread,
        stats: false,
        server: None,
        listen: SocketAddr::from(([127, 0, 0, 1], 18515)),
    };
    while let Some(a) = cli.next_arg() {
        match a.as_str() {
            "--link" => o.link = cli.link(),
            "--size" => o.size = cli.value("--size"),
            "--iters" => o.iters = cli.value("--iters"),
            "--inline-progress" => o.progress = Progress::Inline,
            "--stats" => o.stats = true,
            "--listen" => {
                let v: String = cli.value("--listen");
                o.listen = cli.addr(&v);
            }
            other => o.server = Some(cli.addr(other)),
        }
    }
    if o.size == 0 || o.iters == 0 {
        cli.fail("--size and --iters must be at least 1");
    }
    cli.run(|| run(&o))
}

fn run(o: &Opts) -> Result<(), Box<dyn std::error::Error>> {
    let Opts {
        link,
        size,
        iters,
        progress,
        server,
        ..
    } = *o;
    // The device: a loopback address of its own, RoCEv2's port 4791.
    let mut cfg = DeviceConfig::local(link);
    cfg.progress = progress;
    let ctx = Context::open_with(cfg)?;
    let pd = ctx.alloc_pd();
    let mut cq = CompletionQueue::new(&ctx, 64, None);
    let mut qp = pd.create_qp(&cq, &cq, None, QpInitAttr::new(QpType::Rc))?;
    let mr = pd.alloc_mr(2 * size, Access::LOCAL_WRITE);
    let recv = || RecvWr {
        wr_id: 1,
        sg_list: [mr.sge(size, size as u32)].into(),
    };
    let param = ConnParam::default();
    let _conn = match server {
        None => {
            let l = Listener::bind(&ctx, o.listen)?;
            println!(
                "waiting on {} (device {})",
                l.local_addr()?,
                ctx.local_addr()
            );
            let req = l.get_request(Duration::from_secs(120))?;
            req.accept(&mut qp, &param)?
        }
        Some(at) => {
            let c = cm::connect(&mut qp, at, &param)?;
            println!(
                "connected to {at} (device {}, peer device {})",
                ctx.local_addr(),
                c.remote().addr
            );
            c
        }
    };
    // A message that arrives before this receive is posted is answered with an RNR
    // NAK and retried by the sender, as on real RC hardware.
    qp.post_recv([recv()])?;
    let is_client = server.is_some();
    let send = || SendWr::new(2, WrOp::Send { imm: None }, [mr.sge(0, size as u32)]);
    let mut rtts = Vec::with_capacity(iters);
    let mut out = Vec::with_capacity(4);
    let wait_recv = |cq: &mut CompletionQueue,
                     out: &mut Vec<weft_verbs::Completion>|
     -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            out.clear();
            cq.poll(out, 4);
            let mut got = false;
            for c in out.iter() {
                if c.status != WcStatus::Success {
                    return Err(format!(
                            "a {:?} completed with {:?} (the peer may have gone; --stats shows the counters)",
                            c.opcode, c.status
                        ));
                }
                got |= c.opcode.is_recv();
            }
            if got {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("peer went silent".into());
            }
        }
    };
    for i in 0..iters {
        let t = Instant::now();
        if is_client {
            qp.post_send([send()])?;
            if let Err(e) = wait_recv(&mut cq, &mut out) {
                if o.stats {
                    eprintln!("{:#?}", ctx.stats());
                }
                return Err(format!("client, round trip {i}: {e}").into());
            }
            qp.post_recv([recv()])?;
            rtts.push(t.elapsed());
        } else {
            if let Err(e) = wait_recv(&mut cq, &mut out) {
                if o.stats {
                    eprintln!("{:#?}", ctx.stats());
                }
                return Err(format!("server, round trip {i}: {e}").into());
            }
            qp.post_recv([recv()])?;
            qp.post_send([send()])?;
        }
    }
    if is_client {
        rtts.sort_unstable();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mean = rtts.iter().map(|d| us(*d)).sum::<f64>() / rtts.len() as f64;
        println!(
            "{iters} round trips of {size} B over {link}: RTT p50 {:.2} us, p99 {:.2} us, mean {mean:.2} us; one-way p50 {:.2} us",
            us(rtts[rtts.len() / 2]),
            us(rtts[rtts.len() * 99 / 100]),
            us(rtts[rtts.len() / 2]) / 2.0
        );
    } else {
        // Wait for the last reply's completion: it has left and been acknowledged
        // (with inline progress nothing else would send it).
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            out.clear();
            cq.poll(&mut out, 4);
            if out.iter().any(|c| !c.opcode.is_recv()) {
                break;
            }
        }
    }
    if o.stats {
        println!("{:#?}", ctx.stats());
    }
    Ok(())
}
