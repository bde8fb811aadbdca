//! Queue-pair types, states, attributes and the declared state-transition table
//! (IBTA Vol 1 §10.3.1, the `ibv_modify_qp` rules).

use crate::memory::Access;
use core::fmt;
use weft_wire::roce::{IcrcPath, Psn};

/// Transport service of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
}

impl QpType {
    /// The wire transport whose opcodes this QP accepts.
    pub const fn transport(self) -> weft_wire::roce::Transport {
        match self {
            QpType::Rc => weft_wire::roce::Transport::Rc,
            QpType::Uc => weft_wire::roce::Transport::Uc,
            QpType::Ud => weft_wire::roce::Transport::Ud,
        }
    }
}

/// QP state (IBTA §10.3.1 Figure 124).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Reset.
    Reset,
    /// Initialized: receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain: no new send WQE starts.
    Sqd,
    /// Send queue error (UC/UD): sends flushed, receives continue.
    Sqe,
    /// Error: every outstanding work request completes with a flush error.
    Err,
}

/// Path MTU (IBTA `IBV_MTU_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes.
    M256,
    /// 512 bytes.
    M512,
    /// 1024 bytes.
    M1024,
    /// 2048 bytes.
    M2048,
    /// 4096 bytes.
    M4096,
}

impl Mtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        match self {
            Mtu::M256 => 256,
            Mtu::M512 => 512,
            Mtu::M1024 => 1024,
            Mtu::M2048 => 2048,
            Mtu::M4096 => 4096,
        }
    }

    /// The MTU of `bytes` payload bytes, if it is one of the five.
    pub const fn from_bytes(bytes: usize) -> Option<Mtu> {
        Some(match bytes {
            256 => Mtu::M256,
            512 => Mtu::M512,
            1024 => Mtu::M1024,
            2048 => Mtu::M2048,
            4096 => Mtu::M4096,
            _ => return None,
        })
    }

    /// The largest MTU whose packets fit in `max_datagram` bytes of UDP payload
    /// (headers and ICRC included), if any.
    pub fn fitting(max_datagram: usize) -> Option<Mtu> {
        [Mtu::M4096, Mtu::M2048, Mtu::M1024, Mtu::M512, Mtu::M256]
            .into_iter()
            .find(|m| m.bytes() as usize + crate::MAX_OVERHEAD <= max_datagram)
    }
}

/// How an RC QP recovers from loss; both ends must agree (the connection manager
/// negotiates it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recovery {
    /// IBTA go-back-N: the responder drops out-of-order packets and NAKs the gap once;
    /// the requester resends everything from the NAKed PSN.
    GoBackN,
    /// IRN-style selective repeat (SIGCOMM'18): the responder keeps out-of-order
    /// packets and reports each one (a NAK-sequence carrying the selectively
    /// acknowledged PSN in the AETH MSN field); the requester resends only the holes and
    /// caps the PSNs in flight at `max_inflight` (a BDP cap).
    Selective,
}

/// Attributes to change with [`crate::Endpoint::modify_qp`]; `None` leaves a value as
/// it is (the `ibv_qp_attr_mask` idea, as `Option`s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttr {
    /// Target state.
    pub state: Option<QpState>,
    /// Partition key (full member bit included).
    pub pkey: Option<u16>,
    /// Q_Key (UD).
    pub qkey: Option<u32>,
    /// Remote access rights this QP grants (`qp_access_flags`).
    pub access: Option<Access>,
    /// Path MTU.
    pub path_mtu: Option<Mtu>,
    /// Destination QP number (RC/UC).
    pub dest_qpn: Option<u32>,
    /// The IP/UDP path to the peer (the address vector; RC/UC).
    pub path: Option<IcrcPath>,
    /// Expected PSN of the first incoming request.
    pub rq_psn: Option<Psn>,
    /// PSN of the first outgoing request.
    pub sq_psn: Option<Psn>,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout; 0 = infinite.
    pub timeout: Option<u8>,
    /// Transport retries (0–7).
    pub retry_cnt: Option<u8>,
    /// RNR retries (0–7; 7 = infinite).
    pub rnr_retry: Option<u8>,
    /// RNR timer code this QP's responder sends in RNR NAKs (IBTA Table 45).
    pub min_rnr_timer: Option<u8>,
    /// Outstanding READ/atomic requests this requester may have (1–255).
    pub max_rd_atomic: Option<u8>,
    /// READ/atomic requests this responder accepts outstanding (1–255).
    pub max_dest_rd_atomic: Option<u8>,
    /// Loss recovery mode (RC).
    pub recovery: Option<Recovery>,
    /// Cap on PSNs in flight (the go-back-N window, or IRN's BDP cap).
    pub max_inflight: Option<u32>,
    /// What the peer's responder promised for request packets that do not ask for an
    /// ACK (weft: learned in the connection handshake; see
    /// [`QpAttrs::peer_ack_delay_us`]).
    pub peer_ack_delay_us: Option<u32>,
}

/// The current attributes of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttrs {
    /// Partition key.
    pub pkey: u16,
    /// Q_Key.
    pub qkey: u32,
    /// Remote access rights granted.
    pub access: Access,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Destination QP.
    pub dest_qpn: u32,
    /// Path to the peer.
    pub path: Option<IcrcPath>,
    /// First expected request PSN.
    pub rq_psn: Psn,
    /// First request PSN.
    pub sq_psn: Psn,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
    /// RNR timer code sent by this responder.
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomics as requester.
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomics accepted as responder.
    pub max_dest_rd_atomic: u8,
    /// Loss recovery.
    pub recovery: Recovery,
    /// PSNs in flight cap.
    pub max_inflight: u32,
    /// The longest the peer's responder holds the ACK of a request packet whose
    /// AckReq bit is clear, in microseconds, when the peer is known to acknowledge
    /// such packets at all (weft peers say so in the connection handshake). 0: not
    /// known, and then the last packet of every message asks for its ACK. IBTA leaves
    /// an unasked packet's ACK to the responder, and Linux's rdma_rxe acknowledges
    /// only packets that ask, so a requester that left the last message of a burst
    /// unasked would wait out its local ACK timeout and resend it. The requester
    /// leaves AckReq clear only when this is non-zero ([`crate::Config::ack_delay_us`]).
    pub peer_ack_delay_us: u32,
}

impl Default for QpAttrs {
    fn default() -> QpAttrs {
        QpAttrs {
            pkey: weft_wire::roce::bth::DEFAULT_PKEY,
            qkey: 0,
            access: Access::NONE,
            path_mtu: Mtu::M1024,
            dest_qpn: 0,
            path: None,
            rq_psn: Psn::new(0),
            sq_psn: Psn::new(0),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            recovery: Recovery::GoBackN,
            max_inflight: 256,
            peer_ack_delay_us: 0,
        }
    }
}

/// An attribute a transition may require or allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttrName {
    /// `pkey`.
    Pkey,
    /// `qkey`.
    Qkey,
    /// `access`.
    Access,
    /// `path_mtu`.
    PathMtu,
    /// `dest_qpn`.
    DestQpn,
    /// `path`.
    Path,
    /// `rq_psn`.
    RqPsn,
    /// `sq_psn`.
    SqPsn,
    /// `timeout`.
    Timeout,
    /// `retry_cnt`.
    RetryCnt,
    /// `rnr_retry`.
    RnrRetry,
    /// `min_rnr_timer`.
    MinRnrTimer,
    /// `max_rd_atomic`.
    MaxRdAtomic,
    /// `max_dest_rd_atomic`.
    MaxDestRdAtomic,
    /// `recovery` (weft: negotiated when the connection is set up).
    Recovery,
    /// `max_inflight` (weft).
    MaxInflight,
    /// `peer_ack_delay_us` (weft: learned when the connection is set up).
    PeerAckDelay,
}

impl AttrName {
    /// Every attribute, in declaration order.
    pub const ALL: [AttrName; 17] = [
        A::Pkey,
        A::Qkey,
        A::Access,
        A::PathMtu,
        A::DestQpn,
        A::Path,
        A::RqPsn,
        A::SqPsn,
        A::Timeout,
        A::RetryCnt,
        A::RnrRetry,
        A::MinRnrTimer,
        A::MaxRdAtomic,
        A::MaxDestRdAtomic,
        A::Recovery,
        A::MaxInflight,
        A::PeerAckDelay,
    ];

    fn is_set(self, a: &QpAttr) -> bool {
        match self {
            AttrName::Pkey => a.pkey.is_some(),
            AttrName::Qkey => a.qkey.is_some(),
            AttrName::Access => a.access.is_some(),
            AttrName::PathMtu => a.path_mtu.is_some(),
            AttrName::DestQpn => a.dest_qpn.is_some(),
            AttrName::Path => a.path.is_some(),
            AttrName::RqPsn => a.rq_psn.is_some(),
            AttrName::SqPsn => a.sq_psn.is_some(),
            AttrName::Timeout => a.timeout.is_some(),
            AttrName::RetryCnt => a.retry_cnt.is_some(),
            AttrName::RnrRetry => a.rnr_retry.is_some(),
            AttrName::MinRnrTimer => a.min_rnr_timer.is_some(),
            AttrName::MaxRdAtomic => a.max_rd_atomic.is_some(),
            AttrName::MaxDestRdAtomic => a.max_dest_rd_atomic.is_some(),
            AttrName::Recovery => a.recovery.is_some(),
            AttrName::MaxInflight => a.max_inflight.is_some(),
            AttrName::PeerAckDelay => a.peer_ack_delay_us.is_some(),
        }
    }
}

/// What one transition requires and allows for one QP type.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Must be set.
    pub required: &'static [AttrName],
    /// May be set.
    pub optional: &'static [AttrName],
}

/// One allowed `modify_qp` transition and its attribute rules per QP type.
#[derive(Debug, Clone, Copy)]
pub struct Transition {
    /// From.
    pub from: QpState,
    /// To.
    pub to: QpState,
    /// RC.
    pub rc: Rule,
    /// UC.
    pub uc: Rule,
    /// UD.
    pub ud: Rule,
}

impl Transition {
    /// The rule for `qp_type`.
    pub const fn rule(&self, qp_type: QpType) -> Rule {
        match qp_type {
            QpType::Rc => self.rc,
            QpType::Uc => self.uc,
            QpType::Ud => self.ud,
        }
    }
}

use AttrName as A;
use QpState as S;

const fn rule(required: &'static [AttrName], optional: &'static [AttrName]) -> Rule {
    Rule { required, optional }
}

const NONE: &[AttrName] = &[];
const SAME: Rule = rule(NONE, NONE);

/// Every transition `modify_qp` accepts (IBTA §10.3.1; required and optional
/// attributes as `ibv_modify_qp(3)` lists them, plus weft's `recovery`,
/// `max_inflight` and `peer_ack_delay_us`, which are fixed when the connection is set
/// up). Any state may also
/// go to RESET or ERR, with any attributes (ignored).
pub const TRANSITIONS: &[Transition] = &[
    Transition {
        from: S::Reset,
        to: S::Init,
        rc: rule(&[A::Pkey, A::Access], NONE),
        uc: rule(&[A::Pkey, A::Access], NONE),
        ud: rule(&[A::Pkey, A::Qkey], NONE),
    },
    Transition {
        from: S::Init,
        to: S::Init,
        rc: rule(NONE, &[A::Pkey, A::Access]),
        uc: rule(NONE, &[A::Pkey, A::Access]),
        ud: rule(NONE, &[A::Pkey, A::Qkey]),
    },
    Transition {
        from: S::Init,
        to: S::Rtr,
        rc: rule(
            &[
                A::Path,
                A::PathMtu,
                A::DestQpn,
                A::RqPsn,
                A::MaxDestRdAtomic,
                A::MinRnrTimer,
            ],
            &[
                A::Pkey,
                A::Access,
                A::Recovery,
                A::MaxInflight,
                A::PeerAckDelay,
            ],
        ),
        uc: rule(
            &[A::Path, A::PathMtu, A::DestQpn, A::RqPsn],
            &[A::Pkey, A::Access],
        ),
        ud: rule(NONE, &[A::Pkey, A::Qkey, A::PathMtu]),
    },
    Transition {
        from: S::Rtr,
        to: S::Rts,
        rc: rule(
            &[
                A::SqPsn,
                A::Timeout,
                A::RetryCnt,
                A::RnrRetry,
                A::MaxRdAtomic,
            ],
            &[A::Access, A::MinRnrTimer],
        ),
        uc: rule(&[A::SqPsn], &[A::Access]),
        ud: rule(&[A::SqPsn], &[A::Qkey]),
    },
    Transition {
        from: S::Rts,
        to: S::Rts,
        rc: rule(NONE, &[A::Access, A::MinRnrTimer]),
        uc: rule(NONE, &[A::Access]),
        ud: rule(NONE, &[A::Qkey]),
    },
    Transition {
        from: S::Rts,
        to: S::Sqd,
        rc: SAME,
        uc: SAME,
        ud: SAME,
    },
    Transition {
        from: S::Sqd,
        to: S::Sqd,
        rc: rule(
            NONE,
            &[
                A::Path,
                A::Access,
                A::Timeout,
                A::RetryCnt,
                A::RnrRetry,
                A::MinRnrTimer,
                A::MaxRdAtomic,
                A::MaxDestRdAtomic,
                A::Pkey,
            ],
        ),
        uc: rule(NONE, &[A::Path, A::Access, A::Pkey]),
        ud: rule(NONE, &[A::Pkey, A::Qkey]),
    },
    Transition {
        from: S::Sqd,
        to: S::Rts,
        rc: rule(NONE, &[A::Access, A::MinRnrTimer]),
        uc: rule(NONE, &[A::Access]),
        ud: rule(NONE, &[A::Qkey]),
    },
    Transition {
        from: S::Sqe,
        to: S::Rts,
        rc: SAME,
        uc: rule(NONE, &[A::Access]),
        ud: rule(NONE, &[A::Qkey]),
    },
];

/// Why `modify_qp` refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModifyError {
    /// No QP has this number.
    UnknownQp(u32),
    /// The table has no such transition.
    InvalidTransition {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// The transition requires an attribute that was not given.
    MissingAttr(AttrName),
    /// The transition does not allow changing this attribute.
    NotModifiable(AttrName),
    /// An attribute value is out of range; the string names it.
    InvalidValue(&'static str),
}

impl fmt::Display for ModifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for ModifyError {}

/// Look up the transition `from → to` for `qp_type` and check `attr` against it.
/// RESET and ERR are reachable from every state.
pub fn check_transition(
    qp_type: QpType,
    from: QpState,
    to: QpState,
    attr: &QpAttr,
) -> Result<(), ModifyError> {
    if matches!(to, S::Reset | S::Err) {
        return Ok(());
    }
    let t = TRANSITIONS
        .iter()
        .find(|t| t.from == from && t.to == to)
        .ok_or(ModifyError::InvalidTransition { from, to })?;
    let r = t.rule(qp_type);
    if let Some(missing) = r.required.iter().find(|name| !name.is_set(attr)) {
        return Err(ModifyError::MissingAttr(*missing));
    }
    if let Some(extra) = AttrName::ALL
        .iter()
        .find(|n| n.is_set(attr) && !r.required.contains(n) && !r.optional.contains(n))
    {
        return Err(ModifyError::NotModifiable(*extra));
    }
    Ok(())
}

/// Validate values and apply the set fields of `attr` to `attrs`.
pub(crate) fn apply_attr(attrs: &mut QpAttrs, attr: &QpAttr) -> Result<(), ModifyError> {
    let check = |ok: bool, name: &'static str| {
        if ok {
            Ok(())
        } else {
            Err(ModifyError::InvalidValue(name))
        }
    };
    check(attr.retry_cnt.is_none_or(|v| v <= 7), "retry_cnt")?;
    check(attr.rnr_retry.is_none_or(|v| v <= 7), "rnr_retry")?;
    check(attr.min_rnr_timer.is_none_or(|v| v <= 31), "min_rnr_timer")?;
    check(attr.timeout.is_none_or(|v| v <= 31), "timeout")?;
    check(attr.max_rd_atomic.is_none_or(|v| v >= 1), "max_rd_atomic")?;
    check(
        attr.max_dest_rd_atomic.is_none_or(|v| v >= 1),
        "max_dest_rd_atomic",
    )?;
    check(
        attr.dest_qpn
            .is_none_or(|v| v <= weft_wire::roce::bth::QPN_MASK),
        "dest_qpn",
    )?;
    check(
        attr.max_inflight.is_none_or(|v| (1..=1 << 16).contains(&v)),
        "max_inflight",
    )?;
    macro_rules! set {
        ($($f:ident),*) => { $(if let Some(v) = attr.$f { attrs.$f = v; })* };
    }
    set!(
        pkey,
        qkey,
        access,
        path_mtu,
        dest_qpn,
        rq_psn,
        sq_psn,
        timeout,
        retry_cnt,
        rnr_retry,
        min_rnr_timer,
        max_rd_atomic,
        max_dest_rd_atomic,
        recovery,
        max_inflight,
        peer_ack_delay_us
    );
    if attr.path.is_some() {
        attrs.path = attr.path;
    }
    Ok(())
}

/// The transition table as text, one line a transition (snapshot-tested).
pub fn render_transition_table() -> String {
    let mut out = String::new();
    for t in TRANSITIONS {
        out.push_str(&format!("{:?} -> {:?}\n", t.from, t.to));
        for (name, r) in [("rc", t.rc), ("uc", t.uc), ("ud", t.ud)] {
            out.push_str(&format!(
                "  {name}: required {:?} optional {:?}\n",
                r.required, r.optional
            ));
        }
    }
    out.push_str("* -> Reset, * -> Err: anything, nothing required\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_table_snapshot() {
        let expected = "\
Reset -> Init
  rc: required [Pkey, Access] optional []
  uc: required [Pkey, Access] optional []
  ud: required [Pkey, Qkey] optional []
Init -> Init
  rc: required [] optional [Pkey, Access]
  uc: required [] optional [Pkey, Access]
  ud: required [] optional [Pkey, Qkey]
Init -> Rtr
  rc: required [Path, PathMtu, DestQpn, RqPsn, MaxDestRdAtomic, MinRnrTimer] optional [Pkey, Access, Recovery, MaxInflight, PeerAckDelay]
  uc: required [Path, PathMtu, DestQpn, RqPsn] optional [Pkey, Access]
  ud: required [] optional [Pkey, Qkey, PathMtu]
Rtr -> Rts
  rc: required [SqPsn, Timeout, RetryCnt, RnrRetry, MaxRdAtomic] optional [Access, MinRnrTimer]
  uc: required [SqPsn] optional [Access]
  ud: required [SqPsn] optional [Qkey]
Rts -> Rts
  rc: required [] optional [Access, MinRnrTimer]
  uc: required [] optional [Access]
  ud: required [] optional [Qkey]
Rts -> Sqd
  rc: required [] optional []
  uc: required [] optional []
  ud: required [] optional []
Sqd -> Sqd
  rc: required [] optional [Path, Access, Timeout, RetryCnt, RnrRetry, MinRnrTimer, MaxRdAtomic, MaxDestRdAtomic, Pkey]
  uc: required [] optional [Path, Access, Pkey]
  ud: required [] optional [Pkey, Qkey]
Sqd -> Rts
  rc: required [] optional [Access, MinRnrTimer]
  uc: required [] optional [Access]
  ud: required [] optional [Qkey]
Sqe -> Rts
  rc: required [] optional []
  uc: required [] optional [Access]
  ud: required [] optional [Qkey]
* -> Reset, * -> Err: anything, nothing required
";
        assert_eq!(render_transition_table(), expected);
    }

    #[test]
    fn invalid_transitions_are_errors() {
        let a = QpAttr::default();
        assert_eq!(
            check_transition(QpType::Rc, S::Reset, S::Rts, &a),
            Err(ModifyError::InvalidTransition {
                from: S::Reset,
                to: S::Rts
            })
        );
        assert_eq!(
            check_transition(QpType::Rc, S::Init, S::Rtr, &a),
            Err(ModifyError::MissingAttr(A::Path))
        );
        assert_eq!(check_transition(QpType::Ud, S::Init, S::Rtr, &a), Ok(()));
        assert_eq!(check_transition(QpType::Rc, S::Rts, S::Err, &a), Ok(()));
        assert_eq!(check_transition(QpType::Rc, S::Err, S::Reset, &a), Ok(()));
        assert!(check_transition(QpType::Rc, S::Err, S::Rts, &a).is_err());
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut attrs = QpAttrs::default();
        let bad = QpAttr {
            retry_cnt: Some(8),
            ..QpAttr::default()
        };
        assert_eq!(
            apply_attr(&mut attrs, &bad),
            Err(ModifyError::InvalidValue("retry_cnt"))
        );
        assert_eq!(attrs, QpAttrs::default());
    }
}

/// What two QPs agree on to connect (the connection manager's handshake carries
/// it), and the one recipe that turns it into the RESET → INIT → RTR → RTS
/// modifications. Each step sets exactly what [`TRANSITIONS`] requires or allows for
/// the QP type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bringup {
    /// Remote rights this QP grants (RC/UC).
    pub access: Access,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Path to the peer (RC/UC).
    pub path: Option<IcrcPath>,
    /// The peer's QP number (RC/UC).
    pub dest_qpn: u32,
    /// First PSN the peer sends (our expected PSN).
    pub rq_psn: u32,
    /// First PSN we send.
    pub sq_psn: u32,
    /// READ/atomics we may have outstanding (≤ the peer's responder resources).
    pub max_rd_atomic: u8,
    /// READ/atomics we accept outstanding.
    pub max_dest_rd_atomic: u8,
    /// RNR timer code our responder sends.
    pub min_rnr_timer: u8,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
    /// Loss recovery (RC).
    pub recovery: Recovery,
    /// PSNs in flight cap (RC).
    pub max_inflight: u32,
    /// The peer responder's bound on holding an unasked packet's ACK (RC; 0: not
    /// known, every message asks; [`QpAttrs::peer_ack_delay_us`]).
    pub peer_ack_delay_us: u32,
}

impl Bringup {
    /// The three modifications, in order.
    pub fn steps(&self, qp_type: QpType) -> [QpAttr; 3] {
        let rc = qp_type == QpType::Rc;
        let connected = qp_type != QpType::Ud;
        [
            QpAttr {
                state: Some(QpState::Init),
                pkey: Some(weft_wire::roce::bth::DEFAULT_PKEY),
                qkey: (!connected).then_some(self.qkey),
                access: connected.then_some(self.access),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rtr),
                path: if connected { self.path } else { None },
                path_mtu: Some(self.path_mtu),
                dest_qpn: connected.then_some(self.dest_qpn),
                rq_psn: connected.then(|| Psn::new(self.rq_psn)),
                max_dest_rd_atomic: rc.then_some(self.max_dest_rd_atomic),
                min_rnr_timer: rc.then_some(self.min_rnr_timer),
                recovery: rc.then_some(self.recovery),
                max_inflight: rc.then_some(self.max_inflight),
                peer_ack_delay_us: rc.then_some(self.peer_ack_delay_us),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rts),
                sq_psn: Some(Psn::new(self.sq_psn)),
                timeout: rc.then_some(self.timeout),
                retry_cnt: rc.then_some(self.retry_cnt),
                rnr_retry: rc.then_some(self.rnr_retry),
                max_rd_atomic: rc.then_some(self.max_rd_atomic),
                ..QpAttr::default()
            },
        ]
    }
}
