/* tandemctl: argument parsing into admin requests, and printing of the answers. */
#include "ctl.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tandem/config.h"

/* ---------------------------------------------------------------- usage */

static const struct {
        const char *topic;
        const char *text;
} usages[] = {
    {"target", "  target add IQN\n"
               "  target del IQN              (its LUNs go too; backing files are kept)\n"},
    {"lun", "  lun add IQN LUN PATH [--size BYTES] [--thin] [--direct] [--block-size N]\n"
            "          [--physical-block-size N] [--readonly]\n"
            "  lun del IQN LUN\n"
            "  lun resize IQN LUN [SIZE]   (grow online; no SIZE: re-read a block device)\n"},
    {"acl", "  acl add IQN INITIATOR_IQN|ALL\n"
            "  acl del IQN INITIATOR_IQN|ALL\n"},
    {"chap", "  chap set IQN USER SECRET [--mutual USER SECRET]\n"
             "  chap set --discovery USER SECRET [--mutual USER SECRET]\n"
             "  chap clear IQN | chap clear --discovery\n"},
    {"status", "  status [--json]\n"},
    {"stats", "  stats [IQN] [--json]\n"},
    {"repl", "  repl status [IQN LUN] [--json]\n"
             "  repl promote IQN LUN [--force]\n"
             "  repl demote IQN LUN\n"
             "  repl connect IQN LUN\n"
             "  repl disconnect IQN LUN\n"
             "  repl verify IQN LUN [--resync]\n"
             "  repl resync pause|resume IQN LUN\n"
             "  repl invalidate IQN LUN\n"
             "  repl resolve-split-brain IQN LUN\n"
             "  repl skip-initial-sync IQN LUN\n"},
};

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
    "CHAP secrets are 12..255 characters; USER/SECRET after --mutual are what the\n"
    "target answers with when the initiator authenticates it.\n"
    "Must run as root.\n";

void admin_ctl_usage(FILE *out, const char *topic)
{
        fprintf(out, "usage: tandemctl [--instance NAME] COMMAND ...\n\n");
        bool any = false;
        for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++) {
                if (topic && strcmp(topic, usages[i].topic) != 0)
                        continue;
                fputs(usages[i].text, out);
                any = true;
        }
        if (!any)
                for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++)
                        fputs(usages[i].text, out);
        fputs(usage_details, out);
        if (!any || (topic && strcmp(topic, "repl") == 0))
                fputs(repl_details, out);
}

/* ---------------------------------------------------------------- parsing */

__attribute__((format(printf, 3, 4))) static int bad(char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static const char name_forms[] = "(iqn.YYYY-MM.domain[:id], eui.<16 hex>, naa.<16|32 hex>)";

static int check_iqn(const char *field, const char *v, char *err, size_t errlen)
{
        if (!tdm_iscsi_name_valid(v))
                return bad(err, errlen, "%s: \"%s\" is not an iSCSI name %s", field, v, name_forms);
        return 0;
}

static int parse_lun_id(const char *v, uint32_t *out, char *err, size_t errlen)
{
        size_t n = strlen(v);
        bool digits = n > 0 && n <= 3;
        for (size_t i = 0; digits && i < n; i++)
                digits = isdigit((unsigned char)v[i]);
        if (!digits || atoi(v) > TDM_LUN_ID_MAX)
                return bad(err, errlen, "lun: must be 0..%d, got \"%s\"", TDM_LUN_ID_MAX, v);
        *out = (uint32_t)atoi(v);
        return 0;
}

/* Positional arguments and options of one command, collected from argv. */
struct args {
        const char *pos[8];
        int n_pos;
        const char *size, *block_size, *physical_block_size, *mutual_user, *mutual_secret;
        bool thin, direct, readonly, discovery, json, help, force, resync;
};

static int collect(struct args *a, int argc, char **argv, int i, const char *cmd, char *err,
                   size_t errlen)
{
        for (; i < argc; i++) {
                const char *s = argv[i];
                if (s[0] != '-' || s[1] == '\0') {
                        if (a->n_pos == (int)(sizeof(a->pos) / sizeof(a->pos[0])))
                                return bad(err, errlen, "%s: unexpected argument \"%s\"", cmd, s);
                        a->pos[a->n_pos++] = s;
                        continue;
                }
                const char **slot = NULL;
                if (strcmp(s, "--json") == 0)
                        a->json = true;
                else if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0)
                        a->help = true;
                else if (strcmp(s, "--thin") == 0)
                        a->thin = true;
                else if (strcmp(s, "--direct") == 0)
                        a->direct = true;
                else if (strcmp(s, "--readonly") == 0)
                        a->readonly = true;
                else if (strcmp(s, "--discovery") == 0)
                        a->discovery = true;
                else if (strcmp(s, "--force") == 0)
                        a->force = true;
                else if (strcmp(s, "--resync") == 0)
                        a->resync = true;
                else if (strcmp(s, "--size") == 0)
                        slot = &a->size;
                else if (strcmp(s, "--block-size") == 0)
                        slot = &a->block_size;
                else if (strcmp(s, "--physical-block-size") == 0)
                        slot = &a->physical_block_size;
                else if (strcmp(s, "--mutual") == 0) {
                        if (i + 2 >= argc)
                                return bad(err, errlen, "%s: --mutual needs USER and SECRET", cmd);
                        a->mutual_user = argv[++i];
                        a->mutual_secret = argv[++i];
                } else if (strncmp(s, "--size=", 7) == 0)
                        a->size = s + 7;
                else if (strncmp(s, "--block-size=", 13) == 0)
                        a->block_size = s + 13;
                else if (strncmp(s, "--physical-block-size=", 22) == 0)
                        a->physical_block_size = s + 22;
                else
                        return bad(err, errlen, "%s: unknown option \"%s\"", cmd, s);
                if (slot) {
                        if (i + 1 >= argc)
                                return bad(err, errlen, "%s: %s needs a value", cmd, s);
                        *slot = argv[++i];
                }
        }
        return 0;
}

/* Which options each command takes (anything else given is an error). */
enum {
        O_SIZE = 1,
        O_BLOCK = 2,
        O_THIN = 4,
        O_DIRECT = 8,
        O_DISCOVERY = 16,
        O_MUTUAL = 32,
        O_READONLY = 64,
        O_PHYSICAL_BLOCK = 128,
        O_FORCE = 256,
        O_RESYNC = 512,
};

static int check_options(const struct args *a, unsigned allowed, const char *cmd, char *err,
                         size_t errlen)
{
        const struct {
                bool given;
                unsigned flag;
                const char *name;
        } opts[] = {
            {a->size != NULL, O_SIZE, "--size"},
            {a->block_size != NULL, O_BLOCK, "--block-size"},
            {a->thin, O_THIN, "--thin"},
            {a->direct, O_DIRECT, "--direct"},
            {a->discovery, O_DISCOVERY, "--discovery"},
            {a->mutual_user != NULL, O_MUTUAL, "--mutual"},
            {a->readonly, O_READONLY, "--readonly"},
            {a->physical_block_size != NULL, O_PHYSICAL_BLOCK, "--physical-block-size"},
            {a->force, O_FORCE, "--force"},
            {a->resync, O_RESYNC, "--resync"},
        };
        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
                if (opts[i].given && !(opts[i].flag & allowed))
                        return bad(err, errlen, "%s: %s does not apply here", cmd, opts[i].name);
        return 0;
}

static int check_count(const struct args *a, int want, const char *cmd, const char *names,
                       char *err, size_t errlen)
{
        if (a->n_pos < want)
                return bad(err, errlen, "%s: missing %s", cmd, names);
        if (a->n_pos > want)
                return bad(err, errlen, "%s: unexpected argument \"%s\"", cmd, a->pos[want]);
        return 0;
}

static int absolute_path(struct admin_ctl *ctl, const char *p, char *err, size_t errlen)
{
        if (!*p)
                return bad(err, errlen, "path: must not be empty");
        if (p[0] == '/') {
                if (strlen(p) >= sizeof(ctl->path))
                        return bad(err, errlen, "path: too long");
                snprintf(ctl->path, sizeof(ctl->path), "%s", p);
                return 0;
        }
        char cwd[4096];
        if (!getcwd(cwd, sizeof(cwd)))
                return bad(err, errlen,
                           "path: \"%s\" is relative and the current directory is "
                           "unknown",
                           p);
        size_t dl = strcmp(cwd, "/") ? strlen(cwd) : 0, pl = strlen(p);
        if (dl + 1 + pl >= sizeof(ctl->path))
                return bad(err, errlen, "path: too long");
        memcpy(ctl->path, cwd, dl);
        ctl->path[dl] = '/';
        memcpy(ctl->path + dl + 1, p, pl + 1);
        return 0;
}

/* --physical-block-size: a size ("4096", "4K") that is block_size times a power of two. */
static int parse_physical_block_size(const char *v, uint32_t block_size, uint32_t *out, char *err,
                                     size_t errlen)
{
        uint64_t n;
        if (tdm_parse_size(v, &n) < 0 || n == 0 || n > TDM_MAX_PHYSICAL_BLOCK_SIZE)
                return bad(err, errlen,
                           "physical-block-size: must be block-size (%u) times a power of two, "
                           "at most %u, got \"%s\"",
                           block_size, TDM_MAX_PHYSICAL_BLOCK_SIZE, v);
        int rc = tdm_physical_block_size_check((uint32_t)n, block_size, "physical-block-size", err,
                                               errlen);
        if (rc)
                return rc;
        *out = (uint32_t)n;
        return 0;
}

static int parse_lun_add(struct admin_ctl *ctl, const struct args *a, char *err, size_t errlen)
{
        Tandem__Admin__LunAdd *m = &ctl->op.lun_add;
        int rc;
        tandem__admin__lun_add__init(m);
        if ((rc = check_options(
                 a, O_SIZE | O_BLOCK | O_THIN | O_DIRECT | O_READONLY | O_PHYSICAL_BLOCK, "lun add",
                 err, errlen)) ||
            (rc = check_count(a, 3, "lun add", "IQN LUN PATH", err, errlen)) ||
            (rc = check_iqn("iqn", a->pos[0], err, errlen)) ||
            (rc = parse_lun_id(a->pos[1], &m->lun, err, errlen)) ||
            (rc = absolute_path(ctl, a->pos[2], err, errlen)))
                return rc;
        m->iqn = (char *)a->pos[0];
        m->path = ctl->path;
        m->thin = a->thin;
        m->direct = a->direct;
        m->readonly = a->readonly;
        if (a->readonly && a->size)
                return bad(err, errlen,
                           "lun add: --readonly and --size do not go together (a "
                           "read-only LUN is never created or grown)");
        uint32_t bs = TDM_DEFAULT_BLOCK_SIZE;
        if (a->block_size) {
                uint64_t v;
                if (tdm_parse_size(a->block_size, &v) < 0 ||
                    (v != 512 && v != 1024 && v != 2048 && v != 4096))
                        return bad(err, errlen,
                                   "block-size: must be 512, 1024, 2048 or 4096, got \"%s\"",
                                   a->block_size);
                bs = (uint32_t)v;
                m->block_size = bs;
        }
        if (a->physical_block_size &&
            (rc = parse_physical_block_size(a->physical_block_size, bs, &m->physical_block_size,
                                            err, errlen)))
                return rc;
        if (a->size) {
                int r = tdm_parse_size(a->size, &m->size);
                if (r == -ERANGE)
                        return bad(err, errlen, "size: too large, got \"%s\"", a->size);
                if (r < 0 || m->size == 0)
                        return bad(err, errlen,
                                   "size: must be a positive number of bytes with an optional unit "
                                   "(K M G T, KiB MiB ..., KB MB ...), got \"%s\"",
                                   a->size);
                if (m->size % bs)
                        return bad(err, errlen,
                                   "size: must be a positive multiple of %u, got \"%s\"", bs,
                                   a->size);
        }
        ctl->req.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_ADD;
        ctl->req.lun_add = m;
        return 0;
}

/* lun resize IQN LUN [SIZE]: the daemon checks SIZE against the LUN's block size. */
static int parse_lun_resize(struct admin_ctl *ctl, const struct args *a, char *err, size_t errlen)
{
        Tandem__Admin__LunResize *m = &ctl->op.lun_resize;
        int rc;
        tandem__admin__lun_resize__init(m);
        if ((rc = check_options(a, 0, "lun resize", err, errlen)))
                return rc;
        if (a->n_pos < 2)
                return bad(err, errlen, "lun resize: missing IQN LUN");
        if ((rc = check_count(a, a->n_pos > 3 ? 3 : a->n_pos, "lun resize", "IQN LUN", err,
                              errlen)) ||
            (rc = check_iqn("iqn", a->pos[0], err, errlen)) ||
            (rc = parse_lun_id(a->pos[1], &m->lun, err, errlen)))
                return rc;
        m->iqn = (char *)a->pos[0];
        if (a->n_pos == 3) {
                int r = tdm_parse_size(a->pos[2], &m->size);
                if (r == -ERANGE)
                        return bad(err, errlen, "size: too large, got \"%s\"", a->pos[2]);
                if (r < 0 || m->size == 0)
                        return bad(err, errlen,
                                   "size: must be a positive number of bytes with an optional unit "
                                   "(K M G T, KiB MiB ..., KB MB ...), got \"%s\"",
                                   a->pos[2]);
        }
        ctl->req.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_RESIZE;
        ctl->req.lun_resize = m;
        return 0;
}

static int parse_chap(struct admin_ctl *ctl, const struct args *a, bool clear, char *err,
                      size_t errlen)
{
        const char *cmd = clear ? "chap clear" : "chap set";
        Tandem__Admin__ChapSet *m = &ctl->op.chap_set;
        tandem__admin__chap_set__init(m);
        int rc = check_options(a, O_DISCOVERY | (clear ? 0 : O_MUTUAL), cmd, err, errlen);
        if (rc)
                return rc;
        int first = 0;
        if (a->discovery) {
                m->discovery = true;
        } else {
                if (a->n_pos < 1)
                        return bad(err, errlen, "%s: missing IQN (or --discovery)", cmd);
                if ((rc = check_iqn("iqn", a->pos[0], err, errlen)))
                        return rc;
                m->iqn = (char *)a->pos[0];
                first = 1;
        }
        if ((rc = check_count(a, first + (clear ? 0 : 2), cmd, "USER SECRET", err, errlen)))
                return rc;
        if (!clear) {
                struct tdm_chap_cfg c = {.enabled = true, .mutual = a->mutual_user != NULL};
                const char *vals[] = {a->pos[first], a->pos[first + 1], a->mutual_user,
                                      a->mutual_secret};
                char *dst[] = {c.user, c.secret, c.mutual_user, c.mutual_secret};
                const char *names[] = {"user", "secret", "mutual user", "mutual secret"};
                for (int i = 0; i < 4; i++) {
                        if (!vals[i])
                                continue;
                        if (strlen(vals[i]) >= TDM_CHAP_MAX)
                                return bad(err, errlen, "%s: too long (at most %d characters)",
                                           names[i], TDM_CHAP_MAX - 1);
                        strcpy(dst[i], vals[i]);
                }
                if ((rc = tdm_chap_check(&c, "", err, errlen)))
                        return rc;
                m->user = (char *)vals[0];
                m->secret = (char *)vals[1];
                if (c.mutual) {
                        m->mutual_user = (char *)a->mutual_user;
                        m->mutual_secret = (char *)a->mutual_secret;
                }
        }
        ctl->req.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_CHAP_SET;
        ctl->req.chap_set = m;
        return 0;
}

/* IQN LUN of a replication command, starting at positional argument `first`. */
static int parse_repl_lun(const struct args *a, int first, const char *cmd, const char **iqn,
                          uint32_t *lun, char *err, size_t errlen)
{
        int rc;
        if ((rc = check_count(a, first + 2, cmd, "IQN LUN", err, errlen)) ||
            (rc = check_iqn("iqn", a->pos[first], err, errlen)) ||
            (rc = parse_lun_id(a->pos[first + 1], lun, err, errlen)))
                return rc;
        *iqn = a->pos[first];
        return 0;
}

static int parse_repl_status(struct admin_ctl *ctl, const struct args *a, char *err, size_t errlen)
{
        Tandem__Admin__ReplStatusRequest *m = &ctl->op.repl_status;
        const char *iqn = NULL;
        int rc;
        tandem__admin__repl_status_request__init(m);
        if ((rc = check_options(a, 0, "repl status", err, errlen)))
                return rc;
        if (a->n_pos == 1)
                return bad(err, errlen, "repl status: missing LUN (give IQN and LUN, or neither)");
        if (a->n_pos > 0 && (rc = parse_repl_lun(a, 0, "repl status", &iqn, &m->lun, err, errlen)))
                return rc;
        m->iqn = (char *)(iqn ? iqn : "");
        ctl->req.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_STATUS;
        ctl->req.repl_status = m;
        return 0;
}

/* Replication commands whose request is just IQN LUN (ReplLun). */
static const struct {
        const char *sub;
        Tandem__Admin__AdminRequest__OpCase op;
} repl_plain[] = {
    {"demote", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE},
    {"connect", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT},
    {"disconnect", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT},
    {"invalidate", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE},
    {"resolve-split-brain", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN},
    {"skip-initial-sync", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_SKIP_INITIAL_SYNC},
};

static int parse_repl(struct admin_ctl *ctl, const char *sub, const struct args *a, char *err,
                      size_t errlen)
{
        Tandem__Admin__AdminRequest *q = &ctl->req;
        char cmd[48];
        const char *iqn;
        int rc;
        snprintf(cmd, sizeof(cmd), "repl %s", sub);
        if (strcmp(sub, "status") == 0)
                return parse_repl_status(ctl, a, err, errlen);
        if (strcmp(sub, "promote") == 0) {
                Tandem__Admin__ReplPromote *m = &ctl->op.repl_promote;
                tandem__admin__repl_promote__init(m);
                if ((rc = check_options(a, O_FORCE, cmd, err, errlen)) ||
                    (rc = parse_repl_lun(a, 0, cmd, &iqn, &m->lun, err, errlen)))
                        return rc;
                m->iqn = (char *)iqn;
                m->force = a->force;
                q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_PROMOTE;
                q->repl_promote = m;
                return 0;
        }
        if (strcmp(sub, "verify") == 0) {
                Tandem__Admin__ReplVerify *m = &ctl->op.repl_verify;
                tandem__admin__repl_verify__init(m);
                if ((rc = check_options(a, O_RESYNC, cmd, err, errlen)) ||
                    (rc = parse_repl_lun(a, 0, cmd, &iqn, &m->lun, err, errlen)))
                        return rc;
                m->iqn = (char *)iqn;
                m->resync = a->resync;
                q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_VERIFY;
                q->repl_verify = m;
                return 0;
        }
        if (strcmp(sub, "resync") == 0) {
                Tandem__Admin__ReplResyncPause *m = &ctl->op.repl_resync_pause;
                tandem__admin__repl_resync_pause__init(m);
                if ((rc = check_options(a, 0, cmd, err, errlen)))
                        return rc;
                if (a->n_pos < 1)
                        return bad(err, errlen, "repl resync: missing pause|resume");
                if (strcmp(a->pos[0], "pause") != 0 && strcmp(a->pos[0], "resume") != 0)
                        return bad(err, errlen, "repl resync: must be pause or resume, got \"%s\"",
                                   a->pos[0]);
                if ((rc = parse_repl_lun(a, 1, cmd, &iqn, &m->lun, err, errlen)))
                        return rc;
                m->iqn = (char *)iqn;
                m->pause = strcmp(a->pos[0], "pause") == 0;
                q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESYNC_PAUSE;
                q->repl_resync_pause = m;
                return 0;
        }
        Tandem__Admin__ReplLun *m = &ctl->op.repl_lun;
        tandem__admin__repl_lun__init(m);
        if ((rc = check_options(a, 0, cmd, err, errlen)) ||
            (rc = parse_repl_lun(a, 0, cmd, &iqn, &m->lun, err, errlen)))
                return rc;
        m->iqn = (char *)iqn;
        for (size_t i = 0; i < sizeof(repl_plain) / sizeof(repl_plain[0]); i++) {
                if (strcmp(sub, repl_plain[i].sub) != 0)
                        continue;
                q->op_case = repl_plain[i].op;
                /* Every ReplLun member of the oneof shares this one storage. */
                switch (q->op_case) {
                case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE:
                        q->repl_demote = m;
                        break;
                case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT:
                        q->repl_connect = m;
                        break;
                case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT:
                        q->repl_disconnect = m;
                        break;
                case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE:
                        q->repl_invalidate = m;
                        break;
                case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN:
                        q->repl_resolve_split_brain = m;
                        break;
                default:
                        q->repl_skip_initial_sync = m;
                        break;
                }
                return 0;
        }
        return bad(err, errlen, "repl: unknown subcommand \"%s\"", sub);
}

static int parse_command(struct admin_ctl *ctl, const char *cmd, const char *sub,
                         const struct args *a, char *err, size_t errlen)
{
        int rc;
        Tandem__Admin__AdminRequest *q = &ctl->req;
        if (strcmp(cmd, "target") == 0 && sub) {
                const char *name = strcmp(sub, "add") == 0 ? "target add" : "target del";
                if ((rc = check_options(a, 0, name, err, errlen)) ||
                    (rc = check_count(a, 1, name, "IQN", err, errlen)) ||
                    (rc = check_iqn("iqn", a->pos[0], err, errlen)))
                        return rc;
                if (strcmp(sub, "add") == 0) {
                        tandem__admin__target_add__init(&ctl->op.target_add);
                        ctl->op.target_add.iqn = (char *)a->pos[0];
                        q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_ADD;
                        q->target_add = &ctl->op.target_add;
                } else {
                        tandem__admin__target_del__init(&ctl->op.target_del);
                        ctl->op.target_del.iqn = (char *)a->pos[0];
                        q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_DEL;
                        q->target_del = &ctl->op.target_del;
                }
                return 0;
        }
        if (strcmp(cmd, "lun") == 0 && sub && strcmp(sub, "add") == 0)
                return parse_lun_add(ctl, a, err, errlen);
        if (strcmp(cmd, "lun") == 0 && sub && strcmp(sub, "resize") == 0)
                return parse_lun_resize(ctl, a, err, errlen);
        if (strcmp(cmd, "lun") == 0 && sub) {
                Tandem__Admin__LunDel *m = &ctl->op.lun_del;
                tandem__admin__lun_del__init(m);
                if ((rc = check_options(a, 0, "lun del", err, errlen)) ||
                    (rc = check_count(a, 2, "lun del", "IQN LUN", err, errlen)) ||
                    (rc = check_iqn("iqn", a->pos[0], err, errlen)) ||
                    (rc = parse_lun_id(a->pos[1], &m->lun, err, errlen)))
                        return rc;
                m->iqn = (char *)a->pos[0];
                q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_DEL;
                q->lun_del = m;
                return 0;
        }
        if (strcmp(cmd, "acl") == 0 && sub) {
                const char *name = strcmp(sub, "add") == 0 ? "acl add" : "acl del";
                if ((rc = check_options(a, 0, name, err, errlen)) ||
                    (rc = check_count(a, 2, name, "IQN INITIATOR_IQN", err, errlen)) ||
                    (rc = check_iqn("iqn", a->pos[0], err, errlen)))
                        return rc;
                if (strcasecmp(a->pos[1], "ALL") != 0 && !tdm_iscsi_name_valid(a->pos[1]))
                        return bad(err, errlen,
                                   "initiator: \"%s\" is neither ALL nor an iSCSI name %s",
                                   a->pos[1], name_forms);
                /* AclAdd and AclDel have the same shape. */
                tandem__admin__acl_add__init(&ctl->op.acl_add);
                ctl->op.acl_add.iqn = (char *)a->pos[0];
                ctl->op.acl_add.initiator = (char *)a->pos[1];
                if (strcmp(sub, "add") == 0) {
                        q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_ADD;
                        q->acl_add = &ctl->op.acl_add;
                } else {
                        Tandem__Admin__AclDel *d = &ctl->op.acl_del;
                        const char *iqn = a->pos[0], *ini = a->pos[1];
                        tandem__admin__acl_del__init(d);
                        d->iqn = (char *)iqn;
                        d->initiator = (char *)ini;
                        q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_DEL;
                        q->acl_del = d;
                }
                return 0;
        }
        if (strcmp(cmd, "chap") == 0 && sub)
                return parse_chap(ctl, a, strcmp(sub, "clear") == 0, err, errlen);
        if (strcmp(cmd, "repl") == 0 && sub)
                return parse_repl(ctl, sub, a, err, errlen);
        if (strcmp(cmd, "status") == 0) {
                if ((rc = check_options(a, 0, "status", err, errlen)) ||
                    (rc = check_count(a, 0, "status", "", err, errlen)))
                        return rc;
                tandem__admin__status_request__init(&ctl->op.status);
                q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_STATUS;
                q->status = &ctl->op.status;
                return 0;
        }
        /* stats */
        if ((rc = check_options(a, 0, "stats", err, errlen)))
                return rc;
        if (a->n_pos > 1)
                return bad(err, errlen, "stats: unexpected argument \"%s\"", a->pos[1]);
        if (a->n_pos == 1 && (rc = check_iqn("iqn", a->pos[0], err, errlen)))
                return rc;
        tandem__admin__stats_request__init(&ctl->op.stats);
        if (a->n_pos == 1)
                ctl->op.stats.iqn = (char *)a->pos[0];
        q->op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_STATS;
        q->stats = &ctl->op.stats;
        return 0;
}

static bool instance_name_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 63 || s[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i]))
                        return false;
        return true;
}

/* Subcommands each command takes; NULL entry: none. */
static const struct {
        const char *cmd;
        const char *subs[12];
} commands[] = {
    {"target", {"add", "del", NULL}},
    {"lun", {"add", "del", "resize", NULL}},
    {"acl", {"add", "del", NULL}},
    {"chap", {"set", "clear", NULL}},
    {"status", {NULL}},
    {"stats", {NULL}},
    {"repl",
     {"status", "promote", "demote", "connect", "disconnect", "verify", "resync", "invalidate",
      "resolve-split-brain", "skip-initial-sync", NULL}},
};

/* "add|del|resize": the subcommands of commands[c], for messages. */
static void subs_joined(size_t c, char *out, size_t outlen)
{
        size_t n = 0;
        out[0] = '\0';
        for (int k = 0; commands[c].subs[k] && n < outlen; k++) {
                int w = snprintf(out + n, outlen - n, "%s%s", k ? "|" : "", commands[c].subs[k]);
                n += w > 0 ? (size_t)w : 0;
        }
}

int admin_ctl_parse(struct admin_ctl *ctl, int argc, char **argv, char *err, size_t errlen)
{
        memset(ctl, 0, sizeof(*ctl));
        snprintf(ctl->instance, sizeof(ctl->instance), "default");
        tandem__admin__admin_request__init(&ctl->req);
        ctl->req.version = TANDEM__ADMIN__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
        int i = 1;
        /* Global options come before the command. */
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *s = argv[i], *inst = NULL;
                if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
                        ctl->help = true;
                        return 0;
                } else if (strcmp(s, "--json") == 0) {
                        ctl->json = true;
                } else if (strcmp(s, "--instance") == 0 || strcmp(s, "-i") == 0) {
                        if (i + 1 >= argc)
                                return bad(err, errlen, "instance: --instance needs a NAME");
                        inst = argv[++i];
                } else if (strncmp(s, "--instance=", 11) == 0) {
                        inst = s + 11;
                } else {
                        return bad(err, errlen, "unknown option \"%s\"", s);
                }
                if (inst && !instance_name_ok(inst))
                        return bad(
                            err, errlen,
                            "instance: must be 1..63 characters of A-Z a-z 0-9 - _ ., got \"%s\"",
                            inst);
                if (inst)
                        snprintf(ctl->instance, sizeof(ctl->instance), "%s", inst);
        }
        if (i >= argc)
                return bad(err, errlen, "missing COMMAND");
        const char *cmd = argv[i++];
        if (strcmp(cmd, "help") == 0) {
                ctl->help = true;
                ctl->topic = i < argc ? argv[i] : NULL;
                return 0;
        }
        size_t c = 0;
        while (c < sizeof(commands) / sizeof(commands[0]) && strcmp(commands[c].cmd, cmd) != 0)
                c++;
        if (c == sizeof(commands) / sizeof(commands[0]))
                return bad(err, errlen, "unknown command \"%s\"", cmd);
        ctl->topic = commands[c].cmd;
        const char *sub = NULL;
        char subs[192];
        subs_joined(c, subs, sizeof(subs));
        if (commands[c].subs[0]) {
                if (i >= argc || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        if (i < argc) {
                                ctl->help = true;
                                return 0;
                        }
                        return bad(err, errlen, "%s: missing %s", cmd, subs);
                }
                for (int k = 0; commands[c].subs[k]; k++)
                        if (strcmp(argv[i], commands[c].subs[k]) == 0)
                                sub = commands[c].subs[k];
                if (!sub)
                        return bad(err, errlen, "%s: unknown subcommand \"%s\" (%s)", cmd, argv[i],
                                   subs);
                i++;
        }
        struct args a = {0};
        char name[32];
        snprintf(name, sizeof(name), "%s%s%s", cmd, sub ? " " : "", sub ? sub : "");
        int rc = collect(&a, argc, argv, i, name, err, errlen);
        if (rc)
                return rc;
        if (a.help) {
                ctl->help = true;
                return 0;
        }
        ctl->json = ctl->json || a.json;
        return parse_command(ctl, cmd, sub, &a, err, errlen);
}

/* ---------------------------------------------------------------- output helpers */

static void human_size(char *out, size_t n, uint64_t bytes)
{
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = (double)bytes;
        int u = 0;
        while (v >= 1024 && u < 5) {
                v /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(out, n, "%" PRIu64 " B", bytes);
        else
                snprintf(out, n, "%.1f %s", v, units[u]);
}

static void isid_hex(char *out, const ProtobufCBinaryData *isid)
{
        out[0] = '\0';
        for (size_t i = 0; i < isid->len && i < 6; i++)
                sprintf(out + 2 * i, "%02x", isid->data[i]);
}

/* Upper bound (µs) of the bucket where fraction p of the commands have completed; 0: none. */
static uint64_t percentile_us(const Tandem__Admin__LunStats *s, double p)
{
        uint64_t total = 0, seen = 0;
        for (size_t i = 0; i < s->n_latency_hist_us; i++)
                total += s->latency_hist_us[i];
        if (total == 0)
                return 0;
        for (size_t i = 0; i < s->n_latency_hist_us; i++) {
                seen += s->latency_hist_us[i];
                if ((double)seen >= p * (double)total)
                        return 1ull << i;
        }
        return 1ull << s->n_latency_hist_us;
}

static void print_json(FILE *out, json_object *o)
{
        fprintf(out, "%s\n",
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

static json_object *jstr(const char *s)
{
        return json_object_new_string(s ? s : "");
}

/* ---------------------------------------------------------------- status */

/* ---- cluster (issue 4): the membership part of `status` ---- */
static json_object *cluster_json(const Tandem__Admin__ClusterInfo *c)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "enabled", json_object_new_boolean(c && c->enabled));
        if (!c || !c->enabled)
                return o;
        json_object_object_add(o, "group", jstr(c->group));
        json_object_object_add(o, "node_id", json_object_new_int64(c->node_id));
        json_object_object_add(o, "corosync_node_id", json_object_new_int64(c->corosync_node_id));
        json_object_object_add(o, "quorate", json_object_new_boolean(c->quorate));
        json_object *m = json_object_new_array();
        for (size_t i = 0; i < c->n_members; i++)
                json_object_array_add(m, json_object_new_int64(c->members[i]));
        json_object_object_add(o, "members", m);
        json_object_object_add(o, "cpg_connected", json_object_new_boolean(c->cpg_connected));
        json_object_object_add(o, "quorum_connected", json_object_new_boolean(c->quorum_connected));
        json_object_object_add(o, "last_error", jstr(c->last_error));
        return o;
}

static void cluster_text(FILE *out, const Tandem__Admin__ClusterInfo *c)
{
        if (!c || !c->enabled) {
                fprintf(out, "cluster: disabled\n");
                return;
        }
        fprintf(out, "cluster: group %s, node %u, quorate %s, members", c->group, c->node_id,
                c->quorate ? "yes" : "no");
        if (c->n_members == 0)
                fprintf(out, " none");
        for (size_t i = 0; i < c->n_members; i++)
                fprintf(out, "%s%u", i ? "," : " ", c->members[i]);
        fprintf(out, ", cpg %s", c->cpg_connected ? "connected" : "not connected");
        if (c->last_error && *c->last_error)
                fprintf(out, " (%s)", c->last_error);
        fprintf(out, "\n");
}
/* ---- end cluster ---- */

static json_object *status_json(const Tandem__Admin__Status *s)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "instance", jstr(s->instance));
        json_object_object_add(o, "version", jstr(s->version));
        json_object_object_add(o, "pid", json_object_new_int64(s->pid));
        json_object_object_add(o, "uptime_s", json_object_new_uint64(s->uptime_s));
        json_object_object_add(o, "config_path", jstr(s->config_path));
        json_object *listen = json_object_new_array();
        for (size_t i = 0; i < s->n_listen; i++)
                json_object_array_add(listen, jstr(s->listen[i]));
        json_object_object_add(o, "listen", listen);
        json_object *disc = json_object_new_object();
        json_object_object_add(disc, "chap", json_object_new_boolean(s->discovery_chap));
        json_object_object_add(disc, "mutual_chap",
                               json_object_new_boolean(s->discovery_mutual_chap));
        json_object_object_add(o, "discovery", disc);
        json_object_object_add(o, "cluster", cluster_json(s->cluster)); /* issue 4 */
        json_object *targets = json_object_new_array();
        for (size_t i = 0; i < s->n_targets; i++) {
                const Tandem__Admin__TargetInfo *t = s->targets[i];
                json_object *tj = json_object_new_object();
                json_object_object_add(tj, "iqn", jstr(t->iqn));
                json_object_object_add(tj, "alias", jstr(t->alias));
                json_object_object_add(tj, "tpgt", json_object_new_int(t->tpgt));
                json_object *acl = json_object_new_array();
                for (size_t j = 0; j < t->n_acl; j++)
                        json_object_array_add(acl, jstr(t->acl[j]));
                json_object_object_add(tj, "acl", acl);
                json_object_object_add(tj, "chap", json_object_new_boolean(t->chap));
                json_object_object_add(tj, "mutual_chap", json_object_new_boolean(t->mutual_chap));
                json_object_object_add(tj, "chap_user", jstr(t->chap_user));
                json_object_object_add(tj, "sessions", json_object_new_int64(t->sessions));
                json_object *luns = json_object_new_array();
                for (size_t j = 0; j < t->n_luns; j++) {
                        const Tandem__Admin__LunInfo *l = t->luns[j];
                        json_object *lj = json_object_new_object();
                        json_object_object_add(lj, "lun", json_object_new_int64(l->lun));
                        json_object_object_add(lj, "path", jstr(l->path));
                        json_object_object_add(lj, "size", json_object_new_uint64(l->size));
                        json_object_object_add(lj, "configured_size",
                                               json_object_new_uint64(l->configured_size));
                        json_object_object_add(lj, "block_size",
                                               json_object_new_int64(l->block_size));
                        json_object_object_add(lj, "physical_block_size",
                                               json_object_new_int64(l->physical_block_size));
                        json_object_object_add(lj, "thin", json_object_new_boolean(l->thin));
                        json_object_object_add(lj, "wce", json_object_new_boolean(l->wce));
                        json_object_object_add(lj, "direct", json_object_new_boolean(l->direct));
                        json_object_object_add(lj, "readonly",
                                               json_object_new_boolean(l->readonly));
                        json_object_object_add(lj, "naa", jstr(l->naa));
                        json_object_object_add(lj, "serial", jstr(l->serial));
                        json_object_object_add(lj, "online", json_object_new_boolean(l->online));
                        json_object_array_add(luns, lj);
                }
                json_object_object_add(tj, "luns", luns);
                json_object_array_add(targets, tj);
        }
        json_object_object_add(o, "targets", targets);
        json_object *sessions = json_object_new_array();
        for (size_t i = 0; i < s->n_sessions; i++) {
                const Tandem__Admin__SessionInfo *x = s->sessions[i];
                char isid[13];
                isid_hex(isid, &x->isid);
                json_object *sj = json_object_new_object();
                json_object_object_add(sj, "initiator", jstr(x->initiator));
                json_object_object_add(sj, "isid", jstr(isid));
                json_object_object_add(sj, "tsih", json_object_new_int64(x->tsih));
                json_object_object_add(sj, "target", jstr(x->target));
                json_object_object_add(sj, "peer", jstr(x->peer));
                json_object_object_add(sj, "cid", json_object_new_int64(x->cid));
                json_object_object_add(sj, "state", jstr(x->state));
                json_object_object_add(sj, "commands_in_flight",
                                       json_object_new_int64(x->commands_in_flight));
                json_object_array_add(sessions, sj);
        }
        json_object_object_add(o, "sessions", sessions);
        return o;
}

static void status_text(FILE *out, const Tandem__Admin__Status *s)
{
        uint64_t up = s->uptime_s;
        fprintf(out,
                "tandemd %s, instance %s, pid %u, up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64
                ":%02" PRIu64 "\n",
                s->version, s->instance, s->pid, up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
        if (s->config_path && *s->config_path)
                fprintf(out, "config: %s\n", s->config_path);
        fprintf(out, "listen:");
        for (size_t i = 0; i < s->n_listen; i++)
                fprintf(out, " %s", s->listen[i]);
        fprintf(out, "\ndiscovery CHAP: %s\n",
                !s->discovery_chap         ? "none"
                : s->discovery_mutual_chap ? "mutual"
                                           : "one-way");
        cluster_text(out, s->cluster); /* issue 4 */
        if (s->n_targets == 0)
                fprintf(out, "\nno targets\n");
        for (size_t i = 0; i < s->n_targets; i++) {
                const Tandem__Admin__TargetInfo *t = s->targets[i];
                fprintf(out, "\ntarget %s", t->iqn);
                if (t->alias && *t->alias)
                        fprintf(out, " (%s)", t->alias);
                fprintf(out, "  tpgt %u  sessions %u\n", t->tpgt, t->sessions);
                fprintf(out, "  acl:");
                if (t->n_acl == 0)
                        fprintf(out, " (empty: no initiator may log in)");
                for (size_t j = 0; j < t->n_acl; j++)
                        fprintf(out, " %s", t->acl[j]);
                fprintf(out, "\n  chap: ");
                if (t->chap)
                        fprintf(out, "user %s%s\n", t->chap_user, t->mutual_chap ? ", mutual" : "");
                else
                        fprintf(out, "none\n");
                for (size_t j = 0; j < t->n_luns; j++) {
                        const Tandem__Admin__LunInfo *l = t->luns[j];
                        char size[32];
                        human_size(size, sizeof(size), l->size);
                        char physical[32] = "";
                        if (l->physical_block_size > l->block_size)
                                snprintf(physical, sizeof(physical), "  physical %u",
                                         l->physical_block_size);
                        fprintf(out, "  lun %u  %s  %s  block %u%s%s%s%s%s%s\n", l->lun, size,
                                l->path, l->block_size, physical, l->thin ? "  thin" : "",
                                l->wce ? "  wce" : "", l->direct ? "  direct" : "",
                                l->readonly ? "  readonly" : "", l->online ? "" : "  OFFLINE");
                        fprintf(out, "         naa.%s  serial %s\n", l->naa, l->serial);
                }
        }
        fprintf(out, "\nsessions: %zu\n", s->n_sessions);
        for (size_t i = 0; i < s->n_sessions; i++) {
                const Tandem__Admin__SessionInfo *x = s->sessions[i];
                char isid[13];
                isid_hex(isid, &x->isid);
                fprintf(out, "  %s -> %s  isid %s tsih %u cid %u  peer %s  %s  in flight %u\n",
                        x->initiator, x->target && *x->target ? x->target : "(discovery)", isid,
                        x->tsih, x->cid, x->peer, x->state, x->commands_in_flight);
        }
}

/* ---------------------------------------------------------------- stats */

static json_object *stats_json(const Tandem__Admin__Stats *s)
{
        json_object *o = json_object_new_object();
        json_object *luns = json_object_new_array();
        for (size_t i = 0; i < s->n_luns; i++) {
                const Tandem__Admin__LunStats *l = s->luns[i];
                json_object *lj = json_object_new_object();
                json_object_object_add(lj, "target", jstr(l->iqn));
                json_object_object_add(lj, "lun", json_object_new_int64(l->lun));
                json_object_object_add(lj, "reads", json_object_new_uint64(l->reads));
                json_object_object_add(lj, "writes", json_object_new_uint64(l->writes));
                json_object_object_add(lj, "other", json_object_new_uint64(l->other));
                json_object_object_add(lj, "read_bytes", json_object_new_uint64(l->read_bytes));
                json_object_object_add(lj, "write_bytes", json_object_new_uint64(l->write_bytes));
                json_object_object_add(lj, "errors", json_object_new_uint64(l->errors));
                json_object_object_add(lj, "p50_us_below",
                                       json_object_new_uint64(percentile_us(l, 0.5)));
                json_object_object_add(lj, "p99_us_below",
                                       json_object_new_uint64(percentile_us(l, 0.99)));
                json_object *h = json_object_new_array();
                for (size_t j = 0; j < l->n_latency_hist_us; j++)
                        json_object_array_add(h, json_object_new_uint64(l->latency_hist_us[j]));
                json_object_object_add(lj, "latency_hist_us", h);
                json_object_array_add(luns, lj);
        }
        json_object_object_add(o, "luns", luns);
        return o;
}

static void stats_text(FILE *out, const Tandem__Admin__Stats *s)
{
        if (s->n_luns == 0) {
                fprintf(out, "no LUNs\n");
                return;
        }
        fprintf(out, "%-44s %3s %12s %12s %10s %10s %8s %9s %9s\n", "TARGET", "LUN", "READS",
                "WRITES", "READ", "WRITTEN", "ERRORS", "P50<us", "P99<us");
        for (size_t i = 0; i < s->n_luns; i++) {
                const Tandem__Admin__LunStats *l = s->luns[i];
                char rd[32], wr[32];
                human_size(rd, sizeof(rd), l->read_bytes);
                human_size(wr, sizeof(wr), l->write_bytes);
                fprintf(out,
                        "%-44s %3u %12" PRIu64 " %12" PRIu64 " %10s %10s %8" PRIu64 " %9" PRIu64
                        " %9" PRIu64 "\n",
                        l->iqn, l->lun, l->reads, l->writes, rd, wr, l->errors,
                        percentile_us(l, 0.5), percentile_us(l, 0.99));
        }
}

/* ---------------------------------------------------------------- replication */

static void gen_hex(char *out, size_t n, uint64_t g)
{
        snprintf(out, n, "%016" PRIX64, g);
}

static void duration_text(char *out, size_t n, uint64_t s)
{
        if (s < 60)
                snprintf(out, n, "%" PRIu64 "s", s);
        else if (s < 3600)
                snprintf(out, n, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
        else
                snprintf(out, n, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
}

/*
 * Percent of the current (or last) resync or verify done, one decimal. Without one: 100
 * only for an UpToDate disk with nothing out of sync (an Inconsistent disk is never 100).
 */
static double sync_percent(const Tandem__Admin__ReplLunStatus *l)
{
        if (l->sync_total_bytes == 0)
                return !l->out_of_sync_bytes && l->disk && strcmp(l->disk, "UpToDate") == 0 ? 100.0
                                                                                            : 0.0;
        uint64_t done =
            l->sync_done_bytes < l->sync_total_bytes ? l->sync_done_bytes : l->sync_total_bytes;
        return (double)(uint64_t)((double)done * 1000.0 / (double)l->sync_total_bytes + 0.5) / 10.0;
}

static bool conn_is(const Tandem__Admin__ReplLunStatus *l, const char *prefix)
{
        return l->connection && strncmp(l->connection, prefix, strlen(prefix)) == 0;
}

static json_object *repl_lun_json(const Tandem__Admin__ReplLunStatus *l)
{
        char hex[20];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "iqn", jstr(l->iqn));
        json_object_object_add(o, "lun", json_object_new_int64(l->lun));
        json_object_object_add(o, "naa", jstr(l->naa));
        json_object_object_add(o, "role", jstr(l->role));
        json_object_object_add(o, "disk", jstr(l->disk));
        json_object_object_add(o, "peer_disk", jstr(l->peer_disk));
        json_object_object_add(o, "connection", jstr(l->connection));
        json_object_object_add(o, "node_id", json_object_new_int64(l->node_id));
        json_object_object_add(o, "peer_node_id", json_object_new_int64(l->peer_node_id));
        json_object_object_add(o, "peer_name", jstr(l->peer_name));
        json_object_object_add(o, "peer_address", jstr(l->peer_address));
        json_object_object_add(o, "size_bytes", json_object_new_uint64(l->size_bytes));
        json_object_object_add(o, "out_of_sync_bytes",
                               json_object_new_uint64(l->out_of_sync_bytes));
        json_object_object_add(o, "sync_total_bytes", json_object_new_uint64(l->sync_total_bytes));
        json_object_object_add(o, "sync_done_bytes", json_object_new_uint64(l->sync_done_bytes));
        json_object_object_add(o, "sync_percent", json_object_new_double(sync_percent(l)));
        json_object_object_add(o, "sync_rate_bps", json_object_new_uint64(l->sync_rate_bps));
        json_object_object_add(o, "sync_eta_s", json_object_new_uint64(l->sync_eta_s));
        json_object_object_add(o, "sync_paused", json_object_new_boolean(l->sync_paused));
        json_object_object_add(o, "verify_oos_bytes", json_object_new_uint64(l->verify_oos_bytes));
        json_object_object_add(o, "split_brain", json_object_new_boolean(l->split_brain));
        json_object_object_add(o, "last_error", jstr(l->last_error));
        gen_hex(hex, sizeof(hex), l->gen_current);
        json_object_object_add(o, "gen_current", jstr(hex));
        gen_hex(hex, sizeof(hex), l->gen_bitmap);
        json_object_object_add(o, "gen_bitmap", jstr(hex));
        json_object *h = json_object_new_array();
        for (size_t i = 0; i < l->n_gen_history; i++) {
                gen_hex(hex, sizeof(hex), l->gen_history[i]);
                json_object_array_add(h, jstr(hex));
        }
        json_object_object_add(o, "gen_history", h);
        json_object_object_add(o, "writes_replicated",
                               json_object_new_uint64(l->writes_replicated));
        json_object_object_add(o, "resync_bytes_sent",
                               json_object_new_uint64(l->resync_bytes_sent));
        json_object_object_add(o, "resync_bytes_received",
                               json_object_new_uint64(l->resync_bytes_received));
        return o;
}

static json_object *repl_luns_json(const Tandem__Admin__ReplStatus *s)
{
        json_object *luns = json_object_new_array();
        for (size_t i = 0; s && i < s->n_luns; i++)
                json_object_array_add(luns, repl_lun_json(s->luns[i]));
        return luns;
}

/* {"luns": [ {...}, ... ]}: the shape scripts parse (tests/ use jq on it). */
static json_object *repl_status_json(const Tandem__Admin__ReplStatus *s)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "luns", repl_luns_json(s));
        return o;
}

static void repl_lun_text(FILE *out, const Tandem__Admin__ReplLunStatus *l)
{
        char oos[32], done[32], rate[32], eta[32];
        fprintf(out, "%s lun %u  naa %s  role:%s  disk:%s\n", l->iqn, l->lun, l->naa, l->role,
                l->disk);
        fprintf(out, "  peer %u (%s) %s  connection:%s  peer-disk:%s\n", l->peer_node_id,
                l->peer_name, l->peer_address, l->connection, l->peer_disk);
        human_size(oos, sizeof(oos), l->out_of_sync_bytes);
        fprintf(out, "  out-of-sync: %s", oos);
        if (conn_is(l, "Sync") || conn_is(l, "Verify")) {
                human_size(rate, sizeof(rate), l->sync_rate_bps);
                duration_text(eta, sizeof(eta), l->sync_eta_s);
                fprintf(out, "  %s: %.1f%% %s/s eta %s%s", conn_is(l, "Sync") ? "resync" : "verify",
                        sync_percent(l), rate, eta, l->sync_paused ? " [paused]" : "");
        }
        if (l->verify_oos_bytes) {
                human_size(done, sizeof(done), l->verify_oos_bytes);
                fprintf(out, "  verify found: %s", done);
        }
        fputc('\n', out);
        char cur[20], bm[20], h0[20], h1[20];
        gen_hex(cur, sizeof(cur), l->gen_current);
        gen_hex(bm, sizeof(bm), l->gen_bitmap);
        gen_hex(h0, sizeof(h0), l->n_gen_history > 0 ? l->gen_history[0] : 0);
        gen_hex(h1, sizeof(h1), l->n_gen_history > 1 ? l->gen_history[1] : 0);
        fprintf(out, "  generations: current %s bitmap %s history %s %s\n", cur, bm, h0, h1);
        if (l->split_brain)
                fprintf(out,
                        "  SPLIT BRAIN: both nodes changed data while apart; run `tandemctl repl "
                        "resolve-split-brain %s %u` on the node whose changes are to be "
                        "discarded\n",
                        l->iqn, l->lun);
        if (l->last_error && *l->last_error)
                fprintf(out, "  last error: %s\n", l->last_error);
}

static void repl_status_text(FILE *out, const Tandem__Admin__ReplStatus *s)
{
        if (s->n_luns == 0) {
                fprintf(out, "no replicated LUNs\n");
                return;
        }
        for (size_t i = 0; i < s->n_luns; i++) {
                if (i)
                        fputc('\n', out);
                repl_lun_text(out, s->luns[i]);
        }
}

/* One line per replicated LUN under `tandemctl status`. */
static void repl_summary_text(FILE *out, const Tandem__Admin__ReplStatus *s)
{
        if (!s || s->n_luns == 0)
                return;
        fprintf(out, "\nreplication:\n");
        for (size_t i = 0; i < s->n_luns; i++) {
                const Tandem__Admin__ReplLunStatus *l = s->luns[i];
                fprintf(out, "  %s lun %u  role:%s  disk:%s  connection:%s  peer-disk:%s%s\n",
                        l->iqn, l->lun, l->role, l->disk, l->connection, l->peer_disk,
                        l->split_brain ? "  SPLIT BRAIN" : "");
        }
}

static void repl_done_text(FILE *out, const Tandem__Admin__AdminRequest *q)
{
        const char *iqn = NULL, *what = NULL;
        uint32_t lun = 0;
        switch (q->op_case) {
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_PROMOTE:
                iqn = q->repl_promote->iqn;
                lun = q->repl_promote->lun;
                what = q->repl_promote->force
                           ? "is now Primary (forced: this node's data is the truth)"
                           : "is now Primary";
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_VERIFY:
                iqn = q->repl_verify->iqn;
                lun = q->repl_verify->lun;
                what = q->repl_verify->resync
                           ? "verify started; blocks found out of sync will be resynced"
                           : "verify started (`tandemctl repl status` shows progress)";
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESYNC_PAUSE:
                iqn = q->repl_resync_pause->iqn;
                lun = q->repl_resync_pause->lun;
                what = q->repl_resync_pause->pause ? "resync paused" : "resync resumed";
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE:
                iqn = q->repl_demote->iqn;
                lun = q->repl_demote->lun;
                what = "is now Secondary";
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT:
                iqn = q->repl_connect->iqn;
                lun = q->repl_connect->lun;
                what = "connecting to the peer";
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT:
                iqn = q->repl_disconnect->iqn;
                lun = q->repl_disconnect->lun;
                what = "disconnected (StandAlone)";
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE:
                iqn = q->repl_invalidate->iqn;
                lun = q->repl_invalidate->lun;
                what = "local data invalidated; the whole LUN is resynced from the peer";
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN:
                iqn = q->repl_resolve_split_brain->iqn;
                lun = q->repl_resolve_split_brain->lun;
                what = "this node's changes since the split will be discarded (SyncTarget at "
                       "the next connect)";
                break;
        default:
                iqn = q->repl_skip_initial_sync->iqn;
                lun = q->repl_skip_initial_sync->lun;
                what = "initial sync skipped; both disks UpToDate";
                break;
        }
        fprintf(out, "LUN %u of %s: %s\n", lun, iqn, what);
}

/* ---------------------------------------------------------------- print */

static void done_text(FILE *out, const Tandem__Admin__AdminRequest *q)
{
        switch (q->op_case) {
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_ADD:
                fprintf(out, "target %s added\n", q->target_add->iqn);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_DEL:
                fprintf(out, "target %s deleted\n", q->target_del->iqn);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_ADD:
                fprintf(out, "LUN %u of %s added (%s)\n", q->lun_add->lun, q->lun_add->iqn,
                        q->lun_add->path);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_DEL:
                fprintf(out, "LUN %u of %s deleted\n", q->lun_del->lun, q->lun_del->iqn);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_ADD:
                fprintf(out, "%s may log in to %s\n", q->acl_add->initiator, q->acl_add->iqn);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_DEL:
                fprintf(out, "%s removed from the ACL of %s\n", q->acl_del->initiator,
                        q->acl_del->iqn);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_CHAP_SET: {
                const Tandem__Admin__ChapSet *c = q->chap_set;
                const char *what = c->discovery ? "discovery" : c->iqn;
                if (c->user && *c->user)
                        fprintf(out, "CHAP for %s set (user %s%s)\n", what, c->user,
                                c->mutual_user && *c->mutual_user ? ", mutual" : "");
                else
                        fprintf(out, "CHAP for %s cleared\n", what);
                break;
        }
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_PROMOTE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_VERIFY:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESYNC_PAUSE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_SKIP_INITIAL_SYNC:
                repl_done_text(out, q);
                break;
        default:
                fprintf(out, "ok\n");
                break;
        }
}

static void resized_text(FILE *out, const Tandem__Admin__LunResize *q,
                         const Tandem__Admin__LunResized *d)
{
        char from[32], to[32];
        human_size(from, sizeof(from), d->old_size);
        human_size(to, sizeof(to), d->new_size);
        if (d->old_size == d->new_size)
                fprintf(out, "LUN %u of %s unchanged: %s (%" PRIu64 " bytes)\n", q->lun, q->iqn, to,
                        d->new_size);
        else
                fprintf(out,
                        "LUN %u of %s resized from %s to %s (%" PRIu64
                        " bytes); initiators are told the capacity changed\n",
                        q->lun, q->iqn, from, to, d->new_size);
}

static json_object *resized_json(const Tandem__Admin__LunResized *d)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "ok", json_object_new_boolean(true));
        json_object_object_add(o, "old_size", json_object_new_uint64(d->old_size));
        json_object_object_add(o, "new_size", json_object_new_uint64(d->new_size));
        json_object_object_add(o, "changed", json_object_new_boolean(d->old_size != d->new_size));
        return o;
}

int admin_ctl_print(FILE *out, const struct admin_ctl *ctl, const Tandem__Admin__AdminResponse *r)
{
        if (!r->ok)
                return -EIO;
        const Tandem__Admin__AdminRequest *q = &ctl->req;
        if (q->op_case == TANDEM__ADMIN__ADMIN_REQUEST__OP_STATUS && r->status) {
                if (ctl->json) {
                        json_object *o = status_json(r->status);
                        json_object_object_add(o, "replication", repl_luns_json(r->repl_status));
                        print_json(out, o);
                } else {
                        status_text(out, r->status);
                        repl_summary_text(out, r->repl_status);
                }
        } else if (q->op_case == TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_STATUS) {
                static const Tandem__Admin__ReplStatus none = TANDEM__ADMIN__REPL_STATUS__INIT;
                const Tandem__Admin__ReplStatus *rs = r->repl_status ? r->repl_status : &none;
                if (ctl->json)
                        print_json(out, repl_status_json(rs));
                else
                        repl_status_text(out, rs);
        } else if (q->op_case == TANDEM__ADMIN__ADMIN_REQUEST__OP_STATS && r->stats) {
                if (ctl->json)
                        print_json(out, stats_json(r->stats));
                else
                        stats_text(out, r->stats);
        } else if (q->op_case == TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_RESIZE && r->lun_resized) {
                if (ctl->json)
                        print_json(out, resized_json(r->lun_resized));
                else
                        resized_text(out, q->lun_resize, r->lun_resized);
        } else if (ctl->json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "ok", json_object_new_boolean(true));
                print_json(out, o);
        } else {
                done_text(out, q);
        }
        return 0;
}
