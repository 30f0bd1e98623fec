/*
 * The sync source's worker: resync sends the blocks the bitmap marks, in disk order, while
 * live writes go on (a block is read and queued under the LUN's range lock, so a live
 * write to it is queued either wholly before or wholly after); online verify sends digests
 * of every block and collects the peer's mismatches.
 */
#include <errno.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repl_internal.h"
#include "tandem/clock.h"
#include "tandem/log.h"
#include "wire.h"

struct sync_pace {
        uint64_t start_ns;
        uint64_t sent;
        uint64_t last_writes;
        uint64_t last_writes_ns;
};

/* False when the link went down, the LUN stops, or the thread must end. */
static bool wait_turn(struct repl_lun *r, uint64_t gen)
{
        pthread_mutex_lock(&r->lock);
        for (;;) {
                bool gone = r->stopping || !r->link_up || r->conn_gen != gen;
                if (gone) {
                        pthread_mutex_unlock(&r->lock);
                        return false;
                }
                pthread_mutex_lock(&r->send_lock);
                bool room = r->inflight_bytes < REPL_RESYNC_WINDOW;
                pthread_mutex_unlock(&r->send_lock);
                if (room && !(r->sync_paused && !r->verify_mode))
                        break;
                struct timespec ts = tdm_deadline(CLOCK_REALTIME, 50);
                pthread_cond_timedwait(&r->cond, &r->lock, &ts);
        }
        pthread_mutex_unlock(&r->lock);
        return true;
}

/*
 * Rate control: the configured rate while initiators are quiet, the floor while they
 * write (so resync never starves them, and always progresses).
 */
static void pace(struct repl_lun *r, struct sync_pace *p, uint64_t bytes)
{
        uint64_t now = tdm_now_ns();
        uint64_t writes = atomic_load(&r->writes_replicated);
        if (writes != p->last_writes) {
                p->last_writes = writes;
                p->last_writes_ns = now;
        }
        bool busy = now - p->last_writes_ns < 200 * 1000000ull;
        uint64_t rate = busy ? r->cfg.resync_min_rate : r->cfg.resync_rate;
        if (rate == 0)
                rate = 1;
        p->sent += bytes;
        uint64_t due_ns = p->sent * 1000000000ull / rate;
        uint64_t spent = now - p->start_ns;
        if (due_ns > spent) {
                uint64_t wait = due_ns - spent;
                if (wait > 500000000ull)
                        wait = 500000000ull;
                struct timespec ts = {(time_t)(wait / 1000000000ull), (long)(wait % 1000000000ull)};
                nanosleep(&ts, NULL);
        }
        /* Restart the window now and then: a pause or a rate change is not "owed". */
        if (spent > 2000000000ull) {
                p->start_ns = now;
                p->sent = 0;
        }
        pthread_mutex_lock(&r->lock);
        if (now - r->sync_last_ns >= 1000000000ull) {
                uint64_t delta = r->sync_done - r->sync_last_done;
                r->sync_rate_bps = delta * 1000000000ull / (now - r->sync_last_ns);
                r->sync_last_ns = now;
                r->sync_last_done = r->sync_done;
        }
        pthread_mutex_unlock(&r->lock);
}

static bool all_zero(const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

/*
 * Reads one run of dirty blocks and queues it, under the range lock: a live write to those
 * blocks gets its sequence number wholly before or wholly after. The data travels in the
 * request's own buffer (the sender sends it later).
 */
static int send_run(struct repl_lun *r, uint64_t off, uint64_t len)
{
        struct repl_req *req = repl_req_new(REPL_OP_RESYNC, len);
        if (!req)
                return -ENOMEM;
        req->off = off;
        req->len = len;
        struct tdm_range lock = {.off = off, .len = len};
        tdm_range_lock_wait(&r->medium, &lock);
        int rc = tdm_medium_read(r->local, req->owned, len, off);
        if (rc == 0) {
                Tandem__Repl__ResyncData m = TANDEM__REPL__RESYNC_DATA__INIT;
                m.offset = off;
                m.length = (uint32_t)len;
                m.zero = all_zero(req->owned, len);
                pthread_mutex_lock(&r->send_lock);
                rc = r->in_ack_set
                         ? repl_queue_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_RS_DATA, &m,
                                                  m.zero ? NULL : req->owned,
                                                  m.zero ? 0 : (uint32_t)len)
                         : -ENOTCONN;
                pthread_mutex_unlock(&r->send_lock);
        }
        tdm_range_unlock(&r->medium, &lock);
        if (rc < 0) {
                repl_req_put(req);
                repl_req_put(req);
        }
        return rc;
}

/* The next run of dirty blocks from bit `from`: at most REPL_RESYNC_CHUNK bytes. */
static bool next_run(struct repl_lun *r, uint64_t from, uint64_t *off, uint64_t *len)
{
        uint64_t bit;
        if (!repl_md_next_dirty(r->md, from, &bit))
                return false;
        uint64_t bits = repl_md_bits(r->md);
        uint64_t end = bit + 1;
        uint64_t max_bits = REPL_RESYNC_CHUNK >> REPL_MD_BIT_SHIFT;
        while (end < bits && end - bit < max_bits && repl_md_test_bit(r->md, end))
                end++;
        *off = bit << REPL_MD_BIT_SHIFT;
        uint64_t stop = end << REPL_MD_BIT_SHIFT;
        if (stop > r->size_bytes)
                stop = r->size_bytes;
        *len = stop - *off;
        return true;
}

/* Resync and verify requests only: live writes keep flowing and must not hold us up. */
static bool inflight_empty(struct repl_lun *r)
{
        pthread_mutex_lock(&r->send_lock);
        bool empty = true;
        for (struct repl_req *q = r->inflight_head; q && empty; q = q->next)
                empty = q->kind != REPL_OP_RESYNC && q->kind != REPL_OP_VERIFY;
        pthread_mutex_unlock(&r->send_lock);
        return empty;
}

static bool wait_drained(struct repl_lun *r, uint64_t gen)
{
        while (!inflight_empty(r)) {
                pthread_mutex_lock(&r->lock);
                bool gone = r->stopping || !r->link_up || r->conn_gen != gen;
                if (!gone) {
                        struct timespec ts = tdm_deadline(CLOCK_REALTIME, 20);
                        pthread_cond_timedwait(&r->cond, &r->lock, &ts);
                }
                pthread_mutex_unlock(&r->lock);
                if (gone)
                        return false;
        }
        return true;
}

static int send_sync_done(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        repl_gen_sync_source_done(&r->sb.gen);
        r->sb.peer_disk = REPL_DISK_UPTODATE;
        r->conn = REPL_CONN_CONNECTED;
        r->sync_done = r->sync_total;
        int rc = repl_persist(r);
        Tandem__Repl__SyncDone m = TANDEM__REPL__SYNC_DONE__INIT;
        Tandem__Repl__Generations g;
        uint64_t hist[2];
        repl_gen_to_msg(&r->sb.gen, &g, hist);
        m.gen = &g;
        pthread_mutex_unlock(&r->lock);
        if (rc == 0)
                rc = repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_SYNC_DONE, &m);
        return rc;
}

static void resync(struct repl_lun *r, uint64_t gen)
{
        struct sync_pace p = {.start_ns = tdm_now_ns()};
        pthread_mutex_lock(&r->lock);
        r->sync_last_ns = p.start_ns;
        r->sync_last_done = 0;
        pthread_mutex_unlock(&r->lock);
        for (;;) {
                uint64_t from = 0, off, len;
                while (next_run(r, from, &off, &len)) {
                        if (!wait_turn(r, gen))
                                return;
                        if (send_run(r, off, len) < 0) {
                                repl_disconnect(r, "resync send failed");
                                return;
                        }
                        pace(r, &p, len);
                        from = (off + len) >> REPL_MD_BIT_SHIFT;
                }
                if (!wait_drained(r, gen))
                        return;
                if (repl_md_dirty_bits(r->md) == 0)
                        break; /* else a block failed or was marked again: another pass */
        }
        if (repl_md_flush_bitmap(r->md) < 0 || send_sync_done(r) < 0) {
                repl_disconnect(r, "cannot finish the resync");
                return;
        }
        log_notice("replication %s lun %llu: resync to node %u done (%llu bytes)", r->iqn,
                   (unsigned long long)r->lun_id, r->peer_id, (unsigned long long)r->sync_total);
}

/* Digests of one chunk, read under the range lock, queued as a verify request. */
static int verify_chunk(struct repl_lun *r, uint8_t *buf, uint64_t off, uint32_t len)
{
        uint32_t n = len / REPL_VERIFY_BLOCK;
        struct repl_req *req = repl_req_new(REPL_OP_VERIFY, (size_t)n * 32 + 1);
        if (!req)
                return -ENOMEM;
        req->off = off;
        req->len = len;
        uint8_t *digests = req->owned;
        struct tdm_range lock = {.off = off, .len = len, .shared = true};
        tdm_range_lock_wait(&r->medium, &lock);
        int rc = len ? tdm_medium_read(r->local, buf, len, off) : 0;
        for (uint32_t i = 0; rc == 0 && i < n; i++)
                SHA256(buf + (size_t)i * REPL_VERIFY_BLOCK, REPL_VERIFY_BLOCK,
                       digests + (size_t)i * 32);
        if (rc == 0) {
                Tandem__Repl__VerifyRequest m = TANDEM__REPL__VERIFY_REQUEST__INIT;
                m.offset = off;
                m.length = len;
                m.block_bytes = REPL_VERIFY_BLOCK;
                pthread_mutex_lock(&r->send_lock);
                rc = r->in_ack_set
                         ? repl_queue_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REQ,
                                                  &m, len ? digests : NULL, n * 32)
                         : -ENOTCONN;
                pthread_mutex_unlock(&r->send_lock);
        }
        tdm_range_unlock(&r->medium, &lock);
        if (rc < 0) {
                repl_req_put(req);
                repl_req_put(req);
        }
        return rc;
}

static void verify(struct repl_lun *r, uint64_t gen, uint8_t *buf)
{
        pthread_mutex_lock(&r->lock);
        r->conn = REPL_CONN_VERIFY_SOURCE;
        r->verify_oos = 0;
        r->sync_total = r->size_bytes - r->size_bytes % REPL_VERIFY_BLOCK;
        r->sync_done = 0;
        bool resync_after = r->verify_resync;
        pthread_mutex_unlock(&r->lock);
        struct sync_pace p = {.start_ns = tdm_now_ns()};
        for (uint64_t off = 0; off + REPL_VERIFY_BLOCK <= r->size_bytes;) {
                uint64_t len = r->size_bytes - off;
                if (len > REPL_VERIFY_CHUNK)
                        len = REPL_VERIFY_CHUNK;
                len -= len % REPL_VERIFY_BLOCK;
                if (!wait_turn(r, gen))
                        return;
                if (verify_chunk(r, buf, off, (uint32_t)len) < 0) {
                        repl_disconnect(r, "verify send failed");
                        return;
                }
                off += len;
                pthread_mutex_lock(&r->lock);
                r->sync_done = off;
                pthread_mutex_unlock(&r->lock);
                pace(r, &p, len);
        }
        if (verify_chunk(r, buf, 0, 0) < 0 || !wait_drained(r, gen)) /* the end marker */
                return;
        pthread_mutex_lock(&r->lock);
        uint64_t oos = r->verify_oos;
        r->conn = REPL_CONN_CONNECTED;
        pthread_mutex_unlock(&r->lock);
        log_notice("replication %s lun %llu: verify done: %llu bytes out of sync", r->iqn,
                   (unsigned long long)r->lun_id, (unsigned long long)oos);
        if (oos && resync_after) {
                /* The mismatches are marked: a reconnect resyncs exactly them from here. */
                if (repl_md_flush_bitmap(r->md) == 0)
                        repl_disconnect(r, "verify found out-of-sync blocks; resyncing them");
        }
}

void *repl_sync_main(void *arg)
{
        struct repl_lun *r = arg;
        pthread_mutex_lock(&r->lock);
        uint64_t gen = r->conn_gen;
        bool verify_mode = r->verify_mode;
        pthread_mutex_unlock(&r->lock);
        if (!verify_mode) {
                resync(r, gen);
                return NULL;
        }
        uint8_t *buf = NULL;
        if (posix_memalign((void **)&buf, 4096, REPL_VERIFY_CHUNK)) {
                repl_disconnect(r, "out of memory for verify");
                return NULL;
        }
        verify(r, gen, buf);
        free(buf);
        return NULL;
}
