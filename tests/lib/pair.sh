#!/usr/bin/env bash
# Two tandemd nodes replicating one LUN, and an iSCSI client, each in its own network namespace.
#
# Source it from a test script (root, Linux network namespaces):
#     . "$(dirname "$0")/../lib/pair.sh"
#     pair_setup                       # namespaces, links, temp dir; teardown at exit
#     pair_bringup skip                # configs, both daemons, connected, A Primary
#     pair_writer_start w1 a --seconds 5
#     pair_writer_wait w1
#     pair_verify a "$(pair_journal w1)"  # sets PAIR_LOST, PAIR_CORRUPT
# Run it directly for a self-test of the plumbing (no replication engine needed):
#     tests/lib/pair.sh selftest       # namespaces, links, cuts, one tandemd, teardown
#
# Topology (every link lives inside the namespaces; the host's own namespace is never touched;
# nothing has a default route, so no packet leaves these private subnets):
#   switch namespace: bridge br0 with ports pa, pb, pc
#   front (iSCSI) network 10.99.0.0/24 on the bridge: A .1, B .2, client .100 (device front0)
#   replication network 10.99.1.0/24, a direct veth pair: A .1 <-> B .2 (device rep0)
# Nodes are called "a" (node id 1, "alpha") and "b" (node id 2, "beta"). Each has its own
# temp dir with config, state dir, backing file, metadata file and log, and its own tandemd
# instance name; tandemctl runs inside the node's namespace (libqb's abstract unix socket is
# per network namespace).
#
# Environment:
#   TANDEM_BIN_DIR   where tandemd/tandemctl live (default: <repo>/build/bin)
#   TANDEM_TOOLS_DIR where tdm-writer lives      (default: <repo>/build/tests)
#   TDM_KEEP=1       keep the temp dir (configs, logs, journals) after exit
#
# Needs: ip (iproute2), jq, nft (nftables: one-way cuts), timeout; ping only for the self-test.

# shellcheck disable=SC2034 # PAIR_* values are read by the scripts that source this file

if [[ -n "${TDM_PAIR_SH_LOADED:-}" ]]; then
	return 0
fi
TDM_PAIR_SH_LOADED=1

PAIR_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TANDEM_BIN_DIR="${TANDEM_BIN_DIR:-$PAIR_REPO/build/bin}"
TANDEM_TOOLS_DIR="${TANDEM_TOOLS_DIR:-$PAIR_REPO/build/tests}"

PAIR_IQN="iqn.2026-11.io.tandem:repl"
PAIR_LUN=0
PAIR_ISCSI_PORT=3260
PAIR_REPL_PORT=7789
PAIR_MIB=$((1024 * 1024))
PAIR_DEFAULT_SIZE=$((256 * PAIR_MIB))
PAIR_DEFAULT_SECRET="tandem-repl-secret-01"
# Replication settings written into both configs; a test may change them before
# pair_write_config (PAIR_SPLIT_BRAIN takes the config's policy names).
PAIR_TIMEOUT_MS=2000
PAIR_RESYNC_RATE="200M"
PAIR_RESYNC_MIN_RATE="20M"
PAIR_SPLIT_BRAIN="disconnect"
PAIR_TARGET_PORTS="shared" # "per_node": one ALUA port group per node (tests/cluster/alua)
PAIR_REPLICATED=1 # 0: plain (non-replicated) LUN, for testing the plumbing alone
# Default time limit of a tdm-writer run (seconds), on top of its own --seconds.
PAIR_WRITER_LIMIT=90

declare -gA PAIR_NS=() PAIR_ID=() PAIR_NAME=() PAIR_FRONT_IP=() PAIR_REPL_IP=()
declare -gA PAIR_DIR=() PAIR_CONF=() PAIR_STATE=() PAIR_IMG=() PAIR_MD=() PAIR_LOG=()
declare -gA PAIR_PID=() PAIR_INSTANCE=() PAIR_SECRET=() PAIR_SIZE=()
declare -gA PAIR_WRITER_PID=()
# Where node $n's config says its peer listens ("HOST[:PORT]"; default the peer's replication
# address): a test puts a proxy in between (tests/replication/run tamper_*).
declare -gA PAIR_PEER_ADDR=()
PAIR_TMP=""
PAIR_PREFIX=""
PAIR_CREATED_NS=()
PAIR_CUT_NFT=0
PAIR_LOST=""
PAIR_CORRUPT=""

# Messages for the person reading the log; the last one is kept for a one-line reason.
PAIR_LAST_ERR=""
pair_log()
{
	PAIR_LAST_ERR="$*"
	printf '%s\n' "$*" >&2
}

# ---------------------------------------------------------------------------------------------
# Namespaces and links

# Fresh namespaces, links and temp dir; registers pair_teardown on EXIT (and exit on INT/TERM).
# Returns nonzero (after tearing down what it made) if something could not be created.
pair_setup()
{
	local tool
	for tool in ip jq timeout; do
		command -v "$tool" >/dev/null || {
			pair_log "pair_setup: $tool is not installed"
			return 1
		}
	done
	# Unique per run: the pid keeps two runs (and two scenarios) apart. A caller that wants to
	# clean up after a killed run names the prefix (TDM_PAIR_PREFIX, at most 10 characters).
	PAIR_PREFIX="${TDM_PAIR_PREFIX:-tr$$}"
	PAIR_TMP="$(mktemp -d "${TMPDIR:-/tmp}/tandem-pair.XXXXXX")"
	trap pair_teardown EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	PAIR_NS=([a]="${PAIR_PREFIX}a" [b]="${PAIR_PREFIX}b" [c]="${PAIR_PREFIX}c" [sw]="${PAIR_PREFIX}sw")
	PAIR_ID=([a]=1 [b]=2)
	PAIR_NAME=([a]=alpha [b]=beta)
	PAIR_FRONT_IP=([a]=10.99.0.1 [b]=10.99.0.2 [c]=10.99.0.100)
	PAIR_REPL_IP=([a]=10.99.1.1 [b]=10.99.1.2)
	# One LUN identity for both nodes: NAA type 6 (first digit 6), our company id, random rest.
	PAIR_NAA="67a6e64$(od -An -N13 -tx1 /dev/urandom | tr -d ' \n' | cut -c1-25)"
	PAIR_SERIAL="repl$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
	local n
	for n in a b; do
		PAIR_DIR[$n]="$PAIR_TMP/$n"
		PAIR_CONF[$n]="$PAIR_TMP/$n/tandem.conf"
		PAIR_STATE[$n]="$PAIR_TMP/$n/state"
		PAIR_IMG[$n]="$PAIR_TMP/$n/lun0.img"
		PAIR_MD[$n]="$PAIR_TMP/$n/repl-lun0.md"
		PAIR_LOG[$n]="$PAIR_TMP/$n/tandemd.log"
		PAIR_INSTANCE[$n]="${PAIR_PREFIX}${n}"
		PAIR_SECRET[$n]="$PAIR_DEFAULT_SECRET"
		PAIR_SIZE[$n]=$PAIR_DEFAULT_SIZE
		mkdir -p "${PAIR_STATE[$n]}"
	done
	mkdir -p "$PAIR_TMP/work"

	if ! pair_make_namespaces; then
		pair_log "pair_setup: could not build the namespaces"
		return 1
	fi
}

pair_ns_run() # ns-key command...: run in the namespace of node a, b, c or sw
{
	local ns="${PAIR_NS[$1]}"
	shift
	ip netns exec "$ns" "$@"
}

pair_make_namespaces()
{
	local n
	for n in sw a b c; do
		ip netns add "${PAIR_NS[$n]}" || return 1
		PAIR_CREATED_NS+=("${PAIR_NS[$n]}")
		ip -n "${PAIR_NS[$n]}" link set lo up || return 1
	done
	local sw="${PAIR_NS[sw]}"
	ip -n "$sw" link add br0 type bridge || return 1
	ip -n "$sw" link set br0 up || return 1
	# Front network: one veth per node into the bridge (created inside the namespaces, so the
	# names never meet the host's).
	for n in a b c; do
		ip -n "$sw" link add "p$n" type veth peer name front0 netns "${PAIR_NS[$n]}" || return 1
		ip -n "$sw" link set "p$n" master br0 || return 1
		ip -n "$sw" link set "p$n" up || return 1
		ip -n "${PAIR_NS[$n]}" addr add "${PAIR_FRONT_IP[$n]}/24" dev front0 || return 1
		ip -n "${PAIR_NS[$n]}" link set front0 up || return 1
	done
	# Replication network: a direct veth pair between the nodes.
	ip -n "${PAIR_NS[a]}" link add rep0 type veth peer name rep0 netns "${PAIR_NS[b]}" || return 1
	for n in a b; do
		ip -n "${PAIR_NS[$n]}" addr add "${PAIR_REPL_IP[$n]}/24" dev rep0 || return 1
		ip -n "${PAIR_NS[$n]}" link set rep0 up || return 1
	done
}

# Kill the daemons and writers, delete the namespaces (their veths and bridge go with them),
# remove the temp dir unless TDM_KEEP=1. Runs at exit; keeps the exit status.
pair_teardown()
{
	local rc=$? n pid ns
	trap - EXIT INT TERM
	for n in "${!PAIR_WRITER_PID[@]}"; do
		pair_kill_pid "${PAIR_WRITER_PID[$n]}"
	done
	for n in a b; do
		[[ -n "${PAIR_PID[$n]:-}" ]] && pair_kill_pid "${PAIR_PID[$n]}"
	done
	for ns in ${PAIR_CREATED_NS[@]+"${PAIR_CREATED_NS[@]}"}; do
		# Anything still inside our namespaces was started by this run (tandemctl, dd, bash).
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null || true
		done
		ip netns del "$ns" 2>/dev/null || pair_log "pair_teardown: could not delete netns $ns"
	done
	PAIR_CREATED_NS=()
	if [[ -n "$PAIR_TMP" && -d "$PAIR_TMP" ]]; then
		if [[ "${TDM_KEEP:-0}" == 1 ]]; then
			pair_log "kept $PAIR_TMP"
		else
			rm -rf -- "$PAIR_TMP"
		fi
	fi
	exit "$rc"
}

# Whether a process runs (a zombie does not count: kill -0 succeeds on one).
pair_alive()
{
	local state
	[[ -r "/proc/$1/stat" ]] || return 1
	state="$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" || return 1
	[[ -n "$state" && "$state" != Z ]]
}

pair_kill_pid()
{
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# pair_link_cut MODE: cut the replication network.
#   both  both ends' rep0 down (a cable pulled: the kernel sees no carrier)
#   drop  both directions silently dropped (nft), links stay up (a partition in a switch)
#   a2b   only A->B packets dropped (nft input filter in B: A sees silence, not errors)
#   b2a   only B->A packets dropped
pair_link_cut()
{
	case "$1" in
	both)
		ip -n "${PAIR_NS[a]}" link set rep0 down && ip -n "${PAIR_NS[b]}" link set rep0 down
		;;
	drop) pair_drop_from a && pair_drop_from b ;;
	a2b) pair_drop_from a ;;
	b2a) pair_drop_from b ;;
	*)
		pair_log "pair_link_cut: unknown mode '$1' (both|drop|a2b|b2a)"
		return 1
		;;
	esac
}

# Drop, at the receiving node, every replication-network packet sent by node $1.
pair_drop_from()
{
	local from="$1" to
	[[ "$from" == a ]] && to=b || to=a
	command -v nft >/dev/null || {
		pair_log "pair_link_cut: nft is not installed (Debian package nftables)"
		return 1
	}
	PAIR_CUT_NFT=1
	pair_ns_run "$to" nft -f - <<EOF
table inet tdmcut {
	chain input {
		type filter hook input priority 0; policy accept;
		ip saddr ${PAIR_REPL_IP[$from]} drop
	}
}
EOF
}

# Undo every kind of cut.
pair_link_heal()
{
	local n rc=0
	for n in a b; do
		ip -n "${PAIR_NS[$n]}" link set rep0 up || rc=1
		if ((PAIR_CUT_NFT)); then
			pair_ns_run "$n" nft delete table inet tdmcut 2>/dev/null || true
		fi
	done
	return $rc
}

# ---------------------------------------------------------------------------------------------
# tandemd in a node namespace

# The one place that writes a node's config. $2: optional extra libconfig text inside the
# LUN's replication group (e.g. 'split_brain = "discard-zero-changes";'); default
# PAIR_REPL_EXTRA (a scenario's settings for every config it writes).
pair_write_config()
{
	local n="$1" extra="${2:-${PAIR_REPL_EXTRA:-}}" repl="" node="" lunsize
	local addr_a="${PAIR_REPL_IP[a]}" addr_b="${PAIR_REPL_IP[b]}"
	lunsize="${PAIR_SIZE[$n]}"
	[[ "$n" == a && -n "${PAIR_PEER_ADDR[a]:-}" ]] && addr_b="${PAIR_PEER_ADDR[a]}"
	[[ "$n" == b && -n "${PAIR_PEER_ADDR[b]:-}" ]] && addr_a="${PAIR_PEER_ADDR[b]}"
	if ((PAIR_REPLICATED)); then
		node="node_id = ${PAIR_ID[$n]};"
		repl="
        replication = {
          secret = \"${PAIR_SECRET[$n]}\";
          port = $PAIR_REPL_PORT;
          nodes = ( { id = ${PAIR_ID[a]}; name = \"${PAIR_NAME[a]}\"; address = \"$addr_a\"; },
                    { id = ${PAIR_ID[b]}; name = \"${PAIR_NAME[b]}\"; address = \"$addr_b\"; } );
          metadata = \"${PAIR_MD[$n]}\";
          timeout = $PAIR_TIMEOUT_MS;
          resync_rate = \"$PAIR_RESYNC_RATE\";
          resync_min_rate = \"$PAIR_RESYNC_MIN_RATE\";
          split_brain = \"$PAIR_SPLIT_BRAIN\";
          target_ports = \"$PAIR_TARGET_PORTS\";
          $extra
        };"
	fi
	cat >"${PAIR_CONF[$n]}" <<EOF
instance = "${PAIR_INSTANCE[$n]}";
listen = ["${PAIR_FRONT_IP[$n]}:$PAIR_ISCSI_PORT"];
state_dir = "${PAIR_STATE[$n]}";
threads = 2;
log = { level = "info"; syslog = false; };
$node
targets = (
  {
    iqn = "$PAIR_IQN";
    acl = ["ALL"];
    luns = (
      {
        lun = $PAIR_LUN;
        path = "${PAIR_IMG[$n]}";
        size = ${lunsize}L;
        thin = true;
        naa = "$PAIR_NAA";
        serial = "$PAIR_SERIAL";$repl
      }
    );
  }
);
EOF
}

# Start node $1's tandemd in its namespace and wait until its portal answers and tandemctl
# reaches it (20 s). In the foreground tandemd logs to stderr: that is the node's log (appended,
# so a restart keeps what came before and a sanitizer report is never overwritten).
pair_start()
{
	local n="$1" deadline
	[[ -f "${PAIR_CONF[$n]}" ]] || pair_write_config "$n"
	if [[ ! -x "$TANDEM_BIN_DIR/tandemd" ]]; then
		pair_log "tandemd not built at $TANDEM_BIN_DIR/tandemd"
		return 1
	fi
	printf '=== %s: start\n' "$(date +%T.%N | cut -c1-12)" >>"${PAIR_LOG[$n]}"
	ip netns exec "${PAIR_NS[$n]}" "$TANDEM_BIN_DIR/tandemd" --foreground \
		--config "${PAIR_CONF[$n]}" --state-dir "${PAIR_STATE[$n]}" \
		--instance "${PAIR_INSTANCE[$n]}" >>"${PAIR_LOG[$n]}" 2>&1 &
	PAIR_PID[$n]=$!
	deadline=$((SECONDS + 20))
	while ((SECONDS < deadline)); do
		if ! pair_alive "${PAIR_PID[$n]}"; then
			wait "${PAIR_PID[$n]}" 2>/dev/null || true
			unset "PAIR_PID[$n]"
			tail -n 30 "${PAIR_LOG[$n]}" >&2
			pair_log "pair_start $n: tandemd exited: $(grep -v '^===' "${PAIR_LOG[$n]}" | tail -n 1)"
			return 1
		fi
		if pair_tcp_probe "$n" "${PAIR_FRONT_IP[$n]}" "$PAIR_ISCSI_PORT" &&
			pair_ctl "$n" status >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	tail -n 30 "${PAIR_LOG[$n]}" >&2
	pair_log "pair_start $n: no portal or admin socket within 20 s"
	return 1
}

# Whether host:port accepts a TCP connection from inside namespace $1.
pair_tcp_probe()
{
	# shellcheck disable=SC2016 # expanded by the inner shell
	pair_ns_run "$1" timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$2" "$3" 2>/dev/null
}

# kill -9 node $1's daemon, as a crash would. Its files stay.
pair_kill()
{
	local n="$1"
	[[ -n "${PAIR_PID[$n]:-}" ]] || return 0
	printf '=== %s: kill -9\n' "$(date +%T.%N | cut -c1-12)" >>"${PAIR_LOG[$n]}"
	pair_kill_pid "${PAIR_PID[$n]}"
	unset "PAIR_PID[$n]"
}

# SIGTERM, wait up to 10 s (then SIGKILL). Nonzero if it did not exit cleanly with status 0.
pair_stop()
{
	local n="$1" pid="${PAIR_PID[$1]:-}" deadline status=0
	[[ -n "$pid" ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$((SECONDS + 10))
	while pair_alive "$pid" && ((SECONDS < deadline)); do
		sleep 0.1
	done
	if pair_alive "$pid"; then
		pair_log "pair_stop $n: tandemd ignored SIGTERM for 10 s, killing"
		kill -KILL "$pid" 2>/dev/null || true
		status=137
	fi
	wait "$pid" 2>/dev/null || status=$?
	unset "PAIR_PID[$n]"
	return "$status"
}

pair_running()
{
	[[ -n "${PAIR_PID[$1]:-}" ]] && pair_alive "${PAIR_PID[$1]}"
}

# tandemctl of node $1, inside its namespace, at most 20 s.
pair_ctl()
{
	local n="$1"
	shift
	ip netns exec "${PAIR_NS[$n]}" timeout --kill-after=5 20 \
		"$TANDEM_BIN_DIR/tandemctl" --instance "${PAIR_INSTANCE[$n]}" "$@"
}

# A repl sub-command on our LUN, e.g. pair_repl a promote --force; pair_repl b verify --resync.
# (Commands without IQN LUN arguments, like status, go through pair_ctl.)
# Its output goes to stderr; on failure the reason is what pair_log last said.
pair_repl()
{
	local n="$1" cmd="$2" out rc=0
	shift 2
	out="$(pair_ctl "$n" repl "$cmd" "$PAIR_IQN" "$PAIR_LUN" "$@" 2>&1)" || rc=$?
	[[ -z "$out" ]] || printf '%s\n' "$out" >&2
	if ((rc != 0)); then
		pair_log "node $n: tandemctl repl $cmd $*: exit $rc: $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-200)"
	fi
	return "$rc"
}

pair_status_json()
{
	pair_ctl "$1" repl status --json
}

# jq expression $2 evaluated on node $1's status object of our LUN, printed raw ("null" if absent).
# e.g. pair_field a .out_of_sync_bytes; status 1 (no output) if the status is unavailable.
pair_field()
{
	local json
	json="$(pair_status_json "$1" 2>/dev/null)" || return 1
	jq -r --arg iqn "$PAIR_IQN" --argjson lun "$PAIR_LUN" \
		"first(.luns[] | select(.iqn == \$iqn and .lun == \$lun)) | ($2)" <<<"$json" 2>/dev/null
}

# Poll node $1 until jq expression $2 (on our LUN's status object) is true, up to $3 seconds
# (default 30). On timeout (or if the daemon died) prints why and the last status, returns 1.
#   pair_wait b '.disk == "UpToDate" and .connection == "Connected"' 30
pair_wait()
{
	local n="$1" expr="$2" timeout="${3:-30}" deadline json="" failures=0 missing=0
	deadline=$((SECONDS + timeout))
	while :; do
		if ! pair_running "$n"; then
			pair_log "pair_wait $n: tandemd is not running (waiting for: $expr)"
			return 1
		fi
		# A status command that keeps failing while the daemon runs will not start working
		# (e.g. no replication support): give up after about a second, not the whole timeout.
		if json="$(pair_status_json "$n" 2>&1)"; then
			failures=0
		elif ((++failures >= 5)); then
			pair_log "pair_wait $n: 'repl status --json' fails: $(tr '\n' ' ' <<<"$json" | cut -c1-300)"
			return 1
		fi
		if jq -e --arg iqn "$PAIR_IQN" --argjson lun "$PAIR_LUN" \
			"first(.luns[] | select(.iqn == \$iqn and .lun == \$lun)) | ($expr)" \
			<<<"$json" >/dev/null 2>&1; then
			return 0
		fi
		# Likewise a status that does not list our LUN (not replicated after all).
		if ((failures == 0)) && ! jq -e --arg iqn "$PAIR_IQN" --argjson lun "$PAIR_LUN" \
			'any(.luns[]?; .iqn == $iqn and .lun == $lun)' <<<"$json" >/dev/null 2>&1; then
			if ((++missing >= 5)); then
				pair_log "pair_wait $n: repl status does not list $PAIR_IQN LUN $PAIR_LUN: $(tr '\n' ' ' <<<"$json" | cut -c1-300)"
				return 1
			fi
		else
			missing=0
		fi
		if ((SECONDS >= deadline)); then
			pair_log "pair_wait $n: no '$expr' within ${timeout}s; last status: $(tr '\n' ' ' <<<"$json" | cut -c1-600)"
			return 1
		fi
		sleep 0.2
	done
}

# Hold for $3 seconds while jq expression $2 stays false on node $1 (e.g. never Connected).
# Returns 1 (with the status) as soon as it turns true.
pair_never()
{
	local n="$1" expr="$2" hold="$3" deadline json
	deadline=$((SECONDS + hold))
	while ((SECONDS < deadline)); do
		json="$(pair_status_json "$n" 2>&1)" || true
		if jq -e --arg iqn "$PAIR_IQN" --argjson lun "$PAIR_LUN" \
			"first(.luns[] | select(.iqn == \$iqn and .lun == \$lun)) | ($expr)" \
			<<<"$json" >/dev/null 2>&1; then
			pair_log "pair_never $n: '$expr' became true: $(tr '\n' ' ' <<<"$json" | cut -c1-600)"
			return 1
		fi
		sleep 0.2
	done
}

# Both nodes from scratch to "A Primary, both UpToDate, Connected".
#   skip: both Connected Inconsistent, then `repl skip-initial-sync` (the LUNs are all zeroes)
#   sync: `repl promote --force` on A, and the full initial sync runs
# Each wait is bounded; on failure says which step failed and returns 1.
PAIR_CONNECTED='(.connection == "Connected")'
PAIR_IN_SYNC='(.connection == "Connected" and .disk == "UpToDate" and .peer_disk == "UpToDate" and .out_of_sync_bytes == 0)'
pair_bringup()
{
	local how="${1:-skip}" n
	for n in a b; do
		pair_write_config "$n" || return 1
	done
	pair_start a && pair_start b || return 1
	case "$how" in
	skip)
		if ! { pair_wait a "$PAIR_CONNECTED" 20 && pair_wait b "$PAIR_CONNECTED" 20; }; then
			pair_log "bringup: the new pair did not connect: $PAIR_LAST_ERR"
			return 1
		fi
		pair_repl a skip-initial-sync >&2 || {
			pair_log "bringup: skip-initial-sync refused: $PAIR_LAST_ERR"
			return 1
		}
		pair_repl a promote >&2 || {
			pair_log "bringup: promote A refused: $PAIR_LAST_ERR"
			return 1
		}
		;;
	sync)
		pair_repl a promote --force >&2 || {
			pair_log "bringup: promote --force A refused: $PAIR_LAST_ERR"
			return 1
		}
		;;
	*)
		pair_log "pair_bringup: skip|sync, not '$how'"
		return 1
		;;
	esac
	if ! { pair_wait a "$PAIR_IN_SYNC and .role == \"Primary\"" 40 &&
		pair_wait b "$PAIR_IN_SYNC and .role == \"Secondary\"" 10; }; then
		pair_log "bringup ($how): the pair did not reach A Primary, both UpToDate and Connected: $PAIR_LAST_ERR"
		return 1
	fi
}

# ---------------------------------------------------------------------------------------------
# Client side

pair_url() # node -> iscsi://FRONT_IP:3260/IQN/LUN
{
	printf 'iscsi://%s:%s/%s/%s\n' "${PAIR_FRONT_IP[$1]}" "$PAIR_ISCSI_PORT" "$PAIR_IQN" "$PAIR_LUN"
}

pair_client() # command... in the client namespace
{
	ip netns exec "${PAIR_NS[c]}" "$@"
}

pair_journal() # tag -> journal path of that writer run
{
	printf '%s\n' "$PAIR_TMP/work/$1.journal"
}

pair_writer_out() # tag -> output file of that writer run
{
	printf '%s\n' "$PAIR_TMP/work/$1.out"
}

# Start tdm-writer against node $2 in the background (client namespace), tag $1 names its
# journal and output. Further arguments go to tdm-writer (--seconds, --lba, --blocks, ...).
# Defaults: QD 16, no reconnect, 30 s stall limit.
pair_writer_start()
{
	local tag="$1" n="$2" url
	shift 2
	url="$(pair_url "$n")"
	pair_client timeout --kill-after=5 "$PAIR_WRITER_LIMIT" \
		"$TANDEM_TOOLS_DIR/tdm-writer" write "$url" --qd 16 --max-stall 30 \
		--journal "$(pair_journal "$tag")" "$@" >"$(pair_writer_out "$tag")" 2>&1 &
	PAIR_WRITER_PID[$tag]=$!
}

# Wait for writer $1; returns its exit status (0 clean, 1 write errors, 2 could not run or
# lost its connection, 124 time limit).
pair_writer_wait()
{
	local tag="$1" pid="${PAIR_WRITER_PID[$1]:-}" status=0
	[[ -n "$pid" ]] || return 2
	wait "$pid" || status=$?
	unset "PAIR_WRITER_PID[$tag]"
	return "$status"
}

# Acknowledged writes of writer $1 (from its summary line), or nothing.
pair_writer_acked()
{
	sed -n 's/.*mode=write .*acked=\([0-9]*\).*/\1/p' "$(pair_writer_out "$1")" | tail -n 1
}

pair_writer_summary()
{
	tr '\n' ' ' <"$(pair_writer_out "$1")" | cut -c1-400
}

# Read back journal $2 against node $1. Sets PAIR_LOST and PAIR_CORRUPT (empty if the verify
# did not run to the end); output in $PAIR_TMP/work/verify.out. Returns tdm-writer's status
# (0 only if complete and clean). Call directly, not in $(...).
pair_verify()
{
	local n="$1" journal="$2" status=0 out="$PAIR_TMP/work/verify.out" line
	pair_client timeout --kill-after=5 120 "$TANDEM_TOOLS_DIR/tdm-writer" verify \
		"$(pair_url "$n")" --journal "$journal" --qd 32 --max-stall 30 >"$out" 2>&1 ||
		status=$?
	cat "$out" >>"$PAIR_TMP/work/verify.all"
	line="$(grep -E '^acked_lost=[0-9]+ corrupt=[0-9]+$' "$out" | tail -n 1)"
	PAIR_LOST="$(sed -n 's/^acked_lost=\([0-9]*\).*/\1/p' <<<"$line")"
	PAIR_CORRUPT="$(sed -n 's/.* corrupt=\([0-9]*\)$/\1/p' <<<"$line")"
	if ! grep -q 'complete=yes' "$out"; then
		PAIR_LOST=""
		PAIR_CORRUPT=""
	fi
	return "$status"
}

pair_verify_summary()
{
	tr '\n' ' ' <"$PAIR_TMP/work/verify.out" | cut -c1-400
}

# Whether both backing files hold the same bytes (call when idle and in sync).
pair_images_equal()
{
	cmp -s "${PAIR_IMG[a]}" "${PAIR_IMG[b]}"
}

# The last $1 lines (default 30) of both daemons' logs, on stderr.
pair_logs_tail()
{
	local lines="${1:-30}" n
	for n in a b; do
		[[ -f "${PAIR_LOG[$n]:-}" ]] || continue
		pair_log "----- node $n (${PAIR_NAME[$n]}) log, last $lines lines: ${PAIR_LOG[$n]}"
		tail -n "$lines" "${PAIR_LOG[$n]}" >&2
	done
}

# ---------------------------------------------------------------------------------------------
# Self-test of the plumbing (no replication engine needed): tests/lib/pair.sh selftest

pair_check() # description command...: run, print ok/FAIL, count failures
{
	local what="$1"
	shift
	if "$@" >"$PAIR_TMP/work/check.out" 2>&1; then
		printf 'pair selftest: ok   %s\n' "$what"
	else
		printf 'pair selftest: FAIL %s\n' "$what"
		sed 's/^/    /' "$PAIR_TMP/work/check.out" | tail -n 15
		PAIR_SELFTEST_FAILED=$((PAIR_SELFTEST_FAILED + 1))
	fi
}

pair_ping() # from-ns-key address: up to 3 pings within 2 s, any answer counts
{
	pair_ns_run "$1" ping -q -c 3 -i 0.3 -w 2 "$2"
}

pair_not() { ! "$@"; }

pair_selftest_links()
{
	pair_check "A -> B front" pair_ping a 10.99.0.2
	pair_check "client -> A front" pair_ping c 10.99.0.1
	pair_check "client -> B front" pair_ping c 10.99.0.2
	pair_check "A -> B replication" pair_ping a 10.99.1.2
	pair_check "B -> A replication" pair_ping b 10.99.1.1
	pair_check "client cannot reach the replication network" pair_not pair_ping c 10.99.1.1
	pair_check "no default route in A" pair_not pair_ns_run a ip route get 8.8.8.8
	pair_link_cut both
	pair_check "cut both: A -> B replication fails" pair_not pair_ping a 10.99.1.2
	pair_check "cut both: B -> A replication fails" pair_not pair_ping b 10.99.1.1
	pair_check "cut both: front still up" pair_ping a 10.99.0.2
	pair_link_heal
	pair_check "healed: A -> B replication" pair_ping a 10.99.1.2
	pair_link_cut a2b
	pair_check "cut a2b: A -> B replication fails" pair_not pair_ping a 10.99.1.2
	pair_check "cut a2b: B -> A ping fails too (its reply is dropped)" pair_not pair_ping b 10.99.1.1
	pair_check "cut a2b: A's packets reach B's input hook and are counted" \
		pair_nft_counted b
	pair_link_heal
	pair_check "healed a2b" pair_ping a 10.99.1.2
	pair_link_cut b2a
	pair_check "cut b2a: B -> A replication fails" pair_not pair_ping b 10.99.1.1
	pair_link_heal
	pair_check "healed b2a" pair_ping b 10.99.1.1
	pair_check "healed: no nft table left" pair_not pair_ns_run b nft list table inet tdmcut
}

# Whether node $1 has our cut table (a one-way cut is in force there).
pair_nft_counted()
{
	pair_ns_run "$1" nft list table inet tdmcut | grep -q "ip saddr"
}

pair_selftest_single()
{
	if [[ ! -x "$TANDEM_BIN_DIR/tandemd" || ! -x "$TANDEM_TOOLS_DIR/tdm-writer" ]]; then
		printf 'pair selftest: skip single tandemd (not built)\n'
		return 0
	fi
	PAIR_REPLICATED=0
	PAIR_SIZE[a]=$((64 * PAIR_MIB))
	pair_write_config a
	pair_check "plain tandemd starts in A's namespace" pair_start a
	pair_check "tandemctl status in A's namespace" pair_ctl a status
	pair_check "A's admin socket is not reachable from the host namespace" \
		pair_not timeout 5 "$TANDEM_BIN_DIR/tandemctl" --instance "${PAIR_INSTANCE[a]}" status
	pair_check "A's portal is not bound on B's address" pair_not pair_tcp_probe c 10.99.0.2 3260
	pair_writer_start single a --seconds 3
	pair_check "tdm-writer from the client namespace" pair_writer_wait single
	printf 'pair selftest:      %s\n' "$(pair_writer_summary single)"
	pair_check "writer acked some writes" test "$(pair_writer_acked single)" -gt 0
	pair_verify a "$(pair_journal single)"
	pair_check "verify: complete and clean (acked_lost=$PAIR_LOST corrupt=$PAIR_CORRUPT)" \
		test "$PAIR_LOST:$PAIR_CORRUPT" = "0:0"
	pair_kill a
	pair_check "restart after kill -9" pair_start a
	pair_verify a "$(pair_journal single)"
	pair_check "verify after restart: clean" test "$PAIR_LOST:$PAIR_CORRUPT" = "0:0"
	pair_check "tandemd exits 0 on SIGTERM" pair_stop a
}

pair_selftest()
{
	PAIR_SELFTEST_FAILED=0
	pair_setup || return 1
	local prefix="$PAIR_PREFIX"
	pair_check "namespaces exist" test "$(ip netns list | grep -c "^$prefix")" -eq 4
	pair_check "host namespace got no interface of ours" pair_not ip link show front0
	pair_selftest_links
	pair_selftest_single
	# Teardown in a subshell of its own is not possible (the namespaces are ours): check the
	# leftovers from a child shell after this one exits; here only report.
	printf 'pair selftest: %s failure(s); prefix %s\n' "$PAIR_SELFTEST_FAILED" "$prefix"
	((PAIR_SELFTEST_FAILED == 0))
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -uo pipefail
	case "${1:-}" in
	selftest)
		# Run the self-test in a child (its EXIT trap tears down), then look for leftovers.
		rc=0
		bash "$0" selftest-inner &
		inner=$!
		wait "$inner" || rc=$?
		left="$(ip netns list | grep -E "^tr${inner}(a|b|c|sw)( |\$)" || true)"
		if [[ -n "$left" ]]; then
			printf 'pair selftest: FAIL namespaces left behind: %s\n' "$(tr '\n' ' ' <<<"$left")"
			rc=1
		else
			printf 'pair selftest: ok   teardown left no namespaces\n'
		fi
		exit "$rc"
		;;
	selftest-inner) pair_selftest ;;
	*)
		sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
fi
