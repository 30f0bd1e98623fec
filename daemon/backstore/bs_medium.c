/*
 * The backstore as a medium. A request from a net loop never blocks that loop: it runs on
 * the pool and completes back on the loop. A thread on no loop (resync, the peer's apply
 * path, tests) may block, so its requests run at once.
 */
#include <errno.h>
#include <stdlib.h>

#include "tandem/backstore.h"
#include "tandem/medium.h"

struct bs_medium {
        struct tdm_medium m; /* first */
        struct bs_dev *bs;
        struct tdm_state_store *state;
};

static struct bs_dev *bs_of(struct tdm_medium *m)
{
        return ((struct bs_medium *)m)->bs;
}

struct bs_dev *bs_medium_dev(struct tdm_medium *m)
{
        return bs_of(m);
}

static int run_sync(struct bs_dev *bs, struct tdm_mio *io)
{
        int rc;
        switch (io->op) {
        case TDM_MIO_STATE:
                return tdm_state_store_put(((struct bs_medium *)io->medium)->state,
                                           (unsigned)io->off, io->buf, io->len,
                                           io->flags & TDM_MIO_PERSIST);
        case TDM_MIO_READ:
                return bs_read(bs, io->buf, io->len, io->off);
        case TDM_MIO_WRITE:
                rc = bs_write(bs, io->buf, io->len, io->off);
                break;
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
        if (rc == 0 && (io->flags & TDM_MIO_FUA))
                rc = bs_flush(bs);
        return rc;
}

static void pool_run(struct net_work *w)
{
        struct tdm_mio *io = (struct tdm_mio *)((char *)w - offsetof(struct tdm_mio, work));
        io->impl_state = run_sync(bs_of(io->medium), io);
}

static void pool_done(struct net_work *w)
{
        struct tdm_mio *io = (struct tdm_mio *)((char *)w - offsetof(struct tdm_mio, work));
        tdm_mio_complete(io, io->impl_state);
}

static void bsm_submit(struct tdm_medium *m, struct tdm_mio *io)
{
        if (!io->loop) {
                tdm_mio_complete(io, run_sync(bs_of(m), io));
                return;
        }
        io->work.run = pool_run;
        io->work.done = pool_done;
        net_pool_submit(&io->work);
}

static int bsm_lba_status(struct tdm_medium *m, uint64_t off, uint64_t max_len,
                          struct tdm_lba_status *out)
{
        return bs_lba_status(bs_of(m), off, max_len, &out->mapped, &out->run_len);
}

static size_t bsm_state_get(struct tdm_medium *m, unsigned id, void *buf, size_t cap, bool *persist)
{
        return tdm_state_store_get(((struct bs_medium *)m)->state, id, buf, cap, persist);
}

int bs_medium_attach_state(struct tdm_medium *m, const char *path)
{
        return tdm_state_store_attach(((struct bs_medium *)m)->state, path);
}

static void bsm_prefetch(struct tdm_medium *m, uint64_t off, uint64_t len)
{
        bs_prefetch(bs_of(m), off, len);
}

static void bsm_destroy(struct tdm_medium *m)
{
        struct bs_medium *b = (struct bs_medium *)m;
        tdm_medium_fini(m);
        tdm_state_store_free(b->state);
        bs_close(b->bs);
        free(b);
}

static const struct tdm_medium_ops bs_medium_ops = {
    .submit = bsm_submit,
    .lba_status = bsm_lba_status,
    .prefetch = bsm_prefetch,
    .state_get = bsm_state_get,
    .destroy = bsm_destroy,
};

int bs_medium_create(struct bs_dev *bs, struct tdm_medium **out)
{
        struct bs_medium *b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->bs = bs;
        b->state = tdm_state_store_new();
        if (!b->state) {
                free(b);
                return -ENOMEM;
        }
        tdm_medium_init(&b->m, &bs_medium_ops, bs->size);
        *out = &b->m;
        return 0;
}
