//! Wake-ups between threads and processes: an [`EventFd`] (the doorbell an
//! application rings for the verbs engine, and the interrupt of a completion channel)
//! and [`poll_readable`], which blocks on several descriptors at once.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A Linux eventfd: a counter that `notify` adds to and `drain` reads and zeroes.
/// Readable while the counter is non-zero.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A non-blocking eventfd with counter 0.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd has no memory preconditions; a negative return is an error.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventFd { fd })
    }

    /// Wrap a descriptor received from another process (the shm link's handshake).
    pub fn from_owned(fd: OwnedFd) -> EventFd {
        EventFd { fd }
    }

    /// Add 1 to the counter, waking anyone blocked on it.
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to a descriptor we own. A full
        // counter (EAGAIN) means a wake-up is already pending, which is all we want.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast::<libc::c_void>(),
                8,
            )
        };
    }

    /// Read and zero the counter; returns its value (0 when nothing was pending).
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64 from a descriptor we own.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut v as *mut u64).cast::<libc::c_void>(),
                8,
            )
        };
        if n == 8 {
            v
        } else {
            0
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Block until one of `fds` is readable (or hung up) or `timeout` passes. Returns a
/// bit mask of the ready descriptors (bit i for `fds[i]`, up to 64), 0 on timeout.
/// An interrupted wait returns 0 (a spurious wakeup).
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<u64> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // Round a sub-millisecond timeout up so a short wait does not become a spin.
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs for the call.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    let mut mask = 0u64;
    for (i, p) in pfds.iter().enumerate().take(64) {
        if p.revents != 0 {
            mask |= 1 << i;
        }
    }
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn eventfd_wakes_a_poller_and_drains_to_zero() {
        let e = EventFd::new().unwrap();
        let t = Instant::now();
        assert_eq!(
            poll_readable(&[e.as_fd()], Duration::from_millis(20)).unwrap(),
            0
        );
        assert!(t.elapsed() >= Duration::from_millis(15));
        e.notify();
        e.notify();
        assert_eq!(
            poll_readable(&[e.as_fd()], Duration::from_secs(5)).unwrap(),
            1
        );
        assert_eq!(e.drain(), 2);
        assert_eq!(e.drain(), 0);
    }

    #[test]
    fn notify_from_another_thread_ends_a_blocking_wait() {
        let e = std::sync::Arc::new(EventFd::new().unwrap());
        let e2 = std::sync::Arc::clone(&e);
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            e2.notify();
        });
        let mask = poll_readable(&[e.as_fd()], Duration::from_secs(10)).unwrap();
        h.join().unwrap();
        assert_eq!(mask, 1);
    }
}
