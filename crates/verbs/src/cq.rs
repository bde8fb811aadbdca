//! Completion queues and completion channels (`ibv_cq`, `ibv_comp_channel`).

use crate::context::Context;
use crate::cq_ring::{self, CqConsumer};
use crate::engine::{ChannelInner, CqNotify, Progress};
use crate::Error;
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use weft_link::wake::{poll_readable, EventFd};
use weft_transport::Completion;

/// A completion channel (`ibv_comp_channel`): where armed completion queues announce
/// new completions, so a thread can sleep instead of polling. Its file descriptor
/// ([`AsFd`]) is readable while events wait, for use in the caller's own poll loop.
#[derive(Debug, Clone)]
pub struct CompletionChannel {
    ctx: Context,
    pub(crate) inner: Arc<ChannelInner>,
}

impl CompletionChannel {
    /// A channel of `ctx`.
    pub fn new(ctx: &Context) -> Result<CompletionChannel, Error> {
        Ok(CompletionChannel {
            ctx: ctx.clone(),
            inner: Arc::new(ChannelInner {
                fd: EventFd::new().map_err(Error::Link)?,
                events: Mutex::new(VecDeque::new()),
            }),
        })
    }

    fn take(&self) -> Option<u32> {
        self.inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }

    /// Block until an armed queue has a completion (`ibv_get_cq_event`); returns the
    /// queue's id ([`CompletionQueue::id`]). With inline progress the wait drives the
    /// engine itself.
    pub fn get_cq_event(&self, timeout: Duration) -> Result<u32, Error> {
        let deadline = crate::deadline_after(timeout);
        // A miss after the descriptor read ready, and a wait that ends without an
        // event (a look without waiting included), settle it: neither this wait nor a
        // program's own poll of the descriptor spins on a stray count.
        let mut looked = false;
        loop {
            if let Some(id) = self.take() {
                return Ok(id);
            }
            if looked {
                self.inner.settle_if_empty();
                looked = false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.inner.settle_if_empty();
                return Err(Error::Timeout);
            }
            match self.ctx.progress_mode() {
                Progress::Thread => {
                    let shared = self.ctx.shared();
                    shared.app_blocks();
                    // Asleep: the engine thread must not wait for this thread's next
                    // poll on its doorbell alone (on shm, with no link descriptor,
                    // that watch let arrivals wait up to a quiet gap, 1 ms).
                    shared.app_sleeps();
                    let r = poll_readable(&[self.inner.fd.as_fd()], left);
                    shared.app_woke();
                    looked = r.map_err(Error::Link)? != 0;
                }
                Progress::Inline => {
                    if !self.ctx.progress() {
                        std::thread::yield_now();
                    }
                }
            }
        }
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

/// A completion queue (`ibv_cq`). Polling needs `&mut self`: one consumer at a time,
/// which is what makes the queue lock-free.
#[derive(Debug)]
pub struct CompletionQueue {
    ctx: Context,
    ring: CqConsumer,
    notify: Arc<CqNotify>,
    /// The queue's slot in the engine's slab (with `notify.id`: what a poll's own
    /// pass needs to put completions straight into the poll's vector).
    slot: usize,
    scratch: Vec<Completion>,
    acked: u64,
}

impl CompletionQueue {
    /// A queue for at least `depth` completions, optionally tied to a channel. weft
    /// never drops a completion for want of room: the queue's ring takes up to
    /// `depth` of them (at most 1024, so that a deep queue's ring stays in the cache),
    /// and any more wait in the engine in order until polling makes room.
    pub fn new(
        ctx: &Context,
        depth: usize,
        channel: Option<&CompletionChannel>,
    ) -> CompletionQueue {
        let (tx, rx) = cq_ring::ring(depth);
        let (notify, slot) = ctx
            .shared()
            .lock()
            .add_cq(tx, channel.map(|c| Arc::clone(&c.inner)));
        CompletionQueue {
            ctx: ctx.clone(),
            ring: rx,
            notify,
            slot,
            scratch: Vec::new(),
            acked: 0,
        }
    }

    /// This queue's id (what [`CompletionChannel::get_cq_event`] returns).
    pub fn id(&self) -> u32 {
        self.notify.id
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Append up to `max` completions to `out` (`ibv_poll_cq`); returns how many.
    /// An empty queue runs a progress pass first: with inline progress always; with an
    /// engine thread when that thread is not in a pass. An application that spins on
    /// its queues so makes the progress itself, and the engine thread stands by rather
    /// than spin beside it (see the crate's docs/verbs.md, "Progress"). That pass puts
    /// this queue's completions straight into `out` (up to `max`), not through the
    /// ring: the ring was empty, so they come in order.
    pub fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        let mut n = self.ring.pop_burst(out, max);
        if n == 0 {
            let (slot, id) = (self.slot, self.notify.id);
            n = match self.ctx.progress_mode() {
                Progress::Inline => self.ctx.shared().try_progress_into(slot, id, out, max),
                Progress::Thread => self.ctx.shared().assist(slot, id, out, max),
            };
            // One look for a poll that stays empty: the ring's tail, read inline,
            // before paying for a second burst call (~17 instructions of entry and
            // exit, callgrind). Ring entries of this pass came after those in `out`.
            if n < max && !self.ring.is_empty() {
                n += self.ring.pop_burst(out, max - n);
            }
        }
        if n > 0 && self.ctx.progress_mode() == Progress::Thread {
            self.ctx.shared().app_took_completions();
        }
        n
    }

    /// One completion, if any.
    pub fn poll_one(&mut self) -> Option<Completion> {
        let mut v = std::mem::take(&mut self.scratch);
        self.poll(&mut v, 1);
        let c = v.pop();
        self.scratch = v;
        c
    }

    /// Busy-poll until `n` completions arrived or `timeout` passed; returns what came.
    pub fn wait(&mut self, n: usize, timeout: Duration) -> Vec<Completion> {
        let deadline = crate::deadline_after(timeout);
        let mut out = Vec::with_capacity(n);
        while out.len() < n && Instant::now() < deadline {
            let want = n - out.len();
            if self.poll(&mut out, want) == 0 {
                std::hint::spin_loop();
            }
        }
        out
    }

    /// Arm the queue: the next completion fires an event on its channel
    /// (`ibv_req_notify_cq`). Completions already in the queue do not; poll after
    /// arming to catch them (the usual arm-then-poll loop).
    pub fn req_notify(&self) {
        self.notify.armed.store(true, Ordering::Release);
        // The engine publishes completions before it checks the flag; a completion
        // that raced with arming is found by the caller's poll after this call.
    }

    /// When the engine last fired this queue's channel ([`crate::monotonic_micros`]'s
    /// clock; 0: never). A thread that blocked on the channel learns from it how long
    /// it waited for the event and how long its wake-up took.
    pub fn fired_us(&self) -> u64 {
        self.notify.fired_us.load(Ordering::Relaxed)
    }

    /// Acknowledge `n` events taken from the channel (`ibv_ack_cq_events`).
    pub fn ack_events(&mut self, n: u32) {
        self.acked += u64::from(n);
    }

    /// Events acknowledged so far.
    pub fn events_acked(&self) -> u64 {
        self.acked
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        self.ctx.shared().lock().remove_cq(self.notify.id);
    }
}
