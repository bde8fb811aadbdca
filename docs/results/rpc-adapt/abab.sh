#!/bin/sh
# usage: abab.sh OUT ROUNDS -- extra rpc-bench args
out=$1; rounds=$2; shift 2
cd /work/wt/rpcadapt
uptime >> $out.uptime
i=0
while [ $i -lt $rounds ]; do
  for a in on off; do
    target/release/weft rpc-bench --local --json --adapt $a "$@" >> $out.jsonl 2>> $out.log
  done
  i=$((i+1))
done
uptime >> $out.uptime
