#!/usr/bin/env bash
# ABAB: 64 B shm send-bw and send-lat, before (main at 2bada58) vs this tree (binaries copied to /tmp)
j() { python3 -c "import json,sys; r=[json.loads(l) for l in sys.stdin if l.startswith('{')][-1]; print(r.get('$1'), r.get('cpu_client_us_per_op',0)+r.get('cpu_server_us_per_op',0) if '$1'=='mmsg_per_s' else '')"; }
for r in 1 2 3 4 5; do for b in /tmp/weft-before-udplat /tmp/weft-burstmaps; do
 bw=$(timeout 60 $b perf send-bw --local --link shm --no-icrc --progress inline --size 64 --tx-depth 512 -n 1000000 --json --quiet 2>/dev/null | j mmsg_per_s)
 lat=$(timeout 60 $b perf send-lat --local --link shm --no-icrc --progress inline --size 64 -n 20000 --json --quiet 2>/dev/null | j p50_us)
 echo "$r $(basename $b) bw_mmsg_cpu $bw lat_p50 $lat"
done; done
