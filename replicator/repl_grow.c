/*
 * Online resize of a replicated LUN. The Primary grows its store and has the Secondary grow
 * its own (a Resize on the data channel, ordered with the writes before it); only once both
 * have grown do the bitmaps cover the new range and initiators see the new capacity. The
 * Secondary refuses what it cannot do (a block device not grown yet) without leaving the
 * pair: the resize fails and nothing else changes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "repl_internal.h"
#include "tandem/log.h"
#include "tandem/repl.h"
#include "wire.h"

/* The LUN's size everywhere this node keeps it (r->lock held). */
static void set_size_locked(struct repl_lun *r, uint64_t size)
{
        r->size_bytes = size;
        atomic_store(&r->medium.size, size);
}

int repl_apply_resize(struct repl_lun *r, const Tandem__Repl__Resize *m)
{
        uint64_t size = m->size_bytes;
        if (size < r->size_bytes || size % r->block_size) {
                log_warn("replication %s lun %" PRIu64 ": refused a resize to %" PRIu64 " bytes",
                         r->iqn, r->lun_id, size);
                return -EINVAL;
        }
        struct tdm_mio io = {.op = TDM_MIO_GROW, .off = size};
        int rc = tdm_medium_run(r->local, &io);
        if (rc == 0)
                rc = repl_md_grow(r->md, size, false);
        if (rc < 0) {
                log_warn("replication %s lun %" PRIu64 ": cannot grow to %" PRIu64 " bytes as the "
                         "Primary did: %s",
                         r->iqn, r->lun_id, size, strerror(-rc));
                return rc;
        }
        pthread_mutex_lock(&r->lock);
        set_size_locked(r, size);
        pthread_mutex_unlock(&r->lock);
        log_notice("replication %s lun %" PRIu64 ": grown to %" PRIu64 " bytes with the Primary",
                   r->iqn, r->lun_id, size);
        if (r->medium.size_changed)
                r->medium.size_changed(r->medium.access_arg);
        return 0;
}

/* Only a Primary in sync with a peer that takes a Resize grows the pair (r->lock held). */
static int check_can_grow_locked(const struct repl_lun *r, char *err, size_t errlen)
{
        if (r->sb.role != REPL_ROLE_PRIMARY) {
                snprintf(err, errlen, "this node is not Primary: resize on the Primary");
                return -EBUSY;
        }
        if (r->conn != REPL_CONN_CONNECTED || !r->link_up) {
                snprintf(err, errlen,
                         "the peer is not connected and in sync (%s): both nodes grow together",
                         repl_conn_name(r->conn));
                return -ENOTCONN;
        }
        if (r->sb.peer_disk != REPL_DISK_UPTODATE) {
                snprintf(err, errlen, "the peer's disk is %s, not UpToDate",
                         repl_disk_name(r->sb.peer_disk));
                return -EBUSY;
        }
        if (!(r->peer_features & REPL_FEATURE_RESIZE)) {
                snprintf(err, errlen,
                         "the peer's tandemd cannot grow a replicated LUN (upgrade it)");
                return -EOPNOTSUPP;
        }
        return 0;
}

int repl_lun_grow(struct repl_lun *r, uint64_t size, bool new_range_differs, char *err,
                  size_t errlen)
{
        pthread_mutex_lock(&r->lock);
        int rc = check_can_grow_locked(r, err, errlen);
        pthread_mutex_unlock(&r->lock);
        if (rc < 0)
                return rc;
        if (size < r->size_bytes) {
                snprintf(err, errlen, "%" PRIu64 " bytes is less than the LUN has", size);
                return -EINVAL;
        }
        struct tdm_mio io = {.op = TDM_MIO_GROW, .off = size};
        rc = tdm_medium_run(&r->medium, &io); /* this node's store and the peer's */
        if (rc < 0) {
                log_warn("replication %s lun %" PRIu64 ": growing to %" PRIu64 " bytes: %s", r->iqn,
                         r->lun_id, size, strerror(-rc));
                snprintf(err, errlen, "%s",
                         rc == -ENOTCONN ? "the peer left while growing: nothing changed"
                                         : "the peer could not grow its store (a block device "
                                           "must be grown there first); nothing changed");
                return rc;
        }
        /* A block device's new range may hold anything: out of sync until a resync. */
        rc = repl_md_grow(r->md, size, new_range_differs);
        if (rc < 0) {
                snprintf(err, errlen, "cannot grow the metadata %s: %s", r->md_path, strerror(-rc));
                return rc;
        }
        pthread_mutex_lock(&r->lock);
        set_size_locked(r, size);
        pthread_mutex_unlock(&r->lock);
        log_notice("replication %s lun %" PRIu64 ": grown to %" PRIu64 " bytes on both nodes%s",
                   r->iqn, r->lun_id, size,
                   new_range_differs ? " (the new range is out of sync until a resync)" : "");
        return 0;
}
