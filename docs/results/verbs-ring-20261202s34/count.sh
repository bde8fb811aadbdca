#!/bin/bash
# usage: count.sh NAME BINARY ENV  -> prints streamed and lat instructions per message/round
N=$1; B=$2; E=$3
for n in 10000 60000; do env $E valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/$N-s-$n.out $B shm 64 600 $n 256 > /dev/null 2>&1; done
for n in 2000 12000; do env $E valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/$N-l-$n.out $B shm 64 600 $n lat > /dev/null 2>&1; done
tot() { callgrind_annotate $1 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{gsub(",","",$1); print $1}'; }
s=$(( ($(tot /tmp/cg/$N-s-60000.out) - $(tot /tmp/cg/$N-s-10000.out)) / 50000 ))
l=$(( ($(tot /tmp/cg/$N-l-12000.out) - $(tot /tmp/cg/$N-l-2000.out)) / 10000 ))
echo "$N streamed $s lat $l"
