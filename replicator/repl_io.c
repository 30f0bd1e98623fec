/*
 * The Primary's write path (protocol C): a change is ordered against overlapping ones,
 * applied locally, sent on the data channel with the next sequence number, and the command
 * completes when the peer's ack for that sequence number arrives. Overlapping changes hold
 * the same ordering stripe from the local write until they are sent, so both disks apply
 * them in one order; changes elsewhere go on in parallel.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "repl_internal.h"
#include "tandem/log.h"
#include "wire.h"

#define REPL_IO_SPLIT (64ull * 1024 * 1024) /* zeroing/unmapping is replicated in pieces */

uint64_t tdm_now_ns(void);

/* ---- ordering stripes: taken in ascending slot order, so never a deadlock ---- */

static void order_span(uint64_t off, uint64_t len, unsigned *first, unsigned *count)
{
        uint64_t a = off >> REPL_ORDER_SHIFT;
        uint64_t b = (off + (len ? len : 1) - 1) >> REPL_ORDER_SHIFT;
        uint64_t n = b - a + 1;
        *first = (unsigned)(a % REPL_ORDER_STRIPES);
        *count = n >= REPL_ORDER_STRIPES ? REPL_ORDER_STRIPES : (unsigned)n;
}

static bool span_has(unsigned first, unsigned count, unsigned slot)
{
        return (slot + REPL_ORDER_STRIPES - first) % REPL_ORDER_STRIPES < count;
}

void repl_order_lock(struct repl_lun *r, uint64_t off, uint64_t len)
{
        unsigned first, count;
        order_span(off, len, &first, &count);
        for (unsigned s = 0; s < REPL_ORDER_STRIPES; s++)
                if (span_has(first, count, s))
                        pthread_mutex_lock(&r->order[s]);
}

void repl_order_unlock(struct repl_lun *r, uint64_t off, uint64_t len)
{
        unsigned first, count;
        order_span(off, len, &first, &count);
        for (unsigned i = 0; i < count; i++)
                pthread_mutex_unlock(&r->order[(first + i) % REPL_ORDER_STRIPES]);
}

/* ---- sending ---- */

static void inflight_push(struct repl_lun *r, struct repl_req *req)
{
        req->next = NULL;
        if (r->inflight_tail)
                r->inflight_tail->next = req;
        else
                r->inflight_head = req;
        r->inflight_tail = req;
        if (req->kind == REPL_OP_RESYNC)
                r->inflight_bytes += req->len;
}

int repl_send_data_locked(struct repl_lun *r, struct repl_req *req, uint8_t type, void *msg,
                          const struct iovec *iov, int niov)
{
        req->seq = r->next_seq++;
        /* Every data-channel message starts with its seq (field 1 of each message type). */
        switch (type) {
        case TANDEM__REPL__MSG_TYPE__MSG_WRITE:
                ((Tandem__Repl__Write *)msg)->seq = req->seq;
                break;
        case TANDEM__REPL__MSG_TYPE__MSG_FLUSH:
                ((Tandem__Repl__Flush *)msg)->seq = req->seq;
                break;
        case TANDEM__REPL__MSG_TYPE__MSG_RS_DATA:
                ((Tandem__Repl__ResyncData *)msg)->seq = req->seq;
                break;
        case TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REQ:
                ((Tandem__Repl__VerifyRequest *)msg)->seq = req->seq;
                break;
        case TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE:
                ((Tandem__Repl__ScsiState *)msg)->seq = req->seq;
                break;
        default:
                return -EINVAL;
        }
        /* Queued first: an ack can only come after the bytes left, and a failed send is
         * completed by the disconnect like every other request in flight. */
        req->sent_ns = tdm_now_ns();
        inflight_push(r, req);
        int rc = repl_send(r->data_fd, type, msg, iov, niov, (int)r->cfg.timeout_ms);
        if (rc == 0 && req->kind != REPL_OP_RESYNC && req->kind != REPL_OP_VERIFY)
                atomic_fetch_add_explicit(&r->writes_replicated, 1, memory_order_relaxed);
        return rc;
}

static uint32_t wire_kind(enum repl_io_kind kind)
{
        return (uint32_t)kind; /* REPL_IO_* values are the wire's kinds */
}

static int local_apply(struct repl_lun *r, enum repl_io_kind kind, const void *buf, uint64_t off,
                       uint64_t len)
{
        switch (kind) {
        case REPL_IO_WRITE:
                return bs_write(r->bs, buf, len, off);
        case REPL_IO_ZERO:
                return bs_write_zeroes(r->bs, off, len);
        case REPL_IO_UNMAP:
                return bs_unmap(r->bs, off, len);
        case REPL_IO_FLUSH:
                return bs_flush(r->bs);
        }
        return -EINVAL;
}

/* The peer is told: a request that waits for its ack (send_lock held). */
static int send_change_locked(struct repl_lun *r, struct repl_req *req, enum repl_io_kind kind,
                              const void *buf)
{
        if (kind == REPL_IO_FLUSH) {
                Tandem__Repl__Flush m = TANDEM__REPL__FLUSH__INIT;
                return repl_send_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_FLUSH, &m, NULL,
                                             0);
        }
        Tandem__Repl__Write m = TANDEM__REPL__WRITE__INIT;
        m.offset = req->off;
        m.length = (uint32_t)req->len;
        m.kind = wire_kind(kind);
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = req->len};
        bool data = kind == REPL_IO_WRITE;
        return repl_send_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_WRITE, &m,
                                     data ? &iov : NULL, data ? 1 : 0);
}

/*
 * Hands the change to the peer if it is in the ack set: 1 when the task now waits for an
 * ack, 0 when the change was recorded as out of sync instead (no peer), -ENOMEM.
 */
static int replicate(struct repl_lun *r, struct scsi_task *task, enum repl_io_kind kind,
                     const void *buf, uint64_t off, uint64_t len)
{
        struct repl_req *req = calloc(1, sizeof(*req));
        pthread_mutex_lock(&r->send_lock);
        if (!r->in_ack_set && r->outdating && req) {
                /* The peer is not yet Outdated in the cluster: this write waits for that. */
                req->kind = kind == REPL_IO_FLUSH ? REPL_OP_FLUSH : (enum repl_op_kind)kind;
                req->off = off;
                req->len = len;
                req->task = task;
                scsi_task_repl_hold(task);
                repl_hold_locked(r, req);
                pthread_mutex_unlock(&r->send_lock);
                return 1;
        }
        if (!r->in_ack_set) {
                /* Marked under send_lock: a resync ack cannot clear it behind our back. */
                if (kind != REPL_IO_FLUSH)
                        repl_md_set_dirty(r->md, off, len);
                pthread_mutex_unlock(&r->send_lock);
                free(req);
                return 0;
        }
        if (!req) {
                pthread_mutex_unlock(&r->send_lock);
                return -ENOMEM; /* the command fails; the peer stays a mirror */
        }
        uint64_t gen = r->conn_gen;
        req->kind = kind == REPL_IO_FLUSH ? REPL_OP_FLUSH : (enum repl_op_kind)kind;
        req->off = off;
        req->len = len;
        req->task = task;
        scsi_task_repl_hold(task);
        int rc = send_change_locked(r, req, kind, buf);
        pthread_mutex_unlock(&r->send_lock);
        if (rc < 0)
                repl_disconnect_gen(r, gen,
                                    rc == -ETIMEDOUT ? "peer stopped reading (send timed out)"
                                                     : "send to peer failed");
        return 1;
}

static int change_range(struct repl_lun *r, struct scsi_task *task, enum repl_io_kind kind,
                        const void *buf, uint64_t off, uint64_t len)
{
        if (len == 0)
                return 0;
        repl_order_lock(r, off, len);
        int rc = repl_md_al_begin(r->md, off, len);
        if (rc < 0) {
                repl_order_unlock(r, off, len);
                log_err("replication %s lun %llu: activity log write failed: %s", r->iqn,
                        (unsigned long long)r->lun_id, strerror(-rc));
                return rc;
        }
        rc = local_apply(r, kind, buf, off, len);
        int waits = 0;
        if (rc < 0) {
                repl_md_set_dirty(r->md, off, len); /* whatever part landed differs now */
        } else {
                waits = replicate(r, task, kind, buf, off, len);
                if (waits < 0) { /* not sent: the peer lacks what landed here */
                        repl_md_set_dirty(r->md, off, len);
                        rc = waits;
                }
        }
        repl_order_unlock(r, off, len);
        if (waits <= 0)
                repl_md_al_end(r->md, off, len);
        return rc;
}

int repl_lun_io(struct repl_lun *r, struct scsi_task *task, enum repl_io_kind kind, const void *buf,
                uint64_t off, uint64_t len)
{
        atomic_fetch_add(&r->io_active, 1);
        int rc = 0;
        if (kind == REPL_IO_FLUSH) {
                rc = bs_flush(r->bs);
                if (rc == 0)
                        rc = replicate(r, task, kind, NULL, 0, 0) < 0 ? -ENOMEM : 0;
        } else if (kind == REPL_IO_WRITE) {
                rc = change_range(r, task, kind, buf, off, len);
        } else {
                /* Large zeroing/unmapping in pieces: each fits the activity log. */
                for (uint64_t done = 0; rc == 0 && done < len;) {
                        uint64_t n = len - done < REPL_IO_SPLIT ? len - done : REPL_IO_SPLIT;
                        rc = change_range(r, task, kind, NULL, off + done, n);
                        done += n;
                }
        }
        atomic_fetch_sub(&r->io_active, 1);
        return rc;
}

/* ---- acks ---- */

void repl_req_complete(struct repl_lun *r, struct repl_req *req, int error, bool peer_has_it)
{
        bool change =
            req->kind == REPL_OP_WRITE || req->kind == REPL_OP_ZERO || req->kind == REPL_OP_UNMAP;
        if (change && (!peer_has_it || error))
                repl_md_set_dirty(r->md, req->off, req->len);
        if (req->kind == REPL_OP_RESYNC && peer_has_it && !error) {
                pthread_mutex_lock(&r->lock);
                r->sync_done += req->len;
                r->resync_sent += req->len;
                pthread_mutex_unlock(&r->lock);
        }
        if (change)
                repl_md_al_end(r->md, req->off, req->len);
        if (req->task)
                scsi_task_repl_release(req->task, error);
        free(req);
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
        while (done) {
                struct repl_req *req = done;
                done = req->next;
                repl_req_complete(r, req, req->seq == seq ? error : 0, true);
        }
        pthread_mutex_lock(&r->lock);
        pthread_cond_broadcast(&r->cond); /* the resync window */
        pthread_mutex_unlock(&r->lock);
        return 0;
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
                if (hold && req->task) { /* waits with the later writes for the outdate */
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
