//! The measured loops: a ping-pong for latency and a send loop for bandwidth, with the
//! clock reads, warm-up, time limit and progress done here once, so that a runner
//! (kernel sockets today, weft verbs later) only supplies "one round" or "send one
//! message" and "wait until everything sent has arrived".

use std::io::Write;
use std::time::{Duration, Instant};

use super::cpu::{CpuStart, CpuUse};

/// Smallest message of a `--all` sweep.
pub const SWEEP_MIN: u64 = 2;
/// Largest message of a `--all` sweep: 8 MiB.
pub const SWEEP_MAX: u64 = 8 << 20;

/// The `--all` sizes: powers of two from 2 B to `cap` (at most 8 MiB). Tests cap it
/// where a bigger message cannot exist (a UDP datagram: 32 KiB; a weft UD message:
/// the path MTU; an atomic: 8 B).
pub fn sweep_sizes(cap: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = SWEEP_MIN;
    while s <= cap.min(SWEEP_MAX) {
        v.push(s);
        s *= 2;
    }
    v
}

/// Bytes a bandwidth run moves at most per message size: with `--iters 5000` a
/// sweep would otherwise send 40 GiB at 8 MiB. One GiB takes well under a second
/// on loopback and keeps a 23-size sweep within minutes on a shared two-core box.
pub const BW_BYTE_BUDGET: u64 = 1 << 30;

/// Messages a bandwidth run sends at `size`: `iters`, capped by [`BW_BYTE_BUDGET`],
/// but at least 16 so that even 8 MiB measures more than one message.
pub fn bw_messages(size: u64, iters: u64) -> u64 {
    iters.min((BW_BYTE_BUDGET / size.max(1)).max(16))
}

/// How long one message size may run.
#[derive(Debug, Clone, Copy)]
pub struct LoopOpts {
    /// Rounds (or messages) before the clock starts; not measured.
    pub warmup: u64,
    /// Rounds (or messages) measured.
    pub iters: u64,
    /// A ping-pong stops early, keeping what it measured, once it has run this long.
    pub time_limit: Duration,
    /// The other process of the run, when it runs on this host (`--local`): its CPU
    /// time is read around the measured phase beside this process's.
    pub peer_pid: Option<u32>,
    /// A ping-pong sleeps this long after each round, outside the round's timing (a
    /// sparse request stream: `weft perf --pause-us`); zero: back to back.
    pub pause: Duration,
}

/// How one ping-pong round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// The reply came back.
    Answered,
    /// No reply within the runner's timeout (a lost datagram): counted, not measured.
    Lost,
}

/// What the client measured in a ping-pong run.
#[derive(Debug, Clone, Default)]
pub struct PingPongRun {
    /// `(seq, round-trip ns)` of every answered measured round, in order. Warm-up
    /// rounds have seq `0..warmup`, measured ones `warmup..`.
    pub rtts: Vec<(u64, u64)>,
    /// Measured rounds that got no reply.
    pub lost: u64,
    /// The time limit stopped the run before `iters` rounds.
    pub truncated: bool,
    /// Wall time of the measured rounds.
    pub wall: Duration,
    /// CPU time of both processes over the measured rounds, per round.
    pub cpu: Option<CpuUse>,
}

/// Runs `warmup + iters` ping-pong rounds, `round(seq)` each (send one message, wait
/// for its reply), and times every measured one. The runner's `round` does no timing
/// of its own; anything it does besides the round trip adds to the latency.
pub fn ping_pong(
    opts: &LoopOpts,
    progress: &mut Progress,
    mut round: impl FnMut(u64) -> anyhow::Result<Round>,
) -> anyhow::Result<PingPongRun> {
    for seq in 0..opts.warmup {
        round(seq)?;
    }
    let mut run = PingPongRun {
        rtts: Vec::with_capacity(opts.iters as usize),
        ..PingPongRun::default()
    };
    let cpu = CpuStart::now(opts.peer_pid);
    let start = Instant::now();
    for i in 0..opts.iters {
        let seq = opts.warmup + i;
        let t1 = Instant::now();
        let r = round(seq)?;
        let t4 = Instant::now();
        match r {
            Round::Answered => run.rtts.push((seq, (t4 - t1).as_nanos() as u64)),
            Round::Lost => run.lost += 1,
        }
        if !opts.pause.is_zero() {
            std::thread::sleep(opts.pause);
        }
        // Checking the clock every 64 rounds keeps the check out of the samples' way.
        if i % 64 == 63 {
            let el = t4 - start;
            progress.tick(i + 1, opts.iters);
            if el > opts.time_limit {
                run.truncated = i + 1 < opts.iters;
                break;
            }
        }
    }
    run.wall = start.elapsed();
    run.cpu = cpu.finish(run.rtts.len() as u64 + run.lost);
    Ok(run)
}

/// Runs `warmup + iters` operations with up to `depth` in flight: `post(seq)` starts
/// one, `reap()` waits for some and returns how many of the oldest in flight have
/// completed (operations on one reliable QP complete in the order they were posted).
/// Each measured operation is timed from its post to the return of the `reap` that
/// reported it, so a sample is the operation's whole round trip including the time
/// it queued behind the others in flight. The run stops posting once the measured
/// phase has run `time_limit`, and drains what is in flight; `reap` returning nothing
/// for `stall` ends the run with an error.
pub fn windowed(
    opts: &LoopOpts,
    depth: usize,
    stall: Duration,
    progress: &mut Progress,
    mut post: impl FnMut(u64) -> anyhow::Result<()>,
    mut reap: impl FnMut() -> anyhow::Result<u64>,
) -> anyhow::Result<PingPongRun> {
    let depth = depth.max(1);
    let total = opts.warmup + opts.iters;
    let mut inflight: std::collections::VecDeque<(u64, Instant)> =
        std::collections::VecDeque::with_capacity(depth);
    let mut run = PingPongRun {
        rtts: Vec::with_capacity(opts.iters as usize),
        ..PingPongRun::default()
    };
    let mut next = 0u64;
    let mut start: Option<(Instant, CpuStart)> = None;
    let mut stopped = false;
    let mut last_done = Instant::now();
    while (next < total && !stopped) || !inflight.is_empty() {
        while next < total && !stopped && inflight.len() < depth {
            let now = Instant::now();
            if next == opts.warmup {
                start = Some((now, CpuStart::now(opts.peer_pid)));
            }
            post(next)?;
            inflight.push_back((next, now));
            next += 1;
        }
        let n = reap()?;
        let now = Instant::now();
        if n == 0 {
            if now - last_done > stall {
                anyhow::bail!(
                    "{} operations in flight and none completed within {stall:?}",
                    inflight.len()
                );
            }
            continue;
        }
        last_done = now;
        for _ in 0..n {
            let Some((seq, t)) = inflight.pop_front() else {
                break;
            };
            if seq >= opts.warmup {
                run.rtts.push((seq, (now - t).as_nanos() as u64));
                let done = run.rtts.len() as u64;
                if done % 256 == 0 {
                    progress.tick(done, opts.iters);
                }
            }
        }
        if let Some((t0, _)) = &start {
            if !stopped && now - *t0 > opts.time_limit {
                stopped = true;
                run.truncated = next < total;
            }
        }
    }
    if let Some((t0, cpu)) = start {
        run.wall = t0.elapsed();
        run.cpu = cpu.finish(run.rtts.len() as u64);
    }
    Ok(run)
}

/// What a bandwidth run did.
#[derive(Debug, Clone, Copy)]
pub struct BandwidthRun {
    /// Messages sent in the measured phase.
    pub messages: u64,
    /// From the first send to the moment `complete` returned.
    pub elapsed: Duration,
    /// CPU time of both processes over the same span, per message.
    pub cpu: Option<CpuUse>,
}

/// Sends `warmup` messages and waits for them (`complete`), then sends `iters`
/// messages, `send(seq)` each, and waits again; the measured time runs from the
/// first measured send until the second `complete` returns, so it covers delivery,
/// not only posting. `send` may block while the runner's window is full.
pub fn bandwidth(
    opts: &LoopOpts,
    progress: &mut Progress,
    mut send: impl FnMut(u64) -> anyhow::Result<()>,
    mut complete: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<BandwidthRun> {
    if opts.warmup > 0 {
        for seq in 0..opts.warmup {
            send(seq)?;
        }
        complete()?;
    }
    let cpu = CpuStart::now(opts.peer_pid);
    let start = Instant::now();
    for i in 0..opts.iters {
        send(opts.warmup + i)?;
        if i % 256 == 255 {
            progress.tick(i + 1, opts.iters);
        }
    }
    complete()?;
    let elapsed = start.elapsed();
    Ok(BandwidthRun {
        messages: opts.iters,
        elapsed,
        cpu: cpu.finish(opts.iters),
    })
}

/// Progress on stderr for long runs: a line per message size, and within a size a
/// line at most every two seconds once it has run for two seconds.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    label: String,
    started: Instant,
    last: Instant,
}

impl Progress {
    /// `enabled: false` prints nothing (for tests and `--quiet` callers).
    pub fn new(enabled: bool) -> Progress {
        let now = Instant::now();
        Progress {
            enabled,
            label: String::new(),
            started: now,
            last: now,
        }
    }

    /// A new message size (or test) starts: `[k/n] label`.
    pub fn begin(&mut self, k: usize, n: usize, label: impl Into<String>) {
        self.label = label.into();
        self.started = Instant::now();
        self.last = self.started;
        if self.enabled {
            eprintln!("[{k}/{n}] {}", self.label);
        }
    }

    /// `done` of `total` iterations are through.
    pub fn tick(&mut self, done: u64, total: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let every = Duration::from_secs(2);
        if now - self.started >= every && now - self.last >= every {
            self.last = now;
            eprintln!(
                "      {}: {done}/{total} ({:.0} s)",
                self.label,
                (now - self.started).as_secs_f64()
            );
            let _ = std::io::stderr().flush();
        }
    }
}
