//! The counting allocator counts while a measurement runs and not otherwise.
//!
//! Alone in its own test binary on purpose: the counters are process-wide, and any
//! other test allocating or measuring on another thread would move them under these
//! checks (the unit-test binary runs the router benchmark's measuring tests in
//! parallel, which is how this test once failed in CI).

use weft_bench::alloc_count::{CountingAlloc, Measurement};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const MIB: i64 = 1 << 20;

#[test]
fn counts_inside_a_measurement_and_nothing_outside() {
    // Allocated before any measurement: not counted, so freeing it inside one shows
    // as a megabyte less.
    let outside: Vec<u8> = std::hint::black_box(Vec::with_capacity(MIB as usize));
    let m = Measurement::start().expect("installed in this test binary");
    drop(outside);
    let after_free = m.net_bytes();
    assert!(
        after_free <= -(MIB / 2),
        "an allocation made while off was counted: {after_free}"
    );

    // Allocated inside: a live megabyte shows in the net bytes and leaves when freed.
    let inside: Vec<u8> = std::hint::black_box(Vec::with_capacity(MIB as usize));
    let during = m.net_bytes();
    assert!(during - after_free >= MIB, "{after_free} then {during}");
    assert!(m.allocations() >= 1);
    drop(inside);
    let end = m.net_bytes();
    assert!(
        end < during - MIB / 2,
        "a free inside was not counted: {during} then {end}"
    );
    drop(m);

    // Off again: a new measurement starts from zero and does not see what came before.
    let later = Measurement::start().expect("installed");
    assert!(later.net_bytes().abs() < MIB / 2, "{}", later.net_bytes());
}
