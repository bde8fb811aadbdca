//! The driver behind the `transport_qp_pair` fuzz target and `tests/fuzz_smoke.rs`:
//! arbitrary bytes become a sequence of operations on a connected QP pair — posts of
//! every kind (valid or with bad keys, bounds, alignment), crafted packets with valid
//! ICRCs aimed at either side, raw garbage, state changes, time jumps and network steps.
//!
//! Properties: nothing panics, no run hangs (every loop is bounded), and no byte
//! outside a registered region ever changes.

use super::{ConnectOptions, Connection, LinkConfig, Pair, Side};
use crate::endpoint::Config;
use crate::memory::{Access, Region};
use crate::qp::{Mtu, QpAttr, QpState, QpType, Recovery};
use crate::time::Instant;
use crate::wr::{RecvWr, RemoteAddr, SendWr, Sge, UdDest, WrOp};
use weft_wire::roce::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, IbPacketRepr, Opcode, Psn,
    RethRepr, Syndrome,
};

/// Reads the fuzz input; returns zeros once exhausted.
struct Input<'a> {
    data: &'a [u8],
}

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) << 8 | u16::from(self.u8())
    }
    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) << 16 | u32::from(self.u16())
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) << 32 | u64::from(self.u32())
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

const MEM: u64 = 160 * 1024;

/// Run one fuzz case. Panics only if a property is violated.
pub fn fuzz_qp_pair(data: &[u8]) {
    let mut inp = Input { data };
    let flags = inp.u8();
    let qp_type = match flags % 4 {
        0 | 1 => QpType::Rc,
        2 => QpType::Uc,
        _ => QpType::Ud,
    };
    let recovery = if flags & 4 != 0 {
        Recovery::Selective
    } else {
        Recovery::GoBackN
    };
    let mtu = [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M4096][usize::from(flags >> 3) % 4];
    let lossy = flags & 0x20 != 0;
    let link = LinkConfig {
        loss: if lossy { 0.1 } else { 0.0 },
        duplicate: if lossy { 0.05 } else { 0.0 },
        reorder: if lossy { 0.05 } else { 0.0 },
        corrupt: if lossy { 0.02 } else { 0.0 },
        ..LinkConfig::clean(3)
    };
    let seed = u64::from(inp.u16());
    let mut p = Pair::new(Config::default(), MEM as usize, link, link, seed);
    let o = ConnectOptions {
        mtu,
        recovery,
        max_inflight: 32,
        timeout: 3,
        retry_cnt: 3,
        rnr_retry: 2,
        rd_atomic: 4,
        depth: 64,
        srq_b: flags & 0x40 != 0,
        ..ConnectOptions::default()
    };
    let c = p.connect(qp_type, &o);
    // One region per side with every right, one read-only, one in another PD.
    let a_all =
        p.a.mem_mut()
            .register(1, 0x10_0000 + 4096, 64 * 1024, Access::ALL);
    let b_all =
        p.b.mem_mut()
            .register(1, 0x80_0000 + 4096, 64 * 1024, Access::ALL);
    let b_ro =
        p.b.mem_mut()
            .register(1, 0x80_0000 + 80 * 1024, 16 * 1024, Access::REMOTE_READ);
    let b_pd2 =
        p.b.mem_mut()
            .register(2, 0x80_0000 + 112 * 1024, 16 * 1024, Access::ALL);
    let regions = [b_all, b_ro, b_pd2];

    let mut steps = 0u32;
    while !inp.is_empty() && steps < 4000 {
        steps += 1;
        match inp.u8() % 8 {
            0 | 1 => post_op(&mut p, &c, &mut inp, &a_all, &regions),
            2 => {
                let side = if inp.u8() & 1 == 0 { Side::A } else { Side::B };
                let (mem_region, qpn) = match side {
                    Side::A => (a_all, c.qpn_a),
                    Side::B => (b_all, c.qpn_b),
                };
                let off = u64::from(inp.u16()) % (64 * 1024);
                let len = u32::from(inp.u16()) % 8192;
                let wr = RecvWr {
                    wr_id: u64::from(inp.u8()),
                    sg_list: [Sge {
                        addr: mem_region.addr + off,
                        len,
                        lkey: mem_region.lkey ^ u32::from(inp.u8() == 0xff),
                    }]
                    .into(),
                };
                let _ = match (side, c.srq_b) {
                    (Side::B, Some(srq)) => p.b.post_srq_recv(srq, wr),
                    _ => p.ep(side).post_recv(qpn, wr),
                };
            }
            3 => inject_crafted(&mut p, &c, &mut inp, &o),
            4 => {
                // Raw bytes, ICRC filled so they get past the check some of the time.
                let n = usize::from(inp.u8()) + 1;
                let mut raw = inp.bytes(n).to_vec();
                let to_b = raw.first().is_some_and(|b| b & 1 == 0);
                let from = if to_b {
                    Pair::path(Side::A, c.qpn_a)
                } else {
                    Pair::path(Side::B, c.qpn_b)
                };
                let _ = from.fill(&mut raw);
                let now = p.now;
                if to_b {
                    p.b.handle_packet(now, &from, &raw);
                } else {
                    p.a.handle_packet(now, &from, &raw);
                }
            }
            5 => {
                let states = [
                    QpState::Reset,
                    QpState::Init,
                    QpState::Rtr,
                    QpState::Rts,
                    QpState::Sqd,
                    QpState::Sqe,
                    QpState::Err,
                ];
                let b = inp.u8();
                let side = if b & 0x80 == 0 { Side::A } else { Side::B };
                let qpn = if side == Side::A { c.qpn_a } else { c.qpn_b };
                let attr = QpAttr {
                    state: Some(states[usize::from(b) % states.len()]),
                    ..QpAttr::default()
                };
                let _ = p.ep(side).modify_qp(qpn, &attr);
            }
            6 => {
                let jump = u64::from(inp.u16());
                p.now = Instant(p.now.micros() + jump);
            }
            _ => {
                let n = inp.u8() % 64;
                for _ in 0..n {
                    if !p.step() {
                        break;
                    }
                }
            }
        }
        while p.a.poll_completion().is_some() {}
        while p.b.poll_completion().is_some() {}
    }
    // Let everything in flight settle (bounded).
    for _ in 0..5_000 {
        if !p.step() {
            break;
        }
        while p.a.poll_completion().is_some() {}
        while p.b.poll_completion().is_some() {}
    }
    for (name, mem) in [("A", p.a.mem()), ("B", p.b.mem())] {
        assert_eq!(
            mem.first_change_outside_regions(),
            None,
            "{name}: a byte outside every registered region changed"
        );
    }
}

fn post_op(p: &mut Pair, c: &Connection, inp: &mut Input<'_>, a: &Region, regions: &[Region; 3]) {
    let kind = inp.u8();
    let target = regions[usize::from(inp.u8()) % 3];
    let roff = u64::from(inp.u16()) % (20 * 1024);
    let loff = u64::from(inp.u16()) % (64 * 1024);
    let len = u32::from(inp.u16()) % 12_000;
    let mut rkey = target.rkey;
    let mut lkey = a.lkey;
    let tweak = inp.u8();
    if tweak & 1 != 0 {
        rkey ^= u32::from(inp.u8()) << 3;
    }
    if tweak & 2 != 0 {
        lkey ^= 1;
    }
    let remote = RemoteAddr {
        addr: target.addr.wrapping_add(roff),
        rkey,
    };
    let nsge = usize::from(inp.u8() % 4) + 1;
    let sg_list: Vec<Sge> = (0..nsge)
        .map(|i| Sge {
            addr: a.addr + (loff + i as u64 * 997) % (60 * 1024),
            len: len / nsge as u32,
            lkey,
        })
        .collect();
    let op = match kind % 6 {
        0 => WrOp::Send { imm: None },
        1 => WrOp::Send {
            imm: Some(inp.u32()),
        },
        2 => WrOp::Write {
            remote,
            imm: (tweak & 4 != 0).then_some(7),
        },
        3 => WrOp::Read { remote },
        4 => WrOp::CompareSwap {
            remote,
            compare: inp.u64(),
            swap: inp.u64(),
        },
        _ => WrOp::FetchAdd {
            remote,
            add: inp.u64(),
        },
    };
    let sg_list = if op.is_atomic() && tweak & 8 == 0 {
        vec![Sge {
            addr: a.addr + (loff & !7) % (60 * 1024),
            len: 8,
            lkey,
        }]
    } else {
        sg_list
    };
    let mut wr = SendWr::new(u64::from(kind), op, sg_list);
    wr.signaled = tweak & 16 == 0;
    wr.fence = tweak & 32 != 0;
    wr.inline = tweak & 64 != 0;
    wr.solicited = tweak & 128 != 0;
    wr.ud = Some(UdDest {
        path: Pair::path(Side::A, c.qpn_a),
        qpn: c.qpn_b,
        qkey: if tweak & 1 == 0 { 0x1111_1111 } else { 0 },
    });
    let _ = p.a.post_send(c.qpn_a, wr);
}

/// A well-formed packet with fuzz-chosen opcode, PSN near the expected one and header
/// fields, ICRC valid, to either side.
fn inject_crafted(p: &mut Pair, c: &Connection, inp: &mut Input<'_>, o: &ConnectOptions) {
    let op = Opcode::ALL[usize::from(inp.u8()) % Opcode::ALL.len()];
    let Some(info) = op.info() else { return };
    let to_b = inp.u8() & 1 == 0;
    let (dest, base, from) = if to_b {
        (c.qpn_b, o.psn_a, Pair::path(Side::A, c.qpn_a))
    } else {
        (c.qpn_a, o.psn_b, Pair::path(Side::B, c.qpn_b))
    };
    let delta = i32::from(inp.u16() as i16);
    let psn = Psn::new(base).add(delta as u32);
    let mut bth = BthRepr::new(op, dest, psn);
    bth.ack_req = inp.u8() & 1 != 0;
    let mut r = IbPacketRepr::new(bth);
    let h = info.headers;
    if h.reth {
        r.reth = Some(RethRepr {
            va: 0x80_0000 + u64::from(inp.u32() % (MEM as u32 + 8192)),
            rkey: inp.u32(),
            dma_len: u32::from(inp.u16()),
        });
    }
    if h.atomic_eth {
        r.atomic_eth = Some(AtomicEthRepr {
            va: 0x80_0000 + u64::from(inp.u32() % (MEM as u32)),
            rkey: inp.u32(),
            swap_add: inp.u64(),
            compare: inp.u64(),
        });
    }
    if h.aeth {
        r.aeth = Some(AethRepr {
            syndrome: Syndrome::from_u8(inp.u8()),
            msn: inp.u32() & Psn::MASK,
        });
    }
    if h.atomic_ack_eth {
        r.atomic_ack_eth = Some(AtomicAckEthRepr { orig: inp.u64() });
    }
    if h.deth {
        r.deth = Some(DethRepr {
            qkey: inp.u32(),
            src_qp: inp.u32() & Psn::MASK,
        });
    }
    if h.imm_dt {
        r.imm = Some(inp.u32());
    }
    if h.ieth {
        r.ieth = Some(inp.u32());
    }
    let plen = if info.has_payload {
        usize::from(inp.u16()) % 4200
    } else {
        0
    };
    let payload: Vec<u8> = (0..plen).map(|i| i as u8).collect();
    let mut buf = vec![0u8; r.buffer_len(plen)];
    let Ok(n) = r.emit(&mut buf, &payload) else {
        return;
    };
    if from.fill(&mut buf[..n]).is_err() {
        return;
    }
    let now = p.now;
    if to_b {
        p.b.handle_packet(now, &from, &buf[..n]);
    } else {
        p.a.handle_packet(now, &from, &buf[..n]);
    }
}
