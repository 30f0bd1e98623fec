/* What every medium shares: submission and completion on the caller's loop, waiting
 * wrappers for threads that may block, the access state. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "tandem/medium.h"

void tdm_medium_init(struct tdm_medium *m, const struct tdm_medium_ops *ops, uint64_t size)
{
        m->ops = ops;
        atomic_init(&m->size, size);
        memset(&m->ranges, 0, sizeof(m->ranges));
        pthread_mutex_init(&m->ranges.lock, NULL);
        struct tdm_access a = {.local_state = TDM_ACCESS_ACTIVE};
        tdm_medium_set_access(m, &a);
}

void tdm_medium_fini(struct tdm_medium *m)
{
        pthread_mutex_destroy(&m->ranges.lock);
}

void tdm_medium_destroy(struct tdm_medium *m)
{
        if (m)
                m->ops->destroy(m);
}

static void mio_finish(struct net_post *p)
{
        struct tdm_mio *io = (struct tdm_mio *)((char *)p - offsetof(struct tdm_mio, post));
        io->done(io);
}

void tdm_mio_complete(struct tdm_mio *io, int result)
{
        io->result = result;
        if (io->loop && io->loop != net_loop_current()) {
                io->post.fn = mio_finish;
                net_loop_post(io->loop, &io->post);
                return;
        }
        io->done(io);
}

void tdm_medium_submit(struct tdm_medium *m, struct tdm_mio *io)
{
        io->medium = m;
        io->loop = net_loop_current();
        io->result = 0;
        m->ops->submit(m, io);
}

void tdm_medium_request_active(struct tdm_medium *m, struct tdm_mio *io)
{
        io->medium = m;
        io->loop = net_loop_current();
        io->result = 0;
        if (m->ops->request_active)
                m->ops->request_active(m, io);
        else
                tdm_mio_complete(io, 0); /* a medium of this node alone is always active */
}

int tdm_medium_forward(struct tdm_medium *m, const struct tdm_forward_cmd *cmd,
                       struct tdm_forward_result *res)
{
        return m->ops->forward ? m->ops->forward(m, cmd, res) : -EOPNOTSUPP;
}

/* ---- waiting wrappers ---- */

struct mio_wait {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
};

static void wait_done(struct tdm_mio *io)
{
        struct mio_wait *w = io->arg;
        pthread_mutex_lock(&w->lock);
        w->done = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

int tdm_medium_run(struct tdm_medium *m, struct tdm_mio *io)
{
        struct mio_wait w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
        io->done = wait_done;
        io->arg = &w;
        tdm_medium_submit(m, io);
        pthread_mutex_lock(&w.lock);
        while (!w.done)
                pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        pthread_cond_destroy(&w.cond);
        pthread_mutex_destroy(&w.lock);
        return io->result;
}

int tdm_medium_read(struct tdm_medium *m, void *buf, uint64_t len, uint64_t off)
{
        struct tdm_mio io = {.op = TDM_MIO_READ, .off = off, .len = len, .buf = buf};
        return tdm_medium_run(m, &io);
}

int tdm_medium_write(struct tdm_medium *m, const void *buf, uint64_t len, uint64_t off,
                     uint32_t flags)
{
        struct tdm_mio io = {
            .op = TDM_MIO_WRITE, .flags = flags, .off = off, .len = len, .buf = (void *)buf};
        return tdm_medium_run(m, &io);
}

int tdm_medium_write_with_state(struct tdm_medium *m, const void *buf, uint64_t len, uint64_t off,
                                uint32_t flags, unsigned id, const void *state, uint32_t state_len)
{
        if (id >= TDM_STATE_RECORDS || !state || state_len > TDM_STATE_MAX_BYTES)
                return -EINVAL;
        struct tdm_mio io = {.op = TDM_MIO_WRITE,
                             .flags = flags,
                             .off = off,
                             .len = len,
                             .buf = (void *)buf,
                             .state = state,
                             .state_len = state_len,
                             .state_id = (uint8_t)id};
        return tdm_medium_run(m, &io);
}

int tdm_medium_flush(struct tdm_medium *m)
{
        struct tdm_mio io = {.op = TDM_MIO_FLUSH};
        return tdm_medium_run(m, &io);
}

int tdm_medium_change(struct tdm_medium *m, enum tdm_mio_op op, uint64_t off, uint64_t len)
{
        struct tdm_mio io = {.op = op, .off = off, .len = len};
        return tdm_medium_run(m, &io);
}

/* ---- state records ---- */

size_t tdm_medium_state_get(struct tdm_medium *m, unsigned id, void *buf, size_t cap, bool *persist)
{
        if (persist)
                *persist = false;
        return m->ops->state_get ? m->ops->state_get(m, id, buf, cap, persist) : 0;
}

int tdm_medium_state_put(struct tdm_medium *m, unsigned id, const void *buf, size_t len,
                         uint32_t flags)
{
        struct tdm_mio io = {
            .op = TDM_MIO_STATE, .flags = flags, .off = id, .len = len, .buf = (void *)buf};
        return tdm_medium_run(m, &io);
}

/* ---- access state: one 64-bit word, so readers never see half an update ---- */

static uint64_t access_pack(const struct tdm_access *a)
{
        return (uint64_t)a->local_state | ((uint64_t)a->peer_state << 8) |
               ((uint64_t)a->local_id << 16) | ((uint64_t)a->peer_id << 32) |
               ((uint64_t)a->continued << 48) | ((uint64_t)a->explicit_alua << 49);
}

static struct tdm_access access_unpack(uint64_t v)
{
        return (struct tdm_access){.local_state = (uint8_t)(v & 0xff),
                                   .peer_state = (uint8_t)((v >> 8) & 0xff),
                                   .local_id = (uint16_t)((v >> 16) & 0xffff),
                                   .peer_id = (uint16_t)((v >> 32) & 0xffff),
                                   .continued = ((v >> 48) & 1) != 0,
                                   .explicit_alua = ((v >> 49) & 1) != 0};
}

void tdm_medium_set_access(struct tdm_medium *m, const struct tdm_access *a)
{
        uint64_t v = access_pack(a);
        uint64_t old = atomic_exchange_explicit(&m->access, v, memory_order_acq_rel);
        if (old != v && m->access_changed)
                m->access_changed(m->access_arg);
}

struct tdm_access tdm_medium_access(const struct tdm_medium *m)
{
        return access_unpack(atomic_load_explicit(&m->access, memory_order_acquire));
}
