#!/bin/bash
# trace.sh TAG BIN LINK : one phased trace under one exclusive hold (≤ 10 min); as
# study-sat-20261201s24/trace.sh, writing to /tmp/idle/tr/TAG-LINK.jsonl
flock -x /work/notes/quiet.lock timeout 590 $2 study --parts phased --link $3 --json > /tmp/idle/tr/$1-$3.jsonl 2>/tmp/idle/tr/$1-$3.err
echo "$1 $3 rc=$? $(date -u +%T)"
