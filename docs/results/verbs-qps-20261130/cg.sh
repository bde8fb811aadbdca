#!/bin/sh
# usage: cg.sh BIN TAG  -> runs the callgrind pairs
B=$1; T=$2; cd /tmp/qps/cg
for a in "10000 256 1 1" "60000 256 1 1" "80000 65536 4096 4096" "240000 65536 4096 4096" "5000 4096 4096 4096" "15000 4096 4096 4096"; do set -- $a
  flock -s /work/notes/quiet.lock valgrind --tool=callgrind --callgrind-out-file=$T-$1-$2-$3.out $B shm 64 600 $1 $2 $3 $4 > $T-$1-$2-$3.txt 2>&1
done
echo done > $T.done
