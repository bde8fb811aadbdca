//! Opening a device: [`Context`], [`ProtectionDomain`], [`AddressHandle`].

use crate::engine::{self, ContextStats, Engine, EngineStats, Progress, Shared};
use crate::mr::{MemoryRegion, MrTable, PoolRegion};
use crate::Error;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;
use weft_link::datagram::path_between;
use weft_link::DatagramLink;
use weft_transport::{Access, Config, UdDest};
use weft_wire::roce::IcrcPath;

/// A link kind a device runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// Kernel UDP sockets: RoCEv2 on UDP port 4791 ([`weft_wire::roce::UDP_PORT`]).
    Udp,
    /// Shared-memory rings between processes on one host.
    Shm,
}

impl LinkKind {
    /// The name [`DeviceConfig::parse`] and the examples' `--link` take.
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Udp => "udp",
            LinkKind::Shm => "shm",
        }
    }
}

impl fmt::Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LinkKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<LinkKind, Error> {
        match s {
            "udp" => Ok(LinkKind::Udp),
            "shm" => Ok(LinkKind::Shm),
            _ => Err(Error::UnknownDevice(s.to_string())),
        }
    }
}

/// How to open a device.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// Which link.
    pub link: LinkKind,
    /// The link's address (udp: the socket; shm: the name peers connect to).
    ///
    /// `None` ([`DeviceConfig::local`], the device names `udp` and `shm`): the device
    /// takes a loopback address of its own, `127.a.b.c:4791` with `a.b.c` derived from
    /// the process id and a per-process count, the next one tried while one is taken.
    /// So every device on the host owns RoCEv2's UDP port 4791 on a distinct address,
    /// and packets go to port 4791 as on a RoCE network; peers learn the address from
    /// the connection manager. `Some(addr)` is used as given, except that an shm name
    /// with port 0 becomes a name unique on the host (`ip:port` with a free port);
    /// a udp port 0 takes whatever port the kernel picks (not RoCEv2's).
    pub addr: Option<SocketAddr>,
    /// Who drives the engine (default: an engine thread).
    pub progress: Progress,
    /// The most an idle engine thread spins before it blocks (default 50 µs). Within
    /// it the thread spins for a budget learned from the recent gaps between the
    /// passes that found work, and only while fewer threads than cores spin
    /// (docs/verbs.md, "Progress"). `Duration::ZERO` forces blocking: the thread
    /// blocks as soon as it is idle. `Duration::MAX` forces polling: the thread never
    /// blocks or stands by for a polling application (a dedicated core).
    pub idle_spin: Duration,
    /// Compute and check the ICRC (default on; the udp link always does; shm may
    /// negotiate it off when both ends turn it off).
    pub icrc: bool,
    /// udp: send runs of equal packets as one UDP GSO send and receive coalesced
    /// (`UDP_GRO`), one system call per up to 64 KiB (default on; see
    /// [`weft_link::udp`]). Every packet on the wire keeps the ICRC of its own headers.
    pub segmentation_offload: bool,
    /// udp: accept a received ICRC computed for any IPv4 identification, not only
    /// those weft's own senders use (0..64) — needed to hear Linux's rdma_rxe, which
    /// numbers its packets per address pair while a UDP socket cannot see the IP
    /// header (default off; sets [`Config::icrc_any_ipv4_id`], whose doc gives the
    /// cost: 2^-16 instead of 2^-32 of a corrupted packet passing). What weft sends is
    /// unchanged: identification 0 (or 0..64 in a GSO send) with the ICRC for it.
    pub icrc_any_ipv4_id: bool,
    /// shm: move large WRITE payloads in one copy, straight from the sender's memory
    /// into the target region by cross-memory attach (default on; docs/verbs.md,
    /// "One copy on shm"). It takes effect per connection when the receiving end could
    /// read the sender's memory at connect time; otherwise payloads go through the
    /// rings, counted as refused. WRITEs of at least [`Config::by_reference_min`]
    /// bytes qualify (default [`ONE_COPY_MIN`]).
    pub one_copy: bool,
    /// shm: the smallest WRITE sent by reference when its source memory is *not*
    /// shared with the peer (not allocated by
    /// [`ProtectionDomain::alloc_shared_mr`]), so the peer must copy it with
    /// `process_vm_readv` (default [`ONE_COPY_CMA_MIN`]). From shared memory the
    /// peer copies from its mapping, and [`Config::by_reference_min`] alone decides.
    pub one_copy_cma_min: u64,
    /// shm: RC QPs whose two ends both ask for it carry their SENDs and WRITEs of up
    /// to one MTU as compact descriptors, acknowledged by the peer's consumer index
    /// instead of ACK packets (the ring mode, docs/verbs.md, "The ring mode as
    /// built"). Default off: its descriptors leave from `post_send` itself, past the
    /// engine's sharing of a pass between flows (a bulk flow beside a small one is
    /// not served as with packets), and it has not yet bought the wall-clock gain
    /// its instruction count promises (docs/results/verbs-ring-20261202s34). The
    /// environment variable `WEFT_RING` overrides it when the device opens: `0` off,
    /// `1` on.
    pub ring_mode: bool,
    /// While several QPs of the device are sending, how long one progress pass may go
    /// on transmitting after a round of the deficit round robin (a quantum per active
    /// QP) before it receives again (default 16 µs; docs/verbs.md, "Sharing the
    /// engine"). Longer: more of a bulk transfer's rate beside small operations, and
    /// up to that much more latency for them; `Duration::ZERO`: one round a pass.
    pub shared_pass: Duration,
    /// Transport settings (the QPN seed is replaced by a random one).
    pub transport: Config,
}

/// The smallest WRITE sent by reference over shm by default (see
/// [`DeviceConfig::one_copy`]); docs/results/verbs.md, "One copy on shm", has the
/// measurement it comes from.
pub const ONE_COPY_MIN: u64 = 16 * 1024;

/// The smallest WRITE sent by reference over shm from memory the peer has not mapped
/// (see [`DeviceConfig::one_copy_cma_min`]). Chosen from measurements
/// (docs/results/verbs-shm-onecopy-20261128.md, write-bw, ABAB ×5): at 64 KiB
/// `process_vm_readv` (which pins the source pages of every 64 KiB chunk) was no
/// faster than the two copies through the rings (7 998 vs 7 750 MB/s there; the
/// lead's quieter runs the same morning: 12 043 / 11 692 vs 14 164 / 18 604), at
/// 1 MiB and 4 MiB it was faster (9 165 vs 7 061, 8 448 vs 6 853 MB/s) and took
/// less CPU per byte. Memory allocated with [`ProtectionDomain::alloc_shared_mr`]
/// beats both at every size and goes by reference from `ONE_COPY_MIN`.
pub const ONE_COPY_CMA_MIN: u64 = 1 << 20;

impl DeviceConfig {
    /// Defaults for `link` at `addr` (used as given; see [`DeviceConfig::addr`]):
    /// engine thread, adaptive spinning up to 50 µs, ICRC on.
    pub fn new(link: LinkKind, addr: SocketAddr) -> DeviceConfig {
        DeviceConfig {
            addr: Some(addr),
            ..DeviceConfig::local(link)
        }
    }

    /// Defaults for `link` on a loopback address of the device's own, port 4791
    /// (see [`DeviceConfig::addr`]): what two processes on one host use to talk RoCEv2.
    pub fn local(link: LinkKind) -> DeviceConfig {
        DeviceConfig {
            link,
            addr: None,
            progress: Progress::Thread,
            idle_spin: Duration::from_micros(50),
            icrc: true,
            segmentation_offload: true,
            icrc_any_ipv4_id: false,
            one_copy: true,
            ring_mode: false,
            one_copy_cma_min: ONE_COPY_CMA_MIN,
            shared_pass: engine::SHARED_PASS_DEFAULT,
            transport: Config {
                by_reference_min: ONE_COPY_MIN,
                ..Config::default()
            },
        }
    }

    /// Parse a device name: `udp` or `shm` (a loopback address of the device's own,
    /// as [`DeviceConfig::local`]), or `udp:ADDR`, `shm:ADDR` with ADDR an `ip:port`
    /// used as given (`udp:198.18.0.1:4791`; `shm:127.0.0.1:0` for a unique name).
    pub fn parse(name: &str) -> Result<DeviceConfig, Error> {
        let (kind, addr) = match name.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (name, None),
        };
        let link = kind
            .parse::<LinkKind>()
            .map_err(|_| Error::UnknownDevice(name.to_string()))?;
        match addr {
            None => Ok(DeviceConfig::local(link)),
            Some(a) => {
                let addr = a
                    .parse()
                    .map_err(|_| Error::UnknownDevice(name.to_string()))?;
                Ok(DeviceConfig::new(link, addr))
            }
        }
    }
}

/// Randomness for keys and QP numbers, from the standard library's per-process
/// random hasher seed (no extra dependency): peers must not guess them.
pub(crate) fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

#[derive(Debug)]
struct ContextInner {
    shared: Arc<Shared>,
    link_kind: LinkKind,
    icrc: bool,
    max_mtu: weft_transport::Mtu,
    ack_delay_us: u32,
    /// [`Context::ring_capable`]: read from the environment when the device opens.
    ring_capable: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    next_pd: AtomicU32,
}

/// The environment variable that overrides [`DeviceConfig::ring_mode`] when a device
/// opens ([`Context::ring_capable`]): `0` off, `1` on (an A/B switch for one binary).
const RING_ENV: &str = "WEFT_RING";

/// [`DeviceConfig::ring_mode`] as the value of [`RING_ENV`] leaves it: `0` turns it
/// off, `1` on, anything else (or nothing) keeps `configured`.
fn ring_env(value: Option<&std::ffi::OsStr>, configured: bool) -> bool {
    match value.and_then(|v| v.to_str()) {
        Some("0") => false,
        Some("1") => true,
        _ => configured,
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        self.shared.stop();
        if let Some(t) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = t.join();
        }
    }
}

/// An open device (`ibv_context`): one software RNIC on one link. Cheap to clone;
/// every object made from it keeps it open, and the engine stops when the last goes.
#[derive(Debug, Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

impl Context {
    /// Open a device by name (see [`DeviceConfig::parse`]) with default settings.
    pub fn open(name: &str) -> Result<Context, Error> {
        Context::open_with(DeviceConfig::parse(name)?)
    }

    /// Open a device.
    pub fn open_with(cfg: DeviceConfig) -> Result<Context, Error> {
        let link = crate::links::open(&cfg)?;
        Context::with_link(link, cfg)
    }

    /// Run the engine over a link the caller built (tests use the simulated link).
    /// `cfg.addr` is ignored; `cfg.link` is what the connection manager announces.
    pub fn with_link(link: Box<dyn DatagramLink>, cfg: DeviceConfig) -> Result<Context, Error> {
        let mut tcfg = cfg.transport;
        tcfg.qpn_seed = random_u64();
        let icrc = link.icrc();
        let max_mtu =
            weft_transport::Mtu::fitting(link.max_datagram()).unwrap_or(weft_transport::Mtu::M256);
        tcfg.check_icrc = icrc;
        tcfg.write_icrc = icrc;
        // A udp peer may send UDP GSO (weft's udp link does by default), whose segments
        // carry identifications 0..64; nothing segments on shm.
        tcfg.icrc_ids = if cfg.link == LinkKind::Udp {
            weft_wire::roce::GSO_MAX_SEGMENTS
        } else {
            1
        };
        tcfg.icrc_any_ipv4_id |= cfg.icrc_any_ipv4_id && cfg.link == LinkKind::Udp;
        tcfg.max_inline = tcfg.max_inline.min(engine::MAX_INLINE);
        let ack_delay_us = u32::try_from(tcfg.ack_delay_us).unwrap_or(u32::MAX);
        let mut mem = MrTable::default();
        mem.cma_min = cfg.one_copy_cma_min;
        let mut engine = Engine::new(tcfg, mem, link);
        engine.set_shared_pass(cfg.shared_pass);
        let shared =
            Arc::new(Shared::new(engine, cfg.progress, cfg.idle_spin).map_err(Error::Link)?);
        let thread = match cfg.progress {
            Progress::Thread => Some(engine::spawn(&shared).map_err(Error::Link)?),
            Progress::Inline => None,
        };
        Ok(Context {
            inner: Arc::new(ContextInner {
                shared,
                link_kind: cfg.link,
                icrc,
                max_mtu,
                ack_delay_us,
                ring_capable: AtomicBool::new(ring_env(
                    std::env::var_os(RING_ENV).as_deref(),
                    cfg.ring_mode,
                )),
                thread: Mutex::new(thread),
                next_pd: AtomicU32::new(1),
            }),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// The link address peers reach this device at.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.shared.local_addr
    }

    /// The kind of link the device runs on.
    pub fn link_kind(&self) -> LinkKind {
        self.inner.link_kind
    }

    /// The largest path MTU whose packets the link carries.
    pub fn max_mtu(&self) -> weft_transport::Mtu {
        self.inner.max_mtu
    }

    /// Whether the link computes and checks ICRCs.
    pub fn icrc(&self) -> bool {
        self.inner.icrc
    }

    /// The longest this device's responders hold the ACK of a request packet that did
    /// not ask for one, in microseconds ([`Config::ack_delay_us`]). A weft peer's QP
    /// takes it as [`QpAttr::peer_ack_delay_us`](weft_transport::QpAttr) (the
    /// connection manager tells it); 0: every SEND or WRITE is acknowledged at once.
    pub fn ack_delay_us(&self) -> u32 {
        self.inner.ack_delay_us
    }

    /// Whether this device's engine can carry an RC QP's messages on an shm link as
    /// ring-mode descriptors instead of RoCEv2 packets (docs/verbs.md, "The ring mode
    /// as built"); the connection manager asks for the mode in its hello only then
    /// (`cm::Hello::ring`).
    ///
    /// [`DeviceConfig::ring_mode`], or the environment variable `WEFT_RING` when it
    /// was `0` or `1` as the device opened. Only the shm link carries descriptors;
    /// over udp the hello never asks.
    pub(crate) fn ring_capable(&self) -> bool {
        self.inner.ring_capable.load(Ordering::Relaxed)
    }

    /// Override [`Context::ring_capable`] for one device (the connection manager's
    /// tests: one side asking, the other not, in one process).
    #[cfg(test)]
    pub(crate) fn set_ring_capable(&self, on: bool) {
        self.inner.ring_capable.store(on, Ordering::Relaxed);
    }

    /// How progress is made.
    pub fn progress_mode(&self) -> Progress {
        self.inner.shared.progress
    }

    /// The IP/UDP path from this device to `peer` (for `QpAttr::path`).
    pub fn path_to(&self, peer: SocketAddr) -> Result<IcrcPath, Error> {
        path_between(self.local_addr(), peer).ok_or(Error::AddressFamily)
    }

    /// Counters of the engine, the transport and the link.
    pub fn stats(&self) -> ContextStats {
        let e = self.inner.shared.lock_to_look();
        ContextStats {
            engine: EngineStats {
                standbys: self.inner.shared.standbys.load(Ordering::Relaxed),
                takeovers: self.inner.shared.takeovers.load(Ordering::Relaxed),
                link_takeovers: self.inner.shared.link_takeovers.load(Ordering::Relaxed),
                link_takeovers_stale: self
                    .inner
                    .shared
                    .link_takeovers_stale
                    .load(Ordering::Relaxed),
                link_takeovers_left: self
                    .inner
                    .shared
                    .link_takeovers_left
                    .load(Ordering::Relaxed),
                link_takeovers_posted: self
                    .inner
                    .shared
                    .link_takeovers_posted
                    .load(Ordering::Relaxed),
                watch_arms: self.inner.shared.watch_arms.load(Ordering::Relaxed),
                watch_rearms: self.inner.shared.watch_rearms.load(Ordering::Relaxed),
                quiet_gap_ns: self.inner.shared.quiet_gap_ns.load(Ordering::Relaxed),
                watches: self.inner.shared.watches.load(Ordering::Relaxed),
                handbacks: self.inner.shared.handbacks.load(Ordering::Relaxed),
                polls_held: self.inner.shared.polls_held.load(Ordering::Relaxed),
                recv_flush_kicks: self.inner.shared.recv_flush_kicks.load(Ordering::Relaxed),
                ..e.stats()
            },
            transport: e.ep.stats().clone(),
            link: e.link_stats(),
            pull_errors: e.ep.mem().pull_errors,
            pulls: e.ep.mem().pulls,
        }
    }

    /// Run one progress pass now (inline mode; harmless with an engine thread).
    pub fn progress(&self) -> bool {
        self.inner.shared.try_progress()
    }

    /// A new protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> ProtectionDomain {
        ProtectionDomain {
            ctx: self.clone(),
            pd: self.inner.next_pd.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// A protection domain (`ibv_pd`): memory regions, queue pairs and address handles
/// of one domain only work together.
#[derive(Debug, Clone)]
pub struct ProtectionDomain {
    pub(crate) ctx: Context,
    pub(crate) pd: u32,
}

impl ProtectionDomain {
    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    fn keys(&self, e: &Engine) -> (u32, u32) {
        let _ = e;
        loop {
            let r = random_u64();
            let (l, k) = (r as u32, (r >> 32) as u32);
            if e.ep.mem().keys_free(l, k) {
                return (l, k);
            }
        }
    }

    fn install(
        &self,
        mut mr: MemoryRegion,
        mut e: std::sync::MutexGuard<'_, Engine>,
    ) -> MemoryRegion {
        let shared = self.ctx.shared();
        let entry = mr.attach(Arc::clone(shared));
        e.register(Arc::clone(&entry));
        drop(e);
        shared
            .inline_keys
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(entry.region.lkey, entry);
        mr
    }

    /// Allocate and register `len` zeroed bytes, 8-byte aligned (`ibv_reg_mr` over
    /// fresh memory).
    pub fn alloc_mr(&self, len: usize, access: Access) -> MemoryRegion {
        let e = self.ctx.shared().lock();
        let mr = MemoryRegion::allocate(len, self.pd, access, self.keys(&e));
        self.install(mr, e)
    }

    /// Allocate and register `len` zeroed bytes, page-aligned, as a sealed memfd that
    /// the shm link offers to every peer: a peer then copies a large WRITE from it
    /// with `memcpy` from its own read-only mapping instead of `process_vm_readv`
    /// (docs/verbs.md, "One copy on shm"). Works on every link (udp simply does not
    /// offer it). The region is withdrawn from the peers when it is dropped.
    ///
    /// Every shm peer can read the whole region while it holds the mapping, whatever
    /// `access` grants, and a hostile peer can keep the mapping after the withdrawal:
    /// allocate this way only bytes every peer may read.
    pub fn alloc_shared_mr(&self, len: usize, access: Access) -> Result<MemoryRegion, Error> {
        let mem = weft_link::shmem::SharedMemory::new(len).map_err(Error::Link)?;
        let e = self.ctx.shared().lock();
        let mr = MemoryRegion::shared(mem, self.pd, access, self.keys(&e));
        Ok(self.install(mr, e))
    }

    /// Register the caller's buffer; [`MemoryRegion::into_vec`] gives it back.
    pub fn register(&self, buf: Vec<u8>, access: Access) -> MemoryRegion {
        let e = self.ctx.shared().lock();
        let mr = MemoryRegion::adopt(buf, self.pd, access, self.keys(&e));
        self.install(mr, e)
    }

    /// Register the arena of a packet-buffer pool — every buffer of it, once — for
    /// local sends only (no access rights: nothing writes it, no peer reaches it), so
    /// a [`weft_link::PacketBuf`] of the pool is sent in place
    /// ([`PoolRegion::sge`]). Safe: the region keeps the pool's arena alive; the
    /// soundness argument is on [`PoolRegion`].
    pub fn register_pool(&self, pool: &weft_link::BufferPool) -> PoolRegion {
        let e = self.ctx.shared().lock();
        let mr = MemoryRegion::pool(pool.clone(), self.pd, self.keys(&e));
        PoolRegion::new(self.install(mr, e), pool.clone())
    }

    /// Register memory by address, as `ibv_reg_mr` does.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be valid for reads and writes, and stay allocated and
    /// unmoved, until the returned region is dropped; the engine writes into it when
    /// peers WRITE (with remote write access) and when receives complete.
    #[allow(unsafe_code)]
    pub unsafe fn register_raw(&self, ptr: *mut u8, len: usize, access: Access) -> MemoryRegion {
        let e = self.ctx.shared().lock();
        let keys = self.keys(&e);
        // SAFETY: the caller's contract above is `MemoryRegion::raw`'s.
        let mr = unsafe { MemoryRegion::raw(ptr, len, self.pd, access, keys) };
        self.install(mr, e)
    }

    /// An address handle for UD sends to `peer` (`ibv_create_ah`).
    pub fn create_ah(&self, peer: SocketAddr) -> Result<AddressHandle, Error> {
        Ok(AddressHandle {
            path: self.ctx.path_to(peer)?,
            pd: self.pd,
        })
    }

    /// An address handle that answers the sender of a UD receive (`ibv_create_ah_from_wc`).
    pub fn create_ah_from_wc(&self, wc: &weft_transport::Completion) -> Option<AddressHandle> {
        let p = wc.src_path?;
        Some(AddressHandle {
            path: reverse(&p),
            pd: self.pd,
        })
    }
}

fn reverse(p: &IcrcPath) -> IcrcPath {
    use weft_wire::roce::IpPair;
    IcrcPath {
        ips: match p.ips {
            IpPair::V4 { src, dst } => IpPair::V4 { src: dst, dst: src },
            IpPair::V6 { src, dst } => IpPair::V6 { src: dst, dst: src },
        },
        src_port: p.dst_port,
        dst_port: p.src_port,
    }
}

/// Where UD datagrams go (`ibv_ah`): the path to a peer's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressHandle {
    path: IcrcPath,
    pd: u32,
}

impl AddressHandle {
    /// The destination of a UD send: this address, QP `qpn`, Q_Key `qkey`.
    pub fn dest(&self, qpn: u32, qkey: u32) -> UdDest {
        UdDest {
            path: self.path,
            qpn,
            qkey,
        }
    }

    /// The path.
    pub fn path(&self) -> IcrcPath {
        self.path
    }
}

#[cfg(test)]
mod tests {
    use super::ring_env;
    use std::ffi::OsStr;

    #[test]
    fn weft_ring_0_or_1_overrides_the_configured_ring_mode_and_nothing_else_does() {
        for configured in [false, true] {
            assert!(ring_env(Some(OsStr::new("1")), configured));
            assert!(!ring_env(Some(OsStr::new("0")), configured));
            for other in [
                None,
                Some(""),
                Some("yes"),
                Some("1 "),
                Some("true"),
                Some("00"),
            ] {
                assert_eq!(
                    ring_env(other.map(OsStr::new), configured),
                    configured,
                    "{other:?}"
                );
            }
        }
    }
}
