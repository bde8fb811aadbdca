//! Load balancing across the cluster (RouteBricks §3.2): which node a packet crosses
//! to next. A flow's 5-tuple hash picks one of [`BUCKETS`] buckets and every packet
//! of a bucket takes one path, so a flow is never split over two paths and nothing is
//! reordered by the balancing itself; the receiver counts reordering anyway
//! ([`ReorderCounter`]), from the per-bucket sequence numbers the ingress node puts in
//! the packet headers.
//!
//! - **direct**: ingress → egress node;
//! - **VLB**: ingress → an intermediate node picked by the bucket's hash among the
//!   nodes that are neither → egress (two crossings; direct when there is no third node);
//! - **Direct-VLB**: a bucket's path is picked when the bucket is first seen (or after
//!   it was idle for [`PIN_IDLE`]): direct unless the direct path is loaded then, VLB
//!   if it is; a busy bucket pinned direct moves to VLB once when its direct path
//!   becomes loaded, and never back while busy. Under uniform load every bucket goes
//!   direct (≈ one crossing per packet); under a hot spot, the buckets beyond the
//!   direct path's share spread.
#![forbid(unsafe_code)]

use super::config::Balance;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Flow buckets.
pub const BUCKETS: u16 = 4096;
/// A Direct-VLB bucket idle this long may take a new path.
pub const PIN_IDLE: Duration = Duration::from_secs(1);

fn mix(mut h: u64) -> u64 {
    // splitmix64's finaliser.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The 5-tuple hash of an Ethernet frame (addresses, protocol, TCP/UDP ports when the
/// packet is not a later fragment); frames that are not IP hash their EtherType. Any
/// bytes are accepted: what cannot be read counts as absent.
pub fn flow_hash(frame: &[u8]) -> u64 {
    let get = |a: usize, b: usize| frame.get(a..b).unwrap_or(&[]);
    let ethertype = u16::from_be_bytes([
        frame.get(12).copied().unwrap_or(0),
        frame.get(13).copied().unwrap_or(0),
    ]);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&ethertype.to_be_bytes());
    match ethertype {
        0x0800 => {
            let ihl = usize::from(frame.get(14).copied().unwrap_or(0) & 0x0f) * 4;
            let proto = frame.get(14 + 9).copied().unwrap_or(0);
            eat(get(14 + 12, 14 + 20));
            eat(&[proto]);
            let frag = get(14 + 6, 14 + 8);
            let later_fragment = frag.len() == 2 && (frag[0] & 0x1f != 0 || frag[1] != 0);
            if matches!(proto, 6 | 17) && !later_fragment && ihl >= 20 {
                eat(get(14 + ihl, 14 + ihl + 4));
            }
        }
        0x86dd => {
            let next = frame.get(14 + 6).copied().unwrap_or(0);
            eat(get(14 + 8, 14 + 40));
            eat(&[next]);
            if matches!(next, 6 | 17) {
                eat(get(54, 58));
            }
        }
        _ => {}
    }
    mix(h)
}

/// Direct-VLB's signal: the direct path to the egress is loaded when more than half
/// of the messages the interconnect may have in flight to it (`depth`) are.
pub fn direct_path_loaded(in_flight: usize, depth: usize) -> bool {
    in_flight * 2 > depth
}

/// The bucket of a hash.
pub fn bucket_of(hash: u64) -> u16 {
    (hash % u64::from(BUCKETS)) as u16
}

/// Picks each packet's next node.
#[derive(Debug)]
pub struct Balancer {
    mode: Balance,
    me: u8,
    nodes: Vec<u8>,
    /// Direct-VLB: (egress node, bucket) → (next node, last used).
    pinned: HashMap<(u8, u16), (u8, Instant)>,
}

impl Balancer {
    /// For node `me` of `nodes`.
    pub fn new(mode: Balance, me: u8, nodes: Vec<u8>) -> Balancer {
        Balancer {
            mode,
            me,
            nodes,
            pinned: HashMap::new(),
        }
    }

    /// The VLB intermediate of `bucket` on its way to `egress`: a node that is
    /// neither this one nor the egress, by the bucket's hash; the egress itself when
    /// there is none.
    fn intermediate(&self, egress: u8, bucket: u16) -> u8 {
        let candidates: Vec<u8> = self
            .nodes
            .iter()
            .copied()
            .filter(|&n| n != self.me && n != egress)
            .collect();
        if candidates.is_empty() {
            return egress;
        }
        let h = mix(u64::from(bucket) << 8 | u64::from(egress));
        candidates[(h % candidates.len() as u64) as usize]
    }

    /// The node a packet of `bucket` for `egress` crosses to next. `loaded` says
    /// whether the direct path to `egress` is loaded now (Direct-VLB only).
    pub fn next_node(&mut self, egress: u8, bucket: u16, loaded: bool, now: Instant) -> u8 {
        match self.mode {
            Balance::Direct => egress,
            Balance::Vlb => self.intermediate(egress, bucket),
            Balance::DirectVlb => {
                let spill = if loaded {
                    self.intermediate(egress, bucket)
                } else {
                    egress
                };
                if let Some((via, last)) = self.pinned.get_mut(&(egress, bucket)) {
                    if now.saturating_duration_since(*last) < PIN_IDLE {
                        *last = now;
                        // A busy bucket pinned direct whose direct path is now loaded
                        // moves to its VLB path, once (it never moves back while
                        // busy): without this, the buckets first seen before a hot
                        // spot built up keep overloading the direct path (measured by
                        // `weft router bench --cluster --balance`). Its packets on
                        // the new path may overtake those queued on the loaded one:
                        // the receiver counts it.
                        if *via == egress && spill != egress {
                            *via = spill;
                        }
                        return *via;
                    }
                }
                let via = spill;
                if self.pinned.len() >= 65536 {
                    // Bounded: forget the idle ones (they may take a new path anyway).
                    self.pinned
                        .retain(|_, (_, last)| now.saturating_duration_since(*last) < PIN_IDLE);
                }
                self.pinned.insert((egress, bucket), (via, now));
                via
            }
        }
    }
}

/// Counts packets that arrive behind a later packet of their (origin, bucket).
#[derive(Debug, Default)]
pub struct ReorderCounter {
    last: HashMap<(u8, u16), u16>,
    /// Packets seen out of order.
    pub reordered: u64,
}

impl ReorderCounter {
    /// Note a packet; true when it is out of order.
    pub fn note(&mut self, origin: u8, bucket: u16, seq: u16) -> bool {
        match self.last.get_mut(&(origin, bucket)) {
            None => {
                self.last.insert((origin, bucket), seq);
                false
            }
            Some(last) => {
                // Serial number arithmetic (RFC 1982) on 16 bits.
                let ahead = seq.wrapping_sub(*last);
                if ahead != 0 && ahead < 0x8000 {
                    *last = seq;
                    false
                } else {
                    self.reordered += 1;
                    true
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(src_port: u16, frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[14 + 6..14 + 8].copy_from_slice(&frag.to_be_bytes());
        f[14 + 9] = 17;
        f[14 + 12..14 + 16].copy_from_slice(&[198, 18, 1, 2]);
        f[14 + 16..14 + 20].copy_from_slice(&[198, 18, 2, 2]);
        f[34..36].copy_from_slice(&src_port.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f
    }

    #[test]
    fn the_hash_follows_the_five_tuple() {
        let a = flow_hash(&udp4(1000, 0));
        assert_eq!(a, flow_hash(&udp4(1000, 0)));
        assert_ne!(a, flow_hash(&udp4(1001, 0)));
        // A later fragment has no ports: it hashes on addresses and protocol, like
        // every other later fragment of its datagram.
        assert_eq!(flow_hash(&udp4(1000, 185)), flow_hash(&udp4(2000, 185)));
        // Hostile frames: any length, no panic.
        for n in 0..80 {
            let _ = flow_hash(&udp4(7, 0)[..n.min(42)]);
            let _ = flow_hash(&vec![0xff; n]);
        }
        // Buckets spread.
        let mut seen = std::collections::HashSet::new();
        for p in 0..2000 {
            seen.insert(bucket_of(flow_hash(&udp4(p, 0))));
        }
        assert!(seen.len() > 1000, "{}", seen.len());
    }

    #[test]
    fn direct_vlb_and_direct_vlb_paths() {
        let now = Instant::now();
        let nodes = vec![1, 2, 3, 4];
        let mut d = Balancer::new(Balance::Direct, 1, nodes.clone());
        assert!((0..BUCKETS).all(|b| d.next_node(3, b, true, now) == 3));
        let mut v = Balancer::new(Balance::Vlb, 1, nodes.clone());
        let mut via = HashMap::new();
        for b in 0..BUCKETS {
            let n = v.next_node(3, b, false, now);
            assert!(n == 2 || n == 4, "never the ingress or the egress: {n}");
            assert_eq!(n, v.next_node(3, b, false, now), "pinned");
            *via.entry(n).or_insert(0) += 1;
        }
        assert!(via[&2] > 1500 && via[&4] > 1500, "{via:?}");
        // Two nodes: VLB has no intermediate.
        let mut two = Balancer::new(Balance::Vlb, 1, vec![1, 2]);
        assert_eq!(two.next_node(2, 9, false, now), 2);
        // Direct-VLB: direct when unloaded; a bucket first seen under load goes VLB
        // and stays there while it is busy, then may return.
        let mut dv = Balancer::new(Balance::DirectVlb, 1, nodes);
        assert_eq!(dv.next_node(3, 1, false, now), 3);
        assert_eq!(dv.next_node(3, 1, false, now), 3, "pinned direct");
        let spilled = dv.next_node(3, 1, true, now);
        assert!(spilled == 2 || spilled == 4, "loaded: spills to VLB");
        assert_eq!(
            dv.next_node(3, 1, false, now),
            spilled,
            "and stays while busy"
        );
        let n = dv.next_node(3, 2, true, now);
        assert!(n == 2 || n == 4);
        assert_eq!(
            dv.next_node(3, 2, false, now + PIN_IDLE / 2),
            n,
            "pinned VLB"
        );
        let later = now + PIN_IDLE / 2 + PIN_IDLE;
        assert_eq!(dv.next_node(3, 2, false, later), 3, "idle: a new path");
    }

    #[test]
    fn reordering_is_counted_per_origin_and_bucket() {
        let mut r = ReorderCounter::default();
        assert!(!r.note(1, 5, 10));
        assert!(!r.note(1, 5, 11));
        assert!(!r.note(1, 5, 14), "a gap is not reordering");
        assert!(r.note(1, 5, 12), "behind 14");
        assert!(r.note(1, 5, 14), "a duplicate");
        assert!(!r.note(2, 5, 0), "another origin");
        assert!(!r.note(1, 6, 0), "another bucket");
        assert!(!r.note(1, 5, 15));
        assert_eq!(r.reordered, 2);
        // Wrapping.
        assert!(!r.note(3, 0, u16::MAX));
        assert!(!r.note(3, 0, 0));
        assert!(r.note(3, 0, u16::MAX));
    }
}
