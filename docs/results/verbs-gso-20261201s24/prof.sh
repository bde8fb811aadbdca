#!/bin/bash
# perf samples of the sender's kernel copy per message: prof.sh tag bin
tag=$1; bin=$2; f=/tmp/gso/prof-$tag-$RANDOM.data
out=$(perf record -F 4000 -o $f -- $bin perf write-bw --local --link udp --size 65536 -n 20000 --json -q 2>/dev/null)
iters=$(echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["iters"], round(d["mb_per_s"]))')
tot=$(perf report -i $f --no-children --sort sym -g none --stdio 2>/dev/null | grep -E '^#.*of event' ; perf report -i $f --no-children --sort sym -g none --stdio -n 2>/dev/null | grep -E '_copy_from_iter|memmove' | awk '{printf "%s=%s ", $NF, $2}')
echo "$tag iters,MB/s=$iters $tot"
