//! The lookup table: a flat direct-indexed 16-bit top level, and the range nodes
//! below it split into 256 segments (one per first address byte).
//!
//! ```text
//! address  [ 16 bits: top slot ][ 16 bits: node key ][ 16 ... ]
//!            top[65536] ── leaf: next hop, done (one read)
//!                       └─ node: range search in segs[first byte].blob (node.rs)
//! ```
//!
//! A table is immutable once built. Updates copy the top level (256 KiB, a few
//! microseconds), build new node blobs for the segments they touch and share
//! every other segment with the previous table through `Arc` (see `fib.rs`). The
//! top level is one flat array, not a slice per segment, so a lookup that ends
//! there (most random destinations) is a single dependent read.

use std::fmt;
use std::sync::Arc;

use crate::node::{self, Intervals, NODE, NO_ROUTE, PAD};
use crate::{Address, NextHop, Prefix};

/// Top-level slots per segment.
pub(crate) const SEG_SLOTS: usize = 256;
/// Number of segments (the first 8 address bits).
pub(crate) const SEGS: usize = 256;
/// Top-level chunks in all (the first 16 address bits).
pub(crate) const CHUNKS: usize = SEGS * SEG_SLOTS;

/// The range nodes of one 1/256th of the table (256 top-level slots).
pub(crate) struct Segment {
    /// Range nodes of the chunks of this segment, in chunk order, then [`PAD`].
    pub(crate) blob: Box<[u16]>,
}

impl Segment {
    /// Where the node words of each of the segment's top-level `slots` end
    /// (nodes are laid out in slot order; leaves get the start of the next node).
    pub(crate) fn node_ends(&self, slots: &[u32]) -> [usize; SEG_SLOTS] {
        let mut ends = [0usize; SEG_SLOTS];
        let mut next = self.blob.len() - PAD;
        for i in (0..SEG_SLOTS).rev() {
            ends[i] = next;
            if slots[i] & NODE != 0 {
                next = (slots[i] & !NODE) as usize;
            }
        }
        ends
    }

    /// The node words of `slot` (the segment's `i`th) given [`Segment::node_ends`].
    pub(crate) fn chunk_words(&self, slot: u32, i: usize, ends: &[usize; SEG_SLOTS]) -> &[u16] {
        if slot & NODE == 0 {
            return &[];
        }
        &self.blob[(slot & !NODE) as usize..ends[i]]
    }

    pub(crate) fn bytes(&self) -> usize {
        size_of::<Segment>() + self.blob.len() * 2
    }
}

/// What one top-level chunk holds.
#[derive(Debug)]
pub(crate) enum Chunk {
    Leaf(u32),
    /// Node words, offsets relative to their first word.
    Node(Vec<u16>),
}

/// Assembles a segment chunk by chunk.
pub(crate) struct SegmentBuilder {
    top: [u32; SEG_SLOTS],
    blob: Vec<u16>,
}

impl SegmentBuilder {
    pub(crate) fn new() -> Self {
        SegmentBuilder {
            top: [NO_ROUTE; SEG_SLOTS],
            blob: Vec::new(),
        }
    }

    pub(crate) fn leaf(&mut self, i: usize, v: u32) {
        self.top[i] = v;
    }

    pub(crate) fn node(&mut self, i: usize, words: &[u16]) {
        self.top[i] = NODE | self.blob.len() as u32;
        self.blob.extend_from_slice(words);
    }

    pub(crate) fn chunk(&mut self, i: usize, c: &Chunk) {
        match c {
            Chunk::Leaf(v) => self.leaf(i, *v),
            Chunk::Node(w) => self.node(i, w),
        }
    }

    /// The segment's top-level slots and its nodes.
    pub(crate) fn finish(mut self) -> ([u32; SEG_SLOTS], Segment) {
        self.blob.resize(self.blob.len() + PAD, u16::MAX);
        (
            self.top,
            Segment {
                blob: self.blob.into_boxed_slice(),
            },
        )
    }
}

/// Builds the chunk for intervals `iv` covering one top-level chunk starting at `lo`.
pub(crate) fn build_chunk<A: Address>(iv: &[(u128, u32)], lo: u128) -> Chunk {
    if iv.len() == 1 {
        return Chunk::Leaf(iv[0].1);
    }
    let mut words = Vec::with_capacity(iv.len() * 3 + 1);
    node::build(&mut words, 0, iv, lo, A::BITS - 16);
    Chunk::Node(words)
}

/// Canonical routes: `(first, last, value)` sorted by first address then length,
/// one per prefix (the last one given wins).
pub(crate) fn canonical<A: Address>(routes: &[(Prefix<A>, NextHop)]) -> Vec<(u128, u128, u32)> {
    let mut v: Vec<(u128, u8, u32, usize)> = routes
        .iter()
        .enumerate()
        .map(|(i, (p, nh))| (p.first_u128(), p.len(), nh.get(), i))
        .collect();
    v.sort_unstable_by_key(|&(f, l, _, i)| (f, l, i));
    v.dedup_by(|b, a| {
        // `dedup_by` passes (later, earlier): keep the later insertion's value.
        if a.0 == b.0 && a.1 == b.1 {
            a.2 = b.2;
            true
        } else {
            false
        }
    });
    v.into_iter()
        .map(|(f, l, nh, _)| (f, f | host_mask(A::BITS, l), nh))
        .collect()
}

/// Bits below a prefix of length `len` in a `bits`-wide address.
pub(crate) fn host_mask(bits: u32, len: u8) -> u128 {
    let host = bits - u32::from(len);
    if host == 0 {
        0
    } else if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    }
}

/// An immutable longest-prefix-match table for one address family.
///
/// [`Lpm4`](crate::Lpm4) for IPv4 (`u32` addresses), [`Lpm6`](crate::Lpm6) for
/// IPv6 (`u128`). Build it with [`Table::from_routes`]; share it between threads
/// freely; for updates while forwarding use [`FibWriter`](crate::FibWriter).
pub struct Table<A: Address> {
    /// The top level: one slot per first 16 address bits.
    pub(crate) top: Box<[u32; CHUNKS]>,
    /// Nodes per first address byte; inline, not boxed: one load less per lookup.
    pub(crate) segs: [Arc<Segment>; SEGS],
    pub(crate) routes: usize,
    pub(crate) _family: std::marker::PhantomData<A>,
}

impl<A: Address> Clone for Table<A> {
    fn clone(&self) -> Self {
        Table {
            top: self.top.clone(),
            segs: self.segs.clone(),
            routes: self.routes,
            _family: self._family,
        }
    }
}

impl<A: Address> fmt::Debug for Table<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("bits", &A::BITS)
            .field("routes", &self.routes)
            .field("bytes", &self.memory_bytes())
            .finish()
    }
}

/// A zeroed top level on the heap (never on the stack: it is 256 KiB).
pub(crate) fn new_top() -> Box<[u32; CHUNKS]> {
    vec![0u32; CHUNKS]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| panic!("{CHUNKS} slots"))
}

pub(crate) fn segs_from(v: Vec<Arc<Segment>>) -> [Arc<Segment>; SEGS] {
    v.try_into()
        .unwrap_or_else(|_| panic!("exactly {SEGS} segments"))
}

impl<A: Address> Table<A> {
    /// Builds a table from routes. A prefix given twice keeps its last next hop.
    pub fn from_routes(routes: &[(Prefix<A>, NextHop)]) -> Self {
        let canon = canonical(routes);
        let n = canon.len();
        let all = node::sweep(canon, 0, A::MAX);
        Self::from_intervals(&all, n)
    }

    /// Builds from canonical intervals over the whole address space.
    pub(crate) fn from_intervals(all: &[(u128, u32)], routes: usize) -> Self {
        let chunk_bits = A::BITS - 16;
        let mut segs = Vec::with_capacity(SEGS);
        let mut top = new_top();
        let mut p = 0usize; // first interval starting after the current chunk's start
        let mut iv: Intervals = Vec::new();
        for s in 0..SEGS {
            let mut sb = SegmentBuilder::new();
            for i in 0..SEG_SLOTS {
                let c = (s * SEG_SLOTS + i) as u128;
                let lo = c << chunk_bits;
                let hi = lo | ((1u128 << chunk_bits) - 1);
                while p < all.len() && all[p].0 <= lo {
                    p += 1;
                }
                iv.clear();
                iv.push((lo, all[p - 1].1));
                let mut q = p;
                while q < all.len() && all[q].0 <= hi {
                    iv.push(all[q]);
                    q += 1;
                }
                sb.chunk(i, &build_chunk::<A>(&iv, lo));
            }
            let (slots, seg) = sb.finish();
            top[s * SEG_SLOTS..(s + 1) * SEG_SLOTS].copy_from_slice(&slots);
            segs.push(Arc::new(seg));
        }
        Table {
            top,
            segs: segs_from(segs),
            routes,
            _family: std::marker::PhantomData,
        }
    }

    /// Number of distinct prefixes in the table.
    pub fn routes(&self) -> usize {
        self.routes
    }

    /// Bytes of lookup structure: top level, segment pointers, nodes and padding.
    /// Segments shared with another table are counted in full here.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + size_of::<[u32; CHUNKS]>()
            + self
                .segs
                .iter()
                .map(|s| s.bytes() + 2 * size_of::<usize>())
                .sum::<usize>()
    }

    /// Range nodes in use and the total number of node entries (for reports).
    pub fn node_stats(&self) -> (usize, usize) {
        let mut nodes = 0;
        let mut words = 0;
        nodes += self.top.iter().filter(|&&t| t & NODE != 0).count();
        for s in self.segs.iter() {
            words += s.blob.len() - PAD;
        }
        (nodes, words)
    }
}

#[inline(always)]
pub(crate) fn decode(v: u32) -> Option<NextHop> {
    if v == NO_ROUTE {
        None
    } else {
        Some(NextHop(v))
    }
}

/// Addresses resolved per group in the batched lookups.
const GROUP: usize = 16;

impl Table<u32> {
    /// Longest-prefix match for one IPv4 address.
    // `always`: without it LLVM keeps this as a call in callers' loops, and the
    // call costs as much as the top-level read it wraps.
    #[inline(always)]
    pub fn lookup(&self, addr: u32) -> Option<NextHop> {
        let slot = self.top[(addr >> 16) as usize];
        let seg = &self.segs[(addr >> 24) as usize];
        let v = if slot & NODE == 0 {
            slot
        } else {
            node::search(&seg.blob, (slot & !NODE) as usize, addr as u16)
        };
        decode(v)
    }

    /// Longest-prefix match for a burst of IPv4 addresses (`out[i]` for `addrs[i]`).
    ///
    /// Works in groups of 16 and in stages: first every top-level slot of the
    /// group, then every node search, so that the cache misses of one address
    /// overlap with the work on the others instead of queueing behind it.
    ///
    /// # Panics
    /// If `out` is shorter than `addrs`.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<NextHop>]) {
        assert!(out.len() >= addrs.len(), "out shorter than addrs");
        for (a, o) in addrs.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            let mut slot = [0u32; GROUP];
            for (s, &x) in slot.iter_mut().zip(a) {
                *s = self.top[(x >> 16) as usize];
            }
            for ((s, &x), r) in slot.iter().zip(a).zip(o.iter_mut()) {
                let v = if s & NODE == 0 {
                    *s
                } else {
                    node::search(
                        &self.segs[(x >> 24) as usize].blob,
                        (s & !NODE) as usize,
                        x as u16,
                    )
                };
                *r = decode(v);
            }
        }
    }
}

impl Table<u128> {
    /// Longest-prefix match for one IPv6 address.
    #[inline(always)]
    pub fn lookup(&self, addr: u128) -> Option<NextHop> {
        let slot = self.top[(addr >> 112) as usize];
        if slot & NODE == 0 {
            return decode(slot);
        }
        decode(descend6(
            &self.segs[(addr >> 120) as usize].blob,
            (slot & !NODE) as usize,
            addr,
        ))
    }

    /// Longest-prefix match for a burst of IPv6 addresses (`out[i]` for `addrs[i]`),
    /// staged like [`Table::<u32>::lookup_batch`].
    ///
    /// # Panics
    /// If `out` is shorter than `addrs`.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<NextHop>]) {
        assert!(out.len() >= addrs.len(), "out shorter than addrs");
        for (a, o) in addrs.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            let mut slot = [0u32; GROUP];
            for (s, &x) in slot.iter_mut().zip(a) {
                *s = self.top[(x >> 112) as usize];
            }
            for ((s, &x), r) in slot.iter().zip(a).zip(o.iter_mut()) {
                let v = if s & NODE == 0 {
                    *s
                } else {
                    descend6(
                        &self.segs[(x >> 120) as usize].blob,
                        (s & !NODE) as usize,
                        x,
                    )
                };
                *r = decode(v);
            }
        }
    }
}

/// The node levels of an IPv6 lookup: out of line, so that the top-level fast
/// path (most destinations) stays small enough to inline.
#[inline(never)]
fn descend6(blob: &[u16], root: usize, addr: u128) -> u32 {
    let mut off = root;
    let mut shift = 96u32;
    loop {
        let v = node::search(blob, off, (addr >> shift) as u16);
        if v & NODE == 0 || shift == 0 {
            return v;
        }
        off = root + (v & !NODE) as usize;
        shift -= 16;
    }
}
