#!/bin/bash
# ride.sh ROUNDS OUT name=BIN ... : idle CPU per sparse rtt over shm (send-lat, thread progress, 200 rtt, 10 ms pauses),
# --wait block and adaptive; one exclusive hold a round, binaries alternating, order flipped every round.
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
 if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
 flock -x /work/notes/quiet.lock bash -c '
 r=$1; shift
 for Wt in block adaptive; do for nb in "$@"; do nm=${nb%%=*}; B=${nb#*=}
   line=$($B perf send-lat --local --json --link shm --progress thread --wait $Wt -n 200 --pause-us 10000 2>/dev/null | grep "^{" | tail -1)
   echo "{\"name\":\"$nm\",\"n\":200,\"link\":\"shm\",\"wait\":\"$Wt\",\"round\":$r,\"run\":${line:-null}}"
 done; done' _ $r "$@" >> $OUT
done
