use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
#[repr(align(128))] struct L(AtomicU64);
fn main(){
  let n=200_000u64;
  let a=Arc::new([L(AtomicU64::new(0)),L(AtomicU64::new(0))]);
  let b=a.clone();
  let h=std::thread::spawn(move||{ for i in 1..=n { while b[0].0.load(Ordering::Acquire)!=i {std::hint::spin_loop();} b[1].0.store(i,Ordering::Release);} });
  let t=std::time::Instant::now();
  for i in 1..=n { a[0].0.store(i,Ordering::Release); while a[1].0.load(Ordering::Acquire)!=i {std::hint::spin_loop();} }
  h.join().unwrap();
  println!("one word ping-pong: one-way {:.0} ns", t.elapsed().as_nanos() as f64/n as f64/2.0);
}
