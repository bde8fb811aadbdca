#!/bin/bash
# studyflake.sh N LINK OLD NEW: N alternating `weft study --quick` runs per binary; counts rows that needed "run once more" and rows with errors
N=$1; L=$2; A=$3; B=$4
for i in $(seq $N); do
  for b in $A $B; do
    out=$(timeout 300 $b study --quick --link $L --json 2>/dev/null)
    echo "$(basename $b) $i rows=$(echo "$out" | grep -c '^{') once_more=$(echo "$out" | grep -c 'run once more') errors=$(echo "$out" | grep -c '"error"')"
  done
done
