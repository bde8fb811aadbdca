//! At 10 % random loss in both directions (plus duplication, reordering and
//! corruption), no message is lost, duplicated or corrupted. CI runs 30 000 mixed
//! operations; `WEFT_LONG=1` runs one million.
mod common;
use common::assert_no_stray_writes;
use weft_transport::sim::{run_mix, ConnectOptions, LinkConfig, MixConfig, OpMix, Pair};
use weft_transport::{Config, Mtu, QpType, Recovery};

#[test]
fn ten_percent_loss_nothing_lost_duplicated_or_corrupted() {
    let long = std::env::var("WEFT_LONG").is_ok_and(|v| v == "1");
    let (total, per_run) = if long {
        (1_000_000u64, 50_000u64)
    } else {
        (30_000, 5_000)
    };
    let link = LinkConfig {
        loss: 0.10,
        duplicate: 0.01,
        reorder: 0.01,
        corrupt: 0.001,
        delay_us: 5,
        ..LinkConfig::default()
    };
    let mut done = 0;
    let mut run = 0u64;
    while done < total {
        let recovery = if run % 2 == 0 {
            Recovery::GoBackN
        } else {
            Recovery::Selective
        };
        let seed = 1000 + run;
        let mut p = Pair::new(Config::default(), 4 << 20, link, link, seed);
        p.a.mem_mut().set_logging(false);
        p.b.mem_mut().set_logging(false);
        let o = ConnectOptions {
            recovery,
            mtu: Mtu::M1024,
            ..ConnectOptions::default()
        };
        let c = p.connect(QpType::Rc, &o);
        let cfg = MixConfig {
            ops: per_run,
            max_len: 4096,
            window: 16,
            mix: OpMix::ALL,
            seed,
            time_limit_us: u64::MAX / 4,
            unreliable: false,
            recvs: 0,
        };
        let r = run_mix(&mut p, &c, &cfg);
        assert!(
            r.errors.is_empty(),
            "run {run} ({recovery:?}, seed {seed}): {:?}\nA {:?}",
            r.errors,
            p.a.stats()
        );
        assert_eq!(r.completed, per_run);
        assert_no_stray_writes(p.a.mem());
        assert_no_stray_writes(p.b.mem());
        eprintln!(
            "run {run}: {recovery:?} {} ops, {} retransmitted packets, {} lost on A->B, {:.1} ms virtual",
            r.completed,
            p.a.stats().retransmitted_packets,
            p.ab.stats.lost,
            r.elapsed_us as f64 / 1000.0
        );
        done += r.completed;
        run += 1;
    }
    assert!(done >= total);
}
