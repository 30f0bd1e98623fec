/*
 * A replicated LUN's lifetime (create, start, destroy), its persisted state, and the list
 * of every replicated LUN the admin plane walks.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "repl_internal.h"
#include "tandem/config_repl.h"
#include "tandem/log.h"

static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct repl_lun **all;
static size_t n_all;

const char *repl_role_name(enum repl_role r)
{
        return r == REPL_ROLE_PRIMARY ? "Primary" : "Secondary";
}

const char *repl_disk_name(enum repl_disk_state d)
{
        static const char *const names[] = {"Diskless", "Inconsistent", "Outdated", "UpToDate",
                                            "DUnknown"};
        return (unsigned)d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

const char *repl_conn_name(enum repl_conn_state c)
{
        static const char *const names[] = {"StandAlone",  "Connecting", "Connected",
                                            "SyncSource",  "SyncTarget", "VerifySource",
                                            "VerifyTarget"};
        return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

void repl_set_error(struct repl_lun *r, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->last_error, sizeof(r->last_error), fmt, ap);
        va_end(ap);
        log_warn("replication %s lun %llu: %s", r->iqn, (unsigned long long)r->lun_id,
                 r->last_error);
}

int repl_persist(struct repl_lun *r)
{
        int rc = repl_md_put_super(r->md, &r->sb);
        if (rc < 0)
                log_err("replication %s lun %llu: cannot write metadata %s: %s", r->iqn,
                        (unsigned long long)r->lun_id, r->md_path, strerror(-rc));
        return rc;
}

void repl_side_self(struct repl_lun *r, struct repl_side *s)
{
        *s = (struct repl_side){.gen = r->sb.gen,
                                .disk = r->sb.disk,
                                .role = r->sb.role,
                                .crashed_primary = r->crashed_primary,
                                .dirty_bits = repl_md_dirty_bits(r->md),
                                .promote_epoch = r->sb.promote_epoch,
                                .node_id = r->node_id,
                                .node_name = r->self_name,
                                .want_discard = r->want_discard};
}

/* ---- access (ALUA): each node is a target port group (id = node id) with one port ---- */

/* The peer's group as this node knows it (r->lock held). */
static uint8_t peer_access(const struct repl_lun *r)
{
        if (!r->link_up || !r->peer.known)
                return TDM_ACCESS_UNAVAILABLE;
        return r->peer.side.role == REPL_ROLE_PRIMARY ? TDM_ACCESS_ACTIVE : TDM_ACCESS_STANDBY;
}

/*
 * Shared ports (a floating portal IP): one group and port, the same on both nodes, so an
 * initiator that follows the IP meets the port it knew. Per node: each node's group.
 */
void repl_publish_access(struct repl_lun *r)
{
        bool serving = r->sb.role == REPL_ROLE_PRIMARY && !r->quiesced && !r->demoting;
        uint8_t local = serving     ? TDM_ACCESS_ACTIVE
                        : r->moving ? TDM_ACCESS_TRANSITIONING /* SET TARGET PORT GROUPS */
                                    : TDM_ACCESS_STANDBY;
        struct tdm_access a = {.local_state = local,
                               .local_id = 1,
                               .continued = r->continued,
                               .explicit_alua = r->cfg.alua_explicit && r->cfg.ports_per_node};
        if (r->cfg.ports_per_node) {
                a.local_id = (uint16_t)r->node_id;
                a.peer_id = (uint16_t)r->peer_id;
                a.peer_state = peer_access(r);
        }
        tdm_medium_set_access(&r->medium, &a);
}

static int endpoints(struct repl_lun *r, const struct tdm_repl_cfg *c, char *err, size_t errlen)
{
        const struct tdm_repl_node *self = tdm_repl_local_node(c, r->node_id);
        const struct tdm_repl_node *peer = tdm_repl_peer_node(c, r->node_id);
        if (!self || !peer) {
                snprintf(err, errlen, "replication.nodes: node %u and one peer are needed",
                         r->node_id);
                return -EINVAL;
        }
        r->peer_id = peer->id;
        snprintf(r->self_name, sizeof(r->self_name), "%s", self->name);
        snprintf(r->peer_name, sizeof(r->peer_name), "%s", peer->name);
        if (tdm_repl_node_endpoint(c, self, r->listen_host, sizeof(r->listen_host),
                                   &r->listen_port) < 0 ||
            tdm_repl_node_endpoint(c, peer, r->peer_host, sizeof(r->peer_host), &r->peer_port) <
                0) {
                snprintf(err, errlen, "replication.nodes: bad address");
                return -EINVAL;
        }
        return 0;
}

static void md_path_for(struct repl_lun *r, const char *state_dir)
{
        if (r->cfg.metadata[0])
                snprintf(r->md_path, sizeof(r->md_path), "%s", r->cfg.metadata);
        else
                snprintf(r->md_path, sizeof(r->md_path), "%s/repl-%s.md", state_dir, r->naa);
}

static void lun_init_locks(struct repl_lun *r)
{
        pthread_mutex_init(&r->lock, NULL);
        pthread_cond_init(&r->cond, NULL);
        pthread_mutex_init(&r->send_lock, NULL);
        pthread_cond_init(&r->out_cond, NULL);
        pthread_mutex_init(&r->ctl_send_lock, NULL);
}

static void lun_free(struct repl_lun *r)
{
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->send_lock);
        pthread_cond_destroy(&r->out_cond);
        pthread_mutex_destroy(&r->ctl_send_lock);
        tdm_medium_fini(&r->medium);
        free(r);
}

static int data_flush(void *arg)
{
        struct repl_lun *r = arg;
        return tdm_medium_flush(r->local);
}

static int open_metadata(struct repl_lun *r, char *err, size_t errlen)
{
        bool crashed = false;
        int rc = repl_md_open(r->md_path, r->size_bytes, r->node_id, r->peer_id, true, &r->md,
                              &crashed, err, errlen);
        if (rc < 0)
                return rc;
        repl_md_set_data_flush(r->md, data_flush, r);
        repl_md_get_super(r->md, &r->sb);
        r->crashed_primary = crashed;
        if (crashed)
                log_warn("replication %s lun %llu: this node was Primary and did not shut down "
                         "cleanly; the extents it was writing are marked out of sync",
                         r->iqn, (unsigned long long)r->lun_id);
        /* Every start is as Secondary: the admin or the cluster manager promotes. */
        r->sb.role = REPL_ROLE_SECONDARY;
        r->sb.primary_active = false;
        return repl_persist(r);
}

int repl_lun_create(struct tdm_medium *local, const struct tdm_lun_cfg *cfg, const char *iqn,
                    uint32_t node_id, const char *state_dir, struct repl_lun **out, char *err,
                    size_t errlen)
{
        struct repl_lun *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        snprintf(r->iqn, sizeof(r->iqn), "%s", iqn);
        r->lun_id = cfg->lun;
        snprintf(r->naa, sizeof(r->naa), "%s", cfg->naa);
        snprintf(r->serial, sizeof(r->serial), "%s", cfg->serial);
        r->cfg = cfg->repl;
        r->node_id = node_id;
        r->block_size = cfg->block_size;
        r->size_bytes = tdm_medium_size(local) - tdm_medium_size(local) % cfg->block_size;
        r->listen_fd = r->data_fd = r->ctl_fd = -1;
        r->want_connect = true;
        r->next_seq = 1;
        lun_init_locks(r);
        tdm_medium_init(&r->medium, &repl_medium_ops, tdm_medium_size(local));
        int rc = endpoints(r, &cfg->repl, err, errlen);
        if (rc == 0) {
                md_path_for(r, state_dir);
                rc = open_metadata(r, err, errlen);
        }
        if (rc < 0) {
                if (r->md)
                        repl_md_close(r->md);
                lun_free(r);
                return rc;
        }
        r->local = local;
        pthread_mutex_lock(&r->lock);
        repl_publish_access(r);
        pthread_mutex_unlock(&r->lock);
        *out = r;
        return 0;
}

static int list_add(struct repl_lun *r)
{
        pthread_mutex_lock(&all_lock);
        struct repl_lun **p = realloc(all, (n_all + 1) * sizeof(*p));
        if (!p) {
                pthread_mutex_unlock(&all_lock);
                return -ENOMEM;
        }
        all = p;
        all[n_all++] = r;
        pthread_mutex_unlock(&all_lock);
        return 0;
}

static void list_del(struct repl_lun *r)
{
        pthread_mutex_lock(&all_lock);
        for (size_t i = 0; i < n_all; i++) {
                if (all[i] == r) {
                        all[i] = all[--n_all];
                        break;
                }
        }
        if (n_all == 0) {
                free(all);
                all = NULL;
        }
        pthread_mutex_unlock(&all_lock);
}

int repl_lun_start(struct repl_lun *r)
{
        static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
        pthread_once(&handler_once, repl_outdate_handler_install);
        int rc = list_add(r);
        if (rc < 0)
                return rc;
        rc = -pthread_create(&r->manager, NULL, repl_manager_main, r);
        if (rc < 0) {
                list_del(r);
                return rc;
        }
        r->manager_running = true;
        log_notice("replication %s lun %llu: node %u (%s) listening on %s:%u, peer %u (%s) at "
                   "%s:%u",
                   r->iqn, (unsigned long long)r->lun_id, r->node_id, r->self_name, r->listen_host,
                   r->listen_port, r->peer_id, r->peer_name, r->peer_host, r->peer_port);
        return 0;
}

/* Stops the manager and the connection; writes after this stay local (bits set). */
static void lun_quiesce(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        r->stopping = true;
        r->want_connect = false;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        repl_disconnect(r, "shutting down");
        if (r->manager_running) {
                pthread_join(r->manager, NULL);
                r->manager_running = false;
        }
}

struct tdm_medium *repl_lun_medium(struct repl_lun *r)
{
        return &r->medium;
}

struct tdm_medium *repl_lun_local(struct repl_lun *r)
{
        return r->local;
}

struct repl_lun *repl_lun_from_medium(struct tdm_medium *m)
{
        return m && m->ops == &repl_medium_ops ? (struct repl_lun *)m : NULL;
}

void repl_lun_stop(struct repl_lun *r)
{
        if (!r || r->stop_done)
                return;
        pthread_mutex_lock(&r->lock);
        r->quiesced = true; /* no new command: NOT READY, like a Secondary */
        repl_publish_access(r);
        pthread_mutex_unlock(&r->lock);
        r->stopped = true; /* a change that still comes fails */
        repl_stpg_wait_idle(r);
        repl_forward_wait_idle(r);
        if (!repl_writes_drained(r, r->cfg.timeout_ms + TDM_CLUSTER_IO_HOLD_MAX_MS))
                log_warn("replication %s lun %llu: changes still in flight at stop", r->iqn,
                         (unsigned long long)r->lun_id);
        lun_quiesce(r);
        list_del(r);
        if (r->listen_fd >= 0)
                close(r->listen_fd);
        pthread_mutex_lock(&r->lock);
        r->sb.role = REPL_ROLE_SECONDARY;
        r->sb.primary_active = false;
        repl_persist(r);
        pthread_mutex_unlock(&r->lock);
        int rc = repl_md_close(r->md);
        if (rc < 0)
                log_err("replication %s lun %llu: closing metadata: %s", r->iqn,
                        (unsigned long long)r->lun_id, strerror(-rc));
        r->md = NULL;
        r->stop_done = true;
}

/* The medium's end (the LUN's last reference): stops first if nobody did. */
void repl_lun_free(struct repl_lun *r)
{
        repl_lun_stop(r);
        tdm_medium_destroy(r->local);
        lun_free(r);
}

/* Finds a started replicated LUN; the caller holds all_lock. */
static struct repl_lun *find_locked(const char *iqn, uint64_t lun)
{
        for (size_t i = 0; i < n_all; i++)
                if (all[i]->lun_id == lun && tdm_iscsi_name_equal(all[i]->iqn, iqn))
                        return all[i];
        return NULL;
}

int repl_with_lun(const char *iqn, uint64_t lun, char *err, size_t errlen,
                  int (*fn)(struct repl_lun *r, void *arg, char *err, size_t errlen), void *arg)
{
        pthread_mutex_lock(&all_lock);
        struct repl_lun *r = find_locked(iqn, lun);
        int rc;
        if (!r) {
                snprintf(err, errlen, "lun: %s lun %llu is not a replicated LUN", iqn,
                         (unsigned long long)lun);
                rc = -ENOENT;
        } else {
                rc = fn(r, arg, err, errlen);
        }
        pthread_mutex_unlock(&all_lock);
        return rc;
}

int repl_with_naa(const char *naa, char *err, size_t errlen,
                  int (*fn)(struct repl_lun *r, void *arg, char *err, size_t errlen), void *arg)
{
        pthread_mutex_lock(&all_lock);
        struct repl_lun *r = NULL;
        for (size_t i = 0; i < n_all && !r; i++)
                if (strcasecmp(all[i]->naa, naa) == 0)
                        r = all[i];
        int rc = r ? fn(r, arg, err, errlen) : -ENOENT;
        if (!r)
                snprintf(err, errlen, "no replicated LUN with naa %s", naa);
        pthread_mutex_unlock(&all_lock);
        return rc;
}

static void status_fill(struct repl_lun *r, struct repl_status *st)
{
        memset(st, 0, sizeof(*st));
        snprintf(st->iqn, sizeof(st->iqn), "%s", r->iqn);
        st->lun = r->lun_id;
        snprintf(st->naa, sizeof(st->naa), "%s", r->naa);
        st->role = r->sb.role;
        st->disk = r->sb.disk;
        st->peer_disk = r->sb.peer_disk;
        st->conn = r->conn;
        st->node_id = r->node_id;
        st->peer_node_id = r->peer_id;
        snprintf(st->peer_name, sizeof(st->peer_name), "%s", r->peer_name);
        snprintf(st->peer_address, sizeof(st->peer_address), "%s:%u", r->peer_host, r->peer_port);
        st->size_bytes = r->size_bytes;
        st->out_of_sync_bytes = repl_md_dirty_bits(r->md) << REPL_MD_BIT_SHIFT;
        if (st->out_of_sync_bytes > r->size_bytes)
                st->out_of_sync_bytes = r->size_bytes;
        st->sync_total_bytes = r->sync_total;
        st->sync_done_bytes = r->sync_done;
        st->sync_rate_bps = r->sync_rate_bps;
        uint64_t left = r->sync_total > r->sync_done ? r->sync_total - r->sync_done : 0;
        st->sync_eta_s = r->sync_rate_bps ? left / r->sync_rate_bps : 0;
        st->sync_paused = r->sync_paused;
        st->verify_oos_bytes = r->verify_oos;
        st->split_brain = r->split_brain;
        snprintf(st->last_error, sizeof(st->last_error), "%s", r->last_error);
        st->gen_current = r->sb.gen.current;
        st->gen_bitmap = r->sb.gen.bitmap;
        st->gen_history[0] = r->sb.gen.history[0];
        st->gen_history[1] = r->sb.gen.history[1];
        st->writes_replicated = atomic_load(&r->writes_replicated);
        st->resync_bytes_sent = r->resync_sent;
        st->resync_bytes_received = r->resync_received;
        st->promotions = r->promotions;
        st->promote_epoch = r->sb.promote_epoch;
}

void repl_for_each_status(void (*cb)(void *arg, const struct repl_status *st), void *arg)
{
        pthread_mutex_lock(&all_lock);
        for (size_t i = 0; i < n_all; i++) {
                struct repl_status st;
                pthread_mutex_lock(&all[i]->lock);
                status_fill(all[i], &st);
                pthread_mutex_unlock(&all[i]->lock);
                cb(arg, &st);
        }
        pthread_mutex_unlock(&all_lock);
}

bool repl_writes_drained(struct repl_lun *r, unsigned ms)
{
        for (unsigned waited = 0;; waited += 10) {
                bool busy = atomic_load(&r->io_active) != 0;
                if (!busy)
                        return true;
                if (waited >= ms)
                        return false;
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

void repl_quiesce_all(void)
{
        pthread_mutex_lock(&all_lock);
        /* A Primary going down answers no more writes it could not mirror: new commands get
         * NOT READY (standby), those in flight get the peer's ack, then the links close. */
        for (size_t i = 0; i < n_all; i++) {
                pthread_mutex_lock(&all[i]->lock);
                all[i]->quiesced = true;
                repl_publish_access(all[i]);
                pthread_mutex_unlock(&all[i]->lock);
        }
        for (size_t i = 0; i < n_all; i++)
                if (!repl_writes_drained(all[i], all[i]->cfg.timeout_ms))
                        log_warn("replication %s lun %llu: writes still waiting for the peer at "
                                 "shutdown",
                                 all[i]->iqn, (unsigned long long)all[i]->lun_id);
        for (size_t i = 0; i < n_all; i++)
                lun_quiesce(all[i]);
        pthread_mutex_unlock(&all_lock);
}
