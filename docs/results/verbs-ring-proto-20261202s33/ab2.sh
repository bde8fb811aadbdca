#!/bin/bash
# ABAB over variants, each round one exclusive hold: shm 64 B SEND, two processes.
# usage: ab2.sh ROUNDS OUT
R=$1; OUT=$2; NL=100000; NB=2000000
M=/tmp/s33-base/weft; P=/work/wt/s33-ring/target/release/weft
for r in $(seq 1 $R); do
  flock -x /work/notes/quiet.lock bash -c '
  r='$r'; OUT='$OUT'; NL='$NL'; NB='$NB'; M='$M'; P='$P'
  tag() { sed "s/^{/{\"round\":$r,\"variant\":\"$1\",/" >> $OUT; }
  ucx() { # test size n variant
    port=$((14000+RANDOM%1000)); (UCX_TLS=posix,self timeout 60 ucx_perftest -p $port > /dev/null 2>&1 &); sleep 0.5
    t0=$(cat /proc/stat | head -1)
    l=$(UCX_TLS=posix,self timeout 60 ucx_perftest 127.0.0.1 -p $port -t $1 -s $2 -n $3 2>&1 | grep Final:)
    echo "{\"round\":$r,\"variant\":\"$4\",\"p50_us\":$(echo $l | awk "{print \$3}"),\"mmsg_per_s\":$(echo $l | awk "{print \$9/1e6}")}" >> $OUT; sleep 0.3; }
  order="a b c d e f g"; [ $((r%2)) = 0 ] && order="g f e d c b a"
  for v in $order; do
    case $v in
      a) timeout 120 $M perf send-lat --link shm --no-icrc --progress inline --size 64 -n $NL --local --json -q | tag lat-main ;;
      b) WEFT_X_RING=1 timeout 120 $P perf send-lat --link shm --no-icrc --progress inline --size 64 -n $NL --local --json -q | tag lat-ring ;;
      c) ucx tag_lat 64 $NL lat-ucx-posix ;;
      d) timeout 120 $M perf send-bw --link shm --no-icrc --progress inline --size 64 -n $NB --tx-depth 512 --local --json -q | tag bw-main-512 ;;
      e) WEFT_X_RING=1 timeout 120 $P perf send-bw --link shm --no-icrc --progress inline --size 64 -n $NB --tx-depth 128 --local --json -q | tag bw-ring-128 ;;
      f) WEFT_X_RING=1 timeout 120 $P perf send-bw --link shm --no-icrc --progress inline --size 64 -n $NB --tx-depth 256 --local --json -q | tag bw-ring-256 ;;
      g) ucx tag_bw 64 $NB bw-ucx-posix ;;
    esac
  done'
  echo "round $r done $(date -u +%T)" >&2
done
