#!/bin/bash
# UCX tag_lat over weft0 (udp): server + client under weft exec; prints the client's summary line
W=${W:-/tmp/tw/weft-base}; L=${L:-udp}; N=${N:-20000}; port=$((18000 + RANDOM % 1000))
export UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=weft0:1
timeout 120 $W exec --link $L --dev-node -- ucx_perftest -p $port > /tmp/tw/ucxq-srv.txt 2>&1 &
sleep 1
timeout 120 $W exec --link $L --dev-node -- ucx_perftest 127.0.0.1 -p $port -t ${T:-tag_lat} -n $N 2>/tmp/tw/ucxq-cli.err | tail -1
wait
