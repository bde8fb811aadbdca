//! Print the goodput sweep (loss × recovery mode × message size) as a markdown table.
//! `cargo run --release -p weft-transport --example sweep > docs/results/transport-sweep.md`
//! prints the snapshot body; the header of the checked-in file says how it was made.
fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    print!("{}", weft_transport::sim::sweep_table(seed, 1));
}
