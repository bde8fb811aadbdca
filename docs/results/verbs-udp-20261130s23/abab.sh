#!/usr/bin/env bash
# ABAB for the udp 64 KiB WRITE: weft binaries (name=path pairs in BINS) and UCX tcp
# tag_bw 64 KiB in the same rounds, inline and thread progress. One JSON line per
# sample to $OUT (weft's own --json line; UCX: MB/s from ucx_perftest's final line and
# CPU of both processes from /usr/bin/time, per message incl. warm-up).
# Usage: ROUNDS=5 N=20000 OUT=file.jsonl [EXTRA="weft perf args"] [NO_UCX=1] abab.sh name=bin [name=bin...]
set -u
rounds=${ROUNDS:-5}; n=${N:-20000}; out=${OUT:?}
port=$((17400 + RANDOM % 2000))
ucx() { # round
  local raw w=$((n / 10)); ((w > 1000)) && w=1000
  raw=$(mktemp); port=$((port + 1))
  env UCX_TLS=tcp UCX_NET_DEVICES=lo timeout -k 5 120 /usr/bin/time -f '%U %S' -o "$raw.st" ucx_perftest -p "$port" >"$raw.s" 2>&1 &
  local spid=$!
  for ((i = 0; i < 200; i++)); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.05; done
  env UCX_TLS=tcp UCX_NET_DEVICES=lo timeout -k 5 110 /usr/bin/time -f '%U %S' -o "$raw.ct" ucx_perftest 127.0.0.1 -p "$port" \
    -t tag_bw -s 65536 -n "$n" -w "$w" -f >"$raw" 2>&1
  wait "$spid"
  python3 - "$raw" "$1" "$((n + w))" <<'PY'
import json, sys
raw, rnd, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [l.split() for l in open(raw) if l.strip() and l.split()[0].isdigit()]
cpu = 0.0
for f in (raw + ".st", raw + ".ct"):
    for l in open(f):
        p = l.split()
        if len(p) == 2:
            try: cpu += float(p[0]) + float(p[1])
            except ValueError: pass
last = rows[-1] if rows else None
# final line: iterations, then latency typical/avg/overall, then bandwidth avg/overall MB/s, msgrate avg/overall
mbps = float(last[-3]) * 1.048576 if last else None
print(json.dumps({"variant": "ucx-tcp", "round": rnd, "mb_per_s": mbps, "cpu_us_per_op": cpu / ops * 1e6, "raw_last": " ".join(last) if last else None}))
PY
  rm -f "$raw" "$raw".*
}
for ((r = 1; r <= rounds; r++)); do
  for prog in inline thread; do
    for nb in "$@"; do
      name=${nb%%=*}; bin=${nb#*=}
      timeout 120 "$bin" perf write-bw --local --link udp --progress "$prog" --size 65536 -n "$n" ${EXTRA:-} --json -q 2>/dev/null \
        | python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), variant=sys.argv[1], round=int(sys.argv[2]), at=sys.argv[3]))) for l in sys.stdin if l.startswith("{")]' "$name-$prog" "$r" "$(date -u +%H:%M:%S)"
    done
  done
  [ -n "${NO_UCX:-}" ] || ucx "$r"
done >>"$out"
