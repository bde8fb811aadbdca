//! The QPs that transmitted in the engine's last few progress passes: their number
//! sets whether a pass is shared among several QPs and how long its scheduler round
//! is (see `Engine::transmit`).
//!
//! The count is exact (of slots, see [`Recent`]): a QP counts from the pass it
//! transmits in until `horizon` passes it. With a few QPs the set forgets old entries
//! by sweeping its list of counted QPs, which it does only once its oldest entry
//! expires. With thousands of QPs taking turns, some entry expires on nearly every
//! pass, and that sweep walked the whole set each time: the one per-pass cost found to grow with the number of QPs (about 600–780
//! instructions a message at 4096 QPs with one message each in flight, callgrind,
//! docs/results/verbs.md). Above [`LARGE`] QPs the set keeps its entries in pass
//! order as well, in a queue, and forgets them from the queue's front: the cost is
//! then that of the entries expiring, not of the set. Below [`SMALL`] it sweeps again
//! (a queue push per transmitting pass costs a ping-pong more than the sweep of a
//! handful of entries; last session's queue-only variant added ~160 instructions to
//! each round).

use std::collections::VecDeque;

/// Above this many QPs the set expires its entries through the queue.
const LARGE: usize = 64;
/// Below this many (after an expiry) it drops the queue and sweeps again. The gap
/// keeps a count near one bound from switching back and forth.
const SMALL: usize = 32;

/// A slot not counted.
const NONE: u64 = u64::MAX;

/// The QPs that transmitted recently, each with the last pass it did (passes never
/// go back). QPs are named by their slot in the transport's table
/// ([`weft_transport::Transmit::slot`]), not by number: a mark is an index, where a
/// hash of the QPN cost ~35 instructions a transmitting pass (callgrind). A slot is
/// reused after its QP is destroyed, so a QP that takes the slot of one that
/// transmitted within the horizon counts as the same QP until then: the count is of
/// slots, one lower than of QPs for at most `horizon` passes after such a reuse.
#[derive(Debug)]
pub(crate) struct Recent {
    /// Slot → the last pass its QP transmitted in ([`NONE`]: not counted).
    last: Vec<u64>,
    /// How many slots are counted.
    count: usize,
    /// Without the queue: the counted slots, in no order (what a sweep walks).
    members: Vec<u32>,
    /// Without the queue: a lower bound of the oldest counted pass (`u64::MAX` while
    /// none is), so a pass whose horizon has not reached it skips the sweep.
    oldest: u64,
    /// With many QPs: one `(pass, slot)` for each pass a QP transmitted in, in pass
    /// order. An entry whose QP transmitted again later is stale and only dropped.
    queue: Option<VecDeque<(u64, u32)>>,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent {
            last: Vec::new(),
            count: 0,
            members: Vec::new(),
            oldest: u64::MAX,
            queue: None,
        }
    }
}

impl Recent {
    /// How many QPs transmitted since the last [`Recent::expire`]'s horizon.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The QP in slot `slot` transmitted in pass `pass`. Always inlined: a flush's
    /// lone packet marks its QP, and left to itself the compiler put this out of line
    /// there after `Engine::flush` changed (15 instructions a ping-pong round,
    /// callgrind, `msg_rate … 1`).
    #[inline(always)]
    pub(crate) fn mark(&mut self, slot: u32, pass: u64) {
        match self.last.get_mut(slot as usize) {
            Some(p) if *p == pass => {}
            Some(p) if *p != NONE => {
                *p = pass;
                if let Some(q) = &mut self.queue {
                    q.push_back((pass, slot));
                }
            }
            _ => self.mark_new(slot, pass),
        }
    }

    #[cold]
    fn mark_new(&mut self, slot: u32, pass: u64) {
        let s = slot as usize;
        if s >= self.last.len() {
            self.last.resize(s + 1, NONE);
        }
        self.last[s] = pass;
        self.count += 1;
        self.oldest = self.oldest.min(pass);
        match &mut self.queue {
            Some(q) => q.push_back((pass, slot)),
            None if self.count > LARGE => {
                let last = &self.last;
                let mut q: Vec<(u64, u32)> = self
                    .members
                    .drain(..)
                    .map(|m| (last[m as usize], m))
                    .collect();
                q.push((pass, slot));
                q.sort_unstable();
                self.queue = Some(q.into());
            }
            None => self.members.push(slot),
        }
    }

    /// Forget the QPs whose last transmission was before pass `horizon`.
    #[inline]
    pub(crate) fn expire(&mut self, horizon: u64) {
        match &mut self.queue {
            None => {
                if self.oldest < horizon {
                    self.sweep(horizon);
                }
            }
            Some(_) => self.expire_queue(horizon),
        }
    }

    /// [`Recent::expire`] with the queue (many QPs): out of line, so that the few
    /// QPs' check above stays a compare at its callers (inlined with the queue's loop,
    /// it was a call of ~29 instructions in `Engine::flush`, callgrind).
    #[inline(never)]
    fn expire_queue(&mut self, horizon: u64) {
        let Some(q) = &mut self.queue else {
            return;
        };
        while let Some(&(p, slot)) = q.front() {
            if p >= horizon {
                break;
            }
            q.pop_front();
            let last = &mut self.last[slot as usize];
            if *last == p {
                *last = NONE;
                self.count -= 1;
            }
        }
        if self.count < SMALL {
            self.leave_queue();
        }
    }

    /// Back to sweeping: the queue goes, and the counted slots are listed again for
    /// the sweeps. A sweep walks that list, not the table of slots, so a table grown
    /// to thousands of QPs costs a sweep nothing (a sweep that walked a map's buckets
    /// had to shrink the map first: at 4096 QPs with one message each the posting
    /// side counts a few dozen QPs, since each post's flush is a pass, and swept
    /// thousands of empty buckets a pass).
    #[cold]
    fn leave_queue(&mut self) {
        self.queue = None;
        self.members.clear();
        self.oldest = u64::MAX;
        for (s, &p) in self.last.iter().enumerate() {
            if p != NONE {
                self.members.push(s as u32);
                self.oldest = self.oldest.min(p);
            }
        }
    }

    /// One walk: the expired entries go, and the oldest that stays is noted.
    fn sweep(&mut self, horizon: u64) {
        let mut oldest = u64::MAX;
        let last = &mut self.last;
        self.members.retain(|&m| {
            let p = &mut last[m as usize];
            let keep = *p >= horizon;
            if keep {
                oldest = oldest.min(*p);
            } else {
                *p = NONE;
            }
            keep
        });
        self.count = self.members.len();
        self.oldest = oldest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The count always equals that of a plain model (every QP with its last pass,
    /// counted while that pass is at or after the horizon), through growth past
    /// `LARGE`, shrinking below `SMALL` and growing again, with QPs marked several
    /// times a pass and in no particular order.
    #[test]
    fn the_count_is_exact_in_both_modes_and_across_the_switches() {
        const WINDOW: u64 = 16;
        let mut r = Recent::default();
        let mut model: HashMap<u32, u64> = HashMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut saw_queue, mut saw_sweep_after_queue) = (false, false);
        for pass in 0..7_500u64 {
            // Phases: few QPs, thousands, a few again, hundreds, a few.
            let (qps, marks) = match pass / 1_500 {
                0 => (8, 3),
                1 => (4_096, 200),
                2 => (20, 2),
                3 => (300, 40),
                _ => (8, 3),
            };
            let horizon = pass.saturating_sub(WINDOW);
            r.expire(horizon);
            model.retain(|_, p| *p >= horizon);
            assert_eq!(r.len(), model.len(), "pass {pass}");
            for _ in 0..rand() % (marks + 1) {
                let qpn = (rand() % qps) as u32;
                r.mark(qpn, pass);
                model.insert(qpn, pass);
            }
            assert_eq!(r.len(), model.len(), "pass {pass}, after its marks");
            saw_queue |= r.queue.is_some();
            saw_sweep_after_queue |= saw_queue && r.queue.is_none();
        }
        assert!(
            saw_queue && saw_sweep_after_queue,
            "both modes were not exercised"
        );
        // Back to sweeping, the list a sweep walks holds only the counted slots.
        assert!(r.queue.is_none() && r.members.len() == r.len());
    }

    /// With the queue, an expiry takes exactly the expired entries off the queue's
    /// front (every other QP stays counted), and a QP that transmitted again is not
    /// forgotten by its stale entry.
    #[test]
    fn with_many_qps_an_expiry_takes_exactly_the_expired_entries() {
        let mut r = Recent::default();
        for qpn in 0..4_096u32 {
            r.mark(qpn, u64::from(qpn));
        }
        let q = r.queue.as_ref().map_or(0, VecDeque::len);
        assert_eq!(q, 4_096);
        r.expire(100);
        assert_eq!(r.len(), 3_996);
        assert_eq!(r.queue.as_ref().map_or(0, VecDeque::len), 3_996);
        // QP 200 transmits again: its old entry goes stale, it stays counted.
        r.mark(200, 5_000);
        r.expire(201);
        assert_eq!(r.len(), 3_896);
        assert_eq!(r.last[200], 5_000);
    }
}
