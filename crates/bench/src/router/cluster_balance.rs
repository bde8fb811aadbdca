//! `weft router bench --cluster --balance`: interconnect messages (and crossings) per
//! external packet under uniform and hot-spot traffic, for direct, VLB and
//! Direct-VLB, with the reordering rate — RouteBricks §3.2's question, asked of the
//! cluster's own balancing code.
//!
//! A discrete-time model of `nodes` nodes in one process, one external port each.
//! What decides is the router's code: every packet's next node is picked by
//! [`Balancer`] (with `loaded` from [`direct_path_loaded`] on the queue towards the
//! egress, the rule the interconnect thread applies to messages in flight), flows
//! are bucketed by [`flow_hash`] of a real UDP frame, packets carry the per-bucket
//! sequence numbers the ingress node writes, and the egress counts reordering with
//! [`ReorderCounter`]. What is modelled: time advances in ticks of one microsecond;
//! each tick every node takes its external arrivals (Bernoulli, `load` packets per
//! tick on average) and gathers them per next node; every `round` ticks (the
//! interconnect thread's loop: what it takes from the port rings in one pass is one
//! ingress burst) the burst ends and every gathered batch leaves, up to `batch`
//! packets per message; each directed internal link serves
//! `link_capacity` packets per tick (RouteBricks provisions a full mesh with 2R/N per
//! link; here R = 1 packet per tick) and holds at most [`SEND_DEPTH`] messages — a
//! message finding it full is dropped, as the fabric drops on `Full`; a message
//! arrives at the next node one tick after it was served. An intermediate (VLB)
//! forwards what it receives to the egress in its next gather.
//!
//! Traffic: `uniform` — every packet's egress is uniform over the other nodes;
//! `hotspot` — each node sends `hot` of its packets to one node (node i to i + 1, a
//! permutation, so no egress port is oversubscribed, only the direct links), the
//! rest uniform.
#![forbid(unsafe_code)]

use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use weft_router::cluster::balance::{
    bucket_of, direct_path_loaded, flow_hash, Balancer, ReorderCounter,
};
use weft_router::cluster::config::Balance;
use weft_router::cluster::fabric::SEND_DEPTH;
use weft_transport::sim::Rng;

/// Flows per (ingress, egress) pair.
const FLOWS: u16 = 256;

/// Traffic pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Traffic {
    /// Egress uniform over the other nodes.
    Uniform,
    /// A share of each node's traffic to one other node.
    Hotspot,
}

/// One configuration's result.
#[derive(Debug, Clone, Serialize)]
pub struct BalanceRow {
    /// Always "balance".
    pub kind: &'static str,
    /// Nodes in the cluster.
    pub nodes: u8,
    /// The pattern.
    pub traffic: Traffic,
    /// Share of each node's packets to its hot node (hotspot only).
    pub hot: f64,
    /// direct, vlb, direct-vlb.
    pub balance: &'static str,
    /// Packets per message at most.
    pub batch: usize,
    /// External packets per node per tick offered.
    pub load: f64,
    /// Packets per tick a directed internal link serves.
    pub link_capacity: f64,
    /// Ticks (µs) per gather round.
    pub round_us: u64,
    /// External packets that entered.
    pub external: u64,
    /// External packets that left by their egress port.
    pub delivered: u64,
    /// Packets dropped at a full internal link.
    pub dropped: u64,
    /// Interconnect messages per external packet that entered.
    pub messages_per_packet: f64,
    /// Internal crossings (packets sent over a link) per external packet.
    pub crossings_per_packet: f64,
    /// Packets per message.
    pub packets_per_message: f64,
    /// Delivered packets that arrived behind a later packet of their flow bucket.
    pub reordered_per_packet: f64,
}

/// A packet on its way: (egress node, bucket, origin, seq, hops).
#[derive(Debug, Clone, Copy)]
struct Pkt {
    egress: u8,
    bucket: u16,
    origin: u8,
    seq: u16,
    hops: u8,
}

/// One directed internal link: messages waiting, and the credit of its serving.
#[derive(Debug, Default)]
struct LinkQ {
    queue: VecDeque<Vec<Pkt>>,
    credit: f64,
}

fn balance_name(b: Balance) -> &'static str {
    match b {
        Balance::Direct => "direct",
        Balance::Vlb => "vlb",
        Balance::DirectVlb => "direct-vlb",
    }
}

/// The bucket of flow `flow` from node `from` to node `to`: the router's hash of a
/// UDP frame between the two ports' hosts.
fn bucket(from: u8, to: u8, flow: u16) -> u16 {
    let mut f = vec![0u8; 42];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[14 + 9] = 17;
    f[14 + 12..14 + 16].copy_from_slice(&[198, 18, from, 2]);
    f[14 + 16..14 + 20].copy_from_slice(&[198, 18, to, 2]);
    f[34..36].copy_from_slice(&(10_000 + flow).to_be_bytes());
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    bucket_of(flow_hash(&f))
}

/// Simulate `ticks` ticks of one configuration.
#[allow(clippy::too_many_arguments)]
pub fn simulate(
    nodes: u8,
    traffic: Traffic,
    hot: f64,
    balance: Balance,
    batch: usize,
    load: f64,
    link_capacity: f64,
    round: u64,
    ticks: u64,
    seed: u64,
) -> BalanceRow {
    let round = round.max(1);
    let n = usize::from(nodes);
    let ids: Vec<u8> = (1..=nodes).collect();
    let mut rng = Rng::new(seed);
    let mut balancers: Vec<Balancer> = ids
        .iter()
        .map(|&me| Balancer::new(balance, me, ids.clone()))
        .collect();
    let buckets: HashMap<(u8, u8, u16), u16> = ids
        .iter()
        .flat_map(|&a| ids.iter().map(move |&b| (a, b)))
        .filter(|(a, b)| a != b)
        .flat_map(|(a, b)| (0..FLOWS).map(move |f| ((a, b, f), bucket(a, b, f))))
        .collect();
    let mut seq: Vec<HashMap<u16, u16>> = vec![HashMap::new(); n];
    let mut reorder: Vec<ReorderCounter> = (0..n).map(|_| ReorderCounter::default()).collect();
    // links[from][to], 0-based.
    let mut links: Vec<Vec<LinkQ>> = (0..n)
        .map(|_| (0..n).map(|_| LinkQ::default()).collect())
        .collect();
    // Messages arriving at a node next tick: (node, packets).
    let mut arriving: Vec<(usize, Vec<Pkt>)> = Vec::new();
    let (mut external, mut delivered, mut dropped) = (0u64, 0u64, 0u64);
    let (mut messages, mut crossings) = (0u64, 0u64);
    let start = Instant::now();
    let batch = batch.clamp(1, 32);
    let mut pending: Vec<HashMap<usize, Vec<Pkt>>> = vec![HashMap::new(); n];
    // After `ticks` of arrivals, the cluster drains (bounded): every packet that
    // entered is then delivered or dropped.
    let drain = 100_000;
    for t in 0..ticks + drain {
        let arrivals = t < ticks;
        if !arrivals
            && arriving.is_empty()
            && pending.iter().all(HashMap::is_empty)
            && links.iter().flatten().all(|q| q.queue.is_empty())
        {
            break;
        }
        let now = start + Duration::from_micros(t);
        // Arrivals from the interconnect: deliver, or relay (VLB intermediate).
        for (at, msg) in std::mem::take(&mut arriving) {
            for p in msg {
                if usize::from(p.egress - 1) == at {
                    // The counter keeps the count.
                    let _ = reorder[at].note(p.origin, p.bucket, p.seq);
                    delivered += 1;
                } else {
                    let e = usize::from(p.egress - 1);
                    pending[at].entry(e).or_default().push(Pkt {
                        hops: p.hops + 1,
                        ..p
                    });
                }
            }
        }
        // External arrivals.
        for (i, &me) in ids.iter().enumerate().filter(|_| arrivals) {
            let mut k = load;
            while k > 0.0 {
                let arrive = k >= 1.0 || rng.chance(k);
                k -= 1.0;
                if !arrive {
                    continue;
                }
                external += 1;
                let hot_to = (me % nodes) + 1;
                let to = if traffic == Traffic::Hotspot && rng.chance(hot) {
                    hot_to
                } else {
                    let r = rng.range(0, u64::from(nodes) - 1) as u8 + 1;
                    if r >= me {
                        r + 1
                    } else {
                        r
                    }
                };
                let flow = rng.range(0, u64::from(FLOWS)) as u16;
                let b = buckets[&(me, to, flow)];
                let s = seq[i].entry(b).or_insert(0);
                *s = s.wrapping_add(1);
                let e = usize::from(to - 1);
                let loaded = direct_path_loaded(links[i][e].queue.len(), SEND_DEPTH);
                let next = usize::from(balancers[i].next_node(to, b, loaded, now) - 1);
                pending[i].entry(next).or_default().push(Pkt {
                    egress: to,
                    bucket: b,
                    origin: me,
                    seq: *s,
                    hops: 0,
                });
            }
        }
        // The burst ended: every gathered batch leaves, `batch` packets per message.
        let burst_end = (t + 1) % round == 0;
        for (i, p) in pending.iter_mut().enumerate().filter(|_| burst_end) {
            let mut keys: Vec<usize> = p.keys().copied().collect();
            keys.sort_unstable();
            for next in keys {
                let Some(pkts) = p.remove(&next) else {
                    continue;
                };
                for chunk in pkts.chunks(batch) {
                    let q = &mut links[i][next];
                    if q.queue.len() >= SEND_DEPTH {
                        dropped += chunk.len() as u64;
                    } else {
                        q.queue.push_back(chunk.to_vec());
                    }
                }
            }
        }
        // Links serve.
        for (i, row) in links.iter_mut().enumerate() {
            for (j, q) in row.iter_mut().enumerate() {
                if i == j {
                    continue;
                }
                if q.queue.is_empty() {
                    q.credit = 0.0;
                    continue;
                }
                q.credit += link_capacity;
                while let Some(m) = q.queue.front() {
                    if (m.len() as f64) > q.credit {
                        break;
                    }
                    q.credit -= m.len() as f64;
                    let m = q.queue.pop_front().unwrap_or_default();
                    messages += 1;
                    crossings += m.len() as u64;
                    arriving.push((j, m));
                }
            }
        }
    }
    let reordered: u64 = reorder.iter().map(|r| r.reordered).sum();
    let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    BalanceRow {
        kind: "balance",
        nodes,
        traffic,
        hot: if traffic == Traffic::Hotspot {
            hot
        } else {
            0.0
        },
        balance: balance_name(balance),
        batch,
        load,
        link_capacity,
        round_us: round,
        external,
        delivered,
        dropped,
        messages_per_packet: per(messages, external),
        crossings_per_packet: per(crossings, external),
        packets_per_message: per(crossings, messages),
        reordered_per_packet: per(reordered, delivered),
    }
}

/// Every combination: uniform and hot-spot, direct, VLB, Direct-VLB.
#[allow(clippy::too_many_arguments)]
pub fn run(
    nodes: u8,
    batches: &[usize],
    load: f64,
    hot: f64,
    round: u64,
    ticks: u64,
    json: bool,
) -> anyhow::Result<()> {
    if !(3..=32).contains(&nodes) {
        anyhow::bail!("--nodes {nodes} is not in 3..=32 (VLB needs a third node)");
    }
    if !(0.0..=1.0).contains(&load) || !(0.0..=1.0).contains(&hot) {
        anyhow::bail!("--load and --hot are shares in 0..=1");
    }
    // RouteBricks' provisioning: 2R/N per directed link.
    let cap = 2.0 / f64::from(nodes);
    for traffic in [Traffic::Uniform, Traffic::Hotspot] {
        for balance in [Balance::Direct, Balance::Vlb, Balance::DirectVlb] {
            for &batch in batches {
                let r = simulate(
                    nodes, traffic, hot, balance, batch, load, cap, round, ticks, 1,
                );
                if json {
                    println!("{}", serde_json::to_string(&r)?);
                } else {
                    println!(
                        "{:8} {:10} batch {:2}: {:.3} messages and {:.3} crossings per packet ({:.2} packets/message), {:.2}% dropped, {:.4}% reordered",
                        format!("{:?}", r.traffic).to_lowercase(),
                        r.balance,
                        r.batch,
                        r.messages_per_packet,
                        r.crossings_per_packet,
                        r.packets_per_message,
                        100.0 * r.dropped as f64 / r.external.max(1) as f64,
                        100.0 * r.reordered_per_packet
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(traffic: Traffic, balance: Balance, load: f64) -> BalanceRow {
        // Eight nodes, 2R/N per link: a hot spot of 0.8 overloads a direct link
        // (0.6 × (0.8 + 0.2/7) = 0.50 > 0.25), VLB spreads it over six (≈ 0.19).
        simulate(8, traffic, 0.8, balance, 16, load, 0.25, 20, 20_000, 7)
    }

    #[test]
    fn uniform_traffic_crosses_once_direct_twice_vlb() {
        let d = sim(Traffic::Uniform, Balance::Direct, 0.6);
        let v = sim(Traffic::Uniform, Balance::Vlb, 0.6);
        let dv = sim(Traffic::Uniform, Balance::DirectVlb, 0.6);
        for r in [&d, &v, &dv] {
            assert!(r.external > 10_000, "{r:?}");
            assert_eq!(r.dropped, 0, "{r:?}");
            assert_eq!(r.reordered_per_packet, 0.0, "{r:?}");
            assert_eq!(r.delivered, r.external, "{r:?}");
        }
        assert!((d.crossings_per_packet - 1.0).abs() < 0.01, "{d:?}");
        assert!((dv.crossings_per_packet - 1.0).abs() < 0.01, "{dv:?}");
        assert!((v.crossings_per_packet - 2.0).abs() < 0.01, "{v:?}");
        // Batching: fewer messages than crossings.
        assert!(d.messages_per_packet < d.crossings_per_packet, "{d:?}");
    }

    #[test]
    fn a_hot_spot_overloads_the_direct_link_and_vlb_spreads_it() {
        let d = sim(Traffic::Hotspot, Balance::Direct, 0.6);
        let v = sim(Traffic::Hotspot, Balance::Vlb, 0.6);
        assert!(d.dropped > d.external / 10, "{d:?}");
        assert!(v.dropped < d.dropped / 10, "{v:?}");
        assert_eq!(d.delivered + d.dropped, d.external, "{d:?}");
        // Direct: what was not dropped crossed once.
        let lost = d.dropped as f64 / d.external as f64;
        assert!((d.crossings_per_packet + lost - 1.0).abs() < 0.01, "{d:?}");
        // VLB crosses twice; Direct-VLB between once and twice.
        assert!((v.crossings_per_packet - 2.0).abs() < 0.05, "{v:?}");
        let dv = sim(Traffic::Hotspot, Balance::DirectVlb, 0.6);
        assert!(
            dv.crossings_per_packet > 1.05 && dv.crossings_per_packet < 1.95,
            "{dv:?}"
        );
        assert!(dv.dropped < d.dropped / 2, "{dv:?}");
    }
}
