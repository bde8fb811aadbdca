//! Opening the link a device runs on, and choosing its address when the caller left
//! that to the device (see [`DeviceConfig::addr`]).

use crate::context::{DeviceConfig, LinkKind};
use crate::Error;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use weft_link::shm::{ShmLink, ShmOptions};
use weft_link::udp::{UdpLink, UdpOptions};
use weft_link::DatagramLink;
use weft_wire::roce::UDP_PORT;

/// Addresses tried before giving up (each one taken by another device).
const TRIES: u32 = 64;

/// Candidates this process has drawn so far: with the process id it numbers the next
/// one, so devices of one process differ from each other as well as from those of
/// other processes.
static OPENED: AtomicU32 = AtomicU32::new(0);

/// Loopback addresses other than 127.0.0.0/24 (where 127.0.0.1 and explicit test
/// addresses live): second octet 1..=254, third 0..=255, fourth 1..=254 (no .0, no
/// .255, so nothing looks like a network or broadcast address).
const AUTO_SPACE: u32 = 254 * 256 * 254;

/// The `n`th loopback address of this process: 64 per process id before two processes
/// can meet (pids up to about 258 000), and a clash is only a retry.
fn auto_ip(pid: u32, n: u32) -> Ipv4Addr {
    let mut v = (pid.wrapping_mul(64).wrapping_add(n)) % AUTO_SPACE;
    let d = (v % 254 + 1) as u8;
    v /= 254;
    let c = (v % 256) as u8;
    v /= 256;
    let b = (v + 1) as u8;
    Ipv4Addr::new(127, b, c, d)
}

/// A port for the `n`th shm name with port 0 of this process: 1024..=65535, spread by
/// process id.
fn auto_port(pid: u32, n: u32) -> u16 {
    let span = 65_536 - 1024;
    (1024 + (pid.wrapping_mul(64).wrapping_add(n)) % span) as u16
}

/// The addresses to try for a device whose address is chosen here: [`TRIES`] fresh
/// loopback addresses on port 4791, or (an shm name with port 0) fresh ports on the
/// given address.
fn candidates(cfg: &DeviceConfig) -> impl Iterator<Item = SocketAddr> {
    let pid = std::process::id();
    let given = cfg.addr;
    (0..TRIES).map(move |_| {
        let n = OPENED.fetch_add(1, Ordering::Relaxed);
        match given {
            Some(a) => SocketAddr::new(a.ip(), auto_port(pid, n)),
            None => SocketAddr::new(IpAddr::V4(auto_ip(pid, n)), UDP_PORT),
        }
    })
}

fn bind(cfg: &DeviceConfig, addr: SocketAddr) -> io::Result<Box<dyn DatagramLink>> {
    Ok(match cfg.link {
        LinkKind::Udp => {
            let opts = UdpOptions {
                roce_offload: cfg.segmentation_offload,
                ..UdpOptions::default()
            };
            Box::new(UdpLink::bind(addr, opts)?)
        }
        LinkKind::Shm => {
            let opts = ShmOptions {
                icrc: cfg.icrc,
                cross_memory_attach: cfg.one_copy,
                ..ShmOptions::default()
            };
            Box::new(ShmLink::bind(addr, opts)?)
        }
    })
}

/// Open `cfg`'s link: at its address, or at the first free one of its candidates.
pub(crate) fn open(cfg: &DeviceConfig) -> Result<Box<dyn DatagramLink>, Error> {
    let bind_error = |addr, source| Error::Bind {
        link: cfg.link,
        addr,
        source,
    };
    let Some(given) = cfg
        .addr
        .filter(|a| !(a.port() == 0 && cfg.link == LinkKind::Shm))
    else {
        // Chosen here: the next candidate while one is taken by another device.
        let mut last = None;
        for addr in candidates(cfg) {
            match bind(cfg, addr) {
                Ok(l) => return Ok(l),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(addr),
                Err(source) => return Err(bind_error(addr, source)),
            }
        }
        return Err(Error::NoFreeAddress {
            link: cfg.link,
            tried: TRIES,
            last: last.unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), UDP_PORT)),
        });
    };
    bind(cfg, given).map_err(|source| bind_error(given, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn chosen_addresses_are_loopback_distinct_and_never_network_or_broadcast() {
        let mut seen = HashSet::new();
        for pid in [1, 2, 4_194_304, u32::MAX] {
            for n in 0..64 {
                let ip = auto_ip(pid, n);
                assert!(ip.is_loopback(), "{ip}");
                let o = ip.octets();
                assert!(o[1] >= 1 && o[1] <= 254 && o[3] >= 1 && o[3] <= 254, "{ip}");
                if pid < 1000 {
                    assert!(seen.insert(ip), "{ip} repeated");
                }
            }
        }
        for n in 0..1000 {
            assert!(auto_port(12345, n) >= 1024);
        }
    }
}
