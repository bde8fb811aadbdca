//! hello_write: the smallest complete weft-verbs program, in two processes. The server
//! registers a buffer peers may WRITE, listens, and hands the buffer's address and
//! rkey to the client in the connection manager's private data; the client WRITEs a
//! greeting into it with one RDMA WRITE and disconnects; the server, which never posts
//! anything, prints what arrived.
//!
//!   server:  cargo run -p weft-verbs --example hello_write
//!   client:  cargo run -p weft-verbs --example hello_write -- 127.0.0.1:18517
//!
//! Each side's device takes a loopback address of its own on RoCEv2's UDP port 4791.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, QpInitAttr, QpState, QpType,
    RemoteAddr, SendWr, WcStatus, WrOp,
};

const USAGE: &str = "usage: hello_write [SERVER_IP:PORT] [--listen IP:PORT]";
const GREETING: &[u8] = b"hello, RDMA WRITE";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = |s: &str| {
        s.parse::<SocketAddr>()
            .map_err(|_| format!("bad address {s:?}"))
    };
    let parsed = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--help" | "-h", ..] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [] => addr("127.0.0.1:18517").map(Role::Server),
        ["--listen", a] => addr(a).map(Role::Server),
        [a] if !a.starts_with('-') => addr(a).map(Role::Client),
        _ => Err(format!("unexpected arguments {args:?}")),
    };
    let role = match parsed {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hello_write: {e}");
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(role) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hello_write: {e}");
            ExitCode::FAILURE
        }
    }
}

enum Role {
    Server(SocketAddr),
    Client(SocketAddr),
}

fn run(role: Role) -> Result<(), Box<dyn std::error::Error>> {
    // A device (the software RNIC), a protection domain, a completion queue, an RC QP.
    let ctx = Context::open_with(DeviceConfig::local(LinkKind::Udp))?;
    let pd = ctx.alloc_pd();
    let mut cq = CompletionQueue::new(&ctx, 16, None);
    let mut qp = pd.create_qp(&cq, &cq, None, QpInitAttr::new(QpType::Rc))?;
    match role {
        Role::Server(listen) => {
            // Memory the client may write, advertised as address (8 bytes) + rkey (4).
            let mr = pd.alloc_mr(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
            let mut private_data = mr.addr().to_be_bytes().to_vec();
            private_data.extend_from_slice(&mr.rkey().to_be_bytes());
            let param = ConnParam {
                access: Access::REMOTE_WRITE,
                private_data,
                ..ConnParam::default()
            };
            let listener = Listener::bind(&ctx, listen)?;
            println!(
                "listening on {} (device {})",
                listener.local_addr()?,
                ctx.local_addr()
            );
            let request = listener.get_request(Duration::from_secs(120))?;
            let conn = request.accept(&mut qp, &param)?;
            // The engine thread serves the WRITE; the QP goes to ERR when the client
            // disconnects.
            while qp.query().is_some_and(|(s, _)| s != QpState::Err) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let got = mr.to_vec(0, GREETING.len())?;
            println!(
                "server: the client wrote {:?}",
                String::from_utf8_lossy(&got)
            );
            drop(conn);
        }
        Role::Client(server) => {
            let conn = cm::connect(&mut qp, server, &ConnParam::default())?;
            let p = &conn.remote().private_data;
            let (Some(addr), Some(rkey)) = (
                p.get(..8).and_then(|b| b.try_into().ok()),
                p.get(8..12).and_then(|b| b.try_into().ok()),
            ) else {
                return Err("the server did not send an address and rkey".into());
            };
            let remote = RemoteAddr {
                addr: u64::from_be_bytes(addr),
                rkey: u32::from_be_bytes(rkey),
            };
            let mr = pd.alloc_mr(64, Access::LOCAL_WRITE);
            mr.write(0, GREETING)?;
            let write = WrOp::Write { remote, imm: None };
            qp.post_send([SendWr::new(1, write, [mr.sge(0, GREETING.len() as u32)])])?;
            let done = cq.wait(1, Duration::from_secs(10));
            match done.first() {
                Some(c) if c.status == WcStatus::Success => println!("client: WRITE done"),
                Some(c) => return Err(format!("the WRITE completed with {:?}", c.status).into()),
                None => return Err("the WRITE did not complete within 10 s".into()),
            }
            conn.disconnect();
        }
    }
    Ok(())
}
