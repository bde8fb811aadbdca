#!/usr/bin/env bash
# Instructions per forwarded packet in weft router's user space, end to end over
# veth (docs/results/router.md §3.4): the router runs under callgrind in the
# scripts/netns-router.sh topology with busy_poll_us = 0 (an idle thread blocks at
# once, so polling adds next to nothing); the counters are zeroed after a warm-up,
# the generator sends 64 B frames flat out for 2 s (the router saturated, bursts
# full), and the count dumped then is divided by the packets forwarded meanwhile.
# A count of instructions does not depend on how busy the machine is.
#
# usage: [ARCHS="push pull central"] [RING=v2|v3] [ROUNDS=2] scripts/router-callgrind.sh [WEFT_BIN]
# prints one line per run: arch ring forwarded instructions per_packet
set -euo pipefail
cd "$(dirname "$0")/.."
command -v callgrind_control >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
WEFT=${1:-target/release/weft}
ARCHS=${ARCHS:-push pull central}
RING=${RING:-v2}
ROUNDS=${ROUNDS:-2}
NETNS=scripts/netns-router.sh
OUT=$(mktemp -d)
trap 'for p in $(ip netns pids weft-r 2>/dev/null); do kill -TERM "$p" 2>/dev/null || true; done; sleep 1; bash $NETNS down >/dev/null 2>&1; rm -rf "$OUT"' EXIT

forwarded() { "$WEFT" router ctl --socket "$OUT/ctl.sock" show counters | awk '$1=="forwarded"{print $2}'; }

for ((round = 1; round <= ROUNDS; round++)); do
  for arch in $ARCHS; do
    bash $NETNS up weft >/dev/null
    { printf '[router]\nbusy_poll_us = 0\n\n'
      bash $NETNS config 2 afpacket |
        if [[ $RING == v3 ]]; then sed 's/^interface = .*/&\nring = "v3"/'; else cat; fi
    } >"$OUT/cfg.toml"
    rm -f "$OUT"/cg.out* "$OUT/ctl.sock"
    ip netns exec weft-r valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" \
      "$WEFT" router --config "$OUT/cfg.toml" --arch "$arch" --socket "$OUT/ctl.sock" 2>"$OUT/vg.log" &
    pid=$!
    for _ in $(seq 1 60); do [[ -S $OUT/ctl.sock ]] && break; sleep 1; done
    mac=$(ip netns exec weft-r cat /sys/class/net/weft-ra/address)
    # Warm-up: the next hop is resolved before counting starts.
    taskset -c 0 "$WEFT" router rfc2544 --dst-mac "$mac" --sizes 64 --steps 0 --trial-secs 0.5 --json >/dev/null 2>&1
    vg=$(pgrep -f "callgrind-out-file=$OUT/cg.out" | head -1)
    before=$(forwarded)
    callgrind_control -z "$vg" >/dev/null 2>&1
    taskset -c 0 "$WEFT" router rfc2544 --dst-mac "$mac" --sizes 64 --steps 0 --trial-secs 2 --json >/dev/null 2>&1
    callgrind_control -d "$vg" >/dev/null 2>&1
    after=$(forwarded)
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    bash $NETNS down >/dev/null
    # The dump taken by -d is the first numbered file.
    ir=$(awk '/^(summary|totals):/{print $2; exit}' "$OUT/cg.out.1")
    n=$((after - before))
    echo "$arch $RING forwarded $n instructions $ir per_packet $((ir / (n > 0 ? n : 1)))"
  done
done
