//! The updatable FIB: one writer changes routes, readers keep looking up.
//!
//! A [`Snapshot`] is immutable and holds everything a lookup needs: the IPv4
//! table, the IPv6 table and the next-hop table their leaves index. The
//! [`FibWriter`] publishes a new snapshot with one atomic pointer swap
//! (`arc-swap`); a [`FibReader`] loads the current one, without a lock and
//! without waiting for the writer, once per burst of lookups. A reader therefore
//! never sees a route whose next hop is missing, nor one family updated and the
//! other not; an old snapshot is freed when its last reader drops it (RCU with
//! reference counts instead of grace periods, and without `unsafe`).
//!
//! # Writer: private route sets, coalesced publication
//!
//! The writer keeps the route set of each family (a `BTreeMap`, prefixes shorter
//! than a top-level chunk apart), the next hops with a reference count each, and
//! the set of top-level chunks changed since the last publication. An update
//! costs a map insert and a few flags. Publication rebuilds only the changed
//! chunks from the route set, copies the top level (256 KiB) and the segments
//! they live in, and shares every other segment with the previous table
//! (copy-on-write). That costs tens of microseconds to milliseconds (a big IPv6
//! chunk such as 2001::/16 holds 23 000 routes), too much to do per update at
//! 100 000 updates per second, so publications are coalesced:
//!
//! * [`FibWriter::apply`] publishes once after the whole batch (readers see the
//!   FIB before or after it, never in between);
//! * [`FibWriter::insert`]/[`FibWriter::remove`] publish when the oldest
//!   unpublished change is at least `max_delay` old ([`DEFAULT_MAX_DELAY`];
//!   [`FibWriter::set_max_delay`]`(Duration::ZERO)` publishes every change);
//! * [`FibWriter::flush`] publishes now; the writer's owner calls it when its
//!   input goes idle (the end of a burst of updates), and dropping the writer
//!   flushes.
//!
//! **Visibility bound**: an update is seen by every reader that loads after
//! `flush` or `apply` returns; while updates keep arriving, at most `max_delay`
//! plus one publication (the writer measures both, [`FibWriter::stats`]) after
//! it was made.
//!
//! # Next hops
//!
//! Leaves hold a [`NextHop`] index into the snapshot's next-hop table, interned
//! from the caller's values `N`: one entry per distinct next hop, with a count of
//! the routes using it. When the count drops to zero the entry is freed and its
//! index reused by a later next hop; the previous snapshot keeps its own copy of
//! the table (pages of 256 entries, shared between snapshots unless changed), so
//! a reader holding it still resolves every index it can find.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, Guard};

use crate::node;
use crate::table::{build_chunk, host_mask, Chunk, SegmentBuilder, Table, CHUNKS, SEGS, SEG_SLOTS};
use crate::{Address, IpPrefix, Lpm4, Lpm6, LpmError, NextHop, Prefix};

/// Default bound on how long [`FibWriter::insert`]/[`FibWriter::remove`] leave a
/// change unpublished while more changes arrive.
/// 10 ms: at 100 000 updates/s a publication then carries ~1 000 changes, which
/// amortises the top-level copy and the segment copies (`docs/results/lpm.md`,
/// "Route churn").
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(10);

/// Next hops per page of a snapshot's next-hop table.
const PAGE: usize = 256;

/// One route change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update<N> {
    /// Add the prefix, or change its next hop.
    Insert(IpPrefix, N),
    /// Withdraw the prefix (no effect if absent).
    Remove(IpPrefix),
}

/// Everything a lookup needs, immutable: both families' tables and the next hops
/// their leaves index.
pub struct Snapshot<N> {
    v4: Arc<Lpm4>,
    v6: Arc<Lpm6>,
    hops: Vec<Arc<[Option<N>]>>,
    hops_in_use: usize,
}

impl<N> std::fmt::Debug for Snapshot<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("v4", &*self.v4)
            .field("v6", &*self.v6)
            .field("next_hops", &self.hops_in_use)
            .finish()
    }
}

impl<N: Copy> Snapshot<N> {
    /// The IPv4 table.
    pub fn v4(&self) -> &Lpm4 {
        &self.v4
    }

    /// The IPv6 table.
    pub fn v6(&self) -> &Lpm6 {
        &self.v6
    }

    /// The next hop behind a table's answer.
    #[inline(always)]
    pub fn next_hop(&self, nh: NextHop) -> Option<N> {
        let i = nh.get() as usize;
        self.hops.get(i / PAGE)?.get(i % PAGE).copied().flatten()
    }

    /// Longest-prefix match for an IPv4 address (`u32`, most significant bit first).
    #[inline(always)]
    pub fn lookup4(&self, a: u32) -> Option<N> {
        self.next_hop(self.v4.lookup(a)?)
    }

    /// Longest-prefix match for an IPv6 address (`u128`).
    #[inline(always)]
    pub fn lookup6(&self, a: u128) -> Option<N> {
        self.next_hop(self.v6.lookup(a)?)
    }

    /// Longest-prefix match for an IPv4 destination.
    #[inline]
    pub fn lookup_v4(&self, a: Ipv4Addr) -> Option<N> {
        self.lookup4(u32::from(a))
    }

    /// Longest-prefix match for an IPv6 destination.
    #[inline]
    pub fn lookup_v6(&self, a: Ipv6Addr) -> Option<N> {
        self.lookup6(u128::from(a))
    }

    /// Longest-prefix match for either family.
    pub fn lookup(&self, a: IpAddr) -> Option<N> {
        match a {
            IpAddr::V4(a) => self.lookup_v4(a),
            IpAddr::V6(a) => self.lookup_v6(a),
        }
    }

    /// Routes held: (IPv4, IPv6).
    pub fn len(&self) -> (usize, usize) {
        (self.v4.routes(), self.v6.routes())
    }

    /// True when no route is held.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }

    /// Distinct next hops in the next-hop table (those some route uses).
    pub fn next_hops(&self) -> usize {
        self.hops_in_use
    }
}

/// A loaded snapshot, held for a burst ([`FibReader::load`]).
pub type SnapshotGuard<N> = Guard<Arc<Snapshot<N>>>;

/// A handle that loads the current [`Snapshot`]; clone one per reader thread.
pub struct FibReader<N> {
    shared: Arc<ArcSwap<Snapshot<N>>>,
}

impl<N> Clone for FibReader<N> {
    fn clone(&self) -> Self {
        FibReader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<N> std::fmt::Debug for FibReader<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FibReader")
            .field("snapshot", &**self.shared.load())
            .finish()
    }
}

impl<N> FibReader<N> {
    /// The current snapshot, for a burst of lookups: a few atomic operations,
    /// never a lock, never a wait on the writer. Hold it only for the burst, so
    /// that old snapshots can be freed.
    #[inline]
    pub fn load(&self) -> SnapshotGuard<N> {
        self.shared.load()
    }

    /// The current snapshot as an owned `Arc` (for holding it longer).
    pub fn snapshot(&self) -> Arc<Snapshot<N>> {
        self.shared.load_full()
    }
}

/// What the writer has done so far (for benchmarks and the visibility bound).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Snapshots published.
    pub publications: u64,
    /// The longest a publication took (rebuild and swap).
    pub longest_publication: Duration,
    /// The longest a change waited from being made to being published: the
    /// observed visibility bound.
    pub longest_wait: Duration,
}

/// The single writer of a FIB: changes routes privately and publishes
/// [`Snapshot`]s (see the module documentation for when).
pub struct FibWriter<N: Copy + Eq + Hash> {
    v4: Routes<u32>,
    v6: Routes<u128>,
    hops: NextHops<N>,
    shared: Arc<ArcSwap<Snapshot<N>>>,
    max_delay: Duration,
    /// When the oldest unpublished change was made.
    pending_since: Option<Instant>,
    stats: WriterStats,
}

impl<N: Copy + Eq + Hash + std::fmt::Debug> std::fmt::Debug for FibWriter<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FibWriter")
            .field("routes", &(self.v4.len(), self.v6.len()))
            .field("next_hops", &self.hops.index.len())
            .field("max_delay", &self.max_delay)
            .field("pending", &self.pending_since.is_some())
            .field("stats", &self.stats)
            .finish()
    }
}

impl<N: Copy + Eq + Hash> Default for FibWriter<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N: Copy + Eq + Hash> Drop for FibWriter<N> {
    fn drop(&mut self) {
        self.flush();
    }
}

impl<N: Copy + Eq + Hash> FibWriter<N> {
    /// An empty FIB, already published.
    pub fn new() -> Self {
        let v4 = Routes::new();
        let v6 = Routes::new();
        let snap = Snapshot {
            v4: Arc::clone(&v4.table),
            v6: Arc::clone(&v6.table),
            hops: Vec::new(),
            hops_in_use: 0,
        };
        FibWriter {
            v4,
            v6,
            hops: NextHops::default(),
            shared: Arc::new(ArcSwap::from_pointee(snap)),
            max_delay: DEFAULT_MAX_DELAY,
            pending_since: None,
            stats: WriterStats::default(),
        }
    }

    /// A FIB holding `routes` (a prefix given twice keeps its last next hop),
    /// built in one pass and published.
    pub fn with_routes(routes: &[(IpPrefix, N)]) -> Result<Self, LpmError> {
        let mut w = Self::new();
        let (mut r4, mut r6) = (Vec::new(), Vec::new());
        for &(p, nh) in routes {
            let i = w.hops.acquire(nh)?;
            match p {
                IpPrefix::V4(p) => r4.push((p, i)),
                IpPrefix::V6(p) => r6.push((p, i)),
            }
        }
        w.v4.fill(r4, &mut w.hops);
        w.v6.fill(r6, &mut w.hops);
        w.pending_since = Some(Instant::now());
        w.flush();
        // The statistics describe updates, not the initial build.
        w.stats = WriterStats::default();
        Ok(w)
    }

    /// A reader of this FIB.
    pub fn reader(&self) -> FibReader<N> {
        FibReader {
            shared: Arc::clone(&self.shared),
        }
    }

    /// How long a change made by [`FibWriter::insert`]/[`FibWriter::remove`] may
    /// stay unpublished while more changes arrive; zero publishes every change.
    pub fn set_max_delay(&mut self, d: Duration) {
        self.max_delay = d;
    }

    /// Publications since construction (the initial build of
    /// [`FibWriter::with_routes`] not counted) and how long they and the changes
    /// waited.
    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Routes in the writer's route set (published or not): (IPv4, IPv6).
    pub fn len(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// True when the route set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }

    /// The writer's next hop for exactly `prefix` (published or not).
    pub fn get(&self, prefix: IpPrefix) -> Option<N> {
        let v = match prefix {
            IpPrefix::V4(p) => self.v4.get(p),
            IpPrefix::V6(p) => self.v6.get(p),
        }?;
        self.hops.get(v)
    }

    /// The routes in prefix order (IPv4 first), with their next hops.
    pub fn routes(&self) -> impl Iterator<Item = (IpPrefix, N)> + '_ {
        let v4 = self.v4.iter().map(|(p, v)| (IpPrefix::V4(p), v));
        let v6 = self.v6.iter().map(|(p, v)| (IpPrefix::V6(p), v));
        v4.chain(v6)
            .filter_map(|(p, v)| Some((p, self.hops.get(v)?)))
    }

    /// True if changes are waiting to be published.
    pub fn is_pending(&self) -> bool {
        self.pending_since.is_some()
    }

    /// Adds or replaces a route; returns the next hop it replaced. Published
    /// within the bound of the module documentation.
    pub fn insert(&mut self, prefix: IpPrefix, nh: N) -> Result<Option<N>, LpmError> {
        let (old, changed) = self.insert_private(prefix, nh)?;
        if changed {
            self.changed();
        }
        Ok(old)
    }

    /// Withdraws a route; returns its next hop if it was present. Published
    /// within the bound of the module documentation.
    pub fn remove(&mut self, prefix: IpPrefix) -> Option<N> {
        let old = self.remove_private(prefix);
        if old.is_some() {
            self.changed();
        }
        old
    }

    /// Applies a batch of updates in order and publishes once (also anything
    /// still pending). Returns how many changed the route set. On an error, the
    /// updates before the failing one are applied and published.
    pub fn apply(&mut self, updates: &[Update<N>]) -> Result<usize, LpmError> {
        let mut changed = 0;
        let mut result = Ok(());
        for u in updates {
            match *u {
                Update::Insert(p, nh) => match self.insert_private(p, nh) {
                    Ok((_, c)) => changed += usize::from(c),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                },
                Update::Remove(p) => changed += usize::from(self.remove_private(p).is_some()),
            }
        }
        if changed > 0 {
            self.pending_since.get_or_insert_with(Instant::now);
        }
        self.flush();
        result.map(|()| changed)
    }

    /// Publishes every pending change now; returns whether there were any.
    pub fn flush(&mut self) -> bool {
        let Some(since) = self.pending_since.take() else {
            return false;
        };
        let t0 = Instant::now();
        let snap = Snapshot {
            v4: self.v4.build(),
            v6: self.v6.build(),
            hops: self.hops.publish(),
            hops_in_use: self.hops.index.len(),
        };
        self.shared.store(Arc::new(snap));
        let done = Instant::now();
        self.stats.publications += 1;
        self.stats.longest_publication = self.stats.longest_publication.max(done - t0);
        self.stats.longest_wait = self
            .stats
            .longest_wait
            .max(done.saturating_duration_since(since));
        true
    }

    /// Records a change and publishes if the oldest pending one is due.
    fn changed(&mut self) {
        let now = Instant::now();
        let since = *self.pending_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= self.max_delay {
            self.flush();
        }
    }

    /// (previous next hop, whether the route set changed).
    fn insert_private(&mut self, prefix: IpPrefix, nh: N) -> Result<(Option<N>, bool), LpmError> {
        let i = self.hops.acquire(nh)?;
        let old = match prefix {
            IpPrefix::V4(p) => self.v4.insert(p, i),
            IpPrefix::V6(p) => self.v6.insert(p, i),
        };
        let before = old.and_then(|o| self.hops.get(o));
        if let Some(o) = old {
            self.hops.release(o);
        }
        Ok((before, old != Some(i)))
    }

    fn remove_private(&mut self, prefix: IpPrefix) -> Option<N> {
        let old = match prefix {
            IpPrefix::V4(p) => self.v4.remove(p),
            IpPrefix::V6(p) => self.v6.remove(p),
        }?;
        let nh = self.hops.get(old);
        self.hops.release(old);
        nh
    }
}

/// The writer's interned next hops with reference counts, and the pages of the
/// last published table.
struct NextHops<N> {
    /// Index → (next hop, routes using it); `None` once freed.
    slots: Vec<Option<(N, u32)>>,
    index: HashMap<N, u32>,
    free: Vec<u32>,
    published: Vec<Arc<[Option<N>]>>,
    /// Pages changed since the last publication.
    dirty: Vec<bool>,
}

impl<N> Default for NextHops<N> {
    fn default() -> Self {
        NextHops {
            slots: Vec::new(),
            index: HashMap::new(),
            free: Vec::new(),
            published: Vec::new(),
            dirty: Vec::new(),
        }
    }
}

impl<N: Copy + Eq + Hash> NextHops<N> {
    fn get(&self, i: u32) -> Option<N> {
        self.slots.get(i as usize)?.map(|(n, _)| n)
    }

    fn touch(&mut self, i: u32) {
        let p = i as usize / PAGE;
        if self.dirty.len() <= p {
            self.dirty.resize(p + 1, false);
        }
        self.dirty[p] = true;
    }

    /// The index of `nh`, counting one more route that uses it.
    fn acquire(&mut self, nh: N) -> Result<u32, LpmError> {
        if let Some(&i) = self.index.get(&nh) {
            if let Some((_, refs)) = &mut self.slots[i as usize] {
                *refs += 1;
            }
            return Ok(i);
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).map_err(|_| LpmError::NextHopTableFull)?;
                if i > NextHop::MAX {
                    return Err(LpmError::NextHopTableFull);
                }
                self.slots.push(None);
                i
            }
        };
        self.slots[i as usize] = Some((nh, 1));
        self.index.insert(nh, i);
        self.touch(i);
        Ok(i)
    }

    /// One route fewer uses index `i`; frees it when none does.
    fn release(&mut self, i: u32) {
        let Some(Some((nh, refs))) = self.slots.get_mut(i as usize) else {
            return;
        };
        *refs -= 1;
        if *refs == 0 {
            let nh = *nh;
            self.slots[i as usize] = None;
            self.index.remove(&nh);
            self.free.push(i);
            self.touch(i);
        }
    }

    /// The pages for a new snapshot: changed ones copied, the rest shared.
    fn publish(&mut self) -> Vec<Arc<[Option<N>]>> {
        let pages = self.slots.len().div_ceil(PAGE);
        for p in 0..pages {
            if p < self.published.len() && !self.dirty.get(p).copied().unwrap_or(false) {
                continue;
            }
            let end = ((p + 1) * PAGE).min(self.slots.len());
            let page: Arc<[Option<N>]> = self.slots[p * PAGE..end]
                .iter()
                .map(|s| s.map(|(n, _)| n))
                .collect();
            if p < self.published.len() {
                self.published[p] = page;
            } else {
                self.published.push(page);
            }
        }
        self.dirty.iter_mut().for_each(|d| *d = false);
        self.published.clone()
    }
}

/// One family's route set on the writer's side, the chunks changed since the
/// last build, and the last table built.
struct Routes<A: Address> {
    /// Prefixes of at least 16 bits (inside one top-level chunk), by (address, length).
    long: BTreeMap<(A, u8), u32>,
    /// Prefixes shorter than 16 bits (covering whole chunks): few, kept apart so
    /// that finding a chunk's covering routes does not search the big map.
    short: BTreeMap<(A, u8), u32>,
    /// Changed top-level chunks, how many, and segments holding any.
    dirty: Vec<bool>,
    dirty_chunks: usize,
    dirty_segs: Vec<bool>,
    table: Arc<Table<A>>,
}

impl<A: Address> Routes<A> {
    fn new() -> Self {
        Routes {
            long: BTreeMap::new(),
            short: BTreeMap::new(),
            dirty: vec![false; CHUNKS],
            dirty_chunks: 0,
            dirty_segs: vec![false; SEGS],
            table: Arc::new(Table::from_routes(&[])),
        }
    }

    fn len(&self) -> usize {
        self.long.len() + self.short.len()
    }

    /// Fills an empty route set from `routes` (index values acquired from `hops`;
    /// a prefix given twice keeps its last value and releases the others) and
    /// marks everything for a rebuild. The maps are bulk-built from sorted input,
    /// so their nodes are full: half the memory of inserting in address order.
    fn fill<N: Copy + Eq + Hash>(
        &mut self,
        mut routes: Vec<(Prefix<A>, u32)>,
        hops: &mut NextHops<N>,
    ) {
        debug_assert!(self.len() == 0);
        if routes.is_empty() {
            return;
        }
        // Stable: equal prefixes stay in the order given, so the last one wins.
        routes.sort_by_key(|&(p, _)| (p.addr(), p.len()));
        let mut kept: Vec<(Prefix<A>, u32)> = Vec::with_capacity(routes.len());
        for (p, i) in routes {
            match kept.last_mut() {
                Some(last) if last.0 == p => hops.release(std::mem::replace(&mut last.1, i)),
                _ => kept.push((p, i)),
            }
        }
        let entry = |&(p, i): &(Prefix<A>, u32)| ((p.addr(), p.len()), i);
        self.short = kept.iter().filter(|r| r.0.len() < 16).map(entry).collect();
        self.long = kept.iter().filter(|r| r.0.len() >= 16).map(entry).collect();
        self.dirty.iter_mut().for_each(|d| *d = true);
        self.dirty_segs.iter_mut().for_each(|d| *d = true);
        self.dirty_chunks = CHUNKS;
    }

    fn map(&mut self, len: u8) -> &mut BTreeMap<(A, u8), u32> {
        if len < 16 {
            &mut self.short
        } else {
            &mut self.long
        }
    }

    fn get(&self, p: Prefix<A>) -> Option<u32> {
        let m = if p.len() < 16 {
            &self.short
        } else {
            &self.long
        };
        m.get(&(p.addr(), p.len())).copied()
    }

    fn iter(&self) -> impl Iterator<Item = (Prefix<A>, u32)> + '_ {
        // Merge the two maps back into (address, length) order.
        let mut short = self.short.iter().peekable();
        let mut long = self.long.iter().peekable();
        std::iter::from_fn(move || {
            let take_short = match (short.peek(), long.peek()) {
                (Some(s), Some(l)) => s.0 <= l.0,
                (s, _) => s.is_some(),
            };
            let (&(a, len), &v) = if take_short {
                short.next()
            } else {
                long.next()
            }?;
            Some((Prefix::new(a, len).ok()?, v))
        })
    }

    fn insert(&mut self, p: Prefix<A>, v: u32) -> Option<u32> {
        let old = self.map(p.len()).insert((p.addr(), p.len()), v);
        if old != Some(v) {
            self.mark(p);
        }
        old
    }

    fn remove(&mut self, p: Prefix<A>) -> Option<u32> {
        let old = self.map(p.len()).remove(&(p.addr(), p.len()));
        if old.is_some() {
            self.mark(p);
        }
        old
    }

    fn mark(&mut self, p: Prefix<A>) {
        let shift = A::BITS - 16;
        let first = (p.first().widen() >> shift) as usize;
        let last = (p.last().widen() >> shift) as usize;
        for d in &mut self.dirty[first..=last] {
            self.dirty_chunks += usize::from(!*d);
            *d = true;
        }
        self.dirty_segs[first / SEG_SLOTS..=last / SEG_SLOTS]
            .iter_mut()
            .for_each(|d| *d = true);
    }

    /// The table with every changed chunk rebuilt; shares unchanged segments with
    /// the previous one.
    fn build(&mut self) -> Arc<Table<A>> {
        if self.dirty_chunks == 0 {
            return Arc::clone(&self.table);
        }
        if self.dirty_chunks > CHUNKS / 8 {
            // A route file or a short prefix: one sweep over the whole route set
            // is cheaper than thousands of chunk rebuilds.
            let all: Vec<(Prefix<A>, NextHop)> =
                self.iter().map(|(p, v)| (p, NextHop(v))).collect();
            self.table = Arc::new(Table::from_routes(&all));
            self.dirty.iter_mut().for_each(|d| *d = false);
            self.dirty_segs.iter_mut().for_each(|d| *d = false);
            self.dirty_chunks = 0;
            return Arc::clone(&self.table);
        }
        self.dirty_chunks = 0;
        let old = &self.table;
        let mut top = old.top.clone();
        let mut segs = old.segs.clone();
        for (s, seg) in segs.iter_mut().enumerate() {
            if !std::mem::take(&mut self.dirty_segs[s]) {
                continue;
            }
            let range = s * SEG_SLOTS..(s + 1) * SEG_SLOTS;
            let mut sb = SegmentBuilder::new();
            let slots = &old.top[range.clone()];
            let ends = seg.node_ends(slots);
            for (i, c) in range.enumerate() {
                if std::mem::take(&mut self.dirty[c]) {
                    sb.chunk(i, &self.chunk(c));
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
        self.table = Arc::new(Table {
            top,
            segs,
            routes: self.len(),
            _family: std::marker::PhantomData,
        });
        Arc::clone(&self.table)
    }

    /// Rebuilds top-level chunk `c` from the route set.
    fn chunk(&self, c: usize) -> Chunk {
        let shift = A::BITS - 16;
        let lo = (c as u128) << shift;
        let hi = lo | ((1u128 << shift) - 1);
        // Prefixes shorter than a chunk that cover it, shortest first (at most 16).
        let covering = (0u8..16).filter_map(|len| {
            let first = lo & !host_mask(A::BITS, len) & A::MAX;
            self.short
                .get(&(A::narrow(first), len))
                .map(|&v| (first, first | host_mask(A::BITS, len), v))
        });
        let inside = self
            .long
            .range((A::narrow(lo), 16u8)..=(A::narrow(hi), A::BITS as u8))
            .map(|(&(a, len), &v)| {
                let first = a.widen();
                (first, first | host_mask(A::BITS, len), v)
            });
        let iv = node::sweep(covering.chain(inside), lo, hi);
        build_chunk::<A>(&iv, lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IpPrefix {
        s.parse().expect("prefix")
    }

    #[test]
    fn unreferenced_next_hops_are_freed_and_their_index_reused() {
        let mut w: FibWriter<char> = FibWriter::new();
        w.apply(&[
            Update::Insert(p("10.0.0.0/8"), 'a'),
            Update::Insert(p("10.1.0.0/16"), 'a'),
            Update::Insert(p("2001:db8::/32"), 'b'),
        ])
        .unwrap();
        let old = w.reader().snapshot();
        assert_eq!(old.next_hops(), 2);
        let a = old.v4().lookup(0x0a01_0203).expect("routed");
        assert_eq!(old.next_hop(a), Some('a'));
        // Re-point one route: 'a' is still used by the other.
        w.apply(&[Update::Insert(p("10.1.0.0/16"), 'b')]).unwrap();
        assert_eq!(w.reader().load().next_hops(), 2);
        // Withdraw the last route via 'a': its entry is gone from the new snapshot.
        w.apply(&[Update::Remove(p("10.0.0.0/8"))]).unwrap();
        let s = w.reader().snapshot();
        assert_eq!(s.next_hops(), 1);
        assert_eq!(s.next_hop(a), None, "freed entry still resolves");
        assert!(!w.hops.index.contains_key(&'a'));
        // A new next hop takes the freed index; the old snapshot still resolves
        // its own routes through its own copy of the table.
        w.apply(&[Update::Insert(p("192.0.2.0/24"), 'c')]).unwrap();
        let s = w.reader().snapshot();
        assert_eq!(s.next_hop(a), Some('c'));
        assert_eq!(s.lookup4(0xc000_0201), Some('c'));
        assert_eq!(s.next_hops(), 2);
        assert_eq!(old.lookup4(0x0a01_0203), Some('a'));
        assert_eq!(w.hops.slots.len(), 2, "the index was reused, not a new one");
    }

    #[test]
    fn with_routes_keeps_the_last_of_a_duplicate_and_frees_the_others_next_hop() {
        let w = FibWriter::with_routes(&[
            (p("10.0.0.0/8"), 'a'),
            (p("10.0.0.0/24"), 'b'),
            (p("10.0.0.0/8"), 'c'),
            (p("::/0"), 'b'),
        ])
        .unwrap();
        let s = w.reader().snapshot();
        assert_eq!(s.len(), (2, 1));
        assert_eq!(s.lookup4(0x0a01_0000), Some('c'));
        assert_eq!(s.lookup4(0x0a00_0001), Some('b'));
        assert_eq!(s.next_hops(), 2, "'a' is used by no route");
        assert_eq!(w.stats(), WriterStats::default());
    }

    #[test]
    fn a_changed_route_waits_at_most_max_delay_while_updates_arrive() {
        let mut w: FibWriter<u32> = FibWriter::new();
        let r = w.reader();
        w.set_max_delay(Duration::from_millis(20));
        w.insert(p("198.18.0.0/15"), 1).unwrap();
        // Younger than the bound: still private to the writer.
        assert!(w.is_pending());
        assert_eq!(r.load().lookup4(0xc612_0001), None);
        std::thread::sleep(Duration::from_millis(25));
        // The next change finds the first one due and publishes both.
        w.insert(p("2001:2::/48"), 2).unwrap();
        assert!(!w.is_pending());
        let s = r.load();
        assert_eq!(s.lookup4(0xc612_0001), Some(1));
        assert_eq!(s.lookup6(0x2001_0002 << 96 | 5), Some(2));
        assert!(w.stats().longest_wait >= Duration::from_millis(20));
        // A withdrawal is gone after the flush.
        assert_eq!(w.remove(p("198.18.0.0/15")), Some(1));
        assert!(w.flush());
        assert_eq!(r.load().lookup4(0xc612_0001), None);
        assert!(!w.flush(), "nothing left to publish");
    }

    #[test]
    fn routes_list_in_prefix_order_with_their_next_hops() {
        let mut w: FibWriter<u32> = FibWriter::new();
        for (s, nh) in [
            ("10.1.0.0/16", 2),
            ("10.0.0.0/8", 1),
            ("::/0", 3),
            ("10.0.0.0/24", 4),
        ] {
            w.insert(p(s), nh).unwrap();
        }
        let got: Vec<(String, u32)> = w.routes().map(|(p, n)| (p.to_string(), n)).collect();
        assert_eq!(
            got,
            [
                ("10.0.0.0/8", 1),
                ("10.0.0.0/24", 4),
                ("10.1.0.0/16", 2),
                ("::/0", 3)
            ]
            .map(|(s, n)| (s.to_string(), n))
        );
        assert_eq!(w.get(p("10.1.0.0/16")), Some(2));
        assert_eq!(w.len(), (3, 1));
    }
}
