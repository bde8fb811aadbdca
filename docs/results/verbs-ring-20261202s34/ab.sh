#!/bin/bash
# ABAB over variants, each round one exclusive hold (flock -x): shm 64 B SEND, two
# processes (`weft perf ... --local`), inline progress, against UCX posix.
# usage: ab.sh ROUNDS OUT BASE_WEFT NEW_WEFT
# BASE_WEFT: a weft binary without the ring mode (main before it); NEW_WEFT: with it
# (off by default, WEFT_RING=1 turns it on for the "ring" rows; "new-noring" is
# NEW_WEFT as shipped).
# Summarise with ../verbs-ring-proto-20261202s33/sum2.py OUT.
R=$1; OUT=$2; M=$3; P=$4; NL=100000; NB=2000000
for r in $(seq 1 "$R"); do
  flock -x /work/notes/quiet.lock bash -c '
  r='"$r"'; OUT='"$OUT"'; NL='$NL'; NB='$NB'; M='"$M"'; P='"$P"'
  tag() { sed "s/^{/{\"round\":$r,\"variant\":\"$1\",/" >> "$OUT"; }
  ucx() { # test size n variant
    port=$((14000+RANDOM%1000)); (UCX_TLS=posix,self timeout 60 ucx_perftest -p $port > /dev/null 2>&1 &); sleep 0.5
    l=$(UCX_TLS=posix,self timeout 60 ucx_perftest 127.0.0.1 -p $port -t $1 -s $2 -n $3 2>&1 | grep Final:)
    echo "{\"round\":$r,\"variant\":\"$4\",\"p50_us\":$(echo $l | awk "{print \$3}"),\"mmsg_per_s\":$(echo $l | awk "{print \$9/1e6}")}" >> "$OUT"; sleep 0.3; }
  lat() { timeout 120 "$@" perf send-lat --link shm --no-icrc --progress inline --size 64 -n $NL --local --json -q; }
  bw() { timeout 120 "$@" perf send-bw --link shm --no-icrc --progress inline --size 64 -n $NB --tx-depth 512 --local --json -q; }
  order="a b c d e f g h"; [ $((r%2)) = 0 ] && order="h g f e d c b a"
  for v in $order; do
    case $v in
      a) lat $M | tag lat-base ;;
      b) lat env WEFT_RING=1 $P | tag lat-ring ;;
      c) lat env WEFT_RING=0 $P | tag lat-new-noring ;;
      d) ucx tag_lat 64 $NL lat-ucx-posix ;;
      e) bw $M | tag bw-base ;;
      f) bw env WEFT_RING=1 $P | tag bw-ring ;;
      g) bw env WEFT_RING=0 $P | tag bw-new-noring ;;
      h) ucx tag_bw 64 $NB bw-ucx-posix ;;
    esac
  done'
  echo "round $r done $(date -u +%T)" >&2
done
