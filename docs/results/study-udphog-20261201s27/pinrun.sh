#!/bin/bash
# pinrun.sh BIN WAIT LINK N: the client process on CPU 0, the server child on CPU 1 (all threads)
B=$1; W=$2; L=$3; N=$4
$B perf send-lat --local --link $L --progress thread --wait $W --outstanding 16 --size 64 -n $N --json -q 2>/dev/null > /tmp/udp1/pin-$$.out &
P=$!
for k in $(seq 1 200); do C=$(pgrep -P $P | head -1); [ -n "$C" ] && break; sleep 0.005; done
sleep 0.05
taskset -a -p 1 $P >/dev/null; taskset -a -p 2 $C >/dev/null
wait $P
tail -1 /tmp/udp1/pin-$$.out
