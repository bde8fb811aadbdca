//! What both ends of a connection share: opening devices, the handshake carried in
//! the connection manager's private data, and a connection's registered buffers.
//!
//! **Flow control** (DaRPC §4.4). Each side posts a ring of receive buffers before
//! the connection exists and tells the peer its ring size and buffer size in the
//! handshake. The client may have at most `credits = min(server ring, client ring)`
//! messages unanswered; the server answers every message with exactly one message
//! (a response, a pong, or an ACK when there was nothing else to say), and reposts
//! the receive buffer before it sends that answer. So a message never finds the
//! server without a posted receive, and an answer never finds the client without one:
//! neither side can be overrun, and the answer *is* the credit return.

use crate::adapt::SendPolicy;
use crate::frame::{Header, Kind, Rendezvous};
use crate::status::Status;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;
use weft_verbs::{
    Access, Completion, Context, DeviceConfig, LinkKind, MemoryRegion, Progress, ProtectionDomain,
    QueuePair, RecvWr, SendWr, WrOp, MAX_INLINE,
};

/// Handshake magic in the connection manager's private data.
const HELLO_MAGIC: &[u8; 4] = b"WRPC";
/// Handshake version.
const HELLO_VERSION: u8 = 1;
/// Handshake length.
const HELLO_LEN: usize = 12;

/// One side's buffer ring, as told to the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    /// Receive buffers posted for the peer's messages.
    pub ring: u16,
    /// Bytes in each receive buffer: the largest message the peer may SEND (larger
    /// ones go by rendezvous).
    pub buf: u32,
}

impl Hello {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HELLO_LEN);
        b.extend_from_slice(HELLO_MAGIC);
        b.push(HELLO_VERSION);
        b.push(0);
        b.extend_from_slice(&self.ring.to_be_bytes());
        b.extend_from_slice(&self.buf.to_be_bytes());
        b
    }

    /// Every byte checked: the peer may not be a weft-rpc peer at all.
    pub(crate) fn decode(b: &[u8]) -> Result<Hello, HelloError> {
        if b.len() != HELLO_LEN {
            return Err(HelloError::Length(b.len()));
        }
        if &b[..4] != HELLO_MAGIC {
            return Err(HelloError::BadMagic);
        }
        if b[4] != HELLO_VERSION {
            return Err(HelloError::Version {
                peer: b[4],
                ours: HELLO_VERSION,
            });
        }
        let ring = u16::from_be_bytes([b[6], b[7]]);
        let buf = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        if ring == 0 || (buf as usize) < MIN_BUFFER {
            return Err(HelloError::UnusableRing { ring, buf });
        }
        Ok(Hello { ring, buf })
    }
}

/// Why a peer's weft-rpc hello (the connection manager's private data) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HelloError {
    /// Not the 12 bytes of a hello: not a weft-rpc peer.
    Length(usize),
    /// The first four bytes are not `WRPC`: not a weft-rpc peer.
    BadMagic,
    /// The peer speaks another handshake version.
    Version {
        /// The peer's.
        peer: u8,
        /// This side's.
        ours: u8,
    },
    /// No receive buffers, or buffers smaller than [`MIN_BUFFER`].
    UnusableRing {
        /// Receive buffers the peer posted.
        ring: u16,
        /// Bytes in each.
        buf: u32,
    },
}

impl std::fmt::Display for HelloError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HelloError::Length(n) => write!(
                f,
                "not a weft-rpc peer (a hello of {n} bytes, not {HELLO_LEN})"
            ),
            HelloError::BadMagic => f.write_str("not a weft-rpc peer (bad handshake magic)"),
            HelloError::Version { peer, ours } => write!(
                f,
                "peer speaks weft-rpc handshake version {peer}, this side {ours}"
            ),
            HelloError::UnusableRing { ring, buf } => write!(
                f,
                "peer's ring ({ring} × {buf} B) is unusable (at least 1 × {MIN_BUFFER} B)"
            ),
        }
    }
}

impl std::error::Error for HelloError {}

/// The smallest receive buffer: a header and a rendezvous descriptor, with room.
pub const MIN_BUFFER: usize = 128;

/// How a device is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOptions {
    /// udp or shm.
    pub link: LinkKind,
    /// The IP the device uses (udp: the socket's address; shm: part of its name).
    ///
    /// `None` (the default): a loopback address of the device's own with RoCEv2's
    /// port 4791 ([`weft_verbs::DeviceConfig::local`]), so every device of a server
    /// and of its clients on this host owns port 4791 on its own address. `Some(ip)`:
    /// a free port on `ip` (udp: any the kernel picks; shm: a name unique on the host),
    /// so a server's several devices can share one address.
    pub ip: Option<IpAddr>,
    /// Engine thread or inline progress.
    pub progress: Progress,
    /// Compute ICRCs on shm (udp always does); both ends must agree.
    pub icrc: bool,
}

impl DeviceOptions {
    /// Defaults for `link`: a loopback address of its own, engine thread; no ICRC on
    /// shm.
    pub fn new(link: LinkKind) -> DeviceOptions {
        DeviceOptions {
            link,
            ip: None,
            progress: Progress::Thread,
            icrc: link == LinkKind::Udp,
        }
    }

    /// Open a device (see [`DeviceOptions::ip`] for the address it takes).
    pub fn open(&self) -> Result<Context, Status> {
        let mut cfg = match self.ip {
            None => DeviceConfig::local(self.link),
            // Port 0: the kernel picks (udp), weft-verbs picks a unique name (shm).
            Some(ip) => DeviceConfig::new(self.link, SocketAddr::new(ip, 0)),
        };
        cfg.progress = self.progress;
        cfg.icrc = self.icrc || self.link == LinkKind::Udp;
        Context::open_with(cfg).map_err(|e| Status::unavailable(e.to_string()))
    }
}

/// Large messages (rendezvous) a client may have in flight on one connection; the
/// server refuses more with `Overloaded` (each costs it a buffer of that size).
pub(crate) const MAX_RENDEZVOUS: usize = 4;

/// Tags in the top byte of a work request id.
pub(crate) const TAG_SHIFT: u32 = 56;
pub(crate) const TAG_RECV: u64 = 0;
pub(crate) const TAG_SEND_SLOT: u64 = 1;
pub(crate) const TAG_SEND_OVERFLOW: u64 = 2;
pub(crate) const TAG_INLINE: u64 = 3;
pub(crate) const TAG_READ: u64 = 4;

/// One message in this many is timed for the send policy ([`SendPolicy`]).
const SAMPLE_EVERY: u32 = 16;
/// One timed send in this many small enough for either takes the other of inline
/// and slot, so both costs stay known.
const EXPLORE_EVERY: u32 = 4;

fn ns(since: Instant) -> f64 {
    since.elapsed().as_nanos() as f64
}

pub(crate) fn tag(wr_id: u64) -> u64 {
    wr_id >> TAG_SHIFT
}
pub(crate) fn untag(wr_id: u64) -> u64 {
    wr_id & ((1 << TAG_SHIFT) - 1)
}

/// A connection's registered memory: the receive ring, send slots and messages
/// waiting for the peer's RDMA READ. Owned by whoever posts on the QP.
#[derive(Debug)]
pub(crate) struct Buffers {
    pd: ProtectionDomain,
    pub recv: MemoryRegion,
    send: MemoryRegion,
    /// Bytes per receive buffer and per send slot.
    pub buf: usize,
    /// Receive buffers.
    pub ring: usize,
    /// The peer's receive buffer size: our largest SEND.
    pub peer_buf: usize,
    /// Inline or slot, eager or rendezvous: chosen from costs measured here.
    pub policy: SendPolicy,
    /// Messages seen, for sampling.
    sampled: u32,
    /// When a timed slot send was posted, and its length, by slot.
    slot_sent: Vec<Option<(Instant, usize)>>,
    /// The policy's changes already published.
    published: u64,
    free: Vec<u32>,
    staging: usize,
    overflow: HashMap<u64, MemoryRegion>,
    next_overflow: u64,
    /// Our messages waiting for the peer's READ, by rendezvous id.
    pub rndv_out: HashMap<u64, MemoryRegion>,
    /// The next rendezvous id to use (the server numbers its own; a client uses the
    /// call's id).
    pub next_rndv: u64,
    /// Reads of the peer's rendezvous messages in progress, by read id: the
    /// landing region, the cookie, and when it started.
    pub reads: HashMap<u64, (MemoryRegion, u64, Instant)>,
    next_read: u64,
    /// Sends that found no free slot (a temporary region was registered).
    pub overflows: u64,
}

impl Buffers {
    /// `adaptive`: choose inline and rendezvous sizes from measured costs
    /// ([`SendPolicy`]); else the protocol's limits.
    pub(crate) fn new(pd: &ProtectionDomain, ring: usize, buf: usize, adaptive: bool) -> Buffers {
        let slots = 2 * ring;
        Buffers {
            pd: pd.clone(),
            recv: pd.alloc_mr(ring * buf, Access::LOCAL_WRITE),
            // The last slot stages inline sends.
            send: pd.alloc_mr((slots + 1) * buf, Access::LOCAL_WRITE),
            buf,
            ring,
            peer_buf: MIN_BUFFER,
            policy: SendPolicy::new(adaptive, MAX_INLINE.min(buf), MIN_BUFFER),
            sampled: 0,
            slot_sent: vec![None; slots],
            published: 0,
            free: (0..slots as u32).rev().collect(),
            staging: slots * buf,
            overflow: HashMap::new(),
            next_overflow: 0,
            rndv_out: HashMap::new(),
            next_rndv: 1,
            reads: HashMap::new(),
            next_read: 0,
            overflows: 0,
        }
    }

    /// The peer's receive buffer size, from its hello.
    pub(crate) fn set_peer_buf(&mut self, peer_buf: usize) {
        self.peer_buf = peer_buf;
        self.policy.set_peer_buf(peer_buf);
    }

    /// Messages up to this size go eager (a SEND); larger ones by rendezvous. At
    /// most the peer's buffer.
    pub(crate) fn eager_max(&self) -> usize {
        self.policy.eager_max().min(self.peer_buf)
    }

    /// `(inline_max, eager_max)` when they changed since the last call.
    pub(crate) fn take_change(&mut self) -> Option<(usize, usize)> {
        (self.policy.changes != self.published).then(|| {
            self.published = self.policy.changes;
            (self.policy.inline_max(), self.eager_max())
        })
    }

    /// Whether to time this message.
    fn sample(&mut self) -> bool {
        if !self.policy.adaptive() {
            return false;
        }
        self.sampled = self.sampled.wrapping_add(1);
        self.sampled % SAMPLE_EVERY == 0
    }

    /// The receive work request for ring slot `i`.
    pub(crate) fn recv_wr(&self, i: usize) -> RecvWr {
        RecvWr {
            wr_id: (TAG_RECV << TAG_SHIFT) | i as u64,
            sg_list: [self.recv.sge(i * self.buf, self.buf as u32)].into(),
        }
    }

    /// Post every ring slot.
    pub(crate) fn post_ring(&self, qp: &mut QueuePair) -> Result<(), Status> {
        qp.post_recv((0..self.ring).map(|i| self.recv_wr(i)))
            .map_err(|e| Status::internal(format!("posting receives: {e}")))
    }

    /// Copy message `wc` out of its ring slot into `out` and repost the slot. `None`
    /// when the completion does not name a slot of ours (never from a sane engine).
    pub(crate) fn take_recv(
        &mut self,
        qp: &mut QueuePair,
        wc: &Completion,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let slot = untag(wc.wr_id) as usize;
        let len = wc.byte_len as usize;
        if slot >= self.ring || len > self.buf {
            return None;
        }
        out.clear();
        out.resize(len, 0);
        let t = self.sample().then(Instant::now);
        self.recv.read(slot * self.buf, out).ok()?;
        if let Some(t) = t {
            self.policy.recv_copy.add(len, ns(t));
            self.policy.sampled();
        }
        // The slot is free again: repost it before anything is answered (the answer
        // returns the credit, and the peer may use it at once).
        qp.post_recv([self.recv_wr(slot)]).ok()?;
        Some(())
    }

    /// SEND `msg` (one message). Small messages go inline (the staging slot is free
    /// again on return; up to the policy's `inline_max`); larger ones from a send
    /// slot until their completion; messages larger than the peer's buffer must have
    /// gone through [`Buffers::rendezvous`] first.
    pub(crate) fn send(&mut self, qp: &mut QueuePair, msg: &[u8]) -> Result<(), Status> {
        debug_assert!(msg.len() <= self.peer_buf);
        let post = |qp: &mut QueuePair, wr: SendWr| {
            qp.post_send([wr])
                .map_err(|e| Status::unavailable(format!("posting a send: {e}")))
        };
        let t = self.sample().then(Instant::now);
        let hard_inline = MAX_INLINE.min(self.buf);
        let mut inline = msg.len() <= self.policy.inline_max();
        if t.is_some()
            && msg.len() <= hard_inline
            && (self.sampled / SAMPLE_EVERY) % EXPLORE_EVERY == 0
        {
            inline = !inline;
        }
        if inline {
            self.send
                .write(self.staging, msg)
                .map_err(|e| Status::internal(e.to_string()))?;
            let mut wr = SendWr::new(
                TAG_INLINE << TAG_SHIFT,
                WrOp::Send { imm: None },
                vec![self.send.sge(self.staging, msg.len() as u32)],
            );
            wr.inline = true;
            wr.signaled = false;
            post(qp, wr)?;
            if let Some(t) = t {
                self.policy.inline_post.add(msg.len(), ns(t));
                self.policy.sampled();
            }
            return Ok(());
        }
        if msg.len() <= self.buf {
            if let Some(slot) = self.free.pop() {
                let off = slot as usize * self.buf;
                self.send
                    .write(off, msg)
                    .map_err(|e| Status::internal(e.to_string()))?;
                let wr = SendWr::new(
                    (TAG_SEND_SLOT << TAG_SHIFT) | u64::from(slot),
                    WrOp::Send { imm: None },
                    vec![self.send.sge(off, msg.len() as u32)],
                );
                post(qp, wr).inspect_err(|_| self.free.push(slot))?;
                if let Some(t) = t {
                    self.policy.slot_post.add(msg.len(), ns(t));
                    self.policy.sampled();
                    if let Some(s) = self.slot_sent.get_mut(slot as usize) {
                        *s = Some((Instant::now(), msg.len()));
                    }
                }
                return Ok(());
            }
        }
        // No free slot (completions lag behind the peer's answers): a region of its
        // own, freed at its completion.
        self.overflows += 1;
        let mr = self.pd.register(msg.to_vec(), Access::LOCAL_WRITE);
        let id = self.next_overflow;
        self.next_overflow += 1;
        let wr = SendWr::new(
            (TAG_SEND_OVERFLOW << TAG_SHIFT) | id,
            WrOp::Send { imm: None },
            vec![mr.sge(0, msg.len() as u32)],
        );
        self.overflow.insert(id, mr);
        post(qp, wr)
    }

    /// A send completed (successfully or not): free what it used. `completion_ns`:
    /// what the poller measured a completion to cost, if it did.
    pub(crate) fn send_done(&mut self, wr_id: u64, completion_ns: Option<f64>) {
        match tag(wr_id) {
            TAG_SEND_SLOT => {
                let slot = untag(wr_id) as usize;
                if let Some((t, len)) = self.slot_sent.get_mut(slot).and_then(Option::take) {
                    self.policy.flight.add(len, ns(t));
                    if let Some(c) = completion_ns {
                        self.policy.completion.add(0, c);
                    }
                    self.policy.sampled();
                }
                self.free.push(slot as u32);
            }
            TAG_SEND_OVERFLOW => {
                self.overflow.remove(&untag(wr_id));
            }
            _ => {}
        }
    }

    /// Register `msg` for the peer to READ and return the one-frame message that
    /// tells it where, under rendezvous id `id`. The region stays until
    /// [`Buffers::release`] (or the end of the connection).
    pub(crate) fn rendezvous(&mut self, msg: Vec<u8>, id: u64) -> Vec<u8> {
        let len = msg.len() as u32;
        let t = self.policy.adaptive().then(Instant::now);
        let mr = self
            .pd
            .register(msg, Access::LOCAL_WRITE | Access::REMOTE_READ);
        if let Some(t) = t {
            self.policy.register.add(len as usize, ns(t));
            self.policy.sampled();
        }
        let d = Rendezvous {
            addr: mr.addr(),
            rkey: mr.rkey(),
            len,
        };
        self.rndv_out.insert(id, mr);
        let mut out = Vec::with_capacity(crate::frame::HEADER_LEN + Rendezvous::LEN);
        Header::new(Kind::RNDV, id).emit(&d.to_bytes(), &mut out);
        out
    }

    /// The peer finished reading rendezvous message `id`.
    pub(crate) fn release(&mut self, id: u64) {
        self.rndv_out.remove(&id);
    }

    /// Start reading the peer's rendezvous message `d`; `cookie` comes back with the
    /// bytes from [`Buffers::read_done`]. Returns the read's id (`untag` of its
    /// completion's `wr_id`).
    pub(crate) fn start_read(
        &mut self,
        qp: &mut QueuePair,
        d: Rendezvous,
        cookie: u64,
    ) -> Result<u64, Status> {
        let started = Instant::now();
        let mr = self
            .pd
            .register(vec![0u8; d.len as usize], Access::LOCAL_WRITE);
        let id = self.next_read;
        self.next_read += 1;
        let wr = SendWr::new(
            (TAG_READ << TAG_SHIFT) | id,
            WrOp::Read {
                remote: weft_verbs::RemoteAddr {
                    addr: d.addr,
                    rkey: d.rkey,
                },
            },
            vec![mr.sge(0, d.len)],
        );
        self.reads.insert(id, (mr, cookie, started));
        match qp.post_send([wr]) {
            Ok(()) => Ok(id),
            Err(e) => {
                self.reads.remove(&id);
                Err(Status::unavailable(format!("posting a read: {e}")))
            }
        }
    }

    /// A read finished: the bytes and the cookie.
    pub(crate) fn read_done(&mut self, wr_id: u64) -> Option<(Vec<u8>, u64)> {
        let (mr, cookie, started) = self.reads.remove(&untag(wr_id))?;
        if self.policy.adaptive() {
            self.policy.read.add(mr.len(), ns(started));
            self.policy.sampled();
        }
        Some((mr.into_vec()?, cookie))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_refuses_strangers() {
        let h = Hello {
            ring: 32,
            buf: 4096,
        };
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        let b = h.encode();
        for n in 0..b.len() {
            assert!(Hello::decode(&b[..n]).is_err());
        }
        let mut v = b.clone();
        v[4] = 2;
        assert_eq!(
            Hello::decode(&v),
            Err(HelloError::Version {
                peer: 2,
                ours: HELLO_VERSION
            })
        );
        let zero = Hello { ring: 0, buf: 4096 }.encode();
        assert!(Hello::decode(&zero).is_err());
    }
}
