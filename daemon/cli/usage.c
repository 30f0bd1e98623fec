/* tandemctl --help: the usage of every command, made from the table of operations. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define WRAP_AT     92 /* columns of a usage line before it continues on the next */
#define NOTE_COLUMN 30 /* where a command's note starts */

/* What each replication command does; printed with `tandemctl repl --help`. */
static const char repl_details[] =
    "\n"
    "Replication (LUNs with a replication group in the configuration; states in DRBD's\n"
    "words: role Primary/Secondary, disk UpToDate/Outdated/Inconsistent/Diskless,\n"
    "connection StandAlone/Connecting/Connected/SyncSource/SyncTarget/VerifySource/\n"
    "VerifyTarget):\n"
    "  status       role, disks, connection, resync progress, generation ids, last error\n"
    "               of every replicated LUN (or the one given); --json for scripts.\n"
    "  promote      make this node Primary for the LUN (it then serves writes). Needs an\n"
    "               UpToDate disk. --force promotes without one. RISK: --force makes this\n"
    "               node's data the truth: whatever the peer wrote that this node lacks\n"
    "               is lost when they resync. Use it only when the peer's data is gone.\n"
    "               Normally Pacemaker promotes; a node never promotes itself.\n"
    "  demote       back to Secondary (initiators must have stopped writing here).\n"
    "  connect      (re)connect to the peer; a resync follows if either side changed.\n"
    "  disconnect   drop the connection and stay StandAlone; writes go on locally and\n"
    "               are marked for resync.\n"
    "  verify       compare both copies online (digests only); --resync then resyncs the\n"
    "               blocks found different.\n"
    "  resync       pause or resume the running resync (the LUN stays out of sync).\n"
    "  invalidate   declare this node's data bad: the whole LUN is resynced from the peer.\n"
    "  resolve-split-brain\n"
    "               after both nodes changed data while apart: run it on the node whose\n"
    "               changes since the split are to be DISCARDED; it becomes SyncTarget of\n"
    "               the other at the next connect.\n"
    "  skip-initial-sync\n"
    "               only for a brand-new LUN pair whose disks are known to be identical\n"
    "               (e.g. both all zeroes): run on one node while Connected and both are\n"
    "               Inconsistent; both become UpToDate without the full initial sync. On\n"
    "               disks that differ it leaves silently different copies.\n";

static const char usage_details[] =
    "\n"
    "Options:\n"
    "  --instance NAME   the tandemd instance to talk to (default \"default\")\n"
    "  --json            machine-readable output\n"
    "  --help            this text; `tandemctl COMMAND --help` for one command\n"
    "\n"
    "IQN and INITIATOR_IQN are iSCSI names: iqn.YYYY-MM.reversed.domain[:id],\n"
    "eui.<16 hex> or naa.<16|32 hex>. ALL lets every initiator log in.\n"
    "LUN is 0..255. PATH is a regular file or a block device; a relative path is taken\n"
    "from the current directory. --size creates a missing file (sparse) or grows it;\n"
    "BYTES takes K M G T P (powers of 1024, also KiB MiB ...) or KB MB GB TB PB\n"
    "(powers of 1000). --thin allows UNMAP. --direct opens with O_DIRECT.\n"
    "--readonly exports PATH write protected (opened read-only; no --size).\n"
    "lun resize grows a LUN while initiators use it: a file to SIZE (same units as\n"
    "--size, a multiple of the block size; extended sparsely), a block device to the\n"
    "size it has now (grow it first, e.g. lvextend, then leave SIZE out; a SIZE must\n"
    "equal the device's). Shrinking is refused: it would cut off the end of the\n"
    "filesystem or VMFS datastore on the LUN. Initiators get UNIT ATTENTION CAPACITY\n"
    "DATA HAS CHANGED and see the new size; the size is saved in the config file.\n"
    "--physical-block-size reports bigger physical blocks than --block-size (e.g. 4096\n"
    "on 512-byte blocks: \"512e\"); a power-of-two multiple of it, at most 65536.\n"
    "stats gives each LUN's and session's counters and latency percentiles since start;\n"
    "--interval SECONDS (1..3600) asks twice that far apart and prints rates over it:\n"
    "reads and writes per second, MB/s (10^6 bytes) and p50/p99 latency.\n"
    "CHAP secrets are 12..255 characters; USER/SECRET after --mutual are what the\n"
    "target answers with when the initiator authenticates it.\n"
    "Must run as root.\n";

/* One word of a usage line, on a continuation line when it would pass WRAP_AT. */
static void word(FILE *out, size_t *col, const char *w)
{
        if (*col + 1 + strlen(w) > WRAP_AT) {
                fputs("\n         ", out);
                *col = 9;
        }
        *col += (size_t)fprintf(out, " %s", w);
}

/* Whether some argument of op is what option o stands for ("IQN|--discovery"). */
static bool stands_for_arg(const struct admin_op *op, const struct admin_option *o)
{
        const struct admin_arg *a;
        for (size_t i = 0; (a = admin_op_arg(op, i, NULL)); i++)
                if (a->unless == o->bit)
                        return true;
        return false;
}

/* "  lun add IQN LUN PATH [--block-size N] ..." and the row's note. */
static void usage_line(FILE *out, const struct admin_op *op)
{
        const struct admin_arg *a;
        bool optional, in_group = false;
        char w[128];
        size_t col = (size_t)fprintf(out, "  %s", op->cmd);
        if (op->sub)
                word(out, &col, op->sub);
        for (size_t i = 0; (a = admin_op_arg(op, i, &optional)); i++) {
                const struct admin_option *instead = admin_option_by_bit(a->unless);
                bool last = !admin_op_arg(op, i + 1, NULL);
                snprintf(w, sizeof(w), "%s%s%s%s%s", optional && !in_group ? "[" : "", a->word,
                         instead ? "|--" : "", instead ? instead->name : "",
                         optional && last ? "]" : "");
                word(out, &col, w);
                in_group = optional;
        }
        for (size_t k = 0; k < admin_n_options; k++) {
                const struct admin_option *o = &admin_options[k];
                if (!(op->options & o->bit) || stands_for_arg(op, o))
                        continue;
                int n = snprintf(w, sizeof(w), "[--%s", o->name);
                for (size_t j = 0; j < admin_option_n_values(o); j++)
                        n += snprintf(w + n, sizeof(w) - (size_t)n, " %s", o->values[j]->word);
                snprintf(w + n, sizeof(w) - (size_t)n, "]");
                word(out, &col, w);
        }
        if (op->note)
                fprintf(out, "%*s(%s)", col < NOTE_COLUMN - 1 ? (int)(NOTE_COLUMN - col) : 2, "",
                        op->note);
        fputc('\n', out);
}

void cli_usage(FILE *out, const char *topic)
{
        size_t n;
        const struct admin_op *ops = admin_ops(&n);
        bool known = false;
        for (size_t i = 0; topic && i < n; i++)
                known = known || strcmp(ops[i].cmd, topic) == 0;
        fprintf(out, "usage: tandemctl [--instance NAME] COMMAND ...\n\n");
        for (size_t i = 0; i < n; i++)
                if (!known || strcmp(ops[i].cmd, topic) == 0)
                        usage_line(out, &ops[i]);
        fputs(usage_details, out);
        if (!known || strcmp(topic, "repl") == 0)
                fputs(repl_details, out);
}
