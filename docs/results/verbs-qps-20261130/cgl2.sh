#!/bin/sh
# cgl2.sh BIN TAG: cache-simulated pair at 4096 x 16
B=$1; T=$2; cd /tmp/qps/cg
for c in 80000 240000; do
  flock -s /work/notes/quiet.lock valgrind --tool=callgrind --cache-sim=yes --LL=2097152,16,64 --callgrind-out-file=$T-l2-$c.out $B shm 64 600 $c 65536 4096 4096 > $T-l2-$c.txt 2>&1
done
echo done > $T-l2.done
