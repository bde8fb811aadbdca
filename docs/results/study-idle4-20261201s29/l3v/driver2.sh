#!/bin/bash
cd /tmp/l3v
DEADLINE=$(date -d '23:34:30' +%s) EXTRA=--stats ./hogab.sh 20 hog9.jsonl block V=/tmp/l3v/weft-v L3=/tmp/l3v/weft-l3 B=/tmp/s29-base/weft
echo hogs-done $(date -u)
DEADLINE=$(date -d '23:36:30' +%s) ./probe3.sh 2 probe3.jsonl V=/tmp/l3v/weft-v L3=/tmp/l3v/weft-l3 B=/tmp/s29-base/weft
echo probe-done $(date -u)
