//! Incast through one shared bottleneck: N sender endpoints WRITE into one receiver
//! through a switch port of bounded buffer, beside a sender of small messages whose
//! latency is measured.
//!
//! ```text
//!  sender 0 ──access──┐
//!  sender 1 ──access──┤                                ┌─────────┐
//!     …               ├─▶ switch ──bottleneck (queue)─▶│ receiver│
//!  sender N-1 ─access─┤                                └────┬────┘
//!  probe ─────access──┘   ◀──────────── return (ACKs) ──────┘
//! ```
//!
//! Every sender has its own access link into the switch; the switch forwards all of
//! them into one [`Link`] to the receiver whose transmit queue holds
//! [`LinkConfig::queue_limit_bytes`] and drops the packet that finds it full. The
//! receiver answers over one return link; each answer goes to the sender its
//! destination address names. The probe endpoint sends one small WRITE at a time, one
//! every `probe_interval_us`, and the report gives its completion-latency percentiles:
//! the small-message latency beside the flows.
//!
//! Deterministic like the rest of [`crate::sim`]: seeds and inputs decide every run,
//! and the switch takes arriving packets from the access links in an order that
//! rotates by one each step (so no sender is always first into a nearly full queue).

use super::{Link, LinkConfig, Rng};
use crate::endpoint::{Config, Endpoint, QpInit, MAX_OVERHEAD};
use crate::memory::{Access, Region, VecMemory};
use crate::qp::{Bringup, Mtu, QpType, Recovery};
use crate::time::Instant;
use crate::wr::{RemoteAddr, SendWr, Sge, WcStatus, WrOp};
use std::net::Ipv4Addr;
use weft_wire::roce::{IcrcPath, IpPair};

/// An incast run.
#[derive(Debug, Clone)]
pub struct IncastConfig {
    /// Senders of bulk WRITEs.
    pub senders: usize,
    /// Bytes per WRITE.
    pub msg_len: u32,
    /// WRITEs each sender completes.
    pub messages: u64,
    /// WRITEs each sender keeps outstanding.
    pub window: usize,
    /// Each sender's link into the switch, and the receiver's return link.
    pub access: LinkConfig,
    /// The switch port to the receiver (its `queue_limit_bytes` is the buffer).
    pub bottleneck: LinkConfig,
    /// Path MTU.
    pub mtu: Mtu,
    /// PSNs in flight cap of every QP.
    pub max_inflight: u32,
    /// Loss recovery.
    pub recovery: Recovery,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Endpoint settings (the congestion control under test), for every endpoint.
    pub config: Config,
    /// Bytes of each small WRITE of the probe.
    pub probe_len: u32,
    /// Microseconds between the starts of the probe's WRITEs (one outstanding at a
    /// time); 0: no probe.
    pub probe_interval_us: u64,
    /// Seed of the links and QP numbers.
    pub seed: u64,
    /// Give up after this much virtual time.
    pub time_limit_us: u64,
}

impl Default for IncastConfig {
    /// Eight senders of 64 KiB WRITEs, two outstanding each, at 10 Gbit/s into one
    /// 10 Gbit/s port with 64 KiB of buffer; 2 µs per hop; MTU 1024, 64 PSNs in
    /// flight, go-back-N, ACK timeout exponent 5 (131 µs); a 64-byte probe every
    /// 50 µs.
    fn default() -> IncastConfig {
        let hop = LinkConfig {
            delay_us: 2,
            ..LinkConfig::default()
        };
        IncastConfig {
            senders: 8,
            msg_len: 64 * 1024,
            messages: 16,
            window: 2,
            access: hop,
            bottleneck: LinkConfig {
                queue_limit_bytes: 64 * 1024,
                ..hop
            },
            mtu: Mtu::M1024,
            max_inflight: 64,
            recovery: Recovery::GoBackN,
            timeout: 5,
            config: Config::default(),
            probe_len: 64,
            probe_interval_us: 50,
            seed: 1,
            time_limit_us: 10_000_000,
        }
    }
}

/// What an incast run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IncastReport {
    /// Bulk WRITEs completed successfully (all senders).
    pub completed: u64,
    /// Bulk WRITEs completed with an error.
    pub failed: u64,
    /// Every sender's last WRITE left the bytes it carried at the receiver.
    pub intact: bool,
    /// Virtual time until the last bulk WRITE completed (or the limit).
    pub elapsed_us: u64,
    /// Bulk payload bytes completed × 8 / elapsed time.
    pub goodput_gbps: f64,
    /// `goodput_gbps` over the bottleneck's line rate.
    pub goodput_fraction: f64,
    /// Packets the bulk senders sent.
    pub packets: u64,
    /// Packets the bulk senders sent again.
    pub retransmissions: u64,
    /// Retransmission timeouts of the bulk senders.
    pub timeouts: u64,
    /// Packets the bottleneck's full queue dropped.
    pub queue_drops: u64,
    /// The most bytes the bottleneck queue held.
    pub max_queue_bytes: u64,
    /// The mean bytes a packet arriving at the bottleneck found queued (itself
    /// included; dropped ones not counted).
    pub mean_queue_bytes: u64,
    /// RTT samples and window decreases, all senders and the probe.
    pub rtt_samples: u64,
    /// Window decreases, all senders and the probe.
    pub decreases: u64,
    /// The bulk senders' congestion windows at the end (packets).
    pub final_windows: Vec<f64>,
    /// Probe WRITEs completed.
    pub probes: u64,
    /// Probe completion latency (post to completion): median, µs.
    pub probe_p50_us: u64,
    /// Probe completion latency: 99th percentile, µs.
    pub probe_p99_us: u64,
    /// Probe completion latency: largest, µs.
    pub probe_max_us: u64,
}

/// The receiver's address; sender `i` is `10.0.1.(i + 1)`.
const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

fn sender_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 1 + (i / 250) as u8, (i % 250) as u8 + 1)
}

fn sender_index(a: Ipv4Addr) -> Option<usize> {
    let o = a.octets();
    (o[0] == 10 && o[1] == 0 && o[2] >= 1 && o[3] >= 1)
        .then(|| usize::from(o[2] - 1) * 250 + usize::from(o[3] - 1))
}

/// One sending endpoint with its link into the switch.
struct Sender {
    ep: Endpoint<VecMemory>,
    up: Link,
    qpn: u32,
    src: Region,
    /// Where its WRITEs land at the receiver.
    dst_addr: u64,
    dst_rkey: u32,
    posted: u64,
    completed: u64,
    failed: u64,
}

/// Base of every sender's memory and of the receiver's.
const SENDER_BASE: u64 = 0x10_0000;
const RECEIVER_BASE: u64 = 0x80_0000;

/// The bytes of message slot `s` of sender `i` (distinct per sender and slot).
fn content(i: usize, s: usize, len: usize) -> Vec<u8> {
    let mut x = (i as u64) << 32 | s as u64;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

/// Bring a QP pair up (RESET → INIT → RTR → RTS) between `ep` (at `me_addr`) and the
/// receiver.
#[allow(clippy::too_many_arguments)]
fn bring_up(
    ep: &mut Endpoint<VecMemory>,
    me: u32,
    peer: u32,
    from: Ipv4Addr,
    to: Ipv4Addr,
    rq_psn: u32,
    sq_psn: u32,
    c: &IncastConfig,
) {
    let port = 0xc000 | (me as u16 & 0x3fff);
    let b = Bringup {
        access: Access::REMOTE_WRITE,
        qkey: 0x1111_1111,
        path_mtu: c.mtu,
        path: Some(IcrcPath::v4(from, to, port)),
        dest_qpn: peer,
        rq_psn,
        sq_psn,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
        timeout: c.timeout,
        retry_cnt: 7,
        rnr_retry: 7,
        recovery: c.recovery,
        max_inflight: c.max_inflight,
        // Every endpoint of the incast runs the same `Config`: the peer's bound is ours.
        peer_ack_delay_us: u32::try_from(ep.config().ack_delay_us).unwrap_or(u32::MAX),
    };
    for s in &b.steps(QpType::Rc) {
        // A bring-up the harness itself describes: the table accepts every step.
        if ep.modify_qp(me, s).is_err() {
            return;
        }
    }
}

/// One end of the incast: an endpoint with a fresh QPN seed over `size` bytes of
/// memory at `base` (filled with `fill`), and one region over all of it past the first
/// page. The seeds come from `rng` in a fixed order, so a run stays reproducible.
fn end_with_region(
    config: &Config,
    rng: &mut Rng,
    base: u64,
    size: usize,
    fill: u8,
) -> (Endpoint<VecMemory>, Region) {
    let mut cfg = config.clone();
    cfg.qpn_seed = rng.next_u64();
    let mut ep = Endpoint::new(cfg, VecMemory::new(base, size, fill, rng.next_u64() as u32));
    let region = ep
        .mem_mut()
        .register(1, base + 4096, size as u64 - 4096, Access::ALL);
    (ep, region)
}

/// Run an incast (module doc). Bounded by `time_limit_us` of virtual time.
pub fn run_incast(c: &IncastConfig) -> IncastReport {
    let n = c.senders.max(1);
    let window = c.window.max(1);
    let len = u64::from(c.msg_len);
    let mut rng = Rng::new(c.seed);
    let probe_on = c.probe_interval_us > 0;
    let ends = n + usize::from(probe_on);
    let area = len * window as u64;
    let probe_area = u64::from(c.probe_len).max(1);

    let rmem = (area * n as u64 + probe_area) as usize + 8192;
    let (mut recv, target) = end_with_region(&c.config, &mut rng, RECEIVER_BASE, rmem, 0xDD);
    let mut down = Link::new(c.access, rng.next_u64());
    let mut bottleneck = Link::new(c.bottleneck, rng.next_u64());

    let mut senders = Vec::with_capacity(ends);
    for i in 0..ends {
        let is_probe = i == n;
        let size = if is_probe { probe_area } else { area } as usize + 8192;
        let (mut ep, src) = end_with_region(&c.config, &mut rng, SENDER_BASE, size, 0xEE);
        if !is_probe {
            for s in 0..window {
                let data = content(i, s, c.msg_len as usize);
                ep.mem_mut().fill(src.addr + s as u64 * len, &data);
            }
        }
        let init = QpInit {
            qp_type: QpType::Rc,
            pd: 1,
            max_send_wr: window + 4,
            max_recv_wr: 4,
            srq: None,
        };
        let (Ok(qpn), Ok(rqpn)) = (ep.create_qp(init), recv.create_qp(init)) else {
            return IncastReport::default();
        };
        let (spsn, rpsn) = (
            rng.next_u64() as u32 & 0xff_ffff,
            rng.next_u64() as u32 & 0xff_ffff,
        );
        let addr = sender_addr(i);
        bring_up(&mut ep, qpn, rqpn, addr, RECEIVER, rpsn, spsn, c);
        bring_up(&mut recv, rqpn, qpn, RECEIVER, addr, spsn, rpsn, c);
        senders.push(Sender {
            ep,
            up: Link::new(c.access, rng.next_u64()),
            qpn,
            src,
            dst_addr: target.addr + i as u64 * area,
            dst_rkey: target.rkey,
            posted: 0,
            completed: 0,
            failed: 0,
        });
    }

    let mut buf = vec![0u8; c.mtu.bytes() as usize + MAX_OVERHEAD];
    let mut now = Instant::ZERO;
    let deadline = Instant(c.time_limit_us);
    let mut rotate = 0usize;
    let mut probe_sent_at: Option<Instant> = None;
    let mut next_probe = Instant::ZERO;
    let mut probe_lat = Vec::new();
    let mut finished_at = None;

    loop {
        // Post: bulk senders keep `window` WRITEs outstanding; the probe one.
        for (i, s) in senders.iter_mut().enumerate() {
            if i == n {
                if finished_at.is_none() && probe_sent_at.is_none() && now >= next_probe {
                    let wr = SendWr::new(
                        s.posted,
                        WrOp::Write {
                            remote: RemoteAddr {
                                addr: s.dst_addr,
                                rkey: s.dst_rkey,
                            },
                            imm: None,
                        },
                        vec![Sge {
                            addr: s.src.addr,
                            len: c.probe_len,
                            lkey: s.src.lkey,
                        }],
                    );
                    if s.ep.post_send(s.qpn, wr).is_ok() {
                        s.posted += 1;
                        probe_sent_at = Some(now);
                        next_probe = now + c.probe_interval_us;
                    }
                }
                continue;
            }
            while s.posted < c.messages && s.posted - s.completed - s.failed < window as u64 {
                let slot = (s.posted % window as u64) * len;
                let wr = SendWr::new(
                    s.posted,
                    WrOp::Write {
                        remote: RemoteAddr {
                            addr: s.dst_addr + slot,
                            rkey: s.dst_rkey,
                        },
                        imm: None,
                    },
                    vec![Sge {
                        addr: s.src.addr + slot,
                        len: c.msg_len,
                        lkey: s.src.lkey,
                    }],
                );
                if s.ep.post_send(s.qpn, wr).is_err() {
                    break;
                }
                s.posted += 1;
            }
        }

        // One step of the network.
        let mut busy = false;
        let mut wake: Option<Instant> = None;
        let mut later = |t: Instant| wake = Some(wake.map_or(t, |w: Instant| w.min(t)));
        for s in senders.iter_mut() {
            loop {
                if !s.up.can_send(now) {
                    later(s.up.free_at());
                    break;
                }
                match s.ep.poll_transmit(now, &mut buf) {
                    Some(t) => {
                        s.up.send(now, t.path, &buf[..t.len]);
                        busy = true;
                    }
                    None => break,
                }
            }
        }
        loop {
            if !down.can_send(now) {
                later(down.free_at());
                break;
            }
            match recv.poll_transmit(now, &mut buf) {
                Some(t) => {
                    down.send(now, t.path, &buf[..t.len]);
                    busy = true;
                }
                None => break,
            }
        }
        for k in 0..ends {
            let s = &mut senders[(rotate + k) % ends];
            while let Some((path, bytes)) = s.up.receive(now) {
                bottleneck.send(now, path, &bytes);
                busy = true;
            }
        }
        rotate = (rotate + 1) % ends;
        while let Some((path, bytes)) = bottleneck.receive(now) {
            recv.handle_packet(now, &path, &bytes);
            busy = true;
        }
        while let Some((path, bytes)) = down.receive(now) {
            let to = match path.ips {
                IpPair::V4 { dst, .. } => sender_index(dst),
                _ => None,
            };
            if let Some(s) = to.and_then(|i| senders.get_mut(i)) {
                s.ep.handle_packet(now, &path, &bytes);
            }
            busy = true;
        }
        for ep in senders
            .iter_mut()
            .map(|s| &mut s.ep)
            .chain(std::iter::once(&mut recv))
        {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
                busy = true;
            }
        }

        // Completions.
        for (i, s) in senders.iter_mut().enumerate() {
            while let Some(wc) = s.ep.poll_completion() {
                if i == n {
                    if let Some(at) = probe_sent_at.take() {
                        probe_lat.push(now - at);
                    }
                    continue;
                }
                if wc.status == WcStatus::Success {
                    s.completed += 1;
                } else {
                    s.failed += 1;
                }
                busy = true;
            }
        }
        let flows_done = senders
            .iter()
            .take(n)
            .all(|s| s.completed + s.failed >= c.messages);
        if flows_done && finished_at.is_none() {
            finished_at = Some(now);
        }
        if flows_done && probe_sent_at.is_none() {
            break;
        }
        if now > deadline {
            break;
        }
        if busy {
            continue;
        }
        if probe_on && finished_at.is_none() && probe_sent_at.is_none() {
            later(next_probe);
        }
        let next = senders
            .iter()
            .flat_map(|s| [s.up.next_arrival(), s.ep.poll_timeout()])
            .chain([
                bottleneck.next_arrival(),
                down.next_arrival(),
                recv.poll_timeout(),
                wake,
            ])
            .flatten()
            .min();
        match next {
            Some(t) => now = t.max(Instant(now.micros() + 1)),
            None => break,
        }
    }

    let elapsed = finished_at.unwrap_or(now) - Instant::ZERO;
    let mut r = IncastReport {
        elapsed_us: elapsed,
        queue_drops: bottleneck.stats.queue_drops,
        max_queue_bytes: bottleneck.stats.max_queue_bytes,
        mean_queue_bytes: bottleneck
            .stats
            .queued_bytes_total
            .checked_div(bottleneck.stats.queued)
            .unwrap_or(0),
        intact: true,
        ..IncastReport::default()
    };
    for (i, s) in senders.iter().enumerate() {
        let st = s.ep.stats();
        r.rtt_samples += st.cc_rtt_samples;
        r.decreases += st.cc_decreases;
        if i == n {
            continue;
        }
        r.completed += s.completed;
        r.failed += s.failed;
        r.packets += st.tx_packets;
        r.retransmissions += st.retransmitted_packets;
        r.timeouts += st.timeouts;
        r.final_windows
            .push(s.ep.congestion(s.qpn).map_or(0.0, |w| w.window));
        if c.messages > 0 {
            let last = ((c.messages - 1) % window as u64) as usize;
            let at = s.dst_addr + last as u64 * len;
            r.intact &= s.completed == c.messages
                && recv.mem().bytes(at, c.msg_len as usize)
                    == content(i, last, c.msg_len as usize).as_slice();
        }
    }
    if elapsed > 0 {
        r.goodput_gbps = (r.completed * len * 8) as f64 / (elapsed as f64 * 1000.0);
        let line = c.bottleneck.rate_bytes_per_us as f64 * 8.0 / 1000.0;
        if line > 0.0 {
            r.goodput_fraction = r.goodput_gbps / line;
        }
    }
    probe_lat.sort_unstable();
    r.probes = probe_lat.len() as u64;
    let pct = |p: f64| -> u64 {
        if probe_lat.is_empty() {
            return 0;
        }
        let i = ((probe_lat.len() as f64 * p).ceil() as usize).clamp(1, probe_lat.len()) - 1;
        probe_lat[i]
    };
    r.probe_p50_us = pct(0.50);
    r.probe_p99_us = pct(0.99);
    r.probe_max_us = probe_lat.last().copied().unwrap_or(0);
    r
}

/// The incast table (markdown) of docs/results/incast.md: 4, 8 and 16 senders,
/// congestion control off and on, through the default bottleneck, each sender
/// completing `messages` WRITEs of 64 KiB.
pub fn incast_table(seed: u64, target_delay_us: u64, messages: u64) -> String {
    use crate::cc::{CongestionControl, DelayControl};
    let mut out = String::from(
        "| senders | control | completed | failed | goodput (Gbit/s) | of line rate | retransmitted | timeouts | queue drops | mean queue (KiB) | max queue (KiB) | probe p50 (µs) | probe p99 (µs) | window decreases |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for senders in [4usize, 8, 16] {
        for (name, cc) in [
            ("off", CongestionControl::Off),
            (
                "delay",
                CongestionControl::Delay(DelayControl {
                    target_delay_us,
                    ..DelayControl::default()
                }),
            ),
        ] {
            let mut c = IncastConfig {
                senders,
                seed,
                messages,
                ..IncastConfig::default()
            };
            c.config.congestion = cc;
            let r = run_incast(&c);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} |\n",
                senders,
                name,
                r.completed,
                r.failed,
                r.goodput_gbps,
                r.goodput_fraction,
                r.retransmissions,
                r.timeouts,
                r.queue_drops,
                r.mean_queue_bytes as f64 / 1024.0,
                r.max_queue_bytes as f64 / 1024.0,
                r.probe_p50_us,
                r.probe_p99_us,
                r.decreases
            ));
        }
    }
    out
}
