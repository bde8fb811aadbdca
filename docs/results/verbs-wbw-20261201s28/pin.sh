#!/bin/bash
# pin.sh TAG SRVCPU CLICPU : server and client processes pinned (taskset), shm write-bw thread
tag=$1; s=$2; c=$3; port=$((17000 + RANDOM % 1000))
B=/tmp/s28-base/weft
taskset -c $s timeout 60 $B perf write-bw --link shm --no-icrc --progress thread --size 65536 -n 20000 --port $port --stats > /tmp/wbw/pin-$tag.srv 2>&1 &
sleep 0.4
taskset -c $c timeout 60 $B perf write-bw --link shm --no-icrc --progress thread --size 65536 -n 20000 --port $port --stats 127.0.0.1 > /tmp/wbw/pin-$tag.cli 2>&1
wait
bw=$(grep -E '^\s*65536' /tmp/wbw/pin-$tag.cli | awk '{print $3}')
ss=$(grep -m1 'sleeps:' /tmp/wbw/pin-$tag.srv | tr -dc 0-9)
echo "$tag srv@$s cli@$c  MB/s $bw  srv sleeps $ss"
