//! idle_cpu: how much CPU an idle, connected pair of weft processes burns. The parent
//! opens a device with the default settings (an engine thread, adaptive progress),
//! starts a copy of itself as the peer, connects an RC QP to it, exchanges one SEND each
//! way, and then both processes sit idle for `--secs` seconds. Each measures its own
//! CPU time (user + system, /proc/self/stat) over the idle period; the parent prints
//! both as a share of one core:
//!
//!   cargo run --release -p weft-verbs --example idle_cpu -- --link udp --secs 5
//!
//! prints `idle_cpu link=udp secs=5.00 parent=0.4% child=0.2%` (per cent of one core).

mod common;

use common::Cli;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, MemoryRegion, QpInitAttr, QpType,
    QueuePair, RecvWr, SendWr, WcStatus, WrOp,
};

const USAGE: &str = "[--link udp|shm] [--secs SECONDS]";
const T: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    let mut cli = Cli::new("idle_cpu", USAGE);
    let mut link = LinkKind::Udp;
    let mut secs = 5.0f64;
    let mut peer_of: Option<SocketAddr> = None;
    while let Some(a) = cli.next_arg() {
        match a.as_str() {
            "--link" => link = cli.link(),
            "--secs" => secs = cli.value("--secs"),
            // The child's role (internal): connect to the parent at this address.
            "--child-of" => {
                let v: String = cli.value("--child-of");
                peer_of = Some(cli.addr(&v));
            }
            other => cli.fail(format!("unknown argument {other:?}")),
        }
    }
    if !(0.1..=3600.0).contains(&secs) {
        cli.fail(format!("--secs: {secs} is not within 0.1..3600"));
    }
    let idle = Duration::from_secs_f64(secs);
    cli.run(|| match peer_of {
        None => parent(link, idle),
        Some(at) => child(link, at, idle),
    })
}

/// This process's CPU time so far (user + system).
fn cpu_time() -> Result<Duration, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc: {e}"))?;
    // Fields after the command name (which may hold spaces) closed by ')'.
    let rest = stat.rsplit_once(')').ok_or("malformed /proc/self/stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the name.
    let ticks = |i: usize| -> Result<u64, String> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| "malformed /proc/self/stat".to_string())
    };
    // The kernel reports in USER_HZ, 100 on every Linux architecture weft runs on.
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// Share of one core used over `wall`, in per cent.
fn percent(cpu: Duration, wall: Duration) -> f64 {
    100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
}

struct End {
    _ctx: Context,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
}

fn end(link: LinkKind) -> Result<End, Box<dyn std::error::Error>> {
    let ctx = Context::open_with(DeviceConfig::local(link))?;
    let pd = ctx.alloc_pd();
    let cq = CompletionQueue::new(&ctx, 16, None);
    let qp = pd.create_qp(&cq, &cq, None, QpInitAttr::new(QpType::Rc))?;
    let mr = pd.alloc_mr(64, Access::LOCAL_WRITE);
    Ok(End {
        _ctx: ctx,
        cq,
        qp,
        mr,
    })
}

/// One completion, successful, within `T`.
fn one(e: &mut End) -> Result<(), String> {
    let got = e.cq.wait(1, T);
    match got.first() {
        Some(c) if c.status == WcStatus::Success => Ok(()),
        Some(c) => Err(format!("completion failed: {:?}", c.status)),
        None => Err("no completion within 10 s".into()),
    }
}

/// One SEND each way: the QPs have carried traffic before the pair goes idle.
fn exchange(e: &mut End, first: bool) -> Result<(), String> {
    e.qp.post_recv([RecvWr {
        wr_id: 1,
        sg_list: [e.mr.sge(0, 64)].into(),
    }])
    .map_err(|x| x.to_string())?;
    let send = |e: &mut End| -> Result<(), String> {
        e.qp.post_send([SendWr::new(
            2,
            WrOp::Send { imm: None },
            vec![e.mr.sge(0, 8)],
        )])
        .map_err(|x| x.to_string())?;
        one(e)
    };
    if first {
        send(e)?;
        one(e)
    } else {
        one(e)?;
        send(e)
    }
}

/// CPU used over `idle` by this process, its QP connected and quiet.
fn idle_cpu(idle: Duration) -> Result<(Duration, Duration), String> {
    let (c0, t0) = (cpu_time()?, Instant::now());
    std::thread::sleep(idle);
    Ok((cpu_time()? - c0, t0.elapsed()))
}

fn parent(link: LinkKind, idle: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let mut e = end(link)?;
    let listener = Listener::bind(&e._ctx, "127.0.0.1:0".parse()?)?;
    let at = listener.local_addr()?;
    let link_name = match link {
        LinkKind::Udp => "udp",
        LinkKind::Shm => "shm",
    };
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "--link",
            link_name,
            "--secs",
            &idle.as_secs_f64().to_string(),
        ])
        .args(["--child-of", &at.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let result = (|| -> Result<String, Box<dyn std::error::Error>> {
        let req = listener.get_request(T)?;
        let _conn = req.accept(&mut e.qp, &ConnParam::default())?;
        exchange(&mut e, false)?;
        let (cpu, wall) = idle_cpu(idle)?;
        let mut line = String::new();
        let out = child.stdout.take().ok_or("no child stdout")?;
        BufReader::new(out).read_line(&mut line)?;
        // The child idles as long; it prints its CPU ms and wall ms.
        let mut it = line.split_whitespace().map(str::parse::<f64>);
        let (Some(Ok(ccpu)), Some(Ok(cwall))) = (it.next(), it.next()) else {
            return Err(format!("child said {line:?}").into());
        };
        Ok(format!(
            "idle_cpu link={link_name} secs={:.2} parent={:.1}% child={:.1}%",
            wall.as_secs_f64(),
            percent(cpu, wall),
            100.0 * ccpu / cwall,
        ))
    })();
    // The child exits when its stdin closes (after reporting).
    drop(child.stdin.take());
    let st = child.wait()?;
    let line = result?;
    if !st.success() {
        return Err(format!("the child process failed: {st}").into());
    }
    println!("{line}");
    Ok(())
}

fn child(link: LinkKind, at: SocketAddr, idle: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let mut e = end(link)?;
    let _conn = cm::connect(&mut e.qp, at, &ConnParam::default())?;
    exchange(&mut e, true)?;
    let (cpu, wall) = idle_cpu(idle)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} {}",
        cpu.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e3
    )?;
    out.flush()?;
    // Stay connected until the parent has measured too (it closes our stdin).
    let mut buf = String::new();
    let _ = std::io::stdin().read_line(&mut buf);
    Ok(())
}
