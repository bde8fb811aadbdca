#!/usr/bin/env bash
# Installs every system package weft's demo and tests need, on a fresh Debian machine
# where we are root. Safe to run again: it only calls apt when something is missing.
set -euo pipefail

packages=(
  tshark             # interop test: tshark must read back the RoCEv2 fields weft writes
  python3-scapy      # independent oracle for the ICRC known-answer vectors
  iproute2           # network namespaces and veth for multi-host tests
  iputils-ping
  traceroute         # router netns tests: the router's hop shows in a traceroute
  iperf3             # router netns tests and end-to-end benchmark: TCP across the router
  ethtool            # router netns topology: offloads off on the veths
  fonts-dejavu-core  # weft report: the TrueType font its PNG plots' text is drawn with
  qemu-system-x86    # rdma_rxe interop (scripts/rxe-guest.sh): the Debian guest with soft-RoCE
  debootstrap        # rdma_rxe interop: builds the guest image (cached in /var/cache/weft-rxe-guest)
  e2fsprogs          # rdma_rxe interop: mkfs.ext4 -d and debugfs for the guest's disks
  gcc                # rdma_rxe interop and weft-ibverbs: the guest-side peer, the C tests
  libibverbs-dev     # <infiniband/verbs.h>: the guest-side peer, weft-ibverbs' layout and C tests
  ibverbs-utils      # weft-ibverbs: ibv_devinfo, ibv_rc_pingpong, … run unmodified on weft
  perftest           # weft-ibverbs: ib_send_lat … ib_atomic_lat run unmodified on weft
  ucx-utils          # weft-ibverbs: ucx_perftest over weft0 (rc_verbs, ud_verbs); UCX baselines
  procps             # `kill`, `pkill`: the netns and guest tests stop their children with them
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer for it.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: system packages present" >&2
fi

if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found; install Rust stable with rustup (https://rustup.rs)" >&2
  exit 1
fi
for c in clippy rustfmt; do
  if ! cargo "$c" --version >/dev/null 2>&1; then
    rustup component add "$c"
  fi
done
