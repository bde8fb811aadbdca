#!/bin/bash
# runall2.sh : base B against N2 (hand_back + the asleep post's own flush), each run
# its own exclusive hold; probe2.jsonl, sat.jsonl, traces tagged L3B/L3N (renamed to
# B*/N* under tr/ for ab2.py).
D=$(dirname $0); T=$D/../study-sat-20261201s24/trace.sh
mkdir -p /tmp/sat/tr
export NBIN=/tmp/l3/n2-weft
$D/probe.sh 4 $D/probe2.jsonl
$D/sat.sh 6 $D/sat.jsonl
for r in 1 2 3; do
  if (( r % 2 )); then bash $T L3B$r /tmp/l3/base-weft udp; bash $T L3N$r $NBIN udp
  else bash $T L3N$r $NBIN udp; bash $T L3B$r /tmp/l3/base-weft udp; fi
done
bash $T L3B4 /tmp/l3/base-weft shm; bash $T L3N4 $NBIN shm
