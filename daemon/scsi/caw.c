/*
 * COMPARE AND WRITE (SBC-4 5.3): the verify half is compared with the medium and, if equal,
 * the write half written, with no other command seeing or changing those blocks in between
 * (the range is held exclusively from the read to the end of the write). On a replicated LUN
 * the write is on both nodes before GOOD, like any write.
 *
 * A resend: a CAW that was applied but whose status was lost (the connection dropped, or the
 * Primary failed over after both copies had the write) comes again, and now the medium holds
 * its write half, or by now another initiator's change, not its verify half. Answering
 * MISCOMPARE would tell ESXi its heartbeat or lock was lost ("ATS miscompare"), which drops
 * the datastore. So a CAW that miscompares completes GOOD, writing nothing, when the medium
 * holds exactly its write half (its effect is there), or when it is the one its initiator
 * applied there last: every applied CAW is remembered (caw_memory.c: per initiator and LBA, a
 * digest of both halves, stored on every copy in the same change as its write), which covers
 * a resend after another host changed the blocks. Never a GOOD for a write that did not land:
 * a copy holds the entry only with the data.
 * A resend comes on a new session (the status was lost with the connection), so this holds
 * only for a CAW at an LBA its nexus has had no CAW answered at: the same CAW sent twice on one
 * session is a repeat, and its second copy miscompares as SBC says.
 */
#include <stdlib.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

#define CAW_NOLB_BYTE 13

uint32_t scsi_caw_max_blocks(const struct scsi_lun *lun)
{
        uint32_t by_bytes = SCSI_MAX_CAW_BYTES / lun->block_size;
        return by_bytes < SCSI_MAX_CAW_BLOCKS ? by_bytes : SCSI_MAX_CAW_BLOCKS;
}

/* First differing byte of two buffers, or len when equal. */
static uint32_t first_difference(const uint8_t *a, const uint8_t *b, uint32_t len)
{
        if (memcmp(a, b, len) == 0)
                return len;
        uint32_t i = 0;
        while (a[i] == b[i])
                i++;
        return i;
}

/* The nexus's bit for a CAW at (LUN, LBA): word index in *word, the bit returned. */
static uint64_t caw_bit(const struct scsi_task *task, unsigned *word)
{
        uint64_t h = (task->lba ^ ((uint64_t)task->lun->id << 48)) * 0x9e3779b97f4a7c15ull;
        unsigned bit = (unsigned)(h >> 52) % SCSI_CAW_ANSWERED_BITS;
        *word = bit / 64;
        return 1ull << (bit % 64);
}

static bool caw_may_be_resend(const struct scsi_task *task)
{
        if (!task->nexus)
                return false;
        unsigned w;
        uint64_t bit = caw_bit(task, &w);
        return !(atomic_load_explicit(&task->nexus->caw_answered[w], memory_order_relaxed) & bit);
}

static void caw_mark_answered(struct scsi_task *task)
{
        if (!task->nexus)
                return;
        unsigned w;
        uint64_t bit = caw_bit(task, &w);
        atomic_fetch_or_explicit(&task->nexus->caw_answered[w], bit, memory_order_relaxed);
}

static enum scsi_reason caw_locked(struct scsi_task *task, uint8_t *buf, uint64_t off, uint32_t len)
{
        struct scsi_lun *lun = task->lun;
        const uint8_t *verify = task->data_out, *write = task->data_out + len;
        int rc = tdm_medium_read(lun->medium, buf, len, off);
        if (rc < 0)
                return scsi_io_error(task, "compare and write read", rc, false);
        uint32_t at = first_difference(buf, verify, len);
        const char *who = task->nexus ? task->nexus->initiator : NULL;
        size_t halves = 2 * (size_t)len;
        if (at < len) {
                /* Its effect is there, or it is the one its initiator applied here last. */
                if (who && caw_may_be_resend(task) &&
                    (memcmp(buf, write, len) == 0 ||
                     scsi_caw_was_applied(lun, who, task->lba,
                                          scsi_caw_digest(task->data_out, halves)))) {
                        log_debug("LUN %llu: COMPARE AND WRITE at %llu already applied (a resend)",
                                  (unsigned long long)lun->id, (unsigned long long)off);
                        return SCSI_OK;
                }
                task->info = at; /* offset of the first differing byte in the data-out */
                task->info_valid = true;
                return SR_MISCOMPARE_VERIFY;
        }
        uint32_t flags = scsi_write_flags(task, task->cdb[1] & 0x08);
        rc = who ? scsi_caw_write_remembered(lun, who, task->lba,
                                             scsi_caw_digest(task->data_out, halves), write, len,
                                             flags)
                 : tdm_medium_write(lun->medium, write, len, off, flags);
        if (rc < 0)
                return scsi_io_error(task, "compare and write", rc, true);
        scsi_lun_count_bytes(lun, true, len);
        return SCSI_OK;
}

/* On the pool: the range is held from the read to the end of the write. */
static enum scsi_reason caw_blocking(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        uint32_t len = (uint32_t)task->nblocks * lun->block_size;
        uint64_t off = task->lba * lun->block_size;
        uint8_t *buf = NULL;
        if (posix_memalign((void **)&buf, SCSI_GRANULARITY_BYTES, len))
                return SR_INTERNAL_ERROR;
        struct tdm_range lock = {.off = off, .len = len};
        tdm_range_lock_wait(lun->medium, &lock);
        enum scsi_reason r = caw_locked(task, buf, off, len);
        if (r == SCSI_OK || r == SR_MISCOMPARE_VERIFY)
                caw_mark_answered(task);
        tdm_range_unlock(lun->medium, &lock);
        free(buf);
        return r;
}

enum scsi_reason sbc_compare_and_write(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        uint64_t lba = get_be64(task->cdb + 2);
        uint32_t nblocks = task->cdb[CAW_NOLB_BYTE];
        uint32_t len = nblocks * lun->block_size;
        task->xfer_len = 2 * len;
        if (nblocks > scsi_caw_max_blocks(lun))
                return scsi_bad_cdb_field(task, CAW_NOLB_BYTE, -1);
        /* Both halves, exactly: anything else is not the command the CDB describes. */
        if (task->expected_len != 2 * len || task->data_out_len < 2 * len)
                return scsi_bad_cdb_field(task, CAW_NOLB_BYTE, -1);
        if (nblocks == 0)
                return SCSI_OK; /* nothing compared, nothing written: not an error */
        if (!scsi_lba_range_ok(lun, lba, nblocks))
                return SR_LBA_OUT_OF_RANGE;
        task->lba = lba;
        task->nblocks = nblocks;
        return scsi_task_block(task, caw_blocking);
}
