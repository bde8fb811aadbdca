#!/usr/bin/env bash
# End-to-end router benchmark over veth (docs/results/router.md): the same topology
# (scripts/netns-router.sh) and the same generator (`weft router rfc2544`: paced
# AF_PACKET UDP from host A to host B, RFC 2544 zero-loss binary search and one-way
# latency) through Linux kernel forwarding and through `weft router` on each port
# backend in each architecture. Prints a markdown table. Always tears the namespaces
# down.
#
# usage: [BACKENDS="afpacket afxdp"] [ARCHS="push pull central"] [KERNEL=1] \
#        scripts/router-e2e.sh [WEFT_BIN] [-- extra rfc2544 args]
#
# BACKENDS: afpacket, afxdp (AF_XDP, generic XDP) and afxdp-native (AF_XDP with
# veth's native XDP hook). KERNEL=0 skips the kernel-forwarding rows.
set -euo pipefail
cd "$(dirname "$0")/.."
WEFT=${1:-target/release/weft}
shift || true
[[ ${1:-} == -- ]] && shift
EXTRA=("$@")
NETNS=scripts/netns-router.sh
# Two cores: the generator (sender and receiver threads) on one, weft's workers on
# the other. Kernel forwarding runs in softirq on whichever core sends, i.e. the
# generator's: it gets no core of its own and needs none.
GEN_CPU=${GEN_CPU:-0}
ROUTER_CPU=${ROUTER_CPU:-1}
BACKENDS=${BACKENDS:-afpacket afxdp}
ARCHS=${ARCHS:-push pull central}
KERNEL=${KERNEL:-1}
trap 'for p in $(ip netns pids weft-r 2>/dev/null); do kill -TERM "$p" 2>/dev/null || true; done; sleep 0.3; bash $NETNS down' EXIT

router_mac() { ip netns exec weft-r cat /sys/class/net/weft-ra/address; }

header_done=0
run() {
  local label=$1
  local out
  out=$(taskset -c "$GEN_CPU" "$WEFT" router rfc2544 --dst-mac "$(router_mac)" --label "$label" "${EXTRA[@]}")
  if ((header_done)); then echo "$out" | tail -n +3; else echo "$out"; header_done=1; fi
}

if [[ $KERNEL == 1 ]]; then
  bash $NETNS up kernel
  run "linux kernel"
fi

for backend in $BACKENDS; do
  case "$backend" in
    afpacket) args=(afpacket) ;;
    afxdp) args=(afxdp generic) ;;
    afxdp-native) args=(afxdp native) ;;
    *) echo "unknown backend $backend" >&2; exit 2 ;;
  esac
  for arch in $ARCHS; do
    bash $NETNS up weft
    cfg=$(mktemp)
    bash $NETNS config 2 "${args[@]}" > "$cfg"  # two ports: no idle third worker on two cores
    taskset -c "$ROUTER_CPU" ip netns exec weft-r "$WEFT" router --config "$cfg" --arch "$arch" --socket "/tmp/weft-e2e-$$.sock" 2>/dev/null &
    sleep 1
    if ! kill -0 $! 2>/dev/null; then
      echo "weft router on $backend did not start" >&2; exit 1
    fi
    run "weft $backend $arch"
    for p in $(ip netns pids weft-r); do kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -f "$cfg"
  done
done
