//! AF_PACKET over a real veth pair inside a network namespace this test creates.
//! Needs root and iproute2; without them it fails under CI and is a counted skip
//! elsewhere (weft-testkit).

mod common;

use common::VethNs;
use std::time::{Duration, Instant};
use weft_link::afpacket::{wall_clock as wall, AfPacket, RingConfig, RingVersion};
use weft_link::{BufferPool, Link};

#[test]
fn frames_cross_a_veth_pair_both_ways_in_bursts() {
    frames_cross(RingConfig::default(), "weft-linktest");
}

#[test]
fn frames_cross_on_tpacket_v3_rings_too() {
    frames_cross(RingConfig::v3(), "weft-linktest3");
}

fn frames_cross(cfg: RingConfig, netns: &'static str) {
    if weft_testkit::require("network namespaces", common::can_run()).is_none() {
        return;
    }
    let ns = VethNs::new(netns, "wl0", "wl1");
    let t = std::thread::spawn(move || {
        ns.enter().expect("setns");
        let pool = BufferPool::new(512, 2048);
        let mut a = AfPacket::with_config("wl0", pool.clone(), cfg).expect("open wl0");
        let mut b = AfPacket::with_config("wl1", pool.clone(), cfg).expect("open wl1");
        b.keep_arrivals(true);
        assert_eq!(a.ring_version(), cfg.version);
        let mut frame = vec![0u8; 100];
        frame[..6].copy_from_slice(&b.info().mac);
        frame[6..12].copy_from_slice(&a.info().mac);
        frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
        let mut tx = Vec::new();
        for i in 0..100u8 {
            let mut buf = pool.alloc().expect("buffer");
            frame[20] = i;
            assert!(buf.copy_from(&frame));
            tx.push(buf);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let sent_at = wall();
        while !tx.is_empty() && Instant::now() < deadline {
            a.send_burst(&mut tx).expect("send");
        }
        let mut rx = Vec::new();
        let mut arrivals = Vec::new();
        while rx.len() < 100 && Instant::now() < deadline {
            let n = b.recv_burst(&mut rx, 32).expect("recv");
            // One kernel arrival stamp per frame returned, taken between the send
            // and the read.
            assert_eq!(b.arrivals().len(), n, "an arrival per frame of the burst");
            let read_at = wall();
            for &t in b.arrivals() {
                assert!(
                    t >= sent_at && t <= read_at,
                    "{t:?} not in {sent_at:?}..={read_at:?}"
                );
            }
            arrivals.extend_from_slice(b.arrivals());
            if n == 0 {
                b.wait(Duration::from_millis(10)).expect("wait");
            }
        }
        assert!(
            arrivals.windows(2).all(|w| w[0] <= w[1]),
            "stamps in arrival order"
        );
        // Off again: nothing is kept.
        b.keep_arrivals(false);
        assert!(b.arrivals().is_empty());
        let seq: Vec<u8> = rx
            .iter()
            .filter(|f| f.len() >= 100 && f[12..14] == [0x88, 0xb5])
            .map(|f| f[20])
            .collect();
        assert_eq!(seq, (0..100).collect::<Vec<u8>>(), "every frame, in order");
        // The sender does not see its own frames.
        let mut own = Vec::new();
        a.recv_burst(&mut own, 32).expect("recv");
        assert!(own.iter().all(|f| f.get(12..14) != Some(&[0x88, 0xb5][..])));
        assert_eq!(a.stats().tx_frames, 100);
        drop(rx);
        drop(own);
        // A link keeps a few spare receive buffers while it lives.
        drop(a);
        drop(b);
        assert_eq!(pool.available(), 512, "every buffer went back to the pool");
    });
    t.join().expect("test thread");
}

/// A `TPACKET_V2` slot is sized for the MTU the interface had when the ring was made.
/// A larger frame (here: the MTU raised afterwards; on a real port, a TSO super-frame
/// from a veth peer) is queued whole on the socket (`TP_STATUS_COPY`) and read from
/// there, in order with the frames around it, not truncated or lost.
#[test]
fn a_frame_larger_than_its_v2_slot_arrives_whole_and_in_order() {
    if weft_testkit::require("network namespaces", common::can_run()).is_none() {
        return;
    }
    let ns = VethNs::new("weft-linktest2", "wl0", "wl1");
    let t = std::thread::spawn(move || {
        ns.enter().expect("setns");
        let pool = BufferPool::new(256, 16384);
        // Slots for MTU 1500 (2 KiB each), then the MTU goes up to 9000.
        let mut b = AfPacket::open("wl1", pool.clone()).expect("open wl1");
        assert_eq!(b.ring_version(), RingVersion::V2);
        assert_eq!(b.rx_slots(), 1024);
        for d in ["wl0", "wl1"] {
            assert!(ns.run(&["ip", "link", "set", d, "mtu", "9000"]), "mtu 9000");
        }
        let big_tx = RingConfig {
            tx_frame_size: 16384,
            tx_frames: 16,
            ..RingConfig::default()
        };
        let mut a = AfPacket::with_config("wl0", pool.clone(), big_tx).expect("open wl0");
        assert_eq!(a.info().max_frame, 9014);
        let mut tx = Vec::new();
        for (i, len) in [100usize, 4000, 100, 8000, 60].into_iter().enumerate() {
            let mut f = vec![0u8; len];
            f[..6].copy_from_slice(&b.info().mac);
            f[6..12].copy_from_slice(&a.info().mac);
            f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
            f[20] = i as u8;
            f[len - 1] = 0xee;
            let mut buf = pool.alloc().expect("buffer");
            assert!(buf.copy_from(&f));
            tx.push(buf);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !tx.is_empty() && Instant::now() < deadline {
            a.send_burst(&mut tx).expect("send");
        }
        let mut rx = Vec::new();
        while rx.len() < 5 && Instant::now() < deadline {
            if b.recv_burst(&mut rx, 32).expect("recv") == 0 {
                b.wait(Duration::from_millis(10)).expect("wait");
            }
        }
        let got: Vec<(u8, usize, u8)> = rx
            .iter()
            .filter(|f| f.len() >= 60 && f[12..14] == [0x88, 0xb5])
            .map(|f| (f[20], f.len(), f[f.len() - 1]))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 100, 0xee),
                (1, 4000, 0xee),
                (2, 100, 0xee),
                (3, 8000, 0xee),
                (4, 60, 0xee)
            ],
            "every frame whole, in order; {:?} {:?}",
            a.stats(),
            b.stats()
        );
        assert_eq!(b.stats().rx_dropped, 0, "{:?} {:?}", a.stats(), b.stats());
    });
    t.join().expect("test thread");
}
