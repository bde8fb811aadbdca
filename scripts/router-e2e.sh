#!/usr/bin/env bash
# End-to-end router benchmark over veth (docs/results/router.md): the same topology
# (scripts/netns-router.sh) and the same generator (`weft router rfc2544`: paced
# AF_PACKET UDP from host A to host B, RFC 2544 zero-loss binary search and one-way
# latency) through Linux kernel forwarding and through `weft router` on each port
# backend in each architecture. Always tears the namespaces down.
#
# usage: [BACKENDS="afpacket afxdp"] [ARCHS="push pull central"] [KERNEL=1] [ROUNDS=3] \
#        [OUT=dir] [NICE=-10] [SINK=1] [AT_KPPS=r,r,…] [BUSY_POLL_US=n] [XDP_RX_FRAMES=n] [TX_INFLIGHT=256] scripts/router-e2e.sh [--json] [--long] [WEFT_BIN] [-- extra rfc2544 args]
#
# BACKENDS: afpacket (AF_PACKET with TPACKET_V2 rings, the default), afpacket-v3
# (TPACKET_V3 block rings, `ring = "v3"`), afxdp (AF_XDP, generic XDP),
# afxdp-native (AF_XDP with veth's native XDP hook), afxdp-rps (afxdp with the same
# RPS as the kernel's own-core row: without it, veth delivers each frame in the
# sender's system call, so the ingress port's generic XDP and its copy into the
# UMEM run on the generator's core, GEN_CPU; with it, on weft's). The XDP fast path
# (`xdp_forward = true`: weft's IPv4 fast path in the ingress XDP hook forwards plain
# transit in the kernel, the rest reaches weft's pipeline through the AF_XDP
# socket) in three places: afxdp-fwd (afxdp-rps with the fast path: all of it runs on
# weft's core, ROUTER_CPU), afxdp-fwd-local (afxdp with the fast path, no RPS: generic
# XDP runs in the sender's system call on GEN_CPU, where the default "linux kernel"
# row forwards: that row's like-for-like partner) and afxdp-fwd-native (the fast path
# in veth's native XDP hook, `xdp_mode = "native"`: not generic XDP's new skb head,
# but veth's own conversions, docs/results/router.md §3.3i; its redirect into weft-rb
# needs NAPI on host B's weft-b0, so GRO is turned on there, as veth enables NAPI for
# GRO; veth runs the hook in NAPI on the core that sent, GEN_CPU). The other afxdp
# rows (afxdp, afxdp-native, afxdp-rps) set `xdp_forward = false`: the fast path is on
# by default on afxdp ports in generic mode, and these rows measure the pipeline alone.
# The fast path at tc ingress on AF_PACKET ports (`fast_path = "tc"`,
# weft_link::afpacket_tc: the same program built for tcx, the slow path to sockets
# bound to IPv4/IPv6/ARP, so generic XDP's new skb head is not paid): afpacket-tc
# (with RPS to ROUTER_CPU, like afxdp-fwd and the own-core kernel row) and
# afpacket-tc-local (no RPS: tc runs in the sender's system call on GEN_CPU, the
# default kernel row's partner). Their router namespace gets the hosts' sink only
# (`netns-router.sh sink kernel`): its netdev ingress drop would run after tc and
# before the protocol handlers, so it would drop the slow path (ARP) too; the
# router namespace's stack sees only slow-path frames, and drops them (no addresses,
# no forwarding).
# KERNEL_OWN_CORE=1 adds rows "linux kernel, own core": kernel forwarding moved by
# RPS on the router's ingress port to ROUTER_CPU, the core weft gets, so the
# generator's core does not forward too (see GEN_CPU below). KERNEL=0 skips the
# kernel-forwarding rows. BUSY_POLL_US sets the router's `busy_poll_us`; XDP_RX_FRAMES
# the AF_XDP ports' receive ring depth, `xdp_rx_frames` (scripts/netns-router.sh config).
# ROUNDS: alternating rounds (ABAB): each round runs the kernel, then every weft
# forwarder, and measures each weft forwarder's latency at the kernel's zero-loss rate
# of that round too (`--latency-at-rows`).
# Output: by default the medians table `weft report` prints (kept in
# OUT/router-e2e.md) and its plot (OUT/router-e2e.png); with --json, the JSON rows (one per forwarder, frame
# size and round: forwarder, frame, zero_loss_kpps, p50_us, p99_us, at_* …, and CPU
# per delivered frame: cpu_ns_per_pkt_all, all cores' busy time from /proc/stat, the
# generator's included, and cpu_ns_per_pkt_router_core, ROUTER_CPU's alone). The rows
# are kept in OUT/router-e2e.jsonl either way (OUT defaults to a temporary directory),
# and each weft run's `show links` and `show counters` in OUT/stages.txt, its stderr (the
# "N port workers" line, warnings) in OUT/router-stderr.txt, each line prefixed by the run.
# --long: 60 s trials, as RFC 2544 asks (default 1 s: two shared cores and a budget).
# SINK=1 (the default): after building the topology, `netns-router.sh sink` makes the
# receiving hosts drop the generator's frames at ingress (after its capture) and keeps
# the router namespace's kernel stack off weft's ports; SINK=0 measures without (before
# 2026-11-28: the receiving host routed every frame to nowhere, an RCU-freed dst each,
# on the forwarder's core when weft forwarded). Installs nftables when missing.
# AT_KPPS (one rate per size, e.g. 1,1): every forwarder, the kernel too, also
# measures latency at these rates instead of the kernel's zero-loss rates: a
# low-rate probe, whose rows carry at_within_100us_pct. With `-- --steps 0` the
# zero-loss search is skipped (one flat-out trial per size).
# TX_INFLIGHT (default 256; 0: the old budget): the generator's frames in flight, the
# same for every row (`rfc2544 --tx-inflight`). Its AF_XDP sender is flow-controlled:
# each frame's skb is charged to it until the kernel frees it, and where that happens
# depends on the forwarder (the kernel orphans it at the router's ip_rcv_core; tc or
# XDP fast path, only at host B's sink, one more backlog later). The old budget was
# the socket's default send buffer, in bytes: ~280 frames of 64 B but ~90 of 1518 B,
# too few at 1518 B to keep a fast path's router core fed through the generator's
# pauses, so that row measured the sender (docs/results/router.md §3.3j). 256 frames
# at every size (flat-out sweep, §3.3k): with 256 neither the own-core kernel nor tc
# was overrun at 64 or 1518 B (100 % delivered, 8 of 8 trials); 512 overran the
# own-core kernel at 64 B (99.5 %), 1024 collapsed it (66 %). A wire-like sender (no
# flow control, e.g. --tx-sndbuf-mib 64 with TX_INFLIGHT=0) overran both forwarders
# in §3.3j (the backlog holds 1 000 frames; the router core stalls).
set -euo pipefail
cd "$(dirname "$0")/.."
JSON=0
TRIAL=()
while [[ ${1:-} == --* && ${1:-} != -- ]]; do
  case "$1" in
    --json) JSON=1 ;;
    --long) TRIAL=(--trial-secs 60) ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
WEFT=${1:-target/release/weft}
shift || true
[[ ${1:-} == -- ]] && shift
TX_INFLIGHT=${TX_INFLIGHT:-256}
EXTRA=(--tx-inflight "$TX_INFLIGHT" "${TRIAL[@]}" "$@")
ROUNDS=${ROUNDS:-1}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
ROWS=$OUT/router-e2e.jsonl
: >"$ROWS"
KERNEL_LABEL="linux kernel"
NETNS=scripts/netns-router.sh
# The topology's namespaces have fixed names (weft-r, weft-ha, …), shared with the
# netns tests: take the machine's turn at them, as the tests do (weft_testkit::
# netns_turn, docs/testing.md), so that a run beside a test run waits instead of
# tearing the other's topology down. Held until the script exits.
exec 9>/run/lock/weft-netns-tests.lock
if ! flock -w 900 9; then
  echo "router-e2e.sh: another run held the namespaces (/run/lock/weft-netns-tests.lock) for 15 min" >&2
  exit 1
fi
# Two cores: the generator (sender and receiver threads) on one, weft's workers on
# the other. Kernel forwarding runs in softirq on whichever core sends, i.e. the
# generator's: it gets no core of its own and needs none.
GEN_CPU=${GEN_CPU:-0}
ROUTER_CPU=${ROUTER_CPU:-1}
# Priority: kernel forwarding runs in softirq, ahead of every process on its core;
# a user-space forwarder on a core shared with other work (here: other builds) only
# runs when the scheduler picks it, and its receive ring overflows meanwhile. Like a
# router's data plane that owns its core, weft's threads and the generator (for both
# forwarders alike) run at nice -10; NICE=0 measures without.
NICE=${NICE:--10}
BACKENDS=${BACKENDS:-afpacket afxdp}
ARCHS=${ARCHS:-push pull central}
KERNEL=${KERNEL:-1}
SINK=${SINK:-1}
if [[ $SINK == 1 ]] && ! command -v nft >/dev/null; then
  echo "installing nftables (for SINK=1)" >&2
  apt-get install -y -q --no-install-recommends nftables >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends nftables >/dev/null; }
fi
trap 'for p in $(ip netns pids weft-r 2>/dev/null); do kill -TERM "$p" 2>/dev/null || true; done; sleep 0.3; bash $NETNS down' EXIT

router_mac() { ip netns exec weft-r cat /sys/class/net/weft-ra/address; }

# run LABEL ROUND: one forwarder's rows, appended to $ROWS; a weft forwarder also
# measures latency at the kernel's rates of the same round when the kernel ran.
run() {
  local label=$1 round=$2 at=()
  if [[ -n ${AT_KPPS:-} ]]; then
    at=(--latency-at-kpps "$AT_KPPS")
  elif [[ $label != "$KERNEL_LABEL" && $KERNEL == 1 ]]; then
    at=(--latency-at-rows "$ROWS" --reference "$KERNEL_LABEL")
  fi
  echo "round $round/$ROUNDS: $label" >&2
  taskset -c "$GEN_CPU" nice -n "$NICE" "$WEFT" router rfc2544 --dst-mac "$(router_mac)" --label "$label" \
    --round "$round" --router-cpu "$ROUTER_CPU" --json "${at[@]}" "${EXTRA[@]}" >>"$ROWS"
}

for ((round = 1; round <= ROUNDS; round++)); do
  if [[ $KERNEL == 1 ]]; then
    bash $NETNS up kernel
    if [[ $SINK == 1 ]]; then bash $NETNS sink kernel; fi
    run "$KERNEL_LABEL" "$round"
    if [[ ${KERNEL_OWN_CORE:-0} == 1 ]]; then
      # RPS on weft-ra's receive queue: frames from host A are queued to the
      # router core's backlog and forwarded there (and on to host B from there).
      printf '%x' $((1 << ROUTER_CPU)) | ip netns exec weft-r tee /sys/class/net/weft-ra/queues/rx-0/rps_cpus >/dev/null
      run "$KERNEL_LABEL, own core" "$round"
    fi
  fi

  for backend in $BACKENDS; do
    case "$backend" in
      afpacket | afpacket-v3) args=(afpacket) ;;
      afxdp) args=(afxdp generic) ;;
      afxdp-native | afxdp-fwd-native) args=(afxdp native) ;;
      afxdp-rps | afxdp-fwd | afxdp-fwd-local) args=(afxdp generic) ;;
      afpacket-tc | afpacket-tc-local) args=(afpacket) ;;
      *) echo "unknown backend $backend" >&2; exit 2 ;;
    esac
    for arch in $ARCHS; do
      bash $NETNS up weft
      if [[ $SINK == 1 ]]; then
        case "$backend" in
          afpacket-tc*) bash $NETNS sink kernel ;;
          *) bash $NETNS sink weft ;;
        esac
      fi
      if [[ $backend == afxdp-rps || $backend == afxdp-fwd || $backend == afpacket-tc ]]; then
        # As for "linux kernel, own core": RPS queues the ingress veth's frames to
        # ROUTER_CPU, so their receive (generic XDP, the copy into the UMEM) runs on
        # weft's core, not in the generator's send call on GEN_CPU.
        printf '%x' $((1 << ROUTER_CPU)) | ip netns exec weft-r tee /sys/class/net/weft-ra/queues/rx-0/rps_cpus >/dev/null
      fi
      if [[ $backend == afxdp-fwd-native ]]; then
        # A native XDP_REDIRECT into weft-rb queues an xdp_frame on its peer's
        # (weft-b0's) receive queue, which exists only while that veth runs NAPI:
        # with an XDP program of its own or with GRO on. Without, every redirected
        # frame is dropped (veth_xdp_xmit: no NAPI, -ENXIO).
        ip netns exec weft-hb ethtool -K weft-b0 gro on >/dev/null
      fi
      case "$backend" in
        afxdp-fwd*) fwd=true ;;
        afxdp*) fwd=false ;;
        *) fwd= ;;
      esac
      cfg=$(mktemp)
      {
        if [[ -n ${BUSY_POLL_US:-} ]]; then printf '[router]\nbusy_poll_us = %s\n\n' "$BUSY_POLL_US"; fi
        # two ports: no idle third worker on two cores
        bash $NETNS config 2 "${args[@]}" |
          if [[ $backend == afpacket-v3 ]]; then sed 's/^interface = .*/&\nring = "v3"/'
          elif [[ $backend == afpacket-tc* ]]; then sed 's/^interface = .*/&\nfast_path = "tc"/'
          elif [[ -n $fwd ]]; then sed "s/^backend = \"afxdp\"\$/&\nxdp_forward = $fwd/"
          else cat; fi
      } > "$cfg"
      taskset -c "$ROUTER_CPU" ip netns exec weft-r nice -n "$NICE" "$WEFT" router --config "$cfg" --arch "$arch" --socket "/tmp/weft-e2e-$$.sock" \
        2> >(sed "s/^/[weft $backend $arch, round $round] /" >>"$OUT/router-stderr.txt") &
      sleep 1
      if ! kill -0 $! 2>/dev/null; then
        echo "weft router on $backend did not start" >&2; exit 1
      fi
      run "weft $backend $arch" "$round"
      # Where the time went (docs/router.md): the links' mean receive-ring wait,
      # frames per receive burst, sleeps and doorbell wake-ups, over the whole run.
      { echo "== weft $backend $arch, round $round"
        "$WEFT" router ctl --socket "/tmp/weft-e2e-$$.sock" show links
        "$WEFT" router ctl --socket "/tmp/weft-e2e-$$.sock" show counters; } >>"$OUT/stages.txt" 2>&1 || true
      for p in $(ip netns pids weft-r); do kill -TERM "$p" 2>/dev/null || true; done
      wait 2>/dev/null || true
      rm -f "$cfg"
    done
  done
done

if ((JSON)); then
  cat "$ROWS"
else
  "$WEFT" report "$ROWS" --out "$OUT" --name router-e2e --quiet | tee "$OUT/router-e2e.md"
  echo "rows: $ROWS; plot: $OUT/router-e2e.png" >&2
fi
