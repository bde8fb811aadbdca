//! The result record: one JSON object per test and message size, the same shape for
//! weft, the kernel baselines and the peers (UCX, libfabric), so `weft report` can put
//! them side by side.
//!
//! Always present: `system`, `test`, `link`, `qp`, `size`, `iters`. A latency record
//! adds `method` and `p50_us` … `max_us` (one-way, microseconds; a value a tool does
//! not give is `null`); a bandwidth record adds `mb_per_s` (MB = 10^6 bytes) and
//! `mmsg_per_s`. A run that failed carries `error` instead of numbers. A run that
//! measured CPU time adds `cpu_client_us_per_op`, `cpu_server_us_per_op` and
//! `ops_per_cpu_s` ([`CpuUse`]).

use serde::{Deserialize, Serialize};

use super::cpu::CpuUse;
use super::stats::{BandwidthStats, LatencyStats, Method};

/// Who produced a record and how: what a plot series is named after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// "weft", "kernel-tcp", "kernel-udp", "ucx-posix", "ucx-tcp", "libfabric-tcp", …
    pub system: String,
    /// "send-lat", "tcp-lat", "tag_lat", "pingpong", …
    pub test: String,
    /// weft: "udp" | "shm"; others: the path they use ("loopback", "shm", "net").
    pub link: String,
    /// weft: "rc" | "uc" | "ud"; others: their endpoint kind ("stream", "dgram",
    /// "tag", "msg", "rdm").
    pub qp: String,
}

/// One-way latency figures of a record, microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// "rtt/2" (half the round trip), "symmetric" or "rtt" (the full round trip, as
    /// perftest reports READ and atomics) ([`Method::as_str`]). The `*_us` figures
    /// are one-way for the first two and a whole round trip for "rtt".
    pub method: String,
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    /// Every latency source gives a mean; its presence marks a latency record.
    pub mean_us: f64,
    pub min_us: Option<f64>,
    pub max_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdev_us: Option<f64>,
    /// Round trips per second over the measured rounds (the message rate beside the
    /// latency: each round trip is one message each way), where measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_per_s: Option<f64>,
}

/// Bandwidth figures of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// Payload MB/s, MB = 10^6 bytes. For UDP: what the receiver got.
    pub mb_per_s: f64,
    /// Millions of messages per second (receiver's, for UDP).
    pub mmsg_per_s: f64,
    /// The sender's rate, where it differs from the receiver's (UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_mb_per_s: Option<f64>,
}

/// A background flow that ran beside a latency run (`weft perf --bulk-size`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Background {
    /// Bytes of each of the flow's WRITEs.
    pub bulk_size: u64,
    /// WRITEs the flow completed over the run.
    pub bulk_messages: u64,
    /// The flow's payload rate over the run, MB = 10^6 bytes.
    pub bulk_mb_per_s: f64,
    /// The device's send scheduler: "drr" or "fifo".
    pub scheduler: String,
}

/// One result: a test at one message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    #[serde(flatten)]
    pub meta: Meta,
    /// Message size in bytes.
    pub size: u64,
    /// Measured iterations (latency: answered round trips; bandwidth: messages sent).
    pub iters: u64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    /// Messages lost (UDP: datagrams sent and never received / never answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// CPU time of both processes per operation, where the tool measured it.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuUse>,
    /// The background flow beside this run, if one ran.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub background: Option<Background>,
    /// Why this run produced no numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Anything a reader of the numbers must know (a fallback, a truncated run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Record {
    /// Appends `n` to the note ("old; n"), or makes it the note.
    pub fn add_note(&mut self, n: impl Into<String>) {
        let n = n.into();
        self.note = Some(match self.note.take() {
            Some(o) => format!("{o}; {n}"),
            None => n,
        });
    }

    /// A latency record from measured statistics.
    pub fn latency(meta: &Meta, size: u64, method: Method, s: &LatencyStats) -> Record {
        Record {
            meta: meta.clone(),
            size,
            iters: s.samples,
            latency: Some(Latency {
                method: method.as_str().to_string(),
                p50_us: Some(s.p50_us),
                p90_us: s.p90_us,
                p99_us: s.p99_us,
                p999_us: s.p999_us,
                mean_us: s.mean_us,
                min_us: Some(s.min_us),
                max_us: Some(s.max_us),
                stdev_us: Some(s.stdev_us),
                rtt_per_s: None,
            }),
            bandwidth: None,
            lost: None,
            cpu: None,
            background: None,
            error: None,
            note: None,
        }
    }

    /// A bandwidth record from a measured rate.
    pub fn bandwidth(meta: &Meta, size: u64, b: &BandwidthStats) -> Record {
        Record {
            meta: meta.clone(),
            size,
            iters: b.messages,
            latency: None,
            bandwidth: Some(Bandwidth {
                mb_per_s: b.mb_per_s,
                mmsg_per_s: b.mmsg_per_s,
                sender_mb_per_s: None,
            }),
            lost: None,
            cpu: None,
            background: None,
            error: None,
            note: None,
        }
    }

    /// A run that failed: no numbers, the reason.
    pub fn failed(meta: &Meta, size: u64, error: impl Into<String>) -> Record {
        Record {
            meta: meta.clone(),
            size,
            iters: 0,
            latency: None,
            bandwidth: None,
            lost: None,
            cpu: None,
            background: None,
            error: Some(error.into()),
            note: None,
        }
    }

    /// Is this a latency test (by its name: `*-lat`, `*_lat`, `pingpong`)? Used to
    /// label failed records, which carry no numbers.
    pub fn is_latency_test(test: &str) -> bool {
        test.ends_with("lat") || test == "pingpong"
    }

    /// The plot series this record belongs to: system/link, plus the QP type for
    /// weft (rc and uc are different things to compare), then the test (a
    /// write-lat number never fills a send-lat column), plus the method when it is
    /// not the default half round trip: `weft/shm/rc send-lat`,
    /// `ucx-posix/shm tag_lat`, `weft/udp/rc read-lat (full rtt)`.
    pub fn series(&self) -> String {
        let m = &self.meta;
        let mut s = format!("{}/{}", m.system, m.link);
        if m.system == "weft" {
            s.push('/');
            s.push_str(&m.qp);
        }
        s.push(' ');
        s.push_str(&m.test);
        if let Some(l) = &self.latency {
            if l.method == Method::Symmetric.as_str() {
                s.push_str(" (symmetric)");
            } else if l.method == Method::FullRtt.as_str() {
                s.push_str(" (full rtt)");
            }
        }
        s
    }

    /// The series' system and link part (`ucx-posix/shm` of
    /// `ucx-posix/shm tag_lat`): what `weft report --reference` names.
    pub fn series_prefix(series: &str) -> &str {
        series.split(' ').next().unwrap_or(series)
    }

    /// One JSON line.
    pub fn to_json_line(&self) -> String {
        // A Record holds only strings and numbers: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Reads records from JSON lines (blank lines and `#` comments skipped). Lines that
/// are not records (another tool's JSON) are reported with their line number.
pub fn parse_lines(text: &str) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let r: Record = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(r);
    }
    Ok(out)
}
