//! UC, UD and shared receive queues.
mod common;
use common::*;
use std::net::Ipv4Addr;
use weft_transport::sim::{
    run_mix, ConnectOptions, LinkConfig, MixConfig, OpMix, Pair, Side, ADDR_A, ADDR_B,
};
use weft_transport::{
    grh_for, Config, Instant, Mtu, PostError, QpAttr, QpInit, QpState, QpType, SendWr, Transmit,
    TxBuffers, UdDest, WcOpcode, WcStatus, WrOp, GRH_LEN,
};
use weft_wire::roce::{IbPacket, IcrcPath, Psn};

const MEM: u64 = 4 << 20;

#[test]
fn uc_send_and_write_on_a_clean_link() {
    let mut p = clean_pair(MEM as usize, 4);
    let c = p.connect(QpType::Uc, &ConnectOptions::default());
    let cfg = MixConfig {
        ops: 500,
        max_len: 5000,
        window: 8,
        mix: OpMix::SEND_WRITE,
        seed: 4,
        time_limit_us: 10_000_000,
        unreliable: true,
        recvs: 0,
    };
    let r = run_mix(&mut p, &c, &cfg);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn uc_rejects_read_and_atomics_at_post() {
    let mut p = clean_pair(MEM as usize, 4);
    let c = p.connect(QpType::Uc, &ConnectOptions::default());
    let (ra, rb) = big_regions(&mut p, MEM);
    let wr = SendWr::new(
        1,
        WrOp::Read {
            remote: remote(&rb, rb.addr),
        },
        vec![sge(&ra, ra.addr, 8)],
    );
    assert_eq!(p.a.post_send(c.qpn_a, wr), Err(PostError::UnsupportedOp));
}

/// UC under loss: messages may vanish, but every receive that completes holds exactly
/// the bytes of one message, in sending order, never a mix of two.
#[test]
fn uc_loss_drops_whole_messages_only() {
    let link = LinkConfig {
        loss: 0.05,
        reorder: 0.02,
        duplicate: 0.01,
        ..LinkConfig::clean(5)
    };
    let mut p = Pair::new(Config::default(), MEM as usize, link, link, 5);
    let o = ConnectOptions {
        mtu: Mtu::M256,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Uc, &o);
    let (ra, rb) = big_regions(&mut p, MEM);
    let n = 400u64;
    let len = 700usize; // three packets at MTU 256
    for i in 0..n {
        p.a.mem_mut().fill(ra.addr + i * 1024, &pattern(i, len));
        p.b.post_recv(c.qpn_b, recv(i, vec![sge(&rb, rb.addr + i * 1024, 1024)]))
            .unwrap();
    }
    for i in 0..n {
        let mut wr = send(i, vec![sge(&ra, ra.addr + i * 1024, len as u32)]);
        wr.op = WrOp::Send {
            imm: Some(i as u32),
        };
        p.a.post_send(c.qpn_a, wr).unwrap();
    }
    settle(&mut p, 10_000_000);
    let ca = completions(&mut p, Side::A);
    assert_eq!(ca.len() as u64, n);
    assert!(ca.iter().all(|c| c.status == WcStatus::Success));
    let cb = completions(&mut p, Side::B);
    assert!(
        !cb.is_empty() && (cb.len() as u64) < n,
        "{} of {n} arrived",
        cb.len()
    );
    let mut last = None;
    for (slot, c) in cb.iter().enumerate() {
        assert_eq!(c.status, WcStatus::Success);
        let seq = u64::from(c.imm.unwrap());
        assert!(last.is_none_or(|l| seq > l), "out of order");
        last = Some(seq);
        assert_eq!(c.byte_len as usize, len);
        // Receives are consumed in order, so completion k used receive buffer k.
        assert_eq!(c.wr_id, slot as u64);
        assert_eq!(
            p.b.mem().bytes(rb.addr + slot as u64 * 1024, len),
            pattern(seq, len).as_slice()
        );
    }
    assert_no_stray_writes(p.b.mem());
}

fn ud_pair() -> (Pair, u32, u32) {
    let mut p = clean_pair(MEM as usize, 6);
    let c = p.connect(QpType::Ud, &ConnectOptions::default());
    (p, c.qpn_a, c.qpn_b)
}

fn ud_dest(qpn_b: u32, qkey: u32) -> UdDest {
    UdDest {
        path: IcrcPath::v4(ADDR_A, ADDR_B, 0xc001),
        qpn: qpn_b,
        qkey,
    }
}

#[test]
fn ud_send_writes_grh_then_payload() {
    let (mut p, qa, qb) = ud_pair();
    let (ra, rb) = big_regions(&mut p, MEM);
    p.a.mem_mut().fill(ra.addr, b"datagram!");
    p.b.post_recv(
        qb,
        recv(1, vec![sge(&rb, rb.addr, 20), sge(&rb, rb.addr + 100, 100)]),
    )
    .unwrap();
    let mut wr = SendWr::new(1, WrOp::Send { imm: Some(77) }, vec![sge(&ra, ra.addr, 9)]);
    wr.ud = Some(ud_dest(qb, 0x1111_1111));
    p.a.post_send(qa, wr).unwrap();
    settle(&mut p, 10_000);
    let cb = completions(&mut p, Side::B);
    assert_eq!(cb.len(), 1);
    let c = cb[0];
    assert_eq!(
        (c.status, c.opcode, c.byte_len, c.imm, c.src_qp),
        (WcStatus::Success, WcOpcode::Recv, 49, Some(77), Some(qa))
    );
    let path = c.src_path.unwrap();
    // BTH 12 + DETH 8 + ImmDt 4 + 9 payload + 3 pad + ICRC 4 = 40 bytes on the wire.
    let grh = grh_for(&path, 40);
    let mut got = p.b.mem().bytes(rb.addr, 20).to_vec();
    got.extend_from_slice(p.b.mem().bytes(rb.addr + 100, 29));
    assert_eq!(&got[..GRH_LEN], &grh);
    // rdma_rxe layout for IPv4: 20 zero bytes, then the IPv4 header.
    assert_eq!(&got[..20], &[0u8; 20]);
    assert_eq!(got[20], 0x45);
    assert_eq!(&got[32..36], &ADDR_A.octets());
    assert_eq!(&got[GRH_LEN..], b"datagram!");
    assert_eq!(completions(&mut p, Side::A)[0].status, WcStatus::Success);
}

/// The buffers of one transmit burst, kept with their `Transmit`s.
#[derive(Default)]
struct Burst {
    cur: Vec<u8>,
    sent: Vec<(Transmit, Vec<u8>)>,
}

impl TxBuffers for Burst {
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        self.cur.resize(8192, 0);
        Some(&mut self.cur)
    }

    fn written(&mut self, t: Transmit) -> bool {
        self.sent.push((t, self.cur[..t.len].to_vec()));
        true
    }
}

/// Two datagrams of one UD QP to two destinations leave in one burst, each with its
/// own work request's path and destination QPN: the path is read per packet, not kept
/// from the first (or the last) request of the burst.
#[test]
fn ud_two_destinations_in_one_burst_keep_their_own_paths() {
    let (mut p, qa, qb) = ud_pair();
    let (ra, _) = big_regions(&mut p, MEM);
    let dests = [
        UdDest {
            path: IcrcPath::v4(ADDR_A, ADDR_B, 0xc001),
            qpn: qb,
            qkey: 0x1111_1111,
        },
        UdDest {
            path: IcrcPath::v4(ADDR_A, Ipv4Addr::new(198, 18, 9, 9), 0xc002),
            qpn: 0x00ab_cdef,
            qkey: 0x1111_1111,
        },
    ];
    for (i, d) in dests.iter().enumerate() {
        let mut wr = SendWr::new(
            i as u64,
            WrOp::Send { imm: None },
            vec![sge(&ra, ra.addr, 8)],
        );
        wr.ud = Some(*d);
        p.a.post_send(qa, wr).unwrap();
    }
    let mut burst = Burst::default();
    assert_eq!(p.a.poll_transmit_burst(Instant(0), &mut burst), 2);
    for ((t, bytes), d) in burst.sent.iter().zip(&dests) {
        assert_eq!(t.path, d.path);
        assert_eq!(t.qpn, qa);
        let pkt = IbPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(pkt.repr().bth.dest_qp, d.qpn);
    }
}

#[test]
fn ud_qkey_with_its_top_bit_set_means_the_qps_own() {
    // ibv_post_send: "if the MSB of the Q_Key is set, the QP's Q_Key is used" (IBA
    // 10.2.5). Both QPs' Q_Key is 0x1111_1111, so the datagram is received.
    let (mut p, qa, qb) = ud_pair();
    let (ra, rb) = big_regions(&mut p, MEM);
    p.b.post_recv(qb, recv(1, vec![sge(&rb, rb.addr, 4096)]))
        .unwrap();
    let mut wr = SendWr::new(1, WrOp::Send { imm: None }, vec![sge(&ra, ra.addr, 8)]);
    wr.ud = Some(ud_dest(qb, 0x8000_0000));
    p.a.post_send(qa, wr).unwrap();
    settle(&mut p, 10_000);
    assert_eq!(p.b.stats().qkey_mismatch, 0);
    let cb = completions(&mut p, Side::B);
    assert_eq!(cb.len(), 1);
    assert_eq!(cb[0].status, WcStatus::Success);
}

#[test]
fn ud_wrong_qkey_no_receive_and_oversize() {
    let (mut p, qa, qb) = ud_pair();
    let (ra, rb) = big_regions(&mut p, MEM);
    // Wrong Q_Key: dropped and counted, the receive stays posted.
    p.b.post_recv(qb, recv(1, vec![sge(&rb, rb.addr, 4096)]))
        .unwrap();
    let mut wr = SendWr::new(1, WrOp::Send { imm: None }, vec![sge(&ra, ra.addr, 8)]);
    wr.ud = Some(ud_dest(qb, 0xbad));
    p.a.post_send(qa, wr.clone()).unwrap();
    settle(&mut p, 10_000);
    assert_eq!(p.b.stats().qkey_mismatch, 1);
    assert!(completions(&mut p, Side::B).is_empty());
    // A receive buffer too small for GRH + payload: local length error.
    let (mut p, qa, qb) = ud_pair();
    let (ra, rb) = big_regions(&mut p, MEM);
    p.b.post_recv(qb, recv(2, vec![sge(&rb, rb.addr, 40)]))
        .unwrap();
    wr.ud = Some(ud_dest(qb, 0x1111_1111));
    p.a.post_send(qa, wr.clone()).unwrap();
    settle(&mut p, 10_000);
    assert_eq!(completions(&mut p, Side::B)[0].status, WcStatus::LocLenErr);
    // No receive: dropped and counted (UD has no RNR).
    p.a.post_send(qa, wr.clone()).unwrap();
    settle(&mut p, 10_000);
    assert_eq!(p.b.stats().ud_no_recv, 1);
    // Larger than the path MTU: local length error, QP to SQE, later sends flushed.
    let mut big = SendWr::new(3, WrOp::Send { imm: None }, vec![sge(&ra, ra.addr, 2000)]);
    big.ud = wr.ud;
    p.a.post_send(qa, big).unwrap();
    settle(&mut p, 10_000);
    let ca = completions(&mut p, Side::A);
    assert_eq!(ca.last().unwrap().status, WcStatus::LocLenErr);
    assert_eq!(p.a.qp_state(qa), Some(QpState::Sqe));
    p.a.post_send(qa, wr.clone()).unwrap();
    assert_eq!(p.a.poll_completion().unwrap().status, WcStatus::WrFlushErr);
    // SQE -> RTS resumes sending.
    p.a.modify_qp(
        qa,
        &QpAttr {
            state: Some(QpState::Rts),
            ..QpAttr::default()
        },
    )
    .unwrap();
    p.b.post_recv(qb, recv(4, vec![sge(&rb, rb.addr, 4096)]))
        .unwrap();
    p.a.post_send(qa, wr).unwrap();
    settle(&mut p, 10_000);
    assert_eq!(completions(&mut p, Side::B)[0].status, WcStatus::Success);
}

#[test]
fn srq_under_loss_all_operations() {
    let link = LinkConfig {
        loss: 0.02,
        reorder: 0.01,
        ..LinkConfig::clean(5)
    };
    for recovery in [
        weft_transport::Recovery::GoBackN,
        weft_transport::Recovery::Selective,
    ] {
        let mut p = Pair::new(Config::default(), MEM as usize, link, link, 8);
        let c = p.connect(
            QpType::Rc,
            &ConnectOptions {
                srq_b: true,
                recovery,
                ..ConnectOptions::default()
            },
        );
        assert!(c.srq_b.is_some());
        let cfg = MixConfig {
            ops: 300,
            max_len: 4000,
            window: 8,
            mix: OpMix::ALL,
            seed: 8,
            time_limit_us: 100_000_000,
            unreliable: false,
            recvs: 0,
        };
        let r = run_mix(&mut p, &c, &cfg);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }
}

#[test]
fn two_qps_share_one_srq() {
    let mut p = clean_pair(MEM as usize, 9);
    let c1 = p.connect(
        QpType::Rc,
        &ConnectOptions {
            srq_b: true,
            ..ConnectOptions::default()
        },
    );
    let srq = c1.srq_b.unwrap();
    // A second QP on B bound to the same SRQ.
    let qb2 =
        p.b.create_qp(QpInit {
            qp_type: QpType::Rc,
            pd: 1,
            max_send_wr: 8,
            max_recv_wr: 8,
            srq: Some(srq),
        })
        .unwrap();
    let qa2 =
        p.a.create_qp(QpInit {
            qp_type: QpType::Rc,
            pd: 1,
            max_send_wr: 8,
            max_recv_wr: 8,
            srq: None,
        })
        .unwrap();
    for (ep, me, peer, side) in [(Side::A, qa2, qb2, Side::A), (Side::B, qb2, qa2, Side::B)] {
        let steps = [
            QpAttr {
                state: Some(QpState::Init),
                pkey: Some(0xffff),
                access: Some(weft_transport::Access::ALL),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rtr),
                path: Some(Pair::path(side, me)),
                path_mtu: Some(Mtu::M1024),
                dest_qpn: Some(peer),
                rq_psn: Some(Psn::new(0)),
                max_dest_rd_atomic: Some(4),
                min_rnr_timer: Some(1),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rts),
                sq_psn: Some(Psn::new(0)),
                timeout: Some(8),
                retry_cnt: Some(7),
                rnr_retry: Some(7),
                max_rd_atomic: Some(4),
                ..QpAttr::default()
            },
        ];
        for s in &steps {
            p.ep(ep).modify_qp(me, s).unwrap();
        }
    }
    let (ra, rb) = big_regions(&mut p, MEM);
    for i in 0..4 {
        p.b.post_srq_recv(srq, recv(i, vec![sge(&rb, rb.addr + i * 100, 100)]))
            .unwrap();
    }
    assert_eq!(p.b.post_recv(qb2, recv(9, vec![])), Err(PostError::UsesSrq));
    p.a.post_send(c1.qpn_a, send(1, vec![sge(&ra, ra.addr, 10)]))
        .unwrap();
    p.a.post_send(qa2, send(2, vec![sge(&ra, ra.addr, 20)]))
        .unwrap();
    settle(&mut p, 100_000);
    let cb = completions(&mut p, Side::B);
    assert_eq!(cb.len(), 2);
    assert!(cb
        .iter()
        .all(|c| c.from_srq && c.status == WcStatus::Success));
    let mut qpns: Vec<_> = cb.iter().map(|c| c.qpn).collect();
    qpns.sort();
    let mut want = vec![c1.qpn_b, qb2];
    want.sort();
    assert_eq!(qpns, want);
}
