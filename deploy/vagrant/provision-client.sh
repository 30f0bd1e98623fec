#!/usr/bin/env bash
# Provisions the iSCSI client of the Vagrant lab (run by Vagrant as root; see Vagrantfile):
# open-iscsi with the initiator name the nodes' ACL admits, libiscsi's tools, and fio for load.
set -euo pipefail

: "${PORTAL_IP:?}" "${NODES:?}"
initiator=iqn.1993-08.org.debian:01:tandem-client
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
apt-get install -y -qq --no-install-recommends open-iscsi libiscsi-bin fio sg3-utils >/dev/null

for entry in $NODES; do
	IFS=, read -r name front <<<"$entry"
	sed -i "/[[:space:]]$name\$/d" /etc/hosts
	echo "$front $name" >>/etc/hosts
done

echo "InitiatorName=$initiator" >/etc/iscsi/initiatorname.iscsi
# Quick failover: fail I/O to the upper layers only after 15 s without a path (open-iscsi's
# replacement_timeout), which covers a move of the portal IP.
sed -i 's/^node.session.timeo.replacement_timeout = .*/node.session.timeo.replacement_timeout = 15/' \
	/etc/iscsi/iscsid.conf
systemctl enable iscsid >/dev/null 2>&1
systemctl restart iscsid
echo "provision-client: initiator $initiator; log in with:"
echo "  iscsiadm -m discovery -t sendtargets -p $PORTAL_IP && iscsiadm -m node --login"
