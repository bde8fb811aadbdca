#!/bin/bash
# ucx1.sh SRVCPU CLICPU
p=$((13000 + RANDOM % 1000))
UCX_TLS=posix,self taskset -c $1 timeout 60 ucx_perftest -p $p -t tag_bw -s 65536 -n 20000 > /tmp/wbw/ucx.srv 2>&1 &
sleep 0.5
UCX_TLS=posix,self taskset -c $2 timeout 60 ucx_perftest 127.0.0.1 -p $p -t tag_bw -s 65536 -n 20000 2>&1 | grep -A1 "Final" | tail -1
wait
