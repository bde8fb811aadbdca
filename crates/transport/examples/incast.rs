//! Prints the incast table of docs/results/incast.md (deterministic: virtual time).
//!
//! `cargo run --release -p weft-transport --example incast -- [SEED] [TARGET_DELAY_US] [MESSAGES]`
fn main() {
    let mut args = std::env::args().skip(1);
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let target = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
    let messages = args.next().and_then(|s| s.parse().ok()).unwrap_or(64);
    print!(
        "{}",
        weft_transport::sim::incast_table(seed, target, messages)
    );
}
