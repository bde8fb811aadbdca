//! The fuzz target's driver over seeded random inputs, so CI runs it without nightly:
//! no panic, no hang, nothing written outside a registered region.
use weft_transport::sim::{fuzz_qp_pair, Rng};

#[test]
fn random_operation_sequences_never_panic_or_stray() {
    let mut rng = Rng::new(0xf022);
    for case in 0..2000u64 {
        let len = rng.range(1, 600) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let r = std::panic::catch_unwind(|| fuzz_qp_pair(&data));
        assert!(r.is_ok(), "case {case} panicked: input {data:02x?}");
    }
}

#[test]
fn crafted_packet_heavy_inputs() {
    // Bias towards command 3 (crafted packets) and 7 (steps).
    let mut rng = Rng::new(7);
    for _ in 0..600 {
        let mut data = vec![rng.next_u64() as u8, 1, 2];
        for _ in 0..rng.range(5, 60) {
            data.push(if rng.chance(0.6) { 3 } else { 7 });
            data.extend((0..40).map(|_| rng.next_u64() as u8));
        }
        fuzz_qp_pair(&data);
    }
}
