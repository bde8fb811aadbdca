//! `weft baseline tcp-lat|udp-lat|tcp-bw|udp-bw`: kernel sockets measured with the same
//! harness, sizes and output as `weft perf`, so weft's numbers have a baseline from
//! the same run.
//!
//! Like perftest: without a host this is the server (it serves one client, then
//! exits); with a host it is the client; `--local` runs both, the server as a child
//! process. The two sides talk over a TCP control connection (JSON lines): per
//! message size the client announces the run, the data moves on its own socket
//! (a fresh TCP connection, or a UDP socket the server binds for it), and the server
//! answers with what only it can know (its turnaround timestamps for `--symmetric`,
//! what it received for `udp-bw`).
//!
//! - latency: one message out, the same size back; one-way latency is half the round
//!   trip, or with `--symmetric` ((t4 − t1) − (t3 − t2)) / 2 with the server's
//!   receive (t2) and send (t3) times. TCP sets TCP_NODELAY on both sides.
//! - UDP latency: every message carries its sequence number (its first
//!   min(size, 8) bytes); a reply that does not come within `--timeout-ms` counts as
//!   lost and the next round starts, a late reply is recognised by its number and
//!   dropped; a size gives up after 100 losses plus 10 % of its rounds.
//! - TCP bandwidth: one stream, one `write` per message (Nagle left on, as an
//!   application streaming messages gets it), timed by the sender from the first
//!   byte to the receiver's acknowledgement of the last.
//! - UDP bandwidth: datagrams as fast as the sender can, no pacing; the rate is the
//!   receiver's (messages after the first over the time from first to last), the
//!   loss is sent minus received, and the sender's rate is given beside it.
//! - `--busy-poll` (tcp-lat, udp-lat, tcp-bw): both sides' data sockets are
//!   non-blocking and every read or write that would block is retried at once, so
//!   no side ever sleeps in the kernel and waits for a wake-up: what remains is the
//!   stack's own cost, the fair baseline for a user-space stack that spins. The
//!   records say so in their system (`kernel-tcp-busypoll`, `kernel-udp-busypoll`).
//! - every record carries the CPU time of both processes per operation (the
//!   server's when it is the `--local` child), so spinning shows beside sleeping.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::perf::local::{announce_ready, LocalServer};
use crate::perf::record::{Meta, Record};
use crate::perf::run::{self, LoopOpts, Progress, Round};
use crate::perf::stats::BandwidthStats;
use crate::perf::table::Output;
use crate::perf::{bandwidth_record, drive, latency_record, Plan};
use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};

/// The largest UDP payload over IPv4 (65535 − 20 − 8).
const UDP_MAX: u64 = 65_507;
/// Socket timeouts of the data and control connections: a peer that stops
/// answering ends the run with an error instead of hanging it.
const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A kernel-socket test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Test {
    TcpLat,
    UdpLat,
    TcpBw,
    UdpBw,
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Test::TcpLat => "tcp-lat",
            Test::UdpLat => "udp-lat",
            Test::TcpBw => "tcp-bw",
            Test::UdpBw => "udp-bw",
        }
    }
    fn is_lat(self) -> bool {
        matches!(self, Test::TcpLat | Test::UdpLat)
    }
    fn is_udp(self) -> bool {
        matches!(self, Test::UdpLat | Test::UdpBw)
    }
    fn from_name(s: &str) -> Option<Test> {
        [Test::TcpLat, Test::UdpLat, Test::TcpBw, Test::UdpBw]
            .into_iter()
            .find(|t| t.name() == s)
    }
    /// Largest message of `--all`: a UDP datagram holds at most 64 KiB − 29 B, so
    /// UDP sweeps stop at 32 KiB; TCP goes to 8 MiB.
    fn sweep_cap(self) -> u64 {
        if self.is_udp() {
            32 << 10
        } else {
            run::SWEEP_MAX
        }
    }
}

/// Arguments of `weft baseline`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The test: tcp-lat, udp-lat, tcp-bw or udp-bw.
    #[arg(value_enum)]
    pub test: Test,
    /// Server to connect to. Without it (and without --local) this is the server.
    pub host: Option<String>,
    /// Control port (the server listens on it; 0 picks a free one and prints it).
    #[arg(short, long, default_value_t = 18515)]
    pub port: u16,
    /// Address the server listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: String,
    /// Run the server as a child process on 127.0.0.1 and the client here.
    #[arg(long, conflicts_with = "host")]
    pub local: bool,
    /// Message size in bytes (default: 2 for latency, 65536 for bandwidth, as perftest).
    #[arg(short, long)]
    pub size: Option<u64>,
    /// Sweep 2 B … 8 MiB in powers of two (UDP: up to 32 KiB).
    #[arg(short, long, conflicts_with = "size")]
    pub all: bool,
    /// Measured iterations per size (default: 1000 latency, 5000 bandwidth). Bandwidth
    /// sends at most 1 GiB per size.
    #[arg(short = 'n', long)]
    pub iters: Option<u64>,
    /// Unmeasured iterations first (default: a tenth of --iters, 10 to 1000).
    #[arg(long)]
    pub warmup: Option<u64>,
    /// One JSON object per size on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Latency by the symmetric timestamp method instead of half the round trip.
    #[arg(long)]
    pub symmetric: bool,
    /// Seconds a latency size may run before it stops with what it has measured.
    #[arg(long, default_value_t = 5.0)]
    pub time_limit: f64,
    /// UDP latency: milliseconds to wait for a reply before counting it lost.
    #[arg(long, default_value_t = 200)]
    pub timeout_ms: u64,
    /// Server: give up when no client connects within this many seconds.
    #[arg(long)]
    pub idle_timeout: Option<f64>,
    /// Busy-poll form: non-blocking data sockets, spun on by both sides instead of
    /// sleeping in the kernel (tcp-lat, udp-lat, tcp-bw).
    #[arg(long)]
    pub busy_poll: bool,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Run `weft baseline`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.symmetric && !args.test.is_lat() {
        bail!("--symmetric applies to latency tests only");
    }
    if args.busy_poll && args.test == Test::UdpBw {
        bail!("--busy-poll is offered for tcp-lat, udp-lat and tcp-bw (udp-bw's receiver already never waits)");
    }
    if let Some(s) = args.size {
        if s == 0 {
            bail!("--size must be at least 1");
        }
        if args.test.is_udp() && s > UDP_MAX {
            bail!("a UDP datagram holds at most {UDP_MAX} bytes");
        }
        if s > 1 << 30 {
            bail!("--size above 1 GiB");
        }
    }
    if args.local {
        return local(&args);
    }
    match &args.host {
        None => serve(&args),
        Some(h) => {
            let addr = (h.as_str(), args.port)
                .to_socket_addrs()
                .with_context(|| format!("resolving {h}"))?
                .next()
                .ok_or_else(|| anyhow!("{h} has no address"))?;
            client(&args, addr, None)
        }
    }
}

fn local(args: &Args) -> anyhow::Result<()> {
    let server_args: Vec<OsString> = [
        "baseline",
        args.test.name(),
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--idle-timeout",
        "30",
        "--quiet",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let server = LocalServer::spawn(&server_args, Duration::from_secs(30))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], server.port));
    let result = client(args, addr, server.pid());
    // The server exits when the client's control connection closes.
    let reaped = server.reap(Duration::from_secs(15));
    result?;
    reaped.map(|_| ())
}

/// JSON lines over the control connection.
struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Control {
    fn new(s: TcpStream) -> anyhow::Result<Control> {
        let writer = s.try_clone()?;
        Ok(Control {
            reader: BufReader::new(s),
            writer,
        })
    }
    fn send(&mut self, v: &Value) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(v)?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        Ok(())
    }
    /// The next message; `None` at end of stream.
    fn recv(&mut self) -> anyhow::Result<Option<Value>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let v: Value = serde_json::from_str(&line).context("control message")?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            bail!("server: {e}");
        }
        Ok(Some(v))
    }
    fn expect(&mut self) -> anyhow::Result<Value> {
        self.recv()?
            .ok_or_else(|| anyhow!("the server closed the control connection"))
    }
}

/// Writes `seq`'s low bytes into the first min(len, 8) bytes of `buf`.
fn put_seq(buf: &mut [u8], seq: u64) {
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

fn get_seq(buf: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = buf.len().min(8);
    b[..n].copy_from_slice(&buf[..n]);
    u64::from_le_bytes(b)
}

fn seq_bits(size: u64) -> u32 {
    (size.min(8) * 8) as u32
}

fn client(args: &Args, addr: SocketAddr, peer_pid: Option<u32>) -> anyhow::Result<()> {
    let test = args.test;
    let cap = if args.all {
        test.sweep_cap()
    } else if test.is_udp() {
        UDP_MAX
    } else {
        1 << 30
    };
    let plan = Plan::new(
        test.is_lat(),
        args.size,
        args.all,
        cap,
        args.iters,
        args.warmup,
        Duration::from_secs_f64(args.time_limit),
    )?;
    let ctl = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .with_context(|| format!("connecting to the server at {addr}"))?;
    ctl.set_nodelay(true)?;
    ctl.set_read_timeout(Some(IO_TIMEOUT))?;
    ctl.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut ctl = Control::new(ctl)?;
    let meta = Meta {
        system: system_name(test, args.busy_poll),
        test: test.name().to_string(),
        link: if addr.ip().is_loopback() {
            "loopback"
        } else {
            "net"
        }
        .to_string(),
        qp: if test.is_udp() { "dgram" } else { "stream" }.to_string(),
    };
    let mut out = Output::stdout(args.json);
    let mut progress = Progress::new(!args.quiet);
    let label = format!("{} to {addr}:", test.name());
    drive(
        &plan,
        &label,
        &mut progress,
        &mut out,
        |size, opts, progress| {
            let opts = &LoopOpts { peer_pid, ..*opts };
            match test {
                Test::TcpLat => tcp_lat(&mut ctl, addr, &meta, size, opts, args, progress),
                Test::UdpLat => udp_lat(&mut ctl, addr, &meta, size, opts, args, progress),
                Test::TcpBw => tcp_bw(&mut ctl, addr, &meta, size, opts, args.busy_poll, progress),
                Test::UdpBw => udp_bw(&mut ctl, addr, &meta, size, opts, progress),
            }
        },
    )?;
    ctl.send(&json!({"op": "bye"}))?;
    Ok(())
}

/// The record's system: the kernel protocol, and whether both sides spun.
fn system_name(test: Test, busy_poll: bool) -> String {
    let proto = if test.is_udp() { "udp" } else { "tcp" };
    let spin = if busy_poll { "-busypoll" } else { "" };
    format!("kernel-{proto}{spin}")
}

fn announce(
    ctl: &mut Control,
    test: Test,
    size: u64,
    opts: &LoopOpts,
    symmetric: bool,
    busy_poll: bool,
) -> anyhow::Result<Value> {
    ctl.send(&json!({
        "op": "run", "test": test.name(), "size": size,
        "warmup": opts.warmup, "iters": opts.iters, "symmetric": symmetric,
        "busy_poll": busy_poll,
    }))?;
    ctl.expect()
}

/// Retries `f` at once while it would block (a busy poll on a non-blocking socket)
/// for at most `limit`; then returns the would-block error.
fn spin<T>(limit: Duration, mut f: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let deadline = Instant::now() + limit;
    loop {
        match f() {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                if Instant::now() > deadline {
                    return Err(e);
                }
                std::hint::spin_loop();
            }
            r => return r,
        }
    }
}

/// `read_exact`, spinning on a non-blocking stream when `busy`.
fn read_exact_on(s: &mut TcpStream, buf: &mut [u8], busy: bool) -> std::io::Result<()> {
    if !busy {
        return s.read_exact(buf);
    }
    let mut off = 0;
    while off < buf.len() {
        let n = spin(IO_TIMEOUT, || s.read(&mut buf[off..]))?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        off += n;
    }
    Ok(())
}

/// `read`, spinning on a non-blocking stream when `busy`.
fn read_on(s: &mut TcpStream, buf: &mut [u8], busy: bool) -> std::io::Result<usize> {
    if busy {
        spin(IO_TIMEOUT, || s.read(buf))
    } else {
        s.read(buf)
    }
}

/// `write_all`, spinning on a non-blocking stream when `busy`.
fn write_all_on(s: &mut TcpStream, buf: &[u8], busy: bool) -> std::io::Result<()> {
    if !busy {
        return s.write_all(buf);
    }
    let mut off = 0;
    while off < buf.len() {
        let n = spin(IO_TIMEOUT, || s.write(&buf[off..]))?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        off += n;
    }
    Ok(())
}

fn data_connection(addr: SocketAddr) -> anyhow::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).context("data connection")?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

fn turnarounds(v: &Value) -> anyhow::Result<Option<Vec<(u64, u64)>>> {
    let Some(a) = v.get("turnaround_ns") else {
        return Ok(None);
    };
    let pairs: Vec<(u64, u64)> = serde_json::from_value(a.clone()).context("turnaround_ns")?;
    Ok(Some(pairs))
}

fn tcp_lat(
    ctl: &mut Control,
    addr: SocketAddr,
    meta: &Meta,
    size: u64,
    opts: &LoopOpts,
    args: &Args,
    progress: &mut Progress,
) -> anyhow::Result<Record> {
    // Connect first: the server accepts it after reading the announcement.
    let mut data = data_connection(addr)?;
    data.set_nodelay(true)?;
    let busy = args.busy_poll;
    data.set_nonblocking(busy)?;
    announce(ctl, Test::TcpLat, size, opts, args.symmetric, busy)?;
    let mut buf = vec![0xa5u8; size as usize];
    let result = run::ping_pong(opts, progress, |_| {
        write_all_on(&mut data, &buf, busy)?;
        read_exact_on(&mut data, &mut buf, busy)?;
        Ok(Round::Answered)
    });
    data.shutdown(Shutdown::Write)?;
    let reply = ctl.expect()?;
    let pp = result?;
    let ta = turnarounds(&reply)?;
    Ok(latency_record(meta, size, &pp, ta.as_deref(), 64))
}

fn udp_socket_to(addr: SocketAddr, port: u16) -> anyhow::Result<UdpSocket> {
    let local: SocketAddr = match addr.ip() {
        IpAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(local)?;
    s.connect((addr.ip(), port))?;
    big_buffers(&s);
    Ok(s)
}

/// Asks for 4 MiB socket buffers; the kernel caps them at net.core.rmem_max /
/// wmem_max, which is fine: this is what an application gets.
fn big_buffers(s: &UdpSocket) {
    let r = socket2::SockRef::from(s);
    let _ = r.set_recv_buffer_size(4 << 20);
    let _ = r.set_send_buffer_size(4 << 20);
}

fn udp_port(v: &Value) -> anyhow::Result<u16> {
    v.get("udp_port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| anyhow!("the server sent no udp_port"))
}

fn udp_lat(
    ctl: &mut Control,
    addr: SocketAddr,
    meta: &Meta,
    size: u64,
    opts: &LoopOpts,
    args: &Args,
    progress: &mut Progress,
) -> anyhow::Result<Record> {
    let reply = announce(
        ctl,
        Test::UdpLat,
        size,
        opts,
        args.symmetric,
        args.busy_poll,
    )?;
    let sock = udp_socket_to(addr, udp_port(&reply)?)?;
    let reply_timeout = Duration::from_millis(args.timeout_ms.max(1));
    sock.set_read_timeout(Some(reply_timeout))?;
    sock.set_nonblocking(args.busy_poll)?;
    let recv = |b: &mut [u8]| {
        if args.busy_poll {
            spin(reply_timeout, || sock.recv(b))
        } else {
            sock.recv(b)
        }
    };
    let mut out = vec![0xa5u8; size as usize];
    let mut back = vec![0u8; size as usize + 1];
    let bits = seq_bits(size);
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let give_up = 100 + (opts.warmup + opts.iters) / 10;
    let mut lost = 0u64;
    let result = run::ping_pong(opts, progress, |seq| {
        put_seq(&mut out, seq);
        sock.send(&out)?;
        loop {
            match recv(&mut back) {
                Ok(n) if n == out.len() && get_seq(&back[..n]) & mask == seq & mask => {
                    return Ok(Round::Answered)
                }
                // A late reply to an earlier round: drop it, keep waiting.
                Ok(_) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    lost += 1;
                    if lost > give_up {
                        bail!("gave up after {lost} lost datagrams");
                    }
                    return Ok(Round::Lost);
                }
                // ECONNREFUSED from an ICMP port unreachable: the server is gone.
                Err(e) => return Err(e.into()),
            }
        }
    });
    ctl.send(&json!({"op": "done"}))?;
    let reply = ctl.expect()?;
    match result {
        Ok(pp) => {
            let ta = turnarounds(&reply)?;
            Ok(latency_record(meta, size, &pp, ta.as_deref(), bits))
        }
        Err(e) => {
            let mut r = Record::failed(meta, size, e.to_string());
            r.lost = Some(lost);
            Ok(r)
        }
    }
}

#[allow(clippy::too_many_arguments)] // one runner's inputs, like its siblings'
fn tcp_bw(
    ctl: &mut Control,
    addr: SocketAddr,
    meta: &Meta,
    size: u64,
    opts: &LoopOpts,
    busy: bool,
    progress: &mut Progress,
) -> anyhow::Result<Record> {
    let mut data = data_connection(addr)?;
    data.set_nonblocking(busy)?;
    announce(ctl, Test::TcpBw, size, opts, false, busy)?;
    let buf = vec![0xa5u8; size as usize];
    let mut ack = [0u8; 1];
    let reader = data.try_clone()?;
    let mut reader = reader;
    let bw = run::bandwidth(
        opts,
        progress,
        |_| Ok(write_all_on(&mut data, &buf, busy)?),
        || Ok(read_exact_on(&mut reader, &mut ack, busy)?),
    )?;
    data.shutdown(Shutdown::Write)?;
    ctl.expect()?;
    Ok(bandwidth_record(meta, size, &bw))
}

fn udp_bw(
    ctl: &mut Control,
    addr: SocketAddr,
    meta: &Meta,
    size: u64,
    opts: &LoopOpts,
    progress: &mut Progress,
) -> anyhow::Result<Record> {
    let reply = announce(ctl, Test::UdpBw, size, opts, false, false)?;
    let sock = udp_socket_to(addr, udp_port(&reply)?)?;
    let buf = vec![0xa5u8; size as usize];
    let mut first_send: Option<Instant> = None;
    let mut last_send = Instant::now();
    let mut send_errors = 0u64;
    // `complete` asks the server what arrived since the last sync; the second answer
    // is the measured phase's.
    let mut synced: Vec<Value> = Vec::new();
    run::bandwidth(
        opts,
        progress,
        |seq| {
            if seq == opts.warmup {
                first_send = Some(Instant::now());
            }
            // ENOBUFS / EAGAIN: the datagram is lost at the sender; count it as lost
            // (it is: sent minus received) and go on.
            if sock.send(&buf).is_err() {
                send_errors += 1;
            }
            last_send = Instant::now();
            Ok(())
        },
        || {
            ctl.send(&json!({"op": "sync"}))?;
            synced.push(ctl.expect()?);
            Ok(())
        },
    )?;
    ctl.send(&json!({"op": "done"}))?;
    ctl.expect()?;
    let got = synced.last().ok_or_else(|| anyhow!("no sync"))?;
    let received = got["received"].as_u64().unwrap_or(0);
    let span_ns = got["span_ns"].as_u64().unwrap_or(0);
    let sent = opts.iters;
    let sender_secs = first_send.map_or(0.0, |t| (last_send - t).as_secs_f64());
    let mut r = if received >= 2 && span_ns > 0 {
        // n messages arrived over n − 1 gaps: the rate is that of the n − 1 after
        // the first.
        let b = BandwidthStats::new(size, received - 1, Duration::from_nanos(span_ns));
        let mut r = Record::bandwidth(meta, size, &b);
        r.iters = sent;
        r
    } else {
        Record::failed(
            meta,
            size,
            format!("receiver got {received} of {sent} datagrams"),
        )
    };
    if let Some(b) = r.bandwidth.as_mut() {
        if sender_secs > 0.0 {
            b.sender_mb_per_s = Some(sent as f64 * size as f64 / sender_secs / 1e6);
        }
    }
    r.lost = Some(sent.saturating_sub(received));
    if send_errors > 0 {
        r.note = Some(format!("{send_errors} sends failed at the sender"));
    }
    Ok(r)
}

// ---------------------------------------------------------------- server side

fn accept_within(l: &TcpListener, timeout: Option<Duration>) -> anyhow::Result<TcpStream> {
    let deadline = timeout.map(|t| Instant::now() + t);
    l.set_nonblocking(true)?;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    bail!(
                        "no connection within {:.0} s",
                        timeout.unwrap_or_default().as_secs_f64()
                    );
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn serve(args: &Args) -> anyhow::Result<()> {
    let listener = TcpListener::bind((args.bind.as_str(), args.port))
        .with_context(|| format!("listening on {}:{}", args.bind, args.port))?;
    let port = listener.local_addr()?.port();
    if !args.quiet {
        eprintln!(
            "weft baseline {}: server on {}:{port}",
            args.test.name(),
            args.bind
        );
    }
    announce_ready(port)?;
    let idle = args.idle_timeout.map(Duration::from_secs_f64);
    let ctl = accept_within(&listener, idle)?;
    ctl.set_nodelay(true)?;
    // A client computes between sizes; only a silent one for this long is gone.
    ctl.set_read_timeout(Some(Duration::from_secs(120)))?;
    let local_ip = ctl.local_addr()?.ip();
    let mut ctl = Control::new(ctl)?;
    while let Some(msg) = ctl.recv()? {
        match msg["op"].as_str() {
            Some("bye") => break,
            Some("run") => {
                let r = serve_run(&mut ctl, &listener, local_ip, args.test, &msg);
                if let Err(e) = r {
                    let _ = ctl.send(&json!({"error": e.to_string()}));
                    return Err(e);
                }
            }
            other => bail!("unexpected control message {other:?}"),
        }
    }
    Ok(())
}

fn serve_run(
    ctl: &mut Control,
    listener: &TcpListener,
    local_ip: IpAddr,
    mine: Test,
    msg: &Value,
) -> anyhow::Result<()> {
    let name = msg["test"].as_str().unwrap_or("");
    let test = Test::from_name(name).ok_or_else(|| anyhow!("unknown test {name:?}"))?;
    if test != mine {
        bail!(
            "this server runs {}, the client asked for {name}",
            mine.name()
        );
    }
    let size = msg["size"]
        .as_u64()
        .filter(|s| (1..=1 << 30).contains(s))
        .ok_or_else(|| anyhow!("bad size"))?;
    let warmup = msg["warmup"].as_u64().unwrap_or(0);
    let iters = msg["iters"].as_u64().unwrap_or(0);
    let symmetric = msg["symmetric"].as_bool().unwrap_or(false);
    let busy = msg["busy_poll"].as_bool().unwrap_or(false);
    match test {
        Test::TcpLat => {
            let mut data = accept_within(listener, Some(IO_TIMEOUT))?;
            data.set_nodelay(true)?;
            data.set_read_timeout(Some(IO_TIMEOUT))?;
            data.set_write_timeout(Some(IO_TIMEOUT))?;
            data.set_nonblocking(busy)?;
            ctl.send(&json!({"ok": true}))?;
            let mut buf = vec![0u8; size as usize];
            let mut ta = Vec::new();
            let mut seq = 0u64;
            loop {
                // End of stream exactly at a message boundary ends the run.
                let n = read_on(&mut data, &mut buf[..1], busy)?;
                if n == 0 {
                    break;
                }
                read_exact_on(&mut data, &mut buf[1..], busy)?;
                let t2 = Instant::now();
                let t3 = Instant::now();
                write_all_on(&mut data, &buf, busy)?;
                if symmetric {
                    ta.push((seq, (t3 - t2).as_nanos() as u64));
                }
                seq += 1;
            }
            send_turnarounds(ctl, symmetric, &ta)
        }
        Test::TcpBw => {
            let mut data = accept_within(listener, Some(IO_TIMEOUT))?;
            data.set_read_timeout(Some(IO_TIMEOUT))?;
            data.set_write_timeout(Some(IO_TIMEOUT))?;
            data.set_nonblocking(busy)?;
            ctl.send(&json!({"ok": true}))?;
            let mut buf = vec![0u8; (size as usize).clamp(256 << 10, 4 << 20)];
            for phase in [warmup, iters] {
                if phase == 0 {
                    continue;
                }
                let mut left = phase * size;
                while left > 0 {
                    let want = left.min(buf.len() as u64) as usize;
                    let n = read_on(&mut data, &mut buf[..want], busy)?;
                    if n == 0 {
                        bail!("the client closed the stream {left} bytes early");
                    }
                    left -= n as u64;
                }
                write_all_on(&mut data, &[1], busy)?;
            }
            ctl.send(&json!({"received_bytes": (warmup + iters) * size}))
        }
        Test::UdpLat => {
            let sock = UdpSocket::bind((local_ip, 0))?;
            big_buffers(&sock);
            sock.set_read_timeout(Some(Duration::from_millis(20)))?;
            // Busy poll: recv_from returns at once and the loop below spins.
            sock.set_nonblocking(busy)?;
            ctl.send(&json!({"ok": true, "udp_port": sock.local_addr()?.port()}))?;
            let stop = Arc::new(AtomicBool::new(false));
            let echo = {
                let stop = stop.clone();
                std::thread::spawn(move || -> std::io::Result<Vec<(u64, u64)>> {
                    let mut buf = vec![0u8; size as usize + 1];
                    let mut ta = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        match sock.recv_from(&mut buf) {
                            Ok((n, from)) => {
                                let t2 = Instant::now();
                                let seq = get_seq(&buf[..n]);
                                let t3 = Instant::now();
                                let _ = sock.send_to(&buf[..n], from);
                                if symmetric {
                                    ta.push((seq, (t3 - t2).as_nanos() as u64));
                                }
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(ta)
                })
            };
            let done = ctl.expect()?;
            stop.store(true, Ordering::Relaxed);
            let ta = echo.join().map_err(|_| anyhow!("echo thread panicked"))??;
            if done["op"] != "done" {
                bail!("expected done, got {done}");
            }
            send_turnarounds(ctl, symmetric, &ta)
        }
        Test::UdpBw => serve_udp_bw(ctl, local_ip, size),
    }
}

fn send_turnarounds(ctl: &mut Control, symmetric: bool, ta: &[(u64, u64)]) -> anyhow::Result<()> {
    if symmetric {
        ctl.send(&json!({ "turnaround_ns": ta }))
    } else {
        ctl.send(&json!({}))
    }
}

/// What the UDP bandwidth receiver counted since the last sync.
#[derive(Debug, Default, Clone, Copy)]
struct RxCount {
    received: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

fn serve_udp_bw(ctl: &mut Control, local_ip: IpAddr, size: u64) -> anyhow::Result<()> {
    let sock = UdpSocket::bind((local_ip, 0))?;
    big_buffers(&sock);
    sock.set_read_timeout(Some(Duration::from_millis(5)))?;
    ctl.send(&json!({"ok": true, "udp_port": sock.local_addr()?.port()}))?;
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(Mutex::new(RxCount::default()));
    let rx = {
        let (stop, count) = (stop.clone(), count.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            let mut buf = vec![0u8; size as usize + 1];
            let mut local = RxCount::default();
            while !stop.load(Ordering::Relaxed) {
                match sock.recv(&mut buf) {
                    Ok(_) => {
                        let now = Instant::now();
                        local.received += 1;
                        local.first.get_or_insert(now);
                        local.last = Some(now);
                        // Publish in batches: the lock stays off the per-datagram path.
                        if local.received % 64 == 0 {
                            merge(&count, &mut local);
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        merge(&count, &mut local);
                    }
                    Err(e) => return Err(e),
                }
            }
            merge(&count, &mut local);
            Ok(())
        })
    };
    let result = (|| -> anyhow::Result<()> {
        loop {
            let msg = ctl.expect()?;
            match msg["op"].as_str() {
                Some("sync") => {
                    // Everything the client sent is in flight or in the socket
                    // buffer: wait until the receiver has been idle for 50 ms.
                    let t0 = Instant::now();
                    let mut seen = u64::MAX;
                    loop {
                        std::thread::sleep(Duration::from_millis(50));
                        let now = lock(&count).received;
                        if now == seen || t0.elapsed() > Duration::from_secs(5) {
                            break;
                        }
                        seen = now;
                    }
                    let c = std::mem::take(&mut *lock(&count));
                    let span = match (c.first, c.last) {
                        (Some(f), Some(l)) => (l - f).as_nanos() as u64,
                        _ => 0,
                    };
                    ctl.send(&json!({"received": c.received, "span_ns": span}))?;
                }
                Some("done") => return ctl.send(&json!({})),
                other => bail!("unexpected {other:?} during udp-bw"),
            }
        }
    })();
    stop.store(true, Ordering::Relaxed);
    let joined = rx.join().map_err(|_| anyhow!("receiver thread panicked"))?;
    result?;
    joined?;
    Ok(())
}

fn lock(m: &Mutex<RxCount>) -> std::sync::MutexGuard<'_, RxCount> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn merge(shared: &Mutex<RxCount>, local: &mut RxCount) {
    if local.received == 0 {
        return;
    }
    let mut s = lock(shared);
    s.received += local.received;
    if s.first.is_none() {
        s.first = local.first;
    }
    s.last = local.last.or(s.last);
    *local = RxCount::default();
}

#[cfg(test)]
mod busy_poll_tests {
    use super::*;

    #[test]
    fn busy_poll_records_are_labelled() {
        assert_eq!(system_name(Test::TcpLat, false), "kernel-tcp");
        assert_eq!(system_name(Test::TcpLat, true), "kernel-tcp-busypoll");
        assert_eq!(system_name(Test::UdpLat, true), "kernel-udp-busypoll");
    }

    #[test]
    fn spin_retries_would_block_then_gives_up() {
        let mut calls = 0;
        let r = spin(IO_TIMEOUT, || {
            calls += 1;
            if calls < 5 {
                Err(std::io::ErrorKind::WouldBlock.into())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(r.ok(), Some(5));
        let r: std::io::Result<()> =
            spin(
                Duration::ZERO,
                || Err(std::io::ErrorKind::WouldBlock.into()),
            );
        assert_eq!(
            r.map_err(|e| e.kind()).err(),
            Some(std::io::ErrorKind::WouldBlock)
        );
    }

    #[test]
    fn busy_tcp_read_and_write_move_whole_messages() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        let msg = vec![7u8; 100_000];
        let writer = std::thread::spawn(move || {
            write_all_on(&mut a, &msg, true).unwrap();
            a
        });
        let mut got = vec![0u8; 100_000];
        read_exact_on(&mut b, &mut got, true).unwrap();
        assert!(got.iter().all(|&x| x == 7));
        drop(writer.join().unwrap());
        assert_eq!(read_on(&mut b, &mut got, true).unwrap(), 0, "end of stream");
    }
}
