//! Shared set-up for the verbs tests: two devices, connected QPs.
#![allow(dead_code)]

use std::net::SocketAddr;
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
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut cfg = DeviceConfig::new(kind, addr);
    cfg.progress = progress;
    cfg.icrc = icrc;
    if kind == LinkKind::Shm {
        // shm names must be unique per device: pick a port from the process id and a
        // counter.
        use std::sync::atomic::{AtomicU16, Ordering};
        static NEXT: AtomicU16 = AtomicU16::new(1);
        let port =
            20000 + (std::process::id() as u16 % 20000) + NEXT.fetch_add(1, Ordering::Relaxed);
        cfg.addr = SocketAddr::new(addr.ip(), port);
    }
    Context::open_with(cfg).expect("open device")
}

pub fn side(kind: LinkKind, progress: Progress, qp_type: QpType, mem: usize) -> Side {
    let ctx = device(kind, progress);
    let pd = ctx.alloc_pd();
    let cq = CompletionQueue::new(&ctx, 1024, None);
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
    let mut a = side(kind, progress, qp_type, mem);
    let mut b = side(kind, progress, qp_type, mem);
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
