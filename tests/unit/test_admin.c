/*
 * Unit tests of tandemd's admin plane (daemon/admin/): the request dispatcher through the
 * table of operations, and the libqb IPC service end to end (ipc.c, and daemon/ctl/client.c)
 * against a live registry, driven by tandemctl's parsing and printing.
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

/* A value of each kind the daemon can take (the registry may still refuse it). */
static const char *sample_value(const struct admin_arg *a)
{
        switch (a->kind) {
        case ADMIN_IQN:
                return IQN1;
        case ADMIN_INITIATOR:
                return INI1;
        case ADMIN_LUN:
                return "0";
        case ADMIN_PATH:
                return "/nonexistent/tandem-test.img";
        case ADMIN_SIZE:
        case ADMIN_LUN_SIZE:
                return "1M";
        case ADMIN_SWITCH:
                return "pause|resume";
        default:
                return "sample-secret-12";
        }
}

/* Every request tandemctl builds has a row, a handler and an answer in tandemd. */
START_TEST(test_dispatch_every_row)
{
        static struct admin_call call;
        size_t n;
        const struct admin_op *ops = admin_ops(&n);
        for (size_t i = 0; i < n; i++) {
                struct admin_values v = {0};
                const struct admin_arg *a;
                bool optional;
                char err[512], sw[32];
                for (size_t k = 0; (a = admin_op_arg(&ops[i], k, &optional)) && !optional; k++) {
                        const char *val = sample_value(a);
                        if (a->kind == ADMIN_SWITCH) /* its first word */
                                snprintf(sw, sizeof(sw), "%.*s", (int)strcspn(val, "|"), val);
                        v.pos[v.n_pos++] = a->kind == ADMIN_SWITCH ? sw : val;
                }
                ck_assert_msg(admin_call_build(&call, &ops[i], &v, err, sizeof(err)) == 0,
                              "%s %s: %s", ops[i].cmd, ops[i].sub ? ops[i].sub : "", err);
                size_t len = tandem__admin__admin_request__get_packed_size(&call.req);
                uint8_t *req = malloc(len + 1), *out = NULL;
                size_t out_len = 0;
                tandem__admin__admin_request__pack(&call.req, req);
                ck_assert_int_eq(admin_dispatch(req, len, &out, &out_len), 0);
                Tandem__Admin__AdminResponse *r =
                    tandem__admin__admin_response__unpack(NULL, out_len, out);
                ck_assert_ptr_nonnull(r);
                ck_assert_msg(r->ok || (r->error && *r->error && strncmp(r->error, "request:", 8)),
                              "%s %s: %s", ops[i].cmd, ops[i].sub ? ops[i].sub : "", r->error);
                tandem__admin__admin_response__free_unpacked(r, NULL);
                free(out);
                free(req);
        }
}
END_TEST

static Suite *admin_suite(void)
{
        Suite *s = suite_create("admin");
        TCase *ipc = tcase_create("ipc");
        tcase_add_checked_fixture(ipc, service_setup, service_teardown);
        tcase_set_timeout(ipc, 60);
        tcase_add_test(ipc, test_ipc_admin_round_trip);
        tcase_add_test(ipc, test_ipc_errors_name_the_field);
        tcase_add_test(ipc, test_ipc_lun_resize);
        tcase_add_test(ipc, test_ipc_not_running);
        tcase_add_test(ipc, test_ipc_refuses_non_root);
        tcase_add_test(ipc, test_dispatch_garbage);
        tcase_add_test(ipc, test_dispatch_every_row);
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
