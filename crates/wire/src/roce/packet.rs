//! A whole InfiniBand transport packet as RoCEv2 carries it in a UDP payload:
//! BTH, the extension headers the opcode table names, payload, 0–3 pad bytes and the
//! 4-byte ICRC (Annex A17.3.3, stored little-endian as rdma_rxe and scapy do).
//!
//! [`IbPacket`] is the checked view; [`IbPacketRepr`] holds the headers as values.
//! Neither keeps its own idea of which headers an opcode carries: both walk
//! [`Opcode::info`].

use super::bth::{Bth, BthRepr};
use super::ext::{
    parse_u32, read_u32, AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, RethRepr,
};
use super::opcode::{len, ExtHeaders, Opcode, OpcodeInfo};
use super::psn::Psn;
use crate::{check_len, Bytes, Error, Field, Header, Result};

/// Where each extension header sits, as byte ranges from the start of the BTH.
/// Absent headers are `None`. Computed from the opcode table in wire order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExtLayout {
    /// DETH.
    pub deth: Option<Bytes>,
    /// RETH.
    pub reth: Option<Bytes>,
    /// AtomicETH.
    pub atomic_eth: Option<Bytes>,
    /// AETH.
    pub aeth: Option<Bytes>,
    /// AtomicAckETH.
    pub atomic_ack_eth: Option<Bytes>,
    /// ImmDt.
    pub imm_dt: Option<Bytes>,
    /// IETH.
    pub ieth: Option<Bytes>,
    /// CNP reserved bytes.
    pub cnp_reserved: Option<Bytes>,
    /// End of the last header: where the payload starts.
    pub end: usize,
}

/// Where `size` bytes go if `present`, at `*at`, moving `*at` past them.
const fn place(at: &mut usize, present: bool, size: usize) -> Option<Bytes> {
    if !present {
        return None;
    }
    let f = *at..*at + size;
    *at += size;
    Some(f)
}

impl ExtLayout {
    /// Lay out `headers` after a BTH, in the wire order of IBTA §9.2.
    pub const fn of(headers: ExtHeaders) -> ExtLayout {
        let mut at = len::BTH;
        let deth = place(&mut at, headers.deth, len::DETH);
        let reth = place(&mut at, headers.reth, len::RETH);
        let atomic_eth = place(&mut at, headers.atomic_eth, len::ATOMIC_ETH);
        let aeth = place(&mut at, headers.aeth, len::AETH);
        let atomic_ack_eth = place(&mut at, headers.atomic_ack_eth, len::ATOMIC_ACK_ETH);
        let imm_dt = place(&mut at, headers.imm_dt, len::IMM_DT);
        let ieth = place(&mut at, headers.ieth, len::IETH);
        let cnp_reserved = place(&mut at, headers.cnp_reserved, len::CNP_RESERVED);
        ExtLayout {
            deth,
            reth,
            atomic_eth,
            aeth,
            atomic_ack_eth,
            imm_dt,
            ieth,
            cnp_reserved,
            end: at,
        }
    }

    /// [`ExtLayout::of`] from a table built at compile time: every packet sent and
    /// received needs its layout, and building one (eight optional ranges) per
    /// packet showed in profiles.
    pub fn of_ref(headers: ExtHeaders) -> &'static ExtLayout {
        &LAYOUTS[headers.bits() as usize]
    }

    /// The layout of a known opcode's headers ([`Opcode::info`]'s), by two loads from
    /// tables built at compile time: [`ExtLayout::of_ref`] first packs the header set
    /// into its index, which every packet sent and received paid for (some 30
    /// instructions each, callgrind). An opcode weft does not speak gets the BTH-only
    /// layout; callers look at [`Opcode::info`] first.
    pub fn of_opcode(op: Opcode) -> &'static ExtLayout {
        &LAYOUTS[OPCODE_LAYOUT[op.0 as usize] as usize]
    }
}

/// Per opcode, the index of its header set in [`LAYOUTS`] ([`ExtHeaders::bits`]); 0
/// (no extension header) for opcodes without a table entry.
static OPCODE_LAYOUT: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(info) = Opcode(i as u8).info() {
            t[i] = info.headers.bits();
        }
        i += 1;
    }
    t
};

/// [`ExtLayout::of`] for every set of headers, indexed by [`ExtHeaders::bits`].
static LAYOUTS: [ExtLayout; 256] = {
    const NONE: ExtLayout = ExtLayout {
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        imm_dt: None,
        ieth: None,
        cnp_reserved: None,
        end: len::BTH,
    };
    let mut t = [NONE; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = ExtLayout::of(ExtHeaders::from_bits(i as u8));
        i += 1;
    }
    t
};

/// Per opcode, whether its packets carry nothing between the BTH and the payload (a
/// known opcode with a payload and no extension header: SEND First, Middle, Last and
/// Only without immediate, RC and UC): [`PacketTemplate::emit_bth_only`]'s case.
static BTH_ONLY: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(info) = Opcode(i as u8).info() {
            t[i] = info.headers.bits() == 0 && info.has_payload;
        }
        i += 1;
    }
    t
};

/// A checked view over one IB transport packet (the UDP payload of a RoCEv2 frame).
#[derive(Debug, Clone)]
pub struct IbPacket<T: AsRef<[u8]>> {
    buffer: T,
    info: OpcodeInfo,
    /// The opcode's header layout, looked up once by [`IbPacket::new_checked`]: the
    /// header length, [`IbPacketRepr::parse`] and the header accessors all read it
    /// (deriving it from the opcode's header set each time cost a receive some 60
    /// instructions a packet, callgrind).
    layout: &'static ExtLayout,
}

impl<T: AsRef<[u8]>> IbPacket<T> {
    /// Check `buffer` and wrap it. Fails when the buffer is shorter than BTH + ICRC, the
    /// opcode is not one weft speaks (`Unsupported`), the transport header version is not
    /// 0, the headers the opcode requires do not fit, a payload-less opcode carries bytes,
    /// or the pad count exceeds the payload.
    ///
    /// Like rdma_rxe, it does not insist that payload plus pad is a multiple of four
    /// bytes: weft always pads on emit, and accepts what Linux accepts.
    pub fn new_checked(buffer: T) -> Result<IbPacket<T>> {
        let b = buffer.as_ref();
        check_len(Header::Bth, b.len(), len::BTH + len::ICRC)?;
        let bth = Bth::new_unchecked(b);
        let info = bth.opcode().info().ok_or(Error::Unsupported {
            header: Header::Bth,
            field: Field::Opcode,
            value: u32::from(bth.opcode().0),
        })?;
        // IBTA §9.2.1: a packet of another transport header version is dropped. Checked
        // here so that a fast path using only the view never sees one.
        if bth.tver() != 0 {
            return Err(Error::Field {
                header: Header::Bth,
                field: Field::TVer,
                value: u32::from(bth.tver()),
            });
        }
        let layout = ExtLayout::of_opcode(bth.opcode());
        let header_len = layout.end;
        check_len(Header::Bth, b.len(), header_len + len::ICRC)?;
        let padded = b.len() - header_len - len::ICRC;
        if !info.has_payload && padded != 0 {
            return Err(Error::Length {
                header: Header::Bth,
                field: Field::Payload,
                value: padded,
            });
        }
        if usize::from(bth.pad_count()) > padded {
            return Err(Error::Field {
                header: Header::Bth,
                field: Field::PadCount,
                value: u32::from(bth.pad_count()),
            });
        }
        Ok(IbPacket {
            buffer,
            info,
            layout,
        })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The BTH view.
    pub fn bth(&self) -> Bth<&[u8]> {
        Bth::new_unchecked(self.buffer.as_ref())
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        self.bth().opcode()
    }

    /// The opcode's table entry.
    pub fn info(&self) -> OpcodeInfo {
        self.info
    }

    /// Bytes of BTH plus extension headers.
    pub fn header_len(&self) -> usize {
        self.layout.end
    }

    /// Where each extension header is.
    pub fn layout(&self) -> ExtLayout {
        self.layout_ref().clone()
    }

    fn layout_ref(&self) -> &'static ExtLayout {
        self.layout
    }

    /// The payload, pad bytes excluded.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = b.len() - len::ICRC - usize::from(self.bth().pad_count());
        &b[self.layout.end..end]
    }

    /// Everything the ICRC covers from the BTH on: the packet without its last 4 bytes.
    pub fn without_icrc(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[..b.len() - len::ICRC]
    }

    /// The ICRC trailer, read little-endian.
    pub fn icrc(&self) -> u32 {
        let b = self.buffer.as_ref();
        let t = &b[b.len() - len::ICRC..];
        u32::from_le_bytes([t[0], t[1], t[2], t[3]])
    }

    fn slice(&self, f: &Option<Bytes>) -> Option<&[u8]> {
        f.as_ref().map(|r| &self.buffer.as_ref()[r.clone()])
    }

    /// The headers as values ([`IbPacketRepr::parse`]). Infallible: `new_checked` has
    /// checked the transport header version and that every header the opcode names
    /// fits, which is all a parse of the headers checks. A receive path reads it
    /// straight into place; as a parse's `Result` the repr (some 130 bytes) was
    /// copied out of it on every packet, and a packet with no extension header (a
    /// SEND) looked at each of the seven absent ones (~60 instructions a packet
    /// together, callgrind, `msg_rate`).
    #[inline]
    pub fn repr(&self) -> IbPacketRepr {
        let bth = BthRepr::read(&self.bth());
        let l = self.layout_ref();
        if l.end == len::BTH {
            // BTH only (SEND and WRITE First/Middle/Last, RC/UC, without immediate:
            // the common case of a data packet).
            return IbPacketRepr::new(bth);
        }
        IbPacketRepr {
            bth,
            deth: self.slice(&l.deth).map(DethRepr::read),
            reth: self.slice(&l.reth).map(RethRepr::read),
            atomic_eth: self.slice(&l.atomic_eth).map(AtomicEthRepr::read),
            aeth: self.slice(&l.aeth).map(AethRepr::read),
            atomic_ack_eth: self.slice(&l.atomic_ack_eth).map(AtomicAckEthRepr::read),
            imm: self.slice(&l.imm_dt).map(read_u32),
            ieth: self.slice(&l.ieth).map(read_u32),
        }
    }

    /// The RETH, when the opcode has one.
    pub fn reth(&self) -> Option<RethRepr> {
        self.slice(&self.layout_ref().reth)
            .and_then(|b| RethRepr::parse(b).ok())
    }

    /// The AETH, when the opcode has one.
    pub fn aeth(&self) -> Option<AethRepr> {
        self.slice(&self.layout_ref().aeth)
            .and_then(|b| AethRepr::parse(b).ok())
    }

    /// The DETH, when the opcode has one.
    pub fn deth(&self) -> Option<DethRepr> {
        self.slice(&self.layout_ref().deth)
            .and_then(|b| DethRepr::parse(b).ok())
    }

    /// The AtomicETH, when the opcode has one.
    pub fn atomic_eth(&self) -> Option<AtomicEthRepr> {
        self.slice(&self.layout_ref().atomic_eth)
            .and_then(|b| AtomicEthRepr::parse(b).ok())
    }

    /// The AtomicAckETH, when the opcode has one.
    pub fn atomic_ack_eth(&self) -> Option<AtomicAckEthRepr> {
        self.slice(&self.layout_ref().atomic_ack_eth)
            .and_then(|b| AtomicAckEthRepr::parse(b).ok())
    }

    /// The immediate data, when the opcode has it.
    pub fn imm(&self) -> Option<u32> {
        self.slice(&self.layout_ref().imm_dt)
            .and_then(|b| parse_u32(b).ok())
    }

    /// The IETH (rkey to invalidate), when the opcode has one.
    pub fn ieth(&self) -> Option<u32> {
        self.slice(&self.layout_ref().ieth)
            .and_then(|b| parse_u32(b).ok())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IbPacket<T> {
    /// The payload, writable (pad excluded).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.layout.end;
        let pad = usize::from(self.bth().pad_count());
        let b = self.buffer.as_mut();
        let end = b.len() - len::ICRC - pad;
        &mut b[start..end]
    }

    /// Overwrite the ICRC trailer (little-endian).
    pub fn set_icrc(&mut self, icrc: u32) {
        let b = self.buffer.as_mut();
        let n = b.len();
        b[n - len::ICRC..].copy_from_slice(&icrc.to_le_bytes());
    }
}

/// The headers of an IB packet as values. Which `Option`s are `Some` must agree with the
/// opcode table; [`IbPacketRepr::emit`] refuses a repr where they do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IbPacketRepr {
    /// Base transport header.
    pub bth: BthRepr,
    /// DETH (UD).
    pub deth: Option<DethRepr>,
    /// RETH.
    pub reth: Option<RethRepr>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH.
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data.
    pub imm: Option<u32>,
    /// Invalidate rkey.
    pub ieth: Option<u32>,
}

impl IbPacketRepr {
    /// A repr with only a BTH; fill the extension headers the opcode needs.
    pub const fn new(bth: BthRepr) -> IbPacketRepr {
        IbPacketRepr {
            bth,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm: None,
            ieth: None,
        }
    }

    /// Parse the headers of a checked packet. It cannot fail: [`IbPacket::new_checked`]
    /// made every check a parse would make ([`IbPacket::repr`]); the `Result` is the
    /// parse's usual shape.
    pub fn parse<T: AsRef<[u8]>>(pkt: &IbPacket<T>) -> Result<IbPacketRepr> {
        Ok(pkt.repr())
    }

    fn info(&self) -> Result<OpcodeInfo> {
        self.bth.opcode.info().ok_or(Error::Unsupported {
            header: Header::Bth,
            field: Field::Opcode,
            value: u32::from(self.bth.opcode.0),
        })
    }

    /// The extension headers this repr carries.
    fn present(&self) -> ExtHeaders {
        ExtHeaders {
            deth: self.deth.is_some(),
            reth: self.reth.is_some(),
            atomic_eth: self.atomic_eth.is_some(),
            aeth: self.aeth.is_some(),
            atomic_ack_eth: self.atomic_ack_eth.is_some(),
            imm_dt: self.imm.is_some(),
            ieth: self.ieth.is_some(),
            cnp_reserved: self.bth.opcode == Opcode::CNP,
        }
    }

    /// Bytes of BTH plus extension headers, per the opcode table (0 for an unknown opcode).
    pub fn header_len(&self) -> usize {
        self.info().map_or(0, |i| len::BTH + i.headers.len())
    }

    /// Pad bytes after a payload of `payload_len` bytes.
    pub const fn pad_for(payload_len: usize) -> usize {
        (4 - payload_len % 4) % 4
    }

    /// Total packet bytes for a payload of `payload_len`: headers, payload, pad, ICRC.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + Self::pad_for(payload_len) + len::ICRC
    }

    /// Write headers, `payload`, zero pad and a zero ICRC into `buf`; sets the BTH pad
    /// count. Returns the packet length. Errors: those of [`IbPacketRepr::emit_headers`].
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize> {
        let at = self.emit_headers(buf, payload.len())?;
        buf[at.clone()].copy_from_slice(payload);
        Ok(at.end + Self::pad_for(payload.len()) + len::ICRC)
    }

    /// Write everything but the payload for a payload of `payload_len` bytes: headers,
    /// zero pad and a zero ICRC; sets the BTH pad count. Returns where the payload goes,
    /// so a caller can gather a scatter list straight into the packet (one copy). The
    /// packet ends `pad_for(payload_len) + 4` bytes after the returned range.
    ///
    /// Errors: unknown opcode, headers that disagree with the opcode table, payload on a
    /// payload-less opcode, a dest QP or MSN wider than 24 bits or an AETH syndrome that
    /// does not fit its fields, `buf` too short.
    pub fn emit_headers(&self, buf: &mut [u8], payload_len: usize) -> Result<Bytes> {
        let info = self.info()?;
        if self.present() != info.headers {
            return Err(Error::Field {
                header: Header::Bth,
                field: Field::ExtHeaders,
                value: u32::from(self.bth.opcode.0),
            });
        }
        if !info.has_payload && payload_len != 0 {
            return Err(Error::Length {
                header: Header::Bth,
                field: Field::Payload,
                value: payload_len,
            });
        }
        if self.bth.dest_qp > super::bth::QPN_MASK {
            return Err(Error::Field {
                header: Header::Bth,
                field: Field::DestQp,
                value: self.bth.dest_qp,
            });
        }
        let total = self.buffer_len(payload_len);
        check_len(Header::Bth, buf.len(), total)?;
        let buf = &mut buf[..total];
        let pad = Self::pad_for(payload_len);
        let mut bth = self.bth;
        bth.pad_count = pad as u8;
        bth.emit(&mut Bth::new_unchecked(&mut buf[..]));
        let l = ExtLayout::of_ref(info.headers);
        fn put<R>(
            buf: &mut [u8],
            f: &Option<Bytes>,
            v: &Option<R>,
            emit: impl Fn(&R, &mut [u8]) -> Result<()>,
        ) -> Result<()> {
            match (f, v) {
                (Some(f), Some(v)) => emit(v, &mut buf[f.clone()]),
                _ => Ok(()),
            }
        }
        put(buf, &l.deth, &self.deth, DethRepr::emit)?;
        put(buf, &l.reth, &self.reth, RethRepr::emit)?;
        put(buf, &l.atomic_eth, &self.atomic_eth, AtomicEthRepr::emit)?;
        put(buf, &l.aeth, &self.aeth, AethRepr::emit)?;
        put(
            buf,
            &l.atomic_ack_eth,
            &self.atomic_ack_eth,
            AtomicAckEthRepr::emit,
        )?;
        let be = |v: &u32, b: &mut [u8]| {
            b.copy_from_slice(&v.to_be_bytes());
            Ok(())
        };
        put(buf, &l.imm_dt, &self.imm, be)?;
        put(buf, &l.ieth, &self.ieth, be)?;
        if let Some(f) = &l.cnp_reserved {
            buf[f.clone()].fill(0);
        }
        let p = l.end;
        buf[p + payload_len..].fill(0);
        Ok(p..p + payload_len)
    }
}

/// What stays the same in every packet a QP sends to one destination: the BTH with its
/// P_Key and destination QP (and, on UD, the DETH), as wire bytes. Requests and
/// responses (ACKs, READ responses, atomic ACKs) alike.
///
/// [`PacketTemplate::emit_headers`] copies these bytes and writes only what changes
/// per packet (opcode, SE, pad count, AckReq, PSN, and the RETH, AtomicETH, AETH,
/// AtomicAckETH and ImmDt values). The caller still decides every field; only their encoding is cached. The
/// bytes are those of [`IbPacketRepr::emit_headers`] for the same request (a property
/// test below holds the two paths to it), at a fraction of the work: no repr of eight
/// optional headers is built and walked per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketTemplate {
    bth: [u8; len::BTH],
    deth: Option<[u8; len::DETH]>,
}

/// The fields of one packet that [`PacketTemplate`] does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketFields {
    /// Opcode; its table entry must name exactly the headers given here.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// AckReq.
    pub ack_req: bool,
    /// PSN.
    pub psn: Psn,
    /// RETH (WRITE First/Only, READ request).
    pub reth: Option<RethRepr>,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH (ACK, READ response First/Last/Only, atomic ACK).
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH (atomic ACK).
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data.
    pub imm: Option<u32>,
    /// Payload bytes (pad excluded).
    pub payload_len: usize,
}

impl PacketTemplate {
    /// The template of requests to `dest_qp` in partition `pkey`, with the DETH of a UD
    /// send. Like [`BthRepr::new`], the destination QP keeps its low 24 bits and the
    /// other BTH fields are rdma_rxe's defaults (no MigReq, FECN or BECN, version 0).
    /// Errors: a DETH source QP wider than 24 bits.
    pub fn new(pkey: u16, dest_qp: u32, deth: Option<DethRepr>) -> Result<PacketTemplate> {
        let mut bth = [0u8; len::BTH];
        let mut repr = BthRepr::new(Opcode(0), dest_qp, Psn::new(0));
        repr.pkey = pkey;
        repr.emit(&mut Bth::new_unchecked(&mut bth[..]));
        let deth = match deth {
            Some(d) => {
                let mut b = [0u8; len::DETH];
                d.emit(&mut b)?;
                Some(b)
            }
            None => None,
        };
        Ok(PacketTemplate { bth, deth })
    }

    /// True when this template was made for `pkey` and `dest_qp` (and no DETH): whether a
    /// cached template still serves a connected QP.
    pub fn is_for(&self, pkey: u16, dest_qp: u32) -> bool {
        self.deth.is_none()
            && self.bth[2..4] == pkey.to_be_bytes()
            && super::bth::get_u24(&self.bth, 5..8) == dest_qp & super::bth::QPN_MASK
    }

    /// [`PacketTemplate::emit_headers`] for a packet with none of the optional fields
    /// of [`PacketFields`] (no RETH, AtomicETH, AETH, AtomicAckETH or immediate): the
    /// same bytes, payload range and errors for every input. When the template has no
    /// DETH and the opcode names no extension header (a SEND without immediate, the
    /// stream of small messages), only the BTH is written, with no walk of the
    /// opcode's header set (~90 of `emit_headers`' ~125 instructions a packet,
    /// callgrind, `msg_rate`); any other packet takes `emit_headers`.
    #[inline]
    pub fn emit_bth_only(
        &self,
        buf: &mut [u8],
        opcode: Opcode,
        solicited: bool,
        ack_req: bool,
        psn: Psn,
        payload_len: usize,
    ) -> Result<Bytes> {
        if self.deth.is_some() || !BTH_ONLY[opcode.0 as usize] {
            let f = PacketFields {
                opcode,
                solicited,
                ack_req,
                psn,
                reth: None,
                atomic_eth: None,
                aeth: None,
                atomic_ack_eth: None,
                imm: None,
                payload_len,
            };
            return self.emit_headers(buf, &f);
        }
        // As `emit_headers` with a layout that ends at the BTH.
        let pad = IbPacketRepr::pad_for(payload_len);
        let total = len::BTH + payload_len + pad + len::ICRC;
        check_len(Header::Bth, buf.len(), total)?;
        let buf = &mut buf[..total];
        buf[..len::BTH].copy_from_slice(&self.bth);
        buf[0] = opcode.0;
        buf[1] = (u8::from(solicited) << 7) | ((pad as u8) << 4);
        buf[8] = u8::from(ack_req) << 7;
        super::bth::set_u24(buf, 9..12, psn.value());
        let tail = &mut buf[len::BTH + payload_len..];
        let n = tail.len();
        tail[..len::ICRC].fill(0);
        tail[n - len::ICRC..].fill(0);
        Ok(len::BTH..len::BTH + payload_len)
    }

    /// [`IbPacketRepr::emit_headers`] for the packet the template and `f` describe:
    /// headers, zero pad and a zero ICRC; returns where the payload goes. The same
    /// errors, checked in the same order: unknown opcode, headers that disagree with
    /// the opcode table, payload on a payload-less opcode, `buf` too short, an AETH
    /// that does not fit its fields.
    pub fn emit_headers(&self, buf: &mut [u8], f: &PacketFields) -> Result<Bytes> {
        let info = f.opcode.info().ok_or(Error::Unsupported {
            header: Header::Bth,
            field: Field::Opcode,
            value: u32::from(f.opcode.0),
        })?;
        let present = ExtHeaders {
            deth: self.deth.is_some(),
            reth: f.reth.is_some(),
            atomic_eth: f.atomic_eth.is_some(),
            aeth: f.aeth.is_some(),
            atomic_ack_eth: f.atomic_ack_eth.is_some(),
            imm_dt: f.imm.is_some(),
            ..ExtHeaders::default()
        };
        if present != info.headers {
            return Err(Error::Field {
                header: Header::Bth,
                field: Field::ExtHeaders,
                value: u32::from(f.opcode.0),
            });
        }
        let payload_len = f.payload_len;
        if !info.has_payload && payload_len != 0 {
            return Err(Error::Length {
                header: Header::Bth,
                field: Field::Payload,
                value: payload_len,
            });
        }
        let l = ExtLayout::of_opcode(f.opcode);
        let pad = IbPacketRepr::pad_for(payload_len);
        let total = l.end + payload_len + pad + len::ICRC;
        check_len(Header::Bth, buf.len(), total)?;
        let buf = &mut buf[..total];
        buf[..len::BTH].copy_from_slice(&self.bth);
        buf[0] = f.opcode.0;
        buf[1] = (u8::from(f.solicited) << 7) | ((pad as u8) << 4);
        buf[8] = u8::from(f.ack_req) << 7;
        super::bth::set_u24(buf, 9..12, f.psn.value());
        if let (Some(at), Some(d)) = (&l.deth, &self.deth) {
            buf[at.clone()].copy_from_slice(d);
        }
        if let (Some(at), Some(r)) = (&l.reth, &f.reth) {
            r.emit(&mut buf[at.clone()])?;
        }
        if let (Some(at), Some(a)) = (&l.atomic_eth, &f.atomic_eth) {
            a.emit(&mut buf[at.clone()])?;
        }
        if let (Some(at), Some(a)) = (&l.aeth, &f.aeth) {
            a.emit(&mut buf[at.clone()])?;
        }
        if let (Some(at), Some(a)) = (&l.atomic_ack_eth, &f.atomic_ack_eth) {
            a.emit(&mut buf[at.clone()])?;
        }
        if let (Some(at), Some(imm)) = (&l.imm_dt, &f.imm) {
            buf[at.clone()].copy_from_slice(&imm.to_be_bytes());
        }
        let p = l.end;
        // Pad and ICRC: 4 to 7 zero bytes, written as two 4-byte stores that overlap
        // (a fill of a length unknown at compile time is a call to memset).
        let tail = &mut buf[p + payload_len..];
        let n = tail.len();
        tail[..len::ICRC].fill(0);
        tail[n - len::ICRC..].fill(0);
        Ok(p..p + payload_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roce::ext::{NakCode, Syndrome};
    use crate::roce::Psn;
    use proptest::prelude::*;

    #[test]
    fn the_layout_table_matches_the_layout_of_every_header_set() {
        for b in 0..=255u8 {
            let h = ExtHeaders::from_bits(b);
            assert_eq!(h.bits(), b);
            assert_eq!(ExtLayout::of_ref(h), &ExtLayout::of(h), "headers {h:?}");
        }
        for v in 0..=255u8 {
            let want = Opcode(v)
                .info()
                .map_or(ExtHeaders::default(), |i| i.headers);
            assert_eq!(
                ExtLayout::of_opcode(Opcode(v)),
                ExtLayout::of_ref(want),
                "opcode {v:#04x}"
            );
        }
        // Every opcode's own set, as the packet paths look it up.
        for op in 0..=255u8 {
            if let Some(info) = Opcode(op).info() {
                let l = ExtLayout::of_ref(info.headers);
                assert_eq!(l.end, len::BTH + info.headers.len(), "opcode {op:#x}");
            }
        }
    }

    /// Every opcode byte at the lengths around its headers' end: an unknown opcode and a
    /// packet one byte short are refused; a known opcode is accepted at its headers'
    /// end (and one byte past it when it carries a payload), and then the headers read
    /// in place (`repr`, which trusts `new_checked` and cannot fail) equal each
    /// header's own checked parse: every slice `repr` reads is long enough, and the
    /// BTH-only shortcut leaves out only headers the opcode does not have.
    #[test]
    fn every_opcode_at_its_boundary_lengths_is_refused_or_reads_as_each_header_parses() {
        for op in 0..=255u8 {
            let info = Opcode(op).info();
            let end = ExtLayout::of_opcode(Opcode(op)).end;
            for n in [end + len::ICRC - 1, end + len::ICRC, end + len::ICRC + 1] {
                // Patterned bytes; TVer and the pad count 0.
                let mut b: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(37) ^ 0xa5).collect();
                b[0] = op;
                b[1] &= 0xc0;
                let accepted = match info {
                    None => false,
                    Some(i) => n == end + len::ICRC || (n > end + len::ICRC && i.has_payload),
                };
                let p = IbPacket::new_checked(&b[..]);
                assert_eq!(p.is_ok(), accepted, "opcode {op:#04x}, {n} bytes");
                if let Ok(p) = p {
                    crate::fuzzing::repr_matches_each_parse(&p, &p.repr());
                }
            }
        }
    }

    fn repr_for(op: Opcode) -> IbPacketRepr {
        let info = op.info().unwrap();
        let h = info.headers;
        let mut r = IbPacketRepr::new(BthRepr::new(op, 0x12_3456, Psn::new(0xff_fffe)));
        r.bth.ack_req = true;
        r.deth = h.deth.then_some(DethRepr {
            qkey: 0x1111_2222,
            src_qp: 0x00_0042,
        });
        r.reth = h.reth.then_some(RethRepr {
            va: 0xdead_beef_0000_1000,
            rkey: 0x1234,
            dma_len: 4096,
        });
        r.atomic_eth = h.atomic_eth.then_some(AtomicEthRepr {
            va: 0x1000,
            rkey: 7,
            swap_add: 1,
            compare: 2,
        });
        r.aeth = h.aeth.then_some(AethRepr {
            syndrome: Syndrome::Nak(NakCode::REMOTE_ACCESS_ERROR),
            msn: 9,
        });
        r.atomic_ack_eth = h.atomic_ack_eth.then_some(AtomicAckEthRepr { orig: 77 });
        r.imm = h.imm_dt.then_some(0xcafe_f00d);
        r.ieth = h.ieth.then_some(0x0bad_cafe);
        r
    }

    #[test]
    fn every_opcode_round_trips() {
        for op in Opcode::ALL {
            let r = repr_for(op);
            let payload: &[u8] = if op.info().unwrap().has_payload {
                b"hello"
            } else {
                b""
            };
            let mut buf = [0u8; 128];
            let n = r.emit(&mut buf, payload).unwrap();
            assert_eq!(n, r.buffer_len(payload.len()));
            let pkt = IbPacket::new_checked(&buf[..n]).unwrap();
            assert_eq!(pkt.payload(), payload, "{op}");
            let mut back = IbPacketRepr::parse(&pkt).unwrap();
            assert_eq!(
                back.bth.pad_count as usize,
                IbPacketRepr::pad_for(payload.len())
            );
            back.bth.pad_count = 0;
            assert_eq!(back, r, "{op}");
        }
    }

    #[test]
    fn write_first_layout_is_bth_reth_payload_pad_icrc() {
        let r = repr_for(Opcode::RC_WRITE_FIRST);
        let mut buf = [0u8; 64];
        let n = r.emit(&mut buf, &[0xaa; 3]).unwrap();
        assert_eq!(n, 12 + 16 + 3 + 1 + 4);
        assert_eq!(buf[1] >> 4 & 3, 1, "pad count 1 in BTH byte 1");
        assert_eq!(&buf[12..20], &0xdead_beef_0000_1000u64.to_be_bytes());
        assert_eq!(&buf[28..32], &[0xaa, 0xaa, 0xaa, 0]);
    }

    #[test]
    fn icrc_is_little_endian_trailer() {
        let r = repr_for(Opcode::RC_SEND_ONLY);
        let mut buf = [0u8; 32];
        let n = r.emit(&mut buf, b"abcd").unwrap();
        let mut p = IbPacket::new_checked(&mut buf[..n]).unwrap();
        p.set_icrc(0x0403_0201);
        assert_eq!(p.icrc(), 0x0403_0201);
        assert_eq!(&buf[n - 4..n], &[1, 2, 3, 4]);
    }

    #[test]
    fn rejects_inconsistent_input() {
        let mut buf = [0u8; 64];
        let n = repr_for(Opcode::RC_ACK).emit(&mut buf, &[]).unwrap();
        assert_eq!(n, 12 + 4 + 4);
        // truncated inside the AETH
        assert!(matches!(
            IbPacket::new_checked(&buf[..n - 1]),
            Err(Error::Truncated { .. })
        ));
        // an ACK with payload bytes
        assert_eq!(
            IbPacket::new_checked(&buf[..n + 4]).unwrap_err(),
            Error::Length {
                header: Header::Bth,
                field: Field::Payload,
                value: 4
            }
        );
        // unknown opcode
        let mut bad = buf;
        bad[0] = 0x15;
        assert!(matches!(
            IbPacket::new_checked(&bad[..n]),
            Err(Error::Unsupported {
                header: Header::Bth,
                field: Field::Opcode,
                value: 0x15
            })
        ));
        // pad count larger than the payload
        let n = repr_for(Opcode::RC_SEND_ONLY).emit(&mut buf, &[1]).unwrap();
        assert!(IbPacket::new_checked(&buf[..n]).is_ok());
        let mut bad = buf;
        bad[1] |= 0x30;
        assert_eq!(
            IbPacket::new_checked(&bad[..12 + 2 + 4]).unwrap_err(),
            Error::Field {
                header: Header::Bth,
                field: Field::PadCount,
                value: 3
            }
        );
        // emit refuses a repr whose headers disagree with its opcode
        let mut r = repr_for(Opcode::RC_SEND_ONLY);
        r.reth = Some(RethRepr {
            va: 0,
            rkey: 0,
            dma_len: 0,
        });
        assert!(r.emit(&mut buf, &[]).is_err());
        // and payload on a READ request
        assert_eq!(
            repr_for(Opcode::RC_READ_REQUEST).emit(&mut buf, &[1]),
            Err(Error::Length {
                header: Header::Bth,
                field: Field::Payload,
                value: 1
            })
        );
        // and a buffer that is too short
        assert!(matches!(
            repr_for(Opcode::RC_SEND_ONLY).emit(&mut buf[..10], &[]),
            Err(Error::Truncated { .. })
        ));
    }

    #[test]
    fn emit_headers_leaves_room_for_a_gathered_payload() {
        let r = repr_for(Opcode::RC_WRITE_FIRST);
        let mut a = [0u8; 64];
        let n = r.emit(&mut a, b"abcdef").unwrap();
        let mut b = [0xeeu8; 64];
        let at = r.emit_headers(&mut b, 6).unwrap();
        assert_eq!(at, 28..34);
        b[at.start..at.start + 2].copy_from_slice(b"ab");
        b[at.start + 2..at.end].copy_from_slice(b"cdef");
        assert_eq!(a[..n], b[..n]);
        let mut p = IbPacket::new_checked(&mut b[..n]).unwrap();
        p.payload_mut()[0] = b'A';
        assert_eq!(p.payload(), b"Abcdef");
    }

    #[test]
    fn view_accessors_agree_with_the_repr() {
        for op in Opcode::ALL {
            let r = repr_for(op);
            let payload: &[u8] = if op.info().unwrap().has_payload {
                b"xyz"
            } else {
                b""
            };
            let mut buf = [0u8; 128];
            let n = r.emit(&mut buf, payload).unwrap();
            let p = IbPacket::new_checked(&buf[..n]).unwrap();
            assert_eq!(p.reth(), r.reth, "{op}");
            assert_eq!(p.aeth(), r.aeth, "{op}");
            assert_eq!(p.deth(), r.deth, "{op}");
            assert_eq!(p.atomic_eth(), r.atomic_eth, "{op}");
            assert_eq!(p.atomic_ack_eth(), r.atomic_ack_eth, "{op}");
            assert_eq!(p.imm(), r.imm, "{op}");
            assert_eq!(p.ieth(), r.ieth, "{op}");
        }
    }

    #[test]
    fn checked_view_drops_other_header_versions_and_emit_refuses_wide_fields() {
        let mut buf = [0u8; 64];
        let n = repr_for(Opcode::RC_SEND_ONLY)
            .emit(&mut buf, b"abcd")
            .unwrap();
        buf[1] |= 0x01; // TVer 1
        assert_eq!(
            IbPacket::new_checked(&buf[..n]).unwrap_err(),
            Error::Field {
                header: Header::Bth,
                field: Field::TVer,
                value: 1
            }
        );
        let mut r = repr_for(Opcode::RC_SEND_ONLY);
        r.bth.dest_qp = 1 << 24;
        assert_eq!(
            r.emit(&mut buf, b""),
            Err(Error::Field {
                header: Header::Bth,
                field: Field::DestQp,
                value: 1 << 24
            })
        );
        let mut r = repr_for(Opcode::RC_ACK);
        r.aeth = Some(AethRepr {
            syndrome: Syndrome::Ack { credit_code: 0x3f },
            msn: 0,
        });
        assert!(r.emit(&mut buf, b"").is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = IbPacket::new_checked(&bytes[..]) {
                let _ = p.payload();
                let _ = p.icrc();
                if let Ok(r) = IbPacketRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len(p.payload().len())];
                    let n = r.emit(&mut out, p.payload()).unwrap();
                    let q = IbPacket::new_checked(&out[..n]).unwrap();
                    let mut back = IbPacketRepr::parse(&q).unwrap();
                    // emit recomputes the pad count from the payload length
                    back.bth.pad_count = r.bth.pad_count;
                    prop_assert_eq!(back, r);
                }
            }
        }

        #[test]
        fn round_trip_any_payload(op_i in 0usize..38, payload in proptest::collection::vec(any::<u8>(), 0..300),
                                  qpn in 0u32..(1 << 24), psn in 0u32..(1 << 24)) {
            let op = Opcode::ALL[op_i];
            let mut r = repr_for(op);
            r.bth.dest_qp = qpn;
            r.bth.psn = Psn::new(psn);
            let payload = if op.info().unwrap().has_payload { payload } else { Vec::new() };
            let mut buf = vec![0u8; r.buffer_len(payload.len())];
            let n = r.emit(&mut buf, &payload).unwrap();
            prop_assert_eq!(n % 4, 0);
            let p = IbPacket::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(p.payload(), &payload[..]);
            let mut back = IbPacketRepr::parse(&p).unwrap();
            back.bth.pad_count = 0;
            prop_assert_eq!(back, r);
        }
    }

    fn arb_reth() -> impl Strategy<Value = Option<RethRepr>> {
        (any::<u64>(), any::<u32>(), any::<u32>())
            .prop_map(|(va, rkey, dma_len)| Some(RethRepr { va, rkey, dma_len }))
    }

    fn arb_atomic() -> impl Strategy<Value = Option<AtomicEthRepr>> {
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(va, rkey, swap_add, compare)| {
                Some(AtomicEthRepr {
                    va,
                    rkey,
                    swap_add,
                    compare,
                })
            },
        )
    }

    proptest! {
        /// `emit_bth_only` is `emit_headers` without optional fields: same result, same
        /// bytes written, for every opcode, with and without DETH, buffers short and long.
        #[test]
        fn emit_bth_only_is_emit_headers_without_optional_fields(
            op in prop_oneof![3 => (0usize..38).prop_map(|i| Opcode::ALL[i]), 1 => any::<u8>().prop_map(Opcode)],
            pkey in any::<u16>(),
            dest_qp in any::<u32>(),
            deth in prop_oneof![3 => Just(None), 1 => (any::<u32>(), 0u32..(1 << 24)).prop_map(Some)],
            solicited in any::<bool>(),
            ack_req in any::<bool>(),
            psn in 0u32..(1 << 24),
            payload_len in prop_oneof![0usize..8, 0usize..5000],
            size in prop_oneof![0usize..40, 0usize..5100],
        ) {
            let deth = deth.map(|(qkey, src_qp)| DethRepr { qkey, src_qp });
            let t = PacketTemplate::new(pkey, dest_qp, deth).unwrap();
            let psn = Psn::new(psn);
            let f = PacketFields { opcode: op, solicited, ack_req, psn, reth: None, atomic_eth: None, aeth: None, atomic_ack_eth: None, imm: None, payload_len };
            let (mut a, mut b) = (vec![0xa5u8; size], vec![0xa5u8; size]);
            let general = t.emit_headers(&mut a, &f);
            let fast = t.emit_bth_only(&mut b, op, solicited, ack_req, psn, payload_len);
            prop_assert_eq!(general, fast);
            prop_assert_eq!(a, b);
        }
    }

    proptest! {
        /// The template path and the checked path write the same bytes, return the
        /// same payload range, and refuse the same requests with the same error.
        #[test]
        fn packet_template_emits_what_the_checked_path_emits(
            op in prop_oneof![6 => (0usize..38).prop_map(|i| Opcode::ALL[i]), 1 => any::<u8>().prop_map(Opcode)],
            pkey in any::<u16>(),
            dest_qp in any::<u32>(),
            deth in (any::<u32>(), 0u32..(1 << 24)).prop_map(Some),
            follow in any::<u8>(),
            solicited in any::<bool>(),
            ack_req in any::<bool>(),
            psn in 0u32..(1 << 24),
            reth in arb_reth(),
            atomic_eth in arb_atomic(),
            imm in any::<u32>().prop_map(Some),
            aeth in (any::<u8>(), any::<u8>(), 0u32..(1 << 25)).prop_map(|(k, v, msn)| {
                let syndrome = match k % 4 {
                    0 => Syndrome::Ack { credit_code: v % 40 },
                    1 => Syndrome::RnrNak { timer: v % 40 },
                    2 => Syndrome::Nak(NakCode(v % 8)),
                    _ => Syndrome::Reserved(v),
                };
                Some(AethRepr { syndrome, msn })
            }),
            orig in any::<u64>(),
            payload_len in prop_oneof![0usize..8, 0usize..5000],
            slack in -8isize..64,
        ) {
            // Mostly the headers the opcode names (so most cases emit), sometimes a
            // random subset (so the refusals are compared too).
            let want = op.info().map(|i| i.headers).filter(|_| follow % 4 != 0);
            let pick = |bit: u8, named: Option<bool>| named.unwrap_or(follow & bit != 0);
            let deth = deth.filter(|_| pick(16, want.map(|h| h.deth)));
            let reth = reth.filter(|_| pick(32, want.map(|h| h.reth)));
            let atomic_eth = atomic_eth.filter(|_| pick(64, want.map(|h| h.atomic_eth)));
            let imm = imm.filter(|_| pick(128, want.map(|h| h.imm_dt)));
            let aeth = aeth.filter(|_| pick(4, want.map(|h| h.aeth)));
            let atomic_ack_eth = Some(AtomicAckEthRepr { orig })
                .filter(|_| pick(8, want.map(|h| h.atomic_ack_eth)));
            let payload_len = if op.info().is_some_and(|i| !i.has_payload) && follow % 8 != 1 { 0 } else { payload_len };
            let deth = deth.map(|(qkey, src_qp)| DethRepr { qkey, src_qp });
            let t = PacketTemplate::new(pkey, dest_qp, deth).unwrap();
            let f = PacketFields { opcode: op, solicited, ack_req, psn: Psn::new(psn), reth, atomic_eth, aeth, atomic_ack_eth, imm, payload_len };
            let mut r = IbPacketRepr::new(BthRepr::new(op, dest_qp, Psn::new(psn)));
            r.bth.pkey = pkey;
            r.bth.solicited = solicited;
            r.bth.ack_req = ack_req;
            r.deth = deth;
            r.reth = reth;
            r.atomic_eth = atomic_eth;
            r.aeth = aeth;
            r.atomic_ack_eth = atomic_ack_eth;
            r.imm = imm;
            // Around the size the request needs (when its opcode is known).
            let need = r.header_len().max(len::BTH) + payload_len + IbPacketRepr::pad_for(payload_len) + len::ICRC;
            let size = need.saturating_add_signed(slack);
            let (mut a, mut b) = (vec![0xa5u8; size], vec![0x5au8; size]);
            let checked = r.emit_headers(&mut a, payload_len);
            let templated = t.emit_headers(&mut b, &f);
            if op == Opcode::CNP {
                // Not a request: the checked path writes a CNP, the template refuses it.
                prop_assert!(templated.is_err());
                prop_assert!(b.iter().all(|&x| x == 0x5a));
                return Ok(());
            }
            prop_assert_eq!(&checked, &templated);
            let written = match &checked {
                Ok(at) => {
                    // Everything but the payload, which neither path writes.
                    prop_assert_eq!(&a[..at.start], &b[..at.start]);
                    let total = at.end + IbPacketRepr::pad_for(payload_len) + len::ICRC;
                    prop_assert_eq!(&a[at.end..total], &b[at.end..total]);
                    prop_assert!(a[at.clone()].iter().all(|&x| x == 0xa5));
                    prop_assert!(b[at.clone()].iter().all(|&x| x == 0x5a));
                    total
                }
                // An AETH that does not fit is found after the headers before it were
                // written (by both paths alike); every other refusal writes nothing.
                Err(Error::Field { header: Header::Aeth, .. }) => size,
                Err(_) => 0,
            };
            // Neither writes past the packet (nor anything on a refusal).
            prop_assert!(a[written..].iter().all(|&x| x == 0xa5));
            prop_assert!(b[written..].iter().all(|&x| x == 0x5a));
            if checked.is_ok() {
                prop_assert!(t.is_for(pkey, dest_qp) == deth.is_none());
            }
        }
    }

    #[test]
    fn a_packet_template_refuses_a_wide_deth_source_qp() {
        let deth = DethRepr {
            qkey: 1,
            src_qp: 1 << 24,
        };
        assert!(PacketTemplate::new(0xffff, 5, Some(deth)).is_err());
    }
}
