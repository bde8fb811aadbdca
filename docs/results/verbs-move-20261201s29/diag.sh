#!/bin/bash
D=$(dirname $(readlink -f $0)); out=/tmp/s29-move/diag; mkdir -p $out
run() { local t0=$(date +%s%N); $2 perf write-bw --local --link shm --no-icrc --progress thread --size 65536 -n 20000 --stats > $out/$1.txt 2>&1; local t1=$(date +%s%N); echo -n "wall $(( (t1-t0)/1000000 )) ms "; python3 $D/parse.py $out/$1.txt $1; }
for i in 1 2 3; do for s in A B; do bin=/tmp/s29-move/weft-base; [ $s = B ] && bin=/tmp/s29-move/weft-move
  # hog for the whole run
  timeout 1.5 taskset -c $((i%2)) bash -c 'while :; do :; done' & h=$!; sleep 0.2; run ${s}w$i $bin; kill $h; wait $h 2>/dev/null
  # hog ended just before the run
  timeout 0.4 taskset -c $((i%2)) bash -c 'while :; do :; done'; run ${s}s$i $bin
done; done
