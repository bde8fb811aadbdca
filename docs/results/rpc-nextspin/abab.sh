#!/bin/sh
# usage: abab.sh OUT ROUNDS -- extra rpc-bench args
# Alternates the binary before (tagged "spin": the old rule, SpinBudget::spin) and
# after (tagged "next": SpinBudget::next_spin), both --adapt on, ROUNDS times each.
# spin=/tmp/h17/weft-base (866279f), next=/tmp/h17/weft-new2 (713a048; the first
# attempt, ce66549, was /tmp/h17/weft-new). ORDER="next spin" runs B first in each
# round (BABA); ORDER="spin spin2" with spin2=a copy of the base binary is the A/A
# control. Run under flock -x /work/notes/quiet.lock.
out=$1; rounds=$2; shift 2
spin=${spin:-/tmp/h17/weft-base}; next=${next:-/tmp/h17/weft-new2}
spin2=${spin2:-/tmp/h17/weft-base2}
ORDER=${ORDER:-spin next}
uptime >> $out.uptime
i=0
while [ $i -lt $rounds ]; do
  for b in $ORDER; do
    eval bin=\$$b
    $bin rpc-bench --local --json --adapt on "$@" 2>> $out.log \
      | sed "s/\"adapt\":\"on\"/\"adapt\":\"$b\"/" >> $out.jsonl
  done
  i=$((i+1))
done
uptime >> $out.uptime
