//! CPU cost of the protocol core: two endpoints joined back to back (no simulator, no
//! loss), A streams RDMA WRITEs to B. Prints packets/s and payload Gbit/s of wall time.
//! `cargo run --release -p weft-transport --example throughput [msg_bytes] [total_MiB]`
use std::time::Instant as Wall;
use weft_transport::sim::{ConnectOptions, LinkConfig, Pair};
use weft_transport::{Access, Config, Instant, Mtu, QpType, RemoteAddr, SendWr, Sge, WrOp};

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().unwrap());
    let msg = args.next().unwrap_or(65536);
    let total = args.next().unwrap_or(1024) << 20;
    let mut p = Pair::new(
        Config::default(),
        (msg as usize) * 2 + (1 << 16),
        LinkConfig::default(),
        LinkConfig::default(),
        1,
    );
    let o = ConnectOptions {
        mtu: Mtu::M4096,
        max_inflight: 1024,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    p.a.mem_mut().set_logging(false);
    p.b.mem_mut().set_logging(false);
    let ra =
        p.a.mem_mut()
            .register(1, 0x10_0000 + 4096, msg, Access::ALL);
    let rb =
        p.b.mem_mut()
            .register(1, 0x80_0000 + 4096, msg, Access::ALL);
    let (mut a, mut b) = (p.a, p.b);
    let mut buf = vec![0u8; 4096 + weft_transport::MAX_OVERHEAD];
    let messages = total / msg;
    let (mut posted, mut done, mut packets) = (0u64, 0u64, 0u64);
    let start = Wall::now();
    let now = Instant(0);
    while done < messages {
        while posted < messages && posted - done < 16 {
            let wr = SendWr::new(
                posted,
                WrOp::Write {
                    remote: RemoteAddr {
                        addr: rb.addr,
                        rkey: rb.rkey,
                    },
                    imm: None,
                },
                vec![Sge {
                    addr: ra.addr,
                    len: msg as u32,
                    lkey: ra.lkey,
                }],
            );
            a.post_send(c.qpn_a, wr).unwrap();
            posted += 1;
        }
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            b.handle_packet(now, &t.path, &buf[..t.len]);
            packets += 1;
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            a.handle_packet(now, &t.path, &buf[..t.len]);
        }
        while a.poll_completion().is_some() {
            done += 1;
        }
    }
    let s = start.elapsed().as_secs_f64();
    println!(
        "{messages} x {msg} B WRITEs: {packets} packets in {s:.2} s = {:.2} Mpps, {:.2} Gbit/s payload (one core, both ends, ICRC on)",
        packets as f64 / s / 1e6,
        (messages * msg * 8) as f64 / s / 1e9
    );
}
