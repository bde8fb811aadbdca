#!/usr/bin/env bash
# One copy on shm (issue 13): 64 KiB RC WRITE bandwidth over shm between two processes,
# weft with and without its one-copy path, against UCX's shared-memory transports, as
# N alternating rounds (ABAB) summarised as medians with their min-max spread.
#
#   scripts/one-copy-perf.sh [--rounds N] [--msgs N] [--before BIN] [OUT_DIR]
#                                           (default 5 rounds, 20000 messages, docs/results/one-copy)
#
# Per round, in this order:
#   weft-shm-onecopy   weft perf write-bw --link shm --no-icrc --size 65536 (inline progress)
#   weft-shm-rings     the same with --no-one-copy (every payload through the rings: the
#                      data path before this change, in the same binary)
#   weft-before        BIN (an older weft binary, e.g. main's) with the same arguments, when given
#   ucx-sm             ucx_perftest tag_bw 64 KiB, UCX_TLS=sm,self (posix, sysv, cma)
#   ucx-posix          the same with UCX_TLS=posix,self
# CPU per operation: weft measures both processes over the measured phase; for UCX,
# user+system time of both processes over their whole run (an upper bound), as in
# scripts/verbs-perf.sh. Output: OUT_DIR/rounds.jsonl, summary.md, env.txt, raw/.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
msgs=20000
before=""
out=docs/results/one-copy
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift ;;
    --msgs) msgs="$2"; shift ;;
    --before) before="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) out="$1" ;;
  esac
  shift
done
for p in ucx-utils time; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || { echo "one-copy-perf: needs $p (scripts/setup.sh installs it)" >&2; exit 1; }
done
mkdir -p "$out/raw"
cargo build --release --bin weft >/dev/null
weft=target/release/weft
tag="python3 scripts/verbs_medians.py tag"
jsonl="$out/rounds.jsonl"
: >"$jsonl"
{
  echo "# one-copy-perf.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  echo "rounds $rounds; 64 KiB messages per run $msgs; before: ${before:-none}"
  uname -srm; echo "cpus $(nproc)"; echo "load before: $(cat /proc/loadavg)"
  echo "ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent)"
  ucx_info -v 2>&1 | head -2
} >"$out/env.txt" 2>&1

round=0
wrun() { wrun_bin "$@"; } # variant, binary, weft args...

port=$((17400 + RANDOM % 2000))
source "$(dirname "$0")/bench-lib.sh"

urun() { ucx_run "$1" shm tag_bw 65536 "$msgs"; } # variant

args=(perf write-bw --link shm --no-icrc --progress inline --size 65536 -n "$msgs")
for ((round = 1; round <= rounds; round++)); do
  echo "round $round load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/env.txt"
  wrun weft-shm-onecopy "$weft" "${args[@]}"
  wrun weft-shm-rings "$weft" "${args[@]}" --no-one-copy
  [[ -n $before ]] && wrun weft-before "$before" "${args[@]}"
  urun ucx-sm
  urun ucx-posix
done
echo "load after: $(cat /proc/loadavg)" >>"$out/env.txt"
python3 scripts/verbs_medians.py summary "$jsonl" >"$out/summary.md"
cat "$out/summary.md"
