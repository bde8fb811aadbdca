#!/usr/bin/env python3
# classify_recv.py ANNOT: post_recv's per-call instructions by part (rules on the inlined
# source line / function label; approximate: a label can run on past its part)
import re, sys, collections
rules=[
 ('engine mutex (try_lock, two poison checks, unlock)', r'atomic\.rs|panicking|poison|futex|mutex|count_is_zero|unlock|guard'),
 ('QP lookup in the transport (HashMap get_mut)', r'map\.rs|tag\.rs|mod\.rs:2492|probe_seq|sse2|bitmask|nonzero|find_inner|mod\.rs:2073|mut_ptr\.rs:1072|cmp\.rs:1878|mod\.rs:434|mod\.rs:1261|uint_macros\.rs:2533'),
 ('VecDeque push_back (the 48-byte request copied in)', r'mod\.rs:(1917|2229|3540|612|617|237|2224|1634)|uint_macros\.rs:2457|mut_ptr\.rs:961|push_back'),
 ('the array iterator (moved in, next, peek, drop)', r'iter\.rs|index_range|maybe_uninit|into_iter|next|assume_init|clone'),
 ('checks: rq drained, app_drives, SRQ, state, SGEs, room', r'qp\.rs:(31|402)|spsc\.rs|endpoint\.rs:9(55|58|63|64|67|72)|cmp\.rs:1076|wr\.rs:89|deref|uint_macros\.rs:923'),
 ('prologue, epilogue, note_app_post, result', r'.'),
]
c=collections.Counter(); tot=0
for l in open(sys.argv[1]):
    n=float(l.split()[0]); tot+=n
    for name,rx in rules:
        if re.search(rx,l): c[name]+=n; break
for k,v in c.most_common(): print(f"{v:5.0f}  {k}")
print(f"{tot:5.0f}  total")
