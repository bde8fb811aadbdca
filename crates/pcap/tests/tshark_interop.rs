//! Interop with Wireshark's dissector: weft writes a capture holding every RC opcode over
//! IPv4 and IPv6, tshark reads it, and every field weft wrote must come back: opcode,
//! destination QP, PSN, AckReq, RETH (VA, R_Key, DMA length) and AETH (syndrome, MSN).
//!
//! tshark is installed by `scripts/setup.sh`; without it this test fails and says so,
//! because CI must run it. A second test reads a pcapng that editcap wrote.

use std::process::Command;
use weft_pcap::pcap::Writer;
use weft_pcap::samples::{rc_frames, Sample};

const FIELDS: [&str; 12] = [
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "ipv6.src",
];

/// tshark prints numbers in decimal or hex depending on the field; accept both.
fn num(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn boolean(s: &str) -> Option<bool> {
    match s.trim() {
        "1" | "True" | "true" => Some(true),
        "0" | "False" | "false" => Some(false),
        _ => None,
    }
}

fn expected(s: &Sample) -> Vec<Option<u64>> {
    let r = &s.repr;
    vec![
        Some(u64::from(r.bth.opcode.0)),
        Some(u64::from(r.bth.dest_qp)),
        Some(u64::from(r.bth.psn.value())),
        Some(u64::from(r.bth.ack_req)),
        // Wireshark shows an AtomicETH's VA and R_Key in the RETH fields.
        r.reth.map(|x| x.va).or(r.atomic_eth.map(|x| x.va)),
        r.reth
            .map(|x| u64::from(x.rkey))
            .or(r.atomic_eth.map(|x| u64::from(x.rkey))),
        r.reth.map(|x| u64::from(x.dma_len)),
        r.aeth.map(|x| u64::from(x.syndrome.to_u8())),
        r.aeth.map(|x| u64::from(x.msn)),
        r.atomic_eth.map(|x| x.swap_add),
        r.atomic_eth.map(|x| x.compare),
    ]
}

#[test]
fn tshark_reads_back_every_rc_opcode_over_ipv4_and_ipv6() {
    let tshark = std::env::var("TSHARK").unwrap_or_else(|_| "tshark".into());
    let samples = rc_frames();
    assert_eq!(samples.len(), 2 * 23, "23 RC opcodes over IPv4 and IPv6");
    let dir = std::env::temp_dir().join(format!("weft-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rc.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (i, s) in samples.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, &s.frame)
            .unwrap();
    }
    w.finish().unwrap();

    let mut cmd = Command::new(&tshark);
    cmd.args(["-n", "-r"]).arg(&path).args([
        "-T",
        "fields",
        "-E",
        "separator=;",
        "-E",
        "occurrence=f",
    ]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tshark}: {e}; install it with scripts/setup.sh"));
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        samples.len(),
        "tshark saw every frame:\n{text}"
    );

    for (i, (line, s)) in lines.iter().zip(&samples).enumerate() {
        let cols: Vec<&str> = line.split(';').collect();
        assert_eq!(cols.len(), FIELDS.len(), "frame {i}: {line}");
        let got: Vec<Option<u64>> = cols[..11]
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 3 {
                    boolean(v).map(u64::from)
                } else {
                    num(v)
                }
            })
            .collect();
        assert_eq!(
            got,
            expected(s),
            "frame {i} ({}): tshark line {line}",
            s.repr.bth.opcode
        );
        assert_eq!(!cols[11].is_empty(), s.ipv6, "frame {i}: IPv6 as written");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A pcapng written by Wireshark's own tools (editcap, installed with tshark) decodes
/// to the same packets as the pcap weft wrote.
#[test]
fn weft_decodes_a_pcapng_written_by_editcap() {
    let samples = rc_frames();
    let dir = std::env::temp_dir().join(format!("weft-pcapng-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pcap, pcapng) = (dir.join("rc.pcap"), dir.join("rc.pcapng"));
    let mut w = Writer::new(std::fs::File::create(&pcap).unwrap()).unwrap();
    for (i, s) in samples.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, &s.frame)
            .unwrap();
    }
    w.finish().unwrap();
    let editcap = std::env::var("EDITCAP").unwrap_or_else(|_| "editcap".into());
    let st = Command::new(&editcap)
        .args(["-F", "pcapng"])
        .arg(&pcap)
        .arg(&pcapng)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {editcap}: {e}; install it with scripts/setup.sh"));
    assert!(st.success());
    let a = weft_pcap::decode::decode_capture(&std::fs::read(&pcap).unwrap()).unwrap();
    let b = weft_pcap::decode::decode_capture(&std::fs::read(&pcapng).unwrap()).unwrap();
    assert!(b.capture_error.is_none(), "{:?}", b.capture_error);
    assert_eq!(b.packets.len(), samples.len());
    assert_eq!(a.packets, b.packets);
    assert!(b.packets.iter().all(|d| d.icrc_ok));
    std::fs::remove_dir_all(&dir).ok();
}
