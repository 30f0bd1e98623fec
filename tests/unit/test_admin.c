/*
 * Unit tests of the admin plane: tandemctl argument parsing and output (daemon/admin/ctl.c),
 * the request dispatcher, and the libqb IPC service end to end (daemon/admin/ipc.c,
 * client.c) against a live registry.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tandem/admin_ipc.h"
#include "tandem/registry.h"
#include "tandem/repl.h"

#define IQN1 "iqn.2024-01.org.example:t1"
#define INI1 "iqn.1993-08.org.debian:01:client1"

/* ---------------------------------------------------------------- ctl parsing */

static int parse(struct cli *ctl, char *err, size_t errlen, ...)
{
        char *argv[32] = {"tandemctl"};
        int argc = 1;
        va_list ap;
        va_start(ap, errlen);
        for (char *a; (a = va_arg(ap, char *));)
                argv[argc++] = a;
        va_end(ap);
        err[0] = '\0';
        return cli_parse(ctl, argc, argv, err, errlen);
}

START_TEST(test_ctl_parse_ok)
{
        struct cli c;
        char err[512];
        ck_assert_int_eq(parse(&c, err, sizeof(err), "target", "add", IQN1, NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_ADD);
        ck_assert_str_eq(c.call.req.target_add->iqn, IQN1);
        ck_assert_str_eq(c.instance, "default");
        ck_assert_int_eq(c.call.req.version, TANDEM__ADMIN__PROTOCOL_VERSION__PROTOCOL_VERSION_1);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "--instance", "node-b", "lun", "add", IQN1,
                               "3", "/srv/d.img", "--size", "10G", "--thin", NULL),
                         0);
        ck_assert_str_eq(c.instance, "node-b");
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_ADD);
        ck_assert_uint_eq(c.call.req.lun_add->lun, 3);
        ck_assert_str_eq(c.call.req.lun_add->path, "/srv/d.img");
        ck_assert_uint_eq(c.call.req.lun_add->size, 10ull << 30);
        ck_assert(c.call.req.lun_add->thin);
        ck_assert(!c.call.req.lun_add->direct);

        /* Relative paths are taken from the current directory. */
        char cwd[PATH_MAX], want[PATH_MAX + 16];
        ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
        snprintf(want, sizeof(want), "%s/d.img", cwd);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "--instance=x", "lun", "add", IQN1, "0",
                               "d.img", "--block-size", "4096", "--size=8K", "--direct", NULL),
                         0);
        ck_assert_str_eq(c.call.req.lun_add->path, want);
        ck_assert_uint_eq(c.call.req.lun_add->block_size, 4096);
        ck_assert(c.call.req.lun_add->direct);
        ck_assert(!c.call.req.lun_add->readonly);
        ck_assert_str_eq(c.instance, "x");
        ck_assert_int_eq(
            parse(&c, err, sizeof(err), "lun", "add", IQN1, "4", "/srv/g.img", "--readonly", NULL),
            0);
        ck_assert(c.call.req.lun_add->readonly);
        ck_assert_uint_eq(c.call.req.lun_add->size, 0);
        ck_assert_uint_eq(c.call.req.lun_add->physical_block_size, 0); /* not given: block size */
        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "add", IQN1, "5", "/srv/e.img",
                               "--physical-block-size", "4K", NULL),
                         0);
        ck_assert_uint_eq(c.call.req.lun_add->physical_block_size, 4096);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "add", IQN1, "5", "/srv/e.img",
                               "--block-size", "4096", "--physical-block-size=65536", NULL),
                         0);
        ck_assert_uint_eq(c.call.req.lun_add->block_size, 4096);
        ck_assert_uint_eq(c.call.req.lun_add->physical_block_size, 65536);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "resize", IQN1, "3", "20G", NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_RESIZE);
        ck_assert_str_eq(c.call.req.lun_resize->iqn, IQN1);
        ck_assert_uint_eq(c.call.req.lun_resize->lun, 3);
        ck_assert_uint_eq(c.call.req.lun_resize->size, 20ull << 30);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "resize", IQN1, "7", NULL), 0);
        ck_assert_uint_eq(c.call.req.lun_resize->lun, 7);
        ck_assert_uint_eq(c.call.req.lun_resize->size, 0); /* block device: re-read its size */
        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "resize", "--help", NULL), 0);
        ck_assert(c.help);
        ck_assert_str_eq(c.topic, "lun");
        char *usage = NULL;
        size_t usage_len = 0;
        FILE *uf = open_memstream(&usage, &usage_len);
        cli_usage(uf, "lun");
        fclose(uf);
        ck_assert_ptr_nonnull(strstr(usage, "  lun resize IQN LUN [SIZE]"));
        ck_assert_ptr_nonnull(strstr(usage, "Shrinking is refused"));
        ck_assert_ptr_null(strstr(usage, "chap set"));
        free(usage);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "acl", "add", IQN1, "ALL", NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_ADD);
        ck_assert_str_eq(c.call.req.acl_add->initiator, "ALL");
        ck_assert_int_eq(parse(&c, err, sizeof(err), "acl", "del", IQN1, INI1, NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_DEL);
        ck_assert_str_eq(c.call.req.acl_del->iqn, IQN1);
        ck_assert_str_eq(c.call.req.acl_del->initiator, INI1);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "chap", "set", IQN1, "alice", "alice-secret-1",
                               "--mutual", "tgt", "target-secret-1", NULL),
                         0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_CHAP_SET);
        ck_assert_str_eq(c.call.req.chap_set->iqn, IQN1);
        ck_assert(!c.call.req.chap_set->discovery);
        ck_assert_str_eq(c.call.req.chap_set->user, "alice");
        ck_assert_str_eq(c.call.req.chap_set->mutual_secret, "target-secret-1");
        ck_assert_int_eq(
            parse(&c, err, sizeof(err), "chap", "set", "--discovery", "d", "disco-secret-1", NULL),
            0);
        ck_assert(c.call.req.chap_set->discovery);
        ck_assert_str_eq(c.call.req.chap_set->user, "d");
        ck_assert_int_eq(parse(&c, err, sizeof(err), "chap", "clear", IQN1, NULL), 0);
        ck_assert_str_eq(c.call.req.chap_set->user, "");

        ck_assert_int_eq(parse(&c, err, sizeof(err), "status", "--json", NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_STATUS);
        ck_assert(c.json);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "stats", NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_STATS);
        ck_assert(!c.json);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "--help", NULL), 0);
        ck_assert(c.help);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "add", "--help", NULL), 0);
        ck_assert(c.help);
        ck_assert_str_eq(c.topic, "lun");
        ck_assert_int_eq(parse(&c, err, sizeof(err), "help", "chap", NULL), 0);
        ck_assert(c.help);
        ck_assert_str_eq(c.topic, "chap");
}
END_TEST

START_TEST(test_ctl_parse_repl)
{
        struct cli c;
        char err[512];
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_STATUS);
        ck_assert_str_eq(c.call.req.repl_status->iqn, ""); /* every replicated LUN */
        ck_assert(!c.json);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", IQN1, "4", "--json", NULL),
                         0);
        ck_assert_str_eq(c.call.req.repl_status->iqn, IQN1);
        ck_assert_uint_eq(c.call.req.repl_status->lun, 4);
        ck_assert(c.json);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "promote", IQN1, "1", NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_PROMOTE);
        ck_assert_str_eq(c.call.req.repl_promote->iqn, IQN1);
        ck_assert_uint_eq(c.call.req.repl_promote->lun, 1);
        ck_assert(!c.call.req.repl_promote->force);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "promote", "--force", IQN1, "2", NULL),
                         0);
        ck_assert(c.call.req.repl_promote->force);
        ck_assert_uint_eq(c.call.req.repl_promote->lun, 2);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "verify", IQN1, "0", NULL), 0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_VERIFY);
        ck_assert(!c.call.req.repl_verify->resync);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "verify", IQN1, "0", "--resync", NULL),
                         0);
        ck_assert(c.call.req.repl_verify->resync);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "resync", "pause", IQN1, "3", NULL),
                         0);
        ck_assert_int_eq(c.call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESYNC_PAUSE);
        ck_assert(c.call.req.repl_resync_pause->pause);
        ck_assert_uint_eq(c.call.req.repl_resync_pause->lun, 3);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "resync", "resume", IQN1, "3", NULL),
                         0);
        ck_assert(!c.call.req.repl_resync_pause->pause);

        /* The commands that carry only IQN LUN, each in its own oneof member. */
        static const struct {
                const char *sub;
                Tandem__Admin__AdminRequest__OpCase op;
        } plain[] = {
            {"demote", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE},
            {"connect", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT},
            {"disconnect", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT},
            {"invalidate", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE},
            {"resolve-split-brain", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN},
            {"skip-initial-sync", TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_SKIP_INITIAL_SYNC},
        };
        for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
                ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", plain[i].sub, IQN1, "7", NULL),
                                 0);
                ck_assert_int_eq(c.call.req.op_case, plain[i].op);
                /* What goes over the wire decodes to the same operation and LUN. */
                size_t n = tandem__admin__admin_request__get_packed_size(&c.call.req);
                uint8_t *buf = malloc(n);
                tandem__admin__admin_request__pack(&c.call.req, buf);
                Tandem__Admin__AdminRequest *q = tandem__admin__admin_request__unpack(NULL, n, buf);
                ck_assert_ptr_nonnull(q);
                ck_assert_int_eq(q->op_case, plain[i].op);
                /* The oneof is a union: every ReplLun member is the same pointer. */
                const Tandem__Admin__ReplLun *l = q->repl_demote;
                ck_assert_str_eq(l->iqn, IQN1);
                ck_assert_uint_eq(l->lun, 7);
                tandem__admin__admin_request__free_unpacked(q, NULL);
                free(buf);
        }

        /* repl --help documents each command and the risks. */
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "--help", NULL), 0);
        ck_assert(c.help);
        ck_assert_str_eq(c.topic, "repl");
        char *usage = NULL;
        size_t usage_len = 0;
        FILE *uf = open_memstream(&usage, &usage_len);
        cli_usage(uf, "repl");
        fclose(uf);
        ck_assert_ptr_nonnull(strstr(usage, "  repl promote IQN LUN [--force]"));
        ck_assert_ptr_nonnull(strstr(usage, "  repl resync pause|resume IQN LUN"));
        ck_assert_ptr_nonnull(strstr(usage, "whatever the peer wrote that this node lacks\n"
                                            "               is lost when they resync"));
        ck_assert_ptr_nonnull(strstr(usage, "brand-new LUN pair whose disks are known to be "
                                            "identical"));
        ck_assert_ptr_nonnull(strstr(usage, "DISCARDED"));
        ck_assert_ptr_null(strstr(usage, "chap set"));
        free(usage);
}
END_TEST

static const struct {
        const char *argv[10];
        const char *err;
} bad_args[] = {
    {{NULL}, "missing COMMAND"},
    {{"frobnicate"}, "unknown command \"frobnicate\""},
    {{"--bogus", "status"}, "unknown option \"--bogus\""},
    {{"--instance"}, "instance: --instance needs a NAME"},
    {{"--instance", "a/b", "status"}, "instance: must be 1..63 characters"},
    {{"target"}, "target: missing add|del"},
    {{"target", "remove", IQN1}, "target: unknown subcommand \"remove\" (add|del)"},
    {{"target", "add"}, "target add: missing IQN"},
    {{"target", "add", IQN1, "extra"}, "target add: unexpected argument \"extra\""},
    {{"target", "add", "disk1"}, "iqn: \"disk1\" is not an iSCSI name"},
    {{"target", "add", IQN1, "--thin"}, "target add: --thin does not apply here"},
    {{"lun", "add", IQN1, "x", "/a"}, "lun: must be 0..255, got \"x\""},
    {{"lun", "add", IQN1, "256", "/a"}, "lun: must be 0..255, got \"256\""},
    {{"lun", "add", IQN1, "-1", "/a"}, "lun add: unknown option \"-1\""},
    {{"lun", "add", IQN1, "1"}, "lun add: missing IQN LUN PATH"},
    {{"lun", "add", IQN1, "1", "/a", "--size"}, "lun add: --size needs a value"},
    {{"lun", "add", IQN1, "1", "/a", "--size", "ten"},
     "size: must be a positive number of bytes with an optional unit"},
    {{"lun", "add", IQN1, "1", "/a", "--size", "0"}, "size: must be a positive number"},
    {{"lun", "add", IQN1, "1", "/a", "--size", "1000"},
     "size: must be a positive multiple of 512, got \"1000\""},
    {{"lun", "add", IQN1, "1", "/a", "--block-size", "4096", "--size", "6K"},
     "size: must be a positive multiple of 4096"},
    {{"lun", "add", IQN1, "1", "/a", "--block-size", "520"},
     "block-size: must be 512, 1024, 2048 or 4096, got \"520\""},
    {{"lun", "add", IQN1, "1", "/a", "--physical-block-size", "1536"},
     "physical-block-size: must be block_size (512) times a power of two, at most 65536, got "
     "1536"},
    {{"lun", "add", IQN1, "1", "/a", "--block-size", "4096", "--physical-block-size", "2048"},
     "physical-block-size: must be block_size (4096) times a power of two"},
    {{"lun", "add", IQN1, "1", "/a", "--physical-block-size", "128K"},
     "physical-block-size: must be block-size (512) times a power of two, at most 65536, got "
     "\"128K\""},
    {{"lun", "add", IQN1, "1", "/a", "--physical-block-size", "0"},
     "physical-block-size: must be block-size (512) times a power of two"},
    {{"lun", "add", IQN1, "1", "/a", "--physical-block-size"},
     "lun add: --physical-block-size needs a value"},
    {{"target", "add", IQN1, "--physical-block-size", "4096"},
     "target add: --physical-block-size does not apply here"},
    {{"lun", "add", IQN1, "1", "/a", "--mutual", "u", "s"}, "lun add: --mutual does not apply"},
    {{"lun", "add", IQN1, "1", "/a", "--readonly", "--size", "1M"},
     "lun add: --readonly and --size do not go together"},
    {{"target", "add", IQN1, "--readonly"}, "target add: --readonly does not apply here"},
    {{"lun", "del", IQN1, "07x"}, "lun: must be 0..255, got \"07x\""},
    {{"lun"}, "lun: missing add|del|resize"},
    {{"lun", "grow", IQN1, "0", "1G"}, "lun: unknown subcommand \"grow\" (add|del|resize)"},
    {{"lun", "resize", IQN1}, "lun resize: missing IQN LUN"},
    {{"lun", "resize", IQN1, "0", "1G", "x"}, "lun resize: unexpected argument \"x\""},
    {{"lun", "resize", IQN1, "0", "ten"},
     "size: must be a positive number of bytes with an optional unit"},
    {{"lun", "resize", IQN1, "0", "0"}, "size: must be a positive number"},
    {{"lun", "resize", IQN1, "0", "99999999P"}, "size: too large, got \"99999999P\""},
    {{"lun", "resize", IQN1, "0", "--size", "1G"}, "lun resize: --size does not apply here"},
    {{"lun", "resize", IQN1, "256", "1G"}, "lun: must be 0..255, got \"256\""},
    {{"lun", "resize", "disk1", "0", "1G"}, "iqn: \"disk1\" is not an iSCSI name"},
    {{"acl", "add", IQN1, "bob"}, "initiator: \"bob\" is neither ALL nor an iSCSI name"},
    {{"acl", "add", IQN1}, "acl add: missing IQN INITIATOR_IQN"},
    {{"chap", "set", IQN1, "alice", "short"}, "secret: must be 12..255 printable characters"},
    {{"chap", "set", IQN1, "alice"}, "chap set: missing USER SECRET"},
    {{"chap", "set"}, "chap set: missing IQN (or --discovery)"},
    {{"chap", "set", IQN1, "alice", "alice-secret-1", "--mutual", "t", "alice-secret-1"},
     "mutual_secret: must differ from the secret"},
    {{"chap", "set", IQN1, "alice", "alice-secret-1", "--mutual", "t"},
     "chap set: --mutual needs USER and SECRET"},
    {{"status", "now"}, "status: unexpected argument \"now\""},
    {{"stats", "bad-iqn"}, "iqn: \"bad-iqn\" is not an iSCSI name"},
    {{"repl"},
     "repl: missing status|promote|demote|connect|disconnect|verify|resync|invalidate|"
     "resolve-split-brain|skip-initial-sync"},
    {{"repl", "failover", IQN1, "0"}, "repl: unknown subcommand \"failover\""},
    {{"repl", "status", IQN1}, "repl status: missing LUN (give IQN and LUN, or neither)"},
    {{"repl", "status", IQN1, "0", "x"}, "repl status: unexpected argument \"x\""},
    {{"repl", "status", "disk1", "0"}, "iqn: \"disk1\" is not an iSCSI name"},
    {{"repl", "status", "--force"}, "repl status: --force does not apply here"},
    {{"repl", "promote", IQN1}, "repl promote: missing IQN LUN"},
    {{"repl", "promote", IQN1, "300"}, "lun: must be 0..255, got \"300\""},
    {{"repl", "promote", IQN1, "0", "--resync"}, "repl promote: --resync does not apply here"},
    {{"repl", "demote", IQN1, "0", "--force"}, "repl demote: --force does not apply here"},
    {{"repl", "connect", "bogus", "0"}, "iqn: \"bogus\" is not an iSCSI name"},
    {{"repl", "disconnect", IQN1, "0", "1"}, "repl disconnect: unexpected argument \"1\""},
    {{"repl", "verify", IQN1, "0", "--force"}, "repl verify: --force does not apply here"},
    {{"repl", "resync", IQN1, "0"}, "repl resync: must be pause or resume, got \"" IQN1 "\""},
    {{"repl", "resync"}, "repl resync: missing pause|resume"},
    {{"repl", "resync", "pause", IQN1}, "repl resync: missing IQN LUN"},
    {{"repl", "invalidate", IQN1, "x"}, "lun: must be 0..255, got \"x\""},
    {{"repl", "resolve-split-brain", IQN1}, "repl resolve-split-brain: missing IQN LUN"},
    {{"repl", "skip-initial-sync", IQN1, "0", "--thin"},
     "repl skip-initial-sync: --thin does not apply here"},
};

START_TEST(test_ctl_parse_errors)
{
        char *argv[12] = {"tandemctl"};
        int argc = 1;
        for (int i = 0; bad_args[_i].argv[i]; i++)
                argv[argc++] = (char *)bad_args[_i].argv[i];
        struct cli c;
        char err[512] = "";
        int rc = cli_parse(&c, argc, argv, err, sizeof(err));
        ck_assert_msg(rc == -EINVAL, "case %d accepted", _i);
        ck_assert_msg(strncmp(err, bad_args[_i].err, strlen(bad_args[_i].err)) == 0,
                      "case %d: got \"%s\", want \"%s...\"", _i, err, bad_args[_i].err);
}
END_TEST

/* ---------------------------------------------------------------- repl status output */

static void sample_status(struct repl_status *st)
{
        memset(st, 0, sizeof(*st));
        snprintf(st->iqn, sizeof(st->iqn), "%s", IQN1);
        st->lun = 3;
        snprintf(st->naa, sizeof(st->naa), "67a6e640c3f1a2b4d5e6f708192a3b4c");
        st->role = REPL_ROLE_PRIMARY;
        st->disk = REPL_DISK_UPTODATE;
        st->peer_disk = REPL_DISK_INCONSISTENT;
        st->conn = REPL_CONN_SYNC_SOURCE;
        st->node_id = 1;
        st->peer_node_id = 2;
        snprintf(st->peer_name, sizeof(st->peer_name), "beta");
        snprintf(st->peer_address, sizeof(st->peer_address), "10.0.0.2:7789");
        st->size_bytes = 1ull << 30;
        st->out_of_sync_bytes = 12ull << 20;
        st->sync_total_bytes = 80ull << 20;
        st->sync_done_bytes = 30ull << 20;
        st->sync_rate_bps = 40ull << 20;
        st->sync_eta_s = 125;
        st->sync_paused = true;
        st->verify_oos_bytes = 0;
        snprintf(st->last_error, sizeof(st->last_error), "peer closed the connection");
        st->gen_current = 0x8A3F000000000001ull;
        st->gen_bitmap = 0x1234;
        st->gen_history[0] = 0xABCDEF0123456789ull;
        st->gen_history[1] = 0;
        st->writes_replicated = 5000000000ull;
        st->resync_bytes_sent = 30ull << 20;
        st->resync_bytes_received = 7;
}

/* The response as tandemctl receives it: packed by the daemon side, unpacked here. */
static Tandem__Admin__AdminResponse *repl_response(const struct repl_status *st, bool with_status)
{
        Tandem__Admin__ReplLunStatus m;
        admin_repl_status_to_pb(st, &m);
        Tandem__Admin__ReplLunStatus *rows[] = {&m};
        Tandem__Admin__ReplStatus rs = TANDEM__ADMIN__REPL_STATUS__INIT;
        rs.luns = rows;
        rs.n_luns = 1;
        Tandem__Admin__Status status = TANDEM__ADMIN__STATUS__INIT;
        status.instance = "default";
        status.version = "0.1.0";
        Tandem__Admin__AdminResponse r = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
        r.ok = true;
        r.repl_status = &rs;
        if (with_status)
                r.status = &status;
        size_t n = tandem__admin__admin_response__get_packed_size(&r);
        uint8_t *buf = malloc(n);
        ck_assert_ptr_nonnull(buf);
        tandem__admin__admin_response__pack(&r, buf);
        Tandem__Admin__AdminResponse *out = tandem__admin__admin_response__unpack(NULL, n, buf);
        free(buf);
        ck_assert_ptr_nonnull(out);
        return out;
}

static char *print_response(struct cli *c, const Tandem__Admin__AdminResponse *r)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        ck_assert_int_eq(admin_print(f, &c->call, r, c->json), 0);
        fclose(f);
        return text;
}

START_TEST(test_repl_status_output)
{
        struct repl_status st;
        sample_status(&st);
        Tandem__Admin__AdminResponse *r = repl_response(&st, false);
        struct cli c;
        char err[512];

        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", NULL), 0);
        char *text = print_response(&c, r);
        ck_assert_msg(strstr(text, IQN1 " lun 3  naa 67a6e640c3f1a2b4d5e6f708192a3b4c  "
                                        "role:Primary  disk:UpToDate\n"),
                      "%s", text);
        ck_assert_msg(strstr(text, "  peer 2 (beta) 10.0.0.2:7789  connection:SyncSource  "
                                   "peer-disk:Inconsistent\n"),
                      "%s", text);
        ck_assert_msg(strstr(text, "  out-of-sync: 12.0 MiB  resync: 37.5% 40.0 MiB/s eta "
                                   "2m05s [paused]\n"),
                      "%s", text);
        ck_assert_msg(strstr(text, "  generations: current 8A3F000000000001 bitmap "
                                   "0000000000001234 history ABCDEF0123456789 "
                                   "0000000000000000\n"),
                      "%s", text);
        ck_assert_msg(strstr(text, "  last error: peer closed the connection\n"), "%s", text);
        ck_assert_ptr_null(strstr(text, "SPLIT BRAIN"));
        free(text);

        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", "--json", NULL), 0);
        text = print_response(&c, r);
        json_object *o = json_tokener_parse(text);
        ck_assert_msg(o != NULL, "%s", text);
        json_object *luns, *l, *v;
        ck_assert(json_object_object_get_ex(o, "luns", &luns));
        ck_assert_int_eq(json_object_array_length(luns), 1);
        l = json_object_array_get_idx(luns, 0);
        static const struct {
                const char *key;
                const char *want; /* as JSON text */
        } keys[] = {
            {"iqn", "\"" IQN1 "\""},
            {"lun", "3"},
            {"naa", "\"67a6e640c3f1a2b4d5e6f708192a3b4c\""},
            {"role", "\"Primary\""},
            {"disk", "\"UpToDate\""},
            {"peer_disk", "\"Inconsistent\""},
            {"connection", "\"SyncSource\""},
            {"node_id", "1"},
            {"peer_node_id", "2"},
            {"peer_name", "\"beta\""},
            {"peer_address", "\"10.0.0.2:7789\""},
            {"size_bytes", "1073741824"},
            {"out_of_sync_bytes", "12582912"},
            {"sync_total_bytes", "83886080"},
            {"sync_done_bytes", "31457280"},
            {"sync_percent", "37.5"},
            {"sync_rate_bps", "41943040"},
            {"sync_eta_s", "125"},
            {"sync_paused", "true"},
            {"verify_oos_bytes", "0"},
            {"split_brain", "false"},
            {"last_error", "\"peer closed the connection\""},
            {"gen_current", "\"8A3F000000000001\""},
            {"gen_bitmap", "\"0000000000001234\""},
            {"gen_history", "[ \"ABCDEF0123456789\", \"0000000000000000\" ]"},
            {"writes_replicated", "5000000000"},
            {"resync_bytes_sent", "31457280"},
            {"resync_bytes_received", "7"},
        };
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                ck_assert_msg(json_object_object_get_ex(l, keys[i].key, &v), "no key %s",
                              keys[i].key);
                ck_assert_str_eq(json_object_to_json_string_ext(v, JSON_C_TO_STRING_SPACED),
                                 keys[i].want);
        }
        ck_assert_int_eq(json_object_object_length(l), (int)(sizeof(keys) / sizeof(keys[0])));
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* Split brain; nothing to resync on an UpToDate disk reads as 100 %. */
        sample_status(&st);
        st.conn = REPL_CONN_STANDALONE;
        st.split_brain = true;
        st.sync_total_bytes = st.sync_done_bytes = st.out_of_sync_bytes = 0;
        st.last_error[0] = '\0';
        r = repl_response(&st, false);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", NULL), 0);
        text = print_response(&c, r);
        ck_assert_msg(strstr(text, "  out-of-sync: 0 B\n"), "%s", text);
        ck_assert_msg(strstr(text, "SPLIT BRAIN: both nodes changed data while apart; run "
                                   "`tandemctl repl resolve-split-brain " IQN1 " 3` on the node "
                                   "whose changes are to be discarded"),
                      "%s", text);
        ck_assert_ptr_null(strstr(text, "last error"));
        free(text);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", "--json", NULL), 0);
        text = print_response(&c, r);
        ck_assert_msg(strstr(text, "\"sync_percent\":100"), "%s", text);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        st.disk = REPL_DISK_INCONSISTENT; /* never synced: not 100 % */
        r = repl_response(&st, false);
        text = print_response(&c, r);
        ck_assert_msg(strstr(text, "\"sync_percent\":0"), "%s", text);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        sample_status(&st);
        st.conn = REPL_CONN_VERIFY_SOURCE;
        st.sync_paused = false;
        st.verify_oos_bytes = 4096;
        r = repl_response(&st, false);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", NULL), 0);
        text = print_response(&c, r);
        ck_assert_msg(strstr(text, "verify: 37.5% 40.0 MiB/s eta 2m05s  verify found: 4.0 KiB\n"),
                      "%s", text);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* `tandemctl status`: one summary line per replicated LUN, "replication" in JSON. */
        sample_status(&st);
        r = repl_response(&st, true);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "status", NULL), 0);
        text = print_response(&c, r);
        ck_assert_msg(strstr(text, "\nreplication:\n  " IQN1 " lun 3  role:Primary  "
                                   "disk:UpToDate  connection:SyncSource  "
                                   "peer-disk:Inconsistent\n"),
                      "%s", text);
        free(text);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "status", "--json", NULL), 0);
        text = print_response(&c, r);
        o = json_tokener_parse(text);
        ck_assert_ptr_nonnull(o);
        ck_assert(json_object_object_get_ex(o, "replication", &luns));
        ck_assert_int_eq(json_object_array_length(luns), 1);
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(luns, 0), "role", &v));
        ck_assert_str_eq(json_object_get_string(v), "Primary");
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* No replicated LUN: the status stays as it was, repl status says so. */
        Tandem__Admin__AdminResponse empty = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
        empty.ok = true;
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", NULL), 0);
        text = print_response(&c, &empty);
        ck_assert_str_eq(text, "no replicated LUNs\n");
        free(text);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "repl", "status", "--json", NULL), 0);
        text = print_response(&c, &empty);
        o = json_tokener_parse(text);
        ck_assert(json_object_object_get_ex(o, "luns", &luns));
        ck_assert_int_eq(json_object_array_length(luns), 0);
        json_object_put(o);
        free(text);
}
END_TEST

/* ---------------------------------------------------------------- live service */

static char dir[64];
static char conf[PATH_MAX];
static char instance[64];
static qb_loop_t *loop;
static pthread_t loop_thread;
static int wake[2];

static int32_t on_wake(int32_t fd, int32_t revents, void *data)
{
        (void)fd;
        (void)revents;
        (void)data;
        qb_loop_stop(loop);
        return 0;
}

static void *run_loop(void *arg)
{
        (void)arg;
        qb_loop_run(loop);
        return NULL;
}

static void rm_tree(const char *d)
{
        DIR *dp = opendir(d);
        if (!dp)
                return;
        struct dirent *e;
        char p[PATH_MAX + 256];
        while ((e = readdir(dp))) {
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                        snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
                        unlink(p);
                }
        }
        closedir(dp);
        rmdir(d);
}

/* The service on a registry made from config text (where "@DIR@" is the test's directory). */
static void service_setup_with(const char *text)
{
        char err[512] = "";
        snprintf(dir, sizeof(dir), "/tmp/tandem-test-admin.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/tandem.conf", dir);
        snprintf(instance, sizeof(instance), "unit-%d", (int)getpid());
        char expanded[4096];
        size_t len = 0;
        for (const char *p = text; *p && len < sizeof(expanded) - 1;) {
                bool at = strncmp(p, "@DIR@", 5) == 0;
                const char *from = at ? dir : p;
                size_t n = at ? strlen(dir) : 1;
                ck_assert_uint_lt(len + n, sizeof(expanded));
                memcpy(expanded + len, from, n);
                len += n;
                p += at ? 5 : 1;
        }
        expanded[len] = '\0';
        struct tdm_config c;
        ck_assert_msg(tdm_config_parse_string(expanded, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_msg(tdm_registry_init(&c, conf, err, sizeof(err)) == 0, "%s", err);
        tdm_config_free(&c);
        loop = qb_loop_create();
        ck_assert_ptr_nonnull(loop);
        ck_assert_int_eq(admin_ipc_start(loop, instance), 0);
        ck_assert_int_eq(pipe(wake), 0);
        ck_assert_int_eq(qb_loop_poll_add(loop, QB_LOOP_HIGH, wake[0], POLLIN, NULL, on_wake), 0);
        ck_assert_int_eq(pthread_create(&loop_thread, NULL, run_loop, NULL), 0);
}

static void service_setup(void)
{
        service_setup_with("listen = [ \"127.0.0.1:3260\" ];");
}

/* LUN 0 replicated (node 1 of 2, the peer absent), LUN 1 not. */
static void repl_service_setup(void)
{
        service_setup_with("listen = [ \"127.0.0.1:3260\" ]; state_dir = \"@DIR@\"; node_id = 1;\n"
                           "targets = ({ iqn = \"" IQN1 "\"; luns = (\n"
                           "  { lun = 0; path = \"@DIR@/r0.img\"; size = \"1M\";\n"
                           "    naa = \"67a6e640c3f1a2b4d5e6f708192a3b4c\"; serial = \"r0\";\n"
                           "    replication = { secret = \"unit-test-secret\";\n"
                           "      nodes = ({ id = 1; address = \"127.0.0.1:17789\"; },\n"
                           "               { id = 2; address = \"127.0.0.1:17790\"; }); }; },\n"
                           "  { lun = 1; path = \"@DIR@/p1.img\"; size = \"1M\"; }); });");
}

static void service_teardown(void)
{
        ck_assert_int_eq(write(wake[1], "x", 1), 1);
        pthread_join(loop_thread, NULL);
        qb_loop_poll_del(loop, wake[0]);
        close(wake[0]);
        close(wake[1]);
        admin_ipc_stop();
        qb_loop_destroy(loop);
        tdm_registry_fini();
        rm_tree(dir);
}

/* Runs tandemctl's parse + call for argv; returns the response (caller frees). */
static Tandem__Admin__AdminResponse *ctl_call(struct cli *c, ...)
{
        char *argv[32] = {"tandemctl", "--instance", instance};
        int argc = 3;
        va_list ap;
        va_start(ap, c);
        for (char *a; (a = va_arg(ap, char *));)
                argv[argc++] = a;
        va_end(ap);
        char err[512] = "";
        ck_assert_msg(cli_parse(c, argc, argv, err, sizeof(err)) == 0, "%s", err);
        Tandem__Admin__AdminResponse *r = NULL;
        int rc = admin_client_call(c->instance, &c->call.req, &r, err, sizeof(err));
        ck_assert_msg(rc == 0, "call: %s", err);
        return r;
}

static void expect_ok(struct cli *c, Tandem__Admin__AdminResponse *r)
{
        ck_assert_msg(r->ok, "failed: %s", r->error);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        ck_assert_int_eq(admin_print(f, &c->call, r, c->json), 0);
        fclose(f);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
}

static char *print_to_string(struct cli *c, Tandem__Admin__AdminResponse *r)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        ck_assert_int_eq(admin_print(f, &c->call, r, c->json), 0);
        fclose(f);
        return text;
}

START_TEST(test_ipc_admin_round_trip)
{
        struct cli c;
        char size_path[PATH_MAX + 16];
        snprintf(size_path, sizeof(size_path), "%s/lun0.img", dir);
        expect_ok(&c, ctl_call(&c, "target", "add", IQN1, NULL));
        expect_ok(&c,
                  ctl_call(&c, "lun", "add", IQN1, "0", size_path, "--size", "4M", "--thin", NULL));
        expect_ok(&c, ctl_call(&c, "acl", "add", IQN1, INI1, NULL));
        expect_ok(&c, ctl_call(&c, "chap", "set", IQN1, "alice", "alice-secret-1", "--mutual",
                               "tgt", "target-secret-1", NULL));
        expect_ok(&c, ctl_call(&c, "chap", "set", "--discovery", "disco", "disco-secret-1", NULL));

        /* The changes are live ... */
        struct scsi_target *t;
        struct tdm_auth auth;
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), 0);
        ck_assert_str_eq(auth.chap.user, "alice");
        struct scsi_lun *lun = scsi_target_get_lun(t, 0);
        ck_assert_ptr_nonnull(lun);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 8192);
        scsi_lun_put(lun);
        scsi_target_put(t);
        /* ... and saved. */
        struct tdm_config saved;
        char err[512];
        ck_assert_int_eq(tdm_config_load(conf, &saved, err, sizeof(err)), 0);
        ck_assert_uint_eq(saved.n_targets, 1);
        ck_assert_uint_eq(saved.targets[0].n_luns, 1);
        ck_assert_str_eq(saved.discovery_chap.user, "disco");

        /* status --json carries what the registry has. */
        Tandem__Admin__AdminResponse *r = ctl_call(&c, "status", "--json", NULL);
        ck_assert(r->ok);
        ck_assert_ptr_nonnull(r->status);
        char *text = print_to_string(&c, r);
        json_object *o = json_tokener_parse(text);
        ck_assert_ptr_nonnull(o);
        json_object *v, *targets, *luns;
        ck_assert(json_object_object_get_ex(o, "instance", &v));
        ck_assert_str_eq(json_object_get_string(v), instance);
        ck_assert(json_object_object_get_ex(o, "config_path", &v));
        ck_assert_str_eq(json_object_get_string(v), conf);
        ck_assert(json_object_object_get_ex(o, "targets", &targets));
        ck_assert_int_eq(json_object_array_length(targets), 1);
        json_object *t0 = json_object_array_get_idx(targets, 0);
        ck_assert(json_object_object_get_ex(t0, "iqn", &v));
        ck_assert_str_eq(json_object_get_string(v), IQN1);
        ck_assert(json_object_object_get_ex(t0, "mutual_chap", &v));
        ck_assert(json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(t0, "luns", &luns));
        json_object *l0 = json_object_array_get_idx(luns, 0);
        ck_assert(json_object_object_get_ex(l0, "size", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 4u << 20);
        ck_assert(json_object_object_get_ex(l0, "naa", &v));
        ck_assert_str_eq(json_object_get_string(v), saved.targets[0].luns[0].naa);
        ck_assert(json_object_object_get_ex(l0, "thin", &v));
        ck_assert(json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(l0, "online", &v));
        ck_assert(json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(o, "listen", &v));
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(v, 0)), "127.0.0.1:3260");
        /* Secrets never leave the daemon. */
        ck_assert_ptr_null(strstr(text, "secret"));
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* Human status names the target and the LUN. */
        r = ctl_call(&c, "status", NULL);
        text = print_to_string(&c, r);
        ck_assert_ptr_nonnull(strstr(text, "target " IQN1));
        ck_assert_ptr_nonnull(strstr(text, "lun 0  4.0 MiB"));
        ck_assert_ptr_nonnull(strstr(text, saved.targets[0].luns[0].naa));
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* stats: one LUN, a 24-bucket histogram. */
        r = ctl_call(&c, "stats", "--json", NULL);
        ck_assert(r->ok);
        ck_assert_uint_eq(r->stats->n_luns, 1);
        ck_assert_str_eq(r->stats->luns[0]->iqn, IQN1);
        ck_assert_uint_eq(r->stats->luns[0]->n_latency_hist_us, 24);
        ck_assert_uint_eq(r->stats->luns[0]->reads, 0);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        tdm_config_free(&saved);

        /* A read-only LUN on an existing file: live, saved and reported as such. */
        char ro_path[PATH_MAX + 16];
        snprintf(ro_path, sizeof(ro_path), "%s/golden.img", dir);
        FILE *f = fopen(ro_path, "w");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(ftruncate(fileno(f), 1 << 20), 0);
        fclose(f);
        expect_ok(&c, ctl_call(&c, "lun", "add", IQN1, "1", ro_path, "--readonly", NULL));
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), 0);
        lun = scsi_target_get_lun(t, 1);
        ck_assert_ptr_nonnull(lun);
        ck_assert(lun->read_only);
        scsi_lun_put(lun);
        scsi_target_put(t);
        r = ctl_call(&c, "status", "--json", NULL);
        text = print_to_string(&c, r);
        o = json_tokener_parse(text);
        ck_assert(json_object_object_get_ex(o, "targets", &targets));
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(targets, 0), "luns", &luns));
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(luns, 0), "readonly", &v));
        ck_assert(!json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(luns, 1), "readonly", &v));
        ck_assert(json_object_get_boolean(v));
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "status", NULL);
        text = print_to_string(&c, r);
        ck_assert_ptr_nonnull(strstr(text, "block 512  wce  readonly\n"));
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        ck_assert_int_eq(tdm_config_load(conf, &saved, err, sizeof(err)), 0);
        ck_assert(saved.targets[0].luns[1].readonly);
        tdm_config_free(&saved);
        expect_ok(&c, ctl_call(&c, "lun", "del", IQN1, "1", NULL));

        /* A 512e LUN: live exponent, saved setting, reported in both status forms. */
        char e_path[PATH_MAX + 16];
        snprintf(e_path, sizeof(e_path), "%s/e512.img", dir);
        expect_ok(&c, ctl_call(&c, "lun", "add", IQN1, "2", e_path, "--size", "1M",
                               "--physical-block-size", "4096", NULL));
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), 0);
        lun = scsi_target_get_lun(t, 2);
        ck_assert_ptr_nonnull(lun);
        ck_assert_uint_eq(lun->lbppb_exponent, 3);
        scsi_lun_put(lun);
        scsi_target_put(t);
        r = ctl_call(&c, "status", "--json", NULL);
        text = print_to_string(&c, r);
        o = json_tokener_parse(text);
        ck_assert(json_object_object_get_ex(o, "targets", &targets));
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(targets, 0), "luns", &luns));
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(luns, 0),
                                            "physical_block_size", &v));
        ck_assert_int_eq(json_object_get_int(v), 512); /* LUN 0: the block size */
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(luns, 1),
                                            "physical_block_size", &v));
        ck_assert_int_eq(json_object_get_int(v), 4096);
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "status", NULL);
        text = print_to_string(&c, r);
        ck_assert_ptr_nonnull(strstr(text, "block 512  physical 4096  wce\n"));
        ck_assert_ptr_null(strstr(text, "physical 512"));
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        ck_assert_int_eq(tdm_config_load(conf, &saved, err, sizeof(err)), 0);
        ck_assert_uint_eq(saved.targets[0].luns[1].physical_block_size, 4096);
        ck_assert_uint_eq(saved.targets[0].luns[0].physical_block_size, 0);
        tdm_config_free(&saved);
        expect_ok(&c, ctl_call(&c, "lun", "del", IQN1, "2", NULL));

        expect_ok(&c, ctl_call(&c, "lun", "del", IQN1, "0", NULL));
        expect_ok(&c, ctl_call(&c, "target", "del", IQN1, NULL));
        ck_assert_uint_eq(tdm_registry_config()->n_targets, 0);
}
END_TEST

/* lun resize through tandemctl's parser and the IPC: grows live, persists, refuses shrinking. */
START_TEST(test_ipc_lun_resize)
{
        struct cli c;
        char img[PATH_MAX + 16], err[512];
        snprintf(img, sizeof(img), "%s/grow.img", dir);
        expect_ok(&c, ctl_call(&c, "target", "add", IQN1, NULL));
        expect_ok(&c, ctl_call(&c, "lun", "add", IQN1, "0", img, "--size", "4M", "--thin", NULL));

        Tandem__Admin__AdminResponse *r = ctl_call(&c, "lun", "resize", IQN1, "0", "8M", NULL);
        ck_assert_msg(r->ok, "%s", r->error);
        ck_assert_ptr_nonnull(r->lun_resized);
        ck_assert_uint_eq(r->lun_resized->old_size, 4u << 20);
        ck_assert_uint_eq(r->lun_resized->new_size, 8u << 20);
        char *text = print_to_string(&c, r);
        ck_assert_str_eq(text, "LUN 0 of " IQN1 " resized from 4.0 MiB to 8.0 MiB (8388608 bytes); "
                               "initiators are told the capacity changed\n");
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        struct scsi_target *t = tdm_registry_get_target(IQN1);
        struct scsi_lun *lun = scsi_target_get_lun(t, 0);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 16384);
        scsi_lun_put(lun);
        scsi_target_put(t);
        struct tdm_config saved;
        ck_assert_int_eq(tdm_config_load(conf, &saved, err, sizeof(err)), 0);
        ck_assert_uint_eq(saved.targets[0].luns[0].size, 8u << 20);
        tdm_config_free(&saved);

        /* status: live and configured size both the new one. */
        r = ctl_call(&c, "status", "--json", NULL);
        text = print_to_string(&c, r);
        json_object *o = json_tokener_parse(text), *v, *targets, *luns;
        ck_assert(json_object_object_get_ex(o, "targets", &targets));
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(targets, 0), "luns", &luns));
        json_object *l0 = json_object_array_get_idx(luns, 0);
        ck_assert(json_object_object_get_ex(l0, "size", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 8u << 20);
        ck_assert(json_object_object_get_ex(l0, "configured_size", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 8u << 20);
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* The same size again, in JSON: ok, unchanged. */
        r = ctl_call(&c, "--json", "lun", "resize", IQN1, "0", "8M", NULL);
        ck_assert(r->ok);
        text = print_to_string(&c, r);
        o = json_tokener_parse(text);
        ck_assert(json_object_object_get_ex(o, "changed", &v));
        ck_assert(!json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(o, "new_size", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 8u << 20);
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* Refusals name the field; tandemctl prints nothing and exits 1 on them. */
        r = ctl_call(&c, "lun", "resize", IQN1, "0", "2M", NULL);
        ck_assert(!r->ok);
        ck_assert_int_eq(r->errno_value, EINVAL);
        ck_assert_int_eq(strncmp(r->error,
                                 "size: 2097152 bytes is less than the LUN has (8388608): "
                                 "shrinking is refused",
                                 75),
                         0);
        ck_assert_ptr_null(r->lun_resized);
        ck_assert_int_eq(admin_print(stdout, &c.call, r, c.json), -EIO);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "lun", "resize", IQN1, "0", "8389000", NULL);
        ck_assert(!r->ok);
        ck_assert_str_eq(r->error, "size: must be a multiple of the block size (512), got 8389000");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "lun", "resize", IQN1, "0", NULL);
        ck_assert(!r->ok);
        ck_assert_int_eq(strncmp(r->error, "size: missing: a LUN on a file needs the new size", 49),
                         0);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "lun", "resize", IQN1, "5", "8M", NULL);
        ck_assert(!r->ok);
        ck_assert_int_eq(r->errno_value, ENOENT);
        ck_assert_str_eq(r->error, "lun: no LUN 5 in " IQN1);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* A request built by hand that the CLI would refuse: the daemon checks too. */
        Tandem__Admin__AdminRequest q = TANDEM__ADMIN__ADMIN_REQUEST__INIT;
        Tandem__Admin__LunResize lr = TANDEM__ADMIN__LUN_RESIZE__INIT;
        q.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_RESIZE;
        q.lun_resize = &lr;
        lr.lun = 0;
        lr.size = 16u << 20;
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert_str_eq(r->error, "iqn: missing (required)");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        lr.iqn = IQN1;
        lr.lun = 300;
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert_str_eq(r->error, "lun: must be 0..255, got 300");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        ck_assert_int_eq(tdm_config_load(conf, &saved, err, sizeof(err)), 0);
        ck_assert_uint_eq(saved.targets[0].luns[0].size, 8u << 20);
        tdm_config_free(&saved);
}
END_TEST

START_TEST(test_ipc_errors_name_the_field)
{
        struct cli c;
        Tandem__Admin__AdminResponse *r =
            ctl_call(&c, "lun", "add", IQN1, "0", "/tmp/x.img", "--size", "1M", NULL);
        ck_assert(!r->ok);
        ck_assert_int_eq(r->errno_value, ENOENT);
        ck_assert_str_eq(r->error, "iqn: no target \"" IQN1 "\"");
        ck_assert_int_eq(admin_print(stdout, &c.call, r, c.json), -EIO);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        r = ctl_call(&c, "target", "add", IQN1, NULL);
        ck_assert(r->ok);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "target", "add", IQN1, NULL);
        ck_assert(!r->ok);
        ck_assert_int_eq(r->errno_value, EEXIST);
        ck_assert_str_eq(r->error, "iqn: target \"" IQN1 "\" already exists");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "lun", "add", IQN1, "0", "relative-missing.img", NULL);
        ck_assert(!r->ok);
        ck_assert_msg(strstr(r->error, "does not exist (give a size to create it)") != NULL, "%s",
                      r->error);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "stats", "iqn.2024-01.org.example:nope", NULL);
        ck_assert(!r->ok);
        ck_assert_str_eq(r->error, "iqn: no target \"iqn.2024-01.org.example:nope\"");
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* A request built by hand that the CLI would refuse: the daemon checks too. */
        Tandem__Admin__AdminRequest q = TANDEM__ADMIN__ADMIN_REQUEST__INIT;
        Tandem__Admin__ChapSet cs = TANDEM__ADMIN__CHAP_SET__INIT;
        cs.iqn = IQN1;
        cs.discovery = true;
        q.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_CHAP_SET;
        q.chap_set = &cs;
        char err[512];
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert(!r->ok);
        ck_assert_str_eq(r->error, "iqn: not allowed with discovery");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        Tandem__Admin__LunAdd la = TANDEM__ADMIN__LUN_ADD__INIT;
        la.iqn = IQN1;
        la.lun = 300;
        la.path = "/x";
        q.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_ADD;
        q.lun_add = &la;
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert_str_eq(r->error, "lun: must be 0..255, got 300");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        la.lun = 1;
        la.size = 1 << 20;
        la.physical_block_size = 3000;
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert(!r->ok);
        ck_assert_int_eq(r->errno_value, EINVAL);
        ck_assert_str_eq(r->error, "physical_block_size: must be block_size (512) times a power "
                                   "of two, at most 65536, got 3000");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        q.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP__NOT_SET;
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert(!r->ok);
        ck_assert_int_eq(strncmp(r->error, "request: no operation", 21), 0);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        q.version = 7;
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert_int_eq(strncmp(r->error, "version: request version 7 is newer", 35), 0);
        tandem__admin__admin_response__free_unpacked(r, NULL);
}
END_TEST

/* Errors the dispatcher gives before any replication code runs, naming the field. */
START_TEST(test_ipc_repl_errors)
{
        struct cli c;
        Tandem__Admin__AdminResponse *r = ctl_call(&c, "repl", "status", NULL);
        ck_assert_msg(r->ok, "%s", r->error);
        char *text = print_to_string(&c, r);
        ck_assert_str_eq(text, "no replicated LUNs\n");
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        r = ctl_call(&c, "repl", "status", IQN1, "0", NULL);
        ck_assert(!r->ok);
        ck_assert_int_eq(r->errno_value, ENOENT);
        ck_assert_str_eq(r->error, "iqn: no target \"" IQN1 "\"");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "repl", "promote", IQN1, "0", "--force", NULL);
        ck_assert_str_eq(r->error, "iqn: no target \"" IQN1 "\"");
        ck_assert_int_eq(admin_print(stdout, &c.call, r, c.json), -EIO);
        tandem__admin__admin_response__free_unpacked(r, NULL);

        char path[PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s/plain.img", dir);
        expect_ok(&c, ctl_call(&c, "target", "add", IQN1, NULL));
        expect_ok(&c, ctl_call(&c, "lun", "add", IQN1, "0", path, "--size", "1M", NULL));
        r = ctl_call(&c, "repl", "resync", "pause", IQN1, "5", NULL);
        ck_assert_int_eq(r->errno_value, ENOENT);
        ck_assert_str_eq(r->error, "lun: no LUN 5 in " IQN1);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "repl", "demote", IQN1, "0", NULL);
        ck_assert_int_eq(r->errno_value, EINVAL);
        ck_assert_str_eq(r->error, "lun: LUN 0 of " IQN1 " is not replicated (no replication "
                                   "group in the configuration)");
        tandem__admin__admin_response__free_unpacked(r, NULL);

        /* A hand-made request with an impossible LUN or no IQN. */
        Tandem__Admin__AdminRequest q = TANDEM__ADMIN__ADMIN_REQUEST__INIT;
        Tandem__Admin__ReplLun rl = TANDEM__ADMIN__REPL_LUN__INIT;
        rl.iqn = IQN1;
        rl.lun = 256;
        q.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE;
        q.repl_invalidate = &rl;
        char err[512];
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert_str_eq(r->error, "lun: must be 0..255, got 256");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        rl.iqn = "";
        ck_assert_int_eq(admin_client_call(instance, &q, &r, err, sizeof(err)), 0);
        ck_assert_str_eq(r->error, "iqn: missing (required)");
        tandem__admin__admin_response__free_unpacked(r, NULL);
}
END_TEST

/*
 * With a replicated LUN every command reaches its repl_admin_*() function and its answer
 * comes back as the response (the placeholder engine answers ENOTSUP with its text).
 */
START_TEST(test_ipc_repl_ops_reach_the_replicator)
{
        static const char *const cmds[][6] = {
            {"repl", "promote", IQN1, "0", NULL},
            {"repl", "promote", IQN1, "0", "--force", NULL},
            {"repl", "demote", IQN1, "0", NULL},
            {"repl", "connect", IQN1, "0", NULL},
            {"repl", "disconnect", IQN1, "0", NULL},
            {"repl", "verify", IQN1, "0", "--resync", NULL},
            {"repl", "resync", "pause", IQN1, "0", NULL},
            {"repl", "resync", "resume", IQN1, "0", NULL},
            {"repl", "invalidate", IQN1, "0", NULL},
            {"repl", "resolve-split-brain", IQN1, "0", NULL},
            {"repl", "skip-initial-sync", IQN1, "0", NULL},
        };
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                struct cli c;
                const char *const *a = cmds[i];
                Tandem__Admin__AdminResponse *r =
                    ctl_call(&c, a[0], a[1], a[2], a[3], a[4], a[5], NULL);
                if (r->ok) {
                        /* A real engine may accept some; then the CLI reports it done. */
                        char *text = print_to_string(&c, r);
                        ck_assert_msg(strncmp(text, "LUN 0 of " IQN1 ": ", 10 + strlen(IQN1)) == 0,
                                      "%s", text);
                        free(text);
                } else {
                        ck_assert_msg(r->error && *r->error, "%s %s: no error text", a[0], a[1]);
                        /* Not one of the dispatcher's own refusals: the replicator answered. */
                        ck_assert_msg(strncmp(r->error, "iqn:", 4) &&
                                          strncmp(r->error, "lun:", 4) &&
                                          strncmp(r->error, "request:", 8),
                                      "%s %s: %s", a[0], a[1], r->error);
                        if (r->errno_value == ENOTSUP)
                                ck_assert_str_eq(r->error, "replication: not available yet");
                        ck_assert_int_eq(admin_print(stdout, &c.call, r, c.json), -EIO);
                }
                tandem__admin__admin_response__free_unpacked(r, NULL);
        }

        /* Status of the replicated LUN, and the plain LUN next to it is refused. */
        struct cli c;
        Tandem__Admin__AdminResponse *r = ctl_call(&c, "repl", "status", IQN1, "0", "--json", NULL);
        ck_assert_msg(r->ok, "%s", r->error);
        char *text = print_to_string(&c, r);
        json_object *o = json_tokener_parse(text), *luns;
        ck_assert_ptr_nonnull(o);
        ck_assert(json_object_object_get_ex(o, "luns", &luns));
        ck_assert_int_le(json_object_array_length(luns), 1);
        json_object_put(o);
        free(text);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "repl", "connect", IQN1, "1", NULL);
        ck_assert_str_eq(r->error, "lun: LUN 1 of " IQN1 " is not replicated (no replication "
                                   "group in the configuration)");
        tandem__admin__admin_response__free_unpacked(r, NULL);
        r = ctl_call(&c, "status", NULL);
        ck_assert_msg(r->ok, "%s", r->error);
        ck_assert_ptr_nonnull(r->repl_status); /* the summary is always attached */
        tandem__admin__admin_response__free_unpacked(r, NULL);
}
END_TEST

START_TEST(test_ipc_not_running)
{
        Tandem__Admin__AdminRequest q = TANDEM__ADMIN__ADMIN_REQUEST__INIT;
        Tandem__Admin__StatusRequest sr = TANDEM__ADMIN__STATUS_REQUEST__INIT;
        q.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_STATUS;
        q.status = &sr;
        Tandem__Admin__AdminResponse *r = (void *)1;
        char err[512] = "";
        ck_assert_int_eq(admin_client_call("no-such-instance", &q, &r, err, sizeof(err)),
                         -ECONNREFUSED);
        ck_assert_str_eq(err, "tandemd (instance no-such-instance) is not running");
        ck_assert_ptr_null(r);
}
END_TEST

START_TEST(test_ipc_refuses_non_root)
{
        if (geteuid() != 0)
                return; /* needs root to become someone else */
        pid_t pid = fork();
        if (pid == 0) {
                if (setgid(65534) || setuid(65534))
                        _exit(10);
                Tandem__Admin__AdminRequest q = TANDEM__ADMIN__ADMIN_REQUEST__INIT;
                Tandem__Admin__TargetAdd ta = TANDEM__ADMIN__TARGET_ADD__INIT;
                ta.iqn = "iqn.2024-01.org.example:intruder";
                q.op_case = TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_ADD;
                q.target_add = &ta;
                Tandem__Admin__AdminResponse *r = NULL;
                char err[512];
                int rc = admin_client_call(instance, &q, &r, err, sizeof(err));
                _exit(rc == 0 ? 11 : rc == -EACCES ? 0 : 12);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        ck_assert_uint_eq(tdm_registry_config()->n_targets, 0);
}
END_TEST

START_TEST(test_ipc_instance_in_use)
{
        /* A second daemon with the same instance name cannot serve it. */
        char name[64];
        snprintf(name, sizeof(name), "unit-busy-%d", (int)getpid());
        int ready[2], done[2];
        ck_assert_int_eq(pipe(ready), 0);
        ck_assert_int_eq(pipe(done), 0);
        pid_t pid = fork();
        if (pid == 0) {
                qb_loop_t *l = qb_loop_create();
                char ok = admin_ipc_start(l, name) == 0 ? 'y' : 'n';
                if (write(ready[1], &ok, 1) != 1)
                        _exit(1);
                char c;
                if (read(done[0], &c, 1) != 1)
                        _exit(1);
                admin_ipc_stop();
                qb_loop_destroy(l);
                _exit(0);
        }
        char ok = 0;
        ck_assert_int_eq(read(ready[0], &ok, 1), 1);
        ck_assert_int_eq(ok, 'y');
        qb_loop_t *l = qb_loop_create();
        int rc = admin_ipc_start(l, name);
        ck_assert_int_eq(write(done[1], "x", 1), 1);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_int_eq(rc, -EADDRINUSE);
        /* Once the first is gone, the name is free again; a second start in one process is not. */
        ck_assert_int_eq(admin_ipc_start(l, name), 0);
        ck_assert_int_eq(admin_ipc_start(l, name), -EALREADY);
        admin_ipc_stop();
        qb_loop_destroy(l);
}
END_TEST

START_TEST(test_dispatch_garbage)
{
        static const uint8_t junk[] = {0xff, 0xff, 0xff, 0x0f, 0x01};
        uint8_t *out = NULL;
        size_t len = 0;
        ck_assert_int_eq(admin_dispatch(junk, sizeof(junk), &out, &len), 0);
        Tandem__Admin__AdminResponse *r = tandem__admin__admin_response__unpack(NULL, len, out);
        ck_assert_ptr_nonnull(r);
        ck_assert(!r->ok);
        ck_assert_int_eq(r->errno_value, EPROTO);
        ck_assert_int_eq(strncmp(r->error, "request: cannot decode", 22), 0);
        tandem__admin__admin_response__free_unpacked(r, NULL);
        free(out);
}
END_TEST

static Suite *admin_suite(void)
{
        Suite *s = suite_create("admin");
        TCase *ctl = tcase_create("ctl");
        tcase_add_test(ctl, test_ctl_parse_ok);
        tcase_add_test(ctl, test_ctl_parse_repl);
        tcase_add_test(ctl, test_repl_status_output);
        tcase_add_loop_test(ctl, test_ctl_parse_errors, 0,
                            (int)(sizeof(bad_args) / sizeof(bad_args[0])));
        suite_add_tcase(s, ctl);
        TCase *ipc = tcase_create("ipc");
        tcase_add_checked_fixture(ipc, service_setup, service_teardown);
        tcase_set_timeout(ipc, 60);
        tcase_add_test(ipc, test_ipc_admin_round_trip);
        tcase_add_test(ipc, test_ipc_errors_name_the_field);
        tcase_add_test(ipc, test_ipc_lun_resize);
        tcase_add_test(ipc, test_ipc_not_running);
        tcase_add_test(ipc, test_ipc_refuses_non_root);
        tcase_add_test(ipc, test_dispatch_garbage);
        tcase_add_test(ipc, test_ipc_repl_errors);
        suite_add_tcase(s, ipc);
        TCase *repl = tcase_create("repl");
        tcase_add_checked_fixture(repl, repl_service_setup, service_teardown);
        tcase_set_timeout(repl, 60);
        tcase_add_test(repl, test_ipc_repl_ops_reach_the_replicator);
        suite_add_tcase(s, repl);
        TCase *names = tcase_create("names");
        tcase_add_test(names, test_ipc_instance_in_use);
        suite_add_tcase(s, names);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(admin_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
