//! Write seed inputs for the `transport_qp_pair` fuzz target:
//! `cargo run -p weft-transport --example fuzz_corpus -- fuzz/corpus/transport_qp_pair`.
fn main() {
    let dir = std::env::args().nth(1).expect("dir");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = weft_transport::sim::Rng::new(0xc0de);
    for i in 0..24 {
        // Flags byte covers RC/UC/UD, both recovery modes, MTUs, lossy or not, SRQ.
        let mut data = vec![i as u8 * 11, rng.next_u64() as u8, rng.next_u64() as u8];
        for _ in 0..rng.range(10, 40) {
            // Bias towards posts (0/1), receives (2), crafted packets (3), steps (7).
            let cmd = [0u8, 1, 2, 2, 3, 7, 7, 5, 6, 4][rng.range(0, 10) as usize];
            data.push(cmd);
            data.extend((0..rng.range(8, 40)).map(|_| rng.next_u64() as u8));
        }
        std::fs::write(format!("{dir}/seed-{i:02}"), &data).unwrap();
    }
}
