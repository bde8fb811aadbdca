//! The library half of the `weft` command: pieces the subcommands and the integration
//! tests share (capture files, sample RoCEv2 frames, capture decoding).
#![forbid(unsafe_code)]

pub mod decode;
pub mod pcap;
pub mod perf;
pub mod samples;
