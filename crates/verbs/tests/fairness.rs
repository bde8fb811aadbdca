//! The link is shared fairly between queue pairs: a 64-byte SEND stream keeps at
//! least 80 % of its solo message rate while a 4 MB WRITE stream runs beside it on
//! the same two devices (the failure the cluster-configuration paper measured on real
//! RNICs). The engine's send scheduler is deficit round robin over bytes.
//!
//! The test compares two rates measured in the same run (best of three windows each),
//! so a slow or shared machine changes both alike.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, LinkKind, Progress, QpInitAttr, QpType, QueuePair, RecvWr, SendWr,
    WcStatus, WrOp,
};

const SMALL: u32 = 64;
const BULK: u32 = 4 << 20;
const WINDOW: Duration = Duration::from_millis(400);

#[test]
fn small_sends_keep_80_percent_of_their_rate_beside_a_4mb_write_stream() {
    // Inline progress: the threads that poll drive the engines, so the machine runs
    // three busy threads, not five (two cores here).
    let a = device(LinkKind::Udp, Progress::Inline);
    let b = device(LinkKind::Udp, Progress::Inline);
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let listener = Listener::bind(&b, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = listener.local_addr().unwrap();
    let connect = |depth: usize| {
        let (cqa, cqb) = (
            CompletionQueue::new(&a, 4096, None),
            CompletionQueue::new(&b, 4096, None),
        );
        let mut init = QpInitAttr::new(QpType::Rc);
        init.max_send_wr = depth;
        init.max_recv_wr = depth;
        let mut qa = pa.create_qp(&cqa, &cqa, None, init).unwrap();
        let mut qb = pb.create_qp(&cqb, &cqb, None, init).unwrap();
        let (ca, cb) = std::thread::scope(|s| {
            let h = s.spawn(|| {
                listener
                    .get_request(T)
                    .unwrap()
                    .accept(&mut qb, &ConnParam::default())
                    .unwrap()
            });
            (
                cm::connect(&mut qa, at, &ConnParam::default()).unwrap(),
                h.join().unwrap(),
            )
        });
        (qa, cqa, qb, cqb, ca, cb)
    };
    let (mut small_q, mut small_cq, mut small_rq, mut small_rcq, _c1, _c2) = connect(512);
    let (mut bulk_q, mut bulk_cq, _bulk_rq, _bulk_rcq, _c3, _c4) = connect(8);
    let src = pa.alloc_mr(BULK as usize, Access::ALL);
    let dst = pb.alloc_mr(BULK as usize, Access::ALL);
    let rbuf = pb.alloc_mr(SMALL as usize * 512, Access::ALL);

    // The receiver of the small stream: keeps 512 receives posted.
    let stop = Arc::new(AtomicBool::new(false));
    small_rq
        .post_recv((0..512u64).map(|i| RecvWr {
            wr_id: i,
            sg_list: vec![rbuf.sge(i as usize * 64, SMALL)],
        }))
        .unwrap();
    let receiver = std::thread::spawn({
        let stop = Arc::clone(&stop);
        move || {
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                out.clear();
                if small_rcq.poll(&mut out, 64) == 0 {
                    std::thread::yield_now();
                    continue;
                }
                let again: Vec<RecvWr> = out
                    .iter()
                    .map(|c| RecvWr {
                        wr_id: c.wr_id,
                        sg_list: vec![rbuf.sge(c.wr_id as usize * 64, SMALL)],
                    })
                    .collect();
                small_rq.post_recv(again).unwrap();
            }
        }
    });

    // The bulk stream: keeps four 4 MB WRITEs in flight while `bulk_on` is set.
    let bulk_on = Arc::new(AtomicBool::new(false));
    let bulk = std::thread::spawn({
        let (stop, on) = (Arc::clone(&stop), Arc::clone(&bulk_on));
        move || {
            let mut inflight = 0;
            let mut bytes = 0u64;
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                while on.load(Ordering::Relaxed) && inflight < 4 {
                    let wr = SendWr::new(
                        0,
                        WrOp::Write {
                            remote: dst.remote(0),
                            imm: None,
                        },
                        vec![src.sge(0, BULK)],
                    );
                    bulk_q.post_send([wr]).unwrap();
                    inflight += 1;
                }
                out.clear();
                bulk_cq.poll(&mut out, 8);
                for c in &out {
                    assert_eq!(c.status, WcStatus::Success);
                    inflight -= 1;
                    bytes += u64::from(BULK);
                }
                if out.is_empty() {
                    std::thread::yield_now();
                }
            }
            bytes
        }
    });

    let sbuf = pa.alloc_mr(SMALL as usize, Access::ALL);
    let rate = |q: &mut QueuePair, cq: &mut CompletionQueue| {
        let mut inflight = 0usize;
        let mut done = 0u64;
        let mut out = Vec::new();
        let t = Instant::now();
        while t.elapsed() < WINDOW {
            while inflight < 256 {
                q.post_send([SendWr::new(
                    1,
                    WrOp::Send { imm: None },
                    vec![sbuf.sge(0, SMALL)],
                )])
                .unwrap();
                inflight += 1;
            }
            out.clear();
            let n = cq.poll(&mut out, 64);
            inflight -= n;
            done += n as u64;
        }
        // Drain what is in flight so the next window starts clean.
        let rest = collect(cq, inflight, &[]);
        assert_eq!(rest.len(), inflight);
        done as f64 / t.elapsed().as_secs_f64()
    };
    // Interleave solo and shared windows, keep the best of each.
    let (mut solo, mut shared) = (0.0f64, 0.0f64);
    for _ in 0..3 {
        solo = solo.max(rate(&mut small_q, &mut small_cq));
        bulk_on.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        shared = shared.max(rate(&mut small_q, &mut small_cq));
        bulk_on.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let bulk_bytes = bulk.join().unwrap();
    receiver.join().unwrap();
    let ratio = shared / solo;
    eprintln!(
        "64 B SENDs: solo {:.0} msg/s, beside 4 MB WRITEs {:.0} msg/s (ratio {:.2}); bulk moved {} MB",
        solo,
        shared,
        ratio,
        bulk_bytes >> 20
    );
    assert!(bulk_bytes >= u64::from(BULK), "the bulk stream never ran");
    assert!(
        ratio >= 0.8,
        "small flow kept only {ratio:.2} of its solo rate"
    );
}
