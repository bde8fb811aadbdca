#!/usr/bin/env bash
# weft shm large WRITE, the three ways a payload can move, against UCX's shared-memory
# transports, alternating (ABAB) in rounds:
#   weft-map   default: buffers are sealed memfds the peer maps (alloc_shared_mr);
#              by-reference chunks copied with memcpy from the peer's mapping
#   weft-ring  --no-one-copy: every payload through the rings (two copies)
#   weft-cma   --no-shared-buffers --one-copy-cma-min 0: by reference, copied with
#              process_vm_readv (the one-copy path before the mapping existed)
#   ucx-posix / ucx-sm   ucx_perftest tag_bw (UCX_TLS=posix,self / sm,self)
# All weft runs: write-bw --local --link shm --no-icrc --progress inline.
#   scripts/verbs-shm-onecopy.sh [--rounds N] [--sizes "65536 1048576"] OUT_DIR
# Run it under the exclusive lock: flock -x /work/notes/quiet.lock scripts/...
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
sizes="65536 1048576 4194304"
out=docs/results/verbs-shm-onecopy
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift ;;
    --sizes) sizes="$2"; shift ;;
    *) out="$1" ;;
  esac
  shift
done
mkdir -p "$out/raw"
weft=target/release/weft
tag="python3 scripts/verbs_medians.py tag"
jsonl="$out/rounds.jsonl"
source "$(dirname "$0")/bench-lib.sh"
msgs() { # size -> messages per run (about 1.3 GB, at least 2000)
  local n=$((1300000000 / $1)); ((n < 2000)) && n=2000; echo "$n"
}
{
  echo "# verbs-shm-onecopy.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  echo "rounds $rounds sizes $sizes"; uname -srm; echo "cpus $(nproc)"; echo "load before: $(cat /proc/loadavg)"
} >"$out/env.txt"
port=$((17400 + RANDOM % 2000))
round=0
wrun() { # variant size args...
  local v=$1 size=$2; shift 2
  echo "[round $round] $v $size: weft $*" >&2
  timeout 120 "$weft" perf write-bw --link shm --no-icrc --progress inline --size "$size" -n "$(msgs "$size")" "$@" \
    --local --json -q 2>>"$out/raw/weft-stderr.txt" | $tag --round "$round" --variant "$v" >>"$jsonl" \
    || echo "  (failed: $v $size)" >&2
}
urun() { ucx_run "$1" shm tag_bw "$2" "$(msgs "$2")"; } # variant size
for ((round = 1; round <= rounds; round++)); do
  for size in $sizes; do
    wrun weft-map "$size"
    wrun weft-ring "$size" --no-one-copy
    wrun weft-cma "$size" --no-shared-buffers --one-copy-cma-min 0
    urun ucx-posix "$size"
    urun ucx-sm "$size"
  done
done
echo "load after: $(cat /proc/loadavg)" >>"$out/env.txt"
