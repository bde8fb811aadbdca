//! Differential tests: weft's tables against the naive reference, on synthetic
//! tables (CI-sized) and, when the real full table is in the cargo registry, on
//! every route of it. Addresses: the first and last address of every prefix and
//! their outside neighbours, the edges of every top-level chunk a prefix touches,
//! and random addresses.

use std::collections::BTreeMap;
use std::sync::Arc;

use weft_lpm::reference::Reference;
use weft_lpm::{
    routes, synth, Address, FibWriter, IpPrefix, Lpm4, Lpm6, NextHop, Prefix, Snapshot, Table,
};

/// Adversarial addresses for `routes`: first/last of each prefix, the addresses
/// just outside, and the 16-bit-stride boundaries around them.
fn adversarial<A: Address>(routes: &[(Prefix<A>, NextHop)]) -> Vec<A> {
    let mut v = Vec::with_capacity(routes.len() * 8);
    let stride_mask = |x: u128, s: u32| x & !((1u128 << s) - 1);
    for (p, _) in routes {
        let f = p.first().widen();
        let l = p.last().widen();
        v.push(f);
        v.push(l);
        v.push(f.wrapping_sub(1) & A::MAX);
        v.push(l.wrapping_add(1) & A::MAX);
        // Edges of the top-level chunk and of the next stride down.
        let s1 = A::BITS - 16;
        v.push(stride_mask(f, s1));
        v.push(stride_mask(f, s1) | ((1u128 << s1) - 1));
        if A::BITS > 32 {
            let s2 = A::BITS - 32;
            v.push(stride_mask(l, s2));
            v.push(stride_mask(l, s2).wrapping_sub(1) & A::MAX);
        }
    }
    v.push(0);
    v.push(A::MAX);
    v.into_iter().map(A::narrow).collect()
}

fn check<A: Address + std::hash::Hash>(
    name: &str,
    routes: &[(Prefix<A>, NextHop)],
    lookup: impl Fn(A) -> Option<NextHop>,
    batch: impl Fn(&[A], &mut [Option<NextHop>]),
    random: usize,
) {
    let reference = Reference::from_routes(routes);
    let mut addrs = adversarial(routes);
    addrs.extend(synth::addresses(routes, random, 99));
    let mut bad = Vec::new();
    let mut out = vec![None; addrs.len()];
    batch(&addrs, &mut out);
    for (i, &a) in addrs.iter().enumerate() {
        let want = reference.lookup(a);
        let got = lookup(a);
        if got != want || out[i] != want {
            bad.push((a, want, got, out[i]));
        }
    }
    assert!(
        bad.is_empty(),
        "{name}: {} of {} addresses wrong, first: {:?}",
        bad.len(),
        addrs.len(),
        &bad[..bad.len().min(5)]
    );
    eprintln!(
        "{name}: {} routes, {} addresses agree with the reference",
        routes.len(),
        addrs.len()
    );
}

#[test]
fn synthetic_ipv4_100k_matches_reference() {
    let r = synth::v4(100_000, 11);
    let t = Lpm4::from_routes(&r);
    check(
        "synthetic ipv4",
        &r,
        |a| t.lookup(a),
        |a, o| t.lookup_batch(a, o),
        200_000,
    );
    // The same routes in a FIB give the same table.
    let ip: Vec<(IpPrefix, NextHop)> = r.iter().map(|&(p, nh)| (p.into(), nh)).collect();
    let fib = FibWriter::with_routes(&ip).unwrap();
    let s = fib.reader().snapshot();
    check(
        "synthetic ipv4 fib",
        &r,
        |a| s.lookup4(a),
        |a, o| {
            s.v4().lookup_batch(a, o);
            o.iter_mut()
                .for_each(|x| *x = x.and_then(|i| s.next_hop(i)));
        },
        50_000,
    );
}

/// Routes of one family with their next hops.
type Routes<A> = Vec<(Prefix<A>, NextHop)>;

/// The writer's incremental path: routes given one insert at a time with
/// coalesced publication (chunk by chunk, never the whole-table rebuild), a tenth
/// withdrawn again; returns the flushed snapshot and the routes it must hold.
fn incremental<A: Address>(r: &[(Prefix<A>, NextHop)]) -> (Arc<Snapshot<NextHop>>, Routes<A>) {
    let mut w: FibWriter<NextHop> = FibWriter::new();
    w.set_max_delay(std::time::Duration::from_micros(200));
    let mut kept = BTreeMap::new();
    for (i, &(p, nh)) in r.iter().enumerate() {
        w.insert(p.into(), nh).unwrap();
        kept.insert(p, nh);
        if i % 10 == 3 {
            w.remove(p.into());
            kept.remove(&p);
        }
    }
    w.flush();
    assert!(w.stats().publications > 1, "coalesced into one publication");
    (w.reader().snapshot(), kept.into_iter().collect())
}

#[test]
fn writer_single_updates_match_reference() {
    let (s, kept) = incremental(&synth::v4(30_000, 13));
    check(
        "incremental ipv4",
        &kept,
        |a| s.lookup4(a),
        |a, o| {
            s.v4().lookup_batch(a, o);
            o.iter_mut()
                .for_each(|x| *x = x.and_then(|i| s.next_hop(i)));
        },
        50_000,
    );
    let (s, kept) = incremental(&synth::v6(8_000, 14));
    check(
        "incremental ipv6",
        &kept,
        |a| s.lookup6(a),
        |a, o| {
            s.v6().lookup_batch(a, o);
            o.iter_mut()
                .for_each(|x| *x = x.and_then(|i| s.next_hop(i)));
        },
        50_000,
    );
}

#[test]
fn synthetic_ipv6_20k_matches_reference() {
    let r = synth::v6(20_000, 12);
    let t = Lpm6::from_routes(&r);
    check(
        "synthetic ipv6",
        &r,
        |a| t.lookup(a),
        |a, o| t.lookup_batch(a, o),
        100_000,
    );
}

#[test]
fn synthetic_with_default_routes_and_host_routes() {
    let mut r = synth::v4(20_000, 5);
    r.push((Prefix::new(0, 0).unwrap(), NextHop::new(77).unwrap()));
    r.push((
        Prefix::new(0xffff_ffff, 32).unwrap(),
        NextHop::new(78).unwrap(),
    ));
    r.push((Prefix::new(0, 32).unwrap(), NextHop::new(79).unwrap()));
    let t = Lpm4::from_routes(&r);
    check(
        "ipv4 with /0 and /32 at the ends",
        &r,
        |a| t.lookup(a),
        |a, o| t.lookup_batch(a, o),
        20_000,
    );
    let mut r6 = synth::v6(5_000, 6);
    r6.push((Prefix::new(0, 0).unwrap(), NextHop::new(1).unwrap()));
    r6.push((
        Prefix::new(u128::MAX, 128).unwrap(),
        NextHop::new(2).unwrap(),
    ));
    r6.push((
        Prefix::new(0x2001_0db8 << 96 | 0x1234, 128).unwrap(),
        NextHop::new(3).unwrap(),
    ));
    r6.push((
        Prefix::new(0x2001_0db8 << 96, 127).unwrap(),
        NextHop::new(4).unwrap(),
    ));
    let t6 = Lpm6::from_routes(&r6);
    check(
        "ipv6 with /0 and /128s",
        &r6,
        |a| t6.lookup(a),
        |a, o| t6.lookup_batch(a, o),
        20_000,
    );
}

#[test]
fn dense_chunk_forces_deep_nodes() {
    // Every other /32 of one /16 (32 768 ranges of alternating next hops: the
    // node needs fence levels) plus a /20 with alternating /28s.
    let mut r = Vec::new();
    for i in 0..32_768u32 {
        r.push((
            Prefix::new(0x0a0a_0000 | (i * 2), 32).unwrap(),
            NextHop::new(i % 3).unwrap(),
        ));
    }
    for i in 0..256u32 {
        r.push((
            Prefix::new(0x0b0b_0000 | (i << 4), 28).unwrap(),
            NextHop::new(i % 2).unwrap(),
        ));
    }
    let t = Lpm4::from_routes(&r);
    check(
        "deep ipv4 nodes",
        &r,
        |a| t.lookup(a),
        |a, o| t.lookup_batch(a, o),
        10_000,
    );
    let (nodes, _) = t.node_stats();
    assert_eq!(nodes, 2);
}

#[test]
fn full_real_table_matches_reference() {
    let Some(path) = routes::locate_bgpas() else {
        weft_testkit::skip(
            "bgpas.lpm not found (iptrie 0.11 in the cargo registry; `cargo fetch` brings it)",
        );
        return;
    };
    let file = routes::read(&path).expect("read bgpas.lpm");
    let (v4, _) = routes::intern(&file.v4);
    let (v6, _) = routes::intern(&file.v6);
    assert!(
        v4.len() > 1_000_000 && v6.len() > 170_000,
        "unexpected file {}",
        path.display()
    );
    let t4: Table<u32> = Table::from_routes(&v4);
    assert!(
        t4.memory_bytes() <= 4 << 20,
        "full IPv4 table takes {} bytes",
        t4.memory_bytes()
    );
    check(
        "real ipv4",
        &v4,
        |a| t4.lookup(a),
        |a, o| t4.lookup_batch(a, o),
        200_000,
    );
    let t6: Table<u128> = Table::from_routes(&v6);
    assert!(
        t6.memory_bytes() <= 8 << 20,
        "full IPv6 table takes {} bytes",
        t6.memory_bytes()
    );
    check(
        "real ipv6",
        &v6,
        |a| t6.lookup(a),
        |a, o| t6.lookup_batch(a, o),
        200_000,
    );
}
