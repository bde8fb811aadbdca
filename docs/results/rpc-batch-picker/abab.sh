#!/bin/sh
# usage: abab.sh OUT ROUNDS RPC-BENCH-ARGS...
# Alternates /tmp/rb/weft-base (8728e4d: --batch off,adaptive,on) and /tmp/rb/weft-g4
# (2339af9: --batch adaptive), the order swapped each round, each round under one
# exclusive hold of the measurement lock. Rows go to OUT.jsonl, each prefixed with the
# binary and the round ({"bin":…,"round":N,…}; summ.py reads the prefix), loads to
# OUT.uptime. The runs of 2026-11-29:
#   abab.sh r3 8  --link udp,shm --clients 1 --outstanding 1,2,8,32 --mix null
#   abab.sh r4 4  --link udp,shm --clients 1,4 --outstanding 1,32 --mix metadata --mode direct,dispatched
#   abab.sh r5 10 --link udp --clients 1 --outstanding 32 --mix metadata,null --mode direct
# (r2: the first r3 command with the g3 build, 6 rounds.)
OUT=$1; N=$2; shift 2
for r in $(seq 1 "$N"); do
  if [ $((r % 2)) = 1 ]; then order="base g4"; else order="g4 base"; fi
  flock -x /work/notes/quiet.lock sh -c '
    OUT=$1; r=$2; order=$3; shift 3
    uptime >> "$OUT.uptime"
    for b in $order; do
      if [ "$b" = base ]; then B=off,adaptive,on; else B=adaptive; fi
      timeout 300 /tmp/rb/weft-$b rpc-bench --local --json "$@" --batch $B --rounds 1 --seconds 1 2>/dev/null |
        sed "s/^{/{\"bin\":\"$b\",\"round\":$r,/" >> "$OUT.jsonl"
    done' sh "$OUT" "$r" "$order" "$@"
  echo "round $r done $(date +%T)"
done
