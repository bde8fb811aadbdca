//! The examples as a newcomer meets them: `--help` prints one line of usage and exits
//! 0; a malformed address, an unknown `--link` or a stray argument prints what is
//! wrong and one line of usage and exits 2; and hello_write (the crate docs' example)
//! runs as two processes. Every process is bounded in time.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use weft_testkit::process::{example, run_bounded, Reaped};

fn usage_lines(s: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(s)
        .lines()
        .filter(|l| l.starts_with("usage: "))
        .map(str::to_string)
        .collect()
}

const T: Duration = Duration::from_secs(20);

#[test]
fn every_example_answers_help_and_refuses_bad_arguments_with_one_line_of_usage() {
    // (example, a malformed address or value, an unknown link value)
    let cases: [(&str, &[&str], &[&str]); 4] = [
        ("rc_pingpong", &["127.0.0.1"], &["--link", "smh"]),
        ("write_read", &["localhost:x"], &["--link", "smh"]),
        ("hello_write", &["127.0.0.1"], &["--bogus"]),
        ("msg_rate", &["udp", "big"], &["smh"]),
    ];
    for (name, bad, unknown_link) in cases {
        let exe = example("weft-verbs", name);
        let help = run_bounded(&exe, &["--help"], T);
        assert_eq!(help.status.code(), Some(0), "{name} --help");
        let out = String::from_utf8_lossy(&help.stdout);
        assert_eq!(out.lines().count(), 1, "{name} --help: {out}");
        assert!(out.starts_with(&format!("usage: {name} ")), "{out}");
        for args in [bad, unknown_link] {
            let o = run_bounded(&exe, args, T);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {err}");
            assert_eq!(usage_lines(&o.stderr).len(), 1, "{name} {args:?}: {err}");
            assert_eq!(err.lines().count(), 2, "what is wrong, then usage: {err}");
            let bad_value = args.last().unwrap();
            assert!(err.contains(bad_value), "{name} names {bad_value:?}: {err}");
        }
    }
}

#[test]
fn a_missing_server_is_reported_in_words_with_its_address() {
    let exe = example("weft-verbs", "rc_pingpong");
    // A port nothing listens on: bind one and close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let at = format!("127.0.0.1:{port}");
    let o = run_bounded(&exe, &[&at], T);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        format!("rc_pingpong: connection with {at} rejected: nothing listens there")
    );
}

#[test]
fn hello_write_runs_as_two_processes() {
    let exe = example("weft-verbs", "hello_write");
    let mut server = Reaped(
        Command::new(&exe)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Lines of the server's output, read on a thread so each wait is bounded.
    let out = server.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    // "listening on 127.0.0.1:PORT (device …)"; the server prints it at once.
    let first = rx
        .recv_timeout(T)
        .expect("the server says where it listens");
    let at = first
        .strip_prefix("listening on ")
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let client = run_bounded(&exe, &[&at], Duration::from_secs(60));
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&client.stdout).trim(),
        "client: WRITE done"
    );
    let said = rx.recv_timeout(T).expect("the server reports what arrived");
    assert_eq!(said, "server: the client wrote \"hello, RDMA WRITE\"");
    let deadline = Instant::now() + T;
    let st = loop {
        if let Some(st) = server.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(st.success());
}
