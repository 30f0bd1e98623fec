/*
 * tdm-bench-write: a small libiscsi async load generator for WRITE (iscsi-perf only reads).
 *
 *   tdm-bench-write URL [--qd N] [--bs BYTES] [--seconds S] [--random|--sequential] [--read]
 *                       [--region BYTES] [--initiator IQN]
 *
 * Keeps N commands in flight for S seconds and prints one line:
 *   tdm-bench-write: op=write pattern=random bs=4096 qd=32 seconds=10.0 ios=N iops=N mbps=N
 *   errors=N
 * (mbps = 10^6 bytes per second). --read issues READ(16) instead, for a like-for-like client.
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

struct options {
        const char *url;
        const char *initiator;
        unsigned qd;
        uint32_t bs;
        double seconds;
        bool random;
        bool read;
        uint64_t region_bytes;
};

struct bench;

struct slot {
        struct bench *b;
        bool busy;
        unsigned char *buf;
};

struct bench {
        const struct options *opt;
        struct iscsi_context *iscsi;
        int lun;
        uint32_t block_size;
        uint64_t region_blocks;
        uint64_t next_lba;
        uint64_t rng;
        struct slot *slots;
        unsigned inflight;
        uint64_t done, errors;
        bool fatal;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
        (void)sig;
        stop_requested = 1;
}

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

static struct iscsi_context *session_open(const struct options *opt, int *lun)
{
        struct iscsi_context *iscsi = iscsi_create_context(opt->initiator);
        struct iscsi_url *url;

        if (iscsi == NULL)
                return NULL;
        url = iscsi_parse_full_url(iscsi, opt->url);
        if (url == NULL) {
                fprintf(stderr, "tdm-bench-write: bad URL %s: %s\n", opt->url,
                        iscsi_get_error(iscsi));
                iscsi_destroy_context(iscsi);
                return NULL;
        }
        iscsi_set_targetname(iscsi, url->target);
        iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
        if (url->user[0] != '\0')
                iscsi_set_initiator_username_pwd(iscsi, url->user, url->passwd);
        iscsi_set_noautoreconnect(iscsi, 1);
        if (iscsi_full_connect_sync(iscsi, url->portal, url->lun) != 0) {
                fprintf(stderr, "tdm-bench-write: login failed: %s\n", iscsi_get_error(iscsi));
                iscsi_destroy_url(url);
                iscsi_destroy_context(iscsi);
                return NULL;
        }
        *lun = url->lun;
        iscsi_destroy_url(url);
        return iscsi;
}

static int read_capacity(struct bench *b)
{
        struct scsi_task *task = iscsi_readcapacity16_sync(b->iscsi, b->lun);
        struct scsi_readcapacity16 *rc;

        if (task == NULL || task->status != SCSI_STATUS_GOOD) {
                fprintf(stderr, "tdm-bench-write: READ CAPACITY(16) failed: %s\n",
                        iscsi_get_error(b->iscsi));
                if (task)
                        scsi_free_scsi_task(task);
                return -EIO;
        }
        rc = scsi_datain_unmarshall(task);
        if (rc == NULL) {
                scsi_free_scsi_task(task);
                return -EIO;
        }
        b->block_size = rc->block_length;
        b->region_blocks = rc->returned_lba + 1;
        scsi_free_scsi_task(task);
        return 0;
}

static void io_done(struct iscsi_context *iscsi, int status, void *command_data, void *priv)
{
        struct slot *s = priv;
        struct bench *b = s->b;

        s->busy = false;
        b->inflight--;
        if (status == SCSI_STATUS_GOOD) {
                b->done++;
        } else {
                if (b->errors++ < 5)
                        fprintf(stderr, "tdm-bench-write: command failed: status 0x%x %s\n", status,
                                iscsi_get_error(iscsi));
                b->fatal = true;
        }
        scsi_free_scsi_task(command_data);
}

static uint64_t next_lba(struct bench *b)
{
        uint64_t per_io = b->opt->bs / b->block_size;
        uint64_t n_ios = b->region_blocks / per_io;
        uint64_t idx;

        if (b->opt->random) {
                idx = rng_next(&b->rng) % n_ios;
        } else {
                idx = b->next_lba++;
                if (b->next_lba >= n_ios)
                        b->next_lba = 0;
        }
        return idx * per_io;
}

static int issue(struct bench *b, struct slot *s)
{
        struct scsi_task *task;
        uint64_t lba = next_lba(b);

        if (b->opt->read)
                task = iscsi_read16_task(b->iscsi, b->lun, lba, b->opt->bs, (int)b->block_size, 0,
                                         0, 0, 0, 0, io_done, s);
        else
                task = iscsi_write16_task(b->iscsi, b->lun, lba, s->buf, b->opt->bs,
                                          (int)b->block_size, 0, 0, 0, 0, 0, io_done, s);
        if (task == NULL) {
                fprintf(stderr, "tdm-bench-write: cannot queue: %s\n", iscsi_get_error(b->iscsi));
                return -EIO;
        }
        s->busy = true;
        b->inflight++;
        return 0;
}

static int run(struct bench *b)
{
        uint64_t start = now_ns(), deadline = start + (uint64_t)(b->opt->seconds * 1e9);

        for (;;) {
                bool more = !stop_requested && !b->fatal && now_ns() < deadline;
                if (!more && b->inflight == 0)
                        break;
                for (unsigned i = 0; more && i < b->opt->qd; i++)
                        if (!b->slots[i].busy && issue(b, &b->slots[i]) != 0)
                                return -EIO;
                struct pollfd pfd = {.fd = iscsi_get_fd(b->iscsi),
                                     .events = (short)iscsi_which_events(b->iscsi)};
                int n = poll(&pfd, 1, 1000);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (iscsi_service(b->iscsi, n > 0 ? pfd.revents : 0) < 0) {
                        fprintf(stderr, "tdm-bench-write: %s\n", iscsi_get_error(b->iscsi));
                        return -EIO;
                }
        }
        double secs = (double)(now_ns() - start) / 1e9;
        printf("tdm-bench-write: op=%s pattern=%s bs=%u qd=%u seconds=%.1f ios=%" PRIu64
               " iops=%.0f mbps=%.1f errors=%" PRIu64 "\n",
               b->opt->read ? "read" : "write", b->opt->random ? "random" : "sequential",
               b->opt->bs, b->opt->qd, secs, b->done, (double)b->done / secs,
               (double)b->done * b->opt->bs / secs / 1e6, b->errors);
        return b->errors > 0 ? -EIO : 0;
}

static void usage(FILE *f)
{
        fprintf(f, "usage: tdm-bench-write URL [--qd N] [--bs BYTES] [--seconds S]"
                   " [--random|--sequential] [--read] [--region BYTES] [--initiator IQN]\n");
}

static int parse_options(int argc, char **argv, struct options *o)
{
        static const struct option longopts[] = {
            {"qd", required_argument, NULL, 'q'},      {"bs", required_argument, NULL, 'b'},
            {"seconds", required_argument, NULL, 's'}, {"random", no_argument, NULL, 'r'},
            {"sequential", no_argument, NULL, 'S'},    {"read", no_argument, NULL, 'R'},
            {"region", required_argument, NULL, 'g'},  {"initiator", required_argument, NULL, 'i'},
            {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
        };
        int c;

        *o = (struct options){.qd = 1,
                              .bs = 4096,
                              .seconds = 10,
                              .random = true,
                              .initiator = "iqn.2026-11.io.tandem:tdm-bench"};
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'q':
                        o->qd = (unsigned)strtoul(optarg, NULL, 0);
                        break;
                case 'b':
                        o->bs = (uint32_t)strtoul(optarg, NULL, 0);
                        break;
                case 's':
                        o->seconds = strtod(optarg, NULL);
                        break;
                case 'r':
                        o->random = true;
                        break;
                case 'S':
                        o->random = false;
                        break;
                case 'R':
                        o->read = true;
                        break;
                case 'g':
                        o->region_bytes = strtoull(optarg, NULL, 0);
                        break;
                case 'i':
                        o->initiator = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                default:
                        return -EINVAL;
                }
        }
        if (argc - optind != 1 || o->qd == 0 || o->bs == 0 || o->seconds <= 0)
                return -EINVAL;
        o->url = argv[optind];
        return 0;
}

int main(int argc, char **argv)
{
        struct options opt;
        struct bench b = {0};
        int rc;

        if (parse_options(argc, argv, &opt) != 0) {
                usage(stderr);
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        b.opt = &opt;
        b.rng = (uint64_t)time(NULL) | 1;
        b.iscsi = session_open(&opt, &b.lun);
        if (b.iscsi == NULL || read_capacity(&b) != 0)
                return 2;
        if (opt.bs % b.block_size != 0) {
                fprintf(stderr, "tdm-bench-write: --bs must be a multiple of %u\n", b.block_size);
                return 2;
        }
        if (opt.region_bytes != 0 && opt.region_bytes / b.block_size < b.region_blocks)
                b.region_blocks = opt.region_bytes / b.block_size;
        if (b.region_blocks < opt.bs / b.block_size) {
                fprintf(stderr, "tdm-bench-write: region smaller than one I/O\n");
                return 2;
        }
        b.slots = calloc(opt.qd, sizeof(*b.slots));
        if (b.slots == NULL)
                return 2;
        for (unsigned i = 0; i < opt.qd; i++) {
                b.slots[i].b = &b;
                b.slots[i].buf = malloc(opt.bs);
                if (b.slots[i].buf == NULL)
                        return 2;
                for (uint32_t j = 0; j < opt.bs; j++)
                        b.slots[i].buf[j] = (unsigned char)rng_next(&b.rng);
        }
        rc = run(&b);
        if (!b.fatal)
                iscsi_logout_sync(b.iscsi);
        iscsi_destroy_context(b.iscsi);
        for (unsigned i = 0; i < opt.qd; i++)
                free(b.slots[i].buf);
        free(b.slots);
        return rc == 0 ? 0 : 1;
}
