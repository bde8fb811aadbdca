#!/usr/bin/env bash
# usage: series-local.sh FIRST LAST — like-for-like pair (no RPS), alternating order
cd /work/wt/h25-tc
for n in $(seq "$1" "$2"); do
  if (( n % 2 == 1 )); then b="afpacket-tc-local afxdp-fwd-local"; else b="afxdp-fwd-local afpacket-tc-local"; fi
  echo "local run $n queued $(date -u +%T) backends: $b"
  flock -x /work/notes/quiet.lock bash -c "echo \"local run $n start \$(date -u +%T) load \$(cut -d' ' -f1-3 /proc/loadavg)\"; env KERNEL_OWN_CORE=0 SINK=1 ROUNDS=1 BACKENDS=\"$b\" ARCHS=push OUT=/tmp/h25/l/r$n bash scripts/router-e2e.sh --json /tmp/h25/weft-tc -- --sizes 64,512,1518 > /tmp/h25/l/r$n.jsonl 2> /tmp/h25/l/r$n.err; echo \"local run $n end \$(date -u +%T) rc \$?\""
  sleep 20
done
