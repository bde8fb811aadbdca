#!/bin/bash
# hotrun.sh BIN TAG: per-instruction callgrind of post_send (streamed 10k/60k), annotated
B=$1; T=$2
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no --callgrind-out-file=/tmp/post/$T-$1.out $B shm 64 600 $2 $3 >/dev/null 2>/tmp/post/$T-$1.err; }
run i10k 10000 256 & run i60k 60000 256 & wait
OUT=/tmp/post bash /work/main/docs/results/verbs-instr-20261130/hot.sh 'weft_verbs::qp::QueuePair::post_send' QueuePair9post_send 50000 /tmp/post/$T-i10k.out /tmp/post/$T-i60k.out $B | head -1
cp /tmp/post/h-annot.txt /tmp/post/$T-annot.txt   # hot.sh's per-instruction listing
