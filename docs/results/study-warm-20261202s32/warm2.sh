#!/bin/bash
# warm2.sh ROUNDS OUT name=BIN ... : idle CPU per rtt (send-lat, thread progress, 10 ms pauses), fresh processes,
# n=100 block+adaptive and n=1000 adaptive, udp and shm; binaries alternate, order flipped every round.
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
 if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
 flock -x /work/notes/quiet.lock bash -c '
 r=$1; shift
 for cfg in 100:block 100:adaptive 1000:adaptive; do n=${cfg%%:*}; Wt=${cfg##*:}
  for L in udp shm; do for nb in "$@"; do nm=${nb%%=*}; B=${nb#*=}
   line=$($B perf send-lat --local --json --link $L --progress thread --wait $Wt -n $n --pause-us 10000 2>/dev/null | grep "^{" | tail -1)
   echo "{\"name\":\"$nm\",\"n\":$n,\"link\":\"$L\",\"wait\":\"$Wt\",\"round\":$r,\"run\":${line:-null}}"
  done; done; done' _ $r "$@" >> $OUT
done
