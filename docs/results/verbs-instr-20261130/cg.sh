#!/bin/bash
# cg.sh BIN TAG: callgrind counts, streamed (10k/60k, depth 256) and lat (2k/12k)
B=$1; T=$2; O=${OUT:-/tmp/instr}   # OUT: where the counts go
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --callgrind-out-file=$O/$T-$1.out $B shm 64 600 $2 $3 >/dev/null 2>$O/$T-$1.err; }
run s10k 10000 256 & run s60k 60000 256 & wait
run l2k 2000 lat & run l12k 12000 lat & wait
ir() { grep -o 'summary: [0-9]*' $O/$T-$1.out | awk '{print $2}'; }
s=$(( ($(ir s60k) - $(ir s10k)) )); l=$(( ($(ir l12k) - $(ir l2k)) ))
python3 -c "print('$T streamed %.1f  lat %.1f' % ($s/50000, $l/10000))" | tee -a $O/counts.txt
