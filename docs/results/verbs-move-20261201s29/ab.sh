#!/bin/bash
# ab.sh HOLDS PER OUTDIR BIN_A BIN_B : HOLDS exclusive holds of PER rounds each (the lock
# was shared with four other sessions: a hold a round would not fit). A round: plain
# runs of A and B (order alternates by round), then each again with a hog: a busy loop
# on CPU (round % 2) for 0.4 s, the run started 0.2 s into it. A run takes ~80 ms
# (diag.sh), so the hog keeps one CPU busy for the whole run: "beside a hog".
H=$1; P=$2; out=$3; A=$4; B=$5; D=$(dirname $(readlink -f $0))
mkdir -p $out
run() { # TAG BIN
  $2 perf write-bw --local --link shm --no-icrc --progress thread --size 65536 -n 20000 --stats > $out/$1.txt 2>&1
  python3 $D/parse.py $out/$1.txt $1
}
hogrun() { # TAG BIN CPU
  timeout 0.4 taskset -c $3 bash -c 'while :; do :; done' & local h=$!
  sleep 0.2; run $1 $2; wait $h
}
export -f run hogrun; export out D A B
for h in $(seq 1 $H); do
  flock -x /work/notes/quiet.lock bash -c "
    echo hold $h \$(date +%T)
    for i in \$(seq $(( (h-1)*P + 1 )) $(( h*P ))); do
      if [ \$((i % 2)) = 1 ]; then o='A B'; else o='B A'; fi
      for s in \$o; do bin=\$A; [ \$s = B ] && bin=\$B; run \$s\$i \$bin; done
      for s in \$o; do bin=\$A; [ \$s = B ] && bin=\$B; hogrun \${s}h\$i \$bin \$((i % 2)); done
    done
    echo end \$(date +%T)"
done
