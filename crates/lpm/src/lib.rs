//! weft-lpm: IPv4 and IPv6 longest-prefix match for the router.
//!
//! **Owns**: the forwarding table's lookup structure ([`Table`], aliased
//! [`Lpm4`]/[`Lpm6`]), the prefix types ([`Prefix`], family-agnostic [`IpPrefix`]),
//! the updatable FIB ([`FibWriter`] publishes immutable [`Snapshot`]s of both
//! families and their next hops; [`FibReader`] loads them), a naive [`reference`](mod@reference)
//! implementation to test against, a seeded [`synth`]etic route generator with the
//! real prefix-length mix, and the one reader of `prefix value` route files
//! ([`routes`]).
//!
//! **Must not touch**: packets, ports, sockets, threads of its own, the meaning of
//! a next hop (the FIB stores and reference-counts the caller's `N` values, and a
//! table holds a [`NextHop`] index into them, but never looks inside), or any
//! other weft crate. No `unsafe` anywhere.
//!
//! # Design (see `docs/results/lpm.md` for the numbers)
//!
//! The P2PNIC paper (§6.1, Fig. 14) shows DPDK's `librte_lpm` needing more than the
//! NIC's 4 MiB SRAM at 60 000 routes. weft's table is a DXR-style range table:
//!
//! * a **direct-indexed top level** on the first 16 address bits (65 536 `u32`
//!   slots). A slot holds the answer when its /16 has a single answer — for a full
//!   IPv4 table that is 73 % of the address space, resolved with one read;
//! * below a slot, a **range node** over the next 16 bits storing only the points
//!   where the answer changes (16-bit keys searched 32 at a time, see `node.rs`),
//!   and for IPv6 further nodes per 16-bit stride where needed;
//! * **compact next hops**: a leaf is a 31-bit index into the router's next-hop
//!   table ([`NextHop`]), stored once per range, not once per prefix or per slot.
//!
//! The nodes are split into 256 segments (one per first address byte), each an
//! `Arc`. An update rebuilds the chunks it touches, copies the top level and the
//! one segment they live in, and builds a new table that shares every other
//! segment (copy-on-write). [`FibWriter`] applies single-route updates to its
//! private route sets and publishes coalesced snapshots through `arc-swap` (see
//! `fib.rs` for the visibility bound), so readers never block and always see one
//! whole snapshot.
#![forbid(unsafe_code)]

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

mod fib;
mod node;
pub mod reference;
pub mod routes;
pub mod synth;
mod table;

pub use fib::{
    FibReader, FibWriter, Snapshot, SnapshotGuard, Update, WriterStats, DEFAULT_MAX_DELAY,
};
pub use table::Table;

/// IPv4 table (`u32` addresses, most significant bit first).
pub type Lpm4 = Table<u32>;
/// IPv6 table (`u128` addresses).
pub type Lpm6 = Table<u128>;

/// An address family, named by its address type: `u32` (IPv4) or `u128` (IPv6).
pub trait Address: Copy + Eq + Ord + fmt::Debug + Send + Sync + 'static + sealed::Sealed {
    /// Address width in bits.
    const BITS: u32;
    /// Largest address, widened.
    const MAX: u128;
    /// Family name as used in reports: `ipv4` or `ipv6`.
    const FAMILY: &'static str;
    /// The address in the low `BITS` bits of a `u128`.
    fn widen(self) -> u128;
    /// The inverse of [`Address::widen`] (truncates).
    fn narrow(v: u128) -> Self;
    /// The family-agnostic form of a prefix of this family.
    fn ip_prefix(p: Prefix<Self>) -> IpPrefix;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u128 {}
}

impl Address for u32 {
    const BITS: u32 = 32;
    const MAX: u128 = u32::MAX as u128;
    const FAMILY: &'static str = "ipv4";
    fn widen(self) -> u128 {
        u128::from(self)
    }
    fn narrow(v: u128) -> Self {
        v as u32
    }
    fn ip_prefix(p: Prefix<u32>) -> IpPrefix {
        IpPrefix::V4(p)
    }
}

impl Address for u128 {
    const BITS: u32 = 128;
    const MAX: u128 = u128::MAX;
    const FAMILY: &'static str = "ipv6";
    fn widen(self) -> u128 {
        self
    }
    fn narrow(v: u128) -> Self {
        v
    }
    fn ip_prefix(p: Prefix<u128>) -> IpPrefix {
        IpPrefix::V6(p)
    }
}

/// Index of a next hop in the router's next-hop table. At most [`NextHop::MAX`]:
/// the top bit of a slot says "node, not leaf" and one value means "no route".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NextHop(u32);

impl NextHop {
    /// Largest next-hop index a table can hold (2^31 - 2).
    pub const MAX: u32 = node::NO_ROUTE - 1;

    /// A next-hop index, if it is at most [`NextHop::MAX`].
    pub fn new(index: u32) -> Result<Self, LpmError> {
        if index <= Self::MAX {
            Ok(NextHop(index))
        } else {
            Err(LpmError::NextHopTooLarge(index))
        }
    }

    /// The index.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// A prefix of family `A`: address with host bits cleared, and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix<A: Address> {
    addr: A,
    len: u8,
}

/// IPv4 prefix.
pub type Prefix4 = Prefix<u32>;
/// IPv6 prefix.
pub type Prefix6 = Prefix<u128>;

impl<A: Address> Prefix<A> {
    /// The prefix `addr/len`; host bits of `addr` are cleared.
    pub fn new(addr: A, len: u8) -> Result<Self, LpmError> {
        if u32::from(len) > A::BITS {
            return Err(LpmError::PrefixTooLong { len, bits: A::BITS });
        }
        let first = addr.widen() & !table::host_mask(A::BITS, len) & A::MAX;
        Ok(Prefix {
            addr: A::narrow(first),
            len,
        })
    }

    /// Network address (host bits zero).
    pub fn addr(&self) -> A {
        self.addr
    }

    /// Prefix length.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for the default route (`/0`), which is the only "empty" prefix.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// First address covered.
    pub fn first(&self) -> A {
        self.addr
    }

    /// Last address covered.
    pub fn last(&self) -> A {
        A::narrow(self.addr.widen() | table::host_mask(A::BITS, self.len))
    }

    /// True if `a` is inside the prefix.
    pub fn contains(&self, a: A) -> bool {
        a.widen() & !table::host_mask(A::BITS, self.len) & A::MAX == self.addr.widen()
    }

    pub(crate) fn first_u128(&self) -> u128 {
        self.addr.widen()
    }
}

impl fmt::Display for Prefix<u32> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", std::net::Ipv4Addr::from(self.addr), self.len)
    }
}

impl fmt::Display for Prefix<u128> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", std::net::Ipv6Addr::from(self.addr), self.len)
    }
}

/// A prefix of either family: the one prefix type of weft-lpm and the router
/// (route files, `ctl`, configuration). Ordered IPv4 first, then by address and
/// length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpPrefix {
    /// An IPv4 prefix.
    V4(Prefix4),
    /// An IPv6 prefix.
    V6(Prefix6),
}

impl IpPrefix {
    /// `addr/len` with host bits cleared; `None` when `len` is longer than the
    /// family's address (the only way it can fail).
    pub fn new(addr: IpAddr, len: u8) -> Option<IpPrefix> {
        match addr {
            IpAddr::V4(a) => Prefix::new(u32::from(a), len).ok().map(IpPrefix::V4),
            IpAddr::V6(a) => Prefix::new(u128::from(a), len).ok().map(IpPrefix::V6),
        }
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        match self {
            IpPrefix::V4(p) => IpAddr::V4(p.addr().into()),
            IpPrefix::V6(p) => IpAddr::V6(p.addr().into()),
        }
    }

    /// The prefix length.
    pub fn len(&self) -> u8 {
        match self {
            IpPrefix::V4(p) => p.len(),
            IpPrefix::V6(p) => p.len(),
        }
    }

    /// True for a default route (length 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `a` is inside the prefix (never for the other family).
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self, a) {
            (IpPrefix::V4(p), IpAddr::V4(a)) => p.contains(u32::from(a)),
            (IpPrefix::V6(p), IpAddr::V6(a)) => p.contains(u128::from(a)),
            _ => false,
        }
    }
}

impl<A: Address> From<Prefix<A>> for IpPrefix {
    fn from(p: Prefix<A>) -> Self {
        A::ip_prefix(p)
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpPrefix::V4(p) => p.fmt(f),
            IpPrefix::V6(p) => p.fmt(f),
        }
    }
}

/// Why a prefix did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrefixParseError {
    /// The part before `/` is not an IPv4 or IPv6 address.
    Address(String),
    /// The part after `/` is not a number.
    Length(String),
    /// The length is longer than the address.
    TooLong {
        /// The prefix as written.
        prefix: String,
        /// Address width of its family.
        bits: u32,
    },
}

impl fmt::Display for PrefixParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixParseError::Address(s) => write!(f, "bad prefix: {s:?} is not an IP address"),
            PrefixParseError::Length(s) => write!(f, "bad prefix: length {s:?} is not a number"),
            PrefixParseError::TooLong { prefix, bits } => {
                write!(f, "bad prefix: {prefix} is longer than {bits} bits")
            }
        }
    }
}

impl std::error::Error for PrefixParseError {}

impl FromStr for IpPrefix {
    type Err = PrefixParseError;
    /// `a.b.c.d/n`, `x:y::/n`; a bare address is a host prefix. Host bits are
    /// cleared.
    fn from_str(s: &str) -> Result<IpPrefix, PrefixParseError> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| PrefixParseError::Address(a.to_string()))?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            Some(l) => l
                .trim()
                .parse()
                .map_err(|_| PrefixParseError::Length(l.to_string()))?,
            None => bits as u8,
        };
        IpPrefix::new(addr, len).ok_or_else(|| PrefixParseError::TooLong {
            prefix: s.to_string(),
            bits,
        })
    }
}

/// Why a route or next hop was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpmError {
    /// The next-hop index is above [`NextHop::MAX`].
    NextHopTooLarge(u32),
    /// The FIB's next-hop table already holds [`NextHop::MAX`] + 1 distinct next
    /// hops.
    NextHopTableFull,
    /// The prefix is longer than the address.
    PrefixTooLong {
        /// Length given.
        len: u8,
        /// Address width.
        bits: u32,
    },
}

impl fmt::Display for LpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LpmError::NextHopTooLarge(v) => write!(f, "next-hop index {v} above {}", NextHop::MAX),
            LpmError::NextHopTableFull => write!(
                f,
                "next-hop table full ({} distinct next hops)",
                u64::from(NextHop::MAX) + 1
            ),
            LpmError::PrefixTooLong { len, bits } => write!(f, "prefix length {len} above {bits}"),
        }
    }
}

impl std::error::Error for LpmError {}
