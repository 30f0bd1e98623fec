# shellcheck shell=bash
# The fingerprint that names a set of runs (failover, guest and fuzz records): runs of the
# same code add up, an edit of any file in the set starts a new count.

# 16 hex digits over the files named on stdin (NUL-separated, relative to $1): each file's
# name and content, in a fixed order.
tdm_files_fingerprint() # dir
{
	(cd "$1" && LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16
}
