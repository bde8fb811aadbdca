//! An engine pass does not visit idle QPs: with 4096 QPs on a device, a pass that has
//! nothing to do looks at no QP's rings, no QP's send queue and no QP's timer.
//! Counted (`EngineStats::qp_rings_drained`, `Stats::qp_visits`), not timed.

mod common;

use common::*;
use weft_verbs::{LinkKind, Progress, QpInitAttr, QpType, RecvWr, SendWr, WrOp};

#[test]
fn an_idle_pass_over_4096_qps_visits_none_and_a_message_visits_its_own() {
    let (mut a, mut b) = pair(LinkKind::Shm, Progress::Inline, QpType::Rc, 1 << 16);
    let mut init = QpInitAttr::new(QpType::Rc);
    init.max_send_wr = 4;
    init.max_recv_wr = 4;
    let idle: Vec<_> = (0..4095)
        .map(|_| a.pd.create_qp(&a.cq, &a.cq, None, init).expect("create qp"))
        .collect();
    assert_eq!(idle.len(), 4095);
    for _ in 0..8 {
        a.ctx.progress();
        b.ctx.progress();
    }
    let counts = |s: &Side| {
        let st = s.ctx.stats();
        (
            st.engine.qp_rings_drained,
            st.transport.qp_visits,
            st.engine.passes,
        )
    };
    let (rings0, visits0, passes0) = counts(&a);
    for _ in 0..100 {
        a.ctx.progress();
    }
    let (rings1, visits1, passes1) = counts(&a);
    assert_eq!(passes1 - passes0, 100);
    assert_eq!(rings1, rings0, "idle passes looked at QP rings");
    assert_eq!(visits1, visits0, "idle passes visited transport QPs");

    // A SEND on the connected QP: its own ring and send queue, nobody else's.
    b.qp.post_recv([RecvWr {
        wr_id: 1,
        sg_list: [b.mr.sge(0, 64)].into(),
    }])
    .unwrap();
    a.qp.post_send([SendWr::new(2, WrOp::Send { imm: None }, [a.mr.sge(0, 64)])])
        .unwrap();
    ok_driving(&mut a.cq, 1, &[&b.ctx]);
    let (rings2, visits2, passes2) = counts(&a);
    let passes = passes2 - passes1;
    assert!(rings2 - rings1 <= 1, "{} rings drained", rings2 - rings1);
    // At most the one QP per pass (its send, its ACK's effects), never the 4095.
    assert!(
        visits2 - visits1 <= passes,
        "{} visits in {passes} passes",
        visits2 - visits1
    );
}
