//! By-reference WRITEs: one copy of a large payload, decided here.
//!
//! On a link whose receiver can read the sender's memory (weft's shm link with
//! cross-memory attach), a large RDMA WRITE need not be cut into MTU packets and
//! copied through the link. The requester cuts it into *chunks* of [`CHUNK`] bytes
//! (the last one up to twice that) and sends each as one WRITE Only packet, one PSN:
//! its RETH names the chunk's remote address and the length of the **rest of the
//! message** from there (always more than the path MTU, which no ordinary Only packet
//! may carry, §9.7 — that is the mark), and its payload is the list of the
//! requester's source spans of that chunk, [`SPAN_LEN`] bytes each (address, length;
//! big-endian u64s), at most [`MAX_SGE`]. So the first chunk's
//! checks cover the whole message, and a chunk costs one copy system call while a
//! 4 MiB WRITE still leaves the engine between chunks (the scheduler charges each
//! chunk its bytes). The responder makes every check it makes for any WRITE —
//! opcode sequence, rkey, protection domain, bounds of the whole rest, rights, RNR
//! for an immediate — *before* a byte moves, then asks
//! [`Memory::pull`](crate::Memory::pull) to copy the spans from the process at the
//! other end of the packet's arrival path (never a peer named by the packet) into the
//! target. A pull that fails is a Remote Access Error NAK; a packet from a peer that
//! cannot be pulled from (any udp peer, an shm peer whose probe failed) fails the
//! same way, so a hostile packet can at most make us read its sender's own memory.
//!
//! The requester sends by reference only when the caller turned it on for the QP
//! ([`crate::Endpoint::set_by_reference`]: the engine does so when its link says
//! the peer pulls) and the message is a WRITE of at least
//! [`Config::by_reference_min`](crate::Config::by_reference_min) bytes (and more
//! than one MTU) whose every source span the memory can name in this process
//! ([`Memory::pull_address`](crate::Memory::pull_address)). A WRITE with immediate
//! goes by reference only when it is one chunk, so the receive completion's byte
//! count is the message's.

use crate::wr::MAX_SGE;
use weft_wire::roce::{IbPacketRepr, Operation, Position};

/// Bytes one span takes in a by-reference payload.
pub const SPAN_LEN: usize = 16;

/// Bytes a by-reference chunk pulls (the last chunk of a message takes the
/// remainder, up to twice this): one `process_vm_readv` each on weft's shm link.
pub const CHUNK: u64 = 64 * 1024;

/// Chunks a QP may have in flight while it sends by reference beside other sending QPs
/// of its endpoint (at most 640 KiB); alone, it uses its whole window (a window of 8
/// cost a lone 4 MiB stream 14–31 % of its rate: the receiver waited for chunks).
///
/// A chunk in flight is copy work queued at the receiver ahead of every packet that
/// arrives after it on the link, whatever its QP: the receiver takes packets in the
/// order they came. With the QP's whole window of chunks out (64 PSNs, a 4 MiB WRITE)
/// a small SEND on another QP waited for ~40 chunk copies, 240 µs on shm (`weft study
/// --parts fig5 --link shm`, docs/results/study.md, "Fig. 5 over shm"). The window
/// trades that wait against the bulk flow's pipeline: 4 chunks measured a 30 µs wait
/// and a 35–41 % loss of the 4 MB flow's rate beside the small operations, 8 chunks
/// 49 µs and 20–22 %, 16 chunks 90 µs and 11–16 %. Eight also leave a stream of
/// single-chunk WRITEs (64 KiB) room for the ACKs' way back.
pub const WINDOW: u64 = 8;

/// Chunks (PSNs) of a by-reference message of `len` bytes.
pub(crate) fn chunks(len: u64) -> u64 {
    (len / CHUNK).max(1)
}

/// Offset and length of chunk `i` of `n` of a `len`-byte message.
pub(crate) fn chunk(len: u64, n: u64, i: u64) -> (u64, u64) {
    let off = i * CHUNK;
    if i + 1 >= n {
        (off, len - off)
    } else {
        (off, CHUNK)
    }
}

/// One span of the requester's memory, as a by-reference payload names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemoteSpan {
    /// First address, in the requester's process.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// Whether a request packet is a by-reference WRITE: a WRITE Only whose RETH names
/// more than one path MTU (which an ordinary Only packet cannot carry).
pub(crate) fn is_by_reference(repr: &IbPacketRepr, mtu: u64) -> bool {
    // The RETH first: most packets have none, and the test is one comparison.
    repr.reth.is_some_and(|r| u64::from(r.dma_len) > mtu)
        && repr
            .bth
            .opcode
            .info()
            .is_some_and(|i| i.operation == Operation::Write && i.position == Position::Only)
}

/// Write one span into `out` (its first [`SPAN_LEN`] bytes; `out` is at least that).
pub(crate) fn encode(span: RemoteSpan, out: &mut [u8]) {
    out[..8].copy_from_slice(&span.addr.to_be_bytes());
    out[8..SPAN_LEN].copy_from_slice(&span.len.to_be_bytes());
}

/// Read the spans of a by-reference payload into `out`; returns their count and the
/// sum of their lengths. `None` unless the payload is 1..=`MAX_SGE` whole spans, none
/// empty, whose lengths add up to at most `total` (the rest of the message).
pub(crate) fn decode(
    payload: &[u8],
    total: u64,
    out: &mut [RemoteSpan; MAX_SGE],
) -> Option<(usize, u64)> {
    let n = payload.len() / SPAN_LEN;
    if payload.len() % SPAN_LEN != 0 || n == 0 || n > MAX_SGE {
        return None;
    }
    let mut sum = 0u64;
    for (c, o) in payload.chunks_exact(SPAN_LEN).zip(out.iter_mut()) {
        let addr = u64::from_be_bytes(c[..8].try_into().ok()?);
        let len = u64::from_be_bytes(c[8..].try_into().ok()?);
        if len == 0 || addr.checked_add(len).is_none() {
            return None;
        }
        sum = sum.checked_add(len)?;
        *o = RemoteSpan { addr, len };
    }
    (sum <= total).then_some((n, sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_round_trip_and_every_bad_list_is_refused() {
        let spans = [
            RemoteSpan {
                addr: 0x7f00_0000_1000,
                len: 4096,
            },
            RemoteSpan { addr: 42, len: 7 },
        ];
        let mut buf = [0u8; 64];
        encode(spans[0], &mut buf);
        encode(spans[1], &mut buf[SPAN_LEN..]);
        let n = 2 * SPAN_LEN;
        let mut out = [RemoteSpan::default(); MAX_SGE];
        assert_eq!(decode(&buf[..n], 4103, &mut out), Some((2, 4103)));
        assert_eq!(&out[..2], &spans);
        // A chunk of a longer message: fine. More than the message: refused.
        assert_eq!(decode(&buf[..n], 9000, &mut out), Some((2, 4103)));
        assert_eq!(decode(&buf[..n], 4102, &mut out), None);
        // Ragged length, empty, a zero-length span, a wrapping span.
        assert_eq!(decode(&buf[..n - 1], 4103, &mut out), None);
        assert_eq!(decode(&[], 0, &mut out), None);
        encode(RemoteSpan { addr: 1, len: 0 }, &mut buf);
        assert_eq!(decode(&buf[..SPAN_LEN], 0, &mut out), None);
        let wrap = RemoteSpan {
            addr: u64::MAX,
            len: 2,
        };
        encode(wrap, &mut buf);
        assert_eq!(decode(&buf[..SPAN_LEN], 2, &mut out), None);
        // Too many spans.
        let many = vec![0u8; SPAN_LEN * (MAX_SGE + 1)];
        assert_eq!(decode(&many, 0, &mut out), None);
    }

    #[test]
    fn chunks_tile_the_message_and_none_is_an_mtu_or_less() {
        let lens = [
            4097,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            2 * CHUNK,
            3 * CHUNK + 5,
            1 << 22,
        ];
        for len in lens {
            let n = chunks(len);
            let mut at = 0;
            for i in 0..n {
                let (off, l) = chunk(len, n, i);
                assert_eq!(off, at);
                assert!(l > 4096 && l < 2 * CHUNK, "{len}: chunk {i} of {n} is {l}");
                at += l;
            }
            assert_eq!(at, len);
        }
    }
}
