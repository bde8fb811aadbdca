//! Null-RPC round trips in one process, for each progress mode of server and client:
//! `cargo run --release -p weft-rpc --example null_latency -- [udp|shm] [calls]`.

use std::sync::Arc;
use std::time::Instant;
use weft_rpc::{Client, ClientConfig, Exec, Handlers, LinkKind, Progress, Server, ServerConfig};

const USAGE: &str = "usage: null_latency [udp|shm] [CALLS]";

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return std::process::ExitCode::SUCCESS;
    }
    let kind = match args.first().map(String::as_str) {
        None | Some("shm") => Ok(LinkKind::Shm),
        Some("udp") => Ok(LinkKind::Udp),
        Some(x) => Err(format!("unknown link {x:?} (udp or shm)")),
    };
    let calls = match args.get(1) {
        None => Ok(20_000),
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(format!("bad CALLS {c:?}")),
    };
    let (kind, calls) = match (kind, calls, args.len() <= 2) {
        (Ok(k), Ok(c), true) => (k, c),
        (k, c, _) => {
            let e = k.err().or(c.err()).unwrap_or("too many arguments".into());
            eprintln!("null_latency: {e}");
            eprintln!("{USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(kind, calls) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("null_latency: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(kind: LinkKind, calls: usize) -> Result<(), Box<dyn std::error::Error>> {
    for (sp, cp) in [
        (Progress::Inline, Progress::Inline),
        (Progress::Thread, Progress::Thread),
        (Progress::Inline, Progress::Thread),
        (Progress::Thread, Progress::Inline),
    ] {
        let svc = Arc::new(
            Handlers::new().add(1, "null", Exec::InPlace, |_, req, resp| {
                resp.extend_from_slice(req);
                Ok(())
            }),
        );
        let mut scfg = ServerConfig::new(kind);
        scfg.device.progress = sp;
        let server = Server::start(svc, scfg, "127.0.0.1:0".parse()?)?;
        let at = match std::env::var("WEFT_SERVER") {
            Ok(a) => a.parse()?,
            Err(_) => server.local_addr(),
        };
        let mut ccfg = ClientConfig::new(kind);
        ccfg.device.progress = cp;
        let client = Client::connect(at, ccfg)?;
        let payload = [7u8; 32];
        let mut lat = Vec::with_capacity(calls);
        let t = Instant::now();
        for _ in 0..calls {
            let t0 = Instant::now();
            client.call(1, &payload).wait()?;
            lat.push(t0.elapsed().as_nanos() as f64 / 1e3);
        }
        let secs = t.elapsed().as_secs_f64();
        lat.sort_by(f64::total_cmp);
        println!(
            "{kind} server {sp:?} client {cp:?}: {:.0} calls/s, p50 {:.1} us, p99 {:.1} us",
            calls as f64 / secs,
            lat[lat.len() / 2],
            lat[lat.len() * 99 / 100]
        );
    }
    Ok(())
}
