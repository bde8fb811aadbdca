#!/bin/bash
# Phased traces alternating main (M) and the change (N), each its own exclusive hold.
T=/work/wt/s32-hog/docs/results/study-sat-20261201s24/trace.sh
for x in "hogN1 new shm" "hogM4 main shm" "hogM5 main shm" "hogN2 new shm" "hogN3 new shm" "hogM6 main shm" \
         "hogN1 new udp" "hogM1 main udp" "hogM2 main udp" "hogN2 new udp"; do
  set -- $x
  bash $T $1 /tmp/s32hog/weft-$2 $3
done
