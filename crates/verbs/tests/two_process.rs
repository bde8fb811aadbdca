//! Two processes: this test binary re-runs itself as the peer (the `peer_process`
//! test, ignored unless `WEFT_PEER_ROLE` is set) and talks to it over a real link.
//!
//! Roles of the peer:
//! - `passive`: accept one RC connection, advertise a 1 MiB region (address and rkey
//!   in the accept's private data), then never touch weft again until the connection
//!   closes — one-sided operations must complete against it. Then it prints how the
//!   by-reference payloads it took were copied (`PULLS mapped cma errors`).
//! - `echo-rc` / `echo-ud`: post receives and send every message back (SEND with the
//!   same immediate; for a WRITE with immediate, the bytes it wrote to the echo area),
//!   until the connection closes. The client also checks multi-SGE inline unsignaled
//!   SENDs through it.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionChannel, CompletionQueue, Context, DeviceConfig, LinkKind, Progress,
    QpInitAttr, QpType, RecvWr, RemoteAddr, SendWr, WcOpcode, WcStatus, WrOp, GRH_LEN,
};

const REGION: usize = 1 << 20;
/// Where the echo peer expects WRITEs with immediate (past its 16 receive slots).
const ECHO_AREA: usize = 16 * (64 * 1024 + GRH_LEN);

fn kind_name(k: LinkKind) -> &'static str {
    match k {
        LinkKind::Udp => "udp",
        LinkKind::Shm => "shm",
    }
}

/// The peer's side of every scenario.
#[test]
#[ignore = "run by the two-process tests as their peer"]
fn peer_process() {
    let Ok(role) = std::env::var("WEFT_PEER_ROLE") else {
        return;
    };
    let kind = match std::env::var("WEFT_PEER_LINK").as_deref() {
        Ok("shm") => LinkKind::Shm,
        _ => LinkKind::Udp,
    };
    if role == "srq-channel" {
        srq_channel_peer(kind);
        return;
    }
    let qp_type = if role == "echo-ud" {
        QpType::Ud
    } else {
        QpType::Rc
    };
    // Room for 16 receive slots and the echo area behind them; on the device named
    // by WEFT_PEER_DEVICE when set.
    let mut s = match std::env::var("WEFT_PEER_DEVICE") {
        Ok(name) => side_on(Context::open(&name).unwrap(), qp_type, 2 * REGION),
        Err(_) => side(kind, Progress::Thread, qp_type, 2 * REGION),
    };
    let listener = Listener::bind(&s.ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    println!("LISTEN {}", listener.local_addr().unwrap());
    let mut param = ConnParam::default();
    let mut pd = s.mr.addr().to_be_bytes().to_vec();
    pd.extend_from_slice(&s.mr.rkey().to_be_bytes());
    param.private_data = pd;
    // INIT first, so the echo's receives are posted before the client can send (a UD
    // datagram that finds no receive is dropped).
    cm::init_qp(&mut s.qp, &param).unwrap();
    let slot = 64 * 1024 + GRH_LEN;
    if role != "passive" {
        s.qp.post_recv((0..16u64).map(|i| RecvWr {
            wr_id: i,
            sg_list: [s.mr.sge(i as usize * slot, slot as u32)].into(),
        }))
        .unwrap();
    }
    let req = listener.get_request(Duration::from_secs(30)).unwrap();
    let conn = req.accept(&mut s.qp, &param).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    if role == "passive" {
        // Never call weft again: wait for the side channel to close (the QP goes to
        // ERR) or the deadline.
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            if matches!(s.qp.query(), Some((weft_verbs::QpState::Err, _))) {
                break;
            }
        }
        drop(conn);
        let st = s.ctx.stats();
        let e = st.pull_errors;
        let errors = e.no_peer + e.refused + e.gone + e.fault + e.short;
        println!("PULLS {} {} {errors}", st.pulls.mapped, st.pulls.cma);
        return;
    }
    // Completions to handle, in order: a receive may complete while the peer waits
    // for its echo's send completion (the transport orders the client's next request
    // and its ACK of the echo either way), and waits its turn here.
    let mut todo = std::collections::VecDeque::new();
    let mut out = Vec::new();
    while Instant::now() < deadline {
        if todo.is_empty() {
            out.clear();
            if s.cq.poll(&mut out, 16) == 0 {
                if matches!(s.qp.query(), Some((weft_verbs::QpState::Err, _))) {
                    break;
                }
                std::thread::yield_now();
                continue;
            }
            todo.extend(out.drain(..));
        }
        while let Some(c) = todo.pop_front() {
            let c = &c;
            if c.status != WcStatus::Success {
                return;
            }
            if !c.opcode.is_recv() {
                continue;
            }
            let i = c.wr_id as usize;
            let (off, len) = if c.opcode == WcOpcode::RecvRdmaWithImm {
                // A WRITE with immediate landed in the echo area: send that back.
                (ECHO_AREA, c.byte_len as usize)
            } else if qp_type == QpType::Ud {
                (i * slot + GRH_LEN, c.byte_len as usize - GRH_LEN)
            } else {
                (i * slot, c.byte_len as usize)
            };
            let mut wr = SendWr::new(
                1000 + c.wr_id,
                WrOp::Send { imm: c.imm },
                vec![s.mr.sge(off, len as u32)],
            );
            if qp_type == QpType::Ud {
                let ah = s.pd.create_ah_from_wc(c).unwrap();
                wr.ud = Some(ah.dest(c.src_qp.unwrap(), param.qkey));
            }
            s.qp.post_send([wr]).unwrap();
            // Wait for the echo to leave before reusing the buffer.
            loop {
                let Some(got) = s.cq.wait(1, Duration::from_secs(10)).pop() else {
                    return;
                };
                if got.opcode.is_recv() {
                    todo.push_back(got);
                    continue;
                }
                if got.status != WcStatus::Success {
                    return;
                }
                break;
            }
            s.qp.post_recv([RecvWr {
                wr_id: c.wr_id,
                sg_list: [s.mr.sge(i * slot, slot as u32)].into(),
            }])
            .unwrap();
        }
    }
    drop(conn);
}

/// A running peer process; killed on drop.
struct Peer {
    child: Child,
    addr: std::net::SocketAddr,
    /// The numbers of the peer's `PULLS` line, when it prints one.
    pulls: std::sync::mpsc::Receiver<String>,
}

impl Peer {
    fn start(role: &str, kind: LinkKind) -> Peer {
        Peer::start_on(role, kind, None)
    }

    /// As [`Peer::start`], with the peer's device opened by name.
    fn start_on(role: &str, kind: LinkKind, device: Option<&str>) -> Peer {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        if let Some(d) = device {
            cmd.env("WEFT_PEER_DEVICE", d);
        }
        let mut child = cmd
            .args([
                "--exact",
                "peer_process",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("WEFT_PEER_ROLE", role)
            .env("WEFT_PEER_LINK", kind_name(kind))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (ptx, pulls) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // libtest may print "test peer_process ... " in front of it.
                if let Some(i) = line.find("LISTEN ") {
                    let _ = tx.send(line[i + 7..].trim().to_string());
                }
                if let Some(i) = line.find("PULLS ") {
                    let _ = ptx.send(line[i + 6..].trim().to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("peer did not start")
            .parse()
            .unwrap();
        Peer { child, addr, pulls }
    }

    /// The passive peer's by-reference copies after it exited: (through its mapping
    /// of our shared regions, by `process_vm_readv`, failed).
    fn pulls(&self) -> (u64, u64, u64) {
        let line = self
            .pulls
            .recv_timeout(Duration::from_secs(10))
            .expect("the peer printed no PULLS line");
        let n: Vec<u64> = line
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        (n[0], n[1], n[2])
    }

    fn wait_exit(&mut self, limit: Duration) -> bool {
        let t = Instant::now();
        while t.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn remote_region(private: &[u8]) -> RemoteAddr {
    let addr = u64::from_be_bytes(private[..8].try_into().unwrap());
    let rkey = u32::from_be_bytes(private[8..12].try_into().unwrap());
    RemoteAddr { addr, rkey }
}

fn at(r: RemoteAddr, off: u64) -> RemoteAddr {
    RemoteAddr {
        addr: r.addr + off,
        rkey: r.rkey,
    }
}

fn one_sided_against_a_passive_process(kind: LinkKind) {
    let mut peer = Peer::start("passive", kind);
    let mut me = side(kind, Progress::Thread, QpType::Rc, REGION);
    let conn = cm::connect(&mut me.qp, peer.addr, &ConnParam::default()).unwrap();
    let r = remote_region(&conn.remote().private_data);
    let data: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    me.mr.write(0, &data).unwrap();
    // WRITE, then READ it back into another part of our region.
    me.qp
        .post_send([
            SendWr::new(
                1,
                WrOp::Write {
                    remote: at(r, 8192),
                    imm: None,
                },
                vec![me.mr.sge(0, 300_000)],
            ),
            SendWr::new(
                2,
                WrOp::Read {
                    remote: at(r, 8192),
                },
                vec![me.mr.sge(400_000, 300_000)],
            ),
        ])
        .unwrap();
    let c = ok(&mut me.cq, 2);
    assert_eq!(
        (c[0].opcode, c[1].opcode),
        (WcOpcode::RdmaWrite, WcOpcode::RdmaRead)
    );
    assert_eq!(me.mr.to_vec(400_000, 300_000).unwrap(), data);
    // Atomics on the peer's first word (zero): +5, then CAS 5 -> 11, then read it.
    me.qp
        .post_send([
            SendWr::new(
                3,
                WrOp::FetchAdd { remote: r, add: 5 },
                vec![me.mr.sge(800_000, 8)],
            ),
            SendWr::new(
                4,
                WrOp::CompareSwap {
                    remote: r,
                    compare: 5,
                    swap: 11,
                },
                vec![me.mr.sge(800_008, 8)],
            ),
            SendWr::new(5, WrOp::Read { remote: r }, vec![me.mr.sge(800_016, 8)]),
        ])
        .unwrap();
    ok(&mut me.cq, 3);
    assert_eq!(me.mr.load_u64(800_000).unwrap(), 0);
    assert_eq!(me.mr.load_u64(800_008).unwrap(), 5);
    assert_eq!(me.mr.load_u64(800_016).unwrap(), 11);
    // An rkey the peer never issued: remote access error, nothing written.
    me.qp
        .post_send([SendWr::new(
            6,
            WrOp::Write {
                remote: RemoteAddr {
                    addr: r.addr,
                    rkey: r.rkey ^ 1,
                },
                imm: None,
            },
            vec![me.mr.sge(0, 8)],
        )])
        .unwrap();
    let c = me.cq.wait(1, T);
    assert_eq!(c[0].status, WcStatus::RemAccessErr, "{c:?}");
    conn.disconnect();
    assert!(
        peer.wait_exit(Duration::from_secs(10)),
        "peer did not see the disconnect"
    );
}

#[test]
fn shm_port_0_devices_in_two_processes_get_distinct_names_and_talk() {
    let peer = Peer::start_on("passive", LinkKind::Shm, Some("shm:127.0.0.1:0"));
    let mut me = side_on(
        Context::open("shm:127.0.0.1:0").unwrap(),
        QpType::Rc,
        REGION,
    );
    let conn = cm::connect(&mut me.qp, peer.addr, &ConnParam::default()).unwrap();
    let (mine, theirs) = (me.ctx.local_addr(), conn.remote().addr);
    assert_ne!(mine, theirs, "two processes were given one shm name");
    for n in [mine, theirs] {
        assert_eq!(n.ip(), std::net::IpAddr::from([127, 0, 0, 1]));
        assert_ne!(n.port(), 0, "port 0 was kept literally");
    }
    let r = remote_region(&conn.remote().private_data);
    me.mr.write(0, b"shm names").unwrap();
    me.qp
        .post_send([SendWr::new(
            1,
            WrOp::Write {
                remote: r,
                imm: None,
            },
            vec![me.mr.sge(0, 9)],
        )])
        .unwrap();
    ok(&mut me.cq, 1);
    me.qp
        .post_send([SendWr::new(
            2,
            WrOp::Read { remote: r },
            vec![me.mr.sge(100, 9)],
        )])
        .unwrap();
    ok(&mut me.cq, 1);
    assert_eq!(me.mr.to_vec(100, 9).unwrap(), b"shm names");
}

/// One copy on shm between two processes: a large WRITE goes by reference (one
/// packet naming our spans; the peer's engine pulls the bytes from this process by
/// cross-memory attach) and lands byte-exact, as a READ of it shows; the peer never
/// calls weft meanwhile.
#[test]
fn shm_large_writes_move_once_between_two_processes() {
    let Some(()) = weft_testkit::require("cross-memory attach", cross_memory_attach()) else {
        return;
    };
    let mut peer = Peer::start("passive", LinkKind::Shm);
    // Memory the peer has not mapped goes by reference at any size here.
    let mut cfg = DeviceConfig::local(LinkKind::Shm);
    cfg.progress = Progress::Thread;
    cfg.one_copy_cma_min = 0;
    let mut me = side_on(Context::open_with(cfg).unwrap(), QpType::Rc, REGION);
    let shared = me.pd.alloc_shared_mr(100_000, Access::ALL).unwrap();
    let conn = cm::connect(&mut me.qp, peer.addr, &ConnParam::default()).unwrap();
    let r = remote_region(&conn.remote().private_data);
    // A small WRITE first brings the shm connection up (the peer probes us then).
    me.mr.write(0, b"warm").unwrap();
    me.qp
        .post_send([SendWr::new(
            1,
            WrOp::Write {
                remote: r,
                imm: None,
            },
            vec![me.mr.sge(0, 4)],
        )])
        .unwrap();
    ok(&mut me.cq, 1);
    let data: Vec<u8> = (0..400_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
        .collect();
    me.mr.write(0, &data).unwrap();
    me.qp
        .post_send([
            SendWr::new(
                2,
                WrOp::Write {
                    remote: at(r, 12_345),
                    imm: None,
                },
                vec![me.mr.sge(0, 150_000), me.mr.sge(150_000, 250_000)],
            ),
            SendWr::new(
                3,
                WrOp::Read {
                    remote: at(r, 12_345),
                },
                vec![me.mr.sge(500_000, 400_000)],
            ),
        ])
        .unwrap();
    ok(&mut me.cq, 2);
    assert_eq!(me.mr.to_vec(500_000, 400_000).unwrap(), data);
    // One WRITE from a shared region and ordinary memory: three chunks, the first
    // inside the shared region (copied from the peer's mapping), the others not
    // (process_vm_readv).
    shared.write(0, &data[..100_000]).unwrap();
    me.mr.write(0, &data[100_000..200_000]).unwrap();
    me.qp
        .post_send([
            SendWr::new(
                4,
                WrOp::Write {
                    remote: at(r, 7),
                    imm: None,
                },
                vec![shared.sge(0, 100_000), me.mr.sge(0, 100_000)],
            ),
            SendWr::new(
                5,
                WrOp::Read { remote: at(r, 7) },
                vec![me.mr.sge(300_000, 200_000)],
            ),
        ])
        .unwrap();
    ok(&mut me.cq, 2);
    assert_eq!(me.mr.to_vec(300_000, 200_000).unwrap(), &data[..200_000]);
    let st = me.ctx.stats().transport;
    assert_eq!(st.by_reference_sent, 2, "{st:?}");
    conn.disconnect();
    assert!(
        peer.wait_exit(Duration::from_secs(10)),
        "peer did not see the disconnect"
    );
    // 400 000 B: 6 chunks by process_vm_readv; then 1 mapped and 2 by the fallback.
    let (mapped, cma, failed) = peer.pulls();
    assert!(mapped >= 1 && cma >= 8, "mapped {mapped}, cma {cma}");
    assert_eq!(failed, 0);
}

/// The mapping path between two processes: WRITEs from regions allocated with
/// `alloc_shared_mr` — one before the connection (offered behind the hello), one
/// after it (offered on the live connection) — are copied by the peer from its
/// read-only mapping of them, never by `process_vm_readv`, and land byte-exact. A
/// WRITE from ordinary memory goes through the ring (the default
/// `one_copy_cma_min`), and one from a withdrawn region's successor still lands.
#[test]
fn shm_writes_from_shared_memory_are_copied_from_the_peers_mapping() {
    let Some(()) = weft_testkit::require("cross-memory attach", cross_memory_attach()) else {
        return;
    };
    let mut peer = Peer::start("passive", LinkKind::Shm);
    let mut me = side(LinkKind::Shm, Progress::Thread, QpType::Rc, REGION);
    let early = me.pd.alloc_shared_mr(400_000, Access::ALL).unwrap();
    assert!(early.is_shared() && !me.mr.is_shared());
    let conn = cm::connect(&mut me.qp, peer.addr, &ConnParam::default()).unwrap();
    let r = remote_region(&conn.remote().private_data);
    let write = |me: &mut Side, id, src: Vec<weft_verbs::Sge>, off| {
        me.qp
            .post_send([SendWr::new(
                id,
                WrOp::Write {
                    remote: at(r, off),
                    imm: None,
                },
                src,
            )])
            .unwrap();
        ok(&mut me.cq, 1);
    };
    let read_back = |me: &mut Side, off, len: usize| {
        me.qp
            .post_send([SendWr::new(
                99,
                WrOp::Read { remote: at(r, off) },
                vec![me.mr.sge(REGION - len, len as u32)],
            )])
            .unwrap();
        ok(&mut me.cq, 1);
        me.mr.to_vec(REGION - len, len).unwrap()
    };
    me.mr.write(0, b"warm").unwrap();
    let src = vec![me.mr.sge(0, 4)];
    write(&mut me, 1, src, 0);
    let data: Vec<u8> = (0..400_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    early.write(0, &data).unwrap();
    write(
        &mut me,
        2,
        vec![early.sge(0, 150_000), early.sge(150_000, 250_000)],
        3,
    );
    assert_eq!(read_back(&mut me, 3, 400_000), data);
    // Registered while connected.
    let late = me.pd.alloc_shared_mr(200_000, Access::ALL).unwrap();
    late.write(0, &data[..200_000]).unwrap();
    write(&mut me, 3, vec![late.sge(0, 200_000)], 500_000);
    assert_eq!(read_back(&mut me, 500_000, 200_000), &data[..200_000]);
    // Withdrawn; a new one, likely at the same addresses, with other bytes.
    drop(late);
    let again = me.pd.alloc_shared_mr(200_000, Access::ALL).unwrap();
    again.write(0, &data[200_000..400_000]).unwrap();
    write(&mut me, 4, vec![again.sge(0, 200_000)], 500_000);
    assert_eq!(read_back(&mut me, 500_000, 200_000), &data[200_000..]);
    // Ordinary memory: through the ring.
    me.mr.write(0, &data[..100_000]).unwrap();
    let src = vec![me.mr.sge(0, 100_000)];
    write(&mut me, 5, src, 0);
    assert_eq!(read_back(&mut me, 0, 100_000), &data[..100_000]);
    let st = me.ctx.stats().transport;
    assert_eq!(st.by_reference_sent, 3, "{st:?}");
    conn.disconnect();
    assert!(
        peer.wait_exit(Duration::from_secs(10)),
        "peer did not see the disconnect"
    );
    // 6 + 3 + 3 chunks, every one from the mapping.
    let (mapped, cma, failed) = peer.pulls();
    assert_eq!((cma, failed), (0, 0), "mapped {mapped}");
    assert!(mapped >= 12, "mapped {mapped}");
}

#[test]
fn udp_one_sided_ops_complete_against_a_process_that_never_polls() {
    one_sided_against_a_passive_process(LinkKind::Udp);
}

fn echo(kind: LinkKind, qp_type: QpType) {
    let mut peer = Peer::start(
        if qp_type == QpType::Ud {
            "echo-ud"
        } else {
            "echo-rc"
        },
        kind,
    );
    let mut me = side(kind, Progress::Thread, qp_type, REGION);
    let conn = cm::connect(&mut me.qp, peer.addr, &ConnParam::default()).unwrap();
    let remote = conn.remote().clone();
    let sizes: &[usize] = if qp_type == QpType::Ud {
        &[1, 64, 1000]
    } else {
        &[1, 64, 4096, 60_000]
    };
    for (n, &size) in sizes.iter().enumerate() {
        let payload: Vec<u8> = (0..size).map(|i| (i + n) as u8).collect();
        me.mr.write(0, &payload).unwrap();
        me.qp
            .post_recv([RecvWr {
                wr_id: 50,
                sg_list: [me.mr.sge(100_000, 70_000)].into(),
            }])
            .unwrap();
        let mut wr = SendWr::new(
            n as u64,
            WrOp::Send {
                imm: Some(n as u32),
            },
            vec![me.mr.sge(0, size as u32)],
        );
        if qp_type == QpType::Ud {
            wr.ud = Some(
                me.pd
                    .create_ah(remote.addr)
                    .unwrap()
                    .dest(remote.qpn, remote.qkey),
            );
        }
        me.qp.post_send([wr]).unwrap();
        let c = ok(&mut me.cq, 2);
        let recv = c.iter().find(|c| c.opcode == WcOpcode::Recv).expect("echo");
        let skip = if qp_type == QpType::Ud { GRH_LEN } else { 0 };
        assert_eq!(recv.byte_len as usize, size + skip);
        assert_eq!(recv.imm, Some(n as u32));
        assert_eq!(me.mr.to_vec(100_000 + skip, size).unwrap(), payload);
    }
    if qp_type == QpType::Rc {
        let r = remote_region(&remote.private_data);
        // WRITE with immediate into the peer's echo area: the peer's receive completes
        // with the immediate and it SENDs the bytes back.
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        me.mr.write(0, &payload).unwrap();
        me.qp
            .post_recv([RecvWr {
                wr_id: 60,
                sg_list: [me.mr.sge(100_000, 70_000)].into(),
            }])
            .unwrap();
        me.qp
            .post_send([SendWr::new(
                70,
                WrOp::Write {
                    remote: at(r, ECHO_AREA as u64),
                    imm: Some(0xabcd),
                },
                vec![me.mr.sge(0, 10_000)],
            )])
            .unwrap();
        let c = ok(&mut me.cq, 2);
        let recv = c
            .iter()
            .find(|c| c.opcode == WcOpcode::Recv)
            .expect("echo of the WRITE");
        assert_eq!((recv.byte_len, recv.imm), (10_000, Some(0xabcd)));
        assert_eq!(me.mr.to_vec(100_000, 10_000).unwrap(), payload);
        // Three SGEs gathered inline, unsignaled: only the echo completes.
        me.mr.write(0, b"one|").unwrap();
        me.mr.write(50, b"two|").unwrap();
        me.mr.write(90, b"three").unwrap();
        me.qp
            .post_recv([RecvWr {
                wr_id: 61,
                sg_list: [me.mr.sge(100_000, 70_000)].into(),
            }])
            .unwrap();
        let mut wr = SendWr::new(
            71,
            WrOp::Send { imm: None },
            vec![me.mr.sge(0, 4), me.mr.sge(50, 4), me.mr.sge(90, 5)],
        );
        wr.inline = true;
        wr.signaled = false;
        me.qp.post_send([wr]).unwrap();
        me.mr.write(0, b"XXXX").unwrap(); // inline: the buffer is free at once
        let c = ok(&mut me.cq, 1);
        assert_eq!(
            (c[0].wr_id, c[0].byte_len),
            (61, 13),
            "only the echo completes"
        );
        assert_eq!(me.mr.to_vec(100_000, 13).unwrap(), b"one|two|three");
    }
    drop(conn);
    assert!(peer.wait_exit(Duration::from_secs(10)));
}

#[test]
fn udp_rc_send_with_imm_echoes_through_another_process() {
    echo(LinkKind::Udp, QpType::Rc);
}

#[test]
fn udp_ud_send_echoes_through_another_process() {
    echo(LinkKind::Udp, QpType::Ud);
}

fn killed_peer(kind: LinkKind) {
    let peer = Peer::start("passive", kind);
    // The peer's whole region per WRITE: over shm the one-copy path moves 100 of them
    // (200 MiB) in tens of milliseconds, not a few.
    let mut me = side(kind, Progress::Thread, QpType::Rc, 2 * REGION);
    let conn = cm::connect(&mut me.qp, peer.addr, &ConnParam::default()).unwrap();
    let r = remote_region(&conn.remote().private_data);
    // A deep queue of 2 MiB WRITEs: still in flight when the peer dies.
    let wrs: Vec<SendWr> = (0..100)
        .map(|i| {
            SendWr::new(
                i,
                WrOp::Write {
                    remote: r,
                    imm: None,
                },
                vec![me.mr.sge(0, 2 * REGION as u32)],
            )
        })
        .collect();
    me.qp.post_send(wrs).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    drop(peer); // SIGKILL
    let t = Instant::now();
    let c = collect(&mut me.cq, 100, &[]);
    let elapsed = t.elapsed();
    assert_eq!(c.len(), 100, "every WRITE completes, in error or not");
    let errors = c.iter().filter(|c| c.status != WcStatus::Success).count();
    assert!(
        errors > 0,
        "the kill came after everything finished: raise the load"
    );
    assert!(
        c.iter().all(|c| matches!(
            c.status,
            WcStatus::Success | WcStatus::WrFlushErr | WcStatus::RetryExcErr
        )),
        "{c:?}"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "error completions took {elapsed:?}"
    );
    eprintln!("peer killed: {errors} of 100 WRITEs failed, last completion after {elapsed:?}");
}

#[test]
fn udp_killed_peer_leaves_error_completions_not_a_hang() {
    killed_peer(LinkKind::Udp);
}

#[test]
fn udp_the_transport_alone_fails_a_silent_peer_within_its_retry_budget() {
    // No side channel: the QP is brought up by hand against a UDP port nobody
    // answers on, so only the transport's retry counter can end the wait.
    let mut me = side(LinkKind::Udp, Progress::Thread, QpType::Rc, 4096);
    let void = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = weft_verbs::Bringup {
        access: Access::ALL,
        qkey: 0,
        path_mtu: weft_verbs::Mtu::M1024,
        path: Some(me.ctx.path_to(void.local_addr().unwrap()).unwrap()),
        dest_qpn: 0x1234,
        rq_psn: 0,
        sq_psn: 0,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
        timeout: 8, // 1 ms
        retry_cnt: 3,
        rnr_retry: 0,
        recovery: weft_verbs::Recovery::GoBackN,
        max_inflight: 64,
        peer_ack_delay_us: 0,
    };
    for s in b.steps(QpType::Rc) {
        me.qp.modify(&s).unwrap();
    }
    me.qp
        .post_send([SendWr::new(
            1,
            WrOp::Send { imm: None },
            vec![me.mr.sge(0, 8)],
        )])
        .unwrap();
    let t = Instant::now();
    let c = collect(&mut me.cq, 1, &[]);
    assert_eq!(c[0].status, WcStatus::RetryExcErr);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let _ = CompletionQueue::id;
    let _ = QpInitAttr::new;
}

#[test]
fn shm_one_sided_ops_complete_against_a_process_that_never_polls() {
    one_sided_against_a_passive_process(LinkKind::Shm);
}

#[test]
fn shm_rc_send_with_imm_echoes_through_another_process() {
    echo(LinkKind::Shm, QpType::Rc);
}

#[test]
fn shm_ud_send_echoes_through_another_process() {
    echo(LinkKind::Shm, QpType::Ud);
}

#[test]
fn shm_killed_peer_leaves_error_completions_not_a_hang() {
    killed_peer(LinkKind::Shm);
}

/// Peer role `srq-channel`: its QP takes receives from a shared receive queue, its
/// receive CQ is tied to a completion channel, and it sleeps in `get_cq_event` between
/// messages instead of polling; every message is echoed back.
fn srq_channel_peer(kind: LinkKind) {
    let ctx = device(kind, Progress::Thread);
    let pd = ctx.alloc_pd();
    let ch = CompletionChannel::new(&ctx).unwrap();
    let mut rcq = CompletionQueue::new(&ctx, 64, Some(&ch));
    let mut scq = CompletionQueue::new(&ctx, 64, None);
    let mut srq = pd.create_srq(16);
    let mut qp = pd
        .create_qp(&scq, &rcq, Some(&srq), QpInitAttr::new(QpType::Rc))
        .unwrap();
    let mr = pd.alloc_mr(16 * 4096, Access::ALL);
    srq.post_recv((0..16u64).map(|i| RecvWr {
        wr_id: i,
        sg_list: [mr.sge(i as usize * 4096, 4096)].into(),
    }))
    .unwrap();
    let listener = Listener::bind(&ctx, "127.0.0.1:0".parse().unwrap()).unwrap();
    println!("LISTEN {}", listener.local_addr().unwrap());
    let req = listener.get_request(Duration::from_secs(30)).unwrap();
    let conn = req.accept(&mut qp, &ConnParam::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    let mut events = 0u32;
    while Instant::now() < deadline {
        rcq.req_notify();
        out.clear();
        if rcq.poll(&mut out, 16) == 0 {
            match ch.get_cq_event(Duration::from_millis(200)) {
                Ok(_) => {
                    events += 1;
                    rcq.ack_events(1);
                }
                Err(_) => {
                    if matches!(qp.query(), Some((weft_verbs::QpState::Err, _))) {
                        break;
                    }
                }
            }
            continue;
        }
        for c in &out {
            if c.status != WcStatus::Success {
                drop(conn);
                return;
            }
            assert!(c.from_srq);
            let off = c.wr_id as usize * 4096;
            // The immediate tells the client how many channel events woke us so far.
            qp.post_send([SendWr::new(
                c.wr_id,
                WrOp::Send { imm: Some(events) },
                vec![mr.sge(off, c.byte_len)],
            )])
            .unwrap();
            assert_eq!(scq.wait(1, Duration::from_secs(10)).len(), 1);
            srq.post_recv([RecvWr {
                wr_id: c.wr_id,
                sg_list: [mr.sge(off, 4096)].into(),
            }])
            .unwrap();
        }
    }
    drop(conn);
}

fn srq_and_channel_across_processes(kind: LinkKind) {
    let mut peer = Peer::start("srq-channel", kind);
    let mut me = side(kind, Progress::Thread, QpType::Rc, REGION);
    let conn = cm::connect(&mut me.qp, peer.addr, &ConnParam::default()).unwrap();
    let mut last_events = 0;
    for n in 0..3u32 {
        // Give the peer time to fall asleep in its channel wait.
        std::thread::sleep(Duration::from_millis(30));
        let msg = format!("message {n}");
        me.mr.write(0, msg.as_bytes()).unwrap();
        me.qp
            .post_recv([RecvWr {
                wr_id: 50,
                sg_list: [me.mr.sge(4096, 4096)].into(),
            }])
            .unwrap();
        me.qp
            .post_send([SendWr::new(
                n.into(),
                WrOp::Send { imm: None },
                vec![me.mr.sge(0, msg.len() as u32)],
            )])
            .unwrap();
        let c = ok(&mut me.cq, 2);
        let r = c.iter().find(|c| c.opcode == WcOpcode::Recv).expect("echo");
        assert_eq!(me.mr.to_vec(4096, msg.len()).unwrap(), msg.as_bytes());
        let events = r.imm.unwrap();
        assert!(
            events > last_events,
            "message {n} did not wake the peer through its channel"
        );
        last_events = events;
    }
    drop(conn);
    assert!(peer.wait_exit(Duration::from_secs(10)));
}

#[test]
fn udp_srq_and_completion_channel_wake_up_across_processes() {
    srq_and_channel_across_processes(LinkKind::Udp);
}

#[test]
fn shm_srq_and_completion_channel_wake_up_across_processes() {
    srq_and_channel_across_processes(LinkKind::Shm);
}
