//! Memory the transport reads and writes: a trait the caller implements (the verbs
//! engine's memory-region table), plus [`VecMemory`], a checked arena for tests.
//!
//! The transport never touches memory except through [`Memory`], and it states the
//! access right each operation needs. An implementation must refuse anything outside
//! a registered region; the transport turns each refusal into the NAK or completion
//! status IBTA names (see `status.rs`).

use crate::byref::RemoteSpan;
use core::fmt;
use weft_wire::roce::IcrcPath;

/// Access rights of a memory region (`IBV_ACCESS_*`). Local read is always allowed.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No right beyond local read.
    pub const NONE: Access = Access(0);
    /// The local side may write (receive buffers, READ targets, atomic results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// A peer may RDMA WRITE.
    pub const REMOTE_WRITE: Access = Access(2);
    /// A peer may RDMA READ.
    pub const REMOTE_READ: Access = Access(4);
    /// A peer may perform atomics.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// Every right.
    pub const ALL: Access = Access(15);

    /// True when every right in `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
            (Access::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(a, _)| self.contains(*a))
            .map(|(_, n)| *n)
            .collect();
        if set.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&set.join("|"))
        }
    }
}

/// A memory key as it arrives: a local key from a work request's SGE, or a remote
/// key from a RETH / AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// lkey.
    Local(u32),
    /// rkey.
    Remote(u32),
}

/// Why a memory access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessError {
    /// No region has this key.
    UnknownKey,
    /// The region belongs to another protection domain.
    WrongPd,
    /// The range leaves the region (or wraps the address space).
    OutOfBounds,
    /// The region lacks a right the operation needs.
    AccessDenied,
    /// An atomic target is not 8-byte aligned.
    Misaligned,
    /// A by-reference payload could not be copied from the peer's memory: no
    /// cross-memory access to the process at the other end of that path, or the copy
    /// was refused, faulted or came up short (see [`Memory::pull`]).
    PeerMemory,
}

/// A 64-bit atomic, applied by the memory owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Store `swap` if the current value equals `compare`.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Add `add` (wrapping).
    FetchAdd {
        /// Addend.
        add: u64,
    },
}

/// The caller's memory, addressed by (key, protection domain, virtual address).
///
/// Every method checks key, protection domain, bounds and the `need`ed rights before
/// a byte moves; on error nothing is read or written. Atomics operate on a
/// little-endian `u64` (the host order of the machines weft runs on).
pub trait Memory {
    /// Check `[addr, addr + len)` against key, pd and rights without touching it.
    fn check(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(), AccessError>;
    /// Copy `out.len()` bytes from `addr`.
    fn read(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        out: &mut [u8],
        need: Access,
    ) -> Result<(), AccessError>;
    /// Copy `data` to `addr`.
    fn write(
        &mut self,
        key: Key,
        pd: u32,
        addr: u64,
        data: &[u8],
        need: Access,
    ) -> Result<(), AccessError>;
    /// Apply `op` to the 8 bytes at `addr` (8-byte aligned) and return the old value.
    fn atomic(&mut self, key: Key, pd: u32, addr: u64, op: AtomicOp) -> Result<u64, AccessError>;

    /// The address in this process at which a peer could read `[addr, addr + len)`
    /// (after the same checks as [`Memory::read`]), for a by-reference payload (see
    /// [`crate::byref`]). `None`, the default: this memory cannot be named to a peer,
    /// and payloads are always copied into packets.
    fn pull_address(&self, key: Key, pd: u32, addr: u64, len: u64) -> Option<u64> {
        let _ = (key, pd, addr, len);
        None
    }

    /// Whether a WRITE of `message_len` bytes may go by reference given its source
    /// span `[addr, addr + len)` (one of its scatter-gather entries): the memory may
    /// prefer to copy some payloads into packets after all (weft-verbs sends by
    /// reference from memory a peer has mapped at any size, from other memory only
    /// when the message is large enough for the slower copy to pay). The default:
    /// whenever [`Memory::pull_address`] can name the span.
    fn may_pull(&self, key: Key, pd: u32, addr: u64, len: u64, message_len: u64) -> bool {
        let _ = message_len;
        self.pull_address(key, pd, addr, len).is_some()
    }

    /// Copy a by-reference payload: the spans `src` of the memory of the peer that
    /// sent the packet being handled, in order, to `[addr, addr + total)` where
    /// `total` is the sum of their lengths. The implementation must identify that
    /// peer by what its link knows of the packet's arrival (weft-verbs: the process
    /// the kernel reported for the shm connection it came through), never by packet
    /// contents; `from` is the path it arrived on. Checks key, pd, bounds and `need` exactly as [`Memory::write`] does
    /// before a byte moves. A failed copy may leave a prefix of the range written
    /// (inside the checked range only). The default cannot pull from anyone:
    /// [`AccessError::PeerMemory`].
    fn pull(
        &mut self,
        key: Key,
        pd: u32,
        addr: u64,
        from: &IcrcPath,
        src: &[RemoteSpan],
        need: Access,
    ) -> Result<(), AccessError> {
        let _ = (key, pd, addr, from, src, need);
        Err(AccessError::PeerMemory)
    }
}

/// One registered region of a [`VecMemory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Protection domain.
    pub pd: u32,
    /// First address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// Rights.
    pub access: Access,
}

impl Region {
    /// The checks every access makes, in the order IBTA reports them: protection
    /// domain, bounds, rights. (The key was found already.)
    pub fn check(&self, pd: u32, addr: u64, len: u64, need: Access) -> Result<(), AccessError> {
        if self.pd != pd {
            return Err(AccessError::WrongPd);
        }
        if !self.contains(addr, len) {
            return Err(AccessError::OutOfBounds);
        }
        if !self.access.contains(need) {
            return Err(AccessError::AccessDenied);
        }
        Ok(())
    }

    fn contains(&self, addr: u64, len: u64) -> bool {
        match addr.checked_add(len) {
            Some(end) => addr >= self.addr && end <= self.addr + self.len,
            None => false,
        }
    }
}

/// One write that [`VecMemory`] performed, for tests that audit every byte moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRecord {
    /// The key it came through.
    pub key: Key,
    /// First address.
    pub addr: u64,
    /// Length.
    pub len: u64,
}

/// A flat address space `[base, base + size)` filled with a canary byte, in which
/// tests register regions. Every write is checked, optionally logged, and can be
/// audited afterwards: [`VecMemory::first_change_outside_regions`] finds any byte
/// outside a region that no longer holds the canary.
#[derive(Debug, Clone)]
pub struct VecMemory {
    base: u64,
    bytes: Vec<u8>,
    canary: u8,
    regions: Vec<Region>,
    next_key: u32,
    log: Option<Vec<WriteRecord>>,
    writes: u64,
    nameable: bool,
}

impl VecMemory {
    /// An arena of `size` bytes starting at address `base`, every byte `canary`.
    /// `key_seed` makes keys unpredictable across instances (IBTA leaves key choice to
    /// the implementation; weft's ARCHITECTURE asks for unguessable rkeys).
    pub fn new(base: u64, size: usize, canary: u8, key_seed: u32) -> VecMemory {
        VecMemory {
            base,
            bytes: vec![canary; size],
            canary,
            regions: Vec::new(),
            next_key: key_seed | 1,
            log: Some(Vec::new()),
            writes: 0,
            nameable: false,
        }
    }

    /// Let the requester name this memory's spans to a peer, so that large WRITEs go
    /// by reference ([`Memory::pull_address`]: the span's own address). It still cannot
    /// pull from anyone: this is for tests of the requester's side of
    /// [`crate::byref`].
    pub fn set_nameable(&mut self, on: bool) {
        self.nameable = on;
    }

    /// Stop (or restart) logging individual writes; long runs keep only the count.
    pub fn set_logging(&mut self, on: bool) {
        self.log = if on { Some(Vec::new()) } else { None };
    }

    fn fresh_key(&mut self) -> u32 {
        // A full-period LCG step: distinct keys, not sequential.
        self.next_key = self
            .next_key
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        self.next_key
    }

    /// Register `[addr, addr + len)` in `pd` with `access`. Panics if the range is not
    /// inside the arena (a test bug, not hostile input).
    pub fn register(&mut self, pd: u32, addr: u64, len: u64, access: Access) -> Region {
        assert!(addr >= self.base && addr + len <= self.base + self.bytes.len() as u64);
        let lkey = self.fresh_key();
        let rkey = self.fresh_key();
        let r = Region {
            pd,
            addr,
            len,
            lkey,
            rkey,
            access,
        };
        self.regions.push(r);
        r
    }

    /// Remove the region with local key `lkey`.
    pub fn deregister(&mut self, lkey: u32) {
        self.regions.retain(|r| r.lkey != lkey);
    }

    /// The registered regions.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Bytes at `[addr, addr + len)` (test access, unchecked against regions).
    pub fn bytes(&self, addr: u64, len: usize) -> &[u8] {
        let at = (addr - self.base) as usize;
        &self.bytes[at..at + len]
    }

    /// Set bytes directly (test setup, not logged, not checked against regions).
    pub fn fill(&mut self, addr: u64, data: &[u8]) {
        let at = (addr - self.base) as usize;
        self.bytes[at..at + data.len()].copy_from_slice(data);
    }

    /// The log of writes (empty when logging is off).
    pub fn write_log(&self) -> &[WriteRecord] {
        self.log.as_deref().unwrap_or(&[])
    }

    /// Number of writes performed (atomics count as writes).
    pub fn write_count(&self) -> u64 {
        self.writes
    }

    /// The first address outside every registered region whose byte is not the canary.
    pub fn first_change_outside_regions(&self) -> Option<u64> {
        let end = self.base + self.bytes.len() as u64;
        let mut a = self.base;
        while a < end {
            // Skip the inside of a region; otherwise scan up to the next region's start.
            if let Some(r) = self.regions.iter().find(|r| r.contains(a, 1)) {
                a = r.addr + r.len;
                continue;
            }
            let next = self
                .regions
                .iter()
                .filter(|r| r.addr > a && r.len > 0)
                .map(|r| r.addr)
                .min()
                .unwrap_or(end)
                .min(end);
            let (i, j) = ((a - self.base) as usize, (next - self.base) as usize);
            if let Some(off) = self.bytes[i..j].iter().position(|&b| b != self.canary) {
                return Some(a + off as u64);
            }
            a = next;
        }
        None
    }

    fn resolve(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<usize, AccessError> {
        let r = self
            .regions
            .iter()
            .find(|r| match key {
                Key::Local(k) => r.lkey == k,
                Key::Remote(k) => r.rkey == k,
            })
            .ok_or(AccessError::UnknownKey)?;
        r.check(pd, addr, len, need)?;
        Ok((addr - self.base) as usize)
    }

    fn record(&mut self, key: Key, addr: u64, len: u64) {
        self.writes += 1;
        if let Some(log) = &mut self.log {
            log.push(WriteRecord { key, addr, len });
        }
    }
}

impl Memory for VecMemory {
    fn pull_address(&self, key: Key, pd: u32, addr: u64, len: u64) -> Option<u64> {
        let named = self.nameable && self.resolve(key, pd, addr, len, Access::NONE).is_ok();
        named.then_some(addr)
    }

    fn check(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(), AccessError> {
        self.resolve(key, pd, addr, len, need).map(|_| ())
    }

    fn read(
        &self,
        key: Key,
        pd: u32,
        addr: u64,
        out: &mut [u8],
        need: Access,
    ) -> Result<(), AccessError> {
        let at = self.resolve(key, pd, addr, out.len() as u64, need)?;
        out.copy_from_slice(&self.bytes[at..at + out.len()]);
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
        let at = self.resolve(key, pd, addr, data.len() as u64, need)?;
        self.bytes[at..at + data.len()].copy_from_slice(data);
        self.record(key, addr, data.len() as u64);
        Ok(())
    }

    fn atomic(&mut self, key: Key, pd: u32, addr: u64, op: AtomicOp) -> Result<u64, AccessError> {
        if addr % 8 != 0 {
            return Err(AccessError::Misaligned);
        }
        let at = self.resolve(key, pd, addr, 8, Access::REMOTE_ATOMIC)?;
        let mut v = [0u8; 8];
        v.copy_from_slice(&self.bytes[at..at + 8]);
        let old = u64::from_le_bytes(v);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if old == compare {
                    swap
                } else {
                    old
                }
            }
            AtomicOp::FetchAdd { add } => old.wrapping_add(add),
        };
        self.bytes[at..at + 8].copy_from_slice(&new.to_le_bytes());
        self.record(key, addr, 8);
        Ok(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_key_pd_bounds_and_rights() {
        let mut m = VecMemory::new(0x1000, 0x1000, 0xAA, 7);
        let r = m.register(1, 0x1100, 0x100, Access::LOCAL_WRITE | Access::REMOTE_READ);
        let rk = Key::Remote(r.rkey);
        let mut out = [0u8; 16];
        assert_eq!(m.read(rk, 1, 0x1100, &mut out, Access::REMOTE_READ), Ok(()));
        assert_eq!(
            m.read(rk, 2, 0x1100, &mut out, Access::REMOTE_READ),
            Err(AccessError::WrongPd)
        );
        assert_eq!(
            m.read(rk, 1, 0x11f8, &mut out, Access::REMOTE_READ),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            m.write(rk, 1, 0x1100, &out, Access::REMOTE_WRITE),
            Err(AccessError::AccessDenied)
        );
        assert_eq!(
            m.read(
                Key::Remote(r.lkey),
                1,
                0x1100,
                &mut out,
                Access::REMOTE_READ
            ),
            Err(AccessError::UnknownKey)
        );
        assert_eq!(
            m.check(rk, 1, u64::MAX - 2, 8, Access::NONE),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(m.write_count(), 0);
        assert_eq!(m.first_change_outside_regions(), None);
    }

    #[test]
    fn audit_finds_stray_bytes() {
        let mut m = VecMemory::new(0, 64, 0, 1);
        m.register(1, 8, 8, Access::ALL);
        m.fill(10, &[1]);
        assert_eq!(m.first_change_outside_regions(), None);
        m.fill(20, &[1]);
        assert_eq!(m.first_change_outside_regions(), Some(20));
    }

    #[test]
    fn atomics() {
        let mut m = VecMemory::new(0, 64, 0, 1);
        let r = m.register(1, 0, 64, Access::ALL);
        let k = Key::Remote(r.rkey);
        assert_eq!(m.atomic(k, 1, 8, AtomicOp::FetchAdd { add: 5 }), Ok(0));
        assert_eq!(
            m.atomic(
                k,
                1,
                8,
                AtomicOp::CompareSwap {
                    compare: 5,
                    swap: 9
                }
            ),
            Ok(5)
        );
        assert_eq!(
            m.atomic(
                k,
                1,
                8,
                AtomicOp::CompareSwap {
                    compare: 5,
                    swap: 1
                }
            ),
            Ok(9)
        );
        assert_eq!(
            m.atomic(k, 1, 12, AtomicOp::FetchAdd { add: 1 }),
            Err(AccessError::Misaligned)
        );
        assert_eq!(m.write_log().len(), 3);
    }
}
