//! Memory a peer process can map: the mapping path of the shm link's one-copy WRITEs.
//!
//! [`SharedMemory`] is memory allocated as a sealed memfd (no shrink, no grow, no more
//! seals) and mapped here. The verbs layer allocates memory regions with it; the shm
//! link passes the memfd to every connected peer (`SCM_RIGHTS` over the connection's
//! control socket) with the address and length it has in the owner's process, and
//! revokes it when the region is deregistered (see `shm/endpoint.rs`, "Shared
//! regions").
//!
//! [`PeerMaps`] is the receiving side: per connection, the peer's announced regions,
//! each mapped read-only here, by the range of addresses they have in the *peer's*
//! process. A by-reference WRITE whose every source span lies inside one of them is
//! copied with `memcpy` from the mapping ([`PeerMaps::copy_raw`]); anything else
//! falls back to `process_vm_readv` ([`crate::cma`]).
//!
//! Everything a peer announces is checked before it is mapped: the descriptor must be
//! a memfd sealed against shrinking (so no access inside its size can fault), at
//! least as long as the claimed length; the claimed range must not wrap, be empty,
//! exceed [`MAX_REGION_LEN`], or overlap a range already mapped for the same peer; at
//! most [`MAX_PEER_REGIONS`] per connection. A refusal is a [`MapRefusal`] value (the
//! link counts them); nothing here panics on peer input.

use crate::cma::Span;
use crate::sys::{self, Mmap};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// Most regions one peer connection may have mapped here.
pub const MAX_PEER_REGIONS: usize = 64;

/// Longest region a peer may announce (1 TiB: address space, not memory).
pub const MAX_REGION_LEN: u64 = 1 << 40;

const PAGE: usize = 4096;

/// Memory allocated as a sealed memfd and mapped read-write here, so a peer can map
/// it too. Zeroed, page-aligned, at least one page; unmapped and closed on drop (a
/// peer's mapping stays valid: the memfd's pages live while any mapping does).
#[derive(Debug)]
pub struct SharedMemory {
    fd: OwnedFd,
    map: Mmap,
    len: usize,
}

// SAFETY: the memory is reached only through the raw pointer `as_ptr` hands out (the
// owner — a memory region — copies in and out with raw copies and never forms a
// reference into it), so sharing the handle between threads shares an address.
unsafe impl Sync for SharedMemory {}

impl SharedMemory {
    /// `len` zeroed bytes (rounded up to whole pages in the memfd).
    pub fn new(len: usize) -> io::Result<SharedMemory> {
        let size = len
            .max(1)
            .checked_next_multiple_of(PAGE)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "shared memory size"))?;
        let fd = sys::sealed_memfd(c"weft-mr", size)?;
        let map = Mmap::shared(fd.as_raw_fd(), size, 0, 0, "mmap shared memory")?;
        Ok(SharedMemory { fd, map, len })
    }

    /// First byte (page-aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when zero bytes were asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copy `data` to `off` with a raw copy (peers may read concurrently); false,
    /// nothing copied, when out of bounds.
    pub fn write_at(&self, off: usize, data: &[u8]) -> bool {
        off.checked_add(data.len()).is_some_and(|e| e <= self.len) && self.map.copy_in(off, data)
    }

    /// The memfd (what the shm link passes to peers).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Why a peer's announced region was not mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapRefusal {
    /// The connection already has [`MAX_PEER_REGIONS`].
    Full,
    /// Empty, wrapping, or longer than [`MAX_REGION_LEN`].
    BadRange,
    /// Not a memfd sealed against shrinking.
    NotSealed,
    /// The memfd is shorter than the claimed length.
    TooSmall,
    /// Overlaps a region already mapped for this peer, or reuses its id.
    Overlap,
    /// `mmap` failed.
    Map,
}

/// A peer's mapping, read-only here. Only ever copied from with raw copies.
#[derive(Debug)]
struct PeerMapping(Mmap);

// SAFETY: read-only memory reached only by raw copies (`Mmap::copy_out_raw`); no
// reference into it is ever formed, so any number of threads may copy from it.
unsafe impl Sync for PeerMapping {}

#[derive(Debug, Clone)]
struct Mapped {
    id: u64,
    /// Where the region is in the peer's process.
    addr: u64,
    len: u64,
    map: Arc<PeerMapping>,
}

/// One peer connection's regions, mapped here (see the module doc). Cloning is cheap
/// (the mappings are shared): the link replaces its table on every change, and a
/// receiver holding an older one keeps valid mappings of what was announced then.
#[derive(Debug, Clone, Default)]
pub struct PeerMaps {
    regions: Vec<Mapped>,
}

impl PeerMaps {
    /// Regions mapped.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// True with none.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Check and map the peer's region `id`: `len` bytes of memfd `fd`, at `addr` in
    /// the peer's process.
    pub fn add(&mut self, id: u64, addr: u64, len: u64, fd: &OwnedFd) -> Result<(), MapRefusal> {
        if self.regions.len() >= MAX_PEER_REGIONS {
            return Err(MapRefusal::Full);
        }
        let end = addr.checked_add(len).ok_or(MapRefusal::BadRange)?;
        if len == 0 || len > MAX_REGION_LEN {
            return Err(MapRefusal::BadRange);
        }
        let map_len = usize::try_from(len).map_err(|_| MapRefusal::BadRange)?;
        if self
            .regions
            .iter()
            .any(|m| m.id == id || (addr < m.addr + m.len && m.addr < end))
        {
            return Err(MapRefusal::Overlap);
        }
        let (seals, size) = sys::seals_and_size(fd).map_err(|_| MapRefusal::NotSealed)?;
        if seals & libc::F_SEAL_SHRINK == 0 {
            return Err(MapRefusal::NotSealed);
        }
        if size < len {
            return Err(MapRefusal::TooSmall);
        }
        let map = Mmap::shared_read_only(fd.as_raw_fd(), map_len, "mmap peer region")
            .map_err(|_| MapRefusal::Map)?;
        self.regions.push(Mapped {
            id,
            addr,
            len,
            map: Arc::new(PeerMapping(map)),
        });
        Ok(())
    }

    /// Forget region `id`; false when there was none.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.regions.len();
        self.regions.retain(|m| m.id != id);
        self.regions.len() != before
    }

    /// The mapping holding all of `s`, and the offset of `s` in it.
    fn find(&self, s: &Span) -> Option<(&Mapped, usize)> {
        let end = s.addr.checked_add(s.len)?;
        let m = self
            .regions
            .iter()
            .find(|m| s.addr >= m.addr && end <= m.addr + m.len)?;
        Some((m, usize::try_from(s.addr - m.addr).ok()?))
    }

    /// True when every span lies inside one mapped region.
    pub fn covers(&self, src: &[Span]) -> bool {
        src.iter().all(|s| self.find(s).is_some())
    }

    /// Copy `src` (addresses in the peer's process), in order, into `[dst, dst +
    /// len)` from the mappings. False, with nothing copied, when a span is not inside
    /// one mapped region or the spans do not add up to `len`.
    ///
    /// # Safety
    /// `[dst, dst + len)` must be writable memory of this process, valid for the whole
    /// call, that no Rust reference reads or writes meanwhile.
    pub unsafe fn copy_raw(&self, dst: *mut u8, len: usize, src: &[Span]) -> bool {
        let total = src.iter().try_fold(0u64, |t, s| t.checked_add(s.len));
        if total != Some(len as u64) || !self.covers(src) {
            return false;
        }
        let mut at = 0usize;
        for s in src {
            let Some((m, off)) = self.find(s) else {
                return false;
            };
            let n = s.len as usize;
            // SAFETY: `at + n <= len` (the spans add up to `len`), so the destination
            // is inside the caller's range; the source is inside the mapping
            // (`copy_out_raw` checks it again), which is private to this process's
            // address space and cannot overlap the destination region's memory.
            if !unsafe { m.map.0.copy_out_raw(off, dst.add(at), n) } {
                return false;
            }
            at += n;
        }
        true
    }

    /// [`PeerMaps::copy_raw`] into a slice of ours.
    pub fn copy(&self, dst: &mut [u8], src: &[Span]) -> bool {
        // SAFETY: `dst` is an exclusive borrow, writable and alive for the call.
        unsafe { self.copy_raw(dst.as_mut_ptr(), dst.len(), src) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(m: &SharedMemory, f: impl Fn(usize) -> u8) {
        let bytes: Vec<u8> = (0..m.len()).map(f).collect();
        assert!(m.write_at(0, &bytes));
        assert!(!m.write_at(1, &bytes), "out of bounds");
    }

    fn dup(m: &SharedMemory) -> OwnedFd {
        m.fd().try_clone_to_owned().unwrap()
    }

    #[test]
    fn a_region_mapped_by_its_owners_addresses_copies_its_bytes() {
        let m = SharedMemory::new(10_000).unwrap();
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.as_ptr() as usize % PAGE, 0);
        fill(&m, |i| (i * 7) as u8);
        // Announced as if it lived at 0x1000_0000 in the peer.
        let base = 0x1000_0000u64;
        let mut t = PeerMaps::default();
        t.add(1, base, 10_000, &dup(&m)).unwrap();
        let mut out = vec![0u8; 300];
        let spans = [
            Span {
                addr: base + 5,
                len: 100,
            },
            Span {
                addr: base + 9_800,
                len: 200,
            },
        ];
        assert!(t.copy(&mut out, &spans));
        assert!((0..100).all(|i| out[i] == ((i + 5) * 7) as u8));
        assert!((0..200).all(|i| out[100 + i] == ((i + 9_800) * 7) as u8));
        // Writes by the owner after the mapping are seen (one memory).
        fill(&m, |_| 0xab);
        let one = [Span {
            addr: base + 5,
            len: 1,
        }];
        assert!(t.copy(&mut out[..1], &one));
        assert_eq!(out[0], 0xab);
    }

    #[test]
    fn spans_outside_the_mappings_copy_nothing() {
        let m = SharedMemory::new(PAGE).unwrap();
        fill(&m, |_| 1);
        let base = 1u64 << 30;
        let mut t = PeerMaps::default();
        t.add(9, base, PAGE as u64, &dup(&m)).unwrap();
        let mut out = vec![0u8; 64];
        let cases = [
            // One byte past the end.
            Span {
                addr: base + PAGE as u64 - 63,
                len: 64,
            },
            // Before the start.
            Span {
                addr: base - 1,
                len: 64,
            },
            // Wrapping.
            Span {
                addr: u64::MAX - 8,
                len: 64,
            },
        ];
        for s in cases {
            assert!(!t.copy(&mut out, &[s]), "{s:?}");
        }
        // Lengths that do not add up.
        assert!(!t.copy(
            &mut out,
            &[Span {
                addr: base,
                len: 32
            }]
        ));
        assert_eq!(out, vec![0u8; 64], "nothing landed");
        // After removal, nothing is covered.
        assert!(t.remove(9) && !t.remove(9));
        assert!(!t.copy(
            &mut out,
            &[Span {
                addr: base,
                len: 64
            }]
        ));
    }

    #[test]
    fn hostile_announcements_are_refused_as_values() {
        let m = SharedMemory::new(PAGE).unwrap();
        let mut t = PeerMaps::default();
        let len = PAGE as u64;
        // Longer than the memfd.
        assert_eq!(
            t.add(1, 0x10000, len + 1, &dup(&m)),
            Err(MapRefusal::TooSmall)
        );
        // Empty, wrapping, huge.
        assert_eq!(t.add(1, 0x10000, 0, &dup(&m)), Err(MapRefusal::BadRange));
        assert_eq!(t.add(1, u64::MAX, 2, &dup(&m)), Err(MapRefusal::BadRange));
        assert_eq!(
            t.add(1, 0, MAX_REGION_LEN + 1, &dup(&m)),
            Err(MapRefusal::BadRange)
        );
        // Not a memfd: a pipe; a plain file (no seals).
        let (r, _w) = io::pipe().unwrap();
        assert_eq!(
            t.add(1, 0x10000, 1, &OwnedFd::from(r)),
            Err(MapRefusal::NotSealed)
        );
        let path = std::env::temp_dir().join(format!("weft-shmem-{}", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(len).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            t.add(1, 0x10000, len, &OwnedFd::from(f)),
            Err(MapRefusal::NotSealed)
        );
        // A sealed memfd of the right size is fine.
        let raw = sys::sealed_memfd(c"x", PAGE).unwrap();
        assert!(t.add(1, 0x10000, len, &raw).is_ok());
        // Overlap and id reuse.
        assert_eq!(t.add(2, 0x10000 + 8, 8, &dup(&m)), Err(MapRefusal::Overlap));
        assert_eq!(t.add(1, 0x90000, 8, &dup(&m)), Err(MapRefusal::Overlap));
        // The table is bounded.
        for i in 1..MAX_PEER_REGIONS as u64 {
            t.add(100 + i, 0x100_0000 * i, len, &dup(&m)).unwrap();
        }
        assert_eq!(t.add(999, 1 << 50, len, &dup(&m)), Err(MapRefusal::Full));
        assert_eq!(t.len(), MAX_PEER_REGIONS);
    }

    #[test]
    fn an_unsealed_memfd_is_refused() {
        let m = sys::unsealed_memfd_for_tests(PAGE).unwrap();
        let mut t = PeerMaps::default();
        assert_eq!(
            t.add(1, 0x10000, PAGE as u64, &m),
            Err(MapRefusal::NotSealed)
        );
        assert!(t.is_empty());
    }
}
