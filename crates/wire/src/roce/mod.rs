//! RoCEv2: the InfiniBand transport headers carried in UDP port 4791.
mod psn;
mod opcode;
pub use opcode::Opcode;
pub use psn::Psn;
