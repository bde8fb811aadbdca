//! One router per interface and per control socket. Two `weft router` processes on
//! one config would both forward (every ping answered twice), and the one that
//! exits first would delete the other's control socket (issue 20).
//!
//! Interfaces: a router holds, for each port, an abstract-namespace Unix socket
//! named after it (`@weft-router/port/<interface>`). Binding one is atomic, and the
//! kernel frees it when the process dies however it dies, so there is no stale lock
//! to clean up. Abstract names belong to a network namespace, as interface names do:
//! routers in different namespaces may use the same interface names.
//!
//! Control socket: a path where a router still accepts connections is refused; a
//! path left behind by one that died (nothing accepts) is replaced. The control
//! server removes its path on exit only while the path is still its own socket
//! ([`crate::ctl::ControlServer`]).
//!
//! The error names the interface or path and, when /proc shows it, the process
//! holding it.
#![forbid(unsafe_code)]

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Prefix of the abstract socket names that lock interfaces.
const LOCK_PREFIX: &str = "weft-router/port/";

/// Why this router may not start.
#[derive(Debug)]
pub enum InstanceError {
    /// Another process (a router on this or another config) holds the interface.
    InterfaceInUse {
        /// The interface (or shm port name) of the config.
        interface: String,
        /// The holder's process id, when /proc shows it.
        pid: Option<u32>,
    },
    /// A router answers on the control socket.
    ControlSocketInUse {
        /// The socket's path.
        path: PathBuf,
        /// The listener's process id, when /proc shows it.
        pid: Option<u32>,
    },
    /// The interface lock could not be taken for another reason.
    Lock {
        /// The interface.
        interface: String,
        /// What bind(2) said.
        error: io::Error,
    },
    /// A stale control socket could not be removed.
    StaleSocket {
        /// The socket's path.
        path: PathBuf,
        /// What unlink(2) said.
        error: io::Error,
    },
}

fn by(pid: &Option<u32>) -> String {
    match pid {
        Some(p) => format!(" (pid {p})"),
        None => String::new(),
    }
}

impl std::fmt::Display for InstanceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstanceError::InterfaceInUse { interface, pid } => write!(
                f,
                "interface {interface} is in use by another weft router{}; stop it or \
                 give this router other interfaces",
                by(pid)
            ),
            InstanceError::ControlSocketInUse { path, pid } => write!(
                f,
                "control socket {} is in use by another weft router{}; stop it or \
                 choose another path (--socket or [router] control_socket)",
                path.display(),
                by(pid)
            ),
            InstanceError::Lock { interface, error } => {
                write!(f, "cannot lock interface {interface}: {error}")
            }
            InstanceError::StaleSocket { path, error } => write!(
                f,
                "cannot remove the stale control socket {}: {error}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for InstanceError {}

/// The interfaces this router holds; dropping it (or the process ending) frees them.
#[derive(Debug)]
pub struct InstanceLock {
    _held: Vec<UnixListener>,
}

/// Take every interface in `interfaces` for this process, or none: the first one
/// another process holds is the error.
pub fn claim_interfaces<'a>(
    interfaces: impl IntoIterator<Item = &'a str>,
) -> Result<InstanceLock, InstanceError> {
    let mut held = Vec::new();
    for interface in interfaces {
        let name = format!("{LOCK_PREFIX}{interface}");
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).map_err(|error| {
            InstanceError::Lock {
                interface: interface.to_string(),
                error,
            }
        })?;
        match UnixListener::bind_addr(&addr) {
            Ok(l) => held.push(l),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                return Err(InstanceError::InterfaceInUse {
                    interface: interface.to_string(),
                    pid: holder_of(&format!("@{name}")),
                })
            }
            Err(error) => {
                return Err(InstanceError::Lock {
                    interface: interface.to_string(),
                    error,
                })
            }
        }
    }
    Ok(InstanceLock { _held: held })
}

/// Make `path` free for a new control socket: an error when a process accepts
/// connections there; a socket file nobody listens on (left by a router that died)
/// is removed.
pub fn free_control_socket(path: &Path) -> Result<(), InstanceError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(InstanceError::ControlSocketInUse {
            path: path.to_path_buf(),
            pid: holder_of(&path.to_string_lossy()),
        }),
        // ECONNREFUSED: a socket file without a listener, the mark of a process
        // that died without cleaning up. Anything else (not a socket, no access)
        // is left for bind to report.
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path)
            .map_err(|error| InstanceError::StaleSocket {
                path: path.to_path_buf(),
                error,
            }),
        Err(_) => Ok(()),
    }
}

/// The process holding the listening Unix socket bound to `name` (a path, or `@`
/// and an abstract name, as /proc/net/unix shows them): its inode from
/// /proc/net/unix, then the process with a descriptor on it. Best effort: None when
/// /proc does not say (another namespace, no permission).
fn holder_of(name: &str) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    // Num RefCount Protocol Flags Type St Inode Path; a listener is state 01.
    let inode = table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 8 && f[7] == name && f[5] == "01").then(|| f[6].to_string())
    })?;
    let want = format!("socket:[{inode}]");
    for p in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == want.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unique(what: &str) -> String {
        format!("test-{}-{what}", std::process::id())
    }

    #[test]
    fn an_interface_is_held_once_and_freed_on_drop() {
        let (a, b) = (unique("a"), unique("b"));
        let lock = claim_interfaces([a.as_str(), b.as_str()]).expect("first claim");
        match claim_interfaces([unique("c").as_str(), b.as_str()]) {
            Err(InstanceError::InterfaceInUse { interface, pid }) => {
                assert_eq!(interface, b);
                assert_eq!(pid, Some(std::process::id()), "the holder is found");
            }
            other => panic!("second claim of {b}: {other:?}"),
        }
        let e = claim_interfaces([b.as_str()]).expect_err("held");
        let text = e.to_string();
        assert!(
            text.contains(&format!("interface {b} is in use"))
                && text.contains(&format!("(pid {})", std::process::id())),
            "{text}"
        );
        drop(lock);
        let again = claim_interfaces([a.as_str(), b.as_str()]).expect("freed on drop");
        drop(again);
    }

    #[test]
    fn a_live_control_socket_is_refused_and_a_stale_one_replaced() {
        let dir = std::env::temp_dir().join(unique("ctl"));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("ctl.sock");
        free_control_socket(&path).expect("nothing there");
        let listener = UnixListener::bind(&path).expect("bind");
        match free_control_socket(&path) {
            Err(InstanceError::ControlSocketInUse { path: p, pid }) => {
                assert_eq!(p, path);
                assert_eq!(pid, Some(std::process::id()));
            }
            other => panic!("live socket: {other:?}"),
        }
        assert!(path.exists(), "a live socket is never removed");
        // The listener goes away without unlinking, as when a process dies.
        drop(listener);
        free_control_socket(&path).expect("stale socket replaced");
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
