#!/bin/bash
# ABAB: weft main, weft ring prototype (WEFT_X_RING=1), UCX posix tag_lat; shm 64 B, two processes.
# usage: ab.sh ROUNDS OUT ; each round one exclusive hold
R=$1; OUT=$2; N=100000
M=/tmp/s33-base/weft; P=/work/wt/s33-ring/target/release/weft
for r in $(seq 1 $R); do
  flock -x /work/notes/quiet.lock bash -c '
  r='$r'; OUT='$OUT'; N='$N'; M='$M'; P='$P'
  order="main ring ucx"; [ $((r%2)) = 0 ] && order="ucx ring main"
  for v in $order; do
    case $v in
      main) timeout 120 $M perf send-lat --link shm --no-icrc --progress inline --size 64 -n $N --local --json -q | sed "s/^{/{\"round\":$r,\"variant\":\"main\",/" >> $OUT ;;
      ring) WEFT_X_RING=1 timeout 120 $P perf send-lat --link shm --no-icrc --progress inline --size 64 -n $N --local --json -q | sed "s/^{/{\"round\":$r,\"variant\":\"ring\",/" >> $OUT ;;
      ucx) port=$((14000+r)); (UCX_TLS=posix,self timeout 60 ucx_perftest -p $port > /dev/null 2>&1 &); sleep 0.5
           l=$(UCX_TLS=posix,self /usr/bin/time -f "%U %S" timeout 60 ucx_perftest 127.0.0.1 -p $port -t tag_lat -s 64 -n $N 2>&1 | grep Final:)
           echo "{\"round\":$r,\"variant\":\"ucx-posix\",\"p50_us\":$(echo $l | awk "{print \$3}"),\"mean_us\":$(echo $l | awk "{print \$4}")}" >> $OUT ;;
    esac
  done'
  echo "round $r done" >&2
done
