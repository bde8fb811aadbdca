use std::sync::Mutex;
use std::time::Instant;
use std::hint::black_box;
fn main() {
    let m = Mutex::new(0u64);
    let n = 50_000_000u64;
    for _ in 0..3 {
        let t = Instant::now();
        for i in 0..n { if let Ok(mut g) = black_box(&m).try_lock() { *g += i; } }
        let a = t.elapsed().as_nanos() as f64 / n as f64;
        let mut v = 0u64;
        let t = Instant::now();
        for i in 0..n { v = black_box(v + i); }
        let b = t.elapsed().as_nanos() as f64 / n as f64;
        println!("try_lock+unlock {a:.2} ns, plain {b:.2} ns");
    }
}
