//! Shared set-up for the weft-rpc tests: a test service and servers/clients on udp
//! or shm.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_rpc::{
    Client, ClientConfig, Exec, Handlers, LinkKind, Server, ServerConfig, Service, Status,
};

pub const ECHO: u32 = 1;
/// Records `(connection, u64 from the payload)` in order, answers the same u64.
pub const SEQ: u32 = 2;
/// Blocking: sleeps the number of milliseconds in the payload, then answers.
pub const SLEEP: u32 = 3;
/// In place: sleeps the milliseconds in the payload (stalls the cluster head).
pub const STALL: u32 = 4;
/// Answers a response of the length in the payload (u32), bytes `i as u8`.
pub const SIZED: u32 = 5;
/// Fails with the code in the payload.
pub const FAIL: u32 = 6;
/// Like `SEQ`, but answers only the u64 (a short answer to a request of any size).
pub const SEQ_SHORT: u32 = 7;

#[derive(Debug, Default)]
pub struct Probe {
    pub seq: Mutex<Vec<(u64, u64)>>,
    pub slept: AtomicU64,
    /// `SLEEP` handlers running now, and the most that ever ran at once.
    pub sleeping: AtomicU64,
    pub most_sleeping: AtomicU64,
}

pub fn u64_of(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(a)
}

pub fn test_service(probe: &Arc<Probe>) -> Arc<dyn Service> {
    let p1 = Arc::clone(probe);
    let p2 = Arc::clone(probe);
    let p3 = Arc::clone(probe);
    Arc::new(
        Handlers::new()
            .add(ECHO, "echo", Exec::InPlace, |_, req, resp| {
                resp.extend_from_slice(req);
                Ok(())
            })
            .add(SEQ, "seq", Exec::InPlace, move |cx, req, resp| {
                p1.seq.lock().unwrap().push((cx.connection(), u64_of(req)));
                resp.extend_from_slice(req);
                Ok(())
            })
            .add(
                SEQ_SHORT,
                "seq_short",
                Exec::InPlace,
                move |cx, req, resp| {
                    let v = u64_of(req);
                    p3.seq.lock().unwrap().push((cx.connection(), v));
                    resp.extend_from_slice(&v.to_le_bytes());
                    Ok(())
                },
            )
            .add(SLEEP, "sleep", Exec::Blocking, move |cx, req, resp| {
                let ms = u64_of(req);
                let now = p2.sleeping.fetch_add(1, Ordering::SeqCst) + 1;
                p2.most_sleeping.fetch_max(now, Ordering::SeqCst);
                let t = std::time::Instant::now();
                while t.elapsed() < Duration::from_millis(ms) && !cx.is_cancelled() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                p2.sleeping.fetch_sub(1, Ordering::SeqCst);
                p2.slept.fetch_add(1, Ordering::SeqCst);
                resp.extend_from_slice(req);
                Ok(())
            })
            .add(STALL, "stall", Exec::InPlace, |_, req, _| {
                std::thread::sleep(Duration::from_millis(u64_of(req)));
                Ok(())
            })
            .add(SIZED, "sized", Exec::InPlace, |_, req, resp| {
                let n = u64_of(req) as usize;
                resp.extend((0..n).map(|i| i as u8));
                Ok(())
            })
            .add(FAIL, "fail", Exec::InPlace, |_, req, _| {
                Err(Status::new(
                    weft_rpc::Code::from_wire(u64_of(req) as u32)
                        .unwrap_or(weft_rpc::Code::Internal),
                    "asked to fail",
                ))
            }),
    )
}

pub fn any_addr() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

pub fn server_with(kind: LinkKind, f: impl FnOnce(&mut ServerConfig)) -> (Server, Arc<Probe>) {
    let probe = Arc::new(Probe::default());
    let mut cfg = ServerConfig::new(kind);
    f(&mut cfg);
    let s = Server::start(test_service(&probe), cfg, any_addr()).expect("server");
    (s, probe)
}

pub fn server(kind: LinkKind) -> (Server, Arc<Probe>) {
    server_with(kind, |_| {})
}

pub fn client_with(kind: LinkKind, at: SocketAddr, f: impl FnOnce(&mut ClientConfig)) -> Client {
    let mut cfg = ClientConfig::new(kind);
    // A lost answer fails its test instead of hanging it.
    cfg.default_timeout = Some(Duration::from_secs(20));
    f(&mut cfg);
    Client::connect(at, cfg).expect("client")
}

pub fn client(kind: LinkKind, at: SocketAddr) -> Client {
    client_with(kind, at, |_| {})
}

pub fn ms(n: u64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

/// Poll `f` until it holds or `limit` passes.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    f()
}
