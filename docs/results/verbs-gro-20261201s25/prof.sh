#!/bin/bash
# perf samples (4 kHz, both processes) of the copies of a udp 64 KiB WRITE run: prof.sh tag bin
# prints MB/s and the samples of user memmove, the kernel's copy to user (_copy_to_iter,
# the receive), the sender's copy (_copy_from_iter) and UdpLink::recv_burst.
tag=$1; bin=$2; f=/tmp/gro/prof-$tag-$RANDOM.data
out=$(perf record -F 4000 -o $f -- $bin perf write-bw --local --link udp --size 65536 -n 20000 --json -q 2>/dev/null | tail -1)
iters=$(echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["iters"], round(d["mb_per_s"]))')
tot=$(perf report -i $f --no-children --sort sym -g none --stdio -n 2>/dev/null | grep -E '_copy_from_iter|_copy_to_iter|memmove|UdpLink as weft_link::datagram::DatagramLink>::recv_burst|^# Samples' | awk '{ if ($0 ~ /^# Samples/) printf "total=%s ", $3; else printf "%s=%s ", $NF, $2}')
echo "$tag iters,MB/s=$iters $tot"
rm -f $f
