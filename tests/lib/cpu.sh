# CPU time of a process, for the benchmarks (sourced by target.sh and tests/bench/replication).

# utime+stime of a process and all its threads, in clock ticks (/proc/PID/stat fields 14, 15).
tdm_cpu_ticks()
{
	local stat rest
	stat="$(cat "/proc/$1/stat")" || return 1
	rest="${stat##*) }" # the command name may contain spaces; fields restart after ") "
	# shellcheck disable=SC2086
	set -- $rest
	printf '%s\n' "$((${12} + ${13}))"
}
