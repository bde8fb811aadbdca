//! One shm endpoint: the listening control socket, the connections to peers (a shared
//! segment, two eventfds and a control socket each), the handshake, and peer death.
//! [`super::ShmLink`] (datagrams) and [`super::ShmFrameLink`] (Ethernet frames) are
//! thin faces over it.
//!
//! Handshake, over an abstract `SOCK_SEQPACKET` unix socket named after the endpoint:
//! the *connector* (the side that sends first) connects, makes the segment (a sealed
//! memfd holding both rings) and two eventfds, and sends a hello carrying them with
//! `SCM_RIGHTS`, its name, its ICRC setting and the segment's geometry. It may write
//! into its ring at once. The *acceptor* checks the hello (magic, kind, ICRC setting,
//! geometry, seals and size of the memfd, that the two other descriptors are eventfds,
//! the peer's uid), maps the segment and answers ok, or answers why not and closes:
//! the connector then drops what it had queued (counted) and treats the peer as
//! unreachable for a back-off period. Because the connector never waits for the
//! answer, two endpoints that send to each other at the same moment cannot deadlock;
//! they end up with two connections, each sending on its own and receiving on both, so
//! each direction still keeps its order.
//!
//! The control socket stays open for the life of the connection: its hang-up is how
//! a peer's death (even by `SIGKILL`) is seen.
//!
//! **One copy.** The hello carries the address at which the connector mapped the
//! segment, and an ok answer the acceptor's. Each side, as the *consumer* of one ring,
//! then probes whether it can read the other process's memory: one
//! `process_vm_readv` of the segment's first bytes at the peer's address, from the pid
//! the kernel reports for the control socket (`SO_PEERCRED`), compared with its own
//! mapping of the same bytes. On success it sets its ring's "pulls" flag in the
//! segment, which tells the producer that the verbs engine may send large payloads
//! by reference (the consumer then copies them straight from the producer's memory,
//! see [`crate::cma`]); on failure (ptrace rules, a seccomp filter, an old peer) the
//! flag stays clear, the payloads keep travelling through the ring, and the refusal
//! is counted ([`ShmStats::cma_refused`]).
//!
//! **Shared regions.** Memory allocated as a sealed memfd ([`crate::shmem`]) is
//! offered to every connected peer ([`Endpoint::share`]): one control message per
//! region and connection, the memfd attached, with the region's id, address and
//! length in our process (sent at once to live connections, and to each new one
//! after its hello or ok). The receiver checks and maps it read-only
//! ([`PeerMaps::add`]) and hands the connection's table with each datagram, so the
//! verbs engine copies a by-reference payload from the mapping when it can.
//! Every region message (offer or revocation) is followed by a bump of the sending
//! ring's control counter in the segment; the receiver compares that counter, read
//! after a ring's tail, with the last it saw and drains its control socket first
//! when it moved (an acceptor also drains right after accepting: a connector's
//! offers follow its hello). So a region is mapped before any datagram sent after
//! its offer is delivered, and a datagram sent after a region was withdrawn
//! ([`Endpoint::unshare`]) is never copied from that region's old mapping, even if
//! the address range now holds other memory. A revocation that cannot be sent (the
//! peer stopped reading its control socket) ends the connection.

use super::ring::{Corrupt, Layout, Pop, Push, Region, RxRing, TxRing};
use super::ShmStats;
use crate::cma::{self, Span};
use crate::datagram::{path_between, path_ends};
use crate::shmem::PeerMaps;
use crate::sys::{self, peer_pid, peer_uid, recv_msg, send_msg};
use crate::wake::EventFd;
use crate::{BufferPool, LinkStats, PacketBuf};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_wire::roce::IcrcPath;

/// What an endpoint carries; both ends of a connection must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// RoCEv2 datagrams ([`super::ShmLink`]).
    Datagram = 1,
    /// Ethernet frames ([`super::ShmFrameLink`]).
    Frame = 2,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Datagram => "weft-shm/",
            Kind::Frame => "weft-shm-frame/",
        }
    }
}

/// The abstract unix socket name (leading NUL) an endpoint listens on.
pub(crate) fn socket_name(kind: Kind, name: SocketAddr) -> Vec<u8> {
    format!("\0{}{name}", kind.prefix()).into_bytes()
}

const HELLO_MAGIC: [u8; 8] = *b"weft-hi1";
const REPLY_MAGIC: [u8; 8] = *b"weft-ok1";
/// A shared region: id, address, length (little-endian u64s), one memfd attached.
const REGION_MAGIC: [u8; 8] = *b"weft-rg1";
/// A shared region withdrawn: its id.
const REVOKE_MAGIC: [u8; 8] = *b"weft-rv1";
/// Most regions an endpoint offers its peers.
pub(crate) const MAX_OFFERS: usize = 1024;
const MAX_NAME: usize = 64;
const MSG_BUF: usize = 128;
/// Receive buffers taken from the pool per lock: a burst needing fewer takes this many
/// and keeps the rest for the next bursts.
const RX_REFILL: usize = 16;

/// The acceptor's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    Ok = 0,
    IcrcMismatch = 1,
    WrongKind = 2,
    BadSegment = 3,
    NotThePeer = 4,
    Uid = 5,
}

/// How a hello was received and judged.
enum Judged {
    Accept(Box<Conn>),
    Refuse(Status),
    /// Nothing to answer (closed, garbage, no descriptors).
    Drop,
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Lost,
    Refused,
    Corrupt,
}

/// Options that shape every connection of an endpoint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub layout: Layout,
    pub icrc: bool,
    pub connect_timeout: Duration,
    pub reconnect_backoff: Duration,
    pub service_interval: Duration,
    /// Probe the peer for cross-memory attach and advertise the result.
    pub cma: bool,
}

struct Conn {
    peer: SocketAddr,
    ctl: OwnedFd,
    /// The peer process, as the kernel reported it for `ctl` (never from the peer).
    pid: Option<i32>,
    /// The ring we produce on (0: we connected; 1: we accepted); we consume the other.
    tx_ring: usize,
    /// Our probe read the peer's memory: its by-reference payloads can be pulled.
    pulls: bool,
    region: Region,
    tx: TxRing,
    rx: RxRing,
    /// The peer's eventfd: rung when it sleeps and we published.
    notify_peer: EventFd,
    /// Ours: polled when we sleep.
    my_wake: EventFd,
    /// A connector's connection until the acceptor's ok arrives.
    awaiting_reply: bool,
    /// The peer hung up but left items in our receive ring: delivered, then removed.
    closing: bool,
    /// The peer's shared regions, mapped here (replaced, never changed in place: a
    /// receiver may hold the previous table until its burst is handled).
    maps: Arc<PeerMaps>,
    /// The peer's revocation counter as last seen (see "Shared regions").
    revokes_seen: u32,
    /// The path of what arrives here from the peer (source the peer, destination
    /// this endpoint), `None` when the two names are of different families: set once
    /// by [`Endpoint::insert`], so a received item is not converted from addresses.
    rx_path: Option<IcrcPath>,
    /// Tracked sends on our ring not yet released by the peer's consumer, oldest
    /// first: the ring index after each item, and its tag
    /// ([`Endpoint::send_tracked`]).
    tracked: VecDeque<(u32, u64)>,
}

impl Conn {
    /// Wake the peer that [`TxRing::publish`] found asleep, saying which CPU rings
    /// ([`Endpoint::wait`]'s move).
    fn ring_peer(&self) {
        self.tx.note_ring(&self.region, sys::current_cpu());
        self.notify_peer.notify();
    }

    fn live(&self) -> bool {
        !self.closing
    }

    /// The ring we consume.
    fn rx_ring(&self) -> usize {
        1 - self.tx_ring
    }
}

/// A region this endpoint offers its peers.
struct Offer {
    id: u64,
    fd: OwnedFd,
    addr: u64,
    len: u64,
}

impl Offer {
    fn message(&self) -> [u8; 32] {
        let mut m = [0u8; 32];
        m[0..8].copy_from_slice(&REGION_MAGIC);
        m[8..16].copy_from_slice(&self.id.to_le_bytes());
        m[16..24].copy_from_slice(&self.addr.to_le_bytes());
        m[24..32].copy_from_slice(&self.len.to_le_bytes());
        m
    }

    /// Offer it on control socket `ctl`; false when the message could not be sent.
    fn send(&self, ctl: RawFd) -> bool {
        send_msg(ctl, &self.message(), &[self.fd.as_raw_fd()]).is_ok()
    }
}

/// Items an endpoint can send.
pub(crate) trait Outgoing {
    /// The bytes that go into one slot.
    fn bytes(&self) -> &[u8];
    /// The peer it goes to, `None` when it cannot go from `local` (then dropped).
    fn dst(&self, local: SocketAddr, fixed_peer: Option<SocketAddr>) -> Option<SocketAddr>;
    /// True when `self` certainly goes where `prev` went (the same path): a burst to
    /// one peer then resolves its destination once.
    fn same_dst(&self, prev: &Self) -> bool;
    /// The item's path, if it names one (a datagram's): matched against the last
    /// route's path ([`Endpoint::send_with`]).
    fn path(&self) -> Option<&IcrcPath> {
        None
    }
}

/// At most one move per this long: the kernel may place the thread back, and each
/// move costs two `sched_setaffinity` calls and a migration.
const MOVE_EVERY_US: u64 = 10_000;
/// A same-CPU wake-up moves the thread only if it came this soon after the previous
/// one: a storm of them (a stream's passive side sleeping and woken every ~150 µs
/// beside its waker), not a sparse exchange whose waker rings and then blocks (the
/// idle probe: a move there makes the next wake-ups cross cores for nothing).
const MOVE_STORM_US: u64 = 1_000;

/// Whether a tracked send whose item ends at ring index `at` is released by the
/// consumer's checked release index `head`, both at or before the producer's `next`:
/// measured back from `next`, so exact while fewer than 2^32 items were written
/// since `at` (a wrap-around comparison of `head` with `at` alone goes wrong once
/// 2^31 items were written while `at` waited in the queue with nobody asking).
#[inline]
fn covers(next: u32, head: u32, at: u32) -> bool {
    next.wrapping_sub(at) >= next.wrapping_sub(head)
}

/// Whether a same-CPU wake-up at `now_us` came within [`MOVE_STORM_US`] of the
/// previous one at `prev_us` (0: none yet).
fn in_a_storm(prev_us: u64, now_us: u64) -> bool {
    prev_us != 0 && now_us.wrapping_sub(prev_us) < MOVE_STORM_US
}

/// The state of one shm endpoint.
pub(crate) struct Endpoint {
    kind: Kind,
    name: SocketAddr,
    params: Params,
    /// A frame port talks to this peer only.
    only_peer: Option<SocketAddr>,
    listener: OwnedFd,
    conns: Vec<Option<Conn>>,
    /// Which connection sends to a peer (stable for the connection's life, so one
    /// direction keeps its order).
    tx_for: HashMap<SocketAddr, usize>,
    /// The last `tx_for` hit: a QP sends to one peer, and hashing a `SocketAddr` with
    /// SipHash was a measurable share of a small message's cost. Cleared whenever
    /// `tx_for` changes.
    last_route: Option<(SocketAddr, usize)>,
    /// The path of a datagram from this endpoint to `last_route`'s peer (only when it
    /// converts back to exactly those two addresses; `None` whenever `last_route` is):
    /// an item with this path goes where `last_route` says without its path converted
    /// to addresses and compared (~40 instructions of a ping-pong's single-packet
    /// burst; callgrind, `msg_rate … lat`).
    last_path: Option<IcrcPath>,
    /// Peers that could not be reached, and until when not to try again.
    unreachable: HashMap<SocketAddr, Instant>,
    /// Accepted control sockets whose hello has not arrived yet.
    pending: Vec<(OwnedFd, Instant)>,
    /// Regions offered to every peer ([`Endpoint::share`]).
    offers: Vec<Offer>,
    next_service: Instant,
    /// When a send that finds a ring full next checks whether the peer is alive.
    next_full_check: Instant,
    /// Calls of `recv` (when to look at the clock).
    polls: u32,
    rr: usize,
    uid: u32,
    pfds: Vec<libc::pollfd>,
    touched: Vec<usize>,
    /// When this endpoint's thread last moved off its waker's CPU (µs,
    /// [`sys::monotonic_micros`]; [`Endpoint::wait`]).
    last_move_us: u64,
    /// When this endpoint's thread was last woken on its waker's CPU (µs; 0: never).
    last_same_cpu_us: u64,
    /// Tracked sends in the connections' `tracked` queues.
    tracked_live: usize,
    /// Tags of tracked sends released by a connection's last release index when it
    /// ended ([`Endpoint::teardown`]), for the next [`Endpoint::take_released`].
    late_released: Vec<u64>,
    /// Tags of tracked sends whose connection ended before their release, for
    /// [`Endpoint::take_lost`].
    lost: Vec<u64>,
    /// Receives leave their items unreleased until [`Endpoint::release_received`].
    hold: bool,
    pub stats: LinkStats,
    pub shm: ShmStats,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("peers", &self.tx_for.keys().collect::<Vec<_>>())
            .field("stats", &self.stats)
            .finish()
    }
}

fn seqpacket(nonblocking: bool) -> io::Result<OwnedFd> {
    let nb = if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    sys::socket(
        libc::AF_UNIX,
        libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | nb,
        0,
        "shm: socket(AF_UNIX)",
    )
}

/// As the consumer of ring `ring`: read the first bytes of the segment where the peer
/// `pid` mapped it (`peer_seg`) by cross-memory attach, and set the ring's "pulls"
/// flag when they are ours. `None`: not tried (turned off, or an older peer that sent
/// no address); `Some(false)`: refused or wrong, the payloads keep using the ring.
fn probe(
    on: bool,
    pid: Option<i32>,
    peer_seg: Option<u64>,
    region: &Region,
    ring: usize,
) -> Option<bool> {
    let (pid, addr) = (pid?, peer_seg?);
    if !on {
        return None;
    }
    let mut seen = [0u8; 16];
    let ok =
        cma::read(pid, &mut seen, &[Span { addr, len: 16 }]).is_ok() && seen == region.header();
    if ok {
        region.set_pulls(ring);
    }
    Some(ok)
}

fn is_eventfd(fd: &OwnedFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .is_ok_and(|p| p.as_os_str() == "anon_inode:[eventfd]")
}

impl Endpoint {
    /// Listen on the abstract socket for `name`.
    pub fn bind(
        kind: Kind,
        name: SocketAddr,
        params: Params,
        only_peer: Option<SocketAddr>,
    ) -> io::Result<Endpoint> {
        let listener = seqpacket(true)?;
        sys::bind_unix(
            listener.as_raw_fd(),
            &socket_name(kind, name),
            &format!("shm: listen as {name}"),
        )?;
        sys::listen(listener.as_raw_fd(), 128, "shm: listen")?;
        Ok(Endpoint {
            kind,
            name,
            params,
            only_peer,
            listener,
            conns: Vec::new(),
            tx_for: HashMap::new(),
            last_route: None,
            last_path: None,
            unreachable: HashMap::new(),
            pending: Vec::new(),
            offers: Vec::new(),
            next_service: Instant::now(),
            next_full_check: Instant::now(),
            polls: 0,
            rr: 0,
            uid: sys::euid(),
            pfds: Vec::new(),
            touched: Vec::new(),
            last_move_us: 0,
            last_same_cpu_us: 0,
            tracked_live: 0,
            late_released: Vec::new(),
            lost: Vec::new(),
            hold: false,
            stats: LinkStats::default(),
            shm: ShmStats::default(),
        })
    }

    pub fn name(&self) -> SocketAddr {
        self.name
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Peers with a live connection.
    pub fn peers(&self) -> Vec<SocketAddr> {
        let mut v: Vec<_> = self
            .conns
            .iter()
            .flatten()
            .filter(|c| c.live())
            .map(|c| c.peer)
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Whether the peer that receives what we send to `dst` said it pulls
    /// by-reference payloads from our memory (false with no connection yet).
    pub fn peer_pulls(&self, dst: SocketAddr) -> bool {
        let idx = match self.last_route {
            Some((d, i)) if d == dst => Some(i),
            _ => self.tx_for.get(&dst).copied(),
        };
        idx.and_then(|i| self.conns.get(i))
            .and_then(Option::as_ref)
            .is_some_and(|c| c.live() && c.region.pulls(c.tx_ring))
    }

    fn insert(&mut self, mut conn: Conn) -> usize {
        let peer = conn.peer;
        conn.rx_path = path_between(peer, self.name);
        let idx = match self.conns.iter().position(Option::is_none) {
            Some(i) => {
                self.conns[i] = Some(conn);
                i
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        self.last_route = None;
        self.last_path = None;
        self.tx_for.entry(peer).or_insert(idx);
        self.unreachable.remove(&peer);
        idx
    }

    fn teardown(&mut self, idx: usize, why: End) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        if c.closing {
            return;
        }
        // What we published but the peer never took is lost with the connection.
        self.stats.tx_dropped += u64::from(c.tx.in_flight(&c.region));
        // Its tracked sends: a hang-up's last release index (checked) releases what
        // the peer took before it went; the rest, and every one of a refused or
        // corrupt connection, are lost.
        if !c.tracked.is_empty() {
            let head = match why {
                End::Lost => c.tx.consumer_head(&c.region).ok(),
                End::Refused | End::Corrupt => None,
            };
            let next = c.tx.next_index();
            self.tracked_live -= c.tracked.len();
            for (at, tag) in c.tracked.drain(..) {
                if head.is_some_and(|h| covers(next, h, at)) {
                    self.late_released.push(tag);
                } else {
                    self.lost.push(tag);
                }
            }
        }
        match why {
            End::Lost => self.shm.peers_lost += 1,
            End::Refused => self.shm.refused += 1,
            End::Corrupt => self.shm.ring_errors += 1,
        }
        let peer = c.peer;
        // A peer that sent and then exited still gets its last items delivered.
        if why == End::Lost && matches!(c.rx.available(&c.region), Ok(n) if n > 0) {
            c.closing = true;
        } else {
            self.conns[idx] = None;
        }
        if self.tx_for.get(&peer) == Some(&idx) {
            self.last_route = None;
            self.last_path = None;
            self.tx_for.remove(&peer);
            let other = self
                .conns
                .iter()
                .position(|o| o.as_ref().is_some_and(|o| o.live() && o.peer == peer));
            match other {
                Some(o) => {
                    self.tx_for.insert(peer, o);
                }
                None => {
                    self.unreachable
                        .insert(peer, Instant::now() + self.params.reconnect_backoff);
                }
            }
        }
    }

    /// Connect to `peer` now: bounded by `connect_timeout`. The connection is usable
    /// for sending at once; the acceptor's answer is read later.
    fn connect(&mut self, peer: SocketAddr) -> io::Result<usize> {
        let me = self.name.to_string().into_bytes();
        if me.len() > MAX_NAME {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "name too long"));
        }
        let sock = seqpacket(false)?;
        let fd = sock.as_raw_fd();
        sys::set_timeout(
            fd,
            libc::SO_SNDTIMEO,
            self.params.connect_timeout,
            "SO_SNDTIMEO",
        )?;
        // A full backlog makes this wait at most SO_SNDTIMEO.
        sys::connect_unix(
            fd,
            &socket_name(self.kind, peer),
            &format!("shm: connect to {peer}"),
        )?;
        let layout = self.params.layout;
        let (region, memfd) = Region::create(layout)?;
        let (to_acceptor, to_connector) = (EventFd::new()?, EventFd::new()?);
        let mut hello = [0u8; MSG_BUF];
        hello[0..8].copy_from_slice(&HELLO_MAGIC);
        hello[8] = self.kind as u8;
        hello[9] = u8::from(self.params.icrc);
        hello[12..16].copy_from_slice(&layout.slots.to_le_bytes());
        hello[16..20].copy_from_slice(&layout.slot_data.to_le_bytes());
        hello[20] = me.len() as u8;
        hello[21..21 + me.len()].copy_from_slice(&me);
        let end = 21 + me.len();
        hello[end..end + 8].copy_from_slice(&region.addr().to_le_bytes());
        send_msg(
            fd,
            &hello[..end + 8],
            &[
                memfd.as_raw_fd(),
                to_acceptor.as_fd().as_raw_fd(),
                to_connector.as_fd().as_raw_fd(),
            ],
        )?;
        sys::set_nonblocking(fd, true)?;
        self.offer_all(fd);
        self.shm.connects += 1;
        let pid = peer_pid(fd);
        Ok(self.insert(Conn {
            peer,
            ctl: sock,
            pid,
            tx_ring: 0,
            pulls: false,
            region,
            tx: TxRing::new(layout, 0),
            rx: RxRing::new(layout, 1),
            notify_peer: to_acceptor,
            my_wake: to_connector,
            awaiting_reply: true,
            closing: false,
            maps: Arc::default(),
            revokes_seen: 0,
            rx_path: None,
            tracked: VecDeque::new(),
        }))
    }

    /// Read and judge the hello on an accepted socket. `None`: not arrived yet.
    fn judge_hello(&mut self, sock: &OwnedFd) -> Option<Judged> {
        let mut buf = [0u8; MSG_BUF];
        let (n, mut fds) = match recv_msg(sock.as_raw_fd(), &mut buf) {
            Ok(None) => return None,
            Ok(Some(m)) => m,
            Err(_) => return Some(Judged::Drop),
        };
        if n < 21 || buf[0..8] != HELLO_MAGIC || fds.len() != 3 {
            return Some(Judged::Drop);
        }
        let name_len = usize::from(buf[20]);
        let peer = std::str::from_utf8(buf.get(21..21 + name_len).unwrap_or(&[]))
            .ok()
            .and_then(|s| s.parse::<SocketAddr>().ok());
        let Some(peer) = peer else {
            return Some(Judged::Drop);
        };
        if peer_uid(sock.as_raw_fd()).is_none_or(|u| u != self.uid && u != 0) {
            return Some(Judged::Refuse(Status::Uid));
        }
        if buf[8] != self.kind as u8 {
            return Some(Judged::Refuse(Status::WrongKind));
        }
        if self.only_peer.is_some_and(|p| p != peer) {
            return Some(Judged::Refuse(Status::NotThePeer));
        }
        if (buf[9] != 0) != self.params.icrc {
            return Some(Judged::Refuse(Status::IcrcMismatch));
        }
        let word = |o: usize| u32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        let Some(layout) = Layout::new(word(12), word(16)) else {
            return Some(Judged::Refuse(Status::BadSegment));
        };
        let to_connector = fds.pop()?;
        let to_acceptor = fds.pop()?;
        let memfd = fds.pop()?;
        if !is_eventfd(&to_acceptor) || !is_eventfd(&to_connector) {
            return Some(Judged::Refuse(Status::BadSegment));
        }
        let Ok(region) = Region::open(&memfd, layout) else {
            return Some(Judged::Refuse(Status::BadSegment));
        };
        // The peer's eventfds must never block us, whatever flags it gave them.
        let nb = sys::set_nonblocking(to_acceptor.as_raw_fd(), true)
            .and(sys::set_nonblocking(to_connector.as_raw_fd(), true));
        if nb.is_err() {
            return Some(Judged::Refuse(Status::BadSegment));
        }
        let ctl = sock.try_clone().ok()?;
        let pid = peer_pid(ctl.as_raw_fd());
        // The connector's segment address follows its name (absent from an older peer).
        let at = 21 + name_len;
        let peer_seg = buf
            .get(at..at + 8)
            .filter(|_| n >= at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes);
        // We consume ring 0.
        let probed = probe(self.params.cma, pid, peer_seg, &region, 0);
        self.count_probe(probed);
        let pulls = probed == Some(true);
        Some(Judged::Accept(Box::new(Conn {
            peer,
            ctl,
            pid,
            tx_ring: 1,
            pulls,
            region,
            tx: TxRing::new(layout, 1),
            rx: RxRing::new(layout, 0),
            notify_peer: EventFd::from_owned(to_connector),
            my_wake: EventFd::from_owned(to_acceptor),
            awaiting_reply: false,
            closing: false,
            maps: Arc::default(),
            revokes_seen: 0,
            rx_path: None,
            tracked: VecDeque::new(),
        })))
    }

    fn count_probe(&mut self, probed: Option<bool>) {
        match probed {
            Some(true) => self.shm.cma_pulls += 1,
            Some(false) => self.shm.cma_refused += 1,
            None => {}
        }
    }

    /// Answer a hello; an ok carries where we mapped the segment (`seg`).
    fn reply(&self, sock: &OwnedFd, status: Status, seg: u64) {
        let mut r = [0u8; 18];
        r[0..8].copy_from_slice(&REPLY_MAGIC);
        r[8] = status as u8;
        r[9] = u8::from(self.params.icrc);
        r[10..18].copy_from_slice(&seg.to_le_bytes());
        // A peer that cannot take our answer finds out from the hang-up instead.
        let _ = send_msg(sock.as_raw_fd(), &r, &[]);
    }

    /// Finish a handshake whose hello arrived; false when it has not yet.
    fn finish_accept(&mut self, sock: &OwnedFd) -> bool {
        match self.judge_hello(sock) {
            None => false,
            Some(Judged::Accept(conn)) => {
                self.reply(sock, Status::Ok, conn.region.addr());
                self.offer_all(sock.as_raw_fd());
                // After our offers: the connector reads them before our datagrams.
                conn.region.bump_revokes(conn.tx_ring);
                self.shm.accepts += 1;
                let idx = self.insert(*conn);
                // The connector's offers were sent right behind its hello: map them
                // before any of its datagrams is delivered.
                self.on_ctl(idx, 0);
                true
            }
            Some(Judged::Refuse(s)) => {
                self.reply(sock, s, 0);
                self.shm.refused += 1;
                true
            }
            Some(Judged::Drop) => true,
        }
    }

    /// Accept new peers and finish handshakes (never blocks).
    fn accept_new(&mut self) {
        let now = Instant::now();
        let mut pending = mem::take(&mut self.pending);
        pending.retain(|(s, since)| {
            !self.finish_accept(s) && now.duration_since(*since) < self.params.connect_timeout * 10
        });
        self.pending = pending;
        while let Some(s) = sys::accept(self.listener.as_raw_fd()) {
            if !self.finish_accept(&s) {
                self.pending.push((s, now));
            }
        }
    }

    /// Handle what a connection's control socket says: the acceptor's answer, or a
    /// hang-up. `revents` from a poll of it.
    fn on_ctl(&mut self, idx: usize, revents: i16) {
        let Some(fd) = self
            .conns
            .get(idx)
            .and_then(Option::as_ref)
            .filter(|c| c.live())
            .map(|c| c.ctl.as_raw_fd())
        else {
            return;
        };
        let mut buf = [0u8; MSG_BUF];
        loop {
            let awaiting = self.conns[idx].as_ref().is_some_and(|c| c.awaiting_reply);
            match recv_msg(fd, &mut buf) {
                Ok(Some((n, _))) if n >= 9 && buf[0..8] == REPLY_MAGIC && awaiting => {
                    if buf[8] == Status::Ok as u8 {
                        let peer_seg = buf
                            .get(10..18)
                            .filter(|_| n >= 18)
                            .and_then(|b| b.try_into().ok())
                            .map(u64::from_le_bytes);
                        let cma = self.params.cma;
                        let probed = self.conns[idx].as_mut().map(|c| {
                            c.awaiting_reply = false;
                            // We consume ring 1.
                            let r = probe(cma, c.pid, peer_seg, &c.region, 1);
                            c.pulls = r == Some(true);
                            r
                        });
                        self.count_probe(probed.flatten());
                    } else {
                        self.teardown(idx, End::Refused);
                        return;
                    }
                }
                Ok(Some((0, _))) | Err(_) => {
                    self.teardown(idx, End::Lost);
                    return;
                }
                Ok(Some((n, fds))) if n >= 32 && buf[0..8] == REGION_MAGIC => {
                    let word =
                        |o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().unwrap_or_default());
                    self.peer_region(idx, word(8), word(16), word(24), fds);
                }
                Ok(Some((n, _))) if n >= 16 && buf[0..8] == REVOKE_MAGIC => {
                    let id = u64::from_le_bytes(buf[8..16].try_into().unwrap_or_default());
                    if let Some(c) = self.conns[idx].as_mut() {
                        let mut t = PeerMaps::clone(&c.maps);
                        if t.remove(id) {
                            c.maps = Arc::new(t);
                            self.shm.regions_revoked += 1;
                        }
                    }
                }
                Ok(Some(_)) => {} // unknown message: ignore
                Ok(None) => break,
            }
        }
        if revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            self.teardown(idx, End::Lost);
        }
    }

    /// A peer offered a region: check it, map it, and replace the connection's table;
    /// any refusal is counted and changes nothing.
    fn peer_region(&mut self, idx: usize, id: u64, addr: u64, len: u64, mut fds: Vec<OwnedFd>) {
        let Some(c) = self.conns[idx].as_mut() else {
            return;
        };
        let fd = match (fds.pop(), fds.is_empty()) {
            (Some(fd), true) if self.kind == Kind::Datagram => fd,
            _ => {
                self.shm.regions_refused += 1;
                return;
            }
        };
        let mut t = PeerMaps::clone(&c.maps);
        match t.add(id, addr, len, &fd) {
            Ok(()) => {
                c.maps = Arc::new(t);
                self.shm.regions_mapped += 1;
            }
            Err(_) => self.shm.regions_refused += 1,
        }
    }

    /// Offer every shared region on a new connection's control socket.
    fn offer_all(&mut self, ctl: RawFd) {
        for o in &self.offers {
            if o.send(ctl) {
                self.shm.regions_offered += 1;
            }
        }
    }

    /// Offer `len` bytes of memfd `fd`, at `addr` in this process, to every peer as
    /// region `id` (unique among the offers). False when the endpoint offers
    /// [`MAX_OFFERS`] already, the id is taken, or the descriptor cannot be kept.
    pub fn share(&mut self, id: u64, fd: BorrowedFd<'_>, addr: u64, len: u64) -> bool {
        if self.kind != Kind::Datagram
            || self.offers.len() >= MAX_OFFERS
            || self.offers.iter().any(|o| o.id == id)
        {
            return false;
        }
        let Ok(fd) = fd.try_clone_to_owned() else {
            return false;
        };
        let offer = Offer { id, fd, addr, len };
        for c in self.conns.iter().flatten().filter(|c| c.live()) {
            if offer.send(c.ctl.as_raw_fd()) {
                self.shm.regions_offered += 1;
                // The peer reads the offer before our next datagram.
                c.region.bump_revokes(c.tx_ring);
            }
        }
        self.offers.push(offer);
        true
    }

    /// Withdraw region `id` from every peer (see "Shared regions" for why a datagram
    /// sent after this never reads it). A connection whose peer cannot take the
    /// revocation is ended.
    pub fn unshare(&mut self, id: u64) {
        let Some(i) = self.offers.iter().position(|o| o.id == id) else {
            return;
        };
        self.offers.swap_remove(i);
        let mut m = [0u8; 16];
        m[0..8].copy_from_slice(&REVOKE_MAGIC);
        m[8..16].copy_from_slice(&id.to_le_bytes());
        let mut failed = Vec::new();
        for (idx, c) in self.conns.iter().enumerate() {
            let Some(c) = c.as_ref().filter(|c| c.live()) else {
                continue;
            };
            if send_msg(c.ctl.as_raw_fd(), &m, &[]).is_ok() {
                c.region.bump_revokes(c.tx_ring);
            } else {
                failed.push(idx);
            }
        }
        for idx in failed {
            self.teardown(idx, End::Lost);
        }
    }

    /// Poll every control socket without blocking and handle what happened.
    fn check_ctl(&mut self) {
        self.pfds.clear();
        let mut idxs = Vec::new();
        for (i, c) in self.conns.iter().enumerate() {
            if let Some(c) = c.as_ref().filter(|c| c.live()) {
                self.pfds.push(libc::pollfd {
                    fd: c.ctl.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
                idxs.push(i);
            }
        }
        if idxs.is_empty() {
            return;
        }
        if !matches!(sys::poll(&mut self.pfds, Duration::ZERO), Ok(n) if n > 0) {
            return;
        }
        let fired: Vec<(usize, i16)> = idxs
            .iter()
            .zip(&self.pfds)
            .filter(|(_, p)| p.revents != 0)
            .map(|(i, p)| (*i, p.revents))
            .collect();
        for (i, rev) in fired {
            self.on_ctl(i, rev);
        }
    }

    /// Accept peers, finish handshakes, notice answers and hang-ups. Never blocks.
    pub fn service(&mut self) {
        self.accept_new();
        self.check_ctl();
        self.next_service = Instant::now() + self.params.service_interval;
    }

    fn service_if_due(&mut self) {
        // A busy-polling caller comes here every ~100 ns: read the clock on every 16th
        // call only.
        self.polls = self.polls.wrapping_add(1);
        if self.polls % 16 == 0 && Instant::now() >= self.next_service {
            self.service();
        }
    }

    /// True when connection `idx` still has a live peer (a poll of its control socket).
    fn alive(&mut self, idx: usize) -> bool {
        let Some(c) = self.conns.get(idx).and_then(Option::as_ref) else {
            return false;
        };
        if c.closing {
            return false;
        }
        let mut p = [libc::pollfd {
            fd: c.ctl.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if matches!(sys::poll(&mut p, Duration::ZERO), Ok(n) if n > 0) {
            self.on_ctl(idx, p[0].revents);
        }
        self.conns
            .get(idx)
            .is_some_and(|c| c.as_ref().is_some_and(Conn::live))
    }

    /// The connection that sends to `dst`, connecting when there is none. The last
    /// hit is looked at inline: a ping-pong's every send is a burst of one packet that
    /// resolves its peer afresh, and the call was ~35 instructions of it (callgrind,
    /// `msg_rate … lat`).
    #[inline]
    fn route(&mut self, dst: SocketAddr) -> Option<usize> {
        match self.last_route {
            Some((d, i)) if d == dst => Some(i),
            _ => self.route_lookup(dst),
        }
    }

    /// [`Endpoint::route`] past its last hit: the map, else a connection.
    #[inline(never)]
    fn route_lookup(&mut self, dst: SocketAddr) -> Option<usize> {
        if let Some(&i) = self.tx_for.get(&dst) {
            self.last_route = Some((dst, i));
            self.last_path =
                path_between(self.name, dst).filter(|p| path_ends(p) == (self.name, dst));
            return Some(i);
        }
        if self.only_peer.is_some_and(|p| p != dst) {
            return None;
        }
        if let Some(&until) = self.unreachable.get(&dst) {
            if Instant::now() < until {
                return None;
            }
            self.unreachable.remove(&dst);
        }
        match self.connect(dst) {
            Ok(i) => Some(i),
            Err(_) => {
                self.unreachable
                    .insert(dst, Instant::now() + self.params.reconnect_backoff);
                None
            }
        }
    }

    /// True when a receive may find something: a ring with items (or a corrupt one),
    /// or a connection closing (which a receive removes once drained). Runs the
    /// periodic service as a receive does. A busy-polling caller that finds nothing
    /// (most polls) pays only for this look.
    pub fn may_receive(&mut self) -> bool {
        self.service_if_due();
        self.conns
            .iter()
            .flatten()
            .any(|c| c.closing || !matches!(c.rx.available(&c.region), Ok(0)))
    }

    /// Take up to `max` items from the peers' rings into buffers of `pool`, calling
    /// `deliver(path, pid, maps, buf)` for each: `path` is the connection's (source the
    /// peer, destination this endpoint; `None` across address families), `pid` the
    /// process that sent it (the kernel's word for the connection it came through)
    /// when our probe proved we can read that process's memory, else `None`. Items
    /// stay in the rings while `pool` is empty.
    pub fn recv(
        &mut self,
        pool: &BufferPool,
        spare: &mut Vec<PacketBuf>,
        max: usize,
        mut deliver: impl FnMut(Option<IcrcPath>, Option<i32>, Option<&Arc<PeerMaps>>, PacketBuf),
    ) -> usize {
        self.recv_with(pool, spare, max, |path, pid, maps, b| {
            deliver(*path, pid, maps, b);
            None
        })
    }

    /// [`Endpoint::recv`] with each item lent to `visit` (its path by reference), its
    /// buffer back in `spare` after the visit: a caller that reads the bytes where
    /// they are keeps no buffer.
    #[inline]
    pub fn recv_each(
        &mut self,
        pool: &BufferPool,
        spare: &mut Vec<PacketBuf>,
        max: usize,
        mut visit: impl FnMut(&Option<IcrcPath>, Option<i32>, Option<&Arc<PeerMaps>>, &PacketBuf),
    ) -> usize {
        self.recv_with(pool, spare, max, |path, pid, maps, b| {
            visit(path, pid, maps, &b);
            Some(b)
        })
    }

    /// The body of [`Endpoint::recv`] and [`Endpoint::recv_each`]: `deliver` keeps an
    /// item's buffer or gives it back (it goes back into `spare`).
    #[inline]
    fn recv_with(
        &mut self,
        pool: &BufferPool,
        spare: &mut Vec<PacketBuf>,
        max: usize,
        mut deliver: impl FnMut(
            &Option<IcrcPath>,
            Option<i32>,
            Option<&Arc<PeerMaps>>,
            PacketBuf,
        ) -> Option<PacketBuf>,
    ) -> usize {
        self.service_if_due();
        let n = self.conns.len();
        let mut got = 0;
        let mut corrupt = Vec::new();
        let hold = self.hold;
        for k in 0..n {
            if got >= max {
                break;
            }
            let idx = (self.rr + k) % n;
            let Some(c) = self.conns[idx].as_mut() else {
                continue;
            };
            let avail = match c.rx.available(&c.region) {
                Ok(a) => a as usize,
                Err(Corrupt) => {
                    corrupt.push(idx);
                    continue;
                }
            };
            // Read after the tail: a revocation sent before any item we are about to
            // take is on the control socket now. Handle it before those items.
            let revokes = c.region.revokes(c.rx_ring());
            if revokes != c.revokes_seen {
                c.revokes_seen = revokes;
                self.on_ctl(idx, 0);
            }
            let Some(c) = self.conns[idx].as_mut() else {
                continue;
            };
            let take = avail.min(max - got);
            let from = if c.pulls { c.pid } else { None };
            let maps = (!c.maps.is_empty()).then_some(&c.maps);
            if spare.len() < take {
                // A few more than this burst needs: one pool lock per
                // `RX_REFILL` frames, not one per burst (a ping-pong's bursts are
                // single frames).
                pool.refill(take.max(RX_REFILL), take, spare);
            }
            for _ in 0..take.min(spare.len()) {
                let Some(mut b) = spare.pop() else { break };
                match c.rx.pop_into(&c.region, &mut b) {
                    Pop::Item => {
                        if let Some(b) = deliver(&c.rx_path, from, maps, b) {
                            spare.push(b);
                        }
                        got += 1;
                    }
                    Pop::BadLength => {
                        self.stats.rx_dropped += 1;
                        self.shm.bad_slots += 1;
                        spare.push(b);
                    }
                }
            }
            // After every visit of the burst: what a visitor did happens before the
            // peer sees these items released (unless held for `release_received`).
            if !hold {
                c.rx.release(&c.region);
            }
            if c.closing && matches!(c.rx.available(&c.region), Ok(0) | Err(_)) {
                self.conns[idx] = None;
            }
        }
        self.rr = self.rr.wrapping_add(1);
        for idx in corrupt {
            self.teardown(idx, End::Corrupt);
        }
        self.stats.rx_frames += got as u64;
        got
    }

    /// Send items from the front of `items`, removing those accepted (sent or dropped
    /// and counted); stops at the first whose peer's ring is full.
    pub fn send<T: Outgoing>(&mut self, items: &mut Vec<T>) -> usize {
        self.send_with(items, drop)
    }

    /// One datagram on the last route's own path ([`Endpoint::send_with`]'s fast
    /// path), written and published at once: true when it was. False, with nothing
    /// written, for anything else (another path, a connection gone or closing, a
    /// full or broken ring, a datagram too big): `send_with` then takes it, which
    /// handles each of those.
    pub fn send_on_last_path(&mut self, bytes: &[u8], path: &IcrcPath) -> bool {
        let (Some((_, idx)), Some(p)) = (self.last_route, &self.last_path) else {
            return false;
        };
        if p != path {
            return false;
        }
        let Some(c) = self.conns[idx].as_mut().filter(|c| c.live()) else {
            return false;
        };
        if !matches!(c.tx.push(&c.region, bytes), Ok(Push::Written)) {
            return false;
        }
        self.stats.tx_frames += 1;
        if c.tx.publish(&c.region) {
            c.ring_peer();
        }
        true
    }

    /// A ring found full: a dead peer never drains it, so look whether the peer is
    /// alive (at most once per service interval: a live but slow peer makes this
    /// path hot). False when the look found it gone (the connection is then torn
    /// down).
    fn full_ring_peer_alive(&mut self, idx: usize) -> bool {
        let now = Instant::now();
        let look = now >= self.next_full_check;
        if look {
            self.next_full_check = now + self.params.service_interval;
        }
        !look || self.alive(idx)
    }

    /// [`crate::DatagramLink::send_tracked`]: `bytes` written into the ring of the
    /// connection that sends to `path`'s destination and published at once, and
    /// `tag` remembered with the ring index after it. The last route's own path is
    /// matched inline (as [`Endpoint::send_on_last_path`] does); any other path is
    /// routed (connecting if need be), never queued. False, with nothing written or
    /// remembered: no route (another source, an unreachable peer), the connection
    /// closing, the ring full (the peer looked at as a full burst does) or broken
    /// (the connection then ends), the datagram too big.
    #[inline]
    pub fn send_tracked(&mut self, bytes: &[u8], path: &IcrcPath, tag: u64) -> bool {
        let idx = match (self.last_route, &self.last_path) {
            (Some((_, idx)), Some(p)) if p == path => idx,
            _ => match self.route_of(path) {
                Some(idx) => idx,
                None => return false,
            },
        };
        let Some(c) = self.conns[idx].as_mut().filter(|c| c.live()) else {
            return false;
        };
        match c.tx.push(&c.region, bytes) {
            Ok(Push::Written) => {}
            Ok(Push::TooBig) => return false,
            Ok(Push::Full) => {
                self.stats.tx_ring_full += 1;
                self.full_ring_peer_alive(idx);
                return false;
            }
            Err(Corrupt) => {
                self.teardown(idx, End::Corrupt);
                return false;
            }
        }
        c.tracked.push_back((c.tx.next_index(), tag));
        self.tracked_live += 1;
        self.stats.tx_frames += 1;
        if c.tx.publish(&c.region) {
            c.ring_peer();
        }
        true
    }

    /// The connection that sends on `path` (its source must be this endpoint),
    /// connecting when there is none.
    #[inline(never)]
    fn route_of(&mut self, path: &IcrcPath) -> Option<usize> {
        let (src, dst) = path_ends(path);
        if src != self.name {
            return None;
        }
        self.route(dst)
    }

    /// [`crate::DatagramLink::take_released`]: the tags released by connections that
    /// ended (their last release index), then, per connection with tracked sends,
    /// those its peer's release index (read once, checked) covers. A connection whose
    /// index is impossible releases nothing and ends as corrupt: its tags are lost
    /// (one such connection per call; a second is found again by the next).
    pub fn take_released(&mut self, out: &mut Vec<u64>) -> usize {
        let late = self.late_released.len();
        if late > 0 {
            out.append(&mut self.late_released);
        }
        if self.tracked_live == 0 {
            return late;
        }
        let mut n = 0;
        // Not a Vec: its drop was ~10 instructions a call (callgrind).
        let mut corrupt = None;
        for (idx, c) in self.conns.iter_mut().enumerate() {
            let Some(c) = c.as_mut().filter(|c| !c.tracked.is_empty()) else {
                continue;
            };
            let Ok(head) = c.tx.consumer_head(&c.region) else {
                corrupt = Some(idx);
                continue;
            };
            let next = c.tx.next_index();
            while let Some(&(at, tag)) = c.tracked.front() {
                if !covers(next, head, at) {
                    break;
                }
                c.tracked.pop_front();
                out.push(tag);
                n += 1;
            }
        }
        self.tracked_live -= n;
        if let Some(idx) = corrupt {
            self.teardown(idx, End::Corrupt);
        }
        late + n
    }

    /// [`crate::DatagramLink::take_lost`].
    pub fn take_lost(&mut self, out: &mut Vec<u64>) -> usize {
        let n = self.lost.len();
        out.append(&mut self.lost);
        n
    }

    /// [`crate::DatagramLink::tracked_outstanding`].
    pub fn tracked_outstanding(&self) -> usize {
        self.tracked_live + self.late_released.len() + self.lost.len()
    }

    /// [`crate::DatagramLink::hold_releases`]: turning it off releases what is held.
    pub fn hold_releases(&mut self, on: bool) {
        self.hold = on;
        if !on {
            self.release_received();
        }
    }

    /// [`crate::DatagramLink::release_received`]: one store per connection whose
    /// consumer index moved.
    pub fn release_received(&mut self) {
        for c in self.conns.iter_mut().flatten() {
            c.rx.release(&c.region);
        }
    }

    /// [`Endpoint::send`], handing each item it removes (sent or dropped) to `done`.
    /// The items go onto the rings in order; the order in which `done` sees them is
    /// not promised (a burst sent whole is handed back from its end).
    pub fn send_with<T: Outgoing>(&mut self, items: &mut Vec<T>, mut done: impl FnMut(T)) -> usize {
        let mut i = 0;
        self.touched.clear();
        // Bursts mostly go to one peer: skip the map lookup while the peer repeats.
        let mut last: Option<(SocketAddr, usize)> = None;
        while i < items.len() {
            // The previous item's peer, resolved and written to: this one goes there
            // too without another look (a connection torn down in this loop clears
            // `last`).
            let repeat = match last {
                Some((_, idx)) if i > 0 && items[i].same_dst(&items[i - 1]) => Some(idx),
                _ => None,
            };
            if let Some(idx) = repeat {
                if let Some(c) = self.conns[idx].as_mut().filter(|c| c.live()) {
                    // Anything but a write takes the full path below.
                    if let Ok(Push::Written) = c.tx.push(&c.region, items[i].bytes()) {
                        if !self.touched.contains(&idx) {
                            self.touched.push(idx);
                        }
                        self.stats.tx_frames += 1;
                        i += 1;
                        continue;
                    }
                }
            }
            // The last route's own path: where `dst` and `route` below would send it.
            // Anything but a write takes the full path below.
            if let (Some((dst, idx)), Some(p), Some(q)) =
                (self.last_route, &self.last_path, items[i].path())
            {
                if p == q {
                    if let Some(c) = self.conns[idx].as_mut().filter(|c| c.live()) {
                        if let Ok(Push::Written) = c.tx.push(&c.region, items[i].bytes()) {
                            if !self.touched.contains(&idx) {
                                self.touched.push(idx);
                            }
                            self.stats.tx_frames += 1;
                            last = Some((dst, idx));
                            i += 1;
                            continue;
                        }
                    }
                }
            }
            let Some(dst) = items[i].dst(self.name, self.only_peer) else {
                self.stats.tx_dropped += 1;
                i += 1;
                continue;
            };
            let route = match last {
                Some((d, idx))
                    if d == dst
                        && self.conns[idx]
                            .as_ref()
                            .is_some_and(|c| c.live() && c.peer == dst) =>
                {
                    Some(idx)
                }
                _ => self.route(dst),
            };
            last = route.map(|idx| (dst, idx));
            let Some(idx) = route else {
                self.stats.tx_dropped += 1;
                self.shm.unreachable_drops += 1;
                i += 1;
                continue;
            };
            let Some(c) = self.conns[idx].as_mut() else {
                // Torn down under us (cannot happen: route returns live ones).
                self.last_route = None;
                self.last_path = None;
                self.tx_for.remove(&dst);
                continue;
            };
            match c.tx.push(&c.region, items[i].bytes()) {
                Ok(Push::Written) => {
                    if !self.touched.contains(&idx) {
                        self.touched.push(idx);
                    }
                    self.stats.tx_frames += 1;
                    i += 1;
                }
                Ok(Push::TooBig) => {
                    self.stats.tx_dropped += 1;
                    i += 1;
                }
                Ok(Push::Full) => {
                    if self.full_ring_peer_alive(idx) {
                        self.stats.tx_ring_full += 1;
                        break;
                    }
                }
                Err(Corrupt) => {
                    last = None;
                    self.teardown(idx, End::Corrupt);
                }
            }
        }
        for &idx in &self.touched {
            if let Some(c) = self.conns[idx].as_mut() {
                if c.tx.publish(&c.region) {
                    c.ring_peer();
                }
            }
        }
        if i == items.len() {
            // All of them (the usual burst): popped, no drain to set up and drop (the
            // order `done` sees them in is not promised).
            while let Some(x) = items.pop() {
                done(x);
            }
        } else {
            items.drain(..i).for_each(done);
        }
        i
    }

    /// Block until a ring has items, a peer or handshake needs attention, `extra` is
    /// readable, or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> io::Result<bool> {
        let before = self.shm;
        self.service();
        if self.shm != before {
            // A peer came or went: the caller may want to look before sleeping.
            return Ok(true);
        }
        let mut ready = false;
        for c in self.conns.iter().flatten() {
            if c.rx.prepare_sleep(&c.region) {
                ready = true;
            }
        }
        if !ready {
            self.pfds.clear();
            let pfd = |fd: RawFd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            self.pfds.push(pfd(self.listener.as_raw_fd()));
            for (s, _) in &self.pending {
                self.pfds.push(pfd(s.as_raw_fd()));
            }
            for c in self.conns.iter().flatten().filter(|c| c.live()) {
                self.pfds.push(pfd(c.ctl.as_raw_fd()));
                self.pfds.push(pfd(c.my_wake.as_fd().as_raw_fd()));
            }
            if let Some(e) = extra {
                self.pfds.push(pfd(e.as_raw_fd()));
            }
            match sys::poll(&mut self.pfds, crate::wake::whole_ms(timeout)) {
                Ok(n) => ready = n > 0,
                Err(e) => {
                    for c in self.conns.iter().flatten() {
                        c.rx.wake_up(&c.region);
                    }
                    return Err(io::Error::new(e.kind(), format!("shm: poll: {e}")));
                }
            }
        }
        let mut behind_waker = None;
        let mut me = None;
        for c in self.conns.iter().flatten() {
            c.rx.wake_up(&c.region);
            c.my_wake.drain();
            if let Some(cpu) = c.rx.take_ring(&c.region) {
                let me = *me.get_or_insert_with(sys::current_cpu);
                if cpu == me {
                    behind_waker = Some(me);
                }
            }
        }
        if let Some(cpu) = behind_waker {
            self.move_off_waker(cpu);
        }
        if ready {
            self.service();
        }
        Ok(ready)
    }

    /// This thread was woken on `cpu`, the CPU of the peer thread that rang it. In a
    /// storm of such wake-ups ([`in_a_storm`]) the two share one core while another
    /// may sit idle, and the kernel keeps them so, placing each wake-up anew on the
    /// waker's busy CPU: a WRITE stream over shm with thread progress moved 2 GB/s so
    /// against 23–33 GB/s apart (docs/results/verbs-wbw-20261201s28; beside a CPU hog,
    /// verbs-move-20261201s29). A sparse exchange's waker rings and then blocks, and
    /// its lone wake-ups on its CPU are left alone. Move off `cpu` to another CPU this
    /// thread may run on (none if it is pinned), at most once per [`MOVE_EVERY_US`].
    /// `cpu` is where the ring was judged: if the thread has left it meanwhile, the
    /// move does not push it back onto its waker's CPU.
    fn move_off_waker(&mut self, cpu: u32) {
        let now = sys::monotonic_micros();
        if !in_a_storm(mem::replace(&mut self.last_same_cpu_us, now), now) {
            return;
        }
        if self.last_move_us != 0 && now.wrapping_sub(self.last_move_us) < MOVE_EVERY_US {
            return;
        }
        self.last_move_us = now;
        if matches!(sys::move_off_cpu(cpu), Ok(Some(_))) {
            self.stats.wakes_moved += 1;
        }
    }

    /// Test access to the control socket of the connection that sends to `peer`.
    #[cfg(test)]
    pub fn ctl_of(&self, peer: SocketAddr) -> Option<RawFd> {
        let idx = *self.tx_for.get(&peer)?;
        self.conns[idx].as_ref().map(|c| c.ctl.as_raw_fd())
    }

    /// Test access to the segment and send ring of the connection that sends to
    /// `peer`.
    #[cfg(test)]
    pub fn tx_of(&self, peer: SocketAddr) -> Option<(&Region, &TxRing)> {
        let idx = *self.tx_for.get(&peer)?;
        self.conns[idx].as_ref().map(|c| (&c.region, &c.tx))
    }

    /// Test access to a connection's segment and receive ring.
    #[cfg(test)]
    pub fn rx_of(&self, peer: SocketAddr) -> Option<(&Region, &RxRing)> {
        self.conns
            .iter()
            .flatten()
            .find(|c| c.peer == peer)
            .map(|c| (&c.region, &c.rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_storm_of_same_cpu_wake_ups_moves() {
        assert!(!in_a_storm(0, 5), "the first one");
        assert!(in_a_storm(1_000, 1_000 + MOVE_STORM_US - 1), "soon after");
        assert!(
            !in_a_storm(1_000, 1_000 + MOVE_STORM_US),
            "a sparse exchange"
        );
        assert!(!in_a_storm(1_000, 1_000 + 10_000), "the idle probe's pace");
    }

    /// The fallback: a probe the kernel refuses, or that reads the wrong bytes, says
    /// so and leaves the ring's "pulls" flag clear (payloads keep using the ring).
    #[test]
    fn a_failed_probe_leaves_the_flag_clear() {
        let layout = Layout::new(4, 256).unwrap();
        let (region, _fd) = Region::create(layout).unwrap();
        let me = std::process::id() as i32;
        let at = Some(region.addr());
        // Not tried: turned off, no pid, an older peer that sent no address.
        assert_eq!(probe(false, Some(me), at, &region, 0), None);
        assert_eq!(probe(true, None, at, &region, 0), None);
        assert_eq!(probe(true, Some(me), None, &region, 0), None);
        // Refused: no such process (beyond pid_max).
        assert_eq!(probe(true, Some(i32::MAX), at, &region, 0), Some(false));
        // Faulted: an unmapped address.
        assert_eq!(probe(true, Some(me), Some(16), &region, 0), Some(false));
        // Read, but not the segment: some other memory of the process.
        let other = [0u8; 16];
        let wrong = Some(other.as_ptr() as u64);
        assert_eq!(probe(true, Some(me), wrong, &region, 0), Some(false));
        assert!(!region.pulls(0) && !region.pulls(1));
        // And the real thing sets the consumer's flag, only its own.
        assert_eq!(probe(true, Some(me), at, &region, 1), Some(true));
        assert!(region.pulls(1) && !region.pulls(0));
    }
}
