//! `weft exec`: the program runs with weft's libibverbs.so.1 on its library path and
//! the link and address it was given, and sees the device weft0.

use std::process::{Command, Output};
use std::time::Duration;
use weft_testkit::process::output_within;

fn weft() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft"))
}

/// Run `weft ARGS…`, killed (and the test failed) if it runs past a minute.
fn run(cmd: &mut Command) -> Output {
    output_within(cmd, "weft exec", Duration::from_secs(60))
}

#[test]
fn exec_passes_the_link_the_address_and_the_library_path() {
    let out = run(weft()
        .args([
            "exec",
            "--link",
            "shm",
            "--addr",
            "127.0.0.9",
            "--",
            "sh",
            "-c",
        ])
        .arg("echo \"$WEFT_IBVERBS_LINK $WEFT_IBVERBS_ADDR\"; ls \"${LD_LIBRARY_PATH%%:*}\""));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("shm 127.0.0.9"), "{text}");
    assert!(text.contains("libibverbs.so.1"), "{text}");
}

#[test]
fn exec_returns_the_programs_exit_status() {
    let out = run(weft().args(["exec", "--", "sh", "-c", "exit 3"]));
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn ibv_devices_under_weft_exec_lists_weft0() {
    if weft_testkit::require("ibv_devices", weft_testkit::tool("ibv_devices")).is_none() {
        return;
    }
    let out = run(weft().args(["exec", "--", "ibv_devices"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("weft0"), "{out:?}");
}

#[test]
fn icrc_any_ipv4_id_is_an_explicit_opt_in() {
    let show = "echo \"[${WEFT_IBVERBS_ICRC_ANY_IPV4_ID-unset}]\"";
    let on = weft()
        .args(["exec", "--icrc-any-ipv4-id", "--", "sh", "-c", show])
        .output()
        .unwrap();
    assert!(on.status.success(), "{on:?}");
    assert_eq!(String::from_utf8_lossy(&on.stdout).trim(), "[1]");
    // Off by default, even when the caller's environment has it on.
    let off = weft()
        .args(["exec", "--", "sh", "-c", show])
        .env("WEFT_IBVERBS_ICRC_ANY_IPV4_ID", "1")
        .output()
        .unwrap();
    assert!(off.status.success(), "{off:?}");
    assert_eq!(String::from_utf8_lossy(&off.stdout).trim(), "[unset]");
}

#[test]
fn dev_node_makes_the_device_file_ucx_checks_for() {
    // Creating it needs root (CI runs as root); /proc/self belongs to our user.
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !root {
        weft_testkit::skip("weft exec --dev-node needs root");
        return;
    }
    let out = run(weft().args([
        "exec",
        "--dev-node",
        "--",
        "test",
        "-c",
        "/dev/infiniband/uverbs-weft0",
    ]));
    assert!(out.status.success(), "{out:?}");
}
