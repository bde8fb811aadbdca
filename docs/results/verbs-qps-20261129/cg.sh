#!/bin/bash
# usage: cg.sh BIN TAG  -> runs callgrind pairs, writes /tmp/h22/cg/TAG-*.out
BIN=$1; TAG=$2; shift 2
run() { # name count depth qps active
  flock -s /work/notes/quiet.lock valgrind --tool=callgrind --cache-sim=yes --LL=2097152,16,64 \
    --callgrind-out-file=/tmp/h22/cg/$TAG-$1-$2.out $BIN shm 64 600 $2 $3 $4 $5 > /tmp/h22/cg/$TAG-$1-$2.log 2>&1
}
for spec in "$@"; do
  set -- $spec
  run $1 $2 $4 $5 $6; run $1 $3 $4 $5 $6
done
