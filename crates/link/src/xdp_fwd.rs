//! An IPv4 and IPv6 forwarding fast path in the ingress port's XDP hook: the common case of a
//! router's pipeline compiled to eBPF by weft, so a plain transit packet never leaves
//! the kernel, and everything else goes on to the port's `AF_XDP` socket, where
//! weft's user-space pipeline stays the one place for ICMP, ARP/ND, options,
//! fragments and local delivery (the slow path).
//!
//! Why (docs/results/router.md §3.3h): over veth, with the router on its own core,
//! the kernel's side of an `AF_XDP` round trip (the copy into the UMEM, the
//! transmit's fresh skb and copy, the system calls) costs more per packet than the
//! kernel's whole IP forwarding, so no user-space work can reach the kernel's rate;
//! the ingress hook is the place where the frame can be written straight to the
//! egress port with no hop through a central CPU queue.
//!
//! What the program does, in order (any failed test sends the frame to the slow
//! path and counts why):
//!
//! 1. Ethernet + a 20-byte IPv4 header inside the frame; EtherType IPv4;
//!    destination MAC the port's own.
//! 2. Version 4, IHL 5 (options: slow); total length equal to the frame (padding,
//!    truncation: slow); not a fragment (MF or an offset: slow); a source that is not
//!    a martian (0/8, 127/8, 224/3: slow); TTL above 1 (weft sends time exceeded);
//!    a valid header checksum.
//! 3. The destination's longest-prefix match in an `LPM_TRIE` map that weft fills
//!    from its FIB (on this path the lookup is the kernel's trie, not weft-lpm).
//!    A value of 0 (the router's own addresses, connected networks, multicast,
//!    limited broadcast, 0/8, 127/8) and a miss (weft sends unreachable) go slow.
//! 4. The next hop from an array map: egress ifindex, MTU, destination and source
//!    MAC, filled from weft's resolved neighbours; ifindex 0 (unresolved) goes slow;
//!    a packet longer than the egress MTU goes slow (weft fragments or sends
//!    fragmentation needed).
//! 5. TTL − 1 with the checksum updated incrementally (RFC 1624: adding 0x0100 in
//!    one's complement), both MACs rewritten, `bpf_redirect(ifindex, 0)`.
//!
//! IPv6 the same way, with its own trie: version 6, payload length equal to the
//! frame, next header TCP, UDP or ICMPv6 (extension headers: slow), a source that is
//! not multicast, link-local or ::/32-prefixed, hop limit above 1, the destination's
//! match (the router's own addresses, fe80::/10 and ff00::/8 are slot 0), the same
//! next-hop table and MTU test; the hop limit − 1 (no header checksum).
//!
//! Counters: a per-CPU array, one slot per [`COUNTER_NAMES`] entry, read with
//! [`FastPath::counters`].
//!
//! The instructions are assembled here with `Asm`, a small builder with jump
//! labels (eBPF encoding: Documentation/bpf/standardization/instruction-set.rst).
//! Every byte of the frame is hostile: the program reads nothing it has not first
//! bounds-checked against `data_end` (the verifier refuses it otherwise), and a
//! test ([`FastPath::test_run`]) feeds it short and garbage frames.

use crate::sys::bpf::{self, Insn, Map};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_REDIRECT: i32 = 23;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// XDP verdicts (`enum xdp_action`).
pub const XDP_DROP: u32 = 1;
/// The frame goes on to the kernel's stack.
pub const XDP_PASS: u32 = 2;
/// The frame was redirected (to another interface, or to an `AF_XDP` socket).
pub const XDP_REDIRECT: u32 = 4;

/// The counters' names, by slot: `forwarded` (on the fast path), then one per
/// reason a frame went to the slow path.
pub const COUNTER_NAMES: [&str; 12] = [
    "xdp_forwarded",
    "xdp_slow_not_ip",
    "xdp_slow_not_our_mac",
    "xdp_slow_header",
    "xdp_slow_fragment",
    "xdp_slow_martian_source",
    "xdp_slow_ttl",
    "xdp_slow_bad_checksum",
    "xdp_slow_no_route",
    "xdp_slow_local_or_connected",
    "xdp_slow_unresolved",
    "xdp_slow_too_big",
];

/// Slot of [`COUNTER_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Reason {
    /// Forwarded on the fast path.
    Forwarded = 0,
    /// Shorter than Ethernet + 20 bytes, or neither IPv4 nor IPv6 (ARP, VLAN tags...).
    NotIp,
    /// The destination MAC is not the port's (broadcast, multicast, another host).
    NotOurMac,
    /// IPv4: not version 4 with IHL 5 (options), or a total length unlike the
    /// frame's; IPv6: shorter than its 40-byte header, not version 6, a payload
    /// length unlike the frame's, or a next header other than TCP, UDP, ICMPv6.
    Header,
    /// A fragment (MF set or a fragment offset).
    Fragment,
    /// IPv4 source in 0/8, 127/8 or 224/3; IPv6 source multicast, link-local or
    /// starting with 32 zero bits (::, ::1, IPv4-mapped).
    MartianSource,
    /// TTL or hop limit 0 or 1.
    Ttl,
    /// The IPv4 header checksum does not verify.
    BadChecksum,
    /// No route.
    NoRoute,
    /// A route that weft's pipeline handles: the router's own addresses, connected
    /// networks, multicast and the other special destinations.
    LocalOrConnected,
    /// The next hop's neighbour is not resolved (or its egress is not a kernel port).
    Unresolved,
    /// Longer than the egress MTU.
    TooBig,
}

// Opcodes (class | size/op | source).
const LDX_B: u8 = 0x71;
const LDX_H: u8 = 0x69;
const LDX_W: u8 = 0x61;
const LDX_DW: u8 = 0x79;
const STX_B: u8 = 0x73;
const STX_H: u8 = 0x6b;
const STX_W: u8 = 0x63;
const STX_DW: u8 = 0x7b;
const ST_W: u8 = 0x62;
const ADD64_K: u8 = 0x07;
const ADD64_X: u8 = 0x0f;
const SUB64_K: u8 = 0x17;
const SUB64_X: u8 = 0x1f;
const AND64_K: u8 = 0x57;
const RSH64_K: u8 = 0x77;
const MOV64_K: u8 = 0xb7;
const MOV64_X: u8 = 0xbf;
/// `BPF_ALU | BPF_END | BPF_TO_BE`: to big-endian, i.e. network to host order on a
/// little-endian machine and nothing on a big-endian one.
const BE: u8 = 0xdc;
const LD_IMM_DW: u8 = 0x18;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

/// A conditional or unconditional jump (`BPF_JMP`/`BPF_JMP32` class with its op).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Jmp {
    /// ==, 64-bit.
    Eq,
    /// !=, 64-bit.
    Ne,
    /// > unsigned, 64-bit.
    Gt,
    /// >= unsigned, 64-bit.
    Ge,
    /// <= unsigned, 64-bit.
    Le,
    /// != on the low 32 bits (`BPF_JMP32`), so a 32-bit immediate is not
    /// sign-extended against a zero-extended load.
    Ne32,
}

impl Jmp {
    /// The opcode with an immediate operand (`BPF_K`); `| 0x08` is the register form.
    const fn code(self) -> u8 {
        match self {
            Jmp::Eq => 0x15,
            Jmp::Ne => 0x55,
            Jmp::Gt => 0x25,
            Jmp::Ge => 0x35,
            Jmp::Le => 0xb5,
            Jmp::Ne32 => 0x56,
        }
    }
}

/// A jump target of [`Asm`], bound to an instruction with [`Asm::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label(usize);

/// Why [`Asm::finish`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AsmError {
    /// A jump to a label never bound.
    Unbound(usize),
    /// A jump farther than a 16-bit offset reaches.
    TooFar(usize),
}

impl std::fmt::Display for AsmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsmError::Unbound(i) => write!(f, "jump at {i} to an unbound label"),
            AsmError::TooFar(i) => write!(f, "jump at {i} out of 16-bit range"),
        }
    }
}

impl std::error::Error for AsmError {}

/// An eBPF assembler: instructions in order, jumps to labels resolved at
/// [`Asm::finish`] (offsets count from the instruction after the jump).
#[derive(Debug, Default)]
pub(crate) struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    /// An empty program.
    pub(crate) fn new() -> Asm {
        Asm::default()
    }

    fn push(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.insns.push(Insn::new(code, dst, src, off, imm));
        self
    }

    /// A new, unbound label.
    pub(crate) fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Bind `l` to the next instruction.
    pub(crate) fn bind(&mut self, l: Label) -> &mut Asm {
        if let Some(slot) = self.labels.get_mut(l.0) {
            *slot = Some(self.insns.len());
        }
        self
    }

    /// `dst = *(size *)(src + off)`, `size` 1, 2, 4 or 8 bytes (zero-extended).
    pub(crate) fn load(&mut self, size: u8, dst: u8, src: u8, off: i16) -> &mut Asm {
        let code = match size {
            1 => LDX_B,
            2 => LDX_H,
            4 => LDX_W,
            _ => LDX_DW,
        };
        self.push(code, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = src`.
    pub(crate) fn store(&mut self, size: u8, dst: u8, off: i16, src: u8) -> &mut Asm {
        let code = match size {
            1 => STX_B,
            2 => STX_H,
            4 => STX_W,
            _ => STX_DW,
        };
        self.push(code, dst, src, off, 0)
    }

    /// `*(u32 *)(dst + off) = imm`.
    pub(crate) fn store_imm32(&mut self, dst: u8, off: i16, imm: i32) -> &mut Asm {
        self.push(ST_W, dst, 0, off, imm)
    }

    /// `dst = imm` (64-bit, sign-extended).
    pub(crate) fn mov_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(MOV64_K, dst, 0, 0, imm)
    }

    /// `dst = src`.
    pub(crate) fn mov(&mut self, dst: u8, src: u8) -> &mut Asm {
        self.push(MOV64_X, dst, src, 0, 0)
    }

    /// `dst += imm`.
    pub(crate) fn add_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(ADD64_K, dst, 0, 0, imm)
    }

    /// `dst += src`.
    pub(crate) fn add(&mut self, dst: u8, src: u8) -> &mut Asm {
        self.push(ADD64_X, dst, src, 0, 0)
    }

    /// `dst -= imm`.
    pub(crate) fn sub_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(SUB64_K, dst, 0, 0, imm)
    }

    /// `dst -= src`.
    pub(crate) fn sub(&mut self, dst: u8, src: u8) -> &mut Asm {
        self.push(SUB64_X, dst, src, 0, 0)
    }

    /// `dst &= imm`.
    pub(crate) fn and_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(AND64_K, dst, 0, 0, imm)
    }

    /// `dst >>= imm` (logical).
    pub(crate) fn rsh_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(RSH64_K, dst, 0, 0, imm)
    }

    /// `dst = be16(dst)`: a 16-bit field loaded from the wire, in host order.
    pub(crate) fn be16(&mut self, dst: u8) -> &mut Asm {
        self.push(BE, dst, 0, 0, 16)
    }

    /// `dst = map` (`ld_imm64` with `BPF_PSEUDO_MAP_FD`: the kernel puts the map in).
    pub(crate) fn ld_map(&mut self, dst: u8, map: BorrowedFd<'_>) -> &mut Asm {
        self.push(LD_IMM_DW, dst, BPF_PSEUDO_MAP_FD, 0, map.as_raw_fd());
        self.push(0, 0, 0, 0, 0)
    }

    /// `call helper`.
    pub(crate) fn call(&mut self, helper: i32) -> &mut Asm {
        self.push(CALL, 0, 0, 0, helper)
    }

    /// `exit` (returns r0).
    pub(crate) fn exit(&mut self) -> &mut Asm {
        self.push(EXIT, 0, 0, 0, 0)
    }

    /// `if dst <op> imm goto to`.
    pub(crate) fn jmp_imm(&mut self, op: Jmp, dst: u8, imm: i32, to: Label) -> &mut Asm {
        self.fixups.push((self.insns.len(), to));
        self.push(op.code(), dst, 0, 0, imm)
    }

    /// `if dst <op> src goto to`.
    pub(crate) fn jmp_reg(&mut self, op: Jmp, dst: u8, src: u8, to: Label) -> &mut Asm {
        self.fixups.push((self.insns.len(), to));
        self.push(op.code() | 0x08, dst, src, 0, 0)
    }

    /// The instructions with every jump resolved.
    pub(crate) fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        for &(at, l) in &self.fixups {
            let target = self
                .labels
                .get(l.0)
                .copied()
                .flatten()
                .ok_or(AsmError::Unbound(at))?;
            let off = target as i64 - (at as i64 + 1);
            let off = i16::try_from(off).map_err(|_| AsmError::TooFar(at))?;
            if let Some(i) = self.insns.get_mut(at) {
                i.off = off;
            }
        }
        Ok(self.insns)
    }
}

/// A 16-bit wire field as the program's native-order load sees it.
const fn ne16(bytes: [u8; 2]) -> i32 {
    u16::from_ne_bytes(bytes) as i32
}

/// A 32-bit wire field as the program's native-order load sees it (for `Jmp::Ne32`).
const fn ne32(bytes: [u8; 4]) -> i32 {
    u32::from_ne_bytes(bytes) as i32
}

/// One next hop of the fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// Egress interface (in the router's namespace).
    pub ifindex: u32,
    /// The egress MTU: the largest IPv4 packet (total length) that leaves there.
    pub mtu: u32,
    /// The neighbour's MAC.
    pub dst_mac: [u8; 6],
    /// The egress port's MAC.
    pub src_mac: [u8; 6],
}

/// Size of a next-hop map value: ifindex, MTU, destination and source MAC.
const HOP_LEN: usize = 20;

impl Hop {
    fn bytes(&self) -> [u8; HOP_LEN] {
        let mut v = [0u8; HOP_LEN];
        v[0..4].copy_from_slice(&self.ifindex.to_ne_bytes());
        v[4..8].copy_from_slice(&self.mtu.to_ne_bytes());
        v[8..14].copy_from_slice(&self.dst_mac);
        v[14..20].copy_from_slice(&self.src_mac);
        v
    }
}

/// The fast path's maps, shared by every port that runs its program: the routes
/// (an LPM trie, IPv4 destination → next-hop slot), the next hops, and the per-CPU
/// counters. Dropping it closes the maps (attached programs keep their own
/// references until they are detached).
#[derive(Debug)]
pub struct FastPath {
    routes: Map,
    routes6: Map,
    hops: Map,
    counters: Map,
    max_hops: u32,
    cpus: usize,
}

/// The number of possible CPUs (`/sys/devices/system/cpu/possible`, e.g. `0-1`):
/// how many values a per-CPU map's lookup returns.
fn possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut n = 0usize;
    for part in s.trim().split(',') {
        let mut it = part.split('-');
        let a: usize = it
            .next()
            .and_then(|x| x.parse().ok())
            .ok_or_else(|| io::Error::other(format!("cpu list {s:?}")))?;
        let b: usize = match it.next() {
            Some(x) => x
                .parse()
                .map_err(|_| io::Error::other(format!("cpu list {s:?}")))?,
            None => a,
        };
        n = n.max(b + 1);
    }
    Ok(n.max(1))
}

impl FastPath {
    /// Create the maps: room for `max_routes` prefixes and `max_hops` next hops
    /// (slot 0 is reserved: "slow path").
    pub fn new(max_routes: u32, max_hops: u32) -> io::Result<FastPath> {
        let ctx = |what: &'static str| {
            move |e: io::Error| {
                io::Error::new(e.kind(), format!("bpf(BPF_MAP_CREATE, {what}): {e}"))
            }
        };
        let routes = Map::create(
            BPF_MAP_TYPE_LPM_TRIE,
            8,
            4,
            max_routes.max(1),
            bpf::BPF_F_NO_PREALLOC,
            1,
            b"weft_fwd_routes",
        )
        .map_err(ctx("LPM_TRIE"))?;
        let routes6 = Map::create(
            BPF_MAP_TYPE_LPM_TRIE,
            20,
            4,
            max_routes.max(1),
            bpf::BPF_F_NO_PREALLOC,
            1,
            b"weft_fwd_route6",
        )
        .map_err(ctx("LPM_TRIE"))?;
        let max_hops = max_hops.max(2);
        let hops = Map::create(
            BPF_MAP_TYPE_ARRAY,
            4,
            HOP_LEN as u32,
            max_hops,
            0,
            1,
            b"weft_fwd_hops",
        )
        .map_err(ctx("ARRAY"))?;
        let cpus = possible_cpus()?;
        let counters = Map::create(
            BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            8,
            COUNTER_NAMES.len() as u32,
            0,
            cpus,
            b"weft_fwd_count",
        )
        .map_err(ctx("PERCPU_ARRAY"))?;
        Ok(FastPath {
            routes,
            routes6,
            hops,
            counters,
            max_hops,
            cpus,
        })
    }

    fn route_key(prefix: Ipv4Addr, len: u8) -> [u8; 8] {
        let len = len.min(32);
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        let addr = u32::from(prefix) & mask;
        let mut k = [0u8; 8];
        k[0..4].copy_from_slice(&u32::from(len).to_ne_bytes());
        k[4..8].copy_from_slice(&addr.to_be_bytes());
        k
    }

    /// Route `prefix/len` to next-hop slot `hop` (0: the slow path).
    pub fn set_route(&self, prefix: Ipv4Addr, len: u8, hop: u32) -> io::Result<()> {
        self.routes
            .update(&Self::route_key(prefix, len), &hop.to_ne_bytes())
    }

    /// Remove the route for `prefix/len` (a missing one is not an error).
    pub fn delete_route(&self, prefix: Ipv4Addr, len: u8) -> io::Result<()> {
        match self.routes.delete(&Self::route_key(prefix, len)) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    fn route6_key(prefix: Ipv6Addr, len: u8) -> [u8; 20] {
        let len = len.min(128);
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        let addr = u128::from(prefix) & mask;
        let mut k = [0u8; 20];
        k[0..4].copy_from_slice(&u32::from(len).to_ne_bytes());
        k[4..20].copy_from_slice(&addr.to_be_bytes());
        k
    }

    /// Route the IPv6 `prefix/len` to next-hop slot `hop` (0: the slow path).
    pub fn set_route6(&self, prefix: Ipv6Addr, len: u8, hop: u32) -> io::Result<()> {
        self.routes6
            .update(&Self::route6_key(prefix, len), &hop.to_ne_bytes())
    }

    /// Remove the IPv6 route for `prefix/len` (a missing one is not an error).
    pub fn delete_route6(&self, prefix: Ipv6Addr, len: u8) -> io::Result<()> {
        match self.routes6.delete(&Self::route6_key(prefix, len)) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// Next-hop slots, 1 to this − 1.
    pub fn max_hops(&self) -> u32 {
        self.max_hops
    }

    /// Set next-hop slot `slot` (1..[`FastPath::max_hops`]); `None` marks it
    /// unresolved (its packets go to the slow path).
    pub fn set_hop(&self, slot: u32, hop: Option<Hop>) -> io::Result<()> {
        if slot == 0 || slot >= self.max_hops {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("next-hop slot {slot} outside 1..{}", self.max_hops),
            ));
        }
        let v = hop.map_or([0u8; HOP_LEN], |h| h.bytes());
        self.hops.update(&slot.to_ne_bytes(), &v)
    }

    /// Every counter summed over the CPUs, in [`COUNTER_NAMES`] order.
    pub fn counters(&self) -> io::Result<[u64; COUNTER_NAMES.len()]> {
        let mut out = [0u64; COUNTER_NAMES.len()];
        let mut buf = vec![0u8; 8 * self.cpus];
        for (i, o) in out.iter_mut().enumerate() {
            self.counters.lookup(&(i as u32).to_ne_bytes(), &mut buf)?;
            *o = buf
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                .sum();
        }
        Ok(out)
    }

    /// The program for a port with MAC `port_mac` whose slow path is the XSKMAP
    /// `xsks` (frames longer than `room`, what a UMEM chunk holds, go to the stack).
    pub(crate) fn program(
        &self,
        port_mac: [u8; 6],
        xsks: BorrowedFd<'_>,
        room: u32,
    ) -> Result<Vec<Insn>, AsmError> {
        // Registers: r6 ctx (then, once forwarding, the egress ifindex), r7 data,
        // r8 data_end, r9 the counter slot; stack: fp-8 the LPM key (prefix length,
        // address), fp-12 a counter key, fp-16 a next-hop key.
        let mut a = Asm::new();
        let slow = a.label();
        let reason = |a: &mut Asm, r: Reason| {
            a.mov_imm(9, r as i32);
        };
        a.mov(6, 1);
        a.load(4, 7, 6, 0); // ctx->data
        a.load(4, 8, 6, 4); // ctx->data_end
        let v6 = a.label();
        let next_hop = a.label();
        let mac_check = |a: &mut Asm| {
            a.mov_imm(9, Reason::NotOurMac as i32);
            a.load(4, 2, 7, 0).jmp_imm(
                Jmp::Ne32,
                2,
                ne32([port_mac[0], port_mac[1], port_mac[2], port_mac[3]]),
                slow,
            );
            a.load(2, 2, 7, 4)
                .jmp_imm(Jmp::Ne, 2, ne16([port_mac[4], port_mac[5]]), slow);
        };
        reason(&mut a, Reason::NotIp);
        a.mov(2, 7).add_imm(2, 34).jmp_reg(Jmp::Gt, 2, 8, slow);
        a.load(2, 2, 7, 12);
        a.jmp_imm(Jmp::Eq, 2, ne16([0x86, 0xdd]), v6);
        a.jmp_imm(Jmp::Ne, 2, ne16([0x08, 0x00]), slow);
        mac_check(&mut a);
        reason(&mut a, Reason::Header);
        a.load(1, 2, 7, 14).jmp_imm(Jmp::Ne, 2, 0x45, slow);
        // Total length == the frame's IPv4 bytes.
        a.load(2, 3, 7, 16).be16(3);
        a.mov(4, 8).sub(4, 7).sub_imm(4, 14);
        a.jmp_reg(Jmp::Ne, 3, 4, slow);
        reason(&mut a, Reason::Fragment);
        a.load(2, 2, 7, 20)
            .and_imm(2, ne16([0x3f, 0xff]))
            .jmp_imm(Jmp::Ne, 2, 0, slow);
        reason(&mut a, Reason::MartianSource);
        a.load(1, 2, 7, 26);
        a.jmp_imm(Jmp::Eq, 2, 0, slow)
            .jmp_imm(Jmp::Eq, 2, 127, slow)
            .jmp_imm(Jmp::Ge, 2, 224, slow);
        reason(&mut a, Reason::Ttl);
        a.load(1, 2, 7, 22).jmp_imm(Jmp::Le, 2, 1, slow);
        reason(&mut a, Reason::BadChecksum);
        // One's complement sum of the header's ten 16-bit words (byte order does
        // not matter to it), folded twice: 0xffff when the checksum is right.
        a.mov_imm(2, 0);
        for i in 0..10 {
            a.load(2, 3, 7, 14 + 2 * i).add(2, 3);
        }
        for _ in 0..2 {
            a.mov(3, 2).rsh_imm(3, 16).and_imm(2, 0xffff).add(2, 3);
        }
        a.jmp_imm(Jmp::Ne, 2, 0xffff, slow);
        // Route lookup: key {32, destination}.
        reason(&mut a, Reason::NoRoute);
        a.store_imm32(10, -8, 32);
        a.load(4, 2, 7, 30).store(4, 10, -4, 2);
        a.ld_map(1, self.routes.fd());
        a.mov(2, 10).add_imm(2, -8).call(BPF_FUNC_MAP_LOOKUP_ELEM);
        a.jmp_imm(Jmp::Eq, 0, 0, slow);
        reason(&mut a, Reason::LocalOrConnected);
        a.load(4, 2, 0, 0).jmp_imm(Jmp::Eq, 2, 0, slow);
        a.store(4, 10, -16, 2);
        // Shared by both families from here: r2 the next-hop slot (also at fp-16).
        a.bind(next_hop);
        reason(&mut a, Reason::Unresolved);
        a.ld_map(1, self.hops.fd());
        a.mov(2, 10).add_imm(2, -16).call(BPF_FUNC_MAP_LOOKUP_ELEM);
        a.jmp_imm(Jmp::Eq, 0, 0, slow);
        a.load(4, 2, 0, 0).jmp_imm(Jmp::Eq, 2, 0, slow);
        reason(&mut a, Reason::TooBig);
        // The IP packet's length: the frame's after Ethernet (both families checked
        // their length field against it).
        a.load(4, 3, 0, 4);
        a.mov(4, 8)
            .sub(4, 7)
            .sub_imm(4, 14)
            .jmp_reg(Jmp::Gt, 4, 3, slow);
        // Forward: from here on nothing goes slow, so r6 (ctx) may hold the ifindex.
        a.mov(6, 2);
        for off in [0i16, 4, 8] {
            a.load(4, 3, 0, 8 + off).store(4, 7, off, 3);
        }
        let v6_hop_limit = a.label();
        let send = a.label();
        a.load(2, 2, 7, 12)
            .jmp_imm(Jmp::Eq, 2, ne16([0x86, 0xdd]), v6_hop_limit);
        a.load(1, 3, 7, 22).sub_imm(3, 1).store(1, 7, 22, 3);
        // RFC 1624: HC' = HC + 0x0100 (one's complement; the TTL is the high byte
        // of its 16-bit word), with the end-around carry.
        a.load(2, 3, 7, 24).add_imm(3, ne16([0x01, 0x00]));
        a.mov(4, 3).rsh_imm(4, 16).add(3, 4).store(2, 7, 24, 3);
        a.jmp_imm(Jmp::Ne, 7, 0, send); // always taken: r7 is the packet pointer
                                        // IPv6: the hop limit, no header checksum.
        a.bind(v6_hop_limit);
        a.load(1, 3, 7, 21).sub_imm(3, 1).store(1, 7, 21, 3);
        a.bind(send);
        Self::count(&mut a, &self.counters, Some(Reason::Forwarded));
        a.mov(1, 6).mov_imm(2, 0).call(BPF_FUNC_REDIRECT).exit();
        // IPv6 (RFC 8200): a 40-byte header, no options in it; extension headers,
        // link-local and multicast go slow.
        a.bind(v6);
        reason(&mut a, Reason::Header);
        a.mov(2, 7).add_imm(2, 54).jmp_reg(Jmp::Gt, 2, 8, slow);
        mac_check(&mut a);
        reason(&mut a, Reason::Header);
        a.load(1, 2, 7, 14)
            .and_imm(2, 0xf0)
            .jmp_imm(Jmp::Ne, 2, 0x60, slow);
        // Payload length == the frame's bytes after the fixed header.
        a.load(2, 3, 7, 18).be16(3);
        a.mov(4, 8).sub(4, 7).sub_imm(4, 54);
        a.jmp_reg(Jmp::Ne, 3, 4, slow);
        // Next header: only TCP, UDP and ICMPv6 here (extension headers go slow).
        let upper_ok = a.label();
        a.load(1, 2, 7, 20);
        a.jmp_imm(Jmp::Eq, 2, 6, upper_ok)
            .jmp_imm(Jmp::Eq, 2, 17, upper_ok)
            .jmp_imm(Jmp::Ne, 2, 58, slow);
        a.bind(upper_ok);
        // Source: not multicast (ff), not link-local (fe80::/10), not starting with
        // 32 zero bits (::, ::1, mapped and compatible addresses: the pipeline's).
        reason(&mut a, Reason::MartianSource);
        a.load(1, 2, 7, 22).jmp_imm(Jmp::Eq, 2, 0xff, slow);
        a.load(2, 2, 7, 22).and_imm(2, ne16([0xff, 0xc0])).jmp_imm(
            Jmp::Eq,
            2,
            ne16([0xfe, 0x80]),
            slow,
        );
        a.load(4, 2, 7, 22).jmp_imm(Jmp::Eq, 2, 0, slow);
        reason(&mut a, Reason::Ttl);
        a.load(1, 2, 7, 21).jmp_imm(Jmp::Le, 2, 1, slow);
        // Route lookup: key {128, destination} at fp-40.
        reason(&mut a, Reason::NoRoute);
        a.store_imm32(10, -40, 128);
        for i in 0..4i16 {
            a.load(4, 2, 7, 38 + 4 * i).store(4, 10, -36 + 4 * i, 2);
        }
        a.ld_map(1, self.routes6.fd());
        a.mov(2, 10).add_imm(2, -40).call(BPF_FUNC_MAP_LOOKUP_ELEM);
        a.jmp_imm(Jmp::Eq, 0, 0, slow);
        reason(&mut a, Reason::LocalOrConnected);
        a.load(4, 2, 0, 0).jmp_imm(Jmp::Eq, 2, 0, slow);
        a.store(4, 10, -16, 2);
        a.jmp_imm(Jmp::Ne, 2, 0, next_hop); // always taken: the slot is not 0
                                            // The slow path: count why, then the port's AF_XDP socket (see afxdp.rs).
        a.bind(slow);
        Self::count(&mut a, &self.counters, None);
        let pass = a.label();
        a.load(4, 2, 6, 0).load(4, 3, 6, 4).sub(3, 2);
        a.jmp_imm(Jmp::Gt, 3, room as i32, pass);
        a.load(4, 2, 6, 16); // ctx->rx_queue_index
        a.ld_map(1, xsks);
        a.mov_imm(3, XDP_PASS as i32)
            .call(BPF_FUNC_REDIRECT_MAP)
            .exit();
        a.bind(pass).mov_imm(0, XDP_PASS as i32).exit();
        a.finish()
    }

    /// `counters[slot] += 1` for this CPU, `slot` fixed or (None) r9's.
    fn count(a: &mut Asm, counters: &Map, slot: Option<Reason>) {
        let done = a.label();
        match slot {
            Some(r) => a.store_imm32(10, -12, r as i32),
            None => a.store(4, 10, -12, 9),
        };
        a.ld_map(1, counters.fd());
        a.mov(2, 10).add_imm(2, -12).call(BPF_FUNC_MAP_LOOKUP_ELEM);
        a.jmp_imm(Jmp::Eq, 0, 0, done);
        a.load(8, 1, 0, 0).add_imm(1, 1).store(8, 0, 0, 1);
        a.bind(done);
    }

    /// Load the program for a port (see [`FastPath::program`]); the error carries
    /// the verifier's log.
    pub(crate) fn load(
        &self,
        port_mac: [u8; 6],
        xsks: BorrowedFd<'_>,
        room: u32,
    ) -> io::Result<OwnedFd> {
        let insns = self
            .program(port_mac, xsks, room)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        load_xdp(&insns, b"weft_fwd")
    }

    /// Run the program of a port with MAC `port_mac` once on `frame`
    /// (`BPF_PROG_TEST_RUN`, nothing is sent): the verdict and the frame as the
    /// program left it. The slow path's XSKMAP here has no socket, so a frame sent
    /// there comes back `XDP_PASS`; a forwarded one `XDP_REDIRECT`. The counters
    /// count these runs too. Frames shorter than 14 bytes are refused by the kernel
    /// (`EINVAL`).
    pub fn test_run(&self, port_mac: [u8; 6], frame: &[u8]) -> io::Result<(u32, Vec<u8>)> {
        let xsks = bpf::map_create(17, 4, 4, 1, b"weft_test_xsks")?;
        let prog = self.load(port_mac, xsks.as_fd(), 1792)?;
        let mut out = vec![0u8; frame.len() + 512];
        let (verdict, len) = bpf::prog_test_run(prog.as_fd(), frame, &mut out)?;
        out.truncate(len.min(out.len()));
        Ok((verdict, out))
    }
}

/// `BPF_PROG_LOAD` of an XDP program; on failure, load again with the verifier's
/// log so the error says why.
pub(crate) fn load_xdp(insns: &[Insn], name: &[u8]) -> io::Result<OwnedFd> {
    let license = c"Dual MIT/GPL";
    let load = |log: Option<&mut [u8]>| {
        bpf::prog_load(BPF_PROG_TYPE_XDP, BPF_XDP, insns, license, name, log)
    };
    match load(None) {
        Ok(p) => Ok(p),
        Err(e) => {
            let mut log = vec![0u8; 1 << 16];
            let _ = load(Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            // The end of the log says why.
            let tail: String = text
                .lines()
                .rev()
                .take(12)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            Err(io::Error::new(
                e.kind(),
                format!("bpf(BPF_PROG_LOAD, XDP): {e}; verifier: {tail}"),
            ))
        }
    }
}

/// The interface index of `name` in this namespace.
pub fn interface_index(name: &str) -> io::Result<u32> {
    crate::sys::if_nametoindex(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_resolve_to_offsets_from_the_next_instruction() {
        let mut a = Asm::new();
        let end = a.label();
        let top = a.label();
        a.bind(top);
        a.mov_imm(0, 1); // 0
        a.jmp_imm(Jmp::Eq, 0, 0, end); // 1 → 4: off 2
        a.jmp_reg(Jmp::Gt, 1, 2, top); // 2 → 0: off -3
        a.jmp_imm(Jmp::Ne, 0, 0, end); // 3 → 4: off 0
        a.bind(end).exit(); // 4
        let p = a.finish().expect("finish");
        assert_eq!(p.len(), 5);
        assert_eq!((p[1].code, p[1].off), (0x15, 2));
        assert_eq!((p[2].code, p[2].regs, p[2].off), (0x2d, 0x21, -3));
        assert_eq!((p[3].code, p[3].off), (0x55, 0));
        assert_eq!(p[4].code, 0x95);
    }

    #[test]
    fn an_unbound_label_is_an_error_not_a_wild_jump() {
        let mut a = Asm::new();
        let l = a.label();
        a.jmp_imm(Jmp::Ne, 1, 0, l).exit();
        assert_eq!(a.finish().err(), Some(AsmError::Unbound(0)));
    }

    #[test]
    fn encodings_match_the_instruction_set() {
        let mut a = Asm::new();
        a.load(2, 3, 7, 16)
            .be16(3)
            .store_imm32(10, -8, 32)
            .and_imm(2, 0xffff);
        a.jmp_imm(Jmp::Ne32, 2, -1, Label(0));
        let l = a.label();
        a.bind(l);
        let p = a.finish().expect("finish");
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x69, 0x73, 16));
        assert_eq!((p[1].code, p[1].imm), (0xdc, 16));
        assert_eq!(
            (p[2].code, p[2].regs, p[2].off, p[2].imm),
            (0x62, 0x0a, -8, 32)
        );
        assert_eq!((p[3].code, p[3].imm), (0x57, 0xffff));
        assert_eq!(p[4].code, 0x56);
    }

    #[test]
    fn route_keys_are_prefix_length_then_the_masked_address() {
        let k = FastPath::route_key(Ipv4Addr::new(198, 19, 7, 9), 16);
        assert_eq!(&k[0..4], &16u32.to_ne_bytes());
        assert_eq!(&k[4..8], &[198, 19, 0, 0]);
        assert_eq!(
            &FastPath::route_key(Ipv4Addr::new(1, 2, 3, 4), 0)[4..],
            &[0; 4]
        );
    }

    #[test]
    fn possible_cpus_is_at_least_one() {
        assert!(possible_cpus().expect("sysfs") >= 1);
    }
}
