#!/bin/bash
# sat.sh ROUNDS OUT name=BIN:WAIT ... : shm saturated point (thread progress, 16 in flight), alternating
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
  flock -x /work/notes/quiet.lock bash -c '
  for nb in "$@"; do n=${nb%%=*}; rest=${nb#*=}; b=${rest%%:*}; pw=${rest#*:}; p=${pw%%:*}; w=${pw##*:}
    l=$(timeout 60 $b perf send-lat --local --link ${LINK:-shm} --progress $p --wait $w --outstanding 16 --size 64 -n ${N:-1000000} --json -q 2>/dev/null | tail -1)
    echo "{\"round\":'$r',\"name\":\"$n\",\"row\":$l}"
  done' _ "$@" >> $OUT
done
