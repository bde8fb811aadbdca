//! How many small SENDs per second one thread gets through two devices in this
//! process (inline progress: the thread drives both engines). A profiling aid for the
//! engine; `weft perf` is the real measurement.
//!
//! `cargo run --release -p weft-verbs --example msg_rate -- [udp|shm] [SIZE] [SECONDS] [COUNT] [DEPTH]`
//!
//! With COUNT it stops after COUNT completions (or SECONDS, whichever comes first): two
//! runs under `valgrind --tool=callgrind` with different counts give the instructions
//! per message without the set-up, a measure the machine's load does not disturb.
//! DEPTH (default 256) bounds the SENDs in flight; DEPTH 1 is a ping-pong's cost: one
//! message per progress pass, so the fixed cost of a pass shows.

use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, Progress, QpInitAttr, QpType, RecvWr,
    SendWr, WrOp,
};

mod common;

use common::Cli;
use std::process::ExitCode;

struct Opts {
    link: LinkKind,
    size: u32,
    secs: f64,
    count: u64,
    depth: usize,
}

fn main() -> ExitCode {
    let mut cli = Cli::new("msg_rate", "[udp|shm] [SIZE] [SECONDS] [COUNT] [DEPTH]");
    let mut o = Opts {
        link: LinkKind::Udp,
        size: 64,
        secs: 3.0,
        count: u64::MAX,
        depth: 256,
    };
    let mut i = 0;
    while let Some(a) = cli.next_arg() {
        let bad = |cli: &Cli| -> ! { cli.fail(format!("bad argument {a:?}")) };
        match i {
            0 => o.link = a.parse().unwrap_or_else(|_| bad(&cli)),
            1 => o.size = a.parse().unwrap_or_else(|_| bad(&cli)),
            2 => o.secs = a.parse().unwrap_or_else(|_| bad(&cli)),
            3 => o.count = a.parse().unwrap_or_else(|_| bad(&cli)),
            4 => o.depth = a.parse().unwrap_or_else(|_| bad(&cli)),
            _ => bad(&cli),
        }
        i += 1;
    }
    if o.size == 0 || o.depth == 0 {
        cli.fail("SIZE and DEPTH must be at least 1");
    }
    cli.run(|| run(&o))
}

fn run(o: &Opts) -> Result<(), Box<dyn std::error::Error>> {
    let Opts {
        link,
        size,
        secs,
        count,
        depth,
    } = *o;
    // Two devices, each on a loopback address of its own (RoCEv2's port 4791).
    let dev = || -> Result<Context, weft_verbs::Error> {
        let mut cfg = DeviceConfig::local(link);
        cfg.progress = Progress::Inline;
        cfg.icrc = link == LinkKind::Udp;
        Context::open_with(cfg)
    };
    let (a, b) = (dev()?, dev()?);
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (mut cqa, mut cqb) = (
        CompletionQueue::new(&a, 4096, None),
        CompletionQueue::new(&b, 4096, None),
    );
    let mut init = QpInitAttr::new(QpType::Rc);
    init.max_send_wr = 512;
    init.max_recv_wr = 1024;
    let mut qa = pa.create_qp(&cqa, &cqa, None, init)?;
    let mut qb = pb.create_qp(&cqb, &cqb, None, init)?;
    let l = Listener::bind(&b, "127.0.0.1:0".parse()?)?;
    let at = l.local_addr()?;
    let p = ConnParam::default();
    let (_ca, _cb) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            l.get_request(Duration::from_secs(5))
                .unwrap()
                .accept(&mut qb, &p)
                .unwrap()
        });
        (cm::connect(&mut qa, at, &p).unwrap(), h.join().unwrap())
    });
    let src = pa.alloc_mr(size as usize, Access::ALL);
    let dst = pb.alloc_mr(size as usize * 1024, Access::ALL);
    qb.post_recv((0..1024u64).map(|i| RecvWr {
        wr_id: i,
        sg_list: [dst.sge(i as usize * size as usize, size)].into(),
    }))?;
    let (mut inflight, mut done, mut out, mut outb) = (0usize, 0u64, Vec::new(), Vec::new());
    // One batch vector for the whole run: a new one per round cost the driver a
    // growing allocation per message, which callgrind then counted as weft's.
    let mut batch = Vec::with_capacity(depth);
    let t = Instant::now();
    while done < count && t.elapsed().as_secs_f64() < secs {
        while inflight + batch.len() < depth {
            let mut wr = SendWr::new(1, WrOp::Send { imm: None }, [src.sge(0, size)]);
            wr.inline = size <= 64;
            batch.push(wr);
        }
        inflight += batch.len();
        qa.post_send(batch.drain(..))?;
        out.clear();
        let n = cqa.poll(&mut out, 64);
        inflight -= n;
        done += n as u64;
        outb.clear();
        cqb.poll(&mut outb, 64);
        if !outb.is_empty() {
            qb.post_recv(outb.iter().map(|c| RecvWr {
                wr_id: c.wr_id,
                sg_list: [dst.sge(c.wr_id as usize * size as usize, size)].into(),
            }))?;
        }
    }
    let el = t.elapsed().as_secs_f64();
    println!(
        "{link} {size} B SENDs: {done} in {el:.2} s, {:.0} msg/s, {:.1} MB/s",
        done as f64 / el,
        done as f64 * f64::from(size) / el / 1e6
    );
    let s = a.stats();
    println!(
        "a: passes {} sleeps {} tx {} rx {} acks_sent {}",
        s.engine.passes,
        s.engine.sleeps,
        s.transport.tx_packets,
        s.transport.rx_packets,
        s.transport.acks_sent
    );
    let s = b.stats();
    println!(
        "b: passes {} tx {} rx {} acks_sent {}",
        s.engine.passes, s.transport.tx_packets, s.transport.rx_packets, s.transport.acks_sent
    );
    Ok(())
}
