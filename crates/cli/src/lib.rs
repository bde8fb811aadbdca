//! The library half of the `weft` command: pieces the subcommands and the integration
//! tests share (capture files, RoCEv2 frame building and decoding).
#![forbid(unsafe_code)]

pub mod pcap;
