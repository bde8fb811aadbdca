#!/bin/bash
# ucxcmp.sh ROUNDS name=dir ...: per round, each weft build's ucx_perftest over weft0 (udp lat, shm lat, shm bw),
# then UCX's own (tcp lat, posix lat, posix bw). One flock -x hold per round. Prints one line per run.
R=$1; shift
one() { # label W L T TLS...
  local label=$1 W=$2 L=$3 T=$4; shift 4; local port=$((18000 + RANDOM % 1000)) n=20000 pre=()
  [ "$T" = tag_bw ] && n=200000
  if [ -n "$W" ]; then pre=($W exec --link $L --dev-node --); export UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=weft0:1; else export "$@"; unset UCX_NET_DEVICES; [ "$L" = tcp ] && export UCX_NET_DEVICES=lo; fi
  export WEFT_IBVERBS_STATS=1
  timeout 120 "${pre[@]}" ucx_perftest -p $port > /tmp/tw/cmp-srv.txt 2>&1 &
  sleep 1
  local line; line=$(timeout 120 "${pre[@]}" ucx_perftest 127.0.0.1 -p $port -t $T -s 8 -n $n 2>/tmp/tw/cmp-cli.err | grep Final)
  wait
  local st=""; [ -n "$W" ] && st="held $(grep -o 'polls_held: [0-9]*' /tmp/tw/cmp-cli.err /tmp/tw/cmp-srv.txt | awk '{printf "%s ", $2}')takeovers $(grep -o ' takeovers: [0-9]*' /tmp/tw/cmp-cli.err /tmp/tw/cmp-srv.txt | awk '{printf "%s ", $2}')"
  echo "$(date +%T) r$r $label $L $T $(echo $line | awk '{print "p50", $3, "avg", $4, "Mmsg_overall", $8/1e6}') $st"
  unset UCX_TLS UCX_NET_DEVICES
}
for r in $(seq 1 $R); do flock -x /work/notes/quiet.lock bash -c "$(declare -f one); r=$r; for nb in $*; do n=\${nb%%=*}; d=\${nb#*=}; one weft0-\$n \$d/weft udp tag_lat; one weft0-\$n \$d/weft shm tag_lat; one weft0-\$n \$d/weft shm tag_bw; done; one ucx '' tcp tag_lat UCX_TLS=tcp; one ucx '' posix tag_lat UCX_TLS=posix,self; one ucx '' posix tag_bw UCX_TLS=posix,self"; done
