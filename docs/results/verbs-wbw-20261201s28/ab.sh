#!/bin/bash
# usage: ab.sh ROUNDS OUTDIR BIN_A BIN_B [extra weft args]
r=$1; out=$2; A=$3; B=$4; shift 4
mkdir -p $out
for i in $(seq 1 $r); do
  for s in A B; do
    bin=$A; [ $s = B ] && bin=$B
    flock -x /work/notes/quiet.lock $bin perf write-bw --local --link shm --no-icrc --progress thread --size 65536 -n 20000 --stats "$@" > $out/$s$i.txt 2>&1
    python3 /tmp/wbw/parse.py $out/$s$i.txt $s$i
  done
done
