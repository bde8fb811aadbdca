//! Range nodes: the compressed 16-bit stride below the direct-indexed top level.
//!
//! A node covers the 65 536 values of one 16-bit slice of the address. Instead of
//! 65 536 slots it stores only where the answer *changes*: `n` entries, each a
//! start key (the first entry always starts at key 0, so its key is implicit) and a
//! slot. This is DXR's range table; what weft adds is the search: keys sit in
//! blocks of 32 (one 64-byte cache line) and a block is searched by comparing all
//! 32 lanes at once and counting the hits, which the compiler turns into a few
//! SIMD instructions without `unsafe`. Nodes with more than 33 entries get fence
//! levels above the keys (every 32nd key, recursively), an implicit B-tree of
//! fan-out 32, so any node is searched in at most 4 cache-line reads.
//!
//! Layout of a node inside a segment's `u16` blob, at offset `off`:
//!
//! ```text
//! [n-1] [fence levels, top first] [n-1 keys] [n values as (lo u16, hi u16)]
//! ```
//!
//! A value ("slot") is a `u32`: bit 31 set means "child node at this offset
//! relative to the root node of the top-level chunk" (IPv6 only; IPv4's single
//! node level always ends in leaves), clear means a leaf holding a next-hop index,
//! or [`NO_ROUTE`].
//!
//! This module owns the node format, its builder and its search; it knows nothing
//! about families, segments or updates.

/// Slot bit marking a child node (else the slot is a leaf).
pub(crate) const NODE: u32 = 1 << 31;
/// Leaf value meaning "no route covers this range".
pub(crate) const NO_ROUTE: u32 = NODE - 1;
/// Keys per block: one 64-byte cache line of `u16`.
pub(crate) const BLOCK: usize = 32;
/// Padding after the last node so that a 32-lane block read never runs past the end.
pub(crate) const PAD: usize = BLOCK + 1;

/// Row `len` forces lanes `len..32` to `u16::MAX`, so they can only count as
/// `<= x` when `x == u16::MAX` (handled by clamping the count to `len`).
static LANE_MASKS: [[u16; BLOCK]; BLOCK + 1] = lane_masks();

const fn lane_masks() -> [[u16; BLOCK]; BLOCK + 1] {
    let mut m = [[0u16; BLOCK]; BLOCK + 1];
    let mut len = 0;
    while len <= BLOCK {
        let mut j = len;
        while j < BLOCK {
            m[len][j] = u16::MAX;
            j += 1;
        }
        len += 1;
    }
    m
}

/// Number of keys `<= x` among the first `len` (1..=32) of `block`.
#[inline(always)]
fn count_le(block: &[u16; BLOCK], x: u16, len: usize) -> usize {
    // Branch-free over all 32 lanes. Lanes past `len` hold the next node's words
    // or padding; OR-ing them with a mask row (instead of comparing lane indexes,
    // which LLVM does not vectorise) keeps this to 4 loads, 4 compares and two
    // pmovmskb on baseline x86-64, no `unsafe` and no explicit SIMD.
    let mask = &LANE_MASKS[len];
    let mut c = 0usize;
    for (&k, &m) in block.iter().zip(mask) {
        c += usize::from((k | m) <= x);
    }
    c.min(len)
}

#[inline(always)]
fn block_at(blob: &[u16], at: usize) -> &[u16; BLOCK] {
    // The blob is padded by PAD, so this never fails for a well-formed node.
    blob[at..at + BLOCK]
        .try_into()
        .expect("node blob padded by PAD")
}

/// Sizes of the levels of a node with `keys` explicit keys, bottom (keys) first.
#[inline]
fn level_sizes(keys: usize) -> ([usize; 4], usize) {
    let mut sizes = [0usize; 4];
    sizes[0] = keys;
    let mut levels = 1;
    let mut s = keys;
    while s > BLOCK {
        s = s.div_ceil(BLOCK) - 1;
        sizes[levels] = s;
        levels += 1;
    }
    (sizes, levels)
}

/// Looks `x` up in the node at `off` and returns its slot.
#[inline(always)]
pub(crate) fn search(blob: &[u16], off: usize, x: u16) -> u32 {
    let keys = usize::from(blob[off]);
    let (i, values) = if keys <= BLOCK {
        // One block: the common case (more than 3 in 4 nodes of a full table).
        let i = if keys == 0 {
            0
        } else {
            count_le(block_at(blob, off + 1), x, keys)
        };
        (i, off + 1 + keys)
    } else {
        search_deep(blob, off, keys, x)
    };
    let v = values + 2 * i;
    u32::from(blob[v]) | (u32::from(blob[v + 1]) << 16)
}

#[inline(never)]
fn search_deep(blob: &[u16], off: usize, keys: usize, x: u16) -> (usize, usize) {
    let (sizes, levels) = level_sizes(keys);
    let mut level_off = off + 1;
    let mut j = 0usize;
    for l in (0..levels).rev() {
        let size = sizes[l];
        let start = BLOCK * j;
        let len = (size - start).min(BLOCK);
        j = start + count_le(block_at(blob, level_off + start), x, len);
        level_off += size;
    }
    (j, level_off)
}

/// One entry of a node under construction: start key and what lies there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    Leaf(u32),
    /// A child built from `intervals[from..to]`, with the previous interval's
    /// value carried in when the first interval does not start at the child's start.
    Child {
        from: usize,
        to: usize,
        carry: Option<u32>,
    },
}

/// Maximal runs of equal answer: `(start, value)`, sorted, starts distinct,
/// neighbouring values distinct, the first starting at the range's start.
pub(crate) type Intervals = Vec<(u128, u32)>;

/// Appends `(start, value)` to a run list, keeping it canonical.
#[inline]
pub(crate) fn push_interval(out: &mut Intervals, start: u128, value: u32) {
    if let Some(last) = out.last_mut() {
        if last.0 == start {
            last.1 = value;
            let n = out.len();
            if n >= 2 && out[n - 2].1 == value {
                out.pop();
            }
            return;
        }
        if last.1 == value {
            return;
        }
    }
    out.push((start, value));
}

/// Sweeps prefixes into intervals over `[lo, hi]` (inclusive).
///
/// `prefixes` are `(first, last, value)` sorted by `first` ascending then by
/// length ascending (so a more specific prefix with the same start comes later),
/// and every one overlaps `[lo, hi]`: it either covers `lo` or starts inside.
pub(crate) fn sweep(
    prefixes: impl IntoIterator<Item = (u128, u128, u32)>,
    lo: u128,
    hi: u128,
) -> Intervals {
    let mut out = Intervals::new();
    // Stack of (last, value); the bottom is "no route" over the whole range.
    let mut stack: Vec<(u128, u32)> = vec![(hi, NO_ROUTE)];
    out.push((lo, NO_ROUTE));
    for (first, last, value) in prefixes {
        let first_c = first.max(lo);
        while let Some(&(top_last, _)) = stack.last() {
            if top_last >= first_c || stack.len() == 1 {
                break;
            }
            stack.pop();
            let under = stack.last().map_or(NO_ROUTE, |t| t.1);
            push_interval(&mut out, top_last + 1, under);
        }
        stack.push((last.min(hi), value));
        push_interval(&mut out, first_c, value);
    }
    while stack.len() > 1 {
        let (top_last, _) = stack.pop().unwrap_or((hi, NO_ROUTE));
        if top_last < hi {
            let under = stack.last().map_or(NO_ROUTE, |t| t.1);
            push_interval(&mut out, top_last + 1, under);
        }
    }
    out
}

/// Builds the node for `iv` (canonical intervals covering `[lo, lo + 2^span)`,
/// at least two of them, `span` a multiple of 16 and at least 16), appending it and
/// its children to `out`. Returns the node's offset relative to `root`.
pub(crate) fn build(
    out: &mut Vec<u16>,
    root: usize,
    iv: &[(u128, u32)],
    lo: u128,
    span: u32,
) -> u32 {
    let mut stack = Vec::new();
    build_rec(out, root, &mut stack, None, iv, lo, span)
}

/// [`build`] over the sequence `[(lo, carry)] + iv` (or just `iv`), with the
/// entries of every node under construction kept on one shared `stack`: a
/// chunk with thousands of child nodes (2001::/16) is rebuilt on every update
/// there, and per-node allocations were most of that time.
fn build_rec(
    out: &mut Vec<u16>,
    root: usize,
    stack: &mut Vec<(u16, Entry)>,
    carry: Option<u32>,
    iv: &[(u128, u32)],
    lo: u128,
    span: u32,
) -> u32 {
    let off = usize::from(carry.is_some());
    let n = iv.len() + off;
    let at = |i: usize| match carry {
        Some(c) if i == 0 => (lo, c),
        _ => iv[i - off],
    };
    debug_assert!(n >= 2 && span >= 16 && span % 16 == 0);
    let shift = span - 16;
    let key = |p: u128| ((p - lo) >> shift) as u16;
    let sub = |k: u16| lo + (u128::from(k) << shift);
    let base = stack.len();
    let push = |stack: &mut Vec<(u16, Entry)>, k: u16, e: Entry| {
        if stack.len() > base {
            if let (Some((_, Entry::Leaf(prev))), Entry::Leaf(v)) = (stack.last(), e) {
                if *prev == v {
                    return;
                }
            }
        }
        stack.push((k, e));
    };
    let mut i = 0;
    while i < n {
        let s = at(i).0;
        let k = key(s);
        let sub_lo = sub(k);
        let sub_last = sub_lo + ((1u128 << shift) - 1);
        let mut j = i + 1;
        while j < n && at(j).0 <= sub_last {
            j += 1;
        }
        let aligned = s == sub_lo;
        if aligned && j == i + 1 {
            push(stack, k, Entry::Leaf(at(i).1));
        } else {
            let carry = if aligned { None } else { Some(at(i - 1).1) };
            push(
                stack,
                k,
                Entry::Child {
                    from: i,
                    to: j,
                    carry,
                },
            );
        }
        // The last interval of this sub-range runs on into the next key unless the
        // next interval starts there or inside it (then the next round handles it).
        if k < u16::MAX && (j == n || key(at(j).0) > k + 1) {
            push(stack, k + 1, Entry::Leaf(at(j - 1).1));
        }
        i = j;
    }
    let me = out.len();
    let count = stack.len() - base;
    let nkeys = count - 1;
    let (sizes, levels) = level_sizes(nkeys);
    out.push(nkeys as u16);
    if levels > 1 {
        // Fence levels, top first: level l+1 holds every 32nd entry of level l from 32.
        let keys: Vec<u16> = stack[base + 1..].iter().map(|e| e.0).collect();
        let mut lvls: Vec<Vec<u16>> = vec![keys];
        for l in 1..levels {
            let below = &lvls[l - 1];
            let this: Vec<u16> = (1..=sizes[l]).map(|b| below[b * BLOCK]).collect();
            lvls.push(this);
        }
        for l in (1..levels).rev() {
            out.extend_from_slice(&lvls[l]);
        }
    }
    out.extend(stack[base + 1..].iter().map(|e| e.0));
    let values_at = out.len();
    out.resize(values_at + 2 * count, 0);
    for idx in 0..count {
        let (k, e) = stack[base + idx];
        let slot = match e {
            Entry::Leaf(v) => v,
            Entry::Child {
                from,
                to,
                carry: child_carry,
            } => {
                let child_lo = sub(k);
                // The child's sequence: its carry (if its first interval starts
                // before it), then ours from `from` to `to`, where our own carry
                // (index 0) becomes the child's carry.
                let (c, slice) = if carry.is_some() && from == 0 {
                    (carry, &iv[..to - 1])
                } else {
                    (child_carry, &iv[from - off..to - off])
                };
                NODE | build_rec(out, root, stack, c, slice, child_lo, shift)
            }
        };
        out[values_at + 2 * idx] = slot as u16;
        out[values_at + 2 * idx + 1] = (slot >> 16) as u16;
    }
    stack.truncate(base);
    (me - root) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob_of(iv: &[(u128, u32)], span: u32) -> (Vec<u16>, u32) {
        let mut out = Vec::new();
        let off = build(&mut out, 0, iv, 0, span);
        out.resize(out.len() + PAD, u16::MAX);
        (out, off)
    }

    #[test]
    fn one_block_node() {
        let iv = vec![(0, 7), (10, 8), (0x8000, 9), (0xffff, 10)];
        let (b, off) = blob_of(&iv, 16);
        assert_eq!(off, 0);
        assert_eq!(search(&b, 0, 0), 7);
        assert_eq!(search(&b, 0, 9), 7);
        assert_eq!(search(&b, 0, 10), 8);
        assert_eq!(search(&b, 0, 0x7fff), 8);
        assert_eq!(search(&b, 0, 0x8000), 9);
        assert_eq!(search(&b, 0, 0xfffe), 9);
        assert_eq!(search(&b, 0, 0xffff), 10);
    }

    #[test]
    fn deep_nodes_every_size() {
        // Sizes around each level boundary: 33, 1024+1, 32*33+1 ... up to a full node.
        for &n in &[
            2usize, 32, 33, 34, 64, 65, 1024, 1025, 1056, 1057, 5000, 33_000, 65_536,
        ] {
            let step = (65_536 / n) as u128;
            let iv: Vec<(u128, u32)> = (0..n).map(|i| (i as u128 * step, i as u32)).collect();
            let (b, off) = blob_of(&iv, 16);
            for (i, &(s, v)) in iv.iter().enumerate() {
                assert_eq!(search(&b, off as usize, s as u16), v, "n={n} first of {i}");
                let last = iv.get(i + 1).map_or(0xffff, |x| x.0 - 1);
                assert_eq!(
                    search(&b, off as usize, last as u16),
                    v,
                    "n={n} last of {i}"
                );
            }
        }
    }

    #[test]
    fn sweep_nests_and_merges() {
        // 0..=255 -> 1, 16..=31 -> 2, 16..=17 -> 3, 200..=255 -> 1 (same as parent: merges)
        let p = vec![(0, 255, 1), (16, 31, 2), (16, 17, 3), (200, 255, 1)];
        let iv = sweep(p, 0, 1023);
        assert_eq!(iv, vec![(0, 1), (16, 3), (18, 2), (32, 1), (256, NO_ROUTE)]);
    }

    #[test]
    fn two_level_child_nodes() {
        // span 32: a boundary inside key 5's sub-range needs a child node.
        let iv = vec![(0, 1), ((5 << 16) + 7, 2), ((5 << 16) + 9, 3), (6 << 16, 4)];
        let (b, off) = blob_of(&iv, 32);
        let find = |a: u32| {
            let s = search(&b, off as usize, (a >> 16) as u16);
            if s & NODE != 0 {
                search(&b, (s & !NODE) as usize, a as u16)
            } else {
                s
            }
        };
        assert_eq!(find(0), 1);
        assert_eq!(find((5 << 16) + 6), 1);
        assert_eq!(find((5 << 16) + 7), 2);
        assert_eq!(find((5 << 16) + 8), 2);
        assert_eq!(find((5 << 16) + 9), 3);
        assert_eq!(find((5 << 16) + 0xffff), 3);
        assert_eq!(find(6 << 16), 4);
        assert_eq!(find(u32::MAX), 4);
    }
}
