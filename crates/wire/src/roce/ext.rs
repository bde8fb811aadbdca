//! The extension transport headers that follow the BTH (IBTA Vol 1 §9.3–§9.5):
//! RETH, AETH (with its syndrome decoded), AtomicETH, AtomicAckETH, ImmDt, IETH, DETH.
//!
//! These are small fixed-size headers; each is a plain `Repr` with `parse(&[u8])` and
//! `emit(&mut [u8])` over exactly its own bytes. The [`super::IbPacket`] view finds
//! them through the opcode table and hands each its slice, so the length checks are
//! made once there.

use super::bth::{get_u24, set_u24, QPN_MASK};
use super::opcode::len;
use crate::{check_len, Error, Field, Header, Result};

pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// RDMA Extended Transport Header (§9.3.3): the remote buffer of a WRITE or READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RethRepr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole DMA (the message), in bytes.
    pub dma_len: u32,
}

impl RethRepr {
    /// Parse from the first 16 bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<RethRepr> {
        check_len(Header::Reth, b.len(), len::RETH)?;
        Ok(RethRepr::read(b))
    }
    /// [`RethRepr::parse`] of bytes known to be long enough (a checked packet's).
    #[inline]
    pub(crate) fn read(b: &[u8]) -> RethRepr {
        RethRepr {
            va: be_u64(b, 0),
            rkey: be_u32(b, 8),
            dma_len: be_u32(b, 12),
        }
    }
    /// Write into the first 16 bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        check_len(Header::Reth, b.len(), len::RETH)?;
        b[0..8].copy_from_slice(&self.va.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..16].copy_from_slice(&self.dma_len.to_be_bytes());
        Ok(())
    }
}

/// The NAK codes of an AETH syndrome (§9.7.5.2.8, Table 43). Open: reserved codes
/// survive a parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NakCode(pub u8);

impl NakCode {
    /// PSN sequence error: the responder expected an earlier PSN.
    pub const PSN_SEQUENCE_ERROR: NakCode = NakCode(0);
    /// Invalid request (unsupported opcode, bad length, ...).
    pub const INVALID_REQUEST: NakCode = NakCode(1);
    /// Remote access error (rkey, bounds, access rights, protection domain).
    pub const REMOTE_ACCESS_ERROR: NakCode = NakCode(2);
    /// Remote operational error.
    pub const REMOTE_OPERATIONAL_ERROR: NakCode = NakCode(3);
    /// Invalid RD request.
    pub const INVALID_RD_REQUEST: NakCode = NakCode(4);
}

/// The syndrome of an AETH, decoded (§9.7.5.2.8, Table 42).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement carrying an end-to-end credit code (Table 44; 31 means
    /// "credits invalid": the responder does not limit the requester).
    Ack {
        /// The 5-bit credit code; see [`credits_from_code`].
        credit_code: u8,
    },
    /// Receiver not ready: retry after the time the 5-bit code names (Table 45).
    RnrNak {
        /// The 5-bit timer code; see [`rnr_timer_micros`].
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// The reserved type (0b10) or the reserved top bit was set.
    Reserved(u8),
}

impl Syndrome {
    /// The raw 8-bit syndrome.
    pub const fn to_u8(self) -> u8 {
        match self {
            Syndrome::Ack { credit_code } => credit_code & 0x1f,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1f),
            Syndrome::Nak(code) => 0x60 | (code.0 & 0x1f),
            Syndrome::Reserved(raw) => raw,
        }
    }

    /// True when [`Syndrome::to_u8`] encodes this value without losing bits: the
    /// credit code, timer and NAK code fit 5 bits, and a `Reserved` value really is one
    /// of the reserved encodings (bit 7 set, or type bits `0b10`).
    pub const fn is_encodable(self) -> bool {
        match self {
            Syndrome::Ack { credit_code: v } | Syndrome::RnrNak { timer: v } => v <= 0x1f,
            Syndrome::Nak(code) => code.0 <= 0x1f,
            Syndrome::Reserved(raw) => raw & 0x80 != 0 || (raw >> 5) & 0x3 == 2,
        }
    }

    /// Decode a raw syndrome.
    pub const fn from_u8(raw: u8) -> Syndrome {
        if raw & 0x80 != 0 {
            return Syndrome::Reserved(raw);
        }
        let value = raw & 0x1f;
        match (raw >> 5) & 0x3 {
            0 => Syndrome::Ack { credit_code: value },
            1 => Syndrome::RnrNak { timer: value },
            3 => Syndrome::Nak(NakCode(value)),
            _ => Syndrome::Reserved(raw),
        }
    }
}

/// The credit code that means "no end-to-end flow control" (Table 44).
pub const CREDITS_INVALID: u8 = 31;

/// Credits a credit code stands for (Table 44); `None` for [`CREDITS_INVALID`].
pub const fn credits_from_code(code: u8) -> Option<u32> {
    const TABLE: [u32; 31] = [
        0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
        2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
    ];
    if (code as usize) < TABLE.len() {
        Some(TABLE[code as usize])
    } else {
        None
    }
}

/// The largest credit code whose credit count does not exceed `credits` (what a
/// responder advertises for `credits` free receive WQEs).
///
/// Computed, not searched: above 1, Table 44 holds 2^b at code 2b and 3·2^(b-1) at
/// code 2b + 1. A responder encodes this in every ACK, and with one message in flight
/// per QP every message has its own ACK; the table walk down from code 30 cost about
/// 200 instructions an ACK for the small counts a QP usually has (callgrind).
pub const fn code_from_credits(credits: u32) -> u8 {
    if credits >= 32768 {
        return 30;
    }
    if credits < 2 {
        return credits as u8;
    }
    // b = floor(log2(credits)), 1..=14.
    let b = 31 - credits.leading_zeros();
    let code = 2 * b + (credits >= 3 << (b - 1)) as u32;
    code as u8
}

/// Microseconds an RNR NAK timer code asks the requester to wait (Table 45).
/// Code 0 is the longest, 655.36 ms.
pub const fn rnr_timer_micros(code: u8) -> u32 {
    const TABLE: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    TABLE[(code & 0x1f) as usize]
}

/// ACK Extended Transport Header (§9.3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// Syndrome.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// Parse from the first 4 bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<AethRepr> {
        check_len(Header::Aeth, b.len(), len::AETH)?;
        Ok(AethRepr::read(b))
    }
    /// [`AethRepr::parse`] of bytes known to be long enough (a checked packet's).
    #[inline]
    pub(crate) fn read(b: &[u8]) -> AethRepr {
        AethRepr {
            syndrome: Syndrome::from_u8(b[0]),
            msn: get_u24(b, 1..4),
        }
    }
    /// Write into the first 4 bytes of `b`. A syndrome field wider than 5 bits or an
    /// MSN wider than 24 is an error, not a silent truncation (a credit code of 0x3f
    /// would otherwise go out as 31, "no flow control").
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        check_len(Header::Aeth, b.len(), len::AETH)?;
        if !self.syndrome.is_encodable() {
            let value = match self.syndrome {
                Syndrome::Ack { credit_code: v } | Syndrome::RnrNak { timer: v } => v,
                Syndrome::Nak(code) => code.0,
                Syndrome::Reserved(raw) => raw,
            };
            return Err(Error::Field {
                header: Header::Aeth,
                field: Field::Syndrome,
                value: u32::from(value),
            });
        }
        if self.msn > QPN_MASK {
            return Err(Error::Field {
                header: Header::Aeth,
                field: Field::Msn,
                value: self.msn,
            });
        }
        b[0] = self.syndrome.to_u8();
        set_u24(b, 1..4, self.msn);
        Ok(())
    }
}

/// Atomic Extended Transport Header (§9.3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    /// Remote virtual address (8-byte aligned for a valid request).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value (CmpSwap) or addend (FetchAdd).
    pub swap_add: u64,
    /// Compare value (CmpSwap only).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Parse from the first 28 bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<AtomicEthRepr> {
        check_len(Header::AtomicEth, b.len(), len::ATOMIC_ETH)?;
        Ok(AtomicEthRepr::read(b))
    }
    /// [`AtomicEthRepr::parse`] of bytes known to be long enough (a checked packet's).
    #[inline]
    pub(crate) fn read(b: &[u8]) -> AtomicEthRepr {
        AtomicEthRepr {
            va: be_u64(b, 0),
            rkey: be_u32(b, 8),
            swap_add: be_u64(b, 12),
            compare: be_u64(b, 20),
        }
    }
    /// Write into the first 28 bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        check_len(Header::AtomicEth, b.len(), len::ATOMIC_ETH)?;
        b[0..8].copy_from_slice(&self.va.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..20].copy_from_slice(&self.swap_add.to_be_bytes());
        b[20..28].copy_from_slice(&self.compare.to_be_bytes());
        Ok(())
    }
}

/// Atomic Acknowledge Extended Transport Header (§9.5.3): the original remote value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicAckEthRepr {
    /// The value at the target before the atomic operation.
    pub orig: u64,
}

impl AtomicAckEthRepr {
    /// Parse from the first 8 bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<AtomicAckEthRepr> {
        check_len(Header::AtomicAckEth, b.len(), len::ATOMIC_ACK_ETH)?;
        Ok(AtomicAckEthRepr::read(b))
    }
    /// [`AtomicAckEthRepr::parse`] of bytes known to be long enough (a checked packet's).
    #[inline]
    pub(crate) fn read(b: &[u8]) -> AtomicAckEthRepr {
        AtomicAckEthRepr { orig: be_u64(b, 0) }
    }
    /// Write into the first 8 bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        check_len(Header::AtomicAckEth, b.len(), len::ATOMIC_ACK_ETH)?;
        b[0..8].copy_from_slice(&self.orig.to_be_bytes());
        Ok(())
    }
}

/// Datagram Extended Transport Header (§9.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Parse from the first 8 bytes of `b`. The reserved byte is ignored on receipt.
    pub fn parse(b: &[u8]) -> Result<DethRepr> {
        check_len(Header::Deth, b.len(), len::DETH)?;
        Ok(DethRepr::read(b))
    }
    /// [`DethRepr::parse`] of bytes known to be long enough (a checked packet's).
    #[inline]
    pub(crate) fn read(b: &[u8]) -> DethRepr {
        DethRepr {
            qkey: be_u32(b, 0),
            src_qp: get_u24(b, 5..8),
        }
    }
    /// Write into the first 8 bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        check_len(Header::Deth, b.len(), len::DETH)?;
        if self.src_qp > QPN_MASK {
            return Err(Error::Field {
                header: Header::Deth,
                field: Field::SrcQp,
                value: self.src_qp,
            });
        }
        b[0..4].copy_from_slice(&self.qkey.to_be_bytes());
        b[4] = 0;
        set_u24(b, 5..8, self.src_qp);
        Ok(())
    }
}

/// Parse a 4-byte big-endian header (ImmDt §9.3.6 or IETH §9.3.7).
pub(crate) fn parse_u32(b: &[u8]) -> Result<u32> {
    check_len(Header::Imm, b.len(), 4)?;
    Ok(be_u32(b, 0))
}

/// [`parse_u32`] of bytes known to be long enough (a checked packet's).
#[inline]
pub(crate) fn read_u32(b: &[u8]) -> u32 {
    be_u32(b, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndrome_round_trip_all_bytes() {
        for raw in 0..=255u8 {
            let s = Syndrome::from_u8(raw);
            assert_eq!(s.to_u8(), raw, "{s:?}");
        }
    }

    #[test]
    fn syndrome_decodes_types() {
        assert_eq!(Syndrome::from_u8(0x1f), Syndrome::Ack { credit_code: 31 });
        assert_eq!(Syndrome::from_u8(0x2e), Syndrome::RnrNak { timer: 14 });
        assert_eq!(
            Syndrome::from_u8(0x60),
            Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR)
        );
        assert_eq!(
            Syndrome::from_u8(0x62),
            Syndrome::Nak(NakCode::REMOTE_ACCESS_ERROR)
        );
        assert_eq!(Syndrome::from_u8(0x41), Syndrome::Reserved(0x41));
        assert_eq!(Syndrome::from_u8(0x80), Syndrome::Reserved(0x80));
    }

    #[test]
    fn credit_codes() {
        assert_eq!(credits_from_code(0), Some(0));
        assert_eq!(credits_from_code(5), Some(6));
        assert_eq!(credits_from_code(30), Some(32768));
        assert_eq!(credits_from_code(31), None);
        assert_eq!(code_from_credits(0), 0);
        assert_eq!(code_from_credits(7), 5);
        assert_eq!(code_from_credits(100_000), 30);
        for code in 0..31u8 {
            assert_eq!(code_from_credits(credits_from_code(code).unwrap()), code);
        }
    }

    /// The computed code is the table's: the largest code whose credits do not exceed
    /// the count, for every count up to past the table's end and a few beyond.
    #[test]
    fn code_from_credits_matches_the_table_search() {
        let search = |credits: u32| {
            (0..31u8)
                .rev()
                .find(|&c| credits_from_code(c).is_some_and(|n| n <= credits))
                .unwrap_or(0)
        };
        for credits in (0..=70_000u32).chain([u32::MAX - 1, u32::MAX, 1 << 20, 1 << 31]) {
            assert_eq!(code_from_credits(credits), search(credits), "{credits}");
        }
    }

    /// IBTA Vol 1 Table 45 as printed, in milliseconds, transcribed independently of
    /// the table in the code.
    const RNR_MS: [&str; 32] = [
        "655.36", "0.01", "0.02", "0.03", "0.04", "0.06", "0.08", "0.12", "0.16", "0.24", "0.32",
        "0.48", "0.64", "0.96", "1.28", "1.92", "2.56", "3.84", "5.12", "7.68", "10.24", "15.36",
        "20.48", "30.72", "40.96", "61.44", "81.92", "122.88", "163.84", "245.76", "327.68",
        "491.52",
    ];

    #[test]
    fn rnr_timer_table_is_ibta_table_45() {
        for (code, ms) in RNR_MS.iter().enumerate() {
            let (whole, frac) = ms.split_once('.').unwrap();
            let micros = whole.parse::<u32>().unwrap() * 1000 + frac.parse::<u32>().unwrap() * 10;
            assert_eq!(rnr_timer_micros(code as u8), micros, "code {code}");
        }
    }

    #[test]
    fn credit_table_is_ibta_table_44() {
        // Table 44: 0..=4 are themselves, then 1.5x / 2x alternating from 6 to 32768.
        let mut expect = vec![0u32, 1, 2, 3, 4];
        let mut p = 4u32;
        while expect.len() < 31 {
            expect.push(p * 3 / 2);
            expect.push(p * 2);
            p *= 2;
        }
        expect.truncate(31);
        for (code, credits) in expect.iter().enumerate() {
            assert_eq!(credits_from_code(code as u8), Some(*credits), "code {code}");
        }
        assert_eq!(credits_from_code(31), None);
    }

    #[test]
    fn aeth_emit_refuses_fields_that_do_not_fit() {
        let mut b = [0u8; 4];
        let ok = AethRepr {
            syndrome: Syndrome::Ack { credit_code: 31 },
            msn: 0xff_ffff,
        };
        assert!(ok.emit(&mut b).is_ok());
        for bad in [
            AethRepr {
                syndrome: Syndrome::Ack { credit_code: 0x3f },
                msn: 0,
            },
            AethRepr {
                syndrome: Syndrome::RnrNak { timer: 32 },
                msn: 0,
            },
            AethRepr {
                syndrome: Syndrome::Nak(NakCode(0x20)),
                msn: 0,
            },
            AethRepr {
                syndrome: Syndrome::Reserved(0x05),
                msn: 0,
            },
            AethRepr {
                syndrome: Syndrome::Ack { credit_code: 1 },
                msn: 1 << 24,
            },
        ] {
            assert!(bad.emit(&mut b).is_err(), "{bad:?}");
        }
        for raw in 0..=255u8 {
            assert!(Syndrome::from_u8(raw).is_encodable(), "{raw:#x}");
        }
    }

    #[test]
    fn rnr_timer_table_ends() {
        assert_eq!(rnr_timer_micros(0), 655_360);
        assert_eq!(rnr_timer_micros(1), 10);
        assert_eq!(rnr_timer_micros(31), 491_520);
        assert_eq!(rnr_timer_micros(0xff), 491_520);
    }

    #[test]
    fn headers_round_trip() {
        let mut b = [0u8; 28];
        let r = RethRepr {
            va: 0x0102_0304_0506_0708,
            rkey: 0xdead_beef,
            dma_len: 4096,
        };
        r.emit(&mut b).unwrap();
        assert_eq!(
            &b[..16],
            &[1, 2, 3, 4, 5, 6, 7, 8, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0x10, 0]
        );
        assert_eq!(RethRepr::parse(&b).unwrap(), r);

        let a = AtomicEthRepr {
            va: 8,
            rkey: 7,
            swap_add: u64::MAX,
            compare: 3,
        };
        a.emit(&mut b).unwrap();
        assert_eq!(AtomicEthRepr::parse(&b).unwrap(), a);

        let d = DethRepr {
            qkey: 0x1111_1111,
            src_qp: 0xabcdef,
        };
        d.emit(&mut b).unwrap();
        assert_eq!(&b[..8], &[0x11, 0x11, 0x11, 0x11, 0, 0xab, 0xcd, 0xef]);
        assert_eq!(DethRepr::parse(&b).unwrap(), d);
        assert!(DethRepr {
            qkey: 0,
            src_qp: 1 << 24
        }
        .emit(&mut b)
        .is_err());

        let e = AethRepr {
            syndrome: Syndrome::RnrNak { timer: 3 },
            msn: 0x00ab_cdef,
        };
        e.emit(&mut b).unwrap();
        assert_eq!(&b[..4], &[0x23, 0xab, 0xcd, 0xef]);
        assert_eq!(AethRepr::parse(&b).unwrap(), e);
    }

    #[test]
    fn short_input_is_an_error() {
        assert!(RethRepr::parse(&[0; 15]).is_err());
        assert!(AtomicEthRepr::parse(&[0; 27]).is_err());
        assert!(AtomicAckEthRepr::parse(&[0; 7]).is_err());
        assert!(AethRepr::parse(&[0; 3]).is_err());
        assert!(DethRepr::parse(&[0; 7]).is_err());
        assert!(parse_u32(&[0; 3]).is_err());
        assert!(RethRepr {
            va: 0,
            rkey: 0,
            dma_len: 0
        }
        .emit(&mut [0; 4])
        .is_err());
    }
}
