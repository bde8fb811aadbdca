#!/bin/bash
# warm3.sh ROUNDS OUT name=BIN ... : idle CPU per rtt of new processes, n=20, adaptive, udp and shm, binaries alternating
R=$1; OUT=$2; shift 2
for r in $(seq 1 $R); do
 if [ $((r % 2)) -eq 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
 flock -x /work/notes/quiet.lock bash -c '
 r=$1; shift
 for L in udp shm; do for nb in "$@"; do nm=${nb%%=*}; B=${nb#*=}
   line=$($B perf send-lat --local --json --link $L --progress thread --wait adaptive -n 20 --pause-us 10000 2>/dev/null | grep "^{" | tail -1)
   echo "{\"name\":\"$nm\",\"n\":20,\"link\":\"$L\",\"wait\":\"adaptive\",\"round\":$r,\"run\":${line:-null}}"
 done; done' _ $r "$@" >> $OUT
done
