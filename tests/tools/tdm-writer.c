/*
 * tdm-writer: a verifying writer for failover and fault tests (libiscsi async API).
 *
 *   tdm-writer write  URL [options]   write stamped blocks, record what the target acknowledged
 *   tdm-writer verify URL --journal F read back every block written and check it
 *
 * Every logical block written carries a stamp: magic, run id, its own LBA, the sequence number
 * of the write, and a checksum over the whole block. The region is cut into slots of one write
 * each; a slot never has two writes in flight, so after any fault each block must hold the last
 * acknowledged write of its slot or a later issued one. verify prints
 * "acked_lost=N corrupt=N": slots whose acknowledged data is gone (old, zero or foreign data),
 * and slots holding data no write of ours produced (bad checksum, wrong LBA, unknown sequence).
 *
 * The journal records every issued and every acknowledged write (buffered, flushed every
 * 100 ms and at exit), so a separate verify run can check after the writer is gone.
 * With --reconnect libiscsi reconnects by itself (re-sending unfinished commands in a new
 * session, with iscsi_set_no_ua_on_reconnect(1)); without it the first connection loss ends
 * the run with an error.
 */
#include <errno.h>
#include <fcntl.h>
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

#define STAMP_MAGIC     0x504d4154534d4454ull /* "TDMSTAMP" */
#define STAMP_OFF_MAGIC 0
#define STAMP_OFF_RUN   8
#define STAMP_OFF_LBA   16
#define STAMP_OFF_SEQ   24
#define STAMP_OFF_SUM   32
#define STAMP_LEN       40

#define JOURNAL_MAGIC    "TDMJRNL1"
#define JOURNAL_HDR_LEN  64
#define JOURNAL_REC_LEN  24
#define JOURNAL_FLUSH_NS (100 * 1000000ull)
#define REC_ISSUE        1
#define MAX_UA_RETRIES   8 /* per write: more means the target keeps raising them */
#define REC_ACK          2

#define MAX_REPORTED_PROBLEMS 20

struct options {
        const char *mode;
        const char *url;
        const char *journal;
        const char *initiator;
        unsigned qd;
        uint32_t io_bytes;
        uint64_t lba_start;
        uint64_t nblocks; /* region length in logical blocks; 0 = up to 256 MiB */
        double seconds;
        uint64_t count;
        bool random;
        bool reconnect;
        bool verify_after;
        bool fua;
        unsigned max_stall_s;
        unsigned liveness_s;
        uint64_t seed;
        uint64_t pr_key;   /* registered right after the first login (0: none) */
        uint32_t isid_rnd; /* with pr_key: the ISID (random format) kept across reconnects */
};

/* The region and what happened to each slot of it. */
struct region {
        uint64_t run_id;
        uint32_t block_size;
        uint64_t lba_start;
        uint64_t nblocks;
        uint32_t io_blocks;
        uint64_t nslots;
        uint64_t *acked_seq;  /* 0 = never acknowledged */
        uint64_t *issued_seq; /* highest sequence number issued to the slot */
        bool *busy;
};

struct journal {
        int fd;
        unsigned char *buf;
        size_t len;
        size_t cap;
        uint64_t last_flush_ns;
        bool failed;
};

struct run;

/* One command slot of the queue. (libiscsi keeps its own pointer in the task's private
 * pointer, so the run is reached through here.) */
struct io {
        struct run *run;
        bool busy;
        uint64_t slot;
        uint64_t seq;
        uint64_t start_ns;
        unsigned char *buf;
        unsigned ua_retries; /* this write's re-sends after a unit attention */
};

struct run {
        struct options *opt;
        struct region *rg;
        struct journal *jr;
        struct iscsi_context *iscsi;
        int lun;
        struct io *ios;
        unsigned inflight;
        uint64_t next_seq;
        uint64_t next_seq_slot;
        uint64_t rng;
        uint64_t issued, acked, errors;
        uint64_t max_latency_ns;
        uint64_t max_stall_ns;
        uint64_t last_progress_ns;
        uint64_t last_forced_reconnect_ns;
        unsigned forced_reconnects;
        unsigned ua_retries; /* writes re-sent after a unit attention, as initiators do */
        bool fatal;
        /* verify */
        uint64_t checked, lost, corrupt, unwritten, reported;
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
        /* xorshift64* */
        uint64_t x = *s;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *s = x;
        return x * 0x2545f4914f6cdd1dull;
}

static void put_le64(unsigned char *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p)
{
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

/* Word-wise mixing hash over a block whose checksum field is treated as zero. */
static uint64_t block_checksum(const unsigned char *b, uint32_t len)
{
        uint64_t h = 0x9e3779b97f4a7c15ull;
        for (uint32_t off = 0; off < len; off += 8) {
                uint64_t w = off == STAMP_OFF_SUM ? 0 : get_le64(b + off);
                h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
                h *= 0xff51afd7ed558ccdull;
        }
        return h ^ (h >> 33);
}

static void stamp_block(unsigned char *b, uint32_t len, uint64_t run_id, uint64_t lba, uint64_t seq)
{
        put_le64(b + STAMP_OFF_MAGIC, STAMP_MAGIC);
        put_le64(b + STAMP_OFF_RUN, run_id);
        put_le64(b + STAMP_OFF_LBA, lba);
        put_le64(b + STAMP_OFF_SEQ, seq);
        for (uint32_t off = STAMP_LEN; off < len; off += 8)
                put_le64(b + off, lba * 0x100000001b3ull ^ seq * 0xc2b2ae3d27d4eb4full ^ off);
        put_le64(b + STAMP_OFF_SUM, block_checksum(b, len));
}

/* ------------------------------------------------------------------------------------------ */
/* Journal */

static int journal_flush(struct journal *jr)
{
        size_t done = 0;
        while (done < jr->len) {
                ssize_t n = write(jr->fd, jr->buf + done, jr->len - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (!jr->failed)
                                fprintf(stderr, "tdm-writer: journal write: %s\n", strerror(errno));
                        jr->failed = true;
                        return -errno;
                }
                done += (size_t)n;
        }
        jr->len = 0;
        jr->last_flush_ns = now_ns();
        return 0;
}

static void journal_record(struct journal *jr, uint32_t type, uint64_t slot, uint64_t seq)
{
        if (jr == NULL)
                return;
        if (jr->len + JOURNAL_REC_LEN > jr->cap)
                journal_flush(jr);
        unsigned char *p = jr->buf + jr->len;
        memset(p, 0, JOURNAL_REC_LEN);
        p[0] = (unsigned char)type;
        put_le64(p + 8, slot);
        put_le64(p + 16, seq);
        jr->len += JOURNAL_REC_LEN;
}

static int journal_create(struct journal *jr, const char *path, const struct region *rg)
{
        unsigned char hdr[JOURNAL_HDR_LEN] = {0};

        jr->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (jr->fd < 0) {
                fprintf(stderr, "tdm-writer: %s: %s\n", path, strerror(errno));
                return -errno;
        }
        jr->cap = 64 * 1024;
        jr->buf = malloc(jr->cap);
        if (jr->buf == NULL)
                return -ENOMEM;
        memcpy(hdr, JOURNAL_MAGIC, 8);
        put_le64(hdr + 8, rg->run_id);
        put_le64(hdr + 16, rg->block_size);
        put_le64(hdr + 24, rg->lba_start);
        put_le64(hdr + 32, rg->nblocks);
        put_le64(hdr + 40, rg->io_blocks);
        memcpy(jr->buf, hdr, sizeof(hdr));
        jr->len = sizeof(hdr);
        return journal_flush(jr);
}

static int region_alloc(struct region *rg);

/* Rebuild the region and its slot states from a journal written by an earlier run. */
static int journal_load(const char *path, struct region *rg)
{
        FILE *f = fopen(path, "rb");
        unsigned char hdr[JOURNAL_HDR_LEN], rec[JOURNAL_REC_LEN];
        uint64_t nrec = 0;

        if (f == NULL) {
                fprintf(stderr, "tdm-writer: %s: %s\n", path, strerror(errno));
                return -errno;
        }
        if (fread(hdr, 1, sizeof(hdr), f) != sizeof(hdr) || memcmp(hdr, JOURNAL_MAGIC, 8) != 0) {
                fprintf(stderr, "tdm-writer: %s: not a tdm-writer journal\n", path);
                fclose(f);
                return -EINVAL;
        }
        rg->run_id = get_le64(hdr + 8);
        rg->block_size = (uint32_t)get_le64(hdr + 16);
        rg->lba_start = get_le64(hdr + 24);
        rg->nblocks = get_le64(hdr + 32);
        rg->io_blocks = (uint32_t)get_le64(hdr + 40);
        if (rg->block_size == 0 || rg->io_blocks == 0 || region_alloc(rg) != 0) {
                fclose(f);
                return -EINVAL;
        }
        while (fread(rec, 1, sizeof(rec), f) == sizeof(rec)) {
                uint64_t slot = get_le64(rec + 8), seq = get_le64(rec + 16);
                nrec++;
                if (slot >= rg->nslots)
                        continue;
                if (rec[0] == REC_ISSUE && seq > rg->issued_seq[slot])
                        rg->issued_seq[slot] = seq;
                else if (rec[0] == REC_ACK && seq > rg->acked_seq[slot])
                        rg->acked_seq[slot] = seq;
        }
        fclose(f);
        fprintf(stderr, "tdm-writer: journal %s: %" PRIu64 " records, run %016" PRIx64 "\n", path,
                nrec, rg->run_id);
        return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Session */

/*
 * PERSISTENT RESERVE OUT, REGISTER AND IGNORE EXISTING KEY, once: a reconnect keeps the ISID,
 * so the I_T nexus stays registered as long as the target keeps its registrations.
 */
static int pr_register(struct iscsi_context *iscsi, int lun, uint64_t key)
{
        struct scsi_persistent_reserve_out_basic p = {.service_action_reservation_key = key};
        for (int tries = 0; tries < 8; tries++) {
                struct scsi_task *t = iscsi_persistent_reserve_out_sync(
                    iscsi, lun, SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY, 0, 0, &p);
                if (t == NULL)
                        break;
                bool ua = t->status == SCSI_STATUS_CHECK_CONDITION &&
                          t->sense.key == SCSI_SENSE_UNIT_ATTENTION;
                bool good = t->status == SCSI_STATUS_GOOD;
                scsi_free_scsi_task(t);
                if (good)
                        return 0;
                if (!ua)
                        break;
        }
        fprintf(stderr, "tdm-writer: PR registration failed: %s\n", iscsi_get_error(iscsi));
        return -EIO;
}

static struct iscsi_context *session_open(const struct options *opt, int *lun)
{
        struct iscsi_context *iscsi = iscsi_create_context(opt->initiator);
        struct iscsi_url *url;

        if (iscsi == NULL) {
                fprintf(stderr, "tdm-writer: cannot create iSCSI context\n");
                return NULL;
        }
        url = iscsi_parse_full_url(iscsi, opt->url);
        if (url == NULL) {
                fprintf(stderr, "tdm-writer: bad URL %s: %s\n", opt->url, iscsi_get_error(iscsi));
                iscsi_destroy_context(iscsi);
                return NULL;
        }
        iscsi_set_targetname(iscsi, url->target);
        iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
        if (url->user[0] != '\0')
                iscsi_set_initiator_username_pwd(iscsi, url->user, url->passwd);
        iscsi_set_no_ua_on_reconnect(iscsi, 1);
        iscsi_set_noautoreconnect(iscsi, opt->reconnect ? 0 : 1);
        if (opt->pr_key)
                iscsi_set_isid_random(iscsi, opt->isid_rnd, 0);
        if (iscsi_full_connect_sync(iscsi, url->portal, url->lun) != 0) {
                fprintf(stderr, "tdm-writer: login to %s failed: %s\n", opt->url,
                        iscsi_get_error(iscsi));
                iscsi_destroy_url(url);
                iscsi_destroy_context(iscsi);
                return NULL;
        }
        *lun = url->lun;
        iscsi_destroy_url(url);
        if (opt->pr_key && pr_register(iscsi, *lun, opt->pr_key) != 0) {
                iscsi_destroy_context(iscsi);
                return NULL;
        }
        return iscsi;
}

static int read_capacity(struct iscsi_context *iscsi, int lun, uint32_t *block_size,
                         uint64_t *nblocks)
{
        struct scsi_task *task = iscsi_readcapacity16_sync(iscsi, lun);
        struct scsi_readcapacity16 *rc;

        if (task == NULL || task->status != SCSI_STATUS_GOOD) {
                fprintf(stderr, "tdm-writer: READ CAPACITY(16) failed: %s\n",
                        iscsi_get_error(iscsi));
                if (task)
                        scsi_free_scsi_task(task);
                return -EIO;
        }
        rc = scsi_datain_unmarshall(task);
        if (rc == NULL) {
                scsi_free_scsi_task(task);
                return -EIO;
        }
        *block_size = rc->block_length;
        *nblocks = rc->returned_lba + 1;
        scsi_free_scsi_task(task);
        return 0;
}

/*
 * One round of the event loop: wait up to 100 ms for the socket, let libiscsi work.
 * Returns -1 when libiscsi gives up on the session.
 */
/*
 * A registered writer keeps its I_T nexus: libiscsi's reconnect makes a new context with a
 * new random ISID, where a real initiator reinstates its session with the same ISID (RFC 7143
 * 6.3.5). The new context logs in only once its socket is writable, in a later service call,
 * so setting the ISID back after every call (and after a forced reconnect) is in time.
 */
static void keep_isid(struct run *r)
{
        if (r->opt->pr_key)
                iscsi_set_isid_random(r->iscsi, r->opt->isid_rnd, 0);
}

static int service_once(struct run *r)
{
        int events = iscsi_which_events(r->iscsi);
        struct pollfd pfd = {.fd = iscsi_get_fd(r->iscsi), .events = (short)events};

        if (events == 0 || pfd.fd < 0) {
                /* Reconnect back-off: nothing to poll for; libiscsi wants a call later. */
                usleep(100 * 1000);
                int rc = iscsi_service(r->iscsi, 0) < 0 ? -1 : 0;
                keep_isid(r);
                return rc;
        }
        int n = poll(&pfd, 1, 100);
        if (n < 0 && errno != EINTR)
                return -1;
        if (iscsi_service(r->iscsi, n > 0 ? pfd.revents : 0) < 0) {
                fprintf(stderr, "tdm-writer: iscsi_service: %s\n", iscsi_get_error(r->iscsi));
                return -1;
        }
        keep_isid(r);
        return 0;
}

/* Wall-clock "HH:MM:SS.mmm", to line the writer's events up with the cluster's logs. */
static const char *wall_clock(char *buf, size_t len)
{
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        snprintf(buf, len, "%02d:%02d:%02d.%03ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000);
        return buf;
}

/* A stall this long is reported when it ends (it is the failover the tests measure). */
#define REPORTED_STALL_NS 500000000ull

static void note_progress(struct run *r, uint64_t start_ns)
{
        uint64_t now = now_ns();
        char clock[32];
        if (now - start_ns > r->max_latency_ns)
                r->max_latency_ns = now - start_ns;
        if (now - r->last_progress_ns > r->max_stall_ns)
                r->max_stall_ns = now - r->last_progress_ns;
        if (now - r->last_progress_ns >= REPORTED_STALL_NS)
                fprintf(stderr, "tdm-writer: %s: a completion after %.0f ms without one\n",
                        wall_clock(clock, sizeof(clock)),
                        (double)(now - r->last_progress_ns) / 1e6);
        r->last_progress_ns = now;
}

static void report_task_error(struct run *r, const char *what, uint64_t slot, int status,
                              struct scsi_task *task)
{
        if (r->errors > MAX_REPORTED_PROBLEMS)
                return;
        if (status == SCSI_STATUS_CHECK_CONDITION && task != NULL)
                fprintf(stderr, "tdm-writer: %s slot %" PRIu64 ": CHECK CONDITION %s/0x%04x\n",
                        what, slot, scsi_sense_key_str(task->sense.key), task->sense.ascq);
        else
                fprintf(stderr, "tdm-writer: %s slot %" PRIu64 ": status 0x%x: %s\n", what, slot,
                        status, iscsi_get_error(r->iscsi));
}

/* ------------------------------------------------------------------------------------------ */
/* Write mode */

static int region_alloc(struct region *rg)
{
        rg->nslots = rg->nblocks / rg->io_blocks;
        if (rg->nslots == 0) {
                fprintf(stderr, "tdm-writer: region smaller than one write\n");
                return -EINVAL;
        }
        rg->acked_seq = calloc(rg->nslots, sizeof(uint64_t));
        rg->issued_seq = calloc(rg->nslots, sizeof(uint64_t));
        rg->busy = calloc(rg->nslots, sizeof(bool));
        if (!rg->acked_seq || !rg->issued_seq || !rg->busy)
                return -ENOMEM;
        return 0;
}

static struct io *io_get(struct run *r)
{
        for (unsigned i = 0; i < r->opt->qd; i++)
                if (!r->ios[i].busy)
                        return &r->ios[i];
        return NULL;
}

/* Pick the next slot that has no write in flight. */
static uint64_t pick_slot(struct run *r)
{
        struct region *rg = r->rg;
        uint64_t s;

        if (r->opt->random)
                s = rng_next(&r->rng) % rg->nslots;
        else
                s = r->next_seq_slot++ % rg->nslots;
        while (rg->busy[s])
                s = (s + 1) % rg->nslots;
        return s;
}

static int send_write(struct run *r, struct io *io);

/* A unit attention means the command was not run (SAM-5): send it again, like initiators do. */
static bool resend_after_unit_attention(struct run *r, struct io *io, int status,
                                        const struct scsi_task *task)
{
        if (status != SCSI_STATUS_CHECK_CONDITION || !task ||
            task->sense.key != SCSI_SENSE_UNIT_ATTENTION || io->ua_retries >= MAX_UA_RETRIES)
                return false;
        io->ua_retries++;
        r->ua_retries++;
        return send_write(r, io) == 0;
}

static void write_done(struct iscsi_context *iscsi, int status, void *command_data, void *priv)
{
        struct io *io = priv;
        struct scsi_task *task = command_data;
        struct run *r = io->run;

        (void)iscsi;
        if (resend_after_unit_attention(r, io, status, task)) {
                scsi_free_scsi_task(task);
                return;
        }
        io->busy = false;
        r->inflight--;
        r->rg->busy[io->slot] = false;
        note_progress(r, io->start_ns);
        if (status == SCSI_STATUS_GOOD) {
                r->acked++;
                if (io->seq > r->rg->acked_seq[io->slot])
                        r->rg->acked_seq[io->slot] = io->seq;
                journal_record(r->jr, REC_ACK, io->slot, io->seq);
        } else {
                r->errors++;
                report_task_error(r, "write", io->slot, status, task);
                if (!r->opt->reconnect)
                        r->fatal = true;
        }
        scsi_free_scsi_task(task);
}

static int send_write(struct run *r, struct io *io)
{
        struct region *rg = r->rg;
        uint64_t lba = rg->lba_start + io->slot * rg->io_blocks;
        struct scsi_task *task = iscsi_write16_task(
            r->iscsi, r->lun, lba, io->buf, rg->io_blocks * rg->block_size, (int)rg->block_size, 0,
            0, r->opt->fua ? 1 : 0, 0, 0, write_done, io);
        if (task == NULL) {
                fprintf(stderr, "tdm-writer: cannot queue WRITE(16): %s\n",
                        iscsi_get_error(r->iscsi));
                return -EIO;
        }
        return 0;
}

static int issue_write(struct run *r)
{
        struct region *rg = r->rg;
        struct io *io = io_get(r);

        if (io == NULL)
                return 0;
        io->slot = pick_slot(r);
        io->seq = r->next_seq++;
        io->start_ns = now_ns();
        uint64_t lba = rg->lba_start + io->slot * rg->io_blocks;
        for (uint32_t i = 0; i < rg->io_blocks; i++)
                stamp_block(io->buf + (size_t)i * rg->block_size, rg->block_size, rg->run_id,
                            lba + i, io->seq);
        rg->issued_seq[io->slot] = io->seq;
        journal_record(r->jr, REC_ISSUE, io->slot, io->seq);
        io->ua_retries = 0;
        if (send_write(r, io) < 0)
                return -EIO;
        io->busy = true;
        rg->busy[io->slot] = true;
        r->inflight++;
        r->issued++;
        return 0;
}

/*
 * Our own liveness check: libiscsi sends no NOP-Outs, so a portal that went silent (no RST,
 * e.g. while a floating IP moves) would hold the commands forever. With --reconnect, after
 * --liveness seconds without any completion, drop the connection and let libiscsi log in
 * again and resend what is unfinished.
 */
static void liveness_check(struct run *r)
{
        uint64_t now = now_ns(), limit = (uint64_t)r->opt->liveness_s * 1000000000ull;

        if (!r->opt->reconnect || r->opt->liveness_s == 0 || r->inflight == 0)
                return;
        if (now - r->last_progress_ns < limit || now - r->last_forced_reconnect_ns < limit)
                return;
        char clock[32];
        fprintf(stderr, "tdm-writer: %s: no completion for %u s with %u in flight; reconnecting\n",
                wall_clock(clock, sizeof(clock)), r->opt->liveness_s, r->inflight);
        r->last_forced_reconnect_ns = now;
        r->forced_reconnects++;
        if (iscsi_reconnect(r->iscsi) != 0)
                fprintf(stderr, "tdm-writer: reconnect: %s\n", iscsi_get_error(r->iscsi));
        keep_isid(r);
}

static bool stall_exceeded(struct run *r)
{
        if (r->inflight == 0 || r->opt->max_stall_s == 0)
                return false;
        if (now_ns() - r->last_progress_ns < (uint64_t)r->opt->max_stall_s * 1000000000ull)
                return false;
        fprintf(stderr, "tdm-writer: no completion for %u s with %u in flight; giving up\n",
                r->opt->max_stall_s, r->inflight);
        return true;
}

static int write_loop(struct run *r)
{
        uint64_t start = now_ns();
        uint64_t deadline = r->opt->seconds > 0 ? start + (uint64_t)(r->opt->seconds * 1e9) : 0;

        r->last_progress_ns = start;
        for (;;) {
                bool more = !stop_requested && !r->fatal &&
                            (r->opt->count == 0 || r->issued < r->opt->count) &&
                            (deadline == 0 || now_ns() < deadline);
                if (!more && r->inflight == 0)
                        break;
                while (more && r->inflight < r->opt->qd && r->inflight < r->rg->nslots &&
                       (r->opt->count == 0 || r->issued < r->opt->count))
                        if (issue_write(r) != 0) {
                                /* Counted and ended like a failure: the summary prints. */
                                r->errors++;
                                r->fatal = true;
                                more = false;
                        }
                liveness_check(r);
                if (service_once(r) != 0 || stall_exceeded(r)) {
                        r->fatal = true;
                        break;
                }
                if (r->fatal && !r->opt->reconnect)
                        break;
                if (r->jr && now_ns() - r->jr->last_flush_ns > JOURNAL_FLUSH_NS)
                        journal_flush(r->jr);
        }
        if (r->jr)
                journal_flush(r->jr);
        double secs = (double)(now_ns() - start) / 1e9;
        printf("tdm-writer: mode=write writes=%" PRIu64 " acked=%" PRIu64 " errors=%" PRIu64
               " inflight_at_end=%u elapsed_s=%.1f iops=%.0f max_latency_ms=%.0f"
               " max_stall_ms=%.0f forced_reconnects=%u ua_retries=%u\n",
               r->issued, r->acked, r->errors, r->inflight, secs,
               secs > 0 ? (double)r->acked / secs : 0.0, (double)r->max_latency_ns / 1e6,
               (double)r->max_stall_ns / 1e6, r->forced_reconnects, r->ua_retries);
        fflush(stdout);
        return r->fatal ? -EIO : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Verify mode */

enum verdict { V_OK = 0, V_LOST = 1, V_CORRUPT = 2 };

static bool all_zero(const unsigned char *b, uint32_t len)
{
        for (uint32_t i = 0; i < len; i++)
                if (b[i] != 0)
                        return false;
        return true;
}

static void report_problem(struct run *r, const char *what, uint64_t slot, uint64_t lba,
                           uint64_t got_seq, uint64_t acked, uint64_t issued)
{
        if (r->reported++ >= MAX_REPORTED_PROBLEMS)
                return;
        fprintf(stderr,
                "tdm-writer: %s: slot %" PRIu64 " lba %" PRIu64 ": found seq %" PRIu64
                ", acked seq %" PRIu64 ", last issued seq %" PRIu64 "\n",
                what, slot, lba, got_seq, acked, issued);
}

static enum verdict check_block(struct run *r, const unsigned char *b, uint64_t slot, uint64_t lba)
{
        const struct region *rg = r->rg;
        uint32_t bs = rg->block_size;
        uint64_t acked = rg->acked_seq[slot], issued = rg->issued_seq[slot];

        if (get_le64(b + STAMP_OFF_MAGIC) != STAMP_MAGIC) {
                if (acked == 0)
                        return V_OK;
                report_problem(r, all_zero(b, bs) ? "lost (zeroes)" : "corrupt (foreign data)",
                               slot, lba, 0, acked, issued);
                return all_zero(b, bs) ? V_LOST : V_CORRUPT;
        }
        if (get_le64(b + STAMP_OFF_SUM) != block_checksum(b, bs)) {
                report_problem(r, "corrupt (checksum)", slot, lba, get_le64(b + STAMP_OFF_SEQ),
                               acked, issued);
                return V_CORRUPT;
        }
        if (get_le64(b + STAMP_OFF_RUN) != rg->run_id) {
                if (acked == 0)
                        return V_OK;
                report_problem(r, "lost (other run)", slot, lba, get_le64(b + STAMP_OFF_SEQ), acked,
                               issued);
                return V_LOST;
        }
        uint64_t seq = get_le64(b + STAMP_OFF_SEQ);
        if (get_le64(b + STAMP_OFF_LBA) != lba || seq > issued) {
                report_problem(r, "corrupt (misplaced or unknown write)", slot, lba, seq, acked,
                               issued);
                return V_CORRUPT;
        }
        if (seq < acked) {
                report_problem(r, "lost (older write)", slot, lba, seq, acked, issued);
                return V_LOST;
        }
        return V_OK;
}

static void read_done(struct iscsi_context *iscsi, int status, void *command_data, void *priv)
{
        struct io *io = priv;
        struct scsi_task *task = command_data;
        struct run *r = io->run;
        struct region *rg = r->rg;
        enum verdict worst = V_OK;

        (void)iscsi;
        io->busy = false;
        r->inflight--;
        note_progress(r, io->start_ns);
        if (status != SCSI_STATUS_GOOD ||
            task->datain.size < (int)(rg->io_blocks * rg->block_size)) {
                r->errors++;
                report_task_error(r, "read", io->slot, status, task);
                if (!r->opt->reconnect)
                        r->fatal = true;
                scsi_free_scsi_task(task);
                return;
        }
        uint64_t lba = rg->lba_start + io->slot * rg->io_blocks;
        for (uint32_t i = 0; i < rg->io_blocks; i++) {
                enum verdict v = check_block(r, task->datain.data + (size_t)i * rg->block_size,
                                             io->slot, lba + i);
                if (v > worst)
                        worst = v;
        }
        r->checked++;
        if (worst == V_LOST && rg->acked_seq[io->slot] != 0)
                r->lost++;
        else if (worst != V_OK)
                r->corrupt++;
        scsi_free_scsi_task(task);
}

static int verify_loop(struct run *r)
{
        struct region *rg = r->rg;
        uint64_t next = 0;

        r->inflight = 0;
        r->last_progress_ns = now_ns();
        for (;;) {
                while (next < rg->nslots && rg->issued_seq[next] == 0 && rg->acked_seq[next] == 0) {
                        r->unwritten++;
                        next++;
                }
                bool more = next < rg->nslots && !stop_requested && !r->fatal;
                if (!more && r->inflight == 0)
                        break;
                if (more && r->inflight < r->opt->qd) {
                        struct io *io = io_get(r);
                        uint64_t lba = rg->lba_start + next * rg->io_blocks;
                        struct scsi_task *task;

                        io->slot = next++;
                        io->start_ns = now_ns();
                        task =
                            iscsi_read16_task(r->iscsi, r->lun, lba, rg->io_blocks * rg->block_size,
                                              (int)rg->block_size, 0, 0, 0, 0, 0, read_done, io);
                        if (task == NULL) {
                                fprintf(stderr, "tdm-writer: cannot queue READ(16): %s\n",
                                        iscsi_get_error(r->iscsi));
                                return -EIO;
                        }
                        io->busy = true;
                        r->inflight++;
                        continue;
                }
                liveness_check(r);
                if (service_once(r) != 0 || stall_exceeded(r)) {
                        r->fatal = true;
                        break;
                }
        }
        bool complete = !r->fatal && !stop_requested && next == rg->nslots;
        printf("tdm-writer: mode=verify slots_checked=%" PRIu64 " slots_unwritten=%" PRIu64
               " read_errors=%" PRIu64 " complete=%s\n",
               r->checked, r->unwritten, r->errors, complete ? "yes" : "no");
        printf("acked_lost=%" PRIu64 " corrupt=%" PRIu64 "\n", r->lost, r->corrupt);
        fflush(stdout);
        if (!complete || r->errors > 0)
                return -EIO;
        return r->lost > 0 || r->corrupt > 0 ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
        fprintf(
            f, "usage: tdm-writer write URL [options]\n"
               "       tdm-writer verify URL --journal FILE [--qd N] [--reconnect]\n"
               "options:\n"
               "  --qd N            commands in flight (default 16)\n"
               "  --bs BYTES        bytes per write, a multiple of the LUN block (default 4096)\n"
               "  --lba N           first LBA of the region (default 0)\n"
               "  --blocks N        region length in LUN blocks (default: LUN, at most 256 MiB)\n"
               "  --seconds S       write for S seconds (default 10 unless --count)\n"
               "  --count N         stop after N writes\n"
               "  --random | --sequential   slot order (default random)\n"
               "  --journal FILE    record issued and acknowledged writes there\n"
               "  --reconnect       survive connection loss (libiscsi reconnect)\n"
               "  --verify          read back and verify at the end of a write run\n"
               "  --fua             set FUA on writes\n"
               "  --max-stall S     give up after S s without a completion (default 120, 0=never)\n"
               "  --liveness S      with --reconnect: reconnect after S s without a completion\n"
               "                    (default 15, above the target's I/O hold; 0=off)\n"
               "  --seed N          random seed (default: time)\n"
               "  --initiator IQN   initiator name\n"
               "  --pr-key KEY      register KEY (persistent reservations) after the login\n");
}

static int parse_options(int argc, char **argv, struct options *o)
{
        static const struct option longopts[] = {
            {"qd", required_argument, NULL, 'q'},
            {"bs", required_argument, NULL, 'b'},
            {"lba", required_argument, NULL, 'l'},
            {"blocks", required_argument, NULL, 'n'},
            {"seconds", required_argument, NULL, 's'},
            {"count", required_argument, NULL, 'c'},
            {"random", no_argument, NULL, 'r'},
            {"sequential", no_argument, NULL, 'S'},
            {"journal", required_argument, NULL, 'j'},
            {"reconnect", no_argument, NULL, 'R'},
            {"verify", no_argument, NULL, 'V'},
            {"fua", no_argument, NULL, 'F'},
            {"max-stall", required_argument, NULL, 'm'},
            {"liveness", required_argument, NULL, 'L'},
            {"seed", required_argument, NULL, 'e'},
            {"initiator", required_argument, NULL, 'i'},
            {"pr-key", required_argument, NULL, 'K'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        int c;

        *o = (struct options){.qd = 16,
                              .io_bytes = 4096,
                              .random = true,
                              .max_stall_s = 120,
                              .liveness_s = 15,
                              .seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32),
                              .initiator = "iqn.2026-11.io.tandem:tdm-writer"};
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'q':
                        o->qd = (unsigned)strtoul(optarg, NULL, 0);
                        break;
                case 'b':
                        o->io_bytes = (uint32_t)strtoul(optarg, NULL, 0);
                        break;
                case 'l':
                        o->lba_start = strtoull(optarg, NULL, 0);
                        break;
                case 'n':
                        o->nblocks = strtoull(optarg, NULL, 0);
                        break;
                case 's':
                        o->seconds = strtod(optarg, NULL);
                        break;
                case 'c':
                        o->count = strtoull(optarg, NULL, 0);
                        break;
                case 'r':
                        o->random = true;
                        break;
                case 'S':
                        o->random = false;
                        break;
                case 'j':
                        o->journal = optarg;
                        break;
                case 'R':
                        o->reconnect = true;
                        break;
                case 'V':
                        o->verify_after = true;
                        break;
                case 'F':
                        o->fua = true;
                        break;
                case 'm':
                        o->max_stall_s = (unsigned)strtoul(optarg, NULL, 0);
                        break;
                case 'L':
                        o->liveness_s = (unsigned)strtoul(optarg, NULL, 0);
                        break;
                case 'e':
                        o->seed = strtoull(optarg, NULL, 0);
                        break;
                case 'i':
                        o->initiator = optarg;
                        break;
                case 'K':
                        o->pr_key = strtoull(optarg, NULL, 0);
                        o->isid_rnd = (uint32_t)getpid() ^ (uint32_t)time(NULL);
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                default:
                        return -EINVAL;
                }
        }
        if (argc - optind != 2)
                return -EINVAL;
        o->mode = argv[optind];
        o->url = argv[optind + 1];
        if (strcmp(o->mode, "write") != 0 && strcmp(o->mode, "verify") != 0)
                return -EINVAL;
        if (strcmp(o->mode, "verify") == 0 && o->journal == NULL) {
                fprintf(stderr, "tdm-writer: verify needs --journal\n");
                return -EINVAL;
        }
        if (o->qd == 0 || o->io_bytes == 0)
                return -EINVAL;
        if (o->seconds == 0 && o->count == 0)
                o->seconds = 10;
        return 0;
}

/* Region of a write run from the options and the LUN's geometry. */
static int region_from_options(const struct options *o, uint32_t block_size, uint64_t lun_blocks,
                               struct region *rg)
{
        if (o->io_bytes % block_size != 0) {
                fprintf(stderr, "tdm-writer: --bs %u is not a multiple of the LUN block %u\n",
                        o->io_bytes, block_size);
                return -EINVAL;
        }
        if (block_size < 64 || block_size % 8 != 0) {
                fprintf(stderr, "tdm-writer: unsupported LUN block size %u\n", block_size);
                return -EINVAL;
        }
        if (o->lba_start >= lun_blocks) {
                fprintf(stderr, "tdm-writer: --lba beyond the LUN (%" PRIu64 " blocks)\n",
                        lun_blocks);
                return -EINVAL;
        }
        rg->block_size = block_size;
        rg->io_blocks = o->io_bytes / block_size;
        rg->lba_start = o->lba_start;
        rg->nblocks = o->nblocks;
        if (rg->nblocks == 0) {
                rg->nblocks = (256ull << 20) / block_size;
                if (rg->nblocks > lun_blocks - o->lba_start)
                        rg->nblocks = lun_blocks - o->lba_start;
        }
        if (rg->nblocks > lun_blocks - o->lba_start) {
                fprintf(stderr, "tdm-writer: region ends beyond the LUN\n");
                return -EINVAL;
        }
        uint64_t seed = o->seed;
        rg->run_id = rng_next(&seed) | 1;
        return region_alloc(rg);
}

static int alloc_ios(struct run *r)
{
        r->ios = calloc(r->opt->qd, sizeof(*r->ios));
        if (r->ios == NULL)
                return -ENOMEM;
        for (unsigned i = 0; i < r->opt->qd; i++) {
                r->ios[i].run = r;
                r->ios[i].buf = aligned_alloc(
                    4096, ((size_t)r->rg->io_blocks * r->rg->block_size + 4095) / 4096 * 4096);
                if (r->ios[i].buf == NULL)
                        return -ENOMEM;
        }
        return 0;
}

static void run_free(struct run *r, struct region *rg, struct journal *jr)
{
        /* First: destroying the context completes the commands still queued, and their
         * callbacks touch the buffers and the region freed below. */
        if (r->iscsi != NULL) {
                if (!r->fatal)
                        iscsi_logout_sync(r->iscsi);
                iscsi_destroy_context(r->iscsi);
                r->iscsi = NULL;
        }
        if (r->ios != NULL)
                for (unsigned i = 0; i < r->opt->qd; i++)
                        free(r->ios[i].buf);
        free(r->ios);
        free(rg->acked_seq);
        free(rg->issued_seq);
        free(rg->busy);
        if (jr->fd >= 0)
                close(jr->fd);
        free(jr->buf);
}

/* Write mode: the run, then optionally the read-back from the in-memory record. */
static int write_mode(struct run *r, struct journal *jr, uint32_t block_size, uint64_t lun_blocks)
{
        const struct options *opt = r->opt;
        struct region *rg = r->rg;
        int rc;

        if (region_from_options(opt, block_size, lun_blocks, rg) != 0 || alloc_ios(r) != 0)
                return -EINVAL;
        if (opt->journal != NULL) {
                if (journal_create(jr, opt->journal, rg) != 0)
                        return -EIO;
                r->jr = jr;
        }
        r->next_seq = 1;
        fprintf(stderr,
                "tdm-writer: run %016" PRIx64 " lba %" PRIu64 "+%" PRIu64 " (%" PRIu64
                " slots of %u blocks of %u bytes), qd %u, %s\n",
                rg->run_id, rg->lba_start, rg->nblocks, rg->nslots, rg->io_blocks, rg->block_size,
                opt->qd, opt->random ? "random" : "sequential");
        rc = write_loop(r);
        if (r->errors > 0 && rc == 0)
                rc = 1;
        if (opt->verify_after && !r->fatal) {
                stop_requested = 0;
                r->errors = 0;
                int vrc = verify_loop(r);
                if (vrc != 0 && rc == 0)
                        rc = vrc;
        }
        return rc;
}

static int verify_mode(struct run *r, uint32_t block_size, uint64_t lun_blocks)
{
        struct region *rg = r->rg;

        if (journal_load(r->opt->journal, rg) != 0)
                return -EINVAL;
        if (rg->block_size != block_size || rg->lba_start + rg->nblocks > lun_blocks) {
                fprintf(stderr, "tdm-writer: journal geometry does not match the LUN\n");
                return -EINVAL;
        }
        if (alloc_ios(r) != 0)
                return -ENOMEM;
        return verify_loop(r);
}

/* Exit status: 0 all good, 1 errors or lost/corrupt data found, 2 could not run. */
int main(int argc, char **argv)
{
        struct options opt;
        struct region rg = {0};
        struct journal jr = {.fd = -1};
        struct run r = {0};
        uint32_t block_size;
        uint64_t lun_blocks;
        int rc = -EIO;

        if (parse_options(argc, argv, &opt) != 0) {
                usage(stderr);
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);

        r.opt = &opt;
        r.rg = &rg;
        r.rng = opt.seed | 1;
        r.iscsi = session_open(&opt, &r.lun);
        if (r.iscsi != NULL && read_capacity(r.iscsi, r.lun, &block_size, &lun_blocks) == 0) {
                if (strcmp(opt.mode, "verify") == 0)
                        rc = verify_mode(&r, block_size, lun_blocks);
                else
                        rc = write_mode(&r, &jr, block_size, lun_blocks);
        }
        run_free(&r, &rg, &jr);
        return rc < 0 ? 2 : rc;
}
