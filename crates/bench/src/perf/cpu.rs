//! CPU time of the two processes of a run, so every rate can say what it cost: a side
//! that spins burns a full core whether or not messages move, a side that sleeps in
//! the kernel does not, and a rate alone hides which one a number came from.
//!
//! A process's CPU time is read from its POSIX CPU-time clock
//! (`clock_getcpuclockid` + `clock_gettime`): nanosecond resolution, every thread of
//! the process summed (an engine thread counts), and readable for another process
//! of the same user while it runs, so the `--local` client reads its server child's
//! clock around the measured phase without any protocol. `/proc/PID/stat` counts in
//! 10 ms ticks, too coarse for a run of a tenth of a second.
#![allow(unsafe_code)] // two libc calls with plain out-parameters, below

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// CPU time used so far by process `pid` (`None`: this process), all its threads.
/// `None` when the clock cannot be read (the process has exited, or the platform
/// has no such clock).
pub fn process_cpu(pid: Option<u32>) -> Option<Duration> {
    let clock = match pid {
        None => libc::CLOCK_PROCESS_CPUTIME_ID,
        Some(p) => {
            let mut id: libc::clockid_t = 0;
            let pid = libc::pid_t::try_from(p).ok()?;
            // SAFETY: `id` is a valid, writable clockid_t for the call's duration.
            let rc = unsafe { libc::clock_getcpuclockid(pid, &mut id) };
            if rc != 0 {
                return None;
            }
            id
        }
    };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    ))
}

/// CPU clocks of this process and (with `--local`) the peer process, read at the
/// start of a measured phase; [`CpuStart::finish`] turns them into [`CpuUse`].
#[derive(Debug, Clone, Copy)]
pub struct CpuStart {
    peer: Option<u32>,
    client: Option<Duration>,
    server: Option<Duration>,
}

impl CpuStart {
    /// Reads both clocks now. `peer`: the other process's id, when it runs here.
    pub fn now(peer: Option<u32>) -> CpuStart {
        CpuStart {
            peer,
            client: process_cpu(None),
            server: peer.and_then(|p| process_cpu(Some(p))),
        }
    }

    /// The CPU both processes used since [`CpuStart::now`], for `ops` operations.
    pub fn finish(&self, ops: u64) -> Option<CpuUse> {
        let client = process_cpu(None)?;
        let server = self.peer.and_then(|p| process_cpu(Some(p)));
        self.until(client, server, ops)
    }

    /// Like [`CpuStart::finish`], with the clocks' end values read by the caller
    /// (`client`: this process's [`process_cpu`], `server`: the peer's).
    pub fn until(&self, client: Duration, server: Option<Duration>, ops: u64) -> Option<CpuUse> {
        let client = client.checked_sub(self.client?)?;
        let server = match (self.server, server) {
            (Some(a), Some(b)) => b.checked_sub(a),
            _ => None,
        };
        Some(CpuUse::new(ops, client, server))
    }
}

/// What a measured phase cost in CPU, per operation (latency: a round trip;
/// bandwidth: a message). JSON: `cpu_client_us_per_op`, `cpu_server_us_per_op`
/// (absent when the server is not a local process), `ops_per_cpu_s` (operations per
/// CPU-second of both processes; of the client alone when the server's is unknown,
/// and then `cpu_server_us_per_op` is absent, which says so).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    pub cpu_client_us_per_op: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_server_us_per_op: Option<f64>,
    pub ops_per_cpu_s: f64,
}

impl CpuUse {
    /// The per-operation figures of `ops` operations that took `client` and `server`
    /// CPU time. Zero operations or zero CPU give zeros, not infinities.
    pub fn new(ops: u64, client: Duration, server: Option<Duration>) -> CpuUse {
        let per_op = |d: Duration| {
            if ops == 0 {
                0.0
            } else {
                d.as_secs_f64() * 1e6 / ops as f64
            }
        };
        let total = client.as_secs_f64() + server.map_or(0.0, |s| s.as_secs_f64());
        CpuUse {
            cpu_client_us_per_op: per_op(client),
            cpu_server_us_per_op: server.map(per_op),
            ops_per_cpu_s: if total > 0.0 { ops as f64 / total } else { 0.0 },
        }
    }

    /// The same CPU spread over `actual` operations instead of the `counted` ones it
    /// was divided by (a run that sent more messages than it planned).
    pub fn recount(&self, counted: u64, actual: u64) -> CpuUse {
        if counted == 0 || actual == 0 {
            return *self;
        }
        let f = counted as f64 / actual as f64;
        CpuUse {
            cpu_client_us_per_op: self.cpu_client_us_per_op * f,
            cpu_server_us_per_op: self.cpu_server_us_per_op.map(|s| s * f),
            ops_per_cpu_s: self.ops_per_cpu_s / f,
        }
    }

    /// CPU µs per operation of both processes (the client's alone when the
    /// server's is unknown).
    pub fn us_per_op(&self) -> f64 {
        self.cpu_client_us_per_op + self.cpu_server_us_per_op.unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_op_figures_add_both_processes() {
        let c = CpuUse::new(
            1000,
            Duration::from_millis(2),
            Some(Duration::from_millis(3)),
        );
        assert!((c.cpu_client_us_per_op - 2.0).abs() < 1e-9);
        assert_eq!(
            c.cpu_server_us_per_op.map(|s| (s - 3.0).abs() < 1e-9),
            Some(true)
        );
        assert!((c.us_per_op() - 5.0).abs() < 1e-9);
        // 1000 ops in 5 ms of CPU: 200 000 per CPU-second.
        assert!((c.ops_per_cpu_s - 200_000.0).abs() < 1e-6);
    }

    #[test]
    fn recounting_spreads_the_same_cpu_over_more_operations() {
        let c = CpuUse::new(
            1000,
            Duration::from_millis(2),
            Some(Duration::from_millis(3)),
        );
        let r = c.recount(1000, 2000);
        assert_eq!(
            r,
            CpuUse::new(
                2000,
                Duration::from_millis(2),
                Some(Duration::from_millis(3))
            )
        );
        assert_eq!(c.recount(0, 5), c);
    }

    #[test]
    fn unknown_server_counts_the_client_alone_and_zero_is_not_infinite() {
        let c = CpuUse::new(10, Duration::from_millis(1), None);
        assert_eq!(c.cpu_server_us_per_op, None);
        assert!((c.ops_per_cpu_s - 10_000.0).abs() < 1e-6);
        let z = CpuUse::new(0, Duration::ZERO, None);
        assert_eq!((z.cpu_client_us_per_op, z.ops_per_cpu_s), (0.0, 0.0));
    }

    #[test]
    fn clocks_of_this_process_and_of_a_child_can_be_read() {
        let own = process_cpu(None).expect("own CPU clock");
        // Some work so the clock moves (not a timing assertion: only monotonicity).
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu(None).expect("own CPU clock") >= own);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawning sleep");
        let read = process_cpu(Some(child.id()));
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            read.is_some(),
            "a child's CPU clock is readable while it runs"
        );
    }
}
