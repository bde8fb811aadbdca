#!/bin/bash
# abab.sh ROUNDS OUT.jsonl: base (/tmp/urx/weft-base) vs new (/tmp/urx/weft-new2, WEFT_UDP_RX=uring),
# alternating per cell (order flipped every round), each round under one exclusive hold.
rounds=$1; out=$2
cell() { # round variant bin mode test prog size n
  local r=$1 v=$2 bin=$3 mode=$4 test=$5 prog=$6 size=$7 n=$8
  env WEFT_UDP_RX=$mode timeout 120 /tmp/urx/$bin perf $test --link udp --progress $prog --size $size -n $n --local --json -q 2>>/tmp/urx/abab-stderr.txt \
   | python3 -c 'import json,sys
for l in sys.stdin:
  d=json.loads(l); d["round"]=int(sys.argv[1]); d["variant"]=sys.argv[2]; d["progress"]=sys.argv[3]; print(json.dumps(d))' "$r" "$v" "$prog" >>"$out" || echo "failed $v $test $prog" >&2
}
for ((r = 1; r <= rounds; r++)); do
  flock -x /work/notes/quiet.lock bash -c "$(declare -f cell); out=$out
    for t in 'send-lat inline 64 20000' 'send-lat thread 64 20000' 'write-bw inline 65536 20000' 'write-bw thread 65536 20000'; do
      set -- \$t
      if (( $r % 2 )); then cell $r base weft-base mmsg \$1 \$2 \$3 \$4; cell $r uring weft-new2 uring \$1 \$2 \$3 \$4;
      else cell $r uring weft-new2 uring \$1 \$2 \$3 \$4; cell $r base weft-base mmsg \$1 \$2 \$3 \$4; fi
    done"
  echo "round $r done $(date -u +%T)" >&2
done
