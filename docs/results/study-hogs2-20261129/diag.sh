#!/bin/bash
# diag.sh REPS LINKS CONFIGS BINS: the hogs point (2 shell busy loops), 2 s windows,
# each with --stats (waiter and engine counters) and a thread sampler. Env: DIAG_DIR (the
# work directory), PRE (an LD_PRELOAD library), TL (window seconds), ITERS (round trips
# at most, default 200000; added 2026-11-30 for study-phases-20261130).
REPS=$1 LINKS=$2 CONFIGS=$3 BINS=$4
cd "${DIAG_DIR:-/tmp/hogs2/diag}"  # the work directory (helper copies of these scripts and the binaries runs/weft-*)
bash -c 'while :; do :; done' >/dev/null 2>&1 & H1=$!
bash -c 'while :; do :; done' >/dev/null 2>&1 & H2=$!
sleep 0.2
for r in $(seq $REPS); do for l in $LINKS; do for c in $CONFIGS; do for B in $BINS; do
  case $c in poll-inline) f="--progress inline --wait poll";; poll-thread) f="--progress thread --wait poll";; block) f="--progress thread --wait block";; adaptive) f="--progress thread --wait adaptive";; esac
  tag="$r $l $c $B"
  python3 sampler.py "$tag" > samp.tmp & S=$!
  out=$(timeout 30 env ${PRE:+LD_PRELOAD=$PRE} ../runs/weft-$B perf send-lat --local --json --quiet --stats --link $l --sizes 64 --iters ${ITERS:-200000} --time-limit ${TL:-2} $f 2>stats.tmp | head -1)
  kill $S; wait $S
  echo "== $tag"
  echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p99 %.1f rtt/s %.0f mean_rtt_us %.1f cpu_us/op %.1f" % (r.get("p50_us") or -1, r.get("p99_us") or -1, r.get("rtt_per_s") or -1, 1e6/(r.get("rtt_per_s") or 1), (r.get("cpu_client_us_per_op") or 0)+(r.get("cpu_server_us_per_op") or 0)))' 2>&1
  cat samp.tmp; grep "^yields" stats.tmp
  python3 - <<'PY'
import re
t = open('stats.tmp').read()
for blk in re.split(r'\n(?=(?:client|server)[^\n]*:\n)', t):
    who = blk.split(':', 1)[0].strip()
    keys = ['passes', 'sleeps', 'standbys', 'takeovers', 'link_takeovers', 'watches', 'watch_arms', 'cq_direct', 'post_flushes', 'quiet_gap_ns']
    vals = {k: (re.search(r'\b' + k + r': (\d+)', blk) or [None, '-'])[1] for k in keys}
    w = re.search(r'waits: (.*)', blk)
    print('  stats', who, ' '.join(f'{k}={v}' for k, v in vals.items()), '|', w[1] if w else '')
PY
done; done; done; done
kill $H1 $H2
