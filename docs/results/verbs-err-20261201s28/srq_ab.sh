#!/bin/sh
# ABAB of srq_pass (idle inline passes beside N SRQs), base vs new, under the exclusive lock.
for r in 1 2 3; do
  for n in 0 16 1024; do
    p=200000; [ $n -ge 1024 ] && p=20000
    for b in base new; do
      printf "%s r=%s " $b $r; ./srq_pass.$b --link shm --srqs $n --passes $p --rounds 3
    done
  done
done
