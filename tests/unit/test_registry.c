/* Unit tests of the live registry (daemon/core/registry.c) on real SCSI and backstore objects. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scsi/scsi_internal.h"
#include "tandem/config.h"
#include "tandem/backstore.h"
#include "tandem/registry.h"
#include "tandem/scsi.h"

#define IQN1 "iqn.2024-01.org.example:t1"
#define IQN2 "iqn.2024-01.org.example:t2"
#define INI1 "iqn.1993-08.org.debian:01:client1"
#define INI2 "iqn.1993-08.org.debian:01:client2"

static char dir[64];
static char conf[PATH_MAX];

static void rm_tree(const char *d)
{
        DIR *dp = opendir(d);
        if (!dp)
                return;
        struct dirent *e;
        char p[PATH_MAX + 256];
        while ((e = readdir(dp))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
                if (unlink(p) < 0)
                        rm_tree(p);
        }
        closedir(dp);
        rmdir(d);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/tandem-test-registry.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/tandem.conf", dir);
}

/* A loop device a test attached (detached here if the test stopped half-way). */
static char loop_dev[64];

static void teardown(void)
{
        tdm_registry_fini();
        if (loop_dev[0]) {
                int fd = open(loop_dev, O_RDWR | O_CLOEXEC);
                if (fd >= 0) {
                        ioctl(fd, LOOP_CLR_FD, 0);
                        close(fd);
                }
                loop_dev[0] = '\0';
        }
        rm_tree(dir);
}

static char *file_in_dir(const char *name)
{
        static char p[4][PATH_MAX];
        static int next;
        char *out = p[next++ % 4];
        snprintf(out, PATH_MAX, "%s/%s", dir, name);
        return out;
}

static char *read_all(const char *path)
{
        FILE *f = fopen(path, "r");
        if (!f)
                return strdup("");
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return strdup(buf);
}

/* A config with IQN1 (ACL INI1, LUN 0 of 1 MiB with a fixed identity) and IQN2 (no ACL). */
static void start_registry(void)
{
        char text[4096], err[512] = "";
        snprintf(text, sizeof(text),
                 "threads = 3;\n"
                 "state_dir = \"%s\";\n"
                 "targets = ( { iqn = \"" IQN1 "\"; alias = \"one\"; acl = [ \"" INI1 "\" ];\n"
                 "  luns = ( { lun = 0; path = \"%s\"; size = \"1M\"; thin = true; wce = false;\n"
                 "             naa = \"67a6e640c3f1a2b4d5e6f708192a3b4c\"; serial = \"serial0\"; } "
                 "); },\n"
                 "  { iqn = \"" IQN2 "\"; } );\n",
                 dir, file_in_dir("lun0.img"));
        struct tdm_config c;
        ck_assert_msg(tdm_config_parse_string(text, &c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(tdm_config_save(conf, &c, err, sizeof(err)), 0);
        /* As tandemd does: a command-line override that must not reach the file. */
        c.threads = 5;
        ck_assert_msg(tdm_registry_init(&c, conf, err, sizeof(err)) == 0, "%s", err);
        tdm_config_free(&c);
}

static struct scsi_lun *live_lun(const char *iqn, uint64_t id)
{
        struct scsi_target *t = tdm_registry_get_target(iqn);
        if (!t)
                return NULL;
        struct scsi_lun *l = scsi_target_get_lun(t, id);
        scsi_target_put(t);
        return l;
}

static void reload(struct tdm_config *c)
{
        char err[512] = "";
        ck_assert_msg(tdm_config_load(conf, c, err, sizeof(err)) == 0, "%s", err);
}

/* ---------------------------------------------------------------- init */

START_TEST(test_init_builds_live_objects)
{
        start_registry();
        struct scsi_target *t = tdm_registry_get_target("IQN.2024-01.org.example:T1");
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->iqn, IQN1);
        ck_assert_str_eq(t->alias, "one");
        ck_assert_uint_eq(t->tpgt, 1);
        struct scsi_lun *l = scsi_target_get_lun(t, 0);
        ck_assert_ptr_nonnull(l);
        static const uint8_t naa[16] = {0x67, 0xa6, 0xe6, 0x40, 0xc3, 0xf1, 0xa2, 0xb4,
                                        0xd5, 0xe6, 0xf7, 0x08, 0x19, 0x2a, 0x3b, 0x4c};
        ck_assert_mem_eq(l->naa, naa, 16);
        ck_assert_str_eq(l->serial, "serial0");
        ck_assert(l->thin);
        ck_assert(!atomic_load(&l->wce));
        ck_assert_uint_eq(l->block_size, 512);
        ck_assert_uint_eq(atomic_load(&l->num_blocks), 2048);
        ck_assert_ptr_null(scsi_target_get_lun(t, 1));
        scsi_lun_put(l);
        scsi_target_put(t);
        struct scsi_target *t2 = tdm_registry_get_target(IQN2);
        ck_assert_ptr_nonnull(t2);
        scsi_target_put(t2);
        ck_assert_ptr_null(tdm_registry_get_target("iqn.2024-01.org.example:none"));
        /* The live config is a copy holding the override; the file is untouched so far. */
        ck_assert_uint_eq(tdm_registry_config()->threads, 5);
        struct stat st;
        ck_assert_int_eq(stat(file_in_dir("lun0.img"), &st), 0);
        ck_assert_int_eq(st.st_size, 1 << 20);
}
END_TEST

START_TEST(test_init_persists_generated_identities)
{
        char text[1024], err[512] = "";
        snprintf(text, sizeof(text),
                 "targets = ( { iqn = \"" IQN1
                 "\"; luns = ( { lun = 7; path = \"%s\"; size = 65536; "
                 "} ); } );",
                 file_in_dir("gen.img"));
        /* The file as an admin wrote it: no identity. */
        FILE *f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        struct tdm_config c, back;
        ck_assert_int_eq(tdm_config_load(conf, &c, err, sizeof(err)), 0);
        ck_assert(c.identities_generated);
        ck_assert_msg(tdm_registry_init(&c, conf, err, sizeof(err)) == 0, "%s", err);
        reload(&back);
        ck_assert(!back.identities_generated);
        ck_assert_str_eq(back.targets[0].luns[0].naa, c.targets[0].luns[0].naa);
        ck_assert_str_eq(back.targets[0].luns[0].serial, c.targets[0].luns[0].serial);
        struct scsi_lun *l = live_lun(IQN1, 7);
        ck_assert_ptr_nonnull(l);
        uint8_t naa[16];
        tdm_naa_to_bytes(back.targets[0].luns[0].naa, naa);
        ck_assert_mem_eq(l->naa, naa, 16);
        ck_assert_str_eq(l->serial, back.targets[0].luns[0].serial);
        scsi_lun_put(l);
        tdm_config_free(&c);
        tdm_config_free(&back);
}
END_TEST

START_TEST(test_init_fails_naming_the_lun)
{
        char text[1024], err[512] = "";
        snprintf(text, sizeof(text),
                 "targets = ( { iqn = \"" IQN1
                 "\"; luns = ( { lun = 0; path = \"%s\"; size = 65536; "
                 "}, { lun = 1; path = \"%s\"; } ); } );",
                 file_in_dir("ok.img"), file_in_dir("missing.img"));
        struct tdm_config c;
        ck_assert_int_eq(tdm_config_parse_string(text, &c, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_init(&c, NULL, err, sizeof(err)), -ENOENT);
        char want[PATH_MAX + 128];
        snprintf(want, sizeof(want),
                 "targets[0].luns[1].path: %s does not exist (give a size to create it)",
                 file_in_dir("missing.img"));
        ck_assert_str_eq(err, want);
        struct scsi_target *t = (struct scsi_target *)1;
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, NULL), -ENOENT);
        ck_assert_ptr_null(t);
        /* Nothing half-started: a second init works. */
        c.targets[0].n_luns = 1;
        ck_assert_msg(tdm_registry_init(&c, NULL, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(tdm_registry_init(&c, NULL, err, sizeof(err)), -EALREADY);
        tdm_config_free(&c);
}
END_TEST

/* ---------------------------------------------------------------- targets */

START_TEST(test_target_add_del)
{
        char err[512] = "";
        start_registry();
        const char *iqn3 = "iqn.2024-01.org.example:t3";
        ck_assert_int_eq(tdm_registry_target_add(iqn3, err, sizeof(err)), 0);
        struct scsi_target *t = tdm_registry_get_target(iqn3);
        ck_assert_ptr_nonnull(t);
        struct tdm_config c;
        reload(&c);
        ck_assert_uint_eq(c.n_targets, 3);
        ck_assert_ptr_nonnull(tdm_config_find_target(&c, iqn3));
        ck_assert_uint_eq(c.threads, 3); /* the file's own setting, not the override */
        tdm_config_free(&c);

        ck_assert_int_eq(tdm_registry_target_add(iqn3, err, sizeof(err)), -EEXIST);
        ck_assert_str_eq(err, "iqn: target \"iqn.2024-01.org.example:t3\" already exists");
        ck_assert_int_eq(tdm_registry_target_add("not-a-name", err, sizeof(err)), -EINVAL);

        /* Deleting a target with a LUN: the LUN leaves the live target too. */
        struct scsi_target *t1 = tdm_registry_get_target(IQN1);
        unsigned gen = atomic_load(&t1->luns_gen);
        ck_assert_int_eq(tdm_registry_target_del(IQN1, err, sizeof(err)), 0);
        ck_assert_ptr_null(tdm_registry_get_target(IQN1));
        ck_assert_ptr_null(scsi_target_get_lun(t1, 0));
        ck_assert_uint_ne(atomic_load(&t1->luns_gen), gen);
        scsi_target_put(t1);
        struct stat st;
        ck_assert_int_eq(stat(file_in_dir("lun0.img"), &st), 0); /* backing file kept */
        reload(&c);
        ck_assert_uint_eq(c.n_targets, 2);
        ck_assert_ptr_null(tdm_config_find_target(&c, IQN1));
        tdm_config_free(&c);
        ck_assert_int_eq(tdm_registry_target_del(IQN1, err, sizeof(err)), -ENOENT);
        ck_assert_str_eq(err, "iqn: no target \"" IQN1 "\"");
        scsi_target_put(t);
}
END_TEST

/* ---------------------------------------------------------------- LUNs */

START_TEST(test_lun_add_live)
{
        char err[512] = "";
        start_registry();
        struct scsi_target *t = tdm_registry_get_target(IQN1);
        /* A session logged in before the change. */
        struct scsi_nexus nx;
        scsi_nexus_init(&nx, t, INI1);
        unsigned seen = nx.luns_gen_seen;

        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 5;
        l.size = 64ull << 30; /* sparse: costs nothing */
        l.thin = true;
        snprintf(l.path, sizeof(l.path), "%s", file_in_dir("big.img"));
        ck_assert_msg(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_ne(atomic_load(&t->luns_gen), seen); /* REPORTED LUNS DATA HAS CHANGED */
        struct scsi_lun *lun = scsi_target_get_lun(t, 5);
        ck_assert_ptr_nonnull(lun);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), (64ull << 30) / 512);
        ck_assert(lun->thin);
        ck_assert(atomic_load(&lun->wce));
        struct stat st;
        ck_assert_int_eq(stat(l.path, &st), 0);
        ck_assert_int_eq(st.st_size, 64ll << 30);
        ck_assert_int_lt(st.st_blocks, 64); /* sparse */

        /* The generated identity is in the file and matches the live LUN. */
        struct tdm_config c;
        reload(&c);
        struct tdm_lun_cfg *saved = tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 5);
        ck_assert_ptr_nonnull(saved);
        ck_assert(tdm_naa_valid(saved->naa));
        uint8_t naa[16];
        tdm_naa_to_bytes(saved->naa, naa);
        ck_assert_mem_eq(lun->naa, naa, 16);
        ck_assert_str_eq(lun->serial, saved->serial);
        ck_assert_uint_eq(saved->size, 64ull << 30);
        tdm_config_free(&c);
        scsi_lun_put(lun);

        /* Same id again, same path again: refused with the field named. */
        ck_assert_int_eq(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)), -EEXIST);
        ck_assert_str_eq(err, "lun: 5 already exists in " IQN1);
        l.lun = 6;
        ck_assert_int_eq(tdm_registry_lun_add(IQN2, &l, err, sizeof(err)), -EEXIST);
        ck_assert_int_eq(strncmp(err, "path: ", 6), 0);
        scsi_target_put(t);
}
END_TEST

/*
 * A writable LUN gets its WRITE ATOMIC journal in the state directory (gone again when the
 * LUN closes cleanly); a read-only LUN opens its existing store read-only and has none.
 */
START_TEST(test_readonly_lun_and_atomic_journal)
{
        char err[512] = "";
        start_registry();
        const char *journal = file_in_dir("lun-67a6e640c3f1a2b4d5e6f708192a3b4c.atomic");
        ck_assert_int_eq(access(journal, F_OK), 0);
        struct scsi_lun *lun0 = live_lun(IQN1, 0);
        ck_assert_uint_eq(scsi_atomic_max_blocks(lun0), SCSI_MAX_ATOMIC_BYTES / 512);
        ck_assert(!lun0->read_only);
        scsi_lun_put(lun0);

        const char *img = file_in_dir("golden.img");
        FILE *f = fopen(img, "w");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(ftruncate(fileno(f), 1 << 20), 0);
        fclose(f);
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 1;
        l.readonly = true;
        l.size = 2 << 20; /* would grow it */
        snprintf(l.path, sizeof(l.path), "%s", img);
        ck_assert_int_eq(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(strncmp(err, "size: a read-only LUN cannot create or grow", 43), 0);
        l.size = 0;
        ck_assert_msg(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)) == 0, "%s", err);
        struct scsi_lun *ro = live_lun(IQN1, 1);
        ck_assert_ptr_nonnull(ro);
        ck_assert(ro->read_only);
        ck_assert_int_eq(fcntl(bs_medium_dev(ro->medium)->fd, F_GETFL) & O_ACCMODE, O_RDONLY);
        ck_assert_uint_eq(atomic_load(&ro->num_blocks), 2048);
        ck_assert_uint_eq(scsi_atomic_max_blocks(ro), 1); /* no journal: nothing to replay */
        char ro_journal[PATH_MAX];
        struct tdm_config c;
        reload(&c);
        struct tdm_lun_cfg *saved = tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 1);
        ck_assert_ptr_nonnull(saved);
        ck_assert(saved->readonly);
        snprintf(ro_journal, sizeof(ro_journal), "%s/lun-%s.atomic", dir, saved->naa);
        tdm_config_free(&c);
        ck_assert_int_eq(access(ro_journal, F_OK), -1);
        scsi_lun_put(ro);

        tdm_registry_fini();
        ck_assert_int_eq(access(journal, F_OK), -1); /* closed cleanly: nothing left to replay */
}
END_TEST

/*
 * physical_block_size reaches the live LUN (READ CAPACITY(16) exponent), is saved, and comes
 * back after a restart; a bad one is refused before any file is created.
 */
START_TEST(test_physical_block_size_lun)
{
        char err[512] = "";
        start_registry();
        struct scsi_lun *lun0 = live_lun(IQN1, 0);
        ck_assert_uint_eq(scsi_lun_lbppb_exponent(lun0), 0); /* default: = block_size */
        scsi_lun_put(lun0);

        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 2;
        l.size = 1 << 20;
        l.thin = true;
        l.physical_block_size = 3000;
        snprintf(l.path, sizeof(l.path), "%s", file_in_dir("e512.img"));
        ck_assert_int_eq(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "physical_block_size: must be block_size (512) times a power of "
                              "two, at most 65536, got 3000");
        ck_assert_int_eq(access(l.path, F_OK), -1);
        ck_assert_ptr_null(live_lun(IQN1, 2));

        l.physical_block_size = 4096;
        ck_assert_msg(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)) == 0, "%s", err);
        struct scsi_lun *lun = live_lun(IQN1, 2);
        ck_assert_ptr_nonnull(lun);
        ck_assert_uint_eq(lun->block_size, 512);
        ck_assert_uint_eq(scsi_lun_lbppb_exponent(lun), 3);
        ck_assert_uint_eq(scsi_lun_granularity_blocks(lun), 8);
        scsi_lun_put(lun);
        tdm_registry_fini();

        struct tdm_config c;
        reload(&c);
        ck_assert_uint_eq(
            tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 2)->physical_block_size, 4096);
        ck_assert_uint_eq(
            tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 0)->physical_block_size, 0);
        /* Restart with a bigger one from the file: the init path passes it on as well. */
        tdm_config_find_lun(tdm_config_find_target(&c, IQN1), 2)->physical_block_size = 32768;
        ck_assert_msg(tdm_registry_init(&c, conf, err, sizeof(err)) == 0, "%s", err);
        tdm_config_free(&c);
        lun = live_lun(IQN1, 2);
        ck_assert_ptr_nonnull(lun);
        ck_assert_uint_eq(scsi_lun_lbppb_exponent(lun), 6);
        ck_assert_uint_eq(scsi_lun_granularity_blocks(lun), 64);
        scsi_lun_put(lun);
}
END_TEST

START_TEST(test_lun_add_failures_change_nothing)
{
        char err[512] = "";
        start_registry();
        char *before = read_all(conf);
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 1;
        l.size = 1 << 20;

        /* Backing store cannot be created. */
        snprintf(l.path, sizeof(l.path), "%s/nodir/x.img", dir);
        int rc = tdm_registry_lun_add(IQN1, &l, err, sizeof(err));
        ck_assert_int_eq(rc, -ENOENT);
        ck_assert_msg(strncmp(err, "path: cannot open ", 18) == 0, "%s", err);
        /* Existing file too small to be one block. */
        l.size = 0;
        snprintf(l.path, sizeof(l.path), "%s", file_in_dir("tiny.img"));
        FILE *f = fopen(l.path, "w");
        fputs("tiny", f);
        fclose(f);
        ck_assert_int_eq(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "is smaller than one block") != NULL, "%s", err);
        /* A size that is not a multiple of the block size. */
        l.size = 1000;
        snprintf(l.path, sizeof(l.path), "%s", file_in_dir("odd.img"));
        ck_assert_int_eq(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "size: must be a positive multiple of 512");
        ck_assert_int_eq(access(l.path, F_OK), -1);

        /* The config cannot be saved: the LUN is not added and its new file is removed. */
        char moved[PATH_MAX + 8];
        snprintf(moved, sizeof(moved), "%s.moved", dir);
        l.size = 1 << 20;
        char outside[PATH_MAX];
        snprintf(outside, sizeof(outside), "/tmp/tandem-test-registry-lun.%d.img", getpid());
        snprintf(l.path, sizeof(l.path), "%s", outside);
        ck_assert_int_eq(rename(dir, moved), 0);
        rc = tdm_registry_lun_add(IQN1, &l, err, sizeof(err));
        ck_assert_int_eq(rename(moved, dir), 0);
        ck_assert_int_eq(rc, -ENOENT);
        ck_assert_msg(strstr(err, "cannot create temporary file") != NULL, "%s", err);
        ck_assert_int_eq(access(outside, F_OK), -1);

        char *after = read_all(conf);
        ck_assert_str_eq(before, after);
        struct scsi_lun *lun = live_lun(IQN1, 1);
        ck_assert_ptr_null(lun);
        ck_assert_uint_eq(
            tdm_config_find_target((struct tdm_config *)tdm_registry_config(), IQN1)->n_luns, 1);
        free(before);
        free(after);
}
END_TEST

START_TEST(test_lun_del_live)
{
        char err[512] = "";
        start_registry();
        struct scsi_target *t = tdm_registry_get_target(IQN1);
        unsigned gen = atomic_load(&t->luns_gen);
        /* A command in flight holds the LUN across its deletion. */
        struct scsi_lun *held = scsi_target_get_lun(t, 0);
        ck_assert_ptr_nonnull(held);
        ck_assert_int_eq(tdm_registry_lun_del(IQN1, 0, err, sizeof(err)), 0);
        ck_assert_ptr_null(scsi_target_get_lun(t, 0));
        ck_assert_uint_ne(atomic_load(&t->luns_gen), gen);
        uint8_t buf[512];
        ck_assert_int_eq(bs_read(bs_medium_dev(held->medium), buf, sizeof(buf), 0), 0);
        scsi_lun_put(held);
        struct tdm_config c;
        reload(&c);
        ck_assert_uint_eq(tdm_config_find_target(&c, IQN1)->n_luns, 0);
        tdm_config_free(&c);
        ck_assert_int_eq(tdm_registry_lun_del(IQN1, 0, err, sizeof(err)), -ENOENT);
        ck_assert_str_eq(err, "lun: no LUN 0 in " IQN1);
        scsi_target_put(t);
}
END_TEST

/* ---------------------------------------------------------------- lun resize */

/* TEST UNIT READY on LUN id through a nexus: 0 for GOOD, else sense key/ASC/ASCQ as 0xKKAAQQ. */
static unsigned tur_on(struct scsi_nexus *nx, uint64_t id)
{
        struct scsi_task t;
        memset(&t, 0, sizeof(t));
        t.cdb_len = 6;
        t.nexus = nx;
        t.target = nx->target;
        t.lun_id = id;
        t.lun = scsi_target_get_lun(nx->target, id);
        scsi_task_execute(&t);
        scsi_lun_put(t.lun);
        unsigned r = t.status == SCSI_STATUS_GOOD
                         ? 0
                         : (unsigned)(t.sense[2] & 0x0f) << 16 | t.sense[12] << 8 | t.sense[13];
        scsi_task_release(&t);
        return r;
}

static uint64_t saved_size(uint64_t id)
{
        struct tdm_config c;
        reload(&c);
        uint64_t size = tdm_config_find_lun(tdm_config_find_target(&c, IQN1), id)->size;
        tdm_config_free(&c);
        return size;
}

static void make_file(const char *path, off_t size)
{
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, size), 0);
        close(fd);
}

static off_t file_size(const char *path)
{
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        return st.st_size;
}

/*
 * A file LUN grows live: the file (still sparse), the LUN's size, the saved config, and one
 * CAPACITY DATA HAS CHANGED for a session that was logged in; blocks past the old end work.
 */
START_TEST(test_lun_resize_file)
{
        char err[512] = "";
        start_registry();
        const char *img = file_in_dir("lun0.img");
        struct scsi_target *t = tdm_registry_get_target(IQN1);
        struct scsi_nexus nx;
        scsi_nexus_init(&nx, t, INI1);
        ck_assert_uint_eq(tur_on(&nx, 0), 0x062900); /* POWER ON RESET first */
        ck_assert_uint_eq(tur_on(&nx, 0), 0);

        uint64_t before = 1, after = 1;
        ck_assert_msg(
            tdm_registry_lun_resize(IQN1, 0, 3 << 20, &before, &after, err, sizeof(err)) == 0, "%s",
            err);
        ck_assert_uint_eq(before, 1 << 20);
        ck_assert_uint_eq(after, 3 << 20);
        struct scsi_lun *lun = live_lun(IQN1, 0);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 6144);
        ck_assert_uint_eq(bs_medium_dev(lun->medium)->size, 3 << 20);
        ck_assert_int_eq(file_size(img), 3 << 20);
        struct stat st;
        ck_assert_int_eq(stat(img, &st), 0);
        ck_assert_int_lt(st.st_blocks, 64); /* grown sparsely */
        ck_assert_uint_eq(saved_size(0), 3 << 20);
        ck_assert_uint_eq(tur_on(&nx, 0), 0x062a09);
        ck_assert_uint_eq(tur_on(&nx, 0), 0);
        /* The last block, far past the old end, takes data that lands in the file. */
        uint8_t w[512], r[512];
        memset(w, 0x5a, sizeof(w));
        ck_assert_int_eq(bs_write(bs_medium_dev(lun->medium), w, sizeof(w), (3 << 20) - 512), 0);
        FILE *f = fopen(img, "r");
        ck_assert_int_eq(fseek(f, (3 << 20) - 512, SEEK_SET), 0);
        ck_assert_uint_eq(fread(r, 1, sizeof(r), f), sizeof(r));
        fclose(f);
        ck_assert_mem_eq(r, w, sizeof(r));

        /* The same size again: fine, and nobody is told anything. */
        unsigned gen = atomic_load(&lun->ua_gen[SCSI_UA_CAPACITY_CHANGED]);
        ck_assert_int_eq(
            tdm_registry_lun_resize(IQN1, 0, 3 << 20, &before, &after, err, sizeof(err)), 0);
        ck_assert_uint_eq(before, 3 << 20);
        ck_assert_uint_eq(after, 3 << 20);
        ck_assert_uint_eq(atomic_load(&lun->ua_gen[SCSI_UA_CAPACITY_CHANGED]), gen);
        ck_assert_uint_eq(tur_on(&nx, 0), 0);
        scsi_lun_put(lun);
        scsi_target_put(t);
}
END_TEST

/* Shrinking, odd sizes, no size, unknown LUNs: refused with the field named, nothing changes. */
START_TEST(test_lun_resize_refusals)
{
        char err[512] = "";
        start_registry();
        const char *img = file_in_dir("lun0.img");
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 0, 2 << 20, NULL, NULL, err, sizeof(err)),
                         0);
        char *before = read_all(conf);
        struct scsi_lun *lun = live_lun(IQN1, 0);
        unsigned gen = atomic_load(&lun->ua_gen[SCSI_UA_CAPACITY_CHANGED]);

        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 0, 1 << 20, NULL, NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "size: 1048576 bytes is less than the LUN has (2097152): shrinking "
                              "is refused (it would cut off the end of the filesystem or VMFS "
                              "datastore on it)");
        ck_assert_int_eq(
            tdm_registry_lun_resize(IQN1, 0, (3 << 20) + 100, NULL, NULL, err, sizeof(err)),
            -EINVAL);
        ck_assert_str_eq(err, "size: must be a multiple of the block size (512), got 3145828");
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 0, 0, NULL, NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_int_eq(strncmp(err, "size: missing: a LUN on a file needs the new size", 49), 0);
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 4, 4 << 20, NULL, NULL, err, sizeof(err)),
                         -ENOENT);
        ck_assert_str_eq(err, "lun: no LUN 4 in " IQN1);
        ck_assert_int_eq(tdm_registry_lun_resize("iqn.2024-01.org.example:none", 0, 4 << 20, NULL,
                                                 NULL, err, sizeof(err)),
                         -ENOENT);
        ck_assert_str_eq(err, "iqn: no target \"iqn.2024-01.org.example:none\"");
        /* A file grown behind tandemd's back: the LUN may not end short of it. */
        ck_assert_int_eq(truncate(img, 5 << 20), 0);
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 0, 4 << 20, NULL, NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "already has 5242880 bytes: give at least that") != NULL, "%s",
                      err);
        ck_assert_int_eq(file_size(img), 5 << 20);

        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 4096);
        ck_assert_uint_eq(atomic_load(&lun->ua_gen[SCSI_UA_CAPACITY_CHANGED]), gen);
        char *after = read_all(conf);
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        /* Taking the whole file is fine. */
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 0, 5 << 20, NULL, NULL, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 10240);
        scsi_lun_put(lun);

        /* A read-only LUN's file is never grown. */
        const char *golden = file_in_dir("golden.img");
        make_file(golden, 1 << 20);
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 1;
        l.readonly = true;
        snprintf(l.path, sizeof(l.path), "%s", golden);
        ck_assert_msg(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 1, 2 << 20, NULL, NULL, err, sizeof(err)),
                         -EROFS);
        ck_assert_str_eq(err, "size: LUN 1 is read-only: its file is never grown");
        ck_assert_int_eq(file_size(golden), 1 << 20);
}
END_TEST

/* The config cannot be saved: the file shrinks back, the LUN and its sessions see nothing. */
START_TEST(test_lun_resize_save_failure_changes_nothing)
{
        char err[512] = "";
        start_registry();
        char *before = read_all(conf);
        struct scsi_lun *lun = live_lun(IQN1, 0);
        unsigned gen = atomic_load(&lun->ua_gen[SCSI_UA_CAPACITY_CHANGED]);
        char moved[PATH_MAX + 8];
        snprintf(moved, sizeof(moved), "%s.moved", dir);
        ck_assert_int_eq(rename(dir, moved), 0);
        int rc = tdm_registry_lun_resize(IQN1, 0, 8 << 20, NULL, NULL, err, sizeof(err));
        ck_assert_int_eq(rename(moved, dir), 0);
        ck_assert_int_eq(rc, -ENOENT);
        ck_assert_msg(strstr(err, "cannot create temporary file") != NULL, "%s", err);
        ck_assert_int_eq(file_size(file_in_dir("lun0.img")), 1 << 20);
        ck_assert_uint_eq(bs_medium_dev(lun->medium)->size, 1 << 20);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 2048);
        ck_assert_uint_eq(atomic_load(&lun->ua_gen[SCSI_UA_CAPACITY_CHANGED]), gen);
        ck_assert_uint_eq(
            tdm_config_find_lun(
                tdm_config_find_target((struct tdm_config *)tdm_registry_config(), IQN1), 0)
                ->size,
            1 << 20);
        char *after = read_all(conf);
        ck_assert_str_eq(before, after);
        free(before);
        free(after);
        /* And it works once the file can be saved again. */
        ck_assert_msg(tdm_registry_lun_resize(IQN1, 0, 8 << 20, NULL, NULL, err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 16384);
        ck_assert_uint_eq(saved_size(0), 8 << 20);
        scsi_lun_put(lun);
}
END_TEST

/* A file that grew while tandemd was down: the LUN comes up with all of it. */
START_TEST(test_init_exposes_grown_file)
{
        char err[512] = "";
        start_registry();
        tdm_registry_fini();
        ck_assert_int_eq(truncate(file_in_dir("lun0.img"), 3 << 20), 0);
        struct tdm_config c;
        reload(&c);
        ck_assert_msg(tdm_registry_init(&c, conf, err, sizeof(err)) == 0, "%s", err);
        tdm_config_free(&c);
        struct scsi_lun *lun = live_lun(IQN1, 0);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 6144);
        scsi_lun_put(lun);
        ck_assert_uint_eq(saved_size(0), 1 << 20); /* the configured minimum is kept */
}
END_TEST

/* A loop device over a file in the test directory; "" in dev when loop devices are missing. */
static void loop_attach(const char *file, char *dev, size_t devlen)
{
        dev[0] = '\0';
        int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return;
        int ffd = open(file, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(ffd, 0);
        for (int tries = 0; tries < 20 && !dev[0]; tries++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        break;
                char path[64];
                snprintf(path, sizeof(path), "/dev/loop%d", n);
                int lfd = open(path, O_RDWR | O_CLOEXEC);
                if (lfd < 0)
                        break; /* no device node (container) */
                if (ioctl(lfd, LOOP_SET_FD, ffd) == 0)
                        snprintf(dev, devlen, "%s", path);
                close(lfd); /* EBUSY: someone else took it meanwhile; ask again */
        }
        close(ffd);
        close(ctl);
}

static void loop_ioctl(const char *dev, unsigned long req)
{
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ioctl(fd, req, 0), 0);
        close(fd);
}

/*
 * A block device LUN re-reads its size after the device grew (losetup -c stands in for
 * lvextend); a size must be the device's; a device that shrank is refused.
 */
START_TEST(test_lun_resize_block_device)
{
        char err[512] = "", dev[64];
        start_registry();
        const char *backing = file_in_dir("lv.img");
        make_file(backing, 1 << 20);
        loop_attach(backing, loop_dev, sizeof(loop_dev));
        snprintf(dev, sizeof(dev), "%s", loop_dev);
        if (!dev[0]) {
                fprintf(stderr, "test_lun_resize_block_device: no loop device, skipped\n");
                return;
        }
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 2;
        snprintf(l.path, sizeof(l.path), "%s", dev);
        int rc = tdm_registry_lun_add(IQN1, &l, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s", err);
        struct scsi_target *t = tdm_registry_get_target(IQN1);
        struct scsi_nexus nx;
        scsi_nexus_init(&nx, t, INI1);
        ck_assert_uint_eq(tur_on(&nx, 2), 0x062900);
        struct scsi_lun *lun = live_lun(IQN1, 2);
        ck_assert(bs_medium_dev(lun->medium)->is_blockdev);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 2048);

        /* Not grown yet: nothing happens. */
        uint64_t before = 0, after = 0;
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 2, 0, &before, &after, err, sizeof(err)), 0);
        ck_assert_uint_eq(before, 1 << 20);
        ck_assert_uint_eq(after, 1 << 20);
        ck_assert_uint_eq(tur_on(&nx, 2), 0);

        ck_assert_int_eq(truncate(backing, 3 << 20), 0);
        loop_ioctl(dev, LOOP_SET_CAPACITY);
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 2, 4 << 20, NULL, NULL, err, sizeof(err)),
                         -EINVAL);
        char want[512];
        snprintf(want, sizeof(want),
                 "size: 4194304 bytes is not the size of %s (3145728 bytes): tandem cannot "
                 "resize a block device; grow it first (lvextend), then resize without a size",
                 dev);
        ck_assert_str_eq(err, want);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 2048);
        ck_assert_int_eq(
            tdm_registry_lun_resize(IQN1, 2, 3 << 20, &before, &after, err, sizeof(err)),
            0); /* the device's own size may be given */
        ck_assert_uint_eq(before, 1 << 20);
        ck_assert_uint_eq(after, 3 << 20);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 6144);
        ck_assert_uint_eq(bs_medium_dev(lun->medium)->size, 3 << 20);
        ck_assert_uint_eq(saved_size(2), 0); /* "the device's size" stays so */
        ck_assert_uint_eq(tur_on(&nx, 2), 0x062a09);
        ck_assert_uint_eq(tur_on(&nx, 2), 0);
        /* Past the old end, through the descriptor opened before the growth. */
        uint8_t w[512], r[512];
        memset(w, 0xc3, sizeof(w));
        ck_assert_int_eq(bs_write(bs_medium_dev(lun->medium), w, sizeof(w), (3 << 20) - 512), 0);
        ck_assert_int_eq(bs_flush(bs_medium_dev(lun->medium)), 0);
        ck_assert_int_eq(bs_read(bs_medium_dev(lun->medium), r, sizeof(r), (3 << 20) - 512), 0);
        ck_assert_mem_eq(r, w, sizeof(r));

        /* lvreduce behind our back: refused, the LUN keeps its size. */
        ck_assert_int_eq(truncate(backing, 2 << 20), 0);
        loop_ioctl(dev, LOOP_SET_CAPACITY);
        ck_assert_int_eq(tdm_registry_lun_resize(IQN1, 2, 0, NULL, NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "has shrunk to 2097152 bytes, less than the LUN (3145728): "
                                  "shrinking is refused") != NULL,
                      "%s", err);
        ck_assert_uint_eq(atomic_load(&lun->num_blocks), 6144);

        scsi_lun_put(lun);
        scsi_target_put(t);
        tdm_registry_fini(); /* closes the device */
        loop_ioctl(dev, LOOP_CLR_FD);
        loop_dev[0] = '\0';
}
END_TEST

/* ---------------------------------------------------------------- ACL and CHAP */

static void collect_visible(void *arg, const char *iqn, uint16_t tpgt)
{
        char *out = arg;
        char line[300];
        snprintf(line, sizeof(line), "%s,%u;", iqn, tpgt);
        strcat(out, line);
}

START_TEST(test_acl_decisions)
{
        char err[512] = "";
        start_registry();
        struct scsi_target *t = NULL;
        struct tdm_auth auth;
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), 0);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->iqn, IQN1);
        scsi_target_put(t);
        ck_assert_int_eq(
            tdm_registry_login_target(IQN1, "IQN.1993-08.ORG.DEBIAN:01:CLIENT1", &t, &auth), 0);
        scsi_target_put(t);
        t = NULL;
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI2, &t, &auth), -EACCES);
        ck_assert_ptr_null(t);
        /* Empty ACL: nobody. */
        ck_assert_int_eq(tdm_registry_login_target(IQN2, INI1, &t, &auth), -EACCES);
        ck_assert_int_eq(tdm_registry_login_target("iqn.2024-01.org.example:none", INI1, &t, &auth),
                         -ENOENT);

        char seen[1024] = "";
        tdm_registry_for_each_visible(INI1, NULL, collect_visible, seen);
        ck_assert_str_eq(seen, IQN1 ",1;");
        seen[0] = '\0';
        tdm_registry_for_each_visible(INI2, NULL, collect_visible, seen);
        ck_assert_str_eq(seen, "");

        ck_assert_int_eq(tdm_registry_acl_add(IQN2, "ALL", err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_login_target(IQN2, INI2, &t, &auth), 0);
        scsi_target_put(t);
        seen[0] = '\0';
        tdm_registry_for_each_visible(INI1, NULL, collect_visible, seen);
        ck_assert_str_eq(seen, IQN1 ",1;" IQN2 ",1;");
        seen[0] = '\0';
        tdm_registry_for_each_visible(INI1, IQN2, collect_visible, seen);
        ck_assert_str_eq(seen, IQN2 ",1;");

        ck_assert_int_eq(tdm_registry_acl_add(IQN1, INI2, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI2, &t, &auth), 0);
        scsi_target_put(t);
        ck_assert_int_eq(tdm_registry_acl_del(IQN1, INI1, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), -EACCES);
        ck_assert_int_eq(tdm_registry_acl_del(IQN1, INI1, err, sizeof(err)), -ENOENT);
        ck_assert_str_eq(err, "initiator: " INI1 " is not in the ACL of " IQN1);
        ck_assert_int_eq(tdm_registry_acl_add(IQN1, "x", err, sizeof(err)), -EINVAL);

        struct tdm_config c;
        reload(&c);
        struct tdm_target_cfg *t1 = tdm_config_find_target(&c, IQN1);
        ck_assert_uint_eq(t1->n_acl, 1);
        ck_assert_str_eq(t1->acl[0], INI2);
        ck_assert_str_eq(tdm_config_find_target(&c, IQN2)->acl[0], "ALL");
        tdm_config_free(&c);
}
END_TEST

START_TEST(test_chap_lookups)
{
        char err[512] = "";
        start_registry();
        struct scsi_target *t;
        struct tdm_auth auth;
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), 0);
        scsi_target_put(t);
        ck_assert(!auth.chap.enabled);

        struct tdm_chap_cfg chap = {.enabled = true, .mutual = true};
        strcpy(chap.user, "alice");
        strcpy(chap.secret, "alice-secret-1");
        strcpy(chap.mutual_user, "target");
        strcpy(chap.mutual_secret, "target-secret-1");
        ck_assert_int_eq(tdm_registry_chap_set(IQN1, &chap, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), 0);
        scsi_target_put(t);
        ck_assert(auth.chap.enabled && auth.chap.mutual);
        ck_assert_str_eq(auth.chap.user, "alice");
        ck_assert_str_eq(auth.chap.secret, "alice-secret-1");
        ck_assert_str_eq(auth.chap.mutual_secret, "target-secret-1");

        tdm_registry_discovery_auth(&auth);
        ck_assert(!auth.chap.enabled);
        chap.mutual = false;
        strcpy(chap.user, "disco");
        ck_assert_int_eq(tdm_registry_chap_set(NULL, &chap, err, sizeof(err)), 0);
        tdm_registry_discovery_auth(&auth);
        ck_assert(auth.chap.enabled && !auth.chap.mutual);
        ck_assert_str_eq(auth.chap.user, "disco");
        ck_assert_str_eq(auth.chap.mutual_user, "");

        strcpy(chap.secret, "short");
        ck_assert_int_eq(tdm_registry_chap_set(IQN2, &chap, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "chap.secret: must be 12..255 printable characters (RFC 7143 wants "
                              "at least 96 bits)");
        ck_assert_int_eq(
            tdm_registry_chap_set("iqn.2024-01.org.example:none", &chap, err, sizeof(err)),
            -EINVAL); /* the secret is checked first */

        struct tdm_config c;
        reload(&c);
        ck_assert_str_eq(c.discovery_chap.user, "disco");
        ck_assert_str_eq(tdm_config_find_target(&c, IQN1)->chap.mutual_user, "target");
        tdm_config_free(&c);

        struct tdm_chap_cfg off = {0};
        ck_assert_int_eq(tdm_registry_chap_set(IQN1, &off, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_login_target(IQN1, INI1, &t, &auth), 0);
        scsi_target_put(t);
        ck_assert(!auth.chap.enabled);
}
END_TEST

/* ---------------------------------------------------------------- persistence */

START_TEST(test_reload_gives_same_identities)
{
        char err[512] = "";
        start_registry();
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.size = 1 << 20;
        uint8_t naa[3][16];
        char serial[3][33];
        for (int i = 0; i < 3; i++) {
                l.lun = (uint64_t)i + 1;
                snprintf(l.path, sizeof(l.path), "%s/id%d.img", dir, i);
                ck_assert_msg(tdm_registry_lun_add(IQN2, &l, err, sizeof(err)) == 0, "%s", err);
                struct scsi_lun *lun = live_lun(IQN2, l.lun);
                memcpy(naa[i], lun->naa, 16);
                memcpy(serial[i], lun->serial, 33);
                scsi_lun_put(lun);
        }
        ck_assert_mem_ne(naa[0], naa[1], 16);
        tdm_registry_fini();

        struct tdm_config c;
        reload(&c);
        ck_assert(!c.identities_generated);
        ck_assert_msg(tdm_registry_init(&c, conf, err, sizeof(err)) == 0, "%s", err);
        tdm_config_free(&c);
        for (int i = 0; i < 3; i++) {
                struct scsi_lun *lun = live_lun(IQN2, (uint64_t)i + 1);
                ck_assert_ptr_nonnull(lun);
                ck_assert_mem_eq(lun->naa, naa[i], 16);
                ck_assert_str_eq(lun->serial, serial[i]);
                scsi_lun_put(lun);
        }
}
END_TEST

START_TEST(test_not_persisted_without_path)
{
        char err[512] = "";
        struct tdm_config c;
        ck_assert_int_eq(tdm_config_parse_string("", &c, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_init(&c, NULL, err, sizeof(err)), 0);
        ck_assert_int_eq(tdm_registry_target_add(IQN1, err, sizeof(err)), 0);
        ck_assert_int_eq(access(conf, F_OK), -1);
        ck_assert_uint_eq(tdm_registry_config()->n_targets, 1);
        tdm_config_free(&c);
}
END_TEST

START_TEST(test_first_save_uses_running_settings)
{
        /* No file yet: the first save writes the settings the daemon runs with. */
        char err[512] = "";
        struct tdm_config c, back;
        ck_assert_int_eq(
            tdm_config_parse_string("threads = 6; instance = \"node-a\";", &c, err, sizeof(err)),
            0);
        ck_assert_int_eq(tdm_registry_init(&c, conf, err, sizeof(err)), 0);
        ck_assert_int_eq(access(conf, F_OK), -1); /* nothing to save yet */
        ck_assert_int_eq(tdm_registry_target_add(IQN1, err, sizeof(err)), 0);
        reload(&back);
        ck_assert_uint_eq(back.threads, 6);
        ck_assert_str_eq(back.instance, "node-a");
        ck_assert_uint_eq(back.n_targets, 1);
        tdm_config_free(&c);
        tdm_config_free(&back);
}
END_TEST

/* ---------------------------------------------------------------- concurrency */

static atomic_bool stop_logins;

static void *login_loop(void *arg)
{
        (void)arg;
        unsigned long ok = 0;
        while (!atomic_load(&stop_logins)) {
                struct scsi_target *t;
                struct tdm_auth auth;
                if (tdm_registry_login_target(IQN1, INI1, &t, &auth) == 0) {
                        struct scsi_lun *l = scsi_target_get_lun(t, 0);
                        if (l)
                                scsi_lun_put(l);
                        scsi_target_put(t);
                        ok++;
                }
                char seen[1024] = "";
                tdm_registry_for_each_visible(INI1, NULL, collect_visible, seen);
        }
        return (void *)ok;
}

START_TEST(test_logins_during_admin_changes)
{
        char err[512] = "";
        start_registry();
        pthread_t th[2];
        atomic_store(&stop_logins, false);
        for (int i = 0; i < 2; i++)
                pthread_create(&th[i], NULL, login_loop, NULL);
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = 0;
        l.size = 1 << 20;
        snprintf(l.path, sizeof(l.path), "%s", file_in_dir("lun0.img"));
        for (int i = 0; i < 20; i++) {
                ck_assert_int_eq(tdm_registry_target_del(IQN1, err, sizeof(err)), 0);
                ck_assert_int_eq(tdm_registry_target_add(IQN1, err, sizeof(err)), 0);
                ck_assert_int_eq(tdm_registry_acl_add(IQN1, INI1, err, sizeof(err)), 0);
                ck_assert_msg(tdm_registry_lun_add(IQN1, &l, err, sizeof(err)) == 0, "%s", err);
                l.naa[0] = l.serial[0] = '\0';
        }
        atomic_store(&stop_logins, true);
        unsigned long total = 0;
        for (int i = 0; i < 2; i++) {
                void *r;
                pthread_join(th[i], &r);
                total += (unsigned long)r;
        }
        ck_assert_uint_gt(total, 0);
}
END_TEST

static Suite *registry_suite(void)
{
        Suite *s = suite_create("registry");
        TCase *tc = tcase_create("registry");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_init_builds_live_objects);
        tcase_add_test(tc, test_init_persists_generated_identities);
        tcase_add_test(tc, test_init_fails_naming_the_lun);
        tcase_add_test(tc, test_target_add_del);
        tcase_add_test(tc, test_lun_add_live);
        tcase_add_test(tc, test_readonly_lun_and_atomic_journal);
        tcase_add_test(tc, test_physical_block_size_lun);
        tcase_add_test(tc, test_lun_add_failures_change_nothing);
        tcase_add_test(tc, test_lun_del_live);
        tcase_add_test(tc, test_lun_resize_file);
        tcase_add_test(tc, test_lun_resize_refusals);
        tcase_add_test(tc, test_lun_resize_save_failure_changes_nothing);
        tcase_add_test(tc, test_init_exposes_grown_file);
        tcase_add_test(tc, test_lun_resize_block_device);
        tcase_add_test(tc, test_acl_decisions);
        tcase_add_test(tc, test_chap_lookups);
        tcase_add_test(tc, test_reload_gives_same_identities);
        tcase_add_test(tc, test_not_persisted_without_path);
        tcase_add_test(tc, test_first_save_uses_running_settings);
        tcase_add_test(tc, test_logins_during_admin_changes);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(registry_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
