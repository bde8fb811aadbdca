//! The connection manager: an rdma_cm-like way to connect queue pairs.
//!
//! A server binds a [`Listener`] to a TCP address and takes [`ConnectRequest`]s; a
//! client calls [`connect`]. Over the TCP side channel the two exchange a versioned
//! handshake — QP number, first PSN, path MTU, link kind and address, READ/atomic
//! depths, recovery mode, ICRC use, whether it asks for the shm ring mode, and
//! private data — then each side moves its QP RESET → INIT → RTR → RTS with
//! [`weft_transport::Bringup`]. The client confirms with a ready-to-use message, so a
//! server's [`ConnectRequest::accept`] returns only when both ends can send.
//!
//! The TCP connection stays open as the connection's liveness signal: when it
//! closes (the peer disconnected, exited or was killed), the local QP is moved to
//! ERR, so outstanding work requests complete with `WrFlushErr` at once instead of
//! waiting for the transport's retries to run out.
//!
//! Every handshake byte is hostile: messages are length-checked, versions and kinds
//! compared, and a malformed or mismatched request is refused with a reason.

use crate::context::{random_u64, Context, LinkKind};
use crate::engine::Shared;
use crate::qp::QueuePair;
use crate::Error;
use std::fmt;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use weft_transport::{Access, Bringup, Mtu, QpAttr, QpState, QpType, Recovery};

/// Handshake magic.
const MAGIC: &[u8; 4] = b"WFCM";
/// Handshake version; a peer with another version is refused. 2: the hello carries
/// the sender's delayed-ACK bound ([`Hello::ack_delay_us`]).
pub const VERSION: u16 = 2;
/// Largest private data in a request or reply (rdma_cm allows 56–196 bytes).
pub const MAX_PRIVATE_DATA: usize = 196;

const KIND_REQUEST: u8 = 1;
const KIND_ACCEPT: u8 = 2;
const KIND_REJECT: u8 = 3;
const KIND_READY: u8 = 4;

// The hello's flags byte. A version-2 decoder ignores the other bits (3..7), so a
// later flag needs no version bump: a peer that predates it leaves it clear.
const FLAG_ICRC: u8 = 1 << 0;
const FLAG_SELECTIVE: u8 = 1 << 1;
const FLAG_RING: u8 = 1 << 2;

/// What one side asks for or offers. Each field's default ([`ConnParam::default`]) is
/// stated with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnParam {
    /// Remote rights this side's QP grants its peer. Default: remote WRITE, READ and
    /// atomics (the memory regions' own rights still apply).
    pub access: Access,
    /// Largest path MTU this side accepts (the smaller of the two is used). Default:
    /// 4096, capped by the link.
    pub path_mtu: Mtu,
    /// READ/atomics this side will have outstanding (`initiator_depth`). Default 16.
    pub initiator_depth: u8,
    /// READ/atomics this side accepts outstanding (`responder_resources`). Default 16.
    pub responder_resources: u8,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout. Default 14 (67 ms).
    pub timeout: u8,
    /// Transport retries. Default 7.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite). Default 7.
    pub rnr_retry: u8,
    /// RNR timer code (IBTA table 45). Default 1 (0.01 ms).
    pub min_rnr_timer: u8,
    /// Loss recovery; selective is used only when both sides ask for it. Default:
    /// go-back-N.
    pub recovery: Recovery,
    /// PSNs in flight cap. Default 64.
    pub max_inflight: u32,
    /// Q_Key (UD). Default `0x1111_1111`.
    pub qkey: u32,
    /// Application bytes carried with the request or reply (≤ [`MAX_PRIVATE_DATA`]).
    /// Default: none.
    pub private_data: Vec<u8>,
    /// Bound on connecting and on each handshake step. Default 5 s.
    pub handshake_timeout: Duration,
}

impl Default for ConnParam {
    fn default() -> ConnParam {
        ConnParam {
            access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            path_mtu: Mtu::M4096,
            initiator_depth: 16,
            responder_resources: 16,
            // 67 ms × 7 retries: a peer descheduled on a busy machine is not dead.
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            recovery: Recovery::GoBackN,
            // A window of 64 packets (256 KiB at a 4096-byte MTU) covers the
            // bandwidth-delay product of a host or a rack; more only queues in front
            // of other QPs' packets.
            max_inflight: 64,
            qkey: 0x1111_1111,
            private_data: Vec::new(),
            handshake_timeout: Duration::from_secs(5),
        }
    }
}

/// Why bytes from the peer are not a handshake this side can use. Every field of a
/// hello is checked; each variant names the field and the value found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The message ended before its fields did.
    Truncated,
    /// The first four bytes are not `WFCM`: not a weft connection request.
    BadMagic,
    /// The peer speaks another handshake version.
    Version {
        /// The peer's.
        peer: u16,
        /// This side's ([`VERSION`]).
        ours: u16,
    },
    /// A link kind code that is neither udp (1) nor shm (2).
    LinkKind(u8),
    /// A QP type code that is not RC (1), UC (2) or UD (3).
    QpType(u8),
    /// A path MTU that is not 256, 512, 1024, 2048 or 4096.
    PathMtu(u16),
    /// An address family code that is neither 4 nor 6.
    AddressFamily(u8),
    /// Family 4 with an address that is not IPv4-mapped.
    NotIpv4Mapped(Ipv6Addr),
    /// More private data than [`MAX_PRIVATE_DATA`].
    PrivateDataTooLong(usize),
    /// Bytes after the private data.
    TrailingBytes(usize),
    /// A framed message of 0 or more than 512 bytes.
    MessageLength(usize),
    /// A message of another kind than this step expects.
    UnexpectedKind {
        /// What this step waits for.
        expected: &'static str,
        /// The kind code received.
        got: u8,
    },
    /// The peer closed the side channel in the middle of the handshake.
    PeerClosed,
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Truncated => f.write_str("message too short"),
            HandshakeError::BadMagic => f.write_str("not a weft connection request (bad magic)"),
            HandshakeError::Version { peer, ours } => {
                write!(f, "peer speaks handshake version {peer}, this side {ours}")
            }
            HandshakeError::LinkKind(k) => write!(f, "unknown link kind {k}"),
            HandshakeError::QpType(t) => write!(f, "unknown QP type {t}"),
            HandshakeError::PathMtu(m) => write!(f, "bad path MTU {m}"),
            HandshakeError::AddressFamily(a) => write!(f, "bad address family {a}"),
            HandshakeError::NotIpv4Mapped(a) => {
                write!(f, "address {a} of family 4 is not IPv4-mapped")
            }
            HandshakeError::PrivateDataTooLong(n) => {
                write!(f, "private data of {n} bytes (at most {MAX_PRIVATE_DATA})")
            }
            HandshakeError::TrailingBytes(n) => write!(f, "{n} trailing bytes"),
            HandshakeError::MessageLength(n) => write!(f, "bad message length {n}"),
            HandshakeError::UnexpectedKind { expected, got } => {
                write!(f, "expected {expected}, got message kind {got}")
            }
            HandshakeError::PeerClosed => f.write_str("peer closed the side channel"),
        }
    }
}

impl std::error::Error for HandshakeError {}

/// Why a connection was refused. Mismatches are told from the point of view of the
/// side that reports them: `ours` is this process's value, `theirs` the peer's (a
/// rejection received from the peer is turned around).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RejectReason {
    /// Nothing accepts connections at the address (TCP connection refused).
    NothingListens,
    /// The two devices run on different links.
    LinkMismatch {
        /// The peer's link.
        theirs: LinkKind,
        /// This side's link.
        ours: LinkKind,
    },
    /// The two QPs are of different types.
    QpTypeMismatch {
        /// The peer's QP type.
        theirs: QpType,
        /// This side's QP type.
        ours: QpType,
    },
    /// One link computes ICRCs and the other does not.
    IcrcMismatch {
        /// Whether the peer's does.
        theirs: bool,
        /// Whether this side's does.
        ours: bool,
    },
    /// The device addresses are of different IP families (4 or 6).
    AddressFamily {
        /// The peer's.
        theirs: u8,
        /// This side's.
        ours: u8,
    },
    /// The peer could not read this side's request; its description.
    BadRequest(String),
    /// The peer's application refused ([`ConnectRequest::reject`]), in its words.
    Application(String),
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::NothingListens => f.write_str("nothing listens there"),
            RejectReason::LinkMismatch { theirs, ours } => {
                write!(f, "link mismatch: peer uses {theirs}, this side {ours}")
            }
            RejectReason::QpTypeMismatch { theirs, ours } => {
                write!(f, "QP type mismatch: peer {theirs:?}, this side {ours:?}")
            }
            RejectReason::IcrcMismatch { theirs, ours } => write!(
                f,
                "ICRC use differs: peer {}, this side {}",
                if *theirs { "on" } else { "off" },
                if *ours { "on" } else { "off" }
            ),
            RejectReason::AddressFamily { theirs, ours } => write!(
                f,
                "address family mismatch: peer IPv{theirs}, this side IPv{ours}"
            ),
            RejectReason::BadRequest(why) => {
                write!(f, "the peer could not read the request: {why}")
            }
            RejectReason::Application(why) => f.write_str(why),
        }
    }
}

// Reject message bodies: a code, then its fields. A code below 0x20 cannot start the
// plain-text reasons older peers sent, so such a text still reads as `Application`.
const REJ_LINK: u8 = 1;
const REJ_QP_TYPE: u8 = 2;
const REJ_ICRC: u8 = 3;
const REJ_FAMILY: u8 = 4;
const REJ_BAD_REQUEST: u8 = 5;
const REJ_APPLICATION: u8 = 6;

fn link_of(code: u8) -> Option<LinkKind> {
    match code {
        1 => Some(LinkKind::Udp),
        2 => Some(LinkKind::Shm),
        _ => None,
    }
}

fn qp_of(code: u8) -> Option<QpType> {
    match code {
        1 => Some(QpType::Rc),
        2 => Some(QpType::Uc),
        3 => Some(QpType::Ud),
        _ => None,
    }
}

/// Longest reason text sent (the message must stay within [`MAX_MSG`]).
const MAX_REASON: usize = MAX_MSG - 8;

impl RejectReason {
    /// The body of a reject message (this side's point of view: `ours` first).
    fn encode(&self) -> Vec<u8> {
        let text = |code: u8, t: &str| {
            let mut end = t.len().min(MAX_REASON);
            while !t.is_char_boundary(end) {
                end -= 1;
            }
            let mut b = vec![code];
            b.extend_from_slice(&t.as_bytes()[..end]);
            b
        };
        match self {
            RejectReason::LinkMismatch { theirs, ours } => {
                vec![REJ_LINK, link_code(*ours), link_code(*theirs)]
            }
            RejectReason::QpTypeMismatch { theirs, ours } => {
                vec![REJ_QP_TYPE, qp_code(*ours), qp_code(*theirs)]
            }
            RejectReason::IcrcMismatch { theirs, ours } => {
                vec![REJ_ICRC, u8::from(*ours), u8::from(*theirs)]
            }
            RejectReason::AddressFamily { theirs, ours } => vec![REJ_FAMILY, *ours, *theirs],
            RejectReason::BadRequest(t) => text(REJ_BAD_REQUEST, t),
            RejectReason::Application(t) => text(REJ_APPLICATION, t),
            // Nothing to send: no one listened.
            RejectReason::NothingListens => text(REJ_APPLICATION, "nothing listens"),
        }
    }

    /// Read a reject body the peer sent, turned to this side's point of view. Every
    /// byte is hostile: a body that makes no sense is kept as the peer's text.
    fn decode(b: &[u8]) -> RejectReason {
        let pair = |b: &[u8]| match b {
            [_, peer, us] => Some((*peer, *us)),
            _ => None,
        };
        let text = || String::from_utf8_lossy(b.get(1..).unwrap_or_default()).into_owned();
        let parsed = match b.first().copied() {
            Some(REJ_LINK) => pair(b).and_then(|(p, u)| {
                Some(RejectReason::LinkMismatch {
                    theirs: link_of(p)?,
                    ours: link_of(u)?,
                })
            }),
            Some(REJ_QP_TYPE) => pair(b).and_then(|(p, u)| {
                Some(RejectReason::QpTypeMismatch {
                    theirs: qp_of(p)?,
                    ours: qp_of(u)?,
                })
            }),
            Some(REJ_ICRC) => pair(b).map(|(p, u)| RejectReason::IcrcMismatch {
                theirs: p != 0,
                ours: u != 0,
            }),
            Some(REJ_FAMILY) => {
                pair(b).map(|(p, u)| RejectReason::AddressFamily { theirs: p, ours: u })
            }
            Some(REJ_BAD_REQUEST) => Some(RejectReason::BadRequest(text())),
            Some(REJ_APPLICATION) => Some(RejectReason::Application(text())),
            _ => None,
        };
        parsed.unwrap_or_else(|| RejectReason::Application(String::from_utf8_lossy(b).into_owned()))
    }
}

/// One side's half of the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Message kind (request or accept).
    kind: u8,
    /// Link kind of the sender's device.
    pub link: LinkKind,
    /// QP type.
    pub qp_type: QpType,
    /// Whether the sender's link computes ICRCs.
    pub icrc: bool,
    /// The sender's QP number.
    pub qpn: u32,
    /// The first PSN the sender will send.
    pub psn: u32,
    /// The sender's largest path MTU.
    pub path_mtu: Mtu,
    /// READ/atomics the sender will have outstanding.
    pub initiator_depth: u8,
    /// READ/atomics the sender accepts outstanding.
    pub responder_resources: u8,
    /// The sender asks for selective recovery.
    pub selective: bool,
    /// The sender asks for the shm ring mode on this QP (docs/verbs.md, "The ring
    /// mode as built"): its QP is RC, its link shm, and its device has the mode on
    /// ([`crate::DeviceConfig::ring_mode`], the default; see [`RemoteInfo::ring`]).
    /// Bit 2 of the flags byte; a peer that predates it leaves it clear and never
    /// gets the mode. The mode is used only when both hellos set it.
    pub ring: bool,
    /// The sender's Q_Key (UD).
    pub qkey: u32,
    /// How long the sender's responder holds the ACK of a packet that does not ask for
    /// one, in microseconds ([`Context::ack_delay_us`]); the peer's requester leaves
    /// AckReq clear on unsignaled messages only against such a bound
    /// ([`weft_transport::QpAttrs::peer_ack_delay_us`]).
    pub ack_delay_us: u32,
    /// The sender's link address.
    pub addr: SocketAddr,
    /// Application bytes.
    pub private_data: Vec<u8>,
}

fn link_code(l: LinkKind) -> u8 {
    match l {
        LinkKind::Udp => 1,
        LinkKind::Shm => 2,
    }
}

fn qp_code(t: QpType) -> u8 {
    match t {
        QpType::Rc => 1,
        QpType::Uc => 2,
        QpType::Ud => 3,
    }
}

impl Hello {
    /// Encode (magic, version, kind, then fixed fields, then private data).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64 + self.private_data.len());
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_be_bytes());
        b.push(self.kind);
        b.push(link_code(self.link));
        b.push(qp_code(self.qp_type));
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        b.push(
            flag(self.icrc, FLAG_ICRC)
                | flag(self.selective, FLAG_SELECTIVE)
                | flag(self.ring, FLAG_RING),
        );
        b.extend_from_slice(&self.qpn.to_be_bytes());
        b.extend_from_slice(&self.psn.to_be_bytes());
        b.extend_from_slice(&(self.path_mtu.bytes() as u16).to_be_bytes());
        b.push(self.initiator_depth);
        b.push(self.responder_resources);
        b.extend_from_slice(&self.qkey.to_be_bytes());
        b.extend_from_slice(&self.ack_delay_us.to_be_bytes());
        match self.addr.ip() {
            IpAddr::V4(a) => {
                b.push(4);
                b.extend_from_slice(&a.to_ipv6_mapped().octets());
            }
            IpAddr::V6(a) => {
                b.push(6);
                b.extend_from_slice(&a.octets());
            }
        }
        b.extend_from_slice(&self.addr.port().to_be_bytes());
        b.push(self.private_data.len().min(MAX_PRIVATE_DATA) as u8);
        b.extend_from_slice(&self.private_data[..self.private_data.len().min(MAX_PRIVATE_DATA)]);
        b
    }

    /// Decode a message body; every field is checked.
    pub fn decode(b: &[u8]) -> Result<Hello, HandshakeError> {
        let mut r = Reader(b);
        if r.take(4)? != MAGIC {
            return Err(HandshakeError::BadMagic);
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(HandshakeError::Version {
                peer: version,
                ours: VERSION,
            });
        }
        let kind = r.u8()?;
        let l = r.u8()?;
        let link = link_of(l).ok_or(HandshakeError::LinkKind(l))?;
        let t = r.u8()?;
        let qp_type = qp_of(t).ok_or(HandshakeError::QpType(t))?;
        let flags = r.u8()?;
        let qpn = r.u32()?;
        let psn = r.u32()? & 0x00ff_ffff;
        let mtu = r.u16()?;
        let path_mtu = Mtu::from_bytes(usize::from(mtu)).ok_or(HandshakeError::PathMtu(mtu))?;
        let initiator_depth = r.u8()?;
        let responder_resources = r.u8()?;
        let qkey = r.u32()?;
        let ack_delay_us = r.u32()?;
        let fam = r.u8()?;
        let mut raw = [0u8; 16];
        raw.copy_from_slice(r.take(16)?);
        let raw = Ipv6Addr::from(raw);
        let ip = match fam {
            4 => IpAddr::V4(
                raw.to_ipv4_mapped()
                    .ok_or(HandshakeError::NotIpv4Mapped(raw))?,
            ),
            6 => IpAddr::V6(raw),
            _ => return Err(HandshakeError::AddressFamily(fam)),
        };
        let port = r.u16()?;
        let n = usize::from(r.u8()?);
        if n > MAX_PRIVATE_DATA {
            return Err(HandshakeError::PrivateDataTooLong(n));
        }
        let private_data = r.take(n)?.to_vec();
        if !r.0.is_empty() {
            return Err(HandshakeError::TrailingBytes(r.0.len()));
        }
        Ok(Hello {
            kind,
            link,
            qp_type,
            icrc: flags & FLAG_ICRC != 0,
            qpn,
            psn,
            path_mtu,
            initiator_depth,
            responder_resources,
            selective: flags & FLAG_SELECTIVE != 0,
            ring: flags & FLAG_RING != 0,
            qkey,
            ack_delay_us,
            addr: SocketAddr::new(ip, port),
            private_data,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HandshakeError> {
        if self.0.len() < n {
            return Err(HandshakeError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, HandshakeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, HandshakeError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, HandshakeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Largest framed message.
const MAX_MSG: usize = 512;

fn send_msg(s: &mut TcpStream, kind: u8, body: &[u8]) -> Result<(), Error> {
    let len = (body.len() + 1) as u16;
    let mut m = Vec::with_capacity(body.len() + 3);
    m.extend_from_slice(&len.to_be_bytes());
    m.push(kind);
    m.extend_from_slice(body);
    s.write_all(&m).map_err(Error::Io)
}

fn recv_msg(
    s: &mut TcpStream,
    peer: SocketAddr,
    deadline: Instant,
) -> Result<(u8, Vec<u8>), Error> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Error::Timeout);
    }
    s.set_read_timeout(Some(left)).map_err(Error::Io)?;
    let mut hdr = [0u8; 2];
    read_exact(s, peer, &mut hdr)?;
    let len = usize::from(u16::from_be_bytes(hdr));
    if len == 0 || len > MAX_MSG {
        return Err(Error::Handshake {
            peer,
            error: HandshakeError::MessageLength(len),
        });
    }
    let mut m = vec![0u8; len];
    read_exact(s, peer, &mut m)?;
    let kind = m[0];
    m.remove(0);
    Ok((kind, m))
}

fn read_exact(s: &mut TcpStream, peer: SocketAddr, buf: &mut [u8]) -> Result<(), Error> {
    s.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Error::Timeout,
        std::io::ErrorKind::UnexpectedEof => Error::Handshake {
            peer,
            error: HandshakeError::PeerClosed,
        },
        _ => Error::Io(e),
    })
}

fn family(a: SocketAddr) -> u8 {
    if a.is_ipv4() {
        4
    } else {
        6
    }
}

fn hello(ctx: &Context, kind: u8, qp: &QueuePair, psn: u32, p: &ConnParam) -> Hello {
    Hello {
        kind,
        link: ctx.link_kind(),
        qp_type: qp.qp_type(),
        icrc: ctx.icrc(),
        qpn: qp.qp_num(),
        psn,
        path_mtu: p.path_mtu.min(ctx.max_mtu()),
        initiator_depth: p.initiator_depth,
        responder_resources: p.responder_resources,
        selective: p.recovery == Recovery::Selective,
        ring: qp.qp_type() == QpType::Rc && ctx.link_kind() == LinkKind::Shm && ctx.ring_capable(),
        qkey: p.qkey,
        ack_delay_us: ctx.ack_delay_us(),
        addr: ctx.local_addr(),
        private_data: p.private_data.clone(),
    }
}

/// Whether a QP goes into the shm ring mode: both hellos ask for it, and both name an
/// shm link and an RC QP. The peer's bit alone never decides it (its hello is hostile),
/// nor this side's: a peer that predates the bit leaves it clear.
fn ring_mode(mine: &Hello, peer: &Hello) -> bool {
    [mine, peer]
        .iter()
        .all(|h| h.ring && h.link == LinkKind::Shm && h.qp_type == QpType::Rc)
}

/// Why this side refuses a peer's hello, if it does.
fn mismatch(ctx: &Context, qp: &QueuePair, peer: &Hello) -> Option<RejectReason> {
    if peer.link != ctx.link_kind() {
        return Some(RejectReason::LinkMismatch {
            theirs: peer.link,
            ours: ctx.link_kind(),
        });
    }
    if peer.qp_type != qp.qp_type() {
        return Some(RejectReason::QpTypeMismatch {
            theirs: peer.qp_type,
            ours: qp.qp_type(),
        });
    }
    if peer.icrc != ctx.icrc() {
        return Some(RejectReason::IcrcMismatch {
            theirs: peer.icrc,
            ours: ctx.icrc(),
        });
    }
    if family(peer.addr) != family(ctx.local_addr()) {
        return Some(RejectReason::AddressFamily {
            theirs: family(peer.addr),
            ours: family(ctx.local_addr()),
        });
    }
    None
}

/// Move a fresh QP from RESET to INIT with `param`'s access rights (RC/UC) or Q_Key
/// (UD), as `rdma_create_qp` leaves it, so receives can be posted before the
/// connection exists; [`connect`] and [`ConnectRequest::accept`] continue from INIT.
pub fn init_qp(qp: &mut QueuePair, param: &ConnParam) -> Result<(), Error> {
    let [init, _, _] = init_bringup(param).steps(qp.qp_type());
    qp.modify(&init)
}

/// The bring-up [`init_qp`] takes its INIT step from: `param`'s rights, Q_Key, MTU,
/// timers and window; no path, no peer, PSNs 0.
pub(crate) fn init_bringup(param: &ConnParam) -> Bringup {
    Bringup {
        access: param.access,
        qkey: param.qkey,
        path_mtu: param.path_mtu,
        path: None,
        dest_qpn: 0,
        rq_psn: 0,
        sq_psn: 0,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        min_rnr_timer: param.min_rnr_timer,
        timeout: param.timeout,
        retry_cnt: param.retry_cnt,
        rnr_retry: param.rnr_retry,
        recovery: param.recovery,
        max_inflight: param.max_inflight,
        peer_ack_delay_us: 0,
    }
}

/// Bring `qp` from wherever it is to RTS against the peer, in the shm ring mode when
/// `ring` ([`ring_mode`]). The transport is told the mode (`Endpoint::set_ring_mode`)
/// while the QP is in INIT, just before RTR: no message has been sent or received on
/// it then, so it never mixes modes, and none can be posted before the mode is set.
/// A QP reused through RESET is set again, either way.
fn bring_up(
    qp: &mut QueuePair,
    me: &ConnParam,
    my_psn: u32,
    peer: &Hello,
    ring: bool,
) -> Result<(), Error> {
    let ctx = qp.context().clone();
    let selective = me.recovery == Recovery::Selective && peer.selective;
    let b = Bringup {
        access: me.access,
        qkey: me.qkey,
        path_mtu: me.path_mtu.min(peer.path_mtu).min(ctx.max_mtu()),
        path: Some(ctx.path_to(peer.addr)?),
        dest_qpn: peer.qpn,
        rq_psn: peer.psn,
        sq_psn: my_psn,
        max_rd_atomic: me.initiator_depth.min(peer.responder_resources).max(1),
        max_dest_rd_atomic: me.responder_resources.max(1),
        min_rnr_timer: me.min_rnr_timer,
        timeout: me.timeout,
        retry_cnt: me.retry_cnt,
        rnr_retry: me.rnr_retry,
        recovery: if selective {
            Recovery::Selective
        } else {
            Recovery::GoBackN
        },
        max_inflight: me.max_inflight,
        peer_ack_delay_us: peer.ack_delay_us,
    };
    let steps = b.steps(qp.qp_type());
    let from = qp.query().map(|(s, _)| s).unwrap_or(QpState::Reset);
    for s in &steps {
        // A QP the application already moved to INIT skips that step.
        if from == QpState::Init && s.state == Some(QpState::Init) {
            continue;
        }
        if s.state == Some(QpState::Rtr) {
            qp.set_ring_mode(ring);
        }
        qp.modify(s)?;
    }
    Ok(())
}

/// What the peer told us, and what the two sides agreed, for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteInfo {
    /// The peer's QP number (the destination of UD sends).
    pub qpn: u32,
    /// The peer's Q_Key (UD).
    pub qkey: u32,
    /// The peer's link address.
    pub addr: SocketAddr,
    /// The peer's private data.
    pub private_data: Vec<u8>,
    /// The path MTU both use.
    pub path_mtu: Mtu,
    /// Whether the QP was put in the shm ring mode: both hellos asked for it
    /// ([`Hello::ring`]), both links are shm and the QP is RC. Its transport then
    /// takes the peer's ring-mode descriptors (`Endpoint::set_ring_mode`, set before
    /// the QP left INIT): its SENDs and WRITEs of up to one MTU travel as descriptors
    /// (docs/verbs.md, the ring mode). A device asks when its
    /// [`crate::DeviceConfig::ring_mode`] says so (the default), overridden by the
    /// environment variable `WEFT_RING` (`0` or `1`) when it opens.
    pub ring: bool,
}

/// An established connection: keeps the side channel open as the liveness signal.
/// Dropping it (or [`Connection::disconnect`]) closes the channel; both QPs then move
/// to ERR.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    remote: RemoteInfo,
    watcher: Option<JoinHandle<()>>,
}

impl Connection {
    fn start(
        stream: TcpStream,
        remote: RemoteInfo,
        shared: Arc<Shared>,
        qpn: u32,
    ) -> Result<Connection, Error> {
        let mut watch = stream.try_clone().map_err(Error::Io)?;
        watch.set_read_timeout(None).map_err(Error::Io)?;
        let watcher = std::thread::Builder::new()
            .name("weft-cm-watch".into())
            .spawn(move || {
                // Nothing more is sent on the channel; any read result means it ended.
                let mut b = [0u8; 64];
                loop {
                    match watch.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => continue,
                    }
                }
                let err = QpAttr {
                    state: Some(QpState::Err),
                    ..QpAttr::default()
                };
                // The QP may be gone already; then there is nothing to flush.
                let _ = shared.lock().ep.modify_qp(qpn, &err);
                shared.kick_now();
            })
            .map_err(Error::Io)?;
        Ok(Connection {
            stream,
            remote,
            watcher: Some(watcher),
        })
    }

    /// What the peer said.
    pub fn remote(&self) -> &RemoteInfo {
        &self.remote
    }

    /// Close the side channel (`rdma_disconnect`): both QPs move to ERR.
    pub fn disconnect(mut self) {
        self.close();
    }

    fn close(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

fn remote_of(h: &Hello, me: &ConnParam, ring: bool) -> RemoteInfo {
    RemoteInfo {
        qpn: h.qpn,
        qkey: h.qkey,
        addr: h.addr,
        private_data: h.private_data.clone(),
        path_mtu: me.path_mtu.min(h.path_mtu),
        ring,
    }
}

/// Connect `qp` to the QP a [`Listener`] at `server` accepts us with
/// (`rdma_connect`). On return both QPs are in RTS.
pub fn connect(
    qp: &mut QueuePair,
    server: SocketAddr,
    param: &ConnParam,
) -> Result<Connection, Error> {
    let ctx = qp.context().clone();
    let deadline = Instant::now() + param.handshake_timeout;
    let mut s = TcpStream::connect_timeout(&server, param.handshake_timeout).map_err(|e| {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            Error::Rejected {
                peer: server,
                reason: RejectReason::NothingListens,
            }
        } else {
            Error::Io(e)
        }
    })?;
    s.set_nodelay(true).map_err(Error::Io)?;
    let psn = random_u64() as u32 & 0x00ff_ffff;
    let mine = hello(&ctx, KIND_REQUEST, qp, psn, param);
    send_msg(&mut s, KIND_REQUEST, &mine.encode())?;
    let (kind, body) = recv_msg(&mut s, server, deadline)?;
    let handshake = |error| Error::Handshake {
        peer: server,
        error,
    };
    match kind {
        KIND_ACCEPT => {}
        KIND_REJECT => {
            return Err(Error::Rejected {
                peer: server,
                reason: RejectReason::decode(&body),
            })
        }
        got => {
            return Err(handshake(HandshakeError::UnexpectedKind {
                expected: "an accept or a reject",
                got,
            }))
        }
    }
    let peer = Hello::decode(&body).map_err(handshake)?;
    if let Some(reason) = mismatch(&ctx, qp, &peer) {
        return Err(Error::Rejected {
            peer: server,
            reason,
        });
    }
    let ring = ring_mode(&mine, &peer);
    bring_up(qp, param, psn, &peer, ring)?;
    send_msg(&mut s, KIND_READY, &[])?;
    Connection::start(
        s,
        remote_of(&peer, param, ring),
        Arc::clone(ctx.shared()),
        qp.qp_num(),
    )
}

/// A TCP listener for connection requests (`rdma_listen`).
#[derive(Debug)]
pub struct Listener {
    tcp: TcpListener,
    ctx: Context,
}

impl Listener {
    /// Listen on `addr` (port 0 picks one; see [`Listener::local_addr`]).
    pub fn bind(ctx: &Context, addr: SocketAddr) -> Result<Listener, Error> {
        Ok(Listener {
            tcp: TcpListener::bind(addr).map_err(|source| Error::Listen { addr, source })?,
            ctx: ctx.clone(),
        })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.tcp.local_addr().map_err(Error::Io)
    }

    /// Wait for the next well-formed connection request (`rdma_get_request`). A
    /// malformed request is answered with a rejection and skipped.
    pub fn get_request(&self, timeout: Duration) -> Result<ConnectRequest, Error> {
        let deadline = crate::deadline_after(timeout);
        self.tcp.set_nonblocking(true).map_err(Error::Io)?;
        loop {
            match self.tcp.accept() {
                Ok((mut s, from)) => {
                    s.set_nonblocking(false).map_err(Error::Io)?;
                    s.set_nodelay(true).map_err(Error::Io)?;
                    // The caller's timeout bounds the wait for a connection, not the
                    // reading of one that arrived: a request accepted just before the
                    // deadline still gets its full handshake step (a short polling
                    // timeout would otherwise reject clients at random).
                    let step = Instant::now() + Duration::from_secs(5);
                    let request = recv_msg(&mut s, from, step).and_then(|(k, b)| {
                        let hello = if k == KIND_REQUEST {
                            Hello::decode(&b)
                        } else {
                            Err(HandshakeError::UnexpectedKind {
                                expected: "a request",
                                got: k,
                            })
                        };
                        hello.map_err(|error| Error::Handshake { peer: from, error })
                    });
                    match request {
                        Ok(peer) => {
                            return Ok(ConnectRequest {
                                stream: s,
                                from,
                                peer,
                                ctx: self.ctx.clone(),
                            })
                        }
                        Err(e) => {
                            let why = match e {
                                Error::Handshake { error, .. } => error.to_string(),
                                other => other.to_string(),
                            };
                            let _ = send_msg(
                                &mut s,
                                KIND_REJECT,
                                &RejectReason::BadRequest(why).encode(),
                            );
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(Error::Io(e)),
            }
        }
    }
}

/// A client's request, to accept with a QP or reject.
#[derive(Debug)]
pub struct ConnectRequest {
    stream: TcpStream,
    /// The client's side-channel address.
    from: SocketAddr,
    peer: Hello,
    ctx: Context,
}

impl ConnectRequest {
    /// What the client asked for.
    pub fn peer(&self) -> &Hello {
        &self.peer
    }

    /// The device whose listener took the request.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Accept with `qp` (`rdma_accept`): refuses a peer whose link, QP type, ICRC use
    /// or address family differ from ours, brings `qp` to RTS, answers, and waits for
    /// the client's ready message.
    ///
    /// `qp` may belong to another device than the listener's (a server that runs one
    /// device per core behind one listener): the answer names `qp`'s device, so the
    /// client's QP talks to it directly.
    pub fn accept(mut self, qp: &mut QueuePair, param: &ConnParam) -> Result<Connection, Error> {
        let ctx = qp.context().clone();
        if let Some(reason) = mismatch(&ctx, qp, &self.peer) {
            let _ = send_msg(&mut self.stream, KIND_REJECT, &reason.encode());
            return Err(Error::Rejected {
                peer: self.from,
                reason,
            });
        }
        let deadline = Instant::now() + param.handshake_timeout;
        let psn = random_u64() as u32 & 0x00ff_ffff;
        let mine = hello(&ctx, KIND_ACCEPT, qp, psn, param);
        let ring = ring_mode(&mine, &self.peer);
        bring_up(qp, param, psn, &self.peer, ring)?;
        send_msg(&mut self.stream, KIND_ACCEPT, &mine.encode())?;
        match recv_msg(&mut self.stream, self.from, deadline)? {
            (KIND_READY, _) => {}
            (got, _) => {
                return Err(Error::Handshake {
                    peer: self.from,
                    error: HandshakeError::UnexpectedKind {
                        expected: "ready",
                        got,
                    },
                })
            }
        }
        let remote = remote_of(&self.peer, param, ring);
        Connection::start(self.stream, remote, Arc::clone(ctx.shared()), qp.qp_num())
    }

    /// The client's side-channel address.
    pub fn from(&self) -> SocketAddr {
        self.from
    }

    /// Refuse the request with a reason the client sees (`rdma_reject`): it gets
    /// [`RejectReason::Application`] with this text (cut to 500 bytes).
    pub fn reject(mut self, reason: &str) {
        let _ = send_msg(
            &mut self.stream,
            KIND_REJECT,
            &RejectReason::Application(reason.to_string()).encode(),
        );
    }
}

/// The check shared by the fuzz target (`fuzz/fuzz_targets/cm_hello.rs`) and the
/// stable test (`tests/hostile_handshake.rs`): arbitrary bytes through
/// [`Hello::decode`]; what decodes must encode and decode again to the same
/// [`Hello`], and that encoding is a fixed point. (Not byte-for-byte the input:
/// flag bits beyond ICRC, selective and ring (3..7) are ignored, and a PSN keeps 24
/// bits.) Only with the `fuzzing` feature; not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use super::{Hello, FLAG_ICRC, FLAG_RING, FLAG_SELECTIVE, MAX_PRIVATE_DATA};

    /// Returns whether `data` decoded (and round-tripped); panics on a broken
    /// invariant, never on malformed input.
    pub fn hello(data: &[u8]) -> bool {
        let Ok(h) = Hello::decode(data) else {
            return false;
        };
        assert!(h.psn <= 0x00ff_ffff, "a PSN has 24 bits");
        assert!(h.private_data.len() <= MAX_PRIVATE_DATA);
        let b = h.encode();
        assert_eq!(b.len(), data.len(), "the encoding keeps the length");
        // Byte 9, the flags: ICRC, selective and ring are kept, bits 3..7 ignored.
        assert_eq!(b[9], data[9] & (FLAG_ICRC | FLAG_SELECTIVE | FLAG_RING));
        let again = Hello::decode(&b).expect("an encoded hello decodes");
        assert_eq!(again, h);
        assert_eq!(again.encode(), b);
        true
    }

    /// A valid request (the fuzz target's seeds and the stable test's start).
    pub fn sample(v6: bool, private_data: &[u8]) -> Vec<u8> {
        sample_hello(v6, private_data).encode()
    }

    /// A valid shm request that asks for the ring mode (flags bit 2).
    pub fn sample_ring() -> Vec<u8> {
        Hello {
            ring: true,
            ..sample_hello(true, b"")
        }
        .encode()
    }

    fn sample_hello(v6: bool, private_data: &[u8]) -> Hello {
        Hello {
            kind: super::KIND_REQUEST,
            link: if v6 {
                crate::LinkKind::Shm
            } else {
                crate::LinkKind::Udp
            },
            qp_type: weft_transport::QpType::Rc,
            icrc: true,
            qpn: 0x12_3456,
            psn: 0xab_cdef,
            path_mtu: weft_transport::Mtu::M1024,
            initiator_depth: 16,
            responder_resources: 16,
            selective: false,
            ring: false,
            qkey: 0x1111_1111,
            ack_delay_us: 64,
            addr: if v6 {
                "[2001:db8::1]:4791".parse().expect("an address")
            } else {
                "127.0.0.1:4791".parse().expect("an address")
            },
            private_data: private_data.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Hello {
        Hello {
            kind: KIND_REQUEST,
            link: LinkKind::Udp,
            qp_type: QpType::Rc,
            icrc: true,
            qpn: 0x12_3456,
            psn: 0xab_cdef,
            path_mtu: Mtu::M1024,
            initiator_depth: 8,
            responder_resources: 4,
            selective: true,
            ring: false,
            qkey: 7,
            ack_delay_us: 64,
            addr: "198.18.0.1:4791".parse().unwrap(),
            private_data: b"hello".to_vec(),
        }
    }

    #[test]
    fn hello_round_trips_v4_and_v6() {
        let h = sample();
        assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
        let mut h6 = sample();
        h6.addr = "[2001:2::1]:4791".parse().unwrap();
        h6.link = LinkKind::Shm;
        h6.qp_type = QpType::Ud;
        assert_eq!(Hello::decode(&h6.encode()).unwrap(), h6);
    }

    #[test]
    fn the_ring_bit_round_trips_as_bit_2_of_the_flags() {
        for (icrc, selective, ring) in [
            (false, false, true),
            (true, true, true),
            (true, false, false),
            (false, true, true),
        ] {
            let h = Hello {
                icrc,
                selective,
                ring,
                link: LinkKind::Shm,
                ..sample()
            };
            let b = h.encode();
            assert_eq!(
                b[9],
                u8::from(icrc) | u8::from(selective) << 1 | u8::from(ring) << 2
            );
            assert_eq!(Hello::decode(&b).unwrap(), h);
        }
    }

    /// A request from the encoder before the ring bit (`fuzz/corpus/cm_hello/
    /// request_v4`, written by it): flags 0x01, ICRC only.
    const OLD_REQUEST_V4: [u8; 50] = [
        0x57, 0x46, 0x43, 0x4d, 0x00, 0x02, 0x01, 0x01, 0x01, 0x01, 0x00, 0x12, 0x34, 0x56, 0x00,
        0xab, 0xcd, 0xef, 0x04, 0x00, 0x10, 0x10, 0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x40,
        0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x7f, 0x00,
        0x00, 0x01, 0x12, 0xb7, 0x00,
    ];

    #[test]
    fn an_older_peers_hello_asks_for_no_ring_and_unknown_flag_bits_are_ignored() {
        let old = Hello::decode(&OLD_REQUEST_V4).unwrap();
        assert!(old.icrc && !old.selective && !old.ring, "{old:?}");
        assert_eq!(old.encode(), OLD_REQUEST_V4, "ring off encodes as before");
        // Bits 3..7 are for later flags: a version-2 decoder ignores them.
        for bit in 3..8 {
            let mut b = OLD_REQUEST_V4;
            b[9] |= 1 << bit;
            assert_eq!(Hello::decode(&b).unwrap(), old, "bit {bit}");
        }
        let mut b = OLD_REQUEST_V4;
        b[9] = 0xff;
        let all = Hello::decode(&b).unwrap();
        assert!(all.icrc && all.selective && all.ring);
    }

    #[test]
    fn ring_mode_needs_both_hellos_to_ask_with_shm_links_and_rc_qps() {
        let links = [LinkKind::Udp, LinkKind::Shm];
        let types = [QpType::Rc, QpType::Uc, QpType::Ud];
        let mut on = 0;
        for ask in [[false, false], [false, true], [true, false], [true, true]] {
            for link in links.iter().flat_map(|a| links.map(|b| [*a, b])) {
                for qp in types.iter().flat_map(|a| types.map(|b| [*a, b])) {
                    let h = |i: usize| Hello {
                        ring: ask[i],
                        link: link[i],
                        qp_type: qp[i],
                        ..sample()
                    };
                    let want =
                        ask == [true, true] && link == [LinkKind::Shm; 2] && qp == [QpType::Rc; 2];
                    assert_eq!(ring_mode(&h(0), &h(1)), want, "{ask:?} {link:?} {qp:?}");
                    assert_eq!(ring_mode(&h(1), &h(0)), want, "the decision is symmetric");
                    on += usize::from(want);
                }
            }
        }
        assert_eq!(on, 1);
    }

    /// Whether the transport has `qp` in ring mode (`Endpoint::set_ring_mode`).
    fn transport_takes_descriptors(qp: &QueuePair) -> bool {
        qp.context().shared().lock().ep.ring_mode(qp.qp_num())
    }

    /// What one side of an in-process connection ended with.
    #[derive(Debug, PartialEq, Eq)]
    struct Outcome {
        /// [`RemoteInfo::ring`].
        agreed: bool,
        /// The transport takes descriptors for the QP.
        transport: bool,
    }

    const RING: Outcome = Outcome {
        agreed: true,
        transport: true,
    };
    const PACKETS: Outcome = Outcome {
        agreed: false,
        transport: false,
    };

    /// Connect a client QP on one new device to a server QP on another over `link`,
    /// with [`Context::ring_capable`] set as `capable` says (client, server), and
    /// return what each side ended with (client, server) and whether the client's
    /// hello, as the server read it, asked for the ring mode. Bounded by the
    /// handshake's timeout and the listener's.
    fn connect_pair(link: LinkKind, qp_type: QpType, capable: [bool; 2]) -> ([Outcome; 2], bool) {
        use crate::{CompletionQueue, DeviceConfig, QpInitAttr};
        let t = Duration::from_secs(10);
        let open = |ring: bool| {
            let ctx = Context::open_with(DeviceConfig::local(link)).expect("open a device");
            ctx.set_ring_capable(ring);
            let cq = CompletionQueue::new(&ctx, 16, None);
            let qp = ctx
                .alloc_pd()
                .create_qp(&cq, &cq, None, QpInitAttr::new(qp_type))
                .expect("create a QP");
            (ctx, cq, qp)
        };
        let (_ca, _cqa, mut qa) = open(capable[0]);
        let (cb, _cqb, mut qb) = open(capable[1]);
        let listener = Listener::bind(&cb, "127.0.0.1:0".parse().unwrap()).unwrap();
        let at = listener.local_addr().unwrap();
        let param = ConnParam {
            handshake_timeout: t,
            ..ConnParam::default()
        };
        let (conn_a, (conn_b, client_asked)) = std::thread::scope(|s| {
            let server = s.spawn(|| {
                let req = listener.get_request(t).expect("a request");
                let asked = req.peer().ring;
                (req.accept(&mut qb, &param).expect("accept"), asked)
            });
            let a = connect(&mut qa, at, &param).expect("connect");
            (a, server.join().expect("the server side"))
        });
        let outcome = |conn: &Connection, qp: &QueuePair| Outcome {
            agreed: conn.remote().ring,
            transport: transport_takes_descriptors(qp),
        };
        ([outcome(&conn_a, &qa), outcome(&conn_b, &qb)], client_asked)
    }

    #[test]
    fn cm_over_shm_puts_both_rc_qps_in_ring_mode_when_both_ask() {
        let (sides, client_asked) = connect_pair(LinkKind::Shm, QpType::Rc, [true, true]);
        assert!(client_asked);
        assert_eq!(sides, [RING, RING]);
    }

    #[test]
    fn cm_over_shm_puts_neither_qp_in_ring_mode_when_one_side_does_not_ask() {
        for capable in [[true, false], [false, true], [false, false]] {
            let (sides, client_asked) = connect_pair(LinkKind::Shm, QpType::Rc, capable);
            assert_eq!(client_asked, capable[0], "{capable:?}");
            assert_eq!(sides, [PACKETS, PACKETS], "{capable:?}");
        }
    }

    #[test]
    fn cm_never_asks_for_ring_mode_over_udp_or_for_a_ud_qp() {
        for (link, qp_type) in [(LinkKind::Udp, QpType::Rc), (LinkKind::Shm, QpType::Ud)] {
            let (sides, client_asked) = connect_pair(link, qp_type, [true, true]);
            assert!(!client_asked, "{link} {qp_type:?}");
            assert_eq!(sides, [PACKETS, PACKETS], "{link} {qp_type:?}");
        }
    }

    #[test]
    fn every_truncation_and_a_wrong_version_are_refused() {
        let b = sample().encode();
        for n in 0..b.len() {
            assert!(
                Hello::decode(&b[..n]).is_err(),
                "prefix of {n} bytes accepted"
            );
        }
        let mut v = b.clone();
        v[5] = 9;
        match Hello::decode(&v) {
            Err(HandshakeError::Version { peer, ours }) => {
                assert_eq!((peer, ours), (9, VERSION))
            }
            other => panic!("{other:?}"),
        }
        let mut t = b;
        t.push(0);
        assert!(Hello::decode(&t).is_err());
    }

    #[test]
    fn each_bad_field_is_named_with_its_value() {
        let b = sample().encode();
        let with = |i: usize, v: u8| {
            let mut m = b.clone();
            m[i] = v;
            Hello::decode(&m)
        };
        // Offsets: magic 0..4, version 4..6, kind 6, link 7, QP type 8, flags 9,
        // QPN 10..14, PSN 14..18, MTU 18..20, depths 20, 21, Q_Key 22..26, ACK delay
        // 26..30, family 30, address 31..47, port 47..49, private data length 49.
        assert_eq!(with(0, b'X'), Err(HandshakeError::BadMagic));
        assert_eq!(with(7, 9), Err(HandshakeError::LinkKind(9)));
        assert_eq!(with(8, 0), Err(HandshakeError::QpType(0)));
        assert_eq!(with(19, 1), Err(HandshakeError::PathMtu(0x0401)));
        assert_eq!(with(30, 5), Err(HandshakeError::AddressFamily(5)));
        assert!(matches!(with(31, 1), Err(HandshakeError::NotIpv4Mapped(_))));
        assert_eq!(with(49, 200), Err(HandshakeError::PrivateDataTooLong(200)));
        assert_eq!(with(49, 0), Err(HandshakeError::TrailingBytes(5)));
        assert_eq!(
            with(26, 1).unwrap().ack_delay_us,
            0x0100_0040,
            "the ACK delay is a big-endian u32 at 26..30 (the sample's is 64)"
        );
        assert_eq!(Hello::decode(&b[..10]), Err(HandshakeError::Truncated));
    }

    #[test]
    fn a_rejection_crosses_the_wire_turned_to_the_receivers_point_of_view() {
        let sent = [
            RejectReason::LinkMismatch {
                theirs: LinkKind::Udp,
                ours: LinkKind::Shm,
            },
            RejectReason::QpTypeMismatch {
                theirs: QpType::Uc,
                ours: QpType::Rc,
            },
            RejectReason::IcrcMismatch {
                theirs: false,
                ours: true,
            },
            RejectReason::AddressFamily { theirs: 6, ours: 4 },
        ];
        let received = [
            RejectReason::LinkMismatch {
                theirs: LinkKind::Shm,
                ours: LinkKind::Udp,
            },
            RejectReason::QpTypeMismatch {
                theirs: QpType::Rc,
                ours: QpType::Uc,
            },
            RejectReason::IcrcMismatch {
                theirs: true,
                ours: false,
            },
            RejectReason::AddressFamily { theirs: 4, ours: 6 },
        ];
        for (s, r) in sent.iter().zip(&received) {
            assert_eq!(RejectReason::decode(&s.encode()), *r);
        }
        for text in [
            RejectReason::Application("server full".into()),
            RejectReason::BadRequest("bad magic".into()),
        ] {
            assert_eq!(RejectReason::decode(&text.encode()), text);
        }
        // An older peer's plain-text reason, and nonsense, read as the peer's words.
        assert_eq!(
            RejectReason::decode(b"server full"),
            RejectReason::Application("server full".into())
        );
        assert_eq!(
            RejectReason::decode(&[REJ_LINK, 9, 1]),
            RejectReason::Application("\u{1}\t\u{1}".into())
        );
        assert_eq!(
            RejectReason::decode(&[]),
            RejectReason::Application(String::new())
        );
        // A long reason is cut on a character boundary to fit one message.
        let long = RejectReason::Application("é".repeat(400)).encode();
        assert!(long.len() < MAX_MSG, "{}", long.len());
        assert!(std::str::from_utf8(&long[1..]).is_ok());
    }

    #[test]
    fn random_bytes_never_panic_the_decoder() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let base = sample().encode();
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut m = base.clone();
            let pos = (x as usize) % m.len();
            m[pos] = (x >> 32) as u8;
            if i % 3 == 0 {
                m.truncate((x >> 40) as usize % (m.len() + 1));
            }
            let _ = Hello::decode(&m);
        }
    }
}
