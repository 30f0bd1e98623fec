# tests/guests/lib.sh: QEMU guests for the tests in tests/guests (source it; bash).
# shellcheck shell=bash
#
#   guest_wait_quiet                 wait while /tmp/tandem-quiet exists (benchmarks running)
#   guest_image VARIANT              build or reuse the image (tests/guests/image/build)
#   guest_start TAG NETNS [QEMU-ARG...]
#                                    boot a guest in network namespace NETNS ("" for none) with
#                                    the image in GUEST_IMG, kernel command line GUEST_APPEND;
#                                    files GUEST_DIR/TAG.*: serial (each console line stamped
#                                    with the host's clock), qemu.err, events (QMP events, one
#                                    JSON line each), qmp (command socket), ctl (the guest's
#                                    ttyS1), pid
#   guest_wait_line TAG REGEX SECS   until the guest's console shows REGEX
#   guest_send TAG TEXT              a line to the guest's control port ("stop")
#   guest_qmp TAG CMD [JSON]         one QMP command
#   guest_wait_exit TAG SECS         until QEMU has exited (kill -9 after SECS)
#   guest_stop_all                   kill -9 every QEMU started here (by pid)
#   guest_pause_watch TAG            (background) resumes a VM paused on an I/O error, once a
#                                    second, and logs each "cont" to GUEST_DIR/TAG.conts
#   guest_pauses TAG [AFTER_TS]      "count seconds" of I/O-error pauses (STOP ... RESUME) from
#                                    the QMP events (a migration's STOP is not one)
#   guest_host_stall FILE             the longest time (s) between two acknowledged writes while
#                                    the workload ran, on the host's clock
#   guest_result FILE KEY             a field of the guest's "TG RESULT" line
#   guest_kernel_crash TAG            the first line of an oops or panic on TAG's console, or of
#                                     the workload's death by a fault signal, if any
# Environment: TDM_GUEST_ACCEL (tcg, or kvm where the host has a working one),
# TDM_GUEST_MEM (MiB, default 512), TDM_GUEST_CACHE (image cache, see image/build).

GUESTS_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GUEST_DIR="${GUEST_DIR:-/tmp}"
GUEST_IMG=""
GUEST_APPEND=""
declare -gA GUEST_PID=() GUEST_EVPID=()

guest_log() { printf '%s guests: %s\n' "$(date +%T.%3N)" "$*" >&2; }

# shellcheck source=tests/lib/fingerprint.sh
. "$GUESTS_HERE/../lib/fingerprint.sh"
# The guest records' second fingerprint (after the failover one): the files of tests/guests
# that decide how a guest run goes (not run and summary, nor notes).
guests_fingerprint()
{
	(cd "$GUESTS_HERE/../.." &&
		find tests/guests -type f ! -name '*.md' ! -name run ! -name summary -print0) |
		tdm_files_fingerprint "$GUESTS_HERE/../.."
}

guest_wait_quiet()
{
	local said=0
	while [[ -e /tmp/tandem-quiet ]]; do
		((said)) || guest_log "waiting: /tmp/tandem-quiet exists (benchmarks running)"
		said=1
		sleep 30
	done
}

guest_image() # variant
{
	GUEST_IMG="$("$GUESTS_HERE/image/build" --variant "$1" --quiet)" && [[ -s "$GUEST_IMG/vmlinux" ]]
}

# Copies QEMU's console to stdout, each line prefixed with the host's time (s since the epoch).
_guest_stamp()
{
	local line
	while IFS= read -r line; do
		printf '%s %s\n' "$EPOCHREALTIME" "${line%$'\r'}"
	done
}

guest_start() # tag netns [qemu args...]
{
	local tag="$1" ns="$2" d="$GUEST_DIR" accel
	shift 2
	case "${TDM_GUEST_ACCEL:-tcg}" in
	kvm) accel=(-accel kvm -cpu qemu64) ;;
	*) accel=(-accel tcg) ;;
	esac
	rm -f "$d/$tag".{qmp,evq,ctl,pid,events,serial,qemu.err,conts}
	# shellcheck disable=SC2054 # commas inside QEMU option values
	local cmd=(qemu-system-x86_64 -name "$tag" "${accel[@]}" -m "${TDM_GUEST_MEM:-512}" -smp 1
		-nographic -nodefaults -no-reboot -no-user-config
		-kernel "$GUEST_IMG/vmlinux" -initrd "$GUEST_IMG/initrd.gz"
		-append "console=ttyS0 panic=-1 loglevel=4 $GUEST_APPEND"
		-serial stdio
		-chardev "socket,id=ctl,path=$d/$tag.ctl,server=on,wait=off" -device isa-serial,chardev=ctl
		-qmp "unix:$d/$tag.qmp,server=on,wait=off" -qmp "unix:$d/$tag.evq,server=on,wait=off"
		-pidfile "$d/$tag.pid" "$@")
	[[ -n "$ns" ]] && cmd=(ip netns exec "$ns" "${cmd[@]}")
	("${cmd[@]}" </dev/null 2>"$d/$tag.qemu.err" | _guest_stamp >"$d/$tag.serial") &
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s "$d/$tag.pid" && -S "$d/$tag.evq" ]] && break
		sleep 0.1
	done
	GUEST_PID[$tag]="$(cat "$d/$tag.pid" 2>/dev/null)"
	if [[ -z "${GUEST_PID[$tag]}" ]]; then
		guest_log "$tag: QEMU did not start: $(tail -3 "$d/$tag.qemu.err")"
		return 1
	fi
	: >"$d/$tag.events"
	/usr/bin/python3 "$GUESTS_HERE/qmp.py" "$d/$tag.evq" --events "$d/$tag.events" &
	GUEST_EVPID[$tag]=$!
}

guest_alive() { [[ -n "${GUEST_PID[$1]:-}" ]] && kill -0 "${GUEST_PID[$1]}" 2>/dev/null; }

guest_wait_line() # tag regex secs
{
	local end=$((SECONDS + $3))
	while ((SECONDS < end)); do
		grep -qaE "$2" "$GUEST_DIR/$1.serial" 2>/dev/null && return 0
		guest_alive "$1" || { grep -qaE "$2" "$GUEST_DIR/$1.serial" 2>/dev/null; return; }
		sleep 0.2
	done
	return 1
}

# QEMU feeds the UART only as fast as its FIFO drains and drops what is left in the socket when
# the client goes: the connection stays open a second after the line.
guest_send() { { printf '%s\n' "$2"; sleep 1; } | socat -u - "UNIX-CONNECT:$GUEST_DIR/$1.ctl" 2>/dev/null; }

guest_qmp() # tag cmd [json]
{
	local tag="$1"
	shift
	timeout 30 /usr/bin/python3 "$GUESTS_HERE/qmp.py" "$GUEST_DIR/$tag.qmp" "$@"
}

guest_wait_exit() # tag secs
{
	local tag="$1" end=$((SECONDS + $2)) rc=0
	while guest_alive "$tag" && ((SECONDS < end)); do sleep 0.2; done
	if guest_alive "$tag"; then
		guest_log "$tag: QEMU still runs after $2 s: kill -9 ${GUEST_PID[$tag]}"
		kill -9 "${GUEST_PID[$tag]}" 2>/dev/null
		rc=1
	fi
	[[ -n "${GUEST_EVPID[$tag]:-}" ]] && { kill "${GUEST_EVPID[$tag]}" 2>/dev/null; wait "${GUEST_EVPID[$tag]}" 2>/dev/null; }
	unset "GUEST_PID[$tag]" "GUEST_EVPID[$tag]"
	return $rc
}

guest_stop_all()
{
	local t
	for t in "${!GUEST_PID[@]}"; do
		[[ -n "${GUEST_PID[$t]}" ]] && kill -9 "${GUEST_PID[$t]}" 2>/dev/null
		[[ -n "${GUEST_EVPID[$t]:-}" ]] && kill "${GUEST_EVPID[$t]}" 2>/dev/null
	done
	GUEST_PID=() GUEST_EVPID=()
}

# A VM paused on an I/O error (werror/rerror=stop) is resumed as an admin would, once a
# second until it runs; each cont is logged. Runs until killed.
guest_pause_watch() # tag
{
	local tag="$1" seen=0 n st
	while :; do
		n=$(grep -c '"event": "STOP"' "$GUEST_DIR/$tag.events" 2>/dev/null)
		if ((${n:-0} > seen)) || grep -q '"event": "BLOCK_IO_ERROR"' "$GUEST_DIR/$tag.events" 2>/dev/null; then
			st="$(guest_qmp "$tag" query-status 2>/dev/null)"
			if [[ "$st" == *'"io-error"'* ]]; then
				echo "$EPOCHREALTIME cont $(guest_qmp "$tag" cont 2>&1)" >>"$GUEST_DIR/$tag.conts"
			fi
			seen=${n:-0}
		fi
		sleep 1
	done
}

guest_pauses() # tag -> "count seconds"
{
	/usr/bin/python3 - "$GUEST_DIR/$1.events" <<'PY'
import json, sys
count, total, stopped = 0, 0.0, None
migrating = False
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    ev, ts = e.get('event'), e.get('host_ts', 0)
    if ev == 'MIGRATION':
        migrating = e.get('data', {}).get('status') not in ('completed', 'failed', 'cancelled')
        if e.get('data', {}).get('status') == 'completed':
            migrating = True  # the source stays stopped after it
    elif ev == 'STOP' and not migrating:
        count += 1
        stopped = ts
    elif ev == 'RESUME' and stopped is not None:
        total += ts - stopped
        stopped = None
print('%d %.1f' % (count, total))
PY
}

guest_host_stall() # console file
{
	awk '/ TG WORKLOAD-START/ { on = 1; last = $1; next }
		/ TG WORKLOAD-STOP/ { on = 0 }
		on && / TG ACK / { if ($1 - last > gap) gap = $1 - last; last = $1 }
		END { printf "%.1f\n", gap }' "$1"
}

guest_result() # console-file key
{
	sed -n "s/.* TG RESULT .*\\b$2=\\([^ ]*\\).*/\\1/p" "$1" | tail -1
}

# A guest kernel that oopsed or panicked says so on its console before it stops; so does init
# when the workload's own shell (in the initramfs, in RAM) died of a fault signal (END rc
# 128 + SIGILL, SIGABRT, SIGBUS, SIGFPE or SIGSEGV): a TCG-migrated guest's workload segfaulted
# once, 0.3 s after the switch-over. A program the workload runs on the LUN's data (e2fsck)
# crashing does not end the workload, which then reports it: never matched here.
guest_kernel_crash() # tag
{
	grep -a -m1 -E 'Kernel panic - not syncing|BUG: unable to handle|Oops: [0-9]+| TG END rc=(132|134|135|136|139)$' \
		"$GUEST_DIR/$1.serial" 2>/dev/null | cut -d' ' -f2- | cut -c1-160
}
