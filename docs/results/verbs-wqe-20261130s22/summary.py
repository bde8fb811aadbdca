# summary.py DIFF.cg MESSAGES: per-message totals of a cg_diff (Ir, D1/LL read and write misses)
import sys
ev = "Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw".split()
for l in open(sys.argv[1]):
    if l.startswith('summary:'):
        v = list(map(int, l.split()[1:]))
        print(' '.join(f'{e}={x / float(sys.argv[2]):.2f}' for e, x in zip(ev, v)))
