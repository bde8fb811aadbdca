//! Latency statistics from samples, and bandwidth accounting.
//!
//! Percentiles are exact: the samples are sorted and the nearest-rank definition is
//! used (the p-th percentile of n samples is the ⌈p·n/100⌉-th smallest), so a
//! percentile is always a latency that was really measured, never an interpolation.
//! A percentile is reported only when the run has enough samples to resolve it:
//! p90 needs 10, p99 needs 100 and p99.9 needs 1000 samples; below that it is `None`
//! (`null` in JSON, `-` in the table) rather than a copy of the maximum.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Bytes in the MB of every `mb_per_s` weft writes: 10^6, as perftest's `BW
/// average[MB/sec]` and fi_pingpong's `MB/sec`. ucx_perftest prints MB/s with
/// MB = 2^20; the peers' converter rescales its numbers to this unit.
pub const MB: f64 = 1e6;

/// Summary of one-way latencies, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Samples the statistics were computed from.
    pub samples: u64,
    pub min_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub p50_us: f64,
    /// `None` with fewer than 10 samples.
    pub p90_us: Option<f64>,
    /// `None` with fewer than 100 samples.
    pub p99_us: Option<f64>,
    /// `None` with fewer than 1000 samples.
    pub p999_us: Option<f64>,
}

/// The nearest-rank `p`-th percentile (0 < p ≤ 100) of `sorted` (ascending, not empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    debug_assert!(!sorted.is_empty() && p > 0.0 && p <= 100.0);
    let n = sorted.len();
    // Integer arithmetic on per-mille ranks so that p = 99.9 and n = 1000 give rank
    // 999 exactly, not 999.0000000000001 rounded up to 1000.
    let per_mille = (p * 10.0).round() as u128;
    let rank = (per_mille * n as u128).div_ceil(1000).max(1) as usize;
    sorted[rank.min(n) - 1]
}

/// The smallest sample count at which `percentile(p)` is reported: one sample must
/// lie above it, so p99.9 needs 1000 samples.
pub fn min_samples_for(p: f64) -> usize {
    (100.0 / (100.0 - p)).round() as usize
}

impl LatencyStats {
    /// Statistics of one-way latencies given in nanoseconds. Sorts `ns` in place.
    /// `None` when there are no samples.
    pub fn from_ns(ns: &mut [f64]) -> Option<LatencyStats> {
        if ns.is_empty() {
            return None;
        }
        ns.sort_by(f64::total_cmp);
        let n = ns.len();
        let mean = ns.iter().sum::<f64>() / n as f64;
        let var = ns.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        let us = |x: f64| x / 1e3;
        let pct = |p: f64| (n >= min_samples_for(p)).then(|| us(percentile(ns, p)));
        Some(LatencyStats {
            samples: n as u64,
            min_us: us(ns[0]),
            max_us: us(ns[n - 1]),
            mean_us: us(mean),
            stdev_us: us(var.sqrt()),
            p50_us: us(percentile(ns, 50.0)),
            p90_us: pct(90.0),
            p99_us: pct(99.0),
            p999_us: pct(99.9),
        })
    }
}

/// What a bandwidth run moved and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BandwidthStats {
    /// Payload bytes (message sizes summed; no headers).
    pub bytes: u64,
    pub messages: u64,
    pub seconds: f64,
    /// Payload rate in MB/s, MB = 10^6 bytes ([`MB`]).
    pub mb_per_s: f64,
    /// Messages per second, in millions.
    pub mmsg_per_s: f64,
}

impl BandwidthStats {
    /// Rates of `messages` messages of `size` bytes in `elapsed`.
    pub fn new(size: u64, messages: u64, elapsed: Duration) -> BandwidthStats {
        let seconds = elapsed.as_secs_f64();
        let bytes = size * messages;
        let rate = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        BandwidthStats {
            bytes,
            messages,
            seconds,
            mb_per_s: rate(bytes as f64) / MB,
            mmsg_per_s: rate(messages as f64) / 1e6,
        }
    }
}

/// How a one-way latency is derived from a ping-pong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Half the round-trip time measured by the client.
    HalfRtt,
    /// The symmetric timestamp method of the router-interconnect paper:
    /// ((t4 − t1) − (t3 − t2)) / 2, where t1/t4 are the client's send/receive times
    /// and t2/t3 the server's receive/send times. The server's turnaround (t3 − t2)
    /// is taken out, so what remains is the time on the wire and in the two stacks;
    /// each side only differences its own clock, so no clock synchronisation is needed.
    Symmetric,
    /// The whole round trip, not halved: how perftest reports READ and atomic
    /// latency (the request and its response are one operation).
    FullRtt,
}

impl Method {
    /// The name in JSON records.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::HalfRtt => "rtt/2",
            Method::Symmetric => "symmetric",
            Method::FullRtt => "rtt",
        }
    }
}

/// One-way latencies (ns) from the client's round trips `(seq, rtt_ns)` and, for the
/// symmetric method, the server's turnarounds `(seq, t3 − t2 ns)`.
///
/// Sequence numbers may be truncated on the server's side to the `seq_bits` low bits
/// (a 2-byte message carries only 16 of them); pairs are matched in order, so a
/// request the server never saw (lost on the way) or a turnaround whose reply was
/// lost is skipped. Returns the samples and how many client rounds had no turnaround
/// (those are left out).
pub fn one_way_ns(
    rtts: &[(u64, u64)],
    turnarounds: Option<&[(u64, u64)]>,
    seq_bits: u32,
) -> (Vec<f64>, u64) {
    let Some(server) = turnarounds else {
        return (rtts.iter().map(|&(_, r)| r as f64 / 2.0).collect(), 0);
    };
    let mask = if seq_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << seq_bits) - 1
    };
    let mut out = Vec::with_capacity(rtts.len());
    let mut unmatched = 0;
    let mut j = 0;
    for &(seq, rtt) in rtts {
        let want = seq & mask;
        // The server saw every request the client got a reply to, in order; skip the
        // ones the client did not get back. Bounded look-ahead keeps a corrupt
        // turnaround list from making this quadratic.
        let found = server[j..]
            .iter()
            .take(1024)
            .position(|&(s, _)| s & mask == want);
        match found {
            Some(k) => {
                let turnaround = server[j + k].1;
                out.push(rtt.saturating_sub(turnaround) as f64 / 2.0);
                j += k + 1;
            }
            None => unmatched += 1,
        }
    }
    (out, unmatched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 500.0);
        assert_eq!(percentile(&v, 99.9), 999.0);
        assert_eq!(percentile(&v, 100.0), 1000.0);
        assert_eq!(min_samples_for(99.9), 1000);
        assert_eq!(min_samples_for(99.0), 100);
        assert_eq!(min_samples_for(90.0), 10);
    }
}
