//! The BTH opcode and the one table of what each opcode carries.
//!
//! IBTA Vol 1 §9.2 Table 38 ("OpCode field") and §9.3 (which extension headers follow
//! each opcode). Every other part of weft asks this module — never its own copy —
//! which headers follow an opcode, whether it carries payload, and where in a message
//! it stands.

use core::fmt;

/// The BTH opcode, an open newtype: unknown values survive a parse and print in hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

/// The transport service encoded in the opcode's top three bits (IBTA Table 38).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected (0b000).
    Rc,
    /// Unreliable Connected (0b001).
    Uc,
    /// Reliable Datagram (0b010), not implemented by weft.
    Rd,
    /// Unreliable Datagram (0b011).
    Ud,
    /// Congestion Notification Packet (0b100), RoCEv2 Annex A17.9.
    Cnp,
    /// Extended Reliable Connected (0b101), not implemented by weft.
    Xrc,
    /// Reserved or manufacturer-specific (0b110, 0b111).
    Reserved,
}

/// What an opcode does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND (consumes a receive WQE, as does a WRITE with immediate data).
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ request.
    ReadRequest,
    /// RDMA READ response.
    ReadResponse,
    /// Acknowledge (ACK or NAK).
    Acknowledge,
    /// ATOMIC acknowledge.
    AtomicAcknowledge,
    /// ATOMIC CmpSwap.
    CompareSwap,
    /// ATOMIC FetchAdd.
    FetchAdd,
    /// Congestion notification.
    Cnp,
}

/// Where a packet stands in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message in one packet.
    Only,
}

impl Position {
    /// True for First and Only: the packet starts a message.
    pub const fn starts_message(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }
    /// True for Last and Only: the packet ends a message.
    pub const fn ends_message(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// Header sizes in bytes, one source of truth (IBTA §9.2–§9.5, Annex A17.9).
pub mod len {
    /// Base Transport Header.
    pub const BTH: usize = 12;
    /// RDMA Extended Transport Header.
    pub const RETH: usize = 16;
    /// ACK Extended Transport Header.
    pub const AETH: usize = 4;
    /// Atomic Extended Transport Header.
    pub const ATOMIC_ETH: usize = 28;
    /// Atomic Acknowledge Extended Transport Header.
    pub const ATOMIC_ACK_ETH: usize = 8;
    /// Immediate data.
    pub const IMM_DT: usize = 4;
    /// Invalidate Extended Transport Header.
    pub const IETH: usize = 4;
    /// Datagram Extended Transport Header.
    pub const DETH: usize = 8;
    /// The reserved bytes that follow the BTH of a CNP.
    pub const CNP_RESERVED: usize = 16;
    /// Invariant CRC trailer.
    pub const ICRC: usize = 4;
}

/// The extension headers that follow the BTH, in wire order (IBTA §9.2: DETH, RETH,
/// AtomicETH, AETH, AtomicAckETH, ImmDt, IETH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders {
    /// DETH (UD).
    pub deth: bool,
    /// RETH (WRITE First/Only, READ request).
    pub reth: bool,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic_eth: bool,
    /// AETH (ACK, READ response First/Last/Only, ATOMIC ACK).
    pub aeth: bool,
    /// AtomicAckETH (ATOMIC ACK).
    pub atomic_ack_eth: bool,
    /// ImmDt (the "with Immediate" variants).
    pub imm_dt: bool,
    /// IETH (SEND with Invalidate).
    pub ieth: bool,
    /// 16 reserved bytes (CNP).
    pub cnp_reserved: bool,
}

impl ExtHeaders {
    /// One bit per header, in wire order from bit 0 (DETH) to bit 7 (CNP reserved):
    /// an index for tables keyed by header set.
    pub const fn bits(&self) -> u8 {
        (self.deth as u8)
            | (self.reth as u8) << 1
            | (self.atomic_eth as u8) << 2
            | (self.aeth as u8) << 3
            | (self.atomic_ack_eth as u8) << 4
            | (self.imm_dt as u8) << 5
            | (self.ieth as u8) << 6
            | (self.cnp_reserved as u8) << 7
    }

    /// The inverse of [`ExtHeaders::bits`].
    pub const fn from_bits(b: u8) -> ExtHeaders {
        ExtHeaders {
            deth: b & 1 != 0,
            reth: b & 1 << 1 != 0,
            atomic_eth: b & 1 << 2 != 0,
            aeth: b & 1 << 3 != 0,
            atomic_ack_eth: b & 1 << 4 != 0,
            imm_dt: b & 1 << 5 != 0,
            ieth: b & 1 << 6 != 0,
            cnp_reserved: b & 1 << 7 != 0,
        }
    }

    const NONE: ExtHeaders = ExtHeaders {
        deth: false,
        reth: false,
        atomic_eth: false,
        aeth: false,
        atomic_ack_eth: false,
        imm_dt: false,
        ieth: false,
        cnp_reserved: false,
    };

    /// Total length of these headers in bytes.
    pub const fn len(&self) -> usize {
        (self.deth as usize) * len::DETH
            + (self.reth as usize) * len::RETH
            + (self.atomic_eth as usize) * len::ATOMIC_ETH
            + (self.aeth as usize) * len::AETH
            + (self.atomic_ack_eth as usize) * len::ATOMIC_ACK_ETH
            + (self.imm_dt as usize) * len::IMM_DT
            + (self.ieth as usize) * len::IETH
            + (self.cnp_reserved as usize) * len::CNP_RESERVED
    }

    /// True when no extension header follows the BTH.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl OpcodeInfo {
    /// Whether the packet that starts this message consumes a receive WQE at the
    /// responder: every SEND, and an RDMA WRITE with immediate data (IBTA §9.4.3:
    /// the immediate is delivered through a receive completion).
    pub const fn consumes_recv_wqe(&self) -> bool {
        matches!(self.operation, Operation::Send)
            || (matches!(self.operation, Operation::Write) && self.headers.imm_dt)
    }
}

/// Everything the table knows about one opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// Transport service.
    pub transport: Transport,
    /// Operation.
    pub operation: Operation,
    /// Position in the message.
    pub position: Position,
    /// Extension headers after the BTH.
    pub headers: ExtHeaders,
    /// Whether a payload may follow the headers.
    pub has_payload: bool,
}

macro_rules! opcodes {
    ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {
        impl Opcode {
            $($(#[$doc])* pub const $name: Opcode = Opcode($value);)*

            /// The name of a known opcode (`"RC_SEND_FIRST"`), `None` for others.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

opcodes! {
    /// RC SEND First.
    RC_SEND_FIRST = 0x00;
    /// RC SEND Middle.
    RC_SEND_MIDDLE = 0x01;
    /// RC SEND Last.
    RC_SEND_LAST = 0x02;
    /// RC SEND Last with Immediate.
    RC_SEND_LAST_IMM = 0x03;
    /// RC SEND Only.
    RC_SEND_ONLY = 0x04;
    /// RC SEND Only with Immediate.
    RC_SEND_ONLY_IMM = 0x05;
    /// RC RDMA WRITE First.
    RC_WRITE_FIRST = 0x06;
    /// RC RDMA WRITE Middle.
    RC_WRITE_MIDDLE = 0x07;
    /// RC RDMA WRITE Last.
    RC_WRITE_LAST = 0x08;
    /// RC RDMA WRITE Last with Immediate.
    RC_WRITE_LAST_IMM = 0x09;
    /// RC RDMA WRITE Only.
    RC_WRITE_ONLY = 0x0a;
    /// RC RDMA WRITE Only with Immediate.
    RC_WRITE_ONLY_IMM = 0x0b;
    /// RC RDMA READ Request.
    RC_READ_REQUEST = 0x0c;
    /// RC RDMA READ response First.
    RC_READ_RESPONSE_FIRST = 0x0d;
    /// RC RDMA READ response Middle.
    RC_READ_RESPONSE_MIDDLE = 0x0e;
    /// RC RDMA READ response Last.
    RC_READ_RESPONSE_LAST = 0x0f;
    /// RC RDMA READ response Only.
    RC_READ_RESPONSE_ONLY = 0x10;
    /// RC Acknowledge.
    RC_ACK = 0x11;
    /// RC ATOMIC Acknowledge.
    RC_ATOMIC_ACK = 0x12;
    /// RC CmpSwap.
    RC_CMP_SWAP = 0x13;
    /// RC FetchAdd.
    RC_FETCH_ADD = 0x14;
    /// RC SEND Last with Invalidate.
    RC_SEND_LAST_INV = 0x16;
    /// RC SEND Only with Invalidate.
    RC_SEND_ONLY_INV = 0x17;
    /// UC SEND First.
    UC_SEND_FIRST = 0x20;
    /// UC SEND Middle.
    UC_SEND_MIDDLE = 0x21;
    /// UC SEND Last.
    UC_SEND_LAST = 0x22;
    /// UC SEND Last with Immediate.
    UC_SEND_LAST_IMM = 0x23;
    /// UC SEND Only.
    UC_SEND_ONLY = 0x24;
    /// UC SEND Only with Immediate.
    UC_SEND_ONLY_IMM = 0x25;
    /// UC RDMA WRITE First.
    UC_WRITE_FIRST = 0x26;
    /// UC RDMA WRITE Middle.
    UC_WRITE_MIDDLE = 0x27;
    /// UC RDMA WRITE Last.
    UC_WRITE_LAST = 0x28;
    /// UC RDMA WRITE Last with Immediate.
    UC_WRITE_LAST_IMM = 0x29;
    /// UC RDMA WRITE Only.
    UC_WRITE_ONLY = 0x2a;
    /// UC RDMA WRITE Only with Immediate.
    UC_WRITE_ONLY_IMM = 0x2b;
    /// UD SEND Only.
    UD_SEND_ONLY = 0x64;
    /// UD SEND Only with Immediate.
    UD_SEND_ONLY_IMM = 0x65;
    /// RoCEv2 Congestion Notification Packet (Annex A17.9.2).
    CNP = 0x81;
}

impl Opcode {
    /// Every opcode the table knows, in numeric order.
    pub const ALL: [Opcode; 38] = {
        let mut out = [Opcode(0); 38];
        let mut i = 0;
        let mut v: u16 = 0;
        while v < 256 {
            if Opcode(v as u8).info().is_some() {
                out[i] = Opcode(v as u8);
                i += 1;
            }
            v += 1;
        }
        assert!(i == 38);
        out
    };

    /// The opcode for a packet of `operation` at `position` on `transport`, with
    /// immediate data (`imm`) or an invalidate (`inv`) — the inverse of
    /// [`Opcode::info`], read from the same table. `None` when no such opcode exists
    /// (a READ on UC, a SEND First on UD, immediate data on a READ, ...).
    pub const fn lookup(
        transport: Transport,
        operation: Operation,
        position: Position,
        imm: bool,
        inv: bool,
    ) -> Option<Opcode> {
        let t = match transport {
            Transport::Rc => 0,
            Transport::Uc => 1,
            Transport::Ud => 2,
            Transport::Cnp => 3,
            _ => return None,
        };
        match REVERSE[reverse_index(t, operation, position, imm, inv)] {
            NO_OPCODE => None,
            v => Some(Opcode(v)),
        }
    }

    /// The transport service in the top three bits.
    pub const fn transport(self) -> Transport {
        match self.0 >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Reserved,
        }
    }

    /// What the table knows about this opcode; `None` for opcodes weft does not speak
    /// (RD, XRC, reserved values). One load from a table built at compile time: the
    /// transport asks this several times per packet.
    pub const fn info(self) -> Option<OpcodeInfo> {
        INFO[self.0 as usize]
    }

    /// The table itself, IBTA Table 38, one line per opcode; [`INFO`] and [`REVERSE`]
    /// are computed from it at compile time.
    const fn decode(self) -> Option<OpcodeInfo> {
        use Operation as O;
        use Position as P;
        let transport = self.transport();
        let low = self.0 & 0x1f;
        // (operation, position, headers, has_payload) for the low five bits, IBTA Table 38.
        let h = ExtHeaders::NONE;
        let entry: (Operation, Position, ExtHeaders, bool) = match (transport, low) {
            (Transport::Rc | Transport::Uc, 0x00) => (O::Send, P::First, h, true),
            (Transport::Rc | Transport::Uc, 0x01) => (O::Send, P::Middle, h, true),
            (Transport::Rc | Transport::Uc, 0x02) => (O::Send, P::Last, h, true),
            (Transport::Rc | Transport::Uc, 0x03) => (O::Send, P::Last, h.with_imm(), true),
            (Transport::Rc | Transport::Uc, 0x04) => (O::Send, P::Only, h, true),
            (Transport::Rc | Transport::Uc, 0x05) => (O::Send, P::Only, h.with_imm(), true),
            (Transport::Rc | Transport::Uc, 0x06) => (O::Write, P::First, h.with_reth(), true),
            (Transport::Rc | Transport::Uc, 0x07) => (O::Write, P::Middle, h, true),
            (Transport::Rc | Transport::Uc, 0x08) => (O::Write, P::Last, h, true),
            (Transport::Rc | Transport::Uc, 0x09) => (O::Write, P::Last, h.with_imm(), true),
            (Transport::Rc | Transport::Uc, 0x0a) => (O::Write, P::Only, h.with_reth(), true),
            (Transport::Rc | Transport::Uc, 0x0b) => {
                (O::Write, P::Only, h.with_reth().with_imm(), true)
            }
            (Transport::Rc, 0x0c) => (O::ReadRequest, P::Only, h.with_reth(), false),
            (Transport::Rc, 0x0d) => (O::ReadResponse, P::First, h.with_aeth(), true),
            (Transport::Rc, 0x0e) => (O::ReadResponse, P::Middle, h, true),
            (Transport::Rc, 0x0f) => (O::ReadResponse, P::Last, h.with_aeth(), true),
            (Transport::Rc, 0x10) => (O::ReadResponse, P::Only, h.with_aeth(), true),
            (Transport::Rc, 0x11) => (O::Acknowledge, P::Only, h.with_aeth(), false),
            (Transport::Rc, 0x12) => (
                O::AtomicAcknowledge,
                P::Only,
                h.with_aeth().with_atomic_ack(),
                false,
            ),
            (Transport::Rc, 0x13) => (O::CompareSwap, P::Only, h.with_atomic(), false),
            (Transport::Rc, 0x14) => (O::FetchAdd, P::Only, h.with_atomic(), false),
            (Transport::Rc, 0x16) => (O::Send, P::Last, h.with_ieth(), true),
            (Transport::Rc, 0x17) => (O::Send, P::Only, h.with_ieth(), true),
            (Transport::Ud, 0x04) => (O::Send, P::Only, h.with_deth(), true),
            (Transport::Ud, 0x05) => (O::Send, P::Only, h.with_deth().with_imm(), true),
            (Transport::Cnp, 0x01) => (O::Cnp, P::Only, h.with_cnp_reserved(), false),
            _ => return None,
        };
        Some(OpcodeInfo {
            transport,
            operation: entry.0,
            position: entry.1,
            headers: entry.2,
            has_payload: entry.3,
        })
    }
}

/// [`Opcode::decode`] for all 256 values.
const INFO: [Option<OpcodeInfo>; 256] = {
    let mut t = [None; 256];
    let mut v = 0;
    while v < 256 {
        t[v] = Opcode(v as u8).decode();
        v += 1;
    }
    t
};

/// Marks an empty [`REVERSE`] slot (0xff is a reserved opcode, never in the table).
const NO_OPCODE: u8 = 0xff;
const OPERATIONS: usize = 9;

/// Where (transport, operation, position, imm, inv) sits in [`REVERSE`]; `t` is 0–3
/// for RC, UC, UD, CNP.
const fn reverse_index(t: usize, op: Operation, pos: Position, imm: bool, inv: bool) -> usize {
    (((t * OPERATIONS + op as usize) * 4 + pos as usize) * 2 + imm as usize) * 2 + inv as usize
}

/// The inverse of [`INFO`] for [`Opcode::lookup`], also built from the one table.
const REVERSE: [u8; 4 * OPERATIONS * 4 * 2 * 2] = {
    let mut r = [NO_OPCODE; 4 * OPERATIONS * 4 * 2 * 2];
    let mut v = 0;
    while v < 256 {
        if let Some(i) = INFO[v] {
            let t = match i.transport {
                Transport::Rc => 0,
                Transport::Uc => 1,
                Transport::Ud => 2,
                _ => 3,
            };
            let k = reverse_index(t, i.operation, i.position, i.headers.imm_dt, i.headers.ieth);
            assert!(r[k] == NO_OPCODE, "two opcodes for one meaning");
            r[k] = v as u8;
        }
        v += 1;
    }
    r
};

// Small const builders so the table above reads as one line an opcode.
impl ExtHeaders {
    const fn with_imm(mut self) -> Self {
        self.imm_dt = true;
        self
    }
    const fn with_reth(mut self) -> Self {
        self.reth = true;
        self
    }
    const fn with_aeth(mut self) -> Self {
        self.aeth = true;
        self
    }
    const fn with_atomic_ack(mut self) -> Self {
        self.atomic_ack_eth = true;
        self
    }
    const fn with_atomic(mut self) -> Self {
        self.atomic_eth = true;
        self
    }
    const fn with_ieth(mut self) -> Self {
        self.ieth = true;
        self
    }
    const fn with_deth(mut self) -> Self {
        self.deth = true;
        self
    }
    const fn with_cnp_reserved(mut self) -> Self {
        self.cnp_reserved = true;
        self
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "Opcode({:#04x})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_opcode_is_in_the_table_and_back() {
        assert_eq!(Opcode::ALL.len(), 38);
        for op in Opcode::ALL {
            assert!(op.name().is_some(), "{op:?} has info but no name");
        }
        for v in 0..=255u8 {
            let op = Opcode(v);
            assert_eq!(op.name().is_some(), op.info().is_some(), "{op}");
        }
    }

    #[test]
    fn lookup_inverts_info_for_every_opcode() {
        for op in Opcode::ALL {
            let i = op.info().unwrap();
            let back = Opcode::lookup(
                i.transport,
                i.operation,
                i.position,
                i.headers.imm_dt,
                i.headers.ieth,
            );
            assert_eq!(back, Some(op));
        }
        assert_eq!(
            Opcode::lookup(
                Transport::Uc,
                Operation::ReadRequest,
                Position::Only,
                false,
                false
            ),
            None
        );
        assert_eq!(
            Opcode::lookup(
                Transport::Ud,
                Operation::Send,
                Position::First,
                false,
                false
            ),
            None
        );
        assert_eq!(
            Opcode::lookup(Transport::Rc, Operation::Write, Position::Last, true, false),
            Some(Opcode::RC_WRITE_LAST_IMM)
        );
    }

    #[test]
    fn recv_wqe_consumers() {
        let c = |op: Opcode| op.info().unwrap().consumes_recv_wqe();
        assert!(c(Opcode::RC_SEND_ONLY));
        assert!(c(Opcode::UD_SEND_ONLY_IMM));
        assert!(c(Opcode::RC_WRITE_ONLY_IMM));
        assert!(c(Opcode::UC_WRITE_LAST_IMM));
        assert!(!c(Opcode::RC_WRITE_ONLY));
        assert!(!c(Opcode::RC_READ_REQUEST));
        assert!(!c(Opcode::RC_FETCH_ADD));
    }

    #[test]
    fn unknown_opcodes_print_in_hex() {
        assert_eq!(Opcode(0x15).to_string(), "Opcode(0x15)");
        assert_eq!(Opcode(0x44).to_string(), "Opcode(0x44)");
        assert_eq!(Opcode::RC_ACK.to_string(), "RC_ACK");
    }

    #[test]
    fn header_sets_match_ibta_table_38() {
        let i = |op: Opcode| op.info().unwrap();
        assert_eq!(i(Opcode::RC_WRITE_ONLY_IMM).headers.len(), 16 + 4);
        assert_eq!(i(Opcode::RC_ATOMIC_ACK).headers.len(), 4 + 8);
        assert_eq!(i(Opcode::RC_CMP_SWAP).headers.len(), 28);
        assert_eq!(i(Opcode::UD_SEND_ONLY_IMM).headers.len(), 8 + 4);
        assert_eq!(i(Opcode::RC_READ_RESPONSE_MIDDLE).headers.len(), 0);
        assert_eq!(i(Opcode::RC_SEND_ONLY_INV).headers.len(), 4);
        assert_eq!(i(Opcode::CNP).headers.len(), 16);
        assert!(!i(Opcode::RC_READ_REQUEST).has_payload);
        assert!(i(Opcode::UC_WRITE_FIRST).headers.reth);
        // UC has no READ, ACK or atomics; UD only SEND Only.
        assert!(Opcode(0x2c).info().is_none());
        assert!(Opcode(0x31).info().is_none());
        assert!(Opcode(0x60).info().is_none());
        assert_eq!(i(Opcode::UD_SEND_ONLY).transport, Transport::Ud);
    }
}
