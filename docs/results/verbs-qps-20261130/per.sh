#!/bin/sh
# per.sh TAG: per-message Ir for the three pairs
cd /tmp/qps/cg; T=$1
I(){ grep 'I   refs' $T-$1.txt | awk '{gsub(",","",$4); print $4}'; }
echo "$T 1x256: $(echo "($(I 60000-256-1) - $(I 10000-256-1)) / 50000" | bc -l | cut -c1-7)"
echo "$T 4096x16: $(echo "($(I 240000-65536-4096) - $(I 80000-65536-4096)) / 160000" | bc -l | cut -c1-7)"
echo "$T 4096x1: $(echo "($(I 15000-4096-4096) - $(I 5000-4096-4096)) / 10000" | bc -l | cut -c1-7)"
