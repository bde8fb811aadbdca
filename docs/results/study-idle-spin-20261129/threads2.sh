#!/bin/bash
# usage: threads2.sh BIN LINK WAIT [ITERS] — per-thread CPU over the whole run (first to last snapshot)
BIN=$1; LINK=$2; WAIT=$3; IT=${4:-100}
$BIN perf send-lat --local --json --quiet --link $LINK --mtu 4096 --scheduler drr --iters $IT --time-limit 10 --sizes 64 --progress thread --wait $WAIT --pause-us 10000 --stats > /tmp/h19/out2.json 2>/tmp/h19/err2.txt &
P=$!
rm -f /tmp/h19/snaps
while kill -0 $P 2>/dev/null; do
  for pid in $P $(pgrep -P $P); do for t in /proc/$pid/task/*; do echo "$pid $(basename $t) $(cat $t/comm 2>/dev/null| tr ' ' _) $(cut -d' ' -f1 $t/schedstat 2>/dev/null)"; done; done >> /tmp/h19/snaps 2>/dev/null
  sleep 0.05
done
wait $P
echo "== $BIN $LINK $WAIT"
awk -v P=$P 'NF==4 {k=$1" "$2" "$3; if (!(k in first)) first[k]=$4; last[k]=$4} END {for (k in first) {split(k,a," "); role=(a[1]==P)?"client":"server"; d=(last[k]-first[k])/1e6; if (d>0.2) printf "%s %-16s %8.2f ms\n", role, a[3], d}}' /tmp/h19/snaps | sort
grep waits /tmp/h19/err2.txt; grep -E "standbys|takeovers|watches|sleeps" /tmp/h19/err2.txt | tr -s ' ' | tr '\n' ' '; echo
python3 -c "import json; r=json.loads(open('/tmp/h19/out2.json').readline()); print({k:r[k] for k in ['p50_us','rtt_per_s','cpu_client_us_per_op','cpu_server_us_per_op']})"
