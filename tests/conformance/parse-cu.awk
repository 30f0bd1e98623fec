# Parse the verbose (-v) stdout of libiscsi's iscsi-test-cu into one line per test:
#     Suite.Test<TAB>PASS|FAIL|SKIP<TAB>reason
# CUnit prints "  Test: NAME ..." when a test starts, then whatever the test logs, then
# "passed" or "FAILED" (followed by the failed assertions). libiscsi marks a skipped test by
# logging "[SKIPPED] reason" and letting it pass, so a passed test with such a line is a SKIP.
# Run iscsi-test-cu with -V: some tests (StartStopUnit.PwrCnd/NoLoej, NoMedia.NoMediaSBC) log
# their whole-test skip only at the verbose level. A few verbose "[SKIPPED]" lines only skip
# one assertion of a test that goes on (CHECK_SIZE's "Skipping assert", WriteAtomic16.VPD's
# "No ... restrictions on this LUN"); those do not make the test a SKIP.
# One "[SKIPPED]" line is a partial skip in one test only: ReadOnly.ReadOnlySBC (libiscsi 1.19)
# checks each medium-changing command against a write-protected LUN in turn, and its
# COMPARE AND WRITE step logs "[SKIPPED] COMPAREANDWRITE is not implemented." and moves on
# to the other commands, whose checks still run. That line ends one step, not the test:
# ReadOnlySBC passes if nothing else failed (its reason notes the skipped step). Elsewhere
# (CompareAndWrite.*) the same line is a whole-test skip, as usual.
# A suite whose initialisation fails prints a warning and runs none of its tests; those tests
# are simply absent here and the caller reports them as missing.

function finish(result, reason)
{
	if (test == "")
		return
	if (result == "PASS" && skip != "") {
		result = "SKIP"
		reason = skip
	} else if (result == "PASS" && partial != "") {
		reason = "partial skip: " partial
	}
	if (result == "FAIL" && reason == "")
		reason = failmsg
	flush()
	held_name = suite "." test
	held_result = result
	held_reason = reason
	test = ""
	skip = ""
	partial = ""
	failmsg = ""
}

# A result is held back until the next event, so that a FAIL without "[FAILED]" text can take
# the first failed assertion that CUnit prints after it as its reason.
function flush(r)
{
	if (held_name == "")
		return
	r = held_reason
	gsub(/[\t\r]/, " ", r)
	printf "%s\t%s\t%s\n", held_name, held_result, r
	held_name = ""
}

# Look at text the current test produced: a log line, or the tail of its "Test:" line. CUnit
# writes its verdict at the start of a line (test logs are indented) and without a newline, so
# whatever the suite's teardown logs next may follow it on the same line.
function consume(text, t)
{
	t = text
	sub(/[ \t\r]+$/, "", t)
	if (t ~ /^passed/) {
		finish("PASS", "")
		return
	}
	if (t ~ /^FAILED/) {
		finish("FAIL", "")
		return
	}
	if (skip == "" && match(t, /\[SKIPPED\][ \t]*/) &&
	    t !~ /Skipping assert|restrictions on this LUN/) {
		if (suite "." test == "ReadOnly.ReadOnlySBC" &&
		    t ~ /COMPAREANDWRITE is not implemented/)
			partial = substr(t, RSTART + RLENGTH)
		else
			skip = substr(t, RSTART + RLENGTH)
	}
	if (failmsg == "" && match(t, /\[FAILED\][ \t]*/))
		failmsg = substr(t, RSTART + RLENGTH)
}

BEGIN {
	suite = ""
	test = ""
	skip = ""
	partial = ""
	failmsg = ""
	held_name = ""
}

/^Suite: / {
	finish("FAIL", "no result printed")
	flush()
	suite = $2
	next
}

/^  Test: / {
	finish("FAIL", "no result printed")
	line = $0
	sub(/^  Test: /, "", line)
	idx = index(line, " ...")
	if (idx == 0) {
		test = line
		next
	}
	test = substr(line, 1, idx - 1)
	consume(substr(line, idx + 4))
	next
}

/^Run Summary:/ {
	finish("FAIL", "no result printed")
	flush()
	next
}

{
	if (test != "") {
		consume($0)
	} else if (held_name != "" && held_result == "FAIL" && held_reason == "" &&
		   $0 ~ /^    [0-9]+\. /) {
		held_reason = $0
		sub(/^    [0-9]+\. /, "", held_reason)
		sub(/    .*$/, "", held_reason) # teardown log glued to the line

	}
}

END {
	finish("FAIL", "no result printed (run cut short)")
	flush()
}
