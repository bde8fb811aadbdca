//! The README's rc_pingpong, captured on the wire: a server and a client process over
//! the udp link while tshark records loopback with the filter `udp port 4791`, then
//! `weft decode --json` on the capture. Every packet must be RoCEv2 to port 4791 with
//! a good ICRC, and traffic must flow both ways between the two devices' own loopback
//! addresses.
//!
//! Needs tshark and the right to capture (root); without them this test fails and says
//! so, as the tshark interop test does. Every process it starts is bounded in time and
//! killed if it overstays.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::process::{ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use weft_testkit::process::{example, Reaped};

/// Lines of a child's stdout, read on a thread so waiting for one can be bounded.
fn lines(out: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line that `pick` accepts, within `limit`.
fn expect_line<T>(
    rx: &mpsc::Receiver<String>,
    what: &str,
    limit: Duration,
    mut pick: impl FnMut(&str) -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                if let Some(v) = pick(&l) {
                    return v;
                }
            }
            Err(e) => panic!("no {what} within {limit:?} ({e})"),
        }
    }
}

/// "waiting on 127.0.0.1:PORT (device IP:4791)" → (listener, device).
fn server_line(l: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = l.strip_prefix("waiting on ")?;
    let (listen, dev) = rest.split_once(" (device ")?;
    Some((listen.parse().ok()?, dev.strip_suffix(')')?.parse().ok()?))
}

/// "connected to … (device IP:4791, peer device IP:4791)" → (device, peer device).
fn client_line(l: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = l.split_once("(device ")?.1;
    let (dev, peer) = rest.split_once(", peer device ")?;
    Some((dev.parse().ok()?, peer.strip_suffix(')')?.parse().ok()?))
}

#[test]
fn rc_pingpong_on_the_wire_is_rocev2_to_port_4791_with_good_icrcs_both_ways() {
    let packets = capture_pingpong(64, 200);
    assert!(
        packets.iter().all(|p| p.get("gso_segment").is_none()),
        "one-packet messages leave one datagram each"
    );
}

/// 64 KiB messages leave as UDP GSO sends (16 packets a send); loopback shows each
/// send whole, and `weft decode` cuts it into its packets, every one with the ICRC
/// its own datagram's headers give.
#[test]
fn a_64_kib_pingpong_leaves_as_gso_sends_whose_segments_all_have_good_icrcs() {
    let packets = capture_pingpong(65536, 30);
    let segments = packets
        .iter()
        .filter(|p| p.get("gso_segment").is_some())
        .count();
    assert!(
        segments >= 30 * 16,
        "{segments} of {} packets came in GSO sends",
        packets.len()
    );
}

/// rc_pingpong with `size`-byte messages for `iters` round trips between a server and
/// a client process over udp, captured on loopback by tshark and decoded by `weft
/// decode --json`; asserts every packet is RoCEv2 with a good ICRC between the two
/// devices, at least `iters` messages' worth each way, and returns the packets.
fn capture_pingpong(size: usize, iters: usize) -> Vec<serde_json::Value> {
    let exe = example("weft-verbs", "rc_pingpong");
    let dir = std::env::temp_dir().join(format!("weft-capture-{}-{size}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("rc_pingpong.pcapng");
    let (size_arg, iters_arg) = (size.to_string(), iters.to_string());
    let (size, iters) = (size_arg.as_str(), iters_arg.as_str());

    let mut server = Reaped(
        Command::new(&exe)
            .args(["--listen", "127.0.0.1:0", "--iters", iters, "--size", size])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let srv_out = lines(server.0.stdout.take().unwrap());
    let (listen, srv_dev) = expect_line(
        &srv_out,
        "server address",
        Duration::from_secs(30),
        server_line,
    );
    assert_eq!(
        srv_dev.port(),
        4791,
        "the server's device is on RoCEv2's port"
    );

    // Capture only this server's RoCEv2 traffic (other tests may use port 4791 too),
    // whole (`-s 0`: a GSO send is up to 64 KiB), plus probes to its port 9 that show
    // when the capture is running.
    let ip = srv_dev.ip();
    let filter = format!("host {ip} and (udp port 4791 or udp port 9)");
    let tshark = Command::new("tshark")
        .args(["-i", "lo", "-s", "0", "-f", &filter, "-l", "-P", "-n", "-w"])
        .arg(&pcap)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut tshark = match tshark {
        Ok(c) => Reaped(c),
        Err(e) => panic!("tshark is needed to capture (scripts/setup.sh installs it): {e}"),
    };
    let cap_out = lines(tshark.0.stdout.take().unwrap());
    let mut cap_err = tshark.0.stderr.take().unwrap();
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut running = false;
    while !running && Instant::now() < deadline {
        probe.send_to(b"probe", (ip, 9)).unwrap();
        // Nothing else matches the filter yet (the server's device is idle until a
        // client connects), so any packet tshark prints is a probe.
        while let Ok(l) = cap_out.recv_timeout(Duration::from_millis(200)) {
            running |= !l.trim().is_empty();
        }
        if let Ok(Some(st)) = tshark.0.try_wait() {
            let mut e = String::new();
            let _ = cap_err.read_to_string(&mut e);
            panic!("tshark exited ({st}) before capturing: {e}");
        }
    }
    assert!(running, "the capture did not start within 30 s");

    let client = Command::new(&exe)
        .args([&listen.to_string(), "--iters", iters, "--size", size])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut client = Reaped(client);
    let cli_out = lines(client.0.stdout.take().unwrap());
    let (cli_dev, peer_dev) = expect_line(
        &cli_out,
        "client connection",
        Duration::from_secs(30),
        client_line,
    );
    assert_eq!(
        peer_dev, srv_dev,
        "the client learned the server's device address"
    );
    assert_eq!(cli_dev.port(), 4791);
    assert_ne!(cli_dev.ip(), srv_dev.ip());
    let st = client.wait_for("the client", Duration::from_secs(120));
    assert!(st.success(), "client: {st}");
    let st = server.wait_for("the server", Duration::from_secs(30));
    assert!(st.success(), "server: {st}");

    // Stop the capture cleanly (SIGINT flushes the file), bounded.
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &tshark.0.id().to_string()])
        .status();
    tshark.wait_for("tshark", Duration::from_secs(30));

    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["decode", "--json"])
        .arg(&pcap)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let packets: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (srv, cli) = (srv_dev.to_string(), cli_dev.to_string());
    let mut to_server = 0;
    let mut to_client = 0;
    for p in &packets {
        assert_eq!(p["icrc_ok"], true, "{p}");
        assert!(p.get("error").is_none(), "{p}");
        let (src, dst) = (p["src"].as_str().unwrap(), p["dst"].as_str().unwrap());
        if (src, dst) == (cli.as_str(), srv.as_str()) {
            to_server += 1;
        } else if (src, dst) == (srv.as_str(), cli.as_str()) {
            to_client += 1;
        } else {
            panic!("a packet between other addresses: {p}");
        }
    }
    // A SEND each way per round trip (ACKs may ride along).
    let want: usize = iters_arg.parse().unwrap();
    assert!(
        to_server >= want && to_client >= want,
        "{to_server} to the server, {to_client} to the client; {stderr}"
    );
    std::fs::remove_dir_all(&dir).ok();
    packets
}
