cd /work/main
for r in 1 2 3 4 5; do for b in old new; do
  if [[ $b == old ]]; then W=/tmp/weft-e2e; else W=target/release/weft; fi
  l=$($W perf send-lat --local --link shm --no-icrc --progress inline --size 64 -n 20000 --json --quiet 2>/dev/null | tail -1)
  m=$($W perf send-bw --local --link shm --no-icrc --progress inline --size 64 -n 1000000 --tx-depth 512 --json --quiet 2>/dev/null | tail -1)
  echo "$r $b LAT $l"; echo "$r $b BW $m"
done; done
