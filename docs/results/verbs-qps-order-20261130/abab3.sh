#!/bin/bash
# abab3.sh OUT ROUNDS NAME BIN [NAME BIN ...], with CFGS="N:DEPTH N:DEPTH ..." (exported):
# abab.sh for a chosen set of configurations; PAUSE seconds between rounds (default 5);
# ITERS messages per run (default 200000); EXTRA more weft perf arguments.
OUT=$1; R=$2; shift 2
export CFGS ITERS EXTRA
for r in $(seq 1 $R); do
  flock -x /work/notes/quiet.lock bash -c '
  OUT=$1; r=$2; shift 2
  bins=("$@"); n=$(( ${#bins[@]} / 2 ))
  for cfg in $CFGS; do
    N=${cfg%%:*}; D=${cfg#*:}
    for k in $(seq 0 $((n-1))); do
      j=$(( (k + r) % n ))
      name=${bins[$((2*j))]}; bin=${bins[$((2*j+1))]}
      load=$(cut -d" " -f1 /proc/loadavg)
      res=$(timeout 300 $bin perf send-bw --local --link shm --no-icrc --size 64 --tx-depth $D -n ${ITERS:-200000} --json --quiet --qps $N $EXTRA 2>/dev/null | grep "^{" | tail -1)
      echo "{\"round\":$r,\"bin\":\"$name\",\"N\":$N,\"depth\":$D,\"load\":$load,\"t\":\"$(date -u +%H:%M:%S)\",\"res\":${res:-null}}" >> $OUT
    done
  done' _ "$OUT" "$r" "$@"
  sleep "${PAUSE:-5}"
done
