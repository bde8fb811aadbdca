//! Wake-ups between threads and processes: an [`EventFd`] (the doorbell an
//! application rings for the verbs engine, and the interrupt of a completion channel)
//! and [`poll_readable`], which blocks on several descriptors at once
//! ([`poll_readable_precise`] for waits shorter than a millisecond, with
//! [`set_thread_timer_slack`] so that the kernel ends them on time).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// A Linux eventfd: a counter that `notify` adds to and `drain` reads and zeroes.
/// Readable while the counter is non-zero.
#[derive(Debug)]
pub struct EventFd {
    // A File for its safe 8-byte read and write (an eventfd is read and written as
    // one native-endian u64).
    fd: File,
}

impl EventFd {
    /// A non-blocking eventfd with counter 0.
    pub fn new() -> io::Result<EventFd> {
        Ok(EventFd::from_owned(crate::sys::eventfd()?))
    }

    /// Wrap a descriptor received from another process (the shm link's handshake).
    pub fn from_owned(fd: OwnedFd) -> EventFd {
        EventFd { fd: File::from(fd) }
    }

    /// Add 1 to the counter, waking anyone blocked on it.
    pub fn notify(&self) {
        // A full counter (EAGAIN) means a wake-up is already pending, which is all
        // we want.
        let _ = (&self.fd).write(&1u64.to_ne_bytes());
    }

    /// Read and zero the counter; returns its value (0 when nothing was pending).
    pub fn drain(&self) -> u64 {
        let mut v = [0u8; 8];
        match (&self.fd).read(&mut v) {
            Ok(8) => u64::from_ne_bytes(v),
            _ => 0,
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
    readable_mask(fds, |p| crate::sys::poll(p, whole_ms(timeout)))
}

/// `timeout` in the whole milliseconds `poll` takes: truncated, but a sub-millisecond
/// timeout rounded up to one, so a short wait does not become a spin.
pub(crate) fn whole_ms(timeout: Duration) -> Duration {
    let ms = timeout.as_millis().min(i32::MAX as u128) as u64;
    Duration::from_millis(if ms == 0 && !timeout.is_zero() { 1 } else { ms })
}

/// [`poll_readable`] with the kernel's timer resolution instead of whole
/// milliseconds: a 20 µs timeout waits about 20 µs (plus the thread's timer slack, see
/// [`set_thread_timer_slack`]), where `poll_readable` rounds it up to 1 ms.
pub fn poll_readable_precise(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<u64> {
    readable_mask(fds, |p| crate::sys::ppoll(p, timeout))
}

/// [`poll_readable_precise`] over raw descriptors (those [`crate::Link::arm_wait`]
/// collects from several links at once): the caller keeps them open for the call.
pub fn poll_raw_readable(fds: &[std::os::fd::RawFd], timeout: Duration) -> io::Result<u64> {
    raw_readable_mask(fds, |p| crate::sys::ppoll(p, timeout))
}

/// The pollfd set for `fds` (on the stack for the few descriptors callers pass), the
/// wait, and the mask of the ready ones.
fn readable_mask(
    fds: &[BorrowedFd<'_>],
    wait: impl FnOnce(&mut [libc::pollfd]) -> io::Result<usize>,
) -> io::Result<u64> {
    const ON_STACK: usize = 8;
    let mut raw = [-1; ON_STACK];
    if fds.len() <= ON_STACK {
        for (r, fd) in raw.iter_mut().zip(fds) {
            *r = fd.as_raw_fd();
        }
        return raw_readable_mask(&raw[..fds.len()], wait);
    }
    let raw: Vec<_> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    raw_readable_mask(&raw, wait)
}

fn raw_readable_mask(
    fds: &[std::os::fd::RawFd],
    wait: impl FnOnce(&mut [libc::pollfd]) -> io::Result<usize>,
) -> io::Result<u64> {
    const ON_STACK: usize = 8;
    let blank = libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    };
    let mut stack = [blank; ON_STACK];
    let mut heap = Vec::new();
    let pfds: &mut [libc::pollfd] = if fds.len() <= ON_STACK {
        &mut stack[..fds.len()]
    } else {
        heap.resize(fds.len(), blank);
        &mut heap
    };
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = *fd;
        p.events = libc::POLLIN;
    }
    if wait(pfds)? == 0 {
        return Ok(0);
    }
    let mut mask = 0u64;
    for (i, p) in pfds.iter().enumerate().take(64) {
        if p.revents != 0 {
            mask |= 1 << i;
        }
    }
    Ok(mask)
}

/// Let the kernel end the calling thread's timed waits at most `slack` late (Linux
/// defaults to 50 µs, which would make a 10 µs wait a 60 µs one). A thread that times
/// its waits in microseconds (the verbs engine's stand-by) sets this once.
pub fn set_thread_timer_slack(slack: Duration) -> io::Result<()> {
    crate::sys::set_timer_slack(slack.as_nanos().min(u64::MAX as u128) as u64)
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

    #[test]
    fn a_precise_wait_times_out_no_earlier_than_asked_and_wakes_on_notify() {
        set_thread_timer_slack(Duration::from_micros(1)).unwrap();
        let e = EventFd::new().unwrap();
        let t = Instant::now();
        assert_eq!(
            poll_readable_precise(&[e.as_fd()], Duration::from_micros(50)).unwrap(),
            0
        );
        assert!(t.elapsed() >= Duration::from_micros(50));
        e.notify();
        assert_eq!(
            poll_readable_precise(&[e.as_fd()], Duration::from_secs(5)).unwrap(),
            1
        );
        assert_eq!(e.drain(), 1);
    }
}
