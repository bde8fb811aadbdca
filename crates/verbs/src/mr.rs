//! Memory regions: the memory a peer may reach, and the table the engine checks every
//! access against before a byte moves.
//!
//! This is the only module of weft-verbs with `unsafe`: the engine copies packet
//! payloads into and out of memory the application owns, through raw pointers, the
//! way an RNIC DMAs into registered memory. The table guarantees that every pointer
//! it dereferences lies inside a live registration: a region leaves the table (under
//! the engine lock) before its memory is freed, and every access is bounds-checked
//! against the registration first.
//!
//! Concurrency contract (the RDMA one): the engine may write a region with remote
//! write access at any time a peer sends a WRITE, and a receive buffer at any time
//! until its completion is polled. The application reads such memory after the
//! completion (or the application-level message) that says the data is there. The
//! copy methods of [`MemoryRegion`] use raw copies and never form references to the
//! shared bytes.
#![allow(unsafe_code)]

use crate::engine::Shared;
use crate::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use weft_link::cma::{self, CmaError, Span};
use weft_link::shmem::{PeerMaps, SharedMemory};
use weft_link::{BufferPool, PacketBuf};
use weft_transport::fastmap::FastMap;
use weft_transport::{Access, AccessError, AtomicOp, Key, Memory, Region, RemoteSpan};
use weft_wire::roce::IcrcPath;

/// Memory owned by a region: either allocated by weft (8-byte aligned, zeroed) or
/// handed over by the caller.
#[derive(Debug)]
#[allow(dead_code)] // the backings own memory the table points into; they are never read
enum Backing {
    Words(Box<[u64]>),
    Bytes(Vec<u8>),
    /// Registered by address by the caller ([`crate::ProtectionDomain::register_raw`]);
    /// the caller keeps it alive.
    Raw,
    /// A packet-buffer pool's arena ([`crate::ProtectionDomain::register_pool`]): the
    /// clone keeps the arena allocated (and, being one allocation, unmoved) for as
    /// long as the region is registered.
    Pool(BufferPool),
    /// A sealed memfd peers may map ([`crate::ProtectionDomain::alloc_shared_mr`]);
    /// the entry holds it too, so the link can offer it while registered.
    Shared(Arc<SharedMemory>),
}

/// One registration as the engine sees it: the transport's [`Region`] (keys, domain,
/// bounds, rights; its `check` is the one every access passes) and where the bytes are.
#[derive(Debug)]
pub(crate) struct MrEntry {
    ptr: *mut u8,
    pub(crate) region: Region,
    /// The memfd behind the region, when peers may map it.
    pub(crate) shared: Option<Arc<SharedMemory>>,
}

// SAFETY: the pointer is only dereferenced by the table's accessors, which check the
// range against the registration; the memory it points to is owned by the
// `MemoryRegion` (or, for raw registrations, kept alive by the caller's contract) and
// stays valid while the entry is in the table. Sharing the entry between threads
// shares the address, not access to the bytes.
unsafe impl Send for MrEntry {}
// SAFETY: as above; the entry itself is immutable after creation.
unsafe impl Sync for MrEntry {}

impl MrEntry {
    fn addr(&self) -> u64 {
        self.ptr as u64
    }

    fn len(&self) -> usize {
        self.region.len as usize
    }

    /// The pointer to `[addr, addr + len)` after the transport's checks (domain,
    /// bounds, rights) passed.
    fn checked(&self, pd: u32, addr: u64, len: u64, need: Access) -> Result<*mut u8, AccessError> {
        self.region.check(pd, addr, len, need)?;
        // In bounds: `check` proved `addr - base + len <= self.len`.
        Ok(self.ptr.wrapping_add((addr - self.region.addr) as usize))
    }
}

/// Every registration of one context, by lkey and by rkey. Implements the transport's
/// [`Memory`] trait: the engine hands it to `weft_transport::Endpoint`.
#[derive(Debug, Default)]
pub(crate) struct MrTable {
    by_lkey: FastMap<u32, Arc<MrEntry>>,
    by_rkey: FastMap<u32, Arc<MrEntry>>,
    /// The region the doorbell path's last inline gather found ([`LkeyLookup`]): a
    /// stream of inline posts gathers from one buffer, and its key's hash lookup was
    /// ~40 instructions a post (callgrind, `msg_rate`). Always an entry of `by_lkey`:
    /// [`MrTable::remove`] clears it, so a deregistered region is never found here.
    /// Kept only once a key missed twice in a row: replacing it costs an `Arc` clone
    /// and drop (two atomic read-modify-writes), which posts alternating between two
    /// keys would otherwise pay on every gather, on top of the lookup.
    last_lkey: Option<Arc<MrEntry>>,
    /// The key of the last gather that missed `last_lkey`.
    last_miss: Option<u32>,
    /// The process the packet being handled came from, when the link proved it can
    /// read that process's memory: the kernel's word for the connection, set by the
    /// engine per packet (`DatagramLink::burst_pull_pids`), never from the packet.
    pub(crate) pull_from: Option<i32>,
    /// By-reference payloads that could not be pulled, by cause.
    pub(crate) pull_errors: PullErrors,
    /// The regions the sender of the packet being handled shared with us, mapped
    /// here: set per packet by the engine from the link
    /// (`DatagramLink::burst_pull_maps`), never from the packet.
    pub(crate) pull_maps: Option<Arc<PeerMaps>>,
    /// By-reference payloads pulled, by path.
    pub(crate) pulls: Pulls,
    /// The smallest WRITE sent by reference from memory peers have not mapped (the
    /// `process_vm_readv` path); from shared memory, the transport's
    /// `by_reference_min` alone decides.
    pub(crate) cma_min: u64,
}

/// By-reference payloads pulled, by how the bytes moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pulls {
    /// Copied with `memcpy` from the sender's region mapped here (a region it
    /// allocated with [`crate::ProtectionDomain::alloc_shared_mr`]).
    pub mapped: u64,
    /// Copied from the sender's process by `process_vm_readv` (the fallback: source
    /// memory the sender did not share, or not yet mapped here).
    pub cma: u64,
}

/// Why by-reference payloads could not be pulled (each one is also a NAK).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PullErrors {
    /// From a peer the link cannot pull from (no connection that probed, or not shm).
    pub no_peer: u64,
    /// The kernel refused (`EPERM`, `ENOSYS`).
    pub refused: u64,
    /// The peer process was gone (`ESRCH`).
    pub gone: u64,
    /// A source span was not mapped in the peer (`EFAULT`), or the span list was bad.
    pub fault: u64,
    /// The copy came up short.
    pub short: u64,
}

impl MrTable {
    /// The packet about to be handled came through a connection to process `pid`
    /// whose peer shared `maps` with us (the link's word, never the packet's): by
    /// reference payloads are pulled from there. A burst mostly comes from one
    /// connection, so the table kept from the last packet stays when it is the
    /// same (no reference count traffic per packet).
    pub(crate) fn set_pull_source(&mut self, pid: Option<i32>, maps: Option<&Arc<PeerMaps>>) {
        self.pull_from = pid;
        let same = match (&self.pull_maps, maps) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.pull_maps = maps.cloned();
        }
    }

    /// No packet is being handled: nothing to pull from.
    pub(crate) fn clear_pull_source(&mut self) {
        self.pull_from = None;
        self.pull_maps = None;
    }

    pub(crate) fn insert(&mut self, e: Arc<MrEntry>) {
        // An entry this one replaced must not stay behind in the cache either.
        self.last_lkey = None;
        self.by_rkey.insert(e.region.rkey, Arc::clone(&e));
        self.by_lkey.insert(e.region.lkey, e);
    }

    /// Regions by local key (the table inline gathers look keys up in).
    pub(crate) fn lkeys(&self) -> &FastMap<u32, Arc<MrEntry>> {
        &self.by_lkey
    }

    pub(crate) fn remove(&mut self, lkey: u32) {
        // Before the region's memory may go: the cache must not outlive the entry.
        self.last_lkey = None;
        if let Some(e) = self.by_lkey.remove(&lkey) {
            self.by_rkey.remove(&e.region.rkey);
        }
    }

    fn count(&mut self, e: CmaError) {
        let p = &mut self.pull_errors;
        match e {
            CmaError::Refused(_) => p.refused += 1,
            CmaError::NoProcess => p.gone += 1,
            CmaError::Fault | CmaError::BadSpans | CmaError::Other(_) => p.fault += 1,
            CmaError::Short { .. } => p.short += 1,
        }
    }

    /// True when neither key is in use (new keys must be unique).
    pub(crate) fn keys_free(&self, lkey: u32, rkey: u32) -> bool {
        lkey != rkey && !self.by_lkey.contains_key(&lkey) && !self.by_rkey.contains_key(&rkey)
    }

    fn find(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<*mut u8, AccessError> {
        let e = match key {
            Key::Local(k) => self.by_lkey.get(&k),
            Key::Remote(k) => self.by_rkey.get(&k),
        }
        .ok_or(AccessError::UnknownKey)?;
        e.checked(pd, addr, len, need)
    }
}

impl Memory for MrTable {
    fn check(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(), AccessError> {
        self.find(key, pd, addr, len, need).map(|_| ())
    }

    fn read(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        out: &mut [u8],
        need: Access,
    ) -> Result<(), AccessError> {
        let p = self.find(key, pd, addr, out.len() as u64, need)?;
        // SAFETY: `find` checked that `[p, p + out.len())` lies inside a live
        // registration; `out` is a distinct Rust buffer, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn write(
        &mut self,
        key: Key,
        pd: u32,
        addr: u64,
        data: &[u8],
        need: Access,
    ) -> Result<(), AccessError> {
        let p = self.find(key, pd, addr, data.len() as u64, need)?;
        // SAFETY: as in `read`: in bounds of a live registration, disjoint from `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    fn atomic(&mut self, key: Key, pd: u32, addr: u64, op: AtomicOp) -> Result<u64, AccessError> {
        if addr % 8 != 0 {
            return Err(AccessError::Misaligned);
        }
        let p = self.find(key, pd, addr, 8, Access::REMOTE_ATOMIC)?;
        // SAFETY: the 8 bytes lie inside a live registration and `addr` (hence `p`) is
        // 8-byte aligned; every access weft makes to them as a target is atomic, so
        // viewing them as an `AtomicU64` for this call is sound.
        let a = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) };
        Ok(match op {
            AtomicOp::CompareSwap { compare, swap } => {
                match a.compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(v) | Err(v) => v,
                }
            }
            AtomicOp::FetchAdd { add } => a.fetch_add(add, Ordering::SeqCst),
        })
    }

    fn pull_address(&self, key: Key, pd: u32, addr: u64, len: u64) -> Option<u64> {
        // The region's virtual addresses are this process's addresses.
        self.find(key, pd, addr, len, Access::NONE)
            .ok()
            .map(|p| p as u64)
    }

    fn may_pull(&self, key: Key, pd: u32, addr: u64, len: u64, message_len: u64) -> bool {
        let Key::Local(k) = key else {
            return false;
        };
        let Some(e) = self.by_lkey.get(&k) else {
            return false;
        };
        // A peer copies from a shared region with memcpy: worth it at any size the
        // transport allows. Other memory costs the peer a process_vm_readv, slower
        // than the ring below `cma_min` (DeviceConfig::one_copy_cma_min).
        (e.shared.is_some() || message_len >= self.cma_min)
            && e.checked(pd, addr, len, Access::NONE).is_ok()
    }

    fn pull(
        &mut self,
        key: Key,
        pd: u32,
        addr: u64,
        from: &IcrcPath,
        src: &[RemoteSpan],
        need: Access,
    ) -> Result<(), AccessError> {
        let total = src
            .iter()
            .try_fold(0u64, |t, s| t.checked_add(s.len))
            .ok_or(AccessError::OutOfBounds)?;
        // Every check before a byte moves, exactly as for `write`.
        let p = self.find(key, pd, addr, total, need)?;
        // The process to read from: the sender of the packet being handled, as the
        // link knows it (`from` names the same peer; the pid is the link's, so a
        // packet cannot choose whose memory we read).
        let _ = from;
        let mut spans = [Span { addr: 0, len: 0 }; weft_transport::wr::MAX_SGE];
        if src.len() > spans.len() {
            return Err(AccessError::PeerMemory);
        }
        for (d, s) in spans.iter_mut().zip(src) {
            *d = Span {
                addr: s.addr,
                len: s.len,
            };
        }
        let Ok(len) = usize::try_from(total) else {
            return Err(AccessError::OutOfBounds);
        };
        if let Some(maps) = &self.pull_maps {
            // SAFETY: as for the process_vm_readv copy below: `[p, p + total)` is
            // inside a live registration with the rights `need`, no Rust reference to
            // it exists; the source is the sender's memfd mapped read-only here.
            if unsafe { maps.copy_raw(p, len, &spans[..src.len()]) } {
                self.pulls.mapped += 1;
                return Ok(());
            }
        }
        let Some(pid) = self.pull_from else {
            self.pull_errors.no_peer += 1;
            return Err(AccessError::PeerMemory);
        };
        // SAFETY: `find` checked `[p, p + total)` against a live registration with the
        // rights `need`, as `write` does; the kernel writes it the way a peer's WRITE
        // always may (racing byte copies into memory the application reads only after
        // the completion), and no Rust reference to those bytes exists here.
        let r = unsafe { cma::read_raw(pid, p, len, &spans[..src.len()]) };
        match r {
            Ok(()) => {
                self.pulls.cma += 1;
                Ok(())
            }
            Err(e) => {
                self.count(e);
                Err(AccessError::PeerMemory)
            }
        }
    }
}

/// A registered memory region (`ibv_mr`): memory the local side names by `lkey` in
/// scatter-gather entries and a peer names by `rkey` and virtual address.
///
/// The virtual address of byte `i` is `addr() + i` (the address of the memory in this
/// process, as with ibverbs). Dropping the region deregisters it first, then frees its
/// memory; in-flight operations on it then fail with protection errors, never touch
/// freed memory.
#[derive(Debug)]
pub struct MemoryRegion {
    entry: Arc<MrEntry>,
    backing: Backing,
    ctx: Option<Arc<Shared>>,
}

fn entry(ptr: *mut u8, len: usize, pd: u32, access: Access, keys: (u32, u32)) -> Arc<MrEntry> {
    Arc::new(MrEntry {
        ptr,
        shared: None,
        region: Region {
            pd,
            addr: ptr as u64,
            len: len as u64,
            lkey: keys.0,
            rkey: keys.1,
            access,
        },
    })
}

impl MemoryRegion {
    /// `len` zeroed bytes, 8-byte aligned (atomic targets need it).
    pub(crate) fn allocate(len: usize, pd: u32, access: Access, keys: (u32, u32)) -> MemoryRegion {
        let mut words = vec![0u64; len.div_ceil(8).max(1)].into_boxed_slice();
        let ptr = words.as_mut_ptr().cast::<u8>();
        MemoryRegion {
            entry: entry(ptr, len, pd, access, keys),
            backing: Backing::Words(words),
            ctx: None,
        }
    }

    /// `mem`, a sealed memfd mapped here, that the link offers to peers while the
    /// region is registered.
    pub(crate) fn shared(
        mem: SharedMemory,
        pd: u32,
        access: Access,
        keys: (u32, u32),
    ) -> MemoryRegion {
        let mem = Arc::new(mem);
        let mut e = entry(mem.as_ptr(), mem.len(), pd, access, keys);
        if let Some(e) = Arc::get_mut(&mut e) {
            e.shared = Some(Arc::clone(&mem));
        }
        MemoryRegion {
            entry: e,
            backing: Backing::Shared(mem),
            ctx: None,
        }
    }

    /// True when peers may map the region's memory (allocated by
    /// [`crate::ProtectionDomain::alloc_shared_mr`]).
    pub fn is_shared(&self) -> bool {
        self.entry.shared.is_some()
    }

    /// The caller's buffer, owned by the region until [`MemoryRegion::into_vec`].
    pub(crate) fn adopt(
        mut buf: Vec<u8>,
        pd: u32,
        access: Access,
        keys: (u32, u32),
    ) -> MemoryRegion {
        let ptr = buf.as_mut_ptr();
        MemoryRegion {
            entry: entry(ptr, buf.len(), pd, access, keys),
            backing: Backing::Bytes(buf),
            ctx: None,
        }
    }

    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes for as long as the region is
    /// registered, and not freed or moved before the region is dropped.
    pub(crate) unsafe fn raw(
        ptr: *mut u8,
        len: usize,
        pd: u32,
        access: Access,
        keys: (u32, u32),
    ) -> MemoryRegion {
        MemoryRegion {
            entry: entry(ptr, len, pd, access, keys),
            backing: Backing::Raw,
            ctx: None,
        }
    }

    /// The arena of `pool`, readable by local sends only (`Access::NONE`: no receive,
    /// peer WRITE, READ or atomic reaches it). Safe, unlike [`MemoryRegion::raw`]: the
    /// backing holds a clone of the pool, so the arena outlives the registration.
    pub(crate) fn pool(pool: BufferPool, pd: u32, keys: (u32, u32)) -> MemoryRegion {
        MemoryRegion {
            entry: entry(pool.arena_ptr(), pool.arena_len(), pd, Access::NONE, keys),
            backing: Backing::Pool(pool),
            ctx: None,
        }
    }

    /// The table's view of this region, and who to tell when it goes.
    pub(crate) fn attach(&mut self, ctx: Arc<Shared>) -> Arc<MrEntry> {
        self.ctx = Some(ctx);
        Arc::clone(&self.entry)
    }

    fn entry(&self) -> &MrEntry {
        &self.entry
    }

    /// First virtual address.
    pub fn addr(&self) -> u64 {
        self.entry().addr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.entry().len()
    }

    /// True for a zero-length region.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Local key, for scatter-gather entries.
    pub fn lkey(&self) -> u32 {
        self.entry().region.lkey
    }

    /// Remote key, for a peer's RDMA READ/WRITE/atomics.
    pub fn rkey(&self) -> u32 {
        self.entry().region.rkey
    }

    /// The rights this region grants.
    pub fn access(&self) -> Access {
        self.entry().region.access
    }

    /// A scatter-gather entry for `len` bytes at `offset`.
    pub fn sge(&self, offset: usize, len: u32) -> weft_transport::Sge {
        weft_transport::Sge {
            addr: self.addr() + offset as u64,
            len,
            lkey: self.lkey(),
        }
    }

    /// Where a peer WRITEs or READs `offset` of this region.
    pub fn remote(&self, offset: usize) -> weft_transport::RemoteAddr {
        weft_transport::RemoteAddr {
            addr: self.addr() + offset as u64,
            rkey: self.rkey(),
        }
    }

    fn span(&self, offset: usize, len: usize) -> Result<*mut u8, Error> {
        let e = self.entry();
        match offset.checked_add(len) {
            Some(end) if end <= e.len() => Ok(e.ptr.wrapping_add(offset)),
            _ => Err(Error::OutOfBounds {
                offset,
                len,
                region: e.len(),
            }),
        }
    }

    /// Copy `out.len()` bytes from `offset` of the region.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        let p = self.span(offset, out.len())?;
        // SAFETY: `span` checked the range lies inside the region, whose memory lives
        // as long as `self`; `out` is a distinct buffer.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copy `data` to `offset` of the region.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), Error> {
        let p = self.span(offset, data.len())?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// `len` bytes from `offset` as a vector.
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>, Error> {
        let mut v = vec![0u8; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// Atomically load the little-endian `u64` at `offset` (8-byte aligned); the way
    /// to read a word peers update with atomics.
    pub fn load_u64(&self, offset: usize) -> Result<u64, Error> {
        Ok(self.atomic_at(offset)?.load(Ordering::SeqCst))
    }

    /// Atomically store `v` at `offset` (8-byte aligned).
    pub fn store_u64(&self, offset: usize, v: u64) -> Result<(), Error> {
        self.atomic_at(offset)?.store(v, Ordering::SeqCst);
        Ok(())
    }

    fn atomic_at(&self, offset: usize) -> Result<&AtomicU64, Error> {
        let p = self.span(offset, 8)?;
        if (p as usize) % 8 != 0 {
            return Err(Error::Misaligned(offset));
        }
        // SAFETY: 8 in-bounds, 8-byte-aligned bytes that live as long as `&self`; weft
        // accesses words used as atomic targets only atomically.
        Ok(unsafe { AtomicU64::from_ptr(p.cast::<u64>()) })
    }

    /// The region's bytes as a slice.
    ///
    /// # Safety
    /// No peer or local operation may write the region while the slice lives (no
    /// outstanding receive into it, no peer with its rkey and write access sending).
    pub unsafe fn as_slice(&self) -> &[u8] {
        let e = self.entry();
        // SAFETY: the region's memory is valid for `len` bytes while `self` lives; the
        // caller guarantees no concurrent writer.
        unsafe { std::slice::from_raw_parts(e.ptr, e.len()) }
    }

    /// Deregister and return the caller's buffer of a region made from a `Vec`
    /// (`None` for regions weft allocated or registered by address).
    pub fn into_vec(mut self) -> Option<Vec<u8>> {
        self.deregister();
        match std::mem::replace(&mut self.backing, Backing::Raw) {
            Backing::Bytes(v) => Some(v),
            _ => None,
        }
    }

    fn deregister(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            ctx.deregister(self.entry.region.lkey);
        }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // Out of the engine's table first (under its lock), then the memory goes.
        self.deregister();
    }
}

/// A packet-buffer pool's arena registered as one memory region
/// ([`crate::ProtectionDomain::register_pool`]): every [`PacketBuf`] of the pool can
/// be sent in place, one scatter-gather entry per buffer ([`PoolRegion::sge`]), no
/// copy.
///
/// Why it is sound without `unsafe` at the caller:
/// - the memory lives: the region holds a clone of the pool, and the pool's arena is
///   one allocation freed only when the last clone (and buffer) is gone; dropping the
///   region takes it out of the engine's table (under the engine lock) before that
///   clone goes;
/// - the engine never writes it: the registration grants no access rights
///   (`Access::NONE`), so a receive, a peer's WRITE or atomic naming it fails its key
///   check, and no rkey reads it; the engine only reads it by raw copy to gather a
///   SEND, as it reads every region;
/// - the application reads and writes a buffer through the `PacketBuf` that holds
///   it, never through this region (there is no `read`/`write` here, unlike
///   [`MemoryRegion`]). The one rule is RDMA's own: a buffer whose entry is posted is
///   not written (nor dropped back to the pool, where another thread would write
///   it) until its send completed or its queue pair was destroyed — keep the
///   `PacketBuf` parked until then. Breaking that rule (or building an entry by
///   hand with this region's lkey) is a data race between the engine's read and the
///   write: torn bytes sent, and formally undefined behaviour — the same gap as
///   writing a [`MemoryRegion`] under an in-flight SEND, which safe code can do
///   today. It is never an access outside the arena: every entry is bounds-checked
///   against the registration.
#[derive(Debug)]
pub struct PoolRegion {
    // Dropped first: out of the engine's table before either clone of the pool goes.
    mr: MemoryRegion,
    pool: BufferPool,
}

impl PoolRegion {
    /// `mr` must be [`MemoryRegion::pool`] of `pool`.
    pub(crate) fn new(mr: MemoryRegion, pool: BufferPool) -> PoolRegion {
        PoolRegion { mr, pool }
    }

    /// The pool registered.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// True when `buf` is a buffer of the registered pool (its bytes are in the
    /// region).
    pub fn covers(&self, buf: &PacketBuf) -> bool {
        self.pool().owns(buf)
    }

    /// The scatter-gather entry for `buf`'s frame (`buf.len()` bytes from its
    /// start), or `None` when `buf` is not a buffer of the registered pool.
    pub fn sge(&self, buf: &PacketBuf) -> Option<weft_transport::Sge> {
        if !self.covers(buf) {
            return None;
        }
        Some(weft_transport::Sge {
            addr: self.mr.addr() + buf.arena_offset() as u64,
            len: u32::try_from(buf.len()).ok()?,
            lkey: self.mr.lkey(),
        })
    }

    /// Local key of the region.
    pub fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    /// Bytes registered: the whole arena.
    pub fn len(&self) -> usize {
        self.mr.len()
    }

    /// True for the registration of an empty pool.
    pub fn is_empty(&self) -> bool {
        self.mr.is_empty()
    }
}

/// Where an inline gather finds the region of an lkey: the key map alone (the ring
/// path, under its read lock), or the engine's table with the region of its last key
/// kept (the doorbell path, under the engine's lock).
pub(crate) trait LkeyLookup {
    /// The registration of `lkey`, if it is registered.
    fn entry(&mut self, lkey: u32) -> Option<&MrEntry>;
}

impl LkeyLookup for &FastMap<u32, Arc<MrEntry>> {
    #[inline]
    fn entry(&mut self, lkey: u32) -> Option<&MrEntry> {
        self.get(&lkey).map(|e| &**e)
    }
}

impl LkeyLookup for MrTable {
    #[inline]
    fn entry(&mut self, lkey: u32) -> Option<&MrEntry> {
        if self
            .last_lkey
            .as_ref()
            .is_some_and(|e| e.region.lkey == lkey)
        {
            // A hit ends any run of misses: alternating keys after a streak of one
            // must miss twice in a row again before the kept one is replaced.
            self.last_miss = None;
        } else {
            let e = self.by_lkey.get(&lkey)?;
            if self.last_miss != Some(lkey) {
                self.last_miss = Some(lkey);
                return Some(e);
            }
            self.last_lkey = Some(Arc::clone(e));
        }
        self.last_lkey.as_deref()
    }
}

/// Gather the bytes of `sges` into `out` on the posting thread (an inline send),
/// checking each lkey, protection domain and bound against `keys`. Returns the
/// number of bytes gathered.
pub(crate) fn gather_inline(
    keys: &mut impl LkeyLookup,
    pd: u32,
    sges: &[weft_transport::Sge],
    out: &mut [u8],
) -> Result<usize, AccessError> {
    let mut at = 0usize;
    for s in sges {
        let e = keys.entry(s.lkey).ok_or(AccessError::UnknownKey)?;
        let p = e.checked(pd, s.addr, u64::from(s.len), Access::NONE)?;
        let n = s.len as usize;
        let dst = out.get_mut(at..at + n).ok_or(AccessError::OutOfBounds)?;
        // SAFETY: `range` checked `[p, p + n)` lies inside a live registration (the
        // caller holds the key map's read lock, or the engine's lock over the table
        // whose last-key entry `MrTable::remove` clears, and regions leave the map
        // before their memory is freed); `dst` is a distinct buffer of exactly `n`
        // bytes.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), n) };
        at += n;
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inline_gather_never_finds_a_region_through_the_last_key_once_it_is_gone() {
        let mut bytes = *b"0123456789abcdef";
        let mut t = MrTable::default();
        t.insert(entry(
            bytes.as_mut_ptr(),
            bytes.len(),
            1,
            Access::ALL,
            (7, 8),
        ));
        let sge = |addr: u64| weft_transport::Sge {
            addr,
            len: 4,
            lkey: 7,
        };
        let base = bytes.as_ptr() as u64;
        let mut out = [0u8; 4];
        // The third gather finds the region through the kept entry (kept after the
        // key missed twice).
        for at in [0, 8, 4] {
            assert_eq!(gather_inline(&mut t, 1, &[sge(base + at)], &mut out), Ok(4));
        }
        assert!(t.last_lkey.is_some());
        assert_eq!(&out, b"4567");
        // Its checks still apply: domain, bounds.
        assert!(gather_inline(&mut t, 2, &[sge(base)], &mut out).is_err());
        assert!(gather_inline(&mut t, 1, &[sge(base + 14)], &mut out).is_err());
        t.remove(7);
        assert_eq!(
            gather_inline(&mut t, 1, &[sge(base)], &mut out),
            Err(AccessError::UnknownKey)
        );
        // A region registered again under the key is the one found.
        let mut other = *b"ABCDEFGH";
        t.insert(entry(
            other.as_mut_ptr(),
            other.len(),
            1,
            Access::ALL,
            (7, 8),
        ));
        let sge = weft_transport::Sge {
            addr: other.as_ptr() as u64,
            len: 4,
            lkey: 7,
        };
        assert_eq!(gather_inline(&mut t, 1, &[sge], &mut out), Ok(4));
        assert_eq!(&out, b"ABCD");
    }

    #[test]
    fn gathers_alternating_between_two_keys_never_clone_a_region_handle() {
        let mut a = *b"aaaaaaaa";
        let mut b = *b"bbbbbbbb";
        let mut t = MrTable::default();
        t.insert(entry(a.as_mut_ptr(), a.len(), 1, Access::ALL, (1, 2)));
        t.insert(entry(b.as_mut_ptr(), b.len(), 1, Access::ALL, (3, 4)));
        let handles =
            |t: &MrTable| [1, 3].map(|k| Arc::strong_count(t.lkeys().get(&k).expect("registered")));
        // Each entry is held by the lkey and the rkey map.
        assert_eq!(handles(&t), [2, 2]);
        let (pa, pb) = (a.as_ptr() as u64, b.as_ptr() as u64);
        let mut out = [0u8; 4];
        for _ in 0..8 {
            for (addr, lkey, want) in [(pa, 1, b"aaaa"), (pb, 3, b"bbbb")] {
                let sge = weft_transport::Sge { addr, len: 4, lkey };
                assert_eq!(gather_inline(&mut t, 1, &[sge], &mut out), Ok(4));
                assert_eq!(&out, want);
                assert_eq!(handles(&t), [2, 2]);
            }
        }
        // A run of one key is kept after its second miss.
        for _ in 0..3 {
            let sge = weft_transport::Sge {
                addr: pb,
                len: 4,
                lkey: 3,
            };
            assert_eq!(gather_inline(&mut t, 1, &[sge], &mut out), Ok(4));
        }
        assert_eq!(handles(&t), [2, 3]);
        // Alternating again, with one key kept: hits on it and misses on the other
        // never replace it (each hit ends the run of misses).
        for _ in 0..8 {
            for (addr, lkey) in [(pa, 1), (pb, 3)] {
                let sge = weft_transport::Sge { addr, len: 4, lkey };
                assert_eq!(gather_inline(&mut t, 1, &[sge], &mut out), Ok(4));
                assert_eq!(handles(&t), [2, 3]);
            }
        }
    }
}
