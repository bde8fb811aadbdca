#!/bin/bash
# mr_abab.sh ROUNDS OUT: msg_rate natively (one thread drives both devices), base and new alternating
R=$1; OUT=$2
for r in $(seq 1 $R); do
  for v in base new; do
    [ $((r % 2)) = 0 ] && v=$([ $v = base ] && echo new || echo base)
    b=/tmp/s29fast/msg_rate-$([ $v = base ] && echo base || echo r3)
    s=$($b shm 64 0.5 | head -1 | grep -o '[0-9]* msg/s' | awk '{print $1}')
    l=$($b shm 64 0.5 100000000 lat | head -1 | grep -o 'one-way [0-9.]*' | awk '{print $2}')
    echo "{\"round\":$r,\"variant\":\"$v\",\"streamed_msg_s\":$s,\"lat_oneway_us\":$l}" >> $OUT
  done
done
