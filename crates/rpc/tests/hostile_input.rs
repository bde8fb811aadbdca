//! The fuzz targets' code paths on stable (the checks themselves are
//! `weft_rpc::fuzzing` and the namenode example's `fuzz_calls`, shared with `fuzz/`): for each parser of bytes a peer sends
//! — a message's frames and the server's check of it, the weft-rpc handshake, the
//! namenode service's argument decoding — seeded buffers, random bytes and the
//! committed fuzz seed corpus (`fuzz/corpus/<target>/`) mutated by flips, cuts,
//! splices, extensions and extreme bytes, go through the check. A panic anywhere
//! fails the test.
//!
//! `WEFT_HOSTILE_ITERS=2000000 cargo test -p weft-rpc --test hostile_input` soaks
//! longer; `WEFT_WRITE_CORPUS=1 cargo test -p weft-rpc --test hostile_input
//! seed_corpus` rewrites the seed corpus from the encoders.

use std::path::PathBuf;
use weft_rpc::codec::to_vec;
use weft_rpc::frame::{Header, Kind, Rendezvous};
use weft_rpc::fuzzing;
use weft_wire::fuzzing::hostile::{self, assert_reaches_emit};

#[path = "../examples/namenode/service.rs"]
#[allow(dead_code)] // the example's service; this test calls only its fuzz check
mod namenode;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// The shared hostile-input driver (weft-wire's) over `target`'s seed corpus.
fn hostile(target: &str, seed: u64, check: impl Fn(&[u8]) -> bool) -> usize {
    hostile::run(
        target,
        &hostile::corpus(&corpus_dir(target)),
        seed,
        |_, _| {},
        check,
    )
}

#[test]
fn rpc_message_hostile() {
    assert_reaches_emit("rpc_message", hostile("rpc_message", 1, fuzzing::message));
}

#[test]
fn rpc_hello_hostile() {
    assert_reaches_emit("rpc_hello", hostile("rpc_hello", 2, fuzzing::hello));
}

#[test]
fn rpc_namenode_hostile() {
    assert_reaches_emit(
        "rpc_namenode",
        hostile("rpc_namenode", 3, |b| namenode::fuzz_calls(b) > 0),
    );
}

/// The seed corpus, made with the crate's own encoders.
fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let frame = |kind: Kind, code: u32, id: u64, timeout: u32, payload: &[u8]| {
        let mut b = Vec::new();
        Header {
            kind,
            code,
            id,
            timeout_us: timeout,
        }
        .emit(payload, &mut b);
        b
    };
    let rndv = Rendezvous {
        addr: 0x7f00_0000_1000,
        rkey: 0x1234,
        len: 70_000,
    }
    .to_bytes();
    v.push((
        "rpc_message",
        "request",
        frame(Kind::REQUEST, 1, 1, 0, b"hello"),
    ));
    v.push((
        "rpc_message",
        "request_deadline",
        frame(Kind::REQUEST, 0x8f2a_11c3, 42, 20_000_000, &[0; 40]),
    ));
    v.push((
        "rpc_message",
        "response_ok",
        frame(Kind::RESPONSE, 0, 7, 0, b"ok"),
    ));
    v.push((
        "rpc_message",
        "response_overloaded",
        frame(Kind::RESPONSE, 8, 9, 0, b"in-flight limit 2 reached"),
    ));
    v.push((
        "rpc_message",
        "rendezvous",
        frame(Kind::RNDV, 0, 5, 0, &rndv),
    ));
    v.push(("rpc_message", "ping", frame(Kind::PING, 0, 0, 0, &[])));
    let mut batch = Vec::new();
    for i in 0..4u64 {
        batch.extend(frame(Kind::REQUEST, 2, 100 + i, 1000, &i.to_le_bytes()));
    }
    batch.extend(frame(Kind::CANCEL, 0, 99, 0, &[]));
    batch.extend(frame(Kind::RELEASE, 0, 3, 0, &[]));
    v.push(("rpc_message", "batch", batch));
    let mut answers = frame(Kind::PONG, 0, 0, 0, &[]);
    answers.extend(frame(Kind::ACK, 0, 0, 0, &[]));
    answers.extend(frame(Kind::RESPONSE, 3, 11, 0, b"cannot decode"));
    v.push(("rpc_message", "answers", answers));
    let hello = |ring: u16, buf: u32| {
        let mut b = b"WRPC".to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&ring.to_be_bytes());
        b.extend_from_slice(&buf.to_be_bytes());
        b
    };
    v.push(("rpc_hello", "server_32x4k", hello(32, 4096)));
    v.push(("rpc_hello", "client_1x128", hello(1, 128)));
    v.push(("rpc_hello", "max", hello(u16::MAX, u32::MAX)));
    // Namenode calls: method index (create, delete, rename, mkdirs, getFileStatus,
    // getBlockLocations), argument length, postcard arguments.
    let call = |out: &mut Vec<u8>, m: u8, args: Vec<u8>| {
        out.push(m);
        out.push(args.len() as u8);
        out.extend(args);
    };
    let mut nn = Vec::new();
    call(&mut nn, 3, to_vec(&("/a/b".to_string(),)).unwrap());
    call(
        &mut nn,
        0,
        to_vec(&("/a/b/f".to_string(), 3u16, 1u64 << 27, false)).unwrap(),
    );
    call(&mut nn, 4, to_vec(&("/a/b/f".to_string(),)).unwrap());
    call(
        &mut nn,
        5,
        to_vec(&("/a/b/f".to_string(), 0u64, u64::MAX)).unwrap(),
    );
    call(
        &mut nn,
        2,
        to_vec(&("/a/b".to_string(), "/a/c".to_string())).unwrap(),
    );
    call(&mut nn, 1, to_vec(&("/a".to_string(), true)).unwrap());
    v.push(("rpc_namenode", "session", nn));
    let mut one = Vec::new();
    call(
        &mut one,
        0,
        to_vec(&("/x".to_string(), 1u16, 4096u64, true)).unwrap(),
    );
    v.push(("rpc_namenode", "create", one));
    v
}

/// The committed corpus is what the encoders make (`WEFT_WRITE_CORPUS=1` rewrites
/// it).
#[test]
fn seed_corpus_matches_the_encoders() {
    for (target, name, bytes) in seeds() {
        let path = corpus_dir(target).join(name);
        if std::env::var_os("WEFT_WRITE_CORPUS").is_some() {
            std::fs::create_dir_all(corpus_dir(target)).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(on_disk, bytes, "{}", path.display());
    }
}
