//! Shared set-up for the verbs tests: two devices, connected QPs.
#![allow(dead_code)]

use std::time::Duration;
use weft_verbs::cm::{self, ConnParam, Connection, Listener};
use weft_verbs::{
    Access, Completion, CompletionQueue, Context, DeviceConfig, LinkKind, MemoryRegion, Progress,
    ProtectionDomain, QpInitAttr, QpType, QueuePair, WcStatus,
};

pub const T: Duration = Duration::from_secs(10);

/// One side: device, domain, queues, QP, registered memory, and its connection.
pub struct Side {
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub qp: QueuePair,
    pub mr: MemoryRegion,
    pub conn: Option<Connection>,
}

pub fn device(kind: LinkKind, progress: Progress) -> Context {
    device_with(kind, progress, true)
}

/// A device; `icrc: false` asks the shm link to carry no ICRC (both ends must agree).
pub fn device_with(kind: LinkKind, progress: Progress, icrc: bool) -> Context {
    // A loopback address of the device's own, RoCEv2's port 4791 (udp) or a name
    // unique on the host (shm).
    let mut cfg = DeviceConfig::local(kind);
    cfg.progress = progress;
    cfg.icrc = icrc;
    Context::open_with(cfg).expect("open device")
}

pub fn side(kind: LinkKind, progress: Progress, qp_type: QpType, mem: usize) -> Side {
    side_on(device(kind, progress), qp_type, mem)
}

/// [`side`] on a device whose shm ring mode is `ring` (`DeviceConfig::ring_mode`; the
/// default is off).
pub fn side_ring(
    kind: LinkKind,
    progress: Progress,
    qp_type: QpType,
    mem: usize,
    ring: bool,
) -> Side {
    let mut cfg = DeviceConfig::local(kind);
    cfg.progress = progress;
    cfg.ring_mode = ring;
    side_on(Context::open_with(cfg).expect("open device"), qp_type, mem)
}

/// A side on a device the caller opened.
pub fn side_on(ctx: Context, qp_type: QpType, mem: usize) -> Side {
    let cq = CompletionQueue::new(&ctx, 1024, None);
    side_with_cq(ctx, cq, qp_type, mem)
}

/// A side on a device and completion queue the caller made (a queue tied to a
/// completion channel, say).
pub fn side_with_cq(ctx: Context, cq: CompletionQueue, qp_type: QpType, mem: usize) -> Side {
    let pd = ctx.alloc_pd();
    let qp = pd
        .create_qp(&cq, &cq, None, QpInitAttr::new(qp_type))
        .expect("create qp");
    let mr = pd.alloc_mr(mem, Access::ALL);
    Side {
        ctx,
        pd,
        cq,
        qp,
        mr,
        conn: None,
    }
}

/// Two sides connected through the connection manager.
pub fn pair(kind: LinkKind, progress: Progress, qp_type: QpType, mem: usize) -> (Side, Side) {
    pair_with(kind, progress, qp_type, mem, &ConnParam::default())
}

pub fn pair_with(
    kind: LinkKind,
    progress: Progress,
    qp_type: QpType,
    mem: usize,
    param: &ConnParam,
) -> (Side, Side) {
    let a = side(kind, progress, qp_type, mem);
    let b = side(kind, progress, qp_type, mem);
    connect_sides(a, b, param)
}

/// Connect `a` (client) to `b` (server) through the connection manager.
pub fn connect_sides(mut a: Side, mut b: Side, param: &ConnParam) -> (Side, Side) {
    let listener = Listener::bind(&b.ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = listener.local_addr().unwrap();
    let p = param.clone();
    let (conn_b, qp_b) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let req = listener.get_request(T).expect("request");
            let mut qp = b.qp;
            let c = req.accept(&mut qp, &p).expect("accept");
            (c, qp)
        });
        a.conn = Some(cm::connect(&mut a.qp, at, param).expect("connect"));
        h.join().unwrap()
    });
    b.qp = qp_b;
    b.conn = Some(conn_b);
    (a, b)
}

/// Wait for `n` completions, all successful.
pub fn ok(cq: &mut CompletionQueue, n: usize) -> Vec<Completion> {
    ok_driving(cq, n, &[])
}

/// Wait for `n` completions, all successful, while running progress passes on
/// `others` (with inline progress, nobody else drives the peer in a one-thread test).
pub fn ok_driving(cq: &mut CompletionQueue, n: usize, others: &[&Context]) -> Vec<Completion> {
    let v = collect(cq, n, others);
    assert_eq!(v.len(), n, "completions: {v:?}");
    for c in &v {
        assert_eq!(c.status, WcStatus::Success, "{c:?}");
    }
    v
}

/// Up to `n` completions within the test timeout, driving `others`.
pub fn collect(cq: &mut CompletionQueue, n: usize, others: &[&Context]) -> Vec<Completion> {
    let deadline = std::time::Instant::now() + T;
    let mut out = Vec::new();
    while out.len() < n && std::time::Instant::now() < deadline {
        let want = n - out.len();
        if cq.poll(&mut out, want) == 0 {
            for c in others {
                c.progress();
            }
        }
    }
    out
}

/// The shm one-copy path's prerequisite: processes of this user may read each other's
/// memory by cross-memory attach. `process_vm_readv` must not be filtered (a read of
/// our own memory works), and Yama must let a process read one that is not its
/// descendant (`ptrace_scope` 0 or absent, or we are root). Where it is missing,
/// weft falls back to the rings, and a test of the one-copy path has nothing to test.
pub fn cross_memory_attach() -> Result<(), String> {
    let probe = [7u8; 16];
    let mut seen = [0u8; 16];
    let span = weft_link::cma::Span {
        addr: probe.as_ptr() as u64,
        len: 16,
    };
    weft_link::cma::read(std::process::id() as i32, &mut seen, &[span])
        .map_err(|e| format!("process_vm_readv on ourselves: {e}"))?;
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    if scope != 0 && !root {
        return Err(format!("Yama ptrace_scope is {scope} and we are not root"));
    }
    Ok(())
}
