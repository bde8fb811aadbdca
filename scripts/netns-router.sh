#!/usr/bin/env bash
# Builds (or removes) the router test topology: three hosts and a router, each in its
# own network namespace, joined by veth pairs. Addresses are in 198.18.0.0/15 and
# 2001:2::/48 (the benchmarking ranges). Hosts B and C both own the "far" network
# 198.19.0.1 / 2001:2:0:100::1, so moving the 198.19.0.0/16 route moves traffic.
#
#   weft-ha  weft-a0 198.18.1.2/24 2001:2:0:1::2/64 ── weft-ra 198.18.1.1 ┐
#   weft-hb  weft-b0 198.18.2.2/24 2001:2:0:2::2/64 ── weft-rb 198.18.2.1 ├ weft-r
#   weft-hc  weft-c0 198.18.3.2/24 2001:2:0:3::2/64 ── weft-rc 198.18.3.1 ┘
#
# usage: netns-router.sh up weft [OFFLOADS]
#                                    router namespace without kernel addresses: weft
#                                    answers ARP/ND/ICMP for them itself
#        netns-router.sh up kernel [OFFLOADS]
#                                    Linux forwards (ip_forward=1), the baseline
#        netns-router.sh sink weft|kernel
#                                    after `up`, for benchmarks (needs nft): hosts B
#                                    and C drop IPv4 to 198.19.0.0/16 other than
#                                    their own 198.19.0.1 at the netdev ingress hook
#                                    (after packet taps, so a capture still sees every
#                                    frame); in weft mode the router's ports also drop
#                                    everything there (the kernel stack of the router
#                                    namespace never sees weft's frames)
#        netns-router.sh down        remove everything (safe to run any time)
#        netns-router.sh config [2|3] [BACKEND [XDP_MODE]]
#                                    print the weft router config for this topology
#                                    (2: only the ports to hosts A and B; BACKEND
#                                    afpacket (default) or afxdp; XDP_MODE generic
#                                    (default) or native)
# `up` always starts from `down`, so it is idempotent. OFFLOADS: `off` (the default)
# turns TSO/GSO/GRO and checksum offload off on every veth, so frames cross AF_PACKET
# as on a wire; `default` keeps veth's defaults (checksum offload and TSO on), as a
# newcomer's topology has them: the hosts then send partial checksums and 64 KiB
# TCP super-frames, which the router's links must finish (crates/link/src/offload.rs).
set -euo pipefail

NS=(weft-ha weft-hb weft-hc weft-r)

down() {
  for ns in "${NS[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
  done
}

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

offloads_off() {
  local ns=$1 dev=$2
  if command -v ethtool >/dev/null; then
    for f in tx rx tso gso gro; do
      in_ns "$ns" ethtool -K "$dev" "$f" off >/dev/null 2>&1 || true
    done
  fi
}

OFFLOADS=off

host() {
  # host NS DEV ROUTER_PORT SUBNET(1..3)
  local ns=$1 dev=$2 rdev=$3 n=$4
  ip link add "$dev" netns "$ns" type veth peer name "$rdev" netns weft-r
  in_ns "$ns" ip link set lo up
  in_ns "$ns" ip link set "$dev" up
  in_ns "$ns" ip addr add "198.18.$n.2/24" dev "$dev"
  in_ns "$ns" ip -6 addr add "2001:2:0:$n::2/64" dev "$dev" nodad
  in_ns "$ns" ip route add default via "198.18.$n.1"
  in_ns "$ns" ip -6 route add default via "2001:2:0:$n::1"
  if [[ $OFFLOADS == off ]]; then
    offloads_off "$ns" "$dev"
    offloads_off weft-r "$rdev"
  fi
  in_ns weft-r ip link set "$rdev" up
}

up() {
  local mode=${1:-weft}
  OFFLOADS=${2:-off}
  case "$mode" in weft|kernel) ;; *) echo "mode must be weft or kernel" >&2; exit 2 ;; esac
  case "$OFFLOADS" in off|default) ;; *) echo "offloads must be off or default" >&2; exit 2 ;; esac
  down
  for ns in "${NS[@]}"; do ip netns add "$ns"; done
  in_ns weft-r ip link set lo up
  host weft-ha weft-a0 weft-ra 1
  host weft-hb weft-b0 weft-rb 2
  host weft-hc weft-c0 weft-rc 3
  for ns in weft-hb weft-hc; do
    in_ns "$ns" ip addr add 198.19.0.1/32 dev lo
    in_ns "$ns" ip -6 addr add 2001:2:0:100::1/128 dev lo
  done
  if [[ $mode == kernel ]]; then
    for n in 1 2 3; do
      local d; d=weft-r$(printf "\\x$(printf %x $((96 + n)))")
      in_ns weft-r ip addr add "198.18.$n.1/24" dev "$d"
      in_ns weft-r ip -6 addr add "2001:2:0:$n::1/64" dev "$d" nodad
    done
    in_ns weft-r sysctl -qw net.ipv4.ip_forward=1
    in_ns weft-r sysctl -qw net.ipv6.conf.all.forwarding=1
    in_ns weft-r ip route add 198.19.0.0/16 via 198.18.2.2
    in_ns weft-r ip -6 route add 2001:2:0:100::/56 via 2001:2:0:2::2
  else
    # The kernel stays out of the router's way: no addresses, no IPv6 stack on the
    # ports (AF_PACKET sees frames before the stack would).
    for d in weft-ra weft-rb weft-rc; do
      in_ns weft-r sysctl -qw "net.ipv6.conf.$d.disable_ipv6=1"
    done
  fi
}

# A tester's receiving port counts frames and drops them; a host whose stack routes
# each one (ip_forward=0: no route, a dst allocated and freed through RCU per frame)
# is no tester. On this VM that work ran on whichever core delivered the frame — a
# weft router's, inside its transmit call — and its RCU callbacks ran in batches of
# milliseconds. The same holds for the weft router's namespace, whose kernel stack
# would route every frame its AF_PACKET ports take (AF_XDP's redirect consumes them
# already). nft's netdev ingress hook runs after the packet taps.
sink() {
  local mode=${1:-weft}
  command -v nft >/dev/null || { echo "sink needs nft (apt-get install nftables)" >&2; exit 2; }
  for h in "weft-hb weft-b0" "weft-hc weft-c0"; do
    set -- $h
    in_ns "$1" nft add table netdev sink
    in_ns "$1" nft "add chain netdev sink rx { type filter hook ingress device \"$2\" priority 0 ; }"
    in_ns "$1" nft add rule netdev sink rx ip daddr != 198.19.0.1 ip daddr 198.19.0.0/16 drop
  done
  if [[ $mode == weft ]]; then
    in_ns weft-r nft add table netdev weft
    for d in weft-ra weft-rb weft-rc; do
      in_ns weft-r nft "add chain netdev weft $d { type filter hook ingress device \"$d\" priority 0 ; policy drop ; }"
    done
  fi
}

config() {
  local ports=${1:-3} backend=${2:-afpacket} mode=${3:-}
  port() {
    # port NAME DEV SUBNET(1..3)
    printf '[[port]]\nname = "%s"\ninterface = "%s"\n' "$1" "$2"
    if [[ $backend != afpacket ]]; then
      printf 'backend = "%s"\n' "$backend"
      if [[ -n $mode ]]; then printf 'xdp_mode = "%s"\n' "$mode"; fi
      # XDP_RX_FRAMES: the AF_XDP receive (and fill) ring depth, `xdp_rx_frames`
      if [[ $backend == afxdp && -n ${XDP_RX_FRAMES:-} ]]; then
        printf 'xdp_rx_frames = %s\n' "$XDP_RX_FRAMES"
      fi
    fi
    printf 'addresses = ["198.18.%s.1/24", "2001:2:0:%s::1/64"]\n\n' "$3" "$3"
  }
  port left weft-ra 1
  port right weft-rb 2
  if [[ $ports == 3 ]]; then port third weft-rc 3; fi
  cat <<'TOML'

[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"

[[route]]
prefix = "2001:2:0:100::/56"
via = "2001:2:0:2::2"
TOML
}

case "${1:-}" in
  up) up "${2:-weft}" "${3:-off}" ;;
  down) down ;;
  sink) sink "${2:-weft}" ;;
  config) config "${2:-3}" "${3:-afpacket}" "${4:-}" ;;
  *) echo "usage: $0 up [weft|kernel] [off|default] | down | config" >&2; exit 2 ;;
esac
