//! What can go wrong, as enums that say what (the `errno`s of ibverbs, named).

use crate::cm::{HandshakeError, RejectReason};
use crate::LinkKind;
use std::fmt;
use std::net::SocketAddr;
use weft_transport::{ModifyError, PostError, QpState};

/// An error from a verbs call.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The device name is not one weft knows (`udp`, `shm`, optionally `:ADDR`).
    UnknownDevice(String),
    /// The link could not be opened at this address.
    Bind {
        /// Which link.
        link: LinkKind,
        /// The address (udp: the socket's; shm: the name).
        addr: SocketAddr,
        /// Why (`AddrInUse`: another device has it).
        source: std::io::Error,
    },
    /// A device left to choose its own address found every one it tried taken (another
    /// program may hold UDP port 4791 on every address, as the kernel's rxe does).
    NoFreeAddress {
        /// Which link.
        link: LinkKind,
        /// How many addresses were tried.
        tried: u32,
        /// The last one tried.
        last: SocketAddr,
    },
    /// The link failed (or the engine's eventfd or thread could not be made).
    Link(std::io::Error),
    /// A post was refused before it reached the engine.
    Post(PostError),
    /// `post_send`/`post_recv` refused the work request at this index of the list;
    /// the ones before it were posted (ibverbs' `bad_wr`).
    PostList {
        /// Index of the first refused work request.
        index: usize,
        /// Why.
        error: PostError,
    },
    /// An inline send named memory it may not read.
    InlineAccess(weft_transport::AccessError),
    /// `modify_qp` refused the transition or an attribute.
    Modify(ModifyError),
    /// The QP is in a state that does not allow this.
    InvalidState(QpState),
    /// An offset and length outside a memory region.
    OutOfBounds {
        /// Offset asked for.
        offset: usize,
        /// Length asked for.
        len: usize,
        /// Region length.
        region: usize,
    },
    /// An atomic access at an offset that is not 8-byte aligned.
    Misaligned(usize),
    /// The object belongs to another context or protection domain.
    WrongContext,
    /// The local and remote addresses are of different IP families.
    AddressFamily,
    /// A wait ran out of time.
    Timeout,
    /// A blocking wait ([`crate::WaitMode::Block`], [`crate::WaitMode::Adaptive`]) on a
    /// completion queue that has no completion channel.
    NoChannel,
    /// Connection manager: the connection was refused, by the peer or by this side.
    Rejected {
        /// The other side (its connection-manager address).
        peer: SocketAddr,
        /// Why.
        reason: RejectReason,
    },
    /// Connection manager: the peer speaks another handshake version or sent bytes
    /// that are not a handshake.
    Handshake {
        /// The other side (its connection-manager address).
        peer: SocketAddr,
        /// What was wrong.
        error: HandshakeError,
    },
    /// Connection manager: a listener could not be bound at this address.
    Listen {
        /// The TCP address.
        addr: SocketAddr,
        /// Why (`AddrInUse`: another listener has it).
        source: std::io::Error,
    },
    /// Connection manager: the side channel failed.
    Io(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownDevice(n) => write!(
                f,
                "unknown device {n:?} (expected udp[:ADDR] or shm[:ADDR])"
            ),
            Error::Bind { link, addr, source } => {
                write!(f, "cannot open a {link} device at {addr}: {source}")?;
                if source.kind() == std::io::ErrorKind::AddrInUse {
                    f.write_str(" (another device or program has this address)")?;
                }
                Ok(())
            }
            Error::NoFreeAddress { link, tried, last } => write!(
                f,
                "no free loopback address for a {link} device: all {tried} tried were taken, \
                 the last {last} (does another program hold UDP port 4791 on every address?)"
            ),
            Error::Link(e) => write!(f, "link: {e}"),
            Error::Post(e) => write!(f, "post refused: {e}"),
            Error::PostList { index, error } => write!(f, "work request {index} refused: {error}"),
            Error::InlineAccess(e) => write!(f, "inline send cannot read its buffer: {e:?}"),
            Error::Modify(e) => write!(f, "modify_qp: {e}"),
            Error::InvalidState(s) => write!(f, "QP state {s:?} does not allow this"),
            Error::OutOfBounds {
                offset,
                len,
                region,
            } => {
                write!(
                    f,
                    "{len} bytes at offset {offset} leave a {region}-byte region"
                )
            }
            Error::Misaligned(o) => write!(f, "offset {o} is not 8-byte aligned"),
            Error::WrongContext => {
                f.write_str("object belongs to another context or protection domain")
            }
            Error::AddressFamily => {
                f.write_str("local and peer addresses are of different IP families")
            }
            Error::Timeout => f.write_str("timed out"),
            Error::NoChannel => f.write_str("a blocking wait needs the queue's completion channel"),
            Error::Rejected { peer, reason } => {
                write!(f, "connection with {peer} rejected: {reason}")
            }
            Error::Handshake { peer, error } => write!(f, "handshake with {peer}: {error}"),
            Error::Listen { addr, source } => {
                write!(f, "cannot listen for connections at {addr}: {source}")
            }
            Error::Io(e) => write!(f, "connection side channel: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Link(e)
            | Error::Io(e)
            | Error::Bind { source: e, .. }
            | Error::Listen { source: e, .. } => Some(e),
            Error::Handshake { error, .. } => Some(error),
            Error::Post(e) => Some(e),
            _ => None,
        }
    }
}

impl From<PostError> for Error {
    fn from(e: PostError) -> Error {
        Error::Post(e)
    }
}

impl From<ModifyError> for Error {
    fn from(e: ModifyError) -> Error {
        Error::Modify(e)
    }
}
