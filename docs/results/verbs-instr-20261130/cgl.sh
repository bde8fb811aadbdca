#!/bin/bash
# cgl.sh BIN TAG: lat only
B=$1; T=$2; O=/tmp/instr
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --callgrind-out-file=$O/$T-$1.out $B shm 64 600 $2 $3 >$O/$T-$1.stdout 2>$O/$T-$1.err; }
run l2k 2000 lat & run l12k 12000 lat & wait
ir() { grep -o 'summary: [0-9]*' $O/$T-$1.out | awk '{print $2}'; }
l=$(( ($(ir l12k) - $(ir l2k)) ))
python3 -c "print('$T lat %.1f' % ($l/10000))" | tee -a $O/counts.txt
