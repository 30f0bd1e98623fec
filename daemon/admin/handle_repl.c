/*
 * Handlers of the replication operations: status of the replicated LUNs, and each
 * operation one repl_admin_*() call (include/tandem/repl.h) on a configured, replicated LUN.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admin_internal.h"
#include "tandem/registry.h"
#include "tandem/repl.h"

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
        m->promotions = st->promotions;
        m->promote_epoch = st->promote_epoch;
}

/* Rows gathered from repl_for_each_status (the filter: iqn NULL = every LUN). */
struct repl_rows {
        struct admin_reply *rep;
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
                        c->rep->failed = true;
                        return;
                }
                c->rows = p;
                c->cap = cap;
        }
        /* The callback's struct is not ours to keep: the message points into a copy. */
        struct repl_status *copy = admin_alloc(c->rep, sizeof(*copy));
        Tandem__Admin__ReplLunStatus *m = admin_alloc(c->rep, sizeof(*m));
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

void admin_fill_repl_status(struct admin_reply *rep, const char *iqn, uint64_t lun)
{
        Tandem__Admin__ReplStatus *rs = admin_alloc(rep, sizeof(*rs));
        if (!rs)
                return;
        tandem__admin__repl_status__init(rs);
        struct repl_rows c = {.rep = rep, .iqn = iqn, .lun = lun};
        repl_for_each_status(repl_row, &c);
        rs->luns = admin_alloc(rep, c.n * sizeof(*rs->luns));
        if (rs->luns && c.n)
                memcpy(rs->luns, c.rows, c.n * sizeof(*rs->luns));
        rs->n_luns = rs->luns ? c.n : 0;
        free(c.rows);
        rep->r.repl_status = rs;
}

/* The configured, replicated LUN `lun` of target `iqn`, or the reply says what is wrong. */
static bool repl_lun_known(struct admin_reply *rep, const char *iqn, uint32_t lun)
{
        struct tdm_config *cfg = (struct tdm_config *)tdm_registry_config();
        struct tdm_target_cfg *t = tdm_config_find_target(cfg, iqn);
        if (!t) {
                admin_fail(rep, -ENOENT, "iqn: no target \"%s\"", iqn);
                return false;
        }
        const struct tdm_lun_cfg *l = tdm_config_find_lun(t, lun);
        if (!l) {
                admin_fail(rep, -ENOENT, "lun: no LUN %u in %s", lun, t->iqn);
                return false;
        }
        if (!l->repl.enabled) {
                admin_fail(rep, -EINVAL,
                           "lun: LUN %u of %s is not replicated (no replication group in the "
                           "configuration)",
                           lun, t->iqn);
                return false;
        }
        return true;
}

void admin_repl_status(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__ReplStatusRequest *m = (const void *)request;
        const char *iqn = m->iqn && *m->iqn ? m->iqn : NULL;
        if (iqn && !repl_lun_known(rep, iqn, m->lun))
                return;
        admin_fill_repl_status(rep, iqn, m->lun);
        rep->r.ok = true;
}

void admin_repl_promote(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__ReplPromote *m = (const void *)request;
        char err[512] = "";
        if (repl_lun_known(rep, m->iqn, m->lun))
                admin_result(rep, repl_admin_promote(m->iqn, m->lun, m->force, err, sizeof(err)),
                             err);
}

void admin_repl_verify(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__ReplVerify *m = (const void *)request;
        char err[512] = "";
        if (repl_lun_known(rep, m->iqn, m->lun))
                admin_result(rep, repl_admin_verify(m->iqn, m->lun, m->resync, err, sizeof(err)),
                             err);
}

void admin_repl_resync_pause(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__ReplResyncPause *m = (const void *)request;
        char err[512] = "";
        if (repl_lun_known(rep, m->iqn, m->lun))
                admin_result(
                    rep, repl_admin_resync_pause(m->iqn, m->lun, m->pause, err, sizeof(err)), err);
}

/* The operations on one LUN that take nothing else (ReplLun): one repl_admin_NAME() each. */
#define REPL_LUN_HANDLER(name)                                                                     \
        void admin_repl_##name(struct admin_reply *rep, const ProtobufCMessage *request)           \
        {                                                                                          \
                const Tandem__Admin__ReplLun *m = (const void *)request;                           \
                char err[512] = "";                                                                \
                if (repl_lun_known(rep, m->iqn, m->lun))                                           \
                        admin_result(rep, repl_admin_##name(m->iqn, m->lun, err, sizeof(err)),     \
                                     err);                                                         \
        }
REPL_LUN_HANDLER(demote)
REPL_LUN_HANDLER(connect)
REPL_LUN_HANDLER(disconnect)
REPL_LUN_HANDLER(invalidate)
REPL_LUN_HANDLER(resolve_split_brain)
REPL_LUN_HANDLER(skip_initial_sync)
