//! Typed status codes: what a call can end with besides success.

use std::fmt;

/// Why a call failed. The numbers on the wire follow gRPC's codes where gRPC has
/// one (so dashboards read alike); [`Code::MessageTooLarge`] is weft's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Code {
    /// The caller gave up (dropped the future) or the server was told so.
    Cancelled,
    /// A failure the server did not classify.
    Unknown,
    /// The request was malformed: a frame that does not parse, a payload the codec
    /// cannot decode, a method argument the handler refuses.
    InvalidArgument,
    /// The call's deadline passed (at the client, or at the server before it ran).
    DeadlineExceeded,
    /// Something the call named does not exist.
    NotFound,
    /// The server shed the call: its in-flight limit was reached.
    Overloaded,
    /// The server does not know the method.
    Unimplemented,
    /// The handler failed or panicked; an invariant broke.
    Internal,
    /// The peer is gone or unreachable: connection closed, peer killed, keepalive
    /// unanswered, server restarted.
    Unavailable,
    /// A message larger than the connection can carry.
    MessageTooLarge,
    /// A code this version does not know (kept, not lost).
    Other(u32),
}

impl Code {
    /// The code's number on the wire (0 is success and never a `Code`).
    pub fn to_wire(self) -> u32 {
        match self {
            Code::Cancelled => 1,
            Code::Unknown => 2,
            Code::InvalidArgument => 3,
            Code::DeadlineExceeded => 4,
            Code::NotFound => 5,
            Code::Overloaded => 8,
            Code::Unimplemented => 12,
            Code::Internal => 13,
            Code::Unavailable => 14,
            Code::MessageTooLarge => 100,
            Code::Other(n) => n,
        }
    }

    /// The code for a wire number; `None` for 0 (success).
    pub fn from_wire(n: u32) -> Option<Code> {
        Some(match n {
            0 => return None,
            1 => Code::Cancelled,
            2 => Code::Unknown,
            3 => Code::InvalidArgument,
            4 => Code::DeadlineExceeded,
            5 => Code::NotFound,
            8 => Code::Overloaded,
            12 => Code::Unimplemented,
            13 => Code::Internal,
            14 => Code::Unavailable,
            100 => Code::MessageTooLarge,
            n => Code::Other(n),
        })
    }

    /// A short name (metrics labels, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Code::Cancelled => "cancelled",
            Code::Unknown => "unknown",
            Code::InvalidArgument => "invalid_argument",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::NotFound => "not_found",
            Code::Overloaded => "overloaded",
            Code::Unimplemented => "unimplemented",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::MessageTooLarge => "message_too_large",
            Code::Other(_) => "other",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Code::Other(n) => write!(f, "status {n}"),
            c => f.write_str(c.name()),
        }
    }
}

/// A failed call: a [`Code`] and a message saying what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    message: String,
}

impl Status {
    /// A status with a message.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }
    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// [`Code::Cancelled`].
    pub fn cancelled(m: impl Into<String>) -> Status {
        Status::new(Code::Cancelled, m)
    }
    /// [`Code::InvalidArgument`].
    pub fn invalid_argument(m: impl Into<String>) -> Status {
        Status::new(Code::InvalidArgument, m)
    }
    /// [`Code::DeadlineExceeded`].
    pub fn deadline_exceeded(m: impl Into<String>) -> Status {
        Status::new(Code::DeadlineExceeded, m)
    }
    /// [`Code::NotFound`].
    pub fn not_found(m: impl Into<String>) -> Status {
        Status::new(Code::NotFound, m)
    }
    /// [`Code::Overloaded`].
    pub fn overloaded(m: impl Into<String>) -> Status {
        Status::new(Code::Overloaded, m)
    }
    /// [`Code::Unimplemented`].
    pub fn unimplemented(m: impl Into<String>) -> Status {
        Status::new(Code::Unimplemented, m)
    }
    /// [`Code::Internal`].
    pub fn internal(m: impl Into<String>) -> Status {
        Status::new(Code::Internal, m)
    }
    /// [`Code::Unavailable`].
    pub fn unavailable(m: impl Into<String>) -> Status {
        Status::new(Code::Unavailable, m)
    }
    /// [`Code::MessageTooLarge`].
    pub fn message_too_large(m: impl Into<String>) -> Status {
        Status::new(Code::MessageTooLarge, m)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_numbers_round_trip_and_unknown_ones_survive() {
        for c in [
            Code::Cancelled,
            Code::Unknown,
            Code::InvalidArgument,
            Code::DeadlineExceeded,
            Code::NotFound,
            Code::Overloaded,
            Code::Unimplemented,
            Code::Internal,
            Code::Unavailable,
            Code::MessageTooLarge,
            Code::Other(77),
        ] {
            assert_eq!(Code::from_wire(c.to_wire()), Some(c));
        }
        assert_eq!(Code::from_wire(0), None);
        let s = Status::overloaded("in-flight limit 8 reached");
        assert_eq!(s.to_string(), "overloaded: in-flight limit 8 reached");
        let e: Box<dyn std::error::Error> = Box::new(s);
        assert!(e.to_string().starts_with("overloaded"));
    }
}
