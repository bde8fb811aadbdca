//! weft-ibverbs: a drop-in `libibverbs.so.1` over weft-verbs.
//!
//! Unmodified RDMA programs — rdma-core's `ibv_rc_pingpong`, perftest's `ib_*` — load
//! it through the library path (`weft exec -- PROGRAM`) and run on weft's udp or shm
//! link: no RDMA NIC, no kernel module, no root. See docs/ibverbs.md.
//!
//! - [`abi`]: the C structures of `<infiniband/verbs.h>`, `#[repr(C)]`, each size and
//!   offset checked against the installed headers by `tests/layout.rs`.
//! - `ffi` (private): the exported `ibv_*` functions, the `ibv_context_ops` table the
//!   inline data-path functions of verbs.h call through, and the `verbs_context` in
//!   front of every context. This is the crate's C boundary and its only `unsafe`:
//!   every entry point checks its pointers (null, and a per-object tag for objects
//!   weft made), catches panics (they never unwind into C) and answers misuse with an
//!   errno.
//! - [`package`]: links this crate's staticlib into `libibverbs.so.1` with the real
//!   library's symbol versions (`libibverbs.map`).
//!
//! The device: one, `weft0`, one port, ACTIVE, Ethernet link layer, one RoCEv2 GID —
//! the IPv4-mapped address of the context's link (`::ffff:127.a.b.c` by default, a
//! loopback address of the process's own, so two processes on a host each own UDP
//! port 4791). `WEFT_IBVERBS_LINK` (`udp`, default, or `shm`) and `WEFT_IBVERBS_ADDR`
//! (an IP) choose the link and address; `WEFT_IBVERBS_ICRC_ANY_IPV4_ID=1` (off by
//! default) accepts a received ICRC computed for any IPv4 identification, which
//! talking to Linux's rdma_rxe over the udp link needs (see [`ENV_ICRC_ANY_IPV4_ID`]).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
pub mod exec;
mod ffi;
pub mod package;

/// The environment variable naming the link (`udp` or `shm`).
pub const ENV_LINK: &str = "WEFT_IBVERBS_LINK";
/// The environment variable naming the IP address a context binds (port 4791).
pub const ENV_ADDR: &str = "WEFT_IBVERBS_ADDR";
/// The environment variable that, set to `1`, turns on weft-verbs'
/// `DeviceConfig::icrc_any_ipv4_id` for the udp link (unset, empty or `0`: off, the
/// default). rdma_rxe numbers the IPv4 identification of its packets and covers it
/// with the ICRC; a UDP socket cannot see that field, so without this weft drops
/// every rxe packet as an ICRC error. The cost: a corrupted packet passes the ICRC
/// check with probability 2^-16 instead of 2^-32. What weft sends is unchanged.
pub const ENV_ICRC_ANY_IPV4_ID: &str = "WEFT_IBVERBS_ICRC_ANY_IPV4_ID";
/// The environment variable that sets the engine thread's idle spin (weft-verbs'
/// `DeviceConfig::idle_spin`, docs/verbs.md "Progress"): microseconds, the most the
/// learned spin may be (default 50); `0` forces blocking; `poll` forces polling (the
/// engine thread spins always and never stands by).
pub const ENV_IDLE_SPIN: &str = "WEFT_IBVERBS_IDLE_SPIN";
/// The environment variable that, set to `1`, prints the device's counters (engine,
/// transport, link) on stderr when the program closes it.
pub const ENV_STATS: &str = "WEFT_IBVERBS_STATS";
/// The device's name.
pub const DEVICE_NAME: &str = "weft0";
/// The device's kernel-side name (`ibv_device::dev_name`; `uverbsN` on a real host).
pub const DEV_NAME: &str = "uverbs-weft0";

/// Make `/dev/infiniband/uverbs-weft0` exist, as a symbolic link to `/dev/null`, and
/// return its path (nothing changes if something is already there).
///
/// weft has no kernel device, and nothing of weft opens this file. But UCX (uct_ib)
/// takes a device only if `/dev/infiniband/<dev_name>` is a character device it may
/// read and write; that check is all the file is for. Creating it needs root (or write
/// access to `/dev`); `weft exec --dev-node` calls this.
pub fn ensure_dev_node() -> std::io::Result<std::path::PathBuf> {
    let dir = std::path::Path::new("/dev/infiniband");
    let node = dir.join(DEV_NAME);
    if std::fs::symlink_metadata(&node).is_ok() {
        return Ok(node);
    }
    std::fs::create_dir_all(dir)?;
    match std::os::unix::fs::symlink("/dev/null", &node) {
        Ok(()) => Ok(node),
        // Another process made it first.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(node),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot create {}: {e}", node.display()),
        )),
    }
}
