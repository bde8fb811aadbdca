//! The connection manager's handshake decoder (`cm::Hello::decode`, WFCM v2) on
//! hostile bytes, on stable: the fuzz target's check (`weft_verbs::cm::fuzzing`,
//! shared with `fuzz/fuzz_targets/cm_hello.rs`) over the committed seed corpus
//! (`fuzz/corpus/cm_hello/`), random bytes and mutated seeds from the shared driver
//! `weft_wire::fuzzing::hostile`. A panic fails the test.
//!
//! `WEFT_HOSTILE_ITERS=2000000 cargo test -p weft-verbs --test hostile_handshake`
//! soaks longer; `WEFT_WRITE_CORPUS=1` rewrites the corpus from the encoder.

use std::path::PathBuf;
use weft_verbs::cm::fuzzing::{hello, sample, sample_ring};
use weft_wire::fuzzing::hostile;

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
        ("request_v6_ring", sample_ring()),
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
    // Half the mutated inputs also get a random value in one of the fields that pick a
    // decode path: kind, link, QP type, flags, MTU, address family, private data length
    // (offsets of version 2, whose ACK delay at 26..30 moved the last two by 4).
    let tweak = |rng: &mut hostile::Rng, b: &mut Vec<u8>| {
        if !b.is_empty() {
            let j = [6, 7, 8, 9, 18, 19, 30, 49][rng.below(8)].min(b.len() - 1);
            b[j] = rng.byte();
        }
    };
    let decoded = hostile::run("cm_hello", &seeds, 0x5eed_c0de, tweak, hello);
    hostile::assert_reaches_emit("cm_hello", decoded);
}
