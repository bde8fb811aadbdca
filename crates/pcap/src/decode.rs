//! `weft decode [--json] [--port N] FILE`: one line (or JSON object) per RoCEv2 packet
//! in a pcap or pcapng capture.
//!
//! A RoCEv2 packet is an Ethernet frame (optionally 802.1Q-tagged) carrying IPv4 or
//! IPv6 and UDP to port 4791 (or `--port`). Other packets are skipped and counted by
//! why they are not RoCEv2 ([`Skipped`]). A RoCEv2 packet
//! whose transport headers do not parse is reported with the reason, in its place, and
//! decoding goes on: a capture is where broken packets are looked for.

use crate::pcap;
use anyhow::Context;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use weft_wire::ethernet::{EtherType, EthernetFrame, EthernetRepr};
use weft_wire::frame::RoceFrame;
use weft_wire::ipv4::Ipv4Packet;
use weft_wire::ipv6::Ipv6Packet;
use weft_wire::roce::{IbPacket, IbPacketRepr, IpPair, Syndrome, UDP_PORT};
use weft_wire::IpProtocol;

/// Arguments of `weft decode`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON object per RoCEv2 packet instead of a line of text.
    #[arg(long)]
    pub json: bool,
    /// The UDP destination port RoCEv2 travels to in this capture (RoCEv2's is 4791;
    /// some tests and stacks use another).
    #[arg(long, default_value_t = UDP_PORT)]
    pub port: u16,
    /// A pcap or pcapng file.
    pub file: PathBuf,
}

/// The RETH of a decoded packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub len: u32,
}

/// The AETH of a decoded packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Aeth {
    /// The raw syndrome byte.
    pub syndrome: u8,
    /// The syndrome in words: `ack credits=N`, `rnr_nak timer=N`, `nak code=N`.
    pub meaning: String,
    /// Message sequence number.
    pub msn: u32,
}

/// The AtomicETH of a decoded packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtomicEth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap or add operand.
    pub swap_add: u64,
    /// Compare operand.
    pub compare: u64,
}

/// The DETH of a decoded packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP.
    pub src_qp: u32,
}

/// One RoCEv2 packet as `weft decode` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decoded {
    /// Position among the RoCEv2 packets of the capture, from 0.
    pub index: usize,
    /// Position among all packets of the capture, from 0.
    pub frame: usize,
    /// Source address and UDP port.
    pub src: String,
    /// Destination address and UDP port.
    pub dst: String,
    /// Opcode number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opcode: Option<u8>,
    /// Opcode name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opcode_name: Option<&'static str>,
    /// Destination QP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dest_qp: Option<u32>,
    /// PSN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psn: Option<u32>,
    /// AckReq.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_req: Option<bool>,
    /// Whether the ICRC verifies (for a GSO segment: with the headers the segment
    /// gets when the send is cut).
    pub icrc_ok: bool,
    /// Segment number within a UDP GSO send captured whole (before the kernel or a
    /// NIC cut it into datagrams: any capture on `lo`), or absent for a datagram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso_segment: Option<usize>,
    /// Payload bytes (pad excluded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_len: Option<usize>,
    /// RETH, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reth: Option<Reth>,
    /// AETH, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aeth: Option<Aeth>,
    /// AtomicETH, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic_eth: Option<AtomicEth>,
    /// AtomicAckETH original value, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic_ack: Option<u64>,
    /// Immediate data, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imm: Option<u32>,
    /// IETH (rkey to invalidate), when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ieth: Option<u32>,
    /// DETH, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deth: Option<Deth>,
    /// Why the packet could not be decoded, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a capture held, decoded.
#[derive(Debug, Default)]
pub struct Report {
    /// The RoCEv2 packets, in capture order.
    pub packets: Vec<Decoded>,
    /// Packets that are not RoCEv2, by why.
    pub skipped: Skipped,
    /// Frames that could not be read down to their UDP port, or that were addressed to
    /// UDP 4791 but broken at the IP or UDP layer: (capture position, reason).
    pub broken: Vec<(usize, String)>,
    /// Why reading the capture stopped early, if it did.
    pub capture_error: Option<String>,
}

/// Packets a capture held that are not RoCEv2, counted by why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Captured on a link type other than Ethernet.
    pub link_type: usize,
    /// Ethernet frames carrying neither IPv4 nor IPv6 (ARP, LLDP, …).
    pub not_ip: usize,
    /// IP packets of another protocol than UDP (the connection manager's TCP, ICMP).
    pub not_udp: usize,
    /// UDP datagrams to another port than the RoCEv2 one.
    pub other_port: usize,
    /// The other port most of those went to, and how many (a hint for `--port`).
    pub top_other_port: Option<(u16, usize)>,
    ports: std::collections::HashMap<u16, usize>,
}

impl Skipped {
    /// All skipped packets.
    pub fn total(&self) -> usize {
        self.link_type + self.not_ip + self.not_udp + self.other_port
    }

    /// Count one Ethernet frame that `frame::parse_on_port` found not to be RoCEv2:
    /// why, read with the same checked views (a frame too short to tell counts as not
    /// IP, since the parse would have said broken otherwise).
    fn count_frame(&mut self, data: &[u8]) {
        let l3 = EthernetFrame::new_checked(data)
            .ok()
            .and_then(|f| EthernetRepr::parse(&f).ok())
            .and_then(|e| Some((e.ethertype, data.get(e.header_len()..)?)));
        let l4 = match l3 {
            Some((EtherType::IPV4, l3)) => Ipv4Packet::new_checked(l3)
                .ok()
                .map(|v| (v.protocol(), v.payload().get(2..4).map(<[u8]>::to_vec))),
            Some((EtherType::IPV6, l3)) => Ipv6Packet::new_checked(l3).ok().and_then(|v| {
                let (proto, off) = v.upper_layer().ok()?;
                Some((proto, l3.get(off + 2..off + 4).map(<[u8]>::to_vec)))
            }),
            _ => None,
        };
        match l4 {
            None => self.not_ip += 1,
            Some((proto, _)) if proto != IpProtocol::UDP => self.not_udp += 1,
            Some((_, port)) => {
                self.other_port += 1;
                if let Some(p) = port.and_then(|b| <[u8; 2]>::try_from(b).ok()) {
                    let p = u16::from_be_bytes(p);
                    let n = self.ports.entry(p).or_default();
                    *n += 1;
                    if self.top_other_port.is_none_or(|(_, top)| *n > top) {
                        self.top_other_port = Some((p, *n));
                    }
                }
            }
        }
    }

    /// The summary's words: `80 other packets skipped: 78 UDP to other ports (most to
    /// 37182: use --port 37182), 2 not UDP`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.other_port > 0 {
            let hint = match self.top_other_port {
                Some((p, n)) => format!(" (most to {p}, {n}: use --port {p} if that is RoCEv2)"),
                None => " (use --port)".into(),
            };
            parts.push(format!("{} UDP to other ports{hint}", self.other_port));
        }
        if self.not_udp > 0 {
            parts.push(format!("{} not UDP", self.not_udp));
        }
        if self.not_ip > 0 {
            parts.push(format!("{} not IP", self.not_ip));
        }
        if self.link_type > 0 {
            parts.push(format!("{} not on Ethernet", self.link_type));
        }
        let mut s = format!("{} other packets skipped", self.total());
        if !parts.is_empty() {
            s.push_str(": ");
            s.push_str(&parts.join(", "));
        }
        s
    }
}

fn endpoint(ips: &IpPair, src: bool, port: u16) -> String {
    match (ips, src) {
        (IpPair::V4 { src, .. }, true) => format!("{src}:{port}"),
        (IpPair::V4 { dst, .. }, false) => format!("{dst}:{port}"),
        (IpPair::V6 { src, .. }, true) => format!("[{src}]:{port}"),
        (IpPair::V6 { dst, .. }, false) => format!("[{dst}]:{port}"),
    }
}

fn syndrome_words(s: Syndrome) -> String {
    match s {
        Syndrome::Ack { credit_code } => format!("ack credits={credit_code}"),
        Syndrome::RnrNak { timer } => format!("rnr_nak timer={timer}"),
        Syndrome::Nak(code) => format!("nak code={}", code.0),
        Syndrome::Reserved(raw) => format!("reserved {raw:#04x}"),
    }
}

/// Decode one RoCEv2 frame found at capture position `frame_index`.
pub fn decode_frame(index: usize, frame_index: usize, f: &RoceFrame<'_>) -> Decoded {
    let ips = f.ip_pair();
    let mut d = Decoded {
        index,
        frame: frame_index,
        src: endpoint(&ips, true, f.udp.src_port),
        dst: endpoint(&ips, false, f.udp.dst_port),
        opcode: None,
        opcode_name: None,
        dest_qp: None,
        psn: None,
        ack_req: None,
        icrc_ok: f.icrc_ok(),
        gso_segment: None,
        payload_len: None,
        reth: None,
        aeth: None,
        atomic_eth: None,
        atomic_ack: None,
        imm: None,
        ieth: None,
        deth: None,
        error: None,
    };
    // The BTH fields are reported even when the rest does not parse.
    if let Ok(bth) = weft_wire::roce::Bth::new_checked(f.ib) {
        d.opcode = Some(bth.opcode().0);
        d.opcode_name = bth.opcode().name();
        d.dest_qp = Some(bth.dest_qp());
        d.psn = Some(bth.psn().value());
        d.ack_req = Some(bth.ack_req());
    }
    let parsed = IbPacket::new_checked(f.ib).and_then(|p| Ok((IbPacketRepr::parse(&p)?, p)));
    match parsed {
        Ok((r, p)) => {
            d.payload_len = Some(p.payload().len());
            d.reth = r.reth.map(|x| Reth {
                va: x.va,
                rkey: x.rkey,
                len: x.dma_len,
            });
            d.aeth = r.aeth.map(|x| Aeth {
                syndrome: x.syndrome.to_u8(),
                meaning: syndrome_words(x.syndrome),
                msn: x.msn,
            });
            d.atomic_eth = r.atomic_eth.map(|x| AtomicEth {
                va: x.va,
                rkey: x.rkey,
                swap_add: x.swap_add,
                compare: x.compare,
            });
            d.atomic_ack = r.atomic_ack_eth.map(|x| x.orig);
            d.imm = r.imm;
            d.ieth = r.ieth;
            d.deth = r.deth.map(|x| Deth {
                qkey: x.qkey,
                src_qp: x.src_qp,
            });
        }
        Err(e) => d.error = Some(e.to_string()),
    }
    d
}

/// Decode every RoCEv2 packet of a capture held in memory.
pub fn decode_capture(bytes: &[u8]) -> anyhow::Result<Report> {
    decode_capture_on_port(bytes, UDP_PORT)
}

/// As [`decode_capture`], with RoCEv2 on UDP destination port `port`.
pub fn decode_capture_on_port(bytes: &[u8], port: u16) -> anyhow::Result<Report> {
    let cap = pcap::read(bytes)?;
    let mut report = Report {
        capture_error: cap.error.map(|e| e.to_string()),
        ..Report::default()
    };
    // The segment size of the last GSO send, tried first on the next.
    let mut gso_size = None;
    for (i, pkt) in cap.packets.iter().enumerate() {
        if pkt.linktype != pcap::LINKTYPE_ETHERNET {
            report.skipped.link_type += 1;
            continue;
        }
        match weft_wire::frame::parse_on_port(pkt.data, port) {
            Ok(Some(f)) => match f.gso_segment_size(gso_size) {
                Some(size) => {
                    gso_size = Some(size);
                    let mut k = 0;
                    while let Some(ib) = f.segment(k, size) {
                        let seg = RoceFrame { ib, ..f.clone() };
                        let mut d = decode_frame(report.packets.len(), i, &seg);
                        d.icrc_ok = f.segment_icrc_ok(k, size);
                        d.gso_segment = Some(k);
                        report.packets.push(d);
                        k += 1;
                    }
                }
                None => {
                    let index = report.packets.len();
                    report.packets.push(decode_frame(index, i, &f));
                }
            },
            Ok(None) => report.skipped.count_frame(pkt.data),
            Err(e) => report.broken.push((i, e.to_string())),
        }
    }
    Ok(report)
}

/// One line of text for a decoded packet.
pub fn format_line(d: &Decoded) -> String {
    use std::fmt::Write as _;
    let mut s = format!("#{:<4} {} > {}", d.index, d.src, d.dst);
    match (d.opcode, d.opcode_name) {
        (_, Some(name)) => write!(s, " {name}").ok(),
        (Some(op), None) => write!(s, " opcode={op:#04x}").ok(),
        _ => None,
    };
    if let (Some(qp), Some(psn)) = (d.dest_qp, d.psn) {
        write!(s, " qp={qp:#08x} psn={psn}").ok();
    }
    if d.ack_req == Some(true) {
        s.push_str(" ackreq");
    }
    if let Some(r) = &d.reth {
        write!(s, " reth(va={:#x} rkey={:#x} len={})", r.va, r.rkey, r.len).ok();
    }
    if let Some(a) = &d.aeth {
        write!(s, " aeth({} msn={})", a.meaning, a.msn).ok();
    }
    if let Some(a) = &d.atomic_eth {
        write!(
            s,
            " atomic(va={:#x} rkey={:#x} swap_add={} compare={})",
            a.va, a.rkey, a.swap_add, a.compare
        )
        .ok();
    }
    if let Some(o) = d.atomic_ack {
        write!(s, " atomic_ack(orig={o})").ok();
    }
    if let Some(x) = &d.deth {
        write!(s, " deth(qkey={:#x} src_qp={:#x})", x.qkey, x.src_qp).ok();
    }
    if let Some(i) = d.imm {
        write!(s, " imm={i:#x}").ok();
    }
    if let Some(i) = d.ieth {
        write!(s, " ieth={i:#x}").ok();
    }
    if let Some(n) = d.payload_len {
        write!(s, " payload={n}").ok();
    }
    s.push_str(if d.icrc_ok { " icrc=ok" } else { " icrc=BAD" });
    if let Some(k) = d.gso_segment {
        write!(s, " gso_segment={k}").ok();
    }
    if let Some(e) = &d.error {
        write!(s, " MALFORMED: {e}").ok();
    }
    s
}

/// Run `weft decode`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let report = decode_capture_on_port(&bytes, args.port)
        .with_context(|| format!("{}", args.file.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for d in &report.packets {
        if args.json {
            serde_json::to_writer(&mut out, d)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", format_line(d))?;
        }
    }
    out.flush()?;
    let bad_icrc = report.packets.iter().filter(|d| !d.icrc_ok).count();
    let malformed = report.packets.iter().filter(|d| d.error.is_some()).count();
    eprintln!(
        "{} RoCEv2 packets to UDP port {} ({} with a bad ICRC, {} malformed), {}",
        report.packets.len(),
        args.port,
        bad_icrc,
        malformed,
        report.skipped.describe()
    );
    if let Some((i, why)) = report.broken.first() {
        eprintln!(
            "{} frames broken below the transport headers (first: capture packet {i}: {why})",
            report.broken.len()
        );
    }
    if let Some(e) = report.capture_error {
        eprintln!("warning: capture damaged: {e}; decoded what came before it");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{repr_for, DST_V4, SRC_V4};
    use weft_wire::frame::FrameBuilder;
    use weft_wire::roce::Opcode;

    /// A capture of one UDP GSO send whole (identification 5): three WRITE MIDDLE
    /// packets of 1024 bytes and a shorter WRITE LAST, each with the ICRC of the
    /// datagram it becomes; and one ordinary frame after it.
    fn gso_capture(corrupt_segment: Option<usize>) -> Vec<u8> {
        let mut fb = FrameBuilder::v4(SRC_V4, DST_V4, 49152);
        fb.udp_checksum = false;
        let h = fb.header_len();
        let mut ib = Vec::new();
        for (k, (op, payload)) in [
            (Opcode::RC_WRITE_MIDDLE, 1024),
            (Opcode::RC_WRITE_MIDDLE, 1024),
            (Opcode::RC_WRITE_MIDDLE, 1024),
            (Opcode::RC_WRITE_LAST, 100),
        ]
        .into_iter()
        .enumerate()
        {
            fb.ident = 5 + k as u16;
            let mut buf = vec![0u8; 2048];
            let n = fb
                .emit(
                    &mut buf,
                    &repr_for(op, k as u32).unwrap(),
                    &vec![k as u8; payload],
                )
                .unwrap();
            ib.extend_from_slice(&buf[h..n]);
        }
        if let Some(k) = corrupt_segment {
            ib[k * 1040 + 20] ^= 1;
        }
        fb.ident = 5;
        let mut whole = vec![0u8; h + ib.len()];
        whole[h..].copy_from_slice(&ib);
        let n = fb.wrap(&mut whole, ib.len()).unwrap();
        // wrap wrote the ICRC of the whole; the last segment keeps its own.
        whole[n - 4..].copy_from_slice(&ib[ib.len() - 4..]);
        let mut w = pcap::Writer::new(Vec::new()).unwrap();
        w.write(1, &whole).unwrap();
        let mut one = vec![0u8; 256];
        fb.ident = 0;
        let m = fb
            .emit(&mut one, &repr_for(Opcode::RC_SEND_ONLY, 9).unwrap(), b"hi")
            .unwrap();
        w.write(2, &one[..m]).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn a_gso_send_captured_whole_is_cut_into_its_packets_with_good_icrcs() {
        let r = decode_capture(&gso_capture(None)).unwrap();
        assert_eq!(r.packets.len(), 5, "{:#?}", r.packets);
        for (k, d) in r.packets[..4].iter().enumerate() {
            assert_eq!(d.gso_segment, Some(k));
            assert_eq!(d.frame, 0);
            assert!(d.icrc_ok, "segment {k}");
            assert!(d.error.is_none(), "{:?}", d.error);
        }
        assert_eq!(r.packets[0].opcode_name, Some("RC_WRITE_MIDDLE"));
        assert_eq!(r.packets[0].payload_len, Some(1024));
        assert_eq!(r.packets[3].opcode_name, Some("RC_WRITE_LAST"));
        assert_eq!(r.packets[3].payload_len, Some(100));
        assert!(format_line(&r.packets[2]).ends_with("icrc=ok gso_segment=2"));
        assert_eq!(
            r.packets[4].gso_segment, None,
            "an ordinary frame stays whole"
        );
        assert!(r.packets[4].icrc_ok);
    }

    #[test]
    fn a_corrupted_segment_of_a_gso_send_is_reported_bad() {
        let r = decode_capture(&gso_capture(Some(2))).unwrap();
        let bad: Vec<_> = r
            .packets
            .iter()
            .filter(|d| !d.icrc_ok)
            .map(|d| d.gso_segment)
            .collect();
        assert_eq!(bad, [Some(2)]);
    }
}
