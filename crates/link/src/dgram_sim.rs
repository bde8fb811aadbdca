//! An in-process fabric of [`DatagramLink`]s addressed by `SocketAddr`, with seeded
//! loss, duplication and reordering: for testing the verbs engine without sockets.
//!
//! Every link made by [`DgramFabric::link`] can send to every other link of the same
//! fabric. Faults are rolled per datagram at send time from one seeded generator, so
//! a test that sends the same datagrams in the same order sees the same faults.
//! `wait` blocks on an eventfd per link, so it also honours the `extra` descriptor.

use crate::datagram::path_ends;
use crate::datagram::RxItem;
use crate::sim::Rng;
use crate::wake::{poll_readable, EventFd};
use crate::{BufferPool, Datagram, DatagramLink, LinkStats, PacketBuf};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What the fabric does to datagrams in flight (probabilities, 0.0 to 1.0).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// A datagram is lost.
    pub loss: f64,
    /// A datagram arrives twice (when the sender's pool has a buffer for the copy).
    pub duplicate: f64,
    /// A datagram overtakes up to three datagrams queued before it.
    pub reorder: f64,
}

/// What the fabric did, over all its links.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Datagrams put in a receiver's queue (duplicates included).
    pub delivered: u64,
    /// Lost by the [`Faults::loss`] roll.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Datagrams that overtook others.
    pub reordered: u64,
    /// Dropped because the receiver's queue was full.
    pub overflowed: u64,
}

#[derive(Debug)]
struct Port {
    queue: Mutex<VecDeque<Datagram>>,
    wake: EventFd,
}

#[derive(Debug)]
struct Fabric {
    ports: HashMap<SocketAddr, Arc<Port>>,
    rng: Rng,
    faults: Faults,
    stats: FabricStats,
}

/// A set of links that can reach each other; cloning shares the fabric.
#[derive(Debug, Clone)]
pub struct DgramFabric {
    inner: Arc<Mutex<Fabric>>,
}

impl DgramFabric {
    /// An empty fabric with no faults; `seed` drives every fault roll.
    pub fn new(seed: u64) -> DgramFabric {
        DgramFabric {
            inner: Arc::new(Mutex::new(Fabric {
                ports: HashMap::new(),
                // 2s+1: never zero (xorshift needs that), and distinct seeds stay distinct.
                rng: Rng(seed.wrapping_mul(2).wrapping_add(1)),
                faults: Faults::default(),
                stats: FabricStats::default(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Fabric> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Change the faults (applies to datagrams sent from now on).
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The fabric's counters.
    pub fn stats(&self) -> FabricStats {
        self.lock().stats
    }

    /// A link at `addr` receiving into `pool`, queueing at most `queue_limit`
    /// datagrams. `AddrInUse` when the fabric already has a link there.
    pub fn link(
        &self,
        addr: SocketAddr,
        pool: BufferPool,
        queue_limit: usize,
    ) -> io::Result<SimDatagramLink> {
        let port = Arc::new(Port {
            queue: Mutex::new(VecDeque::new()),
            wake: EventFd::new()?,
        });
        let mut f = self.lock();
        if f.ports.contains_key(&addr) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("sim fabric: {addr} taken"),
            ));
        }
        f.ports.insert(addr, Arc::clone(&port));
        drop(f);
        Ok(SimDatagramLink {
            addr,
            fabric: self.clone(),
            port,
            max_datagram: pool
                .buf_size()
                .saturating_sub(crate::pool::DEFAULT_HEADROOM),
            pool,
            queue_limit,
            icrc: true,
            visits: false,
            in_memory: false,
            stats: LinkStats::default(),
        })
    }
}

/// One link of a [`DgramFabric`]; leaves the fabric when dropped.
#[derive(Debug)]
pub struct SimDatagramLink {
    addr: SocketAddr,
    fabric: DgramFabric,
    port: Arc<Port>,
    pool: BufferPool,
    max_datagram: usize,
    queue_limit: usize,
    icrc: bool,
    visits: bool,
    in_memory: bool,
    stats: LinkStats,
}

impl SimDatagramLink {
    /// What [`DatagramLink::icrc`] answers (true by default), to test both modes.
    pub fn set_icrc(&mut self, on: bool) {
        self.icrc = on;
    }

    /// What [`DatagramLink::visits_rx`] answers (false by default): with it on, the
    /// link hands received datagrams over one by one through
    /// [`DatagramLink::recv_each`] as the shm link does, to test both receive paths of
    /// a caller.
    pub fn set_visits(&mut self, on: bool) {
        self.visits = on;
    }

    /// What [`DatagramLink::sends_in_memory`] answers (false by default): with it on,
    /// [`DatagramLink::try_send_one`] sends a lone datagram at once, as the shm link
    /// does, so a caller's lone path and its burst path can both be tested.
    pub fn set_in_memory(&mut self, on: bool) {
        self.in_memory = on;
    }
}

impl Drop for SimDatagramLink {
    fn drop(&mut self) {
        self.fabric.lock().ports.remove(&self.addr);
    }
}

impl DatagramLink for SimDatagramLink {
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    fn icrc(&self) -> bool {
        self.icrc
    }

    fn pool(&self) -> &BufferPool {
        &self.pool
    }

    fn recv_burst(&mut self, out: &mut Vec<Datagram>, max: usize) -> io::Result<usize> {
        let mut q = self
            .port
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let n = max.min(q.len());
        out.extend(q.drain(..n));
        self.stats.rx_frames += n as u64;
        Ok(n)
    }

    fn visits_rx(&self) -> bool {
        self.visits
    }

    fn sends_in_memory(&self) -> bool {
        self.in_memory
    }

    /// With [`SimDatagramLink::set_in_memory`] on: the datagram goes at once, through
    /// the same fabric (and faults) as a burst of one.
    fn try_send_one(&mut self, bytes: &[u8], path: &weft_wire::roce::IcrcPath) -> bool {
        if !self.in_memory {
            return false;
        }
        let Some(mut buf) = self.pool.alloc() else {
            return false;
        };
        if !buf.copy_from(bytes) {
            return false;
        }
        let mut one = vec![Datagram { buf, path: *path }];
        self.send_burst(&mut one).is_ok()
    }

    /// The port's queue empty: a receive would find nothing.
    fn rx_idle(&mut self) -> bool {
        self.port
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Each datagram is taken from the port's queue alone (the queue's lock released
    /// before the visit, as the shm link lets go of its ring slot's accounting), so a
    /// visit sees what was published before its datagram was taken.
    fn recv_each(
        &mut self,
        max: usize,
        spare: &mut Vec<PacketBuf>,
        visit: &mut dyn FnMut(RxItem<'_>),
    ) -> io::Result<usize> {
        if !self.visits {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let mut n = 0;
        while n < max {
            let next = self
                .port
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front();
            let Some(d) = next else { break };
            n += 1;
            self.stats.rx_frames += 1;
            visit(RxItem {
                bytes: &d.buf,
                path: &d.path,
                pull_pid: None,
                pull_maps: None,
            });
            spare.push(d.buf);
        }
        Ok(n)
    }

    fn send_burst(&mut self, dgrams: &mut Vec<Datagram>) -> io::Result<usize> {
        let n = dgrams.len();
        let mut f = self.fabric.lock();
        let mut woken: Vec<Arc<Port>> = Vec::new();
        for d in dgrams.drain(..) {
            let (src, dst) = path_ends(&d.path);
            let port = f.ports.get(&dst).cloned();
            let Some(port) = port.filter(|_| src == self.addr && d.buf.len() <= self.max_datagram)
            else {
                // Unreachable or malformed: lost like a datagram to nowhere.
                self.stats.tx_dropped += 1;
                continue;
            };
            self.stats.tx_frames += 1;
            let faults = f.faults;
            if f.rng.chance(faults.loss) {
                f.stats.lost += 1;
                continue;
            }
            let mut copies = vec![d];
            if f.rng.chance(faults.duplicate) {
                if let Some(mut b) = self.pool.alloc() {
                    if b.copy_from(&copies[0].buf) {
                        let path = copies[0].path;
                        copies.push(Datagram { buf: b, path });
                        f.stats.duplicated += 1;
                    }
                }
            }
            let mut q = port.queue.lock().unwrap_or_else(PoisonError::into_inner);
            for c in copies {
                if q.len() >= self.queue_limit {
                    f.stats.overflowed += 1;
                    continue;
                }
                if !q.is_empty() && f.rng.chance(faults.reorder) {
                    let back = 1 + (f.rng.next() % 3) as usize;
                    let at = q.len().saturating_sub(back);
                    q.insert(at, c);
                    f.stats.reordered += 1;
                } else {
                    q.push_back(c);
                }
                f.stats.delivered += 1;
            }
            drop(q);
            if !woken.iter().any(|w| Arc::ptr_eq(w, &port)) {
                woken.push(port);
            }
        }
        drop(f);
        for p in woken {
            p.wake.notify();
        }
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> io::Result<bool> {
        let waiting = || {
            !self
                .port
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
        };
        if waiting() {
            return Ok(true);
        }
        let mask = match extra {
            Some(e) => poll_readable(&[self.port.wake.as_fd(), e], timeout)?,
            None => poll_readable(&[self.port.wake.as_fd()], timeout)?,
        };
        self.port.wake.drain();
        Ok(mask != 0 || waiting())
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagram::path_between;

    fn addr(i: u8) -> SocketAddr {
        SocketAddr::new([10, 0, 0, i].into(), 4791)
    }

    fn run(seed: u64, faults: Faults) -> (Vec<u32>, FabricStats) {
        let fabric = DgramFabric::new(seed);
        fabric.set_faults(faults);
        let pool = BufferPool::new(4096, 256);
        let mut a = fabric.link(addr(1), pool.clone(), 10_000).unwrap();
        let mut b = fabric.link(addr(2), pool, 10_000).unwrap();
        let mut v: Vec<_> = (0..1000u32)
            .map(|i| {
                let mut buf = a.pool().alloc().unwrap();
                assert!(buf.copy_from(&i.to_le_bytes()));
                Datagram {
                    buf,
                    path: path_between(addr(1), addr(2)).unwrap(),
                }
            })
            .collect();
        assert_eq!(a.send_burst(&mut v).unwrap(), 1000);
        let mut got = Vec::new();
        while b.recv_burst(&mut got, 64).unwrap() > 0 {}
        let seq = got
            .iter()
            .map(|d| {
                assert_eq!(path_ends(&d.path), (addr(1), addr(2)));
                u32::from_le_bytes(d.buf[..4].try_into().unwrap())
            })
            .collect();
        (seq, fabric.stats())
    }

    #[test]
    fn without_faults_everything_arrives_in_order() {
        let (seq, s) = run(1, Faults::default());
        assert_eq!(seq, (0..1000).collect::<Vec<_>>());
        assert_eq!(s.delivered, 1000);
    }

    #[test]
    fn faults_follow_the_seed_and_their_rates() {
        let f = Faults {
            loss: 0.1,
            duplicate: 0.05,
            reorder: 0.05,
        };
        let (x, s) = run(42, f);
        assert_eq!(run(42, f).0, x, "same seed, same faults");
        assert_ne!(run(43, f).0, x, "another seed, other faults");
        assert!((50..150).contains(&s.lost), "{s:?}");
        assert!((20..80).contains(&s.duplicated), "{s:?}");
        assert!((20..80).contains(&s.reordered), "{s:?}");
        assert_eq!(x.len() as u64, 1000 - s.lost + s.duplicated);
        assert!(x.windows(2).any(|w| w[1] < w[0]), "something overtook");
    }

    #[test]
    fn unknown_destinations_are_dropped_and_wait_wakes_on_arrival_or_extra() {
        let fabric = DgramFabric::new(7);
        let pool = BufferPool::new(16, 256);
        let mut a = fabric.link(addr(1), pool.clone(), 4).unwrap();
        let mut b = fabric.link(addr(2), pool.clone(), 4).unwrap();
        assert!(fabric.link(addr(2), pool.clone(), 4).is_err());
        let p2 = pool.clone();
        let mk = move |to| Datagram {
            buf: p2.alloc().unwrap(),
            path: path_between(addr(1), to).unwrap(),
        };
        a.send_burst(&mut vec![mk(addr(9))]).unwrap();
        assert_eq!(a.stats().tx_dropped, 1);
        assert!(!b.wait(Duration::from_millis(5), None).unwrap());
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            a.send_burst(&mut vec![mk(addr(2))]).unwrap();
            a
        });
        assert!(b.wait(Duration::from_secs(5), None).unwrap());
        drop(t.join().unwrap());
        let e = EventFd::new().unwrap();
        e.notify();
        let mut got = Vec::new();
        b.recv_burst(&mut got, 8).unwrap();
        assert_eq!(got.len(), 1);
        assert!(b.wait(Duration::from_secs(5), Some(e.as_fd())).unwrap());
        assert!(
            fabric.link(addr(1), pool, 4).is_ok(),
            "a dropped link frees its address"
        );
    }
}
