#!/bin/bash
# udplat.sh ROUNDS OUT name=BIN ... : alternating udp 64 B send-lat inline p50, one hold per run
r=$1; out=$2; shift 2
for i in $(seq 1 $r); do
  for nb in "$@"; do
    n=${nb%%=*}; b=${nb#*=}
    flock -x /work/notes/quiet.lock $b perf send-lat --local --link udp --progress inline --size 64 -n 20000 --json 2>/dev/null \
      | python3 -c "import json,sys
for l in sys.stdin:
  try: d=json.loads(l)
  except: continue
  if 'p50_us' in d or 't_typical_us' in d: print(json.dumps({'round':$i,'name':'$n',**{k:v for k,v in d.items() if not isinstance(v,(list,dict))}}))" >> $out
  done
done
