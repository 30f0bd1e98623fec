/*
 * Unit tests of tandemctl's command line (daemon/cli/) and of what it prints
 * (daemon/ctl/print*.c): argv into a request through the table of operations, every refusal
 * naming the field or the command, usage, and the text and JSON of answers.
 */
#include <check.h>
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tandem/admin_ipc.h"
#include "tandem/repl.h"

#define IQN1 "iqn.2024-01.org.example:t1"
#define INI1 "iqn.1993-08.org.debian:01:client1"

/* ---------------------------------------------------------------- parsing */

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

START_TEST(test_parse_ok)
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
        ck_assert_uint_eq(c.call.req.stats->interval_s, 0);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "stats", "--interval", "5", "--json", NULL),
                         0);
        ck_assert_uint_eq(c.call.req.stats->interval_s, 5);
        ck_assert(c.json);
        ck_assert_int_eq(parse(&c, err, sizeof(err), "stats", IQN1, "--interval", "3600", NULL), 0);
        ck_assert_uint_eq(c.call.req.stats->interval_s, 3600);
        ck_assert_str_eq(c.call.req.stats->iqn, IQN1);

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

START_TEST(test_parse_repl)
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
        const char *argv[12];
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
    {{"stats", "--interval", "0"}, "interval: must be 1..3600 seconds, got \"0\""},
    {{"stats", "--interval", "3601"}, "interval: must be 1..3600 seconds, got \"3601\""},
    {{"stats", "--interval", "5s"}, "interval: must be 1..3600 seconds, got \"5s\""},
    {{"stats", "--interval", "-1"}, "interval: must be 1..3600 seconds, got \"-1\""},
    {{"stats", "--interval"}, "stats: --interval needs a value"},
    {{"status", "--interval", "5"}, "status: --interval does not apply here"},
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
    /* What getopt_long refuses, said with the option. */
    {{"--json=yes", "status"}, "--json takes no value"},
    {{"-x", "status"}, "unknown option \"-x\""},
    {{"--instance=.hidden", "status"}, "instance: must be 1..63 characters"},
    {{"-i"}, "instance: --instance needs a NAME"},
    {{"lun", "add", IQN1, "0", "/a", "--thin=yes"}, "lun add: --thin takes no value"},
    {{"lun", "add", IQN1, "0", "/a", "-z"}, "lun add: unknown option \"-z\""},
    {{"lun", "add", IQN1, "0", "/a", "--bogus"}, "lun add: unknown option \"--bogus\""},
    {{"status", "--mutual", "u"}, "status: --mutual needs USER and SECRET"},
    {{"chap", "set", "--discovery", IQN1, "u", "secret-of-12"},
     "chap set: unexpected argument \"secret-of-12\""},
    {{"stats", "a", "b", "c", "d", "e", "f", "g", "h", "i"}, "stats: unexpected argument \"i\""},
};

START_TEST(test_parse_errors)
{
        char *argv[14] = {"tandemctl"};
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

/* What getopt_long gives on top of the old hand-written parser. */
START_TEST(test_parse_getopt)
{
        struct cli c;
        char err[512];
        ck_assert_int_eq(parse(&c, err, sizeof(err), "-i", "node-b", "--json", "status", NULL), 0);
        ck_assert_str_eq(c.instance, "node-b");
        ck_assert(c.json);
        /* After "--" everything is an argument, even what looks like an option. */
        ck_assert_int_eq(
            parse(&c, err, sizeof(err), "lun", "add", IQN1, "0", "--", "/srv/-odd.img", NULL), 0);
        ck_assert_str_eq(c.call.req.lun_add->path, "/srv/-odd.img");
        /* Options anywhere among the arguments, in either spelling. */
        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "add", "--thin", IQN1, "--size=1M", "0",
                               "--direct", "/srv/a.img", NULL),
                         0);
        ck_assert(c.call.req.lun_add->thin && c.call.req.lun_add->direct);
        ck_assert_uint_eq(c.call.req.lun_add->size, 1u << 20);
        /* A fresh parse forgets the last one's options. */
        ck_assert_int_eq(parse(&c, err, sizeof(err), "lun", "add", IQN1, "0", "/srv/a.img", NULL),
                         0);
        ck_assert(!c.call.req.lun_add->thin);
        ck_assert(!c.json);
        ck_assert_str_eq(c.instance, "default");
        /* --mutual takes the two words after it, whatever they look like. */
        ck_assert_int_eq(parse(&c, err, sizeof(err), "chap", "set", IQN1, "u", "user-secret-1",
                               "--mutual", "-t", "--target-secret", NULL),
                         0);
        ck_assert_str_eq(c.call.req.chap_set->mutual_user, "-t");
        ck_assert_str_eq(c.call.req.chap_set->mutual_secret, "--target-secret");
}
END_TEST

/* Usage is made from the table: every command, its arguments, options and note. */
START_TEST(test_usage)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        cli_usage(f, NULL);
        fclose(f);
        static const char *const lines[] = {
            "usage: tandemctl [--instance NAME] COMMAND ...\n\n  target add IQN\n",
            "\n  target del IQN              (its LUNs go too; backing files are kept)\n",
            ("\n  lun add IQN LUN PATH [--block-size N] [--physical-block-size N] [--size BYTES] "
             "[--thin]\n          [--direct] [--readonly]\n"),
            "\n  lun resize IQN LUN [SIZE]   (grow online; no SIZE: re-read a block device)\n",
            "\n  acl add IQN INITIATOR_IQN|ALL\n",
            "\n  chap set IQN|--discovery USER SECRET [--mutual USER SECRET]\n",
            "\n  chap clear IQN|--discovery\n",
            "\n  status\n  stats [IQN] [--interval SECONDS]\n  repl status [IQN LUN]\n",
            "\n  repl promote IQN LUN [--force]\n",
            "\n  repl verify IQN LUN [--resync]\n",
            "\n  repl resync pause|resume IQN LUN\n",
            "\n  repl skip-initial-sync IQN LUN\n",
            "\nOptions:\n",
            "\nReplication (LUNs with a replication group",
        };
        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
                ck_assert_msg(strstr(text, lines[i]), "no \"%s\" in\n%s", lines[i], text);
        free(text);
        /* An unknown topic shows everything. */
        f = open_memstream(&text, &len);
        cli_usage(f, "nothing");
        fclose(f);
        ck_assert_ptr_nonnull(strstr(text, "  repl demote IQN LUN\n"));
        ck_assert_ptr_nonnull(strstr(text, "  target add IQN\n"));
        free(text);
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

static Suite *cli_suite(void)
{
        Suite *s = suite_create("cli");
        TCase *tc = tcase_create("parse");
        tcase_add_test(tc, test_parse_ok);
        tcase_add_test(tc, test_parse_repl);
        tcase_add_test(tc, test_parse_getopt);
        tcase_add_test(tc, test_usage);
        tcase_add_loop_test(tc, test_parse_errors, 0,
                            (int)(sizeof(bad_args) / sizeof(bad_args[0])));
        suite_add_tcase(s, tc);
        tc = tcase_create("print");
        tcase_add_test(tc, test_repl_status_output);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(cli_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
