#!/usr/bin/env bash
# Provisions one tandem storage node of the Vagrant lab (run by Vagrant as root; see Vagrantfile
# for the environment): Debian packages, tandem built from /vagrant and installed, the tandemd
# config with this node's node_id, corosync with both nodes, Pacemaker, and the crm file that
# puts ocf:tandem:tandem under Pacemaker (loaded by hand after the first sync: README.md).
# Safe to run again (vagrant provision): it rebuilds and rewrites the same files.
#
#   provision-node.sh --write-configs DIR
#       writes only this node's tandem.conf, corosync.conf, authkey and cluster.crm into DIR
#       and exits: installs, builds and starts nothing (tests/cluster/configs checks them;
#       TANDEM_SRC names the tree, default /vagrant)
set -euo pipefail

: "${NODE_NAME:?}" "${NODE_ID:?}" "${NODES:?}" "${CLIENT:?}" "${PORTAL_IP:?}" "${LUN_DEVICE:?}"
: "${LUN_NAA:?}" "${REPL_SECRET:?}" "${AUTHKEY_B64:?}"
src="${TANDEM_SRC:-/vagrant}"
build=/root/tandem-build
iqn=iqn.2026-11.io.tandem.lab:san
initiator=iqn.1993-08.org.debian:01:tandem-client
export DEBIAN_FRONTEND=noninteractive

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
	token: 1000
	token_coefficient: 0
	consensus: 600
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

# The cluster configuration to load once the LUN is in sync (README.md): the project's crm file
# with the lab's portal IP, no fixed NIC (IPaddr2 finds the one on 192.168.60.0/24), and
# fencing off, since the VMs have no fence device (never so in production). The properties go
# into the file's one property statement: crmsh refuses a second one in the same load.
write_cluster_crm() # file
{
	sed -e "s/10\.0\.0\.100/$PORTAL_IP/g" -e 's/ nic=eth0//' \
		-e 's/^property /property stonith-enabled=false no-quorum-policy=stop /' \
		"$src/deploy/crm/tandem.crm" >"$1"
	grep -q '^property stonith-enabled=false ' "$1" || {
		echo "provision-node: no property statement in $src/deploy/crm/tandem.crm to add stonith-enabled=false to" >&2
		return 1
	}
}

if [[ "${1:-}" == --write-configs ]]; then
	out="${2:?--write-configs needs a directory}"
	write_tandem_conf "$out/tandem.conf"
	write_corosync_conf "$out/corosync.conf"
	write_authkey "$out/authkey"
	write_cluster_crm "$out/cluster.crm"
	exit 0
fi

# Packages: tandem's build dependencies (the list the project keeps in tests/deps.sh) and the
# cluster stack. iptables for portblock, jq for the agent.
# shellcheck disable=SC1091 # /vagrant/tests/deps.sh, the project's list
. "$src/tests/deps.sh"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${TANDEM_BUILD_DEPS[@]}" \
	corosync pacemaker pacemaker-cli-utils crmsh resource-agents fence-agents jq iptables \
	lvm2 libiscsi-bin >/dev/null

# Build and install tandemd, tandemctl and the agent.
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target tandemd tandemctl >/dev/null
install -m 755 "$build/bin/tandemd" "$build/bin/tandemctl" /usr/local/sbin/
install -D -m 755 "$src/ra/tandem" /usr/lib/ocf/resource.d/tandem/tandem

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

install -d -m 700 /etc/tandem /var/lib/tandem
install -d -m 755 /var/log/tandem
write_tandem_conf /etc/tandem/tandem.conf
# A config that does not load fails the provisioning here, not the first start under Pacemaker.
/usr/local/sbin/tandemd --check-config --config /etc/tandem/tandem.conf
write_authkey /etc/corosync/authkey
write_corosync_conf /etc/corosync/corosync.conf
corosync -t -c /etc/corosync/corosync.conf >/dev/null
write_cluster_crm /etc/tandem/cluster.crm

systemctl enable corosync pacemaker >/dev/null 2>&1
systemctl restart corosync
systemctl restart pacemaker
echo "provision-node: $NODE_NAME (node_id $NODE_ID) ready: /usr/local/sbin/tandemd, LUN $LUN_DEVICE, corosync and pacemaker running"
