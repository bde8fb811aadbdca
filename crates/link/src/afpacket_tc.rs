//! An `AF_PACKET` port with weft's forwarding fast path at tc ingress: the program of
//! [`crate::xdp_fwd`], built for the tc hook ([`FastPath::load_tc`]) and attached with
//! a BPF link (tcx, `BPF_TCX_INGRESS`), forwards plain transit packets with
//! `bpf_redirect`; everything else goes on through the stack to this link's packet
//! sockets, one per protocol weft's pipeline handles (IPv4, IPv6, ARP).
//!
//! Why tc and not generic XDP (docs/results/router.md §3.3h, §3.3j): generic XDP
//! wants 256 bytes of headroom and copies every skb that has less (the generator's
//! and most senders' skbs) into a new head, a quarter of the router core at 1518 B;
//! tc runs on the skb as it is.
//!
//! Exactly once to the pipeline: in `__netif_receive_skb_core` a packet tap (a socket
//! bound to `ETH_P_ALL`) sees every frame *before* tc, a protocol handler only what tc
//! let through. So the sockets here are bound to `ETH_P_IP`, `ETH_P_IPV6` and
//! `ETH_P_ARP` ([`AfPacket::with_protocol`]): a forwarded frame never reaches them,
//! a slow-path frame (`TC_ACT_OK`) reaches exactly the one of its protocol. Frames
//! of other EtherTypes never reach weft (the pipeline drops them anyway); frames the
//! stack marks for another host (another MAC, or a VLAN tag it took out and
//! cleared) are dropped by the sockets and counted as `rx_dropped`. Transmit goes
//! through the IPv4 socket's ring, whatever the frame's protocol.

use crate::afpacket::{AfPacket, RingConfig, RingVersion};
use crate::sys;
use crate::xdp_fwd::{FastPath, FastPathUnavailable};
use crate::{Armed, BufferPool, Link, LinkInfo, LinkStats, PacketBuf};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_ARP: u16 = 0x0806;

/// The receive ring of the IPv6 and ARP sockets: V2 slots (never a V3 block timer),
/// and a transmit ring of one slot (they never send).
fn side_rings(cfg: RingConfig, rx_frames: u32) -> RingConfig {
    RingConfig {
        version: RingVersion::V2,
        rx_frames,
        tx_frame_size: 4096,
        tx_frames: 1,
        ..cfg
    }
}

/// The tc program attached to an interface's ingress. Dropping it closes the link,
/// which detaches the program.
#[derive(Debug)]
struct TcAttach {
    _link: OwnedFd,
    _prog: OwnedFd,
}

/// An `AF_PACKET` link whose interface runs the fast path at tc ingress (see the
/// module head).
#[derive(Debug)]
pub struct AfPacketTc {
    // Declared first so it drops first: the program is detached before the sockets
    // close.
    _tc: TcAttach,
    /// IPv4 (and every transmit), IPv6, ARP.
    socks: [AfPacket; 3],
    /// The socket the next receive starts at (round robin).
    next_rx: usize,
}

impl AfPacketTc {
    /// Open `interface` with `cfg` for the IPv4 socket (its rings, its transmit
    /// ring for every frame sent), IPv6 and ARP sockets of their own, and attach
    /// `fast`'s tc program to the interface's ingress. An error of the program's
    /// load or attachment is a [`FastPathUnavailable`] (a kernel before 6.6 has no
    /// tcx); any other is the port's.
    pub fn open(
        interface: &str,
        pool: BufferPool,
        cfg: RingConfig,
        fast: &FastPath,
    ) -> io::Result<AfPacketTc> {
        let ifindex = sys::if_nametoindex(interface)?;
        // Opened before the program is attached, so no slow-path frame is missed.
        let v4 = AfPacket::with_protocol(interface, pool.clone(), cfg, ETH_P_IP)?;
        let v6 = AfPacket::with_protocol(
            interface,
            pool.clone(),
            side_rings(cfg, cfg.rx_frames.max(64)),
            ETH_P_IPV6,
        )?;
        let arp = AfPacket::with_protocol(interface, pool, side_rings(cfg, 128), ETH_P_ARP)?;
        let mac = v4.info().mac;
        let prog = fast.load_tc(mac).map_err(|e| {
            FastPathUnavailable::wrap(io::Error::new(e.kind(), format!("{interface}: {e}")))
        })?;
        let link = sys::bpf::link_create(prog.as_fd(), ifindex, sys::bpf::BPF_TCX_INGRESS, 0)
            .map_err(|e| {
                FastPathUnavailable::wrap(io::Error::new(
                    e.kind(),
                    format!("{interface}: bpf(BPF_LINK_CREATE, TCX_INGRESS): {e}"),
                ))
            })?;
        Ok(AfPacketTc {
            _tc: TcAttach {
                _link: link,
                _prog: prog,
            },
            socks: [v4, v6, arp],
            next_rx: 0,
        })
    }

    fn any_ready(&self) -> bool {
        self.socks.iter().any(AfPacket::rx_ready)
    }

    fn poll_fds(&self, also: Option<BorrowedFd<'_>>, timeout: Duration) -> io::Result<bool> {
        if self.any_ready() {
            return Ok(true);
        }
        let pfd = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        let mut pfds = [pfd(-1); 4];
        for (p, s) in pfds.iter_mut().zip(&self.socks) {
            *p = pfd(s.fd());
        }
        let n = match also {
            Some(a) => {
                pfds[3] = pfd(std::os::fd::AsRawFd::as_raw_fd(&a));
                4
            }
            None => 3,
        };
        Ok(sys::poll(&mut pfds[..n], timeout)? > 0)
    }
}

impl Link for AfPacketTc {
    fn info(&self) -> &LinkInfo {
        self.socks[0].info()
    }

    fn pool(&self) -> &BufferPool {
        self.socks[0].pool()
    }

    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        let mut got = 0;
        let n = self.socks.len();
        for k in 0..n {
            if got >= max {
                break;
            }
            let i = (self.next_rx + k) % n;
            got += self.socks[i].recv_burst(out, max - got)?;
        }
        self.next_rx = (self.next_rx + 1) % n;
        Ok(got)
    }

    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize> {
        self.socks[0].send_burst(frames)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        self.poll_fds(None, timeout)
    }

    fn wait_also(&mut self, doorbell: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
        self.poll_fds(Some(doorbell), timeout)
    }

    fn arm_wait(&mut self, fds: &mut Vec<RawFd>) -> io::Result<Armed> {
        if self.any_ready() {
            return Ok(Armed::Ready);
        }
        fds.extend(self.socks.iter().map(AfPacket::fd));
        Ok(Armed::Fds)
    }

    fn stats(&self) -> LinkStats {
        let mut s = LinkStats::default();
        for k in &self.socks {
            let t = k.stats();
            s.rx_frames += t.rx_frames;
            s.tx_frames += t.tx_frames;
            s.rx_dropped += t.rx_dropped;
            s.tx_ring_full += t.tx_ring_full;
            s.tx_dropped += t.tx_dropped;
            s.rx_csum_completed += t.rx_csum_completed;
            s.rx_gso_segmented += t.rx_gso_segmented;
            s.rx_ring_wait_ns += t.rx_ring_wait_ns;
            s.rx_ring_timed += t.rx_ring_timed;
        }
        s
    }

    fn refresh_stats(&mut self) {
        for k in &mut self.socks {
            k.refresh_stats();
        }
    }
}
