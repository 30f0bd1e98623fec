/* Rates and latency percentiles from two counter snapshots (daemon/ctl/rates.c). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "tandem/io_rates.h"

#define N 24

START_TEST(test_quantile_empty)
{
        uint64_t h[N] = {0};
        ck_assert(tdm_hist_quantile_us(h, N, 0.5) < 0);
        ck_assert(tdm_hist_quantile_us(h, 0, 0.5) < 0);
}
END_TEST

/* 100 commands in [64, 128) us: p50 halfway through the bucket, p99 near its top. */
START_TEST(test_quantile_one_bucket)
{
        uint64_t h[N] = {0};
        h[7] = 100;
        ck_assert_double_eq_tol(tdm_hist_quantile_us(h, N, 0.5), 96.0, 1e-9);
        ck_assert_double_eq_tol(tdm_hist_quantile_us(h, N, 0.99), 64.0 + 64.0 * 0.99, 1e-9);
        ck_assert_double_eq_tol(tdm_hist_quantile_us(h, N, 0.0), 64.0, 1e-9);
        ck_assert_double_eq_tol(tdm_hist_quantile_us(h, N, 1.0), 128.0, 1e-9);
}
END_TEST

/* 90 fast (bucket 0: < 1 us), 10 slow (bucket 10: [512, 1024) us). */
START_TEST(test_quantile_two_buckets)
{
        uint64_t h[N] = {0};
        h[0] = 90;
        h[10] = 10;
        ck_assert_double_eq_tol(tdm_hist_quantile_us(h, N, 0.5), 50.0 / 90.0, 1e-9);
        /* rank 99: the 9th of 10 in [512, 1024). */
        ck_assert_double_eq_tol(tdm_hist_quantile_us(h, N, 0.99), 512.0 + 512.0 * 0.9, 1e-9);
}
END_TEST

/* The last bucket is open-ended: its lower bound. */
START_TEST(test_quantile_last_bucket)
{
        uint64_t h[N] = {0};
        h[N - 1] = 3;
        ck_assert_double_eq_tol(tdm_hist_quantile_us(h, N, 0.5), (double)(1u << (N - 2)), 1e-9);
}
END_TEST

START_TEST(test_rates)
{
        uint64_t h1[N] = {0}, h2[N] = {0};
        h1[5] = 10;
        h2[5] = 10;
        h2[8] = 200; /* the interval's commands: all in [128, 256) us */
        struct tdm_io_totals a = {1000, 2000, 5, 1000 * 4096, 2000 * 4096, 1, h1, N};
        struct tdm_io_totals b = {1100, 2100, 5, 1100 * 4096, 2100 * 4096, 1, h2, N};
        struct tdm_io_rates r;
        ck_assert_int_eq(tdm_io_rates(&a, &b, 2.0, &r), 0);
        ck_assert_uint_eq(r.reads, 100);
        ck_assert_uint_eq(r.writes, 100);
        ck_assert_uint_eq(r.other, 0);
        ck_assert_uint_eq(r.errors, 0);
        ck_assert_double_eq_tol(r.read_iops, 50.0, 1e-9);
        ck_assert_double_eq_tol(r.write_iops, 50.0, 1e-9);
        ck_assert_double_eq_tol(r.iops, 100.0, 1e-9);
        ck_assert_double_eq_tol(r.read_bps, 100.0 * 4096 / 2, 1e-9);
        ck_assert_double_eq_tol(r.write_bps, 100.0 * 4096 / 2, 1e-9);
        ck_assert_double_eq_tol(r.p50_us, 192.0, 1e-9);
        ck_assert(r.p99_us > 128.0 && r.p99_us < 256.0);
        /* A session that began in the interval: from zero. */
        ck_assert_int_eq(tdm_io_rates(NULL, &a, 4.0, &r), 0);
        ck_assert_double_eq_tol(r.read_iops, 250.0, 1e-9);
        ck_assert_double_eq_tol(r.p50_us, 24.0, 1e-9);
        /* An idle interval has no percentiles. */
        ck_assert_int_eq(tdm_io_rates(&a, &a, 1.0, &r), 0);
        ck_assert_double_eq_tol(r.iops, 0.0, 1e-9);
        ck_assert(r.p50_us < 0 && r.p99_us < 0);
}
END_TEST

START_TEST(test_rates_refused)
{
        uint64_t h1[N] = {0}, h2[N] = {0};
        h1[3] = 5;
        struct tdm_io_totals a = {10, 0, 0, 0, 0, 0, h1, N};
        struct tdm_io_totals b = {9, 0, 0, 0, 0, 0, h2, N};
        struct tdm_io_rates r;
        ck_assert_int_eq(tdm_io_rates(&a, &b, 1.0, &r), -ERANGE); /* went backwards */
        b.reads = 10;
        ck_assert_int_eq(tdm_io_rates(&a, &b, 1.0, &r), -ERANGE); /* histogram backwards */
        ck_assert_int_eq(tdm_io_rates(&a, &a, 0.0, &r), -EINVAL);
        ck_assert_int_eq(tdm_io_rates(&a, &a, -1.0, &r), -EINVAL);
        b = a;
        b.n_hist = N - 1;
        ck_assert_int_eq(tdm_io_rates(&a, &b, 1.0, &r), -EINVAL);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("io_rates");
        TCase *tc = tcase_create("core");
        tcase_add_test(tc, test_quantile_empty);
        tcase_add_test(tc, test_quantile_one_bucket);
        tcase_add_test(tc, test_quantile_two_buckets);
        tcase_add_test(tc, test_quantile_last_bucket);
        tcase_add_test(tc, test_rates);
        tcase_add_test(tc, test_rates_refused);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
