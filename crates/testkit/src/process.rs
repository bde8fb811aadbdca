//! Child processes for tests: the workspace's examples built on demand, runs bounded in
//! time, and children that cannot outlive a failed assertion.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Builds example `name` of package `package` and returns its executable. Cargo builds
/// a crate's examples only for `cargo test` of that whole crate, so a test that runs
/// one (or another crate's) builds it here, with the profile the test binary was built
/// with, into the same target directory (`target/<profile dir>/examples/`).
pub fn example(package: &str, name: &str) -> PathBuf {
    // The test binary is target/<profile dir>/deps/NAME-HASH.
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
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
            package,
            "--example",
            name,
            "--profile",
        ])
        .arg(&profile)
        .status()
        .expect("running cargo");
    assert!(st.success(), "building example {name} of {package} failed");
    let path = profile_dir.join("examples").join(name);
    assert!(path.exists(), "{} missing after the build", path.display());
    path
}

/// Runs `exe` with `args` to completion within `limit`; a run past it is killed and
/// the test fails.
pub fn run_bounded(exe: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {args:?} ran over {limit:?}", exe.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("collecting its output")
}

/// Runs `cmd` (its stdin null, its stdout and stderr collected) to completion within
/// `limit`, like [`Command::output`] but bounded: a run past `limit` is killed and the
/// test fails naming `what`. The output is drained while the program runs, so a
/// program that writes more than a pipe holds does not stall.
pub fn output_within(cmd: &mut Command, what: &str, limit: Duration) -> Output {
    let mut child = Reaped(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}")),
    );
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(child.0.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.0.stderr.take().map(|r| Box::new(r) as _));
    let status = child.wait_for(what, limit);
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// A child process killed and reaped when dropped, so a failed assertion never leaves
/// it behind.
#[derive(Debug)]
pub struct Reaped(pub Child);

impl Reaped {
    /// Waits up to `limit` for the process to exit; its exit status, or the test fails
    /// naming `what`.
    pub fn wait_for(&mut self, what: &str, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.0.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "{what} still running after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Asks `child` to end with `signal` (a `kill -SIGNAL` name: "INT", "TERM"), waits up to
/// `grace` for it to exit, then kills it; reaped either way.
pub fn stop_with(child: &mut Child, signal: &str, grace: Duration) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status();
    let deadline = Instant::now() + grace;
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}
