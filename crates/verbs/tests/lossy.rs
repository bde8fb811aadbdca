//! The engine and the transport together under loss, duplication and reordering: two
//! devices on weft-link's simulated datagram fabric (seeded faults), connected through
//! the connection manager, move data that must arrive intact, in both recovery modes.

mod common;

use common::*;
use std::net::SocketAddr;
use weft_link::datagram::{pool_buf_size, DEFAULT_MAX_DATAGRAM};
use weft_link::dgram_sim::{DgramFabric, Faults};
use weft_link::BufferPool;
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, Progress, QpInitAttr, QpType,
    Recovery, RecvWr, SendWr, WcOpcode, WrOp,
};

fn sim_device(fabric: &DgramFabric, ip: [u8; 4]) -> Context {
    let addr = SocketAddr::from((ip, 4791));
    let pool = BufferPool::new(4096, pool_buf_size(DEFAULT_MAX_DATAGRAM));
    let link = fabric.link(addr, pool, 4096).expect("sim link");
    let mut cfg = DeviceConfig::new(LinkKind::Udp, addr);
    cfg.progress = Progress::Thread;
    Context::with_link(Box::new(link), cfg).expect("device")
}

/// One run of the scenario: the data is asserted intact; returns whether the fabric's
/// faults fired (some loss and some reordering) and the sender recovered.
fn run(recovery: Recovery, seed: u64) -> bool {
    let fabric = DgramFabric::new(seed);
    fabric.set_faults(Faults {
        loss: 0.02,
        duplicate: 0.01,
        reorder: 0.02,
    });
    let (a, b) = (
        sim_device(&fabric, [198, 18, 0, 1]),
        sim_device(&fabric, [198, 18, 0, 2]),
    );
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (mut cqa, mut cqb) = (
        CompletionQueue::new(&a, 256, None),
        CompletionQueue::new(&b, 256, None),
    );
    let mut qa = pa
        .create_qp(&cqa, &cqa, None, QpInitAttr::new(QpType::Rc))
        .unwrap();
    let mut qb = pb
        .create_qp(&cqb, &cqb, None, QpInitAttr::new(QpType::Rc))
        .unwrap();
    let param = ConnParam {
        recovery,
        // 17 ms: the fabric has no delay, but a descheduled engine thread on a loaded
        // machine does; a shorter timer spends retries on the scheduler, not on loss.
        timeout: 12,
        ..ConnParam::default()
    };
    let l = Listener::bind(&b, "127.0.0.1:0".parse().unwrap()).unwrap();
    let at = l.local_addr().unwrap();
    let _conns = std::thread::scope(|s| {
        let h = s.spawn(|| l.get_request(T).unwrap().accept(&mut qb, &param).unwrap());
        (cm::connect(&mut qa, at, &param).unwrap(), h.join().unwrap())
    });
    let (src, dst) = (
        pa.alloc_mr(1 << 20, Access::ALL),
        pb.alloc_mr(1 << 20, Access::ALL),
    );
    let data: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    src.write(0, &data).unwrap();
    // 16 WRITEs of 60 KiB, a SEND of 100 KB, and a READ back of 64 KiB.
    let writes: Vec<SendWr> = (0..16)
        .map(|i| {
            SendWr::new(
                i,
                WrOp::Write {
                    remote: dst.remote(i as usize * 61_440),
                    imm: None,
                },
                vec![src.sge(i as usize * 61_440, 61_440)],
            )
        })
        .collect();
    qa.post_send(writes).unwrap();
    qb.post_recv([RecvWr {
        wr_id: 100,
        sg_list: [dst.sge(983_040, 65_536)].into(),
    }])
    .unwrap();
    qa.post_send([SendWr::new(
        20,
        WrOp::Send { imm: Some(5) },
        vec![src.sge(0, 65_536)],
    )])
    .unwrap();
    let c = ok(&mut cqa, 17);
    assert!(c.iter().all(|c| c.opcode != WcOpcode::RdmaRead));
    let r = ok(&mut cqb, 1);
    assert_eq!((r[0].byte_len, r[0].imm), (65_536, Some(5)));
    assert_eq!(
        dst.to_vec(0, 983_040).unwrap(),
        &data[..983_040],
        "WRITEs intact"
    );
    assert_eq!(
        dst.to_vec(983_040, 65_536).unwrap(),
        &data[..65_536],
        "SEND intact"
    );
    qa.post_send([SendWr::new(
        30,
        WrOp::Read {
            remote: dst.remote(0),
        },
        vec![src.sge(0, 65_536)],
    )])
    .unwrap();
    ok(&mut cqa, 1);
    assert_eq!(src.to_vec(0, 65_536).unwrap(), &data[..65_536]);
    let st = a.stats().transport;
    let fs = fabric.stats();
    eprintln!(
        "{recovery:?}: fabric lost {} duplicated {} reordered {}; sender retransmitted {} packets",
        fs.lost, fs.duplicated, fs.reordered, st.retransmitted_packets
    );
    fs.lost > 0 && fs.reordered > 0 && st.retransmitted_packets > 0
}

/// Runs the scenario over up to four seeds until the faults fired in one of them. Which
/// packet meets which roll depends on thread timing (a reorder needs a non-empty queue),
/// so one seed alone could, rarely, draw no loss; every run's data is asserted intact.
fn run_until_faults_fire(recovery: Recovery, first_seed: u64) {
    let fired = (first_seed..first_seed + 4).any(|seed| run(recovery, seed));
    assert!(
        fired,
        "{recovery:?}: the faults never fired in four seeded runs"
    );
}

#[test]
fn data_arrives_intact_through_loss_duplication_and_reordering_go_back_n() {
    run_until_faults_fire(Recovery::GoBackN, 1);
}

#[test]
fn data_arrives_intact_through_loss_duplication_and_reordering_selective() {
    run_until_faults_fire(Recovery::Selective, 2);
}
