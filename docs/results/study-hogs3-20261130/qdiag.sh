#!/bin/bash
# qdiag.sh REPS LINKS BINS: the quiet pause point (no hogs, adaptive, 100 round trips with a
# 10 ms pause after each) with --stats and the yield counter: where a binary's CPU per
# round trip goes (engine passes, sleeps, stand-bys, takeovers, watches, yields, waits).
D=${DIAG_DIR:-/tmp/hogs3/diag}
cd "$D"
for r in $(seq $1); do for l in $2; do for B in $3; do
  out=$(timeout 30 env LD_PRELOAD=$D/yieldcount.so ../runs/weft-$B perf send-lat --local --json --quiet --stats --link $l --sizes 64 --time-limit 2 --progress thread --wait adaptive --pause-us 10000 --iters 100 2>stats.tmp | head -1)
  echo "== $r $l $B $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p99 %.1f cpu_us/op %.1f client %.1f server %.1f" % (r["p50_us"], r["p99_us"], r["cpu_client_us_per_op"]+r["cpu_server_us_per_op"], r["cpu_client_us_per_op"], r["cpu_server_us_per_op"]))' 2>&1)"
  grep "^yields" stats.tmp
  python3 - <<'PY'
import re
t = open('stats.tmp').read()
for blk in re.split(r'\n(?=(?:client|server)[^\n]*:\n)', t):
    who = blk.split(':', 1)[0].strip()
    keys = ['passes', 'sleeps', 'standbys', 'takeovers', 'link_takeovers', 'watches', 'watch_arms', 'quiet_gap_ns']
    vals = {k: (re.search(r'\b' + k + r': (\d+)', blk) or [None, '-'])[1] for k in keys}
    w = re.search(r'waits: (.*)', blk)
    print('  stats', who, ' '.join(f'{k}={v}' for k, v in vals.items()), '|', w[1] if w else '')
PY
done; done; done
