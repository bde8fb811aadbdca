#!/bin/bash
# hogab.sh ROUNDS OUT WAIT name=BIN ... : the phased trace's hogs window (udp, one at a time,
# 64 B, thread progress, WAIT) beside 2 busy loops; one exclusive hold a round, in which each
# binary runs W windows (default 4) interleaved, order flipped every round.
# STATS (default /tmp/l3h) takes the --stats output; no new round after DEADLINE (epoch s).
R=$1; OUT=$2; WAIT=$3; shift 3
for r in $(seq 1 $R); do
  if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
  flock -x /work/notes/quiet.lock bash -c '
  r=$1; WAIT=$2; shift 2
  [ $(date +%s) -gt ${DEADLINE:-9999999999} ] && exit 0
  /tmp/hog.sh 120 2 & HP=$!; sleep 0.3
  for w in $(seq 1 ${W:-4}); do
   for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
    l=$(timeout 30 $b perf send-lat --local --json --quiet --link ${LINK:-udp} --mtu 4096 --scheduler drr --iters 12500 --time-limit 0.5 --sizes 64 --progress thread --wait $WAIT $EXTRA 2>>${STATS:-/tmp/l3h}/stats-$n.txt | tail -1)
    [ -z "$l" ] && l=null
    echo "{\"round\":$r,\"window\":$w,\"wait\":\"$WAIT\",\"name\":\"$n\",\"row\":$l}"
   done
  done
  pkill -P $HP; kill $HP 2>/dev/null; wait 2>/dev/null' _ "$r" "$WAIT" "$@" >> $OUT
done
