#!/bin/bash
cd /tmp/l3v
DEADLINE=$(date -d '23:33:00' +%s) EXTRA=--stats ./hogab.sh 20 hog8.jsonl block B=/tmp/s29-base/weft L3=/tmp/l3v/weft-l3 V=/tmp/l3v/weft-v
echo hogs-done $(date -u) 
DEADLINE=$(date -d '23:36:15' +%s) ./probe3.sh 2 probe2.jsonl B=/tmp/s29-base/weft L3=/tmp/l3v/weft-l3 V=/tmp/l3v/weft-v
echo probe-done $(date -u)
