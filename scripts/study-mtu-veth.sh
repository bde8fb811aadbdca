#!/usr/bin/env bash
# Small-message latency against path MTU over a wire with a serialisation time (issue
# 16: "MTU 1024/2048/4096 (and a jumbo veth): small-message p99 against MTU";
# docs/results/study.md, "MTU over a veth wire"). `weft study --parts mtu` runs over
# loopback, where a frame holds no wire; here two namespaces are joined by one veth
# pair whose Ethernet MTU is 1500 or 9000 (jumbo), and each side's egress has a tbf
# qdisc at RATE with a LIMIT-byte queue (the wire and its port buffer):
#
#   wmtu-a  wmtu0 198.18.30.1/24 ──tbf RATE──▶ ◀──tbf RATE── wmtu1 198.18.30.2/24  wmtu-b
#           (weft perf client)                                    (weft perf server)
#
# Per round, per veth MTU, per path MTU that fits in it (1500: 1024; 9000: 1024, 2048
# and 4096): one 64 B SEND request / 64 B SEND reply at a time (`weft perf send-lat
# --outstanding 1`, udp link, inline progress, busy polling), alone and beside a flow
# of 4 MB WRITEs (`--bulk-size 4194304 --bulk-depth 4`) on a second RC QP of the same
# devices. Each point runs with each congestion control in CCS (`weft perf --cc`:
# off, the fixed window of 64 PSNs, and delay, the delay-based window with target
# CC_TARGET_US). The order of the veth MTUs alternates between rounds (ABAB).
#
# usage: [RATE=5gbit] [LIMIT=512kb] [ROUNDS=3] [ITERS=20000] [SECS=2] [OUT=dir] \
#        [CCS="off delay"] [CC_TARGET_US=200] \
#        scripts/study-mtu-veth.sh [--json] [WEFT_BIN] [-- extra weft perf args]
# RATE=none: no tbf (the veth alone: no serialisation, no queue of its own).
# Output: weft perf's JSON rows, each with study "mtu-veth", veth_mtu, path_mtu, rate,
# limit, cc, cc_target_us, round and beside (true: with the flow), kept in OUT/study-mtu-veth.jsonl; with
# --json they are printed, else a table of medians over the rounds. Either way the
# medians on the jumbo veth are also written as `weft study` MTU rows, one file per
# congestion control (OUT/study-mtu-veth-CC.jsonl), which `weft report FILE --name N`
# plots as N-mtu.png. Every run is
# bounded (server 60 s, client 50 s); the namespaces are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
JSON=0
if [[ ${1:-} == --json ]]; then JSON=1; shift; fi
WEFT=${1:-target/release/weft}
shift || true
[[ ${1:-} == -- ]] && shift
EXTRA=("$@")
RATE=${RATE:-5gbit}
LIMIT=${LIMIT:-512kb}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-20000}
SECS=${SECS:-2}
CCS=${CCS:-off delay}
CC_TARGET_US=${CC_TARGET_US:-200}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
ROWS=$OUT/study-mtu-veth.jsonl
: >"$ROWS"
PORT=18700
[[ -x $WEFT ]] || { echo "study-mtu-veth: $WEFT not found (cargo build --release --bin weft)" >&2; exit 1; }

down() {
  ip netns del wmtu-a 2>/dev/null || true
  ip netns del wmtu-b 2>/dev/null || true
}
trap down EXIT

# The two namespaces and the veth pair at Ethernet MTU $1, tbf on both egresses.
up() {
  local mtu=$1
  down
  ip netns add wmtu-a
  ip netns add wmtu-b
  ip link add wmtu0 netns wmtu-a type veth peer name wmtu1 netns wmtu-b
  ip -n wmtu-a addr add 198.18.30.1/24 dev wmtu0
  ip -n wmtu-b addr add 198.18.30.2/24 dev wmtu1
  for side in "wmtu-a wmtu0" "wmtu-b wmtu1"; do
    set -- $side
    ip -n "$1" link set lo up
    ip -n "$1" link set "$2" mtu "$mtu" up
    if [[ $RATE != none ]]; then
      # burst: two jumbo frames, so a frame never waits for tokens it cannot get.
      ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst 18000 limit "$LIMIT"
    fi
  done
}

# One client run against a fresh server; its JSON row tagged: `point VETH PMTU CC BESIDE`.
point() {
  local vm=$1 pm=$2 cc=$3 beside=$4 args=() row spid
  local ccargs=(--cc "$cc" --cc-target-us "$CC_TARGET_US")
  args=("${ccargs[@]}" send-lat 198.18.30.2 --ip 198.18.30.1 --port "$PORT" --link udp --size 64
    --outstanding 1 --request-size 64 --mtu "$pm" -n "$ITERS" --time-limit "$SECS" --json --quiet)
  [[ $beside == true ]] && args+=(--bulk-size 4194304 --bulk-depth 4)
  ip netns exec wmtu-b timeout 60 "$WEFT" perf send-lat --ip 198.18.30.2 --port "$PORT" \
    --link udp --idle-timeout 30 --quiet "${ccargs[@]}" >>"$OUT/server.log" 2>&1 &
  spid=$!
  local i
  for ((i = 0; i < 200; i++)); do
    ip netns exec wmtu-b ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && break
    sleep 0.05
  done
  row=$(ip netns exec wmtu-a timeout 50 "$WEFT" perf "${args[@]}" "${EXTRA[@]}" 2>>"$OUT/client.log" | tail -1) || true
  wait "$spid" 2>/dev/null || true
  if [[ $row != \{* ]]; then
    row="{\"error\":\"weft perf client failed (see $OUT/client.log)\"}"
  fi
  echo "${row/#\{/{\"study\":\"mtu-veth\",\"veth_mtu\":$vm,\"path_mtu\":$pm,\"rate\":\"$RATE\",\"limit\":\"$LIMIT\",\"cc\":\"$cc\",\"cc_target_us\":$CC_TARGET_US,\"round\":$r,\"beside\":$beside,}" >>"$ROWS"
  echo "  round $r, veth $vm, path MTU $pm, cc $cc, beside the flow: $beside — $(tail -1 "$ROWS" | cut -c1-60)…" >&2
}

for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order=(1500 9000); else order=(9000 1500); fi
  for vm in "${order[@]}"; do
    up "$vm"
    if ((vm >= 9000)); then pmtus=(1024 2048 4096); else pmtus=(1024); fi
    for pm in "${pmtus[@]}"; do
      for cc in $CCS; do
        point "$vm" "$pm" "$cc" false
        point "$vm" "$pm" "$cc" true
      done
    done
  done
done
down

python3 - "$ROWS" "$JSON" <<'EOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = sys.stdout if sys.argv[2] == "0" else sys.stderr
cells = {}
for d in rows:
    if "p50_us" not in d:
        continue
    cells.setdefault((d["cc"], d["veth_mtu"], d["path_mtu"], d["beside"]), []).append(d)
# A point cut short by its time limit has no p99 (null): medians skip missing values.
def med(ds, k):
    v = [x[k] for x in ds if x.get(k) is not None]
    return statistics.median(v) if v else float("nan")
fin = lambda x: None if x != x else x  # NaN (no value) as JSON null, not the invalid NaN
print(f"rate {rows[0]['rate']}, queue {rows[0]['limit']}, delay target {rows[0]['cc_target_us']} µs; medians over rounds (n)", file=out)
print("cc | veth MTU | path MTU | p50 alone | p99 alone | p50 beside | p99 beside | p99 beside/alone | flow MB/s", file=out)
for (cc, vm, pm) in sorted({k[:3] for k in cells}, key=lambda k: (k[0] != "off", k[1], k[2])):
    a, b = cells.get((cc, vm, pm, False), []), cells.get((cc, vm, pm, True), [])
    p99a, p99b = med(a, "p99_us"), med(b, "p99_us")
    print(f"{cc} | {vm} | {pm} | {med(a, 'p50_us'):.1f} ({len(a)}) | {p99a:.1f} | {med(b, 'p50_us'):.1f} ({len(b)}) | "
          f"{p99b:.1f} | {p99b / p99a:.2f} | {med(b, 'bulk_mb_per_s'):.0f}", file=out)
# The jumbo veth's medians as `weft study` MTU rows, for `weft report`.
for cc in sorted({k[0] for k in cells}):
    with open(os.path.join(os.path.dirname(sys.argv[1]), f"study-mtu-veth-{cc}.jsonl"), "w") as f:
        for pm in sorted({k[2] for k in cells if k[0] == cc and k[1] == 9000}):
            a, b = cells.get((cc, 9000, pm, False), []), cells.get((cc, 9000, pm, True), [])
            if not a or not b:
                continue
            d0 = b[0]
            print(json.dumps({
                "study": "weft", "figure": "mtu", "verb": "SEND/SEND-Poll", "size": 64,
                "link": f"udp ({d0['rate']} veth wire, veth MTU 9000, cc {cc})",
                "outstanding": 1, "hogs": 0, "mtu": pm, "scheduler": d0.get("scheduler", "drr"),
                "iters": int(med(b, "iters")), "p50_us": fin(med(b, "p50_us")), "p90_us": fin(med(b, "p90_us")),
                "p99_us": fin(med(b, "p99_us")), "ops_per_s": fin(med(b, "rtt_per_s")), "mb_per_s": None,
                "bulk_size": 4194304, "bulk_mb_per_s": fin(med(b, "bulk_mb_per_s")),
                "isolated_p50_us": fin(med(a, "p50_us")), "isolated_p99_us": fin(med(a, "p99_us")),
                "p99_ratio": fin(med(b, "p99_us") / med(a, "p99_us")),
                "note": f"medians of {len(b)} rounds (scripts/study-mtu-veth.sh)"}), file=f)
EOF
((JSON)) && cat "$ROWS"
exit 0
