//! The connection manager's handshake decoder (`cm::Hello::decode`, WFCM v1) on
//! hostile bytes, on stable: the fuzz target's check (`weft_verbs::cm::fuzzing`,
//! shared with `fuzz/fuzz_targets/cm_hello.rs`) over the committed seed corpus
//! (`fuzz/corpus/cm_hello/`), random bytes and mutated seeds. A panic fails the test.
//!
//! `WEFT_HOSTILE_ITERS=2000000 cargo test -p weft-verbs --test hostile_handshake`
//! soaks longer; `WEFT_WRITE_CORPUS=1` rewrites the corpus from the encoder.

use std::path::PathBuf;
use weft_verbs::cm::fuzzing::{hello, sample};

fn iters() -> usize {
    std::env::var("WEFT_HOSTILE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// xorshift64*: seeded, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        (self.next() >> 32) as u8
    }
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cm_hello")
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("request_v4", sample(false, b"")),
        (
            "request_v6_private_data",
            sample(true, b"WRPC\x01\x00\x00\x20\x00\x00\x10\x00"),
        ),
        ("request_v4_max_private_data", sample(false, &[0xab; 196])),
    ]
}

#[test]
fn seed_corpus_matches_the_encoder() {
    for (name, bytes) in seeds() {
        let path = corpus_dir().join(name);
        if std::env::var_os("WEFT_WRITE_CORPUS").is_some() {
            std::fs::create_dir_all(corpus_dir()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(on_disk, bytes, "{}", path.display());
    }
}

#[test]
fn cm_hello_hostile() {
    let seeds: Vec<Vec<u8>> = seeds().into_iter().map(|s| s.1).collect();
    for s in &seeds {
        assert!(hello(s), "a seed does not decode");
    }
    let mut rng = Rng(0x5eed_c0de_0bad_f00d);
    let mut decoded = 0;
    for i in 0..iters() {
        let b: Vec<u8> = if i % 4 == 0 {
            (0..rng.below(260)).map(|_| rng.byte()).collect()
        } else {
            let mut b = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(3) {
                match rng.below(5) {
                    0 => {
                        let j = rng.below(b.len());
                        b[j] ^= 1 << rng.below(8);
                    }
                    1 => {
                        // The fields that pick a decode path: kind, link, QP type,
                        // flags, MTU, address family, private data length.
                        let j = [6, 7, 8, 9, 18, 19, 26, 45][rng.below(8)].min(b.len() - 1);
                        b[j] = rng.byte();
                    }
                    2 => {
                        let n = rng.below(b.len() + 1);
                        b.truncate(n);
                    }
                    3 => b.extend((0..1 + rng.below(8)).map(|_| rng.byte())),
                    _ => {
                        let j = rng.below(b.len());
                        b[j] = [0, 1, 2, 4, 6, 0x7f, 0x80, 0xff][rng.below(8)];
                    }
                }
                if b.is_empty() {
                    b.push(0);
                }
            }
            b
        };
        decoded += usize::from(hello(&b));
    }
    eprintln!(
        "cm_hello: {decoded} of {} hostile inputs decoded and round-tripped",
        iters()
    );
    assert!(decoded > iters() / 20, "only {decoded} inputs decoded");
}
