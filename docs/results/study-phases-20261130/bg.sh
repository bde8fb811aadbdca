#!/bin/bash
# bg.sh REPS LINK CONFIGS BINS: the background phase's point (16 in flight, 64 B replies,
# 16 B requests, a 4 MB WRITE flow, depth BD) with --stats, no hogs.
REPS=$1 L=$2 CONFIGS=$3 BINS=$4
cd ${DIAG_DIR:-/tmp/phases/diag}  # the work directory (DIAG_DIR added 2026-11-30 for study-bgwait-20261130)
for r in $(seq $REPS); do for c in $CONFIGS; do for B in $BINS; do
  case $c in poll-inline) f="--progress inline --wait poll";; poll-thread) f="--progress thread --wait poll";; block) f="--progress thread --wait block";; adaptive) f="--progress thread --wait adaptive";; esac
  tag="$r $L $c $B"
  python3 sampler.py "$tag" > samp.tmp & S=$!
  out=$(timeout 30 ../runs/weft-$B perf send-lat --local --json --quiet --stats --link $L --mtu 4096 --scheduler drr --iters 500000 --time-limit ${TL:-2} --sizes 64 --outstanding 16 --request-size 16 --bulk-size 4194304 --bulk-depth ${BD:-4} $f 2>stats.tmp | head -1)
  kill $S; wait $S
  echo "== $tag"
  echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p90 %.1f p99 %.1f ops/s %.0f cpu_us/op %.2f bulkMB %.0f" % (r.get("p50_us") or -1, r.get("p90_us") or -1, r.get("p99_us") or -1, r.get("ops_per_s") or -1, (r.get("cpu_client_us_per_op") or 0)+(r.get("cpu_server_us_per_op") or 0), (r.get("background") or {}).get("bulk_mb_per_s",-1)))' 2>&1
  cat samp.tmp
  python3 - <<'PY'
import re
t = open('stats.tmp').read()
for blk in re.split(r'\n(?=(?:client|server)[^\n]*:\n)', t):
    who = blk.split(':', 1)[0].strip()
    keys = ['passes', 'sleeps', 'standbys', 'takeovers', 'link_takeovers', 'watches', 'cq_direct', 'quiet_gap_ns']
    vals = {k: (re.search(r'\b' + k + r': (\d+)', blk) or [None, '-'])[1] for k in keys}
    w = re.search(r'waits: (.*)', blk)
    print('  stats', who, ' '.join(f'{k}={v}' for k, v in vals.items()), '|', w[1] if w else '')
PY
done; done; done
