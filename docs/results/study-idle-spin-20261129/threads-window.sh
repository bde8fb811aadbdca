#!/bin/bash
# usage: threads.sh BIN LINK WAIT [ITERS]
BIN=$1; LINK=$2; WAIT=$3; IT=${4:-300}
$BIN perf send-lat --local --json --quiet --link $LINK --mtu 4096 --scheduler drr --iters $IT --time-limit 10 --sizes 64 --progress thread --wait $WAIT --pause-us 10000 > /tmp/h19/out.json &
P=$!
sleep 1.0
snap() { for pid in $P $(pgrep -P $P); do for t in /proc/$pid/task/*; do echo "$pid $(basename $t) $(cat $t/comm | tr ' ' _) $(cut -d' ' -f1,3 $t/schedstat)"; done; done; }
snap > /tmp/h19/s1; T1=$(date +%s.%N)
sleep 2
snap > /tmp/h19/s2; T2=$(date +%s.%N)
wait $P
echo "== $LINK $WAIT ($(python3 -c "print(round($T2-$T1,3))") s)"
join <(awk '{print $1"/"$2, $3, $4, $5}' /tmp/h19/s1 | sort) <(awk '{print $1"/"$2, $4, $5}' /tmp/h19/s2 | sort) | awk -v P=$P '{split($1,a,"/"); role=(a[1]==P)?"client":"server"; d=($5-$3)/1e6; n=$6-$4; if (d>0.05) printf "%s %-8s %-16s cpu %8.2f ms  switches %d\n", role, a[2], $2, d, n}'
python3 -c "import json; r=json.loads(open('/tmp/h19/out.json').readline()); print({k:r[k] for k in ['p50_us','rtt_per_s','cpu_client_us_per_op','cpu_server_us_per_op']})"
