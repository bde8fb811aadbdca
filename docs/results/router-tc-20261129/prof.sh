#!/usr/bin/env bash
# prof.sh MODE(tc|fwd|own) SIZE OUTDIR — one flat-out trial (4 s) with RPS to core 1, perf -a for 2 s inside it
set -uo pipefail
MODE=$1 SIZE=$2 O=$3
W=/tmp/h25/weft-tc
cd /work/wt/h25-tc
N=scripts/netns-router.sh
mkdir -p "$O"
if [[ $MODE == own ]]; then
  bash $N up kernel; bash $N sink kernel
else
  bash $N up weft
  cfg=$(mktemp)
  if [[ $MODE == tc ]]; then
    bash $N sink kernel
    bash $N config 2 | sed 's/^interface = .*/&\nfast_path = "tc"/' > "$cfg"
  else
    bash $N sink weft
    bash $N config 2 afxdp generic | sed 's/^backend = "afxdp"$/&\nxdp_forward = true/' > "$cfg"
  fi
fi
printf 2 | ip netns exec weft-r tee /sys/class/net/weft-ra/queues/rx-0/rps_cpus >/dev/null
if [[ $MODE != own ]]; then
  taskset -c 1 ip netns exec weft-r nice -n -10 $W router --config "$cfg" --arch push --socket /tmp/h25/prof.sock 2>"$O/router.err" &
  sleep 1
fi
mac=$(ip netns exec weft-r cat /sys/class/net/weft-ra/address)
( sleep 1.5; perf record -a -g -F 1999 -o "$O/perf.data" -- sleep 2 >/dev/null 2>&1 ) & PP=$!
taskset -c 0 nice -n -10 $W router rfc2544 --dst-mac "$mac" --label "$MODE" --json --steps 0 --trial-secs 4 --sizes "$SIZE" --router-cpu 1 > "$O/row.json" 2>"$O/gen.err"
wait $PP
if [[ $MODE != own ]]; then $W router ctl --socket /tmp/h25/prof.sock show counters > "$O/counters.txt" 2>&1; fi
for p in $(ip netns pids weft-r 2>/dev/null); do kill -TERM "$p"; done; sleep 0.5
bash $N down
cat "$O/row.json"
