# shellcheck shell=bash
# CPU time of a process, for the benchmarks (sourced by target.sh and tests/bench/replication).

# utime+stime of a process and all its threads, in clock ticks (/proc/PID/stat fields 14, 15);
# with "children", cutime+cstime (fields 16, 17: the children it has waited for, and theirs).
tdm_cpu_ticks() # pid [children]
{
	local stat rest user=12 system=13
	stat="$(cat "/proc/$1/stat")" || return 1
	rest="${stat##*) }" # the command name may contain spaces; fields restart after ") "
	[[ "${2:-}" != children ]] || { user=14 system=15; }
	# shellcheck disable=SC2086
	set -- $rest
	printf '%s\n' "$((${!user} + ${!system}))"
}
