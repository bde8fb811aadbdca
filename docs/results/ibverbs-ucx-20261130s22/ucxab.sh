#!/bin/bash
# alternate binaries: ucxab.sh ROUNDS name=dir ...; prints per run: name p50 avg + stats
R=$1; shift
for r in $(seq 1 $R); do for nb in "$@"; do n=${nb%%=*}; d=${nb#*=}
 line=$(W=$d/weft WEFT_IBVERBS_STATS=1 flock -x /work/notes/quiet.lock timeout 200 /tmp/tw/ucxq.sh)
 st=$(for f in ucxq-cli.err ucxq-srv.txt; do grep -o "polls_held: [0-9]*\|polls_held_max_ns: [0-9]*\|polls_held_waited: [0-9]*\|takeovers: [0-9]*" $f | awk '{printf "%s ", $2}'; echo -n "| "; done)
 echo "$(date +%T) r$r $n L=${L:-udp} $(echo $line | awk '{print "p50", $3, "avg", $4}') $st"
done; done
