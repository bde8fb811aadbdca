//! The measurement harness of `weft perf`, `weft baseline` and `weft report`: result
//! records and their JSON lines, latency statistics, bandwidth accounting, the
//! perftest-like table, the `--all` size sweep, the measured loops, and `--local`
//! (both sides as two processes on this host).
//!
//! A runner supplies only the transport-specific part:
//! - latency: a closure doing one ping-pong round (`run::ping_pong`), and for the
//!   symmetric method the server's `(seq, t3 − t2)` turnarounds;
//! - bandwidth: a closure sending one message and one waiting until everything sent
//!   has arrived (`run::bandwidth`);
//!
//! then turns the result into a [`record::Record`] with [`latency_record`] or
//! [`bandwidth_record`]. [`Plan`] turns the perftest-like options (`--size`,
//! `--all`, `--iters`, `--warmup`) into the sizes and loop options, and [`drive`]
//! runs a closure per size with progress on stderr and writes each record as it
//! comes ([`table::Output`]). The server side of `--local` is [`local`].
//!
//! A `weft perf send-lat` client over verbs would be, in outline (`qp`, `cq`, `mr`
//! being its connected objects):
//!
//! ```ignore
//! let plan = Plan::new(true, args.size, args.all, cap, args.iters, args.warmup, limit)?;
//! let meta = Meta { system: "weft".into(), test: "send-lat".into(), link: "udp".into(), qp: "rc".into() };
//! drive(&plan, "send-lat", &mut Progress::new(true), &mut Output::stdout(args.json), |size, opts, p| {
//!     let pp = run::ping_pong(opts, p, |_seq| {
//!         qp.post_send(&mr, size)?;          // one SEND ...
//!         cq.wait_recv()?;                    // ... and the peer's SEND back
//!         Ok(run::Round::Answered)
//!     })?;
//!     Ok(latency_record(&meta, size, &pp, None, 64))
//! })?;
//! ```
//!
//! and `--local` spawns the server side with [`local::LocalServer::spawn`] (the server
//! binds, then calls [`local::announce_ready`]) and reaps it with `reap`.

pub mod cpu;
pub mod local;
pub mod record;
pub mod run;
pub mod stats;
pub mod table;

use std::io::Write;
use std::time::Duration;

use record::{Meta, Record};
use run::{BandwidthRun, LoopOpts, PingPongRun, Progress};
use stats::{BandwidthStats, LatencyStats, Method};
use table::Output;

/// What a client runs: the message sizes and, per size, how many iterations.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sizes: Vec<u64>,
    /// Latency test (ping-pong) or bandwidth test.
    pub latency: bool,
    /// `--iters`: rounds per size (latency) or messages per size (bandwidth, capped
    /// by [`run::bw_messages`]).
    pub iters: u64,
    /// `--warmup`; `None`: a tenth of the iterations, 10 to 1000.
    pub warmup: Option<u64>,
    /// Per-size time limit of a ping-pong.
    pub time_limit: Duration,
}

impl Plan {
    /// perftest's defaults: 2 B and 1000 rounds for latency, 64 KiB and 5000
    /// messages for bandwidth; `all` sweeps 2 B … `cap` ([`run::sweep_sizes`]).
    pub fn new(
        latency: bool,
        size: Option<u64>,
        all: bool,
        cap: u64,
        iters: Option<u64>,
        warmup: Option<u64>,
        time_limit: Duration,
    ) -> anyhow::Result<Plan> {
        let sizes = if all {
            run::sweep_sizes(cap)
        } else {
            vec![size.unwrap_or(if latency { 2 } else { 65536 })]
        };
        if let Some(&s) = sizes.iter().find(|&&s| s == 0 || s > cap) {
            anyhow::bail!("message size {s} outside 1 … {cap} bytes for this test");
        }
        let iters = iters.unwrap_or(if latency { 1000 } else { 5000 });
        anyhow::ensure!(iters >= 1, "--iters must be at least 1");
        Ok(Plan {
            sizes,
            latency,
            iters,
            warmup,
            time_limit,
        })
    }

    /// The loop options at `size`.
    pub fn loop_opts(&self, size: u64) -> LoopOpts {
        let n = if self.latency {
            self.iters
        } else {
            run::bw_messages(size, self.iters)
        };
        LoopOpts {
            warmup: self.warmup.unwrap_or((n / 10).clamp(10, 1000)),
            iters: n,
            time_limit: self.time_limit,
            peer_pid: None,
            pause: Duration::ZERO,
        }
    }
}

/// Runs `one(size, loop options, progress)` for every size of `plan`, announcing each
/// on stderr (`[k/n] label size B x iters`) and writing its record to `out` as soon
/// as it is measured. Stops at the first error (a broken connection); a size that
/// failed on its own should come back as a [`Record::failed`] instead.
pub fn drive<W: Write>(
    plan: &Plan,
    label: &str,
    progress: &mut Progress,
    out: &mut Output<W>,
    mut one: impl FnMut(u64, &LoopOpts, &mut Progress) -> anyhow::Result<Record>,
) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::with_capacity(plan.sizes.len());
    for (k, &size) in plan.sizes.iter().enumerate() {
        let opts = plan.loop_opts(size);
        progress.begin(
            k + 1,
            plan.sizes.len(),
            format!("{label} {size} B x {}", opts.iters),
        );
        let r = one(size, &opts, progress)?;
        out.emit(&r)?;
        records.push(r);
    }
    Ok(records)
}

/// The record of one ping-pong run. `turnarounds` are the server's `(seq, t3 − t2
/// ns)` for the symmetric method (`None`: half the round trip), with the server's
/// sequence numbers truncated to `seq_bits`. Losses and a time-limited run are noted.
pub fn latency_record(
    meta: &Meta,
    size: u64,
    run: &PingPongRun,
    turnarounds: Option<&[(u64, u64)]>,
    seq_bits: u32,
) -> Record {
    let method = if turnarounds.is_some() {
        Method::Symmetric
    } else {
        Method::HalfRtt
    };
    let (ns, unmatched) = stats::one_way_ns(&run.rtts, turnarounds, seq_bits);
    record_of(meta, size, run, method, ns, unmatched)
}

/// The record of a ping-pong run whose operation is the round trip itself (READ,
/// atomics): the full round trip, not halved, as perftest reports them; the
/// record's method is "rtt".
pub fn round_trip_record(meta: &Meta, size: u64, run: &PingPongRun) -> Record {
    let ns = run.rtts.iter().map(|&(_, r)| r as f64).collect();
    record_of(meta, size, run, Method::FullRtt, ns, 0)
}

fn record_of(
    meta: &Meta,
    size: u64,
    run: &PingPongRun,
    method: Method,
    mut ns: Vec<f64>,
    unmatched: u64,
) -> Record {
    let Some(s) = LatencyStats::from_ns(&mut ns) else {
        let mut r = Record::failed(meta, size, "no round trip was answered");
        r.lost = Some(run.lost);
        return r;
    };
    let mut r = Record::latency(meta, size, method, &s);
    r.cpu = run.cpu;
    if let Some(l) = r.latency.as_mut() {
        let secs = run.wall.as_secs_f64();
        l.rtt_per_s = (secs > 0.0).then(|| run.rtts.len() as f64 / secs);
    }
    let mut notes = Vec::new();
    if run.lost > 0 {
        r.lost = Some(run.lost);
    }
    if unmatched > 0 {
        notes.push(format!(
            "{unmatched} rounds without a server timestamp left out"
        ));
    }
    if run.truncated {
        notes.push(format!(
            "time limit: {} of the requested rounds measured",
            run.rtts.len() as u64 + run.lost
        ));
    }
    if s.samples < 1000 {
        notes.push("fewer than 1000 samples: no p99.9".to_string());
    }
    if !notes.is_empty() {
        r.note = Some(notes.join("; "));
    }
    r
}

/// The record of one bandwidth run of `size`-byte messages, timed by the sender.
pub fn bandwidth_record(meta: &Meta, size: u64, run: &BandwidthRun) -> Record {
    let mut r = Record::bandwidth(
        meta,
        size,
        &BandwidthStats::new(size, run.messages, run.elapsed),
    );
    r.cpu = run.cpu;
    r
}
