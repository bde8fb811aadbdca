//! `--local`: both sides of a test on this host, as two processes, so one command
//! gives a measurement. The client spawns this same binary (`current_exe`) in server
//! mode, reads the port from the server's ready line, runs, and reaps the child —
//! every step bounded in time, and the child killed if it overstays.
//!
//! The server side's contract: bind (port 0 is fine), then call [`announce_ready`]
//! before accepting, and print nothing else on stdout (progress goes to stderr,
//! which the child inherits).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The server's ready line: this prefix, then the decimal port.
pub const READY_PREFIX: &str = "weft-server ready port=";

/// Tells a `--local` parent (or a person) that the server listens on `port`.
pub fn announce_ready(port: u16) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{READY_PREFIX}{port}")?;
    out.flush()
}

/// Parses a ready line.
pub fn parse_ready(line: &str) -> Option<u16> {
    line.trim().strip_prefix(READY_PREFIX)?.parse().ok()
}

/// A server child process of `--local`. Dropping it kills the child if it still runs.
#[derive(Debug)]
pub struct LocalServer {
    child: Option<Child>,
    /// The port from the server's ready line.
    pub port: u16,
}

impl LocalServer {
    /// Spawns this binary with `args` (e.g. `["baseline", "tcp-lat", "--server",
    /// "--port", "0"]`) and waits up to `ready_timeout` for its ready line.
    pub fn spawn(args: &[OsString], ready_timeout: Duration) -> anyhow::Result<LocalServer> {
        let exe = std::env::current_exe().context("locating this binary")?;
        let mut child = Command::new(&exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("spawning {} as the server", exe.display()))?;
        let stdout = child.stdout.take().context("server stdout")?;
        // A thread reads the child's stdout so the wait can have a deadline; after
        // the ready line it keeps draining (and echoes to stderr anything the
        // server says there, which it should not) so the child never blocks on a
        // full pipe.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut ready_sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !ready_sent {
                    if let Some(p) = parse_ready(&line) {
                        let _ = tx.send(p);
                        ready_sent = true;
                        continue;
                    }
                }
                eprintln!("server: {line}");
            }
        });
        let mut server = LocalServer {
            child: Some(child),
            port: 0,
        };
        match rx.recv_timeout(ready_timeout) {
            Ok(port) => {
                server.port = port;
                Ok(server)
            }
            Err(_) => {
                let status = server.kill();
                bail!(
                    "the server child printed no ready line within {:.1} s ({status})",
                    ready_timeout.as_secs_f64()
                )
            }
        }
    }

    /// The child's process id (for reading its CPU clock), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Waits up to `timeout` for the child to exit by itself, then kills it.
    /// Errors if it had to be killed or exited unsuccessfully.
    pub fn reap(mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let mut child = self.child.take().context("server already reaped")?;
        loop {
            if let Some(status) = child.try_wait()? {
                if !status.success() {
                    bail!("the server child exited with {status}");
                }
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let status = child.wait()?;
                bail!(
                    "the server child did not exit within {:.1} s; killed ({status})",
                    timeout.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn kill(&mut self) -> String {
        match self.child.take() {
            Some(mut c) => {
                let _ = c.kill();
                c.wait().map_or_else(|e| e.to_string(), |s| s.to_string())
            }
            None => "not running".into(),
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.kill();
        }
    }
}
