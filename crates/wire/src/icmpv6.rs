//! ICMP for IPv6 (RFC 4443) and the two Neighbor Discovery messages (RFC 4861 §4.3,
//! §4.4) weft needs to resolve and answer for addresses on a link.
//!
//! ```text
//!  0      1      2          4                    8            24
//!  type | code | checksum | ident, seq / flags | data / target | options (NDP)
//! ```
//! The view's buffer is the whole ICMPv6 message (the upper-layer payload); the
//! checksum covers it and the IPv6 pseudo-header, so source and destination are passed
//! in wherever the checksum is touched.

use crate::checksum;
use crate::ethernet::EthernetAddress;
use crate::ipv4::IpProtocol;
use crate::ipv6::Ipv6Address;
use crate::{check_len, Error, Field, Header, Result};
use core::fmt;

mod field {
    use crate::Bytes as Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
    pub const WORD1: Field = 4..8;
    pub const NA_FLAGS: usize = 4;
    pub const TARGET: Field = 8..24;
}

/// Length of the ICMPv6 header.
pub const HEADER_LEN: usize = 8;
/// Length of a neighbour solicitation or advertisement before its options.
pub const NDP_HEADER_LEN: usize = 24;
/// Length of a source/target link-layer address option for Ethernet.
pub const LLADDR_OPT_LEN: usize = 8;

/// An ICMPv6 message type; open, so unknown types survive a view read.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Icmpv6Message(pub u8);

impl Icmpv6Message {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: Icmpv6Message = Icmpv6Message(1);
    /// Packet too big.
    pub const PKT_TOO_BIG: Icmpv6Message = Icmpv6Message(2);
    /// Time exceeded.
    pub const TIME_EXCEEDED: Icmpv6Message = Icmpv6Message(3);
    /// Parameter problem.
    pub const PARAM_PROBLEM: Icmpv6Message = Icmpv6Message(4);
    /// Echo request.
    pub const ECHO_REQUEST: Icmpv6Message = Icmpv6Message(128);
    /// Echo reply.
    pub const ECHO_REPLY: Icmpv6Message = Icmpv6Message(129);
    /// Router solicitation.
    pub const ROUTER_SOLICIT: Icmpv6Message = Icmpv6Message(133);
    /// Router advertisement.
    pub const ROUTER_ADVERT: Icmpv6Message = Icmpv6Message(134);
    /// Neighbour solicitation.
    pub const NEIGHBOR_SOLICIT: Icmpv6Message = Icmpv6Message(135);
    /// Neighbour advertisement.
    pub const NEIGHBOR_ADVERT: Icmpv6Message = Icmpv6Message(136);
    /// Redirect.
    pub const REDIRECT: Icmpv6Message = Icmpv6Message(137);
}

impl fmt::Debug for Icmpv6Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = match *self {
            Icmpv6Message::DST_UNREACHABLE => "DstUnreachable",
            Icmpv6Message::PKT_TOO_BIG => "PacketTooBig",
            Icmpv6Message::TIME_EXCEEDED => "TimeExceeded",
            Icmpv6Message::PARAM_PROBLEM => "ParamProblem",
            Icmpv6Message::ECHO_REQUEST => "EchoRequest",
            Icmpv6Message::ECHO_REPLY => "EchoReply",
            Icmpv6Message::ROUTER_SOLICIT => "RouterSolicit",
            Icmpv6Message::ROUTER_ADVERT => "RouterAdvert",
            Icmpv6Message::NEIGHBOR_SOLICIT => "NeighborSolicit",
            Icmpv6Message::NEIGHBOR_ADVERT => "NeighborAdvert",
            Icmpv6Message::REDIRECT => "Redirect",
            Icmpv6Message(v) => return write!(f, "{v}"),
        };
        f.write_str(n)
    }
}

open_code! {
    /// Code of a destination unreachable (RFC 4443 §3.1).
    UnreachableCode {
        /// No route to destination.
        NO_ROUTE = 0 => "NoRoute",
        /// Communication administratively prohibited.
        PROHIBITED = 1 => "Prohibited",
        /// Beyond scope of source address.
        BEYOND_SCOPE = 2 => "BeyondScope",
        /// Address unreachable.
        ADDRESS = 3 => "Address",
        /// Port unreachable.
        PORT = 4 => "Port",
        /// Source address failed ingress/egress policy.
        SOURCE_POLICY = 5 => "SourcePolicy",
        /// Reject route to destination.
        REJECT_ROUTE = 6 => "RejectRoute",
    }
}

open_code! {
    /// Code of a time exceeded (RFC 4443 §3.3).
    TimeExceededCode {
        /// Hop limit exceeded in transit.
        HOP_LIMIT = 0 => "HopLimit",
        /// Fragment reassembly time exceeded.
        REASSEMBLY = 1 => "Reassembly",
    }
}

open_code! {
    /// Code of a parameter problem (RFC 4443 §3.4).
    ParamProblemCode {
        /// Erroneous header field encountered.
        HEADER_FIELD = 0 => "HeaderField",
        /// Unrecognized Next Header type encountered.
        NEXT_HEADER = 1 => "NextHeader",
        /// Unrecognized IPv6 option encountered.
        OPTION = 2 => "Option",
    }
}

/// NDP option types (RFC 4861 §4.6).
pub mod ndp_option {
    /// Source link-layer address.
    pub const SOURCE_LLADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LLADDR: u8 = 2;
}

/// Neighbour advertisement flag bits (RFC 4861 §4.4), in byte 4.
mod na_flag {
    pub const ROUTER: u8 = 0x80;
    pub const SOLICITED: u8 = 0x40;
    pub const OVERRIDE: u8 = 0x20;
}

/// The part of an offending packet an error message quotes: as much as fits without
/// the whole ICMPv6 message, in IPv6 + ICMPv6 headers, exceeding the minimum MTU of
/// 1280 bytes (RFC 4443 §2.4(c)). Never panics.
pub fn quote(packet: &[u8]) -> &[u8] {
    const MAX: usize = 1280 - crate::ipv6::HEADER_LEN - HEADER_LEN;
    &packet[..packet.len().min(MAX)]
}

#[inline]
fn be16(b: &[u8], f: crate::Bytes) -> u16 {
    let s = &b[f];
    u16::from_be_bytes([s[0], s[1]])
}

/// Iterator over NDP options: `(type, whole option bytes)`. A zero length field
/// (RFC 4861 §4.6: "MUST silently discard") yields a `Field` error on its `Length`, an
/// option running past the buffer a `Length` error (a lone trailing byte `Truncated`),
/// all on [`Header::Ndp`]; any error ends the iteration.
#[derive(Debug, Clone)]
pub struct NdpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdpOptions<'a> {
    type Item = Result<(u8, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = match self.rest {
            [_] => Err(Error::Truncated {
                header: Header::Ndp,
                need: 2,
                have: 1,
            }),
            [_, 0, ..] => Err(Error::Field {
                header: Header::Ndp,
                field: Field::Length,
                value: 0,
            }),
            [t, l, ..] => {
                let len = usize::from(*l) * 8;
                match self.rest.get(..len) {
                    Some(opt) => {
                        let t = *t;
                        self.rest = &self.rest[len..];
                        return Some(Ok((t, opt)));
                    }
                    None => Err(Error::Length {
                        header: Header::Ndp,
                        field: Field::Length,
                        value: len,
                    }),
                }
            }
            [] => return None,
        };
        self.rest = &[];
        Some(r)
    }
}

/// A zero-copy view of an ICMPv6 message.
#[derive(Debug, Clone, Copy)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Icmpv6Packet<T> {
        Icmpv6Packet { buffer }
    }

    /// Wrap after [`Icmpv6Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Icmpv6Packet<T>> {
        let p = Icmpv6Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check that the 8-byte header fits, and for a neighbour solicitation or
    /// advertisement that the target address does too.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        check_len(Header::Icmpv6, have, HEADER_LEN)?;
        if self.is_ndp() {
            // Reported as the ICMPv6 message being short (the view's own check), not as
            // an ND validation failure: Icmpv6Repr::parse makes those.
            check_len(Header::Icmpv6, have, NDP_HEADER_LEN)?;
        }
        Ok(())
    }

    fn is_ndp(&self) -> bool {
        matches!(
            self.msg_type(),
            Icmpv6Message::NEIGHBOR_SOLICIT | Icmpv6Message::NEIGHBOR_ADVERT
        )
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv6Message {
        Icmpv6Message(self.buffer.as_ref()[field::TYPE])
    }
    /// Code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_IDENT)
    }
    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }
    /// Bytes 4..8: the MTU of a packet too big, the pointer of a parameter problem.
    pub fn word1(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::WORD1];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Neighbour advertisement Router flag.
    pub fn router_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & na_flag::ROUTER != 0
    }
    /// Neighbour advertisement Solicited flag.
    pub fn solicited_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & na_flag::SOLICITED != 0
    }
    /// Neighbour advertisement Override flag.
    pub fn override_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & na_flag::OVERRIDE != 0
    }
    /// The NDP target address, if the buffer holds one (any type: bytes 8..24).
    pub fn target_addr(&self) -> Option<Ipv6Address> {
        let b: [u8; 16] = self.buffer.as_ref().get(field::TARGET)?.try_into().ok()?;
        Some(Ipv6Address::from(b))
    }
    /// Everything after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    /// The NDP options after the target (empty if the buffer ends first).
    pub fn ndp_options(&self) -> NdpOptions<'_> {
        NdpOptions {
            rest: self.buffer.as_ref().get(NDP_HEADER_LEN..).unwrap_or(&[]),
        }
    }
    fn sum(&self, src: Ipv6Address, dst: Ipv6Address) -> u16 {
        let b = self.buffer.as_ref();
        // A buffer longer than 4 GiB cannot be an ICMPv6 message; saturating keeps
        // this total, and such a sum simply will not verify.
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::IPV6_ICMP.0, len);
        checksum::combine(&[ph, checksum::data(b)])
    }
    /// True when the checksum over the pseudo-header and message verifies.
    pub fn verify_checksum(&self, src: Ipv6Address, dst: Ipv6Address) -> bool {
        self.sum(src, dst) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Set the type.
    pub fn set_msg_type(&mut self, t: Icmpv6Message) {
        self.buffer.as_mut()[field::TYPE] = t.0;
    }
    /// Set the code.
    pub fn set_msg_code(&mut self, c: u8) {
        self.buffer.as_mut()[field::CODE] = c;
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::ECHO_IDENT].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        self.buffer.as_mut()[field::ECHO_SEQNO].copy_from_slice(&v.to_be_bytes());
    }
    /// Set bytes 4..8 (MTU, pointer, NA flags with reserved bits, or zero).
    pub fn set_word1(&mut self, v: u32) {
        self.buffer.as_mut()[field::WORD1].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the NDP target address.
    pub fn set_target_addr(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::TARGET].copy_from_slice(&a.octets());
    }
    /// The data after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
    /// Compute and write the checksum.
    pub fn fill_checksum(&mut self, src: Ipv6Address, dst: Ipv6Address) {
        self.set_checksum(0);
        let c = !self.sum(src, dst);
        self.set_checksum(c);
    }
}

/// The ICMPv6 messages weft handles, as plain values borrowing their data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Destination unreachable (RFC 4443 §3.1).
    DstUnreachable {
        /// Why.
        code: UnreachableCode,
        /// The start of the invoking packet (see [`quote`]).
        invoking: &'a [u8],
    },
    /// Packet too big (RFC 4443 §3.2).
    PacketTooBig {
        /// MTU of the next hop.
        mtu: u32,
        /// The start of the invoking packet.
        invoking: &'a [u8],
    },
    /// Time exceeded (RFC 4443 §3.3).
    TimeExceeded {
        /// Why.
        code: TimeExceededCode,
        /// The start of the invoking packet.
        invoking: &'a [u8],
    },
    /// Parameter problem (RFC 4443 §3.4).
    ParamProblem {
        /// Which kind of problem.
        code: ParamProblemCode,
        /// Offset of the offending byte in the invoking packet.
        pointer: u32,
        /// The start of the invoking packet.
        invoking: &'a [u8],
    },
    /// Neighbour solicitation (RFC 4861 §4.3).
    NeighborSolicit {
        /// The address being resolved.
        target_addr: Ipv6Address,
        /// The sender's MAC, from the source link-layer address option.
        source_lladdr: Option<EthernetAddress>,
    },
    /// Neighbour advertisement (RFC 4861 §4.4).
    NeighborAdvert {
        /// Sender is a router.
        router: bool,
        /// Sent in response to a solicitation.
        solicited: bool,
        /// Override an existing cache entry.
        override_: bool,
        /// The address advertised.
        target_addr: Ipv6Address,
        /// Its MAC, from the target link-layer address option.
        target_lladdr: Option<EthernetAddress>,
    },
}

/// The quoted packet must at least hold an IPv6 header.
fn check_invoking(b: &[u8]) -> Result<()> {
    if b.len() >= crate::ipv6::HEADER_LEN && b[0] >> 4 == 6 {
        Ok(())
    } else {
        Err(Error::Field {
            header: Header::Icmpv6,
            field: Field::Invoking,
            value: b.len() as u32,
        })
    }
}

/// An address's first 32 bits, the value a [`Error::Field`] on an address reports.
fn first32(a: Ipv6Address) -> u32 {
    let o = a.octets();
    u32::from_be_bytes([o[0], o[1], o[2], o[3]])
}

/// The first link-layer address option of `kind`. Ethernet addresses take a
/// one-unit option (RFC 2464 §6); another length is some other link layer.
fn lladdr_option(opts: NdpOptions<'_>, kind: u8) -> Result<Option<EthernetAddress>> {
    let mut found = None;
    for o in opts {
        let (t, bytes) = o?;
        if t == kind && found.is_none() {
            if bytes.len() != LLADDR_OPT_LEN {
                return Err(Error::Unsupported {
                    header: Header::Ndp,
                    field: Field::LinkLayerOption,
                    value: bytes.len() as u32,
                });
            }
            found = EthernetAddress::from_bytes(&bytes[2..]);
        }
    }
    Ok(found)
}

impl<'a> Icmpv6Repr<'a> {
    /// Parse a checked view carried from `src` to `dst`: the checksum must verify;
    /// neighbour discovery messages are validated per RFC 4861 §7.1 (code 0, target
    /// not multicast, no option of length 0, no source link-layer option from the
    /// unspecified address, no Solicited flag to a multicast destination). Other
    /// types are `Unsupported` (the view still reads them).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: Ipv6Address,
        dst: Ipv6Address,
    ) -> Result<Icmpv6Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum(src, dst) {
            // A neighbour discovery message's checksum is one of its RFC 4861 §7.1
            // validity checks: say so, so that callers count it as ND.
            let header = if packet.is_ndp() {
                Header::Ndp
            } else {
                Header::Icmpv6
            };
            return Err(Error::Checksum { header });
        }
        let buf: &'a [u8] = packet.buffer.as_ref();
        let data = &buf[HEADER_LEN..];
        let code = packet.msg_code();
        match packet.msg_type() {
            Icmpv6Message::ECHO_REQUEST | Icmpv6Message::ECHO_REPLY if code != 0 => {
                Err(Error::Field {
                    header: Header::Icmpv6,
                    field: Field::Code,
                    value: u32::from(code),
                })
            }
            Icmpv6Message::ECHO_REQUEST => Ok(Icmpv6Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv6Message::ECHO_REPLY => Ok(Icmpv6Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv6Message::DST_UNREACHABLE => {
                check_invoking(data)?;
                Ok(Icmpv6Repr::DstUnreachable {
                    code: UnreachableCode(code),
                    invoking: data,
                })
            }
            Icmpv6Message::PKT_TOO_BIG => {
                check_invoking(data)?;
                Ok(Icmpv6Repr::PacketTooBig {
                    mtu: packet.word1(),
                    invoking: data,
                })
            }
            Icmpv6Message::TIME_EXCEEDED => {
                check_invoking(data)?;
                Ok(Icmpv6Repr::TimeExceeded {
                    code: TimeExceededCode(code),
                    invoking: data,
                })
            }
            Icmpv6Message::PARAM_PROBLEM => {
                check_invoking(data)?;
                Ok(Icmpv6Repr::ParamProblem {
                    code: ParamProblemCode(code),
                    pointer: packet.word1(),
                    invoking: data,
                })
            }
            t @ (Icmpv6Message::NEIGHBOR_SOLICIT | Icmpv6Message::NEIGHBOR_ADVERT) => {
                if code != 0 {
                    return Err(Error::Field {
                        header: Header::Ndp,
                        field: Field::Code,
                        value: u32::from(code),
                    });
                }
                let target_addr = packet.target_addr().ok_or(Error::Truncated {
                    header: Header::Ndp,
                    need: NDP_HEADER_LEN,
                    have: buf.len(),
                })?;
                if target_addr.is_multicast() {
                    return Err(Error::Field {
                        header: Header::Ndp,
                        field: Field::Target,
                        value: first32(target_addr),
                    });
                }
                let opts = NdpOptions {
                    rest: buf.get(NDP_HEADER_LEN..).unwrap_or(&[]),
                };
                if t == Icmpv6Message::NEIGHBOR_SOLICIT {
                    let source_lladdr = lladdr_option(opts, ndp_option::SOURCE_LLADDR)?;
                    if src.is_unspecified() && source_lladdr.is_some() {
                        return Err(Error::Field {
                            header: Header::Ndp,
                            field: Field::SourceLinkLayer,
                            value: 1,
                        });
                    }
                    Ok(Icmpv6Repr::NeighborSolicit {
                        target_addr,
                        source_lladdr,
                    })
                } else {
                    let solicited = packet.solicited_flag();
                    if solicited && dst.is_multicast() {
                        return Err(Error::Field {
                            header: Header::Ndp,
                            field: Field::Solicited,
                            value: 1,
                        });
                    }
                    Ok(Icmpv6Repr::NeighborAdvert {
                        router: packet.router_flag(),
                        solicited,
                        override_: packet.override_flag(),
                        target_addr,
                        target_lladdr: lladdr_option(opts, ndp_option::TARGET_LLADDR)?,
                    })
                }
            }
            t => Err(Error::Unsupported {
                header: Header::Icmpv6,
                field: Field::Type,
                value: u32::from(t.0),
            }),
        }
    }

    /// Length of the whole message.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv6Repr::DstUnreachable { invoking, .. }
            | Icmpv6Repr::PacketTooBig { invoking, .. }
            | Icmpv6Repr::TimeExceeded { invoking, .. }
            | Icmpv6Repr::ParamProblem { invoking, .. } => HEADER_LEN + invoking.len(),
            Icmpv6Repr::NeighborSolicit {
                source_lladdr: l, ..
            }
            | Icmpv6Repr::NeighborAdvert {
                target_lladdr: l, ..
            } => NDP_HEADER_LEN + if l.is_some() { LLADDR_OPT_LEN } else { 0 },
        }
    }

    /// Write the message and its checksum for a packet from `src` to `dst`. The
    /// view's buffer must be exactly `buffer_len()` long, since the checksum covers
    /// all of it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv6Packet<T>,
        src: Ipv6Address,
        dst: Ipv6Address,
    ) -> Result<()> {
        let need = self.buffer_len();
        let have = packet.buffer.as_ref().len();
        check_len(Header::Icmpv6, have, need)?;
        if have != need {
            return Err(Error::Length {
                header: Header::Icmpv6,
                field: Field::Length,
                value: have,
            });
        }
        let lladdr = |p: &mut Icmpv6Packet<T>, kind: u8, a: Option<EthernetAddress>| {
            if let Some(a) = a {
                let o = &mut p.buffer.as_mut()[NDP_HEADER_LEN..NDP_HEADER_LEN + LLADDR_OPT_LEN];
                o[0] = kind;
                o[1] = 1;
                o[2..].copy_from_slice(&a.0);
            }
        };
        match *self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                packet.set_msg_type(if matches!(self, Icmpv6Repr::EchoRequest { .. }) {
                    Icmpv6Message::ECHO_REQUEST
                } else {
                    Icmpv6Message::ECHO_REPLY
                });
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                packet.data_mut().copy_from_slice(data);
            }
            Icmpv6Repr::DstUnreachable { code, invoking } => {
                packet.set_msg_type(Icmpv6Message::DST_UNREACHABLE);
                packet.set_msg_code(code.0);
                packet.set_word1(0);
                packet.data_mut().copy_from_slice(invoking);
            }
            Icmpv6Repr::TimeExceeded { code, invoking } => {
                packet.set_msg_type(Icmpv6Message::TIME_EXCEEDED);
                packet.set_msg_code(code.0);
                packet.set_word1(0);
                packet.data_mut().copy_from_slice(invoking);
            }
            Icmpv6Repr::ParamProblem {
                code,
                pointer,
                invoking,
            } => {
                packet.set_msg_type(Icmpv6Message::PARAM_PROBLEM);
                packet.set_msg_code(code.0);
                packet.set_word1(pointer);
                packet.data_mut().copy_from_slice(invoking);
            }
            Icmpv6Repr::PacketTooBig { mtu, invoking } => {
                packet.set_msg_type(Icmpv6Message::PKT_TOO_BIG);
                packet.set_msg_code(0);
                packet.set_word1(mtu);
                packet.data_mut().copy_from_slice(invoking);
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                packet.set_msg_type(Icmpv6Message::NEIGHBOR_SOLICIT);
                packet.set_msg_code(0);
                packet.set_word1(0);
                packet.set_target_addr(target_addr);
                lladdr(packet, ndp_option::SOURCE_LLADDR, source_lladdr);
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                target_lladdr,
            } => {
                packet.set_msg_type(Icmpv6Message::NEIGHBOR_ADVERT);
                packet.set_msg_code(0);
                let flags = (u8::from(router) * na_flag::ROUTER)
                    | (u8::from(solicited) * na_flag::SOLICITED)
                    | (u8::from(override_) * na_flag::OVERRIDE);
                packet.set_word1(u32::from(flags) << 24);
                packet.set_target_addr(target_addr);
                lladdr(packet, ndp_option::TARGET_LLADDR, target_lladdr);
            }
        }
        packet.fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn a(s: &str) -> Ipv6Address {
        s.parse().unwrap()
    }

    // Checksums below were computed by an independent script over the RFC 8200 §8.1
    // pseudo-header.
    // Echo request fe80::1 -> fe80::1, ident 0x1234, seq 1, "abcdefgh": 0xdee6.
    const ECHO: [u8; 16] = [
        128, 0, 0xde, 0xe6, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h',
    ];
    // NS fe80::1 -> ff02::1:ff00:2 for fe80::2, SLLA 02:00:00:00:00:01: 0x7a97.
    const NS: [u8; 32] = [
        135, 0, 0x7a, 0x97, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 1,
        2, 0, 0, 0, 0, 1,
    ];
    // NA fe80::2 -> fe80::1, S and O, for fe80::2, TLLA 02:00:00:00:00:02: 0x181a.
    const NA: [u8; 32] = [
        136, 0, 0x18, 0x1a, 0x60, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2,
        1, 2, 0, 0, 0, 0, 2,
    ];

    #[test]
    fn decode_echo() {
        let p = Icmpv6Packet::new_checked(&ECHO[..]).unwrap();
        assert!(p.verify_checksum(a("fe80::1"), a("fe80::1")));
        assert!(!p.verify_checksum(a("fe80::1"), a("fe80::2")));
        let r = Icmpv6Repr::parse(&p, a("fe80::1"), a("fe80::1")).unwrap();
        assert_eq!(
            r,
            Icmpv6Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: b"abcdefgh"
            }
        );
        let mut out = [0u8; 16];
        r.emit(
            &mut Icmpv6Packet::new_unchecked(&mut out[..]),
            a("fe80::1"),
            a("fe80::1"),
        )
        .unwrap();
        assert_eq!(out, ECHO);
    }

    #[test]
    fn decode_ns_and_na() {
        let (s, d) = (a("fe80::1"), a("ff02::1:ff00:2"));
        let p = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        let r = Icmpv6Repr::parse(&p, s, d).unwrap();
        assert_eq!(
            r,
            Icmpv6Repr::NeighborSolicit {
                target_addr: a("fe80::2"),
                source_lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 1]))
            }
        );
        let mut out = [0u8; 32];
        r.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), s, d)
            .unwrap();
        assert_eq!(out, NS);

        let (s, d) = (a("fe80::2"), a("fe80::1"));
        let p = Icmpv6Packet::new_checked(&NA[..]).unwrap();
        assert!(!p.router_flag() && p.solicited_flag() && p.override_flag());
        let r = Icmpv6Repr::parse(&p, s, d).unwrap();
        assert_eq!(
            r,
            Icmpv6Repr::NeighborAdvert {
                router: false,
                solicited: true,
                override_: true,
                target_addr: a("fe80::2"),
                target_lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 2]))
            }
        );
        let mut out = [0u8; 32];
        r.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), s, d)
            .unwrap();
        assert_eq!(out, NA);
    }

    fn refill(b: &mut [u8], s: Ipv6Address, d: Ipv6Address) {
        Icmpv6Packet::new_unchecked(b).fill_checksum(s, d);
    }

    #[test]
    fn codes_print_their_names_and_unknown_values_in_hex() {
        assert_eq!(format!("{:?}", UnreachableCode::PORT), "Port");
        assert_eq!(format!("{}", ParamProblemCode::NEXT_HEADER), "NextHeader");
        assert_eq!(format!("{:?}", TimeExceededCode(7)), "0x07");
        assert_eq!(ParamProblemCode::NEXT_HEADER, ParamProblemCode(1));
    }

    #[test]
    fn parameter_problem_round_trips_with_its_pointer() {
        let s = a("2001:2::1");
        let mut inv = vec![0x60; 40];
        inv[6] = 0xfd;
        let r = Icmpv6Repr::ParamProblem {
            code: ParamProblemCode::NEXT_HEADER,
            pointer: 6,
            invoking: &inv,
        };
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), s, s)
            .unwrap();
        assert_eq!(&out[..8], &[4, 1, out[2], out[3], 0, 0, 0, 6]);
        let p = Icmpv6Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p, s, s), Ok(r));
    }

    #[test]
    fn ndp_validation() {
        let (s, d) = (a("fe80::1"), a("ff02::1:ff00:2"));
        // Truncated before the target.
        assert_eq!(
            Icmpv6Packet::new_checked(&NS[..23]).unwrap_err(),
            Error::Truncated {
                header: Header::Icmpv6,
                need: 24,
                have: 23
            }
        );
        // Option length 0.
        let mut b = NS;
        b[25] = 0;
        refill(&mut b, s, d);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&p, s, d),
            Err(Error::Field {
                header: Header::Ndp,
                field: Field::Length,
                value: 0
            })
        );
        assert_eq!(
            p.ndp_options().collect::<Vec<_>>(),
            vec![Err(Error::Field {
                header: Header::Ndp,
                field: Field::Length,
                value: 0
            })]
        );
        // Option running past the message.
        let mut b = NS;
        b[25] = 2;
        refill(&mut b, s, d);
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(Error::Length {
                header: Header::Ndp,
                field: Field::Length,
                value: 16
            })
        );
        // A lone trailing byte.
        let mut b = NS.to_vec();
        b.push(7);
        refill(&mut b, s, d);
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(Error::Truncated {
                header: Header::Ndp,
                need: 2,
                have: 1
            })
        );
        // A bad checksum on a neighbour solicitation is an ND error.
        let mut b = NS;
        refill(&mut b, s, d);
        b[2] ^= 1;
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(Error::Checksum {
                header: Header::Ndp
            })
        );
        // Nonzero code.
        let mut b = NS;
        b[1] = 1;
        refill(&mut b, s, d);
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(Error::Field {
                header: Header::Ndp,
                field: Field::Code,
                value: 1
            })
        );
        // Multicast target.
        let mut b = NS;
        b[8] = 0xff;
        refill(&mut b, s, d);
        assert!(matches!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(Error::Field {
                header: Header::Ndp,
                field: Field::Target,
                ..
            })
        ));
        // DAD probe from :: must not carry a source lladdr.
        let mut b = NS;
        refill(&mut b, Ipv6Address::UNSPECIFIED, d);
        assert!(matches!(
            Icmpv6Repr::parse(
                &Icmpv6Packet::new_checked(&b[..]).unwrap(),
                Ipv6Address::UNSPECIFIED,
                d
            ),
            Err(Error::Field {
                header: Header::Ndp,
                field: Field::SourceLinkLayer,
                ..
            })
        ));
        // Solicited advertisement to a multicast group.
        let mut b = NA;
        let m = a("ff02::1");
        refill(&mut b, s, m);
        assert!(matches!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, m),
            Err(Error::Field {
                header: Header::Ndp,
                field: Field::Solicited,
                ..
            })
        ));
        // A non-Ethernet (two-unit) lladdr option.
        let mut b = NS.to_vec();
        b[25] = 2;
        b.extend_from_slice(&[0; 8]);
        refill(&mut b, s, d);
        assert!(matches!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(Error::Unsupported {
                header: Header::Ndp,
                field: Field::LinkLayerOption,
                value: 16
            })
        ));
        // Unknown options are skipped; no lladdr at all is fine.
        let mut b = NS[..24].to_vec();
        b.extend_from_slice(&[14, 1, 0, 0, 0, 0, 0, 0]); // nonce option
        refill(&mut b, s, d);
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Ok(Icmpv6Repr::NeighborSolicit {
                target_addr: a("fe80::2"),
                source_lladdr: None
            })
        );
    }

    #[test]
    fn errors_and_checksum() {
        let s = a("2001:db8::1");
        let mut b = ECHO;
        b[9] ^= 0xff;
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, s),
            Err(Error::Checksum {
                header: Header::Icmpv6
            })
        );
        assert_eq!(
            Icmpv6Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated {
                header: Header::Icmpv6,
                need: 8,
                have: 7
            }
        );
        let mut b = ECHO;
        b[0] = 133;
        refill(&mut b, s, s);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv6Message::ROUTER_SOLICIT);
        assert!(matches!(
            Icmpv6Repr::parse(&p, s, s),
            Err(Error::Unsupported {
                header: Header::Icmpv6,
                field: Field::Type,
                value: 133
            })
        ));
        // Time exceeded quoting less than an IPv6 header.
        let r = Icmpv6Repr::TimeExceeded {
            code: TimeExceededCode::HOP_LIMIT,
            invoking: &[0x60; 39],
        };
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), s, s)
            .unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..]).unwrap(), s, s),
            Err(Error::Field {
                header: Header::Icmpv6,
                field: Field::Invoking,
                value: 39
            })
        );
        let mut big = vec![0u8; 2000];
        big[0] = 0x60;
        assert_eq!(quote(&big).len(), 1232);
        let mut small = [0u8; 5];
        assert_eq!(
            r.emit(&mut Icmpv6Packet::new_unchecked(&mut small[..]), s, s),
            Err(Error::Truncated {
                header: Header::Icmpv6,
                need: 47,
                have: 5
            })
        );
    }

    proptest! {
        #[test]
        fn round_trip(kind in 0u8..8, ident in any::<u16>(), seq_no in any::<u16>(), code in any::<u8>(),
                      mtu in any::<u32>(), flags in any::<[bool; 3]>(), target in any::<[u8; 16]>(),
                      ll in proptest::option::of(any::<[u8; 6]>()),
                      data in proptest::collection::vec(any::<u8>(), 0..64),
                      s in any::<[u8; 16]>(), d in any::<[u8; 16]>()) {
            let (s, d) = (Ipv6Address::from(s), Ipv6Address::from(d));
            let mut target = target;
            target[0] &= 0xfe; // never multicast
            let target = Ipv6Address::from(target);
            let mut inv = vec![0x60; 40];
            inv.extend_from_slice(&data);
            let ll = ll.map(EthernetAddress);
            let r = match kind {
                0 => Icmpv6Repr::EchoRequest { ident, seq_no, data: &data },
                1 => Icmpv6Repr::EchoReply { ident, seq_no, data: &data },
                2 => Icmpv6Repr::DstUnreachable { code: UnreachableCode(code), invoking: &inv },
                3 => Icmpv6Repr::PacketTooBig { mtu, invoking: &inv },
                4 => Icmpv6Repr::TimeExceeded { code: TimeExceededCode(code), invoking: &inv },
                7 => Icmpv6Repr::ParamProblem { code: ParamProblemCode(code), pointer: mtu, invoking: &inv },
                5 => Icmpv6Repr::NeighborSolicit { target_addr: target, source_lladdr: ll },
                _ => Icmpv6Repr::NeighborAdvert { router: flags[0], solicited: flags[1], override_: flags[2],
                                                   target_addr: target, target_lladdr: ll },
            };
            let valid = match r {
                Icmpv6Repr::NeighborSolicit { source_lladdr: Some(_), .. } => !s.is_unspecified(),
                Icmpv6Repr::NeighborAdvert { solicited: true, .. } => !d.is_multicast(),
                _ => true,
            };
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), s, d).unwrap();
            let p = Icmpv6Packet::new_checked(&out[..]).unwrap();
            if valid {
                prop_assert_eq!(Icmpv6Repr::parse(&p, s, d).unwrap(), r);
            } else {
                prop_assert!(Icmpv6Repr::parse(&p, s, d).is_err());
            }
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64), t in prop_oneof![Just(135u8), Just(136), any::<u8>()]) {
            let mut b = b;
            if let Some(x) = b.first_mut() { *x = t; }
            let s = a("fe80::1");
            if let Ok(p) = Icmpv6Packet::new_checked(&b[..]) {
                let _ = (p.target_addr(), p.word1(), p.data(), p.ndp_options().count());
                let _ = Icmpv6Repr::parse(&p, s, s);
            }
        }
    }
}
