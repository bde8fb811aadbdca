//! A FIFO of bytes in one growable buffer: the requester's inline ring (the payloads
//! of inline WQEs, joining at the back when posted and leaving at the front when
//! they retire).
//!
//! It replaces a `VecDeque<u8>` whose `extend` from a slice the compiler put out of
//! line on the post path once the requester's `push` had more than one caller (ring
//! mode's doorbell): ~43 instructions a streamed 64 B inline SEND (callgrind,
//! docs/results/verbs-inline-20261202s35). Here the append is two bounded copies and
//! the growth is out of line and cold, so the append inlines wherever it is used.

/// A FIFO of bytes. The buffer's length is 0 or a power of two; the bytes are
/// `len` of them from `head`, wrapping.
#[derive(Debug, Default, Clone)]
pub(crate) struct ByteRing {
    buf: Vec<u8>,
    head: usize,
    len: usize,
}

impl ByteRing {
    /// The bytes held.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Append `data` at the back.
    #[inline(always)]
    pub(crate) fn extend(&mut self, data: &[u8]) {
        let n = data.len();
        if n == 0 {
            return;
        }
        if self.buf.len() - self.len < n {
            self.grow(n);
        }
        let cap = self.buf.len();
        let tail = (self.head + self.len) & (cap - 1);
        let first = n.min(cap - tail);
        self.buf[tail..tail + first].copy_from_slice(&data[..first]);
        if first < n {
            // (Tested: a copy of nothing is still a call of `memcpy`.)
            self.buf[..n - first].copy_from_slice(&data[first..]);
        }
        self.len += n;
    }

    /// Room for `n` more bytes: a buffer of the next power of two (at least 256 bytes),
    /// the bytes moved to its front.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let cap = (self.len + n).next_power_of_two().max(256);
        let mut buf = vec![0; cap];
        let (a, b) = self.as_slices();
        buf[..a.len()].copy_from_slice(a);
        buf[a.len()..a.len() + b.len()].copy_from_slice(b);
        self.buf = buf;
        self.head = 0;
    }

    /// The bytes, front first, in the two runs the wrap makes (the second may be
    /// empty).
    #[inline]
    pub(crate) fn as_slices(&self) -> (&[u8], &[u8]) {
        let end = self.head + self.len;
        if end <= self.buf.len() {
            (&self.buf[self.head..end], &[])
        } else {
            (&self.buf[self.head..], &self.buf[..end - self.buf.len()])
        }
    }

    /// Drop the `n` front bytes (all of them if fewer are held).
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.len -= n;
        self.head = if self.len == 0 {
            0
        } else {
            (self.head + n) & (self.buf.len() - 1)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::ByteRing;
    use std::collections::VecDeque;

    fn contents(r: &ByteRing) -> Vec<u8> {
        let (a, b) = r.as_slices();
        [a, b].concat()
    }

    /// Seeded random appends, consumptions and clears hold the same bytes, in the same
    /// order, as a `VecDeque<u8>` given the same operations; the buffer stays a power
    /// of two and never grows past twice what was ever held at once (plus the floor).
    #[test]
    fn behaves_as_a_deque_of_bytes_under_random_operations() {
        for seed in 1..=200u64 {
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let (mut ring, mut model) = (ByteRing::default(), VecDeque::new());
            let mut most = 0usize;
            let mut byte = 0u8;
            for _ in 0..300 {
                match next() % 10 {
                    0..=5 => {
                        let n = (next() % 300) as usize;
                        let data: Vec<u8> = (0..n)
                            .map(|_| {
                                byte = byte.wrapping_add(1);
                                byte
                            })
                            .collect();
                        ring.extend(&data);
                        model.extend(&data);
                    }
                    6..=8 => {
                        let n = (next() % 400) as usize;
                        ring.consume(n);
                        model.drain(..n.min(model.len()));
                    }
                    _ => {
                        let all = ring.len();
                        ring.consume(all);
                        model.clear();
                    }
                }
                most = most.max(model.len());
                assert_eq!(ring.len(), model.len(), "seed {seed}");
                assert_eq!(contents(&ring), model.iter().copied().collect::<Vec<_>>());
                let cap = ring.buf.len();
                assert!(cap == 0 || cap.is_power_of_two(), "seed {seed}: {cap}");
                assert!(cap <= (2 * most).max(256), "seed {seed}: {cap} for {most}");
            }
        }
    }

    #[test]
    fn an_append_that_wraps_splits_across_the_end() {
        let mut r = ByteRing::default();
        r.extend(&[1; 200]);
        r.consume(150);
        r.extend(&[2; 100]);
        let (a, b) = r.as_slices();
        assert_eq!((a.len(), b.len()), (106, 44));
        assert_eq!(contents(&r), [[1; 50].as_slice(), &[2; 100]].concat());
    }
}
