//! The perf harness's arithmetic and record shape: exact nearest-rank percentiles on
//! known samples, the symmetric one-way method, MB = 10^6 bandwidth, and the JSON
//! keys and types every consumer (weft report, the peers' converter) relies on.

use serde_json::Value;
use std::time::Duration;
use weft_bench::perf::record::{parse_lines, Meta, Record};
use weft_bench::perf::run::{bw_messages, sweep_sizes, PingPongRun};
use weft_bench::perf::stats::{one_way_ns, percentile, BandwidthStats, LatencyStats, Method};
use weft_bench::perf::{bandwidth_record, latency_record};

fn meta() -> Meta {
    Meta {
        system: "kernel-tcp".into(),
        test: "tcp-lat".into(),
        link: "loopback".into(),
        qp: "stream".into(),
    }
}

#[test]
fn percentiles_of_1_to_1000_are_exact() {
    // 1000 samples of 1..=1000 µs, shuffled: nearest rank gives the sample itself.
    let mut ns: Vec<f64> = (1..=1000u32)
        .map(|i| f64::from((i * 7919) % 1000 + 1) * 1e3)
        .collect();
    let s = LatencyStats::from_ns(&mut ns).unwrap();
    assert_eq!(s.samples, 1000);
    assert_eq!(s.min_us, 1.0);
    assert_eq!(s.max_us, 1000.0);
    assert_eq!(s.p50_us, 500.0);
    assert_eq!(s.p90_us, Some(900.0));
    assert_eq!(s.p99_us, Some(990.0));
    assert_eq!(s.p999_us, Some(999.0));
    assert!((s.mean_us - 500.5).abs() < 1e-9);
}

#[test]
fn small_sample_sets() {
    let v = [10.0, 20.0, 30.0, 40.0];
    assert_eq!(percentile(&v, 50.0), 20.0);
    assert_eq!(percentile(&v, 75.0), 30.0);
    assert_eq!(percentile(&v, 99.9), 40.0);
    assert_eq!(percentile(&[5.0], 50.0), 5.0);
    // 999 samples: p99.9 is not resolvable and is left out rather than faked.
    let mut ns: Vec<f64> = (1..=999).map(f64::from).collect();
    let s = LatencyStats::from_ns(&mut ns).unwrap();
    assert_eq!(s.p999_us, None);
    assert!(s.p99_us.is_some());
    // 5 samples: only the median.
    let mut ns = vec![5e3, 1e3, 3e3, 2e3, 4e3];
    let s = LatencyStats::from_ns(&mut ns).unwrap();
    assert_eq!((s.p50_us, s.p90_us, s.p99_us), (3.0, None, None));
    assert!(LatencyStats::from_ns(&mut []).is_none());
}

#[test]
fn symmetric_method_takes_out_the_server_turnaround() {
    // RTT 10 µs, server turnaround 2 µs: ((t4 − t1) − (t3 − t2)) / 2 = 4 µs.
    let rtts = [(0u64, 10_000u64), (1, 12_000), (3, 14_000)];
    let (half, _) = one_way_ns(&rtts, None, 64);
    assert_eq!(half, vec![5_000.0, 6_000.0, 7_000.0]);
    // The server also saw seq 2, whose reply was lost: it is skipped.
    let server = [(0u64, 2_000u64), (1, 4_000), (2, 1), (3, 2_000)];
    let (sym, unmatched) = one_way_ns(&rtts, Some(&server), 64);
    assert_eq!(sym, vec![4_000.0, 4_000.0, 6_000.0]);
    assert_eq!(unmatched, 0);
    // Sequence numbers truncated to 16 bits on the server's side still pair up.
    let rtts = [(65_537u64, 10_000u64)];
    let (sym, _) = one_way_ns(&rtts, Some(&[(1, 4_000)]), 16);
    assert_eq!(sym, vec![3_000.0]);
    // A round the server has no timestamp for is counted, not invented.
    let (sym, unmatched) = one_way_ns(&[(9, 10_000)], Some(&[(1, 4_000)]), 64);
    assert!(sym.is_empty());
    assert_eq!(unmatched, 1);
}

#[test]
fn bandwidth_is_in_megabytes_of_a_million_bytes() {
    let b = BandwidthStats::new(1000, 2000, Duration::from_secs(2));
    assert_eq!(b.bytes, 2_000_000);
    assert_eq!(b.mb_per_s, 1.0);
    assert_eq!(b.mmsg_per_s, 0.001);
}

#[test]
fn sweep_and_caps() {
    let all = sweep_sizes(8 << 20);
    assert_eq!(all.len(), 23);
    assert_eq!((all[0], all[22]), (2, 8 << 20));
    assert_eq!(sweep_sizes(32 << 10).last(), Some(&(32 << 10)));
    assert_eq!(bw_messages(64, 5000), 5000);
    assert_eq!(bw_messages(8 << 20, 5000), 128);
    assert_eq!(bw_messages(1 << 30, 5000), 16);
}

fn assert_number(v: &Value, k: &str) {
    assert!(v[k].is_number(), "{k} is not a number in {v}");
}

fn assert_common(v: &Value) {
    for k in ["system", "test", "link", "qp"] {
        assert!(v[k].is_string(), "{k} is not a string in {v}");
    }
    assert!(v["size"].is_u64() && v["iters"].is_u64(), "{v}");
}

#[test]
fn latency_record_json_shape() {
    let run = PingPongRun {
        rtts: (0..1000u64).map(|i| (i, 20_000 + i)).collect(),
        lost: 0,
        truncated: false,
        wall: Duration::from_millis(20),
        cpu: None,
    };
    let r = latency_record(&meta(), 64, &run, None, 64);
    let v: Value = serde_json::from_str(&r.to_json_line()).unwrap();
    assert_common(&v);
    assert_eq!(v["method"], Method::HalfRtt.as_str());
    for k in [
        "p50_us", "p90_us", "p99_us", "p999_us", "mean_us", "min_us", "max_us",
    ] {
        assert_number(&v, k);
    }
    assert_eq!(v["iters"], 1000);
    assert_eq!(v["min_us"], 10.0);
    assert!(v.get("mb_per_s").is_none());
    // Round trip through the reader weft report uses.
    let back = parse_lines(&r.to_json_line()).unwrap();
    assert_eq!(back, vec![r.clone()]);
    assert!(back[0].bandwidth.is_none());
    assert_eq!(
        back[0].series(),
        format!("kernel-tcp/loopback {}", meta().test)
    );

    // Fewer than 1000 samples: p999_us is present and null, and a note says why.
    let short = PingPongRun {
        rtts: run.rtts[..200].to_vec(),
        ..run.clone()
    };
    let v: Value =
        serde_json::from_str(&latency_record(&meta(), 64, &short, None, 64).to_json_line())
            .unwrap();
    assert!(v["p999_us"].is_null(), "{v}");
    assert!(v["note"].as_str().unwrap().contains("1000"), "{v}");
}

#[test]
fn bandwidth_and_failed_record_json_shape() {
    let run = weft_bench::perf::run::BandwidthRun {
        messages: 5000,
        elapsed: Duration::from_millis(250),
        cpu: None,
    };
    let r = bandwidth_record(&meta(), 65536, &run);
    let v: Value = serde_json::from_str(&r.to_json_line()).unwrap();
    assert_common(&v);
    assert_number(&v, "mb_per_s");
    assert_number(&v, "mmsg_per_s");
    assert!(
        v.get("p50_us").is_none() && v.get("method").is_none(),
        "{v}"
    );
    assert!((v["mb_per_s"].as_f64().unwrap() - 5000.0 * 65536.0 / 0.25 / 1e6).abs() < 1e-6);
    let back = parse_lines(&format!("# comment\n\n{}\n", r.to_json_line())).unwrap();
    assert_eq!(back.len(), 1);
    assert!(back[0].latency.is_none() && back[0].bandwidth.is_some());

    let f = Record::failed(&meta(), 8, "boom");
    let v: Value = serde_json::from_str(&f.to_json_line()).unwrap();
    assert_common(&v);
    assert_eq!(v["error"], "boom");
    assert!(parse_lines("{\"not\": \"a record\"}").is_err());
}

#[test]
fn round_trip_records_are_not_halved_and_carry_cpu_per_op() {
    let run = PingPongRun {
        rtts: (0..1000u64).map(|i| (i, 20_000)).collect(),
        lost: 0,
        truncated: false,
        wall: Duration::from_millis(20),
        cpu: Some(weft_bench::perf::cpu::CpuUse::new(
            1000,
            Duration::from_millis(20),
            Some(Duration::from_millis(20)),
        )),
    };
    let full = weft_bench::perf::round_trip_record(&meta(), 8, &run);
    let half = latency_record(&meta(), 8, &run, None, 64);
    let v: Value = serde_json::from_str(&full.to_json_line()).unwrap();
    assert_eq!(v["method"], "rtt");
    assert_eq!(v["p50_us"], 20.0);
    assert_eq!(half.latency.as_ref().unwrap().p50_us, Some(10.0));
    // 1000 rounds in 40 ms of CPU of both processes.
    assert_eq!(v["cpu_client_us_per_op"], 20.0);
    assert_eq!(v["cpu_server_us_per_op"], 20.0);
    assert_eq!(v["ops_per_cpu_s"], 25_000.0);
    // 1000 round trips in 20 ms of wall time: the message rate beside the latency.
    assert_eq!(v["rtt_per_s"], 50_000.0);
    assert_eq!(parse_lines(&full.to_json_line()).unwrap(), vec![full]);
}
