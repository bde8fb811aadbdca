//! Cross-memory attach: copying another process's memory into ours with one
//! `process_vm_readv(2)` per message, the one-copy path of the shm link (see
//! `shm.rs`, "One copy"). The process is always named by the kernel's record of a
//! connected peer (`SO_PEERCRED`, kept by the shm link), never by a packet; the remote
//! addresses *are* from packets, and the kernel checks them against that process's
//! mappings (`EFAULT`), so a hostile peer can at most make us read its own memory.
//!
//! Every failure is a [`CmaError`] value: refused by the kernel's ptrace rules or a
//! seccomp filter, the peer gone, a remote span that faults, a short copy.

use crate::sys;
use std::fmt;

/// Most remote spans one call takes (`IOV_MAX` is 1024 on Linux; weft never needs
/// more than a work request's scatter-gather list).
pub const MAX_SPANS: usize = 64;

/// One span of the other process's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First address, in the other process.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// Why a cross-memory copy failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmaError {
    /// The kernel refused the access (`EPERM`: ptrace rules, Yama, a non-dumpable
    /// peer; `ENOSYS`: a seccomp filter or a kernel without the call).
    Refused(i32),
    /// The process is gone (`ESRCH`).
    NoProcess,
    /// A span is not mapped in the other process, or the destination in ours
    /// (`EFAULT`).
    Fault,
    /// Fewer bytes than asked were copied (a span faulted part-way).
    Short {
        /// Bytes copied.
        copied: u64,
        /// Bytes asked for.
        wanted: u64,
    },
    /// The spans do not fit the destination, wrap, or are too many.
    BadSpans,
    /// Any other errno.
    Other(i32),
}

impl fmt::Display for CmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmaError::Refused(e) => write!(f, "process_vm_readv refused (errno {e})"),
            CmaError::NoProcess => f.write_str("process_vm_readv: the peer process is gone"),
            CmaError::Fault => f.write_str("process_vm_readv: a span is not mapped"),
            CmaError::Short { copied, wanted } => {
                write!(f, "process_vm_readv copied {copied} of {wanted} bytes")
            }
            CmaError::BadSpans => f.write_str("process_vm_readv: bad span list"),
            CmaError::Other(e) => write!(f, "process_vm_readv failed (errno {e})"),
        }
    }
}

impl std::error::Error for CmaError {}

/// Copy `src` of process `pid`, in order, into `[dst, dst + len)`: exactly `len` bytes,
/// which must be the sum of the spans, or an error (after which the destination
/// holds an unspecified prefix of the data).
///
/// # Safety
/// `[dst, dst + len)` must be writable memory of this process, valid for the whole
/// call, that no Rust reference reads or writes meanwhile.
pub unsafe fn read_raw(pid: i32, dst: *mut u8, len: usize, src: &[Span]) -> Result<(), CmaError> {
    if src.is_empty() || src.len() > MAX_SPANS {
        return Err(CmaError::BadSpans);
    }
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_SPANS];
    let mut total: u64 = 0;
    for (v, s) in iov.iter_mut().zip(src) {
        let (Ok(base), Ok(n)) = (usize::try_from(s.addr), usize::try_from(s.len)) else {
            return Err(CmaError::BadSpans);
        };
        if base.checked_add(n).is_none() {
            return Err(CmaError::BadSpans);
        }
        total = total.checked_add(s.len).ok_or(CmaError::BadSpans)?;
        // The remote address only travels to the kernel as a number.
        v.iov_base = base as *mut libc::c_void;
        v.iov_len = n;
    }
    if total != len as u64 {
        return Err(CmaError::BadSpans);
    }
    // SAFETY: the destination is the caller's promise; the remote spans are checked by
    // the kernel against `pid`'s mappings.
    let r = unsafe { sys::vm_readv(pid, dst, len, &iov[..src.len()]) };
    match r {
        Ok(n) if n as u64 == total => Ok(()),
        Ok(n) => Err(CmaError::Short {
            copied: n as u64,
            wanted: total,
        }),
        Err(e) => Err(match e {
            libc::EPERM | libc::EACCES | libc::ENOSYS => CmaError::Refused(e),
            libc::ESRCH => CmaError::NoProcess,
            libc::EFAULT => CmaError::Fault,
            n => CmaError::Other(n),
        }),
    }
}

/// [`read_raw`] into a slice of ours.
pub fn read(pid: i32, dst: &mut [u8], src: &[Span]) -> Result<(), CmaError> {
    // SAFETY: `dst` is an exclusive borrow, writable and alive for the call.
    unsafe { read_raw(pid, dst.as_mut_ptr(), dst.len(), src) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span_of(b: &[u8]) -> Span {
        Span {
            addr: b.as_ptr() as u64,
            len: b.len() as u64,
        }
    }

    #[test]
    fn reads_our_own_spans_in_order() {
        let a: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let b = vec![7u8; 3000];
        let mut out = vec![0u8; 8000];
        read(
            std::process::id() as i32,
            &mut out,
            &[span_of(&a), span_of(&b)],
        )
        .unwrap();
        assert_eq!(&out[..5000], &a[..]);
        assert_eq!(&out[5000..], &b[..]);
    }

    #[test]
    fn every_failure_is_a_value() {
        let me = std::process::id() as i32;
        let a = vec![1u8; 64];
        let mut out = vec![0u8; 64];
        // Lengths that do not add up, no spans, too many spans.
        assert_eq!(
            read(me, &mut out[..32], &[span_of(&a)]),
            Err(CmaError::BadSpans)
        );
        assert_eq!(read(me, &mut out, &[]), Err(CmaError::BadSpans));
        let many = vec![span_of(&a[..1]); MAX_SPANS + 1];
        assert_eq!(read(me, &mut out, &many), Err(CmaError::BadSpans));
        // An unmapped span (page zero).
        let bad = Span { addr: 16, len: 64 };
        assert_eq!(read(me, &mut out, &[bad]), Err(CmaError::Fault));
        // A span that wraps the address space.
        let wrap = Span {
            addr: u64::MAX - 8,
            len: 64,
        };
        assert_eq!(read(me, &mut out, &[wrap]), Err(CmaError::BadSpans));
        // No such process (pid beyond pid_max).
        assert_eq!(
            read(i32::MAX, &mut out, &[span_of(&a)]),
            Err(CmaError::NoProcess)
        );
        assert_eq!(out, vec![0u8; 64], "nothing landed");
    }
}
