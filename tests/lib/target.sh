#!/usr/bin/env bash
# Start and stop iSCSI targets for tests: tandemd (ours) or tgtd (the comparison baseline),
# each on a free loopback port with a thin sparse LUN in a temporary directory.
#
# Source it from a test script:
#     . "$(dirname "$0")/../lib/target.sh"
#     target_start tandem t            # or: target_start tgt t
#     echo "${TARGET_URL[t]}"          # iscsi://127.0.0.1:PORT/IQN/LUN
# Everything started here is stopped and removed when the sourcing shell exits (trap on EXIT,
# INT, TERM). Run it directly to start one target and keep it until Ctrl-C:
#     tests/lib/target.sh [--kind tandem|tgt] [--size BYTES] [--dir PARENT]
#
# Environment:
#   TANDEM_BIN_DIR   where tandemd/tandemctl live (default: <repo>/build/bin)
#   TANDEM_TOOLS_DIR where tdm-* test tools live  (default: <repo>/build/tests)
#   TDM_KEEP=1       keep temporary directories (logs) after exit
#
# The tandemd command line, its config file and the tandemctl sub-commands are each written in
# exactly one function below (tdm_tandem_conf, tdm_tandemd_start, tdm_tandemctl_*), so they can
# be adjusted in one place when the daemon's interface settles.

# shellcheck disable=SC2034 # the TARGET_* arrays are read by the scripts that source this file

if [[ -n "${TDM_TARGET_SH_LOADED:-}" ]]; then
	return 0
fi
TDM_TARGET_SH_LOADED=1
# shellcheck source-path=SCRIPTDIR source=cpu.sh
. "$(dirname "${BASH_SOURCE[0]}")/cpu.sh"

TDM_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TANDEM_BIN_DIR="${TANDEM_BIN_DIR:-$TDM_REPO/build/bin}"
TANDEM_TOOLS_DIR="${TANDEM_TOOLS_DIR:-$TDM_REPO/build/tests}"
TDM_HOST=127.0.0.1
TDM_DEFAULT_IQN="iqn.2026-11.io.tandem:t1"
TDM_DEFAULT_SIZE=$((1024 * 1024 * 1024))

# Per-target facts, keyed by the name given to target_start.
declare -gA TARGET_KIND=() TARGET_PID=() TARGET_PORT=() TARGET_URL=() TARGET_IQN=()
declare -gA TARGET_LUN=() TARGET_DIR=() TARGET_IMG=() TARGET_CTL=() TARGET_INSTANCE=()
declare -gA TARGET_PORTAL=() TARGET_TID=() TARGET_LOG=() TARGET_SIZE=()
TDM_CLEANUP_CMDS=()
TARGET_STOP_PROBLEM=""
TDM_TMP_DIRS=()

tdm_log()
{
	printf '%s\n' "$*" >&2
}

tdm_die()
{
	tdm_log "error: $*"
	exit 1
}

# Register a command to run at exit (run in reverse order of registration).
tdm_on_exit()
{
	TDM_CLEANUP_CMDS+=("$1")
}

tdm_cleanup()
{
	local rc=$? i
	trap - EXIT INT TERM
	for ((i = ${#TDM_CLEANUP_CMDS[@]} - 1; i >= 0; i--)); do
		eval "${TDM_CLEANUP_CMDS[i]}" || true
	done
	local name
	for name in "${!TARGET_PID[@]}"; do
		target_stop "$name" || true
	done
	local d
	for d in "${TDM_TMP_DIRS[@]}"; do
		if [[ "${TDM_KEEP:-0}" == 1 ]]; then
			tdm_log "kept $d"
		else
			rm -rf -- "$d"
		fi
	done
	exit "$rc"
}
trap tdm_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A temporary directory removed at exit, returned in TDM_DIR (not printed: a command
# substitution would run in a subshell and lose the registration). $1: parent directory.
tdm_mktemp_dir()
{
	local parent="${1:-${TMPDIR:-/tmp}}"
	TDM_DIR="$(mktemp -d "$parent/tandem-test.XXXXXX")"
	TDM_TMP_DIRS+=("$TDM_DIR")
}

tdm_port_in_use()
{
	[[ -n "$(ss -Htan "sport = :$1" 2>/dev/null)" ]]
}

# A TCP port no socket uses (random, bounded attempts), below the kernel's ephemeral range:
# a port in that range may become some connection's local port before the target binds it
# (the tests' own clients open thousands), and then the listen fails.
tdm_free_port()
{
	local i p low=32768 span
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
	span=$((low - 10000))
	((span >= 1000)) || span=20000 # an unusual range: then a collision stays possible
	for ((i = 0; i < 200; i++)); do
		p=$((10000 + RANDOM % span))
		if ! tdm_port_in_use "$p"; then
			printf '%s\n' "$p"
			return 0
		fi
	done
	tdm_log "no free port found"
	return 1
}

# Wait until host:port accepts a TCP connection. $3: timeout in seconds (default 20).
# $4: optional pid that must stay alive meanwhile.
tdm_wait_port()
{
	local host="$1" port="$2" timeout="${3:-20}" pid="${4:-}" deadline
	deadline=$((SECONDS + timeout))
	while ((SECONDS < deadline)); do
		if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
			tdm_log "process $pid exited before $host:$port answered"
			return 1
		fi
		if timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	tdm_log "timeout waiting for $host:$port"
	return 1
}

# Stop a process we started: TERM, then KILL after $2 seconds (default 10).
tdm_kill_pid()
{
	local pid="$1" grace="${2:-10}" deadline
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$((SECONDS + grace))
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		tdm_log "process $pid ignored TERM, killing"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------
# tandemd

# The one place that writes a tandemd config file.
# Args: file port state_dir iqn lun_path size_bytes
# LUN 0 is a thin LUN on lun_path. A caller that needs more LUNs on the same target sets the
# array TDM_TANDEM_EXTRA_LUNS before target_start, one libconfig LUN group body per element
# (e.g. 'lun = 1; path = "/abs/ro.img"; readonly = true;'); empty or unset: LUN 0 only.
# TDM_TANDEM_CONF_EXTRA (may be unset): more top-level settings, appended as they are.
tdm_tandem_conf()
{
	local file="$1" port="$2" state="$3" iqn="$4" path="$5" size="$6" extra="" l
	for l in ${TDM_TANDEM_EXTRA_LUNS[@]+"${TDM_TANDEM_EXTRA_LUNS[@]}"}; do
		extra+=$',\n           { '"$l"' }'
	done
	cat >"$file" <<EOF
listen = ["$TDM_HOST:$port"];
state_dir = "$state";
log = { file = "$state/tandemd.log"; level = "info"; syslog = false; };
targets = (
  {
    iqn = "$iqn";
    acl = ["ALL"];
    luns = ( { lun = 0; path = "$path"; size = ${size}L; thin = true; }$extra );
  }
);
${TDM_TANDEM_CONF_EXTRA:-}
EOF
}

# The one place that starts tandemd (output appended to log: a restart keeps what came
# before, and a sanitizer report is never overwritten). Args: name conf port state_dir instance log
# TDM_TANDEM_EXTRA_LISTEN (array, may be unset): more portals ADDR:PORT beside the first.
tdm_tandemd_start()
{
	local name="$1" conf="$2" port="$3" state="$4" instance="$5" log="$6"
	local more=() l
	for l in ${TDM_TANDEM_EXTRA_LISTEN[@]+"${TDM_TANDEM_EXTRA_LISTEN[@]}"}; do
		more+=(--listen "$l")
	done
	"$TANDEM_BIN_DIR/tandemd" --foreground --config "$conf" --listen "$TDM_HOST:$port" \
		"${more[@]}" --state-dir "$state" --instance "$instance" >>"$log" 2>&1 &
	TARGET_PID[$name]=$!
}

tdm_tandemctl()
{
	local name="$1"
	shift
	"$TANDEM_BIN_DIR/tandemctl" --instance "${TARGET_INSTANCE[$name]}" "$@"
}

# Live configuration through tandemctl. Each returns tandemctl's status.
tdm_tandemctl_target_add() # name iqn
{
	tdm_tandemctl "$1" target add "$2"
}
tdm_tandemctl_lun_add() # name iqn lun path size
{
	tdm_tandemctl "$1" lun add "$2" "$3" "$4" --size "$5" --thin
}
tdm_tandemctl_acl_add() # name iqn initiator
{
	tdm_tandemctl "$1" acl add "$2" "$3"
}
tdm_tandemctl_acl_del() # name iqn initiator
{
	tdm_tandemctl "$1" acl del "$2" "$3"
}
tdm_tandemctl_chap_set() # name iqn user secret (secret: 12..255 characters)
{
	tdm_tandemctl "$1" chap set "$2" "$3" "$4"
}

tandem_available()
{
	[[ -x "$TANDEM_BIN_DIR/tandemd" ]]
}

tandemctl_available()
{
	[[ -x "$TANDEM_BIN_DIR/tandemctl" ]]
}

# ---------------------------------------------------------------------------------------------
# tgtd (LUN 0 of a tgt target is its controller; the disk is LUN 1)

tdm_tgtadm()
{
	local name="$1"
	shift
	tgtadm -C "${TARGET_CTL[$name]}" --lld iscsi "$@"
}

tdm_tgtd_start()
{
	local name="$1" port="$2" log="$3"
	local ctl i
	# tgtd's control "port" names its socket /var/run/tgtd/socket.N (N <= 32767).
	for ((i = 0; i < 100; i++)); do
		ctl=$((1000 + RANDOM % 31000))
		[[ -e "/var/run/tgtd/socket.$ctl" ]] || break
	done
	tgtd -f -C "$ctl" --iscsi "portal=$TDM_HOST:$port" >>"$log" 2>&1 &
	TARGET_PID[$name]=$!
	TARGET_CTL[$name]=$ctl
	TARGET_TID[$name]=0
	local deadline=$((SECONDS + 20))
	until tdm_tgtadm "$name" --op show --mode sys >/dev/null 2>&1; do
		if ! kill -0 "${TARGET_PID[$name]}" 2>/dev/null || ((SECONDS >= deadline)); then
			tdm_log "tgtd did not come up; log:"
			cat "$log" >&2
			return 1
		fi
		sleep 0.1
	done
}

# Add a target with one thin LUN to a running tgtd. Args: name iqn path (sets tid)
tdm_tgt_target_add()
{
	local name="$1" iqn="$2" tid
	tid=$((TARGET_TID[$name] + 1))
	TARGET_TID[$name]=$tid
	tdm_tgtadm "$name" --op new --mode target --tid "$tid" -T "$iqn"
}

tdm_tgt_tid_of()
{
	local name="$1" iqn="$2"
	tdm_tgtadm "$name" --op show --mode target |
		awk -v iqn="$iqn" '$1 == "Target" && $3 == iqn { sub(":", "", $2); print $2 }'
}

tdm_tgt_lun_add() # name iqn lun path
{
	local tid
	tid="$(tdm_tgt_tid_of "$1" "$2")"
	tdm_tgtadm "$1" --op new --mode logicalunit --tid "$tid" --lun "$3" -b "$4" &&
		tdm_tgtadm "$1" --op update --mode logicalunit --tid "$tid" --lun "$3" \
			--params thin_provisioning=1
}

# ---------------------------------------------------------------------------------------------
# Kind-independent operations, used by the test scripts.

# target_start KIND NAME [SIZE] [PARENT_DIR]
# Sets TARGET_URL[NAME] and friends; prints nothing. Returns nonzero if the target fails to
# come up (its log is printed to stderr).
target_start()
{
	local kind="$1" name="${2:-$1}" size="${3:-$TDM_DEFAULT_SIZE}" parent="${4:-}"
	local dir port iqn="$TDM_DEFAULT_IQN" img
	if [[ ! "$size" =~ ^[0-9]+$ ]]; then
		size="$(numfmt --from=iec "$size")" || return 1 # 100M, 1G: powers of 1024
	fi
	tdm_mktemp_dir "$parent"
	dir=$TDM_DIR
	port="$(tdm_free_port)"
	img="$dir/lun0.img"
	truncate -s "$size" "$img"
	TARGET_KIND[$name]=$kind
	TARGET_PORT[$name]=$port
	TARGET_DIR[$name]=$dir
	TARGET_IMG[$name]=$img
	TARGET_IQN[$name]=$iqn
	TARGET_SIZE[$name]=$size
	TARGET_LOG[$name]="$dir/$kind.log"
	TARGET_PORTAL[$name]="$TDM_HOST:$port"
	case "$kind" in
	tandem)
		tandem_available || {
			tdm_log "tandemd not built at $TANDEM_BIN_DIR/tandemd"
			return 1
		}
		mkdir -p "$dir/state"
		TARGET_INSTANCE[$name]="tdmtest-$$-$name"
		TARGET_LUN[$name]=0
		tdm_tandem_conf "$dir/tandem.conf" "$port" "$dir/state" "$iqn" "$img" "$size"
		;;
	tgt)
		TARGET_LUN[$name]=1
		;;
	*)
		tdm_log "unknown target kind '$kind' (tandem|tgt)"
		return 1
		;;
	esac
	TARGET_URL[$name]="iscsi://$TDM_HOST:$port/$iqn/${TARGET_LUN[$name]}"
	tdm_target_launch "$name"
}

# Start the daemon of an already described target (first start or restart) and wait for it.
tdm_target_launch()
{
	local name="$1" dir="${TARGET_DIR[$1]}" port="${TARGET_PORT[$1]}"
	case "${TARGET_KIND[$name]}" in
	tandem)
		tdm_tandemd_start "$name" "$dir/tandem.conf" "$port" "$dir/state" \
			"${TARGET_INSTANCE[$name]}" "${TARGET_LOG[$name]}"
		;;
	tgt)
		tdm_tgtd_start "$name" "$port" "${TARGET_LOG[$name]}" || return 1
		tdm_tgt_target_add "$name" "${TARGET_IQN[$name]}" &&
			tdm_tgt_lun_add "$name" "${TARGET_IQN[$name]}" 1 "${TARGET_IMG[$name]}" &&
			tdm_tgtadm "$name" --op bind --mode target --tid 1 -I ALL || return 1
		;;
	esac
	if ! tdm_wait_port "$TDM_HOST" "$port" 20 "${TARGET_PID[$name]}"; then
		tdm_log "${TARGET_KIND[$name]} did not answer on $TDM_HOST:$port; log:"
		cat "${TARGET_LOG[$name]}" >&2 || true
		return 1
	fi
}

# Kill the target daemon without warning (SIGKILL), as a crash would. Its files stay.
target_kill()
{
	local name="$1" pid="${TARGET_PID[$1]:-}"
	[[ -n "$pid" ]] || return 0
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	unset "TARGET_PID[$name]"
	if [[ "${TARGET_KIND[$name]}" == tgt ]]; then
		rm -f "/var/run/tgtd/socket.${TARGET_CTL[$name]}" \
			"/var/run/tgtd/socket.${TARGET_CTL[$name]}.lock"
	fi
}

# Start a stopped or killed target again on the same port with the same LUN file (and, for
# tandemd, the same state directory). On tgt only the first target is recreated.
target_restart()
{
	local name="$1"
	[[ -z "${TARGET_PID[$name]:-}" ]] || target_stop "$name"
	tdm_target_launch "$name"
}

target_stop()
{
	local name="$1"
	[[ -n "${TARGET_PID[$name]:-}" ]] || return 0
	if [[ "${TARGET_KIND[$name]}" == tgt ]]; then
		# tgtd ignores TERM while it has targets: remove them, then ask it to exit.
		local tid
		for tid in $(tdm_tgtadm "$name" --op show --mode target 2>/dev/null |
			awk '$1 == "Target" { sub(":", "", $2); print $2 }'); do
			tdm_tgtadm "$name" --op delete --force --mode target --tid "$tid" || true
		done
		tgtadm -C "${TARGET_CTL[$name]}" --op delete --mode system >/dev/null 2>&1 || true
	fi
	tdm_kill_pid "${TARGET_PID[$name]}" 10
	if [[ "${TARGET_KIND[$name]}" == tgt ]]; then
		rm -f "/var/run/tgtd/socket.${TARGET_CTL[$name]}" \
			"/var/run/tgtd/socket.${TARGET_CTL[$name]}.lock"
	fi
	unset "TARGET_PID[$name]"
}

# Stop a target and judge how it went: it must exit on TERM within 10 s with status 0 (tandemd
# only; tgtd is stopped through tgtadm) and its logs must hold no AddressSanitizer,
# LeakSanitizer or UndefinedBehaviorSanitizer report. Returns 0 if clean; otherwise sets
# TARGET_STOP_PROBLEM to the reason (with the first lines of a report) and returns 1.
# Call it directly, not in $(...): it must wait for its own child.
target_stop_checked()
{
	local name="$1" pid="${TARGET_PID[$1]:-}" status=0 deadline why=""
	TARGET_STOP_PROBLEM=""
	if [[ -z "$pid" ]]; then
		TARGET_STOP_PROBLEM="not running (died earlier?)"
		return 1
	fi
	if [[ "${TARGET_KIND[$name]}" == tandem ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		deadline=$((SECONDS + 10))
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			why="did not exit within 10 s of SIGTERM"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || status=$?
		unset "TARGET_PID[$name]"
		if [[ -z "$why" && "$status" != 0 ]]; then
			why="exited with status $status"
		fi
	else
		target_stop "$name"
	fi
	local log_files=("${TARGET_LOG[$name]}") report
	[[ -f "${TARGET_DIR[$name]}/state/tandemd.log" ]] &&
		log_files+=("${TARGET_DIR[$name]}/state/tandemd.log")
	report="$(grep -h -m 3 -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer)' \
		"${log_files[@]}" 2>/dev/null | tr '\n' ' ' | cut -c1-400)" || true
	if [[ -n "$report" ]]; then
		why="${why:+$why; }sanitizer report in ${TARGET_LOG[$name]}: $report"
	fi
	if [[ -n "$why" ]]; then
		TARGET_STOP_PROBLEM="$why"
		return 1
	fi
}

# URL of LUN `lun` of target `iqn` on the portal of `name`, optionally with CHAP credentials.
target_url_for() # name iqn lun [user secret]
{
	local cred=""
	if [[ $# -ge 5 ]]; then
		cred="$4%$5@"
	fi
	printf 'iscsi://%s%s/%s/%s\n' "$cred" "${TARGET_PORTAL[$1]}" "$2" "$3"
}

# Add another target with one thin LUN (number: 0 on tandem, 1 on tgt, see target_lun_of).
# The ACL starts empty: nobody may log in until target_acl_add.
target_add_target() # name iqn size
{
	local name="$1" iqn="$2" size="$3" img
	img="${TARGET_DIR[$name]}/${iqn##*:}.img"
	truncate -s "$size" "$img"
	case "${TARGET_KIND[$name]}" in
	tandem)
		tdm_tandemctl_target_add "$name" "$iqn" &&
			tdm_tandemctl_lun_add "$name" "$iqn" 0 "$img" "$size"
		;;
	tgt)
		tdm_tgt_target_add "$name" "$iqn" && tdm_tgt_lun_add "$name" "$iqn" 1 "$img"
		;;
	esac
}

target_lun_of()
{
	printf '%s\n' "${TARGET_LUN[$1]}"
}

target_acl_add() # name iqn initiator|ALL
{
	case "${TARGET_KIND[$1]}" in
	tandem) tdm_tandemctl_acl_add "$1" "$2" "$3" ;;
	tgt)
		local tid
		tid="$(tdm_tgt_tid_of "$1" "$2")"
		if [[ "$3" == ALL ]]; then
			tdm_tgtadm "$1" --op bind --mode target --tid "$tid" -I ALL
		else
			tdm_tgtadm "$1" --op bind --mode target --tid "$tid" -Q "$3"
		fi
		;;
	esac
}

target_chap_set() # name iqn user secret
{
	case "${TARGET_KIND[$1]}" in
	tandem) tdm_tandemctl_chap_set "$1" "$2" "$3" "$4" ;;
	tgt)
		local tid
		tid="$(tdm_tgt_tid_of "$1" "$2")"
		tdm_tgtadm "$1" --op new --mode account --user "$3" --password "$4" &&
			tdm_tgtadm "$1" --op bind --mode account --tid "$tid" --user "$3"
		;;
	esac
}

# Whether live configuration (extra targets, ACLs, CHAP) is possible for this target.
target_live_config_available()
{
	case "${TARGET_KIND[$1]}" in
	tandem) tandemctl_available ;;
	tgt) return 0 ;;
	esac
}

# ---------------------------------------------------------------------------------------------

tdm_target_main()
{
	local kind=tandem size=$TDM_DEFAULT_SIZE parent=""
	while [[ $# -gt 0 ]]; do
		case "$1" in
		--kind) kind="$2"; shift 2 ;;
		--size) size="$2"; shift 2 ;;
		--dir) parent="$2"; shift 2 ;;
		-h | --help)
			sed -n '2,20p' "${BASH_SOURCE[0]}"
			return 0
			;;
		*) tdm_die "unknown argument $1" ;;
		esac
	done
	target_start "$kind" main "$size" "$parent" || tdm_die "could not start $kind"
	printf '%s\n' "${TARGET_URL[main]}"
	tdm_log "pid ${TARGET_PID[main]}, dir ${TARGET_DIR[main]}; Ctrl-C to stop"
	wait "${TARGET_PID[main]}" || true
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	tdm_target_main "$@"
fi
