//! Per-method counters: calls, errors by status, a latency histogram.
//!
//! Lock-free on the hot path (atomics only, once a method's entry exists). The
//! histogram is log-linear, HdrHistogram-style with 3 significant bits: a value lands
//! in the bucket of its highest set bit, split in 8, so a percentile read back is
//! within 12.5 % of a latency that was measured. Benchmarks that need exact
//! percentiles keep their own samples.

use crate::status::Code;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

const SUB: usize = 8;
const BUCKETS: usize = 64 * SUB;

/// A latency histogram over nanoseconds.
#[derive(Debug)]
pub struct Histogram {
    counts: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros() as usize; // ≥ 3
    let sub = ((ns >> (msb - 3)) & (SUB as u64 - 1)) as usize;
    ((msb - 2) * SUB + sub).min(BUCKETS - 1)
}

/// The largest value that lands in bucket `b`.
fn bucket_top(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let msb = b / SUB + 2;
    let sub = (b % SUB) as u64;
    let low = (SUB as u64 + sub) << (msb - 3);
    low + (1u64 << (msb - 3)) - 1
}

impl Histogram {
    /// Record one latency.
    pub fn record(&self, d: Duration) {
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.counts[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    counts: Vec<u64>,
    sum_ns: u64,
}

impl HistogramSnapshot {
    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Mean latency.
    pub fn mean(&self) -> Option<Duration> {
        let n = self.count();
        (n > 0).then(|| Duration::from_nanos(self.sum_ns / n))
    }

    /// The `p`-th percentile (0 < p ≤ 100): the top of the bucket holding the
    /// nearest-rank sample.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Duration::from_nanos(bucket_top(b)));
            }
        }
        None
    }
}

/// One method's counters.
#[derive(Debug)]
pub struct MethodMetrics {
    name: String,
    calls: AtomicU64,
    ok: AtomicU64,
    errors: RwLock<BTreeMap<Code, Arc<AtomicU64>>>,
    latency: Histogram,
}

impl MethodMetrics {
    fn new(name: String) -> MethodMetrics {
        MethodMetrics {
            name,
            calls: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            errors: RwLock::new(BTreeMap::new()),
            latency: Histogram::default(),
        }
    }

    /// Count a finished call.
    pub fn record(&self, result: Result<(), Code>, latency: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.latency.record(latency);
        match result {
            Ok(()) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(code) => {
                let known = self
                    .errors
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&code)
                    .cloned();
                let c = known.unwrap_or_else(|| {
                    Arc::clone(
                        self.errors
                            .write()
                            .unwrap_or_else(PoisonError::into_inner)
                            .entry(code)
                            .or_default(),
                    )
                });
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> MethodSnapshot {
        MethodSnapshot {
            name: self.name.clone(),
            calls: self.calls.load(Ordering::Relaxed),
            ok: self.ok.load(Ordering::Relaxed),
            errors: self
                .errors
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(k, v)| (*k, v.load(Ordering::Relaxed)))
                .collect(),
            latency: self.latency.snapshot(),
        }
    }
}

/// One method's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodSnapshot {
    /// Method name.
    pub name: String,
    /// Calls finished (successfully or not).
    pub calls: u64,
    /// Calls that succeeded.
    pub ok: u64,
    /// Failed calls by status.
    pub errors: BTreeMap<Code, u64>,
    /// Latency: at the server, from the message's arrival to its reply being posted;
    /// at the client, from the call to its result.
    pub latency: HistogramSnapshot,
}

impl MethodSnapshot {
    /// Failed calls with `code`.
    pub fn errors_with(&self, code: Code) -> u64 {
        self.errors.get(&code).copied().unwrap_or(0)
    }
}

/// Every method's counters, by method id.
#[derive(Debug, Default)]
pub struct Registry {
    methods: RwLock<BTreeMap<u32, Arc<MethodMetrics>>>,
}

impl Registry {
    /// The counters of method `id` (made on first use with `name`).
    pub fn method(&self, id: u32, name: impl FnOnce() -> String) -> Arc<MethodMetrics> {
        if let Some(m) = self
            .methods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
        {
            return Arc::clone(m);
        }
        Arc::clone(
            self.methods
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(id)
                .or_insert_with(|| Arc::new(MethodMetrics::new(name()))),
        )
    }

    /// Every method's counters, by id.
    pub fn snapshot(&self) -> BTreeMap<u32, MethodSnapshot> {
        self.methods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (*k, v.snapshot()))
            .collect()
    }

    /// The counters of the method called `name`.
    pub fn by_name(&self, name: &str) -> Option<MethodSnapshot> {
        self.snapshot().into_values().find(|m| m.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tops_bound_their_values() {
        let mut last = 0;
        for ns in (0..100_000u64).chain([1 << 20, 1 << 40, u64::MAX / 2]) {
            let b = bucket(ns);
            assert!(b >= last || ns == 1 << 20, "{ns}");
            last = b;
            assert!(bucket_top(b) >= ns, "{ns} above top of bucket {b}");
            if ns > 8 {
                assert!(bucket_top(b) as f64 <= ns as f64 * 1.125 + 1.0, "{ns}");
            }
        }
    }

    #[test]
    fn percentiles_within_an_eighth() {
        let h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 1000);
        let p50 = s.percentile(50.0).unwrap().as_secs_f64() * 1e6;
        let p99 = s.percentile(99.0).unwrap().as_secs_f64() * 1e6;
        assert!((500.0..=563.0).contains(&p50), "{p50}");
        assert!((990.0..=1114.0).contains(&p99), "{p99}");
    }

    #[test]
    fn errors_are_counted_by_code() {
        let r = Registry::default();
        let m = r.method(7, || "seven".into());
        m.record(Ok(()), Duration::from_micros(3));
        m.record(Err(Code::Overloaded), Duration::from_micros(1));
        m.record(Err(Code::Overloaded), Duration::from_micros(1));
        let s = r.by_name("seven").unwrap();
        assert_eq!((s.calls, s.ok, s.errors_with(Code::Overloaded)), (3, 1, 2));
    }
}
