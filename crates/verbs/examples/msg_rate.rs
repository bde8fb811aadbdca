//! How many small SENDs per second one thread gets through two devices in this
//! process (inline progress: the thread drives both engines). A profiling aid for the
//! engine; `weft perf` is the real measurement.
//!
//! `cargo run --release -p weft-verbs --example msg_rate -- [udp|shm] [SIZE] [SECONDS] [COUNT] [DEPTH] [QPS] [ACTIVE]`
//!
//! With COUNT it stops after COUNT completions (or SECONDS, whichever comes first): two
//! runs under `valgrind --tool=callgrind` with different counts give the instructions
//! per message without the set-up, a measure the machine's load does not disturb.
//! DEPTH (default 256) bounds the SENDs in flight; DEPTH 1 is a ping-pong's cost: one
//! message per progress pass, so the fixed cost of a pass shows.
//!
//! DEPTH `lat` is `weft perf send-lat`'s round instead, on the first QP: an unsignaled
//! SEND from a to b, b's poll for it and its receive reposted, an unsignaled SEND back,
//! a's poll and repost. One thread runs both sides, so every poll finds its message
//! and the instructions counted are those of the round's critical path (no spinning),
//! ACKs included where the delayed-ACK rule sends them (one per 16 messages; the
//! delayed-ACK timer is set long enough that it does not fire under valgrind either).
//!
//! QPS (default 1) RC queue pairs connect the two devices; the first one through the
//! connection manager, the others by moving them to RTS directly (no side channel,
//! so no thread per QP). Messages go round-robin over the first ACTIVE of them
//! (default: all), each QP with at most DEPTH / ACTIVE (at least 1) in flight; the
//! others sit idle in RTS. QPS 4096 with ACTIVE 1 shows what idle QPs cost a pass.

use std::time::{Duration, Instant};
use weft_transport::fastmap::FastMap;
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, Bringup, CompletionQueue, Context, DeviceConfig, LinkKind, Progress, QpInitAttr,
    QpType, RecvWr, SendWr, WrOp,
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
    /// `weft perf send-lat`'s round (DEPTH `lat`).
    lat: bool,
    qps: usize,
    active: usize,
}

fn main() -> ExitCode {
    let mut cli = Cli::new(
        "msg_rate",
        "[udp|shm] [SIZE] [SECONDS] [COUNT] [DEPTH] [QPS] [ACTIVE]",
    );
    let mut o = Opts {
        link: LinkKind::Udp,
        size: 64,
        secs: 3.0,
        count: u64::MAX,
        depth: 256,
        lat: false,
        qps: 1,
        active: 0,
    };
    let mut i = 0;
    while let Some(a) = cli.next_arg() {
        let bad = |cli: &Cli| -> ! { cli.fail(format!("bad argument {a:?}")) };
        match i {
            0 => o.link = a.parse().unwrap_or_else(|_| bad(&cli)),
            1 => o.size = a.parse().unwrap_or_else(|_| bad(&cli)),
            2 => o.secs = a.parse().unwrap_or_else(|_| bad(&cli)),
            3 => o.count = a.parse().unwrap_or_else(|_| bad(&cli)),
            4 if a == "lat" => (o.depth, o.lat) = (1, true),
            4 => o.depth = a.parse().unwrap_or_else(|_| bad(&cli)),
            5 => o.qps = a.parse().unwrap_or_else(|_| bad(&cli)),
            6 => o.active = a.parse().unwrap_or_else(|_| bad(&cli)),
            _ => bad(&cli),
        }
        i += 1;
    }
    if o.active == 0 {
        o.active = o.qps;
    }
    if o.size == 0 || o.depth == 0 || o.qps == 0 || o.active > o.qps {
        cli.fail("SIZE, DEPTH and QPS must be at least 1, ACTIVE at most QPS");
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
        lat,
        qps,
        active,
    } = *o;
    // Two devices, each on a loopback address of its own (RoCEv2's port 4791).
    let dev = || -> Result<Context, weft_verbs::Error> {
        let mut cfg = DeviceConfig::local(link);
        cfg.progress = Progress::Inline;
        cfg.icrc = link == LinkKind::Udp;
        if lat {
            // The delayed-ACK bound (64 µs by default) is 16 rounds at weft's native
            // ~2.5 µs one-way, so natively the rule above holds (788 ACKs a side for
            // 12 000 rounds). Under callgrind a round takes ~150 µs and the timer
            // fired most rounds (5 924 ACKs a side): timer handling and ACK packets
            // that a native run does not have. 100 ms keeps the rule under valgrind
            // (the ACK timeout below, 4.3 s, still spans 8 such bounds).
            cfg.transport.ack_delay_us = 100_000;
        }
        Context::open_with(cfg)
    };
    let (a, b) = (dev()?, dev()?);
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (mut cqa, mut cqb) = (
        CompletionQueue::new(&a, 4096.max(2 * depth), None),
        CompletionQueue::new(&b, 4096.max(2 * depth), None),
    );
    // Receives per QP: room for twice the QP's share of the window.
    let per_qp = (depth / active).max(1);
    let rx = if qps == 1 {
        1024
    } else {
        (2 * per_qp).clamp(4, 1024)
    };
    let mut init = QpInitAttr::new(QpType::Rc);
    init.max_send_wr = 512;
    init.max_recv_wr = rx;
    let mut qa = vec![pa.create_qp(&cqa, &cqa, None, init)?];
    let mut qb = vec![pb.create_qp(&cqb, &cqb, None, init)?];
    let l = Listener::bind(&b, "127.0.0.1:0".parse()?)?;
    let at = l.local_addr()?;
    // A 4.3 s ACK timeout (4.096 µs × 2^20): under callgrind a pass runs some 50x
    // slower, and the default 67 ms let slow passes (4096 idle QPs before they were
    // skipped) end in retransmissions and retry-exceeded errors instead of a count.
    let p = ConnParam {
        timeout: 20,
        ..ConnParam::default()
    };
    let (_ca, _cb) = std::thread::scope(|s| {
        let q0 = &mut qb[0];
        let h = s.spawn(|| {
            l.get_request(Duration::from_secs(5))
                .unwrap()
                .accept(q0, &p)
                .unwrap()
        });
        (cm::connect(&mut qa[0], at, &p).unwrap(), h.join().unwrap())
    });
    // The other QPs: straight to RTS against each other, as the connection manager
    // would bring them up, without its TCP channel and watcher thread per QP.
    let (path_ab, path_ba) = (a.path_to(b.local_addr())?, b.path_to(a.local_addr())?);
    for i in 1..qps {
        let mut x = pa.create_qp(&cqa, &cqa, None, init)?;
        let mut y = pb.create_qp(&cqb, &cqb, None, init)?;
        let up = |path, dest_qpn, psn_out, psn_in| Bringup {
            access: p.access,
            qkey: p.qkey,
            path_mtu: p.path_mtu.min(a.max_mtu()),
            path: Some(path),
            dest_qpn,
            rq_psn: psn_in,
            sq_psn: psn_out,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            min_rnr_timer: p.min_rnr_timer,
            timeout: p.timeout,
            retry_cnt: p.retry_cnt,
            rnr_retry: p.rnr_retry,
            recovery: p.recovery,
            max_inflight: p.max_inflight,
            // What the connection manager tells a weft peer (both devices are weft).
            peer_ack_delay_us: a.ack_delay_us(),
        };
        let psn = i as u32 * 7919;
        for s in up(path_ab, y.qp_num(), psn, psn + 1).steps(QpType::Rc) {
            x.modify(&s)?;
        }
        for s in up(path_ba, x.qp_num(), psn + 1, psn).steps(QpType::Rc) {
            y.modify(&s)?;
        }
        qa.push(x);
        qb.push(y);
    }
    // QP numbers are random per device, so one map per side (they may collide). The
    // driver's map is weft's own integer-keyed one: with std's SipHash the two
    // lookups per message cost the driver ~200 instructions, which callgrind counted
    // as weft's.
    let index_of = |qs: &[weft_verbs::QueuePair]| -> FastMap<u32, usize> {
        qs.iter()
            .enumerate()
            .map(|(i, q)| (q.qp_num(), i))
            .collect()
    };
    let (index_a, index_b) = (index_of(&qa), index_of(&qb));
    let src = pa.alloc_mr(size as usize, Access::ALL);
    let dst = pb.alloc_mr(size as usize * rx, Access::ALL);
    let recv = |slot: u64| RecvWr {
        wr_id: slot,
        sg_list: [dst.sge(slot as usize * size as usize, size)].into(),
    };
    // Receives only where messages arrive: idle QPs hold none.
    for q in qb.iter_mut().take(active) {
        q.post_recv((0..rx as u64).map(recv))?;
    }
    let (mut inflight, mut done, mut out, mut outb) = (0usize, 0u64, Vec::new(), Vec::new());
    if lat {
        // The replies land in a region of a's own, receives posted as on b.
        let back = pa.alloc_mr(size as usize * rx, Access::ALL);
        let recv_back = |slot: u64| RecvWr {
            wr_id: slot,
            sg_list: [back.sge(slot as usize * size as usize, size)].into(),
        };
        qa[0].post_recv((0..rx as u64).map(recv_back))?;
        // One request a side, built once and posted borrowed (`[&wr]`), as
        // `weft perf send-lat` and perftest post theirs.
        let unsignaled = |mr: &weft_verbs::MemoryRegion| {
            let mut w = wr(mr, size);
            w.signaled = false;
            w
        };
        let (ping, pong) = (unsignaled(&src), unsignaled(&dst));
        // Each side's wait starts with a poll that finds nothing (in two processes,
        // the first of many while the message is on its way): it is counted, one a
        // side per round, and it is what makes the next post "follow a wait" (two
        // passes since the last), which sends it from `post_send`.
        let mut empty_poll = |cq: &mut CompletionQueue| {
            out.clear();
            cq.poll(&mut out, 64)
        };
        for _ in 0..2 {
            empty_poll(&mut cqa);
            empty_poll(&mut cqb);
        }
        let t = Instant::now();
        while done < count && (done % 64 != 0 || t.elapsed().as_secs_f64() < secs) {
            qa[0].post_send([&ping])?;
            empty_poll(&mut cqa);
            let slot = first_receive(&mut cqb, &mut outb).map_err(|e| format!("b: {e}"))?;
            qb[0].post_recv([recv(slot)])?;
            qb[0].post_send([&pong])?;
            empty_poll(&mut cqb);
            let slot = first_receive(&mut cqa, &mut outb)?;
            qa[0].post_recv([recv_back(slot)])?;
            done += 1;
        }
        let el = t.elapsed().as_secs_f64();
        println!(
            "{link} {size} B send-lat rounds: {done} in {el:.2} s, one-way {:.3} us",
            el / done.max(1) as f64 / 2.0 * 1e6
        );
        print_stats(&a, &b);
        return Ok(());
    }
    let mut qp_inflight = vec![0usize; active];
    let mut next = 0usize;
    // One request, changed in place and posted borrowed, one `post_send` per message:
    // `weft perf send-bw`'s `Bw::post` and perftest's way with `ibv_post_send`.
    let mut w = wr(&src, size);
    let mut posted = 0u64;
    let t = Instant::now();
    // The time limit is checked every 64 rounds: a clock read per round was about 270
    // instructions of a ping-pong round under callgrind, the driver's, not weft's.
    let mut round = 0u32;
    while done < count && (round % 64 != 0 || t.elapsed().as_secs_f64() < secs) {
        round = round.wrapping_add(1);
        if active == 1 {
            while inflight < depth {
                posted += 1;
                w.wr_id = posted;
                qa[0].post_send([&w])?;
                inflight += 1;
            }
        } else {
            // Round-robin, one message per QP per turn, a lap at most per round.
            for _ in 0..active {
                if inflight >= depth {
                    break;
                }
                let i = next;
                next = (next + 1) % active;
                if qp_inflight[i] < per_qp {
                    posted += 1;
                    w.wr_id = posted;
                    qa[i].post_send([&w])?;
                    qp_inflight[i] += 1;
                    inflight += 1;
                }
            }
        }
        out.clear();
        let n = cqa.poll(&mut out, 64);
        for c in &out {
            if c.status != weft_verbs::WcStatus::Success {
                return Err(format!("completion {:?} on QP {}", c.status, c.qpn).into());
            }
            // One QP needs no per-QP count (its loop above reads none) and no map.
            if active == 1 {
                continue;
            }
            if let Some(n) = index_a.get(&c.qpn).and_then(|&i| qp_inflight.get_mut(i)) {
                *n = n.saturating_sub(1);
            }
        }
        inflight -= n;
        done += n as u64;
        outb.clear();
        cqb.poll(&mut outb, 64);
        for c in &outb {
            // One QP: its receive goes back without a look in the map (two lookups
            // a message were ~68 instructions, the driver's, counted as weft's).
            let i = if qps == 1 {
                Some(0)
            } else {
                index_b.get(&c.qpn).copied()
            };
            if let Some(i) = i {
                qb[i].post_recv([recv(c.wr_id)])?;
            }
        }
    }
    let el = t.elapsed().as_secs_f64();
    println!(
        "{link} {size} B SENDs over {active} of {qps} QPs: {done} in {el:.2} s, {:.0} msg/s, {:.1} MB/s",
        done as f64 / el,
        done as f64 * f64::from(size) / el / 1e6
    );
    print_stats(&a, &b);
    Ok(())
}

/// The wr_id of the first receive completion `cq` gives (one thread drives both
/// devices, so it is there at the first poll; the bound only keeps a bug from hanging).
fn first_receive(
    cq: &mut CompletionQueue,
    out: &mut Vec<weft_verbs::Completion>,
) -> Result<u64, Box<dyn std::error::Error>> {
    for _ in 0..1_000_000 {
        out.clear();
        cq.poll(out, 64);
        if let Some(c) = out.iter().find(|c| c.opcode.is_recv()) {
            if c.status != weft_verbs::WcStatus::Success {
                return Err(format!("completion {:?} on QP {}", c.status, c.qpn).into());
            }
            return Ok(c.wr_id);
        }
    }
    Err("no receive completion after a million polls".into())
}

fn print_stats(a: &Context, b: &Context) {
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
}

fn wr(src: &weft_verbs::MemoryRegion, size: u32) -> SendWr {
    let mut wr = SendWr::new(1, WrOp::Send { imm: None }, [src.sge(0, size)]);
    wr.inline = size <= 64;
    wr
}
