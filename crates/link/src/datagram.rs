//! Datagram links: how the verbs engine moves RoCEv2 packets. A datagram is the UDP
//! payload of a RoCEv2 packet (BTH … ICRC) plus the IP/UDP path it travels on; the
//! kernel (udp link) or the peer process (shm link) supplies the rest.
//!
//! Every datagram link carries an [`IcrcPath`] with each datagram: on receive, `src` is
//! the peer and `dst` is this link; on send, `src` is this link and `dst` the peer.
//! The path is what the transport needs to compute or check the ICRC, and what it
//! uses to address replies, so a link never has to parse packet contents.
//!
//! Frame links ([`crate::Link`]) and datagram links share the buffer pool, the stats
//! and the burst-and-wait shape; the router drives the first, the verbs engine the
//! second.

use crate::shmem::{PeerMaps, SharedMemory};
use crate::{BufferPool, LinkStats, PacketBuf};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;
use weft_wire::roce::{IcrcPath, IpPair};

/// Default largest datagram: a 4096-byte path MTU payload, 64 bytes for the BTH and
/// the largest set of extension headers (BTH 12 + RETH 16 + ImmDt 4 fit, so does
/// BTH + AtomicETH 28), and the 4-byte ICRC.
pub const DEFAULT_MAX_DATAGRAM: usize = 4096 + 64 + 4;

/// Buffer size for a pool that holds datagrams of up to `max_datagram` bytes after the
/// pool's default headroom, rounded up to a cache line.
pub const fn pool_buf_size(max_datagram: usize) -> usize {
    (max_datagram + crate::pool::DEFAULT_HEADROOM).div_ceil(64) * 64
}

/// One RoCEv2 packet (the UDP payload) and its path.
#[derive(Debug)]
pub struct Datagram {
    /// The bytes: BTH, extension headers, payload, pad, ICRC.
    pub buf: PacketBuf,
    /// Receive: src = peer, dst = this link. Send: src = this link, dst = peer.
    pub path: IcrcPath,
}

/// A link that moves RoCEv2 datagrams in bursts.
///
/// Both burst calls are non-blocking. [`DatagramLink::wait`] blocks until a datagram
/// may be ready, `extra` becomes readable (the verbs engine passes its doorbell
/// eventfd), or `timeout` passes.
pub trait DatagramLink: Send {
    /// The address this link sends from and receives on (the address in the
    /// connection manager's handshake).
    fn local_addr(&self) -> SocketAddr;

    /// Largest datagram (UDP payload) this link carries.
    fn max_datagram(&self) -> usize;

    /// True when the ICRC must be computed and checked on this link. The udp link
    /// always answers true; the shm link answers what the two ends negotiated.
    fn icrc(&self) -> bool {
        true
    }

    /// True when a send is a write into memory the peer maps, not a system call (the
    /// shm link). The verbs engine lets an application's thread send on such a link
    /// itself even beside an engine thread; a system call under the engine's lock
    /// risks a preemption with the lock held. The default answers false.
    fn sends_in_memory(&self) -> bool {
        false
    }

    /// The pool receive buffers come from; senders allocate from it too.
    fn pool(&self) -> &BufferPool;

    /// Append up to `max` received datagrams to `out`; returns how many.
    fn recv_burst(&mut self, out: &mut Vec<Datagram>, max: usize) -> io::Result<usize>;

    /// [`DatagramLink::recv_burst`], receiving into buffers taken from `spare` (the
    /// caller's empty buffers of [`DatagramLink::pool`]) before the pool: a caller that
    /// keeps the buffers of what it received and sent
    /// ([`DatagramLink::send_burst_reuse`]) moves packets with no pool lock. The
    /// default takes none.
    fn recv_burst_reuse(
        &mut self,
        out: &mut Vec<Datagram>,
        max: usize,
        spare: &mut Vec<PacketBuf>,
    ) -> io::Result<usize> {
        let _ = spare;
        self.recv_burst(out, max)
    }

    /// Send datagrams from the front of `dgrams`, removing those accepted; returns how
    /// many. Datagrams left in `dgrams` did not fit (ring or socket buffer full): retry
    /// later or drop them. A datagram to a peer the link cannot reach is dropped and
    /// counted in [`LinkStats::tx_dropped`].
    fn send_burst(&mut self, dgrams: &mut Vec<Datagram>) -> io::Result<usize>;

    /// [`DatagramLink::send_burst`], and the buffers of the datagrams it removed from
    /// `dgrams` (their bytes copied out, or dropped) are appended to `spent` for the
    /// caller to reuse, instead of going back to the pool one lock each. A link that
    /// keeps a buffer after the call (a zero-copy send) gives back none; the default
    /// gives back none.
    fn send_burst_reuse(
        &mut self,
        dgrams: &mut Vec<Datagram>,
        spent: &mut Vec<PacketBuf>,
    ) -> io::Result<usize> {
        let _ = spent;
        self.send_burst(dgrams)
    }

    /// True when the link stages packets in its own contiguous send buffer
    /// ([`DatagramLink::tx_room`]): the udp link, so that a run of equal packets
    /// leaves as one UDP GSO send from one source buffer (one long kernel copy, not
    /// one per packet). The default answers false: send [`Datagram`]s.
    fn stages_tx(&self) -> bool {
        false
    }

    /// Room for the next packet, right after the packets staged before it (at least
    /// [`DatagramLink::max_datagram`] bytes), or `None` when the stage is full (flush
    /// it first) or the link does not stage. Until [`DatagramLink::tx_commit`], a
    /// second call hands out the same bytes.
    fn tx_room(&mut self) -> Option<&mut [u8]> {
        None
    }

    /// The packet of `len` bytes just written at the start of the room last handed
    /// out, to go on `path`: it is staged (or dropped and counted in
    /// [`LinkStats::tx_dropped`] when the link cannot send it). Returns how many
    /// packets are staged.
    fn tx_commit(&mut self, len: usize, path: IcrcPath) -> usize {
        let _ = (len, path);
        0
    }

    /// Send the staged packets, oldest first; those the socket had no room for stay
    /// staged for the next flush. Returns how many stay.
    fn tx_flush(&mut self) -> usize {
        0
    }

    /// How many packets are staged and not yet sent.
    fn tx_staged(&self) -> usize {
        0
    }

    /// Block until a receive may find datagrams, `extra` is readable, or `timeout`
    /// passes. Returns true when woken (by either), false on timeout. Spurious wakeups
    /// are allowed.
    fn wait(&mut self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> io::Result<bool>;

    /// A descriptor that becomes readable when datagrams arrive, for a thread that
    /// watches the link without holding it (the verbs engine while its application is
    /// briefly away). `None` (the default) when readiness needs the link itself, as
    /// the shm link's rings do. Datagrams already taken from the kernel but not yet
    /// returned by [`DatagramLink::recv_burst`] do not make it readable.
    fn readiness_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Whether the link holds what [`DatagramLink::readiness_fd`] does not show:
    /// datagrams already taken from the kernel and not yet returned by
    /// [`DatagramLink::recv_burst`], or sends held back (staged, or left over by a
    /// full socket). A thread that watches the descriptor alone while this is true
    /// may sleep through them; [`DatagramLink::wait`] does not. False by default.
    fn held(&self) -> bool {
        false
    }

    /// The link's own counters.
    fn stats(&self) -> LinkStats;

    /// Whether the peer `dst` copies by-reference payloads straight from this
    /// process's memory (the shm link's one-copy path, [`crate::shm`]). False on links
    /// that cannot, and before a connection to `dst` exists.
    fn peer_pulls(&self, _dst: SocketAddr) -> bool {
        false
    }

    /// For each datagram the last [`DatagramLink::recv_burst`] appended, in order:
    /// the process whose memory a by-reference payload in it may be pulled from — the
    /// process the kernel reported for the connection it came through, when this end
    /// proved it can read that process's memory — or `None`. Empty (read as all
    /// `None`) on links without cross-memory attach.
    fn burst_pull_pids(&self) -> &[Option<i32>] {
        &[]
    }

    /// Offer `mem` to every peer, now and on later connections, as region `id`
    /// (unique among this link's offers), so a peer can copy by-reference payloads
    /// out of it without a system call (the shm link, [`crate::shmem`]). False when
    /// the link cannot (the default, udp) or will not (too many offers).
    fn share_memory(&mut self, _id: u64, _mem: &SharedMemory) -> bool {
        false
    }

    /// Withdraw region `id` from every peer: after this returns, no datagram sent
    /// later is copied from it by a peer (the caller may then free the memory).
    fn unshare_memory(&mut self, _id: u64) {}

    /// For each datagram the last [`DatagramLink::recv_burst`] appended, in order:
    /// the regions its sender shared that are mapped here ([`BurstMaps::get`];
    /// `None` when there are none). Empty on links without shared regions.
    fn burst_pull_maps(&self) -> BurstMaps<'_> {
        BurstMaps::default()
    }

    /// Send one datagram (`bytes` on `path`) at once if the link can without a
    /// burst: true when it went (counted as a burst's would be). False, with nothing
    /// done, when the link would rather have it in a burst
    /// ([`DatagramLink::send_burst_reuse`], which then decides its fate): the default,
    /// and the shm link for anything but a datagram on the last route's path. A caller
    /// keeps order by trying it only with nothing of its own queued before it.
    fn try_send_one(&mut self, bytes: &[u8], path: &IcrcPath) -> bool {
        let _ = (bytes, path);
        false
    }

    /// Send `bytes` to the peer at `path` now, as one item of that peer's receive ring
    /// (no batching, nothing queued inside the link), and remember `tag` with the ring
    /// index after the item, until the peer's consumer releases the item
    /// ([`DatagramLink::take_released`]) or the connection ends first
    /// ([`DatagramLink::take_lost`]). Issue 13's ring mode: the peer's release index is
    /// the ACK. True when it went (counted as a burst's datagram would be).
    ///
    /// False, with nothing written and nothing remembered, when it cannot go now; the
    /// caller keeps it and tries again later (and, to keep its order, sends nothing
    /// else of its own to that peer in between): no connection and none can be made
    /// now (the peer is not listening, or is within its back-off), the ring full, the
    /// connection closing or broken. Two cases never go, however often tried: `bytes`
    /// longer than [`DatagramLink::max_datagram`], and a `path` whose source is not
    /// [`DatagramLink::local_addr`]; the caller checks those first. The default (every
    /// link but shm) answers false.
    ///
    /// The shm link: with no connection to the peer yet, the call connects (as a
    /// burst's first datagram to a peer does, bounded by the connect timeout) and
    /// writes into the new connection's ring at once; the path of the last route
    /// goes without a look-up.
    fn send_tracked(&mut self, bytes: &[u8], path: &IcrcPath, tag: u64) -> bool {
        let _ = (bytes, path, tag);
        false
    }

    /// Append to `out` the tags of tracked sends ([`DatagramLink::send_tracked`]) whose
    /// item the peer's consumer has released (its release index is at or past the
    /// item's end), in send order per connection; forget them; return how many. The
    /// default (no tracked sends) appends none.
    ///
    /// Each connection with tracked items outstanding has its peer's release index
    /// read once per call. That index is the peer's word, so it is checked: one that
    /// moves backwards or beyond what was written releases nothing and ends the
    /// connection as corrupt, its outstanding tags then reported by
    /// [`DatagramLink::take_lost`].
    ///
    /// # Ordering with what the peer sends back
    ///
    /// The peer's link stores its release index after its visitor
    /// ([`DatagramLink::recv_each`]) ran for every item before it, and reading the
    /// index here (an Acquire load) makes visible everything the peer's link published
    /// to this one before that store, on any of its rings: in ring mode, the ERROR
    /// item the peer pushed for a failed request before it released that request's
    /// item. So in one step a caller must
    ///
    /// 1. call `take_released` (and [`DatagramLink::take_lost`]) first;
    /// 2. then receive, and process every item that was waiting when that receive
    ///    began (a receive that returned its `max` may have stopped early: the rest
    ///    of the items come in a later step, and so must the step-1 tags'
    ///    completions);
    /// 3. and only then complete the step-1 tags as successes, except those an item
    ///    of step 2 failed.
    ///
    /// A caller that receives first and reads released second can see a tag released
    /// whose ERROR item arrives only in its next receive, and would complete as a
    /// success what failed. The guarantee covers only what the peer published before
    /// its release store: an item the peer sends after its receive returned (the
    /// release is stored before the receive returns) is not covered, unless the peer
    /// holds its releases back ([`DatagramLink::hold_releases`]) until it has sent.
    fn take_released(&mut self, out: &mut Vec<u64>) -> usize {
        let _ = out;
        0
    }

    /// Append to `out` the tags of tracked sends whose connection ended before the
    /// peer's consumer released their item — the peer died or hung up, refused the
    /// handshake, or its ring was found corrupt (an impossible release index among
    /// them) — in send order per connection; forget them; return how many. A tag is
    /// reported once, by this or by [`DatagramLink::take_released`], never by both.
    /// When a peer hangs up, its last stored release index is read once more: the
    /// tags it covers (items the peer took before it went) are reported released,
    /// the rest lost. A connection's end is noticed by the link's own service (in
    /// its receive, [`DatagramLink::rx_idle`] and [`DatagramLink::wait`]), by a
    /// tracked send that finds its ring full, and by `take_released` itself; this
    /// reports what those found. The default appends none.
    fn take_lost(&mut self, out: &mut Vec<u64>) -> usize {
        let _ = out;
        0
    }

    /// Tracked sends whose tag neither [`DatagramLink::take_released`] nor
    /// [`DatagramLink::take_lost`] has handed back yet (a counter: the verbs engine's
    /// idle check). Nonzero does not mean the peer will ever release them: nothing
    /// wakes a waiting caller when the peer's release index moves. The default
    /// answers 0.
    fn tracked_outstanding(&self) -> usize {
        0
    }

    /// Hold back (`on`) the release of received items, or stop holding them back
    /// (which releases what is held). While held, a receive takes and visits items
    /// as before, but their slots go back to the peer's producer — and the peer's
    /// [`DatagramLink::take_released`] sees them released — only at the next
    /// [`DatagramLink::release_received`]. Ring mode's responder holds them so that
    /// the ERROR item it sends, after its receive returned, for a request that
    /// failed is published before that request's item is released (see "Ordering"
    /// at `take_released`). A held item keeps its slot: the peer's ring fills after
    /// a ring's worth, and a caller about to block in [`DatagramLink::wait`] releases
    /// first (nothing wakes the peer when it does). Returns whether the link now
    /// holds them: the default holds nothing and answers false.
    fn hold_releases(&mut self, on: bool) -> bool {
        let _ = on;
        false
    }

    /// Release every received item taken so far: one store of the consumer's index
    /// per connection whose index moved ([`DatagramLink::hold_releases`]). The
    /// default does nothing.
    fn release_received(&mut self) {}

    /// True when the link hands received datagrams to a visitor one by one
    /// ([`DatagramLink::recv_each`]). Asked once: the default answers false, and the
    /// caller then receives through [`DatagramLink::recv_burst_reuse`].
    fn visits_rx(&self) -> bool {
        false
    }

    /// True when a receive now would certainly find nothing: a look cheaper than a
    /// receive call, for a caller that skips its whole receive step (and more) on a
    /// yes. It may run the periodic service a receive runs. False when there may be
    /// something, or when the link cannot tell without receiving (the default).
    fn rx_idle(&mut self) -> bool {
        false
    }

    /// Receive up to `max` datagrams and hand each, as it is taken, to `visit`
    /// ([`RxItem`]: its bytes, its path, and what [`DatagramLink::burst_pull_pids`]
    /// and [`DatagramLink::burst_pull_maps`] would say of it), in a buffer the link
    /// takes from `spare` and puts back there after the visit (the pool refills
    /// `spare` when it runs short). Returns how many were visited. What a burst of
    /// [`Datagram`]s costs per item and the visit does not: the datagram's move into
    /// the burst, the per-burst tables of pull processes and maps, and the caller's
    /// walk over the burst and its buffers afterwards. The datagrams, their order and
    /// the counters are those of `recv_burst_reuse`. Links that answer
    /// [`DatagramLink::visits_rx`] false refuse (`Unsupported`, the default).
    ///
    /// The shm link gives a connection's items back to its producer (stores its
    /// consumer index, what the peer's [`DatagramLink::take_released`] reads) once
    /// per connection per call, after the last visit of that connection's items and
    /// before the call returns: a visited item is not released while it is visited,
    /// and everything the visit did happens before its release. Unless releases are
    /// held ([`DatagramLink::hold_releases`]): then at the next
    /// [`DatagramLink::release_received`].
    fn recv_each(
        &mut self,
        max: usize,
        spare: &mut Vec<PacketBuf>,
        visit: &mut dyn FnMut(RxItem<'_>),
    ) -> io::Result<usize> {
        let _ = (max, spare, visit);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// One received datagram as [`DatagramLink::recv_each`] hands it over, in the link's
/// buffer for the length of the visit.
#[derive(Debug, Clone, Copy)]
pub struct RxItem<'a> {
    /// The packet: BTH, extension headers, payload, pad, ICRC.
    pub bytes: &'a [u8],
    /// src = peer, dst = this link.
    pub path: &'a IcrcPath,
    /// The process a by-reference payload in it may be pulled from (see
    /// [`DatagramLink::burst_pull_pids`]).
    pub pull_pid: Option<i32>,
    /// The regions its sender shared that are mapped here (see
    /// [`DatagramLink::burst_pull_maps`]).
    pub pull_maps: Option<&'a Arc<PeerMaps>>,
}

/// The mapped regions behind each datagram of a burst
/// ([`DatagramLink::burst_pull_maps`]): one table per run of datagrams from one
/// connection, and per datagram the index of its table, so that no reference count
/// moves per datagram.
#[derive(Debug, Clone, Copy, Default)]
pub struct BurstMaps<'a> {
    /// Per datagram: its table in `tables`, or `None`.
    pub index: &'a [Option<u32>],
    /// The tables of the burst.
    pub tables: &'a [Arc<PeerMaps>],
}

impl<'a> BurstMaps<'a> {
    /// Datagram `i`'s table (`None`: none, or no such datagram).
    pub fn get(&self, i: usize) -> Option<&'a Arc<PeerMaps>> {
        let k = (*self.index.get(i)?)?;
        self.tables.get(k as usize)
    }

    /// Datagrams described.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when no datagram is described.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

impl<L: DatagramLink + ?Sized> DatagramLink for Box<L> {
    fn local_addr(&self) -> SocketAddr {
        (**self).local_addr()
    }
    fn max_datagram(&self) -> usize {
        (**self).max_datagram()
    }
    fn icrc(&self) -> bool {
        (**self).icrc()
    }
    fn sends_in_memory(&self) -> bool {
        (**self).sends_in_memory()
    }
    fn pool(&self) -> &BufferPool {
        (**self).pool()
    }
    fn recv_burst(&mut self, out: &mut Vec<Datagram>, max: usize) -> io::Result<usize> {
        (**self).recv_burst(out, max)
    }
    fn recv_burst_reuse(
        &mut self,
        out: &mut Vec<Datagram>,
        max: usize,
        spare: &mut Vec<PacketBuf>,
    ) -> io::Result<usize> {
        (**self).recv_burst_reuse(out, max, spare)
    }
    fn send_burst(&mut self, dgrams: &mut Vec<Datagram>) -> io::Result<usize> {
        (**self).send_burst(dgrams)
    }
    fn send_burst_reuse(
        &mut self,
        dgrams: &mut Vec<Datagram>,
        spent: &mut Vec<PacketBuf>,
    ) -> io::Result<usize> {
        (**self).send_burst_reuse(dgrams, spent)
    }
    fn stages_tx(&self) -> bool {
        (**self).stages_tx()
    }
    fn tx_room(&mut self) -> Option<&mut [u8]> {
        (**self).tx_room()
    }
    fn tx_commit(&mut self, len: usize, path: IcrcPath) -> usize {
        (**self).tx_commit(len, path)
    }
    fn tx_flush(&mut self) -> usize {
        (**self).tx_flush()
    }
    fn tx_staged(&self) -> usize {
        (**self).tx_staged()
    }
    fn wait(&mut self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> io::Result<bool> {
        (**self).wait(timeout, extra)
    }
    fn readiness_fd(&self) -> Option<BorrowedFd<'_>> {
        (**self).readiness_fd()
    }
    fn held(&self) -> bool {
        (**self).held()
    }
    fn stats(&self) -> LinkStats {
        (**self).stats()
    }
    fn peer_pulls(&self, dst: SocketAddr) -> bool {
        (**self).peer_pulls(dst)
    }
    fn burst_pull_pids(&self) -> &[Option<i32>] {
        (**self).burst_pull_pids()
    }
    fn share_memory(&mut self, id: u64, mem: &SharedMemory) -> bool {
        (**self).share_memory(id, mem)
    }
    fn unshare_memory(&mut self, id: u64) {
        (**self).unshare_memory(id)
    }
    fn burst_pull_maps(&self) -> BurstMaps<'_> {
        (**self).burst_pull_maps()
    }
    fn try_send_one(&mut self, bytes: &[u8], path: &IcrcPath) -> bool {
        (**self).try_send_one(bytes, path)
    }
    fn send_tracked(&mut self, bytes: &[u8], path: &IcrcPath, tag: u64) -> bool {
        (**self).send_tracked(bytes, path, tag)
    }
    fn take_released(&mut self, out: &mut Vec<u64>) -> usize {
        (**self).take_released(out)
    }
    fn take_lost(&mut self, out: &mut Vec<u64>) -> usize {
        (**self).take_lost(out)
    }
    fn tracked_outstanding(&self) -> usize {
        (**self).tracked_outstanding()
    }
    fn hold_releases(&mut self, on: bool) -> bool {
        (**self).hold_releases(on)
    }
    fn release_received(&mut self) {
        (**self).release_received()
    }
    fn visits_rx(&self) -> bool {
        (**self).visits_rx()
    }
    fn rx_idle(&mut self) -> bool {
        (**self).rx_idle()
    }
    fn recv_each(
        &mut self,
        max: usize,
        spare: &mut Vec<PacketBuf>,
        visit: &mut dyn FnMut(RxItem<'_>),
    ) -> io::Result<usize> {
        (**self).recv_each(max, spare, visit)
    }
}

/// The path of a datagram from `local` to `peer`; `None` when the families differ.
pub fn path_between(local: SocketAddr, peer: SocketAddr) -> Option<IcrcPath> {
    let ips = match (local.ip(), peer.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => IpPair::V4 { src, dst },
        (IpAddr::V6(src), IpAddr::V6(dst)) => IpPair::V6 { src, dst },
        _ => return None,
    };
    Some(IcrcPath {
        ips,
        src_port: local.port(),
        dst_port: peer.port(),
    })
}

/// The source and destination socket addresses of a path.
pub fn path_ends(path: &IcrcPath) -> (SocketAddr, SocketAddr) {
    match path.ips {
        IpPair::V4 { src, dst } => (
            SocketAddr::new(IpAddr::V4(src), path.src_port),
            SocketAddr::new(IpAddr::V4(dst), path.dst_port),
        ),
        IpPair::V6 { src, dst } => (
            SocketAddr::new(IpAddr::V6(src), path.src_port),
            SocketAddr::new(IpAddr::V6(dst), path.dst_port),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_round_trips_through_socket_addrs() {
        let a: SocketAddr = "198.18.0.1:4791".parse().unwrap();
        let b: SocketAddr = "198.18.0.2:4792".parse().unwrap();
        let p = path_between(a, b).unwrap();
        assert_eq!(path_ends(&p), (a, b));
        let v6: SocketAddr = "[2001:2::1]:4791".parse().unwrap();
        assert!(path_between(a, v6).is_none());
        let q = path_between(v6, "[2001:2::2]:4791".parse().unwrap()).unwrap();
        assert_eq!(path_ends(&q).0, v6);
    }
}
