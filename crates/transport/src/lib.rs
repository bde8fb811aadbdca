//! weft-transport: the InfiniBand transport (RC, UC, UD) that RoCEv2 carries, as a
//! sans-IO state machine — the part of an RNIC that runs queue pairs.
//!
//! It owns: QP state and its transition table, segmentation by path MTU, PSNs, ACK
//! and NAK generation and handling, RNR and local-ACK timers, go-back-N and selective
//! (IRN) recovery, READ/atomic responder resources, the checks a responder makes
//! before a byte moves (rkey, protection domain, bounds, rights), completions,
//! congestion control (a delay-based window per RC QP, [`cc`]); and a
//! deterministic network simulator ([`sim`]) to prove it.
//!
//! It must not touch: sockets, threads, clocks (`now` is an argument: [`Instant`]),
//! randomness (the caller seeds everything), `unsafe`, or memory except through the
//! [`Memory`] trait. Packet formats come from weft-wire, never from here.
//!
//! The API is quinn-proto's: feed inputs with [`Endpoint::handle_packet`],
//! [`Endpoint::post_send`], [`Endpoint::post_recv`], [`Endpoint::handle_timeout`];
//! then drain [`Endpoint::poll_transmit`], [`Endpoint::poll_completion`] and read
//! [`Endpoint::poll_timeout`]. Completions may instead go to a [`CompletionSink`] as
//! they happen ([`Endpoint::with_sink`]).
#![forbid(unsafe_code)]

pub mod byref;
mod bytering;
pub mod cc;
mod ctx;
mod endpoint;
pub mod fastmap;
pub mod memory;
pub mod qp;
mod requester;
mod responder;
pub mod ring;
pub mod sim;
mod slots;
mod status;
mod time;
pub mod wr;

pub use byref::RemoteSpan;
pub use cc::{CongestionControl, CongestionState, DelayControl};
pub use endpoint::{
    Config, Endpoint, PostError, QpInit, SendQueue, Stats, Transmit, TxBuffers, ACK_DELAY_MARGIN,
    MAX_OVERHEAD,
};
pub use memory::{Access, AccessError, AtomicOp, Key, Memory, Region, VecMemory};
pub use qp::{Bringup, ModifyError, Mtu, QpAttr, QpAttrs, QpState, QpType, Recovery};
pub use responder::{grh_for, RingAnswer, GRH_LEN};
pub use ring::RingTag;
pub use time::{local_ack_timeout_micros, Instant};
pub use wr::{
    Completion, CompletionSink, PostWr, RecvWr, RemoteAddr, SendWr, SgList, Sge, UdDest, WcOpcode,
    WcStatus, WrOp, INLINE_SGES,
};
