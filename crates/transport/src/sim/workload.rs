//! Workloads for the simulator, with their checkers: a mixed stream of every RC
//! operation whose effects are verified one by one, and a bulk WRITE stream for the
//! goodput sweep.
//!
//! What `run_mix` proves for every operation it completes:
//! - SEND / WRITE-with-immediate: the receive completions arrive exactly once, in
//!   posting order, with the right length, immediate and bytes;
//! - WRITE: the target bytes equal the source when the WRITE completes;
//! - READ: the local bytes equal the remote source when the READ completes;
//! - FetchAdd / CompareSwap on a counter: the returned value equals the number of
//!   earlier such operations (so none was executed twice or skipped);
//! - every send completion is `Success` and arrives in posting order;
//! - afterwards (checked by the caller), no byte outside a registered region changed.

use super::{Pair, Rng};
use crate::memory::{Access, Region};
use crate::time::Instant;
use crate::wr::{Completion, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus, WrOp};
use std::collections::VecDeque;

use super::Connection;

/// Which operations a mix draws from (weights).
#[derive(Debug, Clone, Copy)]
pub struct OpMix {
    /// SEND (half of them with immediate).
    pub send: u32,
    /// WRITE (a quarter with immediate).
    pub write: u32,
    /// READ.
    pub read: u32,
    /// FetchAdd and CompareSwap.
    pub atomic: u32,
}

impl OpMix {
    /// Every operation.
    pub const ALL: OpMix = OpMix {
        send: 4,
        write: 3,
        read: 2,
        atomic: 1,
    };
    /// SEND and WRITE only (what UC can do).
    pub const SEND_WRITE: OpMix = OpMix {
        send: 1,
        write: 1,
        read: 0,
        atomic: 0,
    };
}

/// A mixed workload.
#[derive(Debug, Clone, Copy)]
pub struct MixConfig {
    /// Operations to complete.
    pub ops: u64,
    /// Largest message.
    pub max_len: u32,
    /// Operations outstanding at once.
    pub window: usize,
    /// Operation weights.
    pub mix: OpMix,
    /// Seed of the operation sequence.
    pub seed: u64,
    /// Give up after this much virtual time.
    pub time_limit_us: u64,
    /// UC: a send completes when its last packet leaves, before the data lands, so every
    /// WRITE carries an immediate and is verified at the receiver's completion instead.
    pub unreliable: bool,
    /// Receives B keeps posted (0: four per window slot). Fewer than `window` makes
    /// the responder run out and answer RNR.
    pub recvs: usize,
}

/// What a mixed run did.
#[derive(Debug, Clone, Default)]
pub struct MixReport {
    /// Operations completed and verified.
    pub completed: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Virtual time taken.
    pub elapsed_us: u64,
    /// Violations found (empty on success).
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Checked on the receive side, in `check_recv`.
    Send,
    Write {
        seq: u64,
        len: u32,
        slot: usize,
        checked_by_receiver: bool,
    },
    Read {
        len: u32,
        slot: usize,
    },
    FetchAdd {
        expect: u64,
        slot: usize,
    },
    CompareSwap {
        expect: u64,
        slot: usize,
    },
}

/// Receives B keeps posted, per window slot: UC senders complete before their data
/// lands, so more receive-consuming messages than `window` can be on the wire.
const RECV_FACTOR: u64 = 4;

/// Per-slot layout: each outstanding operation owns slot `i % window` of every area.
struct Layout {
    slot: u64,
    recvs: u64,
    a: Region,
    b: Region,
    window: u64,
}

impl Layout {
    // A: [src slots][read-dest slots][atomic result slots]
    fn a_src(&self, s: usize) -> u64 {
        self.a.addr + s as u64 * self.slot
    }
    fn a_dst(&self, s: usize) -> u64 {
        self.a.addr + (self.window + s as u64) * self.slot
    }
    fn a_atomic(&self, s: usize) -> u64 {
        self.a.addr + 2 * self.window * self.slot + s as u64 * 8
    }
    // B: [write-target slots][read-source slots][counters][recv slots × RECV_FACTOR]
    fn b_write(&self, s: usize) -> u64 {
        self.b.addr + s as u64 * self.slot
    }
    fn b_read(&self, s: usize) -> u64 {
        self.b.addr + (self.window + s as u64) * self.slot
    }
    fn b_counter(&self, which: u64) -> u64 {
        self.b.addr + 2 * self.window * self.slot + which * 8
    }
    fn b_recv(&self, s: usize) -> u64 {
        self.b.addr + 2 * self.window * self.slot + 64 + s as u64 * self.slot
    }
    /// Bytes each side needs.
    fn need(window: u64, slot: u64) -> u64 {
        (2 + RECV_FACTOR) * window * slot + 64
    }
}

/// Deterministic content for message `seq`.
pub(crate) fn content(seq: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seq ^ 0xC0FF_EE00);
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Run a verified mixed workload over `conn` (A requests, B responds). Registers one
/// region per side, sized for the window (`Pair` memories must be large enough).
pub fn run_mix(pair: &mut Pair, conn: &Connection, cfg: &MixConfig) -> MixReport {
    let slot = u64::from(cfg.max_len.max(8)).next_multiple_of(8);
    let window = cfg.window.max(1) as u64;
    let need = Layout::need(window, slot);
    let a = pair
        .a
        .mem_mut()
        .register(1, 0x10_0000 + 4096, need, Access::ALL);
    let b = pair
        .b
        .mem_mut()
        .register(1, 0x80_0000 + 4096, need, Access::ALL);
    let recvs = match cfg.recvs {
        0 => RECV_FACTOR * window,
        n => (n as u64).min(RECV_FACTOR * window),
    };
    let l = Layout {
        slot,
        recvs,
        a,
        b,
        window,
    };
    for s in 0..window as usize {
        let src = content(1 << 40 | s as u64, slot as usize);
        pair.b.mem_mut().fill(l.b_read(s), &src);
    }
    pair.b.mem_mut().fill(l.b_counter(0), &[0u8; 16]);
    let mut rng = Rng::new(cfg.seed);
    let mut report = MixReport::default();
    let start = pair.now;
    let deadline = Instant(start.micros() + cfg.time_limit_us);

    // Keep B's receive queue stocked: receive r uses slot r % recvs.

    let post_recv = |pair: &mut Pair, r: u64| {
        let s = (r % recvs) as usize;
        let wr = RecvWr {
            wr_id: r,
            sg_list: [Sge {
                addr: l.b_recv(s),
                len: slot as u32,
                lkey: b.lkey,
            }]
            .into(),
        };
        match conn.srq_b {
            Some(srq) => pair.b.post_srq_recv(srq, wr),
            None => pair.b.post_recv(conn.qpn_b, wr),
        }
    };
    for r in 0..recvs {
        if post_recv(pair, r).is_err() {
            report.errors.push("post_recv refused".into());
            return report;
        }
    }
    let mut next_recv = recvs;

    let mut posted = 0u64;
    let mut received = 0u64;
    let mut outstanding: VecDeque<(u64, Expect)> = VecDeque::new();
    // Receive-consuming operations in posting order.
    let mut recv_expect: VecDeque<RecvExpect> = VecDeque::new();
    let mut fetch_adds = 0u64;
    let mut cas = 0u64;
    let total_weight = cfg.mix.send + cfg.mix.write + cfg.mix.read + cfg.mix.atomic;

    while report.completed < cfg.ops && report.errors.is_empty() {
        // UC: gate on what the receiver has verified, since the sender completes early
        // (and slots must not be reused while their data is still on the wire).
        let in_flight = if cfg.unreliable {
            (posted - received) as usize
        } else {
            outstanding.len()
        };
        if in_flight < cfg.window && posted < cfg.ops {
            let seq = posted;
            let s = (seq % window) as usize;
            let len = match rng.range(0, 10) {
                0..=4 => rng.range(0, 65),
                5..=8 => rng.range(0, 2 * 1024 + 1),
                _ => rng.range(0, u64::from(cfg.max_len) + 1),
            }
            .min(u64::from(cfg.max_len)) as u32;
            let pick = rng.range(0, u64::from(total_weight.max(1))) as u32;
            let src = Sge {
                addr: l.a_src(s),
                len,
                lkey: a.lkey,
            };
            let (wr, exp) = if pick < cfg.mix.send {
                let data = content(seq, len as usize);
                pair.a.mem_mut().fill(l.a_src(s), &data);
                let imm = rng.chance(0.5).then_some(seq as u32);
                recv_expect.push_back(RecvExpect {
                    seq,
                    len,
                    imm,
                    write_slot: None,
                });
                (
                    SendWr::new(seq, WrOp::Send { imm }, vec![src]),
                    Expect::Send,
                )
            } else if pick < cfg.mix.send + cfg.mix.write {
                let data = content(seq, len as usize);
                pair.a.mem_mut().fill(l.a_src(s), &data);
                let imm = (cfg.unreliable || rng.chance(0.25)).then_some(seq as u32);
                if imm.is_some() {
                    recv_expect.push_back(RecvExpect {
                        seq,
                        len,
                        imm,
                        write_slot: Some(s),
                    });
                }
                let remote = RemoteAddr {
                    addr: l.b_write(s),
                    rkey: b.rkey,
                };
                (
                    SendWr::new(seq, WrOp::Write { remote, imm }, vec![src]),
                    Expect::Write {
                        seq,
                        len,
                        slot: s,
                        checked_by_receiver: cfg.unreliable,
                    },
                )
            } else if pick < cfg.mix.send + cfg.mix.write + cfg.mix.read {
                pair.a.mem_mut().fill(l.a_dst(s), &vec![0u8; len as usize]);
                let remote = RemoteAddr {
                    addr: l.b_read(s),
                    rkey: b.rkey,
                };
                let dst = Sge {
                    addr: l.a_dst(s),
                    len,
                    lkey: a.lkey,
                };
                (
                    SendWr::new(seq, WrOp::Read { remote }, vec![dst]),
                    Expect::Read { len, slot: s },
                )
            } else {
                let res = Sge {
                    addr: l.a_atomic(s),
                    len: 8,
                    lkey: a.lkey,
                };
                if rng.chance(0.5) {
                    let remote = RemoteAddr {
                        addr: l.b_counter(0),
                        rkey: b.rkey,
                    };
                    fetch_adds += 1;
                    (
                        SendWr::new(seq, WrOp::FetchAdd { remote, add: 1 }, vec![res]),
                        Expect::FetchAdd {
                            expect: fetch_adds - 1,
                            slot: s,
                        },
                    )
                } else {
                    let remote = RemoteAddr {
                        addr: l.b_counter(1),
                        rkey: b.rkey,
                    };
                    cas += 1;
                    (
                        SendWr::new(
                            seq,
                            WrOp::CompareSwap {
                                remote,
                                compare: cas - 1,
                                swap: cas,
                            },
                            vec![res],
                        ),
                        Expect::CompareSwap {
                            expect: cas - 1,
                            slot: s,
                        },
                    )
                }
            };
            if let Err(e) = pair.a.post_send(conn.qpn_a, wr) {
                report.errors.push(format!("post_send {seq}: {e:?}"));
                return report;
            }
            outstanding.push_back((seq, exp));
            posted += 1;
            continue;
        }

        let progressed = pair.step();

        while let Some(c) = pair.b.poll_completion() {
            if let Err(e) = check_recv(pair, &l, &c, &mut recv_expect) {
                report.errors.push(e);
                break;
            }
            if post_recv(pair, next_recv).is_err() {
                report.errors.push("post_recv refused".into());
            }
            next_recv += 1;
            received += 1;
        }
        while let Some(c) = pair.a.poll_completion() {
            let Some((seq, exp)) = outstanding.pop_front() else {
                report
                    .errors
                    .push(format!("completion with nothing outstanding: {c:?}"));
                break;
            };
            if c.wr_id != seq || c.status != WcStatus::Success {
                report
                    .errors
                    .push(format!("expected success of {seq}, got {c:?}"));
                break;
            }
            if let Err(e) = check_send(pair, &l, &exp) {
                report.errors.push(format!("op {seq}: {e}"));
                break;
            }
            report.completed += 1;
            report.bytes += u64::from(c.byte_len);
        }
        if !progressed && report.completed < cfg.ops {
            report.errors.push(format!(
                "stalled after {} of {} operations",
                report.completed, cfg.ops
            ));
        }
        if pair.now > deadline {
            report.errors.push(format!(
                "time limit after {} of {} operations",
                report.completed, cfg.ops
            ));
        }
    }
    if report.errors.is_empty() {
        let fa = u64::from_le_bytes(
            pair.b
                .mem()
                .bytes(l.b_counter(0), 8)
                .try_into()
                .unwrap_or_default(),
        );
        let cs = u64::from_le_bytes(
            pair.b
                .mem()
                .bytes(l.b_counter(1), 8)
                .try_into()
                .unwrap_or_default(),
        );
        if fa != fetch_adds || cs != cas {
            report.errors.push(format!(
                "counters: fetch-add {fa} (expected {fetch_adds}), cas {cs} (expected {cas})"
            ));
        }
    }
    report.elapsed_us = pair.now - start;
    report
}

/// A receive the mix expects, in order.
#[derive(Debug, Clone, Copy)]
struct RecvExpect {
    seq: u64,
    len: u32,
    imm: Option<u32>,
    /// WRITE with immediate: the target slot to verify.
    write_slot: Option<usize>,
}

fn check_recv(
    pair: &Pair,
    l: &Layout,
    c: &Completion,
    expect: &mut VecDeque<RecvExpect>,
) -> Result<(), String> {
    let Some(RecvExpect {
        seq,
        len,
        imm,
        write_slot,
    }) = expect.pop_front()
    else {
        return Err(format!("unexpected receive completion {c:?}"));
    };
    if c.status != WcStatus::Success || c.byte_len != len || c.imm != imm {
        return Err(format!(
            "receive for op {seq} (len {len}, imm {imm:?}): got {c:?}"
        ));
    }
    if c.opcode == WcOpcode::Recv {
        let s = (c.wr_id % l.recvs) as usize;
        let got = pair.b.mem().bytes(l.b_recv(s), len as usize);
        if got != content(seq, len as usize).as_slice() {
            return Err(format!("SEND {seq}: received bytes differ"));
        }
    }
    if let Some(slot) = write_slot {
        let got = pair.b.mem().bytes(l.b_write(slot), len as usize);
        if c.opcode != WcOpcode::RecvRdmaWithImm || got != content(seq, len as usize).as_slice() {
            return Err(format!(
                "WRITE-with-immediate {seq}: {c:?} or target bytes differ"
            ));
        }
    }
    Ok(())
}

fn check_send(pair: &Pair, l: &Layout, exp: &Expect) -> Result<(), String> {
    match *exp {
        Expect::Send => Ok(()),
        Expect::Write {
            checked_by_receiver: true,
            ..
        } => Ok(()),
        Expect::Write { seq, len, slot, .. } => {
            let got = pair.b.mem().bytes(l.b_write(slot), len as usize);
            (got == content(seq, len as usize).as_slice())
                .then_some(())
                .ok_or_else(|| "WRITE target differs".to_string())
        }
        Expect::Read { len, slot } => {
            let got = pair.a.mem().bytes(l.a_dst(slot), len as usize);
            let want = pair.b.mem().bytes(l.b_read(slot), len as usize);
            (got == want)
                .then_some(())
                .ok_or_else(|| "READ result differs".to_string())
        }
        Expect::FetchAdd { expect, slot } | Expect::CompareSwap { expect, slot } => {
            let got = u64::from_le_bytes(
                pair.a
                    .mem()
                    .bytes(l.a_atomic(slot), 8)
                    .try_into()
                    .unwrap_or_default(),
            );
            (got == expect)
                .then_some(())
                .ok_or_else(|| format!("atomic returned {got}, expected {expect}"))
        }
    }
}

/// A bulk stream of RDMA WRITEs of one size.
#[derive(Debug, Clone, Copy)]
pub struct StreamConfig {
    /// Message size.
    pub msg_len: u32,
    /// Messages.
    pub messages: u64,
    /// Messages outstanding at once.
    pub window: usize,
    /// Give up after this much virtual time.
    pub time_limit_us: u64,
}

/// What a stream did.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamReport {
    /// Messages completed successfully.
    pub completed: u64,
    /// Failed completions.
    pub failed: u64,
    /// Virtual time.
    pub elapsed_us: u64,
    /// Request packets sent more than once.
    pub retransmissions: u64,
    /// Packets A sent in total.
    pub packets: u64,
    /// Goodput in Gbit/s (payload bytes of completed messages / virtual time).
    pub goodput_gbps: f64,
    /// Whether the last message's bytes arrived intact.
    pub intact: bool,
}

/// WRITE `messages` × `msg_len` bytes from A to B over `conn`, `window` at a time.
pub fn run_stream(pair: &mut Pair, conn: &Connection, cfg: &StreamConfig) -> StreamReport {
    let len = u64::from(cfg.msg_len);
    let window = cfg.window.max(1);
    let a = pair
        .a
        .mem_mut()
        .register(1, 0x10_0000 + 4096, len * window as u64, Access::ALL);
    let b = pair
        .b
        .mem_mut()
        .register(1, 0x80_0000 + 4096, len * window as u64, Access::ALL);
    for s in 0..window {
        let data = content(s as u64, cfg.msg_len as usize);
        pair.a.mem_mut().fill(a.addr + s as u64 * len, &data);
    }
    let start = pair.now;
    let deadline = Instant(start.micros() + cfg.time_limit_us);
    let retx0 = pair.a.stats().retransmitted_packets;
    let tx0 = pair.a.stats().tx_packets;
    let mut r = StreamReport::default();
    let mut posted = 0u64;
    let mut outstanding = 0usize;
    while r.completed + r.failed < cfg.messages && pair.now <= deadline {
        while outstanding < window && posted < cfg.messages {
            let s = (posted % window as u64) as usize;
            let wr = SendWr::new(
                posted,
                WrOp::Write {
                    remote: RemoteAddr {
                        addr: b.addr + s as u64 * len,
                        rkey: b.rkey,
                    },
                    imm: None,
                },
                vec![Sge {
                    addr: a.addr + s as u64 * len,
                    len: cfg.msg_len,
                    lkey: a.lkey,
                }],
            );
            if pair.a.post_send(conn.qpn_a, wr).is_err() {
                break;
            }
            posted += 1;
            outstanding += 1;
        }
        if !pair.step() {
            break;
        }
        while let Some(c) = pair.a.poll_completion() {
            outstanding -= 1;
            if c.status == WcStatus::Success {
                r.completed += 1;
            } else {
                r.failed += 1;
            }
        }
    }
    r.elapsed_us = pair.now - start;
    r.retransmissions = pair.a.stats().retransmitted_packets - retx0;
    r.packets = pair.a.stats().tx_packets - tx0;
    r.goodput_gbps = if r.elapsed_us == 0 {
        0.0
    } else {
        (r.completed * len * 8) as f64 / (r.elapsed_us as f64 * 1000.0)
    };
    let s = ((cfg.messages.max(1) - 1) % window as u64) as usize;
    r.intact = pair
        .b
        .mem()
        .bytes(b.addr + s as u64 * len, cfg.msg_len as usize)
        == content(s as u64, cfg.msg_len as usize).as_slice();
    r
}
