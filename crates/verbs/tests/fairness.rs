//! The link is shared between queue pairs. Asked to put small messages first
//! (`DeviceConfig::shared_pass` zero: one round of the deficit round robin a pass), a
//! 64-byte SEND stream keeps at least 80 % of its solo message rate while a 4 MB
//! WRITE stream runs beside it on the same two devices (the failure the
//! cluster-configuration paper measured on real RNICs). By default a pass goes on
//! transmitting for a while after its round, which shares the engine's time between
//! the flows instead (issue 16's Fig. 5: docs/results/study.md); the second test
//! checks that allowance.
//!
//! One thread drives everything (both engines run inline, over the shm link), so the
//! two rates compare the engine's scheduling, not the operating system's; rates are
//! per second of the thread's CPU time. Solo and
//! shared windows alternate, and the test takes the median of the pairs' ratios, so
//! outside load that slows one window of a pair is outvoted.

mod common;

use common::*;
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, Completion, CompletionQueue, Context, DeviceConfig, LinkKind, Progress, QpInitAttr,
    QpType, QueuePair, RecvWr, SendWr, WcStatus, WrOp,
};

const SMALL: u32 = 64;
const BULK: u32 = 4 << 20;
/// Loop iterations per window.
const WINDOW: u64 = 600;
/// Solo/shared window pairs (`WEFT_FAIRNESS_PAIRS` raises it for a measurement).
const PAIRS: usize = 7;
/// What the test asserts. The target is 0.8; the suite asserts a bound that
/// fails a scheduler that lets the bulk flow take the passes (measured 0.42-0.56 with
/// sharing turned off) with room for a loaded machine. Measured on a quiet one since
/// the CPU clock is exact: 0.82-0.86 (7 pairs, debug build).
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
fn small_first_sends_keep_80_percent_of_their_rate_beside_a_4mb_write_stream() {
    // shm without ICRC: the configuration a same-host user runs for speed; small
    // messages first.
    let (a, b) = (small_first(), small_first());
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

/// An inline shm device without ICRC and without the one-copy path whose passes send
/// one scheduler round while several QPs are active.
fn small_first() -> Context {
    let mut cfg = DeviceConfig::local(LinkKind::Shm);
    cfg.progress = Progress::Inline;
    cfg.icrc = false;
    cfg.shared_pass = Duration::ZERO;
    // The one-copy path moves a WRITE in 64 KiB chunks, each one system call's copy
    // in the receiving pass: a unit of work no pass budget splits, so beside it the
    // small flow keeps about 0.59 of its rate (while the bulk flow moves nine times
    // the bytes it moves through the rings). Small-first holds on the rings: 0.84-0.86
    // measured (docs/verbs.md, "Sharing the engine").
    cfg.one_copy = false;
    Context::open_with(cfg).expect("open device")
}

/// Nanoseconds this thread has run on a CPU. `CLOCK_THREAD_CPUTIME_ID` is exact;
/// `/proc/thread-self/schedstat`, read before, advanced only at scheduler ticks for a
/// running thread, so its windows of a few milliseconds measured ratios in thirds
/// (0.33, 0.50, 1.00) and the median swung between them.
#[allow(unsafe_code)]
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration, and the
    // clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A region in `qp`'s protection domain.
fn mr_for(qp: &QueuePair, len: usize) -> weft_verbs::MemoryRegion {
    qp.pd().alloc_mr(len, Access::ALL)
}

/// While a bulk flow shares the engine with a small one, a pass transmits one round of
/// the deficit round robin and then goes on only within its time allowance
/// (`DeviceConfig::shared_pass`): with none, no pass goes past its round; with a
/// generous one, passes do, so the bulk flow is not cut to a quantum a pass.
#[test]
fn a_shared_pass_goes_past_its_round_only_within_its_time_allowance() {
    let run = |allowance: Duration| -> (u64, u64) {
        let open = || {
            let mut cfg = DeviceConfig::local(LinkKind::Shm);
            cfg.progress = Progress::Inline;
            cfg.icrc = false;
            cfg.shared_pass = allowance;
            Context::open_with(cfg).expect("open device")
        };
        let (a, b) = (open(), open());
        let mut small = flow(&a, &b, 256);
        let mut bulk = flow(&a, &b, 4);
        let big_src = mr_for(&bulk.qa, 1 << 20);
        let big_dst = mr_for(&bulk.qb, 1 << 20);
        let sbuf = mr_for(&small.qa, SMALL as usize);
        let rbuf = mr_for(&small.qb, SMALL as usize * 256);
        let recv = |i: u64| RecvWr {
            wr_id: i,
            sg_list: [rbuf.sge(i as usize * 64, SMALL)].into(),
        };
        small.qb.post_recv((0..256u64).map(recv)).unwrap();
        for _ in 0..4 {
            let wr = SendWr::new(
                2,
                WrOp::Write {
                    remote: big_dst.remote(0),
                    imm: None,
                },
                vec![big_src.sge(0, 1 << 20)],
            );
            bulk.qa.post_send([wr]).unwrap();
        }
        let (mut bulk_done, mut inflight) = (0usize, 0usize);
        let mut out: Vec<Completion> = Vec::new();
        let deadline = Instant::now() + T;
        // Bounded in count (four 1 MiB WRITEs) and in time.
        while bulk_done < 4 && Instant::now() < deadline {
            if inflight < 16 {
                let n = 16 - inflight;
                let wrs = (0..n)
                    .map(|_| SendWr::new(1, WrOp::Send { imm: None }, vec![sbuf.sge(0, SMALL)]));
                small.qa.post_send(wrs).unwrap();
                inflight = 16;
            }
            out.clear();
            inflight -= small.cqa.poll(&mut out, 64);
            assert!(out.iter().all(|c| c.status == WcStatus::Success), "{out:?}");
            out.clear();
            small.cqb.poll(&mut out, 64);
            let again: Vec<RecvWr> = out.iter().map(|c| recv(c.wr_id)).collect();
            if !again.is_empty() {
                small.qb.post_recv(again).unwrap();
            }
            out.clear();
            bulk_done += bulk.cqa.poll(&mut out, 4);
            assert!(out.iter().all(|c| c.status == WcStatus::Success), "{out:?}");
            out.clear();
            bulk.cqb.poll(&mut out, 4);
        }
        assert_eq!(bulk_done, 4, "the bulk flow did not finish in {T:?}");
        let e = a.stats().engine;
        (e.shared_passes, e.shared_passes_extended)
    };
    let (shared, extended) = run(Duration::ZERO);
    assert!(shared > 0, "the two flows never shared a pass");
    assert_eq!(
        extended, 0,
        "a pass went past its round without an allowance"
    );
    let (shared, extended) = run(Duration::from_secs(1));
    assert!(shared > 0, "the two flows never shared a pass");
    assert!(
        extended > 0,
        "no pass went past its round with a 1 s allowance ({shared} shared passes)"
    );
}
