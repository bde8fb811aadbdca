//! Helpers shared by the integration tests: regions, posting shortcuts, draining.
#![allow(dead_code)]

use weft_transport::sim::{LinkConfig, Pair, Side};
use weft_transport::{
    Access, Completion, Config, Instant, Memory, RecvWr, Region, RemoteAddr, SendWr, Sge,
    VecMemory, WrOp,
};

/// Two endpoints with the default configuration, `mem` bytes of memory each, joined
/// by clean links (5 µs each way, no loss); `seed` drives the simulation.
pub fn clean_pair(mem: usize, seed: u64) -> Pair {
    Pair::new(
        Config::default(),
        mem,
        LinkConfig::clean(5),
        LinkConfig::clean(5),
        seed,
    )
}

/// Register one big region (all rights, pd 1) in the middle of each side's memory,
/// leaving 4 KiB of canary on both ends.
pub fn big_regions(pair: &mut Pair, mem_size: u64) -> (Region, Region) {
    let a = reg(pair, Side::A, 4096, mem_size - 8192, Access::ALL, 1);
    let b = reg(pair, Side::B, 4096, mem_size - 8192, Access::ALL, 1);
    (a, b)
}

/// Register `len` bytes at `offset` from the base of `side`'s memory.
pub fn reg(pair: &mut Pair, side: Side, offset: u64, len: u64, access: Access, pd: u32) -> Region {
    let base = base(side);
    pair.ep(side)
        .mem_mut()
        .register(pd, base + offset, len, access)
}

pub fn base(side: Side) -> u64 {
    match side {
        Side::A => 0x10_0000,
        Side::B => 0x80_0000,
    }
}

pub fn sge(r: &Region, addr: u64, len: u32) -> Sge {
    Sge {
        addr,
        len,
        lkey: r.lkey,
    }
}

pub fn remote(r: &Region, addr: u64) -> RemoteAddr {
    RemoteAddr { addr, rkey: r.rkey }
}

pub fn send(wr_id: u64, sges: Vec<Sge>) -> SendWr {
    SendWr::new(wr_id, WrOp::Send { imm: None }, sges)
}

/// A WRITE (no immediate) of `sges` to `to`.
pub fn write(wr_id: u64, to: RemoteAddr, sges: Vec<Sge>) -> SendWr {
    SendWr::new(
        wr_id,
        WrOp::Write {
            remote: to,
            imm: None,
        },
        sges,
    )
}

pub fn recv(wr_id: u64, sges: Vec<Sge>) -> RecvWr {
    RecvWr {
        wr_id,
        sg_list: sges.into(),
    }
}

/// Deterministic pattern bytes for message `n`.
pub fn pattern(n: u64, len: usize) -> Vec<u8> {
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Drain completions of `side`.
pub fn completions(pair: &mut Pair, side: Side) -> Vec<Completion> {
    std::iter::from_fn(|| pair.ep(side).poll_completion()).collect()
}

/// Run until both sides are idle and no packet is in flight, or `limit` µs pass.
pub fn settle(pair: &mut Pair, limit: u64) {
    let deadline = Instant(pair.now.micros() + limit);
    pair.drive(deadline, |p| {
        p.a.is_idle() && p.b.is_idle() && p.ab.in_flight() == 0 && p.ba.in_flight() == 0
    });
}

/// Collect completions of `side` while driving until `n` have arrived (or `limit` µs).
pub fn wait_completions(pair: &mut Pair, side: Side, n: usize, limit: u64) -> Vec<Completion> {
    let mut got = Vec::new();
    let deadline = Instant(pair.now.micros() + limit);
    pair.drive(deadline, |p| {
        while let Some(c) = p.ep(side).poll_completion() {
            got.push(c);
        }
        got.len() >= n
    });
    got
}

pub fn read_mem(mem: &VecMemory, addr: u64, len: usize) -> Vec<u8> {
    mem.bytes(addr, len).to_vec()
}

/// Assert the memory audit: no byte outside a region changed, and every logged write
/// lies inside a region.
pub fn assert_no_stray_writes(mem: &VecMemory) {
    assert_eq!(
        mem.first_change_outside_regions(),
        None,
        "byte changed outside every region"
    );
    for w in mem.write_log() {
        assert!(
            mem.regions()
                .iter()
                .any(|r| w.addr >= r.addr && w.addr + w.len <= r.addr + r.len),
            "write {w:?} outside every region"
        );
    }
    let _ = <VecMemory as Memory>::check;
}
