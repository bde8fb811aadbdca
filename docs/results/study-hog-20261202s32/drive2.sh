#!/bin/bash
T=/work/wt/s32-hog/docs/results/study-sat-20261201s24/trace.sh
for x in "hogN4 new shm" "hogM7 main shm" "hogM3 main udp" "hogN3 new udp" "hogM8 main shm" "hogN5 new shm"; do
  set -- $x
  bash $T $1 /tmp/s32hog/weft-$2 $3
done
