#!/bin/bash
# dense.sh ROUNDS OUT name=BIN ...: send-lat back to back, inline progress, -n 20000, shm then udp; one
# exclusive hold a round, binaries alternating, order flipped every round (ABAB).
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
  if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
  flock -x /work/notes/quiet.lock bash -c '
  r=$1; shift
  [ $(date +%s) -gt ${DEADLINE:-9999999999} ] && exit 0
  for L in shm udp; do
  for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
    line=$(timeout 60 $b perf send-lat --local --json --link $L --progress inline -n 20000 2>/dev/null | grep "^{" | tail -1)
    [ -z "$line" ] && line=null
    echo "{\"name\":\"$n\",\"link\":\"$L\",\"wait\":\"inline-dense\",\"round\":$r,\"run\":$line}"
  done; done' _ "$r" "$@" >> $OUT
done
