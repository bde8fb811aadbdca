//! psn
/// psn
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Psn(u32);
