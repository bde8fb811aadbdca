#!/bin/bash
# abab.sh OUT ROUNDS NAME BIN [NAME BIN ...]
# One `flock -x` per round; inside a round every configuration runs each binary in turn,
# the order of the binaries rotating from round to round. abab2.sh with the session's
# first set of configurations and 10 s between rounds.
CFGS="1:512 1:16 16:256 16:512 256:512 256:4096 4096:512 4096:65536" PAUSE=10 \
  exec bash "$(dirname "$0")/abab2.sh" "$@"
