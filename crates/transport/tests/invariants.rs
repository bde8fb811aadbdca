//! The invariants over many seeds and fault mixes: every completed SEND, WRITE, READ
//! and atomic took effect exactly once, in order, byte-identical; nothing was written
//! outside a registered region.
mod common;
use common::assert_no_stray_writes;
use weft_transport::sim::{run_mix, ConnectOptions, LinkConfig, MixConfig, OpMix, Pair};
use weft_transport::{Config, Mtu, QpType, Recovery};

fn faulty(seed: u64, loss: f64) -> LinkConfig {
    LinkConfig {
        loss,
        duplicate: 0.01,
        reorder: 0.02,
        reorder_delay_us: 15,
        corrupt: 0.005,
        delay_us: 5 + seed % 7,
        jitter_us: 2,
        ..LinkConfig::default()
    }
}

fn run(seed: u64, recovery: Recovery, loss: f64, ops: u64, mtu: Mtu) {
    run_with_recvs(seed, recovery, loss, ops, mtu, 0);
}

fn run_with_recvs(seed: u64, recovery: Recovery, loss: f64, ops: u64, mtu: Mtu, recvs: usize) {
    let mem = 8 << 20;
    let mut p = Pair::new(
        Config::default(),
        mem,
        faulty(seed, loss),
        faulty(seed + 1, loss),
        seed,
    );
    let o = ConnectOptions {
        recovery,
        mtu,
        psn_a: (seed as u32).wrapping_mul(0x9e37_79b9) & 0xff_ffff,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    let cfg = MixConfig {
        ops,
        max_len: 9000,
        window: 16,
        mix: OpMix::ALL,
        seed,
        time_limit_us: 200_000_000,
        unreliable: false,
        recvs,
    };
    let r = run_mix(&mut p, &c, &cfg);
    assert!(
        r.errors.is_empty(),
        "seed {seed} {recovery:?} loss {loss}: {:?}\nA {:?}\nB {:?}\n{:?} {:?}",
        r.errors,
        p.a.stats(),
        p.b.stats(),
        p.ab.stats,
        p.ba.stats
    );
    assert_eq!(r.completed, ops);
    assert_no_stray_writes(p.a.mem());
    assert_no_stray_writes(p.b.mem());
}

#[test]
fn clean_links_all_operations() {
    for seed in 0..4 {
        run(seed, Recovery::GoBackN, 0.0, 400, Mtu::M1024);
        run(seed, Recovery::Selective, 0.0, 400, Mtu::M1024);
    }
}

#[test]
fn go_back_n_under_faults_many_seeds() {
    for seed in 0..12 {
        let loss = [0.001, 0.01, 0.05, 0.1][seed as usize % 4];
        let mtu = [Mtu::M256, Mtu::M1024, Mtu::M4096][seed as usize % 3];
        run(100 + seed, Recovery::GoBackN, loss, 300, mtu);
    }
}

#[test]
fn selective_under_faults_many_seeds() {
    for seed in 0..12 {
        let loss = [0.001, 0.01, 0.05, 0.1][seed as usize % 4];
        let mtu = [Mtu::M256, Mtu::M1024, Mtu::M4096][seed as usize % 3];
        run(200 + seed, Recovery::Selective, loss, 300, mtu);
    }
}

/// Too few receives: the responder answers RNR again and again, in both modes, under
/// loss (regression: a selective requester must forget SACKs the responder dropped
/// with its out-of-order buffer when it sent RNR).
#[test]
fn rnr_storms_under_loss() {
    for seed in 0..16 {
        let recovery = if seed % 2 == 0 {
            Recovery::Selective
        } else {
            Recovery::GoBackN
        };
        run_with_recvs(300 + seed, recovery, 0.05, 300, Mtu::M1024, 2);
    }
}

/// Random configurations: MTU, window, receive supply, fault mix, recovery mode, SRQ.
/// CI runs 40; `WEFT_LONG=1` runs 1000.
#[test]
fn random_configurations() {
    use weft_transport::sim::Rng;
    let long = std::env::var("WEFT_LONG").is_ok_and(|v| v == "1");
    let n = if long { 1000 } else { 40 };
    let mut rng = Rng::new(
        std::env::var("WEFT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed_cafe),
    );
    for case in 0..n {
        let seed = rng.next_u64();
        let mtu =
            [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M2048, Mtu::M4096][rng.range(0, 5) as usize];
        let recovery = if rng.chance(0.5) {
            Recovery::Selective
        } else {
            Recovery::GoBackN
        };
        let link = |rng: &mut Rng| LinkConfig {
            loss: [0.0, 0.01, 0.05, 0.15][rng.range(0, 4) as usize],
            duplicate: if rng.chance(0.3) { 0.05 } else { 0.0 },
            reorder: if rng.chance(0.3) { 0.1 } else { 0.0 },
            reorder_delay_us: rng.range(1, 50),
            corrupt: if rng.chance(0.3) { 0.02 } else { 0.0 },
            delay_us: rng.range(1, 30),
            jitter_us: rng.range(0, 5),
            ..LinkConfig::default()
        };
        let (ab, ba) = (link(&mut rng), link(&mut rng));
        let mut p = Pair::new(Config::default(), 8 << 20, ab, ba, seed);
        let o = ConnectOptions {
            recovery,
            mtu,
            max_inflight: [8, 32, 128][rng.range(0, 3) as usize],
            rd_atomic: [1, 4, 16][rng.range(0, 3) as usize],
            timeout: 6,
            srq_b: rng.chance(0.3),
            psn_a: rng.next_u64() as u32 & 0xff_ffff,
            psn_b: rng.next_u64() as u32 & 0xff_ffff,
            ..ConnectOptions::default()
        };
        let c = p.connect(QpType::Rc, &o);
        let cfg = MixConfig {
            ops: 200,
            max_len: [64, 3000, 9000][rng.range(0, 3) as usize],
            window: [1, 4, 16, 32][rng.range(0, 4) as usize],
            mix: OpMix::ALL,
            seed,
            time_limit_us: 2_000_000_000,
            unreliable: false,
            recvs: [0, 1, 3][rng.range(0, 3) as usize],
        };
        let r = run_mix(&mut p, &c, &cfg);
        assert!(
            r.errors.is_empty(),
            "case {case}: {o:?} {cfg:?} {ab:?} {ba:?}: {:?}\nA {:?}\nB {:?}",
            r.errors,
            p.a.stats(),
            p.b.stats()
        );
        assert_no_stray_writes(p.a.mem());
        assert_no_stray_writes(p.b.mem());
    }
}
