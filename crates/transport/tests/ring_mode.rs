//! The responder's side of the shm ring mode (`Endpoint::ring_request`; the format is
//! `weft_wire::ring`): a descriptor gets every check the packet path makes for the
//! same message and RC's answers to them, with no PSN and no ACK. Descriptors are
//! fed straight to B's endpoint, as the engine's receive visitor will.
mod common;
use common::*;
use weft_transport::sim::{ConnectOptions, Side};
use weft_transport::{QpState, QpType, RingAnswer, WcOpcode, WcStatus};
use weft_wire::ring::{RingDescriptor, RingOp};
use weft_wire::roce::{NakCode, Syndrome};

const MEM: u64 = 1 << 20;

struct Setup {
    p: weft_transport::sim::Pair,
    qpn: u32,
    rb: weft_transport::Region,
}

fn setup() -> Setup {
    let mut p = clean_pair(MEM as usize, 7);
    let c = p.connect(QpType::Rc, &ConnectOptions::default());
    let (_ra, rb) = big_regions(&mut p, MEM);
    assert!(p.b.set_ring_mode(c.qpn_b, true));
    Setup {
        p,
        qpn: c.qpn_b,
        rb,
    }
}

/// The PSN of A's `n`th message: a descriptor's sequence number is its PSN, from the
/// QP's `rq_psn` (near the 24-bit wrap in the simulator's default, so the tests cross it).
fn seq_of(n: u32) -> u32 {
    ConnectOptions::default().psn_a.wrapping_add(n) & 0x00ff_ffff
}

impl Setup {
    fn send(&mut self, n: u32, imm: Option<u32>, payload: &[u8]) -> Option<RingAnswer> {
        let d = RingDescriptor {
            dest_qpn: self.qpn,
            seq: seq_of(n),
            op: RingOp::Send {
                imm,
                solicited: false,
            },
        };
        let now = self.p.now;
        self.p.b.ring_request(now, &d, payload)
    }

    fn write(
        &mut self,
        n: u32,
        va: u64,
        rkey: u32,
        imm: Option<u32>,
        payload: &[u8],
    ) -> Option<RingAnswer> {
        let d = RingDescriptor {
            dest_qpn: self.qpn,
            seq: seq_of(n),
            op: RingOp::Write { va, rkey, imm },
        };
        let now = self.p.now;
        self.p.b.ring_request(now, &d, payload)
    }

    /// Post a receive of `len` bytes at `off` into B's region.
    fn post_recv(&mut self, wr_id: u64, off: u64, len: u32) {
        let s = sge(&self.rb, self.rb.addr + off, len);
        self.p.b.post_recv(self.qpn, recv(wr_id, vec![s])).unwrap();
    }
}

/// The answer of a QP that takes no descriptor now.
const DEAD: RingAnswer = RingAnswer::Refused {
    syndrome: Syndrome::Nak(NakCode::REMOTE_OPERATIONAL_ERROR),
    fatal: false,
};

const FATAL_INVALID: RingAnswer = RingAnswer::Refused {
    syndrome: Syndrome::Nak(NakCode::INVALID_REQUEST),
    fatal: true,
};

#[test]
fn a_send_lands_in_the_next_receive_and_completes_it_with_its_immediate() {
    let mut s = setup();
    s.post_recv(1, 0, 64);
    s.post_recv(2, 64, 64);
    assert_eq!(s.send(0, Some(9), b"first"), Some(RingAnswer::Executed));
    assert_eq!(s.send(1, None, b"second"), Some(RingAnswer::Executed));
    let c = completions(&mut s.p, Side::B);
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0].wr_id, c[0].opcode, c[0].byte_len, c[0].imm),
        (1, WcOpcode::Recv, 5, Some(9))
    );
    assert_eq!((c[1].wr_id, c[1].byte_len, c[1].imm), (2, 6, None));
    assert!(c.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(read_mem(s.p.b.mem(), s.rb.addr, 5), b"first");
    assert_eq!(read_mem(s.p.b.mem(), s.rb.addr + 64, 6), b"second");
    assert_no_stray_writes(s.p.b.mem());
}

/// RC's receiver-not-ready, ring style: the descriptor is refused with the QP's RNR
/// timer and every later one of the QP is discarded until the refused one comes again
/// (go-back-N), which then executes in order.
#[test]
fn a_send_without_a_receive_is_refused_rnr_and_later_ones_wait_for_its_retry() {
    let mut s = setup();
    let rnr = s.send(0, None, b"a");
    assert_eq!(
        rnr,
        Some(RingAnswer::Refused {
            syndrome: Syndrome::RnrNak { timer: 1 },
            fatal: false
        })
    );
    s.post_recv(1, 0, 8);
    s.post_recv(2, 8, 8);
    // Sent before the requester saw the refusal: discarded, not executed out of order.
    assert_eq!(s.send(1, None, b"b"), Some(RingAnswer::Discarded));
    assert_eq!(s.p.b.stats().ring_discarded, 1);
    assert!(completions(&mut s.p, Side::B).is_empty());
    // The retry, then the rest.
    assert_eq!(s.send(0, None, b"a"), Some(RingAnswer::Executed));
    assert_eq!(s.send(1, None, b"b"), Some(RingAnswer::Executed));
    let c = completions(&mut s.p, Side::B);
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(read_mem(s.p.b.mem(), s.rb.addr, 1), b"a");
    assert_eq!(read_mem(s.p.b.mem(), s.rb.addr + 8, 1), b"b");
    assert_eq!(s.p.b.qp_state(s.qpn), Some(QpState::Rts));
}

#[test]
fn a_sequence_number_out_of_turn_is_a_broken_peer_and_ends_the_qp() {
    let mut s = setup();
    s.post_recv(1, 0, 8);
    assert_eq!(s.send(5, None, b"x"), Some(FATAL_INVALID));
    assert_eq!(s.p.b.qp_state(s.qpn), Some(QpState::Err));
    // The receive is flushed, nothing was written, and the QP takes nothing more.
    let c = completions(&mut s.p, Side::B);
    assert_eq!((c.len(), c[0].status), (1, WcStatus::WrFlushErr));
    assert_eq!(s.send(0, None, b"x"), Some(DEAD));
    assert_no_stray_writes(s.p.b.mem());
}

#[test]
fn a_send_longer_than_its_receive_fails_the_receive_and_the_qp() {
    let mut s = setup();
    s.post_recv(1, 0, 4);
    assert_eq!(s.send(0, None, b"too long"), Some(FATAL_INVALID));
    let c = completions(&mut s.p, Side::B);
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::LocLenErr));
    assert_eq!(s.p.b.qp_state(s.qpn), Some(QpState::Err));
}

#[test]
fn a_write_is_checked_against_its_rkey_and_bounds_before_a_byte_moves() {
    let mut s = setup();
    let (va, rkey) = (s.rb.addr + 100, s.rb.rkey);
    assert_eq!(
        s.write(0, va, rkey, None, b"hello"),
        Some(RingAnswer::Executed)
    );
    assert_eq!(read_mem(s.p.b.mem(), va, 5), b"hello");
    let end = s.rb.addr + s.rb.len;
    let access = RingAnswer::Refused {
        syndrome: Syndrome::Nak(NakCode::REMOTE_ACCESS_ERROR),
        fatal: true,
    };
    // One byte past the region's end.
    let before = read_mem(s.p.b.mem(), end - 4, 4);
    assert_eq!(s.write(1, end - 4, rkey, None, b"12345"), Some(access));
    assert_eq!(read_mem(s.p.b.mem(), end - 4, 4), before);
    assert_eq!(s.p.b.qp_state(s.qpn), Some(QpState::Err));
    // A wrong rkey on a fresh QP.
    let mut s = setup();
    assert_eq!(
        s.write(0, s.rb.addr, s.rb.rkey ^ 1, None, b"x"),
        Some(access)
    );
    assert_no_stray_writes(s.p.b.mem());
}

#[test]
fn a_write_with_immediate_needs_a_receive_and_an_rnr_writes_nothing() {
    let mut s = setup();
    let (va, rkey) = (s.rb.addr + 256, s.rb.rkey);
    let before = read_mem(s.p.b.mem(), va, 4);
    let rnr = s.write(0, va, rkey, Some(77), b"data");
    assert!(matches!(
        rnr,
        Some(RingAnswer::Refused { fatal: false, .. })
    ));
    assert_eq!(
        read_mem(s.p.b.mem(), va, 4),
        before,
        "an RNR leaves no trace"
    );
    s.post_recv(3, 0, 0);
    assert_eq!(
        s.write(0, va, rkey, Some(77), b"data"),
        Some(RingAnswer::Executed)
    );
    let c = completions(&mut s.p, Side::B);
    assert_eq!(
        (c[0].wr_id, c[0].opcode, c[0].byte_len, c[0].imm),
        (3, WcOpcode::RecvRdmaWithImm, 4, Some(77))
    );
    assert_eq!(read_mem(s.p.b.mem(), va, 4), b"data");
}

#[test]
fn an_error_descriptor_is_not_a_request() {
    let mut s = setup();
    let d = RingDescriptor {
        dest_qpn: s.qpn,
        seq: seq_of(0),
        op: RingOp::Error {
            syndrome: Syndrome::RnrNak { timer: 0 },
        },
    };
    let now = s.p.now;
    assert_eq!(s.p.b.ring_request(now, &d, &[]), Some(FATAL_INVALID));
    let unknown = RingDescriptor {
        dest_qpn: s.qpn ^ 0xff,
        ..d
    };
    assert_eq!(s.p.b.ring_request(now, &unknown, &[]), None);
    assert_eq!(s.p.b.stats().unknown_qpn, 1);
}

#[test]
fn a_qp_not_in_ring_mode_takes_no_descriptor() {
    let mut s = setup();
    s.post_recv(1, 0, 8);
    s.p.b.set_ring_mode(s.qpn, false);
    // Refused, not dropped: a bare release would tell the requester it was executed.
    assert_eq!(s.send(0, None, b"x"), Some(DEAD));
    assert_eq!(s.p.b.stats().ring_refused, 1);
    assert!(completions(&mut s.p, Side::B).is_empty());
    assert_eq!(s.p.b.qp_state(s.qpn), Some(QpState::Rts));
}

/// Only a WRITE with immediate consumes a receive: a plain WRITE beside a posted
/// receive leaves it for the SEND that follows.
#[test]
fn a_plain_write_leaves_the_posted_receive_alone() {
    let mut s = setup();
    s.post_recv(1, 0, 8);
    let (va, rkey) = (s.rb.addr + 512, s.rb.rkey);
    assert_eq!(s.write(0, va, rkey, None, b"w"), Some(RingAnswer::Executed));
    assert!(completions(&mut s.p, Side::B).is_empty());
    assert_eq!(s.send(1, None, b"s"), Some(RingAnswer::Executed));
    let c = completions(&mut s.p, Side::B);
    assert_eq!((c.len(), c[0].wr_id, c[0].opcode), (1, 1, WcOpcode::Recv));
}

/// A zero-length WRITE names no memory: its rkey is not looked at (the packet path's
/// rule), so a WRITE with immediate works as a doorbell with any rkey.
#[test]
fn a_zero_length_write_with_immediate_is_a_doorbell_whatever_its_rkey() {
    let mut s = setup();
    s.post_recv(4, 0, 0);
    assert_eq!(
        s.write(0, 0, 0xbad, Some(5), b""),
        Some(RingAnswer::Executed)
    );
    let c = completions(&mut s.p, Side::B);
    assert_eq!(
        (c[0].wr_id, c[0].opcode, c[0].byte_len, c[0].imm),
        (4, WcOpcode::RecvRdmaWithImm, 0, Some(5))
    );
    assert_eq!(s.p.b.qp_state(s.qpn), Some(QpState::Rts));
}
