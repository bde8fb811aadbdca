#!/usr/bin/env bash
# The issue-5 comparison in one run: weft perf (udp, shm) beside the kernel baselines
# and the peers (UCX, libfabric via scripts/peers.sh), then weft report.
#
#   scripts/verbs-perf.sh [OUT_DIR]        (default docs/results/verbs-perf)
#
# PEERS=0 skips scripts/peers.sh (e.g. when its output from the same session is already
# in OUT_DIR/peers.jsonl). Every run is bounded; see weft perf --help.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/results/verbs-perf}"
mkdir -p "$out"
cargo build --release --bin weft >/dev/null
weft=target/release/weft
: >"$out/weft.jsonl"
run() { echo "+ weft $*" >&2; timeout 300 "$weft" "$@" --local --json -q >>"$out/weft.jsonl" || echo "  (failed: weft $*)" >&2; }
for link in udp shm; do
  extra=(); [ "$link" = shm ] && extra=(--no-icrc)
  run perf send-lat --link "$link" "${extra[@]}" --size 64 -n 20000
  run perf send-lat --link "$link" "${extra[@]}" --size 4096 -n 10000
  run perf write-lat --link "$link" "${extra[@]}" --size 64 -n 20000
  run perf write-bw --link "$link" "${extra[@]}" --size 65536 -n 20000
  run perf write-bw --link "$link" "${extra[@]}" --size 1048576 -n 2000
  run perf send-bw --link "$link" "${extra[@]}" --size 64 -n 1000000 --tx-depth 512
done
: >"$out/kernel.jsonl"
krun() { echo "+ weft $*" >&2; timeout 300 "$weft" "$@" --local --json -q >>"$out/kernel.jsonl" || echo "  (failed: weft $*)" >&2; }
krun baseline tcp-lat --size 64 -n 20000
krun baseline udp-lat --size 64 -n 20000
krun baseline tcp-bw --size 65536 -n 20000
krun baseline tcp-bw --size 1048576 -n 2000
if [ "${PEERS:-1}" = 1 ]; then
  scripts/peers.sh --quick --out "$out"
fi
files=("$out/weft.jsonl" "$out/kernel.jsonl")
[ -f "$out/peers.jsonl" ] && files+=("$out/peers.jsonl")
"$weft" report --out "$out" --name verbs "${files[@]}"
