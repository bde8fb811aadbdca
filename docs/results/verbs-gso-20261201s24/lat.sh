#!/usr/bin/env bash
# ABAB udp 64 B send-lat (inline and thread progress): base and new alternate per round.
# Usage: ROUNDS=6 OUT=file.jsonl lat.sh name=bin name=bin
set -u
for ((r = 1; r <= ${ROUNDS:-6}; r++)); do
  for prog in inline thread; do
    for nb in "$@"; do
      name=${nb%%=*}; bin=${nb#*=}
      timeout 120 "$bin" perf send-lat --local --link udp --progress "$prog" --size 64 -n ${N:-20000} --json -q 2>/dev/null \
        | python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), variant=sys.argv[1], round=int(sys.argv[2])))) for l in sys.stdin if l.startswith("{")]' "$name-$prog" "$r"
    done
  done
done >>"${OUT:?}"
