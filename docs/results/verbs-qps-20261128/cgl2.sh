#!/bin/bash
# usage: [LL=size,assoc,line] cgl2.sh BIN TAG [which...]: callgrind cache-sim pairs of
# msg_rate runs, printing per-message differences; the last level is simulated as a
# 2 MiB L2 (LL=2097152,16,64, the default) or as given (LL= : callgrind's own choice,
# this machine's L3, as the older runs of verbs.md had it)
BIN=$1; TAG=$2; shift 2; OUT=/tmp/h13/cgl2-$TAG; mkdir -p $OUT
LL=${LL-2097152,16,64}
run() { valgrind --tool=callgrind --cache-sim=yes ${LL:+--LL=$LL} --callgrind-out-file=$OUT/$1-$2.out $BIN shm 64 600 $2 $3 $4 $5 > $OUT/$1-$2.log 2>&1; }
pair() {
  run $1 $2 $4 $5 $6; run $1 $3 $4 $5 $6
  python3 - "$OUT/$1-$2.out" "$OUT/$1-$3.out" $2 $3 $1 <<'PY'
import sys
def tot(f):
    ev=None
    for l in open(f):
        if l.startswith('events:'): ev=l.split()[1:]
        if l.startswith('totals:') or l.startswith('summary:'):
            v=list(map(int,l.split()[1:])); return dict(zip(ev,v))
a=tot(sys.argv[1]); b=tot(sys.argv[2]); n=int(sys.argv[4])-int(sys.argv[3])
print(sys.argv[5], ' '.join(f"{k}={(b[k]-a[k])/n:.1f}" for k in a))
PY
}
for w in "${@:-q1 q256x16 q4096x16}"; do
case $w in
q1) pair q1 10000 60000 256 1 1;;
q256x16) pair q256x16 20000 60000 4096 256 256;;
q4096x16) pair q4096x16 80000 240000 65536 4096 4096;;
q4096x1) pair q4096x1 5000 15000 256 4096 4096;;
esac
done
