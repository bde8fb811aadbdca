//! The naive longest-prefix match that the fast tables are tested against.
//!
//! One hash map per prefix length; a lookup tries the lengths present from the
//! longest down and returns the first hit. Obviously correct, slow, and sharing no
//! code with the table (not even the sweep that turns prefixes into ranges).

use std::collections::HashMap;

use crate::{Address, NextHop, Prefix};

/// Naive reference table.
#[derive(Debug, Clone, Default)]
pub struct Reference<A: Address> {
    by_len: HashMap<u8, HashMap<A, NextHop>>,
    /// Lengths present, longest first.
    lens: Vec<u8>,
}

impl<A: Address + std::hash::Hash> Reference<A> {
    /// Empty reference.
    pub fn new() -> Self {
        Reference {
            by_len: HashMap::new(),
            lens: Vec::new(),
        }
    }

    /// From routes (a prefix given twice keeps its last next hop).
    pub fn from_routes(routes: &[(Prefix<A>, NextHop)]) -> Self {
        let mut r = Self::new();
        for &(p, nh) in routes {
            r.insert(p, nh);
        }
        r
    }

    /// Adds or replaces a route; returns the old next hop.
    pub fn insert(&mut self, p: Prefix<A>, nh: NextHop) -> Option<NextHop> {
        let old = self.by_len.entry(p.len()).or_default().insert(p.addr(), nh);
        self.refresh_lens();
        old
    }

    /// Withdraws a route; returns its next hop.
    pub fn remove(&mut self, p: Prefix<A>) -> Option<NextHop> {
        let old = self
            .by_len
            .get_mut(&p.len())
            .and_then(|m| m.remove(&p.addr()));
        self.refresh_lens();
        old
    }

    fn refresh_lens(&mut self) {
        self.by_len.retain(|_, m| !m.is_empty());
        self.lens = self.by_len.keys().copied().collect();
        self.lens.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.by_len.values().map(HashMap::len).sum()
    }

    /// True if there are no routes.
    pub fn is_empty(&self) -> bool {
        self.by_len.is_empty()
    }

    /// Longest-prefix match by trying every length present.
    pub fn lookup(&self, a: A) -> Option<NextHop> {
        for &len in &self.lens {
            let p = Prefix::new(a, len).ok()?;
            if let Some(&nh) = self.by_len.get(&len).and_then(|m| m.get(&p.addr())) {
                return Some(nh);
            }
        }
        None
    }
}
