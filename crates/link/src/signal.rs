//! SIGINT/SIGTERM to a flag, for programs that run a link loop until told to stop.
//! The handler is installed by a `sys` wrapper (this crate keeps its OS glue there).

use std::io;
use std::sync::atomic::AtomicBool;

/// Install handlers for SIGINT and SIGTERM that set the returned flag.
pub fn stop_on_termination() -> io::Result<&'static AtomicBool> {
    crate::sys::stop_on_termination()
}
