//! What the udp link puts on the wire: a raw `AF_PACKET` socket on `lo` captures the
//! IPv4 packet the kernel built for a datagram, and the ICRC the sender computed from
//! the path alone (assuming IPv4 identification 0 and DF) must equal the ICRC of the
//! captured headers. It fails if the kernel wrote a non-zero identification.
//! Needs CAP_NET_RAW (root); without it the test fails under CI and is a counted skip
//! elsewhere (weft-testkit).
// A raw AF_PACKET socket on lo (the independent view of the wire) is set up with
// libc calls std does not offer.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};
use weft_link::datagram::path_between;
use weft_link::{Datagram, DatagramLink, UdpLink, UdpOptions};

fn raw_ip_socket_on_lo() -> Option<OwnedFd> {
    const ETH_P_IP: u16 = 0x0800;
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            i32::from(ETH_P_IP.to_be()),
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fresh descriptor, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the name is a NUL-terminated literal.
    let ifindex = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    assert_ne!(ifindex, 0, "lo exists");
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_IP.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: valid sockaddr_ll with its size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "bind AF_PACKET to lo");
    Some(fd)
}

#[test]
fn the_kernel_writes_ipv4_id_0_and_df_so_the_path_icrc_matches_the_wire() {
    let Some(raw) = raw_ip_socket_on_lo() else {
        weft_testkit::skip("AF_PACKET on lo needs CAP_NET_RAW (root)");
        return;
    };
    let mut a = UdpLink::bind("127.0.0.1:0".parse().unwrap(), UdpOptions::default()).unwrap();
    let b = UdpLink::bind("127.0.0.1:0".parse().unwrap(), UdpOptions::default()).unwrap();
    let path = path_between(a.local_addr(), b.local_addr()).unwrap();
    // A BTH-shaped datagram (12-byte BTH, 100 bytes payload, ICRC).
    let mut buf = a.pool().alloc().unwrap();
    let mut bytes = vec![0u8; 12 + 100 + 4];
    bytes[0] = 0x04; // RC SEND only
    bytes[2..4].copy_from_slice(&[0xff, 0xff]);
    for (i, x) in bytes[12..112].iter_mut().enumerate() {
        *x = i as u8;
    }
    path.fill(&mut bytes).unwrap();
    assert!(buf.copy_from(&bytes));
    let (sport, dport) = (a.local_addr().port(), b.local_addr().port());
    let mut tx = vec![Datagram { buf, path }];
    assert_eq!(a.send_burst(&mut tx).unwrap(), 1);
    assert_eq!(a.stats().tx_frames, 1);

    let wire = capture(&raw, sport, dport, 1);
    let p = wire.first().expect("the datagram was seen on lo");
    let ihl = usize::from(p[0] & 0xf) * 4;
    let udp = &p[ihl..ihl + 8];
    assert_eq!(&p[4..6], &[0, 0], "IPv4 identification is 0");
    assert_eq!(p[6] & 0x40, 0x40, "DF is set");
    let ib = &p[ihl + 8..];
    assert_eq!(ib, &bytes[..]);
    let wire = weft_wire::roce::icrc::icrc(&p[..ihl], udp, &ib[..ib.len() - 4]).unwrap();
    assert_eq!(
        wire.to_le_bytes(),
        ib[ib.len() - 4..],
        "ICRC over the captured headers equals the one computed from the path"
    );
}

/// Captured IPv4 packets from `raw` whose UDP ports are `sport` → `dport`, until `n`
/// have arrived or 5 s have passed.
fn capture(raw: &OwnedFd, sport: u16, dport: u16, n: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut pkt = vec![0u8; 70_000];
    while got.len() < n && Instant::now() < deadline {
        // SAFETY: reads at most pkt.len() bytes into `pkt`.
        let r = unsafe {
            libc::recv(
                raw.as_raw_fd(),
                pkt.as_mut_ptr().cast(),
                pkt.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let p = &pkt[..r as usize];
        let ihl = usize::from(p[0] & 0xf) * 4;
        if p.len() >= ihl + 8
            && p[9] == 17
            && p[ihl..ihl + 2] == sport.to_be_bytes()
            && p[ihl + 2..ihl + 4] == dport.to_be_bytes()
        {
            got.push(p.to_vec());
        }
    }
    got
}

/// UDP GSO, confirmed on the wire: in a network namespace of its own whose `lo` has
/// `tx-udp-segmentation` off (so the kernel cuts the send into datagrams before the
/// capture point, as a NIC would), a run of 20 RoCEv2-shaped datagrams sent with
/// `roce_offload` leaves as datagrams with IPv4 identifications 0, 1, …, 19, each with
/// the ICRC its real headers give; the receiver (with `UDP_GRO`) gets all 20 intact
/// and the transport's check finds each one's identification. Both when the run is
/// sent as datagrams and when it is staged in the link's buffer.
#[test]
fn gso_segments_carry_consecutive_ids_and_the_icrc_of_their_real_headers() {
    let ready = weft_testkit::root()
        .and_then(|()| weft_testkit::tool("ethtool"))
        .and_then(|()| weft_testkit::tool("ip"));
    if weft_testkit::require("GSO capture", ready).is_none() {
        return;
    }
    // A thread in a fresh network namespace: the namespace goes with the thread.
    let t = std::thread::spawn(|| {
        // SAFETY: unshare with a constant flag affects only this thread.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        // Children forked from this thread start in its namespace.
        for args in [
            &["ip", "link", "set", "lo", "up"][..],
            &["ethtool", "-K", "lo", "tx-udp-segmentation", "off"][..],
        ] {
            let out = weft_testkit::process::run_bounded(
                std::path::Path::new(args[0]),
                &args[1..],
                Duration::from_secs(10),
            );
            assert!(out.status.success(), "{args:?}: {out:?}");
        }
        let raw = raw_ip_socket_on_lo().expect("AF_PACKET as root");
        // As datagrams (`send_burst`), then staged in the link's own buffer
        // (`tx_room`/`tx_commit`/`tx_flush`: the run leaves from one source buffer).
        for staged in [false, true] {
            send_run_and_check(&raw, staged);
        }
    });
    t.join().expect("namespace thread");
}

fn send_run_and_check(raw: &OwnedFd, staged: bool) {
    let opts = UdpOptions {
        roce_offload: true,
        ..UdpOptions::default()
    };
    let mut a = UdpLink::bind("127.0.0.1:0".parse().unwrap(), opts.clone()).unwrap();
    let mut b = UdpLink::bind("127.0.0.1:0".parse().unwrap(), opts).unwrap();
    assert_eq!(a.offload(), (true, true), "GSO and GRO on");
    let path = path_between(a.local_addr(), b.local_addr()).unwrap();
    let mut sent = Vec::new();
    let mut tx = Vec::new();
    for i in 0..20u8 {
        let len = if i == 19 { 12 + 600 + 4 } else { 12 + 1000 + 4 };
        let mut bytes = vec![i; len];
        bytes[0] = 0x04;
        path.fill(&mut bytes).unwrap();
        if staged {
            a.tx_room().unwrap()[..len].copy_from_slice(&bytes);
            assert_eq!(a.tx_commit(len, path), usize::from(i) + 1);
        } else {
            let mut buf = a.pool().alloc().unwrap();
            assert!(buf.copy_from(&bytes));
            tx.push(Datagram { buf, path });
        }
        sent.push(bytes);
    }
    if staged {
        assert!(a.stages_tx());
        assert_eq!(a.tx_flush(), 0, "all sent");
        assert_eq!(a.tx_staged(), 0);
    } else {
        assert_eq!(a.send_burst(&mut tx).unwrap(), 20);
    }
    let wire = capture(raw, a.local_addr().port(), b.local_addr().port(), 20);
    assert_eq!(
        wire.len(),
        20,
        "twenty datagrams on the wire, not one super-packet"
    );
    for (k, p) in wire.iter().enumerate() {
        let ihl = usize::from(p[0] & 0xf) * 4;
        assert_eq!(u16::from_be_bytes([p[4], p[5]]), k as u16, "identification");
        let ib = &p[ihl + 8..];
        assert_eq!(ib[..ib.len() - 4], sent[k][..sent[k].len() - 4], "payload");
        let icrc =
            weft_wire::roce::icrc::icrc(&p[..ihl], &p[ihl..ihl + 8], &ib[..ib.len() - 4]).unwrap();
        assert_eq!(icrc.to_le_bytes(), ib[ib.len() - 4..], "segment {k}'s ICRC");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < 20 && Instant::now() < deadline {
        if b.recv_burst(&mut got, 64).unwrap() == 0 {
            b.wait(Duration::from_millis(10), None).unwrap();
        }
    }
    assert_eq!(got.len(), 20);
    let mut cache = None;
    for (k, d) in got.iter().enumerate() {
        assert_eq!(d.buf[..d.buf.len() - 4], sent[k][..sent[k].len() - 4]);
        assert_eq!(d.path, path, "the path as sent");
        let id = path.check_id(&d.buf, weft_wire::roce::GSO_MAX_SEGMENTS, &mut cache);
        assert_eq!(id, Some(k as u16), "datagram {k}");
    }
}
