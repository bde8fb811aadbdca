//! `weft probe`: the one-way latency of a cache line between two CPUs, the machine
//! state that the shared-memory comparisons depend on.
//!
//! On the 2-vCPU VM the benchmarks run on, that latency flips within seconds between
//! about 60 ns and about 200–250 ns (most likely the hypervisor placing the two vCPUs
//! on cores that share a last-level cache, or not). UCX's posix tag_lat follows it
//! almost one for one and weft's shm latency less, so a weft / UCX ratio depends on
//! which state each side's sample fell in. `scripts/verbs-perf.sh` runs this probe
//! before and after every sample and records it beside the sample.
//!
//! The measurement: two threads, pinned to the two CPUs with `sched_setaffinity`
//! (rustix's safe wrapper), ping-pong a counter through two atomics on separate
//! 128-byte-aligned lines (128 so that the adjacent-line prefetcher does not pair
//! them). The pinger stores `i` into its line and spins until the ponger's line reads
//! `i`; the ponger spins until the pinger's line changes and stores what it read. Each
//! round trip is two cache-line transfers, so one-way = batch time / (2 × round trips).
//! After a short unrecorded warm-up the round trips are split into batches; the result
//! is the median batch and the min–max over batches, so a batch hit by an interrupt
//! or a descheduling shows in the spread without moving the median.
//!
//! Bounded in time: a wall-clock budget (default 500 ms) is checked while spinning; a
//! run that exceeds it stops, keeps the batches it completed and says it was cut short.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use serde::Serialize;

use crate::rpc_bench::median_spread;

/// `weft probe`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The two CPUs (`A,B`): the pinger runs on A, the ponger on B. Default: the first
    /// two CPUs this process may run on.
    #[arg(long, value_delimiter = ',', num_args = 2)]
    pub cpus: Option<Vec<usize>>,
    /// Measured round trips, split evenly into the batches.
    #[arg(long, default_value_t = 200_000)]
    pub round_trips: u64,
    /// Batches (each gives one one-way figure; the result is their median).
    #[arg(long, default_value_t = 10)]
    pub batches: u32,
    /// Wall-clock budget of the whole measurement (ms), warm-up included.
    #[arg(long, default_value_t = 500)]
    pub budget_ms: u64,
    /// One JSON line instead of the human-readable line.
    #[arg(long)]
    pub json: bool,
}

/// What one probe measured. JSON keys as named; times in ns.
#[derive(Debug, Clone, Serialize)]
pub struct CoreLatency {
    /// Always "core-to-core", so a reader of mixed JSON lines can tell it apart.
    pub probe: &'static str,
    /// The pinger's and the ponger's CPU.
    pub cpus: [usize; 2],
    /// One-way latency: the median of the batches' figures.
    pub one_way_ns: f64,
    /// The fastest and slowest batch.
    pub min_ns: f64,
    pub max_ns: f64,
    /// Every batch's one-way figure, in order.
    pub batch_ns: Vec<f64>,
    /// Round trips measured (in the completed batches).
    pub round_trips: u64,
    /// Wall-clock time of the whole probe, warm-up and thread start included (ms).
    pub elapsed_ms: f64,
    /// The budget ran out before every batch completed.
    pub truncated: bool,
}

/// The pinger's and the ponger's counters, each on its own pair of cache lines.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Line(AtomicU64);

/// Written by the pinger instead of a counter value: the ponger returns.
const STOP: u64 = u64::MAX;

/// Round trips before the measured batches: page faults, caches and clocks settle.
const WARMUP: u64 = 2_000;

/// Spins between two looks at the clock while waiting (the budget check).
const SPINS_PER_CLOCK: u32 = 1 << 12;

/// The first two CPUs in this process's affinity mask.
fn default_cpus() -> anyhow::Result<[usize; 2]> {
    let set = sched_getaffinity(None).context("sched_getaffinity")?;
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .take(2)
        .collect();
    match cpus[..] {
        [a, b] => Ok([a, b]),
        _ => bail!("the core-to-core probe needs two CPUs; this process may run on {cpus:?} only"),
    }
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> anyhow::Result<()> {
    if cpu >= CpuSet::MAX_CPU {
        bail!(
            "CPU {cpu} is beyond the largest CPU set ({})",
            CpuSet::MAX_CPU
        );
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).with_context(|| format!("sched_setaffinity to CPU {cpu}"))
}

/// The batches of `round_trips` round trips each, and whether the budget ran out.
fn ping(
    ping: &AtomicU64,
    pong: &AtomicU64,
    batches: u32,
    per_batch: u64,
    deadline: Instant,
) -> (Vec<(Duration, u64)>, bool) {
    let mut next = 0u64;
    // One round trip: false when the deadline passed while waiting.
    let round_trip = |next: &mut u64| -> bool {
        *next += 1;
        ping.store(*next, Ordering::Release);
        let mut spins = 0u32;
        while pong.load(Ordering::Acquire) != *next {
            std::hint::spin_loop();
            spins += 1;
            if spins == SPINS_PER_CLOCK {
                spins = 0;
                if Instant::now() > deadline {
                    return false;
                }
            }
        }
        true
    };
    let mut out = Vec::with_capacity(batches as usize);
    let mut truncated = false;
    'run: {
        for _ in 0..WARMUP {
            if !round_trip(&mut next) {
                truncated = true;
                break 'run;
            }
        }
        for _ in 0..batches {
            let t0 = Instant::now();
            for k in 0..per_batch {
                // A look at the clock per 1024 round trips keeps a run that is slow
                // but never waits long inside its budget too.
                if !round_trip(&mut next) || (k % 1024 == 1023 && Instant::now() > deadline) {
                    truncated = true;
                    break 'run;
                }
            }
            out.push((t0.elapsed(), per_batch));
        }
    }
    ping.store(STOP, Ordering::Release);
    (out, truncated)
}

/// Answers every new value of `ping` until it reads [`STOP`].
fn pong(ping: &AtomicU64, pong: &AtomicU64) {
    let mut seen = 0u64;
    loop {
        let v = ping.load(Ordering::Acquire);
        if v == seen {
            std::hint::spin_loop();
            continue;
        }
        if v == STOP {
            return;
        }
        seen = v;
        pong.store(v, Ordering::Release);
    }
}

/// One-way ns of each batch: its time over its two transfers per round trip.
fn one_way_ns(batches: &[(Duration, u64)]) -> Vec<f64> {
    batches
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(d, n)| d.as_nanos() as f64 / (2 * n) as f64)
        .collect()
}

/// Runs the probe as `args` say.
pub fn measure(args: &Args) -> anyhow::Result<CoreLatency> {
    let cpus = match args.cpus.as_deref() {
        None => default_cpus()?,
        Some(&[a, b]) if a != b => [a, b],
        Some(c) => bail!("--cpus needs two different CPUs, got {c:?}"),
    };
    if args.batches == 0 || args.round_trips < u64::from(args.batches) {
        bail!(
            "--round-trips ({}) must give each of the --batches ({}) at least one",
            args.round_trips,
            args.batches
        );
    }
    let per_batch = args.round_trips / u64::from(args.batches);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_millis(args.budget_ms);
    let (ping_line, pong_line) = (Line::default(), Line::default());
    let failed = AtomicBool::new(false);
    let ready = Barrier::new(2);
    let (batches, truncated) = std::thread::scope(|s| {
        let ponger = s.spawn(|| {
            let pinned = pin(cpus[1]);
            failed.fetch_or(pinned.is_err(), Ordering::AcqRel);
            ready.wait();
            if !failed.load(Ordering::Acquire) {
                pong(&ping_line.0, &pong_line.0);
            }
            pinned
        });
        let pinger = s.spawn(|| {
            let pinned = pin(cpus[0]);
            failed.fetch_or(pinned.is_err(), Ordering::AcqRel);
            ready.wait();
            if failed.load(Ordering::Acquire) {
                return pinned.map(|()| (Vec::new(), true));
            }
            Ok(ping(
                &ping_line.0,
                &pong_line.0,
                args.batches,
                per_batch,
                deadline,
            ))
        });
        let pinger = pinger.join().expect("probe pinger thread panicked");
        let ponger = ponger.join().expect("probe ponger thread panicked");
        ponger.and(pinger)
    })?;
    let elapsed = t0.elapsed();
    let batch_ns = one_way_ns(&batches);
    let Some((median, min, max)) = median_spread(&batch_ns) else {
        bail!(
            "no batch of {per_batch} round trips between CPUs {} and {} completed within {} ms",
            cpus[0],
            cpus[1],
            args.budget_ms
        );
    };
    Ok(CoreLatency {
        probe: "core-to-core",
        cpus,
        one_way_ns: median,
        min_ns: min,
        max_ns: max,
        round_trips: batches.iter().map(|(_, n)| n).sum(),
        batch_ns,
        elapsed_ms: elapsed.as_secs_f64() * 1e3,
        truncated,
    })
}

/// `weft probe`: measures and prints one line (human-readable, or JSON).
pub fn run(args: Args) -> anyhow::Result<()> {
    let r = measure(&args)?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "core-to-core one-way CPU {} -> {}: {:.1} ns (median of {} batches, {:.1}–{:.1} ns), \
             {} round trips in {:.1} ms{}",
            r.cpus[0],
            r.cpus[1],
            r.one_way_ns,
            r.batch_ns.len(),
            r.min_ns,
            r.max_ns,
            r.round_trips,
            r.elapsed_ms,
            if r.truncated {
                "; cut short by the time budget"
            } else {
                ""
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_way_is_half_a_round_trip_per_batch() {
        let b = [
            (Duration::from_micros(240), 1000),
            (Duration::from_micros(100), 500),
            (Duration::from_micros(5), 0),
        ];
        // 240 µs / 2000 transfers = 120 ns; 100 µs / 1000 = 100 ns; an empty batch
        // gives no figure (no division by zero).
        assert_eq!(one_way_ns(&b), vec![120.0, 100.0]);
    }

    #[test]
    fn lines_are_a_prefetch_pair_apart() {
        assert_eq!(align_of::<Line>(), 128);
        let pair = [Line::default(), Line::default()];
        let a = std::ptr::from_ref(&pair[0]) as usize;
        let b = std::ptr::from_ref(&pair[1]) as usize;
        assert_eq!(b - a, 128);
    }

    #[test]
    fn bad_arguments_are_refused_before_any_thread_starts() {
        let args = |cpus: Option<Vec<usize>>, round_trips, batches| Args {
            cpus,
            round_trips,
            batches,
            budget_ms: 100,
            json: false,
        };
        let same = measure(&args(Some(vec![0, 0]), 100, 1)).unwrap_err();
        assert!(same.to_string().contains("two different CPUs"), "{same}");
        let none = measure(&args(Some(vec![0, 1]), 100, 0)).unwrap_err();
        assert!(none.to_string().contains("--batches"), "{none}");
        let few = measure(&args(Some(vec![0, 1]), 3, 4)).unwrap_err();
        assert!(few.to_string().contains("--round-trips"), "{few}");
    }

    #[test]
    fn a_cpu_the_machine_lacks_is_an_error_not_a_hang() {
        // The pinger pins itself and waits at the barrier; the ponger's pin fails; both
        // see the failure and return instead of spinning.
        let r = measure(&Args {
            cpus: Some(vec![0, CpuSet::MAX_CPU - 1]),
            round_trips: 100,
            batches: 1,
            budget_ms: 100,
            json: false,
        });
        let e = r.unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("sched_setaffinity to CPU {}", CpuSet::MAX_CPU - 1)),
            "{e:#}"
        );
        let beyond = measure(&Args {
            cpus: Some(vec![0, CpuSet::MAX_CPU]),
            round_trips: 100,
            batches: 1,
            budget_ms: 100,
            json: false,
        })
        .unwrap_err();
        assert!(beyond.to_string().contains("beyond"), "{beyond:#}");
    }
}
