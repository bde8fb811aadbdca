//! Null-RPC round trips in one process, for each progress mode of server and client:
//! `cargo run --release -p weft-rpc --example null_latency -- [udp|shm] [calls]`.

use std::sync::Arc;
use std::time::Instant;
use weft_rpc::{Client, ClientConfig, Exec, Handlers, LinkKind, Progress, Server, ServerConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let kind = match args.next().as_deref() {
        Some("udp") => LinkKind::Udp,
        _ => LinkKind::Shm,
    };
    let calls: usize = args.next().map_or(Ok(20_000), |s| s.parse())?;
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
            "{kind:?} server {sp:?} client {cp:?}: {:.0} calls/s, p50 {:.1} us, p99 {:.1} us",
            calls as f64 / secs,
            lat[lat.len() / 2],
            lat[lat.len() * 99 / 100]
        );
    }
    Ok(())
}
