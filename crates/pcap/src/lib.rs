//! weft-pcap: capture files and RoCEv2 decoding — what `weft decode` runs, what the
//! demo writes its capture with, and what `fuzz/` fuzzes (the `pcap` target).
//!
//! It owns: reading pcap/pcapng and writing pcap ([`pcap`]), decoding every RoCEv2
//! packet of a capture into lines or JSON ([`decode`], with `weft decode`'s arguments
//! beside its `run`), and the sample RoCEv2 frames, one per opcode, that the demo and
//! the tshark interop test share ([`samples`]).
//!
//! It must not touch: header layouts or the ICRC (weft-wire's; this crate only calls
//! its checked parsers), and it pulls in nothing a benchmark needs: the fuzz build and
//! `weft --no-default-features` depend on it.
#![forbid(unsafe_code)]

pub mod decode;
pub mod pcap;
pub mod samples;
