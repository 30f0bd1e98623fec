#!/usr/bin/env bash
# Provisions one tandem storage node of the Vagrant lab (run by Vagrant as root; see Vagrantfile
# for the environment): Debian packages, tandem built from /vagrant and installed, the tandemd
# config with this node's node_id and cluster mode on, corosync with both nodes, SBD on the
# shared disk with the VM's watchdog, Pacemaker, and the crm file that puts ocf:tandem:tandem
# under Pacemaker with SBD fencing (loaded by hand after the first sync: README.md).
# Safe to run again (vagrant provision): it rebuilds and rewrites the same files, and never
# rewrites an SBD header that is already there.
#
#   provision-node.sh --write-configs DIR
#       writes only this node's tandem.conf, corosync.conf, authkey, sbd (/etc/default/sbd) and
#       cluster.crm into DIR and exits: installs, builds and starts nothing (tests/cluster/configs
#       checks them; TANDEM_SRC names the tree, default /vagrant)
set -euo pipefail

: "${NODE_NAME:?}" "${NODE_ID:?}" "${NODES:?}" "${CLIENT:?}" "${PORTAL_IP:?}" "${LUN_DEVICE:?}"
: "${LUN_NAA:?}" "${REPL_SECRET:?}" "${AUTHKEY_B64:?}" "${SBD_DEVICE:?}" "${FENCE_PING:?}"
src="${TANDEM_SRC:-/vagrant}"
build=/root/tandem-build
iqn=iqn.2026-11.io.tandem.lab:san
initiator=iqn.1993-08.org.debian:01:tandem-client
export DEBIAN_FRONTEND=noninteractive
token_ms=1000 consensus_ms=600
# "shared" behind the portal IP; deploy/lab's nodes, whose client multipaths to both nodes
# (ALUA mode), take "per_node"
target_ports=${TANDEM_TARGET_PORTS:-shared}
# SBD (the device header's timeouts): a node whose sbd stops feeding the watchdog is reset
# after sbd_watchdog_s; a poison pill counts as delivered sbd_msgwait_s after it was written
# (twice the watchdog, as sbd(8) asks). Fencing alpha waits fence_delay_s first, so that in a
# split where both may fence, beta's pill comes too late and alpha stays up.
sbd_watchdog_s=${TANDEM_SBD_WATCHDOG_S:-2}
sbd_msgwait_s=${TANDEM_SBD_MSGWAIT_S:-4}
fence_delay_s=${TANDEM_FENCE_DELAY_S:-2}
# Pacemaker 2.1.5 does not add pcmk_delay_base to a fencing timeout, so the timeout covers it.
stonith_timeout_s=$((fence_delay_s + 2 * sbd_msgwait_s + 10))

# tandemd: one replicated LUN on the second disk; identical on both nodes except node_id.
write_tandem_conf() # file
{
	local entry id name repl repl_nodes=""
	for entry in $NODES; do
		IFS=, read -r id name _ repl <<<"$entry"
		repl_nodes="${repl_nodes:+$repl_nodes,
}          { id = $id; name = \"$name\"; address = \"$repl:7789\"; }"
	done
	cat >"$1" <<EOF
# Written by deploy/vagrant/provision-node.sh on $NODE_NAME.
node_id = $NODE_ID;
instance = "default";
# Corosync membership and quorum; a Primary whose peer left holds writes until the handler has
# marked the peer outdated in the CIB and Pacemaker has fenced it (README: Clusters).
cluster = { enabled = true; fence_peer = "/usr/lib/tandem/tandem-fence-peer"; };
state_dir = "/var/lib/tandem";
listen = [ "0.0.0.0:3260" ];
log = { file = "/var/log/tandem/tandemd.log"; level = "info"; syslog = true; };
targets = (
  {
    iqn = "$iqn";
    acl = [ "$initiator" ];
    luns = (
      {
        lun = 0;
        path = "$LUN_DEVICE";
        # a block device: written with O_DIRECT, so that an acknowledged write the initiator
        # has not flushed yet survives a power cut of both nodes (tandem.conf(5))
        direct = true;
        naa = "$LUN_NAA";
        serial = "lab-lun0";
        replication = {
          secret = "$REPL_SECRET";
          nodes = (
$repl_nodes
          );
          timeout = 2000;
          resync_rate = "100M";
          resync_min_rate = "10M";
          split_brain = "disconnect";
          target_ports = "$target_ports";
        };
      }
    );
  }
);
EOF
	chmod 600 "$1"
}

# Corosync: both nodes, two links (front and replication), a 1 s token, consensus 600 ms
# (below the token: safe with two nodes, see deploy/corosync/corosync.conf), two_node quorum.
write_corosync_conf() # file
{
	local entry id name front repl nodelist=""
	for entry in $NODES; do
		IFS=, read -r id name front repl <<<"$entry"
		nodelist="$nodelist	node {
		nodeid: $id
		name: $name
		ring0_addr: $front
		ring1_addr: $repl
	}
"
	done
	cat >"$1" <<EOF
# Written by deploy/vagrant/provision-node.sh.
totem {
	version: 2
	cluster_name: tandem-lab
	transport: knet
	token: $token_ms
	token_coefficient: 0
	consensus: $consensus_ms
	crypto_cipher: aes256
	crypto_hash: sha256
}
nodelist {
$nodelist}
quorum {
	provider: corosync_votequorum
	two_node: 1
}
logging {
	to_logfile: no
	to_syslog: yes
	timestamp: on
}
EOF
}

write_authkey() # file
{
	base64 -d <<<"$AUTHKEY_B64" >"$1"
	chmod 400 "$1"
}

# sbd's settings (/etc/default/sbd): Debian's own defaults plus the shared disk. With a disk,
# sbd takes the timeouts from its header (sbd_header); the watchdog line only repeats it.
# STARTMODE always: a fenced node that is powered on again clears its slot and rejoins.
write_sbd_defaults() # file
{
	cat >"$1" <<EOF
# Written by deploy/vagrant/provision-node.sh.
SBD_DEVICE="$SBD_DEVICE"
SBD_PACEMAKER=yes
SBD_STARTMODE=always
SBD_DELAY_START=no
SBD_WATCHDOG_DEV=/dev/watchdog
SBD_WATCHDOG_TIMEOUT=$sbd_watchdog_s
SBD_TIMEOUT_ACTION=flush,reboot
SBD_MOVE_TO_ROOT_CGROUP=auto
SBD_SYNC_RESOURCE_STARTUP=yes
SBD_OPTS=
EOF
}

# The lab's timer chain holds, fencing included: deploy/check-timers on the files this script
# writes (in DIR, already written; else written to a scratch directory first), with SBD's
# msgwait (the disk may not exist yet), so that a fencing that outlasts the 10 s tandemd holds
# writes is refused before anything is installed. The poison pill must outlast the watchdog.
check_lab_timers() # [DIR]
{
	local dir="${1:-}" scratch="" out rc=0
	if ((sbd_msgwait_s < 2 * sbd_watchdog_s)); then
		echo "provision-node: SBD msgwait ${sbd_msgwait_s} s is below twice the watchdog timeout ${sbd_watchdog_s} s (TANDEM_SBD_MSGWAIT_S, TANDEM_SBD_WATCHDOG_S)" >&2
		return 1
	fi
	if [[ -z "$dir" ]]; then
		scratch="$(mktemp -d)" || return 1
		dir="$scratch"
		write_tandem_conf "$dir/tandem.conf" && write_corosync_conf "$dir/corosync.conf" &&
			write_cluster_crm "$dir/cluster.crm" || rc=2
	fi
	if ((rc == 0)); then
		out="$(bash "$src/deploy/check-timers" --corosync "$dir/corosync.conf" --crm "$dir/cluster.crm" \
			--tandem-conf "$dir/tandem.conf" --sbd-msgwait "$sbd_msgwait_s" 2>&1)" || rc=$?
	else
		out="cannot write the lab's files"
	fi
	if [[ -n "$scratch" ]]; then
		# Scratch copies: name them as the lab installs them.
		out="${out//"$dir/cluster.crm"//etc/tandem/cluster.crm}"
		out="${out//"$dir/tandem.conf"//etc/tandem/tandem.conf}"
		out="${out//"$dir/corosync.conf"//etc/corosync/corosync.conf}"
		rm -rf "$scratch"
	fi
	((rc == 0)) && return 0
	echo "provision-node: the lab's timers do not hold with TANDEM_SBD_MSGWAIT_S=$sbd_msgwait_s, TANDEM_FENCE_DELAY_S=$fence_delay_s:" >&2
	grep -E ' FAIL|error' <<<"$out" >&2 || echo "$out" >&2
	return 1
}

# The cluster configuration to load once the LUN is in sync (README.md): the project's crm file
# with the lab's portal IP and no fixed NIC (IPaddr2 finds the one on 192.168.60.0/24), fencing
# on through fence_sbd, and a stonith-action of off (the failover need not wait for the fenced
# VM to boot; `vagrant up NODE` brings it back). Each node's fencing level runs
# fence_heuristics_ping first: a node that cannot reach the host on the front network is the
# one cut off, and does not fence its peer. The properties go into the file's one property
# statement: crmsh refuses a second one in the same load.
write_cluster_crm() # file
{
	local props="stonith-enabled=true stonith-action=off stonith-timeout=${stonith_timeout_s}s"
	local entry name nodes="" levels=""
	sed -e "s/10\.0\.0\.100/$PORTAL_IP/g" -e 's/ nic=eth0//' \
		-e "s/^property /property $props no-quorum-policy=stop /" \
		"$src/deploy/crm/tandem.crm" >"$1"
	grep -q "^property $props " "$1" || {
		echo "provision-node: no property statement in $src/deploy/crm/tandem.crm to add $props to" >&2
		return 1
	}
	for entry in $NODES; do
		IFS=, read -r _ name _ _ <<<"$entry"
		nodes="${nodes:+$nodes }$name"
		cat >>"$1" <<EOF
primitive hp-$name stonith:fence_heuristics_ping \\
	params ping_targets=$FENCE_PING ping_count=2 ping_good_count=1 ping_interval=0 \\
		ping_timeout=1 pcmk_host_list=$name pcmk_host_check=static-list
location l_hp_${name}_elsewhere hp-$name -inf: $name
EOF
		levels="$levels $name: hp-$name,st-sbd"
	done
	cat >>"$1" <<EOF
primitive st-sbd stonith:fence_sbd \\
	params devices="$SBD_DEVICE" pcmk_host_list="$nodes" pcmk_host_check=static-list \\
		pcmk_delay_base="${nodes%% *}:${fence_delay_s}s" \\
	op monitor interval=60s timeout=20s
fencing_topology$levels
EOF
}

# The SBD header on the shared disk: node_id 1 writes it on a disk that is still all zeros, the
# other node waits for it. A header already there is kept (a second provisioning, or a volume
# left from an earlier lab) as long as its timeouts are the ones above.
sbd_header()
{
	local dump="" i wd mw
	[[ -b "$SBD_DEVICE" ]] || {
		echo "provision-node: no shared SBD disk $SBD_DEVICE (the Vagrantfile's storage with serial ${SBD_DEVICE##*virtio-})" >&2
		return 1
	}
	for ((i = 0; i < 900; i++)); do
		dump="$(sbd -d "$SBD_DEVICE" dump 2>/dev/null)" && break
		dump=""
		if ((NODE_ID == 1)) && cmp -s -n 1048576 "$SBD_DEVICE" /dev/zero; then
			sbd -d "$SBD_DEVICE" -1 "$sbd_watchdog_s" -4 "$sbd_msgwait_s" create >/dev/null
		elif ((NODE_ID == 1)); then
			echo "provision-node: $SBD_DEVICE holds data but no SBD header; not overwriting it" >&2
			return 1
		else
			sleep 1
		fi
	done
	[[ -n "$dump" ]] || {
		echo "provision-node: no SBD header on $SBD_DEVICE after 900 s (node_id 1 writes it)" >&2
		return 1
	}
	wd="$(awk -F': *' '/^Timeout \(watchdog\)/ {print $2}' <<<"$dump")"
	mw="$(awk -F': *' '/^Timeout \(msgwait\)/ {print $2}' <<<"$dump")"
	if [[ "$wd:$mw" != "$sbd_watchdog_s:$sbd_msgwait_s" ]]; then
		echo "provision-node: the SBD header on $SBD_DEVICE has watchdog ${wd:-?} s and msgwait ${mw:-?} s, not $sbd_watchdog_s and $sbd_msgwait_s: destroy the lab and delete the volume (README.md) to start afresh" >&2
		return 1
	fi
}

if [[ "${1:-}" == --write-configs ]]; then
	out="${2:?--write-configs needs a directory}"
	write_tandem_conf "$out/tandem.conf"
	write_corosync_conf "$out/corosync.conf"
	write_authkey "$out/authkey"
	write_sbd_defaults "$out/sbd"
	write_cluster_crm "$out/cluster.crm"
	check_lab_timers "$out"
	exit 0
fi

# Packages: tandem's build dependencies (the list the project keeps in tests/deps.sh) and the
# cluster stack. iptables for portblock, jq for the agent, sbd for fencing.
# shellcheck disable=SC1091 # /vagrant/tests/deps.sh, the project's list
. "$src/tests/deps.sh"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${TANDEM_BUILD_DEPS[@]}" \
	corosync pacemaker pacemaker-cli-utils crmsh resource-agents fence-agents jq iptables \
	lvm2 libiscsi-bin sbd >/dev/null
# The SBD header comes before the build, so that the node waiting for it waits minutes less.
check_lab_timers
sbd_header

# Build and install tandemd, tandemctl and the agent.
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target tandemd tandemctl >/dev/null
install -m 755 "$build/bin/tandemd" "$build/bin/tandemctl" /usr/local/sbin/
install -D -m 755 "$src/ra/tandem" /usr/lib/ocf/resource.d/tandem/tandem
install -D -m 755 "$src/deploy/pacemaker/tandem-fence-peer" /usr/lib/tandem/tandem-fence-peer
install -m 755 "$src/deploy/check-timers" /usr/local/sbin/tandem-check-timers
# portblock (resource-agents 4.12) cannot see its own rule with Debian 12's iptables, which
# prints protocol numbers; the wrapper, first in Pacemaker's PATH, prints the names (README).
install -m 755 "$src/deploy/netns/iptables-names" /usr/local/sbin/iptables

# Name resolution for the lab.
for entry in $NODES; do
	IFS=, read -r _ name front _ <<<"$entry"
	sed -i "/[[:space:]]$name\$/d" /etc/hosts
	echo "$front $name" >>/etc/hosts
done
IFS=, read -r cname cfront <<<"$CLIENT"
sed -i "/[[:space:]]$cname\$/d" /etc/hosts
echo "$cfront $cname" >>/etc/hosts
# Vagrant maps the hostname to 127.0.1.1; corosync must find the node on the front network.
sed -i "/^127\.0\.1\.1[[:space:]]/d" /etc/hosts

install -d -m 700 /etc/tandem /var/lib/tandem /var/lib/tandem/tickle # tickle_dir of the crm file
install -d -m 755 /var/log/tandem
write_tandem_conf /etc/tandem/tandem.conf
# A config that does not load fails the provisioning here, not the first start under Pacemaker.
/usr/local/sbin/tandemd --check-config --config /etc/tandem/tandem.conf
write_authkey /etc/corosync/authkey
write_corosync_conf /etc/corosync/corosync.conf
corosync -t -c /etc/corosync/corosync.conf >/dev/null
write_cluster_crm /etc/tandem/cluster.crm

# SBD: the VM's watchdog (the Vagrantfile's i6300esb; sbd refuses to start without one), its
# settings, then sbd itself, which corosync and pacemaker require once it is enabled (Debian's
# package enables it on installation; nothing restarts corosync before this point).
modprobe i6300esb 2>/dev/null || true
[[ -c /dev/watchdog ]] || {
	echo "provision-node: no /dev/watchdog (the Vagrantfile gives each node an i6300esb)" >&2
	exit 1
}
write_sbd_defaults /etc/default/sbd
systemctl enable sbd corosync pacemaker >/dev/null 2>&1
systemctl restart corosync
systemctl restart pacemaker
echo "provision-node: $NODE_NAME (node_id $NODE_ID) ready: /usr/local/sbin/tandemd, LUN $LUN_DEVICE, SBD on $SBD_DEVICE, corosync and pacemaker running"
