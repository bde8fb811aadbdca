#!/bin/sh
# cglat.sh BIN TAG: lat pair (2000/12000)
B=$1; T=$2; cd /tmp/qps/cg
for c in 2000 12000; do
  flock -s /work/notes/quiet.lock valgrind --tool=callgrind --callgrind-out-file=$T-lat-$c.out $B shm 64 600 $c lat > $T-lat-$c.txt 2>&1
done
I(){ grep 'I   refs' $T-lat-$1.txt | awk '{gsub(",","",$4); print $4}'; }
echo "$T lat: $(echo "($(I 12000) - $(I 2000)) / 10000" | bc -l | cut -c1-7)" > $T-lat.res
