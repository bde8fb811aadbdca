#!/bin/bash
# satload.sh ROUNDS OUT HOGS name=BIN:PROGRESS:WAIT ... : the shm saturated point, alternating,
# one hold a round, with HOGS busy loops running through the round (0: none)
R=$1; OUT=$2; H=$3; shift 3
for r in $(seq 1 $R); do
  flock -x /work/notes/quiet.lock bash -c '
  H=$1; shift
  if [ "$H" -gt 0 ]; then /tmp/hog.sh 300 $H & HP=$!; sleep 0.3; fi
  for nb in "$@"; do n=${nb%%=*}; rest=${nb#*=}; b=${rest%%:*}; pw=${rest#*:}; p=${pw%%:*}; w=${pw##*:}
    l=$(timeout 60 $b perf send-lat --local --link ${LINK:-shm} --progress $p --wait $w --outstanding 16 --size 64 -n ${N:-300000} --json -q 2>/dev/null | tail -1)
    [ -z "$l" ] && l=null
    echo "{\"round\":'$r',\"hogs\":$H,\"name\":\"$n\",\"row\":$l}"
  done
  if [ "$H" -gt 0 ]; then pkill -P $HP; kill $HP 2>/dev/null; wait 2>/dev/null; fi' _ "$H" "$@" >> $OUT
done
