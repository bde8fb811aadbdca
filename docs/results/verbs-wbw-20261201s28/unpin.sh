#!/bin/bash
# unpin.sh TAG BIN : server and client start pinned together on CPU 0; 0.3 s into the
# stream every thread of both may run on CPUs 0-1. Does the pair separate?
tag=$1; B=$2; port=$((18000 + RANDOM % 1000))
taskset -c 0 timeout 60 $B perf write-bw --link shm --no-icrc --progress thread --size 65536 -n 100000 --port $port --stats > /tmp/wbw/up-$tag.srv 2>&1 &
sp=$!
sleep 0.4
taskset -c 0 timeout 60 $B perf write-bw --link shm --no-icrc --progress thread --size 65536 -n 100000 --port $port --stats 127.0.0.1 > /tmp/wbw/up-$tag.cli 2>&1 &
cp=$!
sleep ${UNPIN_AT:-0.1}
for p in $(pgrep -f "perf write-bw --link shm --no-icrc --progress thread --size 65536 -n 100000 --port $port"); do taskset -a -p -c 0,1 $p > /dev/null; done
wait $cp; wait $sp
bw=$(grep -E '^\s*65536' /tmp/wbw/up-$tag.cli | awk '{print $3}')
ss=$(grep -m1 'sleeps:' /tmp/wbw/up-$tag.srv | tr -dc 0-9)
mv=$(grep -m1 'wakes_moved:' /tmp/wbw/up-$tag.srv | tr -dc 0-9)
echo "$tag MB/s $bw srv sleeps $ss moved ${mv:--}"
