#!/bin/bash
# trace.sh TAG BIN LINK : one phased trace under one exclusive hold (≤ 10 min)
flock -x /work/notes/quiet.lock timeout 590 $2 study --parts phased --link $3 --json > /tmp/sat/tr/$1-$3.jsonl 2>/tmp/sat/tr/$1-$3.err
echo "$1 $3 rc=$? $(date -u +%T)"
