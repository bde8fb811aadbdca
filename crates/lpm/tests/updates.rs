//! Insert/delete sequences: after every step the FIB answers like the naive
//! reference (property tests: one publication per update, one batch, and
//! coalesced publication checked after the flush), and a table rebuilt from
//! scratch is identical.

use std::time::Duration;

use proptest::prelude::*;
use weft_lpm::reference::Reference;
use weft_lpm::{Address, FibWriter, IpPrefix, NextHop, Prefix, Snapshot, Update};

#[derive(Debug, Clone)]
enum Op<A: Address> {
    Insert(Prefix<A>, NextHop),
    Remove(Prefix<A>),
}

/// IPv4 prefixes crowded into a few /16s and their neighbours (so that routes
/// overlap, nest and cross chunk edges), with short prefixes that span chunks.
fn prefix4() -> impl Strategy<Value = Prefix<u32>> + Clone {
    let base = prop::sample::select(vec![
        0x0a00_0000u32,
        0x0a01_0000,
        0x0aff_0000,
        0xc0a8_0000,
        0xffff_0000,
        0,
    ]);
    (base, any::<u32>(), 0u8..=32).prop_map(|(b, r, len)| {
        // Keep the address near the base: random low 18 bits.
        Prefix::new(b.wrapping_add(r & 0x3_ffff), len).unwrap()
    })
}

fn prefix6() -> impl Strategy<Value = Prefix<u128>> + Clone {
    let base = prop::sample::select(vec![0x2001_0db8u128 << 96, 0x2a00u128 << 112, 0]);
    (base, any::<u64>(), any::<u64>(), 0u8..=128).prop_map(|(b, hi, lo, len)| {
        // Random bits in the 80 bits below the first 48, plus occasional noise above.
        let low = (u128::from(hi & 0xffff) << 64) | u128::from(lo);
        Prefix::new(b | low, len).unwrap()
    })
}

fn ops<A: Address>(
    p: impl Strategy<Value = Prefix<A>> + Clone,
) -> impl Strategy<Value = Vec<Op<A>>> {
    let op = prop_oneof![
        3 => (p.clone(), 0u32..6).prop_map(|(p, n)| Op::Insert(p, NextHop::new(n).unwrap())),
        1 => p.prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 1..60)
}

fn probes<A: Address>(touched: &[Prefix<A>]) -> Vec<A> {
    let mut v = vec![A::narrow(0), A::narrow(A::MAX)];
    for p in touched {
        let f = p.first().widen();
        let l = p.last().widen();
        for x in [
            f,
            l,
            f.wrapping_sub(1) & A::MAX,
            l.wrapping_add(1) & A::MAX,
            f + (l - f) / 2,
        ] {
            v.push(A::narrow(x));
        }
    }
    v
}

/// How the writer publishes in [`run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `set_max_delay(0)`: every insert/remove publishes; checked after each.
    EachUpdate,
    /// One `apply` of the whole sequence.
    Batch,
    /// insert/remove with a delay bound longer than the test: nothing is
    /// published until `flush`; checked after it.
    Coalesced,
}

fn routes_of(s: &Snapshot<NextHop>) -> usize {
    s.len().0 + s.len().1
}

fn run<A: Address + std::hash::Hash>(
    ops: &[Op<A>],
    mode: Mode,
    lookup: impl Fn(&Snapshot<NextHop>, A) -> Option<NextHop>,
) -> Result<(), TestCaseError> {
    let mut fib: FibWriter<NextHop> = FibWriter::new();
    let reader = fib.reader();
    let mut reference = Reference::<A>::new();
    let mut touched = Vec::new();
    if mode == Mode::Batch {
        let updates: Vec<Update<NextHop>> = ops
            .iter()
            .map(|o| match *o {
                Op::Insert(p, nh) => Update::Insert(p.into(), nh),
                Op::Remove(p) => Update::Remove(p.into()),
            })
            .collect();
        let mut changed = 0;
        for o in ops {
            match *o {
                Op::Insert(p, nh) => {
                    changed += usize::from(reference.insert(p, nh) != Some(nh));
                    touched.push(p);
                }
                Op::Remove(p) => {
                    changed += usize::from(reference.remove(p).is_some());
                    touched.push(p);
                }
            }
        }
        prop_assert_eq!(fib.apply(&updates), Ok(changed));
    } else {
        let coalesced = mode == Mode::Coalesced;
        fib.set_max_delay(if coalesced {
            Duration::from_secs(3600)
        } else {
            Duration::ZERO
        });
        for o in ops {
            match *o {
                Op::Insert(p, nh) => {
                    prop_assert_eq!(fib.insert(p.into(), nh), Ok(reference.insert(p, nh)));
                    touched.push(p);
                }
                Op::Remove(p) => {
                    prop_assert_eq!(fib.remove(p.into()), reference.remove(p));
                    touched.push(p);
                }
            }
            if coalesced {
                // Nothing is published before the flush: readers still see the
                // empty FIB.
                prop_assert_eq!(routes_of(&reader.load()), 0);
                continue;
            }
            let s = reader.load();
            for a in probes(&touched[touched.len() - 1..]) {
                prop_assert_eq!(
                    lookup(&s, a),
                    reference.lookup(a),
                    "after {:?} at {:?}",
                    o,
                    a
                );
            }
        }
        fib.flush();
        prop_assert!(!fib.is_pending());
    }
    let s = reader.load();
    prop_assert_eq!(routes_of(&s), reference.len());
    for a in probes(&touched) {
        prop_assert_eq!(lookup(&s, a), reference.lookup(a), "final at {:?}", a);
    }
    Ok(())
}

fn mode() -> impl Strategy<Value = Mode> {
    prop::sample::select(vec![Mode::EachUpdate, Mode::Batch, Mode::Coalesced])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn ipv4_insert_delete_sequences(ops in ops(prefix4()), mode in mode()) {
        run(&ops, mode, |s, a| s.lookup4(a))?;
    }

    #[test]
    fn ipv6_insert_delete_sequences(ops in ops(prefix6()), mode in mode()) {
        run(&ops, mode, |s, a| s.lookup6(a))?;
    }
}

#[test]
fn updates_then_rebuild_give_the_same_answers() {
    // Start from a synthetic table, withdraw a third and re-point a third, then
    // compare with a table built from scratch from the resulting route set.
    let routes = weft_lpm::synth::v4(30_000, 21);
    let ip: Vec<(IpPrefix, NextHop)> = routes.iter().map(|&(p, nh)| (p.into(), nh)).collect();
    let mut fib = FibWriter::with_routes(&ip).unwrap();
    let mut now: std::collections::BTreeMap<Prefix<u32>, NextHop> =
        routes.iter().copied().collect();
    let mut batch = Vec::new();
    for (i, &(p, nh)) in routes.iter().enumerate() {
        match i % 3 {
            0 => {
                batch.push(Update::Remove(p.into()));
                now.remove(&p);
            }
            1 => {
                let nh2 = NextHop::new(nh.get() + 1000).unwrap();
                batch.push(Update::Insert(p.into(), nh2));
                now.insert(p, nh2);
            }
            _ => {}
        }
        if batch.len() == 97 || i % 1000 == 0 {
            fib.apply(&batch).unwrap();
            batch.clear();
        }
    }
    fib.apply(&batch).unwrap();
    let final_routes: Vec<_> = now.into_iter().collect();
    let fresh = weft_lpm::Lpm4::from_routes(&final_routes);
    let s = fib.reader().snapshot();
    assert_eq!(s.v4().routes(), fresh.routes());
    for a in weft_lpm::synth::addresses(&routes, 200_000, 3) {
        assert_eq!(s.lookup4(a), fresh.lookup(a), "{a:#x}");
    }
}
