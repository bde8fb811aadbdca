//! Readers look up while a writer inserts and withdraws routes. Every answer must
//! be the one before or the one after an update for addresses it affects, the
//! unchanged answer everywhere else, and two routes changed in one batch must be
//! seen changed together (no torn table).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use weft_lpm::{synth, FibWriter, IpPrefix, NextHop, Prefix, Update};

#[test]
fn readers_see_old_or_new_never_a_mix() {
    let base = synth::v4(50_000, 31);
    // Pairs of /24s in 100.64.0.0/10 (unused by the generator's routes? not
    // necessarily, so derive the expected answers from the table itself).
    let ip: Vec<(IpPrefix, NextHop)> = base.iter().map(|&(p, nh)| (p.into(), nh)).collect();
    let mut writer = FibWriter::with_routes(&ip).unwrap();
    let fib = writer.reader();
    let pairs: Vec<(Prefix<u32>, Prefix<u32>)> = (0..64u32)
        .map(|i| {
            let a = Prefix::new(0x6440_0000 | (i << 9), 24).unwrap();
            let b = Prefix::new(0x6440_0000 | (i << 9) | 0x100, 24).unwrap();
            (a, b)
        })
        .collect();
    let before = fib.snapshot();
    // Answers without the pairs (they are absent from the synthetic table only if
    // the generator did not produce them: remove them to be sure).
    let removals: Vec<Update<NextHop>> = pairs
        .iter()
        .flat_map(|&(a, b)| [Update::Remove(a.into()), Update::Remove(b.into())])
        .collect();
    writer.apply(&removals).unwrap();
    let without = fib.snapshot();
    drop(before);
    let new_nh = |i: usize| NextHop::new(1_000_000 + i as u32).unwrap();
    // Control addresses: random ones outside 100.64.0.0/10.
    let controls: Vec<u32> = synth::addresses(&base, 5_000, 4)
        .into_iter()
        .filter(|a| a >> 22 != 0x6440_0000 >> 22)
        .collect();
    let control_answers: Vec<Option<NextHop>> =
        controls.iter().map(|&a| without.lookup4(a)).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for r in 0..2 {
        let (fib, stop, checks, pairs, without, controls, control_answers) = (
            fib.clone(),
            stop.clone(),
            checks.clone(),
            pairs.clone(),
            without.clone(),
            controls.clone(),
            control_answers.clone(),
        );
        readers.push(std::thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let t = fib.load();
                for (i, &(a, b)) in pairs.iter().enumerate() {
                    let probe_a = a.first() + 7 + r;
                    let probe_b = b.last() - r;
                    let (ga, gb) = (t.lookup4(probe_a), t.lookup4(probe_b));
                    let old_a = without.lookup4(probe_a);
                    let old_b = without.lookup4(probe_b);
                    let new = Some(new_nh(i));
                    assert!(ga == old_a || ga == new, "pair {i}: a answered {ga:?}");
                    assert!(gb == old_b || gb == new, "pair {i}: b answered {gb:?}");
                    // One batch changes a and b together: a torn table would show one.
                    assert_eq!(ga == new, gb == new, "pair {i}: torn ({ga:?}, {gb:?})");
                    n += 1;
                }
                for (k, &c) in controls.iter().enumerate().skip(n % 97).step_by(97) {
                    assert_eq!(t.lookup4(c), control_answers[k], "control {c:#x}");
                    n += 1;
                }
            }
            checks.fetch_add(n, Ordering::Relaxed);
        }));
    }
    // Writer: announce and withdraw each pair in single batches, many times.
    let mut published = 0;
    for round in 0..40 {
        for (i, &(a, b)) in pairs.iter().enumerate() {
            let batch = if round % 2 == 0 {
                [
                    Update::Insert(a.into(), new_nh(i)),
                    Update::Insert(b.into(), new_nh(i)),
                ]
            } else {
                [Update::Remove(a.into()), Update::Remove(b.into())]
            };
            assert_eq!(writer.apply(&batch), Ok(2));
            published += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader panicked");
    }
    let checks = checks.load(Ordering::Relaxed);
    eprintln!("{published} publishes, {checks} reader checks");
    assert!(checks > 1000, "readers barely ran ({checks})");
    // After an even number of rounds every pair is withdrawn again.
    let t = fib.load();
    for &c in &controls[..100] {
        assert_eq!(t.lookup4(c), without.lookup4(c));
    }
}
