#!/bin/bash
# run.sh NAME BIN: the four callgrind runs of docs/results/verbs.md's issue-13 section
N=$1; B=$2
for a in "s 10000 256" "s 60000 256" "p 2000 1" "p 12000 1"; do set -- $a
  valgrind --tool=callgrind --callgrind-out-file=$N-$1$2.out $B shm 64 600 $2 $3 > $N-$1$2.log 2>&1
  echo "$N $1$2 $(grep -o 'refs: *[0-9,]*' $N-$1$2.log | tr -d ', ' | cut -d: -f2)"
done
