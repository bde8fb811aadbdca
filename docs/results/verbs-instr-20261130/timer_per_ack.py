#!/usr/bin/env python3
# timer_per_ack.py TAG...: B-tree (timer set) and allocator self instructions in TAG-l12k.out,
# divided by the ACKs msg_rate printed (TAG-l12k.stdout), both sides together.
import subprocess, sys, re
for f in sys.argv[1:]:
    out = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', f'{f}-l12k.out'],
                         capture_output=True, text=True).stdout
    tot = 0
    for l in out.splitlines():
        m = re.match(r'\s*([\d,]+)\s+\(', l)
        if m and re.search(r'dying_next|btree::remove|split_off|_int_free|malloc.c:malloc |malloc.c:free |'
                           r'Sched::refile|btree/(node|search|navigate|map|set|fix|append)\.rs', l):
            tot += int(m.group(1).replace(',', ''))
    acks = sum(int(m.group(1)) for l in open(f'{f}-l12k.stdout') for m in [re.search(r'acks_sent (\d+)', l)] if m)
    print(f, 'timer-set+alloc instr', tot, 'acks', acks, 'per ack', round(tot / acks, 1))
