#!/bin/bash
# dense.sh ROUNDS OUT name=BIN ...: send-lat udp, thread progress, --wait adaptive, no pauses, 5000 round trips; ABAB.
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
  if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
  flock -x /work/notes/quiet.lock bash -c '
  r=$1; shift
  [ $(date +%s) -gt ${DEADLINE:-9999999999} ] && exit 0
  for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
    line=$(timeout 60 $b perf send-lat --local --json --link udp --progress thread --wait adaptive -n 5000 2>/dev/null | grep "^{" | tail -1)
    [ -z "$line" ] && line=null
    echo "{\"name\":\"$n\",\"link\":\"udp\",\"wait\":\"adaptive-dense\",\"round\":$r,\"run\":$line}"
  done' _ "$r" "$@" >> $OUT
done
