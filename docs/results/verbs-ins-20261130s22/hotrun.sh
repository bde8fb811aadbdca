#!/bin/bash
# hotrun.sh BIN TAG MODE(s|l): per-instruction callgrind dumps (into ${OUT:-/tmp/ins2/cg})
B=$1; T=$2; M=$3
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no --callgrind-out-file=${OUT:-/tmp/ins2/cg}/$T-$1.out $B shm 64 600 $2 $3 >/dev/null 2>/tmp/ins2/cg/$T-$1.err; }
if [ $M = s ]; then run i10k 10000 256 & run i60k 60000 256 & wait; else run il2k 2000 lat & run il12k 12000 lat & wait; fi
