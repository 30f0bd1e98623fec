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
 * Concurrent commands. An atomic write holds its whole range in the medium's range lock
 * (exclusive) from the journal record until the data is durable in place: every other
 * command on those LBAs takes the same lock (READ shared), so none sees or makes part of it.
 */
#include <errno.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

uint32_t scsi_atomic_max_blocks(const struct scsi_lun *lun)
{
        if (scsi_lun_private(lun)->journal)
                return SCSI_MAX_ATOMIC_BYTES / lun->block_size;
        return lun->block_size == 512 ? 1 : 0; /* see the top of this file */
}

static enum scsi_reason atomic_io_error(struct scsi_task *task, const char *what, int rc)
{
        return scsi_io_error(task, what, rc, true);
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
        uint64_t off = lba * lun->block_size;
        rc = tdm_medium_write(lun->medium, task->data_out, len, off, TDM_MIO_FUA);
        if (rc < 0) /* one retry from the same data before giving up on the medium */
                rc = tdm_medium_write(lun->medium, task->data_out, len, off, TDM_MIO_FUA);
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

/* On the pool, the whole range held: journaled, or a single block written in place. */
static enum scsi_reason write_atomic_blocking(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        uint32_t len = (uint32_t)task->nblocks * lun->block_size;
        struct tdm_range lock = {.off = task->lba * lun->block_size, .len = len};
        tdm_range_lock_wait(lun->medium, &lock);
        enum scsi_reason r;
        if (scsi_lun_private(lun)->journal) {
                r = write_journaled(task, task->lba, len);
        } else {
                int rc = tdm_medium_write(lun->medium, task->data_out, len, lock.off,
                                          scsi_write_flags(task, task->cdb[1] & 0x08));
                r = rc < 0 ? atomic_io_error(task, "atomic write", rc) : SCSI_OK;
        }
        tdm_range_unlock(lun->medium, &lock);
        if (r == SCSI_OK)
                scsi_lun_count_bytes(lun, true, len);
        return r;
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
        task->lba = lba;
        task->nblocks = len / lun->block_size;
        return scsi_task_block(task, write_atomic_blocking);
}
