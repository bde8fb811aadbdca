#!/usr/bin/env bash
# usage: series.sh FIRST LAST  — RPS pair (afpacket-tc vs afxdp-fwd), alternating order
cd /work/wt/h25-tc
for n in $(seq "$1" "$2"); do
  if (( n % 2 == 1 )); then b="afpacket-tc afxdp-fwd"; else b="afxdp-fwd afpacket-tc"; fi
  echo "run $n start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) backends: $b"
  flock -x /work/notes/quiet.lock env KERNEL_OWN_CORE=1 SINK=1 ROUNDS=1 BACKENDS="$b" ARCHS=push OUT=/tmp/h25/m/r$n \
    bash scripts/router-e2e.sh --json /tmp/h25/weft-tc -- --sizes 64,512,1518 > /tmp/h25/m/r$n.jsonl 2> /tmp/h25/m/r$n.err
  echo "run $n end $(date -u +%T) rc $?"
  sleep 20
done
