/*
 * The medium under a command: one locked request for the fast commands (READ, WRITE,
 * SYNCHRONIZE CACHE), the pool for the commands with several steps. Whatever the path,
 * a command completes on the loop that executed it.
 */
#include <errno.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

enum scsi_reason scsi_io_reason(int rc, bool write)
{
        if (rc == -EAGAIN) /* the medium is changing hands (peer being fenced): retry */
                return SR_NOT_READY_TRANSITION;
        if (write && rc == -ENOSPC)
                return SR_SPACE_ALLOC_FAILED;
        return write ? SR_WRITE_ERROR : SR_READ_ERROR;
}

enum scsi_reason scsi_io_error(struct scsi_task *task, const char *what, int rc, bool write)
{
        log_warn("LUN %llu: %s failed: %s (initiator %s)", (unsigned long long)task->lun->id, what,
                 strerror(-rc), task->nexus ? task->nexus->initiator : "?");
        return scsi_io_reason(rc, write);
}

uint32_t scsi_write_flags(const struct scsi_task *task, bool fua)
{
        bool wce = atomic_load_explicit(&task->lun->wce, memory_order_relaxed);
        return fua || !wce ? TDM_MIO_FUA : 0;
}

static void mio_done(struct tdm_mio *io)
{
        struct scsi_task *task = io->arg;
        tdm_range_unlock(task->lun->medium, &task->range);
        task->after_io(task, io->result);
}

static void mio_submit(struct scsi_task *task)
{
        tdm_medium_submit(task->lun->medium, &task->mio);
}

static void range_granted(struct tdm_range *r)
{
        mio_submit(r->arg);
}

void scsi_mio_start(struct scsi_task *task, enum tdm_mio_op op, void *buf, uint64_t off,
                    uint64_t len, uint32_t flags, void (*after)(struct scsi_task *task, int rc))
{
        task->after_io = after;
        task->mio = (struct tdm_mio){.op = op,
                                     .flags = flags,
                                     .off = off,
                                     .len = len,
                                     .buf = buf,
                                     .done = mio_done,
                                     .arg = task};
        /* A flush orders nothing: it covers what completed before it. */
        bool lock = op != TDM_MIO_FLUSH;
        task->range = (struct tdm_range){.off = off,
                                         .len = lock ? len : 0,
                                         .shared = op == TDM_MIO_READ,
                                         .granted = range_granted,
                                         .arg = task};
        if (!net_loop_current()) { /* a thread that may wait: the command completes here */
                tdm_range_lock_wait(task->lun->medium, &task->range);
                mio_submit(task);
                return;
        }
        if (tdm_range_lock(task->lun->medium, &task->range))
                mio_submit(task);
}

/* ---- handlers that may block: on the pool ---- */

static void blocking_run(struct net_work *w)
{
        struct scsi_task *task = (struct scsi_task *)((char *)w - offsetof(struct scsi_task, work));
        task->pending_result = task->blocking(task);
}

static void blocking_done(struct net_work *w)
{
        struct scsi_task *task = (struct scsi_task *)((char *)w - offsetof(struct scsi_task, work));
        scsi_task_complete(task, task->pending_result);
}

enum scsi_reason scsi_task_block(struct scsi_task *task,
                                 enum scsi_reason (*fn)(struct scsi_task *task))
{
        if (!net_loop_current())
                return fn(task); /* this thread may wait itself */
        task->blocking = fn;
        task->work.run = blocking_run;
        task->work.done = blocking_done;
        net_pool_submit(&task->work);
        return SCSI_PENDING;
}

int scsi_sync_write(struct scsi_task *task, const void *buf, uint64_t len, uint64_t off,
                    uint32_t flags)
{
        struct tdm_medium *m = task->lun->medium;
        struct tdm_range r = {.off = off, .len = len};
        tdm_range_lock_wait(m, &r);
        int rc = tdm_medium_write(m, buf, len, off, flags);
        tdm_range_unlock(m, &r);
        return rc;
}
