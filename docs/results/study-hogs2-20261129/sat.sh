#!/bin/bash
# sat.sh ROUNDS LINKS BINS: the phased trace's saturated point alone (16 outstanding
# 16 B requests, 64 B replies, adaptive, up to 500 000 ops or 2 s), binaries in an
# order that alternates from round to round.
R=$1 LINKS=$2 BINS=($3)
cd /tmp/hogs2/diag
for r in $(seq $R); do for l in $LINKS; do
  if (( r % 2 )); then order="${BINS[*]}"; else order=$(printf '%s\n' "${BINS[@]}" | tac | tr '\n' ' '); fi
  for B in $order; do
    out=$(timeout 30 ../runs/weft-$B perf send-lat --local --json --quiet --link $l --mtu 4096 --scheduler drr --iters 500000 --time-limit 2 --sizes 64 --outstanding 16 --request-size 16 --progress thread --wait adaptive 2>/dev/null | head -1)
    echo "$r $l $B $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("ops_per_s %.0f p50 %.2f cpu_us_per_op %.3f" % (r.get("rtt_per_s") or (r.get("mmsg_per_s") or 0)*1e6, r.get("p50_us") or -1, (r.get("cpu_client_us_per_op") or 0)+(r.get("cpu_server_us_per_op") or 0)))' 2>&1)"
  done
done; done
