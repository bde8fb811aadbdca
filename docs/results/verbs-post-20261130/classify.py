#!/usr/bin/env python3
# classify.py ANNOT: post_send's per-call instructions by part (rules on source line / inlined fn)
import sys, re, collections
rules = [
 ('engine lock (try_lock, poison checks, unlock)', r'atomic\.rs|panicking|poison|futex|mutex|count_is_zero|unlock|drop<weft_verbs::engine::Engine>|guard'),
 ('QP lookup (HashMap get_mut, send_queue/split, room)', r'map\.rs|tag\.rs|mod\.rs:2492|probe_seq|sse2|bitmask|nonzero|find_inner|mut_ptr|cmp\.rs:1878|mod\.rs:434|endpoint\.rs:(838|450)|slice\.rs:452|saturating_sub|room<'),
 ('transport post_one (inlined) + call to Requester::push', r'endpoint\.rs|post_one|wr\.rs:2(24|32)|new<u8>|current_memory'),
 ('check_send (incl. sg_len)', r'qp\.rs:4[2-5]\d|check_send|wr\.rs:(89|90)|macros\.rs|accum|fold<|deref'),
 ('inline gather call', r'engine\.rs:9(19|2\d)|map_err<usize|as_slice|non_null<alloc'),
 ('flush decision + last_post_pass', r'qp\.rs:2(6\d|7\d)|max<usize>|saturating_add'),
 ('Result out + epilogue/prologue', r'qp\.rs:(214|30[0-9]|225)|qp\.rs:305|pop |push  |ret'),
 ('posted() (note_app_post, inline-progress counter)', r'engine\.rs:1610|note_app_post|qp\.rs:31[4-9]'),
]
c = collections.Counter(); tot = 0
for l in open(sys.argv[1]):
    n = float(l.split()[0]); tot += n
    for name, rx in rules:
        if re.search(rx, l): c[name] += n; break
    else: c['other (list/iterator/refused Vec/loop set-up, args)'] += n
for k, v in c.most_common(): print(f"{v:6.0f}  {k}")
print(f"{tot:6.0f}  total")
