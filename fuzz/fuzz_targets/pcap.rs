//! Arbitrary bytes as a capture file for `weft decode`: reading pcap/pcapng and decoding
//! every RoCEv2 packet found must never panic, whatever the file holds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cap) = weft_pcap::pcap::read(data) {
        for p in &cap.packets {
            assert!(p.data.len() <= data.len());
        }
    }
    if let Ok(report) = weft_pcap::decode::decode_capture(data) {
        for d in &report.packets {
            let _ = weft_pcap::decode::format_line(d);
        }
    }
});
