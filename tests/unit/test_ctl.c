/*
 * Unit tests of what tandemctl and tandemd share (daemon/ctl/): the table of operations is
 * consistent with proto/admin.proto, requests are built from values by the rows, the daemon
 * checks a request against its row, and a success prints what its row says.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_internal.h"

#define IQN1 "iqn.2024-01.org.example:t1"
#define INI1 "iqn.1993-08.org.debian:01:client1"

/* ---------------------------------------------------------------- the table */

static ProtobufCType member_type(enum admin_kind kind)
{
        switch (kind) {
        case ADMIN_LUN:
        case ADMIN_BLOCK_SIZE:
        case ADMIN_PHYSICAL_BLOCK_SIZE:
        case ADMIN_SECONDS:
                return PROTOBUF_C_TYPE_UINT32;
        case ADMIN_SIZE:
        case ADMIN_LUN_SIZE:
                return PROTOBUF_C_TYPE_UINT64;
        case ADMIN_SWITCH:
                return PROTOBUF_C_TYPE_BOOL;
        default:
                return PROTOBUF_C_TYPE_STRING;
        }
}

static void check_arg(const struct admin_op *op, const ProtobufCMessageDescriptor *d,
                      const struct admin_arg *a)
{
        ck_assert_msg(ctl_has_member(d, a->field, member_type(a->kind)),
                      "%s %s: %s has no member %s of the type its kind needs", op->cmd,
                      op->sub ? op->sub : "", d->name, a->field);
        ck_assert_msg(a->name || a->kind == ADMIN_SWITCH, "%s: %s has no name for messages",
                      op->cmd, a->word);
        if (a->kind == ADMIN_SWITCH)
                ck_assert_msg(strchr(a->word, '|'), "%s: a switch is \"a|b\"", a->word);
        if (a->unless)
                ck_assert_ptr_nonnull(admin_option_by_bit(a->unless));
        if (a->kind == ADMIN_LUN_SIZE || a->kind == ADMIN_PHYSICAL_BLOCK_SIZE)
                ck_assert(ctl_has_member(d, "block_size", PROTOBUF_C_TYPE_UINT32));
}

/* Each row names members its request has, of the types its arguments' kinds store. */
START_TEST(test_table_matches_the_protocol)
{
        size_t n;
        const struct admin_op *ops = admin_ops(&n);
        ck_assert_uint_ge(n, 21);
        ck_assert_uint_le(admin_n_options, ADMIN_MAX_OPTIONS);
        for (size_t i = 0; i < n; i++) {
                const struct admin_op *op = &ops[i];
                const ProtobufCMessageDescriptor *d = ctl_request_descriptor(op->request);
                ck_assert_msg(d, "%s: no request %d", op->cmd, op->request);
                ck_assert_uint_le(d->sizeof_message, sizeof(((struct admin_call *)0)->msg));
                const struct admin_arg *a;
                size_t k = 0;
                for (; (a = admin_op_arg(op, k, NULL)); k++)
                        check_arg(op, d, a);
                ck_assert_uint_le(k, ADMIN_MAX_ARGS);
                for (size_t j = 0; j < admin_n_options; j++) {
                        const struct admin_option *o = &admin_options[j];
                        if (!(op->options & o->bit))
                                continue;
                        if (o->flag)
                                ck_assert_msg(ctl_has_member(d, o->flag, PROTOBUF_C_TYPE_BOOL),
                                              "%s: --%s sets no bool member", op->cmd, o->name);
                        for (size_t v = 0; v < admin_option_n_values(o); v++)
                                check_arg(op, d, o->values[v]);
                }
                if (op->done_flag)
                        ck_assert(ctl_has_member(d, op->done_flag, PROTOBUF_C_TYPE_BOOL));
                ck_assert_msg(op->done || op->print, "%s: prints nothing of its own", op->cmd);
                /* No two rows answer to the same words. */
                for (size_t j = 0; j < i; j++)
                        ck_assert_msg(strcmp(ops[j].cmd, op->cmd) ||
                                          (op->sub && strcmp(ops[j].sub, op->sub)),
                                      "%s %s twice", op->cmd, op->sub ? op->sub : "");
        }
        ck_assert_ptr_null(admin_command("frobnicate"));
        ck_assert_ptr_eq(admin_command("lun"), admin_op_find("lun", "add"));
        ck_assert_ptr_null(admin_op_find("lun", "grow"));
}
END_TEST

/* ---------------------------------------------------------------- building */

static int build(struct admin_call *call, const char *cmd, const char *sub,
                 const struct admin_values *v, char *err, size_t errlen)
{
        const struct admin_op *op = sub ? admin_op_find(cmd, sub) : admin_command(cmd);
        ck_assert_ptr_nonnull(op);
        err[0] = '\0';
        return admin_call_build(call, op, v, err, errlen);
}

static size_t option_index(unsigned bit)
{
        return (size_t)(admin_option_by_bit(bit) - admin_options);
}

START_TEST(test_build_from_values)
{
        static struct admin_call call; /* 4 KiB of path: not on the stack of a check fork */
        char err[512];
        struct admin_values v = {.pos = {IQN1, "7", "/srv/x.img"}, .n_pos = 3};
        v.given = ADMIN_OPT_BLOCK_SIZE | ADMIN_OPT_SIZE | ADMIN_OPT_THIN;
        v.options[option_index(ADMIN_OPT_BLOCK_SIZE)][0] = "4K";
        v.options[option_index(ADMIN_OPT_SIZE)][0] = "1G";
        ck_assert_msg(build(&call, "lun", "add", &v, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(call.req.op_case, TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_ADD);
        ck_assert_ptr_eq(admin_request_message(&call.req), &call.msg.base);
        const Tandem__Admin__LunAdd *m = call.req.lun_add;
        ck_assert_str_eq(m->iqn, IQN1);
        ck_assert_uint_eq(m->lun, 7);
        ck_assert_str_eq(m->path, "/srv/x.img");
        ck_assert_uint_eq(m->block_size, 4096);
        ck_assert_uint_eq(m->size, 1ull << 30);
        ck_assert(m->thin);
        ck_assert(!m->direct);
        ck_assert_int_eq(call.req.version, TANDEM__ADMIN__PROTOCOL_VERSION__PROTOCOL_VERSION_1);

        /* Sizes are multiples of the block size given in the same command. */
        v.options[option_index(ADMIN_OPT_SIZE)][0] = "6K";
        ck_assert_int_eq(build(&call, "lun", "add", &v, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "size: must be a positive multiple of 4096, got \"6K\"");

        /* An option that stands for an argument: chap --discovery has no IQN. */
        struct admin_values d = {.pos = {"user", "secret-of-12"}, .n_pos = 2};
        d.given = ADMIN_OPT_DISCOVERY | ADMIN_OPT_MUTUAL;
        d.options[option_index(ADMIN_OPT_MUTUAL)][0] = "tgt";
        d.options[option_index(ADMIN_OPT_MUTUAL)][1] = "other-secret";
        ck_assert_msg(build(&call, "chap", "set", &d, err, sizeof(err)) == 0, "%s", err);
        ck_assert(call.req.chap_set->discovery);
        ck_assert_str_eq(call.req.chap_set->iqn, "");
        ck_assert_str_eq(call.req.chap_set->mutual_secret, "other-secret");

        /* A switch: the first of its words is true. */
        struct admin_values r = {.pos = {"resume", IQN1, "2"}, .n_pos = 3};
        ck_assert_int_eq(build(&call, "repl", "resync", &r, err, sizeof(err)), 0);
        ck_assert(!call.req.repl_resync_pause->pause);
        r.pos[0] = "pause";
        ck_assert_int_eq(build(&call, "repl", "resync", &r, err, sizeof(err)), 0);
        ck_assert(call.req.repl_resync_pause->pause);

        /* Optional arguments come all together or not at all. */
        struct admin_values s = {.pos = {IQN1}, .n_pos = 1};
        ck_assert_int_eq(build(&call, "repl", "status", &s, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "repl status: missing LUN (give IQN and LUN, or neither)");
        s.n_pos = 0;
        ck_assert_int_eq(build(&call, "repl", "status", &s, err, sizeof(err)), 0);
        ck_assert_str_eq(call.req.repl_status->iqn, "");
}
END_TEST

/* ---------------------------------------------------------------- the daemon's check */

START_TEST(test_request_check)
{
        char err[256];
        const struct admin_op *lun_add = admin_op_find("lun", "add");
        Tandem__Admin__LunAdd la = TANDEM__ADMIN__LUN_ADD__INIT;
        ck_assert_int_eq(admin_request_check(lun_add, &la.base, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "iqn: missing (required)");
        la.iqn = IQN1;
        la.lun = 256;
        ck_assert_int_eq(admin_request_check(lun_add, &la.base, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "lun: must be 0..255, got 256");
        la.lun = 255;
        ck_assert_int_eq(admin_request_check(lun_add, &la.base, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "path: missing (required)");
        la.path = "relative.img"; /* what paths may be, the registry decides */
        ck_assert_int_eq(admin_request_check(lun_add, &la.base, err, sizeof(err)), 0);

        /* chap: IQN or discovery, exactly one; an empty user (clear) is the daemon's. */
        const struct admin_op *chap = admin_op_find("chap", "set");
        Tandem__Admin__ChapSet cs = TANDEM__ADMIN__CHAP_SET__INIT;
        ck_assert_int_eq(admin_request_check(chap, &cs.base, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "iqn: missing (required, or discovery)");
        cs.iqn = IQN1;
        cs.discovery = true;
        ck_assert_int_eq(admin_request_check(chap, &cs.base, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "iqn: not allowed with discovery");
        cs.iqn = "";
        ck_assert_int_eq(admin_request_check(chap, &cs.base, err, sizeof(err)), 0);

        /* Optional arguments are checked when given. */
        const struct admin_op *repl_status = admin_op_find("repl", "status");
        Tandem__Admin__ReplStatusRequest rs = TANDEM__ADMIN__REPL_STATUS_REQUEST__INIT;
        rs.lun = 999; /* no IQN: every LUN, the number means nothing */
        ck_assert_int_eq(admin_request_check(repl_status, &rs.base, err, sizeof(err)), 0);
        rs.iqn = IQN1;
        ck_assert_int_eq(admin_request_check(repl_status, &rs.base, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "lun: must be 0..255, got 999");

        Tandem__Admin__AclAdd aa = TANDEM__ADMIN__ACL_ADD__INIT;
        aa.iqn = IQN1;
        ck_assert_int_eq(
            admin_request_check(admin_op_find("acl", "add"), &aa.base, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "initiator: missing (required)");
        Tandem__Admin__StatsRequest st = TANDEM__ADMIN__STATS_REQUEST__INIT;
        ck_assert_int_eq(admin_request_check(admin_command("stats"), &st.base, err, sizeof(err)),
                         0);
}
END_TEST

/* ---------------------------------------------------------------- what a success prints */

static char *printed(const char *cmd, const char *sub, const struct admin_values *v, bool json)
{
        static struct admin_call call;
        char err[256], *text = NULL;
        size_t len = 0;
        ck_assert_msg(build(&call, cmd, sub, v, err, sizeof(err)) == 0, "%s", err);
        Tandem__Admin__AdminResponse ok = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
        ok.ok = true;
        FILE *f = open_memstream(&text, &len);
        ck_assert_int_eq(admin_print(f, &call, &ok, json), 0);
        fclose(f);
        return text;
}

START_TEST(test_done_texts)
{
        static const struct {
                const char *cmd, *sub;
                const char *pos[3];
                unsigned flag;
                const char *want;
        } cases[] = {
            {"target", "add", {IQN1}, 0, "target " IQN1 " added\n"},
            {"target", "del", {IQN1}, 0, "target " IQN1 " deleted\n"},
            {"lun", "add", {IQN1, "3", "/srv/a.img"}, 0, "LUN 3 of " IQN1 " added (/srv/a.img)\n"},
            {"lun", "del", {IQN1, "3"}, 0, "LUN 3 of " IQN1 " deleted\n"},
            {"acl", "add", {IQN1, INI1}, 0, INI1 " may log in to " IQN1 "\n"},
            {"acl", "del", {IQN1, "ALL"}, 0, "ALL removed from the ACL of " IQN1 "\n"},
            {"chap",
             "set",
             {IQN1, "alice", "alice-secret-1"},
             0,
             "CHAP for " IQN1 " set (user alice)\n"},
            {"chap", "clear", {IQN1}, 0, "CHAP for " IQN1 " cleared\n"},
            {"chap", "clear", {NULL}, ADMIN_OPT_DISCOVERY, "CHAP for discovery cleared\n"},
            {"repl", "promote", {IQN1, "0"}, 0, "LUN 0 of " IQN1 ": is now Primary\n"},
            {"repl",
             "promote",
             {IQN1, "0"},
             ADMIN_OPT_FORCE,
             "LUN 0 of " IQN1 ": is now Primary (forced: this node's data is the truth)\n"},
            {"repl", "demote", {IQN1, "1"}, 0, "LUN 1 of " IQN1 ": is now Secondary\n"},
            {"repl",
             "verify",
             {IQN1, "1"},
             ADMIN_OPT_RESYNC,
             "LUN 1 of " IQN1 ": verify started; blocks found out of sync will be resynced\n"},
            {"repl", "resync", {"pause", IQN1, "2"}, 0, "LUN 2 of " IQN1 ": resync paused\n"},
            {"repl", "resync", {"resume", IQN1, "2"}, 0, "LUN 2 of " IQN1 ": resync resumed\n"},
            {"repl",
             "skip-initial-sync",
             {IQN1, "4"},
             0,
             "LUN 4 of " IQN1 ": initial sync skipped; both disks UpToDate\n"},
            /* status without a status in the answer: nothing to show but the success */
            {"status", NULL, {NULL}, 0, "ok\n"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct admin_values v = {.given = cases[i].flag};
                while (v.n_pos < 3 && cases[i].pos[v.n_pos])
                        v.pos[v.n_pos] = cases[i].pos[v.n_pos], v.n_pos++;
                char *text = printed(cases[i].cmd, cases[i].sub, &v, false);
                ck_assert_str_eq(text, cases[i].want);
                free(text);
                text = printed(cases[i].cmd, cases[i].sub, &v, true);
                ck_assert_str_eq(text, "{\n  \"ok\":true\n}\n");
                free(text);
        }

        /* A failure prints nothing: tandemctl reports the error. */
        static struct admin_call call;
        char err[256];
        struct admin_values v = {.pos = {IQN1}, .n_pos = 1};
        ck_assert_int_eq(build(&call, "target", "add", &v, err, sizeof(err)), 0);
        Tandem__Admin__AdminResponse failed = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
        failed.error = "iqn: target exists";
        ck_assert_int_eq(admin_print(stdout, &call, &failed, false), -EIO);
}
END_TEST

static Suite *ctl_suite(void)
{
        Suite *s = suite_create("ctl");
        TCase *tc = tcase_create("table");
        tcase_add_test(tc, test_table_matches_the_protocol);
        tcase_add_test(tc, test_build_from_values);
        tcase_add_test(tc, test_request_check);
        tcase_add_test(tc, test_done_texts);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(ctl_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
