//! srq_pass: what an idle progress pass costs on a device with many shared receive
//! queues. Opens a device with inline progress, creates `--srqs` SRQs (each with one
//! receive posted, taken in by the first passes), then times `--passes` passes that
//! find nothing to do, best of `--rounds`:
//!
//!   cargo run --release -p weft-verbs --example srq_pass -- --srqs 1024
//!
//! prints `srq_pass link=shm srqs=1024 passes=1000000 ns_per_pass=…` (the best round).

mod common;

use common::Cli;
use std::process::ExitCode;
use std::time::Instant;
use weft_verbs::{Context, DeviceConfig, LinkKind, Progress, RecvWr};

const USAGE: &str = "[--link udp|shm] [--srqs N] [--passes N] [--rounds N]";

fn main() -> ExitCode {
    let mut cli = Cli::new("srq_pass", USAGE);
    let mut link = LinkKind::Shm;
    let mut srqs = 1024usize;
    let mut passes = 1_000_000u64;
    let mut rounds = 5u32;
    while let Some(a) = cli.next_arg() {
        match a.as_str() {
            "--link" => link = cli.link(),
            "--srqs" => srqs = cli.value("--srqs"),
            "--passes" => passes = cli.value("--passes"),
            "--rounds" => rounds = cli.value("--rounds"),
            other => cli.fail(format!("unknown argument {other:?}")),
        }
    }
    if passes == 0 || rounds == 0 {
        cli.fail("--passes and --rounds must be at least 1");
    }
    cli.run(|| {
        let mut cfg = DeviceConfig::local(link);
        cfg.progress = Progress::Inline;
        let ctx = Context::open_with(cfg).map_err(|e| e.to_string())?;
        let pd = ctx.alloc_pd();
        let mut queues: Vec<_> = (0..srqs).map(|_| pd.create_srq(4)).collect();
        for (i, q) in queues.iter_mut().enumerate() {
            q.post_recv([RecvWr {
                wr_id: i as u64,
                sg_list: Default::default(),
            }])
            .map_err(|e| e.to_string())?;
        }
        for _ in 0..64 {
            ctx.progress();
        }
        let mut best = f64::MAX;
        for _ in 0..rounds {
            let t = Instant::now();
            for _ in 0..passes {
                std::hint::black_box(ctx.progress());
            }
            best = best.min(t.elapsed().as_nanos() as f64 / passes as f64);
        }
        println!("srq_pass link={link} srqs={srqs} passes={passes} ns_per_pass={best:.1}");
        Ok::<(), String>(())
    })
}
