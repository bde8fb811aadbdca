//! `weft lpm-bench`: weft-lpm against the Rust LPM crates, on the same table, the
//! same keys, in the same run.
//!
//! Peers: `iptrie` 0.11 (its LC-trie, and its Patricia trie that the LC-trie is
//! compressed from), the tree-bitmap table `iptrie` benchmarks against
//! (`ip_network_table-deps-treebitmap`), `prefix-trie` and `poptrie`. Every
//! implementation stores the same `u32` next-hop index per prefix. Memory is what
//! the counting global allocator (`alloc_count.rs`, switched on for each
//! build) sees the structure hold after
//! its build, for every implementation alike. Lookup rates are single-core, time
//! boxed, the median of several interleaved rounds.
//!
//! Progress goes to stderr; results to stdout as a table, or as JSON lines with
//! `--json` (one object per implementation and family).

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use serde_json::{json, Value};
use weft_lpm::{
    routes, synth, Address, FibWriter, IpPrefix, NextHop, Prefix, Snapshot, Table, Update,
};

use crate::alloc_count::Measurement;

/// Arguments of `weft lpm-bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Route file (`prefix value` lines). Default: `benches/bgpas.lpm` of the
    /// iptrie 0.11 package in the cargo registry, else the synthetic generator.
    #[arg(long, value_name = "F")]
    routes_file: Option<PathBuf>,
    /// Use the synthetic generator with this many IPv4 routes (IPv6: a sixth).
    #[arg(long, value_name = "N", conflicts_with = "routes_file")]
    synthetic: Option<usize>,
    /// Memory against route count (10k, 50k, 100k, 250k, 500k, full) per
    /// implementation, for the plot; no lookup timing.
    #[arg(long)]
    sweep: bool,
    /// Only this family (`ipv4` or `ipv6`).
    #[arg(long)]
    family: Option<String>,
    /// Seconds per timed measurement.
    #[arg(long, default_value_t = 0.25)]
    seconds: f64,
    /// Interleaved rounds per measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Random destination keys per family.
    #[arg(long, default_value_t = 1 << 20)]
    keys: usize,
    /// Route updates (withdraw and re-announce) for the update-rate measurement
    /// (with `--churn`: random routes to update, at least 2^20).
    #[arg(long, default_value_t = 4000)]
    updates: usize,
    /// Seed for keys, samples and the synthetic generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Route churn instead of lookups: single-route updates/s of weft's updatable
    /// FIB (coalesced publication, and one publication per update) with a reader
    /// thread looking up meanwhile, and of every peer's insert/remove; memory of
    /// the whole updatable FIB (writer's route sets and published snapshot).
    #[arg(long, conflicts_with = "sweep")]
    churn: bool,
}

const NONE: u32 = u32::MAX;

/// One implementation under test.
trait Lpm<A: Address>: Sized {
    const NAME: &'static str;
    fn build(routes: &[(Prefix<A>, NextHop)]) -> Self;
    /// Next hop index, or [`NONE`].
    fn get(&self, a: A) -> u32;
}

struct Weft<A: Address>(Table<A>);

impl Lpm<u32> for Weft<u32> {
    const NAME: &'static str = "weft";
    fn build(r: &[(Prefix<u32>, NextHop)]) -> Self {
        Weft(Table::from_routes(r))
    }
    #[inline]
    fn get(&self, a: u32) -> u32 {
        self.0.lookup(a).map_or(NONE, NextHop::get)
    }
}

impl Lpm<u128> for Weft<u128> {
    const NAME: &'static str = "weft";
    fn build(r: &[(Prefix<u128>, NextHop)]) -> Self {
        Weft(Table::from_routes(r))
    }
    #[inline]
    fn get(&self, a: u128) -> u32 {
        self.0.lookup(a).map_or(NONE, NextHop::get)
    }
}

struct IptrieLc4(iptrie::map::LCTrieMap<iptrie::Ipv4Prefix, u32>);
struct IptrieLc6(iptrie::map::LCTrieMap<iptrie::Ipv6Prefix, u32>);
struct IptrieR4(iptrie::map::RTrieMap<iptrie::Ipv4Prefix, u32>);
struct IptrieR6(iptrie::map::RTrieMap<iptrie::Ipv6Prefix, u32>);

fn rtrie4(r: &[(Prefix<u32>, NextHop)]) -> iptrie::map::RTrieMap<iptrie::Ipv4Prefix, u32> {
    // The root (/0) must hold a value; NONE unless the table has a default route.
    let mut t = iptrie::map::RTrieMap::with_root_and_capacity(NONE, r.len());
    for (p, nh) in r {
        let k = iptrie::Ipv4Prefix::new(Ipv4Addr::from(p.addr()), p.len()).expect("valid length");
        t.insert(k, nh.get());
    }
    t
}

fn rtrie6(r: &[(Prefix<u128>, NextHop)]) -> iptrie::map::RTrieMap<iptrie::Ipv6Prefix, u32> {
    let mut t = iptrie::map::RTrieMap::with_root_and_capacity(NONE, r.len());
    for (p, nh) in r {
        let k = iptrie::Ipv6Prefix::new(Ipv6Addr::from(p.addr()), p.len()).expect("valid length");
        t.insert(k, nh.get());
    }
    t
}

impl Lpm<u32> for IptrieLc4 {
    const NAME: &'static str = "iptrie-lctrie";
    fn build(r: &[(Prefix<u32>, NextHop)]) -> Self {
        IptrieLc4(rtrie4(r).compress())
    }
    #[inline]
    fn get(&self, a: u32) -> u32 {
        *self.0.lookup(&Ipv4Addr::from(a)).1
    }
}

impl Lpm<u128> for IptrieLc6 {
    const NAME: &'static str = "iptrie-lctrie";
    fn build(r: &[(Prefix<u128>, NextHop)]) -> Self {
        IptrieLc6(rtrie6(r).compress())
    }
    #[inline]
    fn get(&self, a: u128) -> u32 {
        *self.0.lookup(&Ipv6Addr::from(a)).1
    }
}

impl Lpm<u32> for IptrieR4 {
    const NAME: &'static str = "iptrie-patricia";
    fn build(r: &[(Prefix<u32>, NextHop)]) -> Self {
        let mut t = rtrie4(r);
        t.shrink_to_fit();
        IptrieR4(t)
    }
    #[inline]
    fn get(&self, a: u32) -> u32 {
        *self.0.lookup(&Ipv4Addr::from(a)).1
    }
}

impl Lpm<u128> for IptrieR6 {
    const NAME: &'static str = "iptrie-patricia";
    fn build(r: &[(Prefix<u128>, NextHop)]) -> Self {
        let mut t = rtrie6(r);
        t.shrink_to_fit();
        IptrieR6(t)
    }
    #[inline]
    fn get(&self, a: u128) -> u32 {
        *self.0.lookup(&Ipv6Addr::from(a)).1
    }
}

struct TreeBitmap4(ip_network_table_deps_treebitmap::IpLookupTable<Ipv4Addr, u32>);
struct TreeBitmap6(ip_network_table_deps_treebitmap::IpLookupTable<Ipv6Addr, u32>);

impl Lpm<u32> for TreeBitmap4 {
    const NAME: &'static str = "treebitmap";
    fn build(r: &[(Prefix<u32>, NextHop)]) -> Self {
        let mut t = ip_network_table_deps_treebitmap::IpLookupTable::new();
        for (p, nh) in r {
            t.insert(Ipv4Addr::from(p.addr()), u32::from(p.len()), nh.get());
        }
        TreeBitmap4(t)
    }
    #[inline]
    fn get(&self, a: u32) -> u32 {
        self.0
            .longest_match(Ipv4Addr::from(a))
            .map_or(NONE, |m| *m.2)
    }
}

impl Lpm<u128> for TreeBitmap6 {
    const NAME: &'static str = "treebitmap";
    fn build(r: &[(Prefix<u128>, NextHop)]) -> Self {
        let mut t = ip_network_table_deps_treebitmap::IpLookupTable::new();
        for (p, nh) in r {
            t.insert(Ipv6Addr::from(p.addr()), u32::from(p.len()), nh.get());
        }
        TreeBitmap6(t)
    }
    #[inline]
    fn get(&self, a: u128) -> u32 {
        self.0
            .longest_match(Ipv6Addr::from(a))
            .map_or(NONE, |m| *m.2)
    }
}

struct PrefixTrie<A: Address>(prefix_trie::PrefixMap<(A, u8), u32>);

impl Lpm<u32> for PrefixTrie<u32> {
    const NAME: &'static str = "prefix-trie";
    fn build(r: &[(Prefix<u32>, NextHop)]) -> Self {
        let mut t = prefix_trie::PrefixMap::new();
        for (p, nh) in r {
            t.insert((p.addr(), p.len()), nh.get());
        }
        PrefixTrie(t)
    }
    #[inline]
    fn get(&self, a: u32) -> u32 {
        self.0.get_lpm(&(a, 32)).map_or(NONE, |m| *m.1)
    }
}

impl Lpm<u128> for PrefixTrie<u128> {
    const NAME: &'static str = "prefix-trie";
    fn build(r: &[(Prefix<u128>, NextHop)]) -> Self {
        let mut t = prefix_trie::PrefixMap::new();
        for (p, nh) in r {
            t.insert((p.addr(), p.len()), nh.get());
        }
        PrefixTrie(t)
    }
    #[inline]
    fn get(&self, a: u128) -> u32 {
        self.0.get_lpm(&(a, 128)).map_or(NONE, |m| *m.1)
    }
}

struct Poptrie4(poptrie::Poptrie<(u32, u8), u32>);
struct Poptrie6(poptrie::Poptrie<(u128, u8), u32>);

impl Lpm<u32> for Poptrie4 {
    const NAME: &'static str = "poptrie";
    fn build(r: &[(Prefix<u32>, NextHop)]) -> Self {
        // Bulk construction (its per-insert path is O(n)).
        Poptrie4(
            r.iter()
                .map(|(p, nh)| ((p.addr(), p.len()), nh.get()))
                .collect(),
        )
    }
    #[inline]
    fn get(&self, a: u32) -> u32 {
        self.0.lookup(a).map_or(NONE, |v| *v)
    }
}

impl Lpm<u128> for Poptrie6 {
    const NAME: &'static str = "poptrie";
    fn build(r: &[(Prefix<u128>, NextHop)]) -> Self {
        Poptrie6(
            r.iter()
                .map(|(p, nh)| ((p.addr(), p.len()), nh.get()))
                .collect(),
        )
    }
    #[inline]
    fn get(&self, a: u128) -> u32 {
        self.0.lookup(a).map_or(NONE, |v| *v)
    }
}

/// Builds with memory and time accounting. Returns (structure, bytes, ms).
fn build_counted<A: Address, T: Lpm<A>>(r: &[(Prefix<A>, NextHop)]) -> (T, usize, f64) {
    // `measure` checked that the counting allocator is installed.
    let m = Measurement::start().ok();
    let t0 = Instant::now();
    let t = T::build(r);
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let bytes = m.map_or(0, |m| m.net_bytes().max(0) as usize);
    (t, bytes, ms)
}

/// Lookups per second (millions) over `keys`, repeated for at least `secs`.
#[inline(never)]
fn rate<A: Copy>(keys: &[A], secs: f64, f: impl Fn(A) -> u32) -> f64 {
    let t0 = Instant::now();
    let mut n = 0usize;
    let mut acc = 0u32;
    loop {
        for &k in keys {
            acc = acc.wrapping_add(f(k));
        }
        n += keys.len();
        if t0.elapsed().as_secs_f64() >= secs {
            break;
        }
    }
    black_box(acc);
    n as f64 / t0.elapsed().as_secs_f64() / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Per-implementation results of one family.
#[derive(Debug, Default)]
struct Row {
    name: &'static str,
    bytes: usize,
    build_ms: f64,
    random: Vec<f64>,
    trace: Vec<f64>,
    batch_random: Vec<f64>,
    batch_trace: Vec<f64>,
    extra: Vec<(&'static str, Value)>,
}

/// Keys for one family: uniform random, and a cache-friendly trace (4096 hot
/// destinations inside routed prefixes, skewed popularity, as a router's bursts).
fn keys_for<A: Address>(routes: &[(Prefix<A>, NextHop)], n: usize, seed: u64) -> (Vec<A>, Vec<A>) {
    let mut rng = synth::Rng::new(seed);
    let random: Vec<A> = (0..n)
        .map(|_| A::narrow(rng.next_u128() & A::MAX))
        .collect();
    let hot = synth::addresses(routes, 4096, seed ^ 0x7ace);
    let trace: Vec<A> = (0..n)
        .map(|_| {
            let u = rng.unit();
            hot[((hot.len() as f64) * u * u * u) as usize % hot.len()]
        })
        .collect();
    (random, trace)
}

/// Family-specific pieces the generic driver needs.
trait Family: Address + std::hash::Hash {
    fn batch(t: &Table<Self>, keys: &[Self], out: &mut [Option<NextHop>]);
    /// Longest-prefix match in an updatable FIB's snapshot.
    fn resolve(s: &Snapshot<u32>, a: Self) -> Option<u32>;
    /// Times the family's peers' single-route updates (churn rows 2..).
    fn churn_peers(c: &mut Churn<'_, Self>) -> anyhow::Result<()>;
    /// Builds, checks and times the family's peers (rows 1..=5).
    fn peers(b: &mut Bench<'_, Self>, args: &Args, weft: &Weft<Self>) -> anyhow::Result<()>;
    /// Builds the family-specific peers for the memory sweep.
    fn sweep_peers(sub: &[(Prefix<Self>, NextHop)], row: &mut dyn FnMut(&str, usize, f64));
}

fn sweep_one<A: Address, T: Lpm<A>>(
    sub: &[(Prefix<A>, NextHop)],
    row: &mut dyn FnMut(&str, usize, f64),
) {
    let (t, bytes, ms) = build_counted::<A, T>(sub);
    row(T::NAME, bytes, ms);
    drop(t);
}

impl Family for u32 {
    fn batch(t: &Table<u32>, keys: &[u32], out: &mut [Option<NextHop>]) {
        t.lookup_batch(keys, out)
    }
    fn resolve(s: &Snapshot<u32>, a: u32) -> Option<u32> {
        s.lookup4(a)
    }
    fn churn_peers(c: &mut Churn<'_, u32>) -> anyhow::Result<()> {
        c.peer::<IptrieR4>()?;
        c.peer::<TreeBitmap4>()?;
        c.peer::<PrefixTrie<u32>>()?;
        c.peer::<Poptrie4>()
    }
    fn peers(b: &mut Bench<'_, u32>, args: &Args, weft: &Weft<u32>) -> anyhow::Result<()> {
        family4_peers(b, args, weft)
    }
    fn sweep_peers(sub: &[(Prefix<u32>, NextHop)], row: &mut dyn FnMut(&str, usize, f64)) {
        sweep_one::<u32, IptrieLc4>(sub, row);
        sweep_one::<u32, IptrieR4>(sub, row);
        sweep_one::<u32, TreeBitmap4>(sub, row);
        sweep_one::<u32, PrefixTrie<u32>>(sub, row);
        sweep_one::<u32, Poptrie4>(sub, row);
    }
}

impl Family for u128 {
    fn batch(t: &Table<u128>, keys: &[u128], out: &mut [Option<NextHop>]) {
        t.lookup_batch(keys, out)
    }
    fn resolve(s: &Snapshot<u32>, a: u128) -> Option<u32> {
        s.lookup6(a)
    }
    fn churn_peers(c: &mut Churn<'_, u128>) -> anyhow::Result<()> {
        c.peer::<IptrieR6>()?;
        c.peer::<TreeBitmap6>()?;
        c.peer::<PrefixTrie<u128>>()?;
        c.peer::<Poptrie6>()
    }
    fn peers(b: &mut Bench<'_, u128>, args: &Args, weft: &Weft<u128>) -> anyhow::Result<()> {
        family6_peers(b, args, weft)
    }
    fn sweep_peers(sub: &[(Prefix<u128>, NextHop)], row: &mut dyn FnMut(&str, usize, f64)) {
        sweep_one::<u128, IptrieLc6>(sub, row);
        sweep_one::<u128, IptrieR6>(sub, row);
        sweep_one::<u128, TreeBitmap6>(sub, row);
        sweep_one::<u128, PrefixTrie<u128>>(sub, row);
        sweep_one::<u128, Poptrie6>(sub, row);
    }
}

const BURST: usize = 32;

fn batch_rate<A: Family>(t: &Table<A>, keys: &[A], secs: f64) -> f64 {
    let t0 = Instant::now();
    let mut n = 0usize;
    let mut acc = 0u32;
    let mut out = [None; BURST];
    loop {
        for burst in keys.chunks_exact(BURST) {
            A::batch(t, burst, &mut out);
            for o in &out {
                acc = acc.wrapping_add(o.map_or(NONE, NextHop::get));
            }
        }
        n += keys.len() / BURST * BURST;
        if t0.elapsed().as_secs_f64() >= secs {
            break;
        }
    }
    black_box(acc);
    n as f64 / t0.elapsed().as_secs_f64() / 1e6
}

struct Bench<'a, A: Family> {
    args: &'a Args,
    routes: &'a [(Prefix<A>, NextHop)],
    random: Vec<A>,
    trace: Vec<A>,
    check: Vec<A>,
    expect: Vec<u32>,
    rows: Vec<Row>,
}

impl<'a, A: Family> Bench<'a, A>
where
    Weft<A>: Lpm<A>,
{
    fn new(args: &'a Args, routes: &'a [(Prefix<A>, NextHop)]) -> Self {
        let (random, trace) = keys_for(routes, args.keys, args.seed);
        let mut check = synth::addresses(routes, 200_000, args.seed ^ 0xc4ec);
        check.extend_from_slice(&random[..random.len().min(50_000)]);
        Bench {
            args,
            routes,
            random,
            trace,
            check,
            expect: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Builds `T`, checks it against weft (the first built) on the check keys,
    /// then times it.
    fn run<T: Lpm<A>>(&mut self) -> anyhow::Result<T> {
        eprintln!("  {:<16} building ...", T::NAME);
        let (t, bytes, build_ms) = build_counted::<A, T>(self.routes);
        let got: Vec<u32> = self.check.iter().map(|&a| t.get(a)).collect();
        if self.expect.is_empty() {
            self.expect = got;
        } else {
            let bad = got.iter().zip(&self.expect).filter(|(g, e)| g != e).count();
            anyhow::ensure!(
                bad == 0,
                "{} disagrees with weft on {bad} of {} addresses",
                T::NAME,
                got.len()
            );
        }
        eprintln!(
            "  {:<16} {:.1} MiB, built in {:.0} ms, agrees on {} addresses",
            T::NAME,
            mib(bytes),
            build_ms,
            self.check.len()
        );
        self.rows.push(Row {
            name: T::NAME,
            bytes,
            build_ms,
            ..Row::default()
        });
        Ok(t)
    }

    fn time<T: Lpm<A>>(&mut self, idx: usize, t: &T) {
        let s = self.args.seconds;
        let r = rate(&self.random, s, |a| t.get(a));
        let c = rate(&self.trace, s, |a| t.get(a));
        self.rows[idx].random.push(r);
        self.rows[idx].trace.push(c);
    }
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Builds and times every implementation for one family.
fn family<A: Family>(
    args: &Args,
    routes: &[(Prefix<A>, NextHop)],
    source: &str,
) -> anyhow::Result<Vec<Value>>
where
    Weft<A>: Lpm<A>,
{
    eprintln!("{}: {} routes from {source}", A::FAMILY, routes.len());
    let mut b = Bench::new(args, routes);
    let weft: Weft<A> = b.run()?;
    let distinct = weft.0.routes();
    A::peers(&mut b, args, &weft)?;
    // Updates while forwarding (weft only): withdraw and re-announce routes, one
    // publish per update, with a reader thread looking up all the while; then the
    // same in batches of 1000 per publish.
    eprintln!("  weft             updates ...");
    let (single, batched, during) = update_rates(args, routes)?;
    b.rows[0]
        .extra
        .push(("updates_per_s", json!(single.round())));
    b.rows[0]
        .extra
        .push(("batched_updates_per_s", json!(batched.round())));
    b.rows[0].extra.push((
        "reader_mlookups_per_s_during_updates",
        json!(round2(during)),
    ));
    let (nodes, words) = weft.0.node_stats();
    b.rows[0]
        .extra
        .push(("self_reported_bytes", json!(weft.0.memory_bytes())));
    b.rows[0].extra.push(("range_nodes", json!(nodes)));
    b.rows[0].extra.push(("node_words", json!(words)));

    let fastest = b.rows[1..]
        .iter()
        .map(|r| median(r.random.clone()))
        .fold(0.0, f64::max);
    let fastest_trace = b.rows[1..]
        .iter()
        .map(|r| median(r.trace.clone()))
        .fold(0.0, f64::max);
    let fastest_name = b.rows[1..]
        .iter()
        .max_by(|x, y| median(x.random.clone()).total_cmp(&median(y.random.clone())))
        .map_or("", |r| r.name);
    let mut out = Vec::new();
    for r in &b.rows {
        let random = median(r.random.clone());
        let trace = median(r.trace.clone());
        let mut o = json!({
            "impl": r.name,
            "family": A::FAMILY,
            "routes": distinct,
            "source": source,
            "bytes": r.bytes,
            "build_ms": round2(r.build_ms),
            "mlookups_per_s": round2(random),
            "trace_mlookups_per_s": round2(trace),
            "ratio_vs_fastest_peer": round2(random / fastest),
            "trace_ratio_vs_fastest_peer": round2(trace / fastest_trace),
            "fastest_peer": fastest_name,
            "rounds": r.random.len(),
        });
        if !r.batch_random.is_empty() {
            let br = median(r.batch_random.clone());
            o["batch_mlookups_per_s"] = json!(round2(br));
            o["batch_trace_mlookups_per_s"] = json!(round2(median(r.batch_trace.clone())));
            o["batch_ratio_vs_fastest_peer"] = json!(round2(br / fastest));
        }
        for (k, v) in &r.extra {
            o[*k] = v.clone();
        }
        out.push(o);
    }
    Ok(out)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn family4_peers(b: &mut Bench<'_, u32>, args: &Args, weft: &Weft<u32>) -> anyhow::Result<()> {
    let lc: IptrieLc4 = b.run()?;
    let pat: IptrieR4 = b.run()?;
    let tbm: TreeBitmap4 = b.run()?;
    let pt: PrefixTrie<u32> = b.run()?;
    let pop: Poptrie4 = b.run()?;
    for round in 0..args.rounds {
        eprintln!("  timing round {}/{}", round + 1, args.rounds);
        timing_round(b, args, weft);
        b.time(1, &lc);
        b.time(2, &pat);
        b.time(3, &tbm);
        b.time(4, &pt);
        b.time(5, &pop);
    }
    Ok(())
}

fn family6_peers(b: &mut Bench<'_, u128>, args: &Args, weft: &Weft<u128>) -> anyhow::Result<()> {
    let lc: IptrieLc6 = b.run()?;
    let pat: IptrieR6 = b.run()?;
    let tbm: TreeBitmap6 = b.run()?;
    let pt: PrefixTrie<u128> = b.run()?;
    let pop: Poptrie6 = b.run()?;
    for round in 0..args.rounds {
        eprintln!("  timing round {}/{}", round + 1, args.rounds);
        timing_round(b, args, weft);
        b.time(1, &lc);
        b.time(2, &pat);
        b.time(3, &tbm);
        b.time(4, &pt);
        b.time(5, &pop);
    }
    Ok(())
}

fn timing_round<A: Family>(b: &mut Bench<'_, A>, args: &Args, weft: &Weft<A>)
where
    Weft<A>: Lpm<A>,
{
    b.time(0, weft);
    let br = batch_rate(&weft.0, &b.random, args.seconds);
    let bt = batch_rate(&weft.0, &b.trace, args.seconds);
    b.rows[0].batch_random.push(br);
    b.rows[0].batch_trace.push(bt);
}

/// (updates/s one publish each, updates/s in batches of 1000, reader Mlookups/s
/// meanwhile).
fn update_rates<A: Family>(
    args: &Args,
    routes: &[(Prefix<A>, NextHop)],
) -> anyhow::Result<(f64, f64, f64)> {
    let mut fib = weft_fib(routes);
    fib.set_max_delay(std::time::Duration::ZERO);
    let mut rng = synth::Rng::new(args.seed ^ 0x0bd7);
    let picks: Vec<(Prefix<A>, NextHop)> = (0..args.updates.min(routes.len()))
        .map(|_| routes[rng.below(routes.len() as u64) as usize])
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let looked = Arc::new(AtomicU64::new(0));
    let reader = {
        let (fib, stop, looked) = (fib.reader(), stop.clone(), looked.clone());
        let keys: Vec<A> = (0..4096)
            .map(|_| A::narrow(rng.next_u128() & A::MAX))
            .collect();
        std::thread::spawn(move || {
            let mut acc = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let t = fib.load();
                for &k in &keys {
                    acc = acc.wrapping_add(A::resolve(&t, k).unwrap_or(NONE));
                }
                looked.fetch_add(keys.len() as u64, Ordering::Relaxed);
            }
            black_box(acc);
        })
    };
    let t0 = Instant::now();
    let budget = args.seconds * 8.0;
    let mut done = 0usize;
    for &(p, nh) in &picks {
        fib.remove(p.into());
        fib.insert(p.into(), nh.get())?;
        done += 2;
        if t0.elapsed().as_secs_f64() > budget {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let single = done as f64 / secs;
    let during = looked.load(Ordering::Relaxed) as f64 / secs / 1e6;

    let t1 = Instant::now();
    let mut done_b = 0usize;
    for chunk in picks.chunks(500) {
        let mut batch: Vec<Update<u32>> = chunk
            .iter()
            .map(|&(p, _)| Update::Remove(p.into()))
            .collect();
        batch.extend(
            chunk
                .iter()
                .map(|&(p, nh)| Update::Insert(p.into(), nh.get())),
        );
        fib.apply(&batch)?;
        done_b += batch.len();
        if t1.elapsed().as_secs_f64() > budget {
            break;
        }
    }
    let batched = done_b as f64 / t1.elapsed().as_secs_f64();
    Ok((single, batched, during))
}

/// Memory against route count for every implementation (no timing).
fn sweep<A: Family>(args: &Args, routes: &[(Prefix<A>, NextHop)], source: &str) -> Vec<Value>
where
    Weft<A>: Lpm<A>,
{
    // Random subsets: a seeded shuffle, then prefixes of it.
    let mut shuffled = routes.to_vec();
    let mut rng = synth::Rng::new(args.seed ^ 0x5eed);
    for i in (1..shuffled.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        shuffled.swap(i, j);
    }
    let mut sizes: Vec<usize> = [10_000, 50_000, 100_000, 250_000, 500_000]
        .into_iter()
        .filter(|&n| n < routes.len())
        .collect();
    sizes.push(routes.len());
    let mut out = Vec::new();
    for n in sizes {
        let sub = &shuffled[..n];
        eprintln!("{} sweep: {n} routes", A::FAMILY);
        let mut row = |name: &str, bytes: usize, ms: f64| {
            out.push(json!({"sweep": true, "impl": name, "family": A::FAMILY, "routes": n, "bytes": bytes,
                "build_ms": round2(ms), "source": source}));
        };
        sweep_one::<A, Weft<A>>(sub, &mut row);
        A::sweep_peers(sub, &mut row);
    }
    out
}

/// Routes as next-hop indexes for both families, and where they came from.
type Loaded = (
    Vec<(Prefix<u32>, NextHop)>,
    Vec<(Prefix<u128>, NextHop)>,
    String,
);

fn load(args: &Args) -> anyhow::Result<Loaded> {
    let file = match (&args.routes_file, args.synthetic) {
        (Some(f), _) => Some(f.clone()),
        (None, Some(_)) => None,
        (None, None) => {
            let found = routes::locate_bgpas();
            if found.is_none() {
                eprintln!("bgpas.lpm of iptrie 0.11 not found in the cargo registry: using the synthetic generator");
            }
            found
        }
    };
    if let Some(f) = file {
        eprintln!("reading {}", f.display());
        let rf = routes::read(&f).with_context(|| format!("reading {}", f.display()))?;
        if rf.bad_lines > 0 {
            eprintln!("  {} malformed lines skipped", rf.bad_lines);
        }
        let (v4, t4) = routes::intern(&rf.v4);
        let (v6, t6) = routes::intern(&rf.v6);
        eprintln!(
            "  {} IPv4 routes ({} next hops), {} IPv6 routes ({} next hops)",
            v4.len(),
            t4.len(),
            v6.len(),
            t6.len()
        );
        let name = f.file_name().map_or_else(
            || f.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        return Ok((v4, v6, name));
    }
    let n = args.synthetic.unwrap_or(1_000_000);
    eprintln!(
        "generating {n} IPv4 and {} IPv6 synthetic routes (seed {})",
        n / 6,
        args.seed
    );
    Ok((
        synth::v4(n, args.seed),
        synth::v6(n / 6, args.seed),
        format!("synthetic(seed={})", args.seed),
    ))
}

/// Runs `weft lpm-bench`.
/// A short comparison for `weft demo`: one round, short measurements, both families;
/// the real table when it is found, else (or with `synthetic`) the generator.
pub fn demo_args(synthetic: Option<usize>) -> Args {
    Args {
        json: true,
        routes_file: None,
        synthetic,
        sweep: false,
        family: None,
        seconds: 0.1,
        rounds: 1,
        keys: 1 << 18,
        updates: 500,
        seed: 1,
        churn: false,
    }
}

/// Run `weft lpm-bench`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let rows = measure(&args)?;
    if args.json {
        for r in &rows {
            println!("{r}");
        }
    } else if args.churn {
        print_churn(&rows);
    } else if args.sweep {
        println!(
            "{:<16} {:<5} {:>9} {:>10} {:>9}",
            "impl", "fam", "routes", "MiB", "build ms"
        );
        for r in &rows {
            println!(
                "{:<16} {:<5} {:>9} {:>10.2} {:>9.0}",
                r["impl"].as_str().unwrap_or(""),
                r["family"].as_str().unwrap_or(""),
                r["routes"],
                mib(r["bytes"].as_u64().unwrap_or(0) as usize),
                r["build_ms"].as_f64().unwrap_or(0.0)
            );
        }
    } else {
        print_table(&rows);
    }
    Ok(())
}

/// Everything `weft lpm-bench` measures, one JSON object per implementation and family.
pub fn measure(args: &Args) -> anyhow::Result<Vec<Value>> {
    let want = |f: &str| args.family.as_deref().is_none_or(|x| x == f);
    if let Some(f) = &args.family {
        anyhow::ensure!(f == "ipv4" || f == "ipv6", "--family must be ipv4 or ipv6");
    }
    anyhow::ensure!(
        args.rounds >= 1 && args.keys >= BURST,
        "--rounds >= 1 and --keys >= {BURST}"
    );
    // Memory is counted by the process's counting allocator; without it every
    // implementation would read zero bytes.
    drop(Measurement::start()?);
    let (v4, v6, source) = load(args)?;
    let mut rows = Vec::new();
    if args.churn {
        if want("ipv4") {
            rows.extend(churn(args, &v4, &source)?);
        }
        if want("ipv6") {
            rows.extend(churn(args, &v6, &source)?);
        }
    } else if args.sweep {
        if want("ipv4") {
            rows.extend(sweep(args, &v4, &source));
        }
        if want("ipv6") {
            rows.extend(sweep(args, &v6, &source));
        }
    } else {
        if want("ipv4") {
            rows.extend(family(args, &v4, &source)?);
        }
        if want("ipv6") {
            rows.extend(family(args, &v6, &source)?);
        }
    }
    Ok(rows)
}

fn print_table(rows: &[Value]) {
    println!(
        "{:<16} {:<5} {:>8} {:>8} {:>9} {:>12} {:>12} {:>9}",
        "impl", "fam", "routes", "MiB", "build ms", "random Ml/s", "trace Ml/s", "vs best"
    );
    for r in rows {
        println!(
            "{:<16} {:<5} {:>8} {:>8.2} {:>9.0} {:>12.1} {:>12.1} {:>8.2}x",
            r["impl"].as_str().unwrap_or(""),
            r["family"].as_str().unwrap_or(""),
            r["routes"],
            mib(r["bytes"].as_u64().unwrap_or(0) as usize),
            r["build_ms"].as_f64().unwrap_or(0.0),
            r["mlookups_per_s"].as_f64().unwrap_or(0.0),
            r["trace_mlookups_per_s"].as_f64().unwrap_or(0.0),
            r["ratio_vs_fastest_peer"].as_f64().unwrap_or(0.0),
        );
    }
    for r in rows.iter().filter(|r| r["impl"] == "weft") {
        println!(
            "weft {}: batched lookup {:.1} Ml/s random ({:.2}x the fastest peer, {}), {:.1} Ml/s trace; {:.0} updates/s (one publish each), {:.0} updates/s (batches of 1000); readers kept {:.1} Ml/s during updates",
            r["family"].as_str().unwrap_or(""),
            r["batch_mlookups_per_s"].as_f64().unwrap_or(0.0),
            r["batch_ratio_vs_fastest_peer"].as_f64().unwrap_or(0.0),
            r["fastest_peer"].as_str().unwrap_or(""),
            r["batch_trace_mlookups_per_s"].as_f64().unwrap_or(0.0),
            r["updates_per_s"].as_f64().unwrap_or(0.0),
            r["batched_updates_per_s"].as_f64().unwrap_or(0.0),
            r["reader_mlookups_per_s_during_updates"].as_f64().unwrap_or(0.0),
        );
    }
}

/// weft's updatable FIB over `routes`, the next hop's index as its value.
fn weft_fib<A: Address>(routes: &[(Prefix<A>, NextHop)]) -> FibWriter<u32> {
    let ip: Vec<(IpPrefix, u32)> = routes.iter().map(|&(p, nh)| (p.into(), nh.get())).collect();
    FibWriter::with_routes(&ip).expect("next-hop indexes fit the table")
}

/// A peer's single-route update path, for the churn mode.
trait Update1<A: Address>: Lpm<A> {
    fn insert(&mut self, p: Prefix<A>, v: u32);
    fn remove(&mut self, p: Prefix<A>);
}

impl Update1<u32> for IptrieR4 {
    fn insert(&mut self, p: Prefix<u32>, v: u32) {
        let k = iptrie::Ipv4Prefix::new(Ipv4Addr::from(p.addr()), p.len()).expect("valid length");
        self.0.insert(k, v);
    }
    fn remove(&mut self, p: Prefix<u32>) {
        let k = iptrie::Ipv4Prefix::new(Ipv4Addr::from(p.addr()), p.len()).expect("valid length");
        self.0.remove(&k);
    }
}

impl Update1<u128> for IptrieR6 {
    fn insert(&mut self, p: Prefix<u128>, v: u32) {
        let k = iptrie::Ipv6Prefix::new(Ipv6Addr::from(p.addr()), p.len()).expect("valid length");
        self.0.insert(k, v);
    }
    fn remove(&mut self, p: Prefix<u128>) {
        let k = iptrie::Ipv6Prefix::new(Ipv6Addr::from(p.addr()), p.len()).expect("valid length");
        self.0.remove(&k);
    }
}

impl Update1<u32> for TreeBitmap4 {
    fn insert(&mut self, p: Prefix<u32>, v: u32) {
        self.0
            .insert(Ipv4Addr::from(p.addr()), u32::from(p.len()), v);
    }
    fn remove(&mut self, p: Prefix<u32>) {
        self.0.remove(Ipv4Addr::from(p.addr()), u32::from(p.len()));
    }
}

impl Update1<u128> for TreeBitmap6 {
    fn insert(&mut self, p: Prefix<u128>, v: u32) {
        self.0
            .insert(Ipv6Addr::from(p.addr()), u32::from(p.len()), v);
    }
    fn remove(&mut self, p: Prefix<u128>) {
        self.0.remove(Ipv6Addr::from(p.addr()), u32::from(p.len()));
    }
}

impl<A: Address> Update1<A> for PrefixTrie<A>
where
    PrefixTrie<A>: Lpm<A>,
    (A, u8): prefix_trie::Prefix,
{
    fn insert(&mut self, p: Prefix<A>, v: u32) {
        self.0.insert((p.addr(), p.len()), v);
    }
    fn remove(&mut self, p: Prefix<A>) {
        self.0.remove(&(p.addr(), p.len()));
    }
}

impl Update1<u32> for Poptrie4 {
    fn insert(&mut self, p: Prefix<u32>, v: u32) {
        self.0.insert((p.addr(), p.len()), v);
    }
    fn remove(&mut self, p: Prefix<u32>) {
        self.0.remove((p.addr(), p.len()));
    }
}

impl Update1<u128> for Poptrie6 {
    fn insert(&mut self, p: Prefix<u128>, v: u32) {
        self.0.insert((p.addr(), p.len()), v);
    }
    fn remove(&mut self, p: Prefix<u128>) {
        self.0.remove((p.addr(), p.len()));
    }
}

/// The churn mode of one family: the same update sequence (withdraw and
/// re-announce random routes of the table, one route per update) for weft and
/// every peer.
struct Churn<'a, A: Address> {
    args: &'a Args,
    routes: &'a [(Prefix<A>, NextHop)],
    picks: Vec<(Prefix<A>, NextHop)>,
    source: &'a str,
    rows: Vec<Value>,
}

impl<A: Family> Churn<'_, A> {
    /// Seconds each update-rate measurement runs.
    fn budget(&self) -> f64 {
        self.args.seconds * 4.0
    }

    /// Runs the update sequence through `update` (one call per route update)
    /// until the budget is spent; returns (updates, seconds).
    fn drive(
        &self,
        mut update: impl FnMut(Option<(Prefix<A>, NextHop)>, Prefix<A>),
    ) -> (usize, f64) {
        let t0 = Instant::now();
        let mut done = 0usize;
        'outer: loop {
            for &(p, nh) in &self.picks {
                update(None, p);
                update(Some((p, nh)), p);
                done += 2;
                if done % 256 == 0 && t0.elapsed().as_secs_f64() > self.budget() {
                    break 'outer;
                }
            }
        }
        (done, t0.elapsed().as_secs_f64())
    }

    fn row(&self, name: &str, bytes: usize, updates_per_s: f64) -> Value {
        json!({
            "churn": true,
            "impl": name,
            "family": A::FAMILY,
            "routes": self.routes.len(),
            "source": self.source,
            "bytes": bytes,
            "updates_per_s": updates_per_s.round(),
        })
    }

    /// weft's updatable FIB with `max_delay`, a reader thread looking up in bursts
    /// of [`BURST`] (one snapshot load each) all the while.
    fn weft(&mut self, name: &str, max_delay: std::time::Duration) -> anyhow::Result<()> {
        eprintln!("  {name:<24} building ...");
        let m = Measurement::start()?;
        let mut fib = weft_fib(self.routes);
        let built = m.net_bytes().max(0) as usize;
        fib.set_max_delay(max_delay);
        let keys = keys_for(self.routes, 1 << 16, self.args.seed).0;
        let reader = |stop: Arc<AtomicBool>, looked: Arc<AtomicU64>| {
            let (fib, keys) = (fib.reader(), keys.clone());
            std::thread::spawn(move || {
                let mut acc = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    for burst in keys.chunks_exact(BURST) {
                        let s = fib.load();
                        for &k in burst {
                            acc = acc.wrapping_add(A::resolve(&s, k).unwrap_or(NONE));
                        }
                    }
                    looked.fetch_add((keys.len() / BURST * BURST) as u64, Ordering::Relaxed);
                }
                black_box(acc);
            })
        };
        // Same-run baselines for the reader: with the writer thread asleep, and
        // with it spinning without touching the FIB (on a machine with fewer free
        // cores than threads, the share of CPU the writer takes is the first
        // thing churn costs a reader; this separates it from the FIB's own cost).
        let baseline = |spin: bool| {
            let (stop, looked) = (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicU64::new(0)),
            );
            let t = reader(stop.clone(), looked.clone());
            let t0 = Instant::now();
            if spin {
                while t0.elapsed().as_secs_f64() < self.budget() {
                    black_box(0u64);
                }
            } else {
                std::thread::sleep(std::time::Duration::from_secs_f64(self.budget()));
            }
            stop.store(true, Ordering::Relaxed);
            let _ = t.join();
            looked.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64() / 1e6
        };
        let alone = baseline(false);
        let beside_spin = baseline(true);
        let (stop, looked) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let t = reader(stop.clone(), looked.clone());
        let mut failed = None;
        let (done, secs) = self.drive(|ins, p| match ins {
            None => {
                fib.remove(p.into());
            }
            Some((p, nh)) => {
                if let Err(e) = fib.insert(p.into(), nh.get()) {
                    failed = Some(e);
                }
            }
        });
        fib.flush();
        let secs_flushed = secs.max(f64::MIN_POSITIVE);
        stop.store(true, Ordering::Relaxed);
        let _ = t.join();
        if let Some(e) = failed {
            anyhow::bail!("{name}: {e}");
        }
        let during = looked.load(Ordering::Relaxed) as f64 / secs_flushed / 1e6;
        let after = m.net_bytes().max(0) as usize;
        let st = fib.stats();
        let rate = done as f64 / secs_flushed;
        eprintln!(
            "  {name:<24} {:.1} MiB, {:.0} updates/s, reader {during:.1} Ml/s ({alone:.1} alone, {beside_spin:.1} beside a spinning writer), {} publications",
            mib(built),
            rate,
            st.publications
        );
        let mut o = self.row(name, built, rate);
        o["bytes_after_churn"] = json!(after);
        o["max_delay_ms"] = json!(round2(max_delay.as_secs_f64() * 1e3));
        o["publications"] = json!(st.publications);
        o["longest_publication_ms"] = json!(round2(st.longest_publication.as_secs_f64() * 1e3));
        o["longest_wait_ms"] = json!(round2(st.longest_wait.as_secs_f64() * 1e3));
        o["reader_mlookups_per_s"] = json!(round2(during));
        o["reader_alone_mlookups_per_s"] = json!(round2(alone));
        o["reader_ratio_vs_alone"] = json!(round2(during / alone));
        o["reader_beside_spinning_writer_mlookups_per_s"] = json!(round2(beside_spin));
        o["reader_ratio_vs_spinning_writer"] = json!(round2(during / beside_spin));
        self.rows.push(o);
        drop(fib);
        Ok(())
    }

    /// A peer: built from the table (memory counted), then the same updates,
    /// single-threaded (the peers are not safe to read while they change).
    fn peer<T: Update1<A>>(&mut self) -> anyhow::Result<()> {
        eprintln!("  {:<24} building ...", T::NAME);
        let (mut t, bytes, _) = build_counted::<A, T>(self.routes);
        // A peer whose update path panics on this sequence gets a row that says so.
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.drive(|ins, p| match ins {
                None => t.remove(p),
                Some((p, nh)) => t.insert(p, nh.get()),
            })
        }));
        let Ok((done, secs)) = run else {
            eprintln!("  {:<24} panicked during updates", T::NAME);
            let mut o = self.row(T::NAME, bytes, 0.0);
            o["error"] = json!("panicked during insert/remove");
            self.rows.push(o);
            return Ok(());
        };
        let rate = done as f64 / secs;
        eprintln!(
            "  {:<24} {:.1} MiB, {rate:.0} updates/s",
            T::NAME,
            mib(bytes)
        );
        self.rows.push(self.row(T::NAME, bytes, rate));
        Ok(())
    }
}

/// Route churn of one family: weft (coalesced, and one publication per update)
/// and every peer with an update path, on the same update sequence.
fn churn<A: Family>(
    args: &Args,
    routes: &[(Prefix<A>, NextHop)],
    source: &str,
) -> anyhow::Result<Vec<Value>> {
    eprintln!("{} churn: {} routes from {source}", A::FAMILY, routes.len());
    anyhow::ensure!(!routes.is_empty(), "no {} routes", A::FAMILY);
    let mut rng = synth::Rng::new(args.seed ^ 0x0bd7);
    // Enough random routes that the updates of a run rarely repeat a prefix
    // (repeats would coalesce into one change per publication).
    let picks = (0..args.updates.max(1 << 20))
        .map(|_| routes[rng.below(routes.len() as u64) as usize])
        .collect();
    let mut c = Churn {
        args,
        routes,
        picks,
        source,
        rows: Vec::new(),
    };
    c.weft("weft", weft_lpm::DEFAULT_MAX_DELAY)?;
    c.weft("weft-publish-each", std::time::Duration::ZERO)?;
    A::churn_peers(&mut c)?;
    let best_peer = c.rows[2..]
        .iter()
        .filter_map(|r| r["updates_per_s"].as_f64())
        .fold(0.0, f64::max);
    for r in &mut c.rows {
        let u = r["updates_per_s"].as_f64().unwrap_or(0.0);
        r["ratio_vs_fastest_peer"] = json!(round2(u / best_peer));
    }
    Ok(c.rows)
}

fn print_churn(rows: &[Value]) {
    println!(
        "{:<18} {:<5} {:>8} {:>8} {:>12} {:>8} {:>12} {:>8} {:>8} {:>9}",
        "impl",
        "fam",
        "routes",
        "MiB",
        "updates/s",
        "vs best",
        "reader Ml/s",
        "vs alone",
        "vs spin",
        "wait ms"
    );
    for r in rows {
        let opt = |k: &str, prec: usize| {
            r[k].as_f64()
                .map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
        };
        println!(
            "{:<18} {:<5} {:>8} {:>8.2} {:>12.0} {:>7.2}x {:>12} {:>8} {:>8} {:>9}",
            r["impl"].as_str().unwrap_or(""),
            r["family"].as_str().unwrap_or(""),
            r["routes"],
            mib(r["bytes"].as_u64().unwrap_or(0) as usize),
            r["updates_per_s"].as_f64().unwrap_or(0.0),
            r["ratio_vs_fastest_peer"].as_f64().unwrap_or(0.0),
            opt("reader_mlookups_per_s", 1),
            opt("reader_ratio_vs_alone", 2),
            opt("reader_ratio_vs_spinning_writer", 2),
            opt("longest_wait_ms", 1),
        );
    }
}
