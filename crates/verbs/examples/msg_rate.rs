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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let link = if args.get(1).map(String::as_str) == Some("shm") {
        LinkKind::Shm
    } else {
        LinkKind::Udp
    };
    let size: u32 = args.get(2).map_or(Ok(64), |s| s.parse())?;
    let secs: f64 = args.get(3).map_or(Ok(3.0), |s| s.parse())?;
    let count: u64 = args.get(4).map_or(Ok(u64::MAX), |s| s.parse())?;
    let depth: usize = args.get(5).map_or(Ok(256), |s| s.parse())?;
    let dev = |port: u16| -> Result<Context, weft_verbs::Error> {
        let mut cfg = DeviceConfig::new(link, format!("127.0.0.1:{port}").parse().unwrap());
        cfg.progress = Progress::Inline;
        cfg.icrc = link == LinkKind::Udp;
        Context::open_with(cfg)
    };
    let base = 40000 + (std::process::id() % 10000) as u16;
    let (a, b) = (dev(base)?, dev(base + 1)?);
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
    let t = Instant::now();
    while done < count && t.elapsed().as_secs_f64() < secs {
        let mut batch = Vec::new();
        while inflight + batch.len() < depth {
            let mut wr = SendWr::new(1, WrOp::Send { imm: None }, [src.sge(0, size)]);
            wr.inline = size <= 64;
            batch.push(wr);
        }
        inflight += batch.len();
        qa.post_send(batch)?;
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
        "{link:?} {size} B SENDs: {done} in {el:.2} s, {:.0} msg/s, {:.1} MB/s",
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
