/*
 * Stores in memory (tmpfs, ramfs) have no device to wait for: a request costs a memcpy, less
 * than handing it to another thread. io_uring cannot run them inline either (tmpfs has no
 * FMODE_NOWAIT, so every SQE would go to an io-wq thread), so they run on the loop itself,
 * at the end of the round, the way a ring's inline completions would.
 */
#include <linux/magic.h>
#include <sys/vfs.h>

#include "bs_internal.h"

struct inline_queue {
        struct tdm_mio *head, *tail; /* linked through io->impl */
        bool armed;
};

static _Thread_local struct inline_queue queue;

bool bs_in_memory(const struct bs_dev *bs)
{
        struct statfs st;
        if (bs->is_blockdev || fstatfs(bs->fd, &st) < 0)
                return false;
        return st.f_type == TMPFS_MAGIC || st.f_type == RAMFS_MAGIC;
}

static void run_queued(void *arg)
{
        struct inline_queue *q = arg;
        q->armed = false;
        struct tdm_mio *io = q->head;
        q->head = q->tail = NULL;
        while (io) {
                struct tdm_mio *next = io->impl;
                io->impl = NULL;
                tdm_mio_complete(io, bs_run_sync(bs_io_dev(io), io));
                io = next;
        }
}

void bs_inline_submit(struct tdm_mio *io)
{
        struct inline_queue *q = &queue;
        io->impl = NULL;
        if (q->tail)
                q->tail->impl = io;
        else
                q->head = io;
        q->tail = io;
        if (q->armed)
                return;
        if (net_loop_at_round_end(io->loop, run_queued, q) == 0)
                q->armed = true;
        else
                run_queued(q); /* no hook slot left: now */
}
