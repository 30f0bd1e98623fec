/*
 * The Primary's write path (protocol C) as a medium: a change is submitted to this node's
 * medium and queued for the peer at the same moment; the caller's request completes when
 * the local request is done, the peer acknowledged (or is provably out of the ack set:
 * the range is then marked out of sync), and the sender no longer needs the data.
 *
 * Ordering: callers hold a range lock over every change in flight (the medium contract),
 * so overlapping changes never race, and both disks apply them in the order of the
 * sequence numbers they are queued with.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "repl_internal.h"
#include "tandem/log.h"
#include "wire.h"

static struct repl_lun *repl_of(struct tdm_medium *m)
{
        return (struct repl_lun *)m;
}

static bool is_change(enum repl_op_kind k)
{
        return k == REPL_OP_WRITE || k == REPL_OP_ZERO || k == REPL_OP_UNMAP;
}

static enum repl_op_kind op_kind(enum tdm_mio_op op)
{
        switch (op) {
        case TDM_MIO_WRITE:
                return REPL_OP_WRITE;
        case TDM_MIO_WRITE_ZEROES:
                return REPL_OP_ZERO;
        case TDM_MIO_UNMAP:
                return REPL_OP_UNMAP;
        case TDM_MIO_STATE:
                return REPL_OP_LU_STATE;
        case TDM_MIO_GROW:
                return REPL_OP_RESIZE;
        default:
                return REPL_OP_FLUSH;
        }
}

/* ---- the join: local, peer, sender ---- */

static void write_finish(struct repl_write *w)
{
        struct repl_lun *r = w->r;
        struct repl_req *req = &w->req;
        int peer_rc = atomic_load(&w->peer_rc);
        if (w->al_held)
                repl_md_al_end(r->md, req->off, req->len);
        if (req->head && req->head != req->head_inline)
                free(req->head);
        struct tdm_mio *io = w->io;
        int rc = w->local_rc ? w->local_rc : peer_rc;
        free(w);
        atomic_fetch_sub(&r->io_active, 1);
        tdm_mio_complete(io, rc);
}

void repl_write_part_done(struct repl_write *w, int error)
{
        if (error) {
                int none = 0;
                atomic_compare_exchange_strong(&w->peer_rc, &none, error);
        }
        if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_acq_rel) == 1)
                write_finish(w);
}

static void local_done(struct tdm_mio *lio)
{
        struct repl_write *w = lio->arg;
        w->local_rc = lio->result;
        if (lio->result < 0 && is_change(w->req.kind))
                repl_md_set_dirty(w->r->md, w->req.off, w->req.len); /* the peer has more */
        repl_write_part_done(w, 0);
}

/* ---- the peer's part ---- */

/* A state record: the caller's bytes go as the payload (no payload: the record is gone). */
static int queue_lu_state_locked(struct repl_lun *r, struct repl_req *req, unsigned id,
                                 const void *buf, uint32_t len, bool persist, bool last_of_set)
{
        Tandem__Repl__LuState m = TANDEM__REPL__LU_STATE__INIT;
        m.id = id;
        m.persist = persist;
        m.last_of_set = last_of_set;
        return repl_queue_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_LU_STATE, &m,
                                      len ? buf : NULL, len);
}

int repl_queue_lu_state_snapshot_locked(struct repl_lun *r)
{
        for (unsigned id = 0; id < TDM_STATE_RECORDS; id++) {
                bool persist = false;
                size_t len = tdm_medium_state_get(r->local, id, NULL, 0, NULL);
                struct repl_req *req = repl_req_new(REPL_OP_LU_STATE, len ? len : 1);
                if (!req)
                        return -ENOMEM;
                len = tdm_medium_state_get(r->local, id, req->owned, len, &persist);
                req->off = id;
                int rc = queue_lu_state_locked(r, req, id, req->owned, (uint32_t)len, persist,
                                               id == TDM_STATE_RECORDS - 1);
                if (rc < 0) {
                        repl_req_put(req);
                        repl_req_put(req);
                        return rc;
                }
        }
        return 0;
}

/*
 * A peer older than REPL_FEATURE_WRITE_STATE gets a write's record as the frame after it: a
 * Primary lost between the two leaves that peer the data without the record.
 */
static int queue_state_after_locked(struct repl_lun *r, const struct tdm_mio *io)
{
        struct repl_req *req = repl_req_new(REPL_OP_LU_STATE, io->state_len ? io->state_len : 1);
        if (!req)
                return -ENOMEM;
        memcpy(req->owned, io->state, io->state_len);
        req->off = io->state_id;
        int rc =
            queue_lu_state_locked(r, req, io->state_id, req->owned, io->state_len, false, false);
        if (rc < 0) {
                repl_req_put(req);
                repl_req_put(req);
        }
        return rc;
}

static int queue_change_locked(struct repl_lun *r, struct repl_write *w)
{
        struct repl_req *req = &w->req;
        if (req->kind == REPL_OP_LU_STATE)
                return queue_lu_state_locked(r, req, (unsigned)w->io->off, w->io->buf,
                                             (uint32_t)w->io->len, w->io->flags & TDM_MIO_PERSIST,
                                             false);
        if (req->kind == REPL_OP_RESIZE) {
                Tandem__Repl__Resize m = TANDEM__REPL__RESIZE__INIT;
                m.size_bytes = w->io->off;
                return repl_queue_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_RESIZE, &m, NULL,
                                              0);
        }
        if (req->kind == REPL_OP_FLUSH) {
                Tandem__Repl__Flush m = TANDEM__REPL__FLUSH__INIT;
                return repl_queue_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_FLUSH, &m, NULL,
                                              0);
        }
        Tandem__Repl__Write m = TANDEM__REPL__WRITE__INIT;
        m.offset = req->off;
        m.length = (uint32_t)req->len;
        m.kind = (uint32_t)req->kind; /* the wire's kinds are REPL_OP_WRITE/ZERO/UNMAP */
        if (w->io->flags & TDM_MIO_FUA)
                m.fua = true;
        const struct tdm_mio *io = w->io;
        bool with_state = io->state && (r->peer_features & REPL_FEATURE_WRITE_STATE);
        if (with_state) {
                m.has_state = true;
                m.state_id = io->state_id;
                m.state.data = (uint8_t *)io->state;
                m.state.len = io->state_len;
        }
        bool data = req->kind == REPL_OP_WRITE;
        int rc = repl_queue_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_WRITE, &m,
                                        data ? io->buf : NULL, data ? (uint32_t)req->len : 0);
        if (rc == 0 && io->state && !with_state)
                rc = queue_state_after_locked(r, io);
        return rc;
}

/*
 * In the ack set: queued (the sender and the ack complete it). Not, in cluster mode while
 * the peer is being outdated: held until that is settled. Otherwise the range is out of
 * sync and the peer's part is done now.
 */
static void replicate(struct repl_lun *r, struct repl_write *w)
{
        struct repl_req *req = &w->req;
        pthread_mutex_lock(&r->send_lock);
        if (r->in_ack_set) {
                int rc = queue_change_locked(r, w);
                pthread_mutex_unlock(&r->send_lock);
                if (rc < 0) { /* not queued: the peer lacks it */
                        if (is_change(req->kind))
                                repl_md_set_dirty(r->md, req->off, req->len);
                        repl_write_part_done(w, rc);
                        repl_write_part_done(w, 0);
                }
                return;
        }
        if (req->kind == REPL_OP_RESIZE) { /* a peer that did not grow would not fit */
                pthread_mutex_unlock(&r->send_lock);
                repl_write_part_done(w, -ENOTCONN);
                repl_write_part_done(w, 0);
                return;
        }
        if (r->outdating) {
                repl_hold_locked(r, req);
                pthread_mutex_unlock(&r->send_lock);
                repl_write_part_done(w, 0); /* nothing for the sender */
                return;
        }
        /* Marked under send_lock: a resync ack cannot clear it behind our back. */
        if (is_change(req->kind))
                repl_md_set_dirty(r->md, req->off, req->len);
        pthread_mutex_unlock(&r->send_lock);
        repl_write_part_done(w, 0);
        repl_write_part_done(w, 0);
}

/* ---- submitting ---- */

static void start_both(struct repl_write *w)
{
        struct repl_lun *r = w->r;
        w->local = (struct tdm_mio){.op = w->io->op,
                                    .flags = w->io->flags,
                                    .off = w->io->off,
                                    .len = w->io->len,
                                    .buf = w->io->buf,
                                    .state = w->io->state,
                                    .state_len = w->io->state_len,
                                    .state_id = w->io->state_id,
                                    .done = local_done,
                                    .arg = w};
        tdm_medium_submit(r->local, &w->local);
        replicate(r, w);
        repl_write_part_done(w, 0); /* the starting reference */
}

/* The activity log needed a write: done on the pool, the change goes on from there. */
static void al_commit_run(struct net_work *work)
{
        struct repl_write *w =
            (struct repl_write *)((char *)work - offsetof(struct repl_write, al_work));
        w->local_rc = repl_md_al_begin(w->r->md, w->req.off, w->req.len);
}

static void al_commit_done(struct net_work *work)
{
        struct repl_write *w =
            (struct repl_write *)((char *)work - offsetof(struct repl_write, al_work));
        struct repl_lun *r = w->r;
        if (w->local_rc < 0) {
                log_err("replication %s lun %llu: activity log write failed: %s", r->iqn,
                        (unsigned long long)r->lun_id, strerror(-w->local_rc));
                struct tdm_mio *io = w->io;
                int rc = w->local_rc;
                free(w);
                atomic_fetch_sub(&r->io_active, 1);
                tdm_mio_complete(io, rc);
                return;
        }
        w->al_held = true;
        start_both(w);
}

static void repl_submit(struct tdm_medium *m, struct tdm_mio *io)
{
        struct repl_lun *r = repl_of(m);
        if (io->op == TDM_MIO_READ) { /* served by this node's copy */
                io->medium = r->local;
                r->local->ops->submit(r->local, io);
                return;
        }
        if (r->stopped) {
                tdm_mio_complete(io, -ENODEV);
                return;
        }
        struct repl_write *w = calloc(1, sizeof(*w));
        if (!w) {
                tdm_mio_complete(io, -ENOMEM);
                return;
        }
        atomic_fetch_add(&r->io_active, 1);
        w->r = r;
        w->io = io;
        w->req.w = w;
        w->req.kind = op_kind(io->op);
        w->req.off = io->off;
        /* A state record: its bytes; a flush and a grow: none. */
        w->req.len = io->op == TDM_MIO_FLUSH || io->op == TDM_MIO_GROW ? 0 : io->len;
        atomic_init(&w->pending, 4); /* local, peer, sender, starting */
        if (!is_change(w->req.kind) || w->req.len == 0) {
                start_both(w);
                return;
        }
        /* The extents must be in the activity log before either copy changes. */
        if (repl_md_al_try_begin(r->md, w->req.off, w->req.len) == 0) {
                w->al_held = true;
                start_both(w);
                return;
        }
        w->al_work.run = al_commit_run;
        w->al_work.done = al_commit_done;
        if (io->loop) {
                net_pool_submit(&w->al_work);
        } else { /* a thread that may wait: do it here */
                al_commit_run(&w->al_work);
                al_commit_done(&w->al_work);
        }
}

/* ---- acks ---- */

void repl_req_complete(struct repl_lun *r, struct repl_req *req, int error, bool peer_has_it)
{
        bool change = is_change(req->kind);
        if (change && (!peer_has_it || error))
                repl_md_set_dirty(r->md, req->off, req->len);
        if (req->kind == REPL_OP_RESYNC && peer_has_it && !error) {
                pthread_mutex_lock(&r->lock);
                r->sync_done += req->len;
                r->resync_sent += req->len;
                pthread_mutex_unlock(&r->lock);
        }
        if (req->w)
                repl_write_part_done(req->w, error);
        else
                repl_req_put(req);
}

int repl_acked(struct repl_lun *r, uint64_t seq, int error)
{
        struct repl_req *done = NULL, **tail = &done;
        pthread_mutex_lock(&r->send_lock);
        if (seq >= r->next_seq) {
                pthread_mutex_unlock(&r->send_lock);
                return -EPROTO; /* an ack for something never sent */
        }
        while (r->inflight_head && r->inflight_head->seq <= seq) {
                struct repl_req *req = r->inflight_head;
                r->inflight_head = req->next;
                if (req->kind == REPL_OP_RESYNC) {
                        r->inflight_bytes -= req->len;
                        /* Under send_lock, with the peer still a mirror: a write that went
                         * local-only meanwhile set its bit after this, or not at all. */
                        if (r->in_ack_set && !(error && req->seq == seq))
                                repl_md_clear_dirty(r->md, req->off, req->len);
                }
                req->next = NULL;
                *tail = req;
                tail = &req->next;
        }
        if (!r->inflight_head)
                r->inflight_tail = NULL;
        pthread_mutex_unlock(&r->send_lock);
        int result = 0;
        while (done) {
                struct repl_req *req = done;
                done = req->next;
                if (error && req->seq == seq && req->kind == REPL_OP_RESIZE)
                        result = REPL_ACKED_REFUSED_RESIZE;
                repl_req_complete(r, req, req->seq == seq ? error : 0, true);
        }
        pthread_mutex_lock(&r->lock);
        pthread_cond_broadcast(&r->cond); /* the resync window */
        pthread_mutex_unlock(&r->lock);
        return result;
}

uint64_t repl_oldest_inflight_ns(struct repl_lun *r)
{
        pthread_mutex_lock(&r->send_lock);
        uint64_t t = r->inflight_head ? r->inflight_head->sent_ns : 0;
        pthread_mutex_unlock(&r->send_lock);
        return t;
}

void repl_fail_inflight(struct repl_lun *r)
{
        pthread_mutex_lock(&r->send_lock);
        struct repl_req *list = r->inflight_head;
        r->inflight_head = r->inflight_tail = NULL;
        r->inflight_bytes = 0;
        bool hold = r->outdating;
        struct repl_req *rest = NULL, **tail = &rest;
        while (list) {
                struct repl_req *req = list;
                list = req->next;
                if (hold && req->w) { /* waits with the later writes for the outdate */
                        repl_hold_locked(r, req);
                } else {
                        req->next = NULL;
                        *tail = req;
                        tail = &req->next;
                }
        }
        pthread_mutex_unlock(&r->send_lock);
        while (rest) {
                struct repl_req *req = rest;
                rest = req->next;
                repl_req_complete(r, req, 0, false);
        }
}

/* ---- the rest of the medium ---- */

static size_t repl_state_get(struct tdm_medium *m, unsigned id, void *buf, size_t cap,
                             bool *persist)
{
        return tdm_medium_state_get(repl_of(m)->local, id, buf, cap, persist);
}

static int repl_lba_status(struct tdm_medium *m, uint64_t off, uint64_t max_len,
                           struct tdm_lba_status *out)
{
        struct repl_lun *r = repl_of(m);
        return r->local->ops->lba_status(r->local, off, max_len, out);
}

static void repl_prefetch(struct tdm_medium *m, uint64_t off, uint64_t len)
{
        struct repl_lun *r = repl_of(m);
        if (r->local->ops->prefetch)
                r->local->ops->prefetch(r->local, off, len);
}

/*
 * Asked before the groups are reported (a worker, no lock held). Never waits: while an
 * admin operation holds the LUN, the last published state stands; it publishes what it
 * changes.
 */
static void repl_refresh_access(struct tdm_medium *m)
{
        struct repl_lun *r = repl_of(m);
        if (pthread_mutex_trylock(&r->lock) == 0) {
                repl_publish_access(r);
                pthread_mutex_unlock(&r->lock);
        }
}

void repl_lun_free(struct repl_lun *r);

static void repl_destroy(struct tdm_medium *m)
{
        repl_lun_free(repl_of(m));
}

const struct tdm_medium_ops repl_medium_ops = {
    .submit = repl_submit,
    .lba_status = repl_lba_status,
    .prefetch = repl_prefetch,
    .refresh_access = repl_refresh_access,
    .request_active = repl_request_active,
    .forward = repl_forward,
    .state_get = repl_state_get,
    .destroy = repl_destroy,
};
