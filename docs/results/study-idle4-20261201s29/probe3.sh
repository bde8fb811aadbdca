#!/bin/bash
# probe3.sh ROUNDS OUT name=BIN ... : the idle probe (send-lat, 200 round trips, 10 ms pause after each,
# thread progress) for udp block, udp adaptive, shm block; one exclusive hold a round, binaries
# alternating within it, order flipped every round; no new round after DEADLINE (epoch s).
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
  if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
  flock -x /work/notes/quiet.lock bash -c '
  r=$1; shift
  [ $(date +%s) -gt ${DEADLINE:-9999999999} ] && exit 0
  for cfg in udp:block udp:adaptive shm:block; do L=${cfg%%:*}; Wt=${cfg##*:}
   for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
    line=$($b perf send-lat --local --json --link $L --progress thread --wait $Wt -n 200 --pause-us 10000 2>/dev/null | grep "^{" | tail -1)
    [ -z "$line" ] && line=null
    echo "{\"name\":\"$n\",\"link\":\"$L\",\"wait\":\"$Wt\",\"round\":$r,\"run\":$line}"
   done
  done' _ "$r" "$@" >> $OUT
done
