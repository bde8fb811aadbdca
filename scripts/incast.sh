#!/usr/bin/env bash
# Incast over weft's udp link through a bottleneck built here: N bulk sender processes
# and one probe process (64-byte WRITEs, one at a time) in namespace wfi-tx, one
# receiver process in wfi-rx, joined by one veth pair whose tx-side egress has a tbf
# qdisc (RATE, a LIMIT-byte queue, tail drop): every sender's packets share that
# queue. Congestion control off and on alternate (ABAB); each run prints one JSON line
# per process, tagged with run, senders and cc.
#
#   wfi-tx  wfi-s 198.18.20.11.. /24 ──tbf RATE LIMIT──▶ wfi-r 198.18.20.1/24  wfi-rx
#
# usage: incast.sh run WEFT OUT.jsonl "SENDERS..." ROUNDS [SECONDS]
#        incast.sh down        remove the namespaces (safe any time)
# env: RATE (200mbit) LIMIT (256kb) TARGET_US (2000) SIZE (65536) DEPTH (4)
#      INTERVAL_US (1000) PROBE_SIZE (64) MTU (1024)
# Every run is bounded: the clients stop after SECONDS (+10 s to drain), the server
# after the clients disconnect or 60 s; `down` runs on exit.
set -euo pipefail

RATE=${RATE:-200mbit}
LIMIT=${LIMIT:-256kb}
TARGET_US=${TARGET_US:-2000}
SIZE=${SIZE:-65536}
DEPTH=${DEPTH:-4}
INTERVAL_US=${INTERVAL_US:-1000}
PROBE_SIZE=${PROBE_SIZE:-64}
MTU=${MTU:-1024}

down() {
  ip netns del wfi-tx 2>/dev/null || true
  ip netns del wfi-rx 2>/dev/null || true
}

up() {
  local max=$1
  down
  ip netns add wfi-tx
  ip netns add wfi-rx
  ip link add wfi-s netns wfi-tx type veth peer name wfi-r netns wfi-rx
  for ns in wfi-tx wfi-rx; do ip -n "$ns" link set lo up; done
  ip -n wfi-tx link set wfi-s up
  ip -n wfi-rx link set wfi-r up
  ip -n wfi-rx addr add 198.18.20.1/24 dev wfi-r
  for i in $(seq 0 "$max"); do
    ip -n wfi-tx addr add "198.18.20.$((11 + i))/24" dev wfi-s
  done
  ip netns exec wfi-tx tc qdisc add dev wfi-s root tbf rate "$RATE" burst 32kb limit "$LIMIT"
}

# Packets the bottleneck qdisc dropped so far (its counter is cumulative).
qdisc_drops() {
  ip netns exec wfi-tx tc -s qdisc show dev wfi-s |
    awk '/dropped/ {gsub(",","",$7); print $7 + 0; exit}'
}

one_run() {
  # one_run WEFT OUT N CC RUN SECONDS
  local weft=$1 out=$2 n=$3 cc=$4 run=$5 secs=$6
  local tag="\"run\":$run,\"senders\":$n,\"rate\":\"$RATE\",\"limit\":\"$LIMIT\","
  local common=(--cc "$cc" --target-us "$TARGET_US" --mtu "$MTU")
  local port=$((18600 + run % 100))
  local tmp q0
  tmp=$(mktemp -d)
  q0=$(qdisc_drops)
  ip netns exec wfi-rx timeout 90 "$weft" incast server "${common[@]}" \
    --dev udp:198.18.20.1:4791 --listen "198.18.20.1:$port" --conns $((n + 1)) \
    --timeout-s 60 >"$tmp/server" 2>"$tmp/server.err" &
  local server=$!
  sleep 0.3
  local start=$(( $(date +%s%3N) + 1500 ))
  local pids=()
  for i in $(seq 0 "$n"); do
    local role=bulk size=$SIZE
    [[ $i == "$n" ]] && role=probe size=$PROBE_SIZE
    ip netns exec wfi-tx timeout $((secs + 40)) "$weft" incast client "${common[@]}" \
      --dev "udp:198.18.20.$((11 + i)):4791" --server "198.18.20.1:$port" --role "$role" \
      --size "$size" --depth "$DEPTH" --seconds "$secs" --start-at-ms "$start" \
      --interval-us "$INTERVAL_US" >"$tmp/c$i" 2>"$tmp/c$i.err" &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  wait "$server" || rc=1
  local qd=$(( $(qdisc_drops) - q0 ))
  for f in "$tmp"/server "$tmp"/c*; do
    [[ $f == *.err ]] && continue
    if [[ -s $f ]]; then
      sed "s/^{/{$tag\"qdisc_dropped\":$qd,/" "$f" >>"$out"
    fi
  done
  if [[ $rc != 0 ]]; then
    echo "run $run (n=$n cc=$cc): a process failed:" >&2
    tail -n 3 "$tmp"/*.err >&2 || true
  fi
  rm -rf "$tmp"
}

case ${1:-} in
  down) down ;;
  run)
    weft=$2 out=$3 senders=$4 rounds=$5 secs=${6:-5}
    max=0
    for n in $senders; do (( n > max )) && max=$n; done
    trap down EXIT
    up "$max"
    run=0
    for n in $senders; do
      for r in $(seq 1 "$rounds"); do
        for cc in off delay; do
          run=$((run + 1))
          echo "run $run: $n senders, cc $cc, round $r" >&2
          one_run "$weft" "$out" "$n" "$cc" "$run" "$secs"
        done
      done
    done
    ;;
  *) sed -n '2,18p' "$0"; exit 2 ;;
esac
