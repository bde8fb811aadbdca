//! The QP table: values in slots of a vector, found by key through a hash index.
//!
//! A lookup by key is the index's hash probe and then the slot; a lookup by slot is
//! one bounds-checked index. The endpoint's own queues (the transmit queue, the
//! queue of owed ACKs) name QPs by slot, and a caller that keeps a QP's slot (the
//! verbs `QueuePair`) names it by slot and number ([`Slots::get_mut_at`]): the number
//! is checked against the slot's, and a slot that holds another QP (or none) falls
//! back to the lookup by number, so a stale or wrong slot changes nothing but the
//! cost. The hash probe was ~25–45 instructions of every post, every transmit turn
//! and every receive post (callgrind, `msg_rate`; docs/results/verbs.md).
//!
//! A freed slot is reused by the next insert; slots are never shrunk (a QP table's
//! high-water mark, one `Option` of a QP each).

use crate::fastmap::FastMap;

/// Values keyed by `u32`, kept in slots.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    slots: Vec<Option<(u32, T)>>,
    free: Vec<u32>,
    index: FastMap<u32, u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            index: FastMap::default(),
        }
    }
}

impl<T> Slots<T> {
    /// The slot of `key`.
    #[inline]
    pub(crate) fn slot_of(&self, key: u32) -> Option<u32> {
        self.index.get(&key).copied()
    }

    pub(crate) fn contains_key(&self, key: u32) -> bool {
        self.index.contains_key(&key)
    }

    /// The slot the next [`Slots::insert`] takes.
    pub(crate) fn vacant(&self) -> u32 {
        match self.free.last() {
            Some(&s) => s,
            None => u32::try_from(self.slots.len()).expect("QP slots fit u32"),
        }
    }

    /// Insert `value` under `key` (not present); returns its slot.
    pub(crate) fn insert(&mut self, key: u32, value: T) -> u32 {
        debug_assert!(!self.index.contains_key(&key));
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some((key, value));
                s
            }
            None => {
                self.slots.push(Some((key, value)));
                u32::try_from(self.slots.len() - 1).expect("QP slots fit u32")
            }
        };
        self.index.insert(key, slot);
        slot
    }

    /// Remove `key`'s value; its slot is free for the next insert.
    pub(crate) fn remove(&mut self, key: u32) -> Option<(u32, T)> {
        let slot = self.index.remove(&key)?;
        let (_, value) = self.slots[slot as usize].take()?;
        self.free.push(slot);
        Some((slot, value))
    }

    #[inline]
    pub(crate) fn get(&self, key: u32) -> Option<&T> {
        let slot = self.slot_of(key)?;
        self.slots[slot as usize].as_ref().map(|(_, v)| v)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, key: u32) -> Option<&mut T> {
        let slot = self.slot_of(key)?;
        self.slots[slot as usize].as_mut().map(|(_, v)| v)
    }

    /// The value in `slot`, whatever its key.
    #[inline]
    pub(crate) fn at_mut(&mut self, slot: u32) -> Option<&mut T> {
        self.slots.get_mut(slot as usize)?.as_mut().map(|(_, v)| v)
    }

    /// `key`'s value, looked for first in `slot` (a hint: a slot that holds another
    /// key, or none, or is out of range, falls back to [`Slots::get_mut`]).
    #[inline]
    pub(crate) fn get_mut_at(&mut self, slot: u32, key: u32) -> Option<&mut T> {
        let hit = matches!(self.slots.get(slot as usize), Some(Some((k, _))) if *k == key);
        if hit {
            self.at_mut(slot)
        } else {
            self.get_mut(key)
        }
    }

    /// The values, in slot order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_hints_fall_back() {
        let mut s: Slots<&str> = Slots::default();
        let a = s.insert(10, "a");
        let b = s.insert(20, "b");
        assert_ne!(a, b);
        assert_eq!(s.get(10), Some(&"a"));
        assert_eq!(s.get_mut_at(a, 10).copied(), Some("a"));
        // A wrong hint finds the key by its number.
        assert_eq!(s.get_mut_at(b, 10).copied(), Some("a"));
        assert_eq!(s.get_mut_at(99, 20).copied(), Some("b"));
        assert_eq!(s.remove(10), Some((a, "a")));
        assert_eq!(s.get_mut_at(a, 10), None);
        assert_eq!(s.at_mut(a), None);
        // The freed slot goes to the next key; the old key's hint no longer finds it.
        assert_eq!(s.vacant(), a);
        let c = s.insert(30, "c");
        assert_eq!(c, a);
        assert_eq!(s.get_mut_at(c, 10), None);
        assert_eq!(s.get_mut_at(c, 30).copied(), Some("c"));
        assert_eq!(s.values().count(), 2);
        assert!(s.contains_key(20) && !s.contains_key(10));
        assert_eq!(s.slot_of(30), Some(c));
        assert_eq!(s.vacant(), 2);
    }
}
