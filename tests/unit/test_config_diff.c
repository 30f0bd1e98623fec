/* Unit tests of the reload difference (daemon/config/diff.c): what applies live, in which
 * order, and what is refused with the field's name. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tandem/config.h"
#include "tandem/config_diff.h"

#define IQN1 "iqn.2024-01.org.example:t1"
#define IQN2 "iqn.2024-01.org.example:t2"
#define INI1 "iqn.1993-08.org.debian:01:abcdef"
#define ID0  "naa = \"6001405aaaaaaaaaaaaaaaaaaaaaaaa0\"; serial = \"s0\";"
#define ID1  "naa = \"6001405aaaaaaaaaaaaaaaaaaaaaaaa1\"; serial = \"s1\";"
#define LUN0 "{ lun = 0; path = \"/tmp/a\"; size = 1048576; " ID0 " }"
#define T1   "{ iqn = \"" IQN1 "\"; acl = [\"" INI1 "\"]; luns = (" LUN0 "); }"
#define BASE "listen = [\"127.0.0.1:3260\"]; threads = 2; "

static struct tdm_config base, next;
static struct tdm_changes changes;
static char err[512];

static void parse(const char *text, struct tdm_config *cfg)
{
        int rc = tdm_config_parse_string(text, cfg, err, sizeof(err));
        ck_assert_msg(rc == 0, "parse: %s", err);
}

/* The changes from `from` (also the file at start) to `to`; rc of the diff. */
static int diff(const char *from, const char *to)
{
        tdm_config_free(&base);
        tdm_config_free(&next);
        tdm_changes_free(&changes);
        parse(from, &base);
        parse(to, &next);
        err[0] = 0;
        return tdm_config_diff(&base, &base, &next, &changes, err, sizeof(err));
}

/* The changes described, one per line. */
static const char *described(void)
{
        static char all[4096];
        all[0] = 0;
        for (size_t i = 0; i < changes.n; i++) {
                char line[512];
                tdm_change_describe(&changes.v[i], line, sizeof(line));
                strncat(all, line, sizeof(all) - strlen(all) - 2);
                strcat(all, "\n");
        }
        return all;
}

static void teardown(void)
{
        tdm_config_free(&base);
        tdm_config_free(&next);
        tdm_changes_free(&changes);
}

START_TEST(same_file_changes_nothing)
{
        const char *text = BASE "targets = (" T1 ");";
        ck_assert_int_eq(diff(text, text), 0);
        ck_assert_uint_eq(changes.n, 0);
}
END_TEST

/* A file that names no identity for a LUN (one is generated on reading) keeps the running one;
 * a file that names another one is refused. */
START_TEST(generated_identity_is_not_a_change)
{
        ck_assert_int_eq(diff(BASE "targets = (" T1 ");",
                              BASE "targets = ({ iqn = \"" IQN1 "\"; acl = [\"" INI1 "\"]; "
                                   "luns = ({ lun = 0; path = \"/tmp/a\"; size = 1048576; }); });"),
                         0);
        ck_assert_uint_eq(changes.n, 0);
        ck_assert_int_eq(diff(BASE "targets = (" T1 ");",
                              BASE "targets = ({ iqn = \"" IQN1 "\"; acl = [\"" INI1 "\"]; "
                                   "luns = ({ lun = 0; path = \"/tmp/a\"; size = 1048576; " ID1
                                   " }); });"),
                         -EINVAL);
        ck_assert_str_eq(err, "targets[0].luns[0].naa: cannot change while tandemd runs: delete "
                              "the LUN and add it again, or restart tandemd");
}
END_TEST

START_TEST(new_target_in_order)
{
        ck_assert_int_eq(diff(BASE "targets = (" T1 ");",
                              BASE "targets = (" T1 ", { iqn = \"" IQN2 "\"; acl = [\"ALL\"]; "
                                   "chap = { user = \"u\"; secret = \"secret-123456\"; }; "
                                   "luns = ({ lun = 3; path = \"/tmp/b\"; " ID1 " }); });"),
                         0);
        ck_assert_str_eq(described(), "target " IQN2 " added\n"
                                      "LUN 3 of " IQN2 " added (/tmp/b)\n"
                                      "ALL may log in to " IQN2 "\n"
                                      "CHAP of " IQN2 " set\n");
}
END_TEST

START_TEST(removals_last_luns_before_targets)
{
        ck_assert_int_eq(
            diff(BASE "targets = (" T1 ", { iqn = \"" IQN2 "\"; luns = ({ lun = 3; path = "
                      "\"/tmp/b\"; " ID1 " }); });",
                 BASE "targets = ({ iqn = \"" IQN1 "\"; acl = [\"iqn.2000-01.org.x:y\"]; "
                      "luns = ({ lun = 0; path = \"/tmp/a\"; size = 2097152; " ID0 " }, "
                      "{ lun = 1; path = \"/tmp/c\"; " ID1 " }); });"),
            0);
        ck_assert_str_eq(described(), "LUN 1 of " IQN1 " added (/tmp/c)\n"
                                      "iqn.2000-01.org.x:y may log in to " IQN1 "\n"
                                      "LUN 0 of " IQN1 " grown to 2097152 bytes\n" INI1
                                      " removed from the ACL of " IQN1 "\n"
                                      "target " IQN2 " deleted\n");
}
END_TEST

START_TEST(portals_and_discovery_chap)
{
        ck_assert_int_eq(diff(BASE "targets = (" T1 ");",
                              "listen = [\"127.0.0.1:3261\"]; threads = 2; discovery = { chap = { "
                              "user = \"d\"; secret = \"discovery-secret\"; }; }; targets = (" T1
                              ");"),
                         0);
        ck_assert_str_eq(described(), "portal 127.0.0.1:3261 added\n"
                                      "CHAP of discovery set\n"
                                      "portal 127.0.0.1:3260 removed (its sessions stay)\n");
}
END_TEST

/* What cannot change live is refused, naming the field of the new file. */
START_TEST(fixed_fields_refused)
{
        static const struct {
                const char *to, *want;
        } cases[] = {
            {"listen = [\"127.0.0.1:3260\"]; threads = 3; targets = (" T1 ");",
             "threads: cannot change while tandemd runs: restart tandemd to apply it"},
            {BASE "iscsi = { max_burst = 65536; }; targets = (" T1 ");",
             "iscsi: cannot change while tandemd runs"},
            {BASE "targets = ({ iqn = \"" IQN1 "\"; acl = [\"" INI1 "\"]; luns = ({ lun = 0; "
                  "path = \"/tmp/a\"; size = 1048576; block_size = 4096; " ID0 " }); });",
             "targets[0].luns[0].block_size: cannot change while tandemd runs: delete the LUN"},
            {BASE "targets = ({ iqn = \"" IQN1 "\"; acl = [\"" INI1 "\"]; luns = ({ lun = 0; "
                  "path = \"/tmp/elsewhere\"; size = 1048576; " ID0 " }); });",
             "targets[0].luns[0].path: cannot change while tandemd runs"},
            {BASE "targets = ({ iqn = \"" IQN1 "\"; alias = \"x\"; acl = [\"" INI1 "\"]; luns = "
                  "(" LUN0 "); });",
             "targets[0].alias: cannot change while tandemd runs"},
            {BASE "targets = ({ iqn = \"" IQN1 "\"; acl = [\"" INI1 "\"]; luns = ({ lun = 0; "
                  "path = \"/tmp/a\"; size = 524288; " ID0 " }); });",
             "targets[0].luns[0].size: 524288 bytes is smaller than 1048576: a LUN is never "
             "shrunk"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                ck_assert_int_eq(diff(BASE "targets = (" T1 ");", cases[i].to), -EINVAL);
                ck_assert_msg(strncmp(err, cases[i].want, strlen(cases[i].want)) == 0,
                              "case %zu: '%s', want '%s...'", i, err, cases[i].want);
                ck_assert_uint_eq(changes.n, 0);
        }
}
END_TEST

/* tandemd started with --listen: the file's portals are not its; changing them is refused. */
START_TEST(listen_overridden_on_the_command_line)
{
        struct tdm_config running;
        parse(BASE "targets = (" T1 ");", &base);
        parse(BASE "targets = (" T1 ");", &running);
        snprintf(running.listen[0], sizeof(running.listen[0]), "0.0.0.0:3260");
        parse("listen = [\"127.0.0.1:3262\"]; threads = 2; targets = (" T1 ");", &next);
        ck_assert_int_eq(tdm_config_diff(&base, &running, &next, &changes, err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "listen: cannot change while tandemd runs: tandemd was started "
                              "with --listen, which overrides it");
        /* Unchanged in the file: nothing to do, whatever the command line said. */
        tdm_config_free(&next);
        parse(BASE "targets = (" T1 ");", &next);
        ck_assert_int_eq(tdm_config_diff(&base, &running, &next, &changes, err, sizeof(err)), 0);
        ck_assert_uint_eq(changes.n, 0);
        tdm_config_free(&running);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("config_diff");
        TCase *tc = tcase_create("diff");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, same_file_changes_nothing);
        tcase_add_test(tc, new_target_in_order);
        tcase_add_test(tc, generated_identity_is_not_a_change);
        tcase_add_test(tc, removals_last_luns_before_targets);
        tcase_add_test(tc, portals_and_discovery_chap);
        tcase_add_test(tc, fixed_fields_refused);
        tcase_add_test(tc, listen_overridden_on_the_command_line);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
