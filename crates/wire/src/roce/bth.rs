//! The Base Transport Header (IBTA Vol 1 §9.2, 12 bytes).
//!
//! ```text
//!  0       1                2               4            5         8        9         12
//!  opcode | SE M Pad TVer | P_Key         | F B resv6 | DestQP  | A resv7 | PSN      |
//! ```

use super::opcode::{len, Opcode};
use super::psn::Psn;
use crate::{check_len, Bytes, Error, Field, Header, Result};

mod field {
    use crate::Bytes as Field;
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1; // SE(7) M(6) PadCnt(5:4) TVer(3:0)
    pub const PKEY: Field = 2..4;
    pub const FECN_BECN: usize = 4; // F(7) B(6) resv6; the byte the ICRC masks
    pub const DEST_QP: Field = 5..8;
    pub const ACK_REQ: usize = 8; // A(7) resv7
    pub const PSN: Field = 9..12;
}

/// Read a 24-bit big-endian field.
#[inline]
pub(crate) fn get_u24(b: &[u8], f: Bytes) -> u32 {
    let s = &b[f];
    u32::from(s[0]) << 16 | u32::from(s[1]) << 8 | u32::from(s[2])
}

/// Write a 24-bit big-endian field; the top byte of `v` is dropped.
#[inline]
pub(crate) fn set_u24(b: &mut [u8], f: Bytes, v: u32) {
    let s = &mut b[f];
    s[0] = (v >> 16) as u8;
    s[1] = (v >> 8) as u8;
    s[2] = v as u8;
}

/// The largest 24-bit queue pair number.
pub const QPN_MASK: u32 = 0x00ff_ffff;

/// The default partition key (full membership, default partition).
pub const DEFAULT_PKEY: u16 = 0xffff;

/// A zero-copy view of a BTH at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Bth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Bth<T> {
    /// Wrap without checking the length; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Bth<T> {
        Bth { buffer }
    }

    /// Wrap after checking that a whole BTH fits.
    pub fn new_checked(buffer: T) -> Result<Bth<T>> {
        let b = Bth::new_unchecked(buffer);
        b.check_len()?;
        Ok(b)
    }

    /// Check that the buffer holds a whole BTH.
    pub fn check_len(&self) -> Result<()> {
        check_len(Header::Bth, self.buffer.as_ref().len(), len::BTH)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Opcode.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.buffer.as_ref()[field::OPCODE])
    }
    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }
    /// Migration request.
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }
    /// Pad count: bytes of padding after the payload (0..=3).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0x3
    }
    /// Transport header version (0 in this version of the spec).
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0f
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PKEY];
        u16::from_be_bytes([b[0], b[1]])
    }
    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x80 != 0
    }
    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x40 != 0
    }
    /// Destination queue pair number.
    pub fn dest_qp(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::DEST_QP)
    }
    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }
    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(get_u24(self.buffer.as_ref(), field::PSN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    /// Set the opcode.
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.0;
    }
    /// Set SE, M, PadCnt and TVer together (the byte they share).
    pub fn set_flags(&mut self, solicited: bool, mig_req: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] = (u8::from(solicited) << 7)
            | (u8::from(mig_req) << 6)
            | ((pad_count & 0x3) << 4)
            | (tver & 0x0f);
    }
    /// Set the partition key.
    pub fn set_pkey(&mut self, pkey: u16) {
        self.buffer.as_mut()[field::PKEY].copy_from_slice(&pkey.to_be_bytes());
    }
    /// Set FECN and BECN (reserved bits cleared).
    pub fn set_fecn_becn(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::FECN_BECN] = (u8::from(fecn) << 7) | (u8::from(becn) << 6);
    }
    /// Set the destination QP (24 bits).
    pub fn set_dest_qp(&mut self, qpn: u32) {
        set_u24(self.buffer.as_mut(), field::DEST_QP, qpn);
    }
    /// Set the AckReq bit (reserved bits cleared).
    pub fn set_ack_req(&mut self, ack_req: bool) {
        self.buffer.as_mut()[field::ACK_REQ] = u8::from(ack_req) << 7;
    }
    /// Set the PSN.
    pub fn set_psn(&mut self, psn: Psn) {
        set_u24(self.buffer.as_mut(), field::PSN, psn.value());
    }
}

/// The BTH's fields as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub mig_req: bool,
    /// Pad count (0..=3); [`super::IbPacketRepr::emit`] sets it from the payload length.
    pub pad_count: u8,
    /// Transport header version.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN.
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN.
    pub psn: Psn,
}

impl BthRepr {
    /// A BTH with the defaults rdma_rxe sends: default P_Key, version 0, no flags.
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: Psn) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: dest_qp & QPN_MASK,
            ack_req: false,
            psn,
        }
    }

    /// Parse a checked view. TVer must be 0: IBTA §9.2.1 says a packet with another
    /// version is silently dropped.
    pub fn parse<T: AsRef<[u8]>>(bth: &Bth<T>) -> Result<BthRepr> {
        bth.check_len()?;
        if bth.tver() != 0 {
            return Err(Error::Field {
                header: Header::Bth,
                field: Field::TVer,
                value: u32::from(bth.tver()),
            });
        }
        Ok(BthRepr::read(bth))
    }

    /// The fields of a view whose length and version were checked ([`BthRepr::parse`],
    /// or [`super::IbPacket::new_checked`], which checks both).
    ///
    /// Read through the accessors over the header taken as one 12-byte array: one
    /// length check, where each accessor on the unsized slice checked its own
    /// (~20 instructions a received packet; callgrind, `msg_rate`). A fixed length
    /// lets the compiler drop the accessors' checks, so the bit layout stays written
    /// once, in the accessors.
    #[inline]
    pub(crate) fn read<T: AsRef<[u8]>>(bth: &Bth<T>) -> BthRepr {
        let b: &[u8; len::BTH] = bth
            .buffer
            .as_ref()
            .first_chunk()
            .expect("a BTH view shorter than a BTH");
        let v = Bth::new_unchecked(b);
        BthRepr {
            opcode: v.opcode(),
            solicited: v.solicited(),
            mig_req: v.mig_req(),
            pad_count: v.pad_count(),
            tver: v.tver(),
            pkey: v.pkey(),
            fecn: v.fecn(),
            becn: v.becn(),
            dest_qp: v.dest_qp(),
            ack_req: v.ack_req(),
            psn: v.psn(),
        }
    }

    /// Bytes [`BthRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        len::BTH
    }

    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bth: &mut Bth<T>) {
        bth.set_opcode(self.opcode);
        bth.set_flags(self.solicited, self.mig_req, self.pad_count, self.tver);
        bth.set_pkey(self.pkey);
        bth.set_fecn_becn(self.fecn, self.becn);
        bth.set_dest_qp(self.dest_qp);
        bth.set_ack_req(self.ack_req);
        bth.set_psn(self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An RC SEND Only to QP 0x000011, PSN 0x123456, AckReq, SE, pad 2, default P_Key,
    // laid out by hand from IBTA Figure 100.
    const BYTES: [u8; 12] = [
        0x04, 0xa0, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x12, 0x34, 0x56,
    ];

    #[test]
    fn decode_hand_checked_bytes() {
        let b = Bth::new_checked(&BYTES[..]).unwrap();
        assert_eq!(b.opcode(), Opcode::RC_SEND_ONLY);
        assert!(b.solicited());
        assert!(!b.mig_req());
        assert_eq!(b.pad_count(), 2);
        assert_eq!(b.pkey(), 0xffff);
        assert_eq!(b.dest_qp(), 0x11);
        assert!(b.ack_req());
        assert_eq!(b.psn(), Psn::new(0x123456));
    }

    #[test]
    fn emit_reproduces_bytes() {
        let repr = BthRepr::parse(&Bth::new_checked(&BYTES[..]).unwrap()).unwrap();
        let mut out = [0u8; 12];
        repr.emit(&mut Bth::new_unchecked(&mut out[..]));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn short_buffer_is_an_error() {
        assert_eq!(
            Bth::new_checked(&BYTES[..11]).unwrap_err(),
            Error::Truncated {
                header: Header::Bth,
                need: 12,
                have: 11
            }
        );
    }

    #[test]
    fn nonzero_tver_is_rejected() {
        let mut b = BYTES;
        b[1] |= 0x01;
        assert_eq!(
            BthRepr::parse(&Bth::new_checked(&b[..]).unwrap()),
            Err(Error::Field {
                header: Header::Bth,
                field: Field::TVer,
                value: 1
            })
        );
    }
}
