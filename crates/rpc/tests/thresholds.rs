//! Inline and rendezvous thresholds chosen per connection (issue 16): whatever the
//! costs measured, the thresholds stay within the protocol's limits, every size
//! arrives intact, adaptive and fixed peers interoperate, and a fixed side keeps
//! the limits themselves. (Which threshold the costs choose is the policy's unit
//! test, fed with samples: here the costs are whatever this machine measures.)

mod common;

use common::*;
use weft_rpc::{LinkKind, MIN_BUFFER};

const BUF: usize = 16 << 10;

fn mixed_sizes(kind: LinkKind, client_adaptive: bool, server_adaptive: bool) {
    let (s, _) = server_with(kind, |c| {
        c.buffer_size = BUF;
        c.adaptive_thresholds = server_adaptive;
    });
    let c = client_with(kind, s.local_addr(), |c| {
        c.buffer_size = BUF;
        c.adaptive_thresholds = client_adaptive;
    });
    let big: Vec<u8> = (0..100_000usize).map(|i| (i * 7 + i / 251) as u8).collect();
    // Around the inline limit, the buffer (a frame header is 24 B) and beyond.
    let sizes = [
        0,
        100,
        232,
        233,
        1000,
        8000,
        BUF - 24,
        BUF - 23,
        20_000,
        100_000,
    ];
    let mut st = c.stream();
    let mut want = std::collections::HashMap::new();
    for round in 0..24 {
        for (i, &n) in sizes.iter().enumerate() {
            let id = st.call(ECHO, &big[..n]).unwrap();
            want.insert(id, n);
            if (round * sizes.len() + i) % 4 == 3 {
                while let Some((id, r)) = st.take() {
                    assert_eq!(r.unwrap(), big[..want[&id]]);
                }
            }
        }
    }
    while let Some((id, r)) = st.take() {
        assert_eq!(r.unwrap(), big[..want[&id]]);
    }
    let cs = c.stats();
    let ss = s.stats();
    eprintln!(
        "{kind:?}: client inline {} eager {} ({} moves), server inline {} eager {} ({} moves)",
        cs.inline_max,
        cs.eager_max,
        cs.threshold_changes,
        ss.inline_max,
        ss.eager_max,
        ss.threshold_changes
    );
    for (who, inline, eager, changes, adaptive) in [
        (
            "client",
            cs.inline_max,
            cs.eager_max,
            cs.threshold_changes,
            client_adaptive,
        ),
        (
            "server",
            ss.inline_max,
            ss.eager_max,
            ss.threshold_changes,
            server_adaptive,
        ),
    ] {
        assert!(inline <= 256, "{who}: inline_max {inline}");
        assert!(
            (MIN_BUFFER as u64..=BUF as u64).contains(&eager),
            "{who}: eager_max {eager}"
        );
        if !adaptive {
            assert_eq!((inline, eager, changes), (256, BUF as u64, 0), "{who}");
        }
    }
    // Messages beyond the peer's buffer went by rendezvous both ways.
    assert!(cs.rendezvous_out >= 48 && cs.rendezvous_in >= 48, "{cs:?}");
    assert!(ss.rendezvous_in >= 48 && ss.rendezvous_out >= 48, "{ss:?}");
    assert_eq!((cs.malformed, ss.malformed_frames), (0, 0));
}

#[test]
fn adaptive_peers_keep_the_limits_and_every_size_intact_udp() {
    mixed_sizes(LinkKind::Udp, true, true);
}

#[test]
fn adaptive_peers_keep_the_limits_and_every_size_intact_shm() {
    mixed_sizes(LinkKind::Shm, true, true);
}

#[test]
fn an_adaptive_client_and_a_fixed_server_interoperate() {
    mixed_sizes(LinkKind::Shm, true, false);
}

#[test]
fn a_fixed_client_and_an_adaptive_server_interoperate() {
    mixed_sizes(LinkKind::Shm, false, true);
}
