/*
 * The backstore medium's engines (io_uring rings, the thread pool) on real net loops: data
 * round trips, EOF zero fill, short writes resubmitted, FUA either way, O_DIRECT bounces,
 * write-zeroes/unmap with their fallback, group commit across loops, errors. Every test runs
 * once per engine (_i: 0 io_uring, 1 threads).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tandem/backstore.h"
#include "tandem/medium.h"
#include "tandem/net.h"

static char dir[] = "/var/tmp/tandem-bse-XXXXXX";
static char path[256];
static struct net_loop *loops[2];

static void setup(void)
{
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/lun.img", dir);
        for (int i = 0; i < 2; i++) {
                loops[i] = net_loop_new(i ? "bse-1" : "bse-0");
                ck_assert_ptr_nonnull(loops[i]);
                ck_assert_int_eq(net_loop_start(loops[i]), 0);
        }
}

static void teardown(void)
{
        for (int i = 0; i < 2; i++)
                net_loop_stop(loops[i]);
        net_pool_shutdown();
        unlink(path);
        rmdir(dir);
        strcpy(dir, "/var/tmp/tandem-bse-XXXXXX");
}

static const enum bs_engine engines[2] = {BS_ENGINE_URING, BS_ENGINE_THREADS};

static struct tdm_medium *open_medium(int engine, uint64_t size, bool direct, bool read_only)
{
        setenv("TANDEM_BACKSTORE_IO", engine ? "threads" : "uring", 1);
        struct bs_open_opts o = {.create_size = size, .direct = direct, .read_only = read_only};
        struct bs_dev *bs = NULL;
        ck_assert_int_eq(bs_open(path, &o, &bs), 0);
        struct tdm_medium *m = NULL;
        ck_assert_int_eq(bs_medium_create(bs, &m), 0);
        ck_assert_int_eq(bs_medium_engine(m), engines[engine]);
        return m;
}

/* ---- running requests on a loop and waiting for them ---- */

struct batch {
        struct net_post post;
        struct tdm_medium *m;
        struct tdm_mio *ios;
        int n;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int left;
        int wrong_thread; /* completions not on the submitting loop */
        bool submitting;
        int in_submit; /* completions inside tdm_medium_submit */
};

static void io_done(struct tdm_mio *io)
{
        struct batch *b = io->arg;
        bool wrong = net_loop_current() != io->loop;
        pthread_mutex_lock(&b->lock);
        b->wrong_thread += wrong;
        b->in_submit += b->submitting;
        b->left--;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
}

/* The poster holds one count of its own: the batch may not go before the loop is done. */
static void batch_post(struct net_post *p)
{
        struct batch *b = (struct batch *)p;
        for (int i = 0; i < b->n; i++) {
                b->submitting = true;
                tdm_medium_submit(b->m, &b->ios[i]);
                b->submitting = false;
        }
        pthread_mutex_lock(&b->lock);
        b->left--;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
}

static void batch_start(struct batch *b, struct net_loop *l, struct tdm_medium *m,
                        struct tdm_mio *ios, int n)
{
        *b = (struct batch){.m = m, .ios = ios, .n = n, .left = n + 1};
        pthread_mutex_init(&b->lock, NULL);
        pthread_cond_init(&b->cond, NULL);
        for (int i = 0; i < n; i++) {
                ios[i].done = io_done;
                ios[i].arg = b;
        }
        b->post.fn = batch_post;
        net_loop_post(l, &b->post);
}

static void batch_wait(struct batch *b)
{
        pthread_mutex_lock(&b->lock);
        while (b->left)
                pthread_cond_wait(&b->cond, &b->lock);
        pthread_mutex_unlock(&b->lock);
        ck_assert_int_eq(b->wrong_thread, 0);
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
}

/* Runs n requests submitted in one round of loop l; returns when all are done. */
static void run_on(struct net_loop *l, struct tdm_medium *m, struct tdm_mio *ios, int n)
{
        struct batch b;
        batch_start(&b, l, m, ios, n);
        batch_wait(&b);
}

static int run1(struct tdm_medium *m, enum tdm_mio_op op, void *buf, uint64_t len, uint64_t off,
                uint32_t flags)
{
        struct tdm_mio io = {.op = op, .flags = flags, .off = off, .len = len, .buf = buf};
        run_on(loops[0], m, &io, 1);
        return io.result;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (uint8_t)(i * 31 + seed);
}

static bool all_zero(const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

/* ---- tests ---- */

START_TEST(read_write_round_trip)
{
        struct tdm_medium *m = open_medium(_i, 16 << 20, false, false);
        enum { N = 32, LEN = 16384 };
        static uint8_t w[N][LEN], r[N][LEN];
        struct tdm_mio ios[N];
        for (int i = 0; i < N; i++) {
                fill(w[i], LEN, (unsigned)i);
                ios[i] = (struct tdm_mio){
                    .op = TDM_MIO_WRITE, .off = (uint64_t)i * LEN * 3, .len = LEN, .buf = w[i]};
        }
        run_on(loops[0], m, ios, N); /* 32 in one round: one submission */
        for (int i = 0; i < N; i++) {
                ck_assert_int_eq(ios[i].result, 0);
                ios[i] = (struct tdm_mio){
                    .op = TDM_MIO_READ, .off = (uint64_t)i * LEN * 3, .len = LEN, .buf = r[i]};
        }
        run_on(loops[1], m, ios, N);
        for (int i = 0; i < N; i++) {
                ck_assert_int_eq(ios[i].result, 0);
                ck_assert_mem_eq(w[i], r[i], LEN);
        }
        ck_assert_uint_eq(atomic_load(&bs_medium_dev(m)->write_seq), N);
        tdm_medium_destroy(m);
}
END_TEST

START_TEST(read_past_eof_is_zeroes)
{
        struct tdm_medium *m = open_medium(_i, 8192, false, false);
        uint8_t w[8192], r[16384];
        fill(w, sizeof(w), 3);
        ck_assert_int_eq(bs_write(bs_medium_dev(m), w, sizeof(w), 0), 0);
        memset(r, 0xff, sizeof(r));
        /* A short read (4 KiB left before EOF), the rest again, then 0 bytes: zero fill. */
        ck_assert_int_eq(run1(m, TDM_MIO_READ, r, sizeof(r), 4096, 0), 0);
        ck_assert_mem_eq(r, w + 4096, 4096);
        ck_assert(all_zero(r + 4096, sizeof(r) - 4096));
        tdm_medium_destroy(m);
}
END_TEST

START_TEST(short_write_is_resubmitted)
{
        /* RLIMIT_FSIZE cuts a write at the limit (short), and the rest then fails EFBIG. */
        struct tdm_medium *m = open_medium(_i, 1 << 20, false, false);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {.rlim_cur = (1 << 20) + 2048, .rlim_max = RLIM_INFINITY};
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
        uint8_t w[8192], r[8192];
        fill(w, sizeof(w), 9);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, w, sizeof(w), (1 << 20) - 4096, 0), -EFBIG);
        ck_assert_int_eq(pread(bs_medium_dev(m)->fd, r, 6144, (1 << 20) - 4096), 6144);
        ck_assert_mem_eq(r, w, 6144);
        tdm_medium_destroy(m);
}
END_TEST

START_TEST(fua_is_durable_either_way)
{
        struct tdm_medium *m = open_medium(_i, 1 << 20, false, false);
        struct bs_dev *bs = bs_medium_dev(m);
        uint8_t w[4096];
        fill(w, sizeof(w), 1);
        /* Default: the write, then a (group) fdatasync. */
        uint64_t f0 = bs->flush_count;
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, w, sizeof(w), 0, TDM_MIO_FUA), 0);
        ck_assert_uint_eq(bs->flush_count, f0 + 1);
        ck_assert_uint_eq(bs->durable_seq, atomic_load(&bs->write_seq));
        /* Without FUA nothing is flushed. */
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, w, sizeof(w), 4096, 0), 0);
        ck_assert_uint_eq(bs->flush_count, f0 + 1);
        /* fua_dsync: RWF_DSYNC on the write itself, no separate fdatasync. */
        bs->fua_dsync = true;
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, w, sizeof(w), 8192, TDM_MIO_FUA), 0);
        ck_assert_uint_eq(atomic_load(&bs->dsync_writes), 1);
        ck_assert_uint_eq(bs->flush_count, f0 + 1);
        /* FUA on write-zeroes flushes too. */
        bs->fua_dsync = false;
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE_ZEROES, NULL, 4096, 0, TDM_MIO_FUA), 0);
        ck_assert_uint_eq(bs->flush_count, f0 + 2);
        tdm_medium_destroy(m);
}
END_TEST

START_TEST(direct_io_bounces_unaligned_buffers)
{
        struct tdm_medium *m = open_medium(_i, 1 << 20, true, false);
        ck_assert(bs_medium_dev(m)->direct);
        uint8_t *wmem = malloc(3 * 4096 + 1), *rmem = malloc(3 * 4096 + 3);
        uint8_t *w = wmem + 1, *r = rmem + 3; /* as receive-buffer slices come */
        fill(w, 3 * 4096, 5);
        memset(r, 0, 3 * 4096);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, w, 3 * 4096, 8192, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_READ, r, 3 * 4096, 8192, 0), 0);
        ck_assert_mem_eq(w, r, 3 * 4096);
        /* Aligned memory goes straight through. */
        uint8_t *a;
        ck_assert_int_eq(posix_memalign((void **)&a, 4096, 4096), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_READ, a, 4096, 8192, 0), 0);
        ck_assert_mem_eq(a, w, 4096);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, a, 4096, 0, TDM_MIO_FUA), 0);
        free(a);
        free(wmem);
        free(rmem);
        tdm_medium_destroy(m);
}
END_TEST

START_TEST(write_zeroes_and_unmap)
{
        struct tdm_medium *m = open_medium(_i, 1 << 20, false, false);
        struct bs_dev *bs = bs_medium_dev(m);
        uint8_t w[65536], r[65536];
        fill(w, sizeof(w), 7);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, w, sizeof(w), 0, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_UNMAP, NULL, 8192, 4096, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE_ZEROES, NULL, 4096, 32768, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_READ, r, sizeof(r), 0, 0), 0);
        ck_assert_mem_eq(r, w, 4096);
        ck_assert(all_zero(r + 4096, 8192));
        ck_assert_mem_eq(r + 12288, w + 12288, 32768 - 12288);
        ck_assert(all_zero(r + 32768, 4096));
        ck_assert_mem_eq(r + 36864, w + 36864, sizeof(r) - 36864);
        /* Where fallocate cannot, zeroes are written (as on tmpfs without ZERO_RANGE). */
        atomic_store(&bs->no_zero_range, true);
        atomic_store(&bs->no_punch_hole, true);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE_ZEROES, NULL, 4096, 0, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_UNMAP, NULL, 4096, 40960, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_READ, r, sizeof(r), 0, 0), 0);
        ck_assert(all_zero(r, 4096));
        ck_assert(all_zero(r + 40960, 4096));
        ck_assert_mem_eq(r + 45056, w + 45056, sizeof(r) - 45056);
        tdm_medium_destroy(m);
}
END_TEST

START_TEST(concurrent_flushes_share_fdatasync)
{
        struct tdm_medium *m = open_medium(_i, 1 << 20, false, false);
        struct bs_dev *bs = bs_medium_dev(m);
        enum { N = 32 };
        static uint8_t blk[N][512];
        struct tdm_mio ios[2][N];
        for (int round = 0; round < 5; round++) {
                uint64_t f0 = bs->flush_count;
                for (int l = 0; l < 2; l++)
                        for (int i = 0; i < N; i++)
                                ios[l][i] = (struct tdm_mio){.op = TDM_MIO_WRITE,
                                                             .off = (uint64_t)(l * N + i) * 512,
                                                             .len = 512,
                                                             .buf = blk[i]};
                run_on(loops[0], m, ios[0], N);
                run_on(loops[1], m, ios[1], N);
                /* N flushes asked on each of two loops at once. */
                for (int l = 0; l < 2; l++)
                        for (int i = 0; i < N; i++)
                                ios[l][i] = (struct tdm_mio){.op = TDM_MIO_FLUSH};
                struct batch b[2];
                batch_start(&b[0], loops[0], m, ios[0], N);
                batch_start(&b[1], loops[1], m, ios[1], N);
                batch_wait(&b[0]);
                batch_wait(&b[1]);
                for (int l = 0; l < 2; l++)
                        for (int i = 0; i < N; i++)
                                ck_assert_int_eq(ios[l][i].result, 0);
                uint64_t made = bs->flush_count - f0;
                ck_assert_uint_ge(made, 1);
                ck_assert_uint_le(made, 2); /* one per loop at most: each joins or follows */
                ck_assert_uint_eq(bs->durable_seq, atomic_load(&bs->write_seq));
        }
        /* Nothing written since: a flush costs no fdatasync. */
        uint64_t f1 = bs->flush_count;
        ck_assert_int_eq(run1(m, TDM_MIO_FLUSH, NULL, 0, 0, 0), 0);
        ck_assert_uint_eq(bs->flush_count, f1);
        /* Blocking callers share the same state. */
        ck_assert_int_eq(bs_write(bs, blk[0], 512, 0), 0);
        ck_assert_int_eq(bs_flush(bs), 0);
        ck_assert_uint_eq(bs->flush_count, f1 + 1);
        tdm_medium_destroy(m);
}
END_TEST

START_TEST(errors_propagate)
{
        uint8_t blk[4096];
        {
                struct tdm_medium *m = open_medium(_i, 1 << 20, false, false);
                tdm_medium_destroy(m);
        }
        struct tdm_medium *m = open_medium(_i, 0, false, true);
        ck_assert_int_eq(run1(m, TDM_MIO_READ, blk, sizeof(blk), 0, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE, blk, sizeof(blk), 0, 0), -EBADF);
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE_ZEROES, NULL, 4096, 0, 0), -EBADF);
        /* A failed fdatasync sticks: every later flush fails. */
        bs_medium_dev(m)->flush_err = -EIO;
        ck_assert_int_eq(run1(m, TDM_MIO_FLUSH, NULL, 0, 0, 0), -EIO);
        tdm_medium_destroy(m);
}
END_TEST

/* From a thread on no loop, requests run at once, whatever the engine. */
START_TEST(no_loop_runs_inline)
{
        struct tdm_medium *m = open_medium(_i, 1 << 20, false, false);
        uint8_t w[4096], r[4096];
        fill(w, sizeof(w), 11);
        ck_assert_int_eq(tdm_medium_write(m, w, sizeof(w), 4096, TDM_MIO_FUA), 0);
        ck_assert_int_eq(tdm_medium_read(m, r, sizeof(r), 4096), 0);
        ck_assert_mem_eq(w, r, sizeof(r));
        ck_assert_int_eq(tdm_medium_flush(m), 0);
        tdm_medium_destroy(m);
}
END_TEST

/* A store in memory runs on the loop, after the round's submissions, whatever the engine. */
START_TEST(memory_store_runs_on_loop)
{
        char shm[] = "/dev/shm/tandem-bse-XXXXXX";
        int fd = mkstemp(shm);
        ck_assert_int_ge(fd, 0);
        close(fd);
        unsetenv("TANDEM_BACKSTORE_IO");
        struct bs_open_opts o = {.create_size = 1 << 20};
        struct bs_dev *bs = NULL;
        ck_assert_int_eq(bs_open(shm, &o, &bs), 0);
        struct tdm_medium *m = NULL;
        ck_assert_int_eq(bs_medium_create(bs, &m), 0);
        enum { N = 8 };
        static uint8_t w[N][4096], r[N][4096];
        struct tdm_mio ios[N];
        for (int i = 0; i < N; i++) {
                fill(w[i], 4096, (unsigned)i);
                ios[i] = (struct tdm_mio){.op = TDM_MIO_WRITE,
                                          .flags = i == 0 ? TDM_MIO_FUA : 0,
                                          .off = (uint64_t)i * 4096,
                                          .len = 4096,
                                          .buf = w[i]};
        }
        struct batch b;
        batch_start(&b, loops[0], m, ios, N);
        batch_wait(&b);
        ck_assert_int_eq(b.in_submit, 0);
        for (int i = 0; i < N; i++) {
                ck_assert_int_eq(ios[i].result, 0);
                ios[i] = (struct tdm_mio){
                    .op = TDM_MIO_READ, .off = (uint64_t)i * 4096, .len = 4096, .buf = r[i]};
        }
        run_on(loops[1], m, ios, N);
        for (int i = 0; i < N; i++)
                ck_assert_mem_eq(w[i], r[i], 4096);
        ck_assert_uint_ge(bs->flush_count, 1); /* the FUA write */
        ck_assert_int_eq(run1(m, TDM_MIO_FLUSH, NULL, 0, 0, 0), 0);
        /* Zeroing goes to the pool, its FUA flush too. */
        ck_assert_int_eq(run1(m, TDM_MIO_WRITE_ZEROES, NULL, 4096, 0, TDM_MIO_FUA), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_UNMAP, NULL, 4096, 4096, 0), 0);
        ck_assert_int_eq(run1(m, TDM_MIO_READ, r[0], 4096, 0, 0), 0);
        ck_assert(all_zero(r[0], 4096));
        ck_assert_int_eq(run1(m, TDM_MIO_READ, r[0], 4096, 4096, 0), 0);
        ck_assert(all_zero(r[0], 4096));
        ck_assert_uint_eq(bs->durable_seq, atomic_load(&bs->write_seq) - 1); /* unmap: no FUA */
        tdm_medium_destroy(m);
        unlink(shm);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("backstore_engines");
        TCase *tc = tcase_create("engines");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_loop_test(tc, read_write_round_trip, 0, 2);
        tcase_add_loop_test(tc, read_past_eof_is_zeroes, 0, 2);
        tcase_add_loop_test(tc, short_write_is_resubmitted, 0, 2);
        tcase_add_loop_test(tc, fua_is_durable_either_way, 0, 2);
        tcase_add_loop_test(tc, direct_io_bounces_unaligned_buffers, 0, 2);
        tcase_add_loop_test(tc, write_zeroes_and_unmap, 0, 2);
        tcase_add_loop_test(tc, concurrent_flushes_share_fdatasync, 0, 2);
        tcase_add_loop_test(tc, errors_propagate, 0, 2);
        tcase_add_loop_test(tc, no_loop_runs_inline, 0, 2);
        tcase_add_test(tc, memory_store_runs_on_loop);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
