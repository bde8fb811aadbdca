# Shared by the benchmark scripts (peers.sh, verbs-perf.sh, one-copy-perf.sh,
# verbs-udp-latency.sh): waiting for a peer's server to listen, stopping it in bounded
# time, one tagged weft or ucx_perftest run of a round, and the CPU time of a run.
# Sourced, not run.

# Waits until something listens on TCP port $1 (at most 10 s).
wait_listen() {
  local i
  for ((i = 0; i < 200; i++)); do
    ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
    sleep 0.05
  done
  return 1
}

# Stops a server by PID: up to 10 s to exit by itself, then TERM, then KILL.
reap() {
  local pid=$1 i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  sleep 0.5
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# One weft run of a round-robin benchmark, tagged: `wrun_bin VARIANT BINARY ARGS...`
# runs `BINARY ARGS... --local --json -q` (bounded to 300 s), tags its records with
# $round and VARIANT (through $tag) and appends them to $jsonl; stderr goes to
# $out/raw/weft-stderr.txt. A failed run is reported and skipped.
wrun_bin() {
  local v=$1 bin=$2
  shift 2
  echo "[round $round] $v: $bin $*" >&2
  timeout 300 "$bin" "$@" --local --json -q 2>>"$out/raw/weft-stderr.txt" | $tag --round "$round" --variant "$v" >>"$jsonl" \
    || echo "  (failed: $bin $*)" >&2
}

# CPU seconds (user + system) summed over /usr/bin/time -f '%U %S' files.
cpu_of() { awk '/^[0-9.]+ [0-9.]+$/ { s += $1 + $2 } END { printf "%.3f", s }' "$@"; }

# One ucx_perftest run of a round, tagged like wrun_bin's:
# `ucx_run VARIANT LINK TEST SIZE N`. VARIANT picks the transports: ucx-posix
# (UCX_TLS=posix,self), ucx-sm (sm,self: posix, sysv and cma), ucx-default (UCX's own
# choice), ucx-tcp (tcp over lo). Server and client each bounded in time, on TCP port
# $port + 1 (bumped per run); warm-up N/10 within 10…1000; CPU of both processes from
# /usr/bin/time. Raw output in $out/raw/. A server that does not listen gives an error
# record.
ucx_run() {
  local v=$1 link=$2 test=$3 size=$4 n=$5 w tls=() rc=0 raw
  w=$((n / 10)); ((w > 1000)) && w=1000; ((w < 10)) && w=10
  case $v in
    ucx-posix) tls=(UCX_TLS=posix,self) ;;
    ucx-sm) tls=(UCX_TLS=sm,self) ;;
    ucx-default) tls=() ;;
    ucx-tcp) tls=(UCX_TLS=tcp UCX_NET_DEVICES=lo) ;;
    *) echo "ucx_run: unknown variant $v" >&2; return 1 ;;
  esac
  raw="$out/raw/r$round-$v-$test-$size.txt"
  port=$((port + 1))
  echo "[round $round] $v: ucx_perftest -t $test -s $size -n $n" >&2
  env "${tls[@]}" timeout -k 5 120 /usr/bin/time -f '%U %S' -o "$raw.server.time" ucx_perftest -p "$port" >"$raw.server" 2>&1 &
  local spid=$!
  if ! wait_listen "$port"; then
    reap "$spid"
    python3 scripts/peers_parse.py error --system "$v" --link "$link" --qp tag --test "$test" --size "$size" --iters "$n" \
      --error "ucx_perftest server did not listen: $(tail -2 "$raw.server" | tr '\n' ' ')" | $tag --round "$round" --variant "$v" >>"$jsonl"
    return
  fi
  env "${tls[@]}" timeout -k 5 110 /usr/bin/time -f '%U %S' -o "$raw.client.time" ucx_perftest 127.0.0.1 -p "$port" \
    -t "$test" -s "$size" -n "$n" -w "$w" -f >"$raw" 2>&1 || rc=$?
  reap "$spid"
  python3 scripts/peers_parse.py ucx --system "$v" --link "$link" --qp tag --test "$test" --size "$size" --iters "$n" --rc "$rc" <"$raw" \
    | $tag --round "$round" --variant "$v" --cpu-s "$(cpu_of "$raw.server.time" "$raw.client.time")" --ops $((n + w)) >>"$jsonl"
}
