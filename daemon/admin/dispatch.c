/*
 * Admin request dispatch: decode an AdminRequest, run it against the registry (or
 * gather status / statistics), encode the AdminResponse. Runs on the control thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin_ipc.h"
#include "tandem/cluster.h"
#include "tandem/registry.h"
#include "tandem/repl.h"
#include "tandem/session_info.h"

typedef Tandem__Admin__AdminRequest Request;
typedef Tandem__Admin__AdminResponse Response;

static struct {
        char instance[64];
        struct timespec started;
} ident = {.instance = "default"};

void admin_dispatch_set_identity(const char *instance)
{
        snprintf(ident.instance, sizeof(ident.instance), "%s",
                 instance && *instance ? instance : "default");
        clock_gettime(CLOCK_MONOTONIC, &ident.started);
}

/* ---------------------------------------------------------------- allocation */

/* Everything a response points to is allocated here and freed at once after packing. */
struct arena {
        void **ptrs;
        size_t n, cap;
        bool failed;
};

static void *arena_alloc(struct arena *a, size_t size)
{
        if (a->failed)
                return NULL;
        if (a->n == a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 64;
                void **p = realloc(a->ptrs, cap * sizeof(*p));
                if (!p) {
                        a->failed = true;
                        return NULL;
                }
                a->ptrs = p;
                a->cap = cap;
        }
        void *m = calloc(1, size ? size : 1);
        if (!m) {
                a->failed = true;
                return NULL;
        }
        a->ptrs[a->n++] = m;
        return m;
}

static char *arena_strdup(struct arena *a, const char *s)
{
        size_t n = strlen(s) + 1;
        char *d = arena_alloc(a, n);
        if (d)
                memcpy(d, s, n);
        return d;
}

static void arena_free(struct arena *a)
{
        for (size_t i = 0; i < a->n; i++)
                free(a->ptrs[i]);
        free(a->ptrs);
}

__attribute__((format(printf, 4, 5))) static void set_error(struct arena *a, Response *r, int rc,
                                                            const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        r->ok = false;
        r->errno_value = rc < 0 ? -rc : rc;
        r->error = arena_strdup(a, msg);
}

/* Result of a registry call: ok, or the error text it produced. */
static void set_result(struct arena *a, Response *r, int rc, const char *err)
{
        if (rc == 0) {
                r->ok = true;
                return;
        }
        set_error(a, r, rc, "%s", err[0] ? err : strerror(-rc));
}

/* ---------------------------------------------------------------- helpers */

static bool copy_field(struct arena *a, Response *r, char *dst, size_t dstlen, const char *src,
                       const char *field)
{
        if (strlen(src) >= dstlen) {
                set_error(a, r, -EINVAL, "%s: too long (at most %zu characters)", field,
                          dstlen - 1);
                return false;
        }
        memcpy(dst, src, strlen(src) + 1);
        return true;
}

static bool need_iqn(struct arena *a, Response *r, const char *iqn)
{
        if (iqn && *iqn)
                return true;
        set_error(a, r, -EINVAL, "iqn: missing (required)");
        return false;
}

/* Session rows, growing the buffer until the snapshot fits. */
static struct iscsi_session_info *sessions_get(size_t *n_out)
{
        size_t cap = 64;
        for (int tries = 0; tries < 4; tries++) {
                struct iscsi_session_info *s = calloc(cap, sizeof(*s));
                if (!s)
                        break;
                size_t n = iscsi_sessions_snapshot(s, cap);
                if (n <= cap) {
                        *n_out = n;
                        return s;
                }
                free(s);
                cap = n + 16;
        }
        *n_out = 0;
        return NULL;
}

/* ---------------------------------------------------------------- replication */

void admin_repl_status_to_pb(const struct repl_status *st, Tandem__Admin__ReplLunStatus *m)
{
        tandem__admin__repl_lun_status__init(m);
        m->iqn = (char *)st->iqn;
        m->lun = (uint32_t)st->lun;
        m->naa = (char *)st->naa;
        m->role = (char *)repl_role_name(st->role);
        m->disk = (char *)repl_disk_name(st->disk);
        m->peer_disk = (char *)repl_disk_name(st->peer_disk);
        m->connection = (char *)repl_conn_name(st->conn);
        m->node_id = st->node_id;
        m->peer_node_id = st->peer_node_id;
        m->peer_name = (char *)st->peer_name;
        m->peer_address = (char *)st->peer_address;
        m->size_bytes = st->size_bytes;
        m->out_of_sync_bytes = st->out_of_sync_bytes;
        m->sync_total_bytes = st->sync_total_bytes;
        m->sync_done_bytes = st->sync_done_bytes;
        m->sync_rate_bps = st->sync_rate_bps;
        m->sync_eta_s = st->sync_eta_s;
        m->sync_paused = st->sync_paused;
        m->verify_oos_bytes = st->verify_oos_bytes;
        m->split_brain = st->split_brain;
        m->last_error = (char *)st->last_error;
        m->gen_current = st->gen_current;
        m->gen_bitmap = st->gen_bitmap;
        m->gen_history = (uint64_t *)st->gen_history;
        m->n_gen_history = sizeof(st->gen_history) / sizeof(st->gen_history[0]);
        m->writes_replicated = st->writes_replicated;
        m->resync_bytes_sent = st->resync_bytes_sent;
        m->resync_bytes_received = st->resync_bytes_received;
}

/* Rows gathered from repl_for_each_status (the filter: iqn NULL = every LUN). */
struct repl_rows {
        struct arena *a;
        const char *iqn;
        uint64_t lun;
        Tandem__Admin__ReplLunStatus **rows;
        size_t n, cap;
};

static void repl_row(void *arg, const struct repl_status *st)
{
        struct repl_rows *c = arg;
        if (c->iqn && (!tdm_iscsi_name_equal(st->iqn, c->iqn) || st->lun != c->lun))
                return;
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 16;
                void *p = realloc(c->rows, cap * sizeof(*c->rows));
                if (!p) {
                        c->a->failed = true;
                        return;
                }
                c->rows = p;
                c->cap = cap;
        }
        /* The callback's struct is not ours to keep: the message points into a copy. */
        struct repl_status *copy = arena_alloc(c->a, sizeof(*copy));
        Tandem__Admin__ReplLunStatus *m = arena_alloc(c->a, sizeof(*m));
        if (!copy || !m)
                return;
        *copy = *st;
        copy->iqn[sizeof(copy->iqn) - 1] = copy->naa[sizeof(copy->naa) - 1] = '\0';
        copy->peer_name[sizeof(copy->peer_name) - 1] = '\0';
        copy->peer_address[sizeof(copy->peer_address) - 1] = '\0';
        copy->last_error[sizeof(copy->last_error) - 1] = '\0';
        admin_repl_status_to_pb(copy, m);
        c->rows[c->n++] = m;
}

static void fill_repl_status(struct arena *a, Response *r, const char *iqn, uint64_t lun)
{
        Tandem__Admin__ReplStatus *rs = arena_alloc(a, sizeof(*rs));
        if (!rs)
                return;
        tandem__admin__repl_status__init(rs);
        struct repl_rows c = {.a = a, .iqn = iqn, .lun = lun};
        repl_for_each_status(repl_row, &c);
        rs->luns = arena_alloc(a, c.n * sizeof(*rs->luns));
        if (rs->luns && c.n)
                memcpy(rs->luns, c.rows, c.n * sizeof(*rs->luns));
        rs->n_luns = rs->luns ? c.n : 0;
        free(c.rows);
        r->repl_status = rs;
}

/* The configured, replicated LUN `lun` of target `iqn`, or an error naming what is wrong. */
static bool repl_lun_known(struct arena *a, Response *r, const char *iqn, uint32_t lun)
{
        if (!need_iqn(a, r, iqn))
                return false;
        if (lun > TDM_LUN_ID_MAX) {
                set_error(a, r, -EINVAL, "lun: must be 0..%d, got %u", TDM_LUN_ID_MAX, lun);
                return false;
        }
        struct tdm_config *cfg = (struct tdm_config *)tdm_registry_config();
        struct tdm_target_cfg *t = tdm_config_find_target(cfg, iqn);
        if (!t) {
                set_error(a, r, -ENOENT, "iqn: no target \"%s\"", iqn);
                return false;
        }
        const struct tdm_lun_cfg *l = tdm_config_find_lun(t, lun);
        if (!l) {
                set_error(a, r, -ENOENT, "lun: no LUN %u in %s", lun, t->iqn);
                return false;
        }
        if (!l->repl.enabled) {
                set_error(a, r, -EINVAL,
                          "lun: LUN %u of %s is not replicated (no replication group in the "
                          "configuration)",
                          lun, t->iqn);
                return false;
        }
        return true;
}

static void do_repl_status(struct arena *a, Response *r, const Tandem__Admin__ReplStatusRequest *m)
{
        const char *iqn = m->iqn && *m->iqn ? m->iqn : NULL;
        if (iqn && !repl_lun_known(a, r, iqn, m->lun))
                return;
        fill_repl_status(a, r, iqn, m->lun);
        r->ok = true;
}

/* The replication operations: each is one repl_admin_*() call on a known replicated LUN. */
static void do_repl_op(struct arena *a, Response *r, const Request *q)
{
        char err[512] = "";
        const Tandem__Admin__ReplLun *l = NULL;
        const char *iqn = NULL;
        uint32_t lun = 0;
        switch (q->op_case) {
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_PROMOTE:
                iqn = q->repl_promote->iqn;
                lun = q->repl_promote->lun;
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_VERIFY:
                iqn = q->repl_verify->iqn;
                lun = q->repl_verify->lun;
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESYNC_PAUSE:
                iqn = q->repl_resync_pause->iqn;
                lun = q->repl_resync_pause->lun;
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE:
                l = q->repl_demote;
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT:
                l = q->repl_connect;
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT:
                l = q->repl_disconnect;
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE:
                l = q->repl_invalidate;
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN:
                l = q->repl_resolve_split_brain;
                break;
        default: /* OP_REPL_SKIP_INITIAL_SYNC */
                l = q->repl_skip_initial_sync;
                break;
        }
        if (l) {
                iqn = l->iqn;
                lun = l->lun;
        }
        if (!repl_lun_known(a, r, iqn, lun))
                return;
        int rc;
        switch (q->op_case) {
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_PROMOTE:
                rc = repl_admin_promote(iqn, lun, q->repl_promote->force, err, sizeof(err));
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_VERIFY:
                rc = repl_admin_verify(iqn, lun, q->repl_verify->resync, err, sizeof(err));
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESYNC_PAUSE:
                rc = repl_admin_resync_pause(iqn, lun, q->repl_resync_pause->pause, err,
                                             sizeof(err));
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE:
                rc = repl_admin_demote(iqn, lun, err, sizeof(err));
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT:
                rc = repl_admin_connect(iqn, lun, err, sizeof(err));
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT:
                rc = repl_admin_disconnect(iqn, lun, err, sizeof(err));
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE:
                rc = repl_admin_invalidate(iqn, lun, err, sizeof(err));
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN:
                rc = repl_admin_resolve_split_brain(iqn, lun, err, sizeof(err));
                break;
        default:
                rc = repl_admin_skip_initial_sync(iqn, lun, err, sizeof(err));
                break;
        }
        set_result(a, r, rc, err);
}

/* ---------------------------------------------------------------- status */

static Tandem__Admin__LunInfo *lun_info(struct arena *a, struct scsi_target *st,
                                        const struct tdm_lun_cfg *l)
{
        Tandem__Admin__LunInfo *li = arena_alloc(a, sizeof(*li));
        if (!li)
                return NULL;
        tandem__admin__lun_info__init(li);
        li->lun = (uint32_t)l->lun;
        li->path = (char *)l->path;
        li->configured_size = l->size;
        li->block_size = l->block_size;
        li->thin = l->thin;
        li->direct = l->direct;
        li->naa = (char *)l->naa;
        li->serial = (char *)l->serial;
        li->wce = l->wce;
        li->readonly = l->readonly;
        li->physical_block_size = l->physical_block_size ? l->physical_block_size : l->block_size;
        struct scsi_lun *lun = st ? scsi_target_get_lun(st, l->lun) : NULL;
        if (lun) {
                li->online = true;
                li->size = atomic_load(&lun->num_blocks) * lun->block_size;
                li->wce = atomic_load(&lun->wce);
                li->physical_block_size = lun->block_size << lun->lbppb_exponent;
                scsi_lun_put(lun);
        }
        return li;
}

static Tandem__Admin__TargetInfo *target_info(struct arena *a, const struct tdm_target_cfg *t,
                                              const struct iscsi_session_info *s, size_t n_sessions)
{
        Tandem__Admin__TargetInfo *ti = arena_alloc(a, sizeof(*ti));
        if (!ti)
                return NULL;
        tandem__admin__target_info__init(ti);
        ti->iqn = (char *)t->iqn;
        ti->alias = (char *)t->alias;
        ti->tpgt = t->tpgt;
        ti->chap = t->chap.enabled;
        ti->mutual_chap = t->chap.enabled && t->chap.mutual;
        ti->chap_user = (char *)(t->chap.enabled ? t->chap.user : "");
        ti->acl = arena_alloc(a, t->n_acl * sizeof(char *));
        ti->luns = arena_alloc(a, t->n_luns * sizeof(*ti->luns));
        if (!ti->acl || !ti->luns)
                return NULL;
        for (size_t i = 0; i < t->n_acl; i++)
                ti->acl[ti->n_acl++] = (char *)t->acl[i];
        for (size_t i = 0; i < n_sessions; i++)
                if (tdm_iscsi_name_equal(s[i].target, t->iqn))
                        ti->sessions++;
        struct scsi_target *st = tdm_registry_get_target(t->iqn);
        for (size_t i = 0; i < t->n_luns; i++) {
                ti->luns[i] = lun_info(a, st, &t->luns[i]);
                if (!ti->luns[i])
                        break;
                ti->n_luns = i + 1;
        }
        if (st)
                scsi_target_put(st);
        return ti;
}

static Tandem__Admin__SessionInfo *session_info(struct arena *a, const struct iscsi_session_info *s)
{
        Tandem__Admin__SessionInfo *si = arena_alloc(a, sizeof(*si));
        uint8_t *isid = arena_alloc(a, sizeof(s->isid));
        if (!si || !isid)
                return NULL;
        tandem__admin__session_info__init(si);
        memcpy(isid, s->isid, sizeof(s->isid));
        si->isid.data = isid;
        si->isid.len = sizeof(s->isid);
        si->initiator = (char *)s->initiator;
        si->target = (char *)s->target;
        si->tsih = s->tsih;
        si->peer = (char *)s->peer;
        si->cid = s->cid;
        si->state = (char *)s->state;
        si->commands_in_flight = s->commands_in_flight;
        return si;
}

/* ---- cluster (issue 4): membership and quorum for the status ---- */
static Tandem__Admin__ClusterInfo *cluster_info(struct arena *a)
{
        Tandem__Admin__ClusterInfo *ci = arena_alloc(a, sizeof(*ci));
        struct cluster_status *cs = arena_alloc(a, sizeof(*cs));
        if (!ci || !cs)
                return NULL;
        tandem__admin__cluster_info__init(ci);
        cluster_get_status(cs);
        ci->enabled = cs->enabled;
        ci->quorate = cs->quorate;
        ci->members = cs->members;
        ci->n_members = cs->n_members;
        ci->node_id = cs->node_id;
        ci->cpg_connected = cs->cpg_connected;
        ci->quorum_connected = cs->quorum_connected;
        ci->group = cs->group;
        ci->corosync_node_id = cs->corosync_node_id;
        ci->last_error = cs->last_error;
        return ci;
}
/* ---- end cluster ---- */

/* Sessions rows are referenced by the response: the caller frees them after packing. */
static void do_status(struct arena *a, Response *r, struct iscsi_session_info **rows)
{
        const struct tdm_config *cfg = tdm_registry_config();
        Tandem__Admin__Status *st = arena_alloc(a, sizeof(*st));
        if (!st)
                return;
        tandem__admin__status__init(st);
        r->status = st;
        st->instance = ident.instance;
        st->version = TANDEM_VERSION;
        st->pid = (uint32_t)getpid();
        st->config_path = (char *)tdm_registry_config_path();
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        st->uptime_s = (uint64_t)(now.tv_sec - ident.started.tv_sec);
        st->listen = arena_alloc(a, cfg->n_listen * sizeof(char *));
        if (!st->listen)
                return;
        for (size_t i = 0; i < cfg->n_listen; i++)
                st->listen[st->n_listen++] = (char *)cfg->listen[i];
        st->discovery_chap = cfg->discovery_chap.enabled;
        st->discovery_mutual_chap = cfg->discovery_chap.enabled && cfg->discovery_chap.mutual;
        if (!(st->cluster = cluster_info(a))) /* cluster (issue 4) */
                return;

        size_t n_sessions = 0;
        *rows = sessions_get(&n_sessions);
        st->sessions = arena_alloc(a, n_sessions * sizeof(*st->sessions));
        st->targets = arena_alloc(a, cfg->n_targets * sizeof(*st->targets));
        if (!st->sessions || !st->targets)
                return;
        for (size_t i = 0; i < n_sessions; i++) {
                if (!(st->sessions[i] = session_info(a, &(*rows)[i])))
                        return;
                st->n_sessions = i + 1;
        }
        for (size_t i = 0; i < cfg->n_targets; i++) {
                if (!(st->targets[i] = target_info(a, &cfg->targets[i], *rows, n_sessions)))
                        return;
                st->n_targets = i + 1;
        }
        fill_repl_status(a, r, NULL, 0); /* the replication summary */
        r->ok = true;
}

/* ---------------------------------------------------------------- stats */

static Tandem__Admin__LunStats *lun_stats(struct arena *a, const char *iqn, struct scsi_lun *lun)
{
        Tandem__Admin__LunStats *ls = arena_alloc(a, sizeof(*ls));
        size_t nh = sizeof(lun->stats.lat_hist) / sizeof(lun->stats.lat_hist[0]);
        uint64_t *hist = arena_alloc(a, nh * sizeof(*hist));
        if (!ls || !hist)
                return NULL;
        tandem__admin__lun_stats__init(ls);
        const struct scsi_lun_stats *s = &lun->stats;
        ls->iqn = (char *)iqn;
        ls->lun = (uint32_t)lun->id;
        ls->reads = atomic_load(&s->reads);
        ls->writes = atomic_load(&s->writes);
        ls->other = atomic_load(&s->other);
        ls->read_bytes = atomic_load(&s->read_bytes);
        ls->write_bytes = atomic_load(&s->write_bytes);
        ls->errors = atomic_load(&s->errors);
        for (size_t i = 0; i < nh; i++)
                hist[i] = atomic_load(&s->lat_hist[i]);
        ls->latency_hist_us = hist;
        ls->n_latency_hist_us = nh;
        return ls;
}

static void do_stats(struct arena *a, Response *r, const Tandem__Admin__StatsRequest *req)
{
        const struct tdm_config *cfg = tdm_registry_config();
        const char *only = req && req->iqn && *req->iqn ? req->iqn : NULL;
        if (only && !tdm_config_find_target((struct tdm_config *)cfg, only)) {
                set_error(a, r, -ENOENT, "iqn: no target \"%s\"", only);
                return;
        }
        Tandem__Admin__Stats *stats = arena_alloc(a, sizeof(*stats));
        size_t total = 0;
        for (size_t i = 0; i < cfg->n_targets; i++)
                total += cfg->targets[i].n_luns;
        if (!stats)
                return;
        tandem__admin__stats__init(stats);
        stats->luns = arena_alloc(a, total * sizeof(*stats->luns));
        if (!stats->luns)
                return;
        r->stats = stats;
        for (size_t i = 0; i < cfg->n_targets; i++) {
                const struct tdm_target_cfg *t = &cfg->targets[i];
                if (only && !tdm_iscsi_name_equal(only, t->iqn))
                        continue;
                struct scsi_target *st = tdm_registry_get_target(t->iqn);
                for (size_t j = 0; st && j < t->n_luns; j++) {
                        struct scsi_lun *lun = scsi_target_get_lun(st, t->luns[j].lun);
                        if (!lun)
                                continue;
                        Tandem__Admin__LunStats *ls = lun_stats(a, t->iqn, lun);
                        scsi_lun_put(lun);
                        if (!ls)
                                break;
                        stats->luns[stats->n_luns++] = ls;
                }
                if (st)
                        scsi_target_put(st);
        }
        r->ok = true;
}

/* ---------------------------------------------------------------- operations */

static void do_lun_add(struct arena *a, Response *r, const Tandem__Admin__LunAdd *m)
{
        char err[512] = "";
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        if (!need_iqn(a, r, m->iqn))
                return;
        if (m->lun > TDM_LUN_ID_MAX) {
                set_error(a, r, -EINVAL, "lun: must be 0..%d, got %u", TDM_LUN_ID_MAX, m->lun);
                return;
        }
        l.lun = m->lun;
        if (!m->path || !*m->path) {
                set_error(a, r, -EINVAL, "path: missing (required)");
                return;
        }
        if (!copy_field(a, r, l.path, sizeof(l.path), m->path, "path"))
                return;
        l.size = m->size;
        l.thin = m->thin;
        l.direct = m->direct;
        l.readonly = m->readonly;
        if (m->block_size)
                l.block_size = m->block_size;
        l.physical_block_size = m->physical_block_size;
        if (m->wce != TANDEM__ADMIN__TOGGLE__TOGGLE_DEFAULT)
                l.wce = m->wce == TANDEM__ADMIN__TOGGLE__TOGGLE_ON;
        set_result(a, r, tdm_registry_lun_add(m->iqn, &l, err, sizeof(err)), err);
}

static void do_lun_resize(struct arena *a, Response *r, const Tandem__Admin__LunResize *m)
{
        char err[512] = "";
        if (!need_iqn(a, r, m->iqn))
                return;
        if (m->lun > TDM_LUN_ID_MAX) {
                set_error(a, r, -EINVAL, "lun: must be 0..%d, got %u", TDM_LUN_ID_MAX, m->lun);
                return;
        }
        /* Allocated first: a resize that happened is never reported as out of memory. */
        Tandem__Admin__LunResized *done = arena_alloc(a, sizeof(*done));
        if (!done)
                return;
        tandem__admin__lun_resized__init(done);
        int rc = tdm_registry_lun_resize(m->iqn, m->lun, m->size, &done->old_size, &done->new_size,
                                         err, sizeof(err));
        set_result(a, r, rc, err);
        if (rc == 0)
                r->lun_resized = done;
}

static void do_chap_set(struct arena *a, Response *r, const Tandem__Admin__ChapSet *m)
{
        char err[512] = "";
        bool has_iqn = m->iqn && *m->iqn;
        if (m->discovery == has_iqn) {
                set_error(a, r, -EINVAL,
                          m->discovery ? "iqn: not allowed with discovery"
                                       : "iqn: missing (required, or discovery)");
                return;
        }
        struct tdm_chap_cfg c = {0};
        c.enabled = m->user && *m->user;
        if (c.enabled &&
            (!copy_field(a, r, c.user, sizeof(c.user), m->user, "user") ||
             !copy_field(a, r, c.secret, sizeof(c.secret), m->secret ? m->secret : "", "secret")))
                return;
        c.mutual = c.enabled &&
                   ((m->mutual_user && *m->mutual_user) || (m->mutual_secret && *m->mutual_secret));
        if (c.mutual && (!copy_field(a, r, c.mutual_user, sizeof(c.mutual_user),
                                     m->mutual_user ? m->mutual_user : "", "mutual_user") ||
                         !copy_field(a, r, c.mutual_secret, sizeof(c.mutual_secret),
                                     m->mutual_secret ? m->mutual_secret : "", "mutual_secret")))
                return;
        set_result(a, r, tdm_registry_chap_set(has_iqn ? m->iqn : NULL, &c, err, sizeof(err)), err);
}

static void run(struct arena *a, const Request *q, Response *r, struct iscsi_session_info **rows)
{
        char err[512] = "";
        if (q->version > TANDEM__ADMIN__PROTOCOL_VERSION__PROTOCOL_VERSION_1) {
                set_error(a, r, -EPROTONOSUPPORT,
                          "version: request version %d is newer than this tandemd (%s) understands",
                          q->version, TANDEM_VERSION);
                return;
        }
        switch (q->op_case) {
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_ADD:
                if (need_iqn(a, r, q->target_add->iqn))
                        set_result(a, r,
                                   tdm_registry_target_add(q->target_add->iqn, err, sizeof(err)),
                                   err);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_TARGET_DEL:
                if (need_iqn(a, r, q->target_del->iqn))
                        set_result(a, r,
                                   tdm_registry_target_del(q->target_del->iqn, err, sizeof(err)),
                                   err);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_ADD:
                do_lun_add(a, r, q->lun_add);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_DEL:
                if (need_iqn(a, r, q->lun_del->iqn))
                        set_result(a, r,
                                   tdm_registry_lun_del(q->lun_del->iqn, q->lun_del->lun, err,
                                                        sizeof(err)),
                                   err);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_RESIZE:
                do_lun_resize(a, r, q->lun_resize);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_ADD:
                if (need_iqn(a, r, q->acl_add->iqn))
                        set_result(a, r,
                                   tdm_registry_acl_add(q->acl_add->iqn, q->acl_add->initiator, err,
                                                        sizeof(err)),
                                   err);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_ACL_DEL:
                if (need_iqn(a, r, q->acl_del->iqn))
                        set_result(a, r,
                                   tdm_registry_acl_del(q->acl_del->iqn, q->acl_del->initiator, err,
                                                        sizeof(err)),
                                   err);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_CHAP_SET:
                do_chap_set(a, r, q->chap_set);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_STATUS:
                do_status(a, r, rows);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_STATS:
                do_stats(a, r, q->stats);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_STATUS:
                do_repl_status(a, r, q->repl_status);
                break;
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_PROMOTE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DEMOTE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_CONNECT:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_DISCONNECT:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_VERIFY:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESYNC_PAUSE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_INVALIDATE:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_RESOLVE_SPLIT_BRAIN:
        case TANDEM__ADMIN__ADMIN_REQUEST__OP_REPL_SKIP_INITIAL_SYNC:
                do_repl_op(a, r, q);
                break;
        default:
                set_error(a, r, -EOPNOTSUPP, "request: no operation this tandemd (%s) knows",
                          TANDEM_VERSION);
                break;
        }
}

static int pack(const Response *r, uint8_t **out, size_t *out_len)
{
        size_t n = tandem__admin__admin_response__get_packed_size(r);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return -ENOMEM;
        *out_len = tandem__admin__admin_response__pack(r, buf);
        *out = buf;
        return 0;
}

int admin_dispatch(const uint8_t *req, size_t len, uint8_t **out, size_t *out_len)
{
        struct arena a = {0};
        struct iscsi_session_info *rows = NULL;
        Response r = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
        Request *q = tandem__admin__admin_request__unpack(NULL, len, req);
        if (!q)
                set_error(&a, &r, -EPROTO, "request: cannot decode (not a tandem.admin request)");
        else
                run(&a, q, &r, &rows);
        if (a.failed) {
                /* Never a half-filled success: report the shortage with a fixed message. */
                Response oom = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
                oom.errno_value = ENOMEM;
                oom.error = "tandemd: out of memory";
                r = oom;
        }
        int rc = pack(&r, out, out_len);
        if (q)
                tandem__admin__admin_request__free_unpacked(q, NULL);
        free(rows);
        arena_free(&a);
        return rc;
}
