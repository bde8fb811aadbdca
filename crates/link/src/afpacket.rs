//! Linux `AF_PACKET` links with memory-mapped rings (packet(7),
//! Documentation/networking/packet_mmap.rst): the kernel writes received frames into
//! the receive ring, which we read in place and copy once into pooled buffers; we
//! fill transmit frames in the mapped ring and kick the kernel once per burst.
//!
//! Two ring layouts ([`RingVersion`]):
//!
//! - **`TPACKET_V2`** (the default): one fixed-size slot per frame, handed to user
//!   space the moment the kernel has written it (status word, then a wake-up of a
//!   poller). A lone frame waits for nobody.
//! - **`TPACKET_V3`**: variable-size frames packed into blocks; a block is handed over
//!   when it is full or when its retire timer fires. The timer counts in jiffies, so
//!   the 1 ms asked for here is 4 ms on a `HZ=250` kernel: on a quiet link a lone
//!   frame waits 1–5 ms (measured: docs/results/router.md §3). Denser, and one
//!   wake-up per block, but a router cannot hold packets that long.
//!
//! Offloads: a frame that crossed a veth carries what the sender left to a NIC, a
//! partial transport checksum and possibly a 64 KiB TCP super-frame (veth's default,
//! checksum offload and TSO on). The socket asks for the kernel's `virtio_net_hdr`
//! in front of each frame (`PACKET_VNET_HDR`), which says so with the offsets, and
//! the link finishes the work on receive ([`crate::offload`]), counting it in
//! [`LinkStats::rx_csum_completed`] and [`LinkStats::rx_gso_segmented`]. A V3 block is
//! large enough for a whole super-frame. A V2 slot is sized for the MTU; a frame that
//! does not fit goes whole to the socket's receive queue instead (`PACKET_COPY_THRESH`:
//! the slot is marked `TP_STATUS_COPY`, in order with the others) and is read from
//! there with `recvmsg`. A frame that fits neither is truncated by the kernel and
//! counted in [`LinkStats::rx_dropped`], never half-forwarded. On transmit the header
//! is all zero: every frame we send is complete.
//!
//! Needs `CAP_NET_RAW`.

use crate::sys::{self, Mmap};
use crate::{Armed, BufferPool, Link, LinkInfo, LinkStats, PacketBuf};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use crate::sys::interface_mac_mtu;

// Linux UAPI (include/uapi/linux/if_packet.h), defined here so the layout we rely on
// is in one place and does not depend on which structs the libc crate exports.
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_COPY_THRESH: libc::c_int = 7;
const TPACKET_V2: libc::c_int = 1;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// Receive (V2): the frame did not fit its slot; the whole of it waits in the
/// socket's receive queue (`PACKET_COPY_THRESH`).
const TP_STATUS_COPY: u32 = 2;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// Receive: the kernel took an 802.1Q tag off the frame into `tp_vlan_tci`.
const TP_STATUS_VLAN_VALID: u32 = 0x10;
/// Receive: `tp_vlan_tpid` holds the tag's TPID (else it is 0x8100).
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;
/// Receive: the sender left the transport checksum to a NIC (`CHECKSUM_PARTIAL`).
const TP_STATUS_CSUMNOTREADY: u32 = 0x8;

/// `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h), in front of each frame
/// once `PACKET_VNET_HDR` is on, in host byte order (packet sockets use the legacy,
/// native-endian layout).
mod vnet {
    pub const LEN: usize = 10;
    pub const FLAGS: usize = 0;
    pub const GSO_TYPE: usize = 1;
    pub const GSO_SIZE: usize = 4;
    pub const CSUM_START: usize = 6;
    pub const CSUM_OFFSET: usize = 8;
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: checksum `csum_start..` into `csum_offset`.
    pub const F_NEEDS_CSUM: u8 = 1;
}
const PACKET_OUTGOING: u8 = 4;
/// `sll_pkttype`: a frame for another host (or, once the stack cleared its 802.1Q
/// tag, one of a VLAN this host does not have).
const PACKET_OTHERHOST: u8 = 3;
const ETH_P_ALL: u16 = 0x0003;

/// `struct tpacket_req3` (V2 reads only its first four fields, `struct tpacket_req`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

/// `struct tpacket_stats_v3` (V2's `struct tpacket_stats` is its first two fields;
/// the kernel copies only as much as the version has).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct TpacketStatsV3 {
    tp_packets: u32,
    tp_drops: u32,
    tp_freeze_q_cnt: u32,
}

/// Where the fields of a frame header are: `struct tpacket2_hdr` (32 bytes) or
/// `struct tpacket3_hdr` (48 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hdr {
    status: usize,
    len: usize,
    snaplen: usize,
    mac: usize,
    vlan_tci: usize,
    vlan_tpid: usize,
    /// `tp_sec`, `tp_nsec`: when the kernel received the frame (`CLOCK_REALTIME`).
    sec: usize,
    nsec: usize,
    /// `TPACKET_ALIGN(sizeof(header))`: where `struct sockaddr_ll` follows on
    /// receive, and where frame data starts on transmit (the kernel's
    /// `tp_hdrlen - sizeof(struct sockaddr_ll)`).
    aligned_len: usize,
}

impl Hdr {
    const V2: Hdr = Hdr {
        status: 0,
        len: 4,
        snaplen: 8,
        mac: 12,
        vlan_tci: 24,
        vlan_tpid: 26,
        sec: 16,
        nsec: 20,
        aligned_len: 32,
    };
    const V3: Hdr = Hdr {
        status: 20,
        len: 16,
        snaplen: 12,
        mac: 24,
        // `hv1.tp_vlan_tci` (a u32 in V3, a u16 in V2: read as u16 at its address
        // only on little-endian, so the reader below knows which).
        vlan_tci: 32,
        vlan_tpid: 36,
        sec: 4,
        nsec: 8,
        aligned_len: 48,
    };
    /// `sll_pkttype` inside the `sockaddr_ll` that follows the header.
    const fn sll_pkttype(&self) -> usize {
        self.aligned_len + 10
    }
}

/// `struct tpacket3_hdr`'s `tp_next_offset`.
const HDR3_NEXT_OFFSET: usize = 0;

/// `struct tpacket_block_desc` with `struct tpacket_hdr_v1` inside.
mod block {
    pub const STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const OFFSET_TO_FIRST_PKT: usize = 16;
}

/// The layout of an `AF_PACKET` link's rings (one version for both rings of a
/// socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RingVersion {
    /// `TPACKET_V2`: a slot per frame, visible as soon as written (no timer).
    #[default]
    V2,
    /// `TPACKET_V3`: frames packed in blocks, visible when a block fills or its
    /// retire timer fires.
    V3,
}

impl std::str::FromStr for RingVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<RingVersion, String> {
        match s {
            "v2" => Ok(RingVersion::V2),
            "v3" => Ok(RingVersion::V3),
            _ => Err(format!("unknown ring {s:?} (v2, v3)")),
        }
    }
}

impl std::fmt::Display for RingVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RingVersion::V2 => "v2",
            RingVersion::V3 => "v3",
        })
    }
}

/// Sizes of an `AF_PACKET` link's rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Ring layout.
    pub version: RingVersion,
    /// V2: receive slots (each sized for the interface's MTU, a power of two of at
    /// least 2 KiB). This is the receive queue's bound: a frame that finds every slot
    /// taken is dropped by the kernel and counted.
    pub rx_frames: u32,
    /// V3: receive block size (a multiple of the page size).
    pub rx_block_size: u32,
    /// V3: receive blocks.
    pub rx_blocks: u32,
    /// V3: block retire timeout in milliseconds (rounded up to jiffies by the
    /// kernel: the latency floor of an idle link).
    pub retire_ms: u32,
    /// Transmit frame slot size (frame data starts 32 (V2) or 48 (V3) bytes in).
    pub tx_frame_size: u32,
    /// Transmit frame slots.
    pub tx_frames: u32,
    /// Skip the qdisc layer on transmit (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            version: RingVersion::V2,
            // 1 024 frames: 7–10 ms at the ~100–150 kpps a veth path carries here, a
            // NIC-sized queue (the kernel's own per-CPU backlog is 1 000); 2 MiB.
            rx_frames: 1024,
            // V3: a block must hold the largest frame the kernel hands us, a TCP
            // super-frame of up to 64 KiB from a sender with TSO on (see the module
            // head), hence 128 KiB.
            rx_block_size: 1 << 17,
            rx_blocks: 32,
            retire_ms: 1,
            tx_frame_size: 2048,
            tx_frames: 1024,
            qdisc_bypass: true,
        }
    }
}

impl RingConfig {
    /// The `TPACKET_V3` block ring weft used before V2 (32 blocks of 128 KiB, 1 ms
    /// retire timer), for comparison.
    pub fn v3() -> RingConfig {
        RingConfig {
            version: RingVersion::V3,
            ..RingConfig::default()
        }
    }
}

/// A V2 receive slot for frames of up to `max_frame` bytes: the kernel puts the
/// frame at `TPACKET_ALIGN(tp_hdrlen + 16)` plus the `virtio_net_hdr`, less the MAC
/// header (af_packet.c, `tpacket_rcv`): 76 bytes in with the header on. A power of
/// two, so slots tile pages and blocks.
fn v2_slot_size(max_frame: usize) -> u32 {
    let room = 128 + max_frame + 4; // header room, the frame, a tag the kernel may add
    (room.next_power_of_two().max(2048)) as u32
}

/// The wall clock as the kernel stamps frames (`CLOCK_REALTIME`), since the epoch:
/// the clock to compare [`AfPacket::arrivals`] with.
pub fn wall_clock() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Largest frame read back from the socket queue (a super-frame: 64 KiB of GSO
/// payload plus headers, `gso_max_size` on veth, with room to spare); anything
/// longer is dropped and counted.
const COPY_BUF: usize = (1 << 17) + vnet::LEN;

/// What the sender left to a NIC for a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unfinished {
    /// Nothing: the frame is as it would be on a wire.
    Nothing,
    /// The transport checksum, over `start..` into the field at `start + offset`
    /// (offsets from the frame's first byte as the kernel saw it).
    Checksum { start: usize, offset: usize },
    /// The checksum, offsets unknown (no `virtio_net_hdr`).
    ChecksumSomewhere,
    /// Segmentation (and the checksums): `virtio_net_hdr` gso type and size.
    Segment { gso_type: u8, gso_size: u16 },
}

impl Unfinished {
    /// What a `virtio_net_hdr` says is left to do.
    fn from_vnet(v: &[u8]) -> Unfinished {
        let (Some(&flags), Some(&gso_type)) = (v.get(vnet::FLAGS), v.get(vnet::GSO_TYPE)) else {
            return Unfinished::Nothing;
        };
        if gso_type != crate::offload::gso::NONE {
            return Unfinished::Segment {
                gso_type,
                gso_size: read_u16(v, vnet::GSO_SIZE),
            };
        }
        if flags & vnet::F_NEEDS_CSUM != 0 {
            return Unfinished::Checksum {
                start: usize::from(read_u16(v, vnet::CSUM_START)),
                offset: usize::from(read_u16(v, vnet::CSUM_OFFSET)),
            };
        }
        Unfinished::Nothing
    }
}

/// One receive slot (V2) or packet of a block (V3), as found.
#[derive(Debug, Clone, Copy)]
enum RxFrame {
    /// Frame bytes at this offset and length in the mapping, the 802.1Q tag (TPID,
    /// TCI) the kernel stripped from it, if any, and the offload work left.
    Data(usize, usize, Option<(u16, u16)>, Unfinished),
    /// V2: the frame did not fit its slot and waits whole, `len` bytes, in the
    /// socket's receive queue (`TP_STATUS_COPY`), with this tag.
    Queued(usize, Option<(u16, u16)>),
    /// Truncated, or offsets outside the slot or block.
    Bad,
    /// Our own transmission looped back: skip.
    Outgoing,
    /// A socket bound to one protocol got a frame for another host (or of a VLAN
    /// the stack untagged): dropped and counted; `true` when it waits in the
    /// socket's receive queue (V2, too long for its slot) and must be read off it.
    OtherHost(bool),
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_ne_bytes([s[0], s[1]]))
}

/// Copy a received frame into `b`, with its 802.1Q tag put back after the MAC
/// addresses when the kernel had taken one off. False when it does not fit.
fn copy_frame(b: &mut PacketBuf, frame: &[u8], tag: Option<(u16, u16)>) -> bool {
    let Some((tpid, tci)) = tag else {
        return b.copy_from(frame);
    };
    let (Some(macs), Some(rest)) = (frame.get(..12), frame.get(12..)) else {
        return false;
    };
    let Some(out) = b.spare_mut().get_mut(..frame.len() + 4) else {
        return false;
    };
    out[..12].copy_from_slice(macs);
    out[12..14].copy_from_slice(&tpid.to_be_bytes());
    out[14..16].copy_from_slice(&tci.to_be_bytes());
    out[16..].copy_from_slice(rest);
    b.set_len(frame.len() + 4)
}

/// Where received frames go: the pool and spare buffers, the queue of super-frame
/// segments not yet handed out, and the counters (fields of [`AfPacket`] borrowed
/// apart from its mapping, so a frame is copied straight out of the ring).
struct Sink<'a> {
    pool: &'a BufferPool,
    spare: &'a mut Vec<PacketBuf>,
    pending: &'a mut VecDeque<PacketBuf>,
    stats: &'a mut LinkStats,
}

impl Sink<'_> {
    /// Copy a received frame into pooled buffers (several when it is a super-frame),
    /// finishing what the sender left to a NIC. Appends to `out` up to `room` frames
    /// and queues the rest of a super-frame's segments; returns how many it
    /// appended, or None when the frame is dropped.
    fn take(
        &mut self,
        data: &[u8],
        tag: Option<(u16, u16)>,
        left: Unfinished,
        out: &mut Vec<PacketBuf>,
        room: usize,
    ) -> Option<usize> {
        if let Unfinished::Segment { gso_type, gso_size } = left {
            // A tagged super-frame would need the tag in every segment; ports are
            // untagged, so it is dropped like any tagged frame would be later.
            if tag.is_some() {
                return None;
            }
            let mut segs = Vec::new();
            crate::offload::segment(data, gso_type, gso_size, self.pool, &mut segs).ok()?;
            self.stats.rx_gso_segmented += 1;
            let now = segs.len().min(room);
            self.pending.extend(segs.drain(now..));
            out.append(&mut segs);
            return Some(now);
        }
        let mut b = self.spare.pop()?;
        if !copy_frame(&mut b, data, tag) {
            self.spare.push(b);
            return None;
        }
        // A tag put back moves the transport header 4 bytes further in.
        let shift = if tag.is_some() { 4 } else { 0 };
        let done = match left {
            Unfinished::Nothing | Unfinished::Segment { .. } => Ok(false),
            Unfinished::Checksum { start, offset } => {
                crate::offload::complete_checksum_at(&mut b, start + shift, offset).map(|()| true)
            }
            Unfinished::ChecksumSomewhere => {
                crate::offload::complete_checksum(&mut b).map(|()| true)
            }
        };
        match done {
            Ok(completed) => {
                self.stats.rx_csum_completed += u64::from(completed);
                out.push(b);
                Some(1)
            }
            Err(_) => {
                self.spare.push(b);
                None
            }
        }
    }
}

/// Where we are inside the receive ring.
#[derive(Debug, Clone, Copy)]
struct RxCursor {
    /// V2: the next slot. V3: the current block.
    block: usize,
    /// V3: packets of the current block already read, and the offset of the next
    /// one; `None` when the block has not been opened.
    open: Option<(u32, usize)>,
}

/// An `AF_PACKET` socket bound to one interface, with `TPACKET_V2` or `TPACKET_V3`
/// receive and transmit rings.
#[derive(Debug)]
pub struct AfPacket {
    fd: OwnedFd,
    /// The receive ring, then the transmit ring (`tx_base` on); `None` only while
    /// opening.
    map: Option<Mmap>,
    version: RingVersion,
    /// The header layout of `version`.
    hdr: Hdr,
    /// V2: slot size and count (a "block" is a slot). V3: block size and count.
    rx_block_size: usize,
    rx_blocks: usize,
    tx_frame_size: usize,
    tx_frames: usize,
    tx_base: usize,
    tx_next: usize,
    rx: RxCursor,
    info: LinkInfo,
    pool: BufferPool,
    stats: LinkStats,
    kernel_drops: u64,
    /// Buffers taken from the pool for a receive burst under one lock.
    spare: Vec<PacketBuf>,
    /// Whether frames carry a `virtio_net_hdr` (`PACKET_VNET_HDR` accepted).
    vnet: bool,
    /// Segments of a super-frame not yet handed out (a burst is at most `max`).
    pending: VecDeque<PacketBuf>,
    /// V2: where a frame too large for its slot is read to from the socket queue
    /// (allocated on the first one).
    copy_buf: Vec<u8>,
    /// With [`AfPacket::keep_arrivals`]: the kernel's arrival time of each frame the
    /// last receive burst returned, in order.
    arrivals: Option<Vec<Duration>>,
    /// Bound to one protocol ([`AfPacket::with_protocol`]): frames the kernel marked
    /// for another host (a VLAN tag it cleared, or another MAC) are skipped and
    /// counted as dropped.
    skip_other_host: bool,
}

fn setsockopt<T: Copy>(fd: &OwnedFd, opt: libc::c_int, val: &T, what: &str) -> io::Result<()> {
    sys::setsockopt(fd.as_raw_fd(), SOL_PACKET, opt, val, what)
}

impl AfPacket {
    /// Open `interface` with the default rings (`TPACKET_V2`), receiving into `pool`.
    pub fn open(interface: &str, pool: BufferPool) -> io::Result<AfPacket> {
        AfPacket::with_config(interface, pool, RingConfig::default())
    }

    /// Open `interface` with the given ring layout and sizes.
    pub fn with_config(interface: &str, pool: BufferPool, cfg: RingConfig) -> io::Result<AfPacket> {
        AfPacket::with_protocol(interface, pool, cfg, ETH_P_ALL)
    }

    /// [`AfPacket::with_config`], receiving only frames of EtherType `protocol`
    /// (`ETH_P_ALL`, 3, for every frame). A socket bound to one protocol is a
    /// protocol handler, not a packet tap: the kernel hands it a frame after tc
    /// ingress, and only if tc did not redirect or drop it (`__netif_receive_skb_core`:
    /// generic XDP, taps, tc, then the handlers of the frame's protocol). It sees
    /// no outgoing frames. The stack has taken an 802.1Q tag out of the frame and
    /// cleared it by then, marking a tagged frame (VLAN id not 0) as for another
    /// host; such frames are not handed out (they would pass as untagged) but
    /// counted in [`LinkStats::rx_dropped`], with frames for other hosts.
    pub fn with_protocol(
        interface: &str,
        pool: BufferPool,
        cfg: RingConfig,
        protocol: u16,
    ) -> io::Result<AfPacket> {
        let page = 4096u32;
        let bad = |why: &str| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad ring config: {why}"),
            ))
        };
        if cfg.tx_frame_size < 256
            || cfg.tx_frame_size % 16 != 0
            || page % cfg.tx_frame_size != 0 && cfg.tx_frame_size % page != 0
            || cfg.tx_frames == 0
        {
            return bad("tx_frame_size a multiple of 16 that tiles pages, tx_frames > 0");
        }
        match cfg.version {
            RingVersion::V3
                if cfg.rx_block_size == 0
                    || cfg.rx_block_size % page != 0
                    || cfg.rx_blocks == 0 =>
            {
                return bad("rx_block_size a multiple of the page size, rx_blocks > 0");
            }
            RingVersion::V2 if cfg.rx_frames == 0 => return bad("rx_frames > 0"),
            _ => {}
        }
        let ifindex = sys::if_nametoindex(interface)?;
        let (mac, mtu) = interface_mac_mtu(interface)?;
        let max_frame = mtu + 14;
        let (rx_block_size, rx_blocks) = match cfg.version {
            RingVersion::V2 => (v2_slot_size(max_frame), cfg.rx_frames),
            RingVersion::V3 => (cfg.rx_block_size, cfg.rx_blocks),
        };
        // Protocol 0: receive nothing until the rings exist and we bind.
        let fd = sys::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            0,
            "socket(AF_PACKET)",
        )?;
        let mut link = AfPacket {
            fd,
            map: None,
            version: cfg.version,
            hdr: match cfg.version {
                RingVersion::V2 => Hdr::V2,
                RingVersion::V3 => Hdr::V3,
            },
            rx_block_size: rx_block_size as usize,
            rx_blocks: rx_blocks as usize,
            tx_frame_size: cfg.tx_frame_size as usize,
            tx_frames: cfg.tx_frames as usize,
            tx_base: 0,
            tx_next: 0,
            rx: RxCursor {
                block: 0,
                open: None,
            },
            info: LinkInfo {
                name: interface.to_string(),
                mac,
                max_frame,
            },
            pool,
            stats: LinkStats::default(),
            kernel_drops: 0,
            spare: Vec::new(),
            vnet: false,
            pending: VecDeque::new(),
            copy_buf: Vec::new(),
            arrivals: None,
            skip_other_host: protocol != ETH_P_ALL,
        };
        // From here dropping `link` closes the fd (and unmaps once mapped) on error.
        let version = match cfg.version {
            RingVersion::V2 => TPACKET_V2,
            RingVersion::V3 => TPACKET_V3,
        };
        setsockopt(&link.fd, PACKET_VERSION, &version, "PACKET_VERSION")?;
        let one: libc::c_int = 1;
        // Before the rings exist (the kernel refuses it after). Without it (kernels
        // before 5.x lack it for TPACKET_V3) the status word still flags partial
        // checksums, but super-frames cannot be split and are dropped.
        link.vnet = setsockopt(&link.fd, PACKET_VNET_HDR, &one, "PACKET_VNET_HDR").is_ok();
        // Older kernels lack these two; neither is needed for correctness (we also
        // check sll_pkttype below), so failure is ignored.
        let _ = setsockopt(
            &link.fd,
            PACKET_IGNORE_OUTGOING,
            &one,
            "PACKET_IGNORE_OUTGOING",
        );
        if cfg.qdisc_bypass {
            let _ = setsockopt(&link.fd, PACKET_QDISC_BYPASS, &one, "PACKET_QDISC_BYPASS");
        }
        if cfg.version == RingVersion::V2 {
            // A frame larger than its slot (a super-frame) is queued whole on the
            // socket instead of truncated; room for a few of them there (forced past
            // rmem_max where we may, the default otherwise).
            setsockopt(&link.fd, PACKET_COPY_THRESH, &one, "PACKET_COPY_THRESH")?;
            let buf: libc::c_int = 4 << 20;
            let raw = link.fd.as_raw_fd();
            if sys::set_int(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                buf,
                "SO_RCVBUFFORCE",
            )
            .is_err()
            {
                let _ = sys::set_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, buf, "SO_RCVBUF");
            }
        }
        let rx_req = match cfg.version {
            RingVersion::V2 => {
                // Slots tile blocks of at least a page; whole blocks, so the slot
                // count rounds up to a multiple of the slots per page.
                let block = rx_block_size.max(page);
                let per_block = block / rx_block_size;
                let blocks = rx_blocks.div_ceil(per_block);
                link.rx_blocks = (blocks * per_block) as usize;
                TpacketReq3 {
                    tp_block_size: block,
                    tp_block_nr: blocks,
                    tp_frame_size: rx_block_size,
                    tp_frame_nr: blocks * per_block,
                    ..TpacketReq3::default()
                }
            }
            RingVersion::V3 => TpacketReq3 {
                tp_block_size: rx_block_size,
                tp_block_nr: rx_blocks,
                tp_frame_size: 2048,
                tp_frame_nr: rx_block_size / 2048 * rx_blocks,
                tp_retire_blk_tov: cfg.retire_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            },
        };
        setsockopt(&link.fd, PACKET_RX_RING, &rx_req, "PACKET_RX_RING")?;
        let tx_block = cfg.tx_frame_size.max(page);
        let per_block = tx_block / cfg.tx_frame_size;
        let tx_blocks = cfg.tx_frames.div_ceil(per_block);
        let tx_req = TpacketReq3 {
            tp_block_size: tx_block,
            tp_block_nr: tx_blocks,
            tp_frame_size: cfg.tx_frame_size,
            tp_frame_nr: tx_blocks * per_block,
            ..TpacketReq3::default()
        };
        setsockopt(&link.fd, PACKET_TX_RING, &tx_req, "PACKET_TX_RING")?;
        link.tx_frames = (tx_blocks * per_block) as usize;
        let rx_len = link.rx_block_size * link.rx_blocks;
        let tx_len = (tx_block * tx_blocks) as usize;
        let raw = link.fd.as_raw_fd();
        let len = rx_len + tx_len;
        let map = Mmap::shared(
            raw,
            len,
            0,
            libc::MAP_LOCKED | libc::MAP_POPULATE,
            "mmap packet rings",
        )
        // MAP_LOCKED fails under a small RLIMIT_MEMLOCK; retry without it.
        .or_else(|_| Mmap::shared(raw, len, 0, libc::MAP_POPULATE, "mmap packet rings"))?;
        link.map = Some(map);
        link.tx_base = rx_len;
        let sll = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: protocol.to_be(),
            sll_ifindex: ifindex as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        sys::bind(raw, &sll, "bind AF_PACKET")?;
        Ok(link)
    }

    /// The ring layout in use.
    pub fn ring_version(&self) -> RingVersion {
        self.version
    }

    /// Receive slots (V2) or blocks (V3).
    pub fn rx_slots(&self) -> usize {
        self.rx_blocks
    }

    /// Keep each received frame's arrival time as the kernel stamped it (when the
    /// frame reached this socket, before any thread read it): a tester measures a
    /// forwarder's latency to its receive port, not to its own reader's wake-up.
    /// Off by default.
    pub fn keep_arrivals(&mut self, on: bool) {
        self.arrivals = on.then(Vec::new);
    }

    /// With [`AfPacket::keep_arrivals`] on: one entry per frame the last
    /// `recv_burst` returned, in order, the kernel's `CLOCK_REALTIME` stamp since the
    /// epoch; zero where the kernel gave none (segments of a super-frame held over
    /// from an earlier call). Empty when off.
    pub fn arrivals(&self) -> &[Duration] {
        self.arrivals.as_deref().unwrap_or(&[])
    }

    /// The socket, for polling beside other descriptors.
    pub(crate) fn fd(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// True when a receive would find a frame without waiting.
    pub(crate) fn rx_ready(&self) -> bool {
        let base = self.rx.block * self.rx_block_size;
        let status = match self.version {
            RingVersion::V2 => base + self.hdr.status,
            RingVersion::V3 => base + block::STATUS,
        };
        !self.pending.is_empty()
            || self.rx.open.is_some()
            || self.load_u32(status) & TP_STATUS_USER != 0
    }

    /// Bounds-checked view of the mapping. The kernel may write other parts
    /// concurrently; we only read ranges it has handed to user space (status bits
    /// checked with Acquire first).
    fn region(&self, off: usize, len: usize) -> Option<&[u8]> {
        self.map.as_ref()?.slice(off, len)
    }

    /// Writable view; we write only frames whose status says user space owns them.
    fn region_mut(&mut self, off: usize, len: usize) -> Option<&mut [u8]> {
        self.map.as_mut()?.slice_mut(off, len)
    }

    /// Read a `u32` status word the kernel writes concurrently (0 out of bounds).
    fn load_u32(&self, off: usize) -> u32 {
        self.map
            .as_ref()
            .and_then(|m| m.atomic_u32(off))
            .map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Hand a status word back to the kernel, after our writes to its frame.
    fn store_u32(&mut self, off: usize, v: u32) {
        if let Some(w) = self.map.as_ref().and_then(|m| m.atomic_u32(off)) {
            w.store(v, Ordering::Release);
        }
    }

    /// The packet whose header is at `off` in the slot or block at `base` (`area`
    /// bytes long): (offset of the next packet (V3; 0 for V2), frame).
    fn parse_rx_frame(&self, base: usize, area: usize, off: usize) -> (usize, RxFrame) {
        let hdr = self.hdr;
        let Some(blk) = self.region(base, area) else {
            return (0, RxFrame::Bad);
        };
        let Some(h) = blk.get(off..off + hdr.aligned_len + 20) else {
            return (0, RxFrame::Bad);
        };
        let next = match self.version {
            RingVersion::V2 => 0,
            RingVersion::V3 => read_u32(h, HDR3_NEXT_OFFSET) as usize,
        };
        let snap = read_u32(h, hdr.snaplen) as usize;
        let len = read_u32(h, hdr.len) as usize;
        let mac = read_u16(h, hdr.mac) as usize;
        if h[hdr.sll_pkttype()] == PACKET_OUTGOING {
            return (next, RxFrame::Outgoing);
        }

        // The receive path moves an 802.1Q tag out of the frame before packet taps
        // see it; a tag must not vanish (the frame would pass as untagged), so it is
        // handed back for re-insertion, as libpcap does.
        let status = read_u32(h, hdr.status);
        let tag = (status & TP_STATUS_VLAN_VALID != 0).then(|| {
            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                read_u16(h, hdr.vlan_tpid)
            } else {
                0x8100
            };
            let tci = match self.version {
                RingVersion::V2 => read_u16(h, hdr.vlan_tci),
                RingVersion::V3 => read_u32(h, hdr.vlan_tci) as u16,
            };
            (tpid, tci)
        });
        let queued = self.version == RingVersion::V2 && status & TP_STATUS_COPY != 0;
        if self.skip_other_host && h[hdr.sll_pkttype()] == PACKET_OTHERHOST {
            return (next, RxFrame::OtherHost(queued));
        }
        if queued {
            return (next, RxFrame::Queued(len, tag));
        }
        let start = off + mac;
        if snap != len || start.checked_add(snap).is_none_or(|e| e > blk.len()) {
            return (next, RxFrame::Bad);
        }
        let left = if self.vnet {
            // The kernel puts the header right in front of the frame.
            match start
                .checked_sub(vnet::LEN)
                .filter(|&v| v >= off + hdr.aligned_len)
                .and_then(|v| blk.get(v..start))
            {
                Some(v) => Unfinished::from_vnet(v),
                None => return (next, RxFrame::Bad),
            }
        } else if status & TP_STATUS_CSUMNOTREADY != 0 {
            Unfinished::ChecksumSomewhere
        } else {
            Unfinished::Nothing
        };
        (next, RxFrame::Data(base + start, snap, tag, left))
    }

    /// Add how long the frame whose header is at `at` waited in the ring, by its
    /// kernel timestamp, to the counters (`now`: the wall clock of this receive).
    /// Returns the stamp (zero when the header is out of reach).
    fn time_wait(&mut self, at: usize, now: Duration) -> Duration {
        let hdr = self.hdr;
        let Some(h) = self.region(at, hdr.aligned_len) else {
            return Duration::ZERO;
        };
        let stamp = Duration::new(
            u64::from(read_u32(h, hdr.sec)),
            read_u32(h, hdr.nsec).min(999_999_999),
        );
        // A clock step backwards counts 0, not a huge wait.
        let waited = now.saturating_sub(stamp).as_nanos() as u64;
        // Saturating: a frame the kernel left unstamped (0) would count the whole
        // epoch, and a few of those would overflow the sum.
        self.stats.rx_ring_wait_ns = self.stats.rx_ring_wait_ns.saturating_add(waited);
        self.stats.rx_ring_timed += 1;
        stamp
    }

    /// Record `stamp` for the `n` frames just delivered (with `keep_arrivals`).
    fn note_arrivals(&mut self, stamp: Duration, n: usize) {
        if let Some(a) = &mut self.arrivals {
            a.extend(std::iter::repeat_n(stamp, n));
        }
    }

    /// Deliver one parsed frame into `out` (at most `room`); counts a drop.
    fn deliver(&mut self, frame: RxFrame, out: &mut Vec<PacketBuf>, room: usize) -> usize {
        let mut sink = Sink {
            pool: &self.pool,
            spare: &mut self.spare,
            pending: &mut self.pending,
            stats: &mut self.stats,
        };
        let taken = match frame {
            RxFrame::Data(start, len, tag, left) => {
                match self.map.as_ref().and_then(|m| m.slice(start, len)) {
                    Some(data) => sink.take(data, tag, left, out, room),
                    None => None,
                }
            }
            RxFrame::Queued(len, tag) => {
                // In order: the queue holds exactly the frames whose slots say so.
                if self.copy_buf.is_empty() {
                    self.copy_buf = vec![0; COPY_BUF];
                }
                let got = sys::recv_dontwait(self.fd.as_raw_fd(), &mut self.copy_buf);
                let head = if self.vnet { vnet::LEN } else { 0 };
                match got {
                    // Exactly the frame the slot announced, whole.
                    Ok(Some(n)) if n <= COPY_BUF && n == head + len => {
                        let (v, data) = self.copy_buf[..n].split_at(head);
                        let left = if self.vnet {
                            Unfinished::from_vnet(v)
                        } else {
                            Unfinished::Nothing
                        };
                        sink.take(data, tag, left, out, room)
                    }
                    _ => None,
                }
            }
            RxFrame::Bad => None,
            RxFrame::Outgoing => return 0,
            RxFrame::OtherHost(queued) => {
                if queued {
                    // Keep the queue in step with the slots: read it off.
                    if self.copy_buf.is_empty() {
                        self.copy_buf = vec![0; COPY_BUF];
                    }
                    let _ = sys::recv_dontwait(self.fd.as_raw_fd(), &mut self.copy_buf);
                }
                None
            }
        };
        match taken {
            Some(n) => n,
            None => {
                self.stats.rx_dropped += 1;
                0
            }
        }
    }

    /// V2: read ready slots in order, handing each back at once.
    fn recv_v2(&mut self, out: &mut Vec<PacketBuf>, mut got: usize, max: usize) -> usize {
        // Bounded: at most one pass over the ring per call.
        let mut seen = 0;
        let mut now = None;
        while got < max && seen < self.rx_blocks {
            let base = self.rx.block * self.rx_block_size;
            if self.load_u32(base + self.hdr.status) & TP_STATUS_USER == 0 {
                break;
            }
            let (_, frame) = self.parse_rx_frame(base, self.rx_block_size, 0);
            let mut stamp = Duration::ZERO;
            if !matches!(frame, RxFrame::Outgoing) {
                stamp = self.time_wait(base, *now.get_or_insert_with(wall_clock));
            }
            let n = self.deliver(frame, out, max - got);
            self.note_arrivals(stamp, n);
            got += n;
            self.store_u32(base + self.hdr.status, TP_STATUS_KERNEL);
            self.rx.block = (self.rx.block + 1) % self.rx_blocks;
            seen += 1;
        }
        got
    }

    /// V3: read the packets of ready blocks, handing each block back when done.
    fn recv_v3(&mut self, out: &mut Vec<PacketBuf>, mut got: usize, max: usize) -> usize {
        // Bounded: at most one pass over the ring per call.
        let mut blocks_seen = 0;
        let mut now = None;
        while got < max && blocks_seen <= self.rx_blocks {
            let base = self.rx.block * self.rx_block_size;
            let (done, mut off) = match self.rx.open {
                Some(c) => c,
                None => {
                    if self.load_u32(base + block::STATUS) & TP_STATUS_USER == 0 {
                        break;
                    }
                    let first = self
                        .region(base, self.rx_block_size)
                        .map_or(0, |b| read_u32(b, block::OFFSET_TO_FIRST_PKT));
                    (0, first as usize)
                }
            };
            let num = self
                .region(base, self.rx_block_size)
                .map_or(0, |b| read_u32(b, block::NUM_PKTS));
            if done >= num {
                self.release_block();
                blocks_seen += 1;
                continue;
            }
            // Every offset the kernel gave us is checked against the block before use.
            let (next, frame) = self.parse_rx_frame(base, self.rx_block_size, off);
            let mut stamp = Duration::ZERO;
            if !matches!(frame, RxFrame::Outgoing) {
                stamp = self.time_wait(base + off, *now.get_or_insert_with(wall_clock));
            }
            let n = self.deliver(frame, out, max - got);
            self.note_arrivals(stamp, n);
            got += n;
            let done = done + 1;
            if done >= num || next == 0 {
                self.release_block();
                blocks_seen += 1;
            } else {
                off += next;
                self.rx.open = Some((done, off));
            }
        }
        got
    }

    /// Hand the current block back to the kernel and move to the next.
    fn release_block(&mut self) {
        let base = self.rx.block * self.rx_block_size;
        self.store_u32(base + block::STATUS, TP_STATUS_KERNEL);
        self.rx.block = (self.rx.block + 1) % self.rx_blocks;
        self.rx.open = None;
    }

    /// Frames the kernel dropped because the ring was full (since the last call,
    /// accumulated into `stats().rx_dropped`).
    fn poll_kernel_stats(&mut self) {
        // Reading the statistics resets them, hence the accumulation.
        let st = sys::getsockopt::<TpacketStatsV3>(
            self.fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_STATISTICS,
            "PACKET_STATISTICS",
        );
        if let Ok((st, _)) = st {
            self.kernel_drops += u64::from(st.tp_drops);
        }
    }

    fn poll_fds(&self, also: Option<BorrowedFd<'_>>, timeout: Duration) -> io::Result<bool> {
        if self.rx_ready() {
            return Ok(true);
        }
        let pfd = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        let mut pfds = [pfd(self.fd.as_raw_fd()), pfd(-1)];
        let n = match also {
            Some(a) => {
                pfds[1] = pfd(a.as_raw_fd());
                2
            }
            None => 1,
        };
        Ok(sys::poll(&mut pfds[..n], timeout)? > 0)
    }
}

impl Link for AfPacket {
    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn pool(&self) -> &BufferPool {
        &self.pool
    }

    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        let mut got = 0;
        while got < max {
            let Some(b) = self.pending.pop_front() else {
                break;
            };
            out.push(b);
            got += 1;
        }
        if let Some(a) = &mut self.arrivals {
            a.clear();
        }
        self.note_arrivals(Duration::ZERO, got);
        // One pool lock for the burst's buffers; leftovers go back with one more.
        if self.spare.len() < max {
            let need = max - self.spare.len();
            self.pool.alloc_burst(need, &mut self.spare);
        }
        let got = match self.version {
            RingVersion::V2 => self.recv_v2(out, got, max),
            RingVersion::V3 => self.recv_v3(out, got, max),
        };
        self.stats.rx_frames += got as u64;
        if self.spare.len() > 64 {
            self.pool.free_burst(self.spare.drain(64..));
        }
        Ok(got)
    }

    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize> {
        let mut sent = 0;
        let hdr = self.hdr;
        // With PACKET_VNET_HDR the kernel expects a virtio_net_hdr in front of each
        // frame on transmit too: all zero, nothing left to offload.
        let data = hdr.aligned_len + if self.vnet { vnet::LEN } else { 0 };
        let room = self.tx_frame_size - data;
        for f in frames.iter() {
            let slot = self.tx_base + self.tx_next * self.tx_frame_size;
            let status = self.load_u32(slot + hdr.status);
            if status == TP_STATUS_WRONG_FORMAT {
                // The kernel refused a frame we wrote earlier; count it, reuse the slot.
                self.stats.tx_dropped += 1;
            } else if status != TP_STATUS_AVAILABLE {
                // TP_STATUS_SEND_REQUEST or TP_STATUS_SENDING: the ring is full.
                self.stats.tx_ring_full += 1;
                break;
            }
            sent += 1;
            if f.len() > room || f.len() > self.info.max_frame || f.is_empty() {
                // Accepted and lost: never truncate a frame.
                self.stats.tx_dropped += 1;
                continue;
            }
            let fsz = self.tx_frame_size;
            let version = self.version;
            let Some(s) = self.region_mut(slot, fsz) else {
                break;
            };
            let len = (data - hdr.aligned_len + f.len()) as u32;
            if version == RingVersion::V3 {
                s[HDR3_NEXT_OFFSET..HDR3_NEXT_OFFSET + 4].copy_from_slice(&0u32.to_ne_bytes());
            }
            s[hdr.len..hdr.len + 4].copy_from_slice(&len.to_ne_bytes());
            s[hdr.snaplen..hdr.snaplen + 4].copy_from_slice(&len.to_ne_bytes());
            s[hdr.aligned_len..data].fill(0);
            s[data..data + f.len()].copy_from_slice(f);
            self.store_u32(slot + hdr.status, TP_STATUS_SEND_REQUEST);
            self.tx_next = (self.tx_next + 1) % self.tx_frames;
        }
        self.pool.free_burst(frames.drain(..sent));
        if sent > 0 {
            // One kick per burst: the doorbell.
            match sys::kick_tx(self.fd.as_raw_fd()) {
                // EAGAIN/ENOBUFS: the kernel will pick the frames up on the next kick.
                Ok(()) | Err(libc::EAGAIN) | Err(libc::ENOBUFS) => {}
                Err(e) => return Err(io::Error::from_raw_os_error(e)),
            }
        }
        self.stats.tx_frames += sent as u64;
        Ok(sent)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        self.poll_fds(None, timeout)
    }

    fn wait_also(&mut self, doorbell: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
        self.poll_fds(Some(doorbell), timeout)
    }

    fn arm_wait(&mut self, fds: &mut Vec<RawFd>) -> io::Result<Armed> {
        if self.rx_ready() {
            return Ok(Armed::Ready);
        }
        fds.push(self.fd.as_raw_fd());
        Ok(Armed::Fds)
    }

    fn stats(&self) -> LinkStats {
        let mut s = self.stats;
        s.rx_dropped += self.kernel_drops;
        s
    }

    fn refresh_stats(&mut self) {
        self.poll_kernel_stats();
    }
}

/// Move the calling thread into the network namespace open at `fd` (setns(2) with
/// `CLONE_NEWNET`). Tests and the router's namespace runner use it so one process can
/// open interfaces inside a namespace it did not start in.
pub fn setns_net(fd: libc::c_int) -> io::Result<()> {
    sys::setns_net(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_the_kernel_stripped_is_put_back_after_the_macs() {
        let pool = BufferPool::new(2, 64);
        let frame: Vec<u8> = (0u8..20).collect();
        let mut b = pool.alloc().expect("buffer");
        assert!(copy_frame(&mut b, &frame, Some((0x8100, 0x2007))));
        assert_eq!(&b[..12], &frame[..12]);
        assert_eq!(&b[12..16], &[0x81, 0x00, 0x20, 0x07]);
        assert_eq!(&b[16..], &frame[12..]);
        assert!(copy_frame(&mut b, &frame, None));
        assert_eq!(&b[..], &frame[..]);
        // Too short to carry MAC addresses, or too long with the tag: refused.
        assert!(!copy_frame(&mut b, &frame[..11], Some((0x8100, 7))));
        assert!(!copy_frame(&mut b, &[0; 62], Some((0x8100, 7))));
    }
}
