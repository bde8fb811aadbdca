//! The udp datagram link: RoCEv2 over a kernel UDP socket, with `recvmmsg` and
//! `sendmmsg` moving a burst per system call and receive buffers filled in place (the
//! kernel copies straight into pooled buffers).
//!
//! **Why DF is set.** The ICRC of a RoCEv2 packet covers the IP header with only TTL,
//! TOS and checksum masked, so it covers the IPv4 identification field. On this link
//! the kernel writes the IP header, and the transport computes the ICRC from the
//! [`IcrcPath`](weft_wire::roce::IcrcPath) alone, assuming identification 0 and DF (see
//! [`weft_wire::roce::IcrcPath`]). Linux writes exactly that for a datagram sent from
//! an *unconnected* socket with `IP_MTU_DISCOVER = IP_PMTUDISC_DO`: DF set, and
//! `ip_select_ident` leaves the identification 0 when DF is set and the socket has no
//! destination. So every socket here is unconnected and has `IP_PMTUDISC_DO`; a
//! datagram larger than the path MTU then fails with `EMSGSIZE` (counted as a drop)
//! instead of being fragmented, which RoCEv2 forbids anyway. For IPv6 there is no
//! identification in the header, but `IPV6_PMTUDISC_DO` likewise keeps the kernel from
//! fragmenting (a fragment header would change what the peer receives).
//!
//! **Why a specific bind address.** The ICRC also covers the destination IP. A socket
//! bound to `0.0.0.0` cannot tell which of the host's addresses a datagram was sent
//! to without `IP_PKTINFO` ancillary data on every receive, and would let the kernel
//! pick the source address of every send. weft binds one specific address per link
//! and refuses an unspecified one ([`UdpLink::bind`] returns `InvalidInput`): the
//! receive path's `dst` is always the bound address and the send path's `src` is too.

use crate::datagram::{path_between, path_ends, pool_buf_size, DEFAULT_MAX_DATAGRAM};
use crate::sys;
use crate::{BufferPool, Datagram, DatagramLink, LinkStats, PacketBuf};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// Messages per `recvmmsg`/`sendmmsg` call.
pub const BURST: usize = 64;

/// How a [`UdpLink`] is set up.
#[derive(Debug, Clone)]
pub struct UdpOptions {
    /// Pool for receive buffers; `None` makes one of `pool_buffers` buffers sized for
    /// `max_datagram`.
    pub pool: Option<BufferPool>,
    /// Buffers in the pool the link makes when `pool` is `None`.
    pub pool_buffers: usize,
    /// Largest datagram sent or received; longer ones are dropped and counted.
    pub max_datagram: usize,
    /// Requested socket receive and send buffer, bytes (`SO_RCVBUFFORCE` when the
    /// process may, otherwise `SO_RCVBUF`, which `net.core.rmem_max` caps).
    pub socket_buffer: usize,
}

impl Default for UdpOptions {
    fn default() -> Self {
        UdpOptions {
            pool: None,
            pool_buffers: 2048,
            max_datagram: DEFAULT_MAX_DATAGRAM,
            socket_buffer: 8 << 20,
        }
    }
}

/// A RoCEv2 datagram link over one non-blocking UDP socket bound to a specific address.
pub struct UdpLink {
    fd: OwnedFd,
    local: SocketAddr,
    pool: BufferPool,
    max_datagram: usize,
    stats: LinkStats,
    /// Datagrams this link dropped itself (truncated, unknown source family).
    own_rx_drops: u64,
    /// The socket's `SO_RXQ_OVFL` counter as last seen.
    kernel_drops: u32,
    /// Receive buffers taken from the pool under one lock, kept between bursts.
    spare: Vec<PacketBuf>,
    /// The system calls' header arrays.
    mmsg: sys::Mmsg,
}

impl std::fmt::Debug for UdpLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpLink")
            .field("local", &self.local)
            .field("max_datagram", &self.max_datagram)
            .field("stats", &self.stats)
            .finish()
    }
}

impl UdpLink {
    /// Bind a UDP socket to `addr` (IPv4 or IPv6; a specific address, not
    /// `0.0.0.0`/`::`; port 0 picks a free port, RoCEv2's is
    /// [`weft_wire::roce::UDP_PORT`]). The socket is non-blocking, never connected,
    /// and has DF set (`IP_PMTUDISC_DO`): see the module doc for why.
    pub fn bind(addr: SocketAddr, opts: UdpOptions) -> io::Result<UdpLink> {
        if addr.ip().is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "udp link: bind a specific address, not {addr}: the ICRC covers the \
                     destination IP, which an unspecified bind cannot know"
                ),
            ));
        }
        let pool = match opts.pool {
            Some(p) => p,
            None => BufferPool::new(opts.pool_buffers, pool_buf_size(opts.max_datagram)),
        };
        let family = if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let fd = sys::socket(
            family,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::IPPROTO_UDP,
            "udp link: socket",
        )?;
        let s = fd.as_raw_fd();
        if addr.is_ipv4() {
            sys::set_int(
                s,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DO,
                "IP_MTU_DISCOVER",
            )?;
        } else {
            sys::set_int(s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1, "IPV6_V6ONLY")?;
            sys::set_int(
                s,
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IPV6_PMTUDISC_DO,
                "IPV6_MTU_DISCOVER",
            )?;
        }
        let want = i32::try_from(opts.socket_buffer).unwrap_or(i32::MAX);
        for (force, plain, what) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        ] {
            // FORCE needs CAP_NET_ADMIN; the plain option is capped by
            // net.core.{r,w}mem_max. Either way the link works, with smaller bursts.
            if sys::set_int(s, libc::SOL_SOCKET, force, want, what).is_err() {
                let _ = sys::set_int(s, libc::SOL_SOCKET, plain, want, what);
            }
        }
        // Kernel receive-queue drops arrive with each datagram (best effort).
        let _ = sys::set_int(s, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1, "SO_RXQ_OVFL");
        sys::bind_socket_addr(s, &addr, &format!("udp link: bind {addr}"))?;
        let local = sys::local_addr(s)?;
        Ok(UdpLink {
            fd,
            local,
            pool,
            max_datagram: opts.max_datagram,
            stats: LinkStats::default(),
            own_rx_drops: 0,
            kernel_drops: 0,
            spare: Vec::with_capacity(BURST),
            mmsg: sys::Mmsg::new(BURST),
        })
    }

    /// The socket (for reading options back in tests and diagnostics).
    pub fn socket(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn send_batch(&mut self, batch: &[Datagram]) -> Result<usize, i32> {
        let msgs = batch.iter().map(|d| (&d.buf[..], path_ends(&d.path).1));
        self.mmsg.send(self.fd.as_raw_fd(), msgs)
    }

    /// True when this link can send `d`: it fits, and its path starts here.
    fn sendable(&self, d: &Datagram) -> bool {
        let (src, dst) = path_ends(&d.path);
        d.buf.len() <= self.max_datagram
            && src == self.local
            && dst.is_ipv4() == self.local.is_ipv4()
    }
}

impl DatagramLink for UdpLink {
    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    fn pool(&self) -> &BufferPool {
        &self.pool
    }

    fn recv_burst(&mut self, out: &mut Vec<Datagram>, max: usize) -> io::Result<usize> {
        let want = max.min(BURST);
        if want == 0 {
            return Ok(0);
        }
        if self.spare.len() < want {
            let need = want - self.spare.len();
            self.pool.alloc_burst(need, &mut self.spare);
        }
        // With no free buffer the datagrams wait in the socket (and overflow into its
        // drop counter), rather than being read and thrown away here.
        let n = want.min(self.spare.len());
        if n == 0 {
            return Ok(0);
        }
        let max = self.max_datagram;
        let bufs = self.spare[..n].iter_mut().map(|b| {
            b.reset();
            let room = b.spare_mut();
            let len = room.len().min(max);
            &mut room[..len]
        });
        let got = match self.mmsg.recv(self.fd.as_raw_fd(), bufs) {
            Ok(got) => got,
            // Nothing waiting, or a pending ICMP error reported on this call.
            Err(
                libc::EAGAIN
                | libc::EINTR
                | libc::ECONNREFUSED
                | libc::EHOSTUNREACH
                | libc::ENETUNREACH,
            ) => return Ok(0),
            Err(e) => return Err(sys::errno_err(e, "udp link: recvmmsg")),
        };
        let mut delivered = 0;
        for (i, mut b) in self.spare.drain(..got).enumerate() {
            let r = self.mmsg.received(i);
            // SO_RXQ_OVFL: the latest counter rides on any datagram after a drop.
            if let Some(d) = r.rxq_ovfl {
                self.kernel_drops = d;
            }
            let path = r.from.and_then(|p| path_between(p, self.local));
            match path {
                Some(path) if !r.truncated && b.set_len(r.len) => {
                    out.push(Datagram { buf: b, path });
                    delivered += 1;
                }
                _ => self.own_rx_drops += 1,
            }
        }
        self.stats.rx_frames += delivered as u64;
        self.stats.rx_dropped = self.own_rx_drops + u64::from(self.kernel_drops);
        Ok(delivered)
    }

    fn send_burst(&mut self, dgrams: &mut Vec<Datagram>) -> io::Result<usize> {
        let mut i = 0;
        while i < dgrams.len() {
            if !self.sendable(&dgrams[i]) {
                self.stats.tx_dropped += 1;
                i += 1;
                continue;
            }
            let end = (i..dgrams.len().min(i + BURST))
                .find(|&j| !self.sendable(&dgrams[j]))
                .unwrap_or(dgrams.len().min(i + BURST));
            match self.send_batch(&dgrams[i..end]) {
                Ok(k) => {
                    self.stats.tx_frames += k as u64;
                    i += k;
                    if k == 0 {
                        break;
                    }
                }
                Err(libc::EAGAIN | libc::ENOBUFS) => {
                    self.stats.tx_ring_full += 1;
                    break;
                }
                Err(libc::EINTR) => {}
                Err(_) => {
                    // EMSGSIZE (larger than the path MTU with DF), unreachable
                    // network, a pending ICMP error: this datagram is lost.
                    self.stats.tx_dropped += 1;
                    i += 1;
                }
            }
        }
        dgrams.drain(..i);
        Ok(i)
    }

    fn wait(&mut self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> io::Result<bool> {
        let mask = match extra {
            Some(e) => crate::wake::poll_readable(&[self.fd.as_fd(), e], timeout)?,
            None => crate::wake::poll_readable(&[self.fd.as_fd()], timeout)?,
        };
        Ok(mask != 0)
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wake::EventFd;
    use std::time::Instant;

    fn pair(a: &str, b: &str) -> (UdpLink, UdpLink) {
        let o = UdpOptions {
            pool_buffers: 256,
            ..UdpOptions::default()
        };
        (
            UdpLink::bind(a.parse().unwrap(), o.clone()).unwrap(),
            UdpLink::bind(b.parse().unwrap(), o).unwrap(),
        )
    }

    fn dgram(from: &UdpLink, to: SocketAddr, bytes: &[u8]) -> Datagram {
        let mut buf = from.pool().alloc().unwrap();
        assert!(buf.copy_from(bytes));
        Datagram {
            buf,
            path: path_between(from.local_addr(), to).unwrap(),
        }
    }

    fn recv_n(l: &mut UdpLink, n: usize) -> Vec<Datagram> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut v = Vec::new();
        while v.len() < n && Instant::now() < deadline {
            if l.recv_burst(&mut v, 64).unwrap() == 0 {
                l.wait(Duration::from_millis(10), None).unwrap();
            }
        }
        v
    }

    #[test]
    fn an_unspecified_bind_address_is_refused() {
        for a in ["0.0.0.0:0", "[::]:0"] {
            let e = UdpLink::bind(a.parse().unwrap(), UdpOptions::default()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn df_is_set_on_both_families() {
        let (a, _) = pair("127.0.0.1:0", "127.0.0.1:0");
        let v = sys::get_int(
            a.socket().as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            "get",
        )
        .unwrap();
        assert_eq!(v, libc::IP_PMTUDISC_DO);
        let b = UdpLink::bind("[::1]:0".parse().unwrap(), UdpOptions::default()).unwrap();
        let v = sys::get_int(
            b.socket().as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            "get",
        )
        .unwrap();
        assert_eq!(v, libc::IPV6_PMTUDISC_DO);
    }

    #[test]
    fn a_burst_crosses_loopback_with_its_path_v4_and_v6() {
        for (x, y) in [("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:0", "[::1]:0")] {
            let (mut a, mut b) = pair(x, y);
            let mut tx: Vec<_> = (0..100u8)
                .map(|i| dgram(&a, b.local_addr(), &[i; 300]))
                .collect();
            let mut sent = 0;
            let deadline = Instant::now() + Duration::from_secs(5);
            while !tx.is_empty() && Instant::now() < deadline {
                sent += a.send_burst(&mut tx).unwrap();
            }
            assert_eq!(sent, 100);
            assert_eq!(a.stats().tx_frames, 100);
            let got = recv_n(&mut b, 100);
            assert_eq!(got.len(), 100);
            for (i, d) in got.iter().enumerate() {
                assert_eq!(&d.buf[..], &[i as u8; 300][..]);
                assert_eq!(path_ends(&d.path), (a.local_addr(), b.local_addr()));
            }
            assert_eq!(b.stats().rx_frames, 100);
        }
    }

    #[test]
    fn bad_datagrams_are_dropped_and_counted_not_sent() {
        let (mut a, mut b) = pair("127.0.0.1:0", "127.0.0.1:0");
        let mut big = a.pool().alloc().unwrap();
        assert!(big.set_len(a.max_datagram() + 1));
        let wrong_src = Datagram {
            buf: a.pool().alloc().unwrap(),
            path: path_between("127.0.0.9:1".parse().unwrap(), b.local_addr()).unwrap(),
        };
        let mut tx = vec![
            Datagram {
                buf: big,
                path: path_between(a.local_addr(), b.local_addr()).unwrap(),
            },
            wrong_src,
            dgram(&a, b.local_addr(), b"ok"),
        ];
        assert_eq!(a.send_burst(&mut tx).unwrap(), 3);
        assert_eq!(a.stats().tx_dropped, 2);
        assert_eq!(a.stats().tx_frames, 1);
        let got = recv_n(&mut b, 1);
        assert_eq!(&got[0].buf[..], b"ok");
    }

    #[test]
    fn datagrams_the_kernel_dropped_show_up_in_rx_dropped() {
        let (mut a, _) = pair("127.0.0.1:0", "127.0.0.1:0");
        let mut b = UdpLink::bind(
            "127.0.0.1:0".parse().unwrap(),
            UdpOptions {
                socket_buffer: 1, // the kernel's minimum: a few datagrams fit
                pool_buffers: 64,
                ..UdpOptions::default()
            },
        )
        .unwrap();
        let mut sent = 0;
        for _ in 0..10 {
            let mut v: Vec<_> = (0..32)
                .map(|_| dgram(&a, b.local_addr(), &[1; 1000]))
                .collect();
            sent += a.send_burst(&mut v).unwrap() as u64;
        }
        assert_eq!(sent, 320);
        let mut got = recv_n(&mut b, 1);
        while b.recv_burst(&mut got, 64).unwrap() > 0 {}
        // The drop counter rides on the next datagram queued after the drops.
        let mut v = vec![dgram(&a, b.local_addr(), b"last")];
        a.send_burst(&mut v).unwrap();
        let n = got.len();
        got.extend(recv_n(&mut b, 1));
        assert_eq!(got.len(), n + 1);
        let s = b.stats();
        assert!(s.rx_dropped > 0, "{s:?}");
        assert_eq!(s.rx_frames + s.rx_dropped, 321, "{s:?}");
    }

    #[test]
    fn wait_wakes_on_a_datagram_or_the_extra_fd_and_times_out_otherwise() {
        let (mut a, mut b) = pair("127.0.0.1:0", "127.0.0.1:0");
        let t = Instant::now();
        assert!(!b.wait(Duration::from_millis(20), None).unwrap());
        assert!(t.elapsed() >= Duration::from_millis(15));
        let e = EventFd::new().unwrap();
        e.notify();
        assert!(b.wait(Duration::from_secs(5), Some(e.as_fd())).unwrap());
        e.drain();
        let mut tx = vec![dgram(&a, b.local_addr(), b"x")];
        a.send_burst(&mut tx).unwrap();
        assert!(b.wait(Duration::from_secs(5), Some(e.as_fd())).unwrap());
    }
}
