#!/bin/bash
# annot.sh TAG FUNC SYM N BIN: per-source-line table and per-instruction listing of one function
T=$1; F=$2; S=$3; N=${4:-50000}; BIN=$5
OUT=/tmp/rx bash /work/wt/rx/docs/results/verbs-instr-20261130/hot.sh "$F" "$S" $N /tmp/rx/$T-ia.out /tmp/rx/$T-ib.out $BIN
cp /tmp/rx/h-annot.txt /tmp/rx/annot-last.txt   # hot.sh's per-instruction listing
