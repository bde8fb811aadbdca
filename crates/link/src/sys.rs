//! Small system-call helpers shared by the socket links: errors with context,
//! integer socket options, and `SocketAddr` <-> `sockaddr_storage`.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The last OS error with `what` in front.
pub(crate) fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
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

/// `setsockopt` with an `int` value.
pub(crate) fn set_int(fd: RawFd, level: i32, opt: i32, val: i32, what: &str) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its exact size; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&val as *const i32).cast(),
            mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok(())
    }
}

/// `getsockopt` with an `int` value.
#[cfg(test)]
pub(crate) fn get_int(fd: RawFd, level: i32, opt: i32, what: &str) -> io::Result<i32> {
    let mut val: i32 = 0;
    let mut len = mem::size_of::<i32>() as libc::socklen_t;
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
            mem::size_of::<libc::timeval>() as libc::socklen_t,
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
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>()
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
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>()
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
        libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
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
        libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
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
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
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
