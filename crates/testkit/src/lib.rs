//! Test support shared by weft's crates (a dev-dependency only).
//!
//! Owns one rule: **a test whose prerequisite is missing never passes silently under CI.**
//! Some tests need things a developer's machine may lack — root for network namespaces,
//! AF_XDP in the kernel, tshark, scapy, the real BGP table in the cargo registry. Outside CI
//! such a test may skip, but it says why and the skip is counted; with `CI` set it fails.
//!
//! Every skip is also appended to the file named by `WEFT_SKIP_LOG`, when set, so the test
//! command (`scripts/test.sh`) can end by saying how many tests ran, how many skipped, and
//! why.
//!
//! It also holds [`process`]: the workspace's examples built on demand, child runs
//! bounded in time, and children reaped when a test fails; and [`capture`]: dumpcap
//! in a namespace, stopped only once every packet it saw is in its file.
//!
//! Must not touch: anything but the process environment, that log file and the
//! children it starts.
#![forbid(unsafe_code)]

use std::fmt::Display;
use std::io::Write;

pub mod capture;
pub mod process;

/// A turn at the machine's fixed-name network namespaces; see [`netns_turn`].
#[derive(Debug)]
pub struct NetnsTurn(#[allow(dead_code)] std::fs::File);

/// Wait for a turn at the fixed-name network namespaces (`weft-r`, `weft-ha`, `wcl-*`,
/// `wmtu-*`, `wfi-*`: the topology scripts' names) and hold it until the returned value
/// is dropped. The turn is an exclusive lock on one file in `/run/lock`, so two test
/// processes on one machine (a CI run and a developer's run, or two test binaries)
/// take turns instead of tearing down each other's namespaces; threads of one process
/// take turns too (each call opens the file anew, and such a lock belongs to the open
/// file). Bounded: after `wait` without a turn it panics, naming the lock file.
pub fn netns_turn(wait: std::time::Duration) -> NetnsTurn {
    turn_at("/run/lock/weft-netns-tests.lock", wait)
}

fn turn_at(path: &str, wait: std::time::Duration) -> NetnsTurn {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {path}: {e}"));
    let deadline = std::time::Instant::now() + wait;
    loop {
        use rustix::fs::{flock, FlockOperation};
        match flock(&f, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return NetnsTurn(f),
            Err(e)
                if e == rustix::io::Errno::WOULDBLOCK && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => panic!("no turn at the network namespaces within {wait:?} ({path}): {e}"),
        }
    }
}

/// The environment variable naming the file skips are appended to.
pub const SKIP_LOG: &str = "WEFT_SKIP_LOG";

/// True when this run is CI: `CI` set to anything but empty, `0` or `false` (GitHub,
/// GitLab and this project's CI set `CI=true`).
pub fn under_ci() -> bool {
    ci_value(std::env::var("CI").ok().as_deref())
}

fn ci_value(v: Option<&str>) -> bool {
    match v {
        None => false,
        Some(v) => !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"),
    }
}

/// The current test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string()
}

/// A prerequisite of the running test is missing, for the reason `why`.
///
/// Under CI this panics (the test fails, naming the prerequisite). Elsewhere it prints
/// `skipped: <test>: <why>` and records the skip in `WEFT_SKIP_LOG`; the caller then
/// returns without asserting anything.
#[track_caller]
pub fn skip(why: impl Display) {
    let line = format!("{}: {why}", test_name());
    if under_ci() {
        panic!("prerequisite missing under CI (a skip would hide an untested path): {line}");
    }
    eprintln!("skipped: {line}");
    if let Some(path) = std::env::var_os(SKIP_LOG) {
        // One short O_APPEND write per skip: lines from parallel tests do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            eprintln!("weft-testkit: cannot record the skip in {path:?}: {e}");
        }
    }
}

/// `Some(value)` when the prerequisite is there; otherwise [`skip`] with `what` and the
/// error, and `None` (the test returns).
///
/// ```no_run
/// fn probe() -> Result<u32, String> { Err("no such thing".into()) }
/// let Some(v) = weft_testkit::require("the thing", probe()) else { return };
/// assert_eq!(v, 1);
/// ```
#[track_caller]
pub fn require<T, E: Display>(what: &str, r: Result<T, E>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            skip(format_args!("{what}: {e}"));
            None
        }
    }
}

/// `Ok` when an executable named `tool` is on `PATH`, else why not.
pub fn tool(tool: &str) -> Result<(), String> {
    let found = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            std::fs::metadata(dir.join(tool)).is_ok_and(|m| m.is_file() && is_executable(&m))
        })
    });
    if found {
        Ok(())
    } else {
        Err(format!(
            "{tool} not installed (scripts/setup.sh installs it)"
        ))
    }
}

#[cfg(unix)]
fn is_executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    true
}

/// `Ok` when the process is root (uid 0), as network-namespace tests need.
pub fn root() -> Result<(), String> {
    // The effective uid is the 5th field of /proc/self/status's `Uid:` line; reading it
    // avoids an unsafe geteuid call in a crate that forbids unsafe.
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .ok_or("no Uid line in /proc/self/status")?;
    if euid == "0" {
        Ok(())
    } else {
        Err(format!("needs root (effective uid {euid})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_recognised_as_ci_runners_set_it() {
        assert!(ci_value(Some("true")));
        assert!(ci_value(Some("1")));
        assert!(ci_value(Some("TRUE")));
        assert!(!ci_value(None));
        assert!(!ci_value(Some("")));
        assert!(!ci_value(Some("false")));
        assert!(!ci_value(Some("0")));
    }

    /// The child role of the two tests below: a test whose prerequisite is missing.
    #[test]
    #[ignore = "run by skip_fails_under_ci_and_is_logged_elsewhere as a child process"]
    fn child_with_a_missing_prerequisite() {
        let _ = require("the moon", Err::<(), _>("not in the sky"));
    }

    /// Runs the child role in a process of its own with the given `CI` value.
    fn run_child(ci: Option<&str>, log: &std::path::Path) -> std::process::Output {
        let mut cmd = std::process::Command::new(std::env::current_exe().expect("test binary"));
        cmd.args([
            "--exact",
            "tests::child_with_a_missing_prerequisite",
            "--ignored",
            "--test-threads=1",
        ])
        .env(SKIP_LOG, log);
        match ci {
            Some(v) => cmd.env("CI", v),
            None => cmd.env_remove("CI"),
        };
        cmd.output().expect("run the child test")
    }

    #[test]
    fn skip_fails_under_ci_and_is_logged_elsewhere() {
        let dir = std::env::temp_dir().join(format!("weft-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skips");

        let out = run_child(None, &log);
        assert!(out.status.success(), "outside CI a skip passes: {out:?}");
        let logged = std::fs::read_to_string(&log).expect("the skip is logged");
        assert_eq!(
            logged,
            "tests::child_with_a_missing_prerequisite: the moon: not in the sky\n"
        );

        std::fs::remove_file(&log).unwrap();
        let out = run_child(Some("true"), &log);
        assert!(!out.status.success(), "under CI a skip fails: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("prerequisite missing under CI") && stdout.contains("the moon"),
            "the failure names the prerequisite: {stdout}"
        );
        assert!(!log.exists(), "a failure under CI is not logged as a skip");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn require_passes_the_value_through() {
        assert_eq!(require("x", Ok::<_, String>(7)), Some(7));
    }

    #[test]
    fn a_missing_tool_is_missing_and_sh_is_present() {
        assert!(tool("sh").is_ok());
        let e = tool("weft-no-such-tool-xyz").unwrap_err();
        assert!(e.contains("weft-no-such-tool-xyz"), "{e}");
    }
}

#[cfg(test)]
mod netns_turn_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_second_turn_waits_for_the_first_and_gives_up_at_its_bound() {
        // Its own file: a netns test elsewhere on the machine may hold the real one.
        let path = format!("/tmp/weft-turn-test-{}.lock", std::process::id());
        let first = turn_at(&path, Duration::from_secs(5));
        let p = path.clone();
        let second = std::thread::spawn(move || {
            std::panic::catch_unwind(|| turn_at(&p, Duration::from_millis(300))).is_err()
        });
        assert!(
            second.join().expect("thread"),
            "a second turn was given while the first was held"
        );
        drop(first);
        let again = turn_at(&path, Duration::from_secs(5));
        drop(again);
        let _ = std::fs::remove_file(&path);
    }
}
