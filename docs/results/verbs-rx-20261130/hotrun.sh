#!/bin/bash
# hotrun.sh BIN TAG [lat]: per-instruction callgrind (--dump-instr=yes) of streamed 10k/60k
# (or lat 2k/12k), kept as ${OUT:-/tmp/rx}/TAG-i{a,b}.out; then `annot.sh TAG FUNC SYM` per function.
B=$1; T=$2; M=${3:-s}
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no --callgrind-out-file=${OUT:-/tmp/rx}/$T-$1.out $B shm 64 600 $2 $3 >/dev/null 2>${OUT:-/tmp/rx}/$T-$1.err; }
if [ $M = lat ]; then run ia 2000 lat & run ib 12000 lat & wait
else run ia 10000 256 & run ib 60000 256 & wait; fi
