#!/bin/bash
# ABAB rate check: weft perf TEST (default send-bw) 64 B, thread progress, R rounds,
# binaries alternating, all of them under one hold of the exclusive quiet lock. One line per run:
# round binary link M-msg/s p50-us p99-us client-CPU-us/op server-CPU-us/op (from --json).
# usage: LINK=shm N=2000000 R=5 abab-bw.sh /tmp/weft-A /tmp/weft-B
R=${R:-5}; T=${T:-send-bw}; LINK=${LINK:-shm}; N=${N:-2000000}
exec 9>>/work/notes/quiet.lock; flock -x 9
for r in $(seq "$R"); do for b in "$@"; do
  out=$(timeout 120 "$b" perf "$T" --local --link "$LINK" \
        --size 64 -n "$N" --progress thread --json 2>/dev/null | tail -1)
  echo "$r $(basename "$b") $LINK $(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(round(d.get('mmsg_per_s',0),3), round(d.get('p50_us',0),3), round(d.get('p99_us',0),2), round(d['cpu_client_us_per_op'],3), round(d.get('cpu_server_us_per_op',0),3))" "$out")"
  sleep 0.2
done; done
