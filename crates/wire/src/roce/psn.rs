//! The 24-bit packet sequence number and its wrap-aware arithmetic.
//!
//! IBTA Vol 1 §9.7.1: PSNs are 24-bit and wrap; "ahead" and "behind" are decided
//! within half the sequence space (2^23). `Psn` therefore has no `Ord`: that order
//! would not be transitive. Use [`Psn::distance_to`], [`Psn::is_before`], or
//! [`Psn::expand`] to get a 64-bit monotonic counter (the quinn packet-number pattern).

use core::fmt;

/// A 24-bit packet sequence number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Number of bits on the wire.
    pub const BITS: u32 = 24;
    /// Mask of the valid bits.
    pub const MASK: u32 = (1 << Self::BITS) - 1;
    /// Half the sequence space: the largest distance that still has a direction.
    pub const HALF: u32 = 1 << (Self::BITS - 1);

    /// A PSN from the low 24 bits of `value` (the higher bits are dropped, as on the wire).
    #[inline]
    pub const fn new(value: u32) -> Psn {
        Psn(value & Self::MASK)
    }

    /// The 24-bit value.
    #[inline]
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^24.
    #[inline]
    pub const fn add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// `self - n`, wrapping at 2^24.
    #[inline]
    pub const fn sub(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// The next PSN.
    #[inline]
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// Signed distance from `self` to `other`, in `-2^23 .. 2^23`: positive when `other`
    /// is ahead of `self`.
    #[inline]
    pub const fn distance_to(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back: sign extension
        // gives the wrap-aware signed distance.
        ((other.0.wrapping_sub(self.0) << 8) as i32) >> 8
    }

    /// True when `self` comes strictly before `other` (within half the space).
    #[inline]
    pub const fn is_before(self, other: Psn) -> bool {
        self.distance_to(other) > 0
    }

    /// True when `self` comes strictly after `other`.
    #[inline]
    pub const fn is_after(self, other: Psn) -> bool {
        other.is_before(self)
    }

    /// Wrap-aware comparison; only meaningful for PSNs less than 2^23 apart.
    #[inline]
    pub fn wrapping_cmp(self, other: Psn) -> core::cmp::Ordering {
        let d = self.distance_to(other);
        if d.unsigned_abs() == Psn::HALF {
            // Exactly half the circle apart: neither is nearer either way round, so
            // break the tie by value to keep the ordering antisymmetric.
            return self.0.cmp(&other.0);
        }
        0.cmp(&d)
    }

    /// The 64-bit sequence number nearest to `reference` whose low 24 bits are `self`.
    ///
    /// The transport keeps 64-bit counters internally so that its windows never wrap;
    /// a received PSN is expanded against the expected one.
    #[inline]
    pub fn expand(self, reference: u64) -> u64 {
        let base = Psn::new(reference as u32);
        let d = i64::from(base.distance_to(self));
        // Saturate at both ends: a PSN "behind" the start of the stream is just the
        // earliest one, and one past u64::MAX the last.
        reference
            .checked_add_signed(d)
            .unwrap_or(if d < 0 { 0 } else { u64::MAX })
    }
}

impl From<Psn> for u32 {
    fn from(p: Psn) -> u32 {
        p.0
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({:#08x})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(Psn::MASK).next(), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1).value(), Psn::MASK);
        assert_eq!(Psn::new(0x0100_0005).value(), 5);
    }

    #[test]
    fn distance_across_the_wrap() {
        let a = Psn::new(Psn::MASK - 1);
        let b = Psn::new(2);
        assert_eq!(a.distance_to(b), 4);
        assert_eq!(b.distance_to(a), -4);
        assert!(a.is_before(b));
        assert!(b.is_after(a));
        assert!(!a.is_before(a));
    }

    #[test]
    fn half_space_boundary() {
        let a = Psn::new(0);
        assert_eq!(
            a.distance_to(Psn::new(Psn::HALF - 1)),
            (Psn::HALF - 1) as i32
        );
        // Exactly half way has no direction we can trust; it reads as "behind".
        assert_eq!(a.distance_to(Psn::new(Psn::HALF)), -(Psn::HALF as i32));
    }

    #[test]
    fn expand_near_reference() {
        let r = (5u64 << 24) + 10;
        assert_eq!(Psn::new(12).expand(r), r + 2);
        assert_eq!(Psn::new(8).expand(r), r - 2);
        // Just below the wrap, relative to a reference just above it.
        assert_eq!(Psn::new(Psn::MASK).expand(5 << 24), (5 << 24) - 1);
        assert_eq!(Psn::new(Psn::MASK).expand(0), 0);
        // References above 2^63 do not go through a signed cast.
        assert_eq!(Psn::new(Psn::MASK).expand(u64::MAX), u64::MAX);
        assert_eq!(Psn::new(0).expand(u64::MAX), u64::MAX);
        let top = u64::MAX - 10;
        assert_eq!(Psn::new((top - 3) as u32).expand(top), top - 3);
        assert_eq!(Psn::new((top + 4) as u32).expand(top), top + 4);
    }

    #[test]
    fn wrapping_cmp_is_antisymmetric_at_half_the_circle() {
        use core::cmp::Ordering;
        let (a, b) = (Psn::new(0), Psn::new(Psn::HALF));
        assert_eq!(a.wrapping_cmp(b), b.wrapping_cmp(a).reverse());
        assert_ne!(a.wrapping_cmp(b), Ordering::Equal);
        assert_eq!(Psn::new(1).wrapping_cmp(Psn::new(2)), Ordering::Less);
        assert_eq!(
            Psn::new(0).wrapping_cmp(Psn::new(Psn::MASK)),
            Ordering::Greater
        );
    }

    proptest! {
        #[test]
        fn add_then_distance(a in 0u32..=Psn::MASK, n in 0u32..Psn::HALF) {
            let p = Psn::new(a);
            prop_assert_eq!(p.distance_to(p.add(n)), n as i32);
            prop_assert_eq!(p.add(n).distance_to(p), -(n as i32));
            prop_assert_eq!(p.add(n).sub(n), p);
        }

        #[test]
        fn expand_inverts_truncation(x in (1u64 << 23)..(1u64 << 50), d in -((1i64 << 23) - 1)..(1i64 << 23)) {
            let target = (x as i64 + d) as u64;
            prop_assert_eq!(Psn::new(target as u32).expand(x), target);
        }
    }
}
