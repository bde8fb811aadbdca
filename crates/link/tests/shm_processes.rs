//! The shm link between two *processes*: this test binary re-runs itself with
//! `--exact <child test> --ignored` and `WEFT_SHM_CHILD` set, so the child side is a
//! separate process with its own address space that only shares the segment. Every
//! wait is bounded; a child still running at a test's deadline is killed.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use weft_link::datagram::path_between;
use weft_link::{Datagram, DatagramLink, ShmLink, ShmOptions};

const CHILD: &str = "WEFT_SHM_CHILD";

/// Names unique to this process; `tag` tells the tests apart.
fn names(tag: u8) -> (SocketAddr, SocketAddr) {
    let port = (std::process::id() % 50_000) as u16 + 10_000;
    (
        SocketAddr::new([127, 0, 2, tag].into(), port),
        SocketAddr::new([127, 0, 3, tag].into(), port),
    )
}

fn env_addr(k: &str) -> SocketAddr {
    std::env::var(k).expect(k).parse().expect("addr")
}

/// In a child: true when this run is the child role.
fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

fn spawn(test: &str, parent: SocketAddr, child: SocketAddr, extra: &[(&str, &str)]) -> Child {
    let mut c = Command::new(std::env::current_exe().expect("exe"));
    c.args([
        "--exact",
        test,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, "1")
    .env("PARENT", parent.to_string())
    .env("ME", child.to_string());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().expect("spawn child")
}

/// Wait for a child with a deadline; kill it if it overstays. True when it succeeded.
fn finish(mut c: Child, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = c.try_wait().expect("try_wait") {
            return s.success();
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn opts() -> ShmOptions {
    ShmOptions {
        pool_buffers: 1024,
        ..ShmOptions::default()
    }
}

fn dgram(l: &ShmLink, to: SocketAddr, bytes: &[u8]) -> Datagram {
    let mut buf = l.pool().alloc().expect("buffer");
    assert!(buf.copy_from(bytes));
    Datagram {
        buf,
        path: path_between(l.local_addr(), to).expect("family"),
    }
}

/// Payload of datagram `i`: its number and a length that varies with it.
fn payload(i: u32) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(4 + (i as usize * 37) % 4000, (i % 251) as u8);
    v
}

const N: u32 = 100_000;

/// Send 0..N to `peer` while receiving 0..N from it, checking order and content;
/// then send "done" and wait for the peer's "done".
fn exchange(l: &mut ShmLink, peer: SocketAddr, deadline: Instant) {
    let (mut next_tx, mut next_rx) = (0u32, 0u32);
    let mut tx = Vec::new();
    let mut rx = Vec::new();
    let mut done_seen = false;
    let mut done_sent = false;
    while !(done_seen && done_sent) {
        assert!(
            Instant::now() < deadline,
            "exchange timed out at tx {next_tx} rx {next_rx}"
        );
        while tx.len() < 32 && next_tx < N {
            tx.push(dgram(l, peer, &payload(next_tx)));
            next_tx += 1;
        }
        if next_tx == N && next_rx == N && tx.is_empty() && !done_sent {
            tx.push(dgram(l, peer, b"done"));
            done_sent = true;
        }
        l.send_burst(&mut tx).expect("send");
        rx.clear();
        let got = l.recv_burst(&mut rx, 64).expect("recv");
        for d in &rx {
            assert_eq!(d.path.src_port, peer.port());
            if &d.buf[..] == b"done" {
                assert_eq!(next_rx, N, "done after everything");
                done_seen = true;
                continue;
            }
            assert_eq!(
                &d.buf[..],
                &payload(next_rx)[..],
                "datagram {next_rx} in order, intact"
            );
            next_rx += 1;
        }
        if got == 0 && tx.is_empty() && next_tx == N {
            l.wait(Duration::from_millis(50), None).expect("wait");
        }
    }
    assert_eq!(l.stats().tx_dropped, 0);
    assert_eq!(l.stats().rx_dropped, 0);
}

#[test]
#[ignore = "child role of two_processes_exchange_100k_datagrams_each_way_in_order"]
fn child_exchange() {
    if !is_child() {
        return;
    }
    let mut l = ShmLink::bind(env_addr("ME"), opts()).expect("bind");
    exchange(
        &mut l,
        env_addr("PARENT"),
        Instant::now() + Duration::from_secs(60),
    );
}

#[test]
fn two_processes_exchange_100k_datagrams_each_way_in_order() {
    let (me, child) = names(1);
    let mut l = ShmLink::bind(me, opts()).expect("bind");
    let c = spawn("child_exchange", me, child, &[]);
    // Both start sending at once: the parent may find the child not listening yet,
    // and drops are not allowed here, so wait for the child's first datagram... which
    // needs the parent listening (it is). The child connects; the parent only sends
    // once that connection exists.
    let deadline = Instant::now() + Duration::from_secs(60);
    while l.peers().is_empty() {
        assert!(Instant::now() < deadline, "child never connected");
        l.wait(Duration::from_millis(20), None).expect("wait");
    }
    exchange(&mut l, child, deadline);
    assert!(finish(c, Duration::from_secs(30)), "child failed");
    assert_eq!(
        l.shm_stats().connects,
        0,
        "one connection, made by the child"
    );
}

#[test]
#[ignore = "child role of a_blocked_wait_in_another_process_wakes_on_a_datagram"]
fn child_sleeper() {
    if !is_child() {
        return;
    }
    let parent = env_addr("PARENT");
    let mut l = ShmLink::bind(env_addr("ME"), opts()).expect("bind");
    let mut v = vec![dgram(&l, parent, b"ready")];
    l.send_burst(&mut v).expect("send");
    // Block for up to 20 s; the parent sends 200 ms after our "ready".
    let t = Instant::now();
    let mut rx = Vec::new();
    while rx.is_empty() && t.elapsed() < Duration::from_secs(20) {
        l.wait(Duration::from_secs(20), None).expect("wait");
        l.recv_burst(&mut rx, 8).expect("recv");
    }
    assert_eq!(&rx[0].buf[..], b"wake");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "woken by the eventfd"
    );
    let mut v = vec![dgram(&l, parent, b"woke")];
    l.send_burst(&mut v).expect("send");
    // Stay until the parent has it (its hang-up drains our ring anyway).
    std::thread::sleep(Duration::from_millis(50));
}

#[test]
fn a_blocked_wait_in_another_process_wakes_on_a_datagram() {
    let (me, child) = names(2);
    let mut l = ShmLink::bind(me, opts()).expect("bind");
    let c = spawn("child_sleeper", me, child, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rx = Vec::new();
    while rx.is_empty() {
        assert!(Instant::now() < deadline, "no ready");
        l.wait(Duration::from_millis(50), None).expect("wait");
        l.recv_burst(&mut rx, 8).expect("recv");
    }
    assert_eq!(&rx[0].buf[..], b"ready");
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    let mut v = vec![dgram(&l, child, b"wake")];
    l.send_burst(&mut v).expect("send");
    rx.clear();
    while rx.is_empty() {
        assert!(Instant::now() < deadline, "no answer");
        l.wait(Duration::from_secs(5), None).expect("wait");
        l.recv_burst(&mut rx, 8).expect("recv");
    }
    assert_eq!(&rx[0].buf[..], b"woke");
    eprintln!("round trip through a sleeping peer: {:?}", sent.elapsed());
    assert!(finish(c, Duration::from_secs(20)), "child failed");
}

#[test]
#[ignore = "child role of a_peer_killed_with_sigkill_is_noticed_and_sends_to_it_are_dropped"]
fn child_stalls() {
    if !is_child() {
        return;
    }
    let parent = env_addr("PARENT");
    let mut l = ShmLink::bind(env_addr("ME"), opts()).expect("bind");
    let mut v = vec![dgram(&l, parent, b"ready")];
    l.send_burst(&mut v).expect("send");
    // Never read again: the parent's ring to us fills. Wait to be killed.
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_peer_killed_with_sigkill_is_noticed_and_sends_to_it_are_dropped() {
    let (me, child) = names(3);
    let mut l = ShmLink::bind(
        me,
        ShmOptions {
            slots: 64,
            ..opts()
        },
    )
    .expect("bind");
    let mut c = spawn("child_stalls", me, child, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rx = Vec::new();
    while rx.is_empty() {
        assert!(Instant::now() < deadline, "no ready");
        l.wait(Duration::from_millis(50), None).expect("wait");
        l.recv_burst(&mut rx, 8).expect("recv");
    }
    // The child's ring (its geometry: the default 256 slots) fills up.
    let mut tx: Vec<_> = (0..300).map(|i| dgram(&l, child, &payload(i))).collect();
    l.send_burst(&mut tx).expect("send");
    assert_eq!(tx.len(), 300 - 256, "ring full, the rest stays with us");
    assert!(l.stats().tx_ring_full >= 1);
    c.kill().expect("SIGKILL");
    c.wait().expect("reap");
    let t = Instant::now();
    while !tx.is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "sends to a dead peer must not stall"
        );
        l.send_burst(&mut tx).expect("send");
    }
    // More sends: counted as unreachable, immediately.
    let mut more: Vec<_> = (0..10).map(|i| dgram(&l, child, &payload(i))).collect();
    assert_eq!(l.send_burst(&mut more).expect("send"), 10);
    let s = l.stats();
    let shm = l.shm_stats();
    eprintln!("after SIGKILL: {s:?} {shm:?}");
    assert_eq!(shm.peers_lost, 1);
    assert!(shm.unreachable_drops >= 10);
    assert_eq!(
        s.tx_dropped,
        300 + 10,
        "every datagram is accounted for as lost"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(l.peers().is_empty());
}

#[test]
#[ignore = "child role of an_icrc_mismatch_between_processes_is_refused"]
fn child_no_icrc() {
    if !is_child() {
        return;
    }
    let mut l = ShmLink::bind(
        env_addr("ME"),
        ShmOptions {
            icrc: false,
            ..opts()
        },
    )
    .expect("bind");
    let t = Instant::now();
    let mut rx = Vec::new();
    while l.shm_stats().refused == 0 && t.elapsed() < Duration::from_secs(20) {
        l.wait(Duration::from_millis(50), None).expect("wait");
        l.recv_burst(&mut rx, 8).expect("recv");
    }
    assert_eq!(l.shm_stats().refused, 1);
    assert!(rx.is_empty(), "nothing crosses a refused connection");
}

#[test]
fn an_icrc_mismatch_between_processes_is_refused() {
    let (me, child) = names(4);
    let mut l = ShmLink::bind(me, opts()).expect("bind");
    let c = spawn("child_no_icrc", me, child, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    // Keep trying until the child listens and refuses us.
    while l.shm_stats().refused == 0 {
        assert!(Instant::now() < deadline, "never refused");
        let mut v = vec![dgram(&l, child, b"hello")];
        l.send_burst(&mut v).expect("send");
        l.wait(Duration::from_millis(20), None).expect("wait");
    }
    assert!(l.icrc());
    assert!(l.peers().is_empty());
    assert!(finish(c, Duration::from_secs(20)), "child failed");
}

#[test]
#[ignore = "child role of tracked_sends_to_a_peer_killed_with_sigkill_are_released_or_lost"]
fn child_takes_five() {
    if !is_child() {
        return;
    }
    let parent = env_addr("PARENT");
    let mut l = ShmLink::bind(env_addr("ME"), opts()).expect("bind");
    let mut v = vec![dgram(&l, parent, b"ready")];
    l.send_burst(&mut v).expect("send");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut spare, mut took) = (Vec::new(), 0);
    while took < 5 {
        assert!(Instant::now() < deadline, "took {took} of 5");
        l.wait(Duration::from_millis(10), None).expect("wait");
        took += l
            .recv_each(5 - took, &mut spare, &mut |_| {})
            .expect("recv");
    }
    // The five are released (the receive stored the index); say so, then stall.
    let mut v = vec![dgram(&l, parent, b"took")];
    while !v.is_empty() {
        assert!(Instant::now() < deadline, "took not sent");
        l.send_burst(&mut v).expect("send");
    }
    std::thread::sleep(Duration::from_secs(60));
}

/// Tracked sends to a peer process that took five of them and was then killed
/// with SIGKILL: those five come back released (some perhaps before the kill),
/// the other fifteen lost, each tag once, nothing left outstanding.
#[test]
fn tracked_sends_to_a_peer_killed_with_sigkill_are_released_or_lost() {
    let (me, child) = names(5);
    let mut l = ShmLink::bind(me, opts()).expect("bind");
    let mut c = spawn("child_takes_five", me, child, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rx = Vec::new();
    while rx.is_empty() {
        assert!(Instant::now() < deadline, "no ready");
        l.wait(Duration::from_millis(50), None).expect("wait");
        l.recv_burst(&mut rx, 8).expect("recv");
    }
    let to = path_between(me, child).expect("family");
    for tag in 0..20 {
        assert!(l.send_tracked(&payload(tag as u32), &to, tag), "tag {tag}");
    }
    let (mut released, mut lost) = (Vec::new(), Vec::new());
    rx.clear();
    while rx.is_empty() {
        assert!(Instant::now() < deadline, "no took");
        l.wait(Duration::from_millis(50), None).expect("wait");
        l.recv_burst(&mut rx, 8).expect("recv");
    }
    assert_eq!(&rx[0].buf[..], b"took");
    l.take_released(&mut released);
    c.kill().expect("SIGKILL");
    c.wait().expect("reap");
    while l.tracked_outstanding() > 0 {
        assert!(Instant::now() < deadline, "hang-up not seen");
        l.wait(Duration::from_millis(50), None).expect("wait");
        l.take_released(&mut released);
        l.take_lost(&mut lost);
    }
    assert_eq!(released, (0..5).collect::<Vec<u64>>());
    assert_eq!(lost, (5..20).collect::<Vec<u64>>());
    assert_eq!(l.shm_stats().peers_lost, 1);
}
