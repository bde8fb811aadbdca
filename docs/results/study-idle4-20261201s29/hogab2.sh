#!/bin/bash
# hogab2.sh ROUNDS OUT WAIT name=BIN ... : as hogab.sh, each run under tsample.py (per-thread schedstat)
R=$1; OUT=$2; WAIT=$3; shift 3
for r in $(seq 1 $R); do
  if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
  flock -x /work/notes/quiet.lock bash -c '
  r=$1; WAIT=$2; shift 2
  if [ ${HOGS:-2} -gt 0 ]; then /tmp/hog.sh 120 ${HOGS:-2} & HP=$!; sleep 0.3; fi
  for w in $(seq 1 ${W:-4}); do
   for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
    l=$(timeout 30 /tmp/l3h/tsample.py $b perf send-lat --local --json --quiet --link ${LINK:-udp} --mtu 4096 --scheduler drr --iters ${ITERS:-12500} --time-limit 0.5 --sizes 64 --progress thread --wait $WAIT 2>/tmp/l3h/ts.err | tail -1)
    t=$(tail -1 /tmp/l3h/ts.err)
    [ -z "$l" ] && l=null; [ -z "$t" ] && t=null
    echo "{\"round\":$r,\"window\":$w,\"wait\":\"$WAIT\",\"name\":\"$n\",\"hogs\":${HOGS:-2},\"row\":$l,\"threads\":$t}"
   done
  done
  if [ ${HOGS:-2} -gt 0 ]; then pkill -P $HP; kill $HP 2>/dev/null; wait 2>/dev/null; fi' _ "$r" "$WAIT" "$@" >> $OUT
done
