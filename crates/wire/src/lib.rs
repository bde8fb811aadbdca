//! weft-wire: the packet formats weft speaks, as checked zero-copy views and plain
//! `Repr` structs (the smoltcp `wire` pattern).
//!
//! It owns: Ethernet II (+802.1Q), ARP, IPv4, IPv6 (and [`IpRepr`] over both), ICMPv4, ICMPv6, UDP, the RoCEv2
//! (InfiniBand transport) headers with the one opcode table of the project, the 24-bit
//! [`Psn`], and the invariant CRC (ICRC); and weft's own descriptor for the shm ring
//! mode ([`ring`]), which never leaves the machine.
//!
//! It must not touch: I/O, clocks, allocation on a parse path, `unsafe`.
//!
//! Every byte handed to a parser is hostile. Untrusted bytes enter through a
//! `new_checked` constructor; once it has returned `Ok`, no accessor can panic.
//! Anything wrong with the input comes back as an [`Error`] value.
#![forbid(unsafe_code)]

/// An open newtype over a one-byte protocol code with named constants (the rustls
/// pattern): unknown values survive a parse, and `Debug` prints the name or, for an
/// unknown value, the number in hex.
macro_rules! open_code {
    ($(#[$m:meta])* $name:ident { $( $(#[$d:meta])* $c:ident = $v:literal => $n:literal, )* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub u8);

        impl $name {
            $( $(#[$d])* pub const $c: $name = $name($v); )*
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match *self {
                    $( $name::$c => f.write_str($n), )*
                    $name(v) => write!(f, "{:#04x}", v),
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(self, f)
            }
        }
    };
}

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod frame;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ring;
pub mod roce;
pub mod udp;

pub use roce::{Opcode, Psn};

use core::fmt;

/// The header an [`Error`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Header {
    /// Ethernet II, with its 802.1Q tag.
    Ethernet,
    /// ARP (RFC 826).
    Arp,
    /// IPv4 (RFC 791).
    Ipv4,
    /// The fixed IPv6 header (RFC 8200 §3).
    Ipv6,
    /// An IPv6 extension header (RFC 8200 §4), named by its next-header number.
    Ipv6Ext(IpProtocol),
    /// ICMP for IPv4 (RFC 792).
    Icmpv4,
    /// ICMPv6 (RFC 4443).
    Icmpv6,
    /// Neighbour discovery messages and options (RFC 4861).
    Ndp,
    /// UDP (RFC 768).
    Udp,
    /// IB Base Transport Header.
    Bth,
    /// RDMA Extended Transport Header.
    Reth,
    /// ACK Extended Transport Header.
    Aeth,
    /// Atomic Extended Transport Header.
    AtomicEth,
    /// Atomic Acknowledge Extended Transport Header.
    AtomicAckEth,
    /// Datagram Extended Transport Header.
    Deth,
    /// Immediate data or invalidate key (ImmDt, IETH): four bytes.
    Imm,
    /// The invariant CRC and the masked headers it covers.
    Icrc,
    /// The shm ring mode's descriptor ([`ring`]).
    RingDescriptor,
}

/// The field of a [`Header`] an [`Error`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// IP version (4 or 6).
    Version,
    /// IPv4 internet header length.
    Ihl,
    /// IPv4 total length.
    TotalLength,
    /// IPv6 payload length.
    PayloadLength,
    /// IPv6 flow label.
    FlowLabel,
    /// IPv4 MF flag and fragment offset.
    Fragment,
    /// An IPv6 (extension) header's next-header field.
    NextHeader,
    /// An IPv6 extension header's length field.
    ExtLength,
    /// The number of IPv6 extension headers in one chain.
    ExtCount,
    /// A length field (UDP length, NDP option length, a header's own length).
    Length,
    /// The EtherType (or an 802.3 length in its place).
    EtherType,
    /// ARP hardware/protocol type and address sizes.
    AddressFormat,
    /// ARP operation.
    Operation,
    /// ICMP/ICMPv6 message type.
    Type,
    /// ICMP/ICMPv6 code.
    Code,
    /// The invoking packet an ICMP error quotes.
    Invoking,
    /// NDP target address.
    Target,
    /// NDP source link-layer address option.
    SourceLinkLayer,
    /// NDP link-layer address option (its length says which link layer).
    LinkLayerOption,
    /// NDP solicited flag.
    Solicited,
    /// Destination port.
    DstPort,
    /// BTH opcode.
    Opcode,
    /// BTH transport header version.
    TVer,
    /// BTH pad count.
    PadCount,
    /// Destination QP.
    DestQp,
    /// Source QP.
    SrcQp,
    /// The extension headers present, against what the opcode requires.
    ExtHeaders,
    /// AETH syndrome.
    Syndrome,
    /// AETH message sequence number.
    Msn,
    /// Bytes after the headers (payload, pad).
    Payload,
    /// A flags field (a bit the format does not define, or one the operation does
    /// not take).
    Flags,
    /// A reserved field that must be zero.
    Reserved,
}

/// Why a buffer could not be parsed or emitted: which header, which field, which value.
/// Callers match on it (the router maps each error to one drop counter in one place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field inside it) requires.
    Truncated {
        /// Whose bytes are missing.
        header: Header,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A length field disagrees with the buffer or with another field, or a length to
    /// emit does not fit its field.
    Length {
        /// Which header.
        header: Header,
        /// Which length field.
        field: Field,
        /// The length it holds (or would hold).
        value: usize,
    },
    /// A field holds a value the format does not allow. For an address field, `value`
    /// is its first 32 bits; for a flag, 1.
    Field {
        /// Which header.
        header: Header,
        /// Which field.
        field: Field,
        /// The value found.
        value: u32,
    },
    /// The header's checksum (or the ICRC) did not verify.
    Checksum {
        /// Which header.
        header: Header,
    },
    /// Valid on the wire but not something this crate handles.
    Unsupported {
        /// Which header.
        header: Header,
        /// Which field says so.
        field: Field,
        /// The value found.
        value: u32,
    },
}

impl Error {
    /// The header the error is about.
    pub const fn header(&self) -> Header {
        match *self {
            Error::Truncated { header, .. }
            | Error::Length { header, .. }
            | Error::Field { header, .. }
            | Error::Checksum { header }
            | Error::Unsupported { header, .. } => header,
        }
    }
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Header::Ipv6Ext(p) => write!(f, "ipv6 extension header {p}"),
            h => fmt::Debug::fmt(h, f),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { header, need, have } => {
                write!(f, "{header} truncated: need {need} bytes, have {have}")
            }
            Error::Length {
                header,
                field,
                value,
            } => write!(f, "{header} {field:?} {value} inconsistent"),
            Error::Field {
                header,
                field,
                value,
            } => write!(f, "{header} {field:?} {value:#x} not allowed"),
            Error::Checksum { header } => write!(f, "{header} bad checksum"),
            Error::Unsupported {
                header,
                field,
                value,
            } => write!(f, "{header} {field:?} {value:#x} unsupported"),
        }
    }
}

impl std::error::Error for Error {}

/// Result of a parse or emit.
pub type Result<T> = core::result::Result<T, Error>;

/// A range of bytes inside a header (`const DEST_QP: Field = 5..8`).
pub(crate) type Bytes = core::ops::Range<usize>;

/// Returns `Ok(())` when `have >= need`, else the `Truncated` error that says so.
#[inline]
pub(crate) fn check_len(header: Header, have: usize, need: usize) -> Result<()> {
    if have < need {
        Err(Error::Truncated { header, need, have })
    } else {
        Ok(())
    }
}

pub use ethernet::{EtherType, EthernetAddress};
pub use ip::{IpAddress, IpRepr};
pub use ipv4::{IpProtocol, Ipv4Address};
