//! Every RC operation over a clean link: data lands byte-identical, completions carry
//! the right opcode, length and immediate.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, Pair, Side};
use weft_transport::{Mtu, QpType, WcOpcode, WcStatus, WrOp};

const MEM: u64 = 1 << 20;

fn pair() -> Pair {
    clean_pair(MEM as usize, 1)
}

#[test]
fn send_with_sges_and_immediate_arrives_intact() {
    let mut p = pair();
    let (ra, rb) = big_regions(&mut p, MEM);
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let msg = pattern(1, 5000);
    p.a.mem_mut().fill(ra.addr, &msg);
    // Three SGEs on the send side, two on the receive side.
    let sges = vec![
        sge(&ra, ra.addr, 1000),
        sge(&ra, ra.addr + 1000, 3000),
        sge(&ra, ra.addr + 4000, 1000),
    ];
    p.b.post_recv(
        c.qpn_b,
        recv(
            7,
            vec![sge(&rb, rb.addr, 2500), sge(&rb, rb.addr + 10_000, 4000)],
        ),
    )
    .unwrap();
    let mut wr = send(1, sges);
    wr.op = WrOp::Send {
        imm: Some(0xdead_beef),
    };
    p.a.post_send(c.qpn_a, wr).unwrap();
    let ca = wait_completions(&mut p, Side::A, 1, 10_000);
    let cb = completions(&mut p, Side::B);
    assert_eq!(ca.len(), 1);
    assert_eq!(ca[0].status, WcStatus::Success);
    assert_eq!(ca[0].opcode, WcOpcode::Send);
    assert_eq!(cb.len(), 1);
    assert_eq!(cb[0].wr_id, 7);
    assert_eq!(cb[0].status, WcStatus::Success);
    assert_eq!(cb[0].byte_len, 5000);
    assert_eq!(cb[0].imm, Some(0xdead_beef));
    let mut got = read_mem(p.b.mem(), rb.addr, 2500);
    got.extend(read_mem(p.b.mem(), rb.addr + 10_000, 2500));
    assert_eq!(got, msg);
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn write_read_and_atomics() {
    let mut p = pair();
    let (ra, rb) = big_regions(&mut p, MEM);
    let o = ConnectOptions {
        mtu: Mtu::M256,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let data = pattern(2, 3000);
    p.a.mem_mut().fill(ra.addr, &data);
    // WRITE 3000 bytes to B, READ them back elsewhere in A, then two atomics.
    p.a.post_send(
        c.qpn_a,
        weft_transport::SendWr::new(
            1,
            WrOp::Write {
                remote: remote(&rb, rb.addr + 64),
                imm: None,
            },
            vec![sge(&ra, ra.addr, 3000)],
        ),
    )
    .unwrap();
    p.a.post_send(
        c.qpn_a,
        weft_transport::SendWr::new(
            2,
            WrOp::Read {
                remote: remote(&rb, rb.addr + 64),
            },
            vec![sge(&ra, ra.addr + 8192, 3000)],
        ),
    )
    .unwrap();
    p.b.mem_mut().fill(rb.addr + 8, &41u64.to_le_bytes());
    p.a.post_send(
        c.qpn_a,
        weft_transport::SendWr::new(
            3,
            WrOp::FetchAdd {
                remote: remote(&rb, rb.addr + 8),
                add: 1,
            },
            vec![sge(&ra, ra.addr + 16_384, 8)],
        ),
    )
    .unwrap();
    p.a.post_send(
        c.qpn_a,
        weft_transport::SendWr::new(
            4,
            WrOp::CompareSwap {
                remote: remote(&rb, rb.addr + 8),
                compare: 42,
                swap: 7,
            },
            vec![sge(&ra, ra.addr + 16_392, 8)],
        ),
    )
    .unwrap();
    let ca = wait_completions(&mut p, Side::A, 4, 50_000);
    let ids: Vec<_> = ca.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
    assert_eq!(
        ids,
        vec![
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaRead),
            (3, WcStatus::Success, WcOpcode::FetchAdd),
            (4, WcStatus::Success, WcOpcode::CompSwap),
        ]
    );
    assert_eq!(read_mem(p.b.mem(), rb.addr + 64, 3000), data);
    assert_eq!(read_mem(p.a.mem(), ra.addr + 8192, 3000), data);
    assert_eq!(
        read_mem(p.a.mem(), ra.addr + 16_384, 8),
        41u64.to_le_bytes()
    );
    assert_eq!(
        read_mem(p.a.mem(), ra.addr + 16_392, 8),
        42u64.to_le_bytes()
    );
    assert_eq!(read_mem(p.b.mem(), rb.addr + 8, 8), 7u64.to_le_bytes());
    assert_no_stray_writes(p.a.mem());
    assert_no_stray_writes(p.b.mem());
}
