//! A packet capture for a test: dumpcap on an interface inside a network namespace,
//! writing pcapng, stopped so that every packet it saw is in the file.
//!
//! Stopping dumpcap is the subtle part. It reads the kernel's `TPACKET_V3` ring a block
//! at a time, and a block reaches user space only when it fills or its timer retires
//! it; a block still in the ring when dumpcap stops is lost, and the file's statistics
//! block then counts none of its packets. A short exchange (100 UD round trips of 1 KB,
//! 30 ms) fits in one block, and a SIGINT soon after it, on a loaded machine, gave a
//! file with no packets at all (CI, `rxe_interop`'s pp-ud4, twice in a row). So
//! [`Capture::stop`] first waits for the file to hold packets and stop growing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the file must stay the same size before dumpcap is taken to have written
/// everything it holds: well above the kernel's block timer (8 ms by default, dumpcap's
/// own read timeout 250 ms) plus the writer's buffering.
const SETTLED: Duration = Duration::from_millis(700);

/// dumpcap running in a namespace; killed on drop if not stopped.
#[derive(Debug)]
pub struct Capture {
    child: Option<Child>,
    path: PathBuf,
    /// The file's size once dumpcap had started (its header and interface blocks).
    header_len: u64,
}

impl Capture {
    /// Starts dumpcap on `iface` in network namespace `ns` with capture filter
    /// `filter`, writing `path` (removed first), and waits for it to have written its
    /// header (at most 5 s; a capture whose file never appears fails at
    /// [`Capture::stop`] with no packets).
    pub fn start(ns: &str, iface: &str, filter: &str, path: &Path) -> Capture {
        let _ = std::fs::remove_file(path);
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "dumpcap", "-q", "-i", iface])
            .args(["-f", filter, "-w"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting dumpcap");
        let deadline = Instant::now() + Duration::from_secs(5);
        let header_len = loop {
            let len = file_len(path);
            if len > 0 || Instant::now() > deadline {
                break len;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The file's header is written before the capture socket is bound; give it a
        // moment (the guests these tests boot take seconds before they send).
        std::thread::sleep(Duration::from_millis(300));
        Capture {
            child: Some(child),
            path: path.to_path_buf(),
            header_len: header_len.max(file_len(path)),
        }
    }

    /// The file dumpcap writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the capture once the file holds packets and has stopped growing (at most
    /// `limit`; an empty capture waits the whole limit), then ends dumpcap with SIGINT
    /// so it closes the file with its statistics.
    pub fn stop(mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let (mut len, mut since) = (file_len(&self.path), Instant::now());
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            let now = file_len(&self.path);
            if now != len {
                (len, since) = (now, Instant::now());
            } else if len > self.header_len && since.elapsed() >= SETTLED {
                break;
            }
        }
        if let Some(mut c) = self.child.take() {
            crate::process::stop_with(&mut c, "INT", Duration::from_secs(10));
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The enhanced packet blocks (type 6) in a little-endian pcapng file.
    fn packets(bytes: &[u8]) -> usize {
        let (mut at, mut n) = (0, 0);
        while let Some(h) = bytes.get(at..at + 8) {
            let kind = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
            if len < 12 {
                break;
            }
            n += usize::from(kind == 6);
            at += len;
        }
        n
    }

    /// A burst that fits in one of the kernel's ring blocks, with the capture stopped
    /// right after it: every packet is still in the file. A SIGINT sent at once lost
    /// 84 of 200 such packets on loopback, and all of them in CI.
    #[test]
    fn a_capture_stopped_right_after_a_short_burst_keeps_every_packet() {
        for need in [crate::root(), crate::tool("dumpcap"), crate::tool("ip")] {
            if let Err(why) = need {
                crate::skip(why);
                return;
            }
        }
        let ns = format!("wcap-{}", std::process::id());
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        assert!(ip(&["netns", "add", &ns]), "ip netns add {ns}");
        assert!(ip(&["-n", &ns, "link", "set", "lo", "up"]));
        let path = std::env::temp_dir().join(format!("{ns}.pcapng"));
        let cap = Capture::start(&ns, "lo", "udp port 4791", &path);
        let sent = crate::process::output_within(
            Command::new("ip").args([
                "netns",
                "exec",
                &ns,
                "bash",
                "-c",
                "for i in $(seq 200); do printf %1000s x > /dev/udp/127.0.0.1/4791; done",
            ]),
            "200 datagrams",
            Duration::from_secs(30),
        );
        cap.stop(Duration::from_secs(5));
        let bytes = std::fs::read(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        ip(&["netns", "del", &ns]);
        assert!(sent.status.success(), "sending: {sent:?}");
        assert_eq!(packets(&bytes), 200, "packets in the capture");
    }
}
