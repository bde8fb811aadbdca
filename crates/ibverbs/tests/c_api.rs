//! C programs (tests/c/*.c) compiled against the installed verbs.h and linked against
//! weft's libibverbs.so.1, run over udp and over shm:
//!
//! - misuse_threads.c: misuse gets rdma-core's errnos (EINVAL, EOPNOTSUPP, EBUSY,
//!   ENOMEM as back-pressure), and four threads post 2000 SENDs on one QP at once,
//!   every completion arriving once;
//! - new_api.c: `ibv_create_cq_ex` polling (`ibv_start_poll`, `ibv_wc_read_*`) and
//!   `ibv_create_qp_ex` with the `ibv_wr_*` builder (SEND, WRITE, READ, atomics);
//! - review_fixes.c: checks for review findings (QPs with
//!   swapped CQs from two threads, `bad_wr` of refused receive lists, SRQ posting,
//!   `create_cq_ex`'s comp_mask, `ibv_rereg_mr`'s return, SGE data under
//!   IBV_SEND_INLINE, destroying a CQ with unacknowledged events, four threads
//!   sharing one QP's `ibv_wr_*` builder, a completion channel's blocking descriptor
//!   in a program's own poll loop: readable while an event waits, quiet after a look
//!   that found none).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use weft_testkit::process::Reaped;

#[test]
fn misuse_gets_errnos_and_threads_share_a_qp() {
    run_c("misuse_threads", "ok: 2000 sends from 4 threads on one QP");
}

#[test]
fn extended_cq_polling_and_the_wr_builder() {
    run_c("new_api", "ok: extended CQ and QP");
}

#[test]
fn review_findings_stay_fixed() {
    run_c("review_fixes", "ok: review fixes");
}

/// Compile tests/c/NAME.c against verbs.h and weft's library, run it over udp and shm,
/// and require exit 0 and `expect` in its output.
fn run_c(name: &str, expect: &str) {
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        weft_testkit::skip("libibverbs-dev is not installed (scripts/setup.sh installs it)");
        return;
    }
    let Some(()) = weft_testkit::require("cc", weft_testkit::tool("cc")) else {
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let profile = weft_ibverbs::package::profile_dir_of(&exe).unwrap();
    let lib = weft_ibverbs::package::ensure_beside(&profile).expect("link libibverbs.so.1");
    let dir = std::env::temp_dir().join(format!("weft-ibverbs-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join(name);
    let src = format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let cc = Command::new("cc")
        .args(["-O1", "-Wall", "-Werror", "-o"])
        .arg(&prog)
        .arg(&src)
        .arg(format!("-L{}", lib.display()))
        .args(["-l:libibverbs.so.1", "-lpthread"])
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    for link in ["udp", "shm"] {
        let out = dir.join(format!("{link}.out"));
        let f = std::fs::File::create(&out).unwrap();
        let mut child = Reaped(
            Command::new(&prog)
                .env("LD_LIBRARY_PATH", &lib)
                .env(weft_ibverbs::ENV_LINK, link)
                .stdin(Stdio::null())
                .stdout(f.try_clone().unwrap())
                .stderr(f)
                .spawn()
                .unwrap(),
        );
        let t0 = Instant::now();
        let st = child.wait_for(name, Duration::from_secs(120));
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            st.success() && text.contains(expect),
            "{name} over {link} ({:?}): {st}\n{text}",
            t0.elapsed()
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
