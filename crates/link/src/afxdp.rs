//! Linux `AF_XDP` links (Documentation/networking/af_xdp.rst): a UMEM with fill,
//! completion, receive and transmit rings per queue, and the XDP program that
//! redirects the interface's frames into the sockets, loaded with the raw `bpf(2)`
//! system call — no C toolchain, no libbpf, no ELF.
//!
//! The program is five instructions, assembled here by hand:
//!
//! ```text
//! return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
//! ```
//!
//! It is attached with `BPF_LINK_CREATE`, so it is detached when the link's file
//! descriptor closes: when [`AfXdpLink`] drops, and also when the process dies.
//!
//! Mode: generic XDP (`XDP_FLAGS_SKB_MODE`) with copy-mode sockets (`XDP_COPY`) by
//! default, which every interface supports; [`XdpMode::Native`] asks for the
//! driver's XDP hook (veth has one) instead. Either way the socket copies each frame
//! into the UMEM, and this link copies it once more into a pooled buffer (and the
//! reverse on transmit): one copy per direction on our side, as with `AF_PACKET`.
//! Zero copy would need the pool to live in the UMEM; see docs/results/router.md.
//!
//! Every receive queue the interface has gets its own socket and UMEM (veth has one
//! unless created with `numrxqueues`); transmit uses the first queue's socket.
//!
//! Needs `CAP_NET_ADMIN` and `CAP_BPF` (root), `CONFIG_XDP_SOCKETS` and
//! `CONFIG_BPF_SYSCALL`.
//!
//! Offloads: generic XDP hands the program the bytes of the sender's skb and none of
//! its metadata, so a transport checksum the sender left to a NIC (veth's default)
//! is recognised by its contents and completed ([`crate::offload::complete_if_partial`]),
//! and a TSO super-frame, longer than a UMEM chunk, is passed by the program to an
//! `AF_PACKET` socket of the link that splits it (see [`AfXdpLink`]).

use crate::afpacket::{interface_mac_mtu, AfPacket, RingConfig, RingVersion};
use crate::bpf_asm::{self, Asm};
use crate::sys::bpf::{Insn, BPF_MAP_TYPE_XSKMAP, BPF_XDP, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};
use crate::sys::{self, Mmap};
use crate::xdp_fwd::FastPath;
use crate::{Armed, BufferPool, Link, LinkInfo, LinkStats, PacketBuf};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

// Linux UAPI (include/uapi/linux/if_xdp.h, bpf.h, if_link.h, ethtool.h), defined here
// so every number and layout we rely on is in one place.
const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
const XDP_COPY: u16 = 1 << 1;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;
/// Bytes the kernel keeps in front of a received frame in its UMEM chunk.
const XDP_PACKET_HEADROOM: usize = 256;

const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct xdp_umem_reg` (with `tx_metadata_len`, Linux 6.8; older kernels read the
/// same 32 bytes with that field as padding).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fill: RingOffset,
    completion: RingOffset,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

/// `struct xdp_desc`: 16 bytes in the receive and transmit rings.
const DESC_LEN: usize = 16;
/// A UMEM address: 8 bytes in the fill and completion rings.
const ADDR_LEN: usize = 8;

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// The redirect program for the XSKMAP `map`: [`bpf_asm::redirect_to_xsk`] with the
/// context in r1. Frames longer than `room` (what a UMEM chunk holds) go to the stack
/// instead, where the link's `AF_PACKET` socket takes them (the super-frames of a
/// sender with TSO on; see [`AfXdpLink`]).
fn redirect_program(map: BorrowedFd<'_>, room: u32) -> io::Result<Vec<Insn>> {
    let mut a = Asm::new();
    bpf_asm::redirect_to_xsk(&mut a, 1, map, room);
    a.finish()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
}

/// Which XDP hook runs the redirect program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Generic XDP (`XDP_FLAGS_SKB_MODE`): after the kernel built an skb; works on
    /// every interface.
    #[default]
    Generic,
    /// The driver's own XDP hook (`XDP_FLAGS_DRV_MODE`); veth has one (it then
    /// receives in NAPI). Sockets stay in copy mode.
    Native,
}

impl std::str::FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<XdpMode, String> {
        match s {
            "generic" | "skb" => Ok(XdpMode::Generic),
            "native" | "drv" => Ok(XdpMode::Native),
            _ => Err(format!("unknown XDP mode {s:?} (generic, native)")),
        }
    }
}

/// Sizes of an `AF_XDP` link's UMEM and rings (all powers of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpConfig {
    /// UMEM chunk size: one frame per chunk (2048 or 4096). A received frame starts
    /// 256 bytes in, so 2048 holds 1792-byte frames.
    pub frame_size: u32,
    /// Receive chunks per queue, all kept in the fill ring; also the receive ring
    /// size.
    pub rx_frames: u32,
    /// Transmit chunks; also the transmit and completion ring size.
    pub tx_frames: u32,
    /// Generic (default) or native XDP.
    pub mode: XdpMode,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            frame_size: 2048,
            rx_frames: 2048,
            tx_frames: 2048,
            mode: XdpMode::Generic,
        }
    }
}

/// Descriptors (sockets, the map, the program, the BPF link) close on drop.
type Fd = OwnedFd;

/// One single-producer single-consumer ring shared with the kernel: either we
/// produce (fill, transmit) or we consume (completion, receive). `local` is our own
/// index, published with Release; the kernel's is read with Acquire (the
/// `smp_load_acquire`/`smp_store_release` pairing of af_xdp.rst).
#[derive(Debug)]
struct Ring {
    map: Mmap,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    entry_len: usize,
    mask: u32,
    size: u32,
    local: u32,
}

impl Ring {
    fn map(
        fd: libc::c_int,
        off: &RingOffset,
        size: u32,
        entry_len: usize,
        pgoff: libc::off_t,
        what: &str,
    ) -> io::Result<Ring> {
        let len = off.desc as usize + size as usize * entry_len;
        let map = Mmap::shared(fd, len, pgoff, libc::MAP_POPULATE, what)?;
        let r = Ring {
            map,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            entry_len,
            mask: size - 1,
            size,
            local: 0,
        };
        for o in [r.producer, r.consumer, r.flags] {
            if o % 4 != 0 || o + 4 > r.desc {
                return Err(io::Error::other(format!(
                    "{what}: odd ring offsets {off:?}"
                )));
            }
        }
        Ok(r)
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        // `off` is one of the kernel's offsets, checked at `map` to be 4-aligned and
        // inside the mapping, so the fallback is never taken.
        static NONE: AtomicU32 = AtomicU32::new(0);
        self.map.atomic_u32(off).unwrap_or(&NONE)
    }

    /// For a ring we produce into: free entries.
    fn free(&self) -> u32 {
        let cons = self.word(self.consumer).load(Ordering::Acquire);
        self.size - self.local.wrapping_sub(cons)
    }

    /// For a ring we consume from: entries ready.
    fn ready(&self) -> u32 {
        let prod = self.word(self.producer).load(Ordering::Acquire);
        prod.wrapping_sub(self.local)
    }

    /// The kernel wants a system call to notice this ring.
    fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Entry `i` past our index.
    fn entry(&self, i: u32) -> &[u8] {
        let at = self.desc + (self.local.wrapping_add(i) & self.mask) as usize * self.entry_len;
        self.map.slice(at, self.entry_len).unwrap_or(&[])
    }

    fn entry_mut(&mut self, i: u32) -> &mut [u8] {
        let at = self.desc + (self.local.wrapping_add(i) & self.mask) as usize * self.entry_len;
        let n = self.entry_len;
        self.map.slice_mut(at, n).unwrap_or(&mut [])
    }

    fn addr(&self, i: u32) -> u64 {
        self.entry(i).get(..8).map_or(u64::MAX, |b| {
            u64::from_ne_bytes(b.try_into().unwrap_or([0xff; 8]))
        })
    }

    fn desc(&self, i: u32) -> (u64, u32) {
        let e = self.entry(i);
        let len = e
            .get(8..12)
            .map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap_or([0; 4])));
        (self.addr(i), len)
    }

    fn set_addr(&mut self, i: u32, addr: u64) {
        if let Some(e) = self.entry_mut(i).get_mut(..8) {
            e.copy_from_slice(&addr.to_ne_bytes());
        }
    }

    fn set_desc(&mut self, i: u32, addr: u64, len: u32) {
        if let Some(e) = self.entry_mut(i).get_mut(..16) {
            e[..8].copy_from_slice(&addr.to_ne_bytes());
            e[8..12].copy_from_slice(&len.to_ne_bytes());
            e[12..16].copy_from_slice(&0u32.to_ne_bytes()); // options
        }
    }

    /// Publish `n` entries we wrote (producer) or give back `n` we read (consumer).
    fn advance(&mut self, n: u32, we_produce: bool) {
        self.local = self.local.wrapping_add(n);
        let w = if we_produce {
            self.producer
        } else {
            self.consumer
        };
        self.word(w).store(self.local, Ordering::Release);
    }
}

/// One `AF_XDP` socket bound to one queue, with its own UMEM.
#[derive(Debug)]
struct Queue {
    id: u32,
    rx: Ring,
    tx: Ring,
    fill: Ring,
    completion: Ring,
    /// Transmit chunks not in the kernel's hands.
    tx_free: Vec<u64>,
    chunk_mask: u64,
    kernel: XdpStatistics,
    // Dropped after the rings that refer to it (fields drop in order).
    umem: Mmap,
    fd: Fd,
}

impl Queue {
    fn open(ifindex: u32, id: u32, cfg: &XdpConfig) -> io::Result<Queue> {
        let fsz = cfg.frame_size as usize;
        // SAFETY: plain syscall with constant arguments.
        let fd = sys::socket(
            AF_XDP,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            0,
            "socket(AF_XDP)",
        )?;
        let chunks = (cfg.rx_frames + cfg.tx_frames) as usize;
        let umem = Mmap::anonymous(chunks * fsz, "mmap UMEM")?;
        let reg = UmemReg {
            addr: umem.addr() as u64,
            len: umem.len() as u64,
            chunk_size: cfg.frame_size,
            ..UmemReg::default()
        };
        xdp_setsockopt(&fd, XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        xdp_setsockopt(
            &fd,
            XDP_UMEM_FILL_RING,
            &cfg.rx_frames,
            "XDP_UMEM_FILL_RING",
        )?;
        xdp_setsockopt(
            &fd,
            XDP_UMEM_COMPLETION_RING,
            &cfg.tx_frames,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        xdp_setsockopt(&fd, XDP_RX_RING, &cfg.rx_frames, "XDP_RX_RING")?;
        xdp_setsockopt(&fd, XDP_TX_RING, &cfg.tx_frames, "XDP_TX_RING")?;
        let (off, len) = sys::getsockopt::<MmapOffsets>(
            fd.as_raw_fd(),
            SOL_XDP,
            XDP_MMAP_OFFSETS,
            "XDP_MMAP_OFFSETS",
        )?;
        if len != size_of::<MmapOffsets>() {
            return Err(io::Error::other(format!(
                "XDP_MMAP_OFFSETS: {len} bytes, expected the flags field too (Linux 5.4+)"
            )));
        }
        let rx = Ring::map(
            fd.as_raw_fd(),
            &off.rx,
            cfg.rx_frames,
            DESC_LEN,
            XDP_PGOFF_RX_RING,
            "mmap rx ring",
        )?;
        let tx = Ring::map(
            fd.as_raw_fd(),
            &off.tx,
            cfg.tx_frames,
            DESC_LEN,
            XDP_PGOFF_TX_RING,
            "mmap tx ring",
        )?;
        let mut fill = Ring::map(
            fd.as_raw_fd(),
            &off.fill,
            cfg.rx_frames,
            ADDR_LEN,
            XDP_UMEM_PGOFF_FILL_RING,
            "mmap fill ring",
        )?;
        let completion = Ring::map(
            fd.as_raw_fd(),
            &off.completion,
            cfg.tx_frames,
            ADDR_LEN,
            XDP_UMEM_PGOFF_COMPLETION_RING,
            "mmap completion ring",
        )?;
        // Chunks 0..rx_frames receive; the rest transmit.
        for i in 0..cfg.rx_frames {
            fill.set_addr(i, u64::from(i) * fsz as u64);
        }
        fill.advance(cfg.rx_frames, true);
        let tx_free = (cfg.rx_frames as u64..chunks as u64)
            .rev()
            .map(|c| c * fsz as u64)
            .collect();
        let sxdp = SockaddrXdp {
            family: AF_XDP as u16,
            flags: XDP_COPY | XDP_USE_NEED_WAKEUP,
            ifindex,
            queue_id: id,
            shared_umem_fd: 0,
        };
        sys::bind(fd.as_raw_fd(), &sxdp, &format!("bind AF_XDP to queue {id}"))?;
        Ok(Queue {
            id,
            rx,
            tx,
            fill,
            completion,
            tx_free,
            chunk_mask: !(u64::from(cfg.frame_size) - 1),
            kernel: XdpStatistics::default(),
            umem,
            fd,
        })
    }

    /// Move up to `max` received frames into pooled buffers from `spare`; their
    /// chunks go straight back to the fill ring. Returns (delivered, dropped).
    fn receive(
        &mut self,
        out: &mut Vec<PacketBuf>,
        spare: &mut Vec<PacketBuf>,
        max: usize,
    ) -> (usize, u64) {
        // Every receive chunk is in the fill ring, in the kernel, or in the receive
        // ring, so the fill ring has room for whatever we take out of the receive ring.
        let n = self.rx.ready().min(self.fill.free()).min(max as u32);
        let mut dropped = 0;
        for i in 0..n {
            let (addr, len) = self.rx.desc(i);
            let copied = match (spare.pop(), self.umem.slice(addr as usize, len as usize)) {
                (Some(mut b), Some(d)) => {
                    if b.copy_from(d) {
                        Some(b)
                    } else {
                        spare.push(b);
                        None
                    }
                }
                (b, _) => {
                    spare.extend(b);
                    None
                }
            };
            match copied {
                Some(b) => out.push(b),
                None => dropped += 1,
            }
            self.fill.set_addr(i, addr & self.chunk_mask);
        }
        if n > 0 {
            self.rx.advance(n, false);
            self.fill.advance(n, true);
            if self.fill.needs_wakeup() {
                sys::kick_rx(self.fd.as_raw_fd());
            }
        }
        (n as usize - dropped as usize, dropped)
    }

    /// Take transmit chunks the kernel is done with back.
    fn reclaim(&mut self) {
        let n = self.completion.ready();
        for i in 0..n {
            let a = self.completion.addr(i) & self.chunk_mask;
            self.tx_free.push(a);
        }
        if n > 0 {
            self.completion.advance(n, false);
        }
    }

    /// Ring the transmit doorbell until the kernel has taken every descriptor or
    /// says to come back later. In copy mode one `sendto` sends at most 32 frames
    /// (the kernel's TX_BATCH_SIZE) and answers EAGAIN while more wait.
    fn kick(&mut self) -> io::Result<()> {
        for _ in 0..self.size_kicks() {
            if self.tx.free() == self.tx.size || !self.tx.needs_wakeup() {
                return Ok(());
            }
            // A zero-length send is how af_xdp.rst says to start transmission.
            match sys::kick_tx(self.fd.as_raw_fd()) {
                Ok(()) => {}
                // More waiting (or the device queue is busy): loop, bounded.
                Err(libc::EAGAIN) => continue,
                // A frame was dropped by the device, or memory was short: the rest
                // goes on the next kick.
                Err(libc::EBUSY) | Err(libc::ENOBUFS) => return Ok(()),
                Err(errno) => {
                    let e = io::Error::from_raw_os_error(errno);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("AF_XDP sendto on queue {}: {e}", self.id),
                    ));
                }
            }
        }
        Ok(())
    }

    fn size_kicks(&self) -> u32 {
        (self.tx.size - self.tx.free()).div_ceil(32) + 1
    }

    fn poll_kernel_stats(&mut self) {
        // The counters are cumulative (not reset by reading).
        let st = sys::getsockopt::<XdpStatistics>(
            self.fd.as_raw_fd(),
            SOL_XDP,
            XDP_STATISTICS,
            "XDP_STATISTICS",
        );
        if let Ok((st, _)) = st {
            self.kernel = st;
        }
    }
}

fn xdp_setsockopt<T: Copy>(fd: &Fd, opt: libc::c_int, val: &T, what: &str) -> io::Result<()> {
    sys::setsockopt(fd.as_raw_fd(), SOL_XDP, opt, val, what)
}

/// The XSKMAP, the program and its attachment to the interface. Dropping it closes
/// the link first, which detaches the program.
#[derive(Debug)]
struct Redirect {
    _link: Fd,
    _prog: Fd,
    map: Fd,
}

impl Redirect {
    /// Create the map and load the program (not attached yet): the plain redirect,
    /// or with `fast` the forwarding fast path of [`crate::xdp_fwd`] for a port
    /// with MAC `mac`, whose slow path is the same redirect.
    fn load(entries: u32, room: u32, fast: Option<(&FastPath, [u8; 6])>) -> io::Result<(Fd, Fd)> {
        let map = sys::bpf::map_create(BPF_MAP_TYPE_XSKMAP, 4, 4, entries, b"weft_xsks")
            .map_err(|e| io::Error::new(e.kind(), format!("bpf(BPF_MAP_CREATE, XSKMAP): {e}")))?;
        let prog = match fast {
            Some((f, mac)) => f
                .load(mac, map.as_fd(), room)
                .map_err(crate::xdp_fwd::FastPathUnavailable::wrap)?,
            None => crate::xdp_fwd::load_xdp(&redirect_program(map.as_fd(), room)?, b"weft_xsks")?,
        };
        Ok((map, prog))
    }

    fn attach(map: Fd, prog: Fd, ifindex: u32, mode: XdpMode) -> io::Result<Redirect> {
        let flags = match mode {
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
        };
        let link = sys::bpf::link_create(prog.as_fd(), ifindex, BPF_XDP, flags).map_err(|e| {
            let busy = if e.raw_os_error() == Some(libc::EBUSY) {
                " (another XDP program is attached)"
            } else {
                ""
            };
            io::Error::new(e.kind(), format!("bpf(BPF_LINK_CREATE, XDP): {e}{busy}"))
        })?;
        Ok(Redirect {
            _link: link,
            _prog: prog,
            map,
        })
    }

    fn insert(map: &Fd, queue: u32, socket: &Fd) -> io::Result<()> {
        sys::bpf::map_update_u32(map.as_fd(), queue, socket.as_raw_fd() as u32)
            .map_err(|e| io::Error::new(e.kind(), format!("bpf(BPF_MAP_UPDATE_ELEM, XSKMAP): {e}")))
    }
}

/// Receive queues of `interface` (`ETHTOOL_GCHANNELS`; 1 when the driver does not say).
pub fn rx_queue_count(interface: &str) -> io::Result<u32> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    if let Err(e) = sys::ethtool(interface, &mut ch) {
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(1),
            _ => Err(io::Error::new(
                e.kind(),
                format!("ETHTOOL_GCHANNELS on {interface}: {e}"),
            )),
        };
    }
    Ok(ch.rx_count.max(ch.combined_count).max(1))
}

/// Whether this kernel and process can use `AF_XDP`: opens a socket and loads the
/// redirect program (attached nowhere). The error is the kernel's, e.g.
/// `EAFNOSUPPORT` without `CONFIG_XDP_SOCKETS`, `EPERM` without `CAP_BPF`.
pub fn probe() -> io::Result<()> {
    let _socket = sys::socket(
        AF_XDP,
        libc::SOCK_RAW | libc::SOCK_CLOEXEC,
        0,
        "socket(AF_XDP)",
    )?;
    Redirect::load(1, 1792, None).map(drop)
}

/// Rings of the `AF_PACKET` socket that takes frames too long for a UMEM chunk: a
/// `TPACKET_V2` ring, whose slots are too small for any of them, so each super-frame
/// is queued whole on the socket and read from there as soon as it arrives (no block
/// timer); no transmit ring to speak of (the socket never sends).
const OVERSIZE_RINGS: RingConfig = RingConfig {
    version: RingVersion::V2,
    rx_frames: 64,
    rx_block_size: 1 << 17,
    rx_blocks: 8,
    retire_ms: 1,
    tx_frame_size: 4096,
    tx_frames: 1,
    qdisc_bypass: true,
};

/// An `AF_XDP` link on every receive queue of one interface.
#[derive(Debug)]
pub struct AfXdpLink {
    // Declared first so it drops first: the program is detached before the sockets
    // it redirects into close.
    redirect: Redirect,
    queues: Vec<Queue>,
    /// The queue the next receive starts at (round robin).
    next_rx: usize,
    pollfds: Vec<libc::pollfd>,
    info: LinkInfo,
    pool: BufferPool,
    stats: LinkStats,
    /// Buffers taken from the pool for a receive burst under one lock.
    spare: Vec<PacketBuf>,
    /// In generic mode: an `AF_PACKET` socket on the same interface for the frames
    /// the program passes to the stack because no UMEM chunk holds them. A sender
    /// with TSO on (veth's default) hands over 64 KiB TCP super-frames; generic XDP
    /// runs before the packet taps, so this socket sees only those, and splits them
    /// as a NIC would ([`crate::offload`]). (In native mode veth turns its peer's
    /// TSO off instead.)
    oversize: Option<AfPacket>,
}

impl AfXdpLink {
    /// Open every receive queue of `interface` with the default sizes and generic XDP.
    pub fn open(interface: &str, pool: BufferPool) -> io::Result<AfXdpLink> {
        AfXdpLink::with_config(interface, pool, XdpConfig::default())
    }

    /// Open `interface` with the given sizes and mode.
    pub fn with_config(interface: &str, pool: BufferPool, cfg: XdpConfig) -> io::Result<AfXdpLink> {
        AfXdpLink::with_fast_path(interface, pool, cfg, None)
    }

    /// [`AfXdpLink::with_config`], with `fast`: the interface's XDP program is the
    /// forwarding fast path ([`crate::xdp_fwd`]) over `fast`'s maps, and only what it
    /// does not forward reaches this link.
    pub fn with_fast_path(
        interface: &str,
        pool: BufferPool,
        cfg: XdpConfig,
        fast: Option<&FastPath>,
    ) -> io::Result<AfXdpLink> {
        let pow2 = |v: u32| v.is_power_of_two();
        if !(cfg.frame_size == 2048 || cfg.frame_size == 4096)
            || !pow2(cfg.rx_frames)
            || !pow2(cfg.tx_frames)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bad AF_XDP config: frame size 2048 or 4096, ring sizes powers of two",
            ));
        }
        let ifindex = sys::if_nametoindex(interface)?;
        let (mac, mtu) = interface_mac_mtu(interface)?;
        let room = cfg.frame_size as usize - XDP_PACKET_HEADROOM;
        if mtu + 14 > room {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{interface}: MTU {mtu} does not fit a {}-byte UMEM chunk",
                    cfg.frame_size
                ),
            ));
        }
        let nq = rx_queue_count(interface)?;
        let (map, prog) = Redirect::load(nq, room as u32, fast.map(|f| (f, mac)))?;
        let mut queues = Vec::with_capacity(nq as usize);
        for q in 0..nq {
            let queue = Queue::open(ifindex, q, &cfg)
                .map_err(|e| io::Error::new(e.kind(), format!("{interface} queue {q}: {e}")))?;
            Redirect::insert(&map, q, &queue.fd)?;
            queues.push(queue);
        }
        // Opened before the program is attached, so no passed frame is missed.
        let oversize = match cfg.mode {
            XdpMode::Generic => Some(
                AfPacket::with_config(interface, pool.clone(), OVERSIZE_RINGS).map_err(|e| {
                    io::Error::new(e.kind(), format!("{interface}: oversize frames: {e}"))
                })?,
            ),
            XdpMode::Native => None,
        };
        let redirect = Redirect::attach(map, prog, ifindex, cfg.mode)
            .map_err(|e| io::Error::new(e.kind(), format!("{interface}: {e}")))?;
        let pollfds = queues
            .iter()
            .map(|q| q.fd.as_raw_fd())
            .chain(oversize.as_ref().map(AfPacket::fd))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        Ok(AfXdpLink {
            redirect,
            queues,
            next_rx: 0,
            pollfds,
            info: LinkInfo {
                name: interface.to_string(),
                mac,
                max_frame: mtu + 14,
            },
            pool,
            stats: LinkStats::default(),
            spare: Vec::new(),
            oversize,
        })
    }

    /// Block until a queue or the oversize socket (or `also`) is readable.
    fn poll_fds(&mut self, also: Option<BorrowedFd<'_>>, timeout: Duration) -> io::Result<bool> {
        if self.queues.iter().any(|q| q.rx.ready() > 0)
            || self.oversize.as_ref().is_some_and(AfPacket::rx_ready)
        {
            return Ok(true);
        }
        for p in &mut self.pollfds {
            p.revents = 0;
        }
        if let Some(a) = also {
            self.pollfds.push(libc::pollfd {
                fd: a.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let r = sys::poll(&mut self.pollfds, timeout);
        if also.is_some() {
            self.pollfds.pop();
        }
        Ok(r? > 0)
    }

    /// Receive queues this link serves.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Let one transmit `sendto` hand up to `frames` frames to the device
    /// (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17) instead of the copy mode's 32, so a
    /// long burst costs one system call. `frames` must lie between 32 and the
    /// transmit ring's size; older kernels answer `ENOPROTOOPT` and keep 32.
    pub fn set_tx_budget(&mut self, frames: u32) -> io::Result<()> {
        match self.queues.first() {
            Some(q) => xdp_setsockopt(
                &q.fd,
                XDP_MAX_TX_SKB_BUDGET,
                &frames,
                "XDP_MAX_TX_SKB_BUDGET",
            ),
            None => Ok(()),
        }
    }

    /// Let up to `bytes` of sent frames be in flight (`SO_SNDBUFFORCE`, else
    /// `SO_SNDBUF`, capped by `wmem_max`). In copy mode each frame is an skb charged
    /// to the socket until the receiver frees it; with the default buffer (~200 KiB,
    /// a few hundred small frames) a receiver that queues frames (veth with RPS)
    /// slows the sender down instead of dropping them, which a traffic generator
    /// must not allow.
    pub fn set_send_buffer(&mut self, bytes: i32) -> io::Result<()> {
        let Some(q) = self.queues.first() else {
            return Ok(());
        };
        let fd = q.fd.as_raw_fd();
        sys::set_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            bytes,
            "SO_SNDBUFFORCE",
        )
        .or_else(|_| sys::set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, bytes, "SO_SNDBUF"))
    }

    /// The XSKMAP's file descriptor (for inspection with bpftool in tests).
    pub fn xsk_map_fd(&self) -> libc::c_int {
        self.redirect.map.as_raw_fd()
    }
}

impl Link for AfXdpLink {
    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn pool(&self) -> &BufferPool {
        &self.pool
    }

    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        // One pool lock for the burst's buffers; leftovers go back with one more.
        if self.spare.len() < max {
            let need = max - self.spare.len();
            self.pool.alloc_burst(need, &mut self.spare);
        }
        let mut got = 0;
        let first = out.len();
        let nq = self.queues.len();
        for k in 0..nq {
            if got >= max {
                break;
            }
            let q = &mut self.queues[(self.next_rx + k) % nq];
            let (n, dropped) = q.receive(out, &mut self.spare, max - got);
            got += n;
            self.stats.rx_dropped += dropped;
        }
        self.next_rx = (self.next_rx + 1) % nq.max(1);
        // Generic XDP hands the program the skb's bytes and nothing of its metadata,
        // so a checksum the sender left to a NIC (veth's default) is not flagged:
        // recognise it by its contents (crate::offload).
        for b in &mut out[first..] {
            if crate::offload::complete_if_partial(b) {
                self.stats.rx_csum_completed += 1;
            }
        }
        self.stats.rx_frames += got as u64;
        if let Some(o) = &mut self.oversize {
            if got < max {
                // Counted in its own stats, added in `stats`.
                got += o.recv_burst(out, max - got)?;
            }
        }
        if self.spare.len() > 64 {
            self.pool.free_burst(self.spare.drain(64..));
        }
        Ok(got)
    }

    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize> {
        let Some(q) = self.queues.first_mut() else {
            return Ok(0);
        };
        q.reclaim();
        let room = self.info.max_frame;
        let mut sent = 0;
        let mut posted = 0u32;
        let mut free = q.tx.free();
        for f in frames.iter() {
            if f.len() > room || f.is_empty() {
                // Accepted and lost: never truncate a frame.
                self.stats.tx_dropped += 1;
                sent += 1;
                continue;
            }
            if free == 0 {
                self.stats.tx_ring_full += 1;
                break;
            }
            let Some(addr) = q.tx_free.pop() else {
                self.stats.tx_ring_full += 1;
                break;
            };
            let Some(chunk) = q.umem.slice_mut(addr as usize, f.len()) else {
                q.tx_free.push(addr);
                self.stats.tx_dropped += 1;
                sent += 1;
                continue;
            };
            chunk.copy_from_slice(f);
            q.tx.set_desc(posted, addr, f.len() as u32);
            posted += 1;
            free -= 1;
            sent += 1;
        }
        if posted > 0 {
            q.tx.advance(posted, true);
        }
        self.pool.free_burst(frames.drain(..sent));
        self.stats.tx_frames += sent as u64;
        // Kick also when nothing new was posted but earlier descriptors wait.
        q.kick()?;
        Ok(sent)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        self.poll_fds(None, timeout)
    }

    fn wait_also(&mut self, doorbell: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
        self.poll_fds(Some(doorbell), timeout)
    }

    fn arm_wait(&mut self, fds: &mut Vec<RawFd>) -> io::Result<Armed> {
        if self.queues.iter().any(|q| q.rx.ready() > 0)
            || self.oversize.as_ref().is_some_and(AfPacket::rx_ready)
        {
            return Ok(Armed::Ready);
        }
        fds.extend(self.pollfds.iter().map(|p| p.fd));
        Ok(Armed::Fds)
    }

    fn stats(&self) -> LinkStats {
        let mut s = self.stats;
        for q in &self.queues {
            let k = &q.kernel;
            // No free chunk in the fill ring, or the receive ring full.
            s.rx_dropped += k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
            s.tx_dropped += k.tx_invalid_descs;
        }
        if let Some(o) = &self.oversize {
            let o = o.stats();
            s.rx_frames += o.rx_frames;
            s.rx_dropped += o.rx_dropped;
            s.rx_csum_completed += o.rx_csum_completed;
            s.rx_gso_segmented += o.rx_gso_segmented;
        }
        s
    }

    fn refresh_stats(&mut self) {
        for q in &mut self.queues {
            q.poll_kernel_stats();
        }
        if let Some(o) = &mut self.oversize {
            o.refresh_stats();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_encodes_as_the_kernel_expects() {
        // Any open descriptor stands in for the map: the encoding carries its number.
        let stand_in = std::fs::File::open("/dev/null").expect("/dev/null");
        let fd = stand_in.as_raw_fd();
        let p = redirect_program(stand_in.as_fd(), 1792).expect("assembles");
        let bytes: Vec<[u8; 8]> = p
            .iter()
            .map(|i| {
                let mut b = [0u8; 8];
                b[0] = i.code;
                b[1] = i.regs;
                b[2..4].copy_from_slice(&i.off.to_le_bytes());
                b[4..8].copy_from_slice(&i.imm.to_le_bytes());
                b
            })
            .collect();
        // What clang -target bpf emits for the C (llvm-objdump -d):
        // `if (ctx->data_end - ctx->data > 1792) return XDP_PASS;` then the one-liner.
        assert_eq!(
            bytes[0],
            [0x61, 0x12, 0, 0, 0, 0, 0, 0],
            "r2 = *(u32 *)(r1 + 0)"
        );
        assert_eq!(
            bytes[1],
            [0x61, 0x13, 4, 0, 0, 0, 0, 0],
            "r3 = *(u32 *)(r1 + 4)"
        );
        assert_eq!(bytes[2], [0x1f, 0x23, 0, 0, 0, 0, 0, 0], "r3 -= r2");
        assert_eq!(
            bytes[3],
            [0x25, 0x03, 6, 0, 0x00, 0x07, 0, 0],
            "if r3 > 1792 goto +6"
        );
        assert_eq!(
            bytes[4],
            [0x61, 0x12, 0x10, 0, 0, 0, 0, 0],
            "r2 = *(u32 *)(r1 + 16)"
        );
        let mut ld = [0x18, 0x11, 0, 0, 0, 0, 0, 0];
        ld[4..8].copy_from_slice(&fd.to_le_bytes());
        assert_eq!(bytes[5], ld, "r1 = the map's fd");
        assert_eq!(bytes[6], [0; 8]);
        assert_eq!(bytes[7], [0xb7, 0x03, 0, 0, 2, 0, 0, 0], "r3 = 2");
        assert_eq!(bytes[8], [0x85, 0, 0, 0, 51, 0, 0, 0], "call 51");
        assert_eq!(bytes[9], [0x95, 0, 0, 0, 0, 0, 0, 0], "exit");
        assert_eq!(bytes[10], [0xb7, 0x00, 0, 0, 2, 0, 0, 0], "pass: r0 = 2");
        assert_eq!(bytes[11], [0x95, 0, 0, 0, 0, 0, 0, 0], "exit");
        // The jump lands on `pass`.
        assert_eq!(3 + 1 + p[3].off as usize, 10);
        assert_eq!(size_of::<Insn>(), 8);
    }

    #[test]
    fn uapi_layouts_have_the_kernel_sizes() {
        assert_eq!(size_of::<UmemReg>(), 32);
        assert_eq!(size_of::<MmapOffsets>(), 128);
        assert_eq!(size_of::<SockaddrXdp>(), 16);
        assert_eq!(size_of::<XdpStatistics>(), 48);
        assert_eq!(size_of::<EthtoolChannels>(), 36);
    }
}
