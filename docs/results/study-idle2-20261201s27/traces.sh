#!/bin/bash
# traces.sh : phased traces, one exclusive hold each (study-sat-20261201s24/trace.sh),
# base (I2B) and new (I2N, 9ea806e) alternating. The first pair (I2B1, I2P1) ran with
# P = 3c338ba (early ACKs at every block; binary with temporary env switches unset).
T=/work/wt/idle2/docs/results/study-sat-20261201s24/trace.sh
B=/tmp/s27-base/weft; N=/tmp/idle2/weft-n
bash $T I2N2 $N shm; bash $T I2N3 $N shm
bash $T I2N4 $N udp; bash $T I2B4 $B udp
bash $T I2B3 $B shm; bash $T I2N5 $N shm
bash $T I2B5 $B udp; bash $T I2N6 $N udp
bash $T I2B6 $B shm; bash $T I2N7 $N shm
