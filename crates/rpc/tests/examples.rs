//! The examples as a newcomer meets them: the crate docs' `examples/hello_service.rs`
//! as two processes (a server, and a client that calls it and prints the answer);
//! every example's `--help` prints one line of usage, and a malformed address or an
//! unknown link prints what is wrong and one line of usage. Every process is bounded
//! in time.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

/// Build the examples (cargo builds them for `cargo test` of the whole crate, not for
/// `--test examples`) and return the path of `name` beside the test binary's directory.
fn example(name: &str) -> PathBuf {
    // The test binary is target/<profile dir>/deps/NAME-HASH; build the examples with
    // the same profile so they land in target/<profile dir>/examples.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_string(),
        Some(p) => p.to_string(),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let st = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "weft-rpc",
            "--examples",
            "--profile",
        ])
        .arg(&profile)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("running cargo");
    assert!(st.success(), "building the examples failed");
    let path = profile_dir.join("examples").join(name);
    assert!(path.exists(), "{} missing", path.display());
    path
}

/// Run to completion within `limit` (killed otherwise).
fn run(exe: &PathBuf, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{} {args:?} ran over {limit:?}", exe.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// The server, killed when dropped (it serves until stopped).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn hello_service_answers_a_client_in_another_process() {
    let exe = example("hello_service");
    let help = run(&exe, &["--help"], T);
    assert_eq!(help.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&help.stdout).lines().count(), 1);
    let bad = run(&exe, &["127.0.0.1", "Ada"], T);
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
    let ok = run(&exe, &[&at, "Ada"], T);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "hello, Ada");
    // The service's own refusal reaches the client as a status, in words.
    let refused = run(&exe, &[&at, ""], T);
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
        let exe = example(name);
        let help = run(&exe, &["--help"], T);
        assert_eq!(help.status.code(), Some(0), "{name} --help");
        let out = String::from_utf8_lossy(&help.stdout);
        assert_eq!(out.lines().count(), 1, "{name} --help: {out}");
        assert!(out.starts_with(&format!("usage: {name} ")), "{out}");
        let o = run(&exe, args, T);
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
