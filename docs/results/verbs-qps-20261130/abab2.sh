#!/bin/bash
# abab2.sh OUT ROUNDS NAME BIN [NAME BIN ...], with CFGS="N:DEPTH N:DEPTH ..." (exported):
# abab.sh for a chosen set of configurations, 200 000 messages a run; PAUSE seconds between
# rounds (default 5). The same loop as ../verbs-qps-order-20261130/abab3.sh with its
# default ITERS, which this now runs.
ITERS=200000 exec bash "$(dirname "$0")/../verbs-qps-order-20261130/abab3.sh" "$@"
