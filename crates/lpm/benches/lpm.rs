//! Criterion benches: weft-lpm against the peer crates on the same table and keys.
//!
//! Table: `bgpas.lpm` of iptrie 0.11 when the cargo registry has it (the real full
//! table), else the synthetic generator at full size. Keys: 4096 uniformly random
//! destinations per iteration. `weft lpm-bench` reports the same comparison with
//! memory and the ratio to the fastest peer; these benches give criterion's
//! statistics for the lookup, build and update paths.

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use weft_lpm::{routes, synth, FibWriter, IpPrefix, NextHop, Prefix, Table};

type R4 = Vec<(Prefix<u32>, NextHop)>;
type R6 = Vec<(Prefix<u128>, NextHop)>;

fn tables() -> (R4, R6, &'static str) {
    match routes::locate_bgpas().and_then(|p| routes::read(&p).ok()) {
        Some(f) => (routes::intern(&f.v4).0, routes::intern(&f.v6).0, "bgpas"),
        None => {
            eprintln!("bgpas.lpm not found: benchmarking a synthetic table");
            (synth::v4(1_000_000, 1), synth::v6(170_000, 1), "synthetic")
        }
    }
}

const KEYS: usize = 4096;

fn lookups(c: &mut Criterion) {
    let (r4, r6, src) = tables();
    let mut rng = synth::Rng::new(7);
    let k4: Vec<u32> = (0..KEYS).map(|_| rng.next_u64() as u32).collect();
    let k6: Vec<u128> = (0..KEYS).map(|_| rng.next_u128()).collect();

    let mut g = c.benchmark_group(format!("lookup_ipv4_random_{src}"));
    g.throughput(Throughput::Elements(KEYS as u64));
    let weft = Table::<u32>::from_routes(&r4);
    g.bench_function("weft", |b| {
        b.iter(|| {
            k4.iter()
                .map(|&a| weft.lookup(a).map_or(0, NextHop::get))
                .fold(0u32, u32::wrapping_add)
        })
    });
    let mut out = vec![None; KEYS];
    g.bench_function("weft_batch32", |b| {
        b.iter(|| {
            for (k, o) in k4.chunks(32).zip(out.chunks_mut(32)) {
                weft.lookup_batch(k, o);
            }
            black_box(&out);
        })
    });
    let pop: poptrie::Poptrie<(u32, u8), u32> = r4
        .iter()
        .map(|(p, nh)| ((p.addr(), p.len()), nh.get()))
        .collect();
    g.bench_function("poptrie", |b| {
        b.iter(|| {
            k4.iter()
                .map(|&a| pop.lookup(a).copied().unwrap_or(0))
                .fold(0u32, u32::wrapping_add)
        })
    });
    drop(pop);
    let mut pt = prefix_trie::PrefixMap::<(u32, u8), u32>::new();
    for (p, nh) in &r4 {
        pt.insert((p.addr(), p.len()), nh.get());
    }
    g.bench_function("prefix-trie", |b| {
        b.iter(|| {
            k4.iter()
                .map(|&a| pt.get_lpm(&(a, 32)).map_or(0, |m| *m.1))
                .fold(0u32, u32::wrapping_add)
        })
    });
    drop(pt);
    let mut rt = iptrie::map::RTrieMap::with_root(0u32);
    for (p, nh) in &r4 {
        rt.insert(
            iptrie::Ipv4Prefix::new(Ipv4Addr::from(p.addr()), p.len()).unwrap(),
            nh.get(),
        );
    }
    let lc = rt.compress();
    g.bench_function("iptrie-lctrie", |b| {
        b.iter(|| {
            k4.iter()
                .map(|&a| *lc.lookup(&Ipv4Addr::from(a)).1)
                .fold(0u32, u32::wrapping_add)
        })
    });
    drop(lc);
    let mut tb = ip_network_table_deps_treebitmap::IpLookupTable::<Ipv4Addr, u32>::new();
    for (p, nh) in &r4 {
        tb.insert(Ipv4Addr::from(p.addr()), u32::from(p.len()), nh.get());
    }
    g.bench_function("treebitmap", |b| {
        b.iter(|| {
            k4.iter()
                .map(|&a| tb.longest_match(Ipv4Addr::from(a)).map_or(0, |m| *m.2))
                .fold(0u32, u32::wrapping_add)
        })
    });
    g.finish();

    let mut g = c.benchmark_group(format!("lookup_ipv6_random_{src}"));
    g.throughput(Throughput::Elements(KEYS as u64));
    let weft6 = Table::<u128>::from_routes(&r6);
    g.bench_function("weft", |b| {
        b.iter(|| {
            k6.iter()
                .map(|&a| weft6.lookup(a).map_or(0, NextHop::get))
                .fold(0u32, u32::wrapping_add)
        })
    });
    g.bench_function("weft_batch32", |b| {
        b.iter(|| {
            for (k, o) in k6.chunks(32).zip(out.chunks_mut(32)) {
                weft6.lookup_batch(k, o);
            }
            black_box(&out);
        })
    });
    let pop6: poptrie::Poptrie<(u128, u8), u32> = r6
        .iter()
        .map(|(p, nh)| ((p.addr(), p.len()), nh.get()))
        .collect();
    g.bench_function("poptrie", |b| {
        b.iter(|| {
            k6.iter()
                .map(|&a| pop6.lookup(a).copied().unwrap_or(0))
                .fold(0u32, u32::wrapping_add)
        })
    });
    let mut pt6 = prefix_trie::PrefixMap::<(u128, u8), u32>::new();
    for (p, nh) in &r6 {
        pt6.insert((p.addr(), p.len()), nh.get());
    }
    g.bench_function("prefix-trie", |b| {
        b.iter(|| {
            k6.iter()
                .map(|&a| pt6.get_lpm(&(a, 128)).map_or(0, |m| *m.1))
                .fold(0u32, u32::wrapping_add)
        })
    });
    let mut rt6 = iptrie::map::RTrieMap::with_root(0u32);
    for (p, nh) in &r6 {
        rt6.insert(
            iptrie::Ipv6Prefix::new(Ipv6Addr::from(p.addr()), p.len()).unwrap(),
            nh.get(),
        );
    }
    let lc6 = rt6.compress();
    g.bench_function("iptrie-lctrie", |b| {
        b.iter(|| {
            k6.iter()
                .map(|&a| *lc6.lookup(&Ipv6Addr::from(a)).1)
                .fold(0u32, u32::wrapping_add)
        })
    });
    let mut tb6 = ip_network_table_deps_treebitmap::IpLookupTable::<Ipv6Addr, u32>::new();
    for (p, nh) in &r6 {
        tb6.insert(Ipv6Addr::from(p.addr()), u32::from(p.len()), nh.get());
    }
    g.bench_function("treebitmap", |b| {
        b.iter(|| {
            k6.iter()
                .map(|&a| tb6.longest_match(Ipv6Addr::from(a)).map_or(0, |m| *m.2))
                .fold(0u32, u32::wrapping_add)
        })
    });
    g.finish();
}

fn build_and_update(c: &mut Criterion) {
    let (r4, r6, src) = tables();
    let mut g = c.benchmark_group(format!("build_{src}"));
    g.sample_size(10);
    g.bench_with_input(BenchmarkId::new("weft", "ipv4"), &r4, |b, r| {
        b.iter(|| Table::<u32>::from_routes(r))
    });
    g.bench_with_input(BenchmarkId::new("weft", "ipv6"), &r6, |b, r| {
        b.iter(|| Table::<u128>::from_routes(r))
    });
    g.finish();

    let mut g = c.benchmark_group(format!("update_{src}"));
    let ip: Vec<(IpPrefix, NextHop)> = r4.iter().map(|&(p, nh)| (p.into(), nh)).collect();
    let mut fib = FibWriter::with_routes(&ip).expect("next hops fit");
    let mut i = 0usize;
    g.throughput(Throughput::Elements(2));
    g.bench_function("weft_ipv4_withdraw_announce", |b| {
        b.iter(|| {
            let (p, nh) = ip[i % ip.len()];
            i = i.wrapping_add(7919);
            fib.remove(p);
            fib.insert(p, nh).expect("next hops fit");
            fib.flush();
        })
    });
    g.finish();
}

// criterion's macro defines an undocumented `benches` function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, lookups, build_and_update);
}
use group::benches;
criterion_main!(benches);
