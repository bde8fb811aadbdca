#!/bin/bash
cd /tmp/l3v
DEADLINE=$(date -d '23:32:00' +%s) ./probe3.sh 2 probe4.jsonl B=/tmp/s29-base/weft M1=/tmp/l3v/weft-l3 V=/tmp/l3v/weft-v
echo probe-done $(date -u)
DEADLINE=$(date -d '23:35:45' +%s) EXTRA=--stats ./hogab.sh 12 hog10.jsonl block B=/tmp/s29-base/weft M1=/tmp/l3v/weft-l3 V=/tmp/l3v/weft-v
echo hogs-done $(date -u)
