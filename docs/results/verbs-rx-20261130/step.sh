#!/bin/bash
# step.sh TAG: build the worktree, keep its binaries as /tmp/rx/{weft,msg_rate}-TAG, count both
set -e
cd /work/wt/rx
flock -s /work/notes/quiet.lock cargo build --release -p weft -p weft-verbs --example msg_rate -j2 2>&1 | grep -E '^(error|warning)|Finished' | head -20
cp target/release/weft /tmp/rx/weft-$1; cp target/release/examples/msg_rate /tmp/rx/msg_rate-$1
cd /tmp/rx && OUT=/tmp/rx bash /work/wt/rx/docs/results/verbs-instr-20261130/cg.sh /tmp/rx/msg_rate-$1 $1
