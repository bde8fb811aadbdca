//! A hash map for integer keys that a peer does not choose (QP numbers, lkeys, rkeys,
//! queue ids: random or sequential, drawn by this host). The standard library's
//! SipHash guards against hash flooding that such keys do not face, at a cost that
//! showed in profiles (several lookups per packet and per completion). The
//! multiply-shift hash below is the FxHash idea. The transport keys its QPs with it,
//! and the verbs engine its QPs, CQs and memory regions.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-shift hasher for integer keys.
#[derive(Debug, Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A `HashMap` keyed by integers with [`IntHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_and_random_keys_spread_over_buckets() {
        let mut m: FastMap<u32, u32> = FastMap::default();
        for i in 0..10_000u32 {
            m.insert(i.wrapping_mul(2_654_435_761), i);
        }
        for i in 0..10_000u32 {
            assert_eq!(m.get(&i.wrapping_mul(2_654_435_761)), Some(&i));
        }
        // Low bits of sequential keys must differ after hashing.
        let h = |k: u32| {
            let mut s = IntHasher::default();
            s.write_u32(k);
            s.finish() >> 57
        };
        let distinct: std::collections::HashSet<u64> = (0..64).map(h).collect();
        assert!(distinct.len() > 32);
    }
}
