#!/bin/bash
# quick: Fig.5-like on the veth wire: 16 in flight small ops alone/beside, bulk alone
W=/tmp/weft-look; RATE=${RATE:-2gbit}
/tmp/vethup.sh 9000
for p in "wmtu-a wmtu0" "wmtu-b wmtu1"; do set -- $p; ip netns exec $1 tc qdisc replace dev $2 root tbf rate $RATE burst 18000 limit 512kb; done
run() { local cc=$1; shift; ip netns exec wmtu-b timeout 60 $W perf send-lat --ip 198.18.0.2 --port 18620 --idle-timeout 20 --quiet --cc $cc --cc-target-us ${TGT:-40} >/dev/null 2>&1 & sleep 0.4; ip netns exec wmtu-a timeout 50 $W perf --cc $cc --cc-target-us ${TGT:-40} "$@" 198.18.0.2 --ip 198.18.0.1 --port 18620 --json --quiet 2>/dev/null | tail -1; wait; }
for cc in off delay; do
  a=$(run $cc send-lat --size 64 --request-size 16 --outstanding 16 --mtu 4096 -n 100000 --time-limit 2)
  b=$(run $cc send-lat --size 64 --request-size 16 --outstanding 16 --mtu 4096 -n 100000 --time-limit 2 --bulk-size 4194304 --bulk-depth 4)
  f=$(run $cc write-bw --size 4194304 --mtu 4096 -n 100)
  python3 - "$a" "$b" "$f" $cc <<'P'
import json,sys
a,b,f=(json.loads(x) for x in sys.argv[1:4])
xs=b['rtt_per_s']/a['rtt_per_s']; xb=b['bulk_mb_per_s']/f['mb_per_s']
j=(xs+xb)**2/(2*(xs*xs+xb*xb))
print(sys.argv[4], 'small ops/s alone %.0f beside %.0f (%.2f) p99 alone %.1f beside %.1f (%.2fx) flow alone %.0f beside %.0f (loss %.0f%%) jain %.3f'%(a['rtt_per_s'],b['rtt_per_s'],xs,a['p99_us'],b['p99_us'],b['p99_us']/a['p99_us'],f['mb_per_s'],b['bulk_mb_per_s'],100*(1-xb),j))
P
done
ip netns del wmtu-a; ip netns del wmtu-b
