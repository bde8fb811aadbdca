#!/bin/bash
# prof.sh BIN TAG N D ITERS: perf record (cpu-clock, both processes) of one weft perf run
BIN=$1; TAG=$2; N=$3; D=$4; C=$5
perf record -q -e cpu-clock -F 4999 -o /tmp/q/perf-$TAG-$N-$D.data -- $BIN perf send-bw --local --link shm --no-icrc --size 64 --tx-depth $D -n $C --json --quiet --qps $N 2>/dev/null | grep '^{' | cut -c1-200
