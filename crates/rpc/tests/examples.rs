//! The examples as a newcomer meets them: the crate docs' `examples/hello_service.rs`
//! as two processes (a server, and a client that calls it and prints the answer);
//! every example's `--help` prints one line of usage, and a malformed address or an
//! unknown link prints what is wrong and one line of usage. Every process is bounded
//! in time.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use weft_testkit::process::{example, run_bounded, Reaped};

const T: Duration = Duration::from_secs(30);

#[test]
fn hello_service_answers_a_client_in_another_process() {
    let exe = example("weft-rpc", "hello_service");
    let help = run_bounded(&exe, &["--help"], T);
    assert_eq!(help.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&help.stdout).lines().count(), 1);
    let bad = run_bounded(&exe, &["127.0.0.1", "Ada"], T);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(
        err.lines().filter(|l| l.starts_with("usage: ")).count(),
        1,
        "{err}"
    );
    assert!(err.contains("bad address \"127.0.0.1\""), "{err}");

    let mut server = Reaped(
        Command::new(&exe)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = server.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Some(Ok(l)) = BufReader::new(out).lines().next() {
            let _ = tx.send(l);
        }
    });
    let first = rx
        .recv_timeout(T)
        .expect("the server says where it listens");
    let at = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let ok = run_bounded(&exe, &[&at, "Ada"], T);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "hello, Ada");
    // The service's own refusal reaches the client as a status, in words.
    let refused = run_bounded(&exe, &[&at, ""], T);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim(),
        "hello_service: invalid_argument: a name, please"
    );
}

#[test]
fn every_example_answers_help_and_refuses_bad_arguments_with_one_line_of_usage() {
    let cases: [(&str, &[&str], &str); 4] = [
        ("namenode", &["--link", "smh"], "smh"),
        ("namenode", &["--server", "127.0.0.1"], "127.0.0.1"),
        ("null_latency", &["smh"], "smh"),
        ("hello_service", &["--listen", "x:1"], "x:1"),
    ];
    for (name, args, named) in cases {
        let exe = example("weft-rpc", name);
        let help = run_bounded(&exe, &["--help"], T);
        assert_eq!(help.status.code(), Some(0), "{name} --help");
        let out = String::from_utf8_lossy(&help.stdout);
        assert_eq!(out.lines().count(), 1, "{name} --help: {out}");
        assert!(out.starts_with(&format!("usage: {name} ")), "{out}");
        let o = run_bounded(&exe, args, T);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {err}");
        assert_eq!(err.lines().count(), 2, "what is wrong, then usage: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("usage: ")).count(),
            1,
            "{err}"
        );
        assert!(
            err.contains(named),
            "{name} {args:?} names {named:?}: {err}"
        );
    }
}
