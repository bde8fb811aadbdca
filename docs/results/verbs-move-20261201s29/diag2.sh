#!/bin/bash
# diag2.sh ROUNDS BASE NEW : per round, A and B (order flipped) in two conditions:
#  u = one busy loop NOT pinned (a user's other process) through the run;
#  t = two busy loops (both CPUs) for 0.3 s that end just before the run.
D=$(dirname $(readlink -f $0)); out=/tmp/s29-move/diag2; mkdir -p $out; A=$2; B=$3
run() { $2 perf write-bw --local --link shm --no-icrc --progress thread --size 65536 -n 20000 --stats > $out/$1.txt 2>&1; python3 $D/parse.py $out/$1.txt $1; }
for i in $(seq 1 $1); do
  if [ $((i % 2)) = 1 ]; then o="A B"; else o="B A"; fi
  for s in $o; do bin=$A; [ $s = B ] && bin=$B
    timeout 0.5 bash -c 'while :; do :; done' & h=$!; sleep 0.2; run ${s}u$i $bin; wait $h
  done
  for s in $o; do bin=$A; [ $s = B ] && bin=$B
    timeout 0.3 bash -c 'while :; do :; done' & timeout 0.3 bash -c 'while :; do :; done'; wait; run ${s}t$i $bin
  done
done
