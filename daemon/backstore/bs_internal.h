/*
 * Inside the backstore: the medium's private state, how a request in flight is marked, and
 * what the two engines (io_uring rings, the thread pool) and group commit offer each other.
 */
#ifndef TANDEM_BS_INTERNAL_H
#define TANDEM_BS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#include "tandem/backstore.h"
#include "tandem/medium.h"

struct bs_medium {
        struct tdm_medium m; /* first */
        struct bs_dev *bs;
        enum bs_engine engine;
        bool in_memory;                /* served on the loop (bs_inline.c) */
        struct tdm_state_store *state; /* the LU's state records (TDM_MIO_STATE) */
};

static inline struct bs_dev *bs_io_dev(const struct tdm_mio *io)
{
        return ((const struct bs_medium *)io->medium)->bs;
}

static inline struct tdm_mio *bs_io_of_work(struct net_work *w)
{
        return (struct tdm_mio *)((char *)w - offsetof(struct tdm_mio, work));
}

static inline struct tdm_mio *bs_io_of_post(struct net_post *p)
{
        return (struct tdm_mio *)((char *)p - offsetof(struct tdm_mio, post));
}

/*
 * io->impl_state: the phase (low bits) and the engine serving the request. io->impl_seq:
 * bytes done (BS_PH_IO), the write_seq to cover (BS_PH_FLUSH_*). io->impl: an O_DIRECT
 * bounce buffer (BS_PH_IO) or the next flush waiter.
 */
#define BS_PH_IO            0x0
#define BS_PH_FLUSH_WAIT    0x1 /* waits for an fdatasync someone else carries */
#define BS_PH_FLUSH_CARRY   0x2 /* carries the fdatasync for every waiter */
#define BS_PH_MASK          0xf
#define BS_ST_THREADS       0x10 /* served by the pool, not a ring */
#define BS_PHASE(io)        ((io)->impl_state & BS_PH_MASK)
#define BS_SET_PHASE(io, p) ((io)->impl_state = ((io)->impl_state & ~BS_PH_MASK) | (p))

/* ---- bs_file.c: synchronous primitives the engines share ---- */
/* O_DIRECT wants aligned memory; 4096 satisfies every device's logical block size. */
#define BS_DIRECT_ALIGN 4096
bool bs_direct_aligned(const void *buf, size_t len);
/* pwritev2 with RWF_* flags (RWF_DSYNC for FUA); counts the write in write_seq. */
int bs_writev_flags(struct bs_dev *bs, const struct iovec *iov, int iovcnt, uint64_t off, int rwf);

/* ---- bs_flush.c: group commit ---- */
enum bs_flush_step {
        BS_FLUSH_DONE,  /* nothing to wait for: *rc is the result */
        BS_FLUSH_WAIT,  /* queued: completes when an fdatasync covers it */
        BS_FLUSH_CARRY, /* queued, and io carries the next fdatasync: run it, then finish */
};
/* io (on a loop) needs every write completed before now to be durable. */
enum bs_flush_step bs_flush_join(struct bs_dev *bs, struct tdm_mio *io, int *rc);
/*
 * The fdatasync a carrier ran returned rc: completes every waiter it covers (each on its
 * own loop) and hands the next fdatasync to a waiter still uncovered (bs_flush_carry).
 */
void bs_flush_finish(struct bs_dev *bs, int rc);
/* Starts the fdatasync io carries, on its engine (bs_medium.c). */
void bs_flush_carry(struct tdm_mio *io);

/* ---- bs_threads.c: the pool engine, and requests run where they are asked ---- */
/* Runs io with blocking calls (a thread on no loop, a pool thread); 0 or -errno. */
int bs_run_sync(struct bs_dev *bs, struct tdm_mio *io);
void bs_threads_submit(struct tdm_mio *io);
void bs_threads_carry(struct tdm_mio *io);

/* ---- bs_inline.c: stores in memory, run on the loop ---- */
bool bs_in_memory(const struct bs_dev *bs);
void bs_inline_submit(struct tdm_mio *io);

/* ---- bs_uring.c: one ring per loop thread ---- */
/* Whether io_uring works here (probed once). */
bool bs_uring_usable(const char **why);
/* false: this thread has no ring (set-up failed), serve io otherwise. */
bool bs_uring_submit(struct tdm_mio *io);
void bs_uring_carry(struct tdm_mio *io);

#endif
