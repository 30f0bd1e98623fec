/*
 * The pool engine: a request runs with blocking calls on a pool thread and completes back on
 * its loop. Serves where io_uring cannot (or TANDEM_BACKSTORE_IO=threads); bs_run_sync is
 * also how a thread on no loop runs a request, at once.
 */
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bs_internal.h"

int bs_run_sync(struct bs_dev *bs, struct tdm_mio *io)
{
        bool fua = io->flags & TDM_MIO_FUA;
        int rc;
        switch (io->op) {
        case TDM_MIO_READ:
                return bs_read(bs, io->buf, io->len, io->off);
        case TDM_MIO_WRITE: {
                struct iovec iov = {.iov_base = io->buf, .iov_len = io->len};
                bool dsync = fua && bs->fua_dsync;
                rc = bs_writev_flags(bs, &iov, 1, io->off, dsync ? RWF_DSYNC : 0);
                if (dsync)
                        return rc;
                break;
        }
        case TDM_MIO_WRITE_ZEROES:
                rc = bs_write_zeroes(bs, io->off, io->len);
                break;
        case TDM_MIO_UNMAP:
                rc = bs_unmap(bs, io->off, io->len);
                break;
        case TDM_MIO_FLUSH:
                return bs_flush(bs);
        default:
                return -EINVAL;
        }
        if (rc == 0 && fua)
                rc = bs_flush(bs);
        return rc;
}

static void pool_run(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        io->result = bs_run_sync(bs_io_dev(io), io);
}

static void pool_done(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        tdm_mio_complete(io, io->result);
}

void bs_threads_submit(struct tdm_mio *io)
{
        io->impl_state |= BS_ST_THREADS;
        if (io->op == TDM_MIO_FLUSH) {
                /* Queued flushes hold no pool thread: only the carrier's fdatasync does. */
                int rc;
                switch (bs_flush_join(bs_io_dev(io), io, &rc)) {
                case BS_FLUSH_DONE:
                        tdm_mio_complete(io, rc);
                        return;
                case BS_FLUSH_WAIT:
                        return;
                case BS_FLUSH_CARRY:
                        bs_threads_carry(io);
                        return;
                }
        }
        io->work.run = pool_run;
        io->work.done = pool_done;
        net_pool_submit(&io->work);
}

static void carry_run(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        io->result = fdatasync(bs_io_dev(io)->fd) < 0 ? -errno : 0;
}

/* On whichever thread: completing the waiters posts each to its own loop. */
static void carry_done(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        bs_flush_finish(bs_io_dev(io), io->result);
}

void bs_threads_carry(struct tdm_mio *io)
{
        io->work.run = carry_run;
        io->work.done = carry_done;
        net_pool_submit(&io->work);
}
