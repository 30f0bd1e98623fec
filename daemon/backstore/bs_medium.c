/*
 * The backstore as a medium. A request from a net loop never blocks that loop: it goes
 * through the loop's io_uring, or the pool where io_uring is unavailable, and completes back
 * on the loop; a store in memory (tmpfs) has nothing to wait for and runs on the loop. A
 * thread on no loop (resync, the peer's apply path, tests) may block, so its requests run at
 * once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bs_internal.h"
#include "tandem/log.h"

struct bs_dev *bs_medium_dev(struct tdm_medium *m)
{
        return ((struct bs_medium *)m)->bs;
}

enum bs_engine bs_medium_engine(struct tdm_medium *m)
{
        return ((struct bs_medium *)m)->engine;
}

const char *bs_engine_name(enum bs_engine e)
{
        return e == BS_ENGINE_URING ? "io_uring" : "threads";
}

/* TANDEM_BACKSTORE_IO names an engine for every store, those in memory too (tests). */
static bool engine_forced(void)
{
        const char *want = getenv("TANDEM_BACKSTORE_IO");
        return want && (!strcmp(want, "uring") || !strcmp(want, "threads"));
}

enum bs_engine bs_engine_default(void)
{
        const char *want = getenv("TANDEM_BACKSTORE_IO");
        if (want && *want && strcmp(want, "uring") && strcmp(want, "threads"))
                log_warn("TANDEM_BACKSTORE_IO=%s: not uring or threads; using uring", want);
        if (want && !strcmp(want, "threads"))
                return BS_ENGINE_THREADS;
        const char *why;
        if (bs_uring_usable(&why))
                return BS_ENGINE_URING;
        static atomic_bool told;
        if (!atomic_exchange(&told, true))
                log_warn("backstore: %s; I/O runs on the thread pool instead", why);
        return BS_ENGINE_THREADS;
}

/* Says once which engine serves (again only if a later medium gets another). */
static void tell_engine(enum bs_engine e)
{
        static atomic_int told = -1;
        if (atomic_exchange(&told, (int)e) != (int)e)
                log_info("backstore I/O: %s", bs_engine_name(e));
}

/* A state record: a file write when it persists, so on the pool from a loop. */
static int state_put(struct tdm_mio *io)
{
        return tdm_state_store_put(((struct bs_medium *)io->medium)->state, (unsigned)io->off,
                                   io->buf, io->len, io->flags & TDM_MIO_PERSIST);
}

static void state_run(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        io->result = state_put(io);
}

/* A write with a state record: the record only once the data is written. */
static int write_with_state(struct tdm_mio *io)
{
        struct bs_medium *b = (struct bs_medium *)io->medium;
        int rc = bs_run_sync(b->bs, io);
        if (rc == 0)
                rc = tdm_state_store_put(b->state, io->state_id, io->state, io->state_len, false);
        return rc;
}

static void write_with_state_run(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        io->result = write_with_state(io);
}

static void state_done(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        tdm_mio_complete(io, io->result);
}

/* Growing: a file is extended, a device must already be large enough (lvextend). */
static int grow(struct tdm_mio *io)
{
        struct tdm_medium *m = io->medium;
        struct bs_dev *bs = ((struct bs_medium *)m)->bs;
        uint64_t want = io->off, have = 0;
        if (want < tdm_medium_size(m))
                return -EINVAL; /* never shrinks */
        int rc = bs_probe_size(bs, &have);
        if (rc == 0 && have < want)
                rc = bs->is_blockdev ? -ENOSPC : bs_set_file_size(bs, want);
        else if (rc == 0 && bs->is_blockdev)
                rc = bs_refresh_size(bs);
        if (rc == 0)
                atomic_store(&m->size, want);
        return rc;
}

static void grow_run(struct net_work *w)
{
        struct tdm_mio *io = bs_io_of_work(w);
        io->result = grow(io);
}

static void bsm_submit(struct tdm_medium *m, struct tdm_mio *io)
{
        struct bs_medium *b = (struct bs_medium *)m;
        io->impl_state = 0;
        if (io->op == TDM_MIO_GROW) {
                if (!io->loop) {
                        tdm_mio_complete(io, grow(io));
                        return;
                }
                io->work.run = grow_run;
                io->work.done = state_done;
                net_pool_submit(&io->work);
                return;
        }
        if (io->op == TDM_MIO_STATE) {
                if (!io->loop) {
                        tdm_mio_complete(io, state_put(io));
                        return;
                }
                io->work.run = state_run;
                io->work.done = state_done;
                net_pool_submit(&io->work);
                return;
        }
        if (io->op == TDM_MIO_WRITE && io->state) { /* rare (COMPARE AND WRITE): the pool */
                if (!io->loop) {
                        tdm_mio_complete(io, write_with_state(io));
                        return;
                }
                io->work.run = write_with_state_run;
                io->work.done = state_done;
                net_pool_submit(&io->work);
                return;
        }
        if (!io->loop) {
                tdm_mio_complete(io, bs_run_sync(b->bs, io));
                return;
        }
        if (b->in_memory) {
                /*
                 * Zeroing a large range takes long even in memory: on the pool. Its flushes
                 * block there as the loop's do here (never waiting on a ring's fdatasync).
                 */
                if (io->op == TDM_MIO_WRITE_ZEROES || io->op == TDM_MIO_UNMAP)
                        bs_threads_submit(io);
                else
                        bs_inline_submit(io);
                return;
        }
        if (b->engine == BS_ENGINE_URING && bs_uring_submit(io))
                return;
        bs_threads_submit(io);
}

void bs_flush_carry(struct tdm_mio *io)
{
        if (io->impl_state & BS_ST_THREADS)
                bs_threads_carry(io);
        else
                bs_uring_carry(io);
}

static int bsm_lba_status(struct tdm_medium *m, uint64_t off, uint64_t max_len,
                          struct tdm_lba_status *out)
{
        return bs_lba_status(bs_medium_dev(m), off, max_len, &out->mapped, &out->run_len);
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
        bs_prefetch(bs_medium_dev(m), off, len);
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
        b->engine = bs_engine_default();
        b->in_memory = !engine_forced() && bs_in_memory(bs);
        tell_engine(b->engine);
        if (b->in_memory)
                log_info("backstore %s: in memory, served on the loop", bs->path);
        tdm_medium_init(&b->m, &bs_medium_ops, bs->size);
        *out = &b->m;
        return 0;
}
