//! The coalescing writer's visibility bound, seen from another thread: a route
//! added is found by a reader that loads after the writer's flush, and after the
//! delay bound while updates keep arriving; a route withdrawn is gone likewise.

use std::sync::mpsc;
use std::time::Duration;

use weft_lpm::{FibWriter, IpPrefix};

#[test]
fn a_reader_thread_sees_changes_after_flush_and_after_the_bound() {
    let mut w: FibWriter<u32> = FibWriter::new();
    w.set_max_delay(Duration::from_millis(10));
    let reader = w.reader();
    // The reader answers each probe with what its freshly loaded snapshot says.
    let (ask, asked) = mpsc::channel::<u32>();
    let (tell, told) = mpsc::channel::<Option<u32>>();
    let t = std::thread::spawn(move || {
        for a in asked {
            tell.send(reader.load().lookup4(a)).expect("test alive");
        }
    });
    let probe = |a: u32| {
        ask.send(a).expect("reader alive");
        told.recv_timeout(Duration::from_secs(10))
            .expect("reader answers")
    };
    let p: IpPrefix = "198.18.7.0/24".parse().unwrap();
    let q: IpPrefix = "198.19.0.0/16".parse().unwrap();

    // Added, then flushed: found.
    w.insert(p, 7).unwrap();
    w.flush();
    assert_eq!(probe(0xc612_0701), Some(7));

    // Added while updates keep arriving: published once it is `max_delay` old.
    w.insert(q, 9).unwrap();
    std::thread::sleep(Duration::from_millis(12));
    w.insert(p, 8).unwrap();
    assert_eq!(
        probe(0xc613_0001),
        Some(9),
        "older than the bound, published"
    );
    assert_eq!(probe(0xc612_0701), Some(8));

    // Withdrawn and flushed: gone.
    w.remove(q);
    w.flush();
    assert_eq!(probe(0xc613_0001), None);
    drop(ask);
    t.join().expect("reader thread");
}
