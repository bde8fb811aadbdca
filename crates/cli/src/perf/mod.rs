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
//! [`bandwidth_record`] and writes it with [`table::Output`].

pub mod local;
pub mod record;
pub mod run;
pub mod stats;
pub mod table;

use record::{Meta, Record};
use run::{BandwidthRun, PingPongRun};
use stats::{BandwidthStats, LatencyStats, Method};

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
    let (mut ns, unmatched) = stats::one_way_ns(&run.rtts, turnarounds, seq_bits);
    let Some(s) = LatencyStats::from_ns(&mut ns) else {
        let mut r = Record::failed(meta, size, "no round trip was answered");
        r.lost = Some(run.lost);
        return r;
    };
    let mut r = Record::latency(meta, size, method, &s);
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
    Record::bandwidth(
        meta,
        size,
        &BandwidthStats::new(size, run.messages, run.elapsed),
    )
}
