//! The shm ring mode in the simulator ([`crate::ring`]; [`super::Pair::use_rings`]):
//! one ring each way between the two endpoints, as an shm connection has. A ring
//! delivers in order, loses and corrupts nothing, and tells the producer when the
//! consumer released an item — after the consumer's transport answered it, and after
//! the consumer pushed the ERROR of a refusal onto its own ring. The consumer takes
//! items late by a seeded amount (a peer busy elsewhere), so releases, ERRORs and new
//! posts interleave in every order the contract allows. What the model does not do is
//! break the contract: that is the driver's part (the verbs engine's).

use super::Rng;
use crate::endpoint::Endpoint;
use crate::memory::VecMemory;
use crate::ring::RingTag;
use crate::time::Instant;
use crate::RingAnswer;
use std::collections::VecDeque;
use weft_wire::ring::{RingDescriptor, RingOp};

/// One direction: the producer's items, and the releases it has yet to read.
#[derive(Debug, Default)]
pub(crate) struct RingLine {
    /// Items in order: when the consumer takes it, its bytes, the producer's tag (none
    /// for an ERROR, which nobody tracks).
    items: VecDeque<(Instant, Vec<u8>, Option<RingTag>)>,
    /// Released tags, with when the producer can see the release.
    released: VecDeque<(Instant, RingTag)>,
    /// Tags the producer will never see released (the connection died).
    lost: Vec<RingTag>,
}

/// What the model counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RingStats {
    /// Items pushed (descriptors and ERRORs).
    pub items: u64,
    /// ERROR descriptors pushed by a consumer.
    pub errors: u64,
    /// Descriptors a consumer's transport executed.
    pub executed: u64,
    /// Descriptors it discarded (sent after a refused one, before the retry).
    pub discarded: u64,
    /// Items that did not parse, or that the consumer's transport took no answer for.
    pub dropped: u64,
}

/// The rings of a [`super::Pair`].
#[derive(Debug)]
pub(crate) struct Rings {
    /// A → B.
    pub ab: RingLine,
    /// B → A.
    pub ba: RingLine,
    /// Microseconds from a push (or release) to when the other side can see it.
    delay_us: u64,
    /// Up to this many more microseconds before the consumer takes an item.
    lag_us: u64,
    rng: Rng,
    pub stats: RingStats,
}

impl Rings {
    pub fn new(delay_us: u64, lag_us: u64, seed: u64) -> Rings {
        Rings {
            ab: RingLine::default(),
            ba: RingLine::default(),
            delay_us,
            lag_us,
            rng: Rng::new(seed),
            stats: RingStats::default(),
        }
    }

    /// When an item pushed now is taken: after the delay and a seeded lag, never
    /// before the item ahead of it.
    fn take_time(&mut self, now: Instant, line_last: Option<Instant>) -> Instant {
        let lag = if self.lag_us > 0 {
            self.rng.range(0, self.lag_us + 1)
        } else {
            0
        };
        let at = Instant(now.micros() + self.delay_us + lag);
        line_last.map_or(at, |l| at.max(l))
    }

    /// Push an item (a descriptor, tracked with `tag`, or an ERROR) onto the ring
    /// `a_to_b` names; returns when the consumer takes it.
    pub fn push(
        &mut self,
        a_to_b: bool,
        now: Instant,
        bytes: &[u8],
        tag: Option<RingTag>,
    ) -> Instant {
        let last = self.line(a_to_b).items.back().map(|i| i.0);
        let at = self.take_time(now, last);
        self.stats.items += 1;
        self.line(a_to_b).items.push_back((at, bytes.to_vec(), tag));
        at
    }

    fn line(&mut self, a_to_b: bool) -> &mut RingLine {
        if a_to_b {
            &mut self.ab
        } else {
            &mut self.ba
        }
    }

    /// The earliest time something on the rings becomes due.
    pub fn next_event(&self) -> Option<Instant> {
        [&self.ab, &self.ba]
            .iter()
            .flat_map(|l| {
                [
                    l.items.front().map(|i| i.0),
                    l.released.front().map(|r| r.0),
                ]
            })
            .flatten()
            .min()
    }

    /// The connection dies: every item not yet taken is gone, and the producer learns
    /// that its tracked items will never be released.
    pub fn kill(&mut self) {
        for l in [&mut self.ab, &mut self.ba] {
            let tags: Vec<RingTag> = l.items.drain(..).filter_map(|i| i.2).collect();
            l.lost.extend(tags);
        }
    }

    /// One side's ring work at `now`, in the contract's order: read the releases of
    /// its own items, take the peer's items that are due (answering each, an ERROR
    /// pushed before the release), then hand the releases in; then the losses.
    /// Returns whether anything happened.
    pub fn serve(&mut self, side_is_a: bool, ep: &mut Endpoint<VecMemory>, now: Instant) -> bool {
        let mut busy = false;
        // 1. The releases this side can see now (its own ring's consumer index).
        let mut released = Vec::new();
        {
            let own = self.line(side_is_a);
            while own.released.front().is_some_and(|r| r.0 <= now) {
                if let Some((_, tag)) = own.released.pop_front() {
                    released.push(tag);
                }
            }
        }
        // 2. The peer's items due now, in order.
        loop {
            let peer = self.line(!side_is_a);
            if peer.items.front().is_none_or(|i| i.0 > now) {
                break;
            }
            let Some((_, bytes, tag)) = peer.items.pop_front() else {
                break;
            };
            busy = true;
            // The release is seen no sooner than the ERROR it follows.
            let mut release_at = Instant(now.micros() + self.delay_us);
            match RingDescriptor::parse(&bytes) {
                Ok((d, _)) if matches!(d.op, RingOp::Error { .. }) => ep.ring_refused(now, &d),
                Ok((d, payload)) => match ep.ring_request(now, &d, payload) {
                    Some(RingAnswer::Executed) => self.stats.executed += 1,
                    Some(RingAnswer::Discarded) => self.stats.discarded += 1,
                    Some(RingAnswer::Refused { syndrome, .. }) => {
                        if let Some((reply, _)) = ep.ring_refusal(&d, syndrome) {
                            let mut b = [0u8; weft_wire::ring::HEADER_LEN];
                            if reply.emit(&mut b, 0).is_ok() {
                                self.stats.errors += 1;
                                let at = self.push(side_is_a, now, &b, None);
                                release_at = release_at.max(at);
                            }
                        }
                    }
                    None => self.stats.dropped += 1,
                },
                Err(_) => self.stats.dropped += 1,
            }
            // The release, after the answer (and its ERROR).
            if let Some(tag) = tag {
                let line = self.line(!side_is_a);
                let at = line
                    .released
                    .back()
                    .map_or(release_at, |r| r.0.max(release_at));
                line.released.push_back((at, tag));
            }
        }
        // 3. The releases read in step 1, after the ERRORs of step 2.
        for tag in released {
            busy = true;
            ep.ring_released(now, tag);
        }
        let lost = std::mem::take(&mut self.line(side_is_a).lost);
        for tag in lost {
            busy = true;
            ep.ring_lost(now, tag);
        }
        busy
    }
}
