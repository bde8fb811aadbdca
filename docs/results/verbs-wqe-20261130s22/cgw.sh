#!/bin/bash
# cgw.sh BIN TAG N D COUNT : cachegrind (D1 32K/8, LL 2M/16) of weft perf send-bw --local, both processes
BIN=$1; TAG=$2; N=$3; D=$4; C=$5
mkdir -p ${CGW:-/tmp/wqe/cgw}/$TAG-$N-$D-$C
cd ${CGW:-/tmp/wqe/cgw}/$TAG-$N-$D-$C
valgrind --tool=cachegrind --cache-sim=yes --D1=32768,8,64 --LL=2097152,16,64 --trace-children=yes --max-threads=5000 --I1=32768,8,64 \
  --cachegrind-out-file=${CGW:-/tmp/wqe/cgw}/$TAG-$N-$D-$C/cg.%p \
  $BIN perf send-bw --local --link shm --no-icrc --size 64 --tx-depth $D -n $C --json --quiet --qps $N > out.json 2> err.txt
echo rc=$? >> err.txt
