//! The receive path of the common shape (`Endpoint::handle_request_only`): an RC SEND
//! Only or WRITE Only carrying the expected PSN is taken there (counted in
//! `Stats::rx_lean`) with the general path's outcome; every other packet — out of
//! order, a duplicate, one that needs an RNR NAK or a fatal NAK — is declined and
//! decided by the general path, exactly as before.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, Connection, Pair, Side};
use weft_transport::{QpState, QpType, Region, WcOpcode, WcStatus};
use weft_wire::roce::{
    BthRepr, IbPacket, IbPacketRepr, IcrcPath, NakCode, Opcode, Psn, RethRepr, Syndrome,
};

const MEM: u64 = 1 << 20;

/// A connected RC pair, B's region (`rb`) and A's first PSN.
fn setup() -> (Pair, Connection, Psn, Region) {
    let o = ConnectOptions::default();
    let mut p = clean_pair(MEM as usize, 3);
    let c = p.connect(QpType::Rc, &o);
    let (_, rb) = big_regions(&mut p, MEM);
    (p, c, Psn::new(o.psn_a), rb)
}

/// Receives `ids` posted on B, each `len` bytes of `rb` after the one before, from
/// its start.
fn post_recvs(p: &mut Pair, c: &Connection, rb: &Region, ids: &[u64], len: u32) {
    for (i, &id) in ids.iter().enumerate() {
        let at = rb.addr + i as u64 * u64::from(len);
        p.b.post_recv(c.qpn_b, recv(id, vec![sge(rb, at, len)]))
            .unwrap();
    }
}

/// B's next packet is an ACK of `psn`.
fn expect_ack(p: &mut Pair, psn: Psn) {
    let ack = next_from_b(p).expect("an ACK");
    assert_eq!(ack.bth.opcode, Opcode::RC_ACK);
    assert_eq!(ack.bth.psn, psn);
    assert!(matches!(syndrome(&ack), Syndrome::Ack { .. }));
}

fn craft(repr: &IbPacketRepr, payload: &[u8], from: &IcrcPath) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut buf, payload).unwrap();
    from.fill(&mut buf[..n]).unwrap();
    buf
}

/// A SEND Only from A to B at `psn`, asking for an ACK.
fn send_only(c: &Connection, psn: Psn, payload: &[u8]) -> Vec<u8> {
    let mut r = IbPacketRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, c.qpn_b, psn));
    r.bth.ack_req = true;
    craft(&r, payload, &Pair::path(Side::A, c.qpn_a))
}

/// A WRITE Only from A to B at `psn` of `payload` to `va` under `rkey`, asking for an ACK.
fn write_only(c: &Connection, psn: Psn, va: u64, rkey: u32, payload: &[u8]) -> Vec<u8> {
    let mut r = IbPacketRepr::new(BthRepr::new(Opcode::RC_WRITE_ONLY, c.qpn_b, psn));
    r.bth.ack_req = true;
    r.reth = Some(RethRepr {
        va,
        rkey,
        dma_len: payload.len() as u32,
    });
    craft(&r, payload, &Pair::path(Side::A, c.qpn_a))
}

fn deliver(p: &mut Pair, c: &Connection, pkt: &[u8]) {
    let from = Pair::path(Side::A, c.qpn_a);
    p.b.handle_packet(p.now, &from, pkt);
}

/// B's next outgoing packet, parsed.
fn next_from_b(p: &mut Pair) -> Option<IbPacketRepr> {
    let mut buf = vec![0u8; 8192];
    let t = p.b.poll_transmit(p.now, &mut buf)?;
    let pkt = IbPacket::new_checked(&buf[..t.len]).unwrap();
    Some(IbPacketRepr::parse(&pkt).unwrap())
}

fn syndrome(r: &IbPacketRepr) -> Syndrome {
    r.aeth.expect("an AETH").syndrome
}

#[test]
fn a_send_only_in_order_takes_the_lean_path_with_the_general_paths_outcome() {
    let (mut p, c, epsn, rb) = setup();
    post_recvs(&mut p, &c, &rb, &[7, 8], 64);
    deliver(&mut p, &c, &send_only(&c, epsn, b"hello"));
    deliver(&mut p, &c, &send_only(&c, epsn.add(1), b"world!"));
    assert_eq!(p.b.stats().rx_lean, 2);
    let got = completions(&mut p, Side::B);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].wr_id, got[0].status), (7, WcStatus::Success));
    assert_eq!((got[0].opcode, got[0].byte_len), (WcOpcode::Recv, 5));
    assert_eq!((got[1].wr_id, got[1].byte_len), (8, 6));
    assert_eq!(read_mem(p.b.mem(), rb.addr, 5), b"hello");
    assert_eq!(read_mem(p.b.mem(), rb.addr + 64, 6), b"world!");
    // Both asked for an ACK: one coalesced ACK of the second.
    expect_ack(&mut p, epsn.add(1));
    assert!(next_from_b(&mut p).is_none());
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn a_write_only_in_order_takes_the_lean_path_and_writes_its_bytes() {
    let (mut p, c, epsn, rb) = setup();
    deliver(
        &mut p,
        &c,
        &write_only(&c, epsn, rb.addr + 8, rb.rkey, b"abcdef"),
    );
    assert_eq!(p.b.stats().rx_lean, 1);
    assert_eq!(read_mem(p.b.mem(), rb.addr + 8, 6), b"abcdef");
    assert!(completions(&mut p, Side::B).is_empty());
    expect_ack(&mut p, epsn);
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn a_packet_ahead_of_the_expected_psn_takes_the_general_path_and_its_sequence_nak() {
    let (mut p, c, epsn, rb) = setup();
    post_recvs(&mut p, &c, &rb, &[7], 64);
    deliver(&mut p, &c, &send_only(&c, epsn.add(1), b"early"));
    assert_eq!(p.b.stats().rx_lean, 0);
    assert_eq!(p.b.stats().out_of_sequence, 1);
    assert!(completions(&mut p, Side::B).is_empty());
    let nak = next_from_b(&mut p).expect("a NAK");
    assert_eq!(nak.bth.psn, epsn);
    assert_eq!(syndrome(&nak), Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR));
    // The expected PSN then comes: the lean path again (the NAK outstanding cleared).
    deliver(&mut p, &c, &send_only(&c, epsn, b"first"));
    assert_eq!(p.b.stats().rx_lean, 1);
    assert_eq!(completions(&mut p, Side::B).len(), 1);
}

#[test]
fn a_duplicate_takes_the_general_path_and_is_acked_again_without_a_second_completion() {
    let (mut p, c, epsn, rb) = setup();
    post_recvs(&mut p, &c, &rb, &[7, 8], 64);
    let pkt = send_only(&c, epsn, b"once");
    deliver(&mut p, &c, &pkt);
    assert!(next_from_b(&mut p).is_some());
    deliver(&mut p, &c, &pkt);
    assert_eq!(p.b.stats().rx_lean, 1);
    assert_eq!(p.b.stats().duplicate_requests, 1);
    expect_ack(&mut p, epsn);
    let got = completions(&mut p, Side::B);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(p.b.rq_room(c.qpn_b).map(|r| r > 0), Some(true));
}

#[test]
fn a_send_without_a_receive_takes_the_general_path_and_its_rnr_nak() {
    let (mut p, c, epsn, _) = setup();
    deliver(&mut p, &c, &send_only(&c, epsn, b"nobody"));
    assert_eq!(p.b.stats().rx_lean, 0);
    assert_eq!(p.b.stats().rnr_naks_sent, 1);
    let nak = next_from_b(&mut p).expect("an RNR NAK");
    assert_eq!(nak.bth.psn, epsn);
    assert!(matches!(syndrome(&nak), Syndrome::RnrNak { .. }));
    assert_eq!(p.b.qp_state(c.qpn_b), Some(QpState::Rts));
}

#[test]
fn a_send_longer_than_its_receive_takes_the_general_path_and_its_fatal_nak() {
    let (mut p, c, epsn, rb) = setup();
    p.b.post_recv(c.qpn_b, recv(7, vec![sge(&rb, rb.addr, 4)]))
        .unwrap();
    deliver(&mut p, &c, &send_only(&c, epsn, b"too long"));
    assert_eq!(p.b.stats().rx_lean, 0);
    assert_eq!(p.b.stats().fatal_naks_sent, 1);
    let nak = next_from_b(&mut p).expect("a NAK");
    assert_eq!(
        syndrome(&nak),
        Syndrome::Nak(NakCode::INVALID_REQUEST),
        "{nak:?}"
    );
    let got = completions(&mut p, Side::B);
    assert_eq!((got[0].wr_id, got[0].status), (7, WcStatus::LocLenErr));
    // After the fatal NAK, even the common shape is refused.
    p.b.post_recv(c.qpn_b, recv(8, vec![sge(&rb, rb.addr, 64)]))
        .ok();
    deliver(&mut p, &c, &send_only(&c, epsn.add(1), b"after"));
    assert_eq!(p.b.stats().rx_lean, 0);
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn a_write_with_a_bad_rkey_takes_the_general_path_and_writes_nothing() {
    let (mut p, c, epsn, rb) = setup();
    let writes = p.b.mem().write_count();
    deliver(
        &mut p,
        &c,
        &write_only(&c, epsn, rb.addr, rb.rkey ^ 0x55, b"xyz"),
    );
    assert_eq!(p.b.stats().rx_lean, 0);
    assert_eq!(p.b.stats().fatal_naks_sent, 1);
    let nak = next_from_b(&mut p).expect("a NAK");
    assert_eq!(
        syndrome(&nak),
        Syndrome::Nak(NakCode::REMOTE_ACCESS_ERROR),
        "{nak:?}"
    );
    assert_eq!(p.b.mem().write_count(), writes);
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn a_write_whose_reth_length_differs_from_its_payload_takes_the_general_path() {
    let (mut p, c, epsn, rb) = setup();
    let from = Pair::path(Side::A, c.qpn_a);
    let mut r = IbPacketRepr::new(BthRepr::new(Opcode::RC_WRITE_ONLY, c.qpn_b, epsn));
    r.reth = Some(RethRepr {
        va: rb.addr,
        rkey: rb.rkey,
        dma_len: 2,
    });
    deliver(&mut p, &c, &craft(&r, b"four", &from));
    assert_eq!(p.b.stats().rx_lean, 0);
    assert_eq!(p.b.stats().fatal_naks_sent, 1);
    let nak = next_from_b(&mut p).expect("a NAK");
    assert_eq!(syndrome(&nak), Syndrome::Nak(NakCode::INVALID_REQUEST));
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn a_zero_length_send_takes_the_lean_path_and_completes_with_no_bytes() {
    let (mut p, c, epsn, rb) = setup();
    post_recvs(&mut p, &c, &rb, &[9], 64);
    deliver(&mut p, &c, &send_only(&c, epsn, b""));
    assert_eq!(p.b.stats().rx_lean, 1);
    let got = completions(&mut p, Side::B);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].wr_id, got[0].status), (9, WcStatus::Success));
    assert_eq!((got[0].opcode, got[0].byte_len), (WcOpcode::Recv, 0));
    expect_ack(&mut p, epsn);
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn a_send_that_asks_for_no_ack_is_acknowledged_at_the_delayed_ack_bound() {
    let (mut p, c, epsn, rb) = setup();
    post_recvs(&mut p, &c, &rb, &[7], 64);
    let mut r = IbPacketRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, c.qpn_b, epsn));
    r.bth.ack_req = false;
    let pkt = craft(&r, b"quiet", &Pair::path(Side::A, c.qpn_a));
    deliver(&mut p, &c, &pkt);
    assert_eq!(p.b.stats().rx_lean, 1);
    assert_eq!(completions(&mut p, Side::B).len(), 1);
    // No ACK now: it is owed, and its timer is armed (`Sched::touched`).
    assert!(next_from_b(&mut p).is_none());
    let due = p.b.poll_timeout().expect("the delayed ACK's timer");
    assert!(due > p.now, "{due:?} after {:?}", p.now);
    p.now = due;
    p.b.handle_timeout(due);
    expect_ack(&mut p, epsn);
}
