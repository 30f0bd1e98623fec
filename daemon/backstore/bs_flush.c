/*
 * Group commit. A flush needs every write that completed before it was asked to be durable.
 * One fdatasync runs at a time per store: a flush joins the running one only if that one
 * started after all those writes (it covers them); otherwise it waits for the next, which
 * then covers every flush queued meanwhile. Blocking callers (bs_flush) and requests from
 * any loop share the same fdatasyncs. The first fdatasync error sticks: Linux reports a
 * writeback error once, so a later fdatasync could succeed though pages were lost.
 */
#include <errno.h>
#include <unistd.h>

#include "bs_internal.h"

static void wait_push_locked(struct bs_dev *bs, struct tdm_mio *io)
{
        io->impl = NULL;
        if (bs->flush_wait_tail)
                bs->flush_wait_tail->impl = io;
        else
                bs->flush_wait_head = io;
        bs->flush_wait_tail = io;
}

enum bs_flush_step bs_flush_join(struct bs_dev *bs, struct tdm_mio *io, int *rc)
{
        uint64_t need = atomic_load(&bs->write_seq);
        pthread_mutex_lock(&bs->flush_lock);
        if (bs->flush_err || bs->durable_seq >= need) {
                *rc = bs->flush_err;
                pthread_mutex_unlock(&bs->flush_lock);
                return BS_FLUSH_DONE;
        }
        io->impl_seq = need;
        wait_push_locked(bs, io);
        enum bs_flush_step step = BS_FLUSH_WAIT;
        if (!bs->flushing) {
                bs->flushing = true;
                bs->flush_covers = atomic_load(&bs->write_seq);
                step = BS_FLUSH_CARRY;
        }
        BS_SET_PHASE(io, step == BS_FLUSH_CARRY ? BS_PH_FLUSH_CARRY : BS_PH_FLUSH_WAIT);
        pthread_mutex_unlock(&bs->flush_lock);
        return step;
}

/*
 * The running fdatasync ended with rc (lock held): records it, takes out the waiters it
 * covered (*done) and, when some still need one, starts the next with a carrier (*carry),
 * preferably a request of the calling loop (no hop to another thread).
 */
static void finish_locked(struct bs_dev *bs, int rc, struct tdm_mio **done, struct tdm_mio **carry)
{
        bs->flushing = false;
        bs->flush_count++;
        if (rc == 0 && bs->flush_covers > bs->durable_seq)
                bs->durable_seq = bs->flush_covers;
        if (rc < 0 && !bs->flush_err)
                bs->flush_err = rc;
        pthread_cond_broadcast(&bs->flush_cond);

        struct tdm_mio *keep_head = NULL, *keep_tail = NULL, *done_head = NULL;
        struct tdm_mio *io = bs->flush_wait_head;
        while (io) {
                struct tdm_mio *next = io->impl;
                if (bs->flush_err || io->impl_seq <= bs->durable_seq) {
                        io->impl = done_head;
                        done_head = io;
                } else {
                        io->impl = NULL;
                        if (keep_tail)
                                keep_tail->impl = io;
                        else
                                keep_head = io;
                        keep_tail = io;
                }
                io = next;
        }
        bs->flush_wait_head = keep_head;
        bs->flush_wait_tail = keep_tail;
        *done = done_head;
        *carry = NULL;
        if (!keep_head)
                return;
        struct net_loop *here = net_loop_current();
        struct tdm_mio *c = keep_head;
        for (io = keep_head; io; io = io->impl)
                if (io->loop == here) {
                        c = io;
                        break;
                }
        bs->flushing = true;
        bs->flush_covers = atomic_load(&bs->write_seq);
        BS_SET_PHASE(c, BS_PH_FLUSH_CARRY);
        *carry = c;
}

static void deliver(struct tdm_mio *done, struct tdm_mio *carry, int err)
{
        if (carry)
                bs_flush_carry(carry);
        while (done) {
                struct tdm_mio *next = done->impl;
                done->impl = NULL;
                tdm_mio_complete(done, err);
                done = next;
        }
}

void bs_flush_finish(struct bs_dev *bs, int rc)
{
        struct tdm_mio *done, *carry;
        pthread_mutex_lock(&bs->flush_lock);
        finish_locked(bs, rc, &done, &carry);
        int err = bs->flush_err;
        pthread_mutex_unlock(&bs->flush_lock);
        deliver(done, carry, err);
}

int bs_flush(struct bs_dev *bs)
{
        uint64_t need = atomic_load(&bs->write_seq);
        pthread_mutex_lock(&bs->flush_lock);
        while (!bs->flush_err && bs->durable_seq < need) {
                if (bs->flushing) {
                        pthread_cond_wait(&bs->flush_cond, &bs->flush_lock);
                        continue;
                }
                bs->flushing = true;
                bs->flush_covers = atomic_load(&bs->write_seq);
                pthread_mutex_unlock(&bs->flush_lock);
                int rc = fdatasync(bs->fd) < 0 ? -errno : 0;
                struct tdm_mio *done, *carry;
                pthread_mutex_lock(&bs->flush_lock);
                finish_locked(bs, rc, &done, &carry);
                int err = bs->flush_err;
                pthread_mutex_unlock(&bs->flush_lock);
                deliver(done, carry, err);
                pthread_mutex_lock(&bs->flush_lock);
        }
        int rc = bs->flush_err;
        pthread_mutex_unlock(&bs->flush_lock);
        return rc;
}
