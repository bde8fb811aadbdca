//! The stable hostile-input driver every crate's `tests/hostile_input*.rs` runs its
//! fuzz checks with: seeded random buffers, and the committed seed corpus mutated by
//! bit flips, extreme bytes, cuts, extensions and splices. One driver, so a parser in
//! any crate meets the same hostile bytes; `WEFT_HOSTILE_ITERS` raises the count for a
//! soak.

use std::path::Path;

/// Inputs per parser: 20 000, or `WEFT_HOSTILE_ITERS`.
pub fn iters() -> usize {
    std::env::var("WEFT_HOSTILE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// xorshift64*: seeded and reproducible, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform-enough in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// A random byte.
    pub fn byte(&mut self) -> u8 {
        (self.next_u64() >> 32) as u8
    }
}

/// Every file in `dir`, sorted by content; panics when there is none.
pub fn corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no seeds in {}", dir.display());
    v
}

/// One to four mutations of `seed`; `other` (another seed) feeds the splices.
pub fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff][rng.below(6)];
            }
            2 => {
                let n = rng.below(b.len() + 1);
                b.truncate(n);
            }
            3 => {
                let n = 1 + rng.below(40);
                b.extend((0..n).map(|_| rng.byte()));
            }
            4 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.byte();
            }
            5 => {
                // Splice: another seed's tail after this one's head (frames after
                // frames, records after records).
                let at = rng.below(b.len() + 1);
                let from = rng.below(other.len() + 1);
                b.truncate(at);
                b.extend_from_slice(&other[from..]);
            }
            _ => b.extend_from_slice(other),
        }
    }
    b
}

/// Run `check` over `seeds` (each must pass), then [`iters`] inputs: a quarter random
/// bytes, the rest mutated seeds, half of which `tweak` touches up afterwards (refill a
/// checksum, set a field that picks a decode path) so the checks behind it are
/// reached. Returns how many inputs `check` reported as parsed; a panic in `check`
/// or `tweak` is the failure this exists to find.
pub fn run(
    target: &str,
    seeds: &[Vec<u8>],
    seed: u64,
    tweak: impl Fn(&mut Rng, &mut Vec<u8>),
    check: impl Fn(&[u8]) -> bool,
) -> usize {
    assert!(!seeds.is_empty(), "{target}: no seeds");
    for s in seeds {
        assert!(check(s), "{target}: a seed corpus input does not parse");
    }
    let mut rng = Rng::new(seed);
    let mut parsed = 0;
    for i in 0..iters() {
        let b = if i % 4 == 0 {
            let n = rng.below(260);
            (0..n).map(|_| rng.byte()).collect()
        } else {
            let a = &seeds[rng.below(seeds.len())];
            let o = &seeds[rng.below(seeds.len())];
            let mut b = mutate(&mut rng, a, o);
            if rng.below(2) == 0 {
                tweak(&mut rng, &mut b);
            }
            b
        };
        parsed += usize::from(check(&b));
    }
    parsed
}

/// Every parser must let a fair share (1 in 20) of the inputs through to its emit and
/// re-parse step, or its test would only exercise the rejection paths.
pub fn assert_reaches_emit(target: &str, parsed: usize) {
    let n = iters();
    eprintln!("{target}: {parsed} of {n} hostile inputs parsed and round-tripped");
    assert!(
        parsed > n / 20,
        "{target}: only {parsed} of {n} inputs parsed"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_is_reproducible_and_mutates() {
        let seeds = vec![b"abcdefgh".to_vec(), b"01234567".to_vec()];
        let seen = std::cell::RefCell::new(Vec::new());
        let record = |b: &[u8]| {
            seen.borrow_mut().push(b.to_vec());
            b.len() == 8
        };
        let first = run("t", &seeds, 7, |_, _| {}, record);
        let a = seen.take();
        let second = run("t", &seeds, 7, |_, _| {}, record);
        assert_eq!(first, second);
        assert_eq!(a, seen.take(), "same seed, same inputs");
        assert!(a.iter().any(|b| !seeds.contains(b)), "nothing was mutated");
    }
}
