#!/bin/bash
# mr_abab3.sh ROUNDS OUT VARIANT...: msg_rate native (one thread drives both engines), streamed and lat,
# the variants' order rotating by one each round; binary /tmp/ins5/msg_rate-VARIANT
R=$1; OUT=$2; shift 2; V=("$@"); N=${#V[@]}
for r in $(seq 1 $R); do
  for i in $(seq 0 $((N-1))); do
    v=${V[$(( (i + r) % N ))]}
    s=$(/tmp/ins5/msg_rate-$v shm 64 5 2000000 256 2>&1 | grep -o '[0-9]* msg/s' | awk '{print $1}')
    l=$(/tmp/ins5/msg_rate-$v shm 64 5 200000 lat 2>&1 | grep -o 'one-way [0-9.]* us' | awk '{print $2}')
    echo "{\"round\":$r,\"variant\":\"$v\",\"stream_msg_s\":$s,\"lat_oneway_us\":$l,\"time\":\"$(date -u +%T)\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\"}" >> $OUT
  done
done
