# streamed only: cgs.sh BIN TAG
B=$1; T=$2; O=/tmp/wqe/cg
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --callgrind-out-file=$O/$T-$1.out $B shm 64 600 $2 $3 >/dev/null 2>$O/$T-$1.err; }
run s10k 10000 256 & run s60k 60000 256 & wait
for n in s60k s10k; do callgrind_annotate --threshold=100 $O/$T-$n.out > $O/$T-$n.full 2>/dev/null; done
ir() { grep -o 'summary: [0-9]*' $O/$T-$1.out | awk '{print $2}'; }
python3 -c "print('$T streamed %.1f' % (($(ir s60k) - $(ir s10k))/50000))"
