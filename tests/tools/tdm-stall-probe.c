/*
 * tdm-stall-probe: does a stalled LUN hold up another LUN on the same target? Two libiscsi
 * sessions, one per LUN: on the slow one a few commands stay in flight (4 KiB reads and
 * writes); on the fast one a 4 KiB read or write goes out every --interval-ms, one at a time,
 * and each latency is recorded.
 *
 *   tdm-stall-probe --slow URL --fast URL [--stall-pid PID] [--stall-ms MS] [--seconds S]
 *                   [--slow-qd N] [--interval-ms MS] [--max-ms MS] [--engine NAME]
 *
 * After a short warm-up it sends SIGUSR1 to --stall-pid (tdm-slowfs: every request on the
 * slow LUN's file now takes --stall-ms), measures for S seconds, sends SIGUSR2, lets the slow
 * commands drain and prints one line:
 *   stall: engine=NAME slow_lun_max_ms=N slow_ios=N fast_lun_p50_ms=N fast_lun_max_ms=N
 *   fast_ios=N result=pass|fail
 * pass: the fast LUN's longest latency stayed within --max-ms while the slow LUN really
 * stalled (its longest command took at least half of --stall-ms). Exit status 0 on pass.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define IO_BYTES     4096
#define REGION_BYTES (16u << 20)
#define MAX_SLOTS    64

struct side;

struct slot {
        struct side *side;
        bool busy, counted, write;
        uint64_t t0;
        unsigned char buf[IO_BYTES];
};

struct side {
        const char *what;
        struct iscsi_context *iscsi;
        int lun;
        uint32_t block_size;
        unsigned qd;
        unsigned inflight;
        struct slot slots[MAX_SLOTS];
        uint64_t rng;
        bool flip;
        /* Counted: commands issued inside the measured window. */
        double *lat_ms;
        size_t n_lat, cap_lat;
        double max_ms;
        uint64_t errors;
};

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
        uint64_t x = *s;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *s = x;
        return x * 0x2545f4914f6cdd1dull;
}

static int open_side(struct side *s, const char *url_text)
{
        s->iscsi = iscsi_create_context("iqn.2026-11.io.tandem:stall-probe");
        if (!s->iscsi)
                return -ENOMEM;
        struct iscsi_url *url = iscsi_parse_full_url(s->iscsi, url_text);
        if (!url) {
                fprintf(stderr, "tdm-stall-probe: bad URL %s\n", url_text);
                return -EINVAL;
        }
        iscsi_set_targetname(s->iscsi, url->target);
        iscsi_set_session_type(s->iscsi, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(s->iscsi, ISCSI_HEADER_DIGEST_NONE);
        iscsi_set_noautoreconnect(s->iscsi, 1);
        if (iscsi_full_connect_sync(s->iscsi, url->portal, url->lun) != 0) {
                fprintf(stderr, "tdm-stall-probe: %s login: %s\n", s->what,
                        iscsi_get_error(s->iscsi));
                iscsi_destroy_url(url);
                return -EIO;
        }
        s->lun = url->lun;
        iscsi_destroy_url(url);
        struct scsi_task *t = iscsi_readcapacity16_sync(s->iscsi, s->lun);
        struct scsi_readcapacity16 *rc =
            t && t->status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall(t) : NULL;
        if (!rc) {
                fprintf(stderr, "tdm-stall-probe: %s READ CAPACITY failed\n", s->what);
                if (t)
                        scsi_free_scsi_task(t);
                return -EIO;
        }
        s->block_size = rc->block_length;
        scsi_free_scsi_task(t);
        return 0;
}

static void record(struct side *s, double ms)
{
        if (s->n_lat == s->cap_lat) {
                s->cap_lat = s->cap_lat ? 2 * s->cap_lat : 4096;
                s->lat_ms = realloc(s->lat_ms, s->cap_lat * sizeof(double));
                if (!s->lat_ms)
                        abort();
        }
        s->lat_ms[s->n_lat++] = ms;
        if (ms > s->max_ms)
                s->max_ms = ms;
}

static void io_done(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
        struct slot *sl = priv;
        struct side *s = sl->side;
        double ms = (double)(now_ns() - sl->t0) / 1e6;
        sl->busy = false;
        s->inflight--;
        if (status != SCSI_STATUS_GOOD) {
                if (s->errors++ < 5)
                        fprintf(stderr, "tdm-stall-probe: %s command failed: 0x%x %s\n", s->what,
                                status, iscsi_get_error(iscsi));
        } else if (sl->counted) {
                record(s, ms);
                if (getenv("TDM_STALL_DEBUG") && ms > 5)
                        fprintf(stderr, "%s %s %.3f ms at %.3f s\n", s->what,
                                sl->write ? "write" : "read", ms, (double)sl->t0 / 1e9);
        }
        scsi_free_scsi_task(data);
}

static int issue(struct side *s, struct slot *sl, bool counted)
{
        uint32_t per = IO_BYTES / s->block_size;
        uint64_t lba = rng_next(&s->rng) % (REGION_BYTES / IO_BYTES) * per;
        sl->side = s;
        sl->write = s->flip = !s->flip;
        sl->counted = counted;
        sl->t0 = now_ns();
        struct scsi_task *t =
            sl->write ? iscsi_write16_task(s->iscsi, s->lun, lba, sl->buf, IO_BYTES,
                                           (int)s->block_size, 0, 0, 0, 0, 0, io_done, sl)
                      : iscsi_read16_task(s->iscsi, s->lun, lba, IO_BYTES, (int)s->block_size, 0, 0,
                                          0, 0, 0, io_done, sl);
        if (!t) {
                fprintf(stderr, "tdm-stall-probe: %s: cannot queue: %s\n", s->what,
                        iscsi_get_error(s->iscsi));
                return -EIO;
        }
        sl->busy = true;
        s->inflight++;
        return 0;
}

static int service(struct side *sides[2], uint64_t timeout_ns)
{
        struct pollfd pfd[2];
        for (int i = 0; i < 2; i++)
                pfd[i] = (struct pollfd){.fd = iscsi_get_fd(sides[i]->iscsi),
                                         .events = (short)iscsi_which_events(sides[i]->iscsi)};
        struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000ull),
                              .tv_nsec = (long)(timeout_ns % 1000000000ull)};
        int n = ppoll(pfd, 2, &ts, NULL);
        if (n < 0 && errno != EINTR)
                return -errno;
        for (int i = 0; i < 2; i++)
                if (iscsi_service(sides[i]->iscsi, n > 0 ? pfd[i].revents : 0) < 0) {
                        fprintf(stderr, "tdm-stall-probe: %s: %s\n", sides[i]->what,
                                iscsi_get_error(sides[i]->iscsi));
                        return -EIO;
                }
        return 0;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

struct options {
        const char *slow_url, *fast_url, *engine;
        pid_t stall_pid;
        unsigned stall_ms, slow_qd;
        double seconds, interval_ms, max_ms;
};

static int parse(int argc, char **argv, struct options *o)
{
        static const struct option longopts[] = {
            {"slow", required_argument, NULL, 's'},
            {"fast", required_argument, NULL, 'f'},
            {"stall-pid", required_argument, NULL, 'p'},
            {"stall-ms", required_argument, NULL, 'd'},
            {"seconds", required_argument, NULL, 'S'},
            {"slow-qd", required_argument, NULL, 'q'},
            {"interval-ms", required_argument, NULL, 'i'},
            {"max-ms", required_argument, NULL, 'm'},
            {"engine", required_argument, NULL, 'e'},
            {NULL, 0, NULL, 0},
        };
        *o = (struct options){.engine = "?",
                              .stall_ms = 2000,
                              .slow_qd = 4,
                              .seconds = 4,
                              .interval_ms = 1,
                              .max_ms = 20};
        int c;
        while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (c) {
                case 's':
                        o->slow_url = optarg;
                        break;
                case 'f':
                        o->fast_url = optarg;
                        break;
                case 'p':
                        o->stall_pid = (pid_t)strtol(optarg, NULL, 10);
                        break;
                case 'd':
                        o->stall_ms = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 'S':
                        o->seconds = strtod(optarg, NULL);
                        break;
                case 'q':
                        o->slow_qd = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 'i':
                        o->interval_ms = strtod(optarg, NULL);
                        break;
                case 'm':
                        o->max_ms = strtod(optarg, NULL);
                        break;
                case 'e':
                        o->engine = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (!o->slow_url || !o->fast_url || o->slow_qd == 0 || o->slow_qd > MAX_SLOTS)
                return -EINVAL;
        return 0;
}

int main(int argc, char **argv)
{
        struct options o;
        if (parse(argc, argv, &o) < 0) {
                fprintf(stderr, "usage: tdm-stall-probe --slow URL --fast URL [--stall-pid PID]"
                                " [--stall-ms MS] [--seconds S] [--slow-qd N] [--interval-ms MS]"
                                " [--max-ms MS] [--engine NAME]\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        static struct side slow = {.what = "slow LUN"}, fast = {.what = "fast LUN"};
        slow.qd = o.slow_qd;
        fast.qd = 1;
        slow.rng = 0x9e3779b97f4a7c15ull;
        fast.rng = 0x7f4a7c159e3779b9ull;
        if (open_side(&slow, o.slow_url) < 0 || open_side(&fast, o.fast_url) < 0)
                return 2;
        struct side *sides[2] = {&slow, &fast};

        uint64_t t = now_ns(), warm_end = t + 500000000ull;
        uint64_t measure_end = warm_end + (uint64_t)(o.seconds * 1e9);
        uint64_t interval = (uint64_t)(o.interval_ms * 1e6), next_fast = t;
        uint64_t drain_end = measure_end + 10ull * o.stall_ms * 1000000ull + 10000000000ull;
        bool stalled = false;
        for (;;) {
                t = now_ns();
                bool measuring = t >= warm_end && t < measure_end;
                if (measuring && !stalled && o.stall_pid > 0) {
                        kill(o.stall_pid, SIGUSR1);
                        stalled = true;
                }
                if (t >= measure_end && stalled) {
                        kill(o.stall_pid, SIGUSR2);
                        stalled = false;
                }
                if (t >= measure_end && (slow.inflight == 0 || t >= drain_end))
                        break;
                if (t < measure_end)
                        for (unsigned i = 0; i < slow.qd; i++)
                                if (!slow.slots[i].busy && issue(&slow, &slow.slots[i], measuring))
                                        return 2;
                if (!fast.slots[0].busy && t >= next_fast) {
                        if (issue(&fast, &fast.slots[0], measuring))
                                return 2;
                        next_fast = t + interval;
                }
                uint64_t wait_ns = 100000000ull;
                if (!fast.slots[0].busy)
                        wait_ns = next_fast > t ? next_fast - t : 0;
                if (service(sides, wait_ns) < 0)
                        return 2;
        }
        while (fast.inflight) /* the last fast command */
                if (service(sides, 100000000ull) < 0)
                        return 2;

        double p50 = 0;
        if (fast.n_lat) {
                qsort(fast.lat_ms, fast.n_lat, sizeof(double), cmp_double);
                p50 = fast.lat_ms[fast.n_lat / 2];
        }
        bool slow_stalled = o.stall_pid <= 0 || slow.max_ms >= o.stall_ms / 2.0;
        bool pass = fast.n_lat > 0 && fast.max_ms <= o.max_ms && slow_stalled && slow.errors == 0 &&
                    fast.errors == 0 && slow.inflight == 0;
        printf("stall: engine=%s slow_lun_max_ms=%.0f slow_ios=%zu fast_lun_p50_ms=%.3f "
               "fast_lun_max_ms=%.3f fast_ios=%zu result=%s%s\n",
               o.engine, slow.max_ms, slow.n_lat, p50, fast.max_ms, fast.n_lat,
               pass ? "pass" : "fail",
               !slow_stalled                  ? " reason=slow-lun-did-not-stall"
               : slow.inflight                ? " reason=slow-lun-did-not-drain"
               : (slow.errors || fast.errors) ? " reason=command-errors"
                                              : "");
        iscsi_logout_sync(slow.iscsi);
        iscsi_logout_sync(fast.iscsi);
        iscsi_destroy_context(slow.iscsi);
        iscsi_destroy_context(fast.iscsi);
        free(slow.lat_ms);
        free(fast.lat_ms);
        return pass ? 0 : 1;
}
