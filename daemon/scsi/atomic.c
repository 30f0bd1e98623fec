/*
 * WRITE ATOMIC(16), and the exclusion that makes it atomic for the other commands.
 *
 * What a LUN guarantees, and why (the Block Limits VPD page advertises exactly this):
 *
 * Power loss. The one guarantee every disk and SSD gives is that one of its logical
 * sectors is written entirely or not at all. A 512-byte logical block of ours sits at a
 * 512-aligned offset of the backing file, so it lies inside a single sector of the device
 * whatever the sector size and the filesystem block size are (powers of two, at least 512):
 * one 512-byte block written in place is power-fail atomic. Nothing larger is: the page
 * cache, the filesystem and the device may persist any subset of the sectors of a bigger
 * write, and a larger logical block may straddle sectors. So without a journal a LUN with
 * 512-byte blocks offers atomic writes of one block, and a LUN with larger blocks none.
 * With a journal (scsi_lun_attach_atomic_journal(), which the registry gives every
 * writable LUN) up to SCSI_MAX_ATOMIC_BYTES are atomic: the data is made durable in the
 * journal before it is written in place, and a record a crash left behind is written
 * again when the LUN is next opened (atomic_journal.c).
 *
 * Concurrent commands. The kernel makes a pwrite atomic neither against a pread of the
 * same range (a buffered read copies a page while a write fills it) nor against an
 * overlapping write (O_DIRECT, block devices). The stripes of scsi_internal.h exclude
 * them, at no cost to a READ while no atomic write is in flight: two loads of a
 * read-mostly cache line, no lock, no store.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "scsi/scsi_internal.h"
#include "tandem/log.h"

/* The stripes a byte range covers: count consecutive slots from first, wrapping around. */
struct stripe_span {
        unsigned first, count;
};

static struct stripe_span span_of(uint64_t off, uint64_t len)
{
        if (len == 0)
                return (struct stripe_span){0, 0};
        uint64_t a = off >> SCSI_ATOMIC_STRIPE_SHIFT;
        uint64_t n = ((off + len - 1) >> SCSI_ATOMIC_STRIPE_SHIFT) - a + 1;
        return (struct stripe_span){(unsigned)(a % SCSI_ATOMIC_STRIPES),
                                    n >= SCSI_ATOMIC_STRIPES ? SCSI_ATOMIC_STRIPES : (unsigned)n};
}

static unsigned span_slot(struct stripe_span sp, unsigned i)
{
        return (sp.first + i) % SCSI_ATOMIC_STRIPES;
}

static bool span_has(struct stripe_span sp, unsigned slot)
{
        return (slot + SCSI_ATOMIC_STRIPES - sp.first) % SCSI_ATOMIC_STRIPES < sp.count;
}

/* Mutexes are taken in ascending slot order whatever the span's start: no deadlock. */
static void span_lock(struct scsi_stripes *st, struct stripe_span sp)
{
        for (unsigned s = 0; s < SCSI_ATOMIC_STRIPES; s++)
                if (span_has(sp, s))
                        pthread_mutex_lock(&st->lock[s]);
}

static void span_unlock(struct scsi_stripes *st, struct stripe_span sp)
{
        for (unsigned i = 0; i < sp.count; i++)
                pthread_mutex_unlock(&st->lock[span_slot(sp, i)]);
}

void scsi_stripes_init(struct scsi_stripes *st)
{
        for (unsigned s = 0; s < SCSI_ATOMIC_STRIPES; s++) {
                atomic_init(&st->seq[s], 0);
                atomic_init(&st->writers[s].n, 0);
                pthread_mutex_init(&st->lock[s], NULL);
        }
}

void scsi_stripes_destroy(struct scsi_stripes *st)
{
        for (unsigned s = 0; s < SCSI_ATOMIC_STRIPES; s++)
                pthread_mutex_destroy(&st->lock[s]);
}

static struct scsi_stripes *lun_stripes(struct scsi_lun *lun)
{
        return &scsi_lun_private(lun)->stripes;
}

/* ---- readers: a seqlock per stripe ---- */

/* Sum of the span's sequence numbers; false if an atomic write holds one (odd). */
static bool seq_snapshot(struct scsi_stripes *st, struct stripe_span sp, unsigned *sum)
{
        unsigned total = 0;
        for (unsigned i = 0; i < sp.count; i++) {
                unsigned v = atomic_load_explicit(&st->seq[span_slot(sp, i)], memory_order_acquire);
                if (v & 1)
                        return false;
                total += v;
        }
        *sum = total;
        return true;
}

/* Sequence numbers only grow, so an unchanged sum means no atomic write began or ended. */
static bool seq_unchanged(struct scsi_stripes *st, struct stripe_span sp, unsigned sum)
{
        atomic_thread_fence(memory_order_acquire);
        unsigned total = 0;
        for (unsigned i = 0; i < sp.count; i++)
                total += atomic_load_explicit(&st->seq[span_slot(sp, i)], memory_order_relaxed);
        return total == sum;
}

int scsi_medium_read(struct scsi_lun *lun, void *buf, size_t len, uint64_t off)
{
        struct scsi_stripes *st = lun_stripes(lun);
        struct stripe_span sp = span_of(off, len);
        unsigned sum;
        if (seq_snapshot(st, sp, &sum)) {
                int rc = bs_read(lun->bs, buf, len, off);
                if (rc < 0 || seq_unchanged(st, sp, sum))
                        return rc;
        }
        /* An atomic write overlapped: read again once it is done, holding it off. */
        span_lock(st, sp);
        int rc = bs_read(lun->bs, buf, len, off);
        span_unlock(st, sp);
        return rc;
}

/* ---- other writers: counted, so that an atomic write waits for them ---- */

void scsi_medium_write_begin(struct scsi_lun *lun, uint64_t off, uint64_t len,
                             struct scsi_write_guard *g)
{
        struct scsi_stripes *st = lun_stripes(lun);
        struct stripe_span sp = span_of(off, len);
        *g = (struct scsi_write_guard){.off = off, .len = len};
        /* Announce, then look (both seq_cst): an atomic write does the opposite, so at
         * least one of the two sees the other. */
        for (unsigned i = 0; i < sp.count; i++)
                atomic_fetch_add(&st->writers[span_slot(sp, i)].n, 1);
        bool busy = false;
        for (unsigned i = 0; i < sp.count; i++)
                busy |= atomic_load(&st->seq[span_slot(sp, i)]) & 1;
        if (!busy)
                return;
        for (unsigned i = 0; i < sp.count; i++)
                atomic_fetch_sub_explicit(&st->writers[span_slot(sp, i)].n, 1,
                                          memory_order_release);
        span_lock(st, sp);
        g->locked = true;
}

void scsi_medium_write_end(struct scsi_lun *lun, struct scsi_write_guard *g)
{
        struct scsi_stripes *st = lun_stripes(lun);
        struct stripe_span sp = span_of(g->off, g->len);
        if (g->locked) {
                span_unlock(st, sp);
                return;
        }
        for (unsigned i = 0; i < sp.count; i++)
                atomic_fetch_sub_explicit(&st->writers[span_slot(sp, i)].n, 1,
                                          memory_order_release);
}

/* ---- atomic writers ---- */

/* Other writes on the span finish their I/O without waiting for anything: wait for them. */
static void wait_for_writers(struct scsi_stripes *st, struct stripe_span sp)
{
        for (unsigned i = 0; i < sp.count; i++) {
                atomic_uint *n = &st->writers[span_slot(sp, i)].n;
                for (unsigned spins = 0; atomic_load(n) != 0; spins++) {
                        if (spins < 64) {
                                sched_yield();
                        } else {
                                struct timespec ts = {0, 50 * 1000};
                                nanosleep(&ts, NULL);
                        }
                }
        }
}

/* Writes len bytes at off so that no other command sees or makes part of them. */
static int write_exclusive(struct scsi_task *task, const void *buf, size_t len, uint64_t off)
{
        struct scsi_lun *lun = task->lun;
        struct scsi_stripes *st = lun_stripes(lun);
        struct stripe_span sp = span_of(off, len);
        span_lock(st, sp);
        for (unsigned i = 0; i < sp.count; i++)
                atomic_fetch_add(&st->seq[span_slot(sp, i)], 1); /* odd: readers keep off */
        wait_for_writers(st, sp);
        int rc = scsi_medium_write(task, buf, len, off);
        for (unsigned i = 0; i < sp.count; i++)
                atomic_fetch_add_explicit(&st->seq[span_slot(sp, i)], 1, memory_order_release);
        span_unlock(st, sp);
        return rc;
}

uint32_t scsi_atomic_max_blocks(const struct scsi_lun *lun)
{
        if (scsi_lun_private(lun)->journal)
                return SCSI_MAX_ATOMIC_BYTES / lun->block_size;
        return lun->block_size == 512 ? 1 : 0; /* see the top of this file */
}

static enum scsi_reason atomic_io_error(struct scsi_task *task, const char *what, int rc)
{
        log_warn("LUN %llu: %s failed: %s (initiator %s)", (unsigned long long)task->lun->id, what,
                 strerror(-rc), task->nexus ? task->nexus->initiator : "?");
        return rc == -ENOSPC ? SR_SPACE_ALLOC_FAILED : SR_WRITE_ERROR;
}

/*
 * Journal first, then in place, then the record goes. A crash before the record is
 * durable leaves the old data (nothing was written in place yet); a crash after it
 * replays the record. The record is retired only once the data is durable in place, and
 * durably, so a replay never undoes a later write that completed after this one. The
 * command is therefore durable whatever FUA and the write cache say.
 */
static enum scsi_reason write_journaled(struct scsi_task *task, uint64_t lba, uint32_t len)
{
        struct scsi_lun *lun = task->lun;
        struct scsi_atomic_journal *j = scsi_lun_private(lun)->journal;
        unsigned slot;
        int rc = scsi_journal_log(j, lba, len / lun->block_size, task->data_out, &slot);
        if (rc < 0)
                return atomic_io_error(task, "atomic write journal", rc);
        rc = write_exclusive(task, task->data_out, len, lba * lun->block_size);
        if (rc < 0) /* one retry from the same data before giving up on the medium */
                rc = write_exclusive(task, task->data_out, len, lba * lun->block_size);
        if (rc == 0)
                rc = scsi_medium_flush(task);
        if (rc < 0) {
                /* Its record must never be replayed over later writes: no journal from here. */
                scsi_journal_fail(j, rc);
                return atomic_io_error(task, "atomic write", rc);
        }
        rc = scsi_journal_retire(j, slot);
        if (rc < 0)
                return atomic_io_error(task, "atomic write journal retire", rc);
        return SCSI_OK;
}

/* WRITE ATOMIC(16): ATOMIC BOUNDARY is not supported, so the table refuses it nonzero. */
enum scsi_reason sbc_write_atomic16(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        uint64_t lba = get_be64(task->cdb + 2);
        uint32_t nblocks = get_be16(task->cdb + 12);
        uint32_t max = scsi_atomic_max_blocks(lun);
        if (max == 0)
                return SR_INVALID_OPCODE;
        task->xfer_len = nblocks * lun->block_size;
        if (!scsi_lba_range_ok(lun, lba, nblocks))
                return SR_LBA_OUT_OF_RANGE;
        if (nblocks > max)
                return scsi_bad_cdb_field(task, 12, -1);
        /* Whole blocks the initiator sent (an EDTL below the CDB's writes less). */
        uint32_t have = min_u32(task->data_out_len, task->xfer_len);
        uint32_t len = have - have % lun->block_size;
        if (len == 0)
                return SCSI_OK;
        enum scsi_reason r;
        if (scsi_lun_private(lun)->journal) {
                r = write_journaled(task, lba, len);
        } else {
                int rc = write_exclusive(task, task->data_out, len, lba * lun->block_size);
                r = rc < 0 ? atomic_io_error(task, "atomic write", rc)
                           : scsi_write_commit(task, task->cdb[1] & 0x08);
        }
        if (r == SCSI_OK)
                scsi_lun_count_bytes(lun, true, len);
        return r;
}
