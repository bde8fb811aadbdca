#!/bin/bash
# Alternating (ABAB) runs of two weft binaries on the thread-progress and inline
# targets of docs/results/verbs.md ("Thread progress takes the doorbell path too").
#   A=old-binary B=new-binary ROUNDS=4 OUT=rows.txt [INLINE=1] [WLAT=0] abab.sh
# Run it under `flock -x /work/notes/quiet.lock`. Every row: round, variant, test,
# and the JSON fields the summary needs.
set -u
: "${A:?A=binary}" "${B:?B=binary}"
ROUNDS=${ROUNDS:-4}; OUT=${OUT:-rows.txt}; INLINE=${INLINE:-1}; WLAT=${WLAT:-0}
fields() { grep -o '"p50_us":[0-9.]*\|"mmsg_per_s":[0-9.]*\|"cpu_client_us_per_op":[0-9.]*\|"cpu_server_us_per_op":[0-9.]*' | tr '\n' ' '; }
row() { # round variant test binary args...
  local r=$1 v=$2 t=$3 bin=$4; shift 4
  echo "r$r $v $t $(timeout 60 "$bin" perf "$@" --json 2>/dev/null | tail -1 | fields)" >> "$OUT"
}
: > "$OUT"; uptime >> "$OUT"
progress=(thread); [ "$INLINE" = 1 ] && progress+=(inline)
for r in $(seq 1 "$ROUNDS"); do
  for v in A B; do
    if [ "$v" = A ]; then bin=$A; else bin=$B; fi
    for p in "${progress[@]}"; do
      row "$r" $v "shm-lat-$p" "$bin" send-lat --local --link shm --no-icrc --progress "$p" --size 64 -n 20000
      row "$r" $v "shm-bw-$p" "$bin" send-bw --local --link shm --no-icrc --progress "$p" --size 64 -n 1000000 --tx-depth 512
    done
    if [ "$WLAT" = 1 ]; then
      for l in shm udp; do
        row "$r" $v "$l-wlat-thread" "$bin" write-lat --local --link "$l" --progress thread --size 64 -n 5000
      done
    fi
    row "$r" $v udp-lat-thread "$bin" send-lat --local --link udp --progress thread --size 64 -n 20000
  done
done
uptime >> "$OUT"
