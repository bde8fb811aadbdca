#!/usr/bin/env bash
# The udp 64 B SEND latency target of issue 13, before and after a change: N
# alternating rounds (ABAB) of two weft binaries against UCX tcp tag_lat and the
# kernel's busy-polled UDP ping-pong, with the udp 64 B send-bw message rate and the
# udp 64 KiB WRITE as regression checks (UCX tcp tag_bw 64 KiB beside it).
#
#   scripts/verbs-udp-latency.sh BEFORE_WEFT AFTER_WEFT [--rounds N] [OUT_DIR]
#
# Per round: for each binary (before, then after) weft send-lat udp 64 B with inline
# and thread progress; UCX tcp tag_lat 64 B; kernel-udp-busypoll; for each binary weft
# send-bw udp 64 B (inline) and write-bw udp 64 KiB (inline, thread); UCX tcp tag_bw
# 64 KiB. Variants: weft-udp-{inline,thread} are AFTER (so the summary's target table
# compares them with UCX), weft-udp-{inline,thread}-before are BEFORE.
# Output in OUT_DIR (default docs/results/verbs-udp-latency): rounds.jsonl, summary.md
# (scripts/verbs_medians.py), env.txt, raw/. Run it under the exclusive lock.
set -euo pipefail
cd "$(dirname "$0")/.."
before=${1:?before binary}
after=${2:?after binary}
shift 2
rounds=5
out=docs/results/verbs-udp-latency
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift ;;
    *) out="$1" ;;
  esac
  shift
done
lat_n=20000 bw64_n=300000 bw64k_n=20000
mkdir -p "$out/raw"
tag="python3 scripts/verbs_medians.py tag"
jsonl="$out/rounds.jsonl"
: >"$jsonl"
{
  echo "# verbs-udp-latency.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  echo "before $before ($(sha256sum "$before" | cut -c1-12)), after $after ($(sha256sum "$after" | cut -c1-12))"
  echo "rounds $rounds; lat iters $lat_n, 64 B bw msgs $bw64_n, 64 KiB bw msgs $bw64k_n"
  uname -srm; echo "cpus $(nproc)"; echo "load before: $(cat /proc/loadavg)"
  ucx_info -v 2>&1 | head -2
} >"$out/env.txt" 2>&1

round=0
wrun() { wrun_bin "$@"; } # variant, binary, weft args...

port=$((17400 + RANDOM % 2000))
source "$(dirname "$0")/bench-lib.sh"

urun() { ucx_run ucx-tcp loopback "$@"; } # test size n (UCX_TLS=tcp over lo)

for ((round = 1; round <= rounds; round++)); do
  for side in before after; do
    if [[ $side == before ]]; then bin=$before sfx=-before; else bin=$after sfx=; fi
    for p in inline thread; do
      wrun "weft-udp-$p$sfx" "$bin" perf send-lat --link udp --progress "$p" --size 64 -n "$lat_n"
    done
  done
  urun tag_lat 64 "$lat_n"
  wrun kernel-udp-busypoll "$after" baseline udp-lat --busy-poll --size 64 -n "$lat_n"
  for side in before after; do
    if [[ $side == before ]]; then bin=$before sfx=-before; else bin=$after sfx=; fi
    wrun "weft-udp-inline$sfx" "$bin" perf send-bw --link udp --progress inline --size 64 -n "$bw64_n" --tx-depth 512
    for p in inline thread; do
      wrun "weft-udp-$p$sfx" "$bin" perf write-bw --link udp --progress "$p" --size 65536 -n "$bw64k_n"
    done
  done
  urun tag_bw 65536 "$bw64k_n"
done
echo "load after: $(cat /proc/loadavg)" >>"$out/env.txt"
python3 scripts/verbs_medians.py summary "$jsonl" >"$out/summary.md"
echo "verbs-udp-latency: $(wc -l <"$jsonl") records in $jsonl; summary in $out/summary.md" >&2
