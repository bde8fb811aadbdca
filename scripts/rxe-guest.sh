#!/usr/bin/env bash
# A Debian bookworm guest (kernel 6.1) with Linux's own software RoCE (rdma_rxe), for
# live interop with weft (issue 19; docs/results/interop.md).
#
#   scripts/rxe-guest.sh image
#       Build the guest image if it is missing or its recipe changed; print its
#       directory. Cached outside the repository in $WEFT_RXE_CACHE
#       (default /var/cache/weft-rxe-guest/<recipe hash>/): rootfs.ext4, vmlinuz,
#       initrd.img. Two to four minutes and about 700 MB the first time; an image of an
#       older recipe is deleted when the new one is built.
#   scripts/rxe-guest.sh netns NS
#       Make network namespace NS (if missing) with the tap wrxe0 in it, addressed as
#       below, for a host process to bind to before the guest boots. The caller
#       deletes it (ip netns del NS).
#   scripts/rxe-guest.sh run [--netns NS] [--timeout S] [--mtu N] [--file PATH]... -- CMD
#       Boot the guest (TCG: /dev/kvm here cannot boot a stock kernel), bring up rxe0
#       on its eth0, run the shell command CMD in /job (where every --file is copied),
#       print its output and exit with its status (124: CMD timed out; 125: the guest
#       never reported). The guest's NIC is a tap, wrxe0, inside network namespace NS
#       (made and deleted here when not given; when given, the tap is made in it if
#       missing and left there). Host side of the tap: 198.18.0.1/24, 2001:2::1/64;
#       guest: 198.18.0.2/24, 2001:2::2/64. The guest's console goes to stderr.
#       --timeout bounds CMD (default 120 s); qemu itself is killed 60 s later.
#
# Requires root (namespaces, taps), qemu-system-x86, debootstrap, e2fsprogs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${WEFT_RXE_CACHE:-/var/cache/weft-rxe-guest}

HOST_IP4=198.18.0.1
GUEST_IP4=198.18.0.2
HOST_IP6=2001:2::1
GUEST_IP6=2001:2::2
TAP=wrxe0

guest_packages=linux-image-amd64,initramfs-tools,kmod,rdma-core,ibverbs-utils,ibverbs-providers,perftest,rdmacm-utils,iproute2,tcpdump,procps

# The recipe: what the image is made from. Its hash names the cache directory, so a
# change here (or in init.sh) builds a new image.
build_image() {
	local out=$1 root=$1/root
	rm -rf "$root"
	mkdir -p "$root"
	debootstrap --variant=minbase --include="$guest_packages" bookworm "$root" \
		http://deb.debian.org/debian >"$out/debootstrap.log" 2>&1 ||
		{ tail -20 "$out/debootstrap.log" >&2; return 1; }
	install -m 0755 "$here/rxe-guest/init.sh" "$root/sbin/weft-init"
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	cp "$root"/boot/vmlinuz-* "$out/vmlinuz"
	cp "$root"/boot/initrd.img-* "$out/initrd.img"
	mkfs.ext4 -q -F -L weftrxe -d "$root" "$out/rootfs.ext4" 1200M
	rm -rf "$root"
}

recipe_hash() {
	{
		echo "$guest_packages"
		declare -f build_image
		cat "$here/rxe-guest/init.sh"
	} | sha256sum | cut -c1-16
}

# Remove a build directory: first unmount anything a cut-off debootstrap left mounted
# inside it (proc, sys, a bind-mounted dev), then delete without crossing into any
# other file system.
remove_build() {
	local d=$1
	[[ -e $d ]] || return 0
	findmnt -rn -o TARGET | grep -F -- "$d/" | sort -r | while read -r m; do
		umount -l "$m" || true
	done
	rm -rf --one-file-system "$d"
}

# Print the image directory, building it first when missing.
image() {
	local dir
	dir=$cache_root/$(recipe_hash)
	if [[ ! -f $dir/done ]]; then
		mkdir -p "$cache_root"
		# One builder at a time; a second caller waits for the first's image.
		exec 9>"$cache_root/.lock"
		flock -w 900 9 || { echo "rxe-guest: timed out waiting for another build" >&2; return 1; }
		if [[ ! -f $dir/done ]]; then
			echo "rxe-guest: building the guest image in $dir (2-3 minutes)" >&2
			remove_build "$dir"
			mkdir -p "$dir"
			build_image "$dir"
			touch "$dir/done"
			# Images of older recipes are not used again.
			find "$cache_root" -mindepth 1 -maxdepth 1 -type d ! -path "$dir" -print0 |
				while IFS= read -r -d '' old; do remove_build "$old"; done
		fi
		exec 9>&-
	fi
	echo "$dir"
}

# The tap in namespace $1 (made when missing), MTU $2.
make_tap() {
	local ns=$1 mtu=$2
	ip netns list | grep -qw "^$ns" || ip netns add "$ns"
	if ! ip -n "$ns" link show "$TAP" >/dev/null 2>&1; then
		ip -n "$ns" tuntap add dev "$TAP" mode tap
		ip -n "$ns" link set lo up
		ip -n "$ns" addr add "$HOST_IP4/24" dev "$TAP"
		ip -n "$ns" -6 addr add "$HOST_IP6/64" dev "$TAP" nodad
	fi
	ip -n "$ns" link set "$TAP" mtu "$mtu" up
}

run() {
	local timeout=120 mtu=1500 files=()
	netns=
	while (($#)); do
		case $1 in
		--netns) netns=$2; shift 2 ;;
		--timeout) timeout=$2; shift 2 ;;
		--mtu) mtu=$2; shift 2 ;;
		--file) files+=("$2"); shift 2 ;;
		--) shift; break ;;
		*) echo "rxe-guest run: unknown option $1" >&2; return 2 ;;
		esac
	done
	(($#)) || { echo "rxe-guest run: no command" >&2; return 2; }
	local cmd=$*
	local img
	img=$(image)
	for t in qemu-system-x86_64 debugfs mkfs.ext4 ip; do
		command -v "$t" >/dev/null || { echo "rxe-guest: $t not found (scripts/setup.sh)" >&2; return 1; }
	done

	# Globals, not locals: the EXIT trap runs after this function has returned.
	own_ns=""
	work=$(mktemp -d /tmp/weft-rxe-job.XXXXXX)
	if [[ -z $netns ]]; then
		netns=weft-rxe-$$
		own_ns=1
		ip netns add "$netns"
	fi
	qpid=""
	cleanup() {
		if [[ -n $qpid ]]; then
			kill -TERM "$qpid" 2>/dev/null || true
			wait "$qpid" 2>/dev/null || true
		fi
		if [[ -n $own_ns ]]; then ip netns del "$netns" 2>/dev/null || true; fi
		rm -rf "$work"
	}
	trap cleanup EXIT
	# A caller's TERM (a test giving up) still runs cleanup: qemu is stopped
	# (timeout passes the signal on) and our namespace deleted.
	trap 'exit 143' TERM INT

	make_tap "$netns" "$mtu"

	mkdir -p "$work/job"
	for f in "${files[@]}"; do cp "$f" "$work/job/"; done
	printf '%s\n' "$cmd" >"$work/job/cmd.sh"
	cat >"$work/job/env" <<-EOF
		GUEST_IP4=$GUEST_IP4
		GUEST_IP6=$GUEST_IP6
		HOST_IP4=$HOST_IP4
		HOST_IP6=$HOST_IP6
		PREFIX4=24
		PREFIX6=64
		MTU=$mtu
		TIMEOUT=$timeout
	EOF
	# Kernel options: no_timer_check, because on a loaded host TCG can be too slow
	# for the IO-APIC timer check and the kernel panics ("IO-APIC + timer doesn't
	# work"); net.ifnames=0 keeps the NIC's name eth0. A boot that never reaches
	# the guest's init (no setup.log on the job disk) is tried once more.
	local append="root=/dev/vda rw init=/sbin/weft-init net.ifnames=0 no_timer_check"
	append+=" console=ttyS0 panic=-1 quiet loglevel=3"
	local boot
	for boot in 1 2; do
		mkfs.ext4 -q -F -d "$work/job" "$work/job.img" 64M >&2
		# --foreground: timeout stays in our process group and passes TERM to qemu.
		ip netns exec "$netns" timeout --foreground -k 5 $((timeout + 60)) qemu-system-x86_64 \
			-machine q35 -accel tcg -cpu max -m 768 -smp 1 \
			-display none -monitor none -serial stdio -no-reboot \
			-kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "$append" \
			-drive "file=$img/rootfs.ext4,format=raw,if=virtio,snapshot=on" \
			-drive "file=$work/job.img,format=raw,if=virtio" \
			-netdev "tap,id=n0,ifname=$TAP,script=no,downscript=no,vnet_hdr=off" \
			-device virtio-net-pci,netdev=n0,mac=52:54:00:19:00:02 \
			</dev/null >&2 &
		qpid=$!
		wait "$qpid" || true
		qpid=""
		debugfs -R "stat /setup.log" "$work/job.img" 2>/dev/null | grep -q Inode && break
		echo "rxe-guest: boot $boot never reached the guest's init" >&2
	done

	local status
	status=$(debugfs -R "cat /status" "$work/job.img" 2>/dev/null | tr -d '[:space:]')
	debugfs -R "cat /out" "$work/job.img" 2>/dev/null || true
	if [[ ! $status =~ ^[0-9]+$ ]]; then
		echo "rxe-guest: the guest never reported a status" >&2
		return 125
	fi
	return "$status"
}

case ${1:-} in
image) image ;;
netns) make_tap "${2:?namespace}" "${3:-1500}" ;;
run) shift; run "$@" ;;
hash) recipe_hash ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
