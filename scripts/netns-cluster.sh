#!/usr/bin/env bash
# Builds (or removes) the cluster router test topology: N weft router nodes and one
# host per node, in network namespaces, with addresses in 198.18.0.0/15 and
# 2001:2::/48 (the benchmarking ranges).
#
#   wcl-h1  h0 198.18.1.2/24 2001:2:0:1::2/64 ── p1 (weft: 198.18.1.1) wcl-n1 ┐ ic 198.18.100.1
#   wcl-h2  h0 198.18.2.2/24 2001:2:0:2::2/64 ── p2 (weft: 198.18.2.1) wcl-n2 ├ ic 198.18.100.2
#   wcl-h3  h0 198.18.3.2/24 2001:2:0:3::2/64 ── p3 (weft: 198.18.3.1) wcl-n3 ┘ ic 198.18.100.3
#
# udp: each node in its own namespace; their `ic` veths meet on a bridge in wcl-fab
# (the interconnect's Ethernet), with kernel addresses 198.18.100.N/24 (weft verbs'
# udp device and the connection manager use them).
# shm: the shm link meets its peer through an abstract unix socket, which exists per
# network namespace, so the nodes share one namespace, wcl-n (ports p1..pN there,
# interconnect addresses 198.18.100.N on its loopback for the connection manager).
#
# usage: netns-cluster.sh up N udp|shm     (N = 2 or 3; starts from `down`)
#        netns-cluster.sh down              (safe to run any time)
#        netns-cluster.sh config N udp|shm [BALANCE [BATCH [TRANSPORT]]]
#                                           print the cluster.toml (TRANSPORT uc or rc)
#        netns-cluster.sh node-ns I udp|shm print node I's namespace
set -euo pipefail

down() {
  for ns in wcl-h1 wcl-h2 wcl-h3 wcl-n1 wcl-n2 wcl-n3 wcl-n wcl-fab; do
    ip netns del "$ns" 2>/dev/null || true
  done
}

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

node_ns() { if [[ $2 == shm ]]; then echo wcl-n; else echo "wcl-n$1"; fi; }

offloads_off() {
  local ns=$1 dev=$2
  if command -v ethtool >/dev/null; then
    for f in tx rx tso gso gro; do
      in_ns "$ns" ethtool -K "$dev" "$f" off >/dev/null 2>&1 || true
    done
  fi
}

up() {
  local n=$1 kind=$2
  down
  if [[ $kind == udp ]]; then
    ip netns add wcl-fab
    in_ns wcl-fab ip link set lo up
    in_ns wcl-fab ip link add br0 type bridge
    in_ns wcl-fab ip link set br0 up
  else
    ip netns add wcl-n
    in_ns wcl-n ip link set lo up
  fi
  for i in $(seq 1 "$n"); do
    local nns
    nns=$(node_ns "$i" "$kind")
    if [[ $kind == udp ]]; then
      ip netns add "$nns"
      in_ns "$nns" ip link set lo up
      ip link add ic netns "$nns" type veth peer name "ic$i" netns wcl-fab
      in_ns wcl-fab ip link set "ic$i" master br0
      in_ns wcl-fab ip link set "ic$i" up
      in_ns "$nns" ip link set ic up
      in_ns "$nns" ip addr add "198.18.100.$i/24" dev ic
    else
      in_ns "$nns" ip addr add "198.18.100.$i/32" dev lo
    fi
    ip netns add "wcl-h$i"
    ip link add h0 netns "wcl-h$i" type veth peer name "p$i" netns "$nns"
    in_ns "wcl-h$i" ip link set lo up
    in_ns "wcl-h$i" ip link set h0 up
    in_ns "wcl-h$i" ip addr add "198.18.$i.2/24" dev h0
    in_ns "wcl-h$i" ip -6 addr add "2001:2:0:$i::2/64" dev h0 nodad
    in_ns "wcl-h$i" ip route add default via "198.18.$i.1"
    in_ns "wcl-h$i" ip -6 route add default via "2001:2:0:$i::1"
    in_ns "$nns" ip link set "p$i" up
    in_ns "$nns" sysctl -qw "net.ipv6.conf.p$i.disable_ipv6=1"
    offloads_off "wcl-h$i" h0
    offloads_off "$nns" "p$i"
  done
}

config() {
  local n=$1 kind=$2 balance=${3:-direct} batch=${4:-16} transport=${5:-uc}
  cat <<EOF
[cluster]
interconnect = "$kind"
batch = $batch
balance = "$balance"
transport = "$transport"
EOF
  for i in $(seq 1 "$n"); do
    cat <<EOF
[[cluster.node]]
id = $i
address = "198.18.100.$i"
EOF
  done
  for i in $(seq 1 "$n"); do
    cat <<EOF
[[port]]
node = $i
name = "port$i"
interface = "p$i"
addresses = ["198.18.$i.1/24", "2001:2:0:$i::1/64"]
EOF
  done
}

case "${1:-}" in
  up) up "${2:?N}" "${3:?udp|shm}" ;;
  down) down ;;
  config) config "${2:?N}" "${3:?udp|shm}" "${4:-direct}" "${5:-16}" "${6:-uc}" ;;
  node-ns) node_ns "${2:?I}" "${3:?udp|shm}" ;;
  *) echo "usage: $0 up N udp|shm | down | config N udp|shm [BALANCE [BATCH]] | node-ns I udp|shm" >&2; exit 2 ;;
esac
