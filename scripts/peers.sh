#!/usr/bin/env bash
# Runs the peers weft is compared with, on this host over 127.0.0.1, on the message
# sizes of `weft perf --all`, and writes their results as weft JSON lines:
#   UCX ucx_perftest   tag_lat, tag_bw   with UCX_TLS=tcp        (system ucx-tcp, link loopback)
#                                        and  UCX_TLS=posix,self (system ucx-posix, link shm)
#   libfabric fi_pingpong (latency)      providers tcp (msg endpoint), "udp;ofi_rxd"
#                                        (rdm) and shm (rdm)
#
#   scripts/peers.sh [--quick] [--repeat N] [--out DIR]
#
# --repeat N: run every configuration N times and keep the best run (lowest median,
# else mean, latency; highest bandwidth), noted in the record: on a shared machine
# other load only ever slows a run down.
# --quick: 11 sizes (2 B … 8 MiB, about every 8x, plus the targets' 64 KiB) and fewer iterations; default: every
# power of two from 2 B to 8 MiB. Output: DIR/peers.jsonl, DIR/peers-env.txt (tool
# versions, transports, load), DIR/peers-raw/ (every tool's own output, per run). DIR defaults
# to docs/results.
#
# Units, so the numbers compare with weft's: latency is one-way (both tools halve the
# round trip themselves); bandwidth is MB/s with MB = 10^6 bytes (ucx_perftest's
# "MB/s" is 2^20 bytes; scripts/peers_parse.py converts). A run that fails becomes a
# record with "error" and the tool's own message; no number is ever made up.
#
# Every run is bounded (timeout), servers are stopped by their PID. Installs
# ucx-utils and libfabric-bin with apt when missing (we are root on Debian).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
repeat=1
run_suffix=""
out=docs/results
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --out) out="$2"; shift ;;
    --repeat) repeat="$2"; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "peers.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

missing=()
for p in ucx-utils libfabric-bin iproute2; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "peers: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

parse="python3 scripts/peers_parse.py"
mkdir -p "$out/peers-raw"
jsonl="$out/peers.jsonl"
: >"$jsonl"

if ((quick)); then
  # 64 B and 64 KiB are the sizes the issue-5 targets name: always measured.
  sizes=(2 8 64 512 4096 32768 65536 262144 1048576 4194304 8388608)
  lat_iters=2000
  bw_iters=2000
else
  sizes=()
  for ((s = 2; s <= 8388608; s *= 2)); do sizes+=("$s"); done
  lat_iters=10000
  bw_iters=5000
fi

# Iterations per size: latency at most 256 MiB each way per size (at least 100
# rounds), bandwidth at most 1 GiB per size (at least 16 messages), as weft's
# harness caps them (crates/bench/src/perf/run.rs).
lat_n() { local n=$((268435456 / $1)); ((n < 100)) && n=100; ((n > lat_iters)) && n=$lat_iters; echo "$n"; }
bw_n() { local n=$((1073741824 / $1)); ((n < 16)) && n=16; ((n > bw_iters)) && n=$bw_iters; echo "$n"; }
warm_n() { local w=$(($1 / 10)); ((w < 10)) && w=10; ((w > 1000)) && w=1000; echo "$w"; }

{
  echo "# peers.sh environment, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "## uname"; uname -srm
  echo "## cpus"; nproc
  echo "## load before the runs"; cat /proc/loadavg
  echo "## ucx"; ucx_info -v 2>&1 | head -2
  echo "## ucx transports (ucx_info -d)"; ucx_info -d 2>&1 | grep -E "Transport|Device" | paste - - | sed 's/ *# */ /g'
  echo "## libfabric"; fi_info --version 2>&1 | head -2
  echo "## libfabric providers (fi_info -l)"; fi_info -l 2>&1 | grep -E '^[a-z_0-9;]+:' | tr '\n' ' '; echo
} >"$out/peers-env.txt" 2>&1

port=$((13400 + RANDOM % 2000))
next_port() { port=$((port + 1)); ((port > 60000)) && port=13400; return 0; }

# wait_listen, reap
source "$(dirname "$0")/bench-lib.sh"

ucx_run() { # tls system link test size
  local tls=$1 system=$2 link=$3 test=$4 size=$5 n w raw rc=0 devs=all
  if [[ $test == *lat ]]; then n=$(lat_n "$size"); else n=$(bw_n "$size"); fi
  w=$(warm_n "$n")
  [[ $tls == tcp ]] && devs=lo
  raw="$out/peers-raw/$system-$test-$size$run_suffix.txt"
  next_port
  UCX_TLS=$tls UCX_NET_DEVICES=$devs timeout -k 5 180 ucx_perftest -p "$port" >"$raw.server" 2>&1 &
  local spid=$!
  if ! wait_listen "$port"; then
    reap "$spid"
    $parse error --system "$system" --link "$link" --qp tag --test "$test" --size "$size" --iters "$n" \
      --error "ucx_perftest server did not listen on port $port: $(tail -2 "$raw.server" | tr '\n' ' ')" >>"$jsonl"
    return
  fi
  UCX_TLS=$tls UCX_NET_DEVICES=$devs timeout -k 5 170 ucx_perftest 127.0.0.1 -p "$port" \
    -t "$test" -s "$size" -n "$n" -w "$w" -f >"$raw" 2>&1 || rc=$?
  reap "$spid"
  $parse ucx --system "$system" --link "$link" --qp tag --test "$test" --size "$size" --iters "$n" --rc "$rc" <"$raw" >>"$jsonl"
}

fi_run() { # provider ep system link size
  local prov=$1 ep=$2 system=$3 link=$4 size=$5 n raw rc=0
  n=$(lat_n "$size")
  raw="$out/peers-raw/$system-pingpong-$size$run_suffix.txt"
  next_port
  timeout -k 5 180 fi_pingpong -p "$prov" -e "$ep" -I "$n" -S "$size" -B "$port" >"$raw.server" 2>&1 &
  local spid=$!
  if ! wait_listen "$port"; then
    reap "$spid"
    $parse error --system "$system" --link "$link" --qp "$ep" --test pingpong --size "$size" --iters "$n" \
      --error "fi_pingpong server did not listen on port $port: $(tail -2 "$raw.server" | tr '\n' ' ')" >>"$jsonl"
    return
  fi
  timeout -k 5 170 fi_pingpong -p "$prov" -e "$ep" -I "$n" -S "$size" -P "$port" 127.0.0.1 >"$raw" 2>&1 || rc=$?
  reap "$spid"
  # A failing client often says little; the server's last words go along.
  if ((rc != 0)); then
    { echo "--- server:"; tail -3 "$raw.server"; } >>"$raw"
  fi
  $parse fi --system "$system" --link "$link" --qp "$ep" --test pingpong --size "$size" --iters "$n" --rc "$rc" <"$raw" >>"$jsonl"
}

total=$((${#sizes[@]} * 7))
k=0
step() { k=$((k + 1)); echo "[$k/$total] $*" >&2; }

# Runs "$@" $repeat times (each appending one record to $jsonl) and keeps the best.
repeated() {
  local main=$jsonl tmp i
  tmp=$(mktemp)
  jsonl=$tmp
  for ((i = 1; i <= repeat; i++)); do
    run_suffix=""
    ((repeat > 1)) && run_suffix=".run$i"
    "$@"
  done
  jsonl=$main
  $parse best <"$tmp" >>"$jsonl"
  rm -f "$tmp"
}

for tls_sys in "tcp ucx-tcp loopback" "posix,self ucx-posix shm"; do
  read -r tls system link <<<"$tls_sys"
  for test in tag_lat tag_bw; do
    for s in "${sizes[@]}"; do
      step "$system $test $s B"
      repeated ucx_run "$tls" "$system" "$link" "$test" "$s"
    done
  done
done

for prov_sys in "tcp msg libfabric-tcp loopback" "udp;ofi_rxd rdm libfabric-udp-rxd loopback" "shm rdm libfabric-shm shm"; do
  read -r prov ep system link <<<"$prov_sys"
  for s in "${sizes[@]}"; do
    step "$system pingpong $s B"
    repeated fi_run "$prov" "$ep" "$system" "$link" "$s"
  done
done

echo "## load after the runs" >>"$out/peers-env.txt"
cat /proc/loadavg >>"$out/peers-env.txt"
failed=$(grep -c '"error"' "$jsonl" || true)
echo "peers: $(wc -l <"$jsonl") records in $jsonl ($failed failed runs; see their \"error\")" >&2
