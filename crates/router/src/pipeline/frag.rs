//! IPv4 fragmentation (RFC 791 §3.2, RFC 1812 §5.2.6) and the walk over IPv4 options
//! (RFC 791 §3.1) that validation and fragmentation share.

use super::{Outbox, Worker, MIN_FRAME};
use crate::counters::Counter;
use crate::fib::NextHop;
use std::net::IpAddr;
use std::time::Instant;
use weft_link::PacketBuf;
use weft_wire::ethernet;
use weft_wire::ipv4::{self, Ipv4Packet};

impl Worker {
    /// Split the validated IPv4 packet in `buf` (DF clear) into fragments of at most
    /// `mtu` bytes, after RFC 791 §3.2 ("An Example Fragmentation Procedure"): each
    /// fragment's data is a multiple of 8 bytes but the last's, offsets add to the
    /// packet's own (it may be a fragment already), MF is set on all but the last,
    /// which keeps the packet's MF; the first fragment carries every option, later
    /// ones only the options whose copied flag is set (RFC 791 §3.1). Fragments are
    /// finished here, on the ingress worker, and leave through `out` in order; this is
    /// the slow path, so it allocates a buffer per fragment from the pool.
    pub(super) fn fragment_v4(
        &mut self,
        nh: NextHop,
        dst: IpAddr,
        buf: &PacketBuf,
        mtu: usize,
        now: Instant,
        out: &mut Outbox,
    ) {
        let eth_header = &buf[..ethernet::HEADER_LEN];
        let ip = Ipv4Packet::new_unchecked(&buf[ethernet::HEADER_LEN..]);
        let (first_hlen, data) = (ip.header_len(), ip.payload());
        let mut later_options = [0u8; 40];
        let later_hlen = ipv4::HEADER_LEN + copied_options(ip.options(), &mut later_options);
        // The largest multiple of 8 that fits after each kind of header.
        let first_room = mtu.saturating_sub(first_hlen) & !7;
        let later_room = mtu.saturating_sub(later_hlen) & !7;
        let base = usize::from(ip.frag_offset());
        // RFC 791: every router can forward 68 bytes, so 8 bytes of data per fragment
        // always fit on a real link; an offset past the 13-bit field cannot be sent.
        if first_room == 0 || later_room == 0 || base + data.len() > usize::from(u16::MAX) {
            self.counters.inc(Counter::DropTooBig);
            return;
        }
        let mut pos = 0;
        while pos < data.len() {
            let (hlen, room) = if pos == 0 {
                (first_hlen, first_room)
            } else {
                (later_hlen, later_room)
            };
            let n = room.min(data.len() - pos);
            let more = pos + n < data.len() || ip.more_frags();
            let len = ethernet::HEADER_LEN + hlen + n;
            let Some(mut f) = self.alloc(len.max(MIN_FRAME)) else {
                // The fragments already sent are wasted; the receiver's reassembly
                // times out, as after any loss.
                return;
            };
            f[..ethernet::HEADER_LEN].copy_from_slice(eth_header);
            {
                let frag = &mut f[ethernet::HEADER_LEN..len];
                frag[..ipv4::HEADER_LEN].copy_from_slice(&ip.header()[..ipv4::HEADER_LEN]);
                if pos == 0 {
                    frag[ipv4::HEADER_LEN..hlen].copy_from_slice(ip.options());
                } else {
                    frag[ipv4::HEADER_LEN..hlen]
                        .copy_from_slice(&later_options[..hlen - ipv4::HEADER_LEN]);
                }
                frag[hlen..].copy_from_slice(&data[pos..pos + n]);
                let mut h = Ipv4Packet::new_unchecked(frag);
                h.set_version_header_len(hlen);
                h.set_total_len((hlen + n) as u16);
                h.set_frag(false, more, (base + pos) as u16);
                h.fill_checksum();
            }
            self.counters.inc(Counter::FragmentsCreated);
            if let Some(mut fw) = self.resolve_forward(nh, dst, f, true, now, out) {
                // Another cluster node's port: its owner finishes the fragment (TTL
                // and MAC), as it finishes every frame that crosses; finished here
                // too, the TTL would drop twice.
                if !self.router.is_remote(fw.egress) {
                    self.router.finish(&mut fw.buf, fw.egress, fw.dst_mac);
                }
                out.push((fw.egress, fw.buf));
            }
            pos += n;
        }
        self.counters.inc(Counter::Fragmented);
    }
}

/// What [`check_ipv4_options`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum OptionsCheck {
    /// Well formed, nothing the router refuses.
    Ok,
    /// An option running past the header.
    Malformed,
    /// Loose or strict source route (refused: RFC 7126 §4.3, §4.4).
    SourceRoute,
}

/// The options of `opts` whose copied flag is set (RFC 791 §3.1: they go into every
/// fragment), written to `to` and padded with end-of-list to a multiple of 4; returns
/// the padded length. `opts` passed [`check_ipv4_options`]; a malformed tail ends the
/// walk all the same.
fn copied_options(opts: &[u8], to: &mut [u8; 40]) -> usize {
    let (mut i, mut n) = (0, 0);
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => i += 1,
            _ => {
                let len = usize::from(opts.get(i + 1).copied().unwrap_or(0));
                let Some(opt) = opts.get(i..i + len).filter(|_| len >= 2) else {
                    break;
                };
                if kind & 0x80 != 0 && n + len <= to.len() {
                    to[n..n + len].copy_from_slice(opt);
                    n += len;
                }
                i += len;
            }
        }
    }
    let padded = n.div_ceil(4) * 4;
    to[n..padded].fill(0);
    padded
}

/// Walk IPv4 options (RFC 791 §3.1): type 0 ends the list, type 1 is one byte, every
/// other option has a length byte of at least 2 that must stay inside the header.
pub(super) fn check_ipv4_options(opts: &[u8]) -> OptionsCheck {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return OptionsCheck::Ok,
            1 => i += 1,
            t => {
                let Some(&len) = opts.get(i + 1) else {
                    return OptionsCheck::Malformed;
                };
                let len = usize::from(len);
                if len < 2 || i + len > opts.len() {
                    return OptionsCheck::Malformed;
                }
                // Loose (131) and strict (137) source route.
                if t == 131 || t == 137 {
                    return OptionsCheck::SourceRoute;
                }
                i += len;
            }
        }
    }
    OptionsCheck::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copied_options_keep_only_the_copied_flag_padded_to_four() {
        let mut to = [0xaa; 40];
        // NOP, record route (not copied), router alert (copied), EOL, junk after it.
        let n = copied_options(&[1, 7, 7, 4, 0, 0, 0, 0, 148, 4, 0, 0, 0, 148], &mut to);
        assert_eq!(&to[..n], &[148, 4, 0, 0]);
        // A copied option of odd length is padded with end-of-list.
        let n = copied_options(&[130, 3, 9], &mut to);
        assert_eq!(&to[..n], &[130, 3, 9, 0]);
        // Nothing copied, or a length running past the end: nothing, no panic.
        assert_eq!(copied_options(&[7, 7, 4, 0, 0, 0, 0], &mut to), 0);
        assert_eq!(copied_options(&[148, 40, 0], &mut to), 0);
        assert_eq!(copied_options(&[148, 0], &mut to), 0);
        assert_eq!(copied_options(&[], &mut to), 0);
    }

    #[test]
    fn option_walk() {
        assert_eq!(check_ipv4_options(&[1, 1, 1, 0]), OptionsCheck::Ok);
        assert_eq!(
            check_ipv4_options(&[7, 7, 4, 0, 0, 0, 0, 0]),
            OptionsCheck::Ok
        );
        assert_eq!(check_ipv4_options(&[7, 9, 4, 0]), OptionsCheck::Malformed);
        assert_eq!(check_ipv4_options(&[7, 1, 0, 0]), OptionsCheck::Malformed);
        assert_eq!(check_ipv4_options(&[7]), OptionsCheck::Malformed);
        assert_eq!(
            check_ipv4_options(&[131, 3, 4, 0]),
            OptionsCheck::SourceRoute
        );
    }
}
