# Shared by the benchmark scripts (peers.sh, verbs-perf.sh, one-copy-perf.sh,
# verbs-udp-latency.sh): waiting for a peer's server to listen, stopping it in bounded
# time, and one tagged weft run of a round. Sourced, not run.

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
