//! Every mapping between a failure, a NAK code and a completion status, in one place.
//!
//! IBTA Vol 1 §9.7 (responder errors and the NAK each one sends), §9.9 (error
//! classes), ch. 11 (completion status codes, named as in `ibv_wc_status`).

use crate::memory::AccessError;
use crate::wr::WcStatus;
use weft_wire::roce::NakCode;

/// Why a responder refuses a request packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RespError {
    /// Out-of-sequence opcode, a payload length the MTU rules forbid, a misaligned
    /// atomic, too many outstanding READ/atomics, a message over the length limit
    /// ("Invalid Request"). The string says which.
    InvalidRequest(&'static str),
    /// A SEND longer than the receive WQE ("message too long": NAK Invalid
    /// Request, the receive completes with a local length error).
    RecvTooSmall,
    /// The rkey, protection domain, bounds or rights of a RETH/AtomicETH target were
    /// refused, or the QP does not grant the remote right ("Remote Access Error").
    RemoteAccess(AccessError),
    /// Writing into the receive WQE's own buffers failed: a local protection error on
    /// the responder, reported as NAK Remote Operational Error ("Remote Operational Error").
    RecvProtection(AccessError),
}

impl RespError {
    /// The NAK this error sends (RC).
    pub(crate) const fn nak_code(self) -> NakCode {
        match self {
            RespError::InvalidRequest(_) | RespError::RecvTooSmall => NakCode::INVALID_REQUEST,
            RespError::RemoteAccess(_) => NakCode::REMOTE_ACCESS_ERROR,
            RespError::RecvProtection(_) => NakCode::REMOTE_OPERATIONAL_ERROR,
        }
    }

    /// The status of the receive WQE the failing message had consumed, if any.
    pub(crate) const fn recv_status(self) -> WcStatus {
        match self {
            RespError::RecvTooSmall => WcStatus::LocLenErr,
            RespError::RecvProtection(_) => WcStatus::LocProtErr,
            RespError::InvalidRequest(_) => WcStatus::RemInvReqErr,
            RespError::RemoteAccess(_) => WcStatus::RemAccessErr,
        }
    }
}

/// The requester's completion status for a fatal NAK (§9.7 and `ibv_wc_status`).
/// `None` for NAK-PSN-sequence-error, which is not fatal but a retry.
pub(crate) const fn requester_status(code: NakCode) -> Option<WcStatus> {
    match code {
        NakCode::PSN_SEQUENCE_ERROR => None,
        NakCode::INVALID_REQUEST => Some(WcStatus::RemInvReqErr),
        NakCode::REMOTE_ACCESS_ERROR => Some(WcStatus::RemAccessErr),
        NakCode::REMOTE_OPERATIONAL_ERROR => Some(WcStatus::RemOpErr),
        NakCode::INVALID_RD_REQUEST => Some(WcStatus::RemInvRdReqErr),
        // Reserved codes: the responder said something is wrong and we cannot tell what.
        _ => Some(WcStatus::RemOpErr),
    }
}

/// The requester's status when its own SGEs were refused.
pub(crate) const fn local_status(_e: AccessError) -> WcStatus {
    WcStatus::LocProtErr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nak_maps_to_the_ibv_status() {
        use RespError as E;
        let table = [
            (
                E::InvalidRequest("x"),
                NakCode::INVALID_REQUEST,
                WcStatus::RemInvReqErr,
            ),
            (
                E::RecvTooSmall,
                NakCode::INVALID_REQUEST,
                WcStatus::RemInvReqErr,
            ),
            (
                E::RemoteAccess(AccessError::OutOfBounds),
                NakCode::REMOTE_ACCESS_ERROR,
                WcStatus::RemAccessErr,
            ),
            (
                E::RecvProtection(AccessError::UnknownKey),
                NakCode::REMOTE_OPERATIONAL_ERROR,
                WcStatus::RemOpErr,
            ),
        ];
        for (err, nak, status) in table {
            assert_eq!(err.nak_code(), nak, "{err:?}");
            assert_eq!(requester_status(nak), Some(status), "{err:?}");
        }
        assert_eq!(requester_status(NakCode::PSN_SEQUENCE_ERROR), None);
        assert_eq!(E::RecvTooSmall.recv_status(), WcStatus::LocLenErr);
    }
}
