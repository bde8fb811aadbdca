//! In-memory links for tests: [`pair`] joins two [`SimLink`]s like a veth pair, and
//! [`Faulty`] wraps any link with seeded loss and corruption (the smoltcp
//! `FaultInjector` shape: a wrapper with a seed, not a separate world).

use crate::wake::EventFd;
use crate::{Armed, BufferPool, Link, LinkInfo, LinkStats, PacketBuf};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Frames in flight towards one end.
#[derive(Debug, Default)]
struct Wire {
    queue: Mutex<Frames>,
    ready: Condvar,
}

/// The queue of a [`Wire`], and who waits for it on a descriptor.
#[derive(Debug, Default)]
struct Frames {
    q: VecDeque<PacketBuf>,
    /// Set while the receiving end blocks in [`Link::wait_also`] (on this eventfd and
    /// a doorbell at once): a sender notifies it as well as the condition variable.
    watcher: Option<Arc<EventFd>>,
}

/// One end of an in-memory point-to-point link.
#[derive(Debug)]
pub struct SimLink {
    info: LinkInfo,
    pool: BufferPool,
    rx: Arc<Wire>,
    tx: Arc<Wire>,
    /// Frames queued towards the peer beyond this are dropped (a full ring).
    queue_limit: usize,
    stats: LinkStats,
    /// This end's eventfd for [`Link::wait_also`], made at its first use.
    rx_bell: Option<Arc<EventFd>>,
}

/// Two joined ends, named `a` and `b`, with the given MACs, sharing `pool`. Each
/// direction holds at most `queue_limit` frames; more are counted as `tx_ring_full`
/// and stay with the sender.
pub fn pair(
    pool: &BufferPool,
    (name_a, mac_a): (&str, [u8; 6]),
    (name_b, mac_b): (&str, [u8; 6]),
    queue_limit: usize,
) -> (SimLink, SimLink) {
    let ab = Arc::new(Wire::default());
    let ba = Arc::new(Wire::default());
    let max_frame = pool.buf_size().min(1514);
    let end = |name: &str, mac, rx: &Arc<Wire>, tx: &Arc<Wire>| SimLink {
        info: LinkInfo {
            name: name.to_string(),
            mac,
            max_frame,
        },
        pool: pool.clone(),
        rx: Arc::clone(rx),
        tx: Arc::clone(tx),
        queue_limit,
        stats: LinkStats::default(),
        rx_bell: None,
    };
    (end(name_a, mac_a, &ba, &ab), end(name_b, mac_b, &ab, &ba))
}

impl SimLink {
    /// This end's eventfd for waits on descriptors, made at its first use.
    fn rx_bell(&mut self) -> io::Result<Arc<EventFd>> {
        if let Some(b) = &self.rx_bell {
            return Ok(Arc::clone(b));
        }
        let b = Arc::new(EventFd::new()?);
        self.rx_bell = Some(Arc::clone(&b));
        Ok(b)
    }

    /// Send a copy of `frame` (test convenience). False when no buffer is free, the
    /// frame does not fit one, or the queue is full.
    pub fn send_bytes(&mut self, frame: &[u8]) -> bool {
        let Some(mut b) = self.pool.alloc() else {
            return false;
        };
        if !b.copy_from(frame) {
            return false;
        }
        let mut v = vec![b];
        matches!(self.send_burst(&mut v), Ok(1))
    }

    /// Every frame waiting for this end, copied out (test convenience).
    pub fn drain_bytes(&mut self) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while matches!(self.recv_burst(&mut v, 64), Ok(n) if n > 0) {}
        v.iter().map(|b| b.to_vec()).collect()
    }

    /// Wait up to `timeout` for at least `n` frames in total, then return what came.
    pub fn recv_bytes_timeout(&mut self, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut got = Vec::new();
        loop {
            got.extend(self.drain_bytes());
            let now = std::time::Instant::now();
            if got.len() >= n || now >= deadline {
                return got;
            }
            let _ = self.wait((deadline - now).min(Duration::from_millis(5)));
        }
    }
}

impl Link for SimLink {
    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn pool(&self) -> &BufferPool {
        &self.pool
    }

    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        let mut g = self.rx.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let n = max.min(g.q.len());
        out.extend(g.q.drain(..n));
        self.stats.rx_frames += n as u64;
        Ok(n)
    }

    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize> {
        let mut g = self.tx.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.queue_limit.saturating_sub(g.q.len());
        let n = room.min(frames.len());
        let full = n < frames.len();
        for f in frames.drain(..n) {
            if f.len() <= self.info.max_frame {
                g.q.push_back(f);
            } else {
                self.stats.tx_dropped += 1;
            }
        }
        let watcher = if n > 0 { g.watcher.clone() } else { None };
        drop(g);
        if n > 0 {
            self.tx.ready.notify_all();
        }
        if let Some(w) = watcher {
            w.notify();
        }
        if full {
            self.stats.tx_ring_full += 1;
        }
        self.stats.tx_frames += n as u64;
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        let g = self.rx.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if !g.q.is_empty() {
            return Ok(true);
        }
        let (g, _) = self
            .rx
            .ready
            .wait_timeout(g, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        Ok(!g.q.is_empty())
    }

    /// Block until a frame arrives, `doorbell` is readable, or `timeout` passes. The
    /// default waits on the link only (at most 1 ms), which left a router's port
    /// thread asleep for that millisecond while another thread posted it frames and
    /// rang its doorbell: the wait is on an eventfd that senders notify while this
    /// end watches, and the doorbell, at once.
    fn wait_also(&mut self, doorbell: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
        let bell = self.rx_bell()?;
        {
            let mut g = self.rx.queue.lock().unwrap_or_else(PoisonError::into_inner);
            if !g.q.is_empty() {
                return Ok(true);
            }
            // Under the lock: a sender that queues after this look notifies `bell`.
            g.watcher = Some(Arc::clone(&bell));
        }
        let woke = crate::wake::poll_readable_precise(&[bell.as_fd(), doorbell], timeout);
        let mut g = self.rx.queue.lock().unwrap_or_else(PoisonError::into_inner);
        g.watcher = None;
        drop(g);
        bell.drain();
        woke?;
        Ok(!self
            .rx
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .q
            .is_empty())
    }

    /// The same watcher as [`Link::wait_also`], for a caller that blocks on it with
    /// other links' descriptors.
    fn arm_wait(&mut self, fds: &mut Vec<RawFd>) -> io::Result<Armed> {
        let bell = self.rx_bell()?;
        let mut g = self.rx.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if !g.q.is_empty() {
            return Ok(Armed::Ready);
        }
        g.watcher = Some(Arc::clone(&bell));
        drop(g);
        fds.push(bell.as_fd().as_raw_fd());
        Ok(Armed::Fds)
    }

    fn disarm_wait(&mut self) {
        self.rx
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .watcher = None;
        if let Some(b) = &self.rx_bell {
            b.drain();
        }
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

/// xorshift64*: small, seedable, good enough to pick which frames to hurt.
#[derive(Debug, Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 1.0 < p
    }
}

/// Any link with seeded faults on receive: frames dropped with probability
/// `drop_rate`, one byte flipped with probability `corrupt_rate`.
#[derive(Debug)]
pub struct Faulty<L> {
    inner: L,
    rng: Rng,
    /// Probability a received frame is lost.
    pub drop_rate: f64,
    /// Probability a received frame has one bit flipped.
    pub corrupt_rate: f64,
    /// Frames this wrapper dropped.
    pub dropped: u64,
    /// Frames this wrapper corrupted.
    pub corrupted: u64,
}

impl<L: Link> Faulty<L> {
    /// Wrap `inner`; the same seed gives the same faults for the same frames.
    pub fn new(inner: L, seed: u64) -> Faulty<L> {
        Faulty {
            inner,
            rng: Rng(seed | 1),
            drop_rate: 0.0,
            corrupt_rate: 0.0,
            dropped: 0,
            corrupted: 0,
        }
    }

    /// The wrapped link.
    pub fn inner_mut(&mut self) -> &mut L {
        &mut self.inner
    }
}

impl<L: Link> Link for Faulty<L> {
    fn info(&self) -> &LinkInfo {
        self.inner.info()
    }
    fn pool(&self) -> &BufferPool {
        self.inner.pool()
    }
    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        let start = out.len();
        self.inner.recv_burst(out, max)?;
        let mut kept = Vec::with_capacity(out.len() - start);
        for mut f in out.drain(start..) {
            if self.rng.chance(self.drop_rate) {
                self.dropped += 1;
                continue;
            }
            if !f.is_empty() && self.rng.chance(self.corrupt_rate) {
                let i = (self.rng.next() % f.len() as u64) as usize;
                let bit = 1u8 << (self.rng.next() % 8);
                f[i] ^= bit;
                self.corrupted += 1;
            }
            kept.push(f);
        }
        let n = kept.len();
        out.extend(kept);
        Ok(n)
    }
    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize> {
        self.inner.send_burst(frames)
    }
    fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        self.inner.wait(timeout)
    }
    fn wait_also(&mut self, doorbell: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
        self.inner.wait_also(doorbell, timeout)
    }
    fn arm_wait(&mut self, fds: &mut Vec<RawFd>) -> io::Result<Armed> {
        self.inner.arm_wait(fds)
    }
    fn disarm_wait(&mut self) {
        self.inner.disarm_wait()
    }
    fn stats(&self) -> LinkStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(limit: usize) -> (SimLink, SimLink) {
        let pool = BufferPool::new(256, 2048);
        pair(
            &pool,
            ("a", [2, 0, 0, 0, 0, 1]),
            ("b", [2, 0, 0, 0, 0, 2]),
            limit,
        )
    }

    #[test]
    fn frames_cross_in_order() {
        let (mut a, mut b) = ends(16);
        assert!(a.send_bytes(&[1; 60]));
        assert!(a.send_bytes(&[2; 70]));
        let got = b.drain_bytes();
        assert_eq!(got, vec![vec![1; 60], vec![2; 70]]);
        assert!(a.drain_bytes().is_empty());
        assert_eq!(b.stats().rx_frames, 2);
    }

    #[test]
    fn a_full_queue_leaves_frames_with_the_sender() {
        let (mut a, mut b) = ends(2);
        let mut v = Vec::new();
        a.pool().alloc_burst(3, &mut v);
        for f in &mut v {
            assert!(f.copy_from(&[7; 60]));
        }
        assert_eq!(a.send_burst(&mut v).expect("sim"), 2);
        assert_eq!(v.len(), 1);
        assert_eq!(a.stats().tx_ring_full, 1);
        assert_eq!(b.drain_bytes().len(), 2);
    }

    #[test]
    fn wait_wakes_on_a_frame_from_another_thread() {
        let (mut a, mut b) = ends(4);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            assert!(a.send_bytes(&[9; 64]));
        });
        let got = b.recv_bytes_timeout(1, Duration::from_secs(5));
        t.join().expect("sender");
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn faults_follow_the_seed() {
        let run = |seed| {
            let (mut a, b) = ends(1000);
            let mut f = Faulty::new(b, seed);
            f.drop_rate = 0.3;
            f.corrupt_rate = 0.3;
            for i in 0..200u8 {
                assert!(a.send_bytes(&[i; 64]));
            }
            let mut v = Vec::new();
            while f.recv_burst(&mut v, 32).expect("sim") > 0 {}
            (
                v.iter().map(|b| b.to_vec()).collect::<Vec<_>>(),
                f.dropped,
                f.corrupted,
            )
        };
        let (x, dropped, corrupted) = run(7);
        assert_eq!(run(7).0, x);
        assert!(dropped > 20 && dropped < 110, "dropped {dropped}");
        assert!(corrupted > 20, "corrupted {corrupted}");
        assert_eq!(x.len() as u64 + dropped, 200);
    }

    #[test]
    fn wait_also_wakes_for_the_doorbell_and_for_a_frame() {
        let (mut a, mut b) = ends(8);
        let bell = Arc::new(EventFd::new().unwrap());
        // Long enough that only a wake-up, not the timeout, can end the waits below.
        let long = Duration::from_secs(20);
        let ring = {
            let bell = Arc::clone(&bell);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                bell.notify();
            })
        };
        let t = std::time::Instant::now();
        assert!(!b.wait_also(bell.as_fd(), long).unwrap(), "no frame came");
        assert!(t.elapsed() < long / 2, "the doorbell woke it");
        ring.join().unwrap();
        bell.drain();
        let send = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            assert!(a.send_bytes(&[0u8; 60]));
            a
        });
        let t = std::time::Instant::now();
        assert!(b.wait_also(bell.as_fd(), long).unwrap(), "a frame came");
        assert!(t.elapsed() < long / 2, "the frame woke it");
        let mut a = send.join().unwrap();
        assert_eq!(b.drain_bytes().len(), 1);
        // A frame already queued: no wait at all.
        assert!(a.send_bytes(&[1u8; 60]));
        assert!(b.wait_also(bell.as_fd(), long).unwrap());
    }
}
