#!/bin/bash
W=${W:-${W:?weft binary}}; port=$((18000 + RANDOM % 1000))
export UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=weft0:1
timeout 120 $W exec --link udp --dev-node -- ucx_perftest -p $port > /tmp/tw/ucxq-srv.txt 2>&1 &
sleep 1
timeout 120 $W exec --link udp --dev-node -- ucx_perftest 127.0.0.1 -p $port -t tag_lat -n 200000 2>/tmp/tw/ucxq-cli.err | tail -1 &
sleep 2
pid=$(pgrep -n -f "ucx_perftest 127.0.0.1 -p $port")
ls -la /proc/$pid/fd | tail -n +2 | awk '{print $9,$10,$11}' > /tmp/tw/fds.txt
for t in /proc/$pid/task/*; do echo "$(basename $t) $(cat $t/comm)"; done > /tmp/tw/tids.txt
at=$(awk '$2=="async"{print $1}' /tmp/tw/tids.txt)
timeout 1 strace -p $at -tt 2>&1 | head -40 > /tmp/tw/strace-async.txt
timeout 2 strace -c -p $at 2> /tmp/tw/strace-async-c.txt
wait
