# shellcheck shell=bash
# The tandem cluster pieces the cluster tests share (tests/cluster/failover, tests/cluster/
# split_groups through it, tests/soak/run): tandemctl inside a node, the replication status, the
# nodes' first start outside Pacemaker, the shipped crm configuration loaded, waiting until the
# portal IP serves, two Primaries sampled, failed promotes, powering nodes on again.
#
# Source it after deploy/netns/cluster (lib). The caller sets:
#   TOP BIN WORK IQN VIP   the repository, tandemd/tandemctl's directory, a work dir readable by
#                          the nodes, the target of the replicated LUN(s), the portal IP
#   layout                 nodes of the cluster that is up (2 or 3; n3 runs no tandemd)
#   node_conf ID           a function printing node ID's tandemd config
#   log MESSAGE...         a function writing to stderr
#   HA_REPL_LUNS           optional: "IQN LUN" of every replicated LUN when there are several
#                          (default: one LUN, LUN 0 of IQN, the first in the status)
#   HA_CRM_PARAMS          optional: more params of p_tandem (e.g. log_file=PATH)
# shellcheck disable=SC2154 # the variables above are the caller's

if [[ -n "${TDM_HACLUSTER_LOADED:-}" ]]; then
	return 0
fi
TDM_HACLUSTER_LOADED=1
[[ -v HA_REPL_LUNS ]] || HA_REPL_LUNS=() # (set -u: an unset array has no length)

ctl() # node args... (tandemctl inside the node)
{
	local n="$1"
	shift
	cluster_exec "$n" timeout 10 "$BIN/tandemctl" "$@"
}

repl_json() # node -> the LUN's repl status object, or nothing
{
	ctl "$1" repl status --json 2>/dev/null | jq -c '.luns[0] // empty' 2>/dev/null
}

wait_repl() # node jq-expr timeout
{
	local t=0 j
	while ((t < $3 * 10)); do
		j="$(repl_json "$1")"
		[[ -n "$j" ]] && jq -e "$2" <<<"$j" >/dev/null 2>&1 && return 0
		sleep 0.1
		t=$((t + 1))
	done
	log "node $1: not '$2' within $3 s: ${j:-no status}"
	return 1
}

repl_lun_json() # node iqn lun -> that LUN's repl status object, or nothing
{
	ctl "$1" repl status --json 2>/dev/null |
		jq -c --arg iqn "$2" --argjson lun "$3" 'first(.luns[] | select(.iqn == $iqn and .lun == $lun)) // empty' 2>/dev/null
}

# wait_repl on every replicated LUN (HA_REPL_LUNS), or on the one LUN.
wait_repl_all() # node jq-expr timeout
{
	((${#HA_REPL_LUNS[@]})) || { wait_repl "$@"; return; }
	local key t j
	for key in "${HA_REPL_LUNS[@]}"; do
		t=0
		while :; do
			# shellcheck disable=SC2086 # "IQN LUN"
			j="$(repl_lun_json "$1" $key)"
			[[ -n "$j" ]] && jq -e "$2" <<<"$j" >/dev/null 2>&1 && break
			((++t < $3 * 10)) || { log "node $1 $key: not '$2' within $3 s: ${j:-no status}"; return 1; }
			sleep 0.1
		done
	done
}

# Both nodes: config, an initial sync-free start (both disks are new and zero), then stopped
# again so that Pacemaker owns tandemd from here on.
prepare_nodes()
{
	local i
	for i in 1 2; do
		node_conf "$i" | cluster_exec "n$i" sh -c \
			'mkdir -p /etc/tandem /var/lib/tandem && cat >/etc/tandem/tandem.conf' || return 1
		cluster_exec "n$i" setsid "$BIN/tandemd" --foreground --config /etc/tandem/tandem.conf \
			</dev/null >"$WORK/prep-n$i.log" 2>&1 &
	done
	wait_repl_all n1 '.connection == "Connected"' 20 && wait_repl_all n2 '.connection == "Connected"' 20 ||
		return 1
	if ((${#HA_REPL_LUNS[@]} == 0)); then
		ctl n1 repl skip-initial-sync "$IQN" 0 >&2 || return 1
	else
		local key
		for key in "${HA_REPL_LUNS[@]}"; do
			# shellcheck disable=SC2086 # "IQN LUN"
			ctl n1 repl skip-initial-sync $key >&2 || return 1
		done
	fi
	wait_repl_all n2 '.disk == "UpToDate"' 10 || return 1
	for i in 1 2; do
		cluster_exec "n$i" pkill -TERM -x tandemd
	done
	sleep 1
}

load_crm()
{
	# The nodes share this machine's file system: one tickle directory is the shared one the
	# crm file asks for (on separate machines: a synced local one).
	mkdir -p "$WORK/tickle"
	sed -e "s/10\.0\.0\.100/$VIP/g" -e "s/nic=eth0/nic=front0/" \
		-e "s|instance=default|instance=default tandemd=$BIN/tandemd tandemctl=$BIN/tandemctl${HA_CRM_PARAMS:+ $HA_CRM_PARAMS}|" \
		-e "s|tickle_dir=/var/lib/tandem/tickle|tickle_dir=$WORK/tickle|" \
		"$TOP/deploy/crm/tandem.crm" >"$WORK/tandem.crm"
	if ((layout == 3)); then # n3 is a quorum vote only: no tandemd, no portal there
		printf '%s\n' "location l_tandem_not_n3 ms_tandem -inf: n3" \
			"location l_portal_not_n3 g_portal -inf: n3" >>"$WORK/tandem.crm"
	fi
	cluster_exec n1 crm configure load update "$WORK/tandem.crm" >&2
}

primary_node() # -> n1 | n2 | nothing
{
	local i j
	for i in 1 2; do
		j="$(repl_json "n$i")"
		[[ "$(jq -r .role <<<"$j" 2>/dev/null)" == Primary ]] && echo "n$i" && return 0
	done
	return 1
}

wait_serving() # timeout: a Primary, its peer in sync, and the portal answering
{
	local end=$((SECONDS + $1)) p
	while ((SECONDS < end)); do
		p="$(primary_node)"
		if [[ -n "$p" ]] && cluster_client timeout 3 iscsi-ls "iscsi://$VIP:3260" >/dev/null 2>&1; then
			wait_repl_all "$p" '.connection == "Connected" and .peer_disk == "UpToDate"' 60 && return 0
		fi
		sleep 0.2
	done
	log "the portal did not serve within $1 s"
	cluster_exec n1 crm_mon -1 >&2 2>&1
	return 1
}


# Samples both roles; writes "DUAL" to $1 if both are ever Primary at the same time.
# Two Primaries at once, sampled every 0.3 s. The two nodes are asked one after the other,
# so n1 is asked again after n2: a switchover between the first two reads (n1 demoted, n2
# promoted) would otherwise look like two Primaries. n1 Primary before and after n2's answer
# means it was Primary while n2 said it was too.
role_sampler() # file
{
	while :; do
		local r1 r2 r1_after
		r1="$(repl_json n1 | jq -r .role 2>/dev/null)"
		r2="$(repl_json n2 | jq -r .role 2>/dev/null)"
		if [[ "$r1" == Primary && "$r2" == Primary ]]; then
			r1_after="$(repl_json n1 | jq -r .role 2>/dev/null)"
			[[ "$r1_after" == Primary ]] && echo "DUAL $(date +%T.%N)" >>"$1"
		fi
		sleep 0.3
	done
}


# Promote operations Pacemaker records as failed (crm_mon on the first node that answers): a
# promote refused on the survivor costs a demote, stop, start and a second promote.
failed_promotes()
{
	local i xml
	for ((i = 1; i <= layout; i++)); do
		xml="$(cluster_exec "n$i" crm_mon -1 --output-as=xml 2>/dev/null)" || continue
		grep -c '<failure op_key="p_tandem[^"]*_promote_0"' <<<"$xml"
		return 0
	done
	echo na
}

# Every node that is off (crashed, fenced, stopped) powered on until all are online.
power_on_all()
{
	local end=$((SECONDS + 90)) i st
	while ((SECONDS < end)); do
		for ((i = 1; i <= layout; i++)); do
			st="$(_cl_power "$i")"
			case "$st" in crashed | fenced | stopped | off) cluster_start "n$i" >&2 ;; esac
		done
		cluster_wait_online "$layout" 3 >/dev/null 2>&1 && return 0
	done
	return 1
}

# Power a crashed or fenced node on again (fencing may still be tearing it down).
power_on() # node
{
	local t
	for t in $(seq 1 30); do
		cluster_start "$1" && return 0
		sleep 1
	done
	return 1
}
