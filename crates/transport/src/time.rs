//! Virtual time: the transport never reads a clock, the caller passes `now`.

use core::fmt;
use core::ops::{Add, Sub};

/// A point in time, in microseconds since an origin the caller chooses.
///
/// IBTA timers (local ACK timeout, RNR timer) have microsecond granularity, so a
/// `u64` count of microseconds is exact for all of them and never wraps in practice.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

impl Instant {
    /// Time zero.
    pub const ZERO: Instant = Instant(0);

    /// Microseconds since the origin.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// `self + us`, saturating.
    pub const fn plus_micros(self, us: u64) -> Instant {
        Instant(self.0.saturating_add(us))
    }
}

impl Add<u64> for Instant {
    type Output = Instant;
    fn add(self, us: u64) -> Instant {
        self.plus_micros(us)
    }
}

impl Sub for Instant {
    type Output = u64;
    /// Microseconds from `rhs` to `self`, saturating at zero.
    fn sub(self, rhs: Instant) -> u64 {
        self.0.saturating_sub(rhs.0)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}µs", self.0)
    }
}

/// The local ACK timeout of IBTA Vol 1 §9.7 (transport timer): 4.096 µs × 2^`timeout`, rounded
/// up to whole microseconds; `timeout == 0` means "infinite" (`None`).
pub const fn local_ack_timeout_micros(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        return None;
    }
    // 4.096 µs = 4096 ns; shift in nanoseconds, then round up to microseconds.
    let shift = if timeout > 31 { 31 } else { timeout };
    let ns = 4096u64 << shift;
    Some(ns.div_ceil(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_timeout_table() {
        assert_eq!(local_ack_timeout_micros(0), None);
        assert_eq!(local_ack_timeout_micros(1), Some(9)); // 8.192 µs rounded up
        assert_eq!(local_ack_timeout_micros(14), Some(67_109)); // 67.108864 ms
        assert_eq!(local_ack_timeout_micros(31), Some(8_796_093_023));
    }
}
