#!/bin/bash
# runall.sh : the order this session ran them (each run its own exclusive hold).
D=$(dirname $0); T=$D/../study-sat-20261201s24/trace.sh
mkdir -p /tmp/sat/tr
$D/probe.sh 4 $D/probe.jsonl 2
$D/sat.sh 6 $D/sat.jsonl
for r in 1 2 3; do
  if (( r % 2 )); then bash $T L3B$r /tmp/l3/base-weft udp; bash $T L3N$r /tmp/l3/new-weft udp
  else bash $T L3N$r /tmp/l3/new-weft udp; bash $T L3B$r /tmp/l3/base-weft udp; fi
done
