#!/bin/bash
# lat.sh FIRST LAST OUT.jsonl BIN_A BIN_B : rounds FIRST..LAST in one exclusive hold; a
# round: the blocking ping-pong, then the idle probe, A and B each (order alternates by
# round). One JSON line a run (side/test/round added); each run's --stats text in OUT.d/.
f=$1; l=$2; out=$3; A=$4; B=$5; mkdir -p $out.d
one() { # SIDE TEST ROUND BIN ARGS...
  local s=$1 t=$2 i=$3 bin=$4; shift 4
  local line=$($bin perf send-lat --local --json --stats --link shm --progress thread --wait block "$@" 2>$out.d/$t-$s$i.txt | tee -a $out.d/$t-$s$i.txt | grep '^{' | tail -1)
  echo "{\"side\":\"$s\",\"test\":\"$t\",\"round\":$i,\"run\":$line}" >> $out
}
export -f one; export out A B
flock -x /work/notes/quiet.lock bash -c "
  echo hold \$(date +%T)
  for i in \$(seq $f $l); do
    if [ \$((i % 2)) = 1 ]; then o='A B'; else o='B A'; fi
    for s in \$o; do bin=\$A; [ \$s = B ] && bin=\$B; one \$s pp \$i \$bin --size 64 -n 20000; done
    for s in \$o; do bin=\$A; [ \$s = B ] && bin=\$B; one \$s idle \$i \$bin -n 200 --pause-us 10000; done
  done
  echo end \$(date +%T)"
