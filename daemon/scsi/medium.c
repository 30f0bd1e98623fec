/*
 * Every change of a LUN's medium made by a command goes through here, so that a
 * replicated LUN sends it to its peer and a local one goes straight to the backing store.
 */
#include "scsi/scsi_internal.h"
#include "tandem/repl.h"

int scsi_medium_write(struct scsi_task *task, const void *buf, size_t len, uint64_t off)
{
        struct scsi_lun *lun = task->lun;
        if (lun->repl)
                return repl_lun_io(lun->repl, task, REPL_IO_WRITE, buf, off, len);
        return bs_write(lun->bs, buf, len, off);
}

int scsi_medium_write_zeroes(struct scsi_task *task, uint64_t off, uint64_t len)
{
        struct scsi_lun *lun = task->lun;
        if (lun->repl)
                return repl_lun_io(lun->repl, task, REPL_IO_ZERO, NULL, off, len);
        return bs_write_zeroes(lun->bs, off, len);
}

int scsi_medium_unmap(struct scsi_task *task, uint64_t off, uint64_t len)
{
        struct scsi_lun *lun = task->lun;
        if (lun->repl)
                return repl_lun_io(lun->repl, task, REPL_IO_UNMAP, NULL, off, len);
        return bs_unmap(lun->bs, off, len);
}

int scsi_medium_flush(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        if (lun->repl)
                return repl_lun_io(lun->repl, task, REPL_IO_FLUSH, NULL, 0, 0);
        return bs_flush(lun->bs);
}
