#!/bin/bash
# traces-l.sh : udp phased traces of L = 3ba882d (N + the udp engine thread sleeping
# without the engine), one exclusive hold each; base udp traces are B4, B5 (traces.sh).
T=/work/wt/idle2/docs/results/study-sat-20261201s24/trace.sh
L=/tmp/idle2/weft-n3; B=/tmp/s27-base/weft
bash $T I2L1 $L udp; bash $T I2L2 $L udp; bash $T I2B7 $B udp; bash $T I2L3 $L udp
