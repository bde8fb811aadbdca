//! One-sided RDMA: the client WRITEs into the server's memory, READs it back and
//! bumps a counter there with fetch-and-add, while the server never touches weft
//! after accepting (its engine thread answers). The server's buffer address and rkey
//! travel in the connection manager's private data.
//!
//! ```text
//! server:  cargo run --release -p weft-verbs --example write_read
//! client:  cargo run --release -p weft-verbs --example write_read -- 127.0.0.1:18516
//! options: --link udp|shm
//! ```

mod common;

use common::Cli;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, QpInitAttr, QpType, RemoteAddr,
    SendWr, WcStatus, WrOp,
};

fn main() -> ExitCode {
    let mut cli = Cli::new("write_read", "[SERVER_IP:PORT] [--link udp|shm]");
    let mut link = LinkKind::Udp;
    let mut server = None::<SocketAddr>;
    while let Some(a) = cli.next_arg() {
        match a.as_str() {
            "--link" => link = cli.link(),
            other => server = Some(cli.addr(other)),
        }
    }
    cli.run(|| run(link, server))
}

fn run(link: LinkKind, server: Option<SocketAddr>) -> Result<(), Box<dyn std::error::Error>> {
    // The device: a loopback address of its own, RoCEv2's port 4791.
    let ctx = Context::open_with(DeviceConfig::local(link))?;
    let pd = ctx.alloc_pd();
    let mut cq = CompletionQueue::new(&ctx, 16, None);
    let mut qp = pd.create_qp(&cq, &cq, None, QpInitAttr::new(QpType::Rc))?;
    let mr = pd.alloc_mr(4096, Access::ALL);

    let Some(at) = server else {
        // Server: advertise the region, then only watch the memory change.
        let mut private = mr.addr().to_be_bytes().to_vec();
        private.extend_from_slice(&mr.rkey().to_be_bytes());
        let param = ConnParam {
            private_data: private,
            ..ConnParam::default()
        };
        let l = Listener::bind(&ctx, "127.0.0.1:18516".parse()?)?;
        println!(
            "server: region of {} B at {:#x}, rkey {:#x}; waiting on {}",
            mr.len(),
            mr.addr(),
            mr.rkey(),
            l.local_addr()?
        );
        let conn = l
            .get_request(Duration::from_secs(120))?
            .accept(&mut qp, &param)?;
        // The engine thread serves the client's WRITE, READ and atomic.
        while qp
            .query()
            .is_some_and(|(s, _)| s != weft_verbs::QpState::Err)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        println!(
            "server: client gone; region now starts with {:?}, counter = {}",
            String::from_utf8_lossy(&mr.to_vec(8, 24)?),
            mr.load_u64(0)?
        );
        drop(conn);
        return Ok(());
    };

    // Client.
    let conn = cm::connect(&mut qp, at, &ConnParam::default())?;
    // The server's private data: its region's address and rkey (12 bytes).
    let p = &conn.remote().private_data;
    let (Some(addr), Some(rkey)) = (
        p.get(..8).and_then(|b| b.try_into().ok()),
        p.get(8..12).and_then(|b| b.try_into().ok()),
    ) else {
        return Err(format!(
            "the server sent {} bytes of private data, not an address and rkey (12)",
            p.len()
        )
        .into());
    };
    let remote = RemoteAddr {
        addr: u64::from_be_bytes(addr),
        rkey: u32::from_be_bytes(rkey),
    };
    let at_off = |off: u64| RemoteAddr {
        addr: remote.addr + off,
        rkey: remote.rkey,
    };
    let msg = b"written by an RDMA WRITE!";
    mr.write(0, msg)?;
    qp.post_send([
        SendWr::new(
            1,
            WrOp::Write {
                remote: at_off(8),
                imm: None,
            },
            [mr.sge(0, msg.len() as u32)],
        ),
        SendWr::new(
            2,
            WrOp::Read { remote: at_off(8) },
            [mr.sge(1024, msg.len() as u32)],
        ),
        SendWr::new(
            3,
            WrOp::FetchAdd {
                remote: at_off(0),
                add: 1,
            },
            [mr.sge(2048, 8)],
        ),
    ])?;
    for c in cq.wait(3, Duration::from_secs(10)) {
        if c.status != WcStatus::Success {
            return Err(format!("the {:?} completed with {:?}", c.opcode, c.status).into());
        }
        println!("client: {:?} done", c.opcode);
    }
    println!(
        "client: read back {:?}",
        String::from_utf8_lossy(&mr.to_vec(1024, msg.len())?)
    );
    println!(
        "client: counter was {} before my fetch-and-add",
        mr.load_u64(2048)?
    );
    conn.disconnect();
    Ok(())
}
