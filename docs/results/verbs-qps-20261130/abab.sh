#!/bin/bash
# abab.sh OUT ROUNDS NAME BIN [NAME BIN ...]
# One `flock -x` per round; inside a round every configuration runs each binary in turn,
# the order of the binaries rotating from round to round.
OUT=$1; R=$2; shift 2
for r in $(seq 1 $R); do
  flock -x /work/notes/quiet.lock bash -c '
  OUT=$1; r=$2; shift 2
  bins=("$@"); n=$(( ${#bins[@]} / 2 ))
  for cfg in "1 512" "1 16" "16 256" "16 512" "256 512" "256 4096" "4096 512" "4096 65536"; do
    set -- $cfg; N=$1; D=$2
    for k in $(seq 0 $((n-1))); do
      j=$(( (k + r) % n ))
      name=${bins[$((2*j))]}; bin=${bins[$((2*j+1))]}
      load=$(cut -d" " -f1 /proc/loadavg)
      res=$(timeout 300 $bin perf send-bw --local --link shm --no-icrc --size 64 --tx-depth $D -n 200000 --json --quiet --qps $N 2>/dev/null | grep "^{" | tail -1)
      echo "{\"round\":$r,\"bin\":\"$name\",\"N\":$N,\"depth\":$D,\"load\":$load,\"t\":\"$(date -u +%H:%M:%S)\",\"res\":${res:-null}}" >> $OUT
    done
  done' _ "$OUT" "$r" "$@"
  sleep 10
done
