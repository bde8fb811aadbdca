#!/bin/bash
# mix.sh ROUNDS OUT LINK N name=BIN:WAIT:PIN ... : one exclusive hold a round, one hog through it;
# PIN=1: the client process on CPU 0 and the server child on CPU 1 (pinrun.sh), 0: free
R=$1; OUT=$2; L=$3; N=$4; shift 4
for r in $(seq 1 $R); do
  flock -x /work/notes/quiet.lock bash -c '
  L=$1; N=$2; r=$3; shift 3
  /tmp/hog.sh 300 1 & HP=$!; sleep 0.3
  for nb in "$@"; do n=${nb%%=*}; rest=${nb#*=}; b=${rest%%:*}; wp=${rest#*:}; w=${wp%%:*}; pin=${wp##*:}
    if [ "$pin" = 1 ]; then l=$(/tmp/udp1/pinrun.sh $b $w $L $N)
    else l=$(timeout 60 $b perf send-lat --local --link $L --progress thread --wait $w --outstanding 16 --size 64 -n $N --json -q 2>/dev/null | tail -1); fi
    [ -z "$l" ] && l=null
    echo "{\"round\":$r,\"hogs\":1,\"name\":\"$n\",\"row\":$l}"
  done
  pkill -P $HP; kill $HP 2>/dev/null; wait 2>/dev/null' _ "$L" "$N" "$r" "$@" >> $OUT
done
