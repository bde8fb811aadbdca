//! The C boundary: every exported `ibv_*` function, the ops table and the objects
//! behind the C handles.
//!
//! Each C object weft hands out is the first field of a `#[repr(C)]` Rust object
//! (`Ctx`, `Pd`, `Mr`, `Cq`, `Channel`, `Qp`, `Srq`, `Ah`), so the C pointer is also a
//! pointer to the Rust object; a tag after the C part (`MAGIC_*`) is checked before a
//! handle is trusted, so a null handle or one pointing at readable memory that is not
//! such an object gets `EINVAL`. A freed handle is outside that: the tag is cleared
//! before an object is freed, which catches many uses after destroy, but reading the
//! tag of freed memory is itself undefined and reused memory may hold anything; as
//! in rdma-core, using a destroyed handle is the program's bug.
//! Each entry point runs its body under [`guard`], which catches a panic and answers
//! with an errno: nothing unwinds into C.
//!
//! Thread safety: C callers may use one object from several threads. Every weft-verbs
//! object that needs `&mut` (a QP's queues, a CQ's ring) sits behind a `Mutex`.
#![allow(unsafe_code)] // the crate's C boundary; every block says why it is sound
#![allow(clippy::missing_safety_doc)] // the C API's contracts are verbs.h's
#![allow(missing_docs)]

use crate::abi::*;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::mem::{offset_of, size_of};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::ThreadId;
use std::time::Duration;
use weft_transport::{
    Access, Completion, Mtu, QpAttr, QpState, QpType, RecvWr, RemoteAddr, SendWr, SgList, Sge,
    WcOpcode, WcStatus, WrOp,
};
use weft_verbs::{
    AddressHandle, CompletionChannel, CompletionQueue, Context, DeviceConfig, Error, LinkKind,
    MemoryRegion, ProtectionDomain, QpInitAttr, QueuePair, SharedReceiveQueue,
};
use weft_wire::roce::{Psn, UDP_PORT};

const MAGIC_CTX: u64 = 0x7765_6674_6374_7800;
const MAGIC_PD: u64 = 0x7765_6674_7064_0000;
const MAGIC_MR: u64 = 0x7765_6674_6d72_0000;
const MAGIC_CQ: u64 = 0x7765_6674_6371_0000;
const MAGIC_CH: u64 = 0x7765_6674_6368_0000;
const MAGIC_QP: u64 = 0x7765_6674_7170_0000;
const MAGIC_SRQ: u64 = 0x7765_6674_7372_7100;
const MAGIC_AH: u64 = 0x7765_6674_6168_0000;

/// Device limits weft announces (and enforces where the C caller passes a size).
const MAX_QP_WR: u32 = 16_384;
const MAX_CQE: c_int = 65_536;
const MAX_SGE: u32 = weft_transport::wr::MAX_SGE as u32;
const MAX_INLINE: u32 = weft_verbs::MAX_INLINE as u32;
/// READs and atomics outstanding per QP, each way. weft's transport counts them in a
/// `u8` with no table behind it; 128 is rdma_rxe's figure, and perftest sets a QP's
/// `max_rd_atomic` to the *peer's* announced `max_qp_rd_atom`, so a smaller one here
/// made every perftest READ/atomic client against rxe fail at RTS with `EINVAL`.
const MAX_RD_ATOM: c_int = 128;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The calling thread's errno after a failed system call (EIO if it says nothing).
fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Run `f`; a panic becomes `on_panic` (after printing it), never an unwind into C.
fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// An errno-returning entry point (`ibv_modify_qp` style: 0 or a positive errno).
fn errno_call(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    guard(libc::EIO, || match f() {
        Ok(()) => 0,
        Err(e) => e,
    })
}

/// An entry point that returns 0, or -1 with errno set (the `ibv_get_*_event` style).
fn minus_one_call(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    guard(-1, || match f() {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    })
}

/// A pointer-returning entry point: NULL and errno on failure.
fn ptr_call<T>(f: impl FnOnce() -> Result<*mut T, c_int>) -> *mut T {
    guard(null_mut(), || match f() {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    })
}

/// The errno a real provider answers with for a weft-verbs error.
fn errno_of(e: &Error) -> c_int {
    use weft_transport::PostError as P;
    match e {
        Error::Post(P::QueueFull)
        | Error::PostList {
            error: P::QueueFull,
            ..
        } => libc::ENOMEM,
        Error::Bind { source, .. } | Error::Link(source) | Error::Io(source) => {
            source.raw_os_error().unwrap_or(libc::EIO)
        }
        Error::NoFreeAddress { .. } => libc::EADDRINUSE,
        Error::Timeout => libc::ETIMEDOUT,
        _ => libc::EINVAL,
    }
}

/// Borrow the Rust object behind a C handle after checking its tag.
///
/// What is checked: `p` is not null, and the `u64` at the tag's offset equals
/// `T::MAGIC`. That rejects foreign memory that happens not to hold the tag; it does
/// not prove `p` is live: a freed object's tag is cleared before the free, but freed
/// or reused memory is outside this function's contract, not something it detects.
///
/// # Safety
/// `p` is null or points to memory the caller may read at least `size_of::<T>()` of
/// (a handle weft returned and has not freed is such memory), and memory at `p` that
/// holds `T::MAGIC` at the tag's offset is a live `T` weft allocated (true of live
/// handles; a C program that forges the tag or uses a destroyed handle breaks it).
unsafe fn obj<'a, T: Tagged>(p: *const c_void) -> Result<&'a T, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    let t = p.cast::<T>();
    let tag = p.cast::<u8>().wrapping_add(T::MAGIC_OFFSET).cast::<u64>();
    // SAFETY: per the contract `p` is readable for the object's size, which covers the
    // tag; the tag is read first and the object trusted only when it matches.
    if unsafe { tag.read_unaligned() } != T::MAGIC {
        return Err(libc::EINVAL);
    }
    // SAFETY: per the contract, readable memory with the tag is a live `T` weft
    // allocated; the tag only tells weft's objects from other memory.
    Ok(unsafe { &*t })
}

/// A lock held across C calls: from `ibv_wr_start` to `ibv_wr_complete`/`abort` on a
/// QP, from `ibv_start_poll` to `ibv_end_poll` on a CQ (as mlx5 holds its SQ or CQ
/// lock), so one thread at a time builds a batch or walks the completions. Released
/// only by the thread that holds it.
#[derive(Default)]
struct Owner {
    held: Mutex<Option<ThreadId>>,
    free: Condvar,
}

impl Owner {
    fn acquire(&self) {
        let me = std::thread::current().id();
        let mut h = lock(&self.held);
        while h.is_some() {
            h = self.free.wait(h).unwrap_or_else(PoisonError::into_inner);
        }
        *h = Some(me);
    }

    fn release(&self) {
        let me = std::thread::current().id();
        let mut h = lock(&self.held);
        if *h == Some(me) {
            *h = None;
            self.free.notify_one();
        }
    }
}

trait Tagged {
    const MAGIC: u64;
    /// Where the tag lies in the object.
    const MAGIC_OFFSET: usize;
}

macro_rules! tagged {
    ($($t:ident = $m:ident),*) => {$(
        impl Tagged for $t {
            const MAGIC: u64 = $m;
            const MAGIC_OFFSET: usize = offset_of!($t, magic);
        }
    )*};
}
tagged!(
    Ctx = MAGIC_CTX,
    Pd = MAGIC_PD,
    Mr = MAGIC_MR,
    Cq = MAGIC_CQ,
    Channel = MAGIC_CH,
    Qp = MAGIC_QP,
    Srq = MAGIC_SRQ,
    Ah = MAGIC_AH
);

/// Free an object weft allocated with [`Box::into_raw`], clearing its tag first.
///
/// # Safety
/// `p` came from `Box::into_raw` of a `T` that `obj` just accepted, and no other
/// thread uses it (the C API's destroy contract).
unsafe fn free<T: Tagged>(p: *const T, clear: impl FnOnce(&mut T)) {
    // SAFETY: per the contract `p` is the unique owner of a boxed `T`.
    let mut b = unsafe { Box::from_raw(p.cast_mut()) };
    clear(&mut b);
    drop(b);
}

// ---------------------------------------------------------------------------------
// The device

struct Device(ibv_device);
// SAFETY: the device record is written once, before it is shared, and only read after.
unsafe impl Sync for Device {}
// SAFETY: as above.
unsafe impl Send for Device {}

fn c_name<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

fn device() -> *mut ibv_device {
    static DEV: OnceLock<Device> = OnceLock::new();
    let d = DEV.get_or_init(|| {
        Device(ibv_device {
            _ops: _ibv_device_ops {
                _dummy1: null_mut(),
                _dummy2: null_mut(),
            },
            node_type: IBV_NODE_CA,
            transport_type: IBV_TRANSPORT_IB,
            name: c_name(crate::DEVICE_NAME),
            dev_name: c_name(crate::DEV_NAME),
            dev_path: c_name(&format!("/sys/class/infiniband_verbs/{}", crate::DEV_NAME)),
            ibdev_path: c_name("/sys/class/infiniband/weft0"),
        })
    });
    ptr::addr_of!(d.0).cast_mut()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    ptr_call(|| {
        let list: Box<[*mut ibv_device; 2]> = Box::new([device(), null_mut()]);
        if !num.is_null() {
            // SAFETY: the caller passes a writable int or NULL.
            unsafe { *num = 1 };
        }
        Ok(Box::into_raw(list).cast::<*mut ibv_device>())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    guard((), || {
        if !list.is_null() {
            // SAFETY: `list` came from `ibv_get_device_list`, a boxed two-entry array.
            drop(unsafe { Box::from_raw(list.cast::<[*mut ibv_device; 2]>()) });
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    guard(ptr::null(), || {
        if dev != device() {
            set_errno(libc::EINVAL);
            return ptr::null();
        }
        // SAFETY: `dev` is weft's static device record.
        unsafe { (*dev).name.as_ptr() }
    })
}

fn guid() -> u64 {
    // "weft" and the device number: stable, recognisable, not a real vendor's OUI.
    u64::from_be_bytes(*b"weft\0\0\0\x01")
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    guard(0, || if dev == device() { guid().to_be() } else { 0 })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    guard(-1, || if dev == device() { 0 } else { -1 })
}

// ---------------------------------------------------------------------------------
// Context

#[repr(C)]
struct Ctx {
    vctx: verbs_context,
    magic: u64,
    ctx: Context,
    gid: ibv_gid,
    /// Objects made from this context and not destroyed (`ibv_close_device` frees the
    /// context only; what the program leaks stays valid until exit).
    objects: AtomicU32,
    /// The context's `async_fd`: an eventfd that weft never signals, since it raises no
    /// asynchronous events. Programs poll or epoll it (UCX's async thread registers it
    /// and fails on -1), so it must be a real descriptor; closed with the context.
    async_fd: OwnedFd,
}

/// The address the last context of this process took: a context opened after it is
/// closed takes it again, so a program that opens, queries the GID, closes and opens
/// again (as perftest does) keeps its GID.
static LAST_ADDR: Mutex<Option<SocketAddr>> = Mutex::new(None);

fn config() -> Result<DeviceConfig, c_int> {
    let link = match std::env::var(crate::ENV_LINK).as_deref() {
        Err(_) | Ok("") | Ok("udp") => LinkKind::Udp,
        Ok("shm") => LinkKind::Shm,
        Ok(other) => {
            eprintln!("weft: {}={other:?}: expected udp or shm", crate::ENV_LINK);
            return Err(libc::EINVAL);
        }
    };
    let mut cfg = DeviceConfig::local(link);
    if let Ok(a) = std::env::var(crate::ENV_ADDR) {
        if !a.is_empty() {
            let ip: IpAddr = a.parse().map_err(|_| {
                eprintln!("weft: {}={a:?}: expected an IP address", crate::ENV_ADDR);
                libc::EINVAL
            })?;
            cfg.addr = Some(SocketAddr::new(ip, UDP_PORT));
        }
    }
    match std::env::var(crate::ENV_ICRC_ANY_IPV4_ID).as_deref() {
        Err(_) | Ok("") | Ok("0") => {}
        Ok("1") => cfg.icrc_any_ipv4_id = true,
        Ok(other) => {
            eprintln!(
                "weft: {}={other:?}: expected 0 or 1",
                crate::ENV_ICRC_ANY_IPV4_ID
            );
            return Err(libc::EINVAL);
        }
    }
    match std::env::var(crate::ENV_IDLE_SPIN).as_deref() {
        Err(_) | Ok("") => {}
        Ok("poll") => cfg.idle_spin = Duration::MAX,
        Ok(v) => match v.parse::<u64>() {
            Ok(us) => cfg.idle_spin = Duration::from_micros(us),
            Err(_) => {
                eprintln!(
                    "weft: {}={v:?}: expected microseconds or poll",
                    crate::ENV_IDLE_SPIN
                );
                return Err(libc::EINVAL);
            }
        },
    }
    Ok(cfg)
}

fn open_context() -> Result<Context, c_int> {
    let cfg = config()?;
    let mut last = lock(&LAST_ADDR);
    if cfg.addr.is_none() {
        if let Some(a) = *last {
            let again = DeviceConfig {
                addr: Some(a),
                ..cfg.clone()
            };
            if let Ok(c) = Context::open_with(again) {
                return Ok(c);
            }
        }
    }
    match Context::open_with(cfg) {
        Ok(c) => {
            *last = Some(c.local_addr());
            Ok(c)
        }
        Err(e) => {
            eprintln!("weft: cannot open {}: {e}", crate::DEVICE_NAME);
            Err(errno_of(&e))
        }
    }
}

/// The GID of a link address: IPv4-mapped for IPv4 (RoCEv2), the address for IPv6.
pub(crate) fn gid_of(addr: SocketAddr) -> ibv_gid {
    let v6 = match addr.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    ibv_gid { raw: v6.octets() }
}

/// The link address a GID names (RoCEv2: UDP port 4791 on the GID's IP address).
pub(crate) fn addr_of(gid: &ibv_gid) -> Option<SocketAddr> {
    let v6 = Ipv6Addr::from(gid.raw);
    if v6.is_unspecified() {
        return None;
    }
    let ip = match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    };
    Some(SocketAddr::new(ip, UDP_PORT))
}

/// # Safety
/// `c` is null or a context pointer the C program holds.
unsafe fn ctx<'a>(c: *mut ibv_context) -> Result<&'a Ctx, c_int> {
    if c.is_null() {
        return Err(libc::EINVAL);
    }
    // The `ibv_context` is the last field of the `verbs_context` at the start of `Ctx`.
    let base = c
        .cast::<u8>()
        .wrapping_sub(offset_of!(verbs_context, context));
    // SAFETY: a context weft made has its `Ctx` right there; `obj` checks the tag.
    unsafe { obj::<Ctx>(base.cast()) }
}

fn ops() -> ibv_context_ops {
    ibv_context_ops {
        _compat0: [0; 7],
        alloc_mw: 0,
        bind_mw: 0,
        dealloc_mw: 0,
        _compat1: 0,
        poll_cq: Some(poll_cq),
        req_notify_cq: Some(req_notify_cq),
        _compat2: [0; 7],
        post_srq_recv: Some(post_srq_recv),
        _compat3: [0; 4],
        post_send: Some(post_send),
        post_recv: Some(post_recv),
        _compat4: [0; 5],
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    ptr_call(|| {
        if dev != device() {
            return Err(libc::EINVAL);
        }
        let context = open_context()?;
        let gid = gid_of(context.local_addr());
        // Blocking, as rdma-core's is: a program sets O_NONBLOCK itself if it wants.
        // SAFETY: eventfd(2) with constant arguments; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(last_errno());
        }
        // SAFETY: `raw` is a descriptor eventfd just returned; nothing else owns it.
        let async_fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let b = Box::new(Ctx {
            vctx: verbs_context {
                query_port: Some(query_port),
                _ops0: [0; 24],
                create_cq_ex: Some(create_cq_ex),
                priv_: 0,
                query_device_ex: Some(query_device_ex),
                _ops1: [0; 5],
                create_qp_ex: Some(create_qp_ex),
                _ops2: [0; 4],
                _abi_placeholder3: 0,
                sz: size_of::<verbs_context>(),
                context: ibv_context {
                    device: dev,
                    ops: ops(),
                    cmd_fd: -1,
                    async_fd: async_fd.as_raw_fd(),
                    num_comp_vectors: 1,
                    // SAFETY: an all-zero pthread mutex is PTHREAD_MUTEX_INITIALIZER on
                    // glibc; weft never locks it (programs do not either).
                    mutex: unsafe { std::mem::zeroed() },
                    abi_compat: VERBS_ABI_IS_EXTENDED as *mut c_void,
                },
            },
            magic: MAGIC_CTX,
            ctx: context,
            gid,
            objects: AtomicU32::new(0),
            async_fd,
        });
        let p = Box::into_raw(b);
        // SAFETY: `p` is the live box just made.
        Ok(unsafe { ptr::addr_of_mut!((*p).vctx.context) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(c: *mut ibv_context) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API `c` is a context pointer.
        let x = unsafe { ctx(c) }?;
        if x.objects.load(Ordering::Acquire) != 0 {
            // Objects of this context are still alive (the program leaks them, or
            // destroys them after closing). They point at this record, so it stays,
            // as does the engine they hold, until the process exits; rdma-core's
            // close also succeeds here.
            return Ok(());
        }
        if std::env::var(crate::ENV_STATS).as_deref() == Ok("1") {
            eprintln!("weft: {} closed: {:?}", crate::DEVICE_NAME, x.ctx.stats());
        }
        // SAFETY: `x` is a live boxed `Ctx`; closing is the program's last use of it.
        unsafe { free(ptr::from_ref(x), |x| x.magic = 0) };
        Ok(())
    })
}

fn device_attr(x: &Ctx) -> ibv_device_attr {
    // SAFETY: `ibv_device_attr` is plain integers; all-zero is a valid value.
    let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
    a.fw_ver = c_name(concat!("weft ", env!("CARGO_PKG_VERSION")));
    a.node_guid = guid().to_be();
    a.sys_image_guid = guid().to_be();
    a.max_mr_size = u64::MAX;
    a.page_size_cap = 4096;
    a.max_qp = 65_536;
    a.max_qp_wr = MAX_QP_WR as c_int;
    a.max_sge = MAX_SGE as c_int;
    a.max_sge_rd = MAX_SGE as c_int;
    a.max_cq = 65_536;
    a.max_cqe = MAX_CQE;
    a.max_mr = 1 << 20;
    a.max_pd = 1 << 20;
    a.max_qp_rd_atom = MAX_RD_ATOM;
    a.max_res_rd_atom = MAX_RD_ATOM * 65_536;
    a.max_qp_init_rd_atom = MAX_RD_ATOM;
    a.atomic_cap = IBV_ATOMIC_HCA;
    a.max_ah = 1 << 20;
    a.max_srq = 65_536;
    a.max_srq_wr = MAX_QP_WR as c_int;
    a.max_srq_sge = MAX_SGE as c_int;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 16;
    a.phys_port_cnt = 1;
    let _ = x;
    a
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    c: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let x = unsafe { ctx(c) }?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes a writable `ibv_device_attr`.
        unsafe { attr.write(device_attr(x)) };
        Ok(())
    })
}

unsafe extern "C" fn query_device_ex(
    c: *mut ibv_context,
    input: *const c_void,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    let _ = input;
    errno_call(|| {
        // SAFETY: per the C API.
        let x = unsafe { ctx(c) }?;
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes `attr_size` writable bytes.
        unsafe {
            ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
            ptr::addr_of_mut!((*attr).orig_attr).write(device_attr(x));
        }
        Ok(())
    })
}

fn mtu_enum(m: Mtu) -> c_int {
    match m {
        Mtu::M256 => 1,
        Mtu::M512 => 2,
        Mtu::M1024 => 3,
        Mtu::M2048 => 4,
        Mtu::M4096 => 5,
    }
}

fn mtu_of(v: c_int) -> Option<Mtu> {
    Some(match v {
        1 => Mtu::M256,
        2 => Mtu::M512,
        3 => Mtu::M1024,
        4 => Mtu::M2048,
        5 => Mtu::M4096,
        _ => return None,
    })
}

fn port_attr(x: &Ctx) -> ibv_port_attr {
    let mtu = mtu_enum(x.ctx.max_mtu());
    ibv_port_attr {
        state: IBV_PORT_ACTIVE,
        max_mtu: mtu,
        active_mtu: mtu,
        gid_tbl_len: 1,
        port_cap_flags: 1 << 26, // IBV_PORT_IP_BASED_GIDS
        max_msg_sz: 1 << 31,
        pkey_tbl_len: 1,
        max_vl_num: 1,
        active_width: 2,  // 4X
        active_speed: 32, // EDR: 4X EDR reads as 100 Gb/s
        phys_state: 5,    // LinkUp
        link_layer: IBV_LINK_LAYER_ETHERNET,
        ..ibv_port_attr::default()
    }
}

unsafe extern "C" fn query_port(
    c: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let x = unsafe { ctx(c) }?;
        if port != 1 || attr.is_null() {
            return Err(libc::EINVAL);
        }
        let a = port_attr(x);
        let n = len.min(size_of::<ibv_port_attr>());
        // SAFETY: the caller passes `len` writable bytes; `a` is a distinct value.
        unsafe { ptr::copy_nonoverlapping(ptr::from_ref(&a).cast::<u8>(), attr.cast(), n) };
        Ok(())
    })
}

/// The exported `ibv_query_port` writes the older, shorter structure (up to
/// `link_layer`), which is what binaries that call it by symbol pass.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    c: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { query_port(c, port, attr, offset_of!(ibv_port_attr, link_layer) + 1) }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    c: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    guard(-1, || {
        // SAFETY: per the C API.
        let Ok(x) = (unsafe { ctx(c) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if port != 1 || index != 0 || gid.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller passes a writable GID.
        unsafe { gid.write(x.gid) };
        0
    })
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    c: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let x = unsafe { ctx(c) }?;
        if flags != 0 || entry.is_null() || entry_size < size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        if port != 1 || index != 0 {
            return Err(libc::ENODATA);
        }
        let e = ibv_gid_entry {
            gid: x.gid,
            gid_index: 0,
            port_num: 1,
            gid_type: IBV_GID_TYPE_ROCE_V2,
            ndev_ifindex: 1, // lo
        };
        // SAFETY: the caller passes a writable entry.
        unsafe { entry.write(e) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    c: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    if max == 0 {
        return 0;
    }
    // SAFETY: forwarded contract (one entry).
    match unsafe { _ibv_query_gid_ex(c, 1, 0, entries, flags, entry_size) } {
        0 => 1,
        e => -(e as isize),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    c: *mut ibv_context,
    port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    guard(-1, || {
        // SAFETY: per the C API.
        if unsafe { ctx(c) }.is_err() || port != 1 || index != 0 || ty.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller passes a writable int.
        unsafe { ty.write(IBV_GID_TYPE_SYSFS_ROCE_V2) };
        0
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    c: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard(-1, || {
        // SAFETY: per the C API.
        if unsafe { ctx(c) }.is_err() || port != 1 || index != 0 || pkey.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller passes a writable u16.
        unsafe { pkey.write(weft_wire::roce::bth::DEFAULT_PKEY.to_be()) };
        0
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(c: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    guard(-1, || {
        // SAFETY: per the C API.
        let ok = unsafe { ctx(c) }.is_ok() && port == 1;
        if ok && u16::from_be(pkey) == weft_wire::roce::bth::DEFAULT_PKEY {
            0
        } else {
            set_errno(libc::EINVAL);
            -1
        }
    })
}

// ---------------------------------------------------------------------------------
// Protection domains and memory regions

#[repr(C)]
struct Pd {
    c: ibv_pd,
    magic: u64,
    pd: ProtectionDomain,
    users: AtomicU32,
}

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(c: *mut ibv_context) -> *mut ibv_pd {
    ptr_call(|| {
        // SAFETY: per the C API.
        let x = unsafe { ctx(c) }?;
        let pd = x.ctx.alloc_pd();
        x.objects.fetch_add(1, Ordering::Relaxed);
        let b = Box::new(Pd {
            c: ibv_pd {
                context: c,
                handle: 0,
            },
            magic: MAGIC_PD,
            pd,
            users: AtomicU32::new(0),
        });
        Ok(Box::into_raw(b).cast::<ibv_pd>())
    })
}

/// # Safety
/// `p` is a context's object, just accepted by `obj`.
unsafe fn release_ctx(c: *mut ibv_context) {
    // SAFETY: per the contract.
    if let Ok(x) = unsafe { ctx(c) } {
        x.objects.fetch_sub(1, Ordering::Relaxed);
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(p: *mut ibv_pd) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let pd = unsafe { obj::<Pd>(p.cast()) }?;
        if pd.users.load(Ordering::Acquire) != 0 {
            return Err(libc::EBUSY);
        }
        // SAFETY: the context pointer the PD was made from.
        unsafe { release_ctx(pd.c.context) };
        // SAFETY: a live boxed Pd, destroyed by its owner.
        unsafe { free(ptr::from_ref(pd), |p| p.magic = 0) };
        Ok(())
    })
}

#[repr(C)]
struct Mr {
    c: ibv_mr,
    magic: u64,
    mr: MemoryRegion,
    pd: *const Pd,
}

/// A memory region's access flags: remote write and atomic rights need local write
/// (the ibverbs rule for `ibv_reg_mr`).
fn access_of(flags: c_int) -> Result<Access, c_int> {
    let remote_w = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    if flags & remote_w != 0 && flags & IBV_ACCESS_LOCAL_WRITE == 0 {
        return Err(libc::EINVAL);
    }
    Ok(access_bits(flags))
}

/// The rights of access flags, without the memory-region rule (a QP's
/// `qp_access_flags` may grant remote write alone).
fn access_bits(flags: c_int) -> Access {
    let mut a = Access::NONE;
    for (bit, acc) in [
        (IBV_ACCESS_LOCAL_WRITE, Access::LOCAL_WRITE),
        (IBV_ACCESS_REMOTE_WRITE, Access::REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, Access::REMOTE_READ),
        (IBV_ACCESS_REMOTE_ATOMIC, Access::REMOTE_ATOMIC),
    ] {
        if flags & bit != 0 {
            a = a | acc;
        }
    }
    a
}

fn reg(p: *mut ibv_pd, addr: *mut c_void, len: usize, iova: u64, flags: c_int) -> *mut ibv_mr {
    ptr_call(|| {
        // SAFETY: per the C API.
        let pd = unsafe { obj::<Pd>(p.cast()) }?;
        if (addr.is_null() && len != 0) || iova != addr as u64 {
            // weft's virtual addresses are the process's own (no zero-based regions).
            return Err(if iova != addr as u64 {
                libc::EOPNOTSUPP
            } else {
                libc::EINVAL
            });
        }
        let access = access_of(flags)?;
        // SAFETY: `ibv_reg_mr`'s contract: the memory stays valid and unmoved until
        // `ibv_dereg_mr`, which drops the region (deregistering it first).
        let mr = unsafe { pd.pd.register_raw(addr.cast(), len, access) };
        pd.users.fetch_add(1, Ordering::AcqRel);
        let b = Box::new(Mr {
            c: ibv_mr {
                context: pd.c.context,
                pd: p,
                addr,
                length: len,
                handle: mr.lkey(),
                lkey: mr.lkey(),
                rkey: mr.rkey(),
            },
            magic: MAGIC_MR,
            mr,
            pd: ptr::from_ref(pd),
        });
        Ok(Box::into_raw(b).cast::<ibv_mr>())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    p: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut ibv_mr {
    reg(p, addr, len, addr as u64, access)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    p: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    reg(p, addr, len, iova, access)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    p: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    // Optional access flags (IBV_ACCESS_OPTIONAL_RANGE, bits 20..29) may be ignored.
    reg(p, addr, len, iova, (access & 0x000f_ffff) as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(m: *mut ibv_mr) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let mr = unsafe { obj::<Mr>(m.cast()) }?;
        // SAFETY: the PD outlives its regions (dealloc refuses while users remain).
        unsafe { (*mr.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: a live boxed Mr, destroyed by its owner.
        unsafe { free(ptr::from_ref(mr), |m| m.magic = 0) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------
// Completion channels and queues

#[repr(C)]
struct Channel {
    c: ibv_comp_channel,
    magic: u64,
    ch: CompletionChannel,
    /// CQ id → the C CQ, for `ibv_get_cq_event`.
    cqs: Mutex<HashMap<u32, usize>>,
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(c: *mut ibv_context) -> *mut ibv_comp_channel {
    ptr_call(|| {
        // SAFETY: per the C API.
        let x = unsafe { ctx(c) }?;
        let ch = CompletionChannel::new(&x.ctx).map_err(|e| errno_of(&e))?;
        use std::os::fd::AsFd;
        let fd = ch.as_fd().as_raw_fd();
        // A channel's descriptor starts blocking, as rdma-core's does: a program makes
        // `ibv_get_cq_event` non-blocking by setting O_NONBLOCK on it. weft reads the
        // eventfd only after a poll said it is readable (`ChannelInner::settle_if_empty`), so
        // a blocking descriptor never blocks a read.
        // SAFETY: fcntl on the descriptor the channel owns.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) < 0 {
                return Err(*libc::__errno_location());
            }
        }
        x.objects.fetch_add(1, Ordering::Relaxed);
        let b = Box::new(Channel {
            c: ibv_comp_channel {
                context: c,
                fd,
                refcnt: 0,
            },
            magic: MAGIC_CH,
            ch,
            cqs: Mutex::new(HashMap::new()),
        });
        Ok(Box::into_raw(b).cast::<ibv_comp_channel>())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let chan = unsafe { obj::<Channel>(ch.cast()) }?;
        if !lock(&chan.cqs).is_empty() {
            return Err(libc::EBUSY);
        }
        // SAFETY: the context the channel was made from.
        unsafe { release_ctx(chan.c.context) };
        // SAFETY: a live boxed Channel, destroyed by its owner.
        unsafe { free(ptr::from_ref(chan), |c| c.magic = 0) };
        Ok(())
    })
}

struct CqState {
    cq: CompletionQueue,
    buf: Vec<Completion>,
    /// The completion `ibv_start_poll`/`ibv_next_poll` made current (extended CQs).
    cur: Option<Completion>,
}

/// A completion queue. Its C part is an `ibv_cq_ex`, whose first part is the
/// `ibv_cq`, so every CQ serves both `ibv_poll_cq` and the extended polling API.
#[repr(C)]
struct Cq {
    c: ibv_cq_ex,
    magic: u64,
    st: Mutex<CqState>,
    id: u32,
    chan: *const Channel,
    users: AtomicU32,
    /// Held from `ibv_start_poll` to `ibv_end_poll`.
    polling: Owner,
    /// Events `ibv_get_cq_event` returned for this CQ (changed under the channel's
    /// `cqs` lock); `ibv_destroy_cq` refuses while some are not acknowledged.
    delivered: AtomicU64,
}

// SAFETY: `chan` is only read to reach the channel's own mutex-protected map.
unsafe impl Sync for Cq {}

fn make_cq(
    c: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> Result<*mut Cq, c_int> {
    // SAFETY: per the C API.
    let x = unsafe { ctx(c) }?;
    if !(1..=MAX_CQE).contains(&cqe) || comp_vector != 0 {
        return Err(libc::EINVAL);
    }
    let chan = if channel.is_null() {
        None
    } else {
        // SAFETY: per the C API.
        Some(unsafe { obj::<Channel>(channel.cast()) }?)
    };
    let cq = CompletionQueue::new(&x.ctx, cqe as usize, chan.map(|c| &c.ch));
    let id = cq.id();
    x.objects.fetch_add(1, Ordering::Relaxed);
    let b = Box::new(Cq {
        c: ibv_cq_ex {
            cq: ibv_cq {
                context: c,
                channel,
                cq_context,
                handle: id,
                cqe,
                // SAFETY: zeroed pthread objects are their static initializers (glibc).
                mutex: unsafe { std::mem::zeroed() },
                // SAFETY: as above.
                cond: unsafe { std::mem::zeroed() },
                comp_events_completed: 0,
                async_events_completed: 0,
            },
            comp_mask: 0,
            status: 0,
            wr_id: 0,
            start_poll: Some(cq_start_poll),
            next_poll: Some(cq_next_poll),
            end_poll: Some(cq_end_poll),
            read_opcode: Some(cq_read_opcode),
            read_vendor_err: Some(cq_read_vendor_err),
            read_byte_len: Some(cq_read_byte_len),
            read_imm_data: Some(cq_read_imm_data),
            read_qp_num: Some(cq_read_qp_num),
            read_src_qp: Some(cq_read_src_qp),
            read_wc_flags: Some(cq_read_wc_flags),
            read_slid: Some(cq_read_slid),
            read_sl: Some(cq_read_sl),
            read_dlid_path_bits: Some(cq_read_dlid_path_bits),
            _unsupported: [0; 5],
        },
        magic: MAGIC_CQ,
        st: Mutex::new(CqState {
            cq,
            buf: Vec::with_capacity(64),
            cur: None,
        }),
        id,
        chan: chan.map_or(ptr::null(), ptr::from_ref),
        users: AtomicU32::new(0),
        polling: Owner::default(),
        delivered: AtomicU64::new(0),
    });
    let p = Box::into_raw(b);
    if let Some(ch) = chan {
        lock(&ch.cqs).insert(id, p as usize);
    }
    Ok(p)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    c: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    ptr_call(|| Ok(make_cq(c, cqe, cq_context, channel, comp_vector)?.cast::<ibv_cq>()))
}

/// `verbs_context::create_cq_ex` (`ibv_create_cq_ex`): the standard completion fields
/// only (no timestamps, VLAN, flow tag or tag matching), no parent domain, and of the
/// creation flags only `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (a hint). `flags` and
/// `parent_domain` are read only when `comp_mask` says they are set; an unknown
/// `comp_mask` bit is EINVAL.
unsafe extern "C" fn create_cq_ex(
    c: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    ptr_call(|| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the fields before `comp_mask` are always set (the C contract).
        let (cqe, cq_context, channel, vector, wc_flags, mask) = unsafe {
            (
                ptr::addr_of!((*attr).cqe).read(),
                ptr::addr_of!((*attr).cq_context).read(),
                ptr::addr_of!((*attr).channel).read(),
                ptr::addr_of!((*attr).comp_vector).read(),
                ptr::addr_of!((*attr).wc_flags).read(),
                ptr::addr_of!((*attr).comp_mask).read(),
            )
        };
        if mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
            return Err(libc::EINVAL);
        }
        if wc_flags & !IBV_WC_STANDARD_FLAGS != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
            // SAFETY: the mask says `flags` is set.
            let flags = unsafe { ptr::addr_of!((*attr).flags).read() };
            if flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0 {
                return Err(libc::EOPNOTSUPP);
            }
        }
        if mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 {
            // SAFETY: the mask says `parent_domain` is set.
            let pd = unsafe { ptr::addr_of!((*attr).parent_domain).read() };
            if !pd.is_null() {
                return Err(libc::EOPNOTSUPP);
            }
        }
        let cqe = c_int::try_from(cqe).map_err(|_| libc::EINVAL)?;
        let vector = c_int::try_from(vector).map_err(|_| libc::EINVAL)?;
        Ok(make_cq(c, cqe, cq_context, channel, vector)?.cast::<ibv_cq_ex>())
    })
}

/// Take the next completion as the current one of an extended CQ.
///
/// # Safety
/// `cq` is the program's CQ handle.
unsafe fn cq_advance(cq: *mut ibv_cq_ex) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: per the contract.
        let Ok(q) = (unsafe { obj::<Cq>(cq.cast()) }) else {
            return libc::EINVAL;
        };
        let mut st = lock(&q.st);
        let CqState {
            cq: queue,
            buf,
            cur,
        } = &mut *st;
        buf.clear();
        if queue.poll(buf, 1) == 0 {
            *cur = None;
            return libc::ENOENT;
        }
        let c = buf[0];
        *cur = Some(c);
        // SAFETY: the CQ is live; `status` and `wr_id` are the program's to read.
        unsafe {
            ptr::addr_of_mut!((*cq).status).write(wc_status(c.status));
            ptr::addr_of_mut!((*cq).wr_id).write(c.wr_id);
        }
        0
    })
}

unsafe extern "C" fn cq_start_poll(cq: *mut ibv_cq_ex, attr: *mut c_void) -> c_int {
    let _ = attr; // comp_mask must be 0; nothing in it weft reads
    guard(libc::EIO, || {
        // SAFETY: per the C API.
        let Ok(q) = (unsafe { obj::<Cq>(cq.cast()) }) else {
            return libc::EINVAL;
        };
        q.polling.acquire();
        // SAFETY: forwarded contract.
        let r = unsafe { cq_advance(cq) };
        if r != 0 {
            // No completion: the program must not call `ibv_end_poll` (verbs.h).
            q.polling.release();
        }
        r
    })
}

unsafe extern "C" fn cq_next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { cq_advance(cq) }
}

unsafe extern "C" fn cq_end_poll(cq: *mut ibv_cq_ex) {
    guard((), || {
        // SAFETY: per the C API.
        if let Ok(q) = unsafe { obj::<Cq>(cq.cast()) } {
            lock(&q.st).cur = None;
            q.polling.release();
        }
    })
}

/// A field of the current completion (0 when there is none).
///
/// # Safety
/// `cq` is the program's CQ handle.
unsafe fn cq_read<T: Default>(cq: *mut ibv_cq_ex, f: impl FnOnce(&ibv_wc) -> T) -> T {
    guard(T::default(), || {
        // SAFETY: per the contract.
        let Ok(q) = (unsafe { obj::<Cq>(cq.cast()) }) else {
            return T::default();
        };
        let cur = lock(&q.st).cur;
        cur.map(|c| f(&to_wc(&c))).unwrap_or_default()
    })
}

macro_rules! cq_readers {
    ($($name:ident -> $t:ty = |$w:ident| $e:expr;)*) => {$(
        unsafe extern "C" fn $name(cq: *mut ibv_cq_ex) -> $t {
            // SAFETY: forwarded contract.
            unsafe { cq_read(cq, |$w| $e) }
        }
    )*};
}

cq_readers! {
    cq_read_opcode -> c_int = |w| w.opcode;
    cq_read_vendor_err -> u32 = |w| w.vendor_err;
    cq_read_byte_len -> u32 = |w| w.byte_len;
    cq_read_imm_data -> u32 = |w| w.imm_data;
    cq_read_qp_num -> u32 = |w| w.qp_num;
    cq_read_src_qp -> u32 = |w| w.src_qp;
    cq_read_wc_flags -> c_uint = |w| w.wc_flags;
    cq_read_slid -> u32 = |w| u32::from(w.slid);
    cq_read_sl -> u8 = |w| w.sl;
    cq_read_dlid_path_bits -> u8 = |w| w.dlid_path_bits;
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Cq>(cq.cast()) }?;
        if q.users.load(Ordering::Acquire) != 0 {
            return Err(libc::EBUSY);
        }
        if !q.chan.is_null() {
            // SAFETY: a channel outlives its CQs (destroy refuses while it has some).
            let mut cqs = lock(unsafe { &(*q.chan).cqs });
            // Under the map lock no event of this CQ is being delivered. rdma-core
            // waits here until every event is acknowledged; weft answers EBUSY.
            if lock(&q.st).cq.events_acked() < q.delivered.load(Ordering::Acquire) {
                return Err(libc::EBUSY);
            }
            cqs.remove(&q.id);
        }
        // SAFETY: the context the CQ was made from.
        unsafe { release_ctx(q.c.cq.context) };
        // SAFETY: a live boxed Cq, destroyed by its owner.
        unsafe { free(ptr::from_ref(q), |q| q.magic = 0) };
        Ok(())
    })
}

fn wc_status(s: WcStatus) -> c_int {
    match s {
        WcStatus::Success => IBV_WC_SUCCESS,
        WcStatus::LocLenErr => IBV_WC_LOC_LEN_ERR,
        WcStatus::LocQpOpErr => IBV_WC_LOC_QP_OP_ERR,
        WcStatus::LocProtErr => IBV_WC_LOC_PROT_ERR,
        WcStatus::WrFlushErr => IBV_WC_WR_FLUSH_ERR,
        WcStatus::MwBindErr => IBV_WC_MW_BIND_ERR,
        WcStatus::BadRespErr => IBV_WC_BAD_RESP_ERR,
        WcStatus::LocAccessErr => IBV_WC_LOC_ACCESS_ERR,
        WcStatus::RemInvReqErr => IBV_WC_REM_INV_REQ_ERR,
        WcStatus::RemAccessErr => IBV_WC_REM_ACCESS_ERR,
        WcStatus::RemOpErr => IBV_WC_REM_OP_ERR,
        WcStatus::RetryExcErr => IBV_WC_RETRY_EXC_ERR,
        WcStatus::RnrRetryExcErr => IBV_WC_RNR_RETRY_EXC_ERR,
        WcStatus::RemInvRdReqErr => IBV_WC_REM_INV_RD_REQ_ERR,
        WcStatus::RemAbortErr => IBV_WC_REM_ABORT_ERR,
        WcStatus::GeneralErr => IBV_WC_GENERAL_ERR,
    }
}

fn wc_opcode(o: WcOpcode) -> c_int {
    match o {
        WcOpcode::Send => IBV_WC_SEND,
        WcOpcode::RdmaWrite => IBV_WC_RDMA_WRITE,
        WcOpcode::RdmaRead => IBV_WC_RDMA_READ,
        WcOpcode::CompSwap => IBV_WC_COMP_SWAP,
        WcOpcode::FetchAdd => IBV_WC_FETCH_ADD,
        WcOpcode::Recv => IBV_WC_RECV,
        WcOpcode::RecvRdmaWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
    }
}

pub(crate) fn to_wc(c: &Completion) -> ibv_wc {
    let mut flags = 0;
    if c.imm.is_some() {
        flags |= IBV_WC_WITH_IMM;
    }
    if c.src_path.is_some() {
        flags |= IBV_WC_GRH;
    }
    ibv_wc {
        wr_id: c.wr_id,
        status: wc_status(c.status),
        opcode: wc_opcode(c.opcode),
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: c.imm.map_or(0, u32::to_be),
        qp_num: c.qpn,
        src_qp: c.src_qp.unwrap_or(0),
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl: roce_packet_type(c),
        dlid_path_bits: 0,
    }
}

/// A received datagram's network header type in `sl`, as RoCE devices report it for
/// UD (mlx5's convention, which UCX relies on to find the destination GID in the GRH
/// and filter by it): 2 = IPv4, 1 = IPv6 (`IBV_WC_GRH` says a GRH is present).
fn roce_packet_type(c: &Completion) -> u8 {
    match c.src_path.map(|p| p.ips) {
        Some(weft_wire::roce::IpPair::V4 { .. }) => 2,
        Some(weft_wire::roce::IpPair::V6 { .. }) => 1,
        None => 0,
    }
}

unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    guard(-1, || {
        // SAFETY: per the C API.
        let Ok(q) = (unsafe { obj::<Cq>(cq.cast()) }) else {
            return -1;
        };
        if n < 0 || (n > 0 && wc.is_null()) {
            return -1;
        }
        let mut st = lock(&q.st);
        let CqState { cq, buf, .. } = &mut *st;
        buf.clear();
        let got = cq.poll(buf, n as usize);
        for (i, c) in buf.iter().enumerate() {
            // SAFETY: the caller passes room for `n` entries and `got <= n`.
            unsafe { wc.add(i).write(to_wc(c)) };
        }
        got as c_int
    })
}

unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // Solicited-only arming is treated as arming for every completion (a superset:
    // the program wakes more often, never misses one).
    let _ = solicited_only;
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Cq>(cq.cast()) }?;
        if q.chan.is_null() {
            return Err(libc::EINVAL);
        }
        lock(&q.st).cq.req_notify();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq_out: *mut *mut ibv_cq,
    ctx_out: *mut *mut c_void,
) -> c_int {
    guard(-1, || {
        // SAFETY: per the C API.
        let Ok(chan) = (unsafe { obj::<Channel>(ch.cast()) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if cq_out.is_null() || ctx_out.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: fcntl on the channel's own descriptor.
        let fl = unsafe { libc::fcntl(chan.c.fd, libc::F_GETFL) };
        let nonblocking = fl >= 0 && fl & libc::O_NONBLOCK != 0;
        loop {
            let wait = if nonblocking {
                Duration::ZERO
            } else {
                Duration::from_secs(3600)
            };
            let id = match chan.ch.get_cq_event(wait) {
                Ok(id) => id,
                Err(Error::Timeout) if !nonblocking => continue,
                Err(Error::Timeout) => {
                    set_errno(libc::EAGAIN);
                    return -1;
                }
                Err(e) => {
                    set_errno(errno_of(&e));
                    return -1;
                }
            };
            let cqs = lock(&chan.cqs);
            let Some(&p) = cqs.get(&id) else {
                // The CQ was destroyed after its event fired: not an event to
                // report; wait for the next one.
                continue;
            };
            let p = p as *const Cq;
            // SAFETY: `p` is in the map and the map lock is held, so the CQ is live
            // (destroy removes it under this lock); `cq_out`/`ctx_out` are writable.
            unsafe {
                (*p).delivered.fetch_add(1, Ordering::AcqRel);
                *cq_out = p.cast_mut().cast();
                *ctx_out = (*p).c.cq.cq_context;
            }
            return 0;
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, n: c_uint) {
    guard((), || {
        // SAFETY: per the C API.
        if let Ok(q) = unsafe { obj::<Cq>(cq.cast()) } {
            lock(&q.st).cq.ack_events(n);
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    let _ = (cq, cqe);
    libc::EOPNOTSUPP
}

// ---------------------------------------------------------------------------------
// Queue pairs

/// Work requests between `ibv_wr_start` and `ibv_wr_complete`, and the first error a
/// builder call met (reported by `ibv_wr_complete`).
#[derive(Default)]
struct Building {
    wrs: Vec<SendWr>,
    error: Option<c_int>,
}

/// A queue pair. Its C part is an `ibv_qp_ex`, whose first part is the `ibv_qp`, so
/// every QP takes both `ibv_post_send` and the `ibv_wr_*` builder.
#[repr(C)]
struct Qp {
    c: ibv_qp_ex,
    magic: u64,
    st: Mutex<QueuePair>,
    building: Mutex<Building>,
    /// Held from `ibv_wr_start` to `ibv_wr_complete` or `ibv_wr_abort`.
    builder: Owner,
    bounce: OnceLock<Mutex<Bounce>>,
    qp_type: QpType,
    sq_sig_all: bool,
    cap: ibv_qp_cap,
    pd: *const Pd,
    send_cq: *const Cq,
    recv_cq: *const Cq,
    srq: *const Srq,
    ctx: Context,
}

// SAFETY: the raw pointers name objects whose destroy refuses while this QP uses them;
// they are only used to reach those objects' atomics.
unsafe impl Sync for Qp {}

/// The fields of `ibv_qp_init_attr` (and of `ibv_qp_init_attr_ex`, which repeats them).
struct QpInit<'a> {
    qp_context: *mut c_void,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    srq: *mut ibv_srq,
    cap: &'a mut ibv_qp_cap,
    qp_type: c_int,
    sq_sig_all: c_int,
}

fn make_qp(p: *mut ibv_pd, ia: QpInit<'_>) -> Result<*mut ibv_qp, c_int> {
    // SAFETY: per the C API.
    let pd = unsafe { obj::<Pd>(p.cast()) }?;
    let qp_type = match ia.qp_type {
        IBV_QPT_RC => QpType::Rc,
        IBV_QPT_UC => QpType::Uc,
        IBV_QPT_UD => QpType::Ud,
        _ => return Err(libc::EOPNOTSUPP),
    };
    // SAFETY: per the C API.
    let scq = unsafe { obj::<Cq>(ia.send_cq.cast()) }?;
    // SAFETY: per the C API.
    let rcq = unsafe { obj::<Cq>(ia.recv_cq.cast()) }?;
    let srq = if ia.srq.is_null() {
        None
    } else {
        // SAFETY: per the C API.
        Some(unsafe { obj::<Srq>(ia.srq.cast()) }?)
    };
    let cap = ia.cap;
    if cap.max_send_wr > MAX_QP_WR
        || cap.max_recv_wr > MAX_QP_WR
        || cap.max_send_sge > MAX_SGE
        || cap.max_recv_sge > MAX_SGE
        || cap.max_inline_data > MAX_INLINE
    {
        return Err(libc::EINVAL);
    }
    let attr = QpInitAttr {
        qp_type,
        max_send_wr: cap.max_send_wr.max(1) as usize,
        max_recv_wr: cap.max_recv_wr.max(1) as usize,
        max_sge: MAX_SGE as usize,
        max_inline_data: MAX_INLINE as usize,
    };
    // Lock order (see `Srq`): CQs in address order, then the SRQ. Two threads
    // creating QPs with swapped send and receive CQs take the same CQ first.
    let qp = {
        let (lo, hi) = if ptr::from_ref(scq) <= ptr::from_ref(rcq) {
            (scq, rcq)
        } else {
            (rcq, scq)
        };
        let first = lock(&lo.st);
        let second = (!ptr::eq(lo, hi)).then(|| lock(&hi.st));
        let other = second.as_deref().unwrap_or(&first);
        let (s, r) = if ptr::eq(lo, scq) {
            (&*first, other)
        } else {
            (other, &*first)
        };
        let shared = srq.map(|s| lock(&s.srq));
        pd.pd.create_qp(&s.cq, &r.cq, shared.as_deref(), attr)
    };
    let qp = qp.map_err(|e| errno_of(&e))?;
    // What the QP really has (rdma-core reports the actual capacities back).
    cap.max_send_sge = MAX_SGE;
    cap.max_recv_sge = MAX_SGE;
    cap.max_inline_data = MAX_INLINE;
    let cap = *cap;
    pd.users.fetch_add(1, Ordering::AcqRel);
    scq.users.fetch_add(1, Ordering::AcqRel);
    rcq.users.fetch_add(1, Ordering::AcqRel);
    if let Some(s) = srq {
        s.users.fetch_add(1, Ordering::AcqRel);
    }
    let qpn = qp.qp_num();
    let b = Box::new(Qp {
        c: ibv_qp_ex {
            qp_base: ibv_qp {
                context: pd.c.context,
                qp_context: ia.qp_context,
                pd: p,
                send_cq: ia.send_cq,
                recv_cq: ia.recv_cq,
                srq: ia.srq,
                handle: qpn,
                qp_num: qpn,
                state: IBV_QPS_RESET,
                qp_type: ia.qp_type,
                // SAFETY: zeroed pthread objects are their static initializers (glibc).
                mutex: unsafe { std::mem::zeroed() },
                // SAFETY: as above.
                cond: unsafe { std::mem::zeroed() },
                events_completed: 0,
            },
            comp_mask: 0,
            wr_id: 0,
            wr_flags: 0,
            wr_atomic_cmp_swp: Some(wr_atomic_cmp_swp),
            wr_atomic_fetch_add: Some(wr_atomic_fetch_add),
            wr_bind_mw: 0,
            wr_local_inv: 0,
            wr_rdma_read: Some(wr_rdma_read),
            wr_rdma_write: Some(wr_rdma_write),
            wr_rdma_write_imm: Some(wr_rdma_write_imm),
            wr_send: Some(wr_send),
            wr_send_imm: Some(wr_send_imm),
            wr_send_inv: 0,
            wr_send_tso: 0,
            wr_set_ud_addr: Some(wr_set_ud_addr),
            wr_set_xrc_srqn: 0,
            wr_set_inline_data: Some(wr_set_inline_data),
            wr_set_inline_data_list: Some(wr_set_inline_data_list),
            wr_set_sge: Some(wr_set_sge),
            wr_set_sge_list: Some(wr_set_sge_list),
            wr_start: Some(wr_start),
            wr_complete: Some(wr_complete),
            wr_abort: Some(wr_abort),
            wr_atomic_write: 0,
        },
        magic: MAGIC_QP,
        ctx: pd.pd.context().clone(),
        st: Mutex::new(qp),
        building: Mutex::new(Building::default()),
        builder: Owner::default(),
        bounce: OnceLock::new(),
        qp_type,
        sq_sig_all: ia.sq_sig_all != 0,
        cap,
        pd: ptr::from_ref(pd),
        send_cq: ptr::from_ref(scq),
        recv_cq: ptr::from_ref(rcq),
        srq: srq.map_or(ptr::null(), ptr::from_ref),
    });
    Ok(Box::into_raw(b).cast::<ibv_qp>())
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(p: *mut ibv_pd, init: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    ptr_call(|| {
        if init.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes a readable, writable init attribute.
        let ia = unsafe { &mut *init };
        make_qp(
            p,
            QpInit {
                qp_context: ia.qp_context,
                send_cq: ia.send_cq,
                recv_cq: ia.recv_cq,
                srq: ia.srq,
                cap: &mut ia.cap,
                qp_type: ia.qp_type,
                sq_sig_all: ia.sq_sig_all,
            },
        )
    })
}

/// The operations the `ibv_wr_*` builder offers.
const SEND_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

/// `verbs_context::create_qp_ex` (`ibv_create_qp_ex`): a PD, and optionally the send
/// operations of the `ibv_wr_*` builder; no XRC, RSS, TSO or create flags.
unsafe extern "C" fn create_qp_ex(
    c: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    ptr_call(|| {
        // SAFETY: per the C API.
        let _ = unsafe { ctx(c) }?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a readable, writable attribute.
        let a = unsafe { &mut *attr };
        if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
            return Err(libc::EINVAL);
        }
        if a.comp_mask & !(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 && a.send_ops_flags & !SEND_OPS != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        make_qp(
            a.pd,
            QpInit {
                qp_context: a.qp_context,
                send_cq: a.send_cq,
                recv_cq: a.recv_cq,
                srq: a.srq,
                cap: &mut a.cap,
                qp_type: a.qp_type,
                sq_sig_all: a.sq_sig_all,
            },
        )
    })
}

/// Run `f` on the builder of the QP behind `qp` (an error is kept for
/// `ibv_wr_complete`).
///
/// # Safety
/// `qp` is the program's QP handle.
unsafe fn build(qp: *mut ibv_qp_ex, f: impl FnOnce(&Qp, &mut Building) -> Result<(), c_int>) {
    guard((), || {
        // SAFETY: per the contract.
        let Ok(q) = (unsafe { obj::<Qp>(qp.cast()) }) else {
            return;
        };
        let mut b = lock(&q.building);
        if b.error.is_none() {
            if let Err(e) = f(q, &mut b) {
                b.error = Some(e);
            }
        }
    })
}

/// Start a new work request of operation `op` with the QP's current `wr_id` and
/// `wr_flags`.
///
/// # Safety
/// `qp` is the program's QP handle.
unsafe fn build_op(qp: *mut ibv_qp_ex, op: WrOp) {
    // SAFETY: forwarded contract; `wr_id`/`wr_flags` are the program's fields.
    let (id, flags) = unsafe { ((*qp).wr_id, (*qp).wr_flags) };
    // SAFETY: forwarded contract.
    unsafe {
        build(qp, |q, b| {
            let mut wr = SendWr::new(id, op, SgList::new());
            wr.signaled = q.sq_sig_all || flags & IBV_SEND_SIGNALED != 0;
            wr.inline = flags & IBV_SEND_INLINE != 0;
            wr.fence = flags & IBV_SEND_FENCE != 0;
            wr.solicited = flags & IBV_SEND_SOLICITED != 0;
            b.wrs.push(wr);
            Ok(())
        })
    }
}

/// Change the last work request started (EINVAL when there is none).
///
/// # Safety
/// `qp` is the program's QP handle.
unsafe fn build_last(qp: *mut ibv_qp_ex, f: impl FnOnce(&Qp, &mut SendWr) -> Result<(), c_int>) {
    // SAFETY: forwarded contract.
    unsafe {
        build(qp, |q, b| match b.wrs.last_mut() {
            Some(w) => f(q, w),
            None => Err(libc::EINVAL),
        })
    }
}

unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    guard((), || {
        // SAFETY: per the C API.
        if let Ok(q) = unsafe { obj::<Qp>(qp.cast()) } {
            q.builder.acquire();
            *lock(&q.building) = Building::default();
        }
    })
}

unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    guard((), || {
        // SAFETY: per the C API.
        if let Ok(q) = unsafe { obj::<Qp>(qp.cast()) } {
            *lock(&q.building) = Building::default();
            q.builder.release();
        }
    })
}

unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Qp>(qp.cast()) }?;
        let b = std::mem::take(&mut *lock(&q.building));
        let post = || {
            if let Some(e) = b.error {
                return Err(e);
            }
            if b.wrs.iter().filter(|w| w.inline).count() > BOUNCE_SLOTS {
                // Their bounce slots were reused before the batch could be gathered.
                return Err(libc::ENOMEM);
            }
            lock(&q.st).post_send(b.wrs).map_err(|e| errno_of(&e))
        };
        let r = post();
        // Posted (its inline bytes gathered): another thread may build the next batch.
        q.builder.release();
        r
    })
}

unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    // SAFETY: forwarded contract.
    unsafe { build_op(qp, WrOp::Send { imm: None }) }
}

unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm: u32) {
    let imm = Some(u32::from_be(imm));
    // SAFETY: forwarded contract.
    unsafe { build_op(qp, WrOp::Send { imm }) }
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    let remote = RemoteAddr { addr, rkey };
    // SAFETY: forwarded contract.
    unsafe { build_op(qp, WrOp::Write { remote, imm: None }) }
}

unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    let remote = RemoteAddr { addr, rkey };
    let imm = Some(u32::from_be(imm));
    // SAFETY: forwarded contract.
    unsafe { build_op(qp, WrOp::Write { remote, imm }) }
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    let remote = RemoteAddr { addr, rkey };
    // SAFETY: forwarded contract.
    unsafe { build_op(qp, WrOp::Read { remote }) }
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    let remote = RemoteAddr { addr, rkey };
    // SAFETY: forwarded contract.
    unsafe {
        build_op(
            qp,
            WrOp::CompareSwap {
                remote,
                compare,
                swap,
            },
        )
    }
}

unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    let remote = RemoteAddr { addr, rkey };
    // SAFETY: forwarded contract.
    unsafe { build_op(qp, WrOp::FetchAdd { remote, add }) }
}

unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, len: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        build_last(qp, |_, w| {
            w.sg_list = SgList::from(Sge { addr, len, lkey });
            // Data by SGE is gathered from registered memory, not inline (the
            // IBV_SEND_INLINE of `wr_flags` applies to `wr_set_inline_data*`).
            w.inline = false;
            Ok(())
        })
    }
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    let set = |_: &Qp, w: &mut SendWr| {
        let n = c_int::try_from(n).map_err(|_| libc::EINVAL)?;
        // SAFETY: the program's array of `n` SGEs.
        w.sg_list = unsafe { sg_list(list, n) }?;
        w.inline = false; // as in `wr_set_sge`
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { build_last(qp, set) }
}

/// Inline data by address: copied into a bounce slot now (see [`bounce`]).
unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, len: usize) {
    let set = |q: &Qp, w: &mut SendWr| {
        // SAFETY: `len` readable bytes at `addr` (the C contract).
        w.sg_list = unsafe { bounce(q, &[(addr as u64, len)]) }?;
        w.inline = true;
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { build_last(qp, set) }
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    n: usize,
    list: *const ibv_data_buf,
) {
    let set = |q: &Qp, w: &mut SendWr| {
        if n > MAX_SGE as usize || (n > 0 && list.is_null()) {
            return Err(libc::EINVAL);
        }
        let mut parts = [(0u64, 0usize); MAX_SGE as usize];
        for (i, p) in parts.iter_mut().enumerate().take(n) {
            // SAFETY: the program's array of `n` buffers.
            let b = unsafe { list.add(i).read() };
            *p = (b.addr as u64, b.length);
        }
        // SAFETY: each buffer names readable bytes (the C contract).
        w.sg_list = unsafe { bounce(q, &parts[..n]) }?;
        w.inline = true;
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { build_last(qp, set) }
}

unsafe extern "C" fn wr_set_ud_addr(qp: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    let set = |q: &Qp, w: &mut SendWr| {
        if q.qp_type != QpType::Ud {
            return Err(libc::EINVAL);
        }
        // SAFETY: per the C API the handle is an address handle.
        let ah = unsafe { obj::<Ah>(ah.cast()) }?;
        w.ud = Some(ah.ah.dest(qpn, qkey));
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { build_last(qp, set) }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Qp>(qp.cast()) }?;
        // SAFETY: the objects outlive the QP (their destroy refuses while it exists).
        unsafe {
            (*q.pd).users.fetch_sub(1, Ordering::AcqRel);
            (*q.send_cq).users.fetch_sub(1, Ordering::AcqRel);
            (*q.recv_cq).users.fetch_sub(1, Ordering::AcqRel);
            if !q.srq.is_null() {
                (*q.srq).users.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // SAFETY: a live boxed Qp, destroyed by its owner.
        unsafe { free(ptr::from_ref(q), |q| q.magic = 0) };
        Ok(())
    })
}

fn state_of(s: c_int) -> Result<QpState, c_int> {
    Ok(match s {
        IBV_QPS_RESET => QpState::Reset,
        IBV_QPS_INIT => QpState::Init,
        IBV_QPS_RTR => QpState::Rtr,
        IBV_QPS_RTS => QpState::Rts,
        IBV_QPS_SQD => QpState::Sqd,
        IBV_QPS_SQE => QpState::Sqe,
        IBV_QPS_ERR => QpState::Err,
        _ => return Err(libc::EINVAL),
    })
}

fn state_enum(s: QpState) -> c_int {
    match s {
        QpState::Reset => IBV_QPS_RESET,
        QpState::Init => IBV_QPS_INIT,
        QpState::Rtr => IBV_QPS_RTR,
        QpState::Rts => IBV_QPS_RTS,
        QpState::Sqd => IBV_QPS_SQD,
        QpState::Sqe => IBV_QPS_SQE,
        QpState::Err => IBV_QPS_ERR,
    }
}

/// `ibv_qp_attr` + mask → weft's `QpAttr`.
fn qp_attr(q: &Qp, a: &ibv_qp_attr, mask: c_int) -> Result<QpAttr, c_int> {
    let has = |m: c_int| mask & m != 0;
    let mut r = QpAttr::default();
    if has(IBV_QP_STATE) {
        r.state = Some(state_of(a.qp_state)?);
    }
    if has(IBV_QP_ALT_PATH) {
        return Err(libc::EINVAL); // no alternate paths (no APM)
    }
    if has(IBV_QP_PORT) && a.port_num != 1 {
        return Err(libc::EINVAL);
    }
    if has(IBV_QP_PKEY_INDEX) {
        if a.pkey_index != 0 {
            return Err(libc::EINVAL);
        }
        r.pkey = Some(weft_wire::roce::bth::DEFAULT_PKEY);
    }
    if has(IBV_QP_ACCESS_FLAGS) {
        r.access = Some(access_bits(a.qp_access_flags as c_int));
    }
    if has(IBV_QP_QKEY) {
        r.qkey = Some(a.qkey);
    }
    if has(IBV_QP_AV) {
        if a.ah_attr.is_global == 0 {
            // A RoCE device routes by GID; a LID-only address names nothing.
            return Err(libc::EINVAL);
        }
        let peer = addr_of(&a.ah_attr.grh.dgid).ok_or(libc::EINVAL)?;
        r.path = Some(q.ctx.path_to(peer).map_err(|e| errno_of(&e))?);
    }
    if has(IBV_QP_PATH_MTU) {
        let m = mtu_of(a.path_mtu).ok_or(libc::EINVAL)?;
        r.path_mtu = Some(m.min(q.ctx.max_mtu()));
    }
    if has(IBV_QP_TIMEOUT) {
        r.timeout = Some(a.timeout);
    }
    if has(IBV_QP_RETRY_CNT) {
        r.retry_cnt = Some(a.retry_cnt);
    }
    if has(IBV_QP_RNR_RETRY) {
        r.rnr_retry = Some(a.rnr_retry);
    }
    if has(IBV_QP_RQ_PSN) {
        r.rq_psn = Some(Psn::new(a.rq_psn & Psn::MASK));
    }
    if has(IBV_QP_SQ_PSN) {
        r.sq_psn = Some(Psn::new(a.sq_psn & Psn::MASK));
    }
    if has(IBV_QP_MAX_QP_RD_ATOMIC) {
        if c_int::from(a.max_rd_atomic) > MAX_RD_ATOM {
            return Err(libc::EINVAL);
        }
        r.max_rd_atomic = Some(a.max_rd_atomic.max(1));
    }
    if has(IBV_QP_MAX_DEST_RD_ATOMIC) {
        if c_int::from(a.max_dest_rd_atomic) > MAX_RD_ATOM {
            return Err(libc::EINVAL);
        }
        r.max_dest_rd_atomic = Some(a.max_dest_rd_atomic.max(1));
    }
    if has(IBV_QP_MIN_RNR_TIMER) {
        r.min_rnr_timer = Some(a.min_rnr_timer);
    }
    if has(IBV_QP_DEST_QPN) {
        r.dest_qpn = Some(a.dest_qp_num);
    }
    if q.qp_type == QpType::Ud && r.state == Some(QpState::Rtr) && r.path_mtu.is_none() {
        // A UD datagram is one packet up to the port's MTU (ibverbs has no UD path
        // MTU attribute); weft's UD QP takes its MTU at RTR.
        r.path_mtu = Some(q.ctx.max_mtu());
    }
    Ok(r)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Qp>(qp.cast()) }?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes a readable attribute.
        let a = unsafe { &*attr };
        let r = qp_attr(q, a, mask)?;
        let mut st = lock(&q.st);
        st.modify(&r).map_err(|e| errno_of(&e))?;
        if let Some(s) = r.state {
            // SAFETY: `qp` is the live QP; the state field is the program's to read.
            unsafe { ptr::addr_of_mut!((*qp).state).write(state_enum(s)) };
        }
        Ok(())
    })
}

fn access_enum(a: Access) -> c_uint {
    let mut f = 0;
    for (acc, bit) in [
        (Access::LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE),
        (Access::REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE),
        (Access::REMOTE_READ, IBV_ACCESS_REMOTE_READ),
        (Access::REMOTE_ATOMIC, IBV_ACCESS_REMOTE_ATOMIC),
    ] {
        if a.contains(acc) {
            f |= bit as c_uint;
        }
    }
    f
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    let _ = mask;
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Qp>(qp.cast()) }?;
        if attr.is_null() || init.is_null() {
            return Err(libc::EINVAL);
        }
        let (state, at) = lock(&q.st).query().ok_or(libc::EINVAL)?;
        let mut a = ibv_qp_attr {
            qp_state: state_enum(state),
            cur_qp_state: state_enum(state),
            path_mtu: mtu_enum(at.path_mtu),
            qkey: at.qkey,
            rq_psn: at.rq_psn.value(),
            sq_psn: at.sq_psn.value(),
            dest_qp_num: at.dest_qpn,
            qp_access_flags: access_enum(at.access),
            cap: q.cap,
            max_rd_atomic: at.max_rd_atomic,
            max_dest_rd_atomic: at.max_dest_rd_atomic,
            min_rnr_timer: at.min_rnr_timer,
            port_num: 1,
            timeout: at.timeout,
            retry_cnt: at.retry_cnt,
            rnr_retry: at.rnr_retry,
            ..ibv_qp_attr::default()
        };
        if let Some(p) = at.path {
            let peer = match p.ips {
                weft_wire::roce::IpPair::V4 { dst, .. } => IpAddr::V4(dst),
                weft_wire::roce::IpPair::V6 { dst, .. } => IpAddr::V6(dst),
            };
            a.ah_attr.is_global = 1;
            a.ah_attr.port_num = 1;
            a.ah_attr.grh.hop_limit = 64;
            a.ah_attr.grh.dgid = gid_of(SocketAddr::new(peer, p.dst_port));
        }
        // SAFETY: the caller passes writable attribute structures; the QP's C part
        // is read for the init attributes it was created with.
        unsafe {
            attr.write(a);
            init.write(ibv_qp_init_attr {
                qp_context: (*qp).qp_context,
                send_cq: (*qp).send_cq,
                recv_cq: (*qp).recv_cq,
                srq: (*qp).srq,
                cap: q.cap,
                qp_type: (*qp).qp_type,
                sq_sig_all: c_int::from(q.sq_sig_all),
            });
        }
        Ok(())
    })
}

/// Inline payloads: rdma-core ignores the lkey of an inline SGE (the bytes are copied
/// at post time from wherever they are), while weft-verbs gathers inline bytes from
/// registered memory only. So weft copies an inline request's bytes into a slot of a
/// small region of the QP's own (`BOUNCE_SLOTS` × `MAX_INLINE` bytes, registered on
/// first use) and posts the request over that slot. weft-verbs gathers an inline
/// payload into its queue before it takes the next request from the list, so a slot
/// is free again once its request is posted; the slots rotate, and a builder batch
/// (`ibv_wr_*`, gathered only at `ibv_wr_complete`) may hold at most `BOUNCE_SLOTS`
/// inline requests.
const BOUNCE_SLOTS: usize = 64;

struct Bounce {
    mr: MemoryRegion,
    next: usize,
}

/// Register the QP's bounce region if it has none yet. It takes the engine lock, so it
/// must not run inside weft-verbs' `post_send` (whose doorbell path may hold that
/// lock while it takes the next request from the list).
///
/// # Safety
/// `q` is a live QP (its PD outlives it).
unsafe fn ensure_bounce(q: &Qp) {
    q.bounce.get_or_init(|| {
        // SAFETY: the PD outlives its QPs.
        let pd = unsafe { &(*q.pd).pd };
        Mutex::new(Bounce {
            mr: pd.alloc_mr(BOUNCE_SLOTS * MAX_INLINE as usize, Access::NONE),
            next: 0,
        })
    });
}

/// Copy the bytes of `parts` (address, length) into the next bounce slot of `q` and
/// return the SGE list naming them.
///
/// # Safety
/// Each part names `len` readable bytes (the C contract of an inline send).
unsafe fn bounce(q: &Qp, parts: &[(u64, usize)]) -> Result<SgList, c_int> {
    let total: usize = parts.iter().map(|p| p.1).sum();
    if total > MAX_INLINE as usize {
        return Err(libc::EINVAL);
    }
    // SAFETY: forwarded contract (the region is made before any engine lock is held:
    // `post_send` calls `ensure_bounce` before it posts).
    unsafe { ensure_bounce(q) };
    let mut b = lock(q.bounce.get().ok_or(libc::ENOMEM)?);
    let base = (b.next % BOUNCE_SLOTS) * MAX_INLINE as usize;
    b.next = b.next.wrapping_add(1);
    let mut at = base;
    for &(addr, len) in parts {
        if len == 0 {
            continue;
        }
        if addr == 0 {
            return Err(libc::EFAULT);
        }
        // SAFETY: per the contract, `len` readable bytes at `addr`.
        let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
        b.mr.write(at, bytes).map_err(|_| libc::EINVAL)?;
        at += len;
    }
    Ok(SgList::from(b.mr.sge(base, total as u32)))
}

/// The SGEs of a C work request.
///
/// # Safety
/// `sg` points to `n` readable `ibv_sge` (checked non-null when `n > 0`).
unsafe fn sg_list(sg: *const ibv_sge, n: c_int) -> Result<SgList, c_int> {
    if n < 0 || n as u32 > MAX_SGE || (n > 0 && sg.is_null()) {
        return Err(libc::EINVAL);
    }
    let mut l = SgList::new();
    for i in 0..n as usize {
        // SAFETY: per the contract.
        let s = unsafe { sg.add(i).read() };
        l.push(Sge {
            addr: s.addr,
            len: s.length,
            lkey: s.lkey,
        });
    }
    Ok(l)
}

/// # Safety
/// `w` points to an `ibv_send_wr` whose pointers are the program's. Its common
/// fields are initialised (the C contract); of the `wr` union and `imm_data` only
/// what the opcode uses need be: each is read only in the arm of an opcode that
/// uses it, by pointer, with no reference to the whole record.
unsafe fn send_wr(q: &Qp, w: *const ibv_send_wr) -> Result<SendWr, c_int> {
    // SAFETY: `w` is valid for reads of an `ibv_send_wr`; the opcode is a common field.
    let opcode = unsafe { ptr::addr_of!((*w).opcode).read() };
    let imm = || {
        // SAFETY: called only for the opcodes with immediate data, which set it.
        Some(u32::from_be(unsafe { ptr::addr_of!((*w).imm_data).read() }))
    };
    let rdma = || {
        // SAFETY: called only for RDMA opcodes, which set `wr.rdma`.
        let r = unsafe { ptr::addr_of!((*w).wr.rdma).read() };
        RemoteAddr {
            addr: r.remote_addr,
            rkey: r.rkey,
        }
    };
    let atomic = || {
        // SAFETY: called only for atomic opcodes, which set `wr.atomic`.
        let a = unsafe { ptr::addr_of!((*w).wr.atomic).read() };
        let remote = RemoteAddr {
            addr: a.remote_addr,
            rkey: a.rkey,
        };
        (remote, a.compare_add, a.swap)
    };
    let op = match opcode {
        IBV_WR_SEND => WrOp::Send { imm: None },
        IBV_WR_SEND_WITH_IMM => WrOp::Send { imm: imm() },
        IBV_WR_RDMA_WRITE => WrOp::Write {
            remote: rdma(),
            imm: None,
        },
        IBV_WR_RDMA_WRITE_WITH_IMM => WrOp::Write {
            remote: rdma(),
            imm: imm(),
        },
        IBV_WR_RDMA_READ => WrOp::Read { remote: rdma() },
        IBV_WR_ATOMIC_CMP_AND_SWP => {
            let (remote, compare, swap) = atomic();
            WrOp::CompareSwap {
                remote,
                compare,
                swap,
            }
        }
        IBV_WR_ATOMIC_FETCH_AND_ADD => {
            let (remote, add, _) = atomic();
            WrOp::FetchAdd { remote, add }
        }
        _ => return Err(libc::EINVAL),
    };
    // SAFETY: common fields of the record (see above).
    let (wr_id, sg, num_sge, f) = unsafe {
        (
            ptr::addr_of!((*w).wr_id).read(),
            ptr::addr_of!((*w).sg_list).read(),
            ptr::addr_of!((*w).num_sge).read(),
            ptr::addr_of!((*w).send_flags).read(),
        )
    };
    // SAFETY: the program's SGE array of `num_sge` entries.
    let sg = unsafe { sg_list(sg, num_sge) }?;
    let mut wr = SendWr::new(wr_id, op, sg);
    wr.signaled = q.sq_sig_all || f & IBV_SEND_SIGNALED != 0;
    wr.inline = f & IBV_SEND_INLINE != 0;
    wr.fence = f & IBV_SEND_FENCE != 0;
    wr.solicited = f & IBV_SEND_SOLICITED != 0;
    if wr.inline && !wr.op.is_read_or_atomic() {
        let mut parts = [(0u64, 0usize); MAX_SGE as usize];
        for (p, s) in parts.iter_mut().zip(wr.sg_list.iter()) {
            *p = (s.addr, s.len as usize);
        }
        let n = wr.sg_list.len();
        // SAFETY: an inline SGE names readable bytes (the C contract).
        wr.sg_list = unsafe { bounce(q, &parts[..n]) }?;
    }
    if q.qp_type == QpType::Ud {
        // SAFETY: the UD member, which a UD QP's requests fill (the C contract).
        let ud = unsafe { ptr::addr_of!((*w).wr.ud).read() };
        // SAFETY: per the C API the UD member names an address handle.
        let ah = unsafe { obj::<Ah>(ud.ah.cast()) }?;
        wr.ud = Some(ah.ah.dest(ud.remote_qpn, ud.remote_qkey));
    }
    Ok(wr)
}

/// A C work-request list (`ibv_send_wr` or `ibv_recv_wr`): how to step to the next
/// element.
trait CList: Sized {
    /// # Safety
    /// `p` is a non-null element of the program's list.
    unsafe fn next(p: *mut Self) -> *mut Self;
}

impl CList for ibv_send_wr {
    unsafe fn next(p: *mut Self) -> *mut Self {
        // SAFETY: per the contract.
        unsafe { ptr::addr_of!((*p).next).read() }
    }
}

impl CList for ibv_recv_wr {
    unsafe fn next(p: *mut Self) -> *mut Self {
        // SAFETY: per the contract.
        unsafe { ptr::addr_of!((*p).next).read() }
    }
}

/// Post the C list starting at `first` through `post` (weft-verbs' `post_send` or
/// `post_recv`), converting each element with `convert` as weft-verbs takes it. On
/// failure `*bad` names the request that failed, as providers do: the one at the
/// index weft-verbs reports, else the last one taken (the first when weft-verbs
/// refused before taking any, e.g. a QP in RESET or one attached to an SRQ).
///
/// # Safety
/// `first` is the program's list (null-terminated); `bad` is null or writable.
unsafe fn post_list<C: CList, W>(
    first: *mut C,
    bad: *mut *mut C,
    mut convert: impl FnMut(*mut C) -> Result<W, c_int>,
    post: impl FnOnce(&mut dyn Iterator<Item = W>) -> Result<(), Error>,
) -> Result<(), c_int> {
    let mut cur = first;
    let mut last = first;
    let mut convert_err = None;
    let result = {
        let mut wrs = std::iter::from_fn(|| {
            if cur.is_null() || convert_err.is_some() {
                return None;
            }
            last = cur;
            match convert(cur) {
                Ok(w) => {
                    // SAFETY: `cur` is a non-null element of the program's list.
                    cur = unsafe { C::next(cur) };
                    Some(w)
                }
                Err(e) => {
                    convert_err = Some(e);
                    None
                }
            }
        });
        post(&mut wrs)
    };
    let e = match (&result, convert_err) {
        (Ok(()), None) => return Ok(()),
        (Err(e), _) => errno_of(e),
        (Ok(()), Some(e)) => e,
    };
    if let Err(Error::PostList { index, .. }) = result {
        // The element at `index`, if the list is that long.
        let mut p = first;
        for _ in 0..index {
            if p.is_null() {
                break;
            }
            // SAFETY: a non-null element of the program's list.
            p = unsafe { C::next(p) };
        }
        if !p.is_null() {
            last = p;
        }
    }
    if !bad.is_null() {
        // SAFETY: the caller passes a writable pointer.
        unsafe { *bad = last };
    }
    Err(e)
}

unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Qp>(qp.cast()) }?;
        if q.bounce.get().is_none() {
            // The first inline request gets the bounce region made here, outside
            // weft-verbs' `post_send` (see `ensure_bounce`).
            let mut w = wr;
            while !w.is_null() {
                // SAFETY: an element of the program's list.
                let flags = unsafe { ptr::addr_of!((*w).send_flags).read() };
                if flags & IBV_SEND_INLINE != 0 {
                    // SAFETY: `q` is live.
                    unsafe { ensure_bounce(q) };
                    break;
                }
                // SAFETY: as above.
                w = unsafe { CList::next(w) };
            }
        }
        // SAFETY: the program's list; each element is converted as it is taken.
        unsafe { post_list(wr, bad, |w| send_wr(q, w), |wrs| lock(&q.st).post_send(wrs)) }
    })
}

/// Post a C receive list into `post` (a QP's or an SRQ's queue).
///
/// # Safety
/// `wr` is the program's receive list.
unsafe fn post_recv_list(
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
    post: impl FnOnce(&mut dyn Iterator<Item = RecvWr>) -> Result<(), Error>,
) -> Result<(), c_int> {
    let convert = |p: *mut ibv_recv_wr| {
        // SAFETY: an element of the program's list.
        let (id, sg, n) = unsafe {
            (
                ptr::addr_of!((*p).wr_id).read(),
                ptr::addr_of!((*p).sg_list).read(),
                ptr::addr_of!((*p).num_sge).read(),
            )
        };
        // SAFETY: its SGE array.
        Ok(RecvWr::new(id, unsafe { sg_list(sg, n) }?))
    };
    // SAFETY: forwarded contract.
    unsafe { post_list(wr, bad, convert, post) }
}

unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let q = unsafe { obj::<Qp>(qp.cast()) }?;
        // SAFETY: the program's list.
        unsafe { post_recv_list(wr, bad, |wrs| lock(&q.st).post_recv(wrs)) }
    })
}

// ---------------------------------------------------------------------------------
// Shared receive queues

#[repr(C)]
struct Srq {
    c: ibv_srq,
    magic: u64,
    /// Taken by `post_srq_recv` (one producer at a time) and by `make_qp` after the
    /// QP's CQ locks (lock order: CQs in address order, then the SRQ).
    srq: Mutex<SharedReceiveQueue>,
    pd: *const Pd,
    users: AtomicU32,
    attr: ibv_srq_attr,
}

// SAFETY: the queue is behind a mutex; `pd` is only used for its atomic counter, and
// the PD outlives the SRQ.
unsafe impl Sync for Srq {}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    p: *mut ibv_pd,
    init: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    ptr_call(|| {
        // SAFETY: per the C API.
        let pd = unsafe { obj::<Pd>(p.cast()) }?;
        if init.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes a readable, writable init attribute.
        let ia = unsafe { &mut *init };
        if ia.attr.max_wr == 0 || ia.attr.max_wr > MAX_QP_WR || ia.attr.max_sge > MAX_SGE {
            return Err(libc::EINVAL);
        }
        let srq = pd.pd.create_srq(ia.attr.max_wr as usize);
        ia.attr.max_sge = MAX_SGE;
        pd.users.fetch_add(1, Ordering::AcqRel);
        let b = Box::new(Srq {
            c: ibv_srq {
                context: pd.c.context,
                srq_context: ia.srq_context,
                pd: p,
                handle: 0,
                // SAFETY: zeroed pthread objects are their static initializers (glibc).
                mutex: unsafe { std::mem::zeroed() },
                // SAFETY: as above.
                cond: unsafe { std::mem::zeroed() },
                events_completed: 0,
            },
            magic: MAGIC_SRQ,
            srq: Mutex::new(srq),
            pd: ptr::from_ref(pd),
            users: AtomicU32::new(0),
            attr: ia.attr,
        });
        Ok(Box::into_raw(b).cast::<ibv_srq>())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(s: *mut ibv_srq) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let srq = unsafe { obj::<Srq>(s.cast()) }?;
        if srq.users.load(Ordering::Acquire) != 0 {
            return Err(libc::EBUSY);
        }
        // SAFETY: the PD outlives the SRQ.
        unsafe { (*srq.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: a live boxed Srq, destroyed by its owner.
        unsafe { free(ptr::from_ref(srq), |s| s.magic = 0) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(s: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let srq = unsafe { obj::<Srq>(s.cast()) }?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a writable attribute.
        unsafe { attr.write(srq.attr) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(
    s: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    let _ = (s, attr, mask);
    // Neither resizing (IBV_SRQ_MAX_WR) nor the limit event (IBV_SRQ_LIMIT) exists in weft.
    libc::EOPNOTSUPP
}

unsafe extern "C" fn post_srq_recv(
    s: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let srq = unsafe { obj::<Srq>(s.cast()) }?;
        let mut q = lock(&srq.srq);
        // SAFETY: the program's list.
        unsafe { post_recv_list(wr, bad, |wrs| q.post_recv(wrs)) }
    })
}

// ---------------------------------------------------------------------------------
// Address handles

#[repr(C)]
struct Ah {
    c: ibv_ah,
    magic: u64,
    ah: AddressHandle,
    pd: *const Pd,
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    ptr_call(|| {
        // SAFETY: per the C API.
        let pd = unsafe { obj::<Pd>(p.cast()) }?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a readable attribute.
        let a = unsafe { &*attr };
        if a.is_global == 0 {
            return Err(libc::EINVAL);
        }
        let peer = addr_of(&a.grh.dgid).ok_or(libc::EINVAL)?;
        let ah = pd.pd.create_ah(peer).map_err(|e| errno_of(&e))?;
        pd.users.fetch_add(1, Ordering::AcqRel);
        let b = Box::new(Ah {
            c: ibv_ah {
                context: pd.c.context,
                pd: p,
                handle: 0,
            },
            magic: MAGIC_AH,
            ah,
            pd: ptr::from_ref(pd),
        });
        Ok(Box::into_raw(b).cast::<ibv_ah>())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(a: *mut ibv_ah) -> c_int {
    errno_call(|| {
        // SAFETY: per the C API.
        let ah = unsafe { obj::<Ah>(a.cast()) }?;
        // SAFETY: the PD outlives its AHs.
        unsafe { (*ah.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: a live boxed Ah, destroyed by its owner.
        unsafe { free(ptr::from_ref(ah), |a| a.magic = 0) };
        Ok(())
    })
}

/// The source of a received UD datagram, from the GRH weft wrote in front of it:
/// RoCEv2 over IPv4 puts the IPv4 header in the GRH's last 20 bytes; over IPv6 the
/// GRH is the IPv6 header (source GID at bytes 8..24).
fn grh_source(grh: &[u8; 40]) -> Option<IpAddr> {
    if grh[20] >> 4 == 4 {
        let s: [u8; 4] = grh[32..36].try_into().ok()?;
        Some(IpAddr::V4(Ipv4Addr::from(s)))
    } else if grh[0] >> 4 == 6 {
        let s: [u8; 16] = grh[8..24].try_into().ok()?;
        Some(IpAddr::V6(Ipv6Addr::from(s)))
    } else {
        None
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    c: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut c_void,
    attr: *mut ibv_ah_attr,
) -> c_int {
    guard(-1, || {
        // SAFETY: per the C API.
        let ok = unsafe { ctx(c) }.is_ok();
        if !ok || port != 1 || wc.is_null() || grh.is_null() || attr.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: a readable completion and the 40-byte GRH of its buffer.
        let (w, g) = unsafe { (&*wc, grh.cast::<[u8; 40]>().read()) };
        if w.wc_flags & IBV_WC_GRH == 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        let Some(src) = grh_source(&g) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        let a = ibv_ah_attr {
            is_global: 1,
            port_num: 1,
            grh: ibv_global_route {
                hop_limit: 64,
                dgid: gid_of(SocketAddr::new(src, UDP_PORT)),
                ..ibv_global_route::default()
            },
            ..ibv_ah_attr::default()
        };
        // SAFETY: a writable attribute.
        unsafe { attr.write(a) };
        0
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    p: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut c_void,
    port: u8,
) -> *mut ibv_ah {
    guard(null_mut(), || {
        // SAFETY: per the C API.
        let Ok(pd) = (unsafe { obj::<Pd>(p.cast()) }) else {
            set_errno(libc::EINVAL);
            return null_mut();
        };
        let mut a = ibv_ah_attr::default();
        // SAFETY: forwarded contract.
        if unsafe { ibv_init_ah_from_wc(pd.c.context, port, wc, grh, &mut a) } != 0 {
            return null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { ibv_create_ah(p, &mut a) }
    })
}

// ---------------------------------------------------------------------------------
// Strings and small helpers

macro_rules! cstr_table {
    ($name:ident, $ty:ty, [$($s:literal),* $(,)?], $unknown:literal) => {
        #[no_mangle]
        pub extern "C" fn $name(v: $ty) -> *const c_char {
            const T: &[&CStr] = &[$($s),*];
            usize::try_from(v)
                .ok()
                .and_then(|i| T.get(i))
                .copied()
                .unwrap_or($unknown)
                .as_ptr()
        }
    };
}

cstr_table!(
    ibv_wc_status_str,
    c_int,
    [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ],
    c"unknown"
);

cstr_table!(
    ibv_event_type_str,
    c_int,
    [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ catastrophic error",
    ],
    c"unknown"
);

cstr_table!(
    ibv_port_state_str,
    c_int,
    [
        c"PORT_NOP",
        c"PORT_DOWN",
        c"PORT_INIT",
        c"PORT_ARMED",
        c"PORT_ACTIVE",
        c"PORT_ACTIVE_DEFER",
    ],
    c"invalid state"
);

#[no_mangle]
pub extern "C" fn ibv_node_type_str(t: c_int) -> *const c_char {
    match t {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    }
    .as_ptr()
}

const RATES: [(c_int, c_int, c_int); 21] = [
    // (enum ibv_rate, multiple of 2.5 Gb/s, Mb/s)
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (7, 12, 30000),
    (8, 16, 40000),
    (9, 24, 60000),
    (10, 32, 80000),
    (11, 48, 120000),
    (12, 6, 14062),
    (13, 22, 56250),
    (14, 45, 112500),
    (15, 67, 168750),
    (16, 10, 25781),
    (17, 40, 103125),
    (18, 80, 206250),
    (19, 120, 309375),
    (20, 20, 53125),
    (21, 20, 50000),
    (22, 160, 400000),
    (23, 240, 600000),
];

#[no_mangle]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

#[no_mangle]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES.iter().find(|r| r.1 == mult).map_or(0, |r| r.0)
}

#[no_mangle]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

#[no_mangle]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}

/// Nothing to do: weft's memory is ordinary process memory (no pinned pages that
/// fork would copy-on-write away from the NIC).
#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    IBV_FORK_UNNEEDED
}

#[no_mangle]
pub extern "C" fn ibv_dontfork_range(base: *mut c_void, size: usize) -> c_int {
    let _ = (base, size);
    0
}

#[no_mangle]
pub extern "C" fn ibv_dofork_range(base: *mut c_void, size: usize) -> c_int {
    let _ = (base, size);
    0
}

/// `ibv_qp_to_qp_ex`: every weft QP is an extended QP (its C part is an
/// `ibv_qp_ex`), so the same pointer; NULL for a handle weft did not make.
#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    guard(null_mut(), || {
        // SAFETY: per the C API.
        match unsafe { obj::<Qp>(qp.cast()) } {
            Ok(_) => qp.cast(),
            Err(e) => {
                set_errno(e);
                null_mut()
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn ibv_query_qp_data_in_order(qp: *mut ibv_qp, op: c_int, flags: u32) -> c_int {
    let _ = (qp, op, flags);
    // IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG: weft writes a message's bytes in order.
    1
}

/// Async events: weft raises none (no port changes, no QP or CQ errors reported this
/// way; errors arrive as completions). As with a real device that has nothing to say,
/// a call on a blocking `async_fd` waits, and one on an `O_NONBLOCK` descriptor fails
/// with EAGAIN.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(c: *mut ibv_context, ev: *mut c_void) -> c_int {
    minus_one_call(|| {
        if ev.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: per the C API `c` is a context pointer.
        let x = unsafe { ctx(c) }?;
        let mut buf = 0u64;
        loop {
            // SAFETY: reads 8 bytes into `buf` from the eventfd the context owns.
            let n = unsafe {
                libc::read(
                    x.async_fd.as_raw_fd(),
                    ptr::addr_of_mut!(buf).cast(),
                    size_of::<u64>(),
                )
            };
            if n < 0 {
                let e = last_errno();
                if e == libc::EINTR {
                    continue;
                }
                return Err(e);
            }
            // Nothing writes the eventfd; a count read here carries no event, so
            // look again (blocking) or report that there is none.
        }
    })
}

#[no_mangle]
pub extern "C" fn ibv_ack_async_event(ev: *mut c_void) {
    let _ = ev;
}

/// True once the provider libraries' constructors called `verbs_register_driver_34`;
/// weft records the call and ignores the driver.
static DRIVERS_REGISTERED: AtomicBool = AtomicBool::new(false);

#[no_mangle]
pub extern "C" fn verbs_register_driver_34(driver: *const c_void) {
    let _ = driver;
    DRIVERS_REGISTERED.store(true, Ordering::Relaxed);
}

#[no_mangle]
pub extern "C" fn ibv_register_driver(name: *const c_char, init: *const c_void) {
    let _ = (name, init);
}

/// `verbs_allow_disassociate_destroy`: a data symbol providers read.
#[no_mangle]
pub static verbs_allow_disassociate_destroy: AtomicBool = AtomicBool::new(false);

/// Entry points weft does not implement: each answers as rdma-core does for a
/// device without the feature — `EOPNOTSUPP` as a returned errno (int functions) or
/// as errno with a NULL result (constructors). The private ones are called only by
/// provider libraries' code for their own devices, which never runs on weft: they
/// exist so those libraries load.
macro_rules! unsupported_int {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            set_errno(libc::EOPNOTSUPP);
            libc::EOPNOTSUPP
        }
    )*};
}
macro_rules! unsupported_ptr {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> *mut c_void {
            set_errno(libc::EOPNOTSUPP);
            null_mut()
        }
    )*};
}
macro_rules! nothing {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() {}
    )*};
}

unsupported_int!(
    ibv_attach_mcast,
    ibv_detach_mcast,
    ibv_query_ece,
    ibv_set_ece,
    ibv_resolve_eth_l2_from_gid,
    execute_ioctl,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_poll_cq,
    ibv_cmd_post_recv,
    ibv_cmd_post_send,
    ibv_cmd_post_srq_recv,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_rereg_mr,
    ibv_cmd_req_notify_cq,
    ibv_cmd_resize_cq,
    verbs_open_device,
    ibv_unimport_pd,
    ibv_unimport_mr,
    ibv_unimport_dm,
);

/// Entry points whose contract is 0 or a negative value: -1 (for `ibv_rereg_mr`,
/// `IBV_REREG_MR_ERR_INPUT`) with errno `EOPNOTSUPP`.
macro_rules! unsupported_neg {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            set_errno(libc::EOPNOTSUPP);
            -1
        }
    )*};
}

unsupported_neg!(ibv_rereg_mr, ibv_read_sysfs_file, ibv_read_ibdev_sysfs_file);

unsupported_ptr!(
    ibv_import_device,
    ibv_import_pd,
    ibv_import_mr,
    ibv_import_dm,
    ibv_reg_dmabuf_mr,
    ibv_get_sysfs_path,
    _verbs_init_and_alloc_context,
);

nothing!(
    __verbs_log,
    verbs_set_ops,
    verbs_uninit_context,
    verbs_init_cq,
    ibv_copy_ah_attr_from_kern,
    ibv_copy_path_rec_from_kern,
    ibv_copy_path_rec_to_kern,
    ibv_copy_qp_attr_from_kern,
);

#[no_mangle]
pub extern "C" fn __ioctl_final_num_attrs(num: c_uint, def: *const c_void) -> c_uint {
    let _ = def;
    num
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_name_link_addresses_both_ways() {
        let a: SocketAddr = "127.5.6.7:4791".parse().unwrap();
        let g = gid_of(a);
        assert_eq!(&g.raw[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(&g.raw[12..], &[127, 5, 6, 7]);
        assert_eq!(addr_of(&g), Some(a));
        let v6: SocketAddr = "[2001:2::5]:4791".parse().unwrap();
        assert_eq!(addr_of(&gid_of(v6)), Some(v6));
        assert_eq!(addr_of(&ibv_gid::default()), None);
    }

    #[test]
    fn access_flags_follow_the_ibverbs_rule() {
        assert_eq!(access_of(IBV_ACCESS_REMOTE_WRITE), Err(libc::EINVAL));
        assert_eq!(access_of(IBV_ACCESS_REMOTE_ATOMIC), Err(libc::EINVAL));
        let a = access_of(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE).unwrap();
        assert!(a.contains(Access::REMOTE_WRITE));
        assert_eq!(access_enum(access_of(15).unwrap()), 15);
    }

    #[test]
    fn a_panic_becomes_an_errno() {
        assert_eq!(errno_call(|| panic!("boom")), libc::EIO);
        assert!(ptr_call::<u8>(|| panic!("boom")).is_null());
    }

    #[test]
    fn every_status_has_its_string() {
        let s = |v| {
            // SAFETY: the returned pointers are static C strings.
            unsafe { CStr::from_ptr(ibv_wc_status_str(v)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(s(IBV_WC_SUCCESS), "success");
        assert_eq!(s(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded");
        assert_eq!(s(-1), "unknown");
        assert_eq!(s(1000), "unknown");
    }

    #[test]
    fn foreign_handles_are_refused() {
        let junk = vec![0u64; 4096];
        assert!(size_of::<Qp>() <= 8 * junk.len());
        assert_eq!(
            // SAFETY: `junk` is readable for more than a `Qp`'s size.
            unsafe { obj::<Qp>(junk.as_ptr().cast()) }.err(),
            Some(libc::EINVAL)
        );
        // SAFETY: null is refused before any read.
        assert_eq!(unsafe { obj::<Cq>(ptr::null()) }.err(), Some(libc::EINVAL));
    }
}
