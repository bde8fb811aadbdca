//! weft-link: how weft moves whole Ethernet frames in and out — the [`Link`] trait
//! (burst receive and send of frames in pooled buffers), its backends, and the SPSC
//! descriptor rings that carry frames between threads.
//!
//! It owns: [`pool`] (no allocation per packet), [`spsc`] (batched doorbells),
//! [`sim`] (in-memory links with a seeded fault injector, for tests) and
//! [`afpacket`] (Linux `AF_PACKET` with `TPACKET_V2` or `TPACKET_V3` mmap rings) and [`afxdp`] (Linux
//! `AF_XDP` sockets with a UMEM, in generic XDP mode by default).
//! Datagram links for the verbs engine: [`udp`] (kernel UDP sockets) and [`shm`]
//! (shared-memory rings between processes, which also carry frames between routers).
//!
//! It must not touch: packet contents. A link moves bytes; parsing is weft-wire's,
//! deciding is the router's or the verbs engine's. The one exception is [`offload`]:
//! the work a NIC does for the sender (finishing a partial transport checksum,
//! splitting a TSO super-frame), which the frame links do on receive because a veth
//! has no NIC to do it.
//!
//! `unsafe` is denied in this crate except in six modules, allowed it below with the
//! reason: `sys`, the system-call wrappers (descriptors, socket options, one mapping
//! owner, ioctls, polls, `sendmmsg`/`recvmmsg`, `process_vm_readv`, `bpf(2)`, signal
//! handlers) that take checked safe values and hand the kernel raw pointers; `spsc`,
//! the ring-index code; `pool`, whose buffers are slots of one arena (so it can be
//! registered once for zero-copy sends); `cma`, cross-memory attach into a raw
//! destination (a registered memory region); `shmem`, raw copies out of a peer's
//! mapped region; and `shm::words`, the atomic words of an shm segment's rings,
//! bounds-checked once when the segment is mapped rather than on every access. Every
//! block carries a `// SAFETY:` comment; the links themselves (udp, shm, afpacket,
//! afxdp) have no `unsafe` of their own.
#![deny(unsafe_code)]

pub mod afpacket;
pub mod afpacket_tc;
pub mod afxdp;
mod bpf_asm;
// Cross-memory attach: a raw destination pointer (into registered memory) handed to
// `process_vm_readv`.
#[allow(unsafe_code)]
pub mod cma;
pub mod datagram;
pub mod dgram_sim;
pub mod offload;
// The packet buffers: disjoint slots of one arena, reached through its base pointer.
#[allow(unsafe_code)]
pub mod pool;
pub mod shm;
// Memory a peer maps: raw copies out of a peer's read-only mapping.
#[allow(unsafe_code)]
pub mod shmem;
pub mod signal;
pub mod sim;
// The ring-index code: slots handed between threads by Acquire/Release indices.
#[allow(unsafe_code)]
pub mod spsc;
// The system-call wrappers: raw pointers in, checked safe values out.
#[allow(unsafe_code)]
mod sys;
pub mod udp;
pub mod wake;
pub mod xdp_fwd;

pub use datagram::{BurstMaps, Datagram, DatagramLink, RxItem};
pub use pool::{BufferPool, PacketBuf};
pub use shm::{ShmFrameLink, ShmLink, ShmOptions};
pub use sys::monotonic_micros;
pub use udp::{UdpLink, UdpOptions};

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// What a link is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// Name (the Linux interface, or a test label).
    pub name: String,
    /// The MAC address frames sent on this link carry as source.
    pub mac: [u8; 6],
    /// Largest frame, Ethernet header included, without FCS (1514 for MTU 1500).
    pub max_frame: usize,
}

/// Counters a link keeps about itself (frames the caller never saw are here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames handed to the caller.
    pub rx_frames: u64,
    /// Frames accepted for sending.
    pub tx_frames: u64,
    /// Frames lost before the caller could see them (kernel ring full, truncated,
    /// no free buffer).
    pub rx_dropped: u64,
    /// Times a send found the transmit ring full.
    pub tx_ring_full: u64,
    /// Frames accepted for sending but not sent (longer than the link allows, or
    /// refused by the kernel).
    pub tx_dropped: u64,
    /// Received frames whose transport checksum the sender had left to a NIC
    /// (`CHECKSUM_PARTIAL` across a veth), completed by the link ([`offload`]).
    pub rx_csum_completed: u64,
    /// Received super-frames the sender had left to a NIC to segment (GSO/TSO across
    /// a veth), split by the link into MTU-sized frames ([`offload`]).
    pub rx_gso_segmented: u64,
    /// Nanoseconds received frames waited in the link's receive ring, summed: from
    /// the kernel's timestamp of the frame (when it wrote the ring) to the receive
    /// call that read it (`AF_PACKET` only; 0 elsewhere). Divided by
    /// [`LinkStats::rx_ring_timed`], the mean time a frame sat there: the block
    /// timer of `TPACKET_V3`, a sleeping thread's wake-up, a busy core.
    pub rx_ring_wait_ns: u64,
    /// Frames whose ring wait is in [`LinkStats::rx_ring_wait_ns`].
    pub rx_ring_timed: u64,
    /// Blocking waits (shm) that ended on the very CPU of the peer thread that woke
    /// them, within 1 ms of the previous such wake-up (a storm of them: the two
    /// threads kept on one CPU while another may sit idle), after which the thread
    /// moved itself to another CPU it may run on (at most once per 10 ms).
    pub wakes_moved: u64,
}

/// How a link takes part in a wait on several links at once ([`Link::arm_wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// A receive may find frames now: do not block.
    Ready,
    /// Its descriptors were added: block on them.
    Fds,
    /// It has no descriptor to block on: block briefly (at most 1 ms) and look again.
    NoFd,
}

/// A frame link with burst receive and send over pooled buffers.
///
/// Both calls are non-blocking; [`Link::wait`] blocks until frames may be ready.
/// The router's port workers and the verbs engine drive links the same way:
///
/// ```text
/// loop { link.recv_burst(&mut rx, 32)?; …process…; link.send_burst(&mut tx)?;
///        if idle { link.wait(timeout)? } }
/// ```
pub trait Link: Send {
    /// Name, MAC and frame size.
    fn info(&self) -> &LinkInfo;

    /// The pool receive buffers come from; callers allocate frames to send from it too
    /// (any pool works for sending; this one is sized for the link). A link may keep
    /// a few of the pool's buffers as spares while it lives (one lock per burst).
    fn pool(&self) -> &BufferPool;

    /// Append up to `max` received frames to `out`; returns how many. 0 when none are
    /// waiting (or no buffer was free: see [`LinkStats::rx_dropped`]).
    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize>;

    /// Send frames from the front of `frames`, removing those accepted; returns how
    /// many. Frames still in `frames` afterwards did not fit (ring full): retry later
    /// or drop them. A frame longer than [`LinkInfo::max_frame`] is dropped and counted
    /// as sent-and-lost by the backend, never truncated.
    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize>;

    /// Block until a receive may find frames, or `timeout` passes. Returns true when
    /// woken by the link (frames may be ready), false on timeout. Spurious wakeups
    /// are allowed.
    fn wait(&mut self, timeout: Duration) -> io::Result<bool>;

    /// [`Link::wait`] that also ends when `doorbell` becomes readable: a thread that
    /// serves this link and rings fed by other threads blocks on both at once, so
    /// neither a frame nor a posted descriptor waits for a timeout. Links with
    /// descriptors to poll (afpacket, afxdp, shm) do exactly that; the default, for
    /// in-memory links, waits on the link alone for at most 1 ms, so the doorbell is
    /// noticed that late at worst.
    fn wait_also(
        &mut self,
        doorbell: std::os::fd::BorrowedFd<'_>,
        timeout: Duration,
    ) -> io::Result<bool> {
        let _ = doorbell;
        self.wait(timeout.min(Duration::from_millis(1)))
    }

    /// For a thread that serves several links and blocks on all of them at once (a
    /// router worker with several ports): get ready to block, adding to `fds` the
    /// descriptors that become readable when a receive may find frames. Returns
    /// [`Armed::Ready`] when a receive may find frames now (do not block),
    /// [`Armed::Fds`] when it added its descriptors, [`Armed::NoFd`] when it has
    /// none (the default: the caller then blocks at most 1 ms, as the default
    /// [`Link::wait_also`] does). Call [`Link::disarm_wait`] after the wait, or
    /// instead of it, whatever this returned.
    fn arm_wait(&mut self, fds: &mut Vec<RawFd>) -> io::Result<Armed> {
        let _ = fds;
        Ok(Armed::NoFd)
    }

    /// Undo [`Link::arm_wait`] (after the wait).
    fn disarm_wait(&mut self) {}

    /// The link's own counters.
    fn stats(&self) -> LinkStats;

    /// Bring [`Link::stats`] up to date where that costs a system call (the kernel's
    /// drop counter of an AF_PACKET socket); call it when reporting, not per burst.
    fn refresh_stats(&mut self) {}
}

impl<L: Link + ?Sized> Link for Box<L> {
    fn info(&self) -> &LinkInfo {
        (**self).info()
    }
    fn pool(&self) -> &BufferPool {
        (**self).pool()
    }
    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        (**self).recv_burst(out, max)
    }
    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize> {
        (**self).send_burst(frames)
    }
    fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        (**self).wait(timeout)
    }
    fn wait_also(
        &mut self,
        doorbell: std::os::fd::BorrowedFd<'_>,
        timeout: Duration,
    ) -> io::Result<bool> {
        (**self).wait_also(doorbell, timeout)
    }
    fn arm_wait(&mut self, fds: &mut Vec<RawFd>) -> io::Result<Armed> {
        (**self).arm_wait(fds)
    }
    fn disarm_wait(&mut self) {
        (**self).disarm_wait()
    }
    fn stats(&self) -> LinkStats {
        (**self).stats()
    }
    fn refresh_stats(&mut self) {
        (**self).refresh_stats()
    }
}
