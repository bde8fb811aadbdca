//! The wire format: frames inside RC SEND messages.
//!
//! A message (one SEND, one receive buffer) carries one or more frames back to back.
//! Every frame starts with a fixed 24-byte header, numbers in network order:
//!
//! ```text
//!  0      1      2             4                      8
//! +------+------+-------------+----------------------+
//! | magic| kind |   flags     |  code (method/status) |
//! +------+------+-------------+----------------------+
//! |                  request id (u64)                 |
//! +--------------------------+------------------------+
//! |  timeout budget µs (u32) |   payload length (u32) |
//! +--------------------------+------------------------+
//! ```
//!
//! - `magic` is [`MAGIC`] (it doubles as the version: a new layout gets a new magic);
//! - `kind` is a [`Kind`] (an open newtype: unknown kinds survive a parse and are
//!   refused by the state machine, not the parser);
//! - `code` is the method of a request and the status of a response;
//! - `timeout` is the time the caller still grants a request, in microseconds, at the
//!   moment it was sent (0: no deadline). Budgets, not absolute times, because the
//!   two hosts' clocks are not synchronised; the server starts the clock on arrival.
//!
//! The smoltcp pattern: [`Frame::new_checked`] checks the length once, after which no
//! accessor can panic; [`FrameRepr`] is the plain struct with `parse`/`emit`. Every
//! byte comes from a peer that may be hostile.

use std::fmt;

/// The first byte of every frame (weft-rpc wire version 1).
pub const MAGIC: u8 = 0xDA;
/// Bytes in a frame header.
pub const HEADER_LEN: usize = 24;

mod field {
    use std::ops::Range;
    pub const MAGIC: usize = 0;
    pub const KIND: usize = 1;
    pub const FLAGS: Range<usize> = 2..4;
    pub const CODE: Range<usize> = 4..8;
    pub const ID: Range<usize> = 8..16;
    pub const TIMEOUT: Range<usize> = 16..20;
    pub const LEN: Range<usize> = 20..24;
}

/// What a frame is. Open: unknown values parse and print in hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kind(pub u8);

impl Kind {
    /// Client → server: call `code` with the payload.
    pub const REQUEST: Kind = Kind(1);
    /// Server → client: the answer to request `id`, status in `code`.
    pub const RESPONSE: Kind = Kind(2);
    /// Client → server: the caller of request `id` gave up.
    pub const CANCEL: Kind = Kind(3);
    /// Client → server: are you alive?
    pub const PING: Kind = Kind(4);
    /// Server → client: the answer to a ping (same id).
    pub const PONG: Kind = Kind(5);
    /// Server → client: the reply to a message that needed no other answer (every
    /// message is answered by exactly one message: that is the credit return).
    pub const ACK: Kind = Kind(6);
    /// Either way: the real message is too large for the peer's receive buffer; it
    /// waits in the sender's registered memory for an RDMA READ (payload: a
    /// [`Rendezvous`]; `id` names the buffer).
    pub const RNDV: Kind = Kind(7);
    /// Client → server: done reading the server's rendezvous buffer `id`.
    pub const RELEASE: Kind = Kind(8);

    fn name(self) -> Option<&'static str> {
        Some(match self {
            Kind::REQUEST => "REQUEST",
            Kind::RESPONSE => "RESPONSE",
            Kind::CANCEL => "CANCEL",
            Kind::PING => "PING",
            Kind::PONG => "PONG",
            Kind::ACK => "ACK",
            Kind::RNDV => "RNDV",
            Kind::RELEASE => "RELEASE",
            _ => return None,
        })
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Kind({:#04x})", self.0),
        }
    }
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer bytes than a header.
    Truncated {
        /// Bytes there were.
        have: usize,
    },
    /// The first byte is not [`MAGIC`].
    BadMagic(u8),
    /// Flag bits this version does not define.
    UnknownFlags(u16),
    /// The header announces more payload than the message holds.
    PayloadOverrun {
        /// Announced payload bytes.
        len: u32,
        /// Bytes left after the header.
        left: usize,
    },
    /// A rendezvous descriptor of the wrong size or shape.
    BadRendezvous,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated { have } => {
                write!(
                    f,
                    "{have} bytes cannot hold a {HEADER_LEN}-byte frame header"
                )
            }
            FrameError::BadMagic(m) => write!(f, "bad magic {m:#04x} (expected {MAGIC:#04x})"),
            FrameError::UnknownFlags(x) => write!(f, "unknown flag bits {x:#06x}"),
            FrameError::PayloadOverrun { len, left } => {
                write!(f, "payload length {len} overruns the {left} bytes left")
            }
            FrameError::BadRendezvous => f.write_str("malformed rendezvous descriptor"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Flag bits a version-1 frame may carry (none yet: reserved, must be zero).
pub const KNOWN_FLAGS: u16 = 0;

/// A zero-copy view of one frame at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buf: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// A view without checks; accessors may panic on short buffers.
    pub fn new_unchecked(buf: T) -> Frame<T> {
        Frame { buf }
    }

    /// A view of a buffer that holds a whole header and the payload it announces.
    pub fn new_checked(buf: T) -> Result<Frame<T>, FrameError> {
        let f = Frame { buf };
        f.check_len()?;
        Ok(f)
    }

    /// Check the header and that the payload fits in the buffer.
    pub fn check_len(&self) -> Result<(), FrameError> {
        let b = self.buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(FrameError::Truncated { have: b.len() });
        }
        if b[field::MAGIC] != MAGIC {
            return Err(FrameError::BadMagic(b[field::MAGIC]));
        }
        let flags = be16(&b[field::FLAGS]);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(FrameError::UnknownFlags(flags & !KNOWN_FLAGS));
        }
        let len = be32(&b[field::LEN]);
        let left = b.len() - HEADER_LEN;
        if len as usize > left {
            return Err(FrameError::PayloadOverrun { len, left });
        }
        Ok(())
    }

    /// Frame kind.
    pub fn kind(&self) -> Kind {
        Kind(self.buf.as_ref()[field::KIND])
    }
    /// Flag bits.
    pub fn flags(&self) -> u16 {
        be16(&self.buf.as_ref()[field::FLAGS])
    }
    /// Method (requests) or status (responses).
    pub fn code(&self) -> u32 {
        be32(&self.buf.as_ref()[field::CODE])
    }
    /// Request id.
    pub fn id(&self) -> u64 {
        be64(&self.buf.as_ref()[field::ID])
    }
    /// Remaining time budget in µs (0: none).
    pub fn timeout_us(&self) -> u32 {
        be32(&self.buf.as_ref()[field::TIMEOUT])
    }
    /// Payload length.
    pub fn payload_len(&self) -> u32 {
        be32(&self.buf.as_ref()[field::LEN])
    }
    /// The payload.
    pub fn payload(&self) -> &[u8] {
        let n = self.payload_len() as usize;
        &self.buf.as_ref()[HEADER_LEN..HEADER_LEN + n]
    }
    /// Header plus payload.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.payload_len() as usize
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    fn b(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }
    /// Write magic, kind and zero flags.
    pub fn set_start(&mut self, kind: Kind) {
        self.b()[field::MAGIC] = MAGIC;
        self.b()[field::KIND] = kind.0;
        self.b()[field::FLAGS].copy_from_slice(&0u16.to_be_bytes());
    }
    /// Set the code.
    pub fn set_code(&mut self, v: u32) {
        self.b()[field::CODE].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the id.
    pub fn set_id(&mut self, v: u64) {
        self.b()[field::ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the timeout budget.
    pub fn set_timeout_us(&mut self, v: u32) {
        self.b()[field::TIMEOUT].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the payload length.
    pub fn set_payload_len(&mut self, v: u32) {
        self.b()[field::LEN].copy_from_slice(&v.to_be_bytes());
    }
}

/// A frame's header fields as a plain struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Kind.
    pub kind: Kind,
    /// Method or status.
    pub code: u32,
    /// Request id (or rendezvous buffer id).
    pub id: u64,
    /// Remaining budget in µs, 0 for none.
    pub timeout_us: u32,
}

impl Header {
    /// A header of `kind` with everything else zero.
    pub fn new(kind: Kind, id: u64) -> Header {
        Header {
            kind,
            code: 0,
            id,
            timeout_us: 0,
        }
    }

    /// Append this header and `payload` to `out` as one frame.
    pub fn emit(&self, payload: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + HEADER_LEN, 0);
        self.emit_header(&mut out[start..], payload.len());
        out.extend_from_slice(payload);
    }

    /// Write this header for a payload of `payload_len` bytes into `buf[..HEADER_LEN]`.
    pub fn emit_header(&self, buf: &mut [u8], payload_len: usize) {
        let mut f = Frame::new_unchecked(&mut buf[..HEADER_LEN]);
        f.set_start(self.kind);
        f.set_code(self.code);
        f.set_id(self.id);
        f.set_timeout_us(self.timeout_us);
        f.set_payload_len(payload_len as u32);
    }

    /// The header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Header {
        Header {
            kind: f.kind(),
            code: f.code(),
            id: f.id(),
            timeout_us: f.timeout_us(),
        }
    }
}

/// One parsed frame borrowed from a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRepr<'a> {
    /// Header.
    pub header: Header,
    /// Payload.
    pub payload: &'a [u8],
}

/// The frames of one message, in order. Stops at the first malformed frame (yields
/// its error once); a message must hold at least one frame.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    rest: &'a [u8],
    failed: bool,
    first: bool,
}

/// Iterate over the frames of `msg`.
pub fn frames(msg: &[u8]) -> Frames<'_> {
    Frames {
        rest: msg,
        failed: false,
        first: true,
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<FrameRepr<'a>, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || (self.rest.is_empty() && !self.first) {
            return None;
        }
        self.first = false;
        match Frame::new_checked(self.rest) {
            Ok(f) => {
                let header = Header::parse(&f);
                let n = f.total_len();
                let rest = self.rest;
                let payload = &rest[HEADER_LEN..n];
                self.rest = &rest[n..];
                Some(Ok(FrameRepr { header, payload }))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Where a too-large message waits for the peer's RDMA READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rendezvous {
    /// Virtual address in the sender's region.
    pub addr: u64,
    /// The region's rkey.
    pub rkey: u32,
    /// Message length.
    pub len: u32,
}

impl Rendezvous {
    /// Encoded size.
    pub const LEN: usize = 16;

    /// Encode.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Decode a RNDV payload.
    pub fn parse(b: &[u8]) -> Result<Rendezvous, FrameError> {
        if b.len() != Self::LEN {
            return Err(FrameError::BadRendezvous);
        }
        Ok(Rendezvous {
            addr: be64(&b[..8]),
            rkey: be32(&b[8..12]),
            len: be32(&b[12..]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emits_the_documented_bytes_and_parses_them_back() {
        let h = Header {
            kind: Kind::REQUEST,
            code: 0x0102_0304,
            id: 0x1122_3344_5566_7788,
            timeout_us: 1000,
        };
        let mut b = Vec::new();
        h.emit(b"hi", &mut b);
        assert_eq!(
            b,
            [
                0xDA, 1, 0, 0, 1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0,
                0x03, 0xE8, 0, 0, 0, 2, b'h', b'i'
            ]
        );
        let f: Vec<_> = frames(&b).collect();
        assert_eq!(
            f,
            [Ok(FrameRepr {
                header: h,
                payload: b"hi"
            })]
        );
    }

    #[test]
    fn several_frames_in_one_message() {
        let mut b = Vec::new();
        for i in 0..5u64 {
            Header::new(Kind::REQUEST, i).emit(&vec![i as u8; i as usize * 3], &mut b);
        }
        let ids: Vec<u64> = frames(&b).map(|f| f.unwrap().header.id).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn every_truncation_is_an_error_value() {
        let mut b = Vec::new();
        Header::new(Kind::RESPONSE, 7).emit(b"payload", &mut b);
        for n in 0..b.len() {
            let r: Vec<_> = frames(&b[..n]).collect();
            assert!(r.last().unwrap().is_err(), "{n}: {r:?}");
        }
        let mut bad = b.clone();
        bad[0] = 0;
        assert_eq!(frames(&bad).next(), Some(Err(FrameError::BadMagic(0))));
        let mut bad = b.clone();
        bad[3] = 1;
        assert_eq!(frames(&bad).next(), Some(Err(FrameError::UnknownFlags(1))));
        let mut bad = b;
        bad[20] = 0xff;
        assert!(matches!(
            frames(&bad).next(),
            Some(Err(FrameError::PayloadOverrun { .. }))
        ));
        assert!(matches!(
            frames(&[]).next(),
            Some(Err(FrameError::Truncated { have: 0 }))
        ));
    }

    #[test]
    fn unknown_kinds_survive_and_print_in_hex() {
        let mut b = Vec::new();
        Header::new(Kind(0x7f), 1).emit(&[], &mut b);
        let f = frames(&b).next().unwrap().unwrap();
        assert_eq!(f.header.kind, Kind(0x7f));
        assert_eq!(format!("{:?}", f.header.kind), "Kind(0x7f)");
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut base = Vec::new();
        Header::new(Kind::REQUEST, 3).emit(&[1, 2, 3, 4], &mut base);
        Header::new(Kind::CANCEL, 4).emit(&[], &mut base);
        for i in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut m = base.clone();
            let pos = (x as usize) % m.len();
            m[pos] = (x >> 32) as u8;
            if i % 3 == 0 {
                m.truncate((x >> 40) as usize % (m.len() + 1));
            }
            for f in frames(&m).flatten() {
                let _ = Rendezvous::parse(f.payload);
            }
        }
    }

    #[test]
    fn rendezvous_round_trips_and_checks_its_length() {
        let r = Rendezvous {
            addr: 0xdead_beef_0000_1000,
            rkey: 42,
            len: 1 << 20,
        };
        assert_eq!(Rendezvous::parse(&r.to_bytes()), Ok(r));
        assert_eq!(
            Rendezvous::parse(&r.to_bytes()[..15]),
            Err(FrameError::BadRendezvous)
        );
    }
}
