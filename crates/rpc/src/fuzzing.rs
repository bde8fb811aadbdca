//! The checks shared by the fuzz targets (`fuzz/fuzz_targets/rpc_*.rs`) and the
//! stable hostile-input test (`tests/hostile_input.rs`), so both run one piece of
//! code over every parser of bytes a peer sends:
//!
//! - [`message`]: a SEND message as frames ([`crate::frame`]): the checked view,
//!   `Header::parse`, `Rendezvous::parse`, and for what parses, `emit` and a
//!   byte-for-byte comparison (a version-1 frame has no free bits, so the format
//!   allows it); then the server's message check (`survey`) on the same bytes, which
//!   must agree with the frames, as received and as the bytes of a rendezvous READ.
//! - [`hello`]: the weft-rpc handshake in the connection manager's private data.
//!
//! The namenode example service's check is the example's own (`fuzz_calls` in
//! `examples/namenode/service.rs`): the service is not part of the library.
//!
//! A broken invariant panics (that is what a fuzzer looks for); malformed input never
//! does. Only compiled with the `fuzzing` feature; not part of the API.
#![allow(missing_docs, clippy::missing_panics_doc)]

use crate::conn::Hello;
use crate::frame::{frames, Frame, Header, Kind, Rendezvous, HEADER_LEN};
use crate::server::survey;
use crate::status::Code;

/// Feed `data` to the frame parser as one message, and to the server's message
/// check. Returns whether every frame parsed (and re-emitted to the same bytes);
/// panics on a broken invariant.
pub fn message(data: &[u8]) -> bool {
    let mut rest = data;
    let mut rebuilt = Vec::with_capacity(data.len());
    let (mut all_ok, mut n, mut requests) = (true, 0usize, 0usize);
    let mut lone_rndv = None;
    for f in frames(data) {
        n += 1;
        let Ok(f) = f else {
            all_ok = false;
            assert!(
                Frame::new_checked(rest).is_err(),
                "the iterator failed a frame the view accepts"
            );
            break;
        };
        let v = Frame::new_checked(rest).expect("a frame the iterator yields checks");
        let _ = (
            v.kind(),
            v.code(),
            v.id(),
            v.timeout_us(),
            format!("{:?}", v.kind()),
        );
        assert_eq!(v.flags(), 0, "a checked frame has no unknown flags");
        assert_eq!(Header::parse(&v), f.header);
        assert_eq!(v.payload(), f.payload);
        assert_eq!(v.total_len(), HEADER_LEN + f.payload.len());
        let start = rebuilt.len();
        f.header.emit(f.payload, &mut rebuilt);
        assert_eq!(
            &rebuilt[start..],
            &rest[..v.total_len()],
            "a parsed frame re-emits to its bytes"
        );
        rest = &rest[v.total_len()..];
        match Rendezvous::parse(f.payload) {
            Ok(d) => {
                assert_eq!(&d.to_bytes()[..], f.payload);
                assert_eq!(Rendezvous::parse(&d.to_bytes()), Ok(d));
                if f.header.kind == Kind::RNDV && n == 1 && rest.is_empty() {
                    lone_rndv = Some((f.header.id, d));
                }
            }
            Err(_) => assert_ne!(f.payload.len(), Rendezvous::LEN),
        }
        if f.header.kind == Kind::RESPONSE {
            // What a client makes of the status.
            match Code::from_wire(f.header.code) {
                None => assert_eq!(f.header.code, 0),
                Some(c) => assert_eq!(c.to_wire(), f.header.code),
            }
        }
        requests += usize::from(f.header.kind == Kind::REQUEST);
    }
    assert!(n >= 1, "a message yields at least one item");
    if all_ok {
        assert_eq!(rebuilt, data, "a message re-emits to its bytes");
    }
    // The server's check of the same bytes agrees with the frames.
    for from_read in [false, true] {
        let v = survey(data, from_read, |code| code % 2 == 1);
        match &v.bad {
            Some(_) => assert!(v.rendezvous.is_none()),
            None => {
                assert!(all_ok, "the server accepted a message that does not parse");
                assert_eq!(v.requests, requests);
                if from_read {
                    assert!(v.rendezvous.is_none(), "a READ's bytes announced a READ");
                } else {
                    assert_eq!(v.rendezvous, lone_rndv);
                }
            }
        }
    }
    all_ok
}

/// Feed `data` to the weft-rpc handshake decoder; what decodes must encode to the
/// same bytes but for the reserved byte 5, and decode again to the same value.
pub fn hello(data: &[u8]) -> bool {
    let Ok(h) = Hello::decode(data) else {
        return false;
    };
    assert!(h.ring > 0 && h.buf as usize >= crate::conn::MIN_BUFFER);
    let b = h.encode();
    assert_eq!(Hello::decode(&b), Ok(h));
    assert_eq!(b.len(), data.len());
    assert_eq!((&b[..5], &b[6..]), (&data[..5], &data[6..]));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_inputs_pass_every_check() {
        let mut m = Vec::new();
        Header::new(Kind::REQUEST, 1).emit(b"abc", &mut m);
        Header::new(Kind::CANCEL, 2).emit(&[], &mut m);
        assert!(message(&m));
        let mut r = Vec::new();
        let d = Rendezvous {
            addr: 1 << 40,
            rkey: 9,
            len: 1 << 20,
        };
        Header::new(Kind::RNDV, 3).emit(&d.to_bytes(), &mut r);
        assert!(message(&r));
        assert!(!message(&m[..m.len() - 1]));
        assert!(hello(&Hello { ring: 8, buf: 4096 }.encode()));
    }
}
