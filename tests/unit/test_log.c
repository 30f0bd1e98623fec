/*
 * Unit tests of logging (daemon/base/log_queue.c, log_line.c, log.c): the queue alone with a
 * write callback that can be held, the line's layout against libqb's, then tdm_log through its
 * real targets: a stderr pipe nobody reads (the thread that logs must go on) and a file written
 * by several threads at once (no line may vanish without being counted).
 */
#include <check.h>
#include <errno.h>
#include <regex.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log_line.h"
#include "base/log_queue.h"
#include "tandem/log.h"

/* ---- a write callback that records lines and can be held ---- */

#define MAX_SEEN 4096

static struct {
        pthread_mutex_t lock;
        pthread_cond_t changed;
        bool hold;         /* the next write waits while this is set */
        bool holding;      /* a write is waiting now */
        bool hold_reports; /* a drop report waits while this is set */
        int n;
        char text[MAX_SEEN][64];
        struct timespec when[MAX_SEEN];
        unsigned long dropped; /* sum of the drop reports */
        int drop_reports;
} seen = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static void record_line(int prio, const struct timespec *when, const char *text,
                        unsigned long dropped)
{
        (void)prio;
        pthread_mutex_lock(&seen.lock);
        while (seen.hold || (!text && seen.hold_reports)) {
                seen.holding = true;
                pthread_cond_broadcast(&seen.changed);
                pthread_cond_wait(&seen.changed, &seen.lock);
        }
        seen.holding = false;
        if (!text) {
                seen.dropped += dropped;
                seen.drop_reports++;
        } else if (seen.n < MAX_SEEN) {
                snprintf(seen.text[seen.n], sizeof(seen.text[0]), "%s", text);
                seen.when[seen.n++] = *when;
        }
        pthread_mutex_unlock(&seen.lock);
}

/* Sets one of seen's hold flags and wakes a write waiting on it. */
static void set_hold(bool *flag, bool on)
{
        pthread_mutex_lock(&seen.lock);
        *flag = on;
        pthread_cond_broadcast(&seen.changed);
        pthread_mutex_unlock(&seen.lock);
}

static void hold_writer(bool on)
{
        set_hold(&seen.hold, on);
}

static void wait_until_holding(void)
{
        pthread_mutex_lock(&seen.lock);
        while (!seen.holding)
                pthread_cond_wait(&seen.changed, &seen.lock);
        pthread_mutex_unlock(&seen.lock);
}

static double seconds_of(const struct timespec *t)
{
        return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

static double now_s(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return seconds_of(&t);
}

static double wall_s(void)
{
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        return seconds_of(&t);
}

static double seen_when_s(int i)
{
        return seconds_of(&seen.when[i]);
}

static void push_numbered(int from, int to)
{
        char line[32];
        for (int i = from; i < to; i++) {
                snprintf(line, sizeof(line), "line %d", i);
                ck_assert(log_queue_push(LOG_INFO, line));
        }
}

START_TEST(test_lines_written_in_order)
{
        ck_assert_int_eq(log_queue_start(16, record_line), 0);
        ck_assert_int_eq(log_queue_start(16, record_line), -EALREADY);
        push_numbered(0, 10);
        ck_assert_int_eq(log_queue_flush(5000), 0);
        ck_assert_int_eq(seen.n, 10);
        for (int i = 0; i < 10; i++) {
                char want[32];
                snprintf(want, sizeof(want), "line %d", i);
                ck_assert_str_eq(seen.text[i], want);
        }
        ck_assert_int_eq(seen.drop_reports, 0);
        ck_assert_int_eq(log_queue_stop(5000), 0);
        ck_assert(!log_queue_push(LOG_INFO, "after the stop")); /* the caller writes it */
}
END_TEST

/* A held writer: the thread that logs goes on, the queue fills, the rest is counted, and the
 * count is reported after the lines that came before the drops. */
START_TEST(test_held_writer_does_not_hold_the_caller)
{
        enum { CAP = 8, EXTRA = 5 };
        hold_writer(true);
        ck_assert_int_eq(log_queue_start(CAP, record_line), 0);
        push_numbered(0, 1);
        wait_until_holding(); /* line 0 is in the writer's hands */
        double t0 = now_s();
        push_numbered(1, 1 + CAP + EXTRA);
        ck_assert_double_lt(now_s() - t0, 1.0); /* the writer is held for good: a wait would hang */
        ck_assert_int_eq(log_queue_flush(200), -ETIMEDOUT);
        usleep(600 * 1000);
        double released = wall_s();
        hold_writer(false);
        ck_assert_int_eq(log_queue_flush(5000), 0);
        ck_assert_int_eq(seen.n, 1 + CAP);
        ck_assert_str_eq(seen.text[CAP], "line 8");
        ck_assert_int_eq(seen.drop_reports, 1);
        ck_assert_uint_eq(seen.dropped, EXTRA);
        /* written after the release, stamped when it was logged */
        ck_assert_double_le(seen_when_s(1), released - 0.6);
        /* the queue takes lines again once the writer is free */
        push_numbered(100, 101);
        ck_assert_int_eq(log_queue_flush(5000), 0);
        ck_assert_str_eq(seen.text[seen.n - 1], "line 100");
        ck_assert_int_eq(log_queue_stop(5000), 0);
}
END_TEST

/* A flush returns only once the drop report is written too, not while it is being written. */
START_TEST(test_flush_waits_for_the_drop_report)
{
        enum { CAP = 2 };
        hold_writer(true);
        ck_assert_int_eq(log_queue_start(CAP, record_line), 0);
        push_numbered(0, 1);
        wait_until_holding();
        push_numbered(1, 2 + CAP); /* two fill the ring, one is dropped */
        set_hold(&seen.hold_reports, true);
        hold_writer(false);
        pthread_mutex_lock(&seen.lock); /* the lines are written, the report is held */
        while (!(seen.holding && seen.n == 1 + CAP))
                pthread_cond_wait(&seen.changed, &seen.lock);
        pthread_mutex_unlock(&seen.lock);
        ck_assert_int_eq(log_queue_flush(200), -ETIMEDOUT);
        set_hold(&seen.hold_reports, false);
        ck_assert_int_eq(log_queue_flush(5000), 0);
        ck_assert_int_eq(seen.drop_reports, 1);
        ck_assert_uint_eq(seen.dropped, 1);
        ck_assert_int_eq(log_queue_stop(5000), 0);
}
END_TEST

START_TEST(test_stop_writes_what_is_queued)
{
        hold_writer(true);
        ck_assert_int_eq(log_queue_start(64, record_line), 0);
        push_numbered(0, 40);
        wait_until_holding();
        hold_writer(false);
        ck_assert_int_eq(log_queue_stop(5000), 0);
        ck_assert_int_eq(seen.n, 40);
        ck_assert_str_eq(seen.text[39], "line 39");
        ck_assert_int_eq(log_queue_start(4, record_line), 0); /* and it can start again */
        ck_assert_int_eq(log_queue_stop(5000), 0);
}
END_TEST

/* A writer held past the stop's timeout is left behind; lines go to their callers. */
START_TEST(test_stop_leaves_a_held_writer)
{
        hold_writer(true);
        ck_assert_int_eq(log_queue_start(4, record_line), 0);
        push_numbered(0, 1);
        wait_until_holding();
        ck_assert_int_eq(log_queue_stop(100), -ETIMEDOUT);
        ck_assert(!log_queue_push(LOG_INFO, "late"));
        ck_assert_int_eq(log_queue_start(4, record_line), -EBUSY);
        ck_assert_int_eq(log_queue_start(0, record_line), -EINVAL);
}
END_TEST

/* ---- the line's layout ---- */

/* True if line starts like libqb's "%T %p: " with priority name prio. */
static bool has_layout(const char *line, const char *prio)
{
        char pattern[128];
        snprintf(
            pattern, sizeof(pattern),
            "^[A-Z][a-z][a-z] [0-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-6][0-9][.][0-9]{3} %s: ", prio);
        regex_t re;
        ck_assert_int_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
        bool match = regexec(&re, line, 0, NULL, 0) == 0;
        regfree(&re);
        return match;
}

START_TEST(test_line_format)
{
        setenv("TZ", "UTC", 1);
        tzset();
        struct timespec t = {.tv_sec = 1796333983, .tv_nsec = 123999999}; /* 2026-12-03 21:39:43 */
        char out[64];
        size_t n = log_line_format(out, sizeof(out), &t, LOG_NOTICE, "ready");
        ck_assert_str_eq(out, "Dec 03 21:39:43.123 notice: ready\n");
        ck_assert_uint_eq(n, strlen(out));
        t.tv_sec -= 334 * 86400; /* 2026-01-03 */
        log_line_format(out, sizeof(out), &t, LOG_ERR, "x");
        ck_assert_str_eq(out, "Jan 03 21:39:43.123 error: x\n");
        /* too long: cut, and still one line */
        char longtext[200];
        memset(longtext, 'a', sizeof(longtext) - 1);
        longtext[sizeof(longtext) - 1] = '\0';
        n = log_line_format(out, sizeof(out), &t, LOG_WARNING, longtext);
        ck_assert_uint_eq(n, sizeof(out) - 1);
        ck_assert_int_eq(out[n - 1], '\n');
        ck_assert_ptr_eq(strchr(out, '\n'), out + n - 1);
        ck_assert_str_eq(log_line_prio_name(LOG_WARNING), "warning");
        ck_assert_str_eq(log_line_prio_name(LOG_EMERG), "emerg");
        ck_assert_str_eq(log_line_prio_name(99), "debug");
        ck_assert_str_eq(log_line_prio_name(-1), "emerg");
        unsetenv("TZ");
        tzset();
}
END_TEST

/* ---- tdm_log through its real targets ---- */

/* stderr becomes a pipe filled to the brim: the next write to it blocks until it is read. */
static int stderr_to_full_pipe(void)
{
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_ge(dup2(p[1], STDERR_FILENO), 0);
        close(p[1]);
        int fl = fcntl(STDERR_FILENO, F_GETFL);
        fcntl(STDERR_FILENO, F_SETFL, fl | O_NONBLOCK);
        char fill[4096];
        memset(fill, 'x', sizeof(fill)); /* no NUL: what is read back is searched as a string */
        while (write(STDERR_FILENO, fill, sizeof(fill)) > 0)
                ;
        fcntl(STDERR_FILENO, F_SETFL, fl);
        return p[0];
}

/* Everything the pipe holds until `needle` has come (or 10 s). */
static char *read_until(int fd, const char *needle)
{
        size_t cap = 1 << 20, len = 0;
        char *buf = calloc(1, cap + 1);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        double end = now_s() + 10;
        while (now_s() < end) {
                ssize_t n = read(fd, buf + len, cap - len);
                if (n > 0) {
                        len += (size_t)n;
                        buf[len] = '\0';
                        if (strstr(buf, needle))
                                break;
                } else {
                        usleep(10 * 1000);
                }
        }
        return buf;
}

START_TEST(test_blocked_stderr_does_not_hold_the_caller)
{
        int rd = stderr_to_full_pipe();
        struct tdm_log_opts o = {.level = LOG_INFO, .use_stderr = 1};
        tdm_log_init("test-log", &o);
        double t0 = now_s();
        for (int i = 0; i < 20; i++)
                log_info("blocked line %d", i);
        log_debug("below the level: not written");
        ck_assert_double_lt(now_s() - t0, 1.0);
        ck_assert_int_eq(tdm_log_flush(100), -ETIMEDOUT);
        usleep(600 * 1000);
        char *out = read_until(rd, "blocked line 19");
        ck_assert_ptr_nonnull(strstr(out, "blocked line 0"));
        ck_assert_ptr_nonnull(strstr(out, "blocked line 19"));
        ck_assert(has_layout(strrchr(out, 'x') + 1, "info")); /* after the fill */
        ck_assert_ptr_null(strstr(out, "below the level"));
        free(out);
        ck_assert_int_eq(tdm_log_flush(5000), 0);
        tdm_log_fini();
        close(rd);
}
END_TEST

#define WRITERS          4
#define LINES_PER_WRITER 3000

static void *log_many(void *arg)
{
        int id = (int)(long)arg;
        for (int i = 0; i < LINES_PER_WRITER; i++)
                log_notice("writer %d line %d", id, i);
        return NULL;
}

/* Threads logging at once: each line is in the file, or counted in a drop report. */
START_TEST(test_concurrent_lines_all_accounted_for)
{
        char path[] = "/tmp/tandem-test-log.XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        close(fd);
        struct tdm_log_opts o = {.level = LOG_INFO, .file = path};
        tdm_log_init("test-log", &o);
        pthread_t t[WRITERS];
        for (long i = 0; i < WRITERS; i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, log_many, (void *)i), 0);
        for (int i = 0; i < WRITERS; i++)
                pthread_join(t[i], NULL);
        qb_log(LOG_NOTICE, "a line of libqb's own");
        tdm_log_fini();
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        char line[1024];
        unsigned long lines = 0, dropped = 0, n, qb_lines = 0;
        int last[WRITERS] = {-1, -1, -1, -1};
        while (fgets(line, sizeof(line), f)) {
                const char *w = strstr(line, "writer ");
                const char *d = strstr(line, "log: ");
                int id, no;
                if (strstr(line, "a line of libqb's own")) {
                        ck_assert(has_layout(line, "notice")); /* ours and libqb's alike */
                        qb_lines++;
                } else if (w && sscanf(w, "writer %d line %d", &id, &no) == 2) {
                        ck_assert(has_layout(line, "notice"));
                        ck_assert_int_lt(last[id], no); /* one writer's lines stay in order */
                        last[id] = no;
                        lines++;
                } else if (d && sscanf(d, "log: %lu lines dropped", &n) == 1) {
                        dropped += n;
                }
        }
        fclose(f);
        unlink(path);
        ck_assert_uint_eq(lines + dropped, WRITERS * LINES_PER_WRITER);
        ck_assert_uint_eq(qb_lines, 1);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("log");
        TCase *q = tcase_create("queue");
        tcase_add_test(q, test_lines_written_in_order);
        tcase_add_test(q, test_held_writer_does_not_hold_the_caller);
        tcase_add_test(q, test_flush_waits_for_the_drop_report);
        tcase_add_test(q, test_stop_writes_what_is_queued);
        tcase_add_test(q, test_stop_leaves_a_held_writer);
        suite_add_tcase(s, q);
        TCase *f = tcase_create("line");
        tcase_add_test(f, test_line_format);
        suite_add_tcase(s, f);
        TCase *l = tcase_create("tdm_log");
        tcase_set_timeout(l, 30);
        tcase_add_test(l, test_blocked_stderr_does_not_hold_the_caller);
        tcase_add_test(l, test_concurrent_lines_all_accounted_for);
        suite_add_tcase(s, l);
        SRunner *r = srunner_create(s);
        srunner_run_all(r, CK_NORMAL);
        int failed = srunner_ntests_failed(r);
        srunner_free(r);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
