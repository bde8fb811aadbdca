//! The QP table's slots: a destroyed QP's slot goes to the next QP created, and
//! nothing that named the old QP by its slot (the transmit queue, a caller's hint)
//! reaches the new one.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, Pair, Side};
use weft_transport::{QpType, WcStatus};

const MEM: u64 = 1 << 20;

fn pair() -> Pair {
    clean_pair(MEM as usize, 1)
}

#[test]
fn a_destroyed_qps_slot_serves_the_next_qp_and_only_it() {
    let mut p = pair();
    let (ra, rb) = big_regions(&mut p, MEM);
    let old = p.connect(QpType::Rc, &ConnectOptions::default());
    let old_slot = p.a.qp_slot(old.qpn_a).unwrap();
    // A post puts the QP in the transmit queue; it is destroyed before it sends.
    p.a.post_send(old.qpn_a, send(1, vec![sge(&ra, ra.addr, 64)]))
        .unwrap();
    assert!(p.a.may_transmit());
    assert!(p.a.destroy_qp(old.qpn_a));
    assert!(!p.a.may_transmit(), "the transmit queue forgot the slot");
    assert_eq!(p.a.qp_slot(old.qpn_a), None);
    // The hint of the destroyed QP finds nothing, before and after its slot is reused.
    assert!(p.a.send_queue_at(old_slot, old.qpn_a).is_none());
    let new = p.connect(QpType::Rc, &ConnectOptions::default());
    let new_slot = p.a.qp_slot(new.qpn_a).unwrap();
    assert_eq!(new_slot, old_slot, "the freed slot is reused");
    assert!(p.a.send_queue_at(old_slot, old.qpn_a).is_none());
    // A wrong hint falls back to the lookup by number.
    let room = p.a.sq_room(new.qpn_a).unwrap();
    {
        let mut sq = p.a.send_queue_at(new_slot + 7, new.qpn_a).unwrap();
        assert_eq!(sq.room(), room);
        sq.post(send(2, vec![sge(&ra, ra.addr, 64)])).unwrap();
    }
    // And the right one is the same queue.
    p.b.post_recvs_at(
        p.b.qp_slot(new.qpn_b).unwrap(),
        new.qpn_b,
        4,
        &mut [recv(9, vec![sge(&rb, rb.addr, 64)])].into_iter(),
    )
    .unwrap();
    let ca = wait_completions(&mut p, Side::A, 1, 10_000);
    assert_eq!(ca.len(), 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (2, WcStatus::Success));
    assert_eq!(ca[0].qpn, new.qpn_a);
    let cb = completions(&mut p, Side::B);
    assert_eq!(cb.len(), 1);
    assert_eq!((cb[0].wr_id, cb[0].qpn), (9, new.qpn_b));
    settle(&mut p, 10_000);
    // The destroyed QP's request never went out, and completed nothing.
    assert!(completions(&mut p, Side::A).is_empty());
    assert!(completions(&mut p, Side::B).is_empty());
}
