/*
 * The io_uring engine: one ring per net loop thread, made on its first request and ended by
 * the loop's exit hook. Requests are queued as SQEs during a round and submitted together at
 * its end; what the kernel finishes inline (page-cache hits, tmpfs) is reaped right after
 * submitting, so it completes in the same round, without another thread or epoll wakeup.
 * What goes async (a slow disk, fdatasync, fallocate) runs on the kernel's io-wq workers and
 * comes back through the ring's eventfd, watched by the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bs_internal.h"
#include "tandem/log.h"

/* Memcheck cannot see the kernel fill a buffer through the ring: it is told (no-op otherwise). */
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define MARK_FILLED(p, n) VALGRIND_MAKE_MEM_DEFINED(p, n)
#else
#define MARK_FILLED(p, n) ((void)(p), (void)(n))
#endif

#define RING_ENTRIES 256
/* Completions the kernel may hold for us: every request of a loop in flight at once. */
#define RING_CQ_ENTRIES 8192
/* io-wq threads per ring: as many stalled requests as the pool would absorb (POOL_MAX). */
#define RING_MAX_WORKERS 128
/* One SQE moves at most this much; the rest goes as a short transfer would. */
#define RING_MAX_CHUNK (1u << 30)

struct bs_ring {
        struct io_uring ring;
        struct net_handler h; /* the completion eventfd */
        struct net_loop *loop;
        unsigned inflight;
        bool hook_armed;
        bool exiting;
        /* Requests waiting for a free SQE (linked through io->work.next). */
        struct net_work *backlog_head, *backlog_tail;
};

static _Thread_local struct bs_ring *tls_ring;
static _Thread_local bool tls_ring_failed;

/* ---- the probe ---- */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const char *probe_why;

static void probe(void)
{
        struct io_uring r;
        int rc = io_uring_queue_init(2, &r, 0);
        if (rc < 0) {
                probe_why = rc == -EPERM ? "io_uring disabled (kernel.io_uring_disabled)"
                                         : "io_uring_queue_init failed";
                return;
        }
        struct io_uring_probe *p = io_uring_get_probe_ring(&r);
        if (!p || !io_uring_opcode_supported(p, IORING_OP_READ) ||
            !io_uring_opcode_supported(p, IORING_OP_WRITE) ||
            !io_uring_opcode_supported(p, IORING_OP_FALLOCATE) ||
            !io_uring_opcode_supported(p, IORING_OP_FSYNC))
                probe_why = "kernel lacks io_uring read/write/fallocate/fsync";
        io_uring_free_probe(p);
        io_uring_queue_exit(&r);
}

bool bs_uring_usable(const char **why)
{
        pthread_once(&probe_once, probe);
        if (why)
                *why = probe_why;
        return probe_why == NULL;
}

/* ---- submission ---- */

static void round_end(void *arg);

static void arm(struct bs_ring *r)
{
        if (r->hook_armed || r->exiting)
                return;
        if (net_loop_at_round_end(r->loop, round_end, r) == 0) {
                r->hook_armed = true;
                return;
        }
        io_uring_submit(&r->ring); /* no hook slot left: submit now */
}

/* Fills one SQE for io's current step; false when the SQ is full. */
static bool prep(struct bs_ring *r, struct tdm_mio *io)
{
        struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
        if (!sqe)
                return false;
        struct bs_dev *bs = bs_io_dev(io);
        if (BS_PHASE(io) == BS_PH_FLUSH_CARRY) {
                io_uring_prep_fsync(sqe, bs->fd, IORING_FSYNC_DATASYNC);
        } else if (io->op == TDM_MIO_READ || io->op == TDM_MIO_WRITE) {
                uint8_t *base = io->impl ? io->impl : io->buf;
                uint64_t left = io->len - io->impl_seq;
                unsigned n = left > RING_MAX_CHUNK ? RING_MAX_CHUNK : (unsigned)left;
                if (io->op == TDM_MIO_READ) {
                        io_uring_prep_read(sqe, bs->fd, base + io->impl_seq, n,
                                           io->off + io->impl_seq);
                } else {
                        io_uring_prep_write(sqe, bs->fd, base + io->impl_seq, n,
                                            io->off + io->impl_seq);
                        if ((io->flags & TDM_MIO_FUA) && bs->fua_dsync)
                                sqe->rw_flags = RWF_DSYNC;
                }
        } else {
                int mode = io->op == TDM_MIO_UNMAP ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE;
                io_uring_prep_fallocate(sqe, bs->fd, mode | FALLOC_FL_KEEP_SIZE, io->off, io->len);
        }
        if (bs->submit_async)
                sqe->flags |= IOSQE_ASYNC;
        io_uring_sqe_set_data(sqe, io);
        r->inflight++;
        return true;
}

static void queue(struct bs_ring *r, struct tdm_mio *io)
{
        if (!r->backlog_head && prep(r, io)) {
                arm(r);
                return;
        }
        io->work.next = NULL;
        if (r->backlog_tail)
                r->backlog_tail->next = &io->work;
        else
                r->backlog_head = &io->work;
        r->backlog_tail = &io->work;
        arm(r);
}

static void backlog_drain(struct bs_ring *r)
{
        while (r->backlog_head) {
                struct tdm_mio *io = bs_io_of_work(r->backlog_head);
                if (!prep(r, io))
                        return;
                r->backlog_head = r->backlog_head->next;
                if (!r->backlog_head)
                        r->backlog_tail = NULL;
        }
}

/* ---- completion ---- */

static void complete(struct tdm_mio *io, int rc)
{
        if (io->impl) { /* the O_DIRECT bounce */
                if (rc == 0 && io->op == TDM_MIO_READ)
                        memcpy(io->buf, io->impl, io->len);
                free(io->impl);
                io->impl = NULL;
        }
        tdm_mio_complete(io, rc);
}

/* The store changed: count it for group commit, then make it durable if FUA asks. */
static void changed(struct bs_ring *r, struct tdm_mio *io)
{
        struct bs_dev *bs = bs_io_dev(io);
        atomic_fetch_add(&bs->write_seq, 1);
        if (!(io->flags & TDM_MIO_FUA)) {
                complete(io, 0);
                return;
        }
        if (io->op == TDM_MIO_WRITE && bs->fua_dsync) {
                atomic_fetch_add(&bs->dsync_writes, 1);
                complete(io, 0);
                return;
        }
        if (io->impl) { /* the flush needs the bounce no more */
                free(io->impl);
                io->impl = NULL;
        }
        int rc;
        switch (bs_flush_join(bs, io, &rc)) {
        case BS_FLUSH_DONE:
                tdm_mio_complete(io, rc);
                break;
        case BS_FLUSH_WAIT:
                break;
        case BS_FLUSH_CARRY:
                queue(r, io);
                break;
        }
}

static void on_rw(struct bs_ring *r, struct tdm_mio *io, int res)
{
        if (res == -EAGAIN || res == -EINTR) {
                queue(r, io);
                return;
        }
        if (res < 0) {
                complete(io, res);
                return;
        }
        if (res == 0) {
                if (io->op == TDM_MIO_WRITE) {
                        complete(io, -ENOSPC);
                        return;
                }
                /* Past the end of a file: reads as zeroes. */
                uint8_t *base = io->impl ? io->impl : io->buf;
                memset(base + io->impl_seq, 0, io->len - io->impl_seq);
                complete(io, 0);
                return;
        }
        if (io->op == TDM_MIO_READ)
                MARK_FILLED((uint8_t *)(io->impl ? io->impl : io->buf) + io->impl_seq, res);
        io->impl_seq += (unsigned)res;
        if (io->impl_seq < io->len) { /* short: the rest goes again */
                queue(r, io);
                return;
        }
        if (io->op == TDM_MIO_READ)
                complete(io, 0);
        else
                changed(r, io);
}

static void on_cqe(struct bs_ring *r, struct tdm_mio *io, int res)
{
        if (BS_PHASE(io) == BS_PH_FLUSH_CARRY) {
                bs_flush_finish(bs_io_dev(io), res);
                return;
        }
        if (io->op == TDM_MIO_READ || io->op == TDM_MIO_WRITE) {
                on_rw(r, io, res);
                return;
        }
        if (res == -EOPNOTSUPP || res == -ENOTTY || res == -ENODEV) {
                /* No fallocate mode for it here: the pool writes zeroes, as bs_unmap does. */
                struct bs_dev *bs = bs_io_dev(io);
                atomic_store(io->op == TDM_MIO_UNMAP ? &bs->no_punch_hole : &bs->no_zero_range,
                             true);
                bs_threads_submit(io);
                return;
        }
        if (res < 0)
                complete(io, res);
        else
                changed(r, io);
}

static unsigned reap(struct bs_ring *r)
{
        unsigned n = 0;
        struct io_uring_cqe *cqe;
        while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
                struct tdm_mio *io = io_uring_cqe_get_data(cqe);
                int res = cqe->res;
                io_uring_cqe_seen(&r->ring, cqe);
                r->inflight--;
                n++;
                on_cqe(r, io, res);
        }
        return n;
}

/*
 * Every CQE signals the eventfd, those reaped inline too; clearing it before looking again
 * saves the loop a wakeup for them. A CQE posted after the clear signals anew.
 */
static void reap_and_clear(struct bs_ring *r)
{
        if (!reap(r))
                return;
        uint64_t v;
        if (read(r->h.fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_warn("backstore ring eventfd: %s", strerror(errno));
        reap(r);
}

static void round_end(void *arg)
{
        struct bs_ring *r = arg;
        r->hook_armed = false;
        backlog_drain(r);
        int rc = io_uring_submit(&r->ring);
        if (rc < 0 && rc != -EAGAIN && rc != -EBUSY)
                log_warn("backstore ring submit: %s", strerror(-rc));
        reap_and_clear(r);
        /* Left in the SQ or the backlog (EAGAIN, or queued by the completions): again. */
        if (io_uring_sq_ready(&r->ring) || r->backlog_head)
                arm(r);
}

static void on_eventfd(struct net_handler *h, uint32_t events)
{
        (void)events;
        struct bs_ring *r = (struct bs_ring *)((char *)h - offsetof(struct bs_ring, h));
        uint64_t v;
        if (read(h->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_warn("backstore ring eventfd: %s", strerror(errno));
        reap(r);
}

/* ---- the ring's life ---- */

static void ring_exit(void *arg)
{
        struct bs_ring *r = arg;
        r->exiting = true;
        /* Requests in flight still complete (their callers are alive until the loop ends). */
        while (r->inflight || r->backlog_head) {
                backlog_drain(r);
                io_uring_submit(&r->ring);
                struct io_uring_cqe *cqe;
                if (r->inflight && io_uring_wait_cqe(&r->ring, &cqe) < 0)
                        break;
                reap(r);
        }
        net_loop_del(r->loop, &r->h);
        io_uring_unregister_eventfd(&r->ring);
        close(r->h.fd);
        io_uring_queue_exit(&r->ring);
        free(r);
        tls_ring = NULL;
}

static struct bs_ring *ring_new(struct net_loop *loop)
{
        struct bs_ring *r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE, .cq_entries = RING_CQ_ENTRIES};
        int rc = io_uring_queue_init_params(RING_ENTRIES, &r->ring, &p);
        if (rc < 0) {
                log_warn("loop %s: io_uring_queue_init: %s; its backstore I/O goes to the pool",
                         net_loop_name(loop), strerror(-rc));
                free(r);
                return NULL;
        }
        unsigned workers[2] = {RING_MAX_WORKERS, RING_MAX_WORKERS};
        (void)io_uring_register_iowq_max_workers(&r->ring, workers);
        r->loop = loop;
        r->h.fn = on_eventfd;
        r->h.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        rc = r->h.fd < 0 ? -errno : io_uring_register_eventfd(&r->ring, r->h.fd);
        bool added = rc == 0 && (rc = net_loop_add(loop, &r->h, EPOLLIN)) == 0;
        if (added && (rc = net_loop_on_exit(loop, ring_exit, r)) == 0)
                return r;
        log_warn("loop %s: backstore ring set-up: %s; its backstore I/O goes to the pool",
                 net_loop_name(loop), strerror(-rc));
        if (added)
                net_loop_del(loop, &r->h);
        if (r->h.fd >= 0)
                close(r->h.fd);
        io_uring_queue_exit(&r->ring);
        free(r);
        return NULL;
}

static struct bs_ring *ring_get(void)
{
        if (tls_ring || tls_ring_failed)
                return tls_ring;
        struct net_loop *loop = net_loop_current();
        if (!loop)
                return NULL;
        tls_ring = ring_new(loop);
        tls_ring_failed = !tls_ring;
        return tls_ring;
}

bool bs_uring_submit(struct tdm_mio *io)
{
        struct bs_ring *r = ring_get();
        if (!r)
                return false;
        io->impl = NULL;
        io->impl_seq = 0;
        io->impl_state = BS_PH_IO;
        struct bs_dev *bs = bs_io_dev(io);
        switch (io->op) {
        case TDM_MIO_FLUSH: {
                int rc;
                switch (bs_flush_join(bs, io, &rc)) {
                case BS_FLUSH_DONE:
                        tdm_mio_complete(io, rc);
                        return true;
                case BS_FLUSH_WAIT:
                        return true;
                case BS_FLUSH_CARRY:
                        break;
                }
                break;
        }
        case TDM_MIO_READ:
        case TDM_MIO_WRITE:
                if (bs->direct && !bs_direct_aligned(io->buf, io->len)) {
                        void *bounce;
                        if (posix_memalign(&bounce, BS_DIRECT_ALIGN, io->len ? io->len : 1)) {
                                tdm_mio_complete(io, -ENOMEM);
                                return true;
                        }
                        if (io->op == TDM_MIO_WRITE)
                                memcpy(bounce, io->buf, io->len);
                        io->impl = bounce;
                }
                break;
        case TDM_MIO_WRITE_ZEROES:
        case TDM_MIO_UNMAP:
                if (io->len == 0) {
                        tdm_mio_complete(io, 0);
                        return true;
                }
                if (atomic_load(io->op == TDM_MIO_UNMAP ? &bs->no_punch_hole
                                                        : &bs->no_zero_range)) {
                        bs_threads_submit(io);
                        return true;
                }
                break;
        default:
                tdm_mio_complete(io, -EINVAL);
                return true;
        }
        queue(r, io);
        return true;
}

static void carry_post(struct net_post *p)
{
        struct tdm_mio *io = bs_io_of_post(p);
        struct bs_ring *r = ring_get();
        if (r)
                queue(r, io);
        else
                bs_threads_carry(io);
}

void bs_uring_carry(struct tdm_mio *io)
{
        /* On the carrier's own loop, so each ring only ever holds its loop's requests. */
        if (io->loop == net_loop_current() && tls_ring) {
                queue(tls_ring, io);
                return;
        }
        io->post.fn = carry_post;
        net_loop_post(io->loop, &io->post);
}
