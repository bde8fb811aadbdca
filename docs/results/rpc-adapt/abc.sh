#!/bin/sh
# usage: abc.sh OUT ROUNDS -- extra rpc-bench args: main (b6ee94e), adapt on, adapt off, alternating
out=$1; rounds=$2; shift 2
cd /work/wt/rpcadapt
uptime >> $out.uptime
i=0
while [ $i -lt $rounds ]; do
  /tmp/rpcadapt/base-target/release/weft rpc-bench --local --json "$@" 2>> $out.log | sed 's/}$/,"adapt":"main"}/' | sed 's/,"adapt":"-","adapt":"main"/,"adapt":"main"/' >> $out.jsonl
  for a in on off; do
    target/release/weft rpc-bench --local --json --adapt $a "$@" >> $out.jsonl 2>> $out.log
  done
  i=$((i+1))
done
uptime >> $out.uptime
