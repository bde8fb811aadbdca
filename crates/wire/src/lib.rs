//! weft-wire: the packet formats weft speaks, as checked zero-copy views and plain
//! `Repr` structs (the smoltcp `wire` pattern).
//!
//! It owns: Ethernet II (+802.1Q), ARP, IPv4, IPv6, ICMPv4, ICMPv6, UDP, the RoCEv2
//! (InfiniBand transport) headers with the one opcode table of the project, the 24-bit
//! [`Psn`], and the invariant CRC (ICRC).
//!
//! It must not touch: I/O, clocks, allocation on a parse path, `unsafe`.
//!
//! Every byte handed to a parser is hostile. Untrusted bytes enter through a
//! `new_checked` constructor; once it has returned `Ok`, no accessor can panic.
//! Anything wrong with the input comes back as an [`Error`] value.
#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod frame;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod roce;
pub mod udp;

pub use roce::{Opcode, Psn};

use core::fmt;

/// Why a buffer could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field inside it) requires.
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A length field disagrees with the buffer or with another field.
    BadLength,
    /// A field holds a value the format does not allow; the string names the field.
    Malformed(&'static str),
    /// A checksum or CRC did not verify.
    BadChecksum,
    /// Valid on the wire but not something this crate handles; the string says what.
    Unsupported(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { need, have } => {
                write!(f, "truncated: need {need} bytes, have {have}")
            }
            Error::BadLength => f.write_str("inconsistent length field"),
            Error::Malformed(field) => write!(f, "malformed field: {field}"),
            Error::BadChecksum => f.write_str("bad checksum"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

impl std::error::Error for Error {}

/// Result of a parse or emit.
pub type Result<T> = core::result::Result<T, Error>;

/// A range of bytes inside a header (`const DEST_QP: Field = 5..8`).
pub(crate) type Field = core::ops::Range<usize>;

/// Returns `Ok(())` when `have >= need`, else the `Truncated` error that says so.
#[inline]
pub(crate) fn check_len(have: usize, need: usize) -> Result<()> {
    if have < need {
        Err(Error::Truncated { need, have })
    } else {
        Ok(())
    }
}

pub use ethernet::{EtherType, EthernetAddress};
pub use ipv4::{IpProtocol, Ipv4Address};
