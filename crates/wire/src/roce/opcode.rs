//! opcode
/// opcode
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opcode(pub u8);
