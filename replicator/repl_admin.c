/* Admin operations on a replicated LUN (control-plane thread). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "repl_internal.h"
#include "tandem/cluster.h"
#include "tandem/log.h"
#include "wire.h"

#define DEMOTE_DRAIN_MS 10000

static void notify_peer(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        bool up = r->link_up;
        pthread_mutex_unlock(&r->lock);
        if (up && (repl_send_scsi_state(r) < 0 || repl_send_state(r) < 0))
                repl_disconnect(r, "cannot send state to peer");
}

#define PROMOTE_MARK_MS 10000

/*
 * Promoted without its peer, a node's data moves on: in a cluster the peer, which does not
 * know, is marked outdated first (the fence-peer handler) so that it is never promoted on its
 * return before it has resynced. No handler: nothing to run. The handler fails: no promotion.
 */
static int mark_absent_peer_outdated(struct repl_lun *r, char *err, size_t errlen)
{
        pthread_mutex_lock(&r->lock);
        bool alone = r->sb.role != REPL_ROLE_PRIMARY && !r->link_up;
        pthread_mutex_unlock(&r->lock);
        if (!alone || !cluster_enabled())
                return 0;
        int rc = cluster_fence_peer(r->peer_id, r->peer_name, PROMOTE_MARK_MS, false);
        if (rc == 0 || rc == -ENOENT)
                return 0;
        snprintf(err, errlen,
                 "promote: peer %u (%s) is not connected and the fence-peer handler could not "
                 "mark it outdated",
                 r->peer_id, r->peer_name);
        return rc;
}

/*
 * A link to a peer that still says Primary although its node has left our quorate ring: the
 * cluster lost that node, and Pacemaker promotes us only once it is fenced. Fencing cuts the
 * node off without a FIN, so the link would stay up until replication.timeout and the promote
 * would be refused ("peer is Primary"). The handler confirms the peer is gone (fenced in a
 * two_node cluster, where the other side is quorate too; the fencer accepts the fencing that
 * just happened) and marks it outdated; then the link is dropped. Returns 1 when it was, 0
 * when this does not apply (no handler: the promote is refused as before), < 0 on failure.
 */
static int drop_link_to_departed_primary(struct repl_lun *r, char *err, size_t errlen)
{
        if (!cluster_enabled() || !cluster_quorate() || cluster_ring_has(r->peer_id))
                return 0;
        pthread_mutex_lock(&r->lock);
        bool stale = r->link_up && r->peer.side.role == REPL_ROLE_PRIMARY;
        pthread_mutex_unlock(&r->lock);
        if (!stale)
                return 0;
        log_notice("replication %s lun %llu: peer %u (%s) is Primary on a link but has left the "
                   "cluster membership",
                   r->iqn, (unsigned long long)r->lun_id, r->peer_id, r->peer_name);
        bool fence = cluster_two_node();
        int rc = cluster_fence_peer(r->peer_id, r->peer_name, PROMOTE_MARK_MS, fence);
        if (rc == -ENOENT)
                return 0;
        if (rc < 0) {
                snprintf(err, errlen,
                         "promote: peer %u (%s) left the cluster membership while Primary and "
                         "the fence-peer handler could not %s it",
                         r->peer_id, r->peer_name, fence ? "fence" : "mark");
                return rc;
        }
        repl_disconnect(r, "the peer left the cluster membership while Primary");
        return 1;
}

static int do_promote(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        bool force = *(bool *)arg;
        int dropped = drop_link_to_departed_primary(r, err, errlen);
        if (dropped < 0)
                return dropped;
        /* A dropped peer was marked by the handler already. */
        int marked = dropped ? 0 : mark_absent_peer_outdated(r, err, errlen);
        if (marked < 0)
                return marked;
        pthread_mutex_lock(&r->lock);
        int rc = 0;
        bool restart_link = false;
        if (r->sb.role == REPL_ROLE_PRIMARY)
                goto out;
        if (cluster_enabled() && !cluster_quorate()) {
                snprintf(err, errlen, "promote: this node's cluster partition has no quorum");
                rc = -EAGAIN;
                goto out;
        }
        if (r->link_up && r->peer.side.role == REPL_ROLE_PRIMARY) {
                snprintf(err, errlen, "promote: peer %u (%s) is Primary; demote it first",
                         r->peer_id, r->peer_name);
                rc = -EBUSY;
                goto out;
        }
        if (r->conn == REPL_CONN_SYNC_TARGET) {
                snprintf(err, errlen, "promote: this node is SyncTarget (its data is incomplete)");
                rc = -EBUSY;
                goto out;
        }
        if (r->sb.disk != REPL_DISK_UPTODATE && !force) {
                snprintf(err, errlen,
                         "promote: disk is %s; only an UpToDate disk may be promoted (--force "
                         "makes this node's data the truth: what the peer has and this node "
                         "lacks is lost)",
                         repl_disk_name(r->sb.disk));
                rc = -EPERM;
                goto out;
        }
        if (r->sb.disk != REPL_DISK_UPTODATE) {
                log_warn("replication %s lun %llu: forced promotion of a %s disk", r->iqn,
                         (unsigned long long)r->lun_id, repl_disk_name(r->sb.disk));
                r->sb.disk = REPL_DISK_UPTODATE;
                if (r->sb.gen.current == REPL_GEN_JUST_CREATED)
                        r->sb.gen.current = repl_gen_fresh();
                restart_link = r->link_up; /* the peer must now sync from us */
        }
        pthread_mutex_lock(&r->send_lock);
        bool with_peer = r->in_ack_set;
        pthread_mutex_unlock(&r->send_lock);
        if (!with_peer && !restart_link)
                repl_gen_new_current(&r->sb.gen, repl_gen_fresh());
        uint64_t epoch = r->sb.promote_epoch;
        if (r->peer.known && r->peer.side.promote_epoch > epoch)
                epoch = r->peer.side.promote_epoch;
        r->sb.promote_epoch = epoch + 1;
        r->sb.role = REPL_ROLE_PRIMARY;
        /* Without a handed-over state the non-persistent PR state is gone: a power on. */
        r->continued = r->lu_state_valid;
        r->lu_state_valid = true; /* what this node holds is the LU's state from now on */
        r->sb.primary_active = true;
        rc = repl_persist(r);
        if (rc < 0) {
                r->sb.role = REPL_ROLE_SECONDARY;
                r->sb.primary_active = false;
                snprintf(err, errlen, "promote: cannot write metadata %s: %s", r->md_path,
                         strerror(-rc));
                goto out;
        }
        r->promotions++;
        log_notice("replication %s lun %llu: promoted to Primary", r->iqn,
                   (unsigned long long)r->lun_id);
out:
        pthread_mutex_unlock(&r->lock);
        if (rc == 0 && restart_link)
                repl_disconnect(r, "forced promotion: reconnecting to sync the peer");
        else if (rc == 0)
                notify_peer(r); /* the peer hears of the role before our first write */
        if (rc == 0) {
                pthread_mutex_lock(&r->lock);
                repl_publish_access(r);
                pthread_mutex_unlock(&r->lock);
        }
        return rc;
}

int repl_admin_promote(const char *iqn, uint64_t lun, bool force, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_promote, &force);
}

static int do_demote(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        (void)arg;
        (void)err;
        (void)errlen;
        pthread_mutex_lock(&r->lock);
        if (r->sb.role == REPL_ROLE_SECONDARY) {
                pthread_mutex_unlock(&r->lock);
                return 0;
        }
        /* New commands are refused first; those already sent get their acks. */
        r->demoting = true;
        repl_publish_access(r);
        pthread_mutex_unlock(&r->lock);
        bool drained = repl_writes_drained(r, DEMOTE_DRAIN_MS);
        pthread_mutex_lock(&r->lock);
        r->demoting = false;
        if (!drained) {
                repl_publish_access(r);
                pthread_mutex_unlock(&r->lock);
                snprintf(err, errlen,
                         "demote: writes still wait for the peer after %d ms; "
                         "still Primary",
                         DEMOTE_DRAIN_MS);
                return -EBUSY;
        }
        r->sb.role = REPL_ROLE_SECONDARY;
        r->sb.primary_active = false;
        repl_publish_access(r);
        int rc = repl_persist(r);
        pthread_mutex_unlock(&r->lock);
        if (rc < 0)
                snprintf(err, errlen, "demote: cannot write metadata %s: %s", r->md_path,
                         strerror(-rc));
        log_notice("replication %s lun %llu: demoted to Secondary", r->iqn,
                   (unsigned long long)r->lun_id);
        notify_peer(r);
        return rc;
}

int repl_admin_demote(const char *iqn, uint64_t lun, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_demote, NULL);
}

static int do_connect(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        (void)arg;
        (void)err;
        (void)errlen;
        pthread_mutex_lock(&r->lock);
        r->want_connect = true;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        return 0;
}

int repl_admin_connect(const char *iqn, uint64_t lun, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_connect, NULL);
}

static int do_disconnect(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        (void)arg;
        (void)err;
        (void)errlen;
        pthread_mutex_lock(&r->lock);
        r->want_connect = false;
        pthread_mutex_unlock(&r->lock);
        repl_disconnect(r, "disconnected by the admin");
        return 0;
}

int repl_admin_disconnect(const char *iqn, uint64_t lun, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_disconnect, NULL);
}

static int do_verify(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        bool resync = *(bool *)arg;
        pthread_mutex_lock(&r->lock);
        int rc = 0;
        if (!r->link_up || r->conn != REPL_CONN_CONNECTED) {
                snprintf(err, errlen, "verify: needs a Connected pair in sync (now %s)",
                         repl_conn_name(r->conn));
                rc = -ENOTCONN;
        } else if (r->peer.side.role == REPL_ROLE_PRIMARY) {
                /* Only the writer's side reads in step with the writes. */
                snprintf(err, errlen, "verify: run it on the Primary (node %u)", r->peer_id);
                rc = -EPERM;
        } else {
                r->verify_resync = resync;
                r->verify_requested = true;
                r->verify_oos = 0;
                pthread_cond_broadcast(&r->cond);
        }
        pthread_mutex_unlock(&r->lock);
        return rc;
}

int repl_admin_verify(const char *iqn, uint64_t lun, bool resync, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_verify, &resync);
}

static int do_pause(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        (void)err;
        (void)errlen;
        pthread_mutex_lock(&r->lock);
        r->sync_paused = *(bool *)arg;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        return 0;
}

int repl_admin_resync_pause(const char *iqn, uint64_t lun, bool pause, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_pause, &pause);
}

/* This node's data is to be replaced by the peer's on the next connect. */
static int discard_local(struct repl_lun *r, const char *op, char *err, size_t errlen)
{
        pthread_mutex_lock(&r->lock);
        if (r->sb.role == REPL_ROLE_PRIMARY) {
                pthread_mutex_unlock(&r->lock);
                snprintf(err, errlen, "%s: this node is Primary; demote it first", op);
                return -EBUSY;
        }
        r->want_discard = true;
        r->split_brain = false;
        r->want_connect = true;
        r->sb.disk = REPL_DISK_INCONSISTENT;
        int rc = repl_persist(r);
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        if (rc < 0) {
                snprintf(err, errlen, "%s: cannot write metadata %s: %s", op, r->md_path,
                         strerror(-rc));
                return rc;
        }
        log_warn("replication %s lun %llu: %s: this node's data will be replaced by node %u's",
                 r->iqn, (unsigned long long)r->lun_id, op, r->peer_id);
        repl_disconnect(r, "local data discarded by the admin; reconnecting to resync");
        return 0;
}

static int do_invalidate(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        (void)arg;
        return discard_local(r, "invalidate", err, errlen);
}

int repl_admin_invalidate(const char *iqn, uint64_t lun, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_invalidate, NULL);
}

static int do_resolve(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        (void)arg;
        pthread_mutex_lock(&r->lock);
        bool sb = r->split_brain;
        pthread_mutex_unlock(&r->lock);
        if (!sb) {
                snprintf(err, errlen,
                         "resolve-split-brain: no split brain was detected on this "
                         "node");
                return -EINVAL;
        }
        return discard_local(r, "resolve-split-brain", err, errlen);
}

int repl_admin_resolve_split_brain(const char *iqn, uint64_t lun, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_resolve, NULL);
}

static int do_skip_initial(struct repl_lun *r, void *arg, char *err, size_t errlen)
{
        (void)arg;
        pthread_mutex_lock(&r->lock);
        bool ok = r->link_up && r->decision == REPL_DECIDE_BOTH_NEW &&
                  r->sb.gen.current == REPL_GEN_JUST_CREATED;
        if (!ok) {
                pthread_mutex_unlock(&r->lock);
                snprintf(err, errlen,
                         "skip-initial-sync: only for a brand-new pair that is "
                         "Connected with both disks Inconsistent and no history");
                return -EINVAL;
        }
        repl_md_clear_dirty(r->md, 0, r->size_bytes);
        r->sb.gen.current = repl_gen_fresh();
        r->sb.disk = REPL_DISK_UPTODATE;
        r->sb.peer_disk = REPL_DISK_UPTODATE;
        r->decision = REPL_DECIDE_IN_SYNC;
        int rc = repl_persist(r);
        Tandem__Repl__SyncDone m = TANDEM__REPL__SYNC_DONE__INIT;
        Tandem__Repl__Generations g;
        uint64_t hist[2];
        repl_gen_to_msg(&r->sb.gen, &g, hist);
        m.gen = &g;
        pthread_mutex_unlock(&r->lock);
        if (rc == 0)
                rc = repl_md_flush_bitmap(r->md);
        if (rc == 0)
                rc = repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_SYNC_DONE, &m);
        if (rc < 0)
                snprintf(err, errlen, "skip-initial-sync: %s", strerror(-rc));
        return rc;
}

int repl_admin_skip_initial_sync(const char *iqn, uint64_t lun, char *err, size_t errlen)
{
        return repl_with_lun(iqn, lun, err, errlen, do_skip_initial, NULL);
}
