//! One copy on shm: large WRITEs go by reference (the receiver pulls the payload
//! straight from the sender's memory by cross-memory attach), are checked before a
//! byte lands, and fall back to the rings where the receiver may not pull.
//! (Two processes: `two_process.rs`, `shm_large_writes_move_once_between_two_processes`.)

mod common;

use common::*;
use weft_verbs::cm::ConnParam;
use weft_verbs::{
    Context, DeviceConfig, LinkKind, Progress, QpType, RemoteAddr, SendWr, WcStatus, WrOp,
    ONE_COPY_MIN,
};

const MEM: usize = 4 << 20;

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

fn shm_device(one_copy: bool) -> Context {
    let mut cfg = DeviceConfig::local(LinkKind::Shm);
    cfg.progress = Progress::Thread;
    cfg.one_copy = one_copy;
    // These tests are about the process_vm_readv path: ordinary memory goes by
    // reference at any size (the default sends it through the rings).
    cfg.one_copy_cma_min = 0;
    Context::open_with(cfg).expect("open shm device")
}

fn shm_pair(receiver_pulls: bool) -> (Side, Side) {
    let a = side_on(shm_device(true), QpType::Rc, MEM);
    let b = side_on(shm_device(receiver_pulls), QpType::Rc, MEM);
    connect_sides(a, b, &ConnParam::default())
}

/// The peer's region, as the test knows it in one process.
fn target(b: &Side, off: u64) -> RemoteAddr {
    RemoteAddr {
        addr: b.mr.addr() + off,
        rkey: b.mr.rkey(),
    }
}

/// A small WRITE first: the shm connection comes up and its receiver probes.
fn warm_up(a: &mut Side, b: &Side) {
    a.mr.write(0, b"warm").unwrap();
    a.qp.post_send([SendWr::new(
        0,
        WrOp::Write {
            remote: target(b, 0),
            imm: None,
        },
        vec![a.mr.sge(0, 4)],
    )])
    .unwrap();
    ok(&mut a.cq, 1);
}

#[test]
fn large_shm_writes_go_by_reference_and_land_byte_exact() {
    let Some(()) = weft_testkit::require("cross-memory attach", cross_memory_attach()) else {
        return;
    };
    let (mut a, b) = shm_pair(true);
    warm_up(&mut a, &b);
    // Sizes around the threshold and the MTU, odd ones, a 3 MiB one; then a
    // three-SGE WRITE whose pieces are scattered in the sender's region.
    let sizes = [
        ONE_COPY_MIN as usize - 1,
        ONE_COPY_MIN as usize,
        65_536,
        100_003,
        3 << 20,
    ];
    for (n, &size) in sizes.iter().enumerate() {
        let data = pattern(size, n as u32);
        a.mr.write(8, &data).unwrap();
        a.qp.post_send([SendWr::new(
            n as u64 + 1,
            WrOp::Write {
                remote: target(&b, 4096 + n as u64),
                imm: None,
            },
            vec![a.mr.sge(8, size as u32)],
        )])
        .unwrap();
        ok(&mut a.cq, 1);
        assert_eq!(
            b.mr.to_vec(4096 + n, size).unwrap(),
            data,
            "{size}-byte WRITE"
        );
    }
    let pieces = [(100usize, 30_000usize), (200_000, 17), (300_001, 70_000)];
    let mut want = Vec::new();
    let mut sges = Vec::new();
    for (i, &(off, len)) in pieces.iter().enumerate() {
        let d = pattern(len, 99 + i as u32);
        a.mr.write(off, &d).unwrap();
        want.extend_from_slice(&d);
        sges.push(a.mr.sge(off, len as u32));
    }
    a.qp.post_send([SendWr::new(
        9,
        WrOp::Write {
            remote: target(&b, 1 << 20),
            imm: None,
        },
        sges,
    )])
    .unwrap();
    ok(&mut a.cq, 1);
    assert_eq!(b.mr.to_vec(1 << 20, want.len()).unwrap(), want);
    let (sa, sb) = (a.ctx.stats(), b.ctx.stats());
    // Below the threshold the payload went through the rings; the other five by
    // reference (in 64 KiB chunks), and the receiver pulled every byte of them.
    assert_eq!(sa.transport.by_reference_sent, 5, "{:?}", sa.transport);
    let by_ref_bytes: usize = sizes[1..].iter().sum::<usize>() + want.len();
    assert_eq!(sb.transport.by_reference_bytes, by_ref_bytes as u64);
    assert!(sb.transport.by_reference_received >= 5);
    assert_eq!(sb.transport.by_reference_failed, 0);
    assert_eq!(sb.pull_errors, Default::default());
}

/// Every check before a byte lands: a WRITE by reference with a bad rkey, or past
/// the end of the region, is answered with a Remote Access NAK and writes nothing.
#[test]
fn a_bad_rkey_or_out_of_bounds_by_reference_write_is_nacked_with_nothing_written() {
    let Some(()) = weft_testkit::require("cross-memory attach", cross_memory_attach()) else {
        return;
    };
    const SIZE: usize = 200_000;
    let size = SIZE;
    let bad_targets: [fn(&Side) -> RemoteAddr; 2] = [
        |b| RemoteAddr {
            addr: b.mr.addr(),
            rkey: b.mr.rkey() ^ 1,
        },
        |b| RemoteAddr {
            addr: b.mr.addr() + (MEM - SIZE / 2) as u64,
            rkey: b.mr.rkey(),
        },
    ];
    for bad in bad_targets {
        let (mut a, b) = shm_pair(true);
        warm_up(&mut a, &b);
        let before = b.mr.to_vec(0, MEM).unwrap();
        a.mr.write(0, &vec![0xee; size]).unwrap();
        a.qp.post_send([SendWr::new(
            7,
            WrOp::Write {
                remote: bad(&b),
                imm: None,
            },
            vec![a.mr.sge(0, size as u32)],
        )])
        .unwrap();
        let c = a.cq.wait(1, T);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].status, WcStatus::RemAccessErr, "{c:?}");
        assert_eq!(a.ctx.stats().transport.by_reference_sent, 1);
        assert_eq!(b.mr.to_vec(0, MEM).unwrap(), before, "a byte landed");
        let sb = b.ctx.stats();
        assert_eq!(sb.transport.by_reference_received, 0);
        assert!(sb.transport.fatal_naks_sent >= 1);
    }
}

/// A receiver that does not pull (its probe refused, or turned off as here) leaves
/// the sender on the ring path: the same WRITE lands, nothing goes by reference.
#[test]
fn where_the_receiver_may_not_pull_large_writes_use_the_rings() {
    let (mut a, b) = shm_pair(false);
    warm_up(&mut a, &b);
    let data = pattern(300_000, 5);
    a.mr.write(0, &data).unwrap();
    a.qp.post_send([SendWr::new(
        1,
        WrOp::Write {
            remote: target(&b, 64),
            imm: None,
        },
        vec![a.mr.sge(0, data.len() as u32)],
    )])
    .unwrap();
    ok(&mut a.cq, 1);
    assert_eq!(b.mr.to_vec(64, data.len()).unwrap(), data);
    assert_eq!(a.ctx.stats().transport.by_reference_sent, 0);
    assert_eq!(b.ctx.stats().transport.by_reference_received, 0);
}
