#!/bin/bash
# usage: abab.sh ROUNDS OUT NAME=BIN...   (run under flock -x /work/notes/quiet.lock)
# A copy of docs/results/verbs-tx-20261129/abab.sh with the shm 64 KiB WRITE cells
# (write-bw inline and thread) added, a core-to-core probe at the start of each round,
# and (UCX=1) one UCX sm tag_bw 64 KiB run per round, as scripts/verbs-perf.sh runs it.
# The order inside a round rotates by one each round (round r starts with binary r mod n).
R=$1; OUT=$2; shift 2
BINS=("$@"); N=${#BINS[@]}
port=$((17400 + RANDOM % 2000))
for r in $(seq 1 $R); do
  probe=$(${BINS[0]#*=} probe --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["one_way_ns"])' 2>/dev/null)
  for i in $(seq 0 $((N-1))); do
    nb=${BINS[$(( (i + r) % N ))]}
    v=${nb%%=*}; bin=${nb#*=}
    for t in "send-lat inline" "send-bw inline" "write-bw inline" "send-lat thread" "send-bw thread" "write-bw thread"; do
      test=${t% *}; prog=${t#* }
      case $test in
        send-lat) extra="--size 64 -n 20000" ;;
        send-bw) extra="--size 64 --tx-depth 512 -n 1000000" ;;
        write-bw) extra="--size 65536 -n 20000" ;;
      esac
      line=$(timeout 60 $bin perf $test --local --link shm --no-icrc --progress $prog $extra --json -q 2>/dev/null | grep '^{' | tail -1)
      [ -n "$line" ] || line='{"test":"failed"}'
      echo "{\"round\":$r,\"pos\":$i,\"variant\":\"$v\",\"bin\":\"$bin\",\"progress\":\"$prog\",\"time\":\"$(date -u +%T)\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"probe_ns\":${probe:-null},\"r\":$line}" >> $OUT
    done
  done
  if [ "${UCX:-0}" = 1 ]; then
    port=$((port + 1)); raw=$(mktemp)
    UCX_TLS=sm,self timeout -k 5 60 /usr/bin/time -f '%U %S' -o $raw.st ucx_perftest -p $port >/dev/null 2>&1 &
    spid=$!; sleep 0.5
    UCX_TLS=sm,self timeout -k 5 60 /usr/bin/time -f '%U %S' -o $raw.ct ucx_perftest 127.0.0.1 -p $port -t tag_bw -s 65536 -n 20000 -w 1000 -f > $raw 2>&1
    wait $spid
    cpu=$(awk '/^[0-9.]+ [0-9.]+$/ { s += $1 + $2 } END { printf "%.3f", s }' $raw.st $raw.ct)
    line=$(python3 scripts/peers_parse.py ucx --system ucx-sm --link shm --qp tag --test tag_bw --size 65536 --iters 20000 --rc 0 < $raw | tail -1)
    echo "{\"round\":$r,\"pos\":$N,\"variant\":\"ucx-sm\",\"bin\":\"ucx_perftest\",\"progress\":\"-\",\"time\":\"$(date -u +%T)\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"probe_ns\":${probe:-null},\"cpu_s\":$cpu,\"r\":${line:-{\"test\":\"failed\"\}}}" >> $OUT
    rm -f $raw $raw.st $raw.ct
  fi
done
