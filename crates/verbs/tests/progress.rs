//! Thread progress beside an application that spins on its completion queues: the
//! application's empty polls run the passes and the engine thread stands by (never two
//! spinning threads per process), and the engine thread takes over again when the
//! application blocks on a completion channel or stops polling. Counted, not timed:
//! every wait is bounded by the test timeout.

mod common;

use common::*;
use std::time::{Duration, Instant};
use weft_verbs::cm::ConnParam;
use weft_verbs::{
    CompletionChannel, CompletionQueue, LinkKind, Progress, QpType, RecvWr, SendWr, WrOp,
};

/// One 64-byte SEND from `from` to `to`, both applications spinning on their queues.
fn one_way(from: &mut Side, to: &mut Side, i: u64) {
    to.qp
        .post_recv([RecvWr {
            wr_id: i,
            sg_list: [to.mr.sge(0, 64)].into(),
        }])
        .unwrap();
    from.qp
        .post_send([SendWr::new(
            i,
            WrOp::Send { imm: None },
            vec![from.mr.sge(0, 64)],
        )])
        .unwrap();
    ok(&mut from.cq, 1);
    ok(&mut to.cq, 1);
}

/// Ping-pong `rounds` 64-byte SENDs.
fn pingpong(a: &mut Side, b: &mut Side, rounds: u64) {
    for i in 0..rounds {
        one_way(a, b, i);
        one_way(b, a, i);
    }
}

#[test]
fn an_application_spinning_on_its_queues_makes_the_engine_thread_stand_by() {
    for kind in [LinkKind::Shm, LinkKind::Udp] {
        let (mut a, mut b) = pair(kind, Progress::Thread, QpType::Rc, 1 << 16);
        // Long enough for many stand-by checks, whatever the machine's speed.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(200) {
            pingpong(&mut a, &mut b, 100);
        }
        for s in [&a, &b] {
            let st = s.ctx.stats();
            assert!(
                st.engine.standbys > 0,
                "{kind:?}: the engine thread never stood by: {st:?}"
            );
            // Nothing lost: no retransmission timeout. A retransmission may answer an
            // RNR NAK: one test thread drives both sides, so while it polls a's queue
            // b's engine thread takes over, and a pass of b's that drained its rings
            // just before the test posted b's RECV may receive a's SEND before it.
            assert_eq!(st.transport.timeouts, 0, "{kind:?}: {st:?}");
            assert!(
                st.transport.retransmitted_packets <= st.transport.rnr_naks_received,
                "{kind:?}: {st:?}"
            );
        }
    }
}

#[test]
fn the_engine_thread_serves_again_when_the_application_blocks_on_a_channel() {
    let a = side(LinkKind::Shm, Progress::Thread, QpType::Rc, 1 << 16);
    // b's queue is tied to a completion channel.
    let ctx = device(LinkKind::Shm, Progress::Thread);
    let channel = CompletionChannel::new(&ctx).unwrap();
    let cq = CompletionQueue::new(&ctx, 1024, Some(&channel));
    let b = side_with_cq(ctx, cq, QpType::Rc, 1 << 16);
    let (mut a, mut b) = connect_sides(a, b, &ConnParam::default());
    // b's application spins on its queue first, so b's engine thread stands by ...
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(100) {
        pingpong(&mut a, &mut b, 50);
    }
    assert!(
        b.ctx.stats().engine.standbys > 0,
        "b's engine thread stood by while b spun"
    );
    // ... then b blocks on the channel for a SEND that a posts 20 ms later.
    b.qp.post_recv([RecvWr {
        wr_id: 77,
        sg_list: [b.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    b.cq.req_notify();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        a.qp.post_send([SendWr::new(
            5,
            WrOp::Send { imm: None },
            vec![a.mr.sge(0, 64)],
        )])
        .unwrap();
        ok(&mut a.cq, 1);
        a
    });
    // Nobody polls b meanwhile: only b's engine thread can deliver the SEND.
    let id = channel
        .get_cq_event(T)
        .expect("the SEND arrived while b blocked");
    assert_eq!(id, b.cq.id());
    let got = ok(&mut b.cq, 1);
    assert_eq!(got[0].wr_id, 77);
    let _a = sender.join().unwrap();
}

/// How long a WRITE may take to land while its target spins on memory: far beyond any
/// latency (microseconds to a millisecond), so that only a WRITE nobody serves fails
/// it — not a slow, loaded machine.
const LAND: Duration = Duration::from_secs(1);

/// Spin on byte 0 of `s`'s region, never calling weft, until it reads `want`.
fn spin_on_memory(s: &Side, want: u8, round: u32) {
    let start = Instant::now();
    let mut b = [0u8; 1];
    loop {
        std::hint::black_box(&s.mr).read(0, &mut b).unwrap();
        if std::hint::black_box(b[0]) == want {
            return;
        }
        assert!(
            start.elapsed() < LAND,
            "round {round}: the WRITE did not land within {LAND:?} while the application \
             spun on memory: {:?}",
            s.ctx.stats()
        );
        std::hint::spin_loop();
    }
}

/// WRITE `v` into byte 0 of the peer's region and poll for its completion.
fn write_byte(s: &mut Side, peer: weft_transport::RemoteAddr, v: u8, round: u32) {
    s.mr.write(64, &[v]).unwrap();
    s.qp.post_send([SendWr::new(
        u64::from(round),
        WrOp::Write {
            remote: peer,
            imm: None,
        },
        vec![s.mr.sge(64, 1)],
    )])
    .unwrap();
    ok(&mut s.cq, 1);
}

/// perftest's `ib_write_lat` loop: each side WRITEs a byte into the other's buffer,
/// polls its send queue for the completion, then spins on its own buffer for the
/// peer's byte without calling weft. Only the engine thread can land the peer's WRITE
/// then, and it stood by while the application polled. Each side runs in its own
/// thread, as two processes would.
fn write_ping_pong(mut a: Side, mut b: Side, rounds: u32) -> (Side, Side) {
    let to_b = b.mr.remote(0);
    let to_a = a.mr.remote(0);
    let server = std::thread::spawn(move || {
        for r in 1..=rounds {
            let v = (r % 250 + 1) as u8;
            spin_on_memory(&b, v, r);
            write_byte(&mut b, to_a, v, r);
        }
        b
    });
    for r in 1..=rounds {
        let v = (r % 250 + 1) as u8;
        write_byte(&mut a, to_b, v, r);
        spin_on_memory(&a, v, r);
    }
    let b = server.join().expect("the server side");
    (a, b)
}

#[test]
fn a_write_lands_while_the_application_spins_on_memory_after_polling() {
    for kind in [LinkKind::Udp, LinkKind::Shm] {
        let (a, b) = pair(kind, Progress::Thread, QpType::Rc, 4096);
        let (a, b) = write_ping_pong(a, b, 300);
        for s in [&a, &b] {
            let st = s.ctx.stats();
            // The application polled (its send completions), so the engine thread
            // stood by; it then spun on memory, so the engine thread took over.
            assert!(st.engine.standbys > 0, "{kind:?}: {st:?}");
            // Over shm the engine thread can be quick enough that every poll finds
            // its completion already there: the application then never polls an
            // empty queue, the thread never stands by during the run (its one
            // stand-by is at teardown) and there is nothing to take over from — the
            // WRITEs still land (the loop above). Run alone, this test saw that in
            // about half the runs, with and without the yield in `assist`.
            if st.engine.standbys > 1 || kind == LinkKind::Udp {
                assert!(st.engine.takeovers > 0, "{kind:?}: {st:?}");
            }
            // Once a takeover has served it, the engine thread watches the udp socket
            // while it stands by and takes over when the peer's WRITE arrives, not a
            // quiet gap later; shm has no socket to watch.
            match kind {
                LinkKind::Udp => assert!(st.engine.link_takeovers > 0, "{kind:?}: {st:?}"),
                _ => assert_eq!(st.engine.link_takeovers, 0, "{kind:?}: {st:?}"),
            }
        }
    }
}

/// A device whose engine thread spins at most `idle_spin` (see `DeviceConfig::idle_spin`).
fn side_spinning(kind: LinkKind, idle_spin: Duration) -> Side {
    let mut cfg = weft_verbs::DeviceConfig::local(kind);
    cfg.progress = Progress::Thread;
    cfg.idle_spin = idle_spin;
    side_on(
        weft_verbs::Context::open_with(cfg).unwrap(),
        QpType::Rc,
        4096,
    )
}

#[test]
fn forced_polling_and_forced_blocking_still_serve_a_program_that_stops_polling() {
    // Duration::MAX: the engine thread polls always and never stands by.
    let a = side_spinning(LinkKind::Udp, Duration::MAX);
    let b = side_spinning(LinkKind::Udp, Duration::MAX);
    let (a, b) = connect_sides(a, b, &ConnParam::default());
    // Few rounds: four spinning threads take turns on this machine's cores.
    let (a, b) = write_ping_pong(a, b, 20);
    for s in [&a, &b] {
        let st = s.ctx.stats();
        assert_eq!(st.engine.standbys, 0, "forced polling stood by: {st:?}");
        assert_eq!(st.engine.sleeps, 0, "forced polling slept: {st:?}");
    }
    // Duration::ZERO: the engine thread blocks as soon as it is idle.
    let a = side_spinning(LinkKind::Shm, Duration::ZERO);
    let b = side_spinning(LinkKind::Shm, Duration::ZERO);
    let (a, b) = connect_sides(a, b, &ConnParam::default());
    let (a, b) = write_ping_pong(a, b, 100);
    for s in [&a, &b] {
        let st = s.ctx.stats();
        assert!(st.engine.sleeps > 0, "forced blocking never slept: {st:?}");
    }
}

#[test]
fn an_idle_connected_pair_of_processes_uses_little_cpu() {
    use weft_testkit::process::{example, run_bounded};
    let exe = example("weft-verbs", "idle_cpu");
    for link in ["udp", "shm"] {
        let o = run_bounded(
            &exe,
            &["--link", link, "--secs", "2"],
            Duration::from_secs(60),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{link}: {out} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // "idle_cpu link=udp secs=2.00 parent=0.4% child=0.2%"
        for who in ["parent=", "child="] {
            let pct: f64 = out
                .split_whitespace()
                .find_map(|w| w.strip_prefix(who)?.strip_suffix('%')?.parse().ok())
                .unwrap_or_else(|| panic!("{link}: no {who} in {out:?}"));
            // A property, not a performance number: an engine thread that spun or
            // woke without end would use most of a core; issue 16 asks for <= 5 %.
            assert!(
                pct < 50.0,
                "{link}: {who}{pct}% of a core while idle: {out}"
            );
        }
    }
}
