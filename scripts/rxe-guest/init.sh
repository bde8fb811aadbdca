#!/bin/sh
# PID 1 of the rdma_rxe test guest (scripts/rxe-guest.sh). Brings up eth0 with the
# addresses the job asks for, creates the soft-RoCE device rxe0 on it, runs the job's
# cmd.sh (from the job disk, /dev/vdb), writes its output and exit status back to
# the job disk, and powers the machine off. Nothing else runs in the guest.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# The initramfs leaves /proc, /sys and /dev mounted; mount them if it did not.
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /job
if ! mount -t ext4 /dev/vdb /job; then
	echo "weft-init: no job disk" >/dev/console
	echo o >/proc/sysrq-trigger
fi
# GUEST_IP4 GUEST_IP6 HOST_IP4 HOST_IP6 PREFIX4 PREFIX6 MTU TIMEOUT
. /job/env
{
	modprobe virtio_net
	ip link set lo up
	ip link set eth0 mtu "$MTU" up
	ip addr add "$GUEST_IP4/$PREFIX4" dev eth0
	ip -6 addr add "$GUEST_IP6/$PREFIX6" dev eth0 nodad
	rdma link add rxe0 type rxe netdev eth0
	echo "weft-init: $(uname -r), eth0 $GUEST_IP4 $GUEST_IP6 mtu $MTU, rxe0 $(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)"
} >/job/setup.log 2>&1
cat /job/setup.log >/dev/console
cd /job
# The job's output goes to the job disk and, live, to the console (the host's log).
{
	timeout -k 5 "$TIMEOUT" sh /job/cmd.sh
	echo $? >/job/status
} 2>&1 | tee /job/out >/dev/console
sync
cd /
umount /job
echo o >/proc/sysrq-trigger
sleep 10
