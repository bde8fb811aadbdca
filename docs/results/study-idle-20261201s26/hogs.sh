#!/bin/bash
# hogs.sh ROUNDS OUT name=BIN ... : the phased trace's hogs point alone (shm ping-pong,
# 64 B, one in flight, thread progress, adaptive wait) beside 2 busy loops, one
# exclusive hold a round, the binaries' order rotated each round.
R=$1; OUT=$2; shift 2
HOG=/work/wt/idle/docs/results/study-hog1-20261201s24/hog.sh
for r in $(seq 1 $R); do
  set -- "${@:2}" "$1"   # rotate
  flock -x /work/notes/quiet.lock bash -c '
  r=$1; shift
  '$HOG' 120 2 & HP=$!; sleep 0.3
  for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
    l=$(timeout 60 $b perf send-lat --local --link ${LINK:-shm} --progress thread --wait adaptive --size 64 -n ${N:-100000} --json -q 2>/dev/null | tail -1)
    [ -z "$l" ] && l=null
    echo "{\"round\":$r,\"name\":\"$n\",\"row\":$l}"
  done
  pkill -P $HP; kill $HP 2>/dev/null; wait 2>/dev/null' _ $r "$@" >> $OUT
done
