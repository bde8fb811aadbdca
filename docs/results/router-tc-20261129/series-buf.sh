#!/usr/bin/env bash
# usage: series-buf.sh FIRST LAST — the RPS tc row and the kernel rows with the sender's 64 MiB send buffer
cd /work/wt/h25-tc
for n in $(seq "$1" "$2"); do
  flock -x /work/notes/quiet.lock bash -c "echo \"buf run $n start \$(date -u +%T) load \$(cut -d' ' -f1-3 /proc/loadavg)\"; env TX_INFLIGHT=0 KERNEL_OWN_CORE=1 SINK=1 ROUNDS=1 BACKENDS=afpacket-tc ARCHS=push OUT=/tmp/h25/b/r$n bash scripts/router-e2e.sh --json /tmp/h25/weft-tc -- --sizes 64,512,1518 --tx-sndbuf-mib 64 > /tmp/h25/b/r$n.jsonl 2> /tmp/h25/b/r$n.err; echo \"buf run $n end \$(date -u +%T) rc \$?\""
  sleep 10
done
