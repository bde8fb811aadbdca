T=$1; F=$(git rev-parse --show-toplevel)/docs/results/verbs-instr-20261130/fdiff.py
cd /tmp/ins2/cg && python3 $F $T-s10k.out $T-s60k.out 50000 45 > /tmp/ins2/pf-s-$T.txt; python3 $F $T-l2k.out $T-l12k.out 10000 50 > /tmp/ins2/pf-l-$T.txt
