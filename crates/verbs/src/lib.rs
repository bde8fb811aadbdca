//! weft-verbs: the RDMA verbs API over a software RNIC.
//!
//! Names follow ibverbs so RDMA users feel at home: open a [`Context`] by device name
//! (`"udp"` or `"shm"` for a loopback address of its own on RoCEv2's port 4791,
//! `"udp:198.18.0.1:4791"` for a given one; see [`DeviceConfig`]), allocate a [`ProtectionDomain`],
//! register [`MemoryRegion`]s, create [`CompletionQueue`]s (optionally with a
//! [`CompletionChannel`]), [`QueuePair`]s and [`SharedReceiveQueue`]s, move QPs
//! through their states with [`QueuePair::modify`] (or let the connection manager,
//! [`cm`], do it), post work requests and poll completions. Work requests,
//! completions and QP attributes are weft-transport's types, re-exported here.
//!
//! It owns: the API objects, the engine that runs the transport over a link (the
//! software RNIC, [`engine`]), memory registration ([`mr`], the only `unsafe` here,
//! with the link backends in weft-link), and the connection manager.
//!
//! It must not touch: packet formats (weft-wire) or protocol rules (weft-transport).
//!
//! # Hello, WRITE
//!
//! A complete two-process program (`examples/hello_write.rs`): run it once without
//! arguments (the server), then with the server's address (the client). The client
//! WRITEs a greeting into the server's memory; the server never posts a work request.
//!
//! ```text
//! cargo run -p weft-verbs --example hello_write                   # server
//! cargo run -p weft-verbs --example hello_write -- 127.0.0.1:18517 # client
//! ```
//!
#![doc = concat!("```no_run\n", include_str!("../examples/hello_write.rs"), "```")]
#![deny(unsafe_code)]

mod adapt;
pub mod cm;
mod context;
mod cq;
mod cq_ring;
pub mod engine;
mod error;
mod links;
pub mod mr;
mod qp;
mod recent;
mod wait;

pub use adapt::SpinBudget;
pub use context::{
    AddressHandle, Context, DeviceConfig, LinkKind, ProtectionDomain, ONE_COPY_CMA_MIN,
    ONE_COPY_MIN,
};
pub use cq::{CompletionChannel, CompletionQueue};
pub use engine::{ContextStats, EngineStats, Progress, MAX_INLINE};
pub use error::Error;
pub use mr::{MemoryRegion, PoolRegion, PullErrors, Pulls};
pub use qp::{QpInitAttr, QueuePair, SharedReceiveQueue};
pub use wait::{WaitMode, WaitStats, Waiter};
pub use weft_transport::{
    Access, Bringup, Completion, CongestionControl, CongestionState, DelayControl, Mtu, PostWr,
    QpAttr, QpAttrs, QpState, QpType, Recovery, RecvWr, RemoteAddr, SendWr, SgList, Sge, UdDest,
    WcOpcode, WcStatus, WrOp, GRH_LEN, INLINE_SGES,
};
pub use weft_wire::roce::Psn;

/// The clock of [`CompletionQueue::fired_us`]: `CLOCK_MONOTONIC` in µs.
pub fn monotonic_micros() -> u64 {
    weft_link::monotonic_micros()
}

/// The instant `timeout` from now; an unbounded timeout (`Duration::MAX`, "wait
/// forever") is taken as a year instead of overflowing `Instant`.
pub(crate) fn deadline_after(timeout: std::time::Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + std::time::Duration::from_secs(365 * 86_400))
}
