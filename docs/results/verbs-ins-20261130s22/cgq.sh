#!/bin/bash
# cgq.sh BIN TAG QPS: callgrind, streamed 10k/60k at depth 256 over QPS QPs (one in flight per QP at 256)
B=$1; T=$2; Q=$3; O=${OUT:-/tmp/ins2/cg}
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --callgrind-out-file=$O/$T-q$Q-$1.out $B shm 64 600 $2 256 $Q >/dev/null 2>$O/$T-q$Q-$1.err; }
run s10k 10000 & run s60k 60000 & wait
ir() { grep -o 'summary: [0-9]*' $O/$T-q$Q-$1.out | awk '{print $2}'; }
python3 -c "print('$T qps $Q streamed %.1f' % (($(ir s60k) - $(ir s10k))/50000))" | tee -a $O/counts.txt
