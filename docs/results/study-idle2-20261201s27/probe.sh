#!/bin/bash
# probe.sh ROUNDS OUT VARIANT... : the sparse ping-pong probe (200 round trips, 10 ms
# pause after each, thread progress) with --stats, one exclusive hold per run, the
# variants rotated each round. VARIANT = name=binary[:ENV=1,...].
# Rows (probe.py): variant link wait round CPU-us/rtt p50 ctxsw/round + engine counts.
rounds=$1; out=$2; shift 2
vars=("$@")
for r in $(seq 1 $rounds); do
  n=${#vars[@]}
  for cfg in "shm block" "shm adaptive" "udp block" "udp adaptive"; do
    set -- $cfg
    for i in $(seq 0 $((n-1))); do
      v=${vars[$(( (i + r) % n ))]}
      name=${v%%=*}; rest=${v#*=}; bin=${rest%%:*}; envs=""
      [[ $rest == *:* ]] && envs=${rest#*:} && envs=${envs//,/ }
      f=/tmp/idle2/probe-$name-$1-$2-$r.txt
      flock -x /work/notes/quiet.lock env $envs /usr/bin/time -f "TIME %w %c %U %S" $bin perf send-lat --local --link $1 --progress thread --wait $2 -n 200 --pause-us 10000 --stats > $f 2>&1
      python3 $(dirname $0)/probe.py $name $1 $2 $r $f | tee -a $out
    done
  done
done
