# Debian packages tandem needs to build and test; sourced by tests/run and deploy/quickstart.
TANDEM_BUILD_DEPS=(build-essential cmake pkg-config libqb-dev libprotobuf-c-dev protobuf-c-compiler
	check libisal-dev liburing-dev libjson-c-dev libconfig-dev libssl-dev libiscsi-dev libfuse3-dev
	libcpg-dev libquorum-dev libvotequorum-dev libcorosync-common-dev libmicrohttpd-dev)
TANDEM_TEST_DEPS=(libiscsi-bin qemu-utils qemu-block-extra iproute2 procps valgrind jq strace mount
	nftables iputils-ping corosync resource-agents libxml2-utils pacemaker pacemaker-cli-utils
	crmsh pcs iptables drbd-utils fence-agents ruby fuse3
	linux-image-amd64 busybox-static qemu-system-x86 socat cpio xz-utils binutils e2fsprogs python3
	man-db systemd curl python3-prometheus-client)
# What the benchmarks measure against and with (tests/bench/run installs them itself).
TANDEM_BENCH_DEPS=(tgt libiscsi-bin)

# Installs whatever of the named packages is missing (apt-get update first, once).
tandem_install_missing() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
