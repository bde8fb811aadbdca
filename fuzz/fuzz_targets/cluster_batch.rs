//! Arbitrary bytes as a cluster interconnect message (the router's batch of packets,
//! `weft_router::cluster::batch`): splitting never panics, every packet it yields
//! lies inside the message, the split stops at its first error, and the packets it
//! accepted re-encode to exactly the bytes they were split from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_router::cluster::batch::{encode_contiguous, split, HEADER_LEN, MIN_FRAME};

fuzz_target!(|data: &[u8]| {
    let mut good = Vec::new();
    let mut used = 0usize;
    let mut errors = 0;
    for item in split(data) {
        match item {
            Ok((h, frame)) => {
                assert_eq!(errors, 0, "a packet after an error");
                assert_eq!(frame.len(), usize::from(h.len));
                assert!(frame.len() >= MIN_FRAME);
                used += HEADER_LEN + frame.len();
                assert!(used <= data.len());
                good.push((h, frame));
            }
            Err(_) => errors += 1,
        }
    }
    assert!(errors <= 1);
    let mut again = Vec::new();
    encode_contiguous(good.iter().copied(), &mut again);
    assert_eq!(&again[..], &data[..used]);
    if errors == 0 {
        assert_eq!(used, data.len(), "a clean split consumes the whole message");
    }
});
