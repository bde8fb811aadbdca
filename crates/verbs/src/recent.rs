//! The QPs that transmitted in the engine's last few progress passes: their number
//! sets whether a pass is shared among several QPs and how long its scheduler round
//! is (see `Engine::transmit`).
//!
//! The count is exact: a QP counts from the pass it transmits in until `horizon`
//! passes it. With a few QPs the set forgets old entries by sweeping its map, which
//! it does only once its oldest entry expires. With thousands of QPs taking turns,
//! some entry expires on nearly every pass, and that sweep walked the whole map each
//! time: the one per-pass cost found to grow with the number of QPs (about 600–780
//! instructions a message at 4096 QPs with one message each in flight, callgrind,
//! docs/results/verbs.md). Above [`LARGE`] QPs the set keeps its entries in pass
//! order as well, in a queue, and forgets them from the queue's front: the cost is
//! then that of the entries expiring, not of the map. Below [`SMALL`] it sweeps again
//! (a queue push per transmitting pass costs a ping-pong more than the sweep of a
//! handful of entries; last session's queue-only variant added ~160 instructions to
//! each round).

use std::collections::VecDeque;
use weft_transport::fastmap::FastMap;

/// Above this many QPs the set expires its entries through the queue.
const LARGE: usize = 64;
/// Below this many (after an expiry) it drops the queue and sweeps again. The gap
/// keeps a count near one bound from switching back and forth.
const SMALL: usize = 32;

/// The QPs that transmitted recently, each with the last pass it did (passes never
/// go back).
#[derive(Debug)]
pub(crate) struct Recent {
    /// QP number → the last pass it transmitted in.
    last: FastMap<u32, u64>,
    /// Without the queue: a lower bound of the oldest pass in `last` (`u64::MAX` while
    /// it is empty), so a pass whose horizon has not reached it skips the sweep.
    oldest: u64,
    /// With many QPs: one `(pass, qpn)` for each pass a QP transmitted in, in pass
    /// order. An entry whose QP transmitted again later is stale and only dropped.
    queue: Option<VecDeque<(u64, u32)>>,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent {
            last: FastMap::default(),
            oldest: u64::MAX,
            queue: None,
        }
    }
}

impl Recent {
    /// How many QPs transmitted since the last [`Recent::expire`]'s horizon.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.last.len()
    }

    /// QP `qpn` transmitted in pass `pass`.
    #[inline]
    pub(crate) fn mark(&mut self, qpn: u32, pass: u64) {
        match self.last.get_mut(&qpn) {
            Some(p) => {
                if *p != pass {
                    *p = pass;
                    if let Some(q) = &mut self.queue {
                        q.push_back((pass, qpn));
                    }
                }
            }
            None => self.mark_new(qpn, pass),
        }
    }

    #[cold]
    fn mark_new(&mut self, qpn: u32, pass: u64) {
        self.last.insert(qpn, pass);
        self.oldest = self.oldest.min(pass);
        match &mut self.queue {
            Some(q) => q.push_back((pass, qpn)),
            None if self.last.len() > LARGE => {
                let mut q: Vec<(u64, u32)> = self.last.iter().map(|(&n, &p)| (p, n)).collect();
                q.sort_unstable();
                self.queue = Some(q.into());
            }
            None => {}
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
            Some(q) => {
                while let Some(&(p, qpn)) = q.front() {
                    if p >= horizon {
                        break;
                    }
                    q.pop_front();
                    if self.last.get(&qpn) == Some(&p) {
                        self.last.remove(&qpn);
                    }
                }
                if self.last.len() < SMALL {
                    self.leave_queue();
                }
            }
        }
    }

    /// Back to sweeping: the queue goes, and so does the room the map grew while it
    /// held thousands of QPs. A sweep walks the map's buckets, not its entries, so a
    /// map left that large made every later sweep as dear as the count once was (at
    /// 4096 QPs with one message each the posting side counts a few dozen QPs, since
    /// each post's flush is a pass, and swept thousands of empty buckets a pass).
    #[cold]
    fn leave_queue(&mut self) {
        self.queue = None;
        self.last.shrink_to(2 * LARGE);
        self.oldest = self.last.values().copied().min().unwrap_or(u64::MAX);
    }

    /// One walk: the expired entries go, and the oldest that stays is noted.
    fn sweep(&mut self, horizon: u64) {
        let mut oldest = u64::MAX;
        self.last.retain(|_, &mut p| {
            let keep = p >= horizon;
            if keep {
                oldest = oldest.min(p);
            }
            keep
        });
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
        // Back to sweeping, the map is small again, not as large as it grew.
        assert!(r.queue.is_none() && r.last.capacity() <= 4 * LARGE);
    }

    /// With the queue, an expiry takes exactly the expired entries off the queue's
    /// front (the map keeps every other QP), and a QP that transmitted again is not
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
        assert!(r.last.contains_key(&200));
    }
}
