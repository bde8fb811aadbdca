//! Capture files: read pcap (both byte orders, µs and ns) and pcapng (SHB, IDB, EPB,
//! SPB, OPB); write pcap with nanosecond timestamps.
//!
//! A capture is a user's file and may be cut short or damaged: [`read`] returns every
//! record it could read and, separately, what stopped it. It never panics on input.

use std::fmt;

/// Link type of Ethernet frames (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts_nanos: u64,
    /// The interface's link type.
    pub linktype: u32,
    /// Captured bytes (possibly fewer than `orig_len`).
    pub data: &'a [u8],
    /// Length of the packet on the wire.
    pub orig_len: u32,
}

/// What a capture file held.
#[derive(Debug, Default)]
pub struct Capture<'a> {
    /// The records read, in file order.
    pub packets: Vec<Packet<'a>>,
    /// Why reading stopped before the end of the file, if it did.
    pub error: Option<CaptureError>,
}

/// A problem in a capture file, with the byte offset where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureError {
    /// Offset into the file.
    pub offset: usize,
    /// What was wrong.
    pub what: &'static str,
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for CaptureError {}

/// A cursor that reads integers in the file's byte order and never reads past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    big_endian: bool,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        let b: [u8; 2] = self.take(2)?.try_into().ok()?;
        Some(if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    }
    fn u32(&mut self) -> Option<u32> {
        let b: [u8; 4] = self.take(4)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
    fn err(&self, what: &'static str) -> CaptureError {
        CaptureError {
            offset: self.at,
            what,
        }
    }
}

const PCAP_MICROS: u32 = 0xa1b2_c3d4;
const PCAP_NANOS: u32 = 0xa1b2_3c4d;
const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BYTE_ORDER: u32 = 0x1a2b_3c4d;

/// Read a pcap or pcapng file held in memory.
pub fn read(bytes: &[u8]) -> Result<Capture<'_>, CaptureError> {
    let magic: [u8; 4] = bytes
        .get(..4)
        .and_then(|m| m.try_into().ok())
        .ok_or(CaptureError {
            offset: 0,
            what: "file shorter than a capture header",
        })?;
    let le = u32::from_le_bytes(magic);
    let be = u32::from_be_bytes(magic);
    match (le, be) {
        (PCAP_MICROS | PCAP_NANOS, _) => read_pcap(bytes, false, le == PCAP_NANOS),
        (_, PCAP_MICROS | PCAP_NANOS) => read_pcap(bytes, true, be == PCAP_NANOS),
        (PCAPNG_SHB, _) => Ok(read_pcapng(bytes)),
        _ => Err(CaptureError {
            offset: 0,
            what: "not a pcap or pcapng file",
        }),
    }
}

fn read_pcap(bytes: &[u8], big_endian: bool, nanos: bool) -> Result<Capture<'_>, CaptureError> {
    let mut r = Reader {
        bytes,
        at: 0,
        big_endian,
    };
    let header = (|| {
        r.u32()?; // magic
        r.u16()?; // version major
        r.u16()?; // version minor
        r.u32()?; // thiszone
        r.u32()?; // sigfigs
        r.u32()?; // snaplen
        r.u32() // network (link type)
    })();
    let linktype = header.ok_or(CaptureError {
        offset: 0,
        what: "truncated pcap header",
    })?;
    let mut cap = Capture::default();
    while r.at < bytes.len() {
        let record = (|| {
            let sec = u64::from(r.u32()?);
            let frac = u64::from(r.u32()?);
            let incl = r.u32()?;
            let orig_len = r.u32()?;
            Some((sec, frac, incl, orig_len))
        })();
        let Some((sec, frac, incl, orig_len)) = record else {
            cap.error = Some(r.err("truncated record header"));
            break;
        };
        let Some(data) = usize::try_from(incl).ok().and_then(|n| r.take(n)) else {
            cap.error = Some(r.err("record data runs past the end of the file"));
            break;
        };
        let ts_nanos = sec.saturating_mul(1_000_000_000).saturating_add(if nanos {
            frac
        } else {
            frac.saturating_mul(1000)
        });
        cap.packets.push(Packet {
            ts_nanos,
            // The link type is the low 16 bits; the upper bits carry FCS information.
            linktype: linktype & 0xffff,
            data,
            orig_len,
        });
    }
    Ok(cap)
}

/// One pcapng interface: its link type and timestamp unit in nanoseconds (or, for
/// resolutions finer than 1 ns, a divisor).
#[derive(Clone, Copy)]
struct Interface {
    linktype: u32,
    /// Snap length (0 in the file means unlimited).
    snaplen: u32,
    /// Timestamp ticks per second.
    ticks_per_sec: u64,
}

fn read_pcapng(bytes: &[u8]) -> Capture<'_> {
    let mut cap = Capture::default();
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut big_endian = false;
    let mut at = 0usize;
    while at < bytes.len() {
        match read_block(
            bytes,
            at,
            &mut big_endian,
            &mut interfaces,
            &mut cap.packets,
        ) {
            Ok(next) => at = next,
            Err(e) => {
                cap.error = Some(e);
                break;
            }
        }
    }
    cap
}

/// Read the block at `at`; return the offset of the next one.
fn read_block<'a>(
    bytes: &'a [u8],
    at: usize,
    big_endian: &mut bool,
    interfaces: &mut Vec<Interface>,
    packets: &mut Vec<Packet<'a>>,
) -> Result<usize, CaptureError> {
    let bad = |what| CaptureError { offset: at, what };
    let raw_type: [u8; 4] = bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .ok_or(bad("truncated block"))?;
    if u32::from_le_bytes(raw_type) == PCAPNG_SHB {
        // The byte-order magic after the length decides how to read this section.
        let bom: [u8; 4] = bytes
            .get(at + 8..at + 12)
            .and_then(|b| b.try_into().ok())
            .ok_or(bad("truncated section header"))?;
        *big_endian = match (u32::from_le_bytes(bom), u32::from_be_bytes(bom)) {
            (PCAPNG_BYTE_ORDER, _) => false,
            (_, PCAPNG_BYTE_ORDER) => true,
            _ => return Err(bad("bad pcapng byte-order magic")),
        };
        interfaces.clear();
    }
    let mut r = Reader {
        bytes,
        at,
        big_endian: *big_endian,
    };
    let block_type = r.u32().ok_or(bad("truncated block"))?;
    let total = r.u32().ok_or(bad("truncated block"))? as usize;
    if total < 12 || total % 4 != 0 {
        return Err(bad("bad pcapng block length"));
    }
    let end = at
        .checked_add(total)
        .filter(|&e| e <= bytes.len())
        .ok_or(bad("block runs past the end of the file"))?;
    let body = &bytes[at + 8..end - 4];
    let mut b = Reader {
        bytes: body,
        at: 0,
        big_endian: *big_endian,
    };
    match block_type {
        // Interface Description Block
        1 => {
            let linktype = u32::from(b.u16().ok_or(bad("truncated interface block"))?);
            b.u16();
            let snaplen = match b.u32() {
                Some(0) | None => u32::MAX,
                Some(n) => n,
            };
            let mut ticks_per_sec = 1_000_000;
            while let (Some(code), Some(len)) = (b.u16(), b.u16()) {
                let Some(value) = b.take(usize::from(len)) else {
                    break;
                };
                b.take((4 - usize::from(len) % 4) % 4);
                if code == 0 {
                    break;
                }
                if code == 9 {
                    if let Some(&v) = value.first() {
                        let exp = u32::from(v & 0x7f);
                        let base: u64 = if v & 0x80 == 0 { 10 } else { 2 };
                        ticks_per_sec = base.checked_pow(exp).unwrap_or(u64::MAX);
                    }
                }
            }
            interfaces.push(Interface {
                linktype,
                snaplen,
                ticks_per_sec,
            });
        }
        // Enhanced Packet Block: 32-bit interface id
        6 => {
            let id = b.u32().ok_or(bad("truncated packet block"))?;
            packets.push(timed_packet(&mut b, interfaces, id as usize).map_err(bad)?);
        }
        // Simple Packet Block: interface 0, no timestamp
        3 => {
            let orig_len = b.u32().ok_or(bad("truncated simple packet block"))?;
            let iface = interfaces
                .first()
                .copied()
                .ok_or(bad("packet before any interface"))?;
            // Captured length: the original length cut to the snap length and to the
            // block (which may hold pad bytes after the data).
            let caplen = (orig_len as usize)
                .min(iface.snaplen as usize)
                .min(body.len().saturating_sub(4));
            let data = b.take(caplen).ok_or(bad("truncated simple packet block"))?;
            packets.push(Packet {
                ts_nanos: 0,
                linktype: iface.linktype,
                data,
                orig_len,
            });
        }
        // Obsolete Packet Block: 16-bit interface id, 16-bit drop count
        2 => {
            let id = b.u16().ok_or(bad("truncated packet block"))?;
            b.u16();
            packets.push(timed_packet(&mut b, interfaces, usize::from(id)).map_err(bad)?);
        }
        // Section header (handled above), statistics, name resolution, custom: skip.
        _ => {}
    }
    Ok(end)
}

/// The rest of an Enhanced or Obsolete Packet Block after its interface id (and drop
/// count): 64-bit timestamp, captured and original length, data.
fn timed_packet<'a>(
    b: &mut Reader<'a>,
    interfaces: &[Interface],
    id: usize,
) -> Result<Packet<'a>, &'static str> {
    let hi = u64::from(b.u32().ok_or("truncated packet block")?);
    let lo = u64::from(b.u32().ok_or("truncated packet block")?);
    let caplen = b.u32().ok_or("truncated packet block")?;
    let orig_len = b.u32().ok_or("truncated packet block")?;
    let data = b
        .take(caplen as usize)
        .ok_or("packet data runs past its block")?;
    let iface = interfaces
        .get(id)
        .copied()
        .ok_or("packet names an undeclared interface")?;
    Ok(Packet {
        ts_nanos: ticks_to_nanos((hi << 32) | lo, iface.ticks_per_sec),
        linktype: iface.linktype,
        data,
        orig_len,
    })
}

fn ticks_to_nanos(ticks: u64, ticks_per_sec: u64) -> u64 {
    let t = u128::from(ticks) * 1_000_000_000 / u128::from(ticks_per_sec.max(1));
    u64::try_from(t).unwrap_or(u64::MAX)
}

/// Writes a classic pcap file (little-endian, nanosecond timestamps, Ethernet).
#[derive(Debug)]
pub struct Writer<W: std::io::Write> {
    out: W,
}

impl<W: std::io::Write> Writer<W> {
    /// Write the file header.
    pub fn new(mut out: W) -> std::io::Result<Writer<W>> {
        out.write_all(&PCAP_NANOS.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?; // thiszone
        out.write_all(&0u32.to_le_bytes())?; // sigfigs
        out.write_all(&65535u32.to_le_bytes())?; // snaplen
        out.write_all(&LINKTYPE_ETHERNET.to_le_bytes())?;
        Ok(Writer { out })
    }

    /// Append one frame.
    pub fn write(&mut self, ts_nanos: u64, frame: &[u8]) -> std::io::Result<()> {
        let len = u32::try_from(frame.len())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too long"))?;
        let sec = u32::try_from(ts_nanos / 1_000_000_000).unwrap_or(u32::MAX);
        let nsec = (ts_nanos % 1_000_000_000) as u32;
        self.out.write_all(&sec.to_le_bytes())?;
        self.out.write_all(&nsec.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(frame)
    }

    /// Flush and return the inner writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_pcap() -> Vec<u8> {
        let mut w = Writer::new(Vec::new()).unwrap();
        w.write(1_500_000_123, &[1, 2, 3]).unwrap();
        w.write(2_000_000_000, &[4; 60]).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn pcap_round_trip() {
        let bytes = sample_pcap();
        let cap = read(&bytes).unwrap();
        assert!(cap.error.is_none());
        assert_eq!(cap.packets.len(), 2);
        assert_eq!(cap.packets[0].ts_nanos, 1_500_000_123);
        assert_eq!(cap.packets[0].data, &[1, 2, 3]);
        assert_eq!(cap.packets[1].data.len(), 60);
        assert_eq!(cap.packets[1].linktype, LINKTYPE_ETHERNET);
    }

    #[test]
    fn truncated_pcap_keeps_what_it_read() {
        let bytes = sample_pcap();
        for cut in 24..bytes.len() {
            let cap = read(&bytes[..cut]).unwrap();
            let whole = if cut >= 24 + 16 + 3 { 1 } else { 0 };
            assert_eq!(cap.packets.len(), whole, "cut at {cut}");
            assert!(cap.error.is_some() || cut == 24 || cut == 24 + 16 + 3);
        }
        assert!(read(&bytes[..10]).is_err());
        assert!(read(b"garbage!").is_err());
    }

    fn block(ty: u32, body: &[u8]) -> Vec<u8> {
        let total = (12 + body.len()) as u32;
        let mut b = ty.to_le_bytes().to_vec();
        b.extend_from_slice(&total.to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&total.to_le_bytes());
        b
    }

    fn sample_pcapng() -> Vec<u8> {
        let mut f = Vec::new();
        let mut shb = PCAPNG_BYTE_ORDER.to_le_bytes().to_vec();
        shb.extend_from_slice(&[1, 0, 0, 0]);
        shb.extend_from_slice(&u64::MAX.to_le_bytes());
        f.extend(block(PCAPNG_SHB, &shb));
        // IDB: Ethernet, if_tsresol = 9 (nanoseconds)
        let mut idb = vec![1, 0, 0, 0, 0, 0, 0, 0];
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        f.extend(block(1, &idb));
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&7u32.to_le_bytes());
        epb.extend_from_slice(&5u32.to_le_bytes());
        epb.extend_from_slice(&5u32.to_le_bytes());
        epb.extend_from_slice(&[9, 8, 7, 6, 5, 0, 0, 0]);
        f.extend(block(6, &epb));
        f
    }

    #[test]
    fn pcapng_enhanced_packets() {
        let bytes = sample_pcapng();
        let cap = read(&bytes).unwrap();
        assert!(cap.error.is_none(), "{:?}", cap.error);
        assert_eq!(cap.packets.len(), 1);
        assert_eq!(cap.packets[0].data, &[9, 8, 7, 6, 5]);
        assert_eq!(cap.packets[0].ts_nanos, 7);
    }

    #[test]
    fn damaged_pcapng_is_reported_not_fatal() {
        let bytes = sample_pcapng();
        for cut in 4..bytes.len() {
            let _ = read(&bytes[..cut]);
        }
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 20] = 0xff; // caplen of the packet far beyond its block
        let cap = read(&bad).unwrap();
        assert!(cap.error.is_some());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let seeds = [sample_pcap(), sample_pcapng()];
        for i in 0..20_000 {
            let mut b = seeds[i % 2].clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize) % b.len();
                b[at] = (x >> 32) as u8;
            }
            let _ = read(&b);
        }
    }
}
