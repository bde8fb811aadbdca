//! AF_PACKET over a real veth pair inside a network namespace this test creates.
//! Needs root and iproute2; without them it fails under CI and is a counted skip
//! elsewhere (weft-testkit).

mod common;

use common::VethNs;
use std::time::{Duration, Instant};
use weft_link::afpacket::AfPacket;
use weft_link::{BufferPool, Link};

#[test]
fn frames_cross_a_veth_pair_both_ways_in_bursts() {
    if weft_testkit::require("network namespaces", common::can_run()).is_none() {
        return;
    }
    let ns = VethNs::new("weft-linktest", "wl0", "wl1");
    let t = std::thread::spawn(move || {
        ns.enter().expect("setns");
        let pool = BufferPool::new(512, 2048);
        let mut a = AfPacket::open("wl0", pool.clone()).expect("open wl0");
        let mut b = AfPacket::open("wl1", pool.clone()).expect("open wl1");
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
        while !tx.is_empty() && Instant::now() < deadline {
            a.send_burst(&mut tx).expect("send");
        }
        let mut rx = Vec::new();
        while rx.len() < 100 && Instant::now() < deadline {
            if b.recv_burst(&mut rx, 32).expect("recv") == 0 {
                b.wait(Duration::from_millis(10)).expect("wait");
            }
        }
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
