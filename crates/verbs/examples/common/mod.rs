//! Command-line handling shared by the verbs examples: `--help`, `--link`, addresses
//! and numbers checked, errors printed in words (not as Rust debug forms).

#![allow(dead_code)] // each example uses its part

use std::fmt::Display;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::str::FromStr;
use weft_verbs::LinkKind;

/// An example's name and its one line of usage.
pub struct Cli {
    pub name: &'static str,
    pub usage: &'static str,
    args: std::vec::IntoIter<String>,
}

impl Cli {
    /// The process arguments; `--help` prints the usage and exits 0.
    pub fn new(name: &'static str, usage: &'static str) -> Cli {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.iter().any(|a| a == "--help" || a == "-h") {
            println!("usage: {name} {usage}");
            std::process::exit(0);
        }
        Cli {
            name,
            usage,
            args: args.into_iter(),
        }
    }

    /// Print what is wrong and the usage; exit 2 (a usage error).
    pub fn fail(&self, what: impl Display) -> ! {
        eprintln!("{}: {what}", self.name);
        eprintln!("usage: {} {}", self.name, self.usage);
        std::process::exit(2);
    }

    /// The next argument.
    pub fn next_arg(&mut self) -> Option<String> {
        self.args.next()
    }

    /// The value after `flag`, parsed.
    pub fn value<T: FromStr>(&mut self, flag: &str) -> T {
        match self.args.next() {
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| self.fail(format!("{flag}: bad value {v:?}"))),
            None => self.fail(format!("{flag} needs a value")),
        }
    }

    /// The value after `--link`: `udp` or `shm`.
    pub fn link(&mut self) -> LinkKind {
        match self.args.next() {
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| self.fail(format!("--link: unknown link {v:?} (udp or shm)"))),
            None => self.fail("--link needs a value (udp or shm)"),
        }
    }

    /// A connection manager address, `IP:PORT`.
    pub fn addr(&self, v: &str) -> SocketAddr {
        if v.starts_with('-') {
            self.fail(format!("unknown option {v:?}"));
        }
        v.parse()
            .unwrap_or_else(|_| self.fail(format!("bad address {v:?}: expected IP:PORT")))
    }

    /// Run the example's body; an error is printed in words with the example's name,
    /// and the exit code is 1.
    pub fn run<E: Display>(&self, body: impl FnOnce() -> Result<(), E>) -> ExitCode {
        match body() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{}: {e}", self.name);
                ExitCode::FAILURE
            }
        }
    }
}
