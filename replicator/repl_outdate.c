/*
 * Cluster mode: a Primary drops a lost peer from its ack set only after the Corosync group
 * has recorded that peer Outdated (it then cannot be promoted), and only while this node is
 * quorate. In a two_node cluster quorum proves nothing about a peer outside our membership
 * (its side is quorate too), so there the peer must also be fenced first (the fence-peer
 * handler). Until then its writes are held; past the hold bound (replication.timeout + hold
 * = TDM_CLUSTER_IO_HOLD_MAX_MS) they fail (NOT READY, state transition: initiators retry)
 * rather than diverge.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repl_internal.h"
#include "tandem/clock.h"
#include "tandem/cluster.h"
#include "tandem/config.h"
#include "tandem/log.h"

#define OUTDATE_TRY_MS   1000
#define OUTDATE_RETRY_MS 200

void repl_hold_locked(struct repl_lun *r, struct repl_req *req)
{
        req->next = NULL;
        req->sent_ns = tdm_now_ns();
        if (r->held_tail)
                r->held_tail->next = req;
        else
                r->held_head = req;
        r->held_tail = req;
}

static void complete_all(struct repl_lun *r, struct repl_req *list, int error)
{
        while (list) {
                struct repl_req *req = list;
                list = req->next;
                repl_req_complete(r, req, error, false);
        }
}

/* How long a write may stay held: it already waited replication.timeout for the peer. */
static unsigned hold_max_ms(const struct repl_lun *r)
{
        unsigned t = r->cfg.timeout_ms;
        return t < TDM_CLUSTER_IO_HOLD_MAX_MS ? TDM_CLUSTER_IO_HOLD_MAX_MS - t : 0;
}

/* Time left before the oldest held write fails (the whole bound when none is held). */
static unsigned hold_left_ms(struct repl_lun *r)
{
        uint64_t now = tdm_now_ns(), max_ns = (uint64_t)hold_max_ms(r) * 1000000ull;
        pthread_mutex_lock(&r->send_lock);
        uint64_t age = r->held_head ? now - r->held_head->sent_ns : 0;
        pthread_mutex_unlock(&r->send_lock);
        return age >= max_ns ? 0 : (unsigned)((max_ns - age) / 1000000ull);
}

/* Held writes older than the bound fail: the group could not be told in time. */
static void fail_old_held(struct repl_lun *r)
{
        uint64_t now = tdm_now_ns();
        struct repl_req *old = NULL, **tail = &old;
        pthread_mutex_lock(&r->send_lock);
        while (r->held_head &&
               now - r->held_head->sent_ns > (uint64_t)hold_max_ms(r) * 1000000ull) {
                struct repl_req *req = r->held_head;
                r->held_head = req->next;
                req->next = NULL;
                *tail = req;
                tail = &req->next;
        }
        if (!r->held_head)
                r->held_tail = NULL;
        pthread_mutex_unlock(&r->send_lock);
        complete_all(r, old, -EAGAIN);
}

static struct repl_req *take_held(struct repl_lun *r, bool stop_holding)
{
        pthread_mutex_lock(&r->send_lock);
        struct repl_req *list = r->held_head;
        r->held_head = r->held_tail = NULL;
        if (stop_holding)
                r->outdating = false;
        pthread_mutex_unlock(&r->send_lock);
        return list;
}

struct outdate_wait {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
        int rc;
};

static void outdate_done(void *arg, int rc)
{
        struct outdate_wait *w = arg;
        pthread_mutex_lock(&w->lock);
        w->done = true;
        w->rc = rc;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

static int outdate_once(struct repl_lun *r, uint64_t gen)
{
        struct outdate_wait w = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                 .cond = PTHREAD_COND_INITIALIZER};
        int rc = cluster_outdate_peer(r->naa, r->peer_id, gen, OUTDATE_TRY_MS, outdate_done, &w);
        if (rc < 0)
                return rc;
        pthread_mutex_lock(&w.lock);
        while (!w.done)
                pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        return w.rc;
}

#define FENCE_MIN_MS 500

/*
 * The Outdate was delivered. Even a peer whose tandemd is in the group may not have recorded
 * it (it may be shutting down, or die before it persists), so the cluster itself remembers
 * that the peer's data is outdated: the handler's mark keeps it from being promoted until it
 * has resynced. Outside our membership in a two_node cluster the peer's side is quorate too:
 * it is fenced as well. Without a handler the mark is skipped (warned) but a needed fence is
 * not.
 */
static int confirm_outdated_peer(struct repl_lun *r, int outcome)
{
        if (outcome < 0)
                return outcome; /* not delivered while quorate */
        bool fence = outcome == CLUSTER_OUTDATE_PEER_UNREACHABLE && cluster_two_node();
        unsigned left = hold_left_ms(r);
        int rc = cluster_fence_peer(r->peer_id, r->peer_name,
                                    left > FENCE_MIN_MS ? left : FENCE_MIN_MS, fence);
        if (rc == -ENOENT && !fence) {
                log_warn("replication %s lun %llu: cluster.fence_peer is not set: node %u is not "
                         "marked outdated in the cluster, only %s",
                         r->iqn, (unsigned long long)r->lun_id, r->peer_id,
                         outcome == 0 ? "by its own tandemd" : "in this node's metadata");
                return 0;
        }
        return rc;
}

static const char *outdate_failure(int rc)
{
        switch (rc) {
        case -EAGAIN:
                return "no quorum";
        case -ENOENT:
                return "two_node cluster and the peer is outside the membership, but "
                       "cluster.fence_peer is not set: it cannot be fenced";
        case -EIO:
        case -ETIMEDOUT:
                return "the fence-peer handler failed to mark or fence the peer";
        default:
                return strerror(-rc);
        }
}

void repl_outdate_peer(struct repl_lun *r)
{
        pthread_mutex_lock(&r->send_lock);
        bool need = r->outdating;
        uint64_t gen = r->outdate_gen;
        pthread_mutex_unlock(&r->send_lock);
        if (!need)
                return;
        int rc = -EAGAIN;
        bool warned = false;
        while (!repl_stopping(r)) {
                rc = confirm_outdated_peer(r, outdate_once(r, gen));
                if (rc == 0 || rc == -ENOTCONN || rc == -ECANCELED)
                        break;
                if (!warned) {
                        log_warn("replication %s lun %llu: cannot outdate node %u through the "
                                 "cluster (%s): writes are held, and fail after %u ms",
                                 r->iqn, (unsigned long long)r->lun_id, r->peer_id,
                                 outdate_failure(rc), hold_max_ms(r));
                        warned = true;
                }
                fail_old_held(r);
                struct timespec ts = {0, OUTDATE_RETRY_MS * 1000000L};
                nanosleep(&ts, NULL);
        }
        if (rc == 0) {
                log_notice("replication %s lun %llu: node %u is Outdated in the cluster; writes "
                           "go on without it",
                           r->iqn, (unsigned long long)r->lun_id, r->peer_id);
                /* Before the first held write completes: the data moves on from here. */
                pthread_mutex_lock(&r->lock);
                if (r->sb.role == REPL_ROLE_PRIMARY) {
                        repl_go_on_without_peer_locked(r);
                        repl_persist(r);
                }
                pthread_mutex_unlock(&r->lock);
                complete_all(r, take_held(r, true), 0);
                return;
        }
        /* Stopping, or the cluster went away: nothing held may claim the peer has it. */
        complete_all(r, take_held(r, rc == -ENOTCONN), -EAGAIN);
}

/* ---- this node named in an Outdate ---- */

static int outdate_self(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        uint32_t by = *(uint32_t *)arg;
        (void)err;
        (void)errlen;
        pthread_mutex_lock(&r->lock);
        bool primary = r->sb.role == REPL_ROLE_PRIMARY;
        if (!primary && r->sb.disk == REPL_DISK_UPTODATE) {
                r->sb.disk = REPL_DISK_OUTDATED;
                repl_persist(r);
        }
        pthread_mutex_unlock(&r->lock);
        if (primary) {
                log_warn("replication %s lun %llu: node %u asked the cluster to outdate this "
                         "node, which is Primary: ignored",
                         r->iqn, (unsigned long long)r->lun_id, by);
                return 0;
        }
        log_warn("replication %s lun %llu: node %u went on without this node: disk Outdated",
                 r->iqn, (unsigned long long)r->lun_id, by);
        repl_disconnect(r, "outdated by the Primary through the cluster");
        return 0;
}

static void on_outdate(void *arg, const char *naa, uint32_t by_node, uint64_t gen)
{
        (void)arg;
        (void)gen;
        char err[128];
        repl_with_naa(naa, err, sizeof(err), outdate_self, &by_node);
}

void repl_outdate_handler_install(void)
{
        cluster_set_outdate_handler(on_outdate, NULL);
}
