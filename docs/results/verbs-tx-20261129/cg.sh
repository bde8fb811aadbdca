#!/bin/sh
# usage: cg.sh BIN TAG
B=$1; T=$2
for a in "10000 256" "60000 256" "2000 1" "12000 1"; do set -- $a
  valgrind --tool=callgrind --callgrind-out-file=$T-$1-$2.out $B shm 64 600 $1 $2 > $T-$1-$2.txt 2>&1
done
python3 - "$T" <<'PY'
import re,sys
t=sys.argv[1]
def I(c,d):
    s=open(f'{t}-{c}-{d}.txt').read()
    return int(re.search(r'I\s+refs:\s+([\d,]+)',s).group(1).replace(',',''))
print(t,'streamed %.1f'%((I(60000,256)-I(10000,256))/50000),'pingpong %.1f'%((I(12000,1)-I(2000,1))/10000))
PY
grep -h passes $T-12000-1.txt
