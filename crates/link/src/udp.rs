//! The udp datagram link: RoCEv2 over a kernel UDP socket, with `recvmmsg` and
//! `sendmmsg` moving a burst per system call and receive buffers filled in place (the
//! kernel copies straight into pooled buffers).
//!
//! **Why DF is set.** The ICRC of a RoCEv2 packet covers the IP header with only TTL,
//! TOS and checksum masked, so it covers the IPv4 identification field. On this link
//! the kernel writes the IP header, and the transport computes the ICRC from the
//! [`IcrcPath`] alone, assuming identification 0 and DF (see
//! [`weft_wire::roce::IcrcPath`]). Linux writes exactly that for a datagram sent from
//! an *unconnected* socket with `IP_MTU_DISCOVER = IP_PMTUDISC_DO`: DF set, and
//! `ip_select_ident` leaves the identification 0 when DF is set and the socket has no
//! destination. So every socket here is unconnected and has `IP_PMTUDISC_DO`; a
//! datagram larger than the path MTU then fails with `EMSGSIZE` (counted as a drop)
//! instead of being fragmented, which RoCEv2 forbids anyway. For IPv6 there is no
//! identification in the header, but `IPV6_PMTUDISC_DO` likewise keeps the kernel from
//! fragmenting (a fragment header would change what the peer receives).
//!
//! **Segmentation offload ([`UdpOptions::roce_offload`]).** A 64 KiB WRITE is sixteen
//! 4 KiB packets; sent one datagram each, every packet pays the kernel's whole UDP path
//! twice. With the option on, the link hands the kernel a run of equal-size datagrams
//! to one destination as one UDP GSO send (`UDP_SEGMENT`: up to 64 segments, 64 KiB),
//! and asks for coalesced receive (`UDP_GRO`). Linux numbers the segments of one GSO
//! send with consecutive identifications from the first one's (0 here: unconnected,
//! DF), so segment *k* leaves with identification *k*, and the link rewrites each later
//! segment's ICRC for it ([`Ipv4IdDeltas`]: CRC-32 is affine, so that is a few XORs,
//! not a new CRC). Every datagram on the wire then carries the ICRC its real header
//! gives — `weft decode`, tshark and rdma_rxe see good ICRCs — and the receiving
//! transport, which takes a coalesced send whole and never sees the identifications,
//! accepts any identification below 64 ([`IcrcPath::check_id`]). IPv6 has no
//! identification: nothing is rewritten there.
//!
//! **A run from one buffer.** With the option on, the link also lends its own send
//! buffer ([`DatagramLink::tx_room`]): the verbs engine's transport writes each packet
//! right after the one before, so a GSO run is one contiguous source and leaves as one
//! iovec. The kernel's copy of a 64 KiB run then goes as one long copy instead of one
//! per packet: 5.2 µs per message instead of 7.0 in perf samples, +8 % udp 64 KiB
//! WRITE rate with inline progress (docs/results/verbs-gso-20261201s24/). Copying
//! the packets together in the link would cost what it saves (2026-11-30).
//!
//! **Zero UDP checksums over IPv6.** RoCEv2 senders may leave the UDP checksum 0 (the
//! ICRC protects the packet); Linux's rdma_rxe does, over IPv6 too, where RFC 8200
//! otherwise forbids it and a Linux UDP socket drops such datagrams. IPv6 sockets here
//! set `UDP_NO_CHECK6_RX` (RFC 6936) so those packets reach the transport, whose ICRC
//! check then decides. What the link sends keeps the kernel's checksum.
//!
//! **Why a specific bind address.** The ICRC also covers the destination IP. A socket
//! bound to `0.0.0.0` cannot tell which of the host's addresses a datagram was sent
//! to without `IP_PKTINFO` ancillary data on every receive, and would let the kernel
//! pick the source address of every send. weft binds one specific address per link
//! and refuses an unspecified one ([`UdpLink::bind`] returns `InvalidInput`): the
//! receive path's `dst` is always the bound address and the send path's `src` is too.

use crate::datagram::{path_between, path_ends, pool_buf_size, DEFAULT_MAX_DATAGRAM};
use crate::sys::{self, SendMsg};
use crate::{BufferPool, Datagram, DatagramLink, LinkStats, PacketBuf};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;
use weft_wire::roce::{IcrcPath, Ipv4IdDeltas, GSO_MAX_SEGMENTS};

/// Messages per `recvmmsg`/`sendmmsg` call.
pub const BURST: usize = 64;

/// Most UDP payload bytes in one GSO send: an IPv4 packet's 65 535 bytes less its
/// IP and UDP headers.
const GSO_MAX_BYTES: usize = 65_535 - 20 - 8;

/// Shortest run sent as one GSO send; shorter runs go datagram by datagram in the
/// same `sendmmsg`. A request-reply exchange sends pairs (the reply, then the ACK of
/// the peer's request): as one GSO send the reply reaches the peer only with the ACK,
/// after the segmentation set-up on both ends, while as two messages the reply is
/// delivered (and the peer's busy poll finds it) while this side still sends the ACK.
/// Measured on loopback, udp 64 B send-lat p50 4.98 µs with the pair as one GSO send,
/// 4.64 µs as two datagrams (docs/results/verbs-udp-latency-20261128.md).
const GSO_MIN_SEGMENTS: usize = 3;

/// Coalesced receives per `recvmmsg` with `UDP_GRO`, each into a buffer of
/// [`GRO_BUF`] bytes (1 MiB per link, allocated on the first receive).
const GRO_BURST: usize = 16;

/// A coalesced receive's buffer: the largest UDP payload.
const GRO_BUF: usize = 65_536;

/// The send stage's bytes: four 64 KiB GSO runs (a pass of the verbs engine stages
/// one alone, several QPs' rounds a few) and room for one more packet.
const STAGE_BYTES: usize = 4 * 65_536;

/// How a [`UdpLink`] is set up.
#[derive(Debug, Clone)]
pub struct UdpOptions {
    /// Pool for receive buffers; `None` makes one of `pool_buffers` buffers sized for
    /// `max_datagram`.
    pub pool: Option<BufferPool>,
    /// Buffers in the pool the link makes when `pool` is `None`.
    pub pool_buffers: usize,
    /// Largest datagram sent or received; longer ones are dropped and counted.
    pub max_datagram: usize,
    /// Requested socket receive and send buffer, bytes (`SO_RCVBUFFORCE` when the
    /// process may, otherwise `SO_RCVBUF`, which `net.core.rmem_max` caps).
    pub socket_buffer: usize,
    /// UDP GSO on send and `UDP_GRO` on receive (see the module doc). Only for
    /// RoCEv2 packets whose last four bytes are the ICRC computed for IPv4
    /// identification 0, as weft's transport writes them: the link rewrites those
    /// bytes in later segments. Off by default; the verbs engine turns it on.
    pub roce_offload: bool,
}

impl Default for UdpOptions {
    fn default() -> Self {
        UdpOptions {
            pool: None,
            pool_buffers: 2048,
            max_datagram: DEFAULT_MAX_DATAGRAM,
            socket_buffer: 8 << 20,
            roce_offload: false,
        }
    }
}

/// A RoCEv2 datagram link over one non-blocking UDP socket bound to a specific address.
pub struct UdpLink {
    fd: OwnedFd,
    local: SocketAddr,
    pool: BufferPool,
    max_datagram: usize,
    stats: LinkStats,
    /// Datagrams this link dropped itself (truncated, unknown source family).
    own_rx_drops: u64,
    /// The socket's `SO_RXQ_OVFL` counter as last seen.
    kernel_drops: u32,
    /// Receive buffers taken from the pool under one lock, kept between bursts.
    spare: Vec<PacketBuf>,
    /// The system calls' header arrays.
    mmsg: sys::Mmsg,
    /// Send runs of equal datagrams as one UDP GSO send (off after the kernel refuses).
    gso: bool,
    /// The socket coalesces received datagrams (`UDP_GRO` accepted).
    gro: bool,
    /// The messages of the current `sendmmsg`.
    msgs: Vec<SendMsg>,
    /// ICRC deltas for the last two segment lengths rewritten.
    deltas: [Option<Ipv4IdDeltas>; 2],
    /// Coalesced-receive buffers (with `gro`; empty until the first receive).
    gro_bufs: Vec<Box<[u8]>>,
    /// Segments of a coalesced receive beyond what the caller asked for.
    pending: Vec<Datagram>,
    /// The last receive found nothing: the next asks the kernel for one message, not
    /// a burst, so a busy-polling caller does not prepare (and the kernel does not
    /// validate) a burst of headers per empty poll. The first datagram that arrives
    /// opens full bursts again.
    rx_idle: bool,
    /// Packets are staged in `stage` ([`DatagramLink::tx_room`]; with
    /// [`UdpOptions::roce_offload`]).
    stages: bool,
    /// The send stage: staged packets back to back, so a GSO run is one source
    /// buffer and one iovec (allocated on the first staged packet).
    stage: Vec<u8>,
    /// Where the next packet is staged.
    stage_end: usize,
    /// Staged packets, oldest first: offset in `stage`, length, path.
    staged: Vec<(usize, usize, IcrcPath)>,
    /// The first staged packet not yet sent.
    staged_from: usize,
    /// Per message of the current staged `sendmmsg`: its first byte, its end, its
    /// packets.
    runs: Vec<(usize, usize, usize)>,
    /// The last [`DatagramLink::send_burst`] stopped at a full socket with datagrams
    /// left in the caller's vector: [`DatagramLink::wait`] then also wakes when the
    /// socket has room again (as it does while packets stay staged).
    tx_blocked: bool,
    /// The last send that stopped short stopped on `ENOBUFS` (the kernel out of
    /// memory for the packet), which leaves the socket writable: `wait` then sleeps
    /// a millisecond at most, not until the socket has room, which it already says.
    tx_nobufs: bool,
    /// What this crate's unit tests inject into the `sendmmsg` calls ([`send_msgs`]);
    /// nothing in any other build.
    faults: SendFaults,
}

/// Faults the unit tests inject into the link's `sendmmsg` calls ([`send_msgs`]).
#[cfg(test)]
#[derive(Debug, Default)]
struct SendFaults {
    /// One per call, oldest first, applied before the kernel sees the call.
    next: std::collections::VecDeque<SendFault>,
    /// A kernel that refuses UDP GSO with this errno: a call sends the messages before
    /// its first GSO message, or fails when that is the first (as `sendmmsg` reports a
    /// message that fails: the count before it, or the error when none went).
    refuse_gso: Option<i32>,
}

#[cfg(test)]
#[derive(Debug, Clone, Copy)]
enum SendFault {
    /// The call fails with this errno, nothing sent.
    Fail(i32),
    /// Only the first this many messages go to the kernel (a partial send).
    Only(usize),
}

#[cfg(not(test))]
type SendFaults = ();

/// One `sendmmsg` of `msgs` on `fd` ([`sys::Mmsg::send`]). In this crate's unit tests,
/// `faults` may fail the call or cut it short first, as a full socket or a kernel
/// without GSO does; in any other build it is `()` and this is the plain call.
#[inline(always)]
fn send_msgs<'a>(
    mmsg: &mut sys::Mmsg,
    faults: &mut SendFaults,
    fd: RawFd,
    msgs: &[SendMsg],
    bytes: impl IntoIterator<Item = &'a [u8]>,
) -> Result<usize, i32> {
    #[cfg(test)]
    let msgs = {
        let mut take = msgs.len();
        if let Some(e) = faults.refuse_gso {
            match msgs.iter().position(|m| m.gso > 0) {
                Some(0) => return Err(e),
                Some(k) => take = k,
                None => {}
            }
        }
        match faults.next.pop_front() {
            Some(SendFault::Fail(e)) => return Err(e),
            Some(SendFault::Only(k)) => take = take.min(k),
            None => {}
        }
        &msgs[..take]
    };
    #[cfg(not(test))]
    let () = *faults;
    mmsg.send(fd, msgs, bytes)
}

impl std::fmt::Debug for UdpLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpLink")
            .field("local", &self.local)
            .field("max_datagram", &self.max_datagram)
            .field("stats", &self.stats)
            .finish()
    }
}

impl UdpLink {
    /// Bind a UDP socket to `addr` (IPv4 or IPv6; a specific address, not
    /// `0.0.0.0`/`::`; port 0 picks a free port, RoCEv2's is
    /// [`weft_wire::roce::UDP_PORT`]). The socket is non-blocking, never connected,
    /// and has DF set (`IP_PMTUDISC_DO`): see the module doc for why.
    pub fn bind(addr: SocketAddr, opts: UdpOptions) -> io::Result<UdpLink> {
        if addr.ip().is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "udp link: bind a specific address, not {addr}: the ICRC covers the \
                     destination IP, which an unspecified bind cannot know"
                ),
            ));
        }
        let pool = match opts.pool {
            Some(p) => p,
            None => BufferPool::new(opts.pool_buffers, pool_buf_size(opts.max_datagram)),
        };
        let family = if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let fd = sys::socket(
            family,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::IPPROTO_UDP,
            "udp link: socket",
        )?;
        let s = fd.as_raw_fd();
        if addr.is_ipv4() {
            sys::set_int(
                s,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DO,
                "IP_MTU_DISCOVER",
            )?;
        } else {
            sys::set_int(s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1, "IPV6_V6ONLY")?;
            sys::set_int(
                s,
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IPV6_PMTUDISC_DO,
                "IPV6_MTU_DISCOVER",
            )?;
            sys::set_int(
                s,
                sys::SOL_UDP,
                sys::UDP_NO_CHECK6_RX,
                1,
                "UDP_NO_CHECK6_RX",
            )?;
        }
        let want = i32::try_from(opts.socket_buffer).unwrap_or(i32::MAX);
        for (force, plain, what) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        ] {
            // FORCE needs CAP_NET_ADMIN; the plain option is capped by
            // net.core.{r,w}mem_max. Either way the link works, with smaller bursts.
            if sys::set_int(s, libc::SOL_SOCKET, force, want, what).is_err() {
                let _ = sys::set_int(s, libc::SOL_SOCKET, plain, want, what);
            }
        }
        // Kernel receive-queue drops arrive with each datagram (best effort).
        let _ = sys::set_int(s, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1, "SO_RXQ_OVFL");
        // UDP_GRO needs Linux 5.0; without it the link receives datagram by datagram.
        let gro =
            opts.roce_offload && sys::set_int(s, sys::SOL_UDP, sys::UDP_GRO, 1, "UDP_GRO").is_ok();
        sys::bind_socket_addr(s, &addr, &format!("udp link: bind {addr}"))?;
        let local = sys::local_addr(s)?;
        Ok(UdpLink {
            fd,
            local,
            pool,
            max_datagram: opts.max_datagram,
            stats: LinkStats::default(),
            own_rx_drops: 0,
            kernel_drops: 0,
            spare: Vec::with_capacity(BURST),
            mmsg: sys::Mmsg::new(BURST, BURST * usize::from(GSO_MAX_SEGMENTS)),
            gso: opts.roce_offload,
            gro,
            msgs: Vec::with_capacity(BURST),
            deltas: [None; 2],
            gro_bufs: Vec::new(),
            pending: Vec::new(),
            rx_idle: false,
            stages: opts.roce_offload,
            stage: Vec::new(),
            stage_end: 0,
            staged: Vec::new(),
            staged_from: 0,
            runs: Vec::with_capacity(BURST),
            tx_blocked: false,
            tx_nobufs: false,
            faults: SendFaults::default(),
        })
    }

    /// Whether the link sends with UDP GSO and receives with `UDP_GRO` (both need
    /// [`UdpOptions::roce_offload`]; GSO goes off if the kernel refuses it).
    pub fn offload(&self) -> (bool, bool) {
        (self.gso, self.gro)
    }

    /// The socket (for reading options back in tests and diagnostics).
    pub fn socket(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// How many datagrams from the start of `ds` (all sendable) go in one message
    /// ([`gso_group_len`]).
    fn group_len(&self, ds: &[Datagram]) -> usize {
        gso_group_len(
            self.gso,
            ds.iter().map(|d| (d.buf.len(), path_ends(&d.path).1)),
        )
    }

    /// Rewrite the ICRCs of segments 1.. of a GSO group for identifications 1..
    /// (`undo`: back to identification 0; the XOR is its own inverse). IPv4 only.
    fn rewrite_icrcs(&mut self, group: &mut [Datagram]) {
        if !self.local.is_ipv4() {
            return;
        }
        let n = group.len();
        for (k, d) in group.iter_mut().enumerate().skip(1) {
            rewrite_segment(&mut self.deltas, &mut d.buf, k, n);
        }
    }

    /// Undo [`UdpLink::rewrite_icrcs`] for the GSO groups of `msgs` that were not sent,
    /// so that a later send can group the same datagrams differently.
    fn unrewrite(&mut self, dgrams: &mut [Datagram], msgs_from: usize) {
        let mut at: usize = self.msgs[..msgs_from].iter().map(|m| m.segs).sum();
        for idx in msgs_from..self.msgs.len() {
            let m = self.msgs[idx];
            if m.gso > 0 {
                self.rewrite_icrcs(&mut dgrams[at..at + m.segs]);
            }
            at += m.segs;
        }
    }

    /// Count one `sendmmsg` result `r` of messages whose packet counts `segs(k)` gives
    /// (`first_gso`: the first was a GSO message): the frames sent, a full socket, GSO
    /// refused (turned off, so the next try sends packet by packet), or the first
    /// message lost.
    fn settle(
        &mut self,
        r: Result<usize, i32>,
        first_gso: bool,
        segs: impl Fn(usize) -> usize,
    ) -> Sent {
        match r {
            Ok(0) => Sent::Stop,
            Ok(k) => {
                self.tx_nobufs = false;
                let n: usize = (0..k).map(&segs).sum();
                self.stats.tx_frames += n as u64;
                Sent::Advance(n)
            }
            Err(e @ (libc::EAGAIN | libc::ENOBUFS)) => {
                self.stats.tx_ring_full += 1;
                self.tx_nobufs = e == libc::ENOBUFS;
                Sent::Stop
            }
            Err(libc::EINTR) => Sent::Again,
            // A kernel or device that cannot segment: send packet by packet.
            Err(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP) if first_gso => {
                self.gso = false;
                Sent::Again
            }
            Err(_) => {
                // EMSGSIZE (larger than the path MTU with DF), unreachable network, a
                // pending ICMP error: this message is lost.
                let n = segs(0);
                self.stats.tx_dropped += n as u64;
                Sent::Advance(n)
            }
        }
    }

    /// True when this link can send `d`: it fits, and its path starts here.
    fn sendable(&self, d: &Datagram) -> bool {
        let (src, dst) = path_ends(&d.path);
        d.buf.len() <= self.max_datagram
            && src == self.local
            && dst.is_ipv4() == self.local.is_ipv4()
    }
}

/// Rewrite the ICRC of segment `k` (of `n`) of a GSO group for identification `k`
/// ([`UdpLink::rewrite_icrcs`]), with the deltas kept in `deltas`.
fn rewrite_segment(deltas: &mut [Option<Ipv4IdDeltas>; 2], seg: &mut [u8], k: usize, n: usize) {
    let Some(ib_len) = seg.len().checked_sub(4) else {
        return;
    };
    let slot = match deltas {
        [Some(a), _] if a.ib_len() == ib_len => 0,
        [_, Some(b)] if b.ib_len() == ib_len => 1,
        _ => {
            // Keep the full-size segments' deltas in slot 0, a shorter last
            // segment's in slot 1.
            let slot = usize::from(k + 1 == n && k > 1);
            deltas[slot] = Some(Ipv4IdDeltas::new(ib_len));
            slot
        }
    };
    if let Some(dl) = &deltas[slot] {
        dl.apply(seg, k as u16);
    }
}

/// How many packets from the start of a burst, given as (length, destination), go in
/// one message: with GSO (`gso`), a run to one destination of equal length (the last
/// may be shorter), at least [`GSO_MIN_SEGMENTS`], at most 64 segments and 64 KiB;
/// otherwise 1. The burst is not empty.
fn gso_group_len(gso: bool, mut ps: impl Iterator<Item = (usize, SocketAddr)>) -> usize {
    if !gso {
        return 1;
    }
    let Some((first, dst)) = ps.next() else {
        return 1;
    };
    let mut total = first;
    let mut g = 1;
    for (l, d) in ps {
        if g >= usize::from(GSO_MAX_SEGMENTS) || l > first || total + l > GSO_MAX_BYTES || d != dst
        {
            break;
        }
        total += l;
        g += 1;
        if l < first {
            break;
        }
    }
    if g < GSO_MIN_SEGMENTS {
        return 1;
    }
    g
}

/// What one `sendmmsg` result means for a send loop ([`UdpLink::send_with`],
/// [`UdpLink::flush_staged`]).
enum Sent {
    /// Packets from the front sent (or lost and counted): move past them and go on.
    Advance(usize),
    /// Try the same packets again (interrupted, or GSO just turned off).
    Again,
    /// The socket took nothing more: stop here.
    Stop,
}

impl UdpLink {
    /// How many staged packets from `staged[from]` go in one message: the rule of
    /// [`gso_group_len`] (staged packets are back to back, so a run is one source
    /// buffer).
    fn staged_group_len(&self, from: usize) -> usize {
        gso_group_len(
            self.gso,
            self.staged[from..]
                .iter()
                .map(|&(_, len, path)| (len, path_ends(&path).1)),
        )
    }

    /// Rewrite (or undo, [`UdpLink::rewrite_icrcs`]) the ICRCs of the later segments
    /// of the staged run at `stage[at..end]` whose segments are `seg` bytes.
    fn rewrite_staged(&mut self, at: usize, end: usize, seg: usize) {
        if !self.local.is_ipv4() {
            return;
        }
        let n = (end - at).div_ceil(seg);
        for (k, s) in self.stage[at..end].chunks_mut(seg).enumerate().skip(1) {
            rewrite_segment(&mut self.deltas, s, k, n);
        }
    }

    /// [`DatagramLink::tx_flush`]: [`UdpLink::send_with`] over the staged packets, a
    /// GSO run as one iovec.
    fn flush_staged(&mut self) -> usize {
        let mut i = self.staged_from;
        while i < self.staged.len() {
            self.msgs.clear();
            self.runs.clear();
            let mut j = i;
            while j < self.staged.len() && self.msgs.len() < BURST {
                let g = self.staged_group_len(j);
                let (at, len, path) = self.staged[j];
                let (last_at, last_len, _) = self.staged[j + g - 1];
                let end = last_at + last_len;
                let gso = if g > 1 {
                    self.rewrite_staged(at, end, len);
                    len as u16
                } else {
                    0
                };
                self.msgs.push(SendMsg {
                    dst: path_ends(&path).1,
                    segs: 1,
                    gso,
                });
                self.runs.push((at, end, g));
                j += g;
            }
            let stage = &self.stage;
            let bytes = self.runs.iter().map(|&(a, e, _)| &stage[a..e]);
            let fd = self.fd.as_raw_fd();
            let r = send_msgs(&mut self.mmsg, &mut self.faults, fd, &self.msgs, bytes);
            let sent_msgs = r.unwrap_or(0);
            for k in sent_msgs..self.msgs.len() {
                if self.msgs[k].gso > 0 {
                    let (a, e, _) = self.runs[k];
                    self.rewrite_staged(a, e, usize::from(self.msgs[k].gso));
                }
            }
            let first_gso = self.msgs[0].gso > 0;
            let runs = std::mem::take(&mut self.runs);
            let step = self.settle(r, first_gso, |k| runs[k].2);
            self.runs = runs;
            match step {
                Sent::Advance(n) => i += n,
                Sent::Again => {}
                Sent::Stop => break,
            }
        }
        if i == self.staged.len() {
            self.staged.clear();
            self.staged_from = 0;
            self.stage_end = 0;
        } else {
            self.staged_from = i;
        }
        self.staged.len() - self.staged_from
    }

    /// Send from the front of `dgrams` ([`DatagramLink::send_burst`]), handing each
    /// datagram it removes (sent or dropped) to `done`.
    fn send_with(
        &mut self,
        dgrams: &mut Vec<Datagram>,
        done: impl FnMut(Datagram),
    ) -> io::Result<usize> {
        let mut i = 0;
        while i < dgrams.len() {
            if !self.sendable(&dgrams[i]) {
                self.stats.tx_dropped += 1;
                i += 1;
                continue;
            }
            // One call takes at most BURST messages of at most 64 segments each.
            let limit = dgrams.len().min(i + BURST * usize::from(GSO_MAX_SEGMENTS));
            let end = (i..limit)
                .find(|&j| !self.sendable(&dgrams[j]))
                .unwrap_or(limit);
            // Messages for one call: plain datagrams, or GSO groups with their later
            // segments' ICRCs rewritten for the identifications they will get.
            self.msgs.clear();
            let mut j = i;
            while j < end && self.msgs.len() < BURST {
                let g = self.group_len(&dgrams[j..end]);
                let dst = path_ends(&dgrams[j].path).1;
                let gso = if g > 1 {
                    self.rewrite_icrcs(&mut dgrams[j..j + g]);
                    dgrams[j].buf.len() as u16
                } else {
                    0
                };
                self.msgs.push(SendMsg { dst, segs: g, gso });
                j += g;
            }
            let bytes = dgrams[i..j].iter().map(|d| &d.buf[..]);
            let fd = self.fd.as_raw_fd();
            let r = send_msgs(&mut self.mmsg, &mut self.faults, fd, &self.msgs, bytes);
            let sent_msgs = r.unwrap_or(0);
            self.unrewrite(&mut dgrams[i..j], sent_msgs);
            let first_gso = self.msgs[0].gso > 0;
            let msgs = std::mem::take(&mut self.msgs);
            let step = self.settle(r, first_gso, |k| msgs[k].segs);
            self.msgs = msgs;
            match step {
                Sent::Advance(n) => i += n,
                Sent::Again => {}
                Sent::Stop => break,
            }
        }
        self.tx_blocked = i < dgrams.len();
        dgrams.drain(..i).for_each(done);
        Ok(i)
    }

    /// [`DatagramLink::wait`] while packets are held back (staged, or
    /// [`UdpLink::tx_blocked`]):
    /// until the socket is readable or writable, `extra` is readable, or `timeout`
    /// passes (rounded up to a millisecond as [`crate::wake::poll_readable`] does).
    fn wait_room(&self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> io::Result<bool> {
        let mut fds = [
            libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN | libc::POLLOUT,
                revents: 0,
            },
            libc::pollfd {
                fd: extra.map_or(-1, |e| e.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let n = if extra.is_some() { 2 } else { 1 };
        Ok(sys::poll(&mut fds[..n], crate::wake::whole_ms(timeout))? > 0)
    }

    /// [`DatagramLink::recv_burst`] with `UDP_GRO`: each message may hold several
    /// datagrams of one sender, cut here into pool buffers (one copy each, which the
    /// kernel trips it saves pay for many times over). Segments beyond `max` wait in
    /// `pending` for the next call.
    fn recv_coalesced(&mut self, out: &mut Vec<Datagram>, max: usize) -> io::Result<usize> {
        let mut delivered = 0;
        let take = self.pending.len().min(max);
        if take > 0 {
            out.extend(self.pending.drain(..take));
            delivered += take;
        }
        if delivered == max {
            self.stats.rx_frames += delivered as u64;
            return Ok(delivered);
        }
        if self.gro_bufs.is_empty() {
            self.gro_bufs = (0..GRO_BURST)
                .map(|_| vec![0u8; GRO_BUF].into_boxed_slice())
                .collect();
        }
        let n = if self.rx_idle { 1 } else { GRO_BURST }.min(max - delivered);
        let bufs = self.gro_bufs[..n].iter_mut().map(|b| &mut b[..]);
        let got = match self.mmsg.recv(self.fd.as_raw_fd(), bufs) {
            Ok(got) => got,
            Err(e) => {
                self.rx_idle = true;
                self.stats.rx_frames += delivered as u64;
                return recv_error(e).map(|_| delivered);
            }
        };
        self.rx_idle = got == 0;
        for i in 0..got {
            let r = self.mmsg.received(i);
            if let Some(d) = r.rxq_ovfl {
                self.kernel_drops = d;
            }
            let path = r.from.and_then(|p| path_between(p, self.local));
            let (Some(path), false) = (path, r.truncated) else {
                self.own_rx_drops += 1;
                continue;
            };
            let data = &self.gro_bufs[i][..r.len.min(GRO_BUF)];
            if data.is_empty() {
                // An empty datagram carries no packet (chunks() would yield none).
                self.own_rx_drops += 1;
                continue;
            }
            let seg = r.gro.unwrap_or(data.len()).max(1);
            for chunk in data.chunks(seg) {
                if self.spare.is_empty() {
                    self.pool.alloc_burst(BURST, &mut self.spare);
                }
                let Some(mut b) = self.spare.pop() else {
                    self.own_rx_drops += 1;
                    continue;
                };
                b.reset();
                if chunk.len() > self.max_datagram || !b.copy_from(chunk) {
                    self.own_rx_drops += 1;
                    continue;
                }
                let d = Datagram { buf: b, path };
                if delivered < max {
                    out.push(d);
                    delivered += 1;
                } else {
                    self.pending.push(d);
                }
            }
        }
        self.stats.rx_frames += delivered as u64;
        self.stats.rx_dropped = self.own_rx_drops + u64::from(self.kernel_drops);
        Ok(delivered)
    }
}

/// A `recvmmsg` error: nothing waiting, or a pending ICMP error reported on this call,
/// is no datagram; anything else is an error.
fn recv_error(e: i32) -> io::Result<usize> {
    match e {
        libc::EAGAIN
        | libc::EINTR
        | libc::ECONNREFUSED
        | libc::EHOSTUNREACH
        | libc::ENETUNREACH => Ok(0),
        e => Err(sys::errno_err(e, "udp link: recvmmsg")),
    }
}

impl DatagramLink for UdpLink {
    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    fn pool(&self) -> &BufferPool {
        &self.pool
    }

    fn recv_burst(&mut self, out: &mut Vec<Datagram>, max: usize) -> io::Result<usize> {
        if self.gro {
            return self.recv_coalesced(out, max);
        }
        let want = if self.rx_idle { 1 } else { BURST }.min(max);
        if want == 0 {
            return Ok(0);
        }
        if self.spare.len() < want {
            let need = want - self.spare.len();
            self.pool.alloc_burst(need, &mut self.spare);
        }
        // With no free buffer the datagrams wait in the socket (and overflow into its
        // drop counter), rather than being read and thrown away here.
        let n = want.min(self.spare.len());
        if n == 0 {
            return Ok(0);
        }
        let max = self.max_datagram;
        let bufs = self.spare[..n].iter_mut().map(|b| {
            b.reset();
            let room = b.spare_mut();
            let len = room.len().min(max);
            &mut room[..len]
        });
        let got = match self.mmsg.recv(self.fd.as_raw_fd(), bufs) {
            Ok(got) => got,
            Err(e) => {
                self.rx_idle = true;
                return recv_error(e);
            }
        };
        self.rx_idle = got == 0;
        let mut delivered = 0;
        for (i, mut b) in self.spare.drain(..got).enumerate() {
            let r = self.mmsg.received(i);
            // SO_RXQ_OVFL: the latest counter rides on any datagram after a drop.
            if let Some(d) = r.rxq_ovfl {
                self.kernel_drops = d;
            }
            let path = r.from.and_then(|p| path_between(p, self.local));
            match path {
                Some(path) if !r.truncated && b.set_len(r.len) => {
                    out.push(Datagram { buf: b, path });
                    delivered += 1;
                }
                _ => self.own_rx_drops += 1,
            }
        }
        self.stats.rx_frames += delivered as u64;
        self.stats.rx_dropped = self.own_rx_drops + u64::from(self.kernel_drops);
        Ok(delivered)
    }

    fn send_burst(&mut self, dgrams: &mut Vec<Datagram>) -> io::Result<usize> {
        self.send_with(dgrams, drop)
    }

    /// `sendmmsg` copies: each sent (or dropped) datagram's buffer is free at once.
    fn send_burst_reuse(
        &mut self,
        dgrams: &mut Vec<Datagram>,
        spent: &mut Vec<PacketBuf>,
    ) -> io::Result<usize> {
        self.send_with(dgrams, |d| spent.push(d.buf))
    }

    fn stages_tx(&self) -> bool {
        self.stages
    }

    fn tx_room(&mut self) -> Option<&mut [u8]> {
        if !self.stages {
            return None;
        }
        let room = self.pool.buf_size().max(self.max_datagram);
        if self.stage.is_empty() {
            self.stage = vec![0; STAGE_BYTES + room];
        }
        self.stage.get_mut(self.stage_end..self.stage_end + room)
    }

    fn tx_commit(&mut self, len: usize, path: IcrcPath) -> usize {
        let (src, dst) = path_ends(&path);
        // An empty packet is no RoCEv2 packet (and no GSO segment size).
        if len > 0
            && self.stage_end + len <= self.stage.len()
            && len <= self.max_datagram
            && src == self.local
            && dst.is_ipv4() == self.local.is_ipv4()
        {
            self.staged.push((self.stage_end, len, path));
            self.stage_end += len;
        } else {
            self.stats.tx_dropped += 1;
        }
        self.staged.len() - self.staged_from
    }

    fn tx_flush(&mut self) -> usize {
        if self.staged_from == self.staged.len() {
            return 0;
        }
        self.flush_staged()
    }

    fn tx_staged(&self) -> usize {
        self.staged.len() - self.staged_from
    }

    /// Also wakes, while packets stay staged or the last `send_burst` stopped at a
    /// full socket (`EAGAIN`, `ENOBUFS`) with datagrams left, when the socket has
    /// room again: a caller that sleeps until its next receive or timer with packets
    /// held back would leave them there that long (the verbs engine sleeps up to
    /// 50 ms), though the kernel drains a send queue in microseconds.
    fn wait(&mut self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> io::Result<bool> {
        if !self.pending.is_empty() {
            return Ok(true);
        }
        let mut timeout = timeout;
        if self.tx_blocked || self.tx_staged() > 0 {
            if !self.tx_nobufs {
                return self.wait_room(timeout, extra);
            }
            // Writable though full of nothing: POLLOUT would return at once and the
            // caller would spin; retry the send after a short sleep instead.
            timeout = timeout.min(Duration::from_millis(1));
        }
        let mask = match extra {
            Some(e) => crate::wake::poll_readable(&[self.fd.as_fd(), e], timeout)?,
            None => crate::wake::poll_readable(&[self.fd.as_fd()], timeout)?,
        };
        Ok(mask != 0)
    }

    fn readiness_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    /// GRO segments beyond a receive's `max` (`pending`), staged packets, and a
    /// `send_burst`'s leftovers: what [`DatagramLink::wait`] wakes for without the
    /// socket being readable.
    fn held(&self) -> bool {
        !self.pending.is_empty() || self.tx_blocked || self.tx_staged() > 0
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wake::EventFd;
    use std::time::Instant;

    fn pair(a: &str, b: &str) -> (UdpLink, UdpLink) {
        let o = UdpOptions {
            pool_buffers: 256,
            ..UdpOptions::default()
        };
        (
            UdpLink::bind(a.parse().unwrap(), o.clone()).unwrap(),
            UdpLink::bind(b.parse().unwrap(), o).unwrap(),
        )
    }

    /// Two links on 127.0.0.1 with `roce_offload` (GSO and GRO).
    fn offload_pair() -> (UdpLink, UdpLink) {
        let on = UdpOptions {
            roce_offload: true,
            pool_buffers: 256,
            ..UdpOptions::default()
        };
        let bind = || UdpLink::bind("127.0.0.1:0".parse().unwrap(), on.clone()).unwrap();
        (bind(), bind())
    }

    fn dgram(from: &UdpLink, to: SocketAddr, bytes: &[u8]) -> Datagram {
        let mut buf = from.pool().alloc().unwrap();
        assert!(buf.copy_from(bytes));
        Datagram {
            buf,
            path: path_between(from.local_addr(), to).unwrap(),
        }
    }

    fn recv_n(l: &mut UdpLink, n: usize) -> Vec<Datagram> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut v = Vec::new();
        while v.len() < n && Instant::now() < deadline {
            if l.recv_burst(&mut v, 64).unwrap() == 0 {
                l.wait(Duration::from_millis(10), None).unwrap();
            }
        }
        v
    }

    #[test]
    fn an_unspecified_bind_address_is_refused() {
        for a in ["0.0.0.0:0", "[::]:0"] {
            let e = UdpLink::bind(a.parse().unwrap(), UdpOptions::default()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn df_is_set_on_both_families_and_ipv6_takes_zero_checksums() {
        let (a, _) = pair("127.0.0.1:0", "127.0.0.1:0");
        let v = sys::get_int(
            a.socket().as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            "get",
        )
        .unwrap();
        assert_eq!(v, libc::IP_PMTUDISC_DO);
        let b = UdpLink::bind("[::1]:0".parse().unwrap(), UdpOptions::default()).unwrap();
        let v = sys::get_int(
            b.socket().as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            "get",
        )
        .unwrap();
        assert_eq!(v, libc::IPV6_PMTUDISC_DO);
        let v = sys::get_int(
            b.socket().as_raw_fd(),
            sys::SOL_UDP,
            sys::UDP_NO_CHECK6_RX,
            "get",
        )
        .unwrap();
        assert_eq!(
            v, 1,
            "IPv6 accepts the zero UDP checksum RoCEv2 senders use"
        );
    }

    #[test]
    fn a_burst_crosses_loopback_with_its_path_v4_and_v6() {
        for (x, y) in [("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:0", "[::1]:0")] {
            let (mut a, mut b) = pair(x, y);
            let mut tx: Vec<_> = (0..100u8)
                .map(|i| dgram(&a, b.local_addr(), &[i; 300]))
                .collect();
            let mut sent = 0;
            let deadline = Instant::now() + Duration::from_secs(5);
            while !tx.is_empty() && Instant::now() < deadline {
                sent += a.send_burst(&mut tx).unwrap();
            }
            assert_eq!(sent, 100);
            assert_eq!(a.stats().tx_frames, 100);
            let got = recv_n(&mut b, 100);
            assert_eq!(got.len(), 100);
            for (i, d) in got.iter().enumerate() {
                assert_eq!(&d.buf[..], &[i as u8; 300][..]);
                assert_eq!(path_ends(&d.path), (a.local_addr(), b.local_addr()));
            }
            assert_eq!(b.stats().rx_frames, 100);
        }
    }

    /// One packet of [`mixed_runs`]: destination, path, bytes (ICRC filled for
    /// identification 0), and the identification it leaves with when sent with GSO.
    type Planned = (SocketAddr, IcrcPath, Vec<u8>, u16);

    /// The runs the offload send tests send from `a`: 70 of 1016 B to `b` (more than
    /// one GSO send holds), 5 of 316 B to `b`, 10 of 1016 B to `c`, one of 40 B to `b`;
    /// each packet's destination, path, bytes (its index, ICRC filled) and GSO
    /// identification. The GSO sends, by the grouping rule (at most 64 segments and
    /// 64 KiB, the last of a run may be shorter, at least three): 64 × 1016 to `b`
    /// (identifications 0..=63), 6 × 1016 + 316 (0..=6), 4 × 316 (0..=3), 10 × 1016
    /// to `c` (0..=9), and the 40 B packet alone (0).
    fn mixed_runs(a: &UdpLink, b: &UdpLink, c: &UdpLink) -> Vec<Planned> {
        let mut plan: Vec<(SocketAddr, usize, u16)> = Vec::new();
        plan.extend((0..64).map(|k| (b.local_addr(), 1016, k)));
        plan.extend((0..6).map(|k| (b.local_addr(), 1016, k)));
        plan.push((b.local_addr(), 316, 6));
        plan.extend((0..4).map(|k| (b.local_addr(), 316, k)));
        plan.extend((0..10).map(|k| (c.local_addr(), 1016, k)));
        plan.push((b.local_addr(), 40, 0));
        plan.iter()
            .enumerate()
            .map(|(i, &(to, len, id))| {
                let path = path_between(a.local_addr(), to).unwrap();
                let mut bytes = vec![i as u8; len];
                path.fill(&mut bytes).unwrap();
                (to, path, bytes, id)
            })
            .collect()
    }

    /// Every packet of `runs` arrived once, in order per destination, intact but for
    /// its ICRC, which holds for the identification it left with: its place in its
    /// GSO send (consecutive from 0 within each), or 0 for every packet when the
    /// link sent them one by one (`plain`).
    fn assert_runs_arrived(runs: &[Planned], b: &mut UdpLink, c: &mut UdpLink, plain: bool) {
        let mut cache = None;
        for r in [b, c] {
            let want: Vec<_> = runs.iter().filter(|x| x.0 == r.local_addr()).collect();
            let got = recv_n(r, want.len());
            assert_eq!(got.len(), want.len());
            for (k, (d, (_, _, w, id))) in got.iter().zip(want).enumerate() {
                let n = w.len() - 4;
                assert_eq!(d.buf[..n], w[..n], "packet {k}");
                let want_id = if plain { 0 } else { *id };
                assert_eq!(
                    d.path.check_id(&d.buf, GSO_MAX_SEGMENTS, &mut cache),
                    Some(want_id),
                    "packet {k} to {}",
                    r.local_addr()
                );
            }
            assert_eq!(r.stats().rx_frames, got.len() as u64);
            // Once: nothing more arrives (the sender sent all it had).
            let mut more = Vec::new();
            assert_eq!(r.recv_burst(&mut more, 64).unwrap(), 0, "a packet twice");
        }
    }

    #[test]
    fn offload_groups_runs_and_every_datagram_arrives_intact_with_a_findable_icrc() {
        let (mut a, mut b) = offload_pair();
        let (_, mut c) = pair("127.0.0.1:0", "127.0.0.1:0"); // c: no offload
        let runs = mixed_runs(&a, &b, &c);
        let mut tx: Vec<_> = runs
            .iter()
            .map(|(to, _, bytes, _)| dgram(&a, *to, bytes))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut n = 0;
        while !tx.is_empty() && Instant::now() < deadline {
            n += a.send_burst(&mut tx).unwrap();
        }
        assert_eq!(n, runs.len());
        assert_eq!(a.stats().tx_frames, runs.len() as u64);
        assert_runs_arrived(&runs, &mut b, &mut c, false);
    }

    /// The same runs staged in the link's buffer (`tx_room`, `tx_commit`, `tx_flush`)
    /// leave grouped as datagrams would, one iovec per message, and arrive intact
    /// with findable ICRCs; a packet whose path does not start here is dropped and
    /// counted, not staged.
    #[test]
    fn staged_runs_arrive_intact_with_a_findable_icrc_and_bad_paths_are_dropped() {
        let (mut a, mut b) = offload_pair();
        let (_, mut c) = pair("127.0.0.1:0", "127.0.0.1:0");
        assert!(a.stages_tx());
        let runs = mixed_runs(&a, &b, &c);
        for (i, (_, path, bytes, _)) in runs.iter().enumerate() {
            a.tx_room().unwrap()[..bytes.len()].copy_from_slice(bytes);
            assert_eq!(a.tx_commit(bytes.len(), *path), i + 1);
        }
        // Not from this link, or empty: dropped at commit.
        let foreign = path_between(c.local_addr(), b.local_addr()).unwrap();
        assert_eq!(a.tx_commit(40, foreign), runs.len());
        let to_b = path_between(a.local_addr(), b.local_addr()).unwrap();
        assert_eq!(a.tx_commit(0, to_b), runs.len());
        assert_eq!(a.stats().tx_dropped, 2);
        let deadline = Instant::now() + Duration::from_secs(5);
        while a.tx_flush() > 0 && Instant::now() < deadline {}
        assert_eq!(a.tx_staged(), 0);
        assert_eq!(a.stats().tx_frames, runs.len() as u64);
        assert_eq!(
            (a.stage_end, a.staged.len()),
            (0, 0),
            "the stage starts over"
        );
        assert_runs_arrived(&runs, &mut b, &mut c, false);
    }

    /// Send `runs` from `a` until none are left: by `send_burst` calls, or (`staged`)
    /// staged and flushed. A bounded number of calls: each either takes packets or
    /// meets an injected fault, and the faults are few. Returns how many packets each
    /// call left unsent.
    fn send_runs(a: &mut UdpLink, runs: &[Planned], staged: bool) -> Vec<usize> {
        let mut tx = Vec::new();
        for (i, (to, path, bytes, _)) in runs.iter().enumerate() {
            if staged {
                a.tx_room().unwrap()[..bytes.len()].copy_from_slice(bytes);
                assert_eq!(a.tx_commit(bytes.len(), *path), i + 1);
            } else {
                tx.push(dgram(a, *to, bytes));
            }
        }
        let mut left = Vec::new();
        for _ in 0..100 {
            let l = if staged {
                a.tx_flush()
            } else {
                a.send_burst(&mut tx).unwrap();
                tx.len()
            };
            left.push(l);
            if l == 0 {
                break;
            }
        }
        assert_eq!(left.last(), Some(&0), "all sent in 100 calls: {left:?}");
        left
    }

    /// A `sendmmsg` that takes only some of its messages (1, then 2, then 1 of a
    /// call): the rest go in the same `send_burst`, and every packet arrives once, in
    /// order, GSO runs intact with their identifications, counted once.
    #[test]
    fn a_partial_sendmmsg_sends_the_rest_and_every_packet_arrives_once() {
        for staged in [false, true] {
            let (mut a, mut b) = offload_pair();
            let (_, mut c) = pair("127.0.0.1:0", "127.0.0.1:0");
            let runs = mixed_runs(&a, &b, &c);
            a.faults
                .next
                .extend([SendFault::Only(1), SendFault::Only(2), SendFault::Only(1)]);
            assert_eq!(send_runs(&mut a, &runs, staged), [0], "one call");
            assert!(a.faults.next.is_empty(), "every fault met");
            assert_eq!(a.stats().tx_frames, runs.len() as u64);
            assert_eq!(a.stats().tx_ring_full, 0);
            assert_runs_arrived(&runs, &mut b, &mut c, false);
        }
    }

    /// A full socket (`EAGAIN`, `ENOBUFS`) after a partial send: the call returns
    /// what went, the rest stay (the caller's, or staged) and are counted as a full
    /// ring, and the next call sends them; every packet arrives once, in order.
    #[test]
    fn a_full_socket_keeps_the_rest_for_the_next_call_and_every_packet_arrives_once() {
        for staged in [false, true] {
            for errno in [libc::EAGAIN, libc::ENOBUFS] {
                let (mut a, mut b) = offload_pair();
                let (_, mut c) = pair("127.0.0.1:0", "127.0.0.1:0");
                let runs = mixed_runs(&a, &b, &c);
                // The first call sends its first message (the 64-segment run), the
                // next finds the socket full; later calls go through.
                a.faults
                    .next
                    .extend([SendFault::Only(1), SendFault::Fail(errno)]);
                let left = send_runs(&mut a, &runs, staged);
                assert_eq!(left, [runs.len() - 64, 0]);
                assert_eq!(a.stats().tx_frames, runs.len() as u64);
                assert_eq!(a.stats().tx_ring_full, 1);
                assert_eq!(a.stats().tx_dropped, 0);
                assert_runs_arrived(&runs, &mut b, &mut c, false);
            }
        }
    }

    /// A kernel that refuses UDP GSO (`EIO`: no checksum offload on the device;
    /// `EINVAL`; `ENOPROTOOPT`, `EOPNOTSUPP`: no `UDP_SEGMENT`): the link turns GSO off
    /// and sends the same packets one by one in the same call, their ICRCs back to
    /// identification 0; every packet arrives once, in order, counted once, none
    /// counted as dropped. A refusal after plain messages (a call whose first GSO
    /// message is not its first) sends those first.
    #[test]
    fn a_kernel_that_refuses_gso_gets_every_packet_plain_and_once() {
        for staged in [false, true] {
            for errno in [libc::EIO, libc::EINVAL, libc::ENOPROTOOPT, libc::EOPNOTSUPP] {
                for plain_first in [false, true] {
                    let (mut a, mut b) = offload_pair();
                    let (_, mut c) = pair("127.0.0.1:0", "127.0.0.1:0");
                    let mut runs = mixed_runs(&a, &b, &c);
                    if plain_first {
                        // The 40 B packet first: one plain message, then the runs.
                        runs.rotate_right(1);
                    }
                    a.faults.refuse_gso = Some(errno);
                    assert_eq!(send_runs(&mut a, &runs, staged), [0], "one call");
                    assert!(!a.offload().0, "GSO off after {errno}");
                    assert_eq!(a.stats().tx_frames, runs.len() as u64);
                    assert_eq!(a.stats().tx_dropped, 0);
                    assert_runs_arrived(&runs, &mut b, &mut c, true);
                }
            }
        }
    }

    /// Packets held back by a full socket wake [`DatagramLink::wait`] as soon as the
    /// socket has room (here at once: the `EAGAIN` was injected), though nothing
    /// arrives: without that, a caller that sleeps until a receive or a timer (the
    /// verbs engine, up to 50 ms) leaves them there. With nothing held back, the
    /// wait is for a receive only, as before.
    #[test]
    fn packets_held_back_by_a_full_socket_wake_the_wait_when_it_has_room() {
        for (staged, errno) in [
            (false, libc::EAGAIN),
            (true, libc::EAGAIN),
            (false, libc::ENOBUFS),
            (true, libc::ENOBUFS),
        ] {
            let (mut a, mut b) = offload_pair();
            let path = path_between(a.local_addr(), b.local_addr()).unwrap();
            let sent: Vec<Vec<u8>> = (0..8u8)
                .map(|i| {
                    let mut bytes = vec![i; 200];
                    path.fill(&mut bytes).unwrap();
                    bytes
                })
                .collect();
            let mut tx: Vec<_> = sent.iter().map(|x| dgram(&a, b.local_addr(), x)).collect();
            a.faults.next.push_back(SendFault::Fail(errno));
            if staged {
                for x in &sent {
                    a.tx_room().unwrap()[..x.len()].copy_from_slice(x);
                    a.tx_commit(x.len(), path);
                }
                assert_eq!(a.tx_flush(), 8, "all stay staged");
            } else {
                assert_eq!(a.send_burst(&mut tx).unwrap(), 0);
                assert_eq!(tx.len(), 8, "all stay the caller's");
            }
            assert_eq!(a.stats().tx_ring_full, 1);
            // Nothing will arrive at `a`: only the socket's room can end this wait
            // before its (long) timeout. After `ENOBUFS` the socket says it has room
            // all along (the kernel lacked memory, not buffer space): the wait is a
            // short sleep that ends in a timeout, not a readiness that would have the
            // caller spin on it.
            assert_eq!(
                a.wait(Duration::from_secs(30), None).unwrap(),
                errno == libc::EAGAIN,
                "woken by the socket's room (staged: {staged}, errno {errno})"
            );
            if staged {
                assert_eq!(a.tx_flush(), 0);
            } else {
                assert_eq!(a.send_burst(&mut tx).unwrap(), 8);
            }
            assert!(
                !a.wait(Duration::from_millis(1), None).unwrap(),
                "nothing held back, nothing to receive: a timeout"
            );
            let got = recv_n(&mut b, 8);
            assert_eq!(got.len(), 8);
            let mut cache = None;
            for (k, (d, x)) in got.iter().zip(&sent).enumerate() {
                assert_eq!(d.buf[..x.len() - 4], x[..x.len() - 4]);
                // Eight equal packets to one peer: one GSO send.
                assert_eq!(
                    d.path.check_id(&d.buf, GSO_MAX_SEGMENTS, &mut cache),
                    Some(k as u16)
                );
            }
            assert_eq!(a.stats().tx_frames, 8);
        }
    }

    /// A reply and an ACK (two datagrams to one peer, the second shorter) go as two
    /// plain messages of one `sendmmsg`; a run of [`GSO_MIN_SEGMENTS`] goes as one GSO
    /// send. Both arrive intact, in order.
    #[test]
    fn pairs_go_as_plain_datagrams_and_longer_runs_as_one_gso_send() {
        let (mut a, mut b) = offload_pair();
        let path = path_between(a.local_addr(), b.local_addr()).unwrap();
        for (lens, msgs, gso) in [
            (&[80, 20][..], 2, 0u16),
            (&[80, 80, 20][..], 1, 80),
            (&[80, 80, 80][..], 1, 80),
        ] {
            let mut sent = Vec::new();
            let mut tx = Vec::new();
            for (i, &len) in lens.iter().enumerate() {
                let mut bytes = vec![i as u8 + 1; len];
                path.fill(&mut bytes).unwrap();
                tx.push(dgram(&a, b.local_addr(), &bytes));
                sent.push(bytes);
            }
            assert_eq!(a.send_burst(&mut tx).unwrap(), lens.len());
            assert_eq!(a.msgs.len(), msgs, "{lens:?}");
            assert!(a.msgs.iter().all(|m| m.gso == gso), "{lens:?}");
            let got = recv_n(&mut b, lens.len());
            assert_eq!(got.len(), lens.len(), "{lens:?}");
            let mut cache = None;
            for (k, (d, want)) in got.iter().zip(&sent).enumerate() {
                let n = want.len() - 4;
                assert_eq!(d.buf[..n], want[..n], "{lens:?}");
                // A GSO send's segment k leaves with identification k; plain ones 0.
                let id = if gso > 0 { k as u16 } else { 0 };
                assert_eq!(
                    d.path.check_id(&d.buf, GSO_MAX_SEGMENTS, &mut cache),
                    Some(id),
                    "{lens:?} packet {k}"
                );
            }
        }
    }

    #[test]
    fn a_coalesced_receive_larger_than_asked_for_waits_in_the_link_not_in_the_kernel() {
        let (mut a, mut b) = offload_pair();
        let path = path_between(a.local_addr(), b.local_addr()).unwrap();
        let mut tx: Vec<_> = (0..20u8)
            .map(|i| {
                let mut bytes = vec![i; 500];
                path.fill(&mut bytes).unwrap();
                dgram(&a, b.local_addr(), &bytes)
            })
            .collect();
        assert_eq!(a.send_burst(&mut tx).unwrap(), 20);
        assert!(b.wait(Duration::from_secs(5), None).unwrap());
        let mut got = Vec::new();
        assert_eq!(
            b.recv_burst(&mut got, 5).unwrap(),
            5,
            "one GSO send, five asked for"
        );
        assert_eq!(
            b.pending.len(),
            15,
            "the send arrived whole; the rest is in the link"
        );
        let t = Instant::now();
        assert!(
            b.wait(Duration::from_secs(5), None).unwrap(),
            "the rest is waiting"
        );
        assert!(t.elapsed() < Duration::from_secs(1));
        while got.len() < 20 && b.recv_burst(&mut got, 5).unwrap() > 0 {}
        assert_eq!(got.len(), 20);
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.buf[..496], [i as u8; 496][..], "in order");
        }
        assert_eq!(b.stats().rx_frames, 20);
    }

    #[test]
    fn an_empty_datagram_to_a_coalescing_link_is_a_counted_drop() {
        let (_, mut b) = offload_pair();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(&[], b.local_addr()).unwrap();
        s.send_to(b"after", b.local_addr()).unwrap();
        let got = recv_n(&mut b, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(&got[0].buf[..], b"after");
        assert_eq!(b.stats().rx_dropped, 1);
    }

    #[test]
    fn bad_datagrams_are_dropped_and_counted_not_sent() {
        let (mut a, mut b) = pair("127.0.0.1:0", "127.0.0.1:0");
        let mut big = a.pool().alloc().unwrap();
        assert!(big.set_len(a.max_datagram() + 1));
        let wrong_src = Datagram {
            buf: a.pool().alloc().unwrap(),
            path: path_between("127.0.0.9:1".parse().unwrap(), b.local_addr()).unwrap(),
        };
        let mut tx = vec![
            Datagram {
                buf: big,
                path: path_between(a.local_addr(), b.local_addr()).unwrap(),
            },
            wrong_src,
            dgram(&a, b.local_addr(), b"ok"),
        ];
        assert_eq!(a.send_burst(&mut tx).unwrap(), 3);
        assert_eq!(a.stats().tx_dropped, 2);
        assert_eq!(a.stats().tx_frames, 1);
        let got = recv_n(&mut b, 1);
        assert_eq!(&got[0].buf[..], b"ok");
    }

    #[test]
    fn datagrams_the_kernel_dropped_show_up_in_rx_dropped() {
        let (mut a, _) = pair("127.0.0.1:0", "127.0.0.1:0");
        let mut b = UdpLink::bind(
            "127.0.0.1:0".parse().unwrap(),
            UdpOptions {
                socket_buffer: 1, // the kernel's minimum: a few datagrams fit
                pool_buffers: 64,
                ..UdpOptions::default()
            },
        )
        .unwrap();
        let mut sent = 0;
        for _ in 0..10 {
            let mut v: Vec<_> = (0..32)
                .map(|_| dgram(&a, b.local_addr(), &[1; 1000]))
                .collect();
            sent += a.send_burst(&mut v).unwrap() as u64;
        }
        assert_eq!(sent, 320);
        let mut got = recv_n(&mut b, 1);
        while b.recv_burst(&mut got, 64).unwrap() > 0 {}
        // The drop counter rides on the next datagram queued after the drops.
        let mut v = vec![dgram(&a, b.local_addr(), b"last")];
        a.send_burst(&mut v).unwrap();
        let n = got.len();
        got.extend(recv_n(&mut b, 1));
        assert_eq!(got.len(), n + 1);
        let s = b.stats();
        assert!(s.rx_dropped > 0, "{s:?}");
        assert_eq!(s.rx_frames + s.rx_dropped, 321, "{s:?}");
    }

    #[test]
    fn wait_wakes_on_a_datagram_or_the_extra_fd_and_times_out_otherwise() {
        let (mut a, mut b) = pair("127.0.0.1:0", "127.0.0.1:0");
        let t = Instant::now();
        assert!(!b.wait(Duration::from_millis(20), None).unwrap());
        assert!(t.elapsed() >= Duration::from_millis(15));
        let e = EventFd::new().unwrap();
        e.notify();
        assert!(b.wait(Duration::from_secs(5), Some(e.as_fd())).unwrap());
        e.drain();
        let mut tx = vec![dgram(&a, b.local_addr(), b"x")];
        a.send_burst(&mut tx).unwrap();
        assert!(b.wait(Duration::from_secs(5), Some(e.as_fd())).unwrap());
    }
}
