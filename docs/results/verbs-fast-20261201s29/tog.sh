#!/bin/bash
# tog.sh BIN TAG FN SHORT: inclusive instructions per lat round inside FN (toggle-collect)
B=$1; T=$2; F=$3; S=$4; O=${OUT:-/tmp/s29fast/cg}
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --toggle-collect="$F" --callgrind-out-file=$O/$T-$S-$1.out $B shm 64 600 $2 $3 >/dev/null 2>$O/$T-$S-$1.err; }
run l2k 2000 lat & run l12k 12000 lat & wait
ir() { grep -o 'summary: [0-9]*' $O/$T-$S-$1.out | awk '{print $2}'; }
l=$(( ($(ir l12k) - $(ir l2k)) ))
python3 -c "print('$T $S lat %.1f' % ($l/10000))" | tee -a $O/tog.txt
