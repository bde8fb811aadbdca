//! A packet-buffer pool registered once (`ProtectionDomain::register_pool`): its
//! buffers are sent in place, one SGE each; the registration keeps the arena alive and
//! grants the engine no write access.

mod common;

use common::*;
use weft_link::BufferPool;
use weft_verbs::{LinkKind, Progress, QpType, RecvWr, SendWr, WcOpcode, WcStatus, WrOp};

#[test]
fn pool_buffers_are_gathered_in_place_and_never_written_by_the_engine() {
    let (mut a, mut b) = pair(LinkKind::Shm, Progress::Thread, QpType::Rc, 1 << 16);
    let pool = BufferPool::new(16, 2048);
    let region = a.pd.register_pool(&pool);
    assert_eq!(region.len(), 16 * 2048);
    // Three buffers, each frame behind a prepended 4-byte tag: three SGEs, one SEND.
    let mut bufs = Vec::new();
    let mut want = Vec::new();
    for (i, len) in [60usize, 1500, 14].into_iter().enumerate() {
        let mut buf = pool.alloc().expect("buffer");
        let frame: Vec<u8> = (0..len).map(|j| (i * 50 + j) as u8).collect();
        assert!(buf.copy_from(&frame));
        assert!(buf.prepend(4));
        buf[..4].copy_from_slice(&[0xC1, i as u8, 0, 0]);
        want.extend_from_slice(&buf);
        bufs.push(buf);
    }
    let sges: Vec<_> = bufs
        .iter()
        .map(|b| region.sge(b).expect("a buffer of the pool"))
        .collect();
    b.qp.post_recv([RecvWr::new(1, b.mr.sge(0, 4096))]).unwrap();
    a.qp.post_send([SendWr::new(7, WrOp::Send { imm: None }, sges)])
        .unwrap();
    assert_eq!(ok(&mut a.cq, 1)[0].wr_id, 7);
    let c = ok(&mut b.cq, 1);
    assert_eq!(
        (c[0].opcode, c[0].byte_len as usize),
        (WcOpcode::Recv, want.len())
    );
    assert_eq!(b.mr.to_vec(0, want.len()).unwrap(), want);
    drop(bufs);
    assert_eq!(pool.available(), 16);

    // A buffer of another pool has no entry in this registration.
    let other = BufferPool::new(1, 2048);
    assert!(region.sge(&other.alloc().expect("buffer")).is_none());

    // The engine never writes the arena: a receive posted into a pool buffer fails
    // its key check (no LOCAL_WRITE), and the buffer keeps its bytes.
    let mut target = pool.alloc().expect("buffer");
    assert!(target.copy_from(&[0xAB; 256]));
    let into_pool = region.sge(&target).expect("a buffer of the pool");
    a.qp.post_recv([RecvWr::new(2, into_pool)]).unwrap();
    b.mr.write(0, &[0x11; 64]).unwrap();
    b.qp.post_send([SendWr::new(
        8,
        WrOp::Send { imm: None },
        vec![b.mr.sge(0, 64)],
    )])
    .unwrap();
    let got = collect(&mut a.cq, 1, &[]);
    assert_eq!(got.len(), 1, "the receive completed: {got:?}");
    assert_eq!(got[0].wr_id, 2);
    assert_ne!(got[0].status, WcStatus::Success, "{got:?}");
    assert!(target.iter().all(|&x| x == 0xAB), "not a byte written");
    drop(target);

    // The registration keeps the arena alive without any other handle to the pool.
    drop(pool);
    let mut late = region.pool().alloc().expect("the arena lives on");
    assert!(late.copy_from(&[1, 2, 3]));
    assert!(region.covers(&late));
}
