#!/bin/bash
B=$1; T=$2; N=$3
python3 /tmp/tw/perturb.py 600 & PP=$!
sleep 0.5
for i in $(seq 1 $N); do
 for v in "inline 50" "thread 50" "thread 1000" "thread 10000"; do
  p=${v% *}; s=${v#* }
  out=$(WEFT_DIAG_IDLE_SPIN_US=$s $B perf write-bw --local --link shm --no-icrc --progress $p --size 65536 -n 20000 --json -q --stats 2>/tmp/tw/pert.err | grep '^{')
  sl=$(grep -E '^\s+sleeps' /tmp/tw/pert.err | tr -s ' ' | cut -d' ' -f3 | paste -sd/)
  echo "$i $p $s sleeps=$sl $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(round(r["mb_per_s"]), round(r["cpu_client_us_per_op"],2), round(r["cpu_server_us_per_op"],2))')" | tee -a /tmp/tw/pert-$T.txt
 done
done
kill $PP
