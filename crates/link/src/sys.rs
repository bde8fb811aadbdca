//! The system-call wrappers weft-link's backends share, so their `unsafe` is in one
//! place: errors with context, descriptor ownership ([`owned_fd`]), typed socket
//! options ([`setsockopt`], [`getsockopt`]), interface ioctls ([`interface_mac_mtu`],
//! [`if_nametoindex`]), the one owner of a memory mapping ([`Mmap`]), and
//! `SocketAddr` <-> `sockaddr_storage`.
//!
//! `unsafe` is allowed here (see the crate root) because these are the calls that
//! take raw pointers; each wrapper checks what the kernel returns and hands out safe
//! values (OwnedFd, bounds-checked slices, atomics).

use std::ffi::CString;
use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::AtomicU32;

/// `CLOCK_MONOTONIC` in microseconds (the clock `std::time::Instant` reads on Linux).
///
/// A progress pass reads the time whenever it moves a packet; through `Instant` each
/// read also paid for `Duration` arithmetic (`elapsed`, `as_micros`), about three
/// quarters of its cost as callgrind counts it.
pub fn monotonic_micros() -> u64 {
    // SAFETY: an all-zero timespec is a valid value (plain integers, and any padding
    // fields some targets have).
    let mut ts: libc::timespec = unsafe { mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        // CLOCK_MONOTONIC exists on every Linux; a sandbox that refuses the call
        // would otherwise stop time (deadlines would never come), so fail loudly, as
        // `Instant::now` does.
        panic!(
            "clock_gettime(CLOCK_MONOTONIC): {}",
            io::Error::last_os_error()
        );
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000)
        .wrapping_add(ts.tv_nsec as u64 / 1_000)
}

/// The last OS error with `what` in front.
pub(crate) fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The raw errno `e` as an error with `what` in front.
pub(crate) fn errno_err(e: i32, what: &str) -> io::Error {
    let e = io::Error::from_raw_os_error(e);
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The raw errno of the last failed call.
pub(crate) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Wrap the result of a descriptor-returning call.
pub(crate) fn owned_fd(fd: RawFd, what: &str) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(last_err(what));
    }
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a value of type `T` (an `int`, or a UAPI struct declared
/// `#[repr(C)]` with the kernel's layout).
pub(crate) fn setsockopt<T: Copy>(
    fd: RawFd,
    level: i32,
    opt: i32,
    val: &T,
    what: &str,
) -> io::Result<()> {
    // SAFETY: `val` is a live, initialised `T` and we pass its exact size; the kernel
    // only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok(())
    }
}

/// `getsockopt` into a value of type `T` (plain old data: every bit pattern valid),
/// and the number of bytes the kernel wrote.
pub(crate) fn getsockopt<T: Copy + Default>(
    fd: RawFd,
    level: i32,
    opt: i32,
    what: &str,
) -> io::Result<(T, usize)> {
    let mut val = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is writable for `len` bytes; the kernel writes at most `len`
    // bytes and updates `len`.
    let r = unsafe { libc::getsockopt(fd, level, opt, (&mut val as *mut T).cast(), &mut len) };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok((val, len as usize))
    }
}

/// `setsockopt` with an `int` value.
pub(crate) fn set_int(fd: RawFd, level: i32, opt: i32, val: i32, what: &str) -> io::Result<()> {
    setsockopt(fd, level, opt, &val, what)
}

/// The interface index of `name`.
pub(crate) fn if_nametoindex(name: &str) -> io::Result<u32> {
    let cname = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has NUL"))?;
    // SAFETY: `cname` is a valid NUL-terminated string for the duration of the call.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(last_err(&format!("interface {name}")));
    }
    Ok(ifindex)
}

/// `struct ifreq`: the name, then a 24-byte union (`ifr_hwaddr`, `ifr_mtu`, …).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: [u8; 24],
}

/// An `ioctl` that fills the union of a `struct ifreq` for `interface`.
fn ifreq_ioctl(fd: RawFd, interface: &str, req: libc::c_ulong) -> io::Result<[u8; 24]> {
    let bytes = interface.as_bytes();
    if bytes.len() >= 16 || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    let mut ifr = IfReq {
        name: [0; 16],
        data: [0; 24],
    };
    ifr.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `ifr` is a live `struct ifreq` of the kernel's size (40 bytes) with a
    // NUL-terminated name; SIOCGIFHWADDR and SIOCGIFMTU write only inside it.
    let r = unsafe { libc::ioctl(fd, req as _, &mut ifr as *mut IfReq) };
    if r < 0 {
        return Err(last_err(&format!("ioctl on {interface}")));
    }
    Ok(ifr.data)
}

/// The MAC address and MTU of `interface` in the calling thread's network namespace
/// (ioctls, not sysfs: sysfs shows the namespace it was mounted in).
pub fn interface_mac_mtu(interface: &str) -> io::Result<([u8; 6], usize)> {
    // SAFETY: plain syscall with constant arguments.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let fd = owned_fd(raw, "socket(AF_INET)")?;
    let hw = ifreq_ioctl(fd.as_raw_fd(), interface, 0x8927)?; // SIOCGIFHWADDR
    let mtu = ifreq_ioctl(fd.as_raw_fd(), interface, 0x8921)?; // SIOCGIFMTU
    let mut mac = [0u8; 6];
    // struct sockaddr: sa_family (2 bytes), then the address.
    mac.copy_from_slice(&hw[2..8]);
    let mtu = i32::from_ne_bytes([mtu[0], mtu[1], mtu[2], mtu[3]]);
    Ok((mac, usize::try_from(mtu).unwrap_or(1500)))
}

/// `struct ifreq` with `ifr_data` (a pointer) in its union.
#[repr(C)]
struct IfReqData {
    name: [u8; 16],
    data: *mut libc::c_void,
    _rest: [u8; 16],
}

/// `SIOCETHTOOL` on `interface` with the ethtool command struct `cmd` (its first
/// field the command number), which the kernel reads and fills. The raw errno is
/// in the error.
pub(crate) fn ethtool<T: Copy>(interface: &str, cmd: &mut T) -> io::Result<()> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    let bytes = interface.as_bytes();
    if bytes.len() >= 16 || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    let fd = socket(
        libc::AF_INET,
        libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
        0,
        "socket(AF_INET)",
    )?;
    let mut ifr = IfReqData {
        name: [0; 16],
        data: (cmd as *mut T).cast(),
        _rest: [0; 16],
    };
    ifr.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `ifr` is a `struct ifreq` (40 bytes) with a NUL-terminated name whose
    // `ifr_data` points at a live, exclusively borrowed `T`, the command's struct;
    // SIOCETHTOOL writes only into that struct.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr as *mut IfReqData) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The one owner of a memory mapping (a socket's rings, a UMEM, a shared-memory
/// segment): unmapped on drop, read and written only through bounds-checked slices
/// and aligned atomics.
#[derive(Debug)]
pub(crate) struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (no other handle to it exists in
// this process); moving it to another thread is sound. It is not `Sync`: shared
// access is only through `atomic_u32`, mutable access needs `&mut`.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Map `len` bytes of `fd` at `offset`, shared (with the kernel or another
    /// process), read and write; `flags` adds to `MAP_SHARED` (`MAP_POPULATE`,
    /// `MAP_LOCKED`).
    pub fn shared(
        fd: RawFd,
        len: usize,
        offset: libc::off_t,
        flags: libc::c_int,
        what: &str,
    ) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at a kernel-chosen address; the kernel checks `fd`,
        // `offset` and `len`. The result is checked.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_err(what));
        }
        Ok(Mmap { ptr: p.cast(), len })
    }

    /// Map `len` bytes of `fd` from offset 0, shared and read-only: a peer's memory
    /// we only ever copy from (see [`crate::shmem`]).
    pub fn shared_read_only(fd: RawFd, len: usize, what: &str) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at a kernel-chosen address; the kernel checks `fd`
        // and `len`. The result is checked.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_err(what));
        }
        Ok(Mmap { ptr: p.cast(), len })
    }

    /// Its first byte, for owners that hand the memory out by address (a memory
    /// region the engine copies into and out of with raw copies).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Anonymous, private, page-aligned memory (a UMEM).
    pub fn anonymous(len: usize, what: &str) -> io::Result<Mmap> {
        // SAFETY: a fresh private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_err(what));
        }
        Ok(Mmap { ptr: p.cast(), len })
    }

    /// Its address, for a kernel that is told where the memory is (`XDP_UMEM_REG`).
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes `off..off + len`, or None when out of bounds. The other side (kernel or
    /// peer) may write other parts concurrently; callers read only what a ring has
    /// handed to them (with Acquire first).
    pub fn slice(&self, off: usize, len: usize) -> Option<&[u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds of a live mapping, readable.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) })
    }

    /// Bytes `off..off + len` to write, or None when out of bounds; `&mut self` makes
    /// this the only view in this process. Callers write only what a ring says is
    /// theirs.
    pub fn slice_mut(&mut self, off: usize, len: usize) -> Option<&mut [u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds of a live mapping, writable; `&mut self` is exclusive.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) })
    }

    /// The 32-bit word at `off`, shared with the other side, or None when misaligned
    /// or out of bounds.
    pub fn atomic_u32(&self, off: usize) -> Option<&AtomicU32> {
        if off % 4 != 0 || off.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: in bounds, 4-aligned (the mapping is page-aligned), and valid for
        // the life of `&self`; AtomicU32 has u32's layout, and every access by us
        // is atomic, as the other side's are.
        Some(unsafe { &*self.ptr.add(off).cast::<AtomicU32>() })
    }
}

impl Mmap {
    /// Copy `src` into the mapping at `off` with a raw copy, never a Rust reference
    /// into it: for memory another process writes concurrently (a shm segment),
    /// where a `&mut [u8]` would be a data race. False (nothing copied) when out of
    /// bounds.
    pub fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        if off.checked_add(src.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: the destination range is inside the live mapping (checked above)
        // and does not overlap `src`, which is process-private memory. A concurrent
        // reader (the peer) sees bytes, no Rust reference to them exists.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) };
        true
    }

    /// Copy `len` bytes of the mapping at `off` to `dst` with a raw copy; false
    /// (nothing copied) when out of bounds.
    ///
    /// # Safety
    /// `[dst, dst + len)` must be writable memory of this process, valid for the
    /// call, outside this mapping, and not read or written through a Rust reference
    /// meanwhile.
    pub unsafe fn copy_out_raw(&self, off: usize, dst: *mut u8, len: usize) -> bool {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: the source range is inside the live mapping (checked above); the
        // destination is the caller's promise and does not overlap it.
        unsafe { ptr::copy_nonoverlapping(self.ptr.add(off), dst, len) };
        true
    }

    /// Copy from the mapping at `off` into `dst` with a raw copy (see
    /// [`Mmap::copy_in`]). A peer writing concurrently can change which bytes we
    /// copy, never where. False (nothing copied) when out of bounds.
    pub fn copy_out(&self, off: usize, dst: &mut [u8]) -> bool {
        if off.checked_add(dst.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: the source range is inside the live mapping (checked above); `dst`
        // is private memory.
        unsafe { ptr::copy_nonoverlapping(self.ptr.add(off), dst.as_mut_ptr(), dst.len()) };
        true
    }
}

/// A memfd named `name` of `len` bytes, sealed against shrinking, growing and
/// further seals, so a peer that maps it cannot be made to fault by a truncation.
pub(crate) fn sealed_memfd(name: &std::ffi::CStr, len: usize) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and lives for the call.
    let raw =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    let fd = owned_fd(raw, "memfd_create")?;
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
        return Err(last_err("ftruncate"));
    }
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: plain fcntl on a descriptor we own.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(last_err("F_ADD_SEALS"));
    }
    Ok(fd)
}

/// A memfd of `len` bytes that allows sealing but carries no seal (what a careless or
/// hostile peer might pass).
#[cfg(test)]
pub(crate) fn unsealed_memfd_for_tests(len: usize) -> io::Result<OwnedFd> {
    // SAFETY: the name is NUL-terminated and lives for the call.
    let raw = unsafe {
        libc::memfd_create(
            c"unsealed".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    let fd = owned_fd(raw, "memfd_create")?;
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
        return Err(last_err("ftruncate"));
    }
    Ok(fd)
}

/// The seals of a memfd (`F_GET_SEALS`), and its size in bytes.
pub(crate) fn seals_and_size(fd: &OwnedFd) -> io::Result<(libc::c_int, u64)> {
    // SAFETY: plain fcntl on a descriptor the caller holds.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        return Err(last_err("F_GET_SEALS"));
    }
    let size = std::fs::File::from(fd.try_clone()?).metadata()?.len();
    Ok((seals, size))
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are what mmap returned; no view into the mapping
        // outlives `self` (every slice borrows it).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// `getsockopt` with an `int` value.
#[cfg(test)]
pub(crate) fn get_int(fd: RawFd, level: i32, opt: i32, what: &str) -> io::Result<i32> {
    let mut val: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` (4) bytes into `val` and updates `len`.
    let r = unsafe { libc::getsockopt(fd, level, opt, (&mut val as *mut i32).cast(), &mut len) };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok(val)
    }
}

/// `setsockopt` with a `struct timeval` (`SO_RCVTIMEO`, `SO_SNDTIMEO`).
pub(crate) fn set_timeout(
    fd: RawFd,
    opt: i32,
    t: std::time::Duration,
    what: &str,
) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: a pointer to a live timeval and its exact size; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok(())
    }
}

/// Set or clear `O_NONBLOCK`.
pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: plain fcntl calls on a descriptor the caller holds.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(last_err("F_GETFL"));
    }
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(last_err("F_SETFL"));
    }
    Ok(())
}

/// `socket(domain, type, protocol)` as an owned descriptor.
pub(crate) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
    what: &str,
) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments; the result is checked.
    owned_fd(unsafe { libc::socket(domain, ty, protocol) }, what)
}

/// `bind` to an address of type `T` (a `#[repr(C)]` sockaddr of the socket's family).
pub(crate) fn bind<T: Copy>(fd: RawFd, addr: &T, what: &str) -> io::Result<()> {
    // SAFETY: `addr` is a live, initialised `T` of the size we pass; the kernel only
    // reads it.
    let r = unsafe {
        libc::bind(
            fd,
            (addr as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok(())
    }
}

/// `bind` to an IPv4 or IPv6 socket address.
pub(crate) fn bind_socket_addr(fd: RawFd, addr: &SocketAddr, what: &str) -> io::Result<()> {
    let (ss, len) = to_storage(addr);
    // SAFETY: `ss` holds a valid sockaddr of `len` bytes; the kernel only reads it.
    let r = unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok(())
    }
}

/// A zero-length, non-blocking `sendto` with no address: the doorbell of a mapped
/// transmit ring (`AF_PACKET`, `AF_XDP`). Returns the raw errno on failure.
pub(crate) fn kick_tx(fd: RawFd) -> Result<(), i32> {
    // SAFETY: no buffer and no address are passed (null with length 0).
    let r = unsafe { libc::sendto(fd, ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// A zero-length, non-blocking `recvfrom`: tells an `AF_XDP` socket its fill ring
/// has buffers again.
pub(crate) fn kick_rx(fd: RawFd) {
    // SAFETY: no buffer and no address are passed (null with length 0).
    unsafe {
        libc::recvfrom(
            fd,
            ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
}

/// `poll` on `fds` for up to `timeout`: how many are ready; an interrupted wait is
/// 0 (a spurious wakeup).
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout: std::time::Duration) -> io::Result<usize> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fds` is a live array of valid pollfd structs of the length passed.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// A non-blocking, close-on-exec eventfd with counter 0.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory arguments; a negative return is an error.
    owned_fd(
        unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) },
        "eventfd",
    )
}

/// Move the calling thread into the network namespace open at `fd`.
pub(crate) fn setns_net(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns only reads the fd; an invalid fd is reported as an error.
    let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    if r < 0 {
        Err(last_err("setns"))
    } else {
        Ok(())
    }
}

/// A unix socket address for `name` (a leading NUL makes it abstract).
fn unix_addr(name: &[u8]) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut sun: libc::sockaddr_un = unsafe { mem::zeroed() };
    if name.len() > sun.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "shm: socket name too long",
        ));
    }
    sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sun.sun_path.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    let len = size_of::<libc::sa_family_t>() + name.len();
    Ok((sun, len as libc::socklen_t))
}

/// Send one message on a unix socket, with descriptors attached (`SCM_RIGHTS`) when
/// `fds` is not empty.
pub(crate) fn send_msg(fd: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let data = size_of_val(fds) as u32;
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(data) } as usize;
        assert!(space <= size_of_val(&cbuf), "cmsg buffer");
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer is `space` bytes, aligned, and large enough for
        // one cmsghdr carrying `fds`; CMSG_FIRSTHDR/DATA stay inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(data) as _;
            ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<RawFd>(), fds.len());
        }
    }
    // SAFETY: `msg` points at a live iovec and control buffer for the call.
    let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
    if r < 0 {
        return Err(last_err("shm: sendmsg"));
    }
    Ok(())
}

/// One datagram into `buf`, not waiting: its whole length (`MSG_TRUNC`: larger than
/// `buf` when it was cut), or `None` when nothing is queued. For packet sockets,
/// which refuse `recv_msg`'s `MSG_CMSG_CLOEXEC`.
pub(crate) fn recv_dontwait(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is a live, writable buffer of the given length.
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        return match errno() {
            libc::EAGAIN | libc::EINTR => Ok(None),
            _ => Err(last_err("recv")),
        };
    }
    Ok(Some(n as usize))
}

/// One received control message: its bytes and any descriptors (owned at once, so
/// they are closed on every error path). `Ok(None)` when nothing is waiting;
/// `Ok(Some((0, _)))` when the peer closed.
pub(crate) fn recv_msg(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 16];
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&cbuf) as _;
    // SAFETY: `msg` points at a live iovec and control buffer of the given sizes.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return match errno() {
            libc::EAGAIN | libc::EINTR => Ok(None),
            _ => Err(last_err("shm: recvmsg")),
        };
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg_controllen` bytes of the control buffer; the
    // CMSG macros walk only within it, and an SCM_RIGHTS payload is an array of ints
    // (read unaligned) that are descriptors now installed in this process.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let p = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..data / size_of::<RawFd>() {
                    let raw = ptr::read_unaligned(p.add(i));
                    if raw >= 0 {
                        fds.push(OwnedFd::from_raw_fd(raw));
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Some((n as usize, fds)))
}

/// The user id of the process at the other end of a unix socket (`SO_PEERCRED`).
pub(crate) fn peer_uid(fd: RawFd) -> Option<u32> {
    peer_cred(fd).map(|c| c.uid)
}

/// The process id at the other end of a unix socket (`SO_PEERCRED`): the kernel's
/// record of who connected (or accepted), never a value the peer chose.
pub(crate) fn peer_pid(fd: RawFd) -> Option<i32> {
    peer_cred(fd).map(|c| c.pid).filter(|&p| p > 0)
}

fn peer_cred(fd: RawFd) -> Option<libc::ucred> {
    // SAFETY: ucred is plain old data.
    let mut cred: libc::ucred = unsafe { mem::zeroed() };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `cred`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred)
}

/// `process_vm_readv(2)`: copy the spans `src` of process `pid`, in order, into
/// `[dst, dst + len)` of this process. Returns the bytes copied, which may be fewer
/// than asked when a remote span faults part-way, or the errno.
///
/// # Safety
/// `[dst, dst + len)` must be writable memory of this process that nothing else
/// reads or writes as a Rust reference while the call runs (the kernel writes it
/// like any other process could: racing byte copies, no Rust aliasing guarantee).
pub(crate) unsafe fn vm_readv(
    pid: i32,
    dst: *mut u8,
    len: usize,
    src: &[libc::iovec],
) -> Result<usize, i32> {
    let local = libc::iovec {
        iov_base: dst.cast(),
        iov_len: len,
    };
    // SAFETY: `local` names memory the caller vouched for; `src` names memory of the
    // other process, which the kernel checks (EFAULT) and never dereferences here;
    // the counts are those of the two arrays.
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, src.as_ptr(), src.len() as _, 0) };
    if r < 0 {
        return Err(errno());
    }
    Ok(r as usize)
}

/// `bind` a unix socket to `name` (a leading NUL makes it abstract).
pub(crate) fn bind_unix(fd: RawFd, name: &[u8], what: &str) -> io::Result<()> {
    let (sun, len) = unix_addr(name)?;
    // SAFETY: `sun` is a valid sockaddr_un of which `len` bytes are used.
    let r = unsafe { libc::bind(fd, (&sun as *const libc::sockaddr_un).cast(), len) };
    if r < 0 {
        return Err(last_err(what));
    }
    Ok(())
}

/// `connect` a unix socket to `name` (a leading NUL makes it abstract).
pub(crate) fn connect_unix(fd: RawFd, name: &[u8], what: &str) -> io::Result<()> {
    let (sun, len) = unix_addr(name)?;
    // SAFETY: `sun` is a valid sockaddr_un of which `len` bytes are used.
    let r = unsafe { libc::connect(fd, (&sun as *const libc::sockaddr_un).cast(), len) };
    if r < 0 {
        return Err(last_err(what));
    }
    Ok(())
}

/// `listen` with `backlog`.
pub(crate) fn listen(fd: RawFd, backlog: i32, what: &str) -> io::Result<()> {
    // SAFETY: plain syscall on a socket the caller holds.
    if unsafe { libc::listen(fd, backlog) } < 0 {
        return Err(last_err(what));
    }
    Ok(())
}

/// One waiting connection, non-blocking and close-on-exec; None when none waits.
pub(crate) fn accept(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: accept4 with null address pointers only returns a descriptor.
    let raw = unsafe {
        libc::accept4(
            fd,
            ptr::null_mut(),
            ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    // No error value: the caller polls a non-blocking listener every millisecond and
    // almost always finds nobody (EAGAIN); formatting that error each time cost more
    // than the rest of the poll.
    if raw < 0 {
        return None;
    }
    owned_fd(raw, "accept4").ok()
}

/// This process's effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// An all-zero `sockaddr_storage`.
pub(crate) fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    unsafe { mem::zeroed() }
}

/// `addr` as a `sockaddr_storage` and the length of the family's struct.
pub(crate) fn to_storage(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut ss = zeroed_storage();
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// The socket address in `ss` (of `len` valid bytes), if it is IPv4 or IPv6.
pub(crate) fn from_storage(
    ss: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let len = len as usize;
    match i32::from(ss.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, `len` covers it,
            // and sockaddr_storage is aligned for it.
            let sin =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The local address a socket is bound to.
pub(crate) fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    let mut ss = zeroed_storage();
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `ss` and updates `len`.
    let r = unsafe {
        libc::getsockname(
            fd,
            (&mut ss as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(last_err("getsockname"));
    }
    from_storage(&ss, len).ok_or_else(|| io::Error::other("getsockname: not an IP socket"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The move lands on another allowed CPU, and the thread may still run
    /// everywhere it could before; a thread allowed one CPU is not moved.
    #[test]
    fn a_thread_moves_off_a_cpu_and_keeps_its_affinity() {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        std::thread::spawn(|| {
            let allowed = sched_getaffinity(None).unwrap();
            let here = current_cpu();
            assert!(allowed.is_set(here as usize));
            let landed = move_off_cpu(here).unwrap();
            assert_eq!(
                landed.is_some(),
                allowed.count() >= 2,
                "moved iff another CPU is allowed"
            );
            if let Some(c) = landed {
                assert_ne!(c, here, "off the CPU it was on");
                assert!(allowed.is_set(c as usize), "onto one it may use");
            }
            assert_eq!(sched_getaffinity(None).unwrap(), allowed, "affinity kept");
            // Pinned to one CPU: left there.
            let mut one = CpuSet::new();
            one.set(current_cpu() as usize);
            sched_setaffinity(None, &one).unwrap();
            let pinned = current_cpu();
            assert_eq!(move_off_cpu(pinned).unwrap(), None);
            assert_eq!(current_cpu(), pinned);
            // A CPU it may not use (a peer's word can say anything): nothing to do.
            assert_eq!(move_off_cpu(u32::MAX).unwrap(), None);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn ifreq_layouts_have_the_kernel_size() {
        assert_eq!(size_of::<IfReq>(), 40);
        assert_eq!(size_of::<IfReqData>(), 40);
    }

    #[test]
    fn a_mapping_hands_out_only_what_is_inside_it() {
        let mut m = Mmap::anonymous(4096, "test").expect("mmap");
        assert_eq!(m.len(), 4096);
        assert!(m.slice(4090, 6).is_some());
        assert!(m.slice(4090, 7).is_none());
        assert!(m.slice(usize::MAX, 2).is_none(), "no overflow");
        m.slice_mut(8, 4)
            .expect("in bounds")
            .copy_from_slice(&7u32.to_ne_bytes());
        let w = m.atomic_u32(8).expect("aligned");
        assert_eq!(w.load(std::sync::atomic::Ordering::Relaxed), 7);
        assert!(m.atomic_u32(6).is_none(), "misaligned");
        assert!(m.atomic_u32(4096).is_none(), "outside");
    }

    #[test]
    fn socket_addrs_round_trip_through_storage() {
        for s in ["192.0.2.7:4791", "[2001:db8::9]:65535", "0.0.0.0:0"] {
            let a: SocketAddr = s.parse().unwrap();
            let (ss, len) = to_storage(&a);
            assert_eq!(from_storage(&ss, len), Some(a));
            assert_eq!(from_storage(&ss, len - 1), None, "short length refused");
        }
    }
}

/// Room for one message's ancillary data: `SO_RXQ_OVFL` (a `u32`) and `UDP_GRO` (an
/// `int`) on receive, `UDP_SEGMENT` (a `u16`) on send, each with its header.
const MMSG_CTRL: usize = 64;

/// `SOL_UDP` (the UDP protocol number) and its options `UDP_SEGMENT` (GSO size on
/// send) and `UDP_GRO` (coalesced receive), from include/uapi/linux/udp.h; the libc
/// crate does not name them for glibc targets.
pub(crate) const SOL_UDP: libc::c_int = 17;
/// See [`SOL_UDP`].
pub(crate) const UDP_SEGMENT: libc::c_int = 103;
/// See [`SOL_UDP`].
pub(crate) const UDP_GRO: libc::c_int = 104;
/// See [`SOL_UDP`]: accept IPv6 UDP datagrams whose checksum is 0 (RFC 6936).
pub(crate) const UDP_NO_CHECK6_RX: libc::c_int = 102;

/// The header arrays of `sendmmsg`/`recvmmsg`. A received message has one iovec; a
/// sent one has one per segment (several when the kernel segments it, UDP GSO). The
/// raw pointers inside are written by [`Mmsg::send`]/[`Mmsg::recv`] from borrowed
/// slices just before the call and are stale (never read) afterwards; only the
/// lengths, names, flags and control bytes the kernel wrote are read back.
pub(crate) struct Mmsg {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; MMSG_CTRL / 8]>,
}

// SAFETY: the raw pointers inside point into buffers borrowed for one system call and
// are rewritten before every call that reads them; Rust code never dereferences them
// (received() reads only the kernel-written lengths, names and control bytes, which
// live in `self`), so moving an Mmsg to another thread moves no live borrow.
unsafe impl Send for Mmsg {}

/// What the kernel reported for one received message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Bytes written into the message's buffer.
    pub len: usize,
    /// The sender, if it was IPv4 or IPv6.
    pub from: Option<SocketAddr>,
    /// The datagram was longer than the buffer (`MSG_TRUNC`).
    pub truncated: bool,
    /// The socket's `SO_RXQ_OVFL` drop counter, when it rode on this datagram.
    pub rxq_ovfl: Option<u32>,
    /// The segment size, when the kernel handed over several datagrams of one sender
    /// coalesced into this message (`UDP_GRO`).
    pub gro: Option<usize>,
}

/// One message of a [`Mmsg::send`]: `segs` consecutive byte slices to `dst`, sent as
/// one datagram each; with `gso` non-zero, as one UDP GSO send that the kernel (or the
/// receiving socket) cuts into datagrams of `gso` bytes, the last possibly shorter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendMsg {
    /// Destination.
    pub dst: SocketAddr,
    /// Slices taken from the byte iterator for this message.
    pub segs: usize,
    /// `UDP_SEGMENT` size, or 0 for a plain datagram.
    pub gso: u16,
}

impl Mmsg {
    /// Arrays for up to `cap` messages and `iovs` slices per call.
    pub(crate) fn new(cap: usize, iovs: usize) -> Mmsg {
        // SAFETY: mmsghdr and iovec are plain old data; all-zero is a valid value.
        let (hdr, iov) = unsafe { (mem::zeroed::<libc::mmsghdr>(), mem::zeroed::<libc::iovec>()) };
        Mmsg {
            hdrs: vec![hdr; cap],
            iovs: vec![iov; iovs.max(cap)],
            names: vec![zeroed_storage(); cap],
            ctrl: vec![[0; MMSG_CTRL / 8]; cap],
        }
    }

    /// Fill message `i`'s header for a call: iovecs `iov..iov + iovlen` (already
    /// written), its name buffer (`namelen` bytes used), `ctrllen` bytes of control.
    fn prepare(&mut self, i: usize, iov: usize, iovlen: usize, namelen: u32, ctrllen: usize) {
        let h = &mut self.hdrs[i];
        h.msg_hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
        h.msg_hdr.msg_namelen = namelen;
        h.msg_hdr.msg_iov = self.iovs[iov..].as_mut_ptr();
        h.msg_hdr.msg_iovlen = iovlen as _;
        if ctrllen > 0 {
            h.msg_hdr.msg_control = self.ctrl[i].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = ctrllen as _;
        } else {
            h.msg_hdr.msg_control = ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
        }
        h.msg_hdr.msg_flags = 0;
        h.msg_len = 0;
    }

    /// Write one `UDP_SEGMENT` control message of `size` into message `i`'s control
    /// buffer; its length.
    fn put_segment_cmsg(&mut self, i: usize, size: u16) -> usize {
        // SAFETY: CMSG_SPACE(2) (24 on 64-bit) is below MMSG_CTRL, so the header and
        // its two data bytes lie within self.ctrl[i], which is 8-byte aligned as a
        // cmsghdr needs; the msghdr built here only tells CMSG_FIRSTHDR where that
        // buffer is and is not used afterwards.
        unsafe {
            let space = libc::CMSG_SPACE(2) as usize;
            let mut m: libc::msghdr = mem::zeroed();
            m.msg_control = self.ctrl[i].as_mut_ptr().cast();
            m.msg_controllen = space as _;
            let c = libc::CMSG_FIRSTHDR(&m);
            (*c).cmsg_level = SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(2) as _;
            ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size);
            space
        }
    }

    /// `sendmmsg` (non-blocking) of up to capacity messages, their slices taken in
    /// order from `bytes`; how many messages the kernel took, or the raw errno.
    pub(crate) fn send<'a>(
        &mut self,
        fd: RawFd,
        msgs: &[SendMsg],
        bytes: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<usize, i32> {
        let mut bytes = bytes.into_iter();
        let mut n = 0;
        let mut iov = 0;
        for m in msgs.iter().take(self.hdrs.len()) {
            if m.segs == 0 || iov + m.segs > self.iovs.len() {
                break;
            }
            for k in 0..m.segs {
                let Some(b) = bytes.next() else {
                    return Err(libc::EINVAL);
                };
                // The kernel only reads through this pointer (sendmmsg), so casting
                // away the const is sound.
                self.iovs[iov + k] = libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                };
            }
            let (ss, len) = to_storage(&m.dst);
            self.names[n] = ss;
            let ctrl = if m.gso > 0 {
                self.put_segment_cmsg(n, m.gso)
            } else {
                0
            };
            self.prepare(n, iov, m.segs, len, ctrl);
            iov += m.segs;
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        // The raw system call, not glibc's wrapper: the wrapper is a thread
        // cancellation point and brackets every call with two cancellation-state
        // updates, a measurable share of a busy-polling loop.
        // SAFETY: the first `n` headers point at live sockaddrs, control buffers and
        // iovecs in `self`, whose iovecs cover the borrowed `bytes` slices, alive (and
        // only read by the kernel) for the duration of the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sendmmsg,
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            Err(errno())
        } else {
            Ok(r as usize)
        }
    }

    /// `recvmmsg` (non-blocking) into up to capacity buffers; how many messages
    /// arrived (read each with [`Mmsg::received`]), or the raw errno.
    pub(crate) fn recv<'a>(
        &mut self,
        fd: RawFd,
        bufs: impl IntoIterator<Item = &'a mut [u8]>,
    ) -> Result<usize, i32> {
        let mut n = 0;
        for b in bufs.into_iter().take(self.hdrs.len()) {
            let namelen = size_of::<libc::sockaddr_storage>() as u32;
            self.iovs[n] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            self.prepare(n, n, 1, namelen, MMSG_CTRL);
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        // The raw system call, as in `send`.
        // SAFETY: the first `n` headers point at live sockaddr storage, control buffers
        // and iovecs in `self`; each iovec covers a borrowed writable slice, alive for
        // the call. The kernel writes only within those lengths.
        let r = unsafe {
            libc::syscall(
                libc::SYS_recvmmsg,
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                ptr::null_mut::<libc::timespec>(),
            )
        };
        if r < 0 {
            Err(errno())
        } else {
            Ok(r as usize)
        }
    }

    /// What the last [`Mmsg::recv`] got in message `i` (below the count it returned).
    pub(crate) fn received(&self, i: usize) -> Received {
        let h = &self.hdrs[i].msg_hdr;
        let mut rxq_ovfl = None;
        let mut gro = None;
        // Never trust the kernel-written length beyond our own buffer.
        if h.msg_controllen > 0 && h.msg_controllen <= MMSG_CTRL {
            // SAFETY: `msg_control` points at self.ctrl[i] (set by recv) and
            // `msg_controllen`, checked above to lie within it, is what the kernel
            // filled; CMSG_FIRSTHDR/NXTHDR stay within that length, and the data of an
            // SO_RXQ_OVFL message, checked to be long enough, holds a u32 (read
            // unaligned), as does a UDP_GRO message's int.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(h);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET
                        && (*c).cmsg_type == libc::SO_RXQ_OVFL
                        && (*c).cmsg_len as usize >= libc::CMSG_LEN(4) as usize
                    {
                        rxq_ovfl = Some(ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
                    } else if (*c).cmsg_level == SOL_UDP
                        && (*c).cmsg_type == UDP_GRO
                        && (*c).cmsg_len as usize >= libc::CMSG_LEN(4) as usize
                    {
                        let size = ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                        gro = usize::try_from(size).ok().filter(|&s| s > 0);
                    }
                    c = libc::CMSG_NXTHDR(h, c);
                }
            }
        }
        Received {
            len: self.hdrs[i].msg_len as usize,
            from: from_storage(&self.names[i], h.msg_namelen),
            truncated: h.msg_flags & libc::MSG_TRUNC != 0,
            rxq_ovfl,
            gro,
        }
    }
}

/// The `bpf(2)` commands AF_XDP needs, each a typed call: the `union bpf_attr` of every
/// command is built here, from borrowed values that outlive the call, so no caller
/// hands the kernel a raw pointer (include/uapi/linux/bpf.h).
pub(crate) mod bpf {
    use super::owned_fd;
    use std::ffi::CStr;
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

    const BPF_MAP_CREATE: libc::c_int = 0;
    const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
    const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
    const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
    const BPF_PROG_LOAD: libc::c_int = 5;
    const BPF_PROG_TEST_RUN: libc::c_int = 10;
    const BPF_LINK_CREATE: libc::c_int = 28;
    /// `map_flags` of an LPM trie: it allocates per insertion (the kernel insists).
    pub(crate) const BPF_F_NO_PREALLOC: u32 = 1;
    /// `enum bpf_map_type` values weft uses.
    pub(crate) const BPF_MAP_TYPE_ARRAY: u32 = 2;
    pub(crate) const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
    pub(crate) const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
    pub(crate) const BPF_MAP_TYPE_XSKMAP: u32 = 17;
    /// `enum bpf_prog_type`: XDP.
    pub(crate) const BPF_PROG_TYPE_XDP: u32 = 6;
    /// `enum bpf_prog_type`: a tc classifier (`SCHED_CLS`), run at tc ingress/egress.
    pub(crate) const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
    /// `enum bpf_attach_type`: tc ingress through a BPF link (tcx, Linux 6.6).
    pub(crate) const BPF_TCX_INGRESS: u32 = 46;
    /// `enum bpf_attach_type`: the XDP hook.
    pub(crate) const BPF_XDP: u32 = 37;
    /// `XDP_FLAGS_*` of a link: generic (skb) or the driver's hook.
    pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
    pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
    /// The source register of an `ld_imm64` whose immediate is a map's fd.
    pub(crate) const BPF_PSEUDO_MAP_FD: u8 = 1;
    /// Helper function ids (`enum bpf_func_id`).
    pub(crate) const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
    pub(crate) const BPF_FUNC_REDIRECT: i32 = 23;
    pub(crate) const BPF_FUNC_REDIRECT_MAP: i32 = 51;
    pub(crate) const BPF_FUNC_SKB_PULL_DATA: i32 = 39;
    pub(crate) const BPF_FUNC_CSUM_UPDATE: i32 = 40;
    /// `BPF_PROG_TEST_RUN` flag (Linux 6.11): the skb under test is
    /// `CHECKSUM_COMPLETE`, its `csum` the sum from the network header on, and the
    /// run fails with `EBADMSG` when the program leaves `csum` differing from the
    /// sum of the bytes it leaves.
    pub(crate) const BPF_F_TEST_SKB_CHECKSUM_COMPLETE: u32 = 1 << 2;

    /// `union bpf_attr` for `BPF_MAP_CREATE`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    struct MapCreateAttr {
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        map_flags: u32,
        inner_map_fd: u32,
        numa_node: u32,
        map_name: [u8; 16],
    }

    /// `union bpf_attr` for `BPF_MAP_UPDATE_ELEM`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    struct MapUpdateAttr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }

    /// `union bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    struct ProgLoadAttr {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        prog_name: [u8; 16],
        prog_ifindex: u32,
        expected_attach_type: u32,
    }

    /// `union bpf_attr` for `BPF_PROG_TEST_RUN`, up to `cpu`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    struct TestRunAttr {
        prog_fd: u32,
        retval: u32,
        data_size_in: u32,
        data_size_out: u32,
        data_in: u64,
        data_out: u64,
        repeat: u32,
        duration: u32,
        ctx_size_in: u32,
        ctx_size_out: u32,
        ctx_in: u64,
        ctx_out: u64,
        flags: u32,
        cpu: u32,
    }

    /// `union bpf_attr` for `BPF_LINK_CREATE`, the part XDP uses.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    struct LinkCreateAttr {
        prog_fd: u32,
        target_ifindex: u32,
        attach_type: u32,
        flags: u32,
    }

    /// One `struct bpf_insn`: opcode, then destination and source register in one byte
    /// (destination in the low nibble), offset, immediate.
    #[derive(Debug, Clone, Copy)]
    #[repr(C)]
    pub(crate) struct Insn {
        pub(crate) code: u8,
        pub(crate) regs: u8,
        pub(crate) off: i16,
        pub(crate) imm: i32,
    }

    impl Insn {
        pub(crate) const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
            Insn {
                code,
                regs: (src << 4) | (dst & 0x0f),
                off,
                imm,
            }
        }
    }

    /// `bpf(cmd, attr, sizeof attr)`.
    ///
    /// # Safety
    /// `attr` must be the `union bpf_attr` prefix the kernel expects for `cmd`, and
    /// every pointer inside it must point at memory that is live (and writable where
    /// the kernel writes) for the duration of the call.
    unsafe fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> libc::c_long {
        // SAFETY: `attr` is a live, initialised `T` of the size we pass; the kernel
        // reads it (zero-extending what we do not pass) and writes only inside it;
        // the pointers inside it are live by this function's contract.
        unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                (attr as *mut T).cast::<libc::c_void>(),
                size_of::<T>() as libc::c_uint,
            )
        }
    }

    /// A kernel object name: at most 15 bytes, NUL-padded.
    fn name16(name: &[u8]) -> [u8; 16] {
        let mut n = [0u8; 16];
        let len = name.len().min(15);
        n[..len].copy_from_slice(&name[..len]);
        n
    }

    /// `BPF_MAP_CREATE` of `map_type` with these key and value sizes.
    pub(crate) fn map_create(
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        name: &[u8],
    ) -> io::Result<OwnedFd> {
        map_create_flags(map_type, key_size, value_size, max_entries, 0, name)
    }

    /// `BPF_MAP_CREATE` with `map_flags`.
    pub(crate) fn map_create_flags(
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        map_flags: u32,
        name: &[u8],
    ) -> io::Result<OwnedFd> {
        let mut a = MapCreateAttr {
            map_type,
            key_size,
            value_size,
            max_entries,
            map_flags,
            map_name: name16(name),
            ..MapCreateAttr::default()
        };
        // SAFETY: a MAP_CREATE attr holds no pointers.
        let r = unsafe { bpf(BPF_MAP_CREATE, &mut a) };
        owned_fd(r as libc::c_int, "BPF_MAP_CREATE")
    }

    /// `BPF_PROG_LOAD` of `insns`; with `log`, the verifier writes its log there.
    pub(crate) fn prog_load(
        prog_type: u32,
        expected_attach_type: u32,
        insns: &[Insn],
        license: &CStr,
        name: &[u8],
        log: Option<&mut [u8]>,
    ) -> io::Result<OwnedFd> {
        let (log_level, log_size, log_buf) = match log {
            Some(l) => (1, l.len() as u32, l.as_mut_ptr() as u64),
            None => (0, 0, 0),
        };
        let mut a = ProgLoadAttr {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level,
            log_size,
            log_buf,
            prog_name: name16(name),
            expected_attach_type,
            ..ProgLoadAttr::default()
        };
        // The verifier gives up with EAGAIN when a signal is pending for the calling
        // thread (a SIGCHLD from a process another thread started, say): try again, a
        // few times, as libbpf does. Seen in CI: "processed 11 insns", then EAGAIN.
        let mut tries = 5;
        loop {
            // SAFETY: the instructions, the NUL-terminated license and the log buffer
            // (with its length) are borrowed for the whole call; the kernel reads the
            // first two and writes at most `log_size` bytes into the third.
            let r = unsafe { bpf(BPF_PROG_LOAD, &mut a) };
            let again = r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
            tries -= 1;
            if !again || tries == 0 {
                return owned_fd(r as libc::c_int, "BPF_PROG_LOAD");
            }
        }
    }

    /// `BPF_LINK_CREATE`: attach `prog` to interface `ifindex`.
    pub(crate) fn link_create(
        prog: BorrowedFd<'_>,
        ifindex: u32,
        attach_type: u32,
        flags: u32,
    ) -> io::Result<OwnedFd> {
        let mut a = LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type,
            flags,
        };
        // SAFETY: a LINK_CREATE attr for XDP holds no pointers.
        let r = unsafe { bpf(BPF_LINK_CREATE, &mut a) };
        owned_fd(r as libc::c_int, "BPF_LINK_CREATE")
    }

    /// `BPF_MAP_UPDATE_ELEM` of a map with 4-byte keys and values.
    pub(crate) fn map_update_u32(map: BorrowedFd<'_>, key: u32, value: u32) -> io::Result<()> {
        let mut a = MapUpdateAttr {
            map_fd: map.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            ..MapUpdateAttr::default()
        };
        // SAFETY: `key` and `value` are locals that outlive the call; the kernel
        // reads 4 bytes from each (the map's key and value size).
        let r = unsafe { bpf(BPF_MAP_UPDATE_ELEM, &mut a) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// A BPF map whose key and value sizes are known here, so every element call
    /// can check that the buffers it hands the kernel are exactly as long as the
    /// kernel will read or write (`values` is the number of values a lookup returns:
    /// one, or one per possible CPU for a per-CPU map).
    #[derive(Debug)]
    pub(crate) struct Map {
        fd: OwnedFd,
        key_size: usize,
        value_size: usize,
        values: usize,
    }

    impl Map {
        /// Create a map (see [`map_create_flags`]); `values` as in the type's doc.
        pub(crate) fn create(
            map_type: u32,
            key_size: u32,
            value_size: u32,
            max_entries: u32,
            map_flags: u32,
            values: usize,
            name: &[u8],
        ) -> io::Result<Map> {
            let fd =
                map_create_flags(map_type, key_size, value_size, max_entries, map_flags, name)?;
            Ok(Map {
                fd,
                key_size: key_size as usize,
                value_size: value_size as usize,
                values: values.max(1),
            })
        }

        /// The map's descriptor (for a program's `ld_imm64` map reference).
        pub(crate) fn fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }

        fn check(&self, key: &[u8], value: Option<(usize, usize)>) -> io::Result<()> {
            let bad = key.len() != self.key_size || value.is_some_and(|(got, want)| got != want);
            if bad {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "bpf map element of the wrong size",
                ));
            }
            Ok(())
        }

        fn elem(&self, cmd: libc::c_int, key: &[u8], value: u64) -> io::Result<()> {
            let mut a = MapUpdateAttr {
                map_fd: self.fd.as_raw_fd() as u32,
                key: key.as_ptr() as u64,
                value,
                ..MapUpdateAttr::default()
            };
            // SAFETY: callers checked that `key` is `key_size` bytes and that `value`
            // (when not 0) points at a live buffer of the size the kernel reads or
            // writes for `cmd`; both outlive the call.
            let r = unsafe { bpf(cmd, &mut a) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }

        /// `BPF_MAP_UPDATE_ELEM` (`BPF_ANY`): `key` and `value` exactly the map's sizes.
        pub(crate) fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
            self.check(key, Some((value.len(), self.value_size * self.values)))?;
            self.elem(BPF_MAP_UPDATE_ELEM, key, value.as_ptr() as u64)
        }

        /// `BPF_MAP_LOOKUP_ELEM` into `value`: the map's value size times `values`
        /// (a per-CPU map's values are each padded to 8 bytes by the kernel, so
        /// such maps here have 8-byte values).
        pub(crate) fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<()> {
            self.check(key, Some((value.len(), self.value_size * self.values)))?;
            self.elem(BPF_MAP_LOOKUP_ELEM, key, value.as_mut_ptr() as u64)
        }

        /// `BPF_MAP_DELETE_ELEM`.
        pub(crate) fn delete(&self, key: &[u8]) -> io::Result<()> {
            self.check(key, None)?;
            self.elem(BPF_MAP_DELETE_ELEM, key, 0)
        }
    }

    /// `BPF_PROG_TEST_RUN` of an XDP program on `data` (at least 14 bytes): its
    /// return value and the frame as the program left it (`out`'s first bytes; the
    /// returned length may exceed `out` when the program grew the frame).
    pub(crate) fn prog_test_run(
        prog: BorrowedFd<'_>,
        data: &[u8],
        out: &mut [u8],
    ) -> io::Result<(u32, usize)> {
        prog_test_run_flags(prog, data, out, 0)
    }

    /// [`prog_test_run`] with the run's `flags` (e.g.
    /// [`BPF_F_TEST_SKB_CHECKSUM_COMPLETE`]).
    pub(crate) fn prog_test_run_flags(
        prog: BorrowedFd<'_>,
        data: &[u8],
        out: &mut [u8],
        flags: u32,
    ) -> io::Result<(u32, usize)> {
        let mut a = TestRunAttr {
            prog_fd: prog.as_raw_fd() as u32,
            data_size_in: data.len() as u32,
            data_size_out: out.len() as u32,
            data_in: data.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat: 1,
            flags,
            ..TestRunAttr::default()
        };
        // SAFETY: `data` and `out` are live borrowed buffers of the lengths passed;
        // the kernel reads the first and writes at most `data_size_out` bytes into
        // the second; no context buffers are passed.
        let r = unsafe { bpf(BPF_PROG_TEST_RUN, &mut a) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((a.retval, a.data_size_out as usize))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn attrs_have_the_kernel_sizes_and_names_are_nul_terminated() {
            assert_eq!(size_of::<ProgLoadAttr>(), 72);
            assert_eq!(size_of::<MapUpdateAttr>(), 32);
            assert_eq!(size_of::<LinkCreateAttr>(), 16);
            assert_eq!(size_of::<TestRunAttr>(), 72);
            assert_eq!(size_of::<Insn>(), 8);
            assert_eq!(&name16(b"weft_xsks")[..10], b"weft_xsks\0");
            assert_eq!(name16(&[b'x'; 40])[15], 0);
        }
    }
}

/// Set by SIGINT and SIGTERM once [`stop_on_termination`] installed the handlers.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Install handlers for SIGINT and SIGTERM that set the returned flag.
pub(crate) fn stop_on_termination() -> io::Result<&'static std::sync::atomic::AtomicBool> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let handler = on_stop_signal as extern "C" fn(libc::c_int);
        // SAFETY: `on_stop_signal` only performs an atomic store, which is
        // async-signal-safe; `signal` with a valid signal number and handler has no
        // other preconditions.
        let r = unsafe { libc::signal(sig, handler as libc::sighandler_t) };
        if r == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(&STOP)
}

/// `ppoll` on `fds` for up to `timeout` at the kernel's timer resolution (`poll`'s
/// is a millisecond): how many are ready; an interrupted wait is 0.
pub(crate) fn ppoll(fds: &mut [libc::pollfd], timeout: std::time::Duration) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a live array of valid pollfd structs of the length passed, `ts`
    // a valid timespec that outlives the call, and a null signal mask leaves the
    // thread's mask unchanged.
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// Set the calling thread's timer slack (`PR_SET_TIMERSLACK`): how late the kernel may
/// end its timed waits to batch wake-ups (50 µs by default).
pub(crate) fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and no pointers.
    let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) };
    if r < 0 {
        Err(last_err("prctl(PR_SET_TIMERSLACK)"))
    } else {
        Ok(())
    }
}

/// The CPU the calling thread runs on (`sched_getcpu`), as the peer's ring words
/// carry it.
pub(crate) fn current_cpu() -> u32 {
    u32::try_from(rustix::thread::sched_getcpu()).unwrap_or(u32::MAX)
}

/// Move the calling thread off CPU `cpu` to another CPU it may run on, keeping the
/// CPUs it may run on as they were: the kernel migrates a running thread off a CPU
/// its affinity no longer allows before `sched_setaffinity` returns, and giving the
/// CPU back does not move it again. The CPU it ran on in between; `None` (nothing
/// done) when `cpu` is the only CPU allowed or not one of them (a thread pinned by its
/// user stays where it was put).
///
/// The restore is a `sched_setaffinity` of the mask read before the move (the
/// effective one): since Linux 6.2 the kernel keeps it as the thread's requested
/// mask, so a cpuset widened later does not widen this thread's CPUs (a thread that
/// never moved keeps following its cpuset), and a mask its user sets between the
/// two calls is overwritten.
pub(crate) fn move_off_cpu(cpu: u32) -> io::Result<Option<u32>> {
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    let cpu = cpu as usize;
    let allowed = sched_getaffinity(None)?;
    if cpu >= CpuSet::MAX_CPU || !allowed.is_set(cpu) || allowed.count() < 2 {
        return Ok(None);
    }
    let mut elsewhere = allowed;
    elsewhere.unset(cpu);
    sched_setaffinity(None, &elsewhere)?;
    let landed = current_cpu();
    sched_setaffinity(None, &allowed)?;
    Ok(Some(landed))
}
