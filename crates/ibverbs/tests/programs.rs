//! Unmodified RDMA programs on weft's libibverbs.so.1: rdma-core's `ibv_devices`,
//! `ibv_devinfo`, `ibv_rc_pingpong`, `ibv_ud_pingpong`, `ibv_srq_pingpong` and
//! perftest's `ib_*` tests, each as two processes (server and client) over udp and
//! over shm. The library is linked from the staticlib cargo built for this test
//! (`weft_ibverbs::package::ensure_beside`). Every child is bounded in time and
//! killed if the test fails; ports differ per test so tests run in parallel.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use weft_testkit::process::Reaped;

/// How long one program may run (the machine is shared: be generous, still bounded).
const LIMIT: Duration = Duration::from_secs(180);

fn library() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary");
        let profile = weft_ibverbs::package::profile_dir_of(&exe).expect("profile dir");
        weft_ibverbs::package::ensure_beside(&profile).expect("link libibverbs.so.1")
    })
    .clone()
}

fn installed(tool: &str) -> bool {
    weft_testkit::require(tool, weft_testkit::tool(tool)).is_some()
}

fn command(program: &str, link: &str, args: &[&str], envs: &[(&str, &str)], out: &Path) -> Command {
    // One open file for both streams, so the program's stderr and stdout interleave
    // rather than overwrite each other.
    let f = std::fs::File::create(out).expect("output file");
    let mut c = Command::new(program);
    c.args(args)
        .env("LD_LIBRARY_PATH", library())
        .env(weft_ibverbs::ENV_LINK, link)
        .env_remove(weft_ibverbs::ENV_ADDR)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(f.try_clone().expect("output file"))
        .stderr(f);
    c
}

/// True when a TCP socket listens on `port` (IPv4 or IPv6), from /proc/net/tcp*.
fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}

struct Run {
    server: String,
    client: String,
}

/// Run `program` as a server and as a client of it, with `args` on both sides and
/// the TCP port `port`; both must exit 0. Returns both outputs.
fn pair(program: &str, link: &str, args: &[&str], port: u16) -> Run {
    pair_env(program, link, args, &[], port)
}

/// [`pair`], with environment variables for both sides.
fn pair_env(program: &str, link: &str, args: &[&str], envs: &[(&str, &str)], port: u16) -> Run {
    let (run, cst, sst) = pair_status(program, link, args, envs, port);
    assert!(
        cst.success() && sst.success(),
        "{program} {args:?} over {link}: client {cst}, server {sst}\n--- client:\n{}\n--- server:\n{}",
        run.client,
        run.server
    );
    run
}

/// [`pair_env`] without the exit statuses' check: the outputs, then the client's
/// status and the server's.
fn pair_status(
    program: &str,
    link: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    port: u16,
) -> (Run, ExitStatus, ExitStatus) {
    let dir = std::env::temp_dir().join(format!(
        "weft-ibverbs-{}-{program}-{link}-{port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (so, co) = (dir.join("server.out"), dir.join("client.out"));
    let port_s = port.to_string();
    let mut sargs = args.to_vec();
    sargs.extend(["-p", &port_s]);
    let mut server = Reaped(
        command(program, link, &sargs, envs, &so)
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}")),
    );
    let t0 = Instant::now();
    while !listening(port) {
        if let Some(st) = server.0.try_wait().unwrap() {
            panic!(
                "{program} server exited ({st}) before listening:\n{}",
                std::fs::read_to_string(&so).unwrap_or_default()
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{program} server never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cargs = sargs.clone();
    cargs.push("127.0.0.1");
    let mut client = Reaped(
        command(program, link, &cargs, envs, &co)
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}")),
    );
    let cst = client.wait_for(&format!("{program} client"), LIMIT);
    let sst = server.wait_for(&format!("{program} server"), LIMIT);
    let run = Run {
        server: std::fs::read_to_string(&so).unwrap(),
        client: std::fs::read_to_string(&co).unwrap(),
    };
    std::fs::remove_dir_all(&dir).ok();
    (run, cst, sst)
}

#[test]
fn ibv_devices_and_ibv_devinfo_show_weft0() {
    if !installed("ibv_devinfo") || !installed("ibv_devices") {
        return;
    }
    for (prog, args) in [("ibv_devices", &[][..]), ("ibv_devinfo", &["-v"][..])] {
        let out = weft_testkit::process::output_within(
            Command::new(prog)
                .args(args)
                .env("LD_LIBRARY_PATH", library()),
            prog,
            LIMIT,
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{prog}: {out:?}");
        assert!(text.contains("weft0"), "{prog}:\n{text}");
        if prog == "ibv_devinfo" {
            for want in [
                "PORT_ACTIVE",
                "link_layer:\t\tEthernet",
                "GID[  0]:",
                "RoCE v2",
            ] {
                assert!(text.contains(want), "ibv_devinfo lacks {want:?}:\n{text}");
            }
        }
    }
}

fn rc_pingpong(link: &str, port: u16) {
    if !installed("ibv_rc_pingpong") {
        return;
    }
    let run = pair("ibv_rc_pingpong", link, &["-g", "0"], port);
    for (side, out) in [("server", &run.server), ("client", &run.client)] {
        assert!(
            out.contains("8192000 bytes in") && out.contains("1000 iters in"),
            "{side} over {link} printed no result:\n{out}"
        );
        assert!(out.contains("GID ::ffff:127."), "{side}: {out}");
    }
}

#[test]
fn ibv_rc_pingpong_over_udp() {
    rc_pingpong("udp", 21_001);
}

#[test]
fn ibv_rc_pingpong_over_shm() {
    rc_pingpong("shm", 21_002);
}

#[test]
fn ibv_rc_pingpong_with_events_over_udp() {
    // -e: the program sleeps in ibv_get_cq_event on its completion channel.
    if !installed("ibv_rc_pingpong") {
        return;
    }
    let run = pair(
        "ibv_rc_pingpong",
        "udp",
        &["-g", "0", "-e", "-n", "200"],
        21_003,
    );
    assert!(run.client.contains("200 iters in"), "{}", run.client);
    assert!(run.server.contains("200 iters in"), "{}", run.server);
}

/// perftest's own message when its CPU clock calibration failed (src/get_clock.c,
/// `sample_get_cpu_mhz`: a linear fit of TSC cycles against `gettimeofday` over 200
/// busy-waits of 100–2 090 µs, refused when r² < 0.9, which a loaded machine's
/// preemptions cause). perftest then takes the CPU frequency as 0: a latency table's
/// times read `inf`/`-nan`, and a bandwidth test exits 1 with [`PERFTEST_NO_REPORT`]
/// (with `-F`, it prints `inf` instead). No option skips the fit: `-F` (`--CPU-freq`)
/// only quiets the comparison with /proc/cpuinfo, and `-C` (`--report-cycles`) keeps
/// it for bandwidth. The measurement is perftest's, not weft's; the run itself is.
const PERFTEST_UNCALIBRATED: &str = "Correlation coefficient r^2:";

/// What a perftest bandwidth test without `-F` prints, and exits 1 after, when its
/// calibration failed (`print_report_bw`): the run is over, only its report is not made.
const PERFTEST_NO_REPORT: &str = "Can't produce a report";

/// perftest: the test prints its results table (a header line starting `#bytes`
/// followed by a row of numbers) on both sides — except the server of the READ and
/// atomic latency tests, which is passive and prints none (as on hardware).
fn perftest(program: &str, link: &str, extra: &[&str], port: u16) {
    if !installed(program) {
        return;
    }
    let (run, cst, sst) = pair_status(program, link, extra, &[], port);
    let passive = program == "ib_read_lat" || program == "ib_atomic_lat";
    let sides = [
        ("server", &run.server, sst, &run.client, passive),
        ("client", &run.client, cst, &run.server, false),
    ];
    for (side, out, status, peer, no_table) in sides {
        if let Err(why) = perftest_side(out, status.success(), peer, no_table) {
            panic!(
                "{program} {extra:?} over {link}: the {side} ({status}) {why}\n--- client:\n{}\n--- server:\n{}",
                run.client, run.server
            );
        }
    }
}

/// One side of a perftest run, from its output `out`, whether it exited 0 (`ok`) and
/// its peer's output: it exited 0 and printed a table (unless `no_table`, a passive
/// server) whose row has a size, an iteration count and a finite, positive
/// measurement. When perftest's calibration failed on this side
/// ([`PERFTEST_UNCALIBRATED`]), its measurements are not asserted (they are `inf`),
/// only the row's size and count, or, for a bandwidth test that made no report
/// ([`PERFTEST_NO_REPORT`]), the table's header and that message, with exit status 1.
/// A side whose peer made no report may fail its closing exchange with it (the peer
/// exited), so then its status is not asserted; its table is.
fn perftest_side(out: &str, ok: bool, peer: &str, no_table: bool) -> Result<(), String> {
    let uncalibrated = out.contains(PERFTEST_UNCALIBRATED);
    let peer_gone = peer.contains(PERFTEST_UNCALIBRATED) && peer.contains(PERFTEST_NO_REPORT);
    let mut lines = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    let header = lines.next().is_some();
    if uncalibrated && out.contains(PERFTEST_NO_REPORT) {
        return match (header, ok) {
            (true, false) => Ok(()),
            (false, _) => Err("made no report and printed no table header".into()),
            (true, true) => Err(format!("exited 0 after {PERFTEST_NO_REPORT:?}")),
        };
    }
    if !ok && !peer_gone {
        return Err("failed".into());
    }
    if no_table {
        return Ok(());
    }
    if !header {
        return Err("printed no table".into());
    }
    let row = lines.next().unwrap_or_default();
    let nums: Vec<f64> = row
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    // The size, the iteration count and a measurement. Not every column is one
    // (a send_bw server prints its BW peak as 0.00), and some may be perftest's own
    // arithmetic failing (a stdev of "-nan" when one iteration of a loaded
    // machine's run is an outlier of 10^5 times the rest); how fast is for the
    // benchmarks (docs/results/ibverbs.md), not for CI.
    let counted = nums.len() >= 3 && nums[0] > 0.0 && nums[1] > 0.0;
    let measured = counted && nums[2..].iter().any(|v| v.is_finite() && *v > 0.0);
    if !counted || !(measured || uncalibrated) {
        return Err(format!("printed a table with no row of numbers: {row:?}"));
    }
    Ok(())
}

/// The sides' checks on outputs perftest 4.5 printed (shortened), good and bad: a
/// failed calibration excuses the measurements and nothing else.
#[test]
fn perftest_side_checks() {
    const HEAD: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n";
    let good = format!("{HEAD} 2       1000          1.53           9.87         1.74                1.80             0.30            3.01                    9.87   \n");
    let inf = format!("{HEAD} 2       1000          inf            inf          inf                 inf              -nan            inf                     inf    \n");
    let cal = format!("{PERFTEST_UNCALIBRATED} 0.898912 < 0.9\n");
    let uncal_inf = format!("{cal}{inf}");
    let bw_head =
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n";
    let no_report = format!("{bw_head}{cal}{PERFTEST_NO_REPORT}\n");
    let bad_no_report = format!("{bw_head}{PERFTEST_NO_REPORT}\n");
    let uncal_no_row = format!("{cal}{HEAD}");
    let no_report_no_head = format!("{cal}{PERFTEST_NO_REPORT}\n");
    let uncal_zero_iters = format!("{cal}{HEAD} 2       0          inf   inf\n");
    // (this side's output, its exit 0, the peer's output, passive, accepted, case)
    let cases: [(&str, bool, &str, bool, bool, &str); 16] = [
        (&good, true, &good, false, true, "measured"),
        (&uncal_inf, true, &good, false, true, "uncal inf"),
        (&no_report, false, &good, false, true, "uncal norep"),
        (&good, false, &no_report, false, true, "peer norep"),
        ("", true, &good, true, true, "passive"),
        (&inf, true, &good, false, false, "inf"),
        (&good, false, &good, false, false, "failed"),
        (&good, false, &uncal_inf, false, false, "failed peer"),
        (&uncal_inf, false, &good, false, false, "uncal fail"),
        (&bad_no_report, false, &good, false, false, "norep cal"),
        (&no_report, true, &good, false, false, "norep exit0"),
        (
            &no_report_no_head,
            false,
            &good,
            false,
            false,
            "norep nohead",
        ),
        (&uncal_no_row, true, &good, false, false, "uncal norow"),
        (&uncal_zero_iters, true, &good, false, false, "uncal 0 it"),
        ("", true, &good, false, false, "no table"),
        ("", false, &good, true, false, "passive fail"),
    ];
    for (out, ok, peer, passive, accepted, case) in cases {
        let r = perftest_side(out, ok, peer, passive);
        assert_eq!(r.is_ok(), accepted, "{case}: {r:?}");
    }
}

macro_rules! perftests {
    ($($name:ident: $prog:literal, $link:literal, [$($arg:literal),*], $port:literal;)*) => {$(
        #[test]
        fn $name() {
            perftest($prog, $link, &[$($arg),*], $port);
        }
    )*};
}

perftests! {
    ib_send_lat_udp: "ib_send_lat", "udp", [], 21_101;
    ib_send_lat_f_udp: "ib_send_lat", "udp", ["-F"], 21_102;
    ib_send_bw_udp: "ib_send_bw", "udp", [], 21_103;
    ib_send_bw_f_udp: "ib_send_bw", "udp", ["-F"], 21_104;
    ib_write_lat_udp: "ib_write_lat", "udp", [], 21_105;
    ib_write_lat_f_udp: "ib_write_lat", "udp", ["-F"], 21_106;
    ib_write_bw_udp: "ib_write_bw", "udp", [], 21_107;
    ib_write_bw_f_udp: "ib_write_bw", "udp", ["-F"], 21_108;
    ib_read_lat_udp: "ib_read_lat", "udp", [], 21_109;
    ib_read_lat_f_udp: "ib_read_lat", "udp", ["-F"], 21_110;
    ib_read_bw_udp: "ib_read_bw", "udp", [], 21_111;
    ib_read_bw_f_udp: "ib_read_bw", "udp", ["-F"], 21_112;
    ib_atomic_lat_udp: "ib_atomic_lat", "udp", [], 21_113;
    ib_atomic_lat_f_udp: "ib_atomic_lat", "udp", ["-F"], 21_114;
    ib_send_lat_shm: "ib_send_lat", "shm", [], 21_201;
    ib_send_lat_f_shm: "ib_send_lat", "shm", ["-F"], 21_202;
    ib_send_bw_shm: "ib_send_bw", "shm", [], 21_203;
    ib_send_bw_f_shm: "ib_send_bw", "shm", ["-F"], 21_204;
    ib_write_lat_shm: "ib_write_lat", "shm", [], 21_205;
    ib_write_lat_f_shm: "ib_write_lat", "shm", ["-F"], 21_206;
    ib_write_bw_shm: "ib_write_bw", "shm", [], 21_207;
    ib_write_bw_f_shm: "ib_write_bw", "shm", ["-F"], 21_208;
    ib_read_lat_shm: "ib_read_lat", "shm", [], 21_209;
    ib_read_lat_f_shm: "ib_read_lat", "shm", ["-F"], 21_210;
    ib_read_bw_shm: "ib_read_bw", "shm", [], 21_211;
    ib_read_bw_f_shm: "ib_read_bw", "shm", ["-F"], 21_212;
    ib_atomic_lat_shm: "ib_atomic_lat", "shm", [], 21_213;
    ib_atomic_lat_f_shm: "ib_atomic_lat", "shm", ["-F"], 21_214;
}

fn pingpong_prints_results(program: &str, link: &str, args: &[&str], port: u16, iters: &str) {
    if !installed(program) {
        return;
    }
    let run = pair(program, link, args, port);
    for (side, out) in [("server", &run.server), ("client", &run.client)] {
        assert!(
            out.contains(&format!("{iters} iters in")),
            "{program} {side} over {link} printed no result:\n{out}"
        );
    }
}

#[test]
fn ibv_srq_pingpong_over_udp() {
    // 16 RC QPs sharing one SRQ on each side.
    pingpong_prints_results("ibv_srq_pingpong", "udp", &["-g", "0"], 21_011, "1000");
}

#[test]
fn ibv_srq_pingpong_over_shm() {
    pingpong_prints_results("ibv_srq_pingpong", "shm", &["-g", "0"], 21_012, "1000");
}

#[test]
fn ibv_ud_pingpong_over_shm() {
    pingpong_prints_results("ibv_ud_pingpong", "shm", &["-g", "0"], 21_013, "1000");
}

#[test]
fn ibv_ud_pingpong_over_udp() {
    // 200 exchanges: UD has no retransmission, and over udp a lost datagram leaves
    // ibv_ud_pingpong waiting for ever (see docs/ibverbs.md, known limits).
    pingpong_prints_results(
        "ibv_ud_pingpong",
        "udp",
        &["-g", "0", "-n", "200"],
        21_014,
        "200",
    );
}

/// UCX over weft0: `ucx_perftest` (Debian's ucx-utils) with UCX's verbs transports
/// only, so the test fails rather than quietly falling back to UCX's own tcp or
/// shared memory. The client prints a `Final:` row of numbers. UCX takes weft0 only if
/// `/dev/infiniband/uverbs-weft0` is an accessible character device
/// (`weft_ibverbs::ensure_dev_node`, which needs root; as CI runs).
fn ucx(tls: &str, test: &str, link: &str, port: u16) {
    if !installed("ucx_perftest") {
        return;
    }
    if let Err(e) = weft_ibverbs::ensure_dev_node() {
        weft_testkit::skip(format!("UCX needs the device file: {e}"));
        return;
    }
    let envs = [
        ("UCX_TLS", tls),
        ("UCX_NET_DEVICES", "weft0:1"),
        ("UCX_WARN_UNUSED_ENV_VARS", "n"),
    ];
    let run = pair_env(
        "ucx_perftest",
        link,
        &["-t", test, "-n", "2000"],
        &envs,
        port,
    );
    let row = run
        .client
        .lines()
        .find(|l| l.starts_with("Final:"))
        .unwrap_or_else(|| {
            panic!(
                "ucx_perftest {test} over {tls}/{link}: no Final row:\n{}",
                run.client
            )
        });
    let nums: Vec<f64> = row
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    // The row: iterations, then for latency p50, the last interval's average and
    // the overall average, then bandwidth and message rate, each the last interval's
    // and the overall. An interval with no iteration in it (a slow run under load)
    // prints an average latency of `inf` and a rate of 0: only the interval columns
    // may say so; the overall figures must be finite.
    const INTERVAL_LATENCY: usize = 2;
    assert!(
        nums.len() >= 7
            && nums[0] == 2000.0
            && nums
                .iter()
                .enumerate()
                .all(|(i, v)| *v >= 0.0 && (v.is_finite() || i == INTERVAL_LATENCY)),
        "ucx_perftest {test} over {tls}/{link}: {row:?}\n{}",
        run.client
    );
}

#[test]
fn ucx_rc_verbs_tag_lat_udp() {
    // rc_verbs needs ud_verbs beside it for UCX's wire-up.
    ucx("rc_verbs,ud_verbs,self", "tag_lat", "udp", 21_301);
}

#[test]
fn ucx_rc_verbs_tag_bw_shm() {
    ucx("rc_verbs,ud_verbs,self", "tag_bw", "shm", 21_302);
}

#[test]
fn ucx_rc_verbs_put_lat_shm() {
    ucx("rc_verbs,ud_verbs,self", "ucp_put_lat", "shm", 21_303);
}

#[test]
fn ucx_ud_verbs_tag_lat_udp() {
    // UD over udp: the test's 2000 exchanges rely on UCX's own retransmission.
    ucx("ud_verbs,self", "tag_lat", "udp", 21_304);
}
