#!/bin/bash
# example.sh ROUNDS OUT EXAMPLE WEFT : issue 16's README-example check. Each round, one
# exclusive hold: per link, the README's rc_pingpong with its defaults (thread progress,
# 64 B, 10 000 round trips) and right after it `weft perf send-lat --local --progress
# inline --size 64 -n 10000`; the links' order flips every round. Appends lines
# "round link rc_pingpong_p50_us perf_inline_p50_us" to OUT.
R=$1; OUT=$2; EX=$3; W=$4
for r in $(seq 1 $R); do
  links="udp shm"; [ $((r % 2)) -eq 0 ] && links="shm udp"
  flock -x /work/notes/quiet.lock bash -c '
  r=$1; EX=$2; W=$3; shift 3
  for L in "$@"; do
    P=$((18600 + r))
    timeout 60 $EX --link $L --listen 127.0.0.1:$P > /tmp/ex-srv.$$ 2>&1 &
    sleep 0.3
    ex=$(timeout 60 $EX 127.0.0.1:$P --link $L 2>&1 | grep -o "one-way p50 [0-9.]*" | grep -o "[0-9.]*$")
    wait
    pf=$(timeout 60 $W perf send-lat --local --link $L --progress inline --size 64 -n 10000 2>/dev/null | awk "\$1==64 {print \$4}")
    echo "$r $L ${ex:-NA} ${pf:-NA}"
  done' _ "$r" "$EX" "$W" $links >> $OUT
done
