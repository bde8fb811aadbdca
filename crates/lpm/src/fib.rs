//! Updates while forwarding: a writer changes routes, readers keep looking up.
//!
//! Readers load the current [`Table`] from an `ArcSwap` (a few atomic operations,
//! never a lock, never a wait on the writer) and look up in it for as long as they
//! hold it. The writer keeps the authoritative route set, rebuilds only the
//! top-level chunks an update touches, copies the top level and the one segment
//! each chunk's nodes live in (copy-on-write; the other segments are shared by
//! `Arc`) and publishes the
//! new table with a single atomic pointer swap. A reader therefore sees either the
//! table before an update or the one after it, never a mix; the old table is
//! freed when its last reader drops it (RCU with reference counts instead of grace
//! periods, and without `unsafe`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::{ArcSwap, Guard};

use crate::node;
use crate::table::{
    build_chunk, host_mask, segs_from, Chunk, SegmentBuilder, Table, CHUNKS, SEG_SLOTS,
};
use crate::{Address, NextHop, Prefix};

/// One route change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update<A: Address> {
    /// Add the prefix, or change its next hop.
    Insert(Prefix<A>, NextHop),
    /// Withdraw the prefix (no effect if absent).
    Remove(Prefix<A>),
}

/// A forwarding table that can change while other threads look up in it.
pub struct Fib<A: Address> {
    current: ArcSwap<Table<A>>,
    /// The route set, keyed by (first address, length). Only the writer takes it.
    routes: Mutex<BTreeMap<(u128, u8), u32>>,
}

/// IPv4 [`Fib`].
pub type Fib4 = Fib<u32>;
/// IPv6 [`Fib`].
pub type Fib6 = Fib<u128>;

impl<A: Address> std::fmt::Debug for Fib<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fib")
            .field("table", &*self.current.load())
            .finish()
    }
}

impl<A: Address> Fib<A> {
    /// A FIB holding `routes` (a prefix given twice keeps its last next hop).
    pub fn new(routes: &[(Prefix<A>, NextHop)]) -> Self {
        let table = Table::from_routes(routes);
        let map: BTreeMap<(u128, u8), u32> = routes
            .iter()
            .map(|(p, nh)| ((p.first_u128(), p.len()), nh.get()))
            .collect();
        Fib {
            current: ArcSwap::from_pointee(table),
            routes: Mutex::new(map),
        }
    }

    /// The current table, for a burst of lookups. Cheap and wait-free in the
    /// common case; hold it only for the burst, so old tables can be freed.
    pub fn load(&self) -> Guard<Arc<Table<A>>> {
        self.current.load()
    }

    /// The current table as an owned `Arc` (for holding it longer).
    pub fn snapshot(&self) -> Arc<Table<A>> {
        self.current.load_full()
    }

    /// Number of routes.
    pub fn routes(&self) -> usize {
        self.current.load().routes()
    }

    /// Adds or replaces a route; returns the previous next hop of that prefix.
    pub fn insert(&self, prefix: Prefix<A>, nh: NextHop) -> Option<NextHop> {
        self.apply_inner(&[Update::Insert(prefix, nh)])
            .pop()
            .flatten()
    }

    /// Withdraws a route; returns its next hop if it was present.
    pub fn remove(&self, prefix: Prefix<A>) -> Option<NextHop> {
        self.apply_inner(&[Update::Remove(prefix)]).pop().flatten()
    }

    /// Applies a batch of updates in order and publishes once. Returns how many
    /// changed the route set. Readers see the table before or after the whole
    /// batch.
    pub fn apply(&self, updates: &[Update<A>]) -> usize {
        let before = self.apply_inner(updates);
        updates
            .iter()
            .zip(before)
            .filter(|(u, b)| match u {
                Update::Insert(_, nh) => *b != Some(*nh),
                Update::Remove(_) => b.is_some(),
            })
            .count()
    }

    fn apply_inner(&self, updates: &[Update<A>]) -> Vec<Option<NextHop>> {
        let mut map = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut dirty = vec![false; CHUNKS];
        let mut any = false;
        let mut before = Vec::with_capacity(updates.len());
        let chunk_shift = A::BITS - 16;
        for u in updates {
            let (p, old, changed) = match *u {
                Update::Insert(p, nh) => {
                    let old = map.insert((p.first_u128(), p.len()), nh.get());
                    (p, old, old != Some(nh.get()))
                }
                Update::Remove(p) => {
                    let old = map.remove(&(p.first_u128(), p.len()));
                    (p, old, old.is_some())
                }
            };
            before.push(old.map(NextHop));
            if changed {
                any = true;
                let first = (p.first_u128() >> chunk_shift) as usize;
                let last = (p.last().widen() >> chunk_shift) as usize;
                dirty[first..=last].iter_mut().for_each(|d| *d = true);
            }
        }
        if !any {
            return before;
        }
        let old = self.current.load_full();
        let mut segs: Vec<_> = old.segs.to_vec();
        let mut top = old.top.clone();
        for (s, seg) in segs.iter_mut().enumerate() {
            let range = s * SEG_SLOTS..(s + 1) * SEG_SLOTS;
            if !dirty[range.clone()].iter().any(|&d| d) {
                continue;
            }
            let mut sb = SegmentBuilder::new();
            let slots = &old.top[range.clone()];
            let ends = seg.node_ends(slots);
            for (i, c) in range.enumerate() {
                if dirty[c] {
                    sb.chunk(i, &chunk_from_map::<A>(&map, c));
                } else if slots[i] & node::NODE == 0 {
                    sb.leaf(i, slots[i]);
                } else {
                    sb.node(i, seg.chunk_words(slots[i], i, &ends));
                }
            }
            let (new_slots, new_seg) = sb.finish();
            top[s * SEG_SLOTS..(s + 1) * SEG_SLOTS].copy_from_slice(&new_slots);
            *seg = Arc::new(new_seg);
        }
        let table = Table {
            top,
            segs: segs_from(segs),
            routes: map.len(),
            _family: std::marker::PhantomData,
        };
        self.current.store(Arc::new(table));
        before
    }
}

/// Rebuilds top-level chunk `c` from the route set.
fn chunk_from_map<A: Address>(map: &BTreeMap<(u128, u8), u32>, c: usize) -> Chunk {
    let shift = A::BITS - 16;
    let lo = (c as u128) << shift;
    let hi = lo | ((1u128 << shift) - 1);
    // Prefixes shorter than a chunk that cover it, shortest first (at most 16).
    let covering = (0u8..16).filter_map(|len| {
        let first = lo & !host_mask(A::BITS, len) & A::MAX;
        map.get(&(first, len))
            .map(|&v| (first, first | host_mask(A::BITS, len), v))
    });
    let inside = map
        .range((lo, 16u8)..=(hi, A::BITS as u8))
        .map(|(&(first, len), &v)| (first, first | host_mask(A::BITS, len), v));
    let iv = node::sweep(covering.chain(inside), lo, hi);
    build_chunk::<A>(&iv, lo)
}
