//! Clients that misbehave: malformed frames from a raw verbs peer, and a client
//! process killed in the middle of a call (this test binary re-runs itself as that
//! client).

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use weft_rpc::frame::{frames, Header, Kind, Rendezvous};
use weft_rpc::{Code, DeviceOptions, HelloError, LinkKind};
use weft_verbs::cm::{self, ConnParam, Connection, RejectReason};
use weft_verbs::{
    Access, CompletionQueue, MemoryRegion, ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr,
    SendWr, WcOpcode, WcStatus, WrOp,
};

fn hello(ring: u16, buf: u32) -> Vec<u8> {
    let mut b = b"WRPC".to_vec();
    b.extend_from_slice(&[1, 0]);
    b.extend_from_slice(&ring.to_be_bytes());
    b.extend_from_slice(&buf.to_be_bytes());
    b
}

/// A client that speaks weft-rpc by hand over a verbs QP: it says hello with `ring`
/// and `buf`, keeps `ring` receive buffers of `buf` bytes from offset 32 KiB of its
/// 64 KiB region (receive `i` at `32768 + i * buf`), and sends from offset 0.
struct Raw {
    ctx: weft_verbs::Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
    buf: u32,
    _conn: Connection,
}

impl Raw {
    fn connect(kind: LinkKind, at: std::net::SocketAddr, ring: u16, buf: u32) -> Raw {
        Raw::try_connect(kind, at, hello(ring, buf), ring, buf).unwrap()
    }

    /// As [`Raw::connect`], with any bytes as the hello.
    fn try_connect(
        kind: LinkKind,
        at: std::net::SocketAddr,
        hello: Vec<u8>,
        ring: u16,
        buf: u32,
    ) -> Result<Raw, weft_verbs::Error> {
        let ctx = DeviceOptions::new(kind).open().unwrap();
        let pd = ctx.alloc_pd();
        let cq = CompletionQueue::new(&ctx, 64, None);
        let mut qp = pd
            .create_qp(&cq, &cq, None, QpInitAttr::new(QpType::Rc))
            .unwrap();
        let mr = pd.alloc_mr(1 << 16, Access::ALL);
        let param = ConnParam {
            private_data: hello,
            ..ConnParam::default()
        };
        cm::init_qp(&mut qp, &param).unwrap();
        qp.post_recv(
            (0..u64::from(ring))
                .map(|i| RecvWr::new(i, mr.sge(32768 + i as usize * buf as usize, buf))),
        )
        .unwrap();
        let conn = cm::connect(&mut qp, at, &param)?;
        Ok(Raw {
            ctx,
            pd,
            cq,
            qp,
            mr,
            buf,
            _conn: conn,
        })
    }

    /// SEND `msg` as one message, unsignaled; false when the QP refuses the post.
    fn send(&mut self, msg: &[u8]) -> bool {
        self.mr.write(0, msg).unwrap();
        let mut wr = SendWr::new(
            0,
            WrOp::Send { imm: None },
            self.mr.sge(0, msg.len() as u32),
        );
        wr.signaled = false;
        self.qp.post_send([wr]).is_ok()
    }

    /// The next message from the server, its receive buffer posted again; `None` when
    /// nothing came within 10 s, `Err` with the status when the QP failed (the server
    /// closed the connection).
    fn recv(&mut self) -> Option<Result<Vec<u8>, WcStatus>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let Some(c) = self.cq.poll_one() else {
                continue;
            };
            if c.status != WcStatus::Success {
                return Some(Err(c.status));
            }
            if c.opcode == WcOpcode::Recv {
                let at = 32768 + c.wr_id as usize * self.buf as usize;
                let msg = self.mr.to_vec(at, c.byte_len as usize).unwrap();
                self.qp
                    .post_recv([RecvWr::new(c.wr_id, self.mr.sge(at, self.buf))])
                    .unwrap();
                return Some(Ok(msg));
            }
        }
        None
    }
}

/// Both ends' device counters, for a failure message: where a lost message went.
fn both_sides(raw: &Raw, s: &weft_rpc::Server) -> String {
    let server: Vec<_> = s.devices().iter().map(|d| d.stats()).collect();
    format!(
        "raw side: {:#?}\nserver: {:#?}\n{:#?}",
        raw.ctx.stats(),
        server,
        s.stats()
    )
}

fn malformed(kind: LinkKind) {
    let (s, _) = server(kind);
    let mut raw = Raw::connect(kind, s.local_addr(), 8, 4096);
    let mut valid = Vec::new();
    Header::new(Kind::REQUEST, 77).emit(b"ok", &mut valid);
    let mut overrun = valid.clone();
    overrun[23] = 200;
    let mut flags = valid.clone();
    flags[2] = 0x80;
    let mut response = Vec::new();
    Header::new(Kind::RESPONSE, 5).emit(b"", &mut response);
    let mut rndv = Vec::new();
    Header::new(Kind::RNDV, 6).emit(&[1, 2, 3], &mut rndv);
    let mut unknown = Vec::new();
    Header::new(Kind(0x42), 9).emit(b"", &mut unknown);
    let mut trailing = valid.clone();
    trailing.extend_from_slice(&[0xDA, 1, 0]);
    let garbage: Vec<Vec<u8>> = vec![
        vec![0; 10],
        vec![0xDA; 24],
        overrun,
        flags,
        response,
        rndv,
        unknown,
        trailing,
        (0..300u32).map(|i| (i * 7) as u8).collect(),
        vec![],
    ];
    for (n, g) in garbage.iter().enumerate() {
        assert!(raw.send(g));
        // Every message is answered, malformed or not: the answer is our credit.
        let reply = raw
            .recv()
            .unwrap_or_else(|| panic!("no answer to garbage {n}\n{}", both_sides(&raw, &s)))
            .unwrap_or_else(|st| panic!("garbage {n}: {st:?}"));
        let f = frames(&reply).next().unwrap().unwrap();
        assert_eq!(f.header.kind, Kind::RESPONSE, "garbage {n}");
        assert_eq!(
            Code::from_wire(f.header.code),
            Some(Code::InvalidArgument),
            "garbage {n}: {}",
            String::from_utf8_lossy(f.payload)
        );
    }
    assert_eq!(s.stats().malformed_frames, garbage.len() as u64);
    // The server goes on serving, this connection and others.
    assert!(raw.send(&valid));
    let c = client(kind, s.local_addr());
    assert_eq!(c.call(ECHO, b"still here").wait().unwrap(), b"still here");
}

#[test]
fn malformed_frames_are_answered_and_counted_udp() {
    malformed(LinkKind::Udp);
}

#[test]
fn malformed_frames_are_answered_and_counted_shm() {
    malformed(LinkKind::Shm);
}

/// A rendezvous whose READ brings back another rendezvous is refused: a client
/// could otherwise chain READs without bound, each answered only at the end. (The
/// server used to start the second READ and run what it found.)
fn rendezvous_in_a_rendezvous(kind: LinkKind) {
    let (s, _) = server_with(kind, |c| c.buffer_size = 1024);
    let mut raw = Raw::connect(kind, s.local_addr(), 8, 4096);
    let pd = raw.pd.clone();
    // The inner message: a request the server must not run.
    let mut inner = Vec::new();
    let mut h = Header::new(Kind::REQUEST, 41);
    h.code = ECHO;
    h.emit(&[7u8; 2000], &mut inner);
    let inner_mr = pd.register(inner.clone(), Access::LOCAL_WRITE | Access::REMOTE_READ);
    // The outer rendezvous's bytes: another rendezvous, pointing at the inner one.
    let mut outer = Vec::new();
    Header::new(Kind::RNDV, 41).emit(
        &Rendezvous {
            addr: inner_mr.addr(),
            rkey: inner_mr.rkey(),
            len: inner.len() as u32,
        }
        .to_bytes(),
        &mut outer,
    );
    let outer_mr = pd.register(outer.clone(), Access::LOCAL_WRITE | Access::REMOTE_READ);
    let mut msg = Vec::new();
    Header::new(Kind::RNDV, 40).emit(
        &Rendezvous {
            addr: outer_mr.addr(),
            rkey: outer_mr.rkey(),
            len: outer.len() as u32,
        }
        .to_bytes(),
        &mut msg,
    );
    assert!(raw.send(&msg));
    let reply = raw
        .recv()
        .expect("no answer to the rendezvous")
        .expect("the connection stays up");
    let f = frames(&reply).next().unwrap().unwrap();
    assert_eq!((f.header.kind, f.header.id), (Kind::RESPONSE, 41));
    assert_eq!(
        Code::from_wire(f.header.code),
        Some(Code::InvalidArgument),
        "{}",
        String::from_utf8_lossy(f.payload)
    );
    let st = s.stats();
    assert_eq!((st.rendezvous_in, st.malformed_frames), (1, 1), "{st:?}");
    assert_eq!(s.metrics().by_name("echo").map_or(0, |m| m.calls), 0);
}

#[test]
fn a_rendezvous_inside_a_rendezvous_is_refused_udp() {
    rendezvous_in_a_rendezvous(LinkKind::Udp);
}

#[test]
fn a_rendezvous_inside_a_rendezvous_is_refused_shm() {
    rendezvous_in_a_rendezvous(LinkKind::Shm);
}

#[test]
fn a_client_that_is_not_weft_rpc_is_refused() {
    let kind = LinkKind::Udp;
    let (s, _) = server(kind);
    let e = Raw::try_connect(kind, s.local_addr(), b"HTTP/1.1".to_vec(), 8, 4096)
        .err()
        .expect("the server accepted a stranger");
    // The server's reason is weft-rpc's typed refusal of an 8-byte hello.
    match &e {
        weft_verbs::Error::Rejected {
            reason: RejectReason::Application(why),
            ..
        } => assert_eq!(*why, HelloError::Length(8).to_string()),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("weft-rpc"), "{e}");
    assert_eq!(s.stats().connections_rejected, 1);
}

/// The client process of the killed-client tests.
#[test]
#[ignore = "run by killed_client tests as their child"]
fn child_client() {
    let Ok(at) = std::env::var("WEFT_RPC_CHILD_SERVER") else {
        return;
    };
    let kind = match std::env::var("WEFT_RPC_CHILD_LINK").as_deref() {
        Ok("shm") => LinkKind::Shm,
        _ => LinkKind::Udp,
    };
    let c = client(kind, at.parse().unwrap());
    let calls: Vec<_> = (0..4).map(|_| c.call(SLEEP, &ms(10_000))).collect();
    c.flush();
    std::thread::sleep(Duration::from_millis(50));
    println!("CALLING");
    for call in calls {
        let _ = call.wait();
    }
}

fn killed_client(kind: LinkKind) {
    let (s, probe) = server_with(kind, |c| c.workers = 2);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_client",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WEFT_RPC_CHILD_SERVER", s.local_addr().to_string())
        .env(
            "WEFT_RPC_CHILD_LINK",
            if kind == LinkKind::Shm { "shm" } else { "udp" },
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains("CALLING") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("child did not call");
    assert!(eventually(Duration::from_secs(5), || s.stats().pooled >= 2));
    let _ = child.kill();
    let _ = child.wait();
    // The server sees the connection go, cancels what was queued, and serves on.
    assert!(
        eventually(Duration::from_secs(5), || s.stats().connections_closed >= 1),
        "{:?}",
        s.stats()
    );
    let c = client(kind, s.local_addr());
    assert_eq!(c.call(ECHO, b"next").wait().unwrap(), b"next");
    assert_eq!(s.stats().clusters[0].connections, 1);
    let _ = probe;
}

#[test]
fn a_client_killed_mid_call_is_noticed_udp() {
    killed_client(LinkKind::Udp);
}

#[test]
fn a_client_killed_mid_call_is_noticed_shm() {
    killed_client(LinkKind::Shm);
}

/// A client that keeps calling for answers larger than its buffer and never READs
/// or releases them would pin server memory without bound (each announcement gives
/// its credit back): past two rings of unreleased answers the server closes it.
fn unreleased_answers(kind: LinkKind) {
    const SERVER_RING: usize = 8;
    let (s, _) = server_with(kind, |c| c.ring = SERVER_RING);
    let mut raw = Raw::connect(kind, s.local_addr(), 4, 1024);
    let mut announced = 0u64;
    for id in 0..(4 * SERVER_RING as u64) {
        let mut call = Vec::new();
        let mut h = Header::new(Kind::REQUEST, id + 1);
        h.code = SIZED;
        h.emit(&(8000u64).to_le_bytes(), &mut call);
        // Each answer (our credit back) is an RNDV announcement, until the server
        // closes the connection: the post or the wait fails.
        if !raw.send(&call) {
            break;
        }
        let Some(Ok(msg)) = raw.recv() else { break };
        let f = frames(&msg).next().unwrap().unwrap();
        assert_eq!(f.header.kind, Kind::RNDV, "an 8000 B answer is announced");
        announced += 1;
    }
    let until = Instant::now() + Duration::from_secs(10);
    while s.stats().connections_closed == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        announced,
        2 * SERVER_RING as u64,
        "answers announced before the server gave up on us"
    );
    assert_eq!(
        s.stats().connections_closed,
        1,
        "the server closed the hoarder"
    );
    assert!(s.stats().malformed_frames >= 1);
    // Other clients are served as before.
    let c = client(kind, s.local_addr());
    assert_eq!(c.call(ECHO, b"still here").wait().unwrap(), b"still here");
}

#[test]
fn a_client_that_never_releases_large_answers_is_closed_udp() {
    unreleased_answers(LinkKind::Udp);
}

#[test]
fn a_client_that_never_releases_large_answers_is_closed_shm() {
    unreleased_answers(LinkKind::Shm);
}
