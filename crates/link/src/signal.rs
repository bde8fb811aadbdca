//! SIGINT/SIGTERM to a flag, for programs that run a link loop until told to stop.
//! Lives here because it needs `unsafe` (installing a handler) and this is the crate
//! where weft keeps its OS glue.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::SeqCst);
}

/// Install handlers for SIGINT and SIGTERM that set the returned flag.
pub fn stop_on_termination() -> io::Result<&'static AtomicBool> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let handler = on_signal as extern "C" fn(libc::c_int);
        // SAFETY: `on_signal` only performs an atomic store, which is async-signal-safe;
        // `signal` with a valid signal number and handler has no other preconditions.
        let r = unsafe { libc::signal(sig, handler as libc::sighandler_t) };
        if r == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(&STOP)
}
