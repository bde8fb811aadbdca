//! AF_XDP (generic XDP, copy mode) over a real veth pair inside a network namespace
//! this test creates. The other end is an AF_PACKET link: an independent reader and
//! writer of the wire. Needs root, iproute2 and a kernel with AF_XDP; without them
//! it fails under CI and is a counted skip elsewhere (weft-testkit), with the
//! kernel's error when AF_XDP is the reason.

mod common;

use common::VethNs;
use std::time::{Duration, Instant};
use weft_link::afpacket::AfPacket;
use weft_link::afxdp::{AfXdpLink, XdpConfig, XdpMode};
use weft_link::{BufferPool, Link, PacketBuf};

const ETHERTYPE: [u8; 2] = [0x88, 0xb5]; // local experimental

/// `n` test frames from `src` to `dst`, numbered in byte 20, of growing length.
fn frames(pool: &BufferPool, src: [u8; 6], dst: [u8; 6], n: u8) -> Vec<PacketBuf> {
    (0..n)
        .map(|i| {
            let len = 60 + usize::from(i) * 14; // 60 … 1446 bytes
            let mut f = vec![i; len];
            f[..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&src);
            f[12..14].copy_from_slice(&ETHERTYPE);
            f[20] = i;
            let mut b = pool.alloc().expect("buffer");
            assert!(b.copy_from(&f));
            b
        })
        .collect()
}

/// Send all of `tx` on `from` and collect `n` test frames on `to` (bounded: 5 s).
fn cross(from: &mut dyn Link, to: &mut dyn Link, mut tx: Vec<PacketBuf>, n: usize) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut rx = Vec::new();
    let mut seq = Vec::new();
    while seq.len() < n && Instant::now() < deadline {
        if !tx.is_empty() {
            from.send_burst(&mut tx).expect("send");
        }
        if to.recv_burst(&mut rx, 32).expect("recv") == 0 {
            to.wait(Duration::from_millis(5)).expect("wait");
        }
        for f in rx.drain(..) {
            if f.get(12..14) == Some(&ETHERTYPE[..]) {
                let i = f[20];
                assert_eq!(f.len(), 60 + usize::from(i) * 14, "frame {i} whole");
                assert!(f[21..].iter().all(|&b| b == i), "frame {i} intact");
                seq.push(i);
            }
        }
    }
    seq
}

fn both_ways(mode: XdpMode, ns_name: &'static str) {
    if weft_testkit::require("network namespaces", common::can_run()).is_none()
        || weft_testkit::require("AF_XDP on this kernel", weft_link::afxdp::probe()).is_none()
    {
        return;
    }
    let ns = VethNs::new(ns_name, "xw0", "xw1");
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter().expect("setns");
            let pool = BufferPool::new(1024, 2048);
            let mut wire = AfPacket::open("xw0", pool.clone()).expect("open AF_PACKET on xw0");
            let cfg = XdpConfig {
                mode,
                ..XdpConfig::default()
            };
            let mut xdp = AfXdpLink::with_config("xw1", pool.clone(), cfg)
                .expect("open AF_XDP on xw1 (the kernel's error says why it cannot)");
            assert_eq!(xdp.queues(), 1, "a plain veth has one receive queue");
            let shown = ns.output(&["ip", "link", "show", "xw1"]);
            let hook = match mode {
                XdpMode::Generic => "xdpgeneric",
                XdpMode::Native => "xdp ",
            };
            assert!(shown.contains(hook), "program attached ({hook}): {shown}");

            // wire → AF_XDP
            let (wmac, xmac) = (wire.info().mac, xdp.info().mac);
            let tx = frames(&pool, wmac, xmac, 100);
            let seq = cross(&mut wire, &mut xdp, tx, 100);
            assert_eq!(
                seq,
                (0..100).collect::<Vec<u8>>(),
                "every frame, in order, into AF_XDP"
            );
            assert_eq!(xdp.stats().rx_frames, 100);

            // AF_XDP → wire, more than one kick's worth (32) at a time
            let tx = frames(&pool, xmac, wmac, 100);
            let seq = cross(&mut xdp, &mut wire, tx, 100);
            assert_eq!(
                seq,
                (0..100).collect::<Vec<u8>>(),
                "every frame, in order, out of AF_XDP"
            );
            assert_eq!(xdp.stats().tx_frames, 100);

            // A frame longer than the link allows is accepted and counted, never cut.
            let mut long = vec![pool.alloc().expect("buffer")];
            assert!(long[0].set_len(xdp.info().max_frame + 1));
            assert_eq!(xdp.send_burst(&mut long).expect("send"), 1);
            xdp.refresh_stats();
            let st = xdp.stats();
            assert_eq!((st.tx_dropped, st.rx_dropped), (1, 0), "{st:?}");

            // A busy stream in both directions at once: nothing lost at this rate.
            let mut got = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            for round in 0..40u8 {
                let tx = frames(&pool, wmac, xmac, 25);
                let back = frames(&pool, xmac, wmac, 25);
                let mut back_tx = back;
                while !back_tx.is_empty() && Instant::now() < deadline {
                    xdp.send_burst(&mut back_tx).expect("send");
                }
                got += cross(&mut wire, &mut xdp, tx, 25).len();
                assert!(Instant::now() < deadline, "round {round} in time");
            }
            assert_eq!(got, 40 * 25);

            drop(wire);
            drop(xdp);
            // The drop closes the program's link; the kernel detaches it when the last
            // reference to that file goes. A process another test thread is spawning
            // at that moment holds a copy of this process's descriptors until its
            // exec closes them (close-on-exec), so the detachment may come a moment
            // later: the likely cause of ci117's one failure (still attached right
            // after the drop, once in 25 clean-clone runs). Look until a deadline: a
            // program left attached still fails.
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut shown = ns.output(&["ip", "link", "show", "xw1"]);
            while shown.contains("xdp") && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
                shown = ns.output(&["ip", "link", "show", "xw1"]);
            }
            assert!(!shown.contains("xdp"), "program detached on drop: {shown}");
            assert_eq!(pool.available(), 1024, "every buffer went back to the pool");
        });
    });
}

/// A transmit budget above the copy mode's 32 frames per `sendto`
/// (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17+): a burst of 100 leaves whole and in
/// order, and a budget outside 32..=ring size is refused. Older kernels refuse the
/// option itself; the burst must cross either way.
#[test]
fn a_long_burst_under_a_raised_transmit_budget_leaves_whole_and_in_order() {
    if weft_testkit::require("network namespaces", common::can_run()).is_none()
        || weft_testkit::require("AF_XDP on this kernel", weft_link::afxdp::probe()).is_none()
    {
        return;
    }
    let ns = VethNs::new("weft-xdpbudget", "xb0", "xb1");
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter().expect("setns");
            let pool = BufferPool::new(1024, 2048);
            let mut wire = AfPacket::open("xb0", pool.clone()).expect("open AF_PACKET on xb0");
            let mut xdp = AfXdpLink::open("xb1", pool.clone()).expect("open AF_XDP on xb1");
            match xdp.set_tx_budget(256) {
                Ok(()) => {
                    assert!(xdp.set_tx_budget(16).is_err(), "a budget below 32 refused");
                    assert!(
                        xdp.set_tx_budget(1 << 20).is_err(),
                        "a budget above the ring refused"
                    );
                }
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOPROTOOPT), "{e}"),
            }
            let (wmac, xmac) = (wire.info().mac, xdp.info().mac);
            let mut tx = frames(&pool, xmac, wmac, 100);
            assert_eq!(
                xdp.send_burst(&mut tx).expect("send"),
                100,
                "one call took all"
            );
            let seq = cross(&mut xdp, &mut wire, tx, 100);
            assert_eq!(seq, (0..100).collect::<Vec<u8>>(), "every frame, in order");
            assert_eq!(xdp.stats().tx_frames, 100);
        });
    });
}

#[test]
fn frames_cross_into_and_out_of_af_xdp_in_generic_mode() {
    both_ways(XdpMode::Generic, "weft-xdptest");
}

#[test]
fn frames_cross_into_and_out_of_af_xdp_in_native_veth_mode() {
    both_ways(XdpMode::Native, "weft-xdptest2");
}

#[test]
fn every_receive_queue_gets_a_socket() {
    if weft_testkit::require("network namespaces", common::can_run()).is_none()
        || weft_testkit::require("AF_XDP on this kernel", weft_link::afxdp::probe()).is_none()
    {
        return;
    }
    let ns = VethNs::with_queues("weft-xdptest4", "xq0", "xq1", 4);
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter().expect("setns");
            let pool = BufferPool::new(1024, 2048);
            let cfg = XdpConfig {
                mode: XdpMode::Native,
                ..XdpConfig::default()
            };
            let mut xdp =
                AfXdpLink::with_config("xq1", pool.clone(), cfg).expect("open AF_XDP on xq1");
            assert_eq!(xdp.queues(), 4);
            // Which queue a frame arrives on: an AF_PACKET sender (qdisc bypassed)
            // transmits on queue `cpu % queues`, and veth's native XDP receives on the
            // queue of that number. (Generic XDP put the frames of both CPUs on
            // queue 0 when we tried: the skb's recorded queue is off by one.) So each
            // CPU's frames take another queue; the sockets together must see them
            // all — with a socket on queue 0 only, half are missing.
            let cpus = std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(4);
            let mut wire = AfPacket::open("xq0", pool.clone()).expect("open AF_PACKET");
            let (wmac, xmac) = (wire.info().mac, xdp.info().mac);
            let mut tx: Vec<PacketBuf> = Vec::new();
            for cpu in 0..cpus {
                pin_to(cpu);
                tx.extend(frames(&pool, wmac, xmac, 16));
                while !tx.is_empty() {
                    wire.send_burst(&mut tx).expect("send");
                }
            }
            let want = 16 * cpus;
            let deadline = Instant::now() + Duration::from_secs(5);
            let (mut seen, mut rx) = (0, Vec::new());
            while seen < want && Instant::now() < deadline {
                if xdp.recv_burst(&mut rx, 32).expect("recv") == 0 {
                    xdp.wait(Duration::from_millis(5)).expect("wait");
                }
                seen += rx
                    .drain(..)
                    .filter(|f| f.get(12..14) == Some(&ETHERTYPE[..]))
                    .count();
            }
            assert_eq!(seen, want, "frames on every queue reached a socket");
            xdp.refresh_stats();
            assert_eq!(xdp.stats().rx_dropped, 0);
        });
    });
}

/// Move the calling thread to `cpu` (taskset on its thread id).
fn pin_to(cpu: usize) {
    let me = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    let tid = me
        .file_name()
        .and_then(|t| t.to_str())
        .expect("thread id")
        .to_string();
    let ok = std::process::Command::new("taskset")
        .args(["-pc", &cpu.to_string(), &tid])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "taskset -pc {cpu} {tid}");
    std::thread::yield_now();
}
