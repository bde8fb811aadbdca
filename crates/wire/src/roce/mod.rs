//! RoCEv2: the InfiniBand transport headers carried in UDP port 4791.
//!
//! [`opcode`] holds the one opcode table of the project: every other layer asks it which
//! extension headers follow a BTH rather than keeping its own list.
pub mod bth;
pub mod ext;
pub mod icrc;
pub mod opcode;
pub mod packet;
mod psn;

pub use bth::{Bth, BthRepr};
pub use ext::{AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, NakCode, RethRepr, Syndrome};
pub use icrc::{IcrcPath, IpPair, Ipv4IdDeltas, GSO_MAX_SEGMENTS};
pub use opcode::{ExtHeaders, Opcode, OpcodeInfo, Operation, Position, Transport};
pub use packet::{ExtLayout, IbPacket, IbPacketRepr, PacketFields, PacketTemplate};
pub use psn::Psn;

/// The UDP destination port IANA assigned to RoCEv2.
pub const UDP_PORT: u16 = 4791;
