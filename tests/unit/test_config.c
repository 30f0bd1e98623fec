/* Unit tests of the configuration (daemon/config/): parsing, validation, saving, edits. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tandem/config.h"
#include "tandem/config_repl.h"
#include "tandem/repl.h"

#define IQN1 "iqn.2024-01.org.example:t1"
#define IQN2 "iqn.2024-01.org.example:t2"
#define INI1 "iqn.1993-08.org.debian:01:abcdef"

static char example_path[PATH_MAX];

/* deploy/examples/tandem.conf, found from this file's location in the source tree. */
static const char *example_conf(void)
{
        snprintf(example_path, sizeof(example_path), "%s", __FILE__);
        char *slash = strstr(example_path, "tests/unit/test_config.c");
        ck_assert_ptr_nonnull(slash);
        strcpy(slash, "deploy/examples/tandem.conf");
        return example_path;
}

static char *make_tmpdir(void)
{
        char *d = strdup("/tmp/tandem-test-config.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(d));
        return d;
}

static void rm_tree(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *e;
        char p[PATH_MAX];
        while ((e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
                unlink(p);
        }
        closedir(d);
        rmdir(dir);
}

static size_t count_entries(const char *dir)
{
        DIR *d = opendir(dir);
        ck_assert_ptr_nonnull(d);
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static char *read_all(const char *path)
{
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return strdup(buf);
}

/* ---------------------------------------------------------------- defaults */

START_TEST(test_defaults)
{
        struct tdm_config c;
        char err[256] = "";
        ck_assert_int_eq(tdm_config_parse_string("", &c, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.n_listen, 1);
        ck_assert_str_eq(c.listen[0], "0.0.0.0:3260");
        ck_assert_str_eq(c.instance, "default");
        ck_assert_str_eq(c.state_dir, "/var/lib/tandem");
        ck_assert_uint_eq(c.threads, 0);
        ck_assert_uint_eq(c.iscsi.max_recv_dsl, 262144);
        ck_assert_uint_eq(c.iscsi.max_burst, 16776192);
        ck_assert_uint_eq(c.iscsi.first_burst, 65536);
        ck_assert(!c.iscsi.initial_r2t);
        ck_assert(c.iscsi.immediate_data);
        ck_assert_uint_eq(c.iscsi.max_outstanding_r2t, 1);
        ck_assert_uint_eq(c.iscsi.queue_depth, 128);
        ck_assert_uint_eq(c.iscsi.nop_interval_s, 5);
        ck_assert_uint_eq(c.iscsi.nop_timeout_s, 10);
        ck_assert_uint_eq(c.iscsi.login_timeout_s, 15);
        ck_assert_uint_eq(c.iscsi.max_sessions, 256);
        ck_assert_uint_eq(c.iscsi.max_sessions_per_initiator, 64);
        ck_assert_uint_eq(c.iscsi.max_pending_logins, 256);
        ck_assert_uint_eq(c.iscsi.login_rate, 8);
        ck_assert_uint_eq(c.iscsi.login_burst, 64);
        ck_assert_uint_eq(c.iscsi.max_conn_output, 64u << 20);
        ck_assert_uint_eq(c.iscsi.max_conn_write_data, 256u << 20);
        ck_assert_uint_eq(c.iscsi.output_timeout_s, 30);
        ck_assert(!c.discovery_chap.enabled);
        ck_assert_uint_eq(c.n_targets, 0);
        ck_assert(!c.identities_generated);
        ck_assert_int_eq(tdm_config_validate(&c, err, sizeof(err)), 0);
        tdm_config_free(&c);

        /* A LUN with only the required fields gets the LUN defaults. */
        ck_assert_int_eq(tdm_config_parse_string("targets = ({ iqn = \"" IQN1 "\"; luns = ({ lun = "
                                                 "3; path = \"/d/x\"; }); });",
                                                 &c, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(c.targets[0].tpgt, 1);
        ck_assert_uint_eq(c.targets[0].n_acl, 0);
        struct tdm_lun_cfg *l = &c.targets[0].luns[0];
        ck_assert_uint_eq(l->lun, 3);
        ck_assert_uint_eq(l->block_size, 512);
        ck_assert_uint_eq(l->size, 0);
        ck_assert(l->wce);
        ck_assert(!l->thin);
        ck_assert(!l->direct);
        ck_assert(!l->readonly);
        ck_assert_uint_eq(l->physical_block_size, 0); /* = block_size: exponent 0 */
        ck_assert(c.identities_generated);
        ck_assert(tdm_naa_valid(l->naa));
        tdm_config_free(&c);
}
END_TEST

START_TEST(test_example_file)
{
        struct tdm_config c;
        char err[256] = "";
        int rc = tdm_config_load(example_conf(), &c, err, sizeof(err));
        ck_assert_msg(rc == 0, "example config: %s", err);
        ck_assert_uint_eq(c.n_listen, 2);
        ck_assert_str_eq(c.listen[1], "[::1]:3260");
        ck_assert_str_eq(c.log_file, "/var/log/tandem/tandemd.log");
        ck_assert_int_eq(c.log_level, 6);
        ck_assert(c.discovery_chap.enabled && c.discovery_chap.mutual);
        ck_assert_str_eq(c.discovery_chap.mutual_user, "tandem");
        ck_assert_uint_eq(c.n_targets, 2);
        struct tdm_target_cfg *t = &c.targets[0];
        ck_assert_str_eq(t->alias, "disk1");
        ck_assert_uint_eq(t->n_acl, 2);
        ck_assert(t->chap.enabled && !t->chap.mutual);
        ck_assert_uint_eq(t->n_luns, 2);
        ck_assert_uint_eq(t->luns[0].size, 10ull << 30);
        ck_assert(t->luns[0].thin);
        ck_assert_uint_eq(t->luns[0].physical_block_size, 4096);
        ck_assert_uint_eq(t->luns[1].physical_block_size, 0);
        ck_assert_str_eq(t->luns[0].naa, "67a6e640c3f1a2b4d5e6f708192a3b4c");
        ck_assert_str_eq(t->luns[0].serial, "9f3c2a1b0d4e5f60");
        /* LUN 1 had no identity: generated, and the flag tells the caller to save. */
        ck_assert(tdm_naa_valid(t->luns[1].naa));
        ck_assert(c.identities_generated);
        ck_assert_str_eq(c.targets[1].acl[0], "ALL");
        ck_assert_uint_eq(c.targets[1].luns[0].size, 1ull << 30);
        ck_assert(!t->luns[0].readonly);
        ck_assert_uint_eq(c.targets[1].n_luns, 2);
        ck_assert(c.targets[1].luns[1].readonly);
        ck_assert_uint_eq(c.targets[1].luns[1].size, 0);
        tdm_config_free(&c);
}
END_TEST

/* Accepted values: a size with a unit, equal to block_size, and every power of two up to 64K. */
START_TEST(test_physical_block_size)
{
        static const struct {
                const char *lun;
                uint32_t want;
        } ok[] = {
            {"block_size = 512; physical_block_size = \"4K\";", 4096},
            {"block_size = 4096; physical_block_size = 4096;", 4096},
            {"block_size = 1024; physical_block_size = \"64KiB\";", 65536},
            {"block_size = 512; physical_block_size = 1024;", 1024},
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                char text[512], err[256] = "";
                snprintf(text, sizeof(text),
                         "targets = ({ iqn = \"" IQN1 "\"; luns = ({ lun = 0; path = \"/a\"; %s "
                         "}); });",
                         ok[i].lun);
                struct tdm_config c;
                int rc = tdm_config_parse_string(text, &c, err, sizeof(err));
                ck_assert_msg(rc == 0, "%s: %s", ok[i].lun, err);
                ck_assert_uint_eq(c.targets[0].luns[0].physical_block_size, ok[i].want);
                tdm_config_free(&c);
        }
        char err[256] = "";
        ck_assert_int_eq(tdm_physical_block_size_check(0, 4096, "f", err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_physical_block_size_check(8192, 4096, "f", err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_physical_block_size_check(12288, 4096, "f", err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "f: must be block_size (4096) times a power of two, at most 65536, "
                              "got 12288");
}
END_TEST

/* ---------------------------------------------------------------- invalid configs */

struct bad_case {
        const char *text;
        const char *expect; /* the whole message must start with this */
};

/* A replicated LUN: RLUN(lun, path, identity fields, replication fields). */
#define NAA1    "67a6e640c3f1a2b4d5e6f708192a3b4c"
#define NAA2    "67a6e640c3f1a2b4d5e6f708192a3b4d"
#define RID1    "naa = \"" NAA1 "\"; serial = \"s1\";"
#define RID2    "naa = \"" NAA2 "\"; serial = \"s2\";"
#define RSECRET "secret = \"shared-secret-1\"; "
#define RNODES                                                                                     \
        "nodes = ({ id = 1; name = \"alpha\"; address = \"10.0.0.1\"; }, { id = 2; name = "        \
        "\"beta\"; address = \"10.0.0.2:7790\"; }); "
#define RLUN(n, path, ident, repl)                                                                 \
        "{ lun = " #n "; path = \"" path "\"; " ident " replication = { " repl " }; }"
#define RLUNS(luns) "targets = ({ iqn = \"" IQN1 "\"; luns = (" luns "); });"
/* node_id 1 and one replicated LUN with the given replication fields. */
#define RCFG(repl) "node_id = 1; " RLUNS(RLUN(0, "/a", RID1, repl))
#define T0         "targets = ({ iqn = \"" IQN1 "\"; "
static const struct bad_case bad_cases[] = {
    {T0 "luns = ({ lun = 0; path = \"/a\"; }, { lun = 1; path = \"/b\"; size = 1000; }); });",
     "targets[0].luns[1].size: must be a positive multiple of 512"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; size = 0; }); });",
     "targets[0].luns[0].size: must be a positive multiple of 512"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; block_size = 4096; size = \"6K\"; }); });",
     "targets[0].luns[0].size: must be a positive multiple of 4096"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; size = \"12 parsecs\"; }); });",
     "targets[0].luns[0].size: must be bytes or a number with"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; block_size = 520; }); });",
     "targets[0].luns[0].block_size: must be 512, 1024, 2048 or 4096, got 520"},
    {"foo = 1;", "foo: unknown field"},
    {"iscsi = { max_burts = 1; };", "iscsi.max_burts: unknown field"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; colour = \"red\"; }); });",
     "targets[0].luns[0].colour: unknown field"},
    {"iscsi = { max_burst = 100; };", "iscsi.max_burst: must be 512..16777215, got 100"},
    {"iscsi = { max_burst = 16777216; };", "iscsi.max_burst: must be 512..16777215"},
    {"iscsi = { max_burst = 65536; first_burst = 131072; };",
     "iscsi.first_burst: must not exceed iscsi.max_burst (65536)"},
    {"iscsi = { max_outstanding_r2t = 17; };", "iscsi.max_outstanding_r2t: must be 1..16"},
    {"iscsi = { queue_depth = 0; };", "iscsi.queue_depth: must be 1..4096, got 0"},
    {"iscsi = { nop_timeout = 0; };", "iscsi.nop_timeout: must be 1..60, got 0"},
    {"iscsi = { login_timeout = 301; };", "iscsi.login_timeout: must be 1..300"},
    {"iscsi = { initial_r2t = 1; };", "iscsi.initial_r2t: must be true or false"},
    {"iscsi = { max_sessions = 0; };", "iscsi.max_sessions: must be 1..65535, got 0"},
    {"iscsi = { max_sessions = 8; max_sessions_per_initiator = 9; };",
     "iscsi.max_sessions_per_initiator: must not exceed iscsi.max_sessions (8), got 9"},
    {"iscsi = { max_pending_logins = 0; };", "iscsi.max_pending_logins: must be 1..65535"},
    {"iscsi = { login_rate = 0; };", "iscsi.login_rate: must be 1..100000, got 0"},
    {"iscsi = { login_burst = 100001; };", "iscsi.login_burst: must be 1..100000"},
    {"iscsi = { max_conn_output = 4096; };",
     "iscsi.max_conn_output: must be 1048576..1073741824, got 4096"},
    {"iscsi = { max_conn_write_data = 1048576; };",
     "iscsi.max_conn_write_data: must be 16777216..2147483648, got 1048576"},
    {"iscsi = { output_timeout = 0; };", "iscsi.output_timeout: must be 1..3600, got 0"},
    {"iscsi = 5;", "iscsi: must be a group"},
    {"threads = -1;", "threads: must be 0..1024, got -1"},
    {"threads = \"many\";", "threads: must be an integer"},
    {"state_dir = \"var/lib\";", "state_dir: must be an absolute path"},
    {"instance = \"a/b\";", "instance: must be 1..63 characters"},
    {"log = { level = \"loud\"; };", "log.level: must be one of"},
    {"log = { file = \"tandem.log\"; };", "log.file: must be an absolute path"},
    {"listen = [ \"1.2.3.4:99999\" ];", "listen[0]: \"1.2.3.4:99999\" is not ADDR[:PORT]"},
    {"listen = [ \"1.2.3.4:3260\", \"[::1\" ];", "listen[1]:"},
    {"listen = [ ];", "listen: must have 1..8 addresses"},
    {"listen = [ \"a:1\", \"a:1\" ];", "listen[1]: \"a:1\" is listed twice"},
    {"targets = ({ alias = \"x\"; });", "targets[0].iqn: missing (required)"},
    {"targets = ({ iqn = \"iqn.2024-13.org.example:x\"; });",
     "targets[0].iqn: \"iqn.2024-13.org.example:x\" is not an iSCSI name"},
    {T0 "}, { iqn = \"" IQN2 "\"; }, { iqn = \"IQN.2024-01.ORG.EXAMPLE:T1\"; });",
     "targets[2].iqn: \"IQN.2024-01.ORG.EXAMPLE:T1\" is already targets[0]"},
    {T0 "tpgt = 0; });", "targets[0].tpgt: must be 1..65535, got 0"},
    {T0 "acl = [ \"ALL\", \"bogus\" ]; });",
     "targets[0].acl[1]: \"bogus\" is neither ALL nor an iSCSI initiator name"},
    {T0 "acl = [ \"" INI1 "\", \"" INI1 "\" ]; });",
     "targets[0].acl[1]: \"" INI1 "\" is listed twice"},
    {T0 "chap = { user = \"u\"; secret = \"short\"; }; });",
     "targets[0].chap.secret: must be 12..255 printable characters"},
    {T0 "chap = { secret = \"long-enough-secret\"; }; });",
     "targets[0].chap.user: must be 1..255 printable characters"},
    {T0 "chap = { user = \"u\"; secret = \"long-enough-secret\"; mutual_user = \"t\"; }; });",
     "targets[0].chap.mutual_secret: must be 12..255"},
    {"discovery = { chap = { user = \"u\"; secret = \"same-secret-xx\"; mutual_user = \"t\"; "
     "mutual_secret = \"same-secret-xx\"; }; };",
     "discovery.chap.mutual_secret: must differ from the secret"},
    {"discovery = { chap = { mutual_user = \"t\"; mutual_secret = \"abcdefghijklmn\"; }; };",
     "discovery.chap: mutual CHAP needs CHAP"},
    {T0 "luns = ({ path = \"/a\"; }); });", "targets[0].luns[0].lun: missing (required)"},
    {T0 "luns = ({ lun = 0; }); });", "targets[0].luns[0].path: missing (required)"},
    {T0 "luns = ({ lun = 256; path = \"/a\"; }); });",
     "targets[0].luns[0].lun: must be 0..255, got 256"},
    {T0 "luns = ({ lun = 0; path = \"a.img\"; }); });",
     "targets[0].luns[0].path: must be an absolute path, got \"a.img\""},
    {T0 "luns = ({ lun = 0; path = \"/a\"; }, { lun = 0; path = \"/b\"; }); });",
     "targets[0].luns[1].lun: 0 is used twice in this target"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; }); }, { iqn = \"" IQN2 "\"; luns = ({ lun = 0; "
        "path = \"/a\"; }); });",
     "targets[1].luns[0].path: already used by targets[0].luns[0]"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; naa = \"67a6e640c3f1a2b4d5e6f708192a3b4c\"; }); });",
     "targets[0].luns[0].serial: missing while naa is set"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; naa = \"57a6e640c3f1a2b4d5e6f708192a3b4c\"; "
        "serial = \"abc\"; }); });",
     "targets[0].luns[0].naa: must be 32 hex digits starting with 6"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; naa = \"67a6e640c3f1a2b4d5e6f708192a3b4c\"; "
        "serial = \"s1\"; }, { lun = 1; path = \"/b\"; naa = "
        "\"67A6E640C3F1A2B4D5E6F708192A3B4C\"; serial = \"s2\"; }); });",
     "targets[0].luns[1].naa: already used by targets[0].luns[0]"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; naa = \"67a6e640c3f1a2b4d5e6f708192a3b4c\"; "
        "serial = \"has space\"; }); });",
     "targets[0].luns[0].serial: must be 1..32 characters"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; readonly = true; size = \"1M\"; }); });",
     "targets[0].luns[0].size: a read-only LUN cannot create or grow its backing store"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; physical_block_size = 256; }); });",
     "targets[0].luns[0].physical_block_size: must be block_size (512) times a power of two, "
     "at most 65536, got 256"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; physical_block_size = 6144; }); });",
     "targets[0].luns[0].physical_block_size: must be block_size (512) times a power of two"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; block_size = 4096; physical_block_size = 2048; "
        "}); });",
     "targets[0].luns[0].physical_block_size: must be block_size (4096) times a power of two"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; physical_block_size = \"128K\"; }); });",
     "targets[0].luns[0].physical_block_size: must be block_size (512) times a power of two, "
     "at most 65536, got 131072"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; physical_block_size = 0; }); });",
     "targets[0].luns[0].physical_block_size: must be block_size (512) times a power of two"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; physical_block_size = \"big\"; }); });",
     "targets[0].luns[0].physical_block_size: must be bytes or a number with"},
    {T0 "luns = ({ lun = 0; path = \"/a\"; readonly = 1; }); });",
     "targets[0].luns[0].readonly: must be true or false"},
    {T0 "luns = { lun = 0; }; });", "targets[0].luns: must be a list"},
    {"targets = { iqn = \"x\"; };", "targets: must be a list"},
    /* Replication (the timeout rule: well below the initiators' 15 s abort timer). */
    {RCFG(RSECRET RNODES "timeout = 20000;"),
     "targets[0].luns[0].replication.timeout: 20000 ms is not well below the initiators' 15 s "
     "abort timer; at most 10000"},
    {RCFG(RSECRET RNODES "timeout = 100;"),
     "targets[0].luns[0].replication.timeout: 100 ms would drop a peer that is merely busy; at "
     "least 200"},
    {RLUNS(RLUN(0, "/a", RID1, RSECRET RNODES)),
     "node_id: must be set (1..255) when a LUN is replicated (targets[0].luns[0])"},
    {"node_id = 0; " RLUNS(RLUN(0, "/a", RID1, RSECRET RNODES)), "node_id: must be 1..255, got 0"},
    {"node_id = 256;", "node_id: must be 1..255, got 256"},
    {"node_id = 3; " RLUNS(RLUN(0, "/a", RID1, RSECRET RNODES)),
     "targets[0].luns[0].replication.nodes: none of the nodes is this node (node_id = 3)"},
    {RCFG(RSECRET "nodes = ({ id = 1; address = \"a\"; }, { id = 2; address = \"b\"; }, { id = "
                  "3; address = \"c\"; });"),
     "targets[0].luns[0].replication.nodes: only one peer per LUN is supported"},
    {RCFG(RSECRET "nodes = ({ id = 1; address = \"a\"; });"),
     "targets[0].luns[0].replication.nodes: must list this node and its peer (2 entries), got 1"},
    {RCFG(RSECRET "nodes = ({ id = 1; address = \"a\"; }, { id = 1; address = \"b\"; });"),
     "targets[0].luns[0].replication.nodes[1].id: 1 is already nodes[0]"},
    {RCFG(RSECRET "nodes = ({ id = 1; address = \"a\"; }, { id = 0; address = \"b\"; });"),
     "targets[0].luns[0].replication.nodes[1].id: must be 1..255, got 0"},
    {RCFG(RSECRET "nodes = ({ id = 1; name = \"x\"; address = \"a\"; }, { id = 2; name = \"x\"; "
                  "address = \"b\"; });"),
     "targets[0].luns[0].replication.nodes[1].name: \"x\" is already nodes[0]"},
    {RCFG(RSECRET "nodes = ({ id = 1; name = \"a b\"; address = \"a\"; }, { id = 2; address = "
                  "\"b\"; });"),
     "targets[0].luns[0].replication.nodes[0].name: must be 1..63 characters"},
    {RCFG(RSECRET "nodes = ({ id = 1; address = \"a\"; }, { id = 2; address = \"b:99999\"; });"),
     "targets[0].luns[0].replication.nodes[1].address: \"b:99999\" is not HOST[:PORT]"},
    {RCFG(RSECRET "nodes = ({ id = 1; address = \"a\"; }, { id = 2; address = \"a:7789\"; });"),
     "targets[0].luns[0].replication.nodes[1].address: \"a:7789\" is the same endpoint as "
     "nodes[0]"},
    {RCFG(RSECRET "nodes = ({ id = 1; }, { id = 2; address = \"b\"; });"),
     "targets[0].luns[0].replication.nodes[0].address: missing (required)"},
    {RCFG(RSECRET "nodes = ({ address = \"a\"; }, { id = 2; address = \"b\"; });"),
     "targets[0].luns[0].replication.nodes[0].id: missing (required)"},
    {RCFG(RSECRET "nodes = { id = 1; };"), "targets[0].luns[0].replication.nodes: must be a list"},
    {RCFG(RSECRET), "targets[0].luns[0].replication.nodes: missing (required)"},
    {RCFG(RNODES), "targets[0].luns[0].replication.secret: must be 12..255 printable characters"},
    {RCFG("secret = \"short\"; " RNODES),
     "targets[0].luns[0].replication.secret: must be 12..255 printable characters"},
    {RCFG(RSECRET RNODES "port = 0;"),
     "targets[0].luns[0].replication.port: must be 1..65535, got 0"},
    {RCFG(RSECRET RNODES "colour = \"red\";"),
     "targets[0].luns[0].replication.colour: unknown field"},
    {RCFG(RSECRET RNODES "metadata = \"repl.md\";"),
     "targets[0].luns[0].replication.metadata: must be an absolute path, got \"repl.md\""},
    {RCFG(RSECRET RNODES "resync_rate = \"10M\"; resync_min_rate = \"20M\";"),
     "targets[0].luns[0].replication.resync_min_rate: 20971520 bytes/s exceeds resync_rate "
     "(10485760 bytes/s)"},
    {RCFG(RSECRET RNODES "resync_rate = 0;"),
     "targets[0].luns[0].replication.resync_rate: must be 1..9223372036854775807, got 0"},
    {RCFG(RSECRET RNODES "resync_min_rate = 0;"),
     "targets[0].luns[0].replication.resync_min_rate: must be 1..9223372036854775807, got 0"},
    {RCFG(RSECRET RNODES "resync_rate = \"fast\";"),
     "targets[0].luns[0].replication.resync_rate: must be bytes or a number with"},
    {RCFG(RSECRET RNODES "split_brain = \"coin-flip\";"),
     "targets[0].luns[0].replication.split_brain: must be disconnect, discard-zero-changes, "
     "discard-younger-primary or discard-node-NAME, got \"coin-flip\""},
    {RCFG(RSECRET RNODES "split_brain = \"discard-node-gamma\";"),
     "targets[0].luns[0].replication.split_brain: discard-node-gamma: no node is named \"gamma\" "
     "(nodes: alpha, beta)"},
    {RCFG(RSECRET RNODES "target_ports = \"both\";"),
     "targets[0].luns[0].replication.target_ports: must be \"shared\" (floating portal IP) or "
     "\"per_node\""},
    {RCFG(RSECRET RNODES "alua = \"both\";"),
     "targets[0].luns[0].replication.alua: must be \"implicit\" (the cluster moves the Primary) "
     "or \"explicit\""},
    {RCFG(RSECRET RNODES "alua = \"explicit\"; target_ports = \"per_node\";"),
     "targets[0].luns[0].replication.stpg_handler: required with alua = \"explicit\""},
    {RCFG(RSECRET RNODES "alua = \"explicit\"; stpg_handler = \"/usr/lib/tandem/tandem-stpg\";"),
     "targets[0].luns[0].replication.alua: \"explicit\" needs target_ports = \"per_node\""},
    {RCFG(RSECRET RNODES "stpg_handler = \"tandem-stpg\";"),
     "targets[0].luns[0].replication.stpg_handler: must be an absolute path, got \"tandem-stpg\""},
    {RCFG(RSECRET RNODES "split_brain = \"discard-node-\";"),
     "targets[0].luns[0].replication.split_brain: must be disconnect"},
    {"node_id = 1; " RLUNS(RLUN(0, "/a", "", RSECRET RNODES)),
     "targets[0].luns[0].naa: a replicated LUN needs the same naa and serial on every node; set "
     "both"},
    {"node_id = 1; " RLUNS(RLUN(0, "/a", "naa = \"" NAA1 "\";", RSECRET RNODES)),
     "targets[0].luns[0].serial: a replicated LUN needs the same naa and serial on every node"},
    {"node_id = 1; " RLUNS(RLUN(0, "/a", "serial = \"s1\";", RSECRET RNODES)),
     "targets[0].luns[0].naa: a replicated LUN needs the same naa and serial on every node"},
    {"node_id = 1; " RLUNS(RLUN(0, "/a", RID1 " readonly = true;", RSECRET RNODES)),
     "targets[0].luns[0].readonly: a replicated LUN cannot be read-only"},
    /* One listener per replicated LUN, never on an iSCSI portal. */
    {"node_id = 1; " RLUNS(
         RLUN(0, "/a", RID1, RSECRET RNODES) ", " RLUN(1, "/b", RID2, RSECRET RNODES)),
     "targets[0].luns[1].replication.nodes[0].address: 10.0.0.1 port 7789 is already where "
     "targets[0].luns[0] listens; give each replicated LUN its own port"},
    {"node_id = 2; " RLUNS(RLUN(0, "/a", RID1, RSECRET RNODES) ", " RLUN(
         1, "/b", RID2,
         RSECRET "nodes = ({ id = 1; address = \"10.0.0.1:7790\"; }, { id = 2; address = "
                 "\"0.0.0.0:7790\"; });")),
     "targets[0].luns[1].replication.nodes[1].address: 0.0.0.0 port 7790 is already where "
     "targets[0].luns[0] listens"},
    {"listen = [ \"0.0.0.0:3260\" ]; " RCFG(RSECRET "port = 3260; " RNODES),
     "targets[0].luns[0].replication.nodes[0].address: 10.0.0.1 port 3260 clashes with the "
     "iSCSI portal listen[0] (\"0.0.0.0:3260\"); give replication its own port"},
    {"node_id = 1; " RLUNS(RLUN(0, "/a", RID1, RSECRET RNODES "metadata = \"/m\";") ", " RLUN(
         1, "/b", RID2, RSECRET "port = 7790; metadata = \"/m\"; " RNODES)),
     "targets[0].luns[1].replication.metadata: already used by targets[0].luns[0]"},
    {"node_id = 1; " RLUNS(RLUN(0, "/a", RID1, RSECRET RNODES "metadata = \"/a\";")),
     "targets[0].luns[0].replication.metadata: is the backing store of targets[0].luns[0]"},
    {RCFG(RSECRET RNODES "timeout = \"5s\";"),
     "targets[0].luns[0].replication.timeout: must be an integer"},
    {"threads = = 4;", "line 1: "},
};

START_TEST(test_invalid_configs)
{
        const struct bad_case *bc = &bad_cases[_i];
        struct tdm_config c;
        char err[512] = "";
        int rc = tdm_config_parse_string(bc->text, &c, err, sizeof(err));
        ck_assert_msg(rc == -EINVAL, "case %d accepted (rc %d): %s", _i, rc, bc->text);
        ck_assert_msg(strncmp(err, bc->expect, strlen(bc->expect)) == 0,
                      "case %d: got \"%s\", want \"%s...\"", _i, err, bc->expect);
        /* On failure cfg is left empty and safe to free twice. */
        ck_assert_uint_eq(c.n_targets, 0);
        ck_assert_ptr_null(c.targets);
        tdm_config_free(&c);
}
END_TEST

START_TEST(test_load_missing_file)
{
        struct tdm_config c;
        char err[512] = "";
        ck_assert_int_eq(tdm_config_load("/nonexistent/tandem.conf", &c, err, sizeof(err)),
                         -ENOENT);
        ck_assert_str_eq(err, "/nonexistent/tandem.conf: cannot open: No such file or directory");
}
END_TEST

/* ---------------------------------------------------------------- save / load */

static void assert_chap_eq(const struct tdm_chap_cfg *a, const struct tdm_chap_cfg *b)
{
        ck_assert_int_eq(a->enabled, b->enabled);
        ck_assert_int_eq(a->mutual, b->mutual);
        ck_assert_str_eq(a->user, b->user);
        ck_assert_str_eq(a->secret, b->secret);
        ck_assert_str_eq(a->mutual_user, b->mutual_user);
        ck_assert_str_eq(a->mutual_secret, b->mutual_secret);
}

static void assert_config_eq(const struct tdm_config *a, const struct tdm_config *b)
{
        ck_assert_uint_eq(a->n_listen, b->n_listen);
        for (size_t i = 0; i < a->n_listen; i++)
                ck_assert_str_eq(a->listen[i], b->listen[i]);
        ck_assert_str_eq(a->state_dir, b->state_dir);
        ck_assert_str_eq(a->instance, b->instance);
        ck_assert_uint_eq(a->threads, b->threads);
        ck_assert_str_eq(a->log_file, b->log_file);
        ck_assert_int_eq(a->log_level, b->log_level);
        ck_assert_int_eq(a->log_syslog, b->log_syslog);
        ck_assert_mem_eq(&a->iscsi, &b->iscsi, sizeof(a->iscsi));
        assert_chap_eq(&a->discovery_chap, &b->discovery_chap);
        ck_assert_uint_eq(a->n_targets, b->n_targets);
        for (size_t i = 0; i < a->n_targets; i++) {
                const struct tdm_target_cfg *x = &a->targets[i], *y = &b->targets[i];
                ck_assert_str_eq(x->iqn, y->iqn);
                ck_assert_str_eq(x->alias, y->alias);
                ck_assert_uint_eq(x->tpgt, y->tpgt);
                ck_assert_uint_eq(x->n_acl, y->n_acl);
                for (size_t j = 0; j < x->n_acl; j++)
                        ck_assert_str_eq(x->acl[j], y->acl[j]);
                assert_chap_eq(&x->chap, &y->chap);
                ck_assert_uint_eq(x->n_luns, y->n_luns);
                for (size_t j = 0; j < x->n_luns; j++) {
                        const struct tdm_lun_cfg *l = &x->luns[j], *m = &y->luns[j];
                        ck_assert_uint_eq(l->lun, m->lun);
                        ck_assert_str_eq(l->path, m->path);
                        ck_assert_uint_eq(l->size, m->size);
                        ck_assert_int_eq(l->thin, m->thin);
                        ck_assert_int_eq(l->direct, m->direct);
                        ck_assert_int_eq(l->wce, m->wce);
                        ck_assert_int_eq(l->readonly, m->readonly);
                        ck_assert_uint_eq(l->block_size, m->block_size);
                        ck_assert_uint_eq(l->physical_block_size, m->physical_block_size);
                        ck_assert_str_eq(l->naa, m->naa);
                        ck_assert_str_eq(l->serial, m->serial);
                }
        }
}

START_TEST(test_round_trip)
{
        char *dir = make_tmpdir();
        char path[PATH_MAX], err[512] = "";
        snprintf(path, sizeof(path), "%s/tandem.conf", dir);
        struct tdm_config a, b;
        ck_assert_int_eq(tdm_config_load(example_conf(), &a, err, sizeof(err)), 0);
        /* Values that stress the writer: quotes and backslashes, a size above 2^32, non-defaults.
         */
        strcpy(a.targets[0].chap.secret, "q\"uo\\te$#{};x");
        a.targets[0].chap.mutual = true;
        strcpy(a.targets[0].chap.mutual_user, "tgt user");
        strcpy(a.targets[0].chap.mutual_secret, "another 'secret'");
        a.targets[0].luns[1].size = 5ull << 40;
        a.targets[0].luns[1].block_size = 4096;
        a.targets[0].luns[1].physical_block_size = 65536;
        a.targets[0].luns[1].direct = true;
        a.targets[0].luns[1].wce = false;
        a.threads = 7;
        a.iscsi.initial_r2t = true;
        a.iscsi.nop_interval_s = 0;
        a.log_level = 7;
        a.log_syslog = false;
        ck_assert_int_eq(tdm_config_save(path, &a, err, sizeof(err)), 0);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 0777, 0600); /* it holds CHAP secrets */
        int rc = tdm_config_load(path, &b, err, sizeof(err));
        ck_assert_msg(rc == 0, "reload: %s", err);
        ck_assert(!b.identities_generated); /* identities were saved */
        assert_config_eq(&a, &b);
        /* Saving the reloaded config reproduces the same file byte for byte. */
        char *first = read_all(path);
        /* Written only where set: the default (0 = block_size) stays out of the file. */
        ck_assert_ptr_nonnull(strstr(first, "physical_block_size = 4096;"));
        ck_assert_ptr_nonnull(strstr(first, "physical_block_size = 65536;"));
        ck_assert_ptr_null(
            strstr(strstr(first, "physical_block_size = 65536;") + 1, "physical_block_size"));
        ck_assert_int_eq(tdm_config_save(path, &b, err, sizeof(err)), 0);
        char *second = read_all(path);
        ck_assert_str_eq(first, second);
        ck_assert_uint_eq(count_entries(dir), 1); /* no temporary files left */
        free(first);
        free(second);
        tdm_config_free(&a);
        tdm_config_free(&b);
        rm_tree(dir);
        free(dir);
}
END_TEST

START_TEST(test_save_failure_keeps_old_file)
{
        char *dir = make_tmpdir();
        char path[PATH_MAX], err[512] = "";
        snprintf(path, sizeof(path), "%s/tandem.conf", dir);
        struct tdm_config small, big;
        ck_assert_int_eq(tdm_config_parse_string("", &small, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_save(path, &small, err, sizeof(err)), 0);
        char *before = read_all(path);
        ck_assert_int_eq(tdm_config_load(example_conf(), &big, err, sizeof(err)), 0);

        /* Writing fails halfway (file size limit; root ignores permissions, not rlimits). */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = strlen(before) + 64, .rlim_max = RLIM_INFINITY};
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
        int rc = tdm_config_save(path, &big, err, sizeof(err));
        rl.rlim_cur = RLIM_INFINITY;
        setrlimit(RLIMIT_FSIZE, &rl);
        ck_assert_int_eq(rc, -EFBIG);
        ck_assert_msg(strncmp(err, path, strlen(path)) == 0, "%s", err);
        char *after = read_all(path);
        ck_assert_str_eq(before, after);
        ck_assert_uint_eq(count_entries(dir), 1);
        free(after);

        /* An invalid config is refused before anything is written. */
        strcpy(big.targets[0].luns[0].path, "relative");
        ck_assert_int_eq(tdm_config_save(path, &big, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err,
                         "targets[0].luns[0].path: must be an absolute path, got \"relative\"");
        after = read_all(path);
        ck_assert_str_eq(before, after);
        free(after);

        /* A directory that does not exist: an error naming the path, nothing created. */
        char missing[PATH_MAX];
        snprintf(missing, sizeof(missing), "%s/nodir/tandem.conf", dir);
        ck_assert_int_eq(tdm_config_save(missing, &small, err, sizeof(err)), -ENOENT);
        ck_assert_msg(strstr(err, "nodir/tandem.conf: cannot create temporary file") != NULL, "%s",
                      err);
        ck_assert_uint_eq(count_entries(dir), 1);

        free(before);
        tdm_config_free(&small);
        tdm_config_free(&big);
        rm_tree(dir);
        free(dir);
}
END_TEST

/*
 * A LUN size goes into the file as a signed 64-bit integer: a larger one (possible with a unit,
 * "16000P") was accepted, then saved as a negative number that the next load refused, so the
 * daemon would not start again. fuzz_config's save and reload check catches it (seed
 * tests/fuzz/corpus/fuzz_config/size-above-int64).
 */
START_TEST(test_lun_size_fits_the_file)
{
        char *dir = make_tmpdir();
        char path[PATH_MAX], err[512] = "";
        snprintf(path, sizeof(path), "%s/tandem.conf", dir);
        struct tdm_config c, back;
        int rc = tdm_config_parse_string(
            T0 "luns = ({ lun = 0; path = \"/a\"; size = \"16000P\"; }); });", &c, err,
            sizeof(err));
        ck_assert_msg(rc == -EINVAL, "16000P accepted (rc %d)", rc);
        ck_assert_str_eq(err, "targets[0].luns[0].size: must be at most 9223372036854775807 "
                              "bytes, got 18014398509481984000");

        /* The largest size that is a multiple of the block size still saves and loads. */
        ck_assert_int_eq(tdm_config_parse_string(T0 "luns = ({ lun = 0; path = \"/a\"; size = "
                                                    "\"9223372036854775296\"; }); });",
                                                 &c, err, sizeof(err)),
                         0);
        ck_assert_int_eq(tdm_config_save(path, &c, err, sizeof(err)), 0);
        ck_assert_msg(tdm_config_load(path, &back, err, sizeof(err)) == 0, "reload: %s", err);
        ck_assert_uint_eq(back.targets[0].luns[0].size, INT64_MAX - 511);
        tdm_config_free(&back);

        /* Set by an edit instead of the file: refused before anything is written. */
        c.targets[0].luns[0].size = 1ull << 63;
        ck_assert_int_eq(tdm_config_save(path, &c, err, sizeof(err)), -EINVAL);
        ck_assert_msg(tdm_config_load(path, &back, err, sizeof(err)) == 0, "reload: %s", err);
        ck_assert_uint_eq(back.targets[0].luns[0].size, INT64_MAX - 511);
        tdm_config_free(&back);
        tdm_config_free(&c);
        rm_tree(dir);
        free(dir);
}
END_TEST

START_TEST(test_unwritable_dir_as_user)
{
        /* As an unprivileged user a read-only directory refuses the temp file. */
        if (geteuid() != 0)
                return;
        char *dir = make_tmpdir();
        char path[PATH_MAX], err[512] = "";
        snprintf(path, sizeof(path), "%s/tandem.conf", dir);
        struct tdm_config c;
        ck_assert_int_eq(tdm_config_parse_string("", &c, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_save(path, &c, err, sizeof(err)), 0);
        char *before = read_all(path);
        ck_assert_int_eq(chown(dir, 65534, 65534), 0);
        ck_assert_int_eq(chmod(dir, 0555), 0);
        pid_t pid = fork();
        if (pid == 0) {
                if (setgid(65534) || setuid(65534))
                        _exit(2);
                c.threads = 3;
                int rc = tdm_config_save(path, &c, err, sizeof(err));
                _exit(rc == -EACCES && strstr(err, "cannot create temporary file") ? 0 : 1);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        char *after = read_all(path);
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        tdm_config_free(&c);
        chmod(dir, 0700);
        rm_tree(dir);
        free(dir);
}
END_TEST

/* ---------------------------------------------------------------- edits */

START_TEST(test_edits)
{
        struct tdm_config c, copy;
        char err[512] = "";
        tdm_config_defaults(&c);
        ck_assert_int_eq(tdm_config_add_target(&c, "bogus", err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(strncmp(err, "iqn: \"bogus\" is not an iSCSI name", 33), 0);
        ck_assert_int_eq(tdm_config_add_target(&c, IQN1, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_add_target(&c, IQN2, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_add_target(&c, "IQN.2024-01.org.example:T1", err, sizeof(err)),
                         -EEXIST);
        ck_assert_str_eq(err, "iqn: target \"IQN.2024-01.org.example:T1\" already exists");

        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 0;
        strcpy(l.path, "/srv/a.img");
        l.size = 1 << 20;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN1, &l, err, sizeof(err)), 0);
        struct tdm_lun_cfg *added = tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 0);
        ck_assert_ptr_nonnull(added);
        ck_assert(tdm_naa_valid(added->naa)); /* identity generated on add */
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN1, &l, err, sizeof(err)), -EEXIST);
        ck_assert_str_eq(err, "lun: 0 already exists in " IQN1);
        l.lun = 1;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EEXIST);
        ck_assert_str_eq(err, "path: /srv/a.img is already LUN 0 of " IQN1);
        strcpy(l.path, "b.img");
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "path: must be an absolute path, got \"b.img\"");
        strcpy(l.path, "/srv/b.img");
        l.lun = 300;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "lun: must be 0..255, got 300");
        l.lun = 1;
        l.size = 1000;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "size: must be a positive multiple of 512");
        l.size = 4096;
        l.readonly = true;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(strncmp(err, "size: a read-only LUN cannot create or grow", 43), 0);
        l.readonly = false;
        l.physical_block_size = 1536;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "physical_block_size: must be block_size (512) times a power of "
                              "two, at most 65536, got 1536");
        l.physical_block_size = 131072;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(strncmp(err, "physical_block_size: must be", 28), 0);
        l.physical_block_size = 4096;
        l.size = (uint64_t)INT64_MAX + 1; /* "8E": no file holds it, the next load would refuse */
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "size: must be at most 9223372036854775807 bytes, got "
                              "9223372036854775808");
        l.size = 0;
        ck_assert_int_eq(
            tdm_config_add_lun(&c, "iqn.2024-01.org.example:none", &l, err, sizeof(err)), -ENOENT);
        ck_assert_str_eq(err, "iqn: no target \"iqn.2024-01.org.example:none\"");
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN2, &l, err, sizeof(err)), 0);
        ck_assert_uint_eq(
            tdm_config_find_lun(tdm_config_find_target(&c, IQN2), 1)->physical_block_size, 4096);

        ck_assert_int_eq(tdm_config_add_acl(&c, IQN1, "all", err, sizeof(err)), 0);
        ck_assert_str_eq(tdm_config_find_target(&c, IQN1)->acl[0], "ALL");
        ck_assert_int_eq(tdm_config_add_acl(&c, IQN1, INI1, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_add_acl(&c, IQN1, INI1, err, sizeof(err)), -EEXIST);
        ck_assert_int_eq(tdm_config_add_acl(&c, IQN1, "nobody", err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(strncmp(err, "initiator: \"nobody\" is neither ALL", 34), 0);
        ck_assert_int_eq(tdm_config_del_acl(&c, IQN1, "ALL", err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_del_acl(&c, IQN1, "ALL", err, sizeof(err)), -ENOENT);
        ck_assert_uint_eq(tdm_config_find_target(&c, IQN1)->n_acl, 1);

        struct tdm_chap_cfg chap = {.enabled = true};
        strcpy(chap.user, "alice");
        strcpy(chap.secret, "0123456789ab");
        ck_assert_int_eq(tdm_config_set_chap(&c, IQN1, &chap, err, sizeof(err)), 0);
        chap.mutual = true;
        strcpy(chap.mutual_user, "tgt");
        strcpy(chap.mutual_secret, "0123456789ab");
        ck_assert_int_eq(tdm_config_set_chap(&c, NULL, &chap, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "chap.mutual_secret: must differ from the secret (RFC 7143 12.1.3)");
        strcpy(chap.mutual_secret, "zyxwvutsrq98");
        ck_assert_int_eq(tdm_config_set_chap(&c, NULL, &chap, err, sizeof(err)), 0);
        ck_assert(c.discovery_chap.mutual);
        ck_assert_int_eq(tdm_config_validate(&c, err, sizeof(err)), 0);

        /* A deep copy is independent of the original. */
        ck_assert_int_eq(tdm_config_copy(&copy, &c), 0);
        ck_assert_int_eq(tdm_config_del_target(&copy, IQN1, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_del_lun(&copy, IQN2, 1, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_del_lun(&copy, IQN2, 1, err, sizeof(err)), -ENOENT);
        ck_assert_str_eq(err, "lun: no LUN 1 in " IQN2);
        ck_assert_uint_eq(copy.n_targets, 1);
        ck_assert_uint_eq(c.n_targets, 2);
        ck_assert_uint_eq(tdm_config_find_target(&c, IQN2)->n_luns, 1);
        ck_assert_ptr_nonnull(tdm_config_find_target(&c, IQN1));
        ck_assert_int_eq(tdm_config_del_target(&copy, IQN1, err, sizeof(err)), -ENOENT);

        /* Clearing CHAP. */
        struct tdm_chap_cfg off = {.enabled = false};
        ck_assert_int_eq(tdm_config_set_chap(&c, IQN1, &off, err, sizeof(err)), 0);
        ck_assert(!tdm_config_find_target(&c, IQN1)->chap.enabled);
        tdm_config_free(&copy);
        tdm_config_free(&c);
}
END_TEST

/* lun resize edits the size of an existing LUN; the saved file carries it. */
START_TEST(test_set_lun_size)
{
        struct tdm_config c, back;
        char err[512] = "";
        tdm_config_defaults(&c);
        ck_assert_int_eq(tdm_config_add_target(&c, IQN1, err, sizeof(err)), 0);
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 3;
        l.block_size = 4096;
        l.size = 64 << 20;
        strcpy(l.path, "/srv/grow.img");
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN1, &l, err, sizeof(err)), 0);
        l.lun = 4;
        l.block_size = 512;
        l.size = 0;
        l.readonly = true;
        l.naa[0] = l.serial[0] = '\0';
        strcpy(l.path, "/srv/golden.img");
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN1, &l, err, sizeof(err)), 0);

        ck_assert_int_eq(tdm_config_set_lun_size(&c, IQN1, 3, 128ull << 20, err, sizeof(err)), 0);
        ck_assert_uint_eq(tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 3)->size,
                          128ull << 20);
        /* Errors name the field and leave the size as it was. */
        ck_assert_int_eq(
            tdm_config_set_lun_size(&c, IQN1, 3, (128ull << 20) + 512, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "size: must be a multiple of the block size (4096), got 134218240");
        ck_assert_int_eq(tdm_config_set_lun_size(&c, IQN1, 9, 1 << 20, err, sizeof(err)), -ENOENT);
        ck_assert_str_eq(err, "lun: no LUN 9 in " IQN1);
        ck_assert_int_eq(tdm_config_set_lun_size(&c, IQN2, 3, 1 << 20, err, sizeof(err)), -ENOENT);
        ck_assert_str_eq(err, "iqn: no target \"" IQN2 "\"");
        ck_assert_int_eq(tdm_config_set_lun_size(&c, IQN1, 4, 1 << 20, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(strncmp(err, "size: a read-only LUN cannot create or grow", 43), 0);
        ck_assert_int_eq(tdm_config_set_lun_size(&c, IQN1, 4, 0, err, sizeof(err)), 0);
        ck_assert_uint_eq(tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 3)->size,
                          128ull << 20);
        ck_assert_int_eq(tdm_config_validate(&c, err, sizeof(err)), 0);

        char *d = make_tmpdir(), path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/tandem.conf", d);
        ck_assert_int_eq(tdm_config_save(path, &c, err, sizeof(err)), 0);
        ck_assert_msg(tdm_config_load(path, &back, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(tdm_config_find_lun(tdm_config_find_target(&back, IQN1), 3)->size,
                          128ull << 20);
        ck_assert_uint_eq(tdm_config_find_lun(tdm_config_find_target(&back, IQN1), 4)->size, 0);
        tdm_config_free(&back);
        tdm_config_free(&c);
        rm_tree(d);
        free(d);
}
END_TEST

/* ---------------------------------------------------------------- replication */

static const char repl_full[] =
    "node_id = 2;\n"
    "targets = ({ iqn = \"" IQN1 "\"; luns = ({ lun = 0; path = \"/a\"; " RID1 "\n"
    "  replication = {\n"
    "    secret = \"at-least-12-chars\";\n"
    "    port = 7800;\n"
    "    nodes = ( { id = 1; name = \"alpha\"; address = \"10.0.0.1\"; },\n"
    "              { id = 2; name = \"beta\";  address = \"[fd00::2]:7790\"; } );\n"
    "    metadata = \"/var/lib/tandem/repl-lun0.md\";\n"
    "    timeout = 3000;\n"
    "    resync_rate = \"200M\";\n"
    "    resync_min_rate = 5000000;\n"
    "    split_brain = \"discard-node-alpha\";\n"
    "  };\n"
    "}, { lun = 1; path = \"/b\"; }); });\n";

START_TEST(test_repl_parse)
{
        struct tdm_config c;
        char err[512] = "";
        int rc = tdm_config_parse_string(repl_full, &c, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s", err);
        ck_assert_uint_eq(c.node_id, 2);
        const struct tdm_repl_cfg *r = &c.targets[0].luns[0].repl;
        ck_assert(r->enabled);
        ck_assert_str_eq(r->secret, "at-least-12-chars");
        ck_assert_uint_eq(r->port, 7800);
        ck_assert_uint_eq(r->n_nodes, 2);
        ck_assert_uint_eq(r->nodes[0].id, 1);
        ck_assert_str_eq(r->nodes[0].name, "alpha");
        ck_assert_str_eq(r->nodes[0].address, "10.0.0.1");
        ck_assert_uint_eq(r->nodes[1].id, 2);
        ck_assert_str_eq(r->nodes[1].name, "beta");
        ck_assert_str_eq(r->nodes[1].address, "[fd00::2]:7790");
        ck_assert_str_eq(r->metadata, "/var/lib/tandem/repl-lun0.md");
        ck_assert_uint_eq(r->timeout_ms, 3000);
        ck_assert_uint_eq(r->resync_rate, 200ull << 20);
        ck_assert_uint_eq(r->resync_min_rate, 5000000);
        ck_assert_int_eq(r->split_brain, REPL_SB_DISCARD_NODE);
        ck_assert_str_eq(r->split_brain_node, "alpha");
        /* The identity was given, so nothing was generated; the plain LUN got one. */
        ck_assert_str_eq(c.targets[0].luns[0].naa, NAA1);
        ck_assert(!c.targets[0].luns[1].repl.enabled);
        ck_assert(c.identities_generated);

        /* Helpers: local/peer entry, endpoints (default port is replication.port). */
        ck_assert_ptr_eq(tdm_repl_local_node(r, c.node_id), &r->nodes[1]);
        ck_assert_ptr_eq(tdm_repl_peer_node(r, c.node_id), &r->nodes[0]);
        char host[128], buf[4200];
        uint16_t port;
        ck_assert_int_eq(tdm_repl_node_endpoint(r, &r->nodes[0], host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "10.0.0.1");
        ck_assert_uint_eq(port, 7800);
        ck_assert_int_eq(tdm_repl_node_endpoint(r, &r->nodes[1], host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "fd00::2");
        ck_assert_uint_eq(port, 7790);
        ck_assert_int_eq(tdm_repl_metadata_path(&c, &c.targets[0].luns[0], buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/var/lib/tandem/repl-lun0.md");
        tdm_repl_split_brain_name(r, buf, sizeof(buf));
        ck_assert_str_eq(buf, "discard-node-alpha");

        /* tdm_config_copy carries the replication group along. */
        struct tdm_config d;
        ck_assert_int_eq(tdm_config_copy(&d, &c), 0);
        ck_assert_mem_eq(&d.targets[0].luns[0].repl, r, sizeof(*r));
        ck_assert_uint_eq(d.node_id, 2);
        tdm_config_free(&d);
        tdm_config_free(&c);
}
END_TEST

START_TEST(test_repl_defaults)
{
        struct tdm_config c;
        char err[512] = "";
        int rc = tdm_config_parse_string(
            RCFG(RSECRET "nodes = ({ id = 1; address = \"10.0.0.1\"; }, { id = 7; address = "
                         "\"::1\"; });"),
            &c, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s", err);
        const struct tdm_repl_cfg *r = &c.targets[0].luns[0].repl;
        ck_assert(r->enabled);
        ck_assert_uint_eq(r->port, 7789);
        ck_assert_str_eq(r->nodes[0].name, "node1");
        ck_assert_str_eq(r->nodes[1].name, "node7");
        ck_assert_str_eq(r->metadata, "");
        ck_assert_uint_eq(r->timeout_ms, TDM_DEFAULT_REPL_TIMEOUT_MS);
        ck_assert_uint_eq(r->resync_rate, TDM_DEFAULT_RESYNC_RATE);
        ck_assert_uint_eq(r->resync_min_rate, TDM_DEFAULT_RESYNC_MIN_RATE);
        ck_assert_int_eq(r->split_brain, REPL_SB_DISCONNECT);
        ck_assert(!r->ports_per_node); /* shared: the floating portal IP */
        ck_assert(!c.identities_generated);
        char host[128], buf[4200];
        uint16_t port;
        /* A bare IPv6 address has no port: replication.port, not the iSCSI 3260. */
        ck_assert_int_eq(tdm_repl_node_endpoint(r, &r->nodes[1], host, sizeof(host), &port), 0);
        ck_assert_str_eq(host, "::1");
        ck_assert_uint_eq(port, 7789);
        ck_assert_int_eq(tdm_repl_metadata_path(&c, &c.targets[0].luns[0], buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/var/lib/tandem/repl-" NAA1 ".md");
        tdm_repl_split_brain_name(r, buf, sizeof(buf));
        ck_assert_str_eq(buf, "disconnect");
        tdm_config_free(&c);

        /* No replication anywhere: node_id may stay out and is 0. */
        ck_assert_int_eq(tdm_config_parse_string("", &c, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.node_id, 0);
        tdm_config_free(&c);

        /* Two replicated LUNs side by side, each on its own port, on two node ids. */
        rc = tdm_config_parse_string(
            "node_id = 1; " RLUNS(RLUN(0, "/a", RID1, RSECRET RNODES) ", " RLUN(
                1, "/b", RID2,
                RSECRET "port = 7791; " RNODES "split_brain = "
                        "\"discard-younger-primary\";")),
            &c, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s", err);
        ck_assert_int_eq(c.targets[0].luns[1].repl.split_brain, REPL_SB_DISCARD_YOUNGER_PRIMARY);
        tdm_config_free(&c);
}
END_TEST

/* The commented replicated setup in the example file is valid once its "#> " go. */
START_TEST(test_repl_example)
{
        char *text = read_all(example_conf());
        size_t n = strlen(text);
        char *out = malloc(n + 1), *o = out;
        ck_assert_ptr_nonnull(out);
        size_t enabled = 0;
        for (const char *line = text; *line;) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line + 1) : strlen(line);
                if (strncmp(line, "#> ", 3) == 0) {
                        line += 3;
                        len -= 3;
                        enabled++;
                }
                memcpy(o, line, len);
                o += len;
                line += len;
        }
        *o = '\0';
        ck_assert_uint_ge(enabled, 20);
        struct tdm_config c;
        char err[512] = "";
        int rc = tdm_config_parse_string(out, &c, err, sizeof(err));
        ck_assert_msg(rc == 0, "uncommented example: %s", err);
        ck_assert_uint_eq(c.node_id, 1);
        ck_assert_uint_eq(c.targets[0].n_luns, 3);
        const struct tdm_repl_cfg *r = &c.targets[0].luns[2].repl;
        ck_assert(r->enabled);
        ck_assert_str_eq(r->nodes[1].name, "beta");
        ck_assert_uint_eq(r->resync_rate, 100ull << 20);
        ck_assert_uint_eq(r->resync_min_rate, 10ull << 20);
        tdm_config_free(&c);
        free(out);
        free(text);
}
END_TEST

START_TEST(test_repl_round_trip)
{
        char *dir = make_tmpdir();
        char path[PATH_MAX], err[512] = "";
        snprintf(path, sizeof(path), "%s/tandem.conf", dir);
        struct tdm_config a, b;
        ck_assert_int_eq(tdm_config_parse_string(repl_full, &a, err, sizeof(err)), 0);
        /* Rates above 2^32 and a split-brain policy that is not the default. */
        a.targets[0].luns[0].repl.resync_rate = 5ull << 40;
        a.targets[0].luns[0].repl.resync_min_rate = 3ull << 32;
        a.targets[0].luns[0].repl.ports_per_node = true;
        a.targets[0].luns[0].repl.alua_explicit = true;
        snprintf(a.targets[0].luns[0].repl.stpg_handler,
                 sizeof(a.targets[0].luns[0].repl.stpg_handler), "/usr/lib/tandem/tandem-stpg");
        ck_assert_int_eq(tdm_config_save(path, &a, err, sizeof(err)), 0);
        int rc = tdm_config_load(path, &b, err, sizeof(err));
        ck_assert_msg(rc == 0, "reload: %s", err);
        ck_assert_uint_eq(b.node_id, 2);
        assert_config_eq(&a, &b);
        for (size_t i = 0; i < 2; i++)
                ck_assert_mem_eq(&a.targets[0].luns[i].repl, &b.targets[0].luns[i].repl,
                                 sizeof(struct tdm_repl_cfg));
        char *first = read_all(path);
        ck_assert_ptr_nonnull(strstr(first, "split_brain = \"discard-node-alpha\";"));
        ck_assert_ptr_nonnull(strstr(first, "target_ports = \"per_node\";"));
        ck_assert_ptr_nonnull(strstr(first, "alua = \"explicit\";"));
        ck_assert_ptr_nonnull(strstr(first, "stpg_handler = \"/usr/lib/tandem/tandem-stpg\";"));
        ck_assert_ptr_nonnull(strstr(first, "node_id = 2;"));
        /* Only the replicated LUN has the group. */
        ck_assert_ptr_null(strstr(strstr(first, "replication") + 1, "replication"));
        ck_assert_int_eq(tdm_config_save(path, &b, err, sizeof(err)), 0);
        char *second = read_all(path);
        ck_assert_str_eq(first, second);
        free(first);
        free(second);

        /* Defaults are written out explicitly and read back the same. */
        tdm_config_free(&a);
        tdm_config_free(&b);
        ck_assert_int_eq(tdm_config_parse_string(RCFG(RSECRET RNODES), &a, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_save(path, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_load(path, &b, err, sizeof(err)), 0);
        ck_assert_mem_eq(&a.targets[0].luns[0].repl, &b.targets[0].luns[0].repl,
                         sizeof(struct tdm_repl_cfg));
        tdm_config_free(&a);
        tdm_config_free(&b);
        rm_tree(dir);
        free(dir);
}
END_TEST

/* An edit cannot add a replicated LUN without an identity, nor save a broken group. */
START_TEST(test_repl_edits)
{
        struct tdm_config c;
        char err[512] = "";
        ck_assert_int_eq(tdm_config_parse_string(RCFG(RSECRET RNODES), &c, err, sizeof(err)), 0);
        struct tdm_lun_cfg l = c.targets[0].luns[0];
        l.lun = 1;
        strcpy(l.path, "/b");
        l.naa[0] = l.serial[0] = '\0';
        l.repl.port = 7790;
        ck_assert_int_eq(tdm_config_add_lun(&c, IQN1, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "naa: a replicated LUN needs the same naa and serial on every node; "
                              "set both");
        ck_assert_uint_eq(c.targets[0].n_luns, 1);
        c.targets[0].luns[0].repl.timeout_ms = 15000;
        ck_assert_int_eq(tdm_config_save("/nonexistent/x.conf", &c, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "targets[0].luns[0].replication.timeout: 15000 ms is not well below "
                              "the initiators' 15 s abort timer; at most 10000");
        tdm_config_free(&c);
}
END_TEST

/* The exporter: off by default, a numeric IP:PORT when on, saved and loaded. */
START_TEST(test_metrics_group)
{
        struct tdm_config a, b;
        char err[512] = "";
        ck_assert_int_eq(tdm_config_parse_string("targets = ();", &a, err, sizeof(err)), 0);
        ck_assert_str_eq(a.metrics.listen, "");
        tdm_config_free(&a);
        ck_assert_int_eq(tdm_config_parse_string("metrics = { listen = \"127.0.0.1:9750\"; };", &a,
                                                 err, sizeof(err)),
                         0);
        ck_assert_str_eq(a.metrics.listen, "127.0.0.1:9750");
        char *dir = make_tmpdir();
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/tandem.conf", dir);
        ck_assert_int_eq(tdm_config_save(path, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_load(path, &b, err, sizeof(err)), 0);
        ck_assert_str_eq(b.metrics.listen, "127.0.0.1:9750");
        tdm_config_free(&a);
        tdm_config_free(&b);
        rm_tree(dir);
        free(dir);
        ck_assert_int_eq(tdm_config_parse_string("metrics = { listen = \"[::1]:9750\"; };", &a, err,
                                                 sizeof(err)),
                         0);
        tdm_config_free(&a);
        static const char *const bad[] = {"localhost:9750",  "127.0.0.1",   "127.0.0.1:0",
                                          "127.0.0.1:70000", "[::1]",       "::1:9750",
                                          "1.2.3.4.5:80",    "127.0.0.1:x", ""};
        for (size_t i = 0; bad[i][0]; i++) {
                char text[256];
                snprintf(text, sizeof(text), "metrics = { listen = \"%s\"; };", bad[i]);
                ck_assert_int_eq(tdm_config_parse_string(text, &a, err, sizeof(err)), -EINVAL);
                ck_assert_msg(strncmp(err, "metrics.listen: ", 16) == 0, "%s: %s", bad[i], err);
        }
        ck_assert_int_eq(tdm_config_parse_string("listen = [\"127.0.0.1:3260\"]; metrics = { "
                                                 "listen = \"127.0.0.1:3260\"; };",
                                                 &a, err, sizeof(err)),
                         -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "metrics.listen: \"127.0.0.1:3260\" is also an iSCSI"));
        ck_assert_int_eq(tdm_config_parse_string("metrics = { port = 1; };", &a, err, sizeof(err)),
                         -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "metrics"));
}
END_TEST

/* ---- cluster (issue 4): the "cluster" group ---- */
START_TEST(test_cluster_group)
{
        struct tdm_config a, b, c;
        char err[512] = "";
        /* Defaults: disabled, group "tandem", nothing written for it. */
        ck_assert_int_eq(tdm_config_parse_string("targets = ();", &a, err, sizeof(err)), 0);
        ck_assert(!a.cluster.enabled);
        ck_assert_str_eq(a.cluster.group, "tandem");
        char *dir = make_tmpdir();
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/tandem.conf", dir);
        ck_assert_int_eq(tdm_config_save(path, &a, err, sizeof(err)), 0);
        char *text = read_all(path);
        ck_assert_ptr_null(strstr(text, "cluster"));
        free(text);
        tdm_config_free(&a);

        /* Parsed, saved, loaded and copied the same. */
        ck_assert_int_eq(
            tdm_config_parse_string("node_id = 3; cluster = { enabled = true; group = \"ha-1\"; };",
                                    &a, err, sizeof(err)),
            0);
        ck_assert(a.cluster.enabled);
        ck_assert_str_eq(a.cluster.group, "ha-1");
        ck_assert_int_eq(tdm_config_save(path, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_load(path, &b, err, sizeof(err)), 0);
        ck_assert(b.cluster.enabled);
        ck_assert_str_eq(b.cluster.group, "ha-1");
        ck_assert_uint_eq(b.node_id, 3);
        ck_assert_int_eq(tdm_config_copy(&c, &b), 0);
        ck_assert(c.cluster.enabled);
        ck_assert_str_eq(c.cluster.group, "ha-1");
        tdm_config_free(&a);
        tdm_config_free(&b);
        tdm_config_free(&c);
        rm_tree(dir);
        free(dir);

        /* Enabled needs node_id; the group is a plain name; no unknown keys. */
        ck_assert_int_eq(
            tdm_config_parse_string("cluster = { enabled = true; };", &a, err, sizeof(err)),
            -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "node_id: must be set (1..255) when cluster.enabled"));
        ck_assert_int_eq(tdm_config_parse_string("node_id = 1; cluster = { group = \"a b\"; };", &a,
                                                 err, sizeof(err)),
                         -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "cluster.group: must be 1..63 characters"));
        ck_assert_int_eq(
            tdm_config_parse_string("cluster = { group = \"\"; };", &a, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "cluster.group"));
        ck_assert_int_eq(
            tdm_config_parse_string("cluster = { enabled = 1; };", &a, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "cluster.enabled: must be true or false"));
        ck_assert_int_eq(
            tdm_config_parse_string("cluster = { quorum = true; };", &a, err, sizeof(err)),
            -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "quorum"));
        /* Disabled needs no node_id. */
        ck_assert_int_eq(
            tdm_config_parse_string("cluster = { enabled = false; };", &a, err, sizeof(err)), 0);
        tdm_config_free(&a);
}
END_TEST

/* fence_peer: an absolute path, saved and loaded; the cluster's timer chain is checked. */
START_TEST(test_cluster_fence_peer_and_timers)
{
        struct tdm_config a, b;
        char err[512] = "";
        char *dir = make_tmpdir();
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/t.conf", dir);
        ck_assert_int_eq(tdm_config_parse_string("node_id = 1; cluster = { enabled = true; "
                                                 "fence_peer = \"/usr/lib/tandem/fp\"; };",
                                                 &a, err, sizeof(err)),
                         0);
        ck_assert_str_eq(a.cluster.fence_peer, "/usr/lib/tandem/fp");
        ck_assert_int_eq(tdm_config_save(path, &a, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_config_load(path, &b, err, sizeof(err)), 0);
        ck_assert_str_eq(b.cluster.fence_peer, "/usr/lib/tandem/fp");
        tdm_config_free(&a);
        tdm_config_free(&b);
        rm_tree(dir);
        free(dir);

        ck_assert_int_eq(tdm_config_parse_string("node_id = 1; cluster = { fence_peer = \"fp\"; };",
                                                 &a, err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "cluster.fence_peer: must be an absolute path, got \"fp\"");

        /* Default timeout (2000 ms) and 2000 pass in cluster mode; 2001 names the field. */
        ck_assert_int_eq(
            tdm_config_parse_string(RCFG(RSECRET RNODES) " cluster = { enabled = true; };", &a, err,
                                    sizeof(err)),
            0);
        ck_assert_uint_eq(a.targets[0].luns[0].repl.timeout_ms, 2000);
        tdm_config_free(&a);
        ck_assert_int_eq(
            tdm_config_parse_string(
                RCFG(RSECRET RNODES "timeout = 2001;") " cluster = { enabled = true; };", &a, err,
                sizeof(err)),
            -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "targets[0].luns[0].replication.timeout: 2001 ms: with "
                                          "cluster.enabled a dead peer must be noticed within "
                                          "2000 ms"));
        /* Without the cluster the wider range stands. */
        ck_assert_int_eq(
            tdm_config_parse_string(RCFG(RSECRET RNODES "timeout = 5000;"), &a, err, sizeof(err)),
            0);
        tdm_config_free(&a);
}
END_TEST
/* ---- end cluster ---- */

static Suite *config_suite(void)
{
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("config");
        tcase_add_test(tc, test_defaults);
        tcase_add_test(tc, test_example_file);
        tcase_add_test(tc, test_physical_block_size);
        tcase_add_loop_test(tc, test_invalid_configs, 0,
                            (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
        tcase_add_test(tc, test_load_missing_file);
        tcase_add_test(tc, test_round_trip);
        tcase_add_test(tc, test_save_failure_keeps_old_file);
        tcase_add_test(tc, test_lun_size_fits_the_file);
        tcase_add_test(tc, test_unwritable_dir_as_user);
        tcase_add_test(tc, test_edits);
        tcase_add_test(tc, test_set_lun_size);
        tcase_add_test(tc, test_repl_parse);
        tcase_add_test(tc, test_repl_defaults);
        tcase_add_test(tc, test_repl_example);
        tcase_add_test(tc, test_repl_round_trip);
        tcase_add_test(tc, test_repl_edits);
        tcase_add_test(tc, test_cluster_group); /* cluster (issue 4) */
        tcase_add_test(tc, test_metrics_group);
        tcase_add_test(tc, test_cluster_fence_peer_and_timers);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(config_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
