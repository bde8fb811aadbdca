//! `weft decode` as a user runs it: on a capture mixing RoCEv2 packets of every opcode,
//! other traffic, a packet with a corrupted ICRC and a RoCEv2 packet whose transport
//! header is broken.

use std::path::{Path, PathBuf};
use std::process::Command;
use weft_pcap::pcap::Writer;
use weft_pcap::samples::{frames, Sample};
use weft_wire::roce::{Opcode, Transport};

fn all_samples() -> Vec<Sample> {
    frames(&[Transport::Rc, Transport::Uc, Transport::Ud, Transport::Cnp])
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-decode-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("capture.pcap")
}

fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let mut w = Writer::new(std::fs::File::create(path).unwrap()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(i as u64 * 1_000, f).unwrap();
    }
    w.finish().unwrap();
}

fn decode_json(path: &Path) -> (Vec<serde_json::Value>, String) {
    decode_json_with(path, &[])
}

fn decode_json_with(path: &Path, extra: &[&str]) -> (Vec<serde_json::Value>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["decode", "--json"])
        .args(extra)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let values = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect();
    (values, String::from_utf8(out.stderr).unwrap())
}

/// A UDP datagram to port 53: a well-formed frame that is not RoCEv2.
fn dns_like(s: &Sample) -> Vec<u8> {
    let mut f = s.frame.clone();
    let udp_dport = if s.ipv6 { 14 + 40 + 2 } else { 14 + 20 + 2 };
    f[udp_dport..udp_dport + 2].copy_from_slice(&53u16.to_be_bytes());
    f
}

#[test]
fn corrupted_icrc_flags_exactly_that_packet_and_fields_match() {
    let samples = all_samples();
    let corrupt = 17;
    let mut frames: Vec<Vec<u8>> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let mut f = s.frame.clone();
        if i == corrupt {
            // Flip one bit of the PSN: covered by the ICRC.
            let psn_last = f.len() - s.repr.buffer_len(s.payload.len()) + 11;
            f[psn_last] ^= 0x01;
        }
        frames.push(f);
        if i % 10 == 3 {
            frames.push(dns_like(s));
        }
    }
    let path = temp("icrc");
    write_capture(&path, &frames);
    let (out, stderr) = decode_json(&path);
    assert_eq!(
        out.len(),
        samples.len(),
        "one object per RoCEv2 packet only"
    );
    assert!(stderr.contains("other packets skipped"), "{stderr}");

    for (i, (v, s)) in out.iter().zip(&samples).enumerate() {
        let r = &s.repr;
        assert_eq!(v["index"], i, "index counts RoCEv2 packets");
        assert_eq!(v["icrc_ok"], i != corrupt, "packet {i}");
        assert_eq!(v["opcode"], u64::from(r.bth.opcode.0));
        assert_eq!(v["dest_qp"], u64::from(r.bth.dest_qp));
        let psn = r.bth.psn.value() ^ u32::from(i == corrupt);
        assert_eq!(v["psn"], u64::from(psn));
        assert_eq!(v["ack_req"], r.bth.ack_req);
        match r.reth {
            Some(x) => {
                assert_eq!(v["reth"]["va"], x.va);
                assert_eq!(v["reth"]["rkey"], u64::from(x.rkey));
                assert_eq!(v["reth"]["len"], u64::from(x.dma_len));
            }
            None => assert!(v.get("reth").is_none()),
        }
        match r.aeth {
            Some(x) => {
                assert_eq!(v["aeth"]["syndrome"], u64::from(x.syndrome.to_u8()));
                assert_eq!(v["aeth"]["msn"], u64::from(x.msn));
            }
            None => assert!(v.get("aeth").is_none()),
        }
        match r.atomic_eth {
            Some(x) => {
                assert_eq!(v["atomic_eth"]["va"], x.va);
                assert_eq!(v["atomic_eth"]["rkey"], u64::from(x.rkey));
                assert_eq!(v["atomic_eth"]["swap_add"], x.swap_add);
                assert_eq!(v["atomic_eth"]["compare"], x.compare);
            }
            None => assert!(v.get("atomic_eth").is_none()),
        }
        match r.deth {
            Some(x) => {
                assert_eq!(v["deth"]["qkey"], u64::from(x.qkey));
                assert_eq!(v["deth"]["src_qp"], u64::from(x.src_qp));
            }
            None => assert!(v.get("deth").is_none()),
        }
        assert_eq!(v.get("imm").and_then(|x| x.as_u64()), r.imm.map(u64::from));
        assert_eq!(v["payload_len"], s.payload.len());
    }
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

#[test]
fn malformed_roce_is_reported_in_place_and_decoding_goes_on() {
    let samples = all_samples();
    let s = &samples[0];
    let ib_at = s.frame.len() - s.repr.buffer_len(s.payload.len());
    let mut unknown_opcode = s.frame.clone();
    unknown_opcode[ib_at] = 0x15; // reserved RC opcode
    let mut short = samples[1].frame.clone();
    // Keep only 6 bytes of IB packet, fixing the IP and UDP lengths so the frame is
    // well-formed down to UDP.
    short.truncate(14 + 20 + 8 + 6);
    short[16..18].copy_from_slice(&(20u16 + 8 + 6).to_be_bytes());
    let mut ip = weft_wire::ipv4::Ipv4Packet::new_unchecked(&mut short[14..34]);
    ip.fill_checksum();
    short[38..40].copy_from_slice(&(8u16 + 6).to_be_bytes());
    let frames = vec![unknown_opcode, short, samples[2].frame.clone()];
    let path = temp("malformed");
    write_capture(&path, &frames);
    let (out, stderr) = decode_json(&path);
    assert_eq!(out.len(), 3, "{stderr}");
    assert_eq!(out[0]["opcode"], 0x15);
    assert!(
        out[0]["error"].as_str().unwrap().contains("unsupported"),
        "{}",
        out[0]
    );
    assert!(
        out[1]["error"].as_str().unwrap().contains("truncated"),
        "{}",
        out[1]
    );
    assert_eq!(out[1]["icrc_ok"], false);
    assert!(out[2].get("error").is_none());
    assert_eq!(out[2]["icrc_ok"], true);
    assert!(stderr.contains("2 malformed"), "{stderr}");

    // Text output: one line per packet, the broken ones say so.
    let text = Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("decode")
        .arg(&path)
        .output()
        .unwrap();
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].contains("MALFORMED"));
    assert!(lines[2].contains(Opcode(samples[2].repr.bth.opcode.0).name().unwrap()));
    assert!(lines[2].contains("icrc=ok"));
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

#[test]
fn damaged_capture_file_is_decoded_up_to_the_damage() {
    let samples = all_samples();
    let path = temp("cut");
    write_capture(
        &path,
        &samples
            .iter()
            .take(5)
            .map(|s| s.frame.clone())
            .collect::<Vec<_>>(),
    );
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 7]).unwrap();
    let (out, stderr) = decode_json(&path);
    assert_eq!(out.len(), 4);
    assert!(stderr.contains("capture damaged"), "{stderr}");

    std::fs::write(&path, b"this is not a capture").unwrap();
    let bad = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["decode"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        !bad.status.success(),
        "a file that is not a capture is an error"
    );
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

/// The samples' IB packets again, sent to UDP port `port` (ICRC computed for it).
fn on_port(samples: &[Sample], port: u16) -> Vec<Vec<u8>> {
    use weft_wire::frame::FrameBuilder;
    samples
        .iter()
        .filter(|s| !s.ipv6)
        .map(|s| {
            let mut b = FrameBuilder::v4([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), 49152);
            b.dst_port = port;
            let mut f = vec![0u8; b.frame_len(s.repr.buffer_len(s.payload.len()))];
            let n = b.emit(&mut f, &s.repr, &s.payload).unwrap();
            f.truncate(n);
            f
        })
        .collect()
}

#[test]
fn another_port_is_decoded_with_dash_dash_port_and_skips_are_counted_by_reason() {
    let samples = all_samples();
    let mut frames = on_port(&samples[..12], 5000);
    let roce = frames.len();
    assert!(roce >= 4);
    // Two UDP datagrams to port 53.
    frames.push(dns_like(&samples[0]));
    frames.push(dns_like(&samples[1]));
    // One IPv4 packet of another protocol (TCP), checksum fixed.
    let mut tcp = samples[0].frame.clone();
    tcp[14 + 9] = 6;
    weft_wire::ipv4::Ipv4Packet::new_unchecked(&mut tcp[14..34]).fill_checksum();
    frames.push(tcp);
    // One ARP frame.
    let mut arp = vec![0u8; 14 + 28];
    arp[..6].fill(0xff);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    frames.push(arp);
    let path = temp("port");
    write_capture(&path, &frames);

    // By default (port 4791) nothing is RoCEv2, and the summary says why and how.
    let (out, stderr) = decode_json(&path);
    assert!(out.is_empty(), "{out:?}");
    let want = format!(
        "{} other packets skipped: {} UDP to other ports (most to 5000, {roce}: use --port 5000 \
         if that is RoCEv2), 1 not UDP, 1 not IP",
        roce + 4,
        roce + 2
    );
    assert!(stderr.contains(&want), "{stderr}\nwanted: {want}");

    // With --port 5000 every one of them decodes, each with a good ICRC.
    let (out, stderr) = decode_json_with(&path, &["--port", "5000"]);
    assert_eq!(out.len(), roce, "{stderr}");
    for v in &out {
        assert_eq!(v["icrc_ok"], true, "{v}");
        assert!(v["dst"].as_str().unwrap().ends_with(":5000"), "{v}");
        assert!(v.get("error").is_none(), "{v}");
    }
    assert!(
        stderr.contains(
            "4 other packets skipped: 2 UDP to other ports (most to 53, 2: use --port 53 \
             if that is RoCEv2), 1 not UDP, 1 not IP"
        ),
        "{stderr}"
    );
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}
