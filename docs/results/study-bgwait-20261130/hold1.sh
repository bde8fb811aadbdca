#!/bin/bash
# hold1.sh: the background point, B and V alternating (with poll-inline B as the oracle), 4 rounds
cd /tmp/bgw/diag
echo "hold1 start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
bash bg.sh 4 udp "poll-inline adaptive" "B V"
echo "hold1 end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
