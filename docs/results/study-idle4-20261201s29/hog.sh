#!/bin/bash
# hog.sh SECONDS N: N busy loops for SECONDS
for i in $(seq 1 $2); do timeout $1 sh -c 'while :; do :; done' & done; wait
