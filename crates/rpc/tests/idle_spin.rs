//! The idle loops' learned spin (issue 16): a server head and a client dispatcher
//! that see sparse requests stop spinning (their idle periods end blocked, and
//! they block at once), and back-to-back requests keep them spinning. Counts, not
//! times, are asserted.

mod common;

use common::*;
use std::time::Duration;
use weft_rpc::{ClientStats, IdleSpin, LinkKind, Mode, ServerStats};

/// Far above a wake-up even on a loaded machine, far below the sparse gaps.
const CAP: Duration = Duration::from_millis(2);
const SPARSE_GAP: Duration = Duration::from_millis(25);

fn head(s: &ServerStats) -> (u64, u64) {
    (s.clusters[0].idle_spun, s.clusters[0].idle_blocked)
}

fn dispatcher(s: &ClientStats) -> (u64, u64) {
    (s.idle_spun, s.idle_blocked)
}

/// One at a time: the two links' runs would share 2 cores with 10 threads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn sparse_then_back_to_back(kind: LinkKind) {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (s, _) = server_with(kind, |c| c.idle_spin = IdleSpin::Adaptive { cap: CAP });
    let c = client_with(kind, s.local_addr(), |c| {
        c.mode = Mode::Dispatched;
        c.idle_spin = IdleSpin::Adaptive { cap: CAP };
    });
    assert_eq!(c.call(ECHO, b"warm").wait().unwrap(), b"warm");
    assert_eq!(
        s.stats().clusters[0].spin_budget,
        CAP,
        "nothing learned yet"
    );

    // Sparse: a call every 25 ms. Between calls both loops are idle far longer than
    // any spin, so (nearly) every idle period ends after blocking.
    let (h0, d0) = (head(&s.stats()), dispatcher(&c.stats()));
    const SPARSE: u64 = 16;
    for i in 0..SPARSE {
        std::thread::sleep(SPARSE_GAP);
        assert_eq!(c.call(SEQ, &ms(i)).wait().unwrap(), ms(i));
    }
    let (h1, d1) = (head(&s.stats()), dispatcher(&c.stats()));
    let (hs, hb) = (h1.0 - h0.0, h1.1 - h0.1);
    let (ds, db) = (d1.0 - d0.0, d1.1 - d0.1);
    assert!(
        hb >= SPARSE - 2 && hs <= 2,
        "sparse: the head spun {hs} and blocked {hb} idle periods"
    );
    assert!(
        db >= SPARSE - 2 && ds <= 2,
        "sparse: the dispatcher spun {ds} and blocked {db} idle periods"
    );
    // Nearly all their gaps outlast the cap: blocking at once pays, and the loops'
    // last idle periods did not spin at all (`SpinBudget::next_spin`; the old rule
    // spun a wake-up first).
    assert_eq!(
        s.stats().clusters[0].spin_budget,
        Duration::ZERO,
        "sparse: the head blocks at once"
    );
    assert_eq!(
        c.stats().spin_budget,
        Duration::ZERO,
        "sparse: the dispatcher blocks at once"
    );

    // Back to back: 8 calls always in flight. The head's gaps are the client's
    // turnaround, the dispatcher's the round trip: both far below the cap, so the
    // loops spin. Some idle periods still block: on 2 cores a spinning loop can keep
    // the thread it waits for off the CPU past the cap.
    let (h0, d0) = (head(&s.stats()), dispatcher(&c.stats()));
    let mut st = c.stream();
    let mut sent = 0u64;
    const CALLS: u64 = 3000;
    while sent < 8 {
        st.call(ECHO, &ms(sent)).unwrap();
        sent += 1;
    }
    while let Some((_, r)) = st.take() {
        r.unwrap();
        if sent < CALLS {
            st.call(ECHO, &ms(sent)).unwrap();
            sent += 1;
        }
    }
    let (h1, d1) = (head(&s.stats()), dispatcher(&c.stats()));
    let (hs, hb) = (h1.0 - h0.0, h1.1 - h0.1);
    let (ds, db) = (d1.0 - d0.0, d1.1 - d0.1);
    eprintln!("{kind:?} back to back: head {hs} spun / {hb} blocked, dispatcher {ds} / {db}");
    assert!(
        hs > hb,
        "back to back: the head spun {hs} and blocked {hb} idle periods"
    );
    assert!(
        ds > db,
        "back to back: the dispatcher spun {ds} and blocked {db} idle periods"
    );
}

#[test]
fn sparse_requests_block_and_back_to_back_requests_spin_udp() {
    sparse_then_back_to_back(LinkKind::Udp);
}

#[test]
fn sparse_requests_block_and_back_to_back_requests_spin_shm() {
    sparse_then_back_to_back(LinkKind::Shm);
}

#[test]
fn a_fixed_spin_is_reported_as_such() {
    let kind = LinkKind::Shm;
    let (s, _) = server_with(kind, |c| c.idle_spin = IdleSpin::FIXED_BEFORE);
    let c = client_with(kind, s.local_addr(), |c| {
        c.mode = Mode::Dispatched;
        c.idle_spin = IdleSpin::Fixed(Duration::from_micros(70));
    });
    for i in 0..20 {
        assert_eq!(c.call(SEQ, &ms(i)).wait().unwrap(), ms(i));
    }
    assert_eq!(s.stats().clusters[0].spin_budget, Duration::from_micros(50));
    assert_eq!(c.stats().spin_budget, Duration::from_micros(70));
}
