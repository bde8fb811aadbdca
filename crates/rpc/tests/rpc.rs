//! weft-rpc end to end in one process, over the udp and the shm link: calls,
//! concurrency, ordering, deadlines, cancellation, overload, large messages,
//! server restart, malformed frames, keepalive, clusters, batching.

mod common;

#[path = "../examples/namenode/service.rs"]
#[allow(dead_code)] // the example's service (not the library's); this test uses part of it
mod namenode;

use common::*;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use weft_rpc::{block_on, Batching, Code, LinkKind, Mode, Progress};

const T: Duration = Duration::from_secs(10);

fn calls_and_statuses(kind: LinkKind) {
    let (s, _) = server(kind);
    let c = client(kind, s.local_addr());
    assert_eq!(c.call(ECHO, b"hello").wait().unwrap(), b"hello");
    assert_eq!(c.call(ECHO, b"").wait().unwrap(), b"");
    // Sizes around the inline limit and up to a full buffer.
    for n in [200usize, 256, 257, 1000, 4096 - 24] {
        let r = c.call(SIZED, &(n as u64).to_le_bytes()).wait().unwrap();
        assert_eq!(r.len(), n);
        assert!(r.iter().enumerate().all(|(i, &b)| b == i as u8));
    }
    let e = c.call(FAIL, &ms(5)).wait().unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::NotFound, "asked to fail"));
    let e = c.call(999, b"").wait().unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    let m = s.metrics().by_name("fail").unwrap();
    assert_eq!((m.calls, m.errors_with(Code::NotFound)), (1, 1));
    assert_eq!(s.metrics().by_name("echo").unwrap().ok, 2);
    assert!(s.metrics().by_name("echo").unwrap().latency.count() == 2);
    assert_eq!(c.metrics().snapshot()[&ECHO].calls, 2);
}

#[test]
fn calls_and_statuses_udp() {
    calls_and_statuses(LinkKind::Udp);
}

#[test]
fn calls_and_statuses_shm() {
    calls_and_statuses(LinkKind::Shm);
}

fn tokio_concurrency(kind: LinkKind, mode: Mode, progress: Progress) {
    let (s, _) = server_with(kind, |c| c.workers = 2);
    let c = client_with(kind, s.local_addr(), |c| {
        c.mode = mode;
        c.device.progress = progress;
        c.ring = 16;
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..8u64 {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..50u64 {
                    let v = t * 1000 + i;
                    // Mix in-place and worker-pool methods.
                    let m = if i % 10 == 0 { SLEEP } else { ECHO };
                    let payload = if m == SLEEP {
                        0u64.to_le_bytes().to_vec()
                    } else {
                        v.to_le_bytes().to_vec()
                    };
                    let r = c.call(m, &payload).await.unwrap();
                    assert_eq!(r, payload);
                }
            }));
        }
        for t in tasks {
            tokio::time::timeout(T, t).await.unwrap().unwrap();
        }
    });
    // More calls than credits were in flight at once: the credits held.
    assert!(c.server_ring() >= 16);
    assert_eq!(c.stats().credits, 16);
}

#[test]
fn tokio_tasks_share_a_dispatched_connection_udp() {
    tokio_concurrency(LinkKind::Udp, Mode::Dispatched, Progress::Thread);
}

#[test]
fn tokio_tasks_share_a_direct_connection_shm_inline_progress() {
    tokio_concurrency(LinkKind::Shm, Mode::Direct, Progress::Inline);
}

fn ordering(kind: LinkKind) {
    let (s, probe) = server(kind);
    let a = client(kind, s.local_addr());
    let b = client(kind, s.local_addr());
    let (mut sa, mut sb) = (a.stream(), b.stream());
    let mut ids = Vec::new();
    for i in 0..300u64 {
        ids.push(sa.call(SEQ, &i.to_le_bytes()).unwrap());
        sb.call(SEQ, &(1_000_000 + i).to_le_bytes()).unwrap();
    }
    let mut got = Vec::new();
    while let Some((id, r)) = sa.take() {
        got.push((id, u64_of(&r.unwrap())));
    }
    while sb.take().is_some() {}
    // Responses of a connection arrive in order...
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), ids);
    assert_eq!(
        got.iter().map(|g| g.1).collect::<Vec<_>>(),
        (0..300).collect::<Vec<_>>()
    );
    // ...and each connection's calls ran in the order they were sent.
    let seen = probe.seq.lock().unwrap().clone();
    for conn in [seen[0].0, seen.iter().find(|s| s.0 != seen[0].0).unwrap().0] {
        let mine: Vec<u64> = seen.iter().filter(|s| s.0 == conn).map(|s| s.1).collect();
        assert_eq!(mine.len(), 300);
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
    }
}

#[test]
fn per_connection_ordering_udp() {
    ordering(LinkKind::Udp);
}

#[test]
fn per_connection_ordering_shm() {
    ordering(LinkKind::Shm);
}

/// One client interleaves large requests (moved by RDMA READ) with small ones on
/// one connection: the handler must see them, and the client take the answers
/// (some of them large too, moved by READ the other way), in the order they were
/// sent. A large request used to run only when its READ finished, after the small
/// requests behind it had run and been answered.
fn large_and_small_in_order(kind: LinkKind, mode: Mode, batching: Batching, progress: Progress) {
    let (s, probe) = server_with(kind, |c| {
        c.buffer_size = 1024;
        c.device.progress = progress;
    });
    let c = client_with(kind, s.local_addr(), |c| {
        c.buffer_size = 1024;
        c.mode = mode;
        c.batching = batching;
        c.device.progress = progress;
    });
    let mut st = c.stream();
    let mut sent = Vec::new();
    for i in 0..90u64 {
        // A large request with a large answer, a large one with a short answer, and
        // small ones between them.
        let (method, len) = match i % 6 {
            0 => (SEQ, 30_000 + 997 * i as usize),
            3 => (SEQ_SHORT, 50_000),
            1 | 4 => (SEQ, 8),
            _ => (SEQ_SHORT, 16),
        };
        let mut p = i.to_le_bytes().to_vec();
        p.resize(len, i as u8);
        let id = st.call(method, &p).unwrap();
        let answer = if method == SEQ { len } else { 8 };
        sent.push((id, i, answer));
    }
    let mut got = Vec::new();
    while let Some((id, r)) = st.take() {
        let r = r.unwrap();
        got.push((id, u64_of(&r), r.len()));
    }
    assert_eq!(got, sent, "answers out of order");
    let seen: Vec<u64> = probe.seq.lock().unwrap().iter().map(|s| s.1).collect();
    assert_eq!(
        seen,
        (0..90).collect::<Vec<_>>(),
        "requests ran out of order"
    );
    let (ss, cs) = (s.stats(), c.stats());
    assert_eq!(ss.rendezvous_in, 30, "{ss:?}");
    assert_eq!(
        (ss.rendezvous_out, cs.rendezvous_in),
        (15, 15),
        "{ss:?} {cs:?}"
    );
    assert_eq!(ss.malformed_frames, 0);
    // Every credit came back (the answer to the last RELEASE comes before this
    // call's, in order).
    assert_eq!(c.call(ECHO, b"after").wait().unwrap(), b"after");
    assert_eq!(c.stats().credits, 32);
}

#[test]
fn large_requests_keep_their_place_in_order_udp() {
    large_and_small_in_order(
        LinkKind::Udp,
        Mode::Direct,
        Batching::Adaptive,
        Progress::Thread,
    );
}

#[test]
fn large_requests_keep_their_place_in_order_shm() {
    large_and_small_in_order(LinkKind::Shm, Mode::Direct, Batching::Off, Progress::Thread);
}

#[test]
fn large_requests_keep_their_place_in_order_batched_dispatched_shm_inline_progress() {
    large_and_small_in_order(
        LinkKind::Shm,
        Mode::Dispatched,
        Batching::Always,
        Progress::Inline,
    );
}

fn deadlines(kind: LinkKind) {
    let (s, probe) = server_with(kind, |c| c.workers = 1);
    let c = client(kind, s.local_addr());
    // The client gives up at its deadline while the handler still runs.
    let t = Instant::now();
    let e = c
        .call_with(SLEEP, &ms(300), Some(Duration::from_millis(40)))
        .wait()
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded);
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    // The client told the server, whose handler saw the cancel and stopped early.
    assert!(eventually(T, || probe.slept.load(Ordering::SeqCst) == 1));
    // The server enforces the deadline it was sent: a call queued behind a busy
    // worker expires there and never runs.
    let busy = c.call(SLEEP, &ms(150));
    let queued = c.call_with(SLEEP, &ms(0), Some(Duration::from_millis(60)));
    let before = probe.slept.load(Ordering::SeqCst);
    assert_eq!(queued.wait().unwrap_err().code(), Code::DeadlineExceeded);
    busy.wait().unwrap();
    assert!(eventually(T, || s.stats().deadline_exceeded
        + s.stats().cancelled
        >= 1));
    // Only the busy call ran; the queued one was skipped.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(probe.slept.load(Ordering::SeqCst), before + 1);
}

#[test]
fn deadlines_at_client_and_server_udp() {
    deadlines(LinkKind::Udp);
}

#[test]
fn deadlines_at_client_and_server_shm() {
    deadlines(LinkKind::Shm);
}

/// An answer that is already waiting when the client first looks, but came after the
/// call's deadline, does not make the call succeed.
#[test]
fn an_answer_taken_after_the_deadline_is_deadline_exceeded() {
    let (s, probe) = server(LinkKind::Shm);
    let c = client(LinkKind::Shm, s.local_addr());
    // Direct mode: nothing drives the connection until someone waits, so the answer
    // (after 100 ms) sits in the queue while the 50 ms deadline passes. The server
    // checks the deadline only before it runs a call, so this one runs.
    let call = c.call_with(SLEEP, &ms(100), Some(Duration::from_millis(50)));
    assert!(eventually(T, || probe.slept.load(Ordering::SeqCst) == 1));
    std::thread::sleep(Duration::from_millis(20));
    let e = call.wait().unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert_eq!(c.stats().deadline_exceeded, 1);
    // A call within its deadline still succeeds.
    let ok = c.call_with(ECHO, b"in time", Some(T)).wait().unwrap();
    assert_eq!(ok, b"in time");
}

#[test]
fn dropping_a_future_cancels_the_call_at_the_server() {
    let kind = LinkKind::Shm;
    let (s, probe) = server_with(kind, |c| c.workers = 1);
    let c = client(kind, s.local_addr());
    let busy = c.call(SLEEP, &ms(100));
    // Queued behind the busy worker; polled once so it leaves, then dropped.
    let mut queued = c.call(SLEEP, &ms(0));
    let w = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(w);
    assert!(std::future::Future::poll(std::pin::Pin::new(&mut queued), &mut cx).is_pending());
    std::thread::sleep(Duration::from_millis(10));
    drop(queued);
    busy.wait().unwrap();
    assert!(eventually(T, || s.stats().cancelled == 1));
    assert_eq!(
        probe.slept.load(Ordering::SeqCst),
        1,
        "the cancelled call never ran"
    );
    assert!(c.stats().cancels_sent >= 1);
    // A future dropped before it left costs nothing at the server.
    let many: Vec<_> = (0..100).map(|_| c.call(ECHO, b"x")).collect();
    drop(many);
    assert_eq!(c.call(ECHO, b"after").wait().unwrap(), b"after");
}

fn overload(kind: LinkKind) {
    let (s, _) = server_with(kind, |c| {
        c.workers = 1;
        c.max_in_flight = 2;
    });
    let c = client(kind, s.local_addr());
    let calls: Vec<_> = (0..10).map(|_| c.call(SLEEP, &ms(30))).collect();
    let results: Vec<_> = calls.into_iter().map(|c| c.wait()).collect();
    let shed = results
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.code() == Code::Overloaded))
        .count();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(shed + ok, 10, "{results:?}");
    assert!(shed >= 5 && ok >= 1, "shed {shed}, ok {ok}");
    assert_eq!(s.stats().overloaded, shed as u64);
    assert_eq!(
        s.metrics()
            .by_name("sleep")
            .unwrap()
            .errors_with(Code::Overloaded),
        shed as u64
    );
    // The server recovers once the work drains.
    assert!(c.call(SLEEP, &ms(0)).wait().is_ok());
}

#[test]
fn overload_is_shed_with_a_typed_status_udp() {
    overload(LinkKind::Udp);
}

#[test]
fn overload_is_shed_with_a_typed_status_shm() {
    overload(LinkKind::Shm);
}

fn large(kind: LinkKind) {
    let (s, _) = server_with(kind, |c| c.buffer_size = 1024);
    let c = client_with(kind, s.local_addr(), |c| c.buffer_size = 1024);
    let big: Vec<u8> = (0..(1usize << 20)).map(|i| ((i * 31) >> 5) as u8).collect();
    assert_eq!(c.call(ECHO, &big).wait().unwrap(), big);
    let r = c.call(SIZED, &(300_000u64).to_le_bytes()).wait().unwrap();
    assert_eq!(r.len(), 300_000);
    assert!(r.iter().enumerate().all(|(i, &b)| b == i as u8));
    // Many large and small calls at once.
    let mut st = c.stream();
    for i in 0..20u64 {
        if i % 2 == 0 {
            st.call(ECHO, &big[..(i as usize + 1) * 10_000]).unwrap();
        } else {
            st.call(ECHO, &i.to_le_bytes()).unwrap();
        }
    }
    let mut n = 0;
    while let Some((_, r)) = st.take() {
        r.unwrap();
        n += 1;
    }
    assert_eq!(n, 20);
    let st = s.stats();
    assert!(st.rendezvous_in >= 11 && st.rendezvous_out >= 12, "{st:?}");
    assert!(c.stats().rendezvous_in >= 12);
    // Too large for the server's limit: refused with a typed status.
    let (s2, _) = server_with(kind, |c| {
        c.buffer_size = 1024;
        c.max_message = 10_000;
    });
    let c2 = client(kind, s2.local_addr());
    let e = c2.call(ECHO, &big[..20_000]).wait().unwrap_err();
    assert_eq!(e.code(), Code::MessageTooLarge);
    let e = c2
        .call(SIZED, &(50_000u64).to_le_bytes())
        .wait()
        .unwrap_err();
    assert_eq!(e.code(), Code::MessageTooLarge);
}

#[test]
fn large_messages_move_by_rdma_read_udp() {
    large(LinkKind::Udp);
}

#[test]
fn large_messages_move_by_rdma_read_shm() {
    large(LinkKind::Shm);
}

fn restart(kind: LinkKind) {
    let (s, _) = server(kind);
    let at = s.local_addr();
    let c = client(kind, at);
    assert!(c.call(ECHO, b"1").wait().is_ok());
    let pending = c.call(SLEEP, &ms(2000));
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    s.shutdown();
    let e = pending.wait().unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(
        c.call(ECHO, b"2").wait().unwrap_err().code(),
        Code::Unavailable
    );
    assert!(c.dead().is_some());
    // A new server on the same address serves new connections.
    let probe = std::sync::Arc::new(Probe::default());
    let s2 = weft_rpc::Server::start(test_service(&probe), weft_rpc::ServerConfig::new(kind), at)
        .expect("restart on the same address");
    let c2 = client(kind, at);
    assert_eq!(c2.call(ECHO, b"3").wait().unwrap(), b"3");
    drop(s2);
}

#[test]
fn server_restart_fails_calls_then_serves_again_udp() {
    restart(LinkKind::Udp);
}

#[test]
fn server_restart_fails_calls_then_serves_again_shm() {
    restart(LinkKind::Shm);
}

#[test]
fn keepalive_declares_a_stuck_server_dead() {
    let kind = LinkKind::Udp;
    let (s, _) = server(kind);
    let c = client_with(kind, s.local_addr(), |c| {
        c.keepalive = Duration::from_millis(50);
        c.keepalive_timeout = Duration::from_millis(150);
    });
    // A live server answers pings while a long worker-pool call runs...
    assert!(c.call(SLEEP, &ms(400)).wait().is_ok());
    assert!(c.stats().pings >= 2);
    // ...a cluster head stuck in a handler does not.
    let t = Instant::now();
    let e = c.call(STALL, &ms(1500)).wait().unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert!(e.message().contains("keepalive"), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1200),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn clusters_take_connections_by_load_and_steal_work() {
    let kind = LinkKind::Shm;
    let (s, probe) = server_with(kind, |c| {
        c.clusters = 2;
        c.work_stealing = true;
    });
    let clients: Vec<_> = (0..4).map(|_| client(kind, s.local_addr())).collect();
    let st = s.stats();
    assert_eq!(st.clusters.len(), 2);
    assert!(
        st.clusters.iter().all(|c| c.placed >= 1),
        "both clusters get connections: {st:?}"
    );
    // Load from one connection only: its head shares work with the other.
    let mut stream = clients[0].stream();
    for round in 0..20 {
        for i in 0..32u64 {
            stream.call(SEQ, &(round * 100 + i).to_le_bytes()).unwrap();
        }
        while stream.take().is_some() {}
    }
    assert_eq!(probe.seq.lock().unwrap().len(), 640);
    // A backlog of slow in-place calls on one connection: the idle head steals.
    for _ in 0..16 {
        stream.call(STALL, &ms(2)).unwrap();
    }
    let mut n = 0;
    while let Some((_, r)) = stream.take() {
        r.unwrap();
        n += 1;
    }
    assert_eq!(n, 16);
    let st = s.stats();
    assert!(st.stolen >= 1, "{st:?}");
}

/// Issue `n` ECHO calls back to back on one stream, then take every answer.
fn echo_stream(c: &weft_rpc::Client, n: u64) {
    let mut st = c.stream();
    for i in 0..n {
        st.call(ECHO, &i.to_le_bytes()).unwrap();
    }
    let mut got = 0u64;
    while let Some((_, r)) = st.take() {
        assert_eq!(r.unwrap(), got.to_le_bytes(), "answers in order");
        got += 1;
    }
    assert_eq!(got, n);
}

#[test]
fn batching_packs_many_calls_into_one_message() {
    let kind = LinkKind::Shm;
    let (s, _) = server(kind);
    let c = client_with(kind, s.local_addr(), |c| {
        c.batching = Batching::Always;
        c.max_batch = 16;
    });
    echo_stream(&c, 256);
    let cs = c.stats();
    assert_eq!(cs.requests_sent, 256);
    assert!(cs.messages_sent <= 32, "{cs:?}");
    assert!(s.stats().messages <= 32);
    // A future alone is sent when it is waited on.
    assert_eq!(c.call(ECHO, b"solo").wait().unwrap(), b"solo");
}

/// The default batching follows the load: a lone call leaves at once in a message of
/// its own (it never waits for company), while calls issued back to back with answers
/// outstanding share messages; with batching off every call is a message.
#[test]
fn adaptive_batching_sends_lone_calls_at_once_and_packs_calls_under_load() {
    let kind = LinkKind::Shm;
    let (s, _) = server(kind);
    let c = client_with(kind, s.local_addr(), |c| {
        assert_eq!(c.batching, Batching::Adaptive, "the default");
        c.max_batch = 16;
    });
    for i in 0..50u64 {
        assert_eq!(
            c.call(ECHO, &i.to_le_bytes()).wait().unwrap(),
            i.to_le_bytes()
        );
    }
    let lone = c.stats();
    assert_eq!(
        (lone.messages_sent, lone.requests_sent, lone.held),
        (50, 50, 0)
    );
    // Lone calls: the rule that would hold the first call too is never tried.
    assert_eq!((lone.batch_tries, lone.batch_switches), (0, 0));
    // Direct mode: answers are taken only when the caller waits, so after the
    // first call leaves, something stays unanswered while the rest are issued.
    echo_stream(&c, 256);
    let cs = c.stats();
    assert_eq!(cs.requests_sent - lone.requests_sent, 256);
    assert_eq!(cs.held - lone.held, 255, "{cs:?}");
    assert!(cs.messages_sent - lone.messages_sent <= 1 + 16, "{cs:?}");

    let off = client_with(kind, s.local_addr(), |c| c.batching = Batching::Off);
    echo_stream(&off, 256);
    let os = off.stats();
    assert_eq!((os.messages_sent, os.requests_sent, os.held), (256, 256, 0));
}

/// Batching must not cost the server its parallelism: a message of many blocking
/// calls runs in parts on the pool's workers and is still answered as one message.
#[test]
fn a_batched_message_of_blocking_calls_runs_on_every_worker() {
    let kind = LinkKind::Shm;
    let (s, probe) = server_with(kind, |c| c.workers = 2);
    let c = client_with(kind, s.local_addr(), |c| c.batching = Batching::Always);
    let mut st = c.stream();
    for i in 0..8u64 {
        st.call(SLEEP, &(20 + i).to_le_bytes()).unwrap();
    }
    let mut got = Vec::new();
    while let Some((_, r)) = st.take() {
        got.push(u64_of(&r.unwrap()));
    }
    got.sort_unstable();
    assert_eq!(got, (20..28).collect::<Vec<u64>>());
    let (cs, ss) = (c.stats(), s.stats());
    assert_eq!((cs.requests_sent, cs.messages_sent), (8, 1), "{cs:?}");
    assert_eq!(
        (ss.split, ss.pooled, cs.messages_received),
        (1, 1, 1),
        "{ss:?}"
    );
    assert_eq!(probe.slept.load(Ordering::SeqCst), 8);
    assert_eq!(
        probe.most_sleeping.load(Ordering::SeqCst),
        2,
        "both workers ran"
    );
}

#[test]
fn typed_namenode_service_over_both_links() {
    use namenode::{FsError, NamenodeClient, NamenodeServer, Namespace};
    for kind in [LinkKind::Udp, LinkKind::Shm] {
        let s = weft_rpc::Server::start(
            std::sync::Arc::new(NamenodeServer::new(Namespace::default())),
            weft_rpc::ServerConfig::new(kind),
            any_addr(),
        )
        .unwrap();
        let nn = NamenodeClient::new(client(kind, s.local_addr()));
        assert_eq!(nn.mkdirs("/user/weft".into()).wait().unwrap(), Ok(true));
        let st = nn
            .create("/user/weft/f".into(), 3, 1 << 20, false)
            .wait()
            .unwrap()
            .unwrap();
        assert_eq!(st.len, 1 << 20);
        let fs = block_on(nn.get_file_status("/user/weft/f".into())).unwrap();
        assert_eq!(fs.unwrap().replication, 3);
        let blocks = nn
            .get_block_locations("/user/weft/f".into(), 0, 10)
            .wait()
            .unwrap()
            .unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(
            nn.rename("/user/weft/f".into(), "/user/weft/g".into())
                .wait()
                .unwrap(),
            Ok(true)
        );
        assert_eq!(
            nn.get_file_status("/user/weft/f".into()).wait().unwrap(),
            Err(FsError::NotFound("/user/weft/f".into()))
        );
        assert_eq!(
            nn.delete("/user/weft/g".into(), false).wait().unwrap(),
            Ok(true)
        );
        let m = s.metrics().by_name("get_file_status").unwrap();
        assert_eq!(m.calls, 2);
        assert_eq!(
            nn.client().metrics().by_name("mkdirs").unwrap().calls,
            1,
            "the stub names its methods in the client's metrics"
        );
    }
}

#[test]
fn the_server_closes_connections_idle_past_its_timeout() {
    let kind = LinkKind::Udp;
    let (s, _) = server_with(kind, |c| c.idle_timeout = Some(Duration::from_millis(100)));
    let c = client(kind, s.local_addr());
    assert!(c.call(ECHO, b"x").wait().is_ok());
    assert!(eventually(T, || s.stats().connections_closed == 1));
    let e = c.call(ECHO, b"y").wait().unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    // A client waiting on a long call pings, and its connection stays open.
    let c2 = client_with(kind, s.local_addr(), |c| {
        c.keepalive = Duration::from_millis(30);
    });
    assert!(c2.call(SLEEP, &ms(300)).wait().is_ok());
    assert_eq!(s.stats().connections_closed, 1);
}
