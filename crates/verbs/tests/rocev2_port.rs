//! Where devices live: a udp device left to choose takes RoCEv2's UDP port 4791 on a
//! loopback address of its own, so packets go to port 4791 in both directions; an shm
//! device with port 0 takes a name unique on the host.

mod common;

use common::*;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use weft_verbs::cm::ConnParam;
use weft_verbs::{
    Context, DeviceConfig, LinkKind, Progress, QpType, RecvWr, SendWr, WrOp, GRH_LEN,
};
use weft_wire::roce::{IpPair, UDP_PORT};

/// One UD SEND from `from` to `to` (connected, so each knows the other's QP); returns
/// the path the receiving link saw: src = sender, dst = receiver.
fn ud_send(from: &mut Side, to: &mut Side) -> weft_wire::roce::IcrcPath {
    let qkey = ConnParam::default().qkey;
    to.qp
        .post_recv([RecvWr {
            wr_id: 1,
            sg_list: [to.mr.sge(0, 2048)].into(),
        }])
        .unwrap();
    let remote = from.conn.as_ref().unwrap().remote().clone();
    let ah = from.pd.create_ah(remote.addr).unwrap();
    from.mr.write(0, b"to 4791").unwrap();
    let mut s = SendWr::new(2, WrOp::Send { imm: None }, vec![from.mr.sge(0, 7)]);
    s.ud = Some(ah.dest(remote.qpn, qkey));
    from.qp.post_send([s]).unwrap();
    ok(&mut from.cq, 1);
    let c = ok(&mut to.cq, 1);
    assert_eq!(to.mr.to_vec(GRH_LEN, 7).unwrap(), b"to 4791");
    c[0].src_path.expect("a UD receive carries its path")
}

fn ipv4(a: SocketAddr) -> std::net::Ipv4Addr {
    match a.ip() {
        IpAddr::V4(v) => v,
        IpAddr::V6(v) => panic!("{v} is not IPv4"),
    }
}

#[test]
fn udp_devices_send_to_port_4791_both_ways_from_distinct_loopback_addresses() {
    let (mut a, mut b) = pair(LinkKind::Udp, Progress::Thread, QpType::Ud, 1 << 16);
    let (la, lb) = (a.ctx.local_addr(), b.ctx.local_addr());
    for l in [la, lb] {
        assert_eq!(l.port(), UDP_PORT, "{l}");
        assert!(l.ip().is_loopback(), "{l}");
    }
    assert_ne!(la.ip(), lb.ip());
    // The connection manager told each side the other's address.
    assert_eq!(a.conn.as_ref().unwrap().remote().addr, lb);
    assert_eq!(b.conn.as_ref().unwrap().remote().addr, la);
    // What each receiving link saw: from the peer's 4791 to its own 4791.
    let seen_by_b = ud_send(&mut a, &mut b);
    assert_eq!(
        seen_by_b.ips,
        IpPair::V4 {
            src: ipv4(la),
            dst: ipv4(lb)
        }
    );
    assert_eq!(
        (seen_by_b.src_port, seen_by_b.dst_port),
        (UDP_PORT, UDP_PORT)
    );
    let seen_by_a = ud_send(&mut b, &mut a);
    assert_eq!(
        seen_by_a.ips,
        IpPair::V4 {
            src: ipv4(lb),
            dst: ipv4(la)
        }
    );
    assert_eq!(
        (seen_by_a.src_port, seen_by_a.dst_port),
        (UDP_PORT, UDP_PORT)
    );
    // Both links checked (and wrote) the ICRC over those real addresses: nothing was
    // dropped for a bad one.
    for s in [&a, &b] {
        let st = s.ctx.stats();
        assert_eq!(st.transport.icrc_errors, 0, "{st:?}");
    }
}

#[test]
fn many_devices_in_one_process_each_get_their_own_address() {
    let mut seen = HashSet::new();
    let mut keep = Vec::new();
    for link in [LinkKind::Udp, LinkKind::Shm, LinkKind::Udp, LinkKind::Shm] {
        for _ in 0..4 {
            let ctx = Context::open(link.name()).unwrap();
            let a = ctx.local_addr();
            assert_eq!(a.port(), UDP_PORT, "{a}");
            assert!(a.ip().is_loopback() && a.ip() != IpAddr::from([127, 0, 0, 1]));
            assert!(seen.insert((link, a)), "{link} {a} given twice");
            keep.push(ctx);
        }
    }
}

#[test]
fn an_explicit_udp_address_is_used_as_given_and_a_taken_one_is_named() {
    let first = Context::open("udp:127.0.0.1:0").unwrap();
    let at = first.local_addr();
    assert_eq!(at.ip(), IpAddr::from([127, 0, 0, 1]));
    assert_ne!(at.port(), 0);
    let e = Context::open(&format!("udp:{at}")).unwrap_err();
    match &e {
        weft_verbs::Error::Bind { link, addr, source } => {
            assert_eq!((*link, *addr), (LinkKind::Udp, at));
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains(&at.to_string()), "{e}");
}

#[test]
fn shm_port_0_gives_each_device_a_unique_name_and_they_talk() {
    let open = || {
        let mut cfg = DeviceConfig::parse("shm:127.0.0.1:0").unwrap();
        cfg.progress = Progress::Thread;
        Context::open_with(cfg).unwrap()
    };
    let (x, y) = (open(), open());
    let (nx, ny) = (x.local_addr(), y.local_addr());
    assert_ne!(nx, ny);
    for n in [nx, ny] {
        assert_eq!(n.ip(), IpAddr::from([127, 0, 0, 1]));
        assert_ne!(n.port(), 0, "port 0 was kept literally");
    }
    let (mut a, mut b) = connect_sides(
        side_on(x, QpType::Rc, 1 << 16),
        side_on(y, QpType::Rc, 1 << 16),
        &ConnParam::default(),
    );
    b.qp.post_recv([RecvWr {
        wr_id: 1,
        sg_list: [b.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    a.mr.write(0, b"over shm").unwrap();
    a.qp.post_send([SendWr::new(
        1,
        WrOp::Send { imm: None },
        vec![a.mr.sge(0, 8)],
    )])
    .unwrap();
    ok(&mut a.cq, 1);
    ok(&mut b.cq, 1);
    assert_eq!(b.mr.to_vec(0, 8).unwrap(), b"over shm");
}
