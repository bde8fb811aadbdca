#!/usr/bin/env bash
# The issue-13 comparison: weft perf against UCX at its best (and the kernel), measured
# as N alternating rounds (ABAB: weft, peer, weft, peer, ...) per target, summarised as
# medians with their min-max spread.
#
#   scripts/verbs-perf.sh [--quick] [--rounds N] [OUT_DIR]   (default docs/results/verbs-perf)
#
# Per round, for each target in turn: weft (inline progress, then thread progress),
# then the peers of that target, then the kernel baselines:
#   shm 64 B SEND one-way p50      weft send-lat shm       UCX tag_lat: posix, sm, default
#   shm 64 B SEND message rate     weft send-bw shm (512)  UCX tag_bw 64 B: posix, sm, default
#   shm 64 KiB WRITE               weft write-bw shm       UCX tag_bw 64 KiB: posix, sm, default
#   udp 64 B SEND one-way p50      weft send-lat udp       UCX tcp tag_lat; kernel tcp/udp-lat (blocking, busy-poll)
#   udp 64 KiB WRITE               weft write-bw udp       UCX tcp tag_bw; kernel tcp-bw (blocking, busy-poll)
# UCX transports: posix = UCX_TLS=posix,self; sm = UCX_TLS=sm,self (every shared-memory
# transport UCX has here: posix, sysv and cma when the kernel allows it); default = no
# UCX_TLS (UCX's own choice); tcp = UCX_TLS=tcp over lo. weft's udp link uses UDP
# GSO/GRO (the default; weft perf --no-gso turns it off). shm runs use --no-icrc.
#
# Output in OUT_DIR: rounds.jsonl (every record, tagged with round, variant and the
# probes around it), probes.jsonl, summary.md (medians, the target tables), env.txt,
# raw/ (UCX's own output; not committed).
# CPU per operation: weft measures both processes over the measured phase; for UCX the
# script adds user+system time of both processes over their whole run (set-up
# included), from /usr/bin/time.
#
# Machine state: the 2-vCPU VM flips, every few seconds to minutes, between a fast state
# (a cache line crosses between the two CPUs in 20-55 ns one-way) and a slow one
# (190-270 ns; nothing between in docs/results/verbs-perf-20261128-probe), and UCX posix latency and message rate follow it. So every sample (every
# weft, UCX and kernel run) is bracketed by `weft probe --json` (about 20-100 ms each),
# its one-way ns recorded with the sample as core_ns_before / core_ns_after and the
# sample labelled fast (both below CORE_SLOW_NS, default 120 ns: between the two modes,
# twice the fast one and half the slow one), slow (both at or above) or mixed. Every
# probe is also kept in probes.jsonl (a failed one with its error). summary.md adds
# the targets from the fast samples only and from the slow ones only; the all-rounds
# table stays the headline.
#
# --quick: 3 rounds, fewer iterations (68 s with the probes on a quiet 2-core machine,
# 2026-11-28 21:46; 206 s under load earlier: process start-up dominates). Every run is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
quick=0
out=docs/results/verbs-perf
while (($#)); do
  case "$1" in
    --quick) quick=1; rounds=3 ;;
    --rounds) rounds="$2"; shift ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) out="$1" ;;
  esac
  shift
done
if ((quick)); then lat_n=3000; bw64_n=100000; bw64k_n=3000; else lat_n=20000; bw64_n=1000000; bw64k_n=20000; fi

missing=()
for p in ucx-utils time; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "verbs-perf: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
fi

core_slow_ns=${CORE_SLOW_NS:-120}
mkdir -p "$out/raw"
cargo build --release --bin weft >/dev/null
weft=target/release/weft
tag="python3 scripts/verbs_medians.py tag"
jsonl="$out/rounds.jsonl"
rounds_jsonl=$jsonl
cell_jsonl="$out/raw/.cell.jsonl"
: >"$jsonl"
: >"$out/probes.jsonl"

# One core-to-core probe: prints its one-way ns (nothing when it failed) and keeps its
# JSON line (or its error), tagged with the round, the variant, before/after and the
# wall-clock time ("at", Unix seconds), in probes.jsonl.
probe() { # variant, before|after
  local line
  if line=$(RUST_BACKTRACE=0 timeout 10 "$weft" probe --json 2>"$out/raw/.probe-err"); then
    echo "$line" | $tag --round "$round" --variant "$1" | sed "s/}\$/, \"when\": \"$2\", \"at\": $(date +%s.%3N)}/" >>"$out/probes.jsonl"
    echo "$line" | python3 -c 'import json, sys; print(json.load(sys.stdin)["one_way_ns"])'
  else
    python3 -c 'import json, sys; print(json.dumps({"probe": "core-to-core", "error": sys.argv[1], "round": int(sys.argv[2]), "variant": sys.argv[3], "when": sys.argv[4], "at": float(sys.argv[5])}))' \
      "$(tr '\n' ' ' <"$out/raw/.probe-err")" "$round" "$1" "$2" "$(date +%s.%3N)" >>"$out/probes.jsonl"
  fi
}

# One sample between two probes: `cell RUNNER VARIANT ARGS...` runs the runner (wrun,
# urun, krun) with its records going to a scratch file, then adds the two probes and
# the state label to each record and appends them to rounds.jsonl.
cell() {
  local runner=$1 v=$2 before after
  before=$(probe "$v" before)
  jsonl=$cell_jsonl
  : >"$jsonl"
  "$@"
  jsonl=$rounds_jsonl
  after=$(probe "$v" after)
  python3 scripts/verbs_medians.py core --before "$before" --after "$after" --threshold-ns "$core_slow_ns" \
    <"$cell_jsonl" >>"$jsonl"
  echo "  core-to-core one-way before ${before:-?} ns, after ${after:-?} ns" >&2
}
{
  echo "# verbs-perf.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  echo "rounds $rounds quick $quick; lat iters $lat_n, 64 B bw msgs $bw64_n, 64 KiB bw msgs $bw64k_n"
  uname -srm; echo "cpus $(nproc)"; echo "load before: $(cat /proc/loadavg)"
  ucx_info -v 2>&1 | head -2
  echo "core-to-core probe (weft probe: one-way ns, median of 10 batches of 20000 round trips) before and after every sample;"
  echo "  state threshold CORE_SLOW_NS=$core_slow_ns ns: fast = both probes below, slow = both at or above, mixed = one of each"
  echo "  probe at start: $("$weft" probe 2>&1)"
  echo "## ucx transports (ucx_info -d)"; ucx_info -d 2>&1 | grep -E "Transport|Device" | paste - - | sed 's/ *# */ /g'
} >"$out/env.txt" 2>&1

round=0
wrun() { local v=$1; shift; wrun_bin "$v" "$weft" "$@"; } # variant, weft args...

port=$((15400 + RANDOM % 2000))
# wait_listen, reap
source "$(dirname "$0")/bench-lib.sh"
# cpu seconds (user + system) from /usr/bin/time -f '%U %S' output files

urun() { ucx_run "$@"; } # variant link test size n

krun() { # variant, weft baseline args...
  local v=$1; shift
  echo "[round $round] $v: weft $*" >&2
  timeout 300 "$weft" "$@" --local --json -q 2>>"$out/raw/kernel-stderr.txt" | $tag --round "$round" --variant "$v" >>"$jsonl" \
    || echo "  (failed: weft $*)" >&2
}

for ((round = 1; round <= rounds; round++)); do
  # shm 64 B SEND latency
  for p in inline thread; do cell wrun "weft-shm-$p" perf send-lat --link shm --no-icrc --progress "$p" --size 64 -n "$lat_n"; done
  for v in ucx-posix ucx-sm ucx-default; do cell urun "$v" shm tag_lat 64 "$lat_n"; done
  # shm 64 B SEND message rate
  for p in inline thread; do cell wrun "weft-shm-$p" perf send-bw --link shm --no-icrc --progress "$p" --size 64 -n "$bw64_n" --tx-depth 512; done
  for v in ucx-posix ucx-sm ucx-default; do cell urun "$v" shm tag_bw 64 "$bw64_n"; done
  # shm 64 KiB WRITE
  for p in inline thread; do cell wrun "weft-shm-$p" perf write-bw --link shm --no-icrc --progress "$p" --size 65536 -n "$bw64k_n"; done
  for v in ucx-posix ucx-sm ucx-default; do cell urun "$v" shm tag_bw 65536 "$bw64k_n"; done
  # udp 64 B SEND latency
  for p in inline thread; do cell wrun "weft-udp-$p" perf send-lat --link udp --progress "$p" --size 64 -n "$lat_n"; done
  cell urun ucx-tcp loopback tag_lat 64 "$lat_n"
  cell krun kernel-tcp baseline tcp-lat --size 64 -n "$lat_n"
  cell krun kernel-tcp-busypoll baseline tcp-lat --busy-poll --size 64 -n "$lat_n"
  cell krun kernel-udp baseline udp-lat --size 64 -n "$lat_n"
  cell krun kernel-udp-busypoll baseline udp-lat --busy-poll --size 64 -n "$lat_n"
  # udp 64 KiB WRITE
  for p in inline thread; do cell wrun "weft-udp-$p" perf write-bw --link udp --progress "$p" --size 65536 -n "$bw64k_n"; done
  cell urun ucx-tcp loopback tag_bw 65536 "$bw64k_n"
  cell krun kernel-tcp baseline tcp-bw --size 65536 -n "$bw64k_n"
  cell krun kernel-tcp-busypoll baseline tcp-bw --busy-poll --size 65536 -n "$bw64k_n"
done
{ echo "probe at end: $("$weft" probe 2>&1)"; echo "load after: $(cat /proc/loadavg)"; } >>"$out/env.txt"
rm -f "$cell_jsonl" "$out/raw/.probe-err"
python3 scripts/verbs_medians.py summary "$jsonl" >"$out/summary.md"
echo "verbs-perf: $(wc -l <"$jsonl") records in $jsonl; summary in $out/summary.md" >&2
