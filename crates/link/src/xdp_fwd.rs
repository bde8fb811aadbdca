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
//! The same program is built for tc ingress too ([`FastPath::load_tc`], attached as
//! tcx by [`crate::afpacket_tc`]): one body, assembled once per hook from the same
//! code; only the prologue (the frame's bounds in `__sk_buff` instead of `xdp_md`; a
//! frame whose 802.1Q tag the stack took out goes slow; a nonlinear skb is made
//! linear with `bpf_skb_pull_data` first) and the slow path's ending (`TC_ACT_OK`,
//! on to the protocol handlers, instead of the `AF_XDP` socket) differ;
//! `bpf_redirect` returns each hook's redirect verdict. tc runs on the skb as it is,
//! where generic XDP first copies an skb with less than 256 bytes of headroom into a
//! new head. The incremental IPv4 checksum update leaves the header's one's
//! complement sum unchanged, so an ingress `CHECKSUM_COMPLETE` value stays right;
//! the IPv6 hop limit has no checksum beside it, so the tc build adds its change to
//! the skb's `csum` (`bpf_csum_update`, a no-op on skbs that are not COMPLETE):
//! nothing between the redirect and the egress device refreshes that value, and a
//! veth peer's receive would find it stale (see the comment at the update; the
//! test `the_tc_build_keeps_a_checksum_complete_skb_csum_right` runs it on a
//! COMPLETE skb). The XDP build is left as it was: native XDP has no skb, and the
//! skbs generic XDP runs on here come from veth, which never marks them COMPLETE;
//! what generic XDP does with a NIC driver's COMPLETE skb was not checked.
//!
//! Counters: a per-CPU array, one slot per [`COUNTER_NAMES`] entry, read with
//! [`FastPath::counters`].
//!
//! The instructions are assembled here with `Asm`, a small builder with jump
//! labels (eBPF encoding: Documentation/bpf/standardization/instruction-set.rst).
//! Every byte of the frame is hostile: the program reads nothing it has not first
//! bounds-checked against `data_end` (the verifier refuses it otherwise), and a
//! test ([`FastPath::test_run`]) feeds it short and garbage frames.

use crate::bpf_asm::{self, Asm, AsmError, Jmp, Label};
use crate::sys::bpf::{
    self, Insn, Map, BPF_FUNC_CSUM_UPDATE, BPF_FUNC_MAP_LOOKUP_ELEM, BPF_FUNC_REDIRECT,
    BPF_FUNC_SKB_PULL_DATA, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_LPM_TRIE, BPF_MAP_TYPE_PERCPU_ARRAY,
    BPF_MAP_TYPE_XSKMAP, BPF_PROG_TYPE_SCHED_CLS, BPF_PROG_TYPE_XDP, BPF_XDP,
};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// XDP verdicts (`enum xdp_action`).
pub const XDP_DROP: u32 = 1;
/// The frame goes on to the kernel's stack.
pub const XDP_PASS: u32 = 2;
/// The frame was redirected (to another interface, or to an `AF_XDP` socket).
pub const XDP_REDIRECT: u32 = 4;

/// tc verdicts (`TC_ACT_*`): the frame goes on through the stack.
pub const TC_ACT_OK: u32 = 0;
/// tc: the frame was redirected (`bpf_redirect`'s return value in a tc program).
pub const TC_ACT_REDIRECT: u32 = 7;

/// `struct __sk_buff` offsets the tc program reads (include/uapi/linux/bpf.h).
const SKB_LEN: i16 = 0;
const SKB_VLAN_PRESENT: i16 = 20;
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;

/// What the IPv6 hop limit's decrement does to a `CHECKSUM_COMPLETE` skb's `csum`,
/// as `bpf_csum_update` adds it (one's complement, 32 bits): the hop limit is byte 7
/// of the IPv6 header, and the kernel sums memory as native 16-bit words from the
/// network header on (an odd offset from there), so on a little-endian CPU the byte
/// weighs 0x0100 and on a big-endian one 1; minus 1 of it is adding its complement.
const HOP_LIMIT_CSUM_DIFF: i32 = if cfg!(target_endian = "little") {
    !0x0100
} else {
    !0x0001
};

/// The longest nonlinear frame the tc program makes linear to forward it (a jumbo
/// frame's worth); longer ones are GSO super-frames, for the slow path.
pub const TC_PULL_MAX: u32 = 9216;

/// Which hook a fast-path program is built for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hook<'a> {
    /// The XDP hook (`xdp_md`); the slow path is the port's `AF_XDP` socket in
    /// `xsks` (frames longer than `room`, a UMEM chunk, go to the stack).
    Xdp {
        /// The port's XSKMAP.
        xsks: BorrowedFd<'a>,
        /// What a UMEM chunk holds.
        room: u32,
    },
    /// tc ingress (`__sk_buff`, attached as tcx); the slow path is `TC_ACT_OK`: on
    /// to the protocol handlers, where the port's packet sockets are.
    Tc,
}

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

/// An LPM trie key of either family ([`FastPath::route_key`]).
#[derive(Debug, Clone, Copy)]
struct RouteKey {
    bytes: [u8; 20],
    len: usize,
}

impl RouteKey {
    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
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

    /// The trie key of `prefix/len` for either family: the prefix length (native
    /// order, capped at the address's bits), then the address in network order with
    /// the bits past the prefix cleared; 8 bytes for IPv4, 20 for IPv6.
    fn route_key(prefix: IpAddr, len: u8) -> RouteKey {
        let (addr, n): ([u8; 16], usize) = match prefix {
            IpAddr::V4(a) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&a.octets());
                (b, 4)
            }
            IpAddr::V6(a) => (a.octets(), 16),
        };
        let len = usize::from(len).min(8 * n);
        let mut k = RouteKey {
            bytes: [0u8; 20],
            len: 4 + n,
        };
        k.bytes[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        for (i, (out, b)) in k.bytes[4..4 + n].iter_mut().zip(addr).enumerate() {
            let bits = len.saturating_sub(8 * i).min(8);
            let mask = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
            *out = b & mask;
        }
        k
    }

    /// The trie of `prefix`'s family.
    fn routes_of(&self, prefix: IpAddr) -> &Map {
        match prefix {
            IpAddr::V4(_) => &self.routes,
            IpAddr::V6(_) => &self.routes6,
        }
    }

    /// Route `prefix/len` (IPv4 or IPv6) to next-hop slot `hop` (0: the slow path).
    pub fn set_route(&self, prefix: impl Into<IpAddr>, len: u8, hop: u32) -> io::Result<()> {
        let prefix = prefix.into();
        self.routes_of(prefix)
            .update(Self::route_key(prefix, len).as_slice(), &hop.to_ne_bytes())
    }

    /// Remove the route for `prefix/len` (a missing one is not an error).
    pub fn delete_route(&self, prefix: impl Into<IpAddr>, len: u8) -> io::Result<()> {
        let prefix = prefix.into();
        match self
            .routes_of(prefix)
            .delete(Self::route_key(prefix, len).as_slice())
        {
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

    /// The program for a port with MAC `port_mac` in `hook`: one body for both
    /// hooks (the header tests, the lookups, the rewrite and `bpf_redirect`, whose
    /// return value is each hook's redirect verdict); only the prologue (where the
    /// context keeps the frame's bounds) and the slow path's ending differ.
    pub(crate) fn program(&self, port_mac: [u8; 6], hook: Hook<'_>) -> Result<Vec<Insn>, AsmError> {
        // Registers: r6 ctx (then, once forwarding, the egress ifindex), r7 data,
        // r8 data_end, r9 the counter slot; stack: fp-8 the LPM key (prefix length,
        // address), fp-12 a counter key, fp-16 a next-hop key.
        let mut a = Asm::new();
        let slow = a.label();
        let reason = |a: &mut Asm, r: Reason| {
            a.mov_imm(9, r as i32);
        };
        a.mov(6, 1);
        match hook {
            Hook::Xdp { .. } => {
                a.load(4, 7, 6, 0); // xdp_md->data
                a.load(4, 8, 6, 4); // xdp_md->data_end
            }
            Hook::Tc => Self::tc_prologue(&mut a, slow),
        }
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
        // Forward: from here on nothing goes slow, so r6 (ctx) may hold the ifindex;
        // the tc build keeps ctx in r9 (no reason to count any more) for its
        // checksum update below.
        if matches!(hook, Hook::Tc) {
            a.mov(9, 6);
        }
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
        if matches!(hook, Hook::Tc) {
            // A CHECKSUM_COMPLETE skb (a NIC driver's) carries the sum of its bytes
            // from the IPv6 header on, and nothing on the way to the egress device
            // refreshes it: the redirect keeps it (only the MAC header's push is
            // summed, net/core/filter.c bpf_push_mac_rcsum) and veth hands it to
            // the peer as it is (__dev_forward_skb2), whose receive would find the
            // UDP/TCP sum wrong, log a "hw csum failure" and sum in software. The
            // kernel's own forwarding drops the value instead (skb_forward_csum).
            // So add the change: csum_add(csum, HOP_LIMIT_CSUM_DIFF); an skb that
            // is not COMPLETE makes the helper return -ENOTSUPP and change nothing.
            a.mov(1, 9)
                .mov_imm(2, HOP_LIMIT_CSUM_DIFF)
                .call(BPF_FUNC_CSUM_UPDATE);
        }
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
        match hook {
            Hook::Xdp { xsks, room } => bpf_asm::redirect_to_xsk(&mut a, 6, xsks, room),
            // On to the protocol handlers after tc: the port's packet sockets, bound
            // to IPv4, IPv6 and ARP, see only what tc did not redirect.
            Hook::Tc => {
                a.mov_imm(0, TC_ACT_OK as i32).exit();
            }
        }
        a.finish()
    }

    /// The tc prologue: r7/r8 the frame's bounds in `__sk_buff` (tc ingress runs
    /// with the Ethernet header pushed back, so they span the whole frame, as in
    /// XDP). A frame with an 802.1Q tag the stack took out of it goes slow (its tag
    /// is not in the bytes the program sees). A nonlinear skb (a sender's page
    /// fragments: a TCP socket with scatter-gather) of at most [`TC_PULL_MAX`]
    /// bytes is made linear with `bpf_skb_pull_data`, so the body's
    /// "length == frame" tests see the whole frame; a longer one (a GSO
    /// super-frame) goes slow, as it would in XDP (too big).
    fn tc_prologue(a: &mut Asm, slow: Label) {
        let linear = a.label();
        a.mov_imm(9, Reason::NotIp as i32);
        a.load(4, 2, 6, SKB_VLAN_PRESENT)
            .jmp_imm(Jmp::Ne, 2, 0, slow);
        a.load(4, 7, 6, SKB_DATA).load(4, 8, 6, SKB_DATA_END);
        a.load(4, 2, 6, SKB_LEN);
        a.mov(3, 8).sub(3, 7).jmp_reg(Jmp::Eq, 2, 3, linear);
        a.mov_imm(9, Reason::TooBig as i32);
        a.jmp_imm(Jmp::Gt, 2, TC_PULL_MAX as i32, slow);
        a.mov(1, 6).call(BPF_FUNC_SKB_PULL_DATA);
        a.mov_imm(9, Reason::Header as i32);
        a.jmp_imm(Jmp::Ne, 0, 0, slow);
        // The helper moved the data: the old pointers are void.
        a.load(4, 7, 6, SKB_DATA).load(4, 8, 6, SKB_DATA_END);
        a.load(4, 2, 6, SKB_LEN);
        a.mov(3, 8).sub(3, 7).jmp_reg(Jmp::Ne, 2, 3, slow);
        a.bind(linear);
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

    /// Load the XDP program for a port whose slow path is the XSKMAP `xsks` (frames
    /// longer than `room`, what a UMEM chunk holds, go to the stack; see
    /// [`FastPath::program`]); the error carries the verifier's log.
    pub(crate) fn load(
        &self,
        port_mac: [u8; 6],
        xsks: BorrowedFd<'_>,
        room: u32,
    ) -> io::Result<OwnedFd> {
        let insns = self
            .program(port_mac, Hook::Xdp { xsks, room })
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        load_xdp(&insns, b"weft_fwd")
    }

    /// Load the tc program for a port with MAC `port_mac` (a `SCHED_CLS` program for
    /// tc ingress: the module head says how it differs from the XDP one); the error carries the verifier's log.
    pub fn load_tc(&self, port_mac: [u8; 6]) -> io::Result<OwnedFd> {
        let insns = self
            .program(port_mac, Hook::Tc)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        load_with_log(BPF_PROG_TYPE_SCHED_CLS, 0, &insns, b"weft_fwd_tc")
    }

    /// [`FastPath::test_run`] of the tc program: `TC_ACT_OK` for the slow path,
    /// `TC_ACT_REDIRECT` for a forwarded frame (the test run sends nothing).
    pub fn test_run_tc(&self, port_mac: [u8; 6], frame: &[u8]) -> io::Result<(u32, Vec<u8>)> {
        self.test_run_tc_flags(port_mac, frame, 0)
    }

    /// [`FastPath::test_run_tc`] on a `CHECKSUM_COMPLETE` skb, as a NIC driver that
    /// sums what it receives hands it to tc (`BPF_F_TEST_SKB_CHECKSUM_COMPLETE`,
    /// Linux 6.11; older kernels refuse the flag with `EINVAL`): the kernel fails
    /// the run with `EBADMSG` when the program leaves the skb's `csum` differing
    /// from the sum of the bytes it leaves from the network header on.
    pub fn test_run_tc_checksum_complete(
        &self,
        port_mac: [u8; 6],
        frame: &[u8],
    ) -> io::Result<(u32, Vec<u8>)> {
        self.test_run_tc_flags(port_mac, frame, bpf::BPF_F_TEST_SKB_CHECKSUM_COMPLETE)
    }

    fn test_run_tc_flags(
        &self,
        port_mac: [u8; 6],
        frame: &[u8],
        flags: u32,
    ) -> io::Result<(u32, Vec<u8>)> {
        let prog = self.load_tc(port_mac)?;
        let mut out = vec![0u8; frame.len() + 512];
        let (verdict, len) = bpf::prog_test_run_flags(prog.as_fd(), frame, &mut out, flags)?;
        out.truncate(len.min(out.len()));
        Ok((verdict, out))
    }

    /// Run the program of a port with MAC `port_mac` once on `frame`
    /// (`BPF_PROG_TEST_RUN`, nothing is sent): the verdict and the frame as the
    /// program left it. The slow path's XSKMAP here has no socket, so a frame sent
    /// there comes back `XDP_PASS`; a forwarded one `XDP_REDIRECT`. The counters
    /// count these runs too. Frames shorter than 14 bytes are refused by the kernel
    /// (`EINVAL`).
    pub fn test_run(&self, port_mac: [u8; 6], frame: &[u8]) -> io::Result<(u32, Vec<u8>)> {
        let xsks = bpf::map_create(BPF_MAP_TYPE_XSKMAP, 4, 4, 1, b"weft_test_xsks")?;
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
    load_with_log(BPF_PROG_TYPE_XDP, BPF_XDP, insns, name)
}

/// `BPF_PROG_LOAD` of a program of `prog_type`; on failure, load again with the
/// verifier's log so the error says why.
fn load_with_log(
    prog_type: u32,
    attach_type: u32,
    insns: &[Insn],
    name: &[u8],
) -> io::Result<OwnedFd> {
    let license = c"Dual MIT/GPL";
    let load =
        |log: Option<&mut [u8]>| bpf::prog_load(prog_type, attach_type, insns, license, name, log);
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
                format!("bpf(BPF_PROG_LOAD, type {prog_type}): {e}; verifier: {tail}"),
            ))
        }
    }
}

/// Why a port could not run the fast path: its maps' program was refused (the
/// verifier, no `CAP_BPF`, a kernel without the helpers or map types it uses) or
/// could not be attached in the hook the fast path needs. A link's open returns it
/// inside its [`io::Error`] (see [`FastPathUnavailable::is`]), so a caller that only
/// defaulted the fast path can open the port again without it, while any other
/// failure (a missing interface, no rings, no socket) stays an error.
#[derive(Debug)]
pub struct FastPathUnavailable {
    /// The loader's or attacher's error (with the verifier's log when it refused).
    pub why: io::Error,
}

impl std::fmt::Display for FastPathUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "forwarding fast path unavailable: {}", self.why)
    }
}

impl std::error::Error for FastPathUnavailable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.why)
    }
}

impl FastPathUnavailable {
    /// `why` as an [`io::Error`] of the same kind that carries this type.
    pub fn wrap(why: io::Error) -> io::Error {
        io::Error::new(why.kind(), FastPathUnavailable { why })
    }

    /// Whether `e` is (directly) a fast path that could not be set up.
    pub fn is(e: &io::Error) -> bool {
        e.get_ref()
            .is_some_and(|inner| inner.is::<FastPathUnavailable>())
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
    fn route_keys_are_prefix_length_then_the_masked_address() {
        let v4 = |a: [u8; 4], l| FastPath::route_key(IpAddr::from(a), l);
        let k = v4([198, 19, 7, 9], 16);
        assert_eq!(k.as_slice().len(), 8);
        assert_eq!(&k.as_slice()[0..4], &16u32.to_ne_bytes());
        assert_eq!(&k.as_slice()[4..8], &[198, 19, 0, 0]);
        assert_eq!(&v4([1, 2, 3, 4], 0).as_slice()[4..], &[0; 4]);
        assert_eq!(
            &v4([10, 255, 255, 255], 12).as_slice()[4..],
            &[10, 240, 0, 0]
        );
        // A length past the address's bits is capped at them.
        assert_eq!(&v4([1, 2, 3, 4], 40).as_slice()[..4], &32u32.to_ne_bytes());
        let v6: std::net::Ipv6Addr = "2001:2:0:1:ffff::1".parse().expect("v6");
        let k = FastPath::route_key(IpAddr::V6(v6), 65);
        assert_eq!(k.as_slice().len(), 20);
        assert_eq!(&k.as_slice()[0..4], &65u32.to_ne_bytes());
        let want: std::net::Ipv6Addr = "2001:2:0:1:8000::".parse().expect("v6");
        assert_eq!(&k.as_slice()[4..], &want.octets());
    }

    #[test]
    fn possible_cpus_is_at_least_one() {
        assert!(possible_cpus().expect("sysfs") >= 1);
    }
}
