//! The goodput sweep: the checked-in snapshot is what the code produces, and selective
//! recovery beats go-back-N at 1 % loss. Virtual time: deterministic, not a timed test.
use weft_transport::sim::{sweep_point, sweep_table};
use weft_transport::Recovery;

#[test]
fn selective_beats_go_back_n_at_one_percent_loss() {
    for (size, n) in [(4096u32, 400u64), (1 << 20, 4)] {
        let gbn = sweep_point(0.01, Recovery::GoBackN, size, n, 1);
        let sel = sweep_point(0.01, Recovery::Selective, size, n, 1);
        assert_eq!(gbn.completed, n);
        assert_eq!(sel.completed, n);
        assert!(gbn.intact && sel.intact);
        assert!(
            sel.goodput_gbps > gbn.goodput_gbps,
            "{size}: selective {sel:?} vs go-back-N {gbn:?}"
        );
        assert!(sel.retransmissions < gbn.retransmissions);
    }
}

#[test]
fn lossless_link_has_no_retransmissions() {
    for mode in [Recovery::GoBackN, Recovery::Selective] {
        let r = sweep_point(0.0, mode, 4096, 200, 3);
        assert_eq!(r.retransmissions, 0);
        assert_eq!(r.completed, 200);
        assert!(r.goodput_gbps > 9.0, "{r:?}");
    }
}

#[test]
fn snapshot_matches_docs() {
    let doc = include_str!("../../../docs/results/transport-sweep.md");
    let table: String = doc
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        table,
        sweep_table(1, 1),
        "regenerate docs/results/transport-sweep.md (see its header)"
    );
}
