/*
 * The LU's reservation state as the data path sees it, and its records.
 *
 * The persistent reservation state, the RESERVE(6/10) holder and the attentions owed by name
 * live in memory under state_lock and in state records of the medium (SCSI_STATE_PR,
 * SCSI_STATE_RESERVE, SCSI_STATE_UA). A change is computed and stored under state_op_lock on
 * the pool, and only then made visible here, so nobody sees a state the peer lacks. The
 * admission check is one atomic load while the LUN has no reservation; with one, each nexus
 * recomputes what it is to the LUN once per change (an epoch), not per command.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pr_model.h"
#include "scsi_internal.h"
#include "tandem/log.h"

/* Epochs come from one counter, so a LUN created again at the same id never repeats one. */
static _Atomic uint64_t epoch_source = 1;

void scsi_lun_state_changed_locked(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        uint32_t s = priv->pr->type & SCSI_RES_PR_TYPE;
        if (priv->spc2_holder[0])
                s |= SCSI_RES_SPC2;
        if (priv->n_named_uas)
                s |= SCSI_RES_NAMED_UAS;
        atomic_store_explicit(&priv->res_summary, s, memory_order_release);
        atomic_store_explicit(&priv->state_epoch, atomic_fetch_add(&epoch_source, 1) + 1,
                              memory_order_release);
}

uint8_t scsi_nexus_res_flags(struct scsi_nexus *nx, struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        uint64_t id = lun->id;
        if (id >= SCSI_MAX_LUNS)
                return 0;
        uint64_t epoch = atomic_load_explicit(&priv->state_epoch, memory_order_acquire);
        if (nx->res_epoch[id] == epoch)
                return nx->res_flags[id];
        uint8_t f = 0;
        pthread_mutex_lock(&priv->state_lock);
        epoch = atomic_load_explicit(&priv->state_epoch, memory_order_relaxed);
        if (pr_find(priv->pr, nx->port_name) >= 0)
                f |= SCSI_NX_REGISTERED;
        if (pr_is_holder(priv->pr, nx->port_name))
                f |= SCSI_NX_PR_HOLDER;
        if (priv->spc2_holder[0] && strcmp(priv->spc2_holder, nx->port_name) == 0)
                f |= SCSI_NX_SPC2_HOLDER;
        if (scsi_ua_owed_locked(lun, nx->port_name))
                f |= SCSI_NX_UA_PENDING;
        pthread_mutex_unlock(&priv->state_lock);
        nx->res_epoch[id] = epoch;
        nx->res_flags[id] = f;
        return f;
}

/* PREVENT ALLOW with PREVENT 0; START STOP UNIT with START 1 and POWER CONDITION 0. */
static bool cdb_harmless(const uint8_t *cdb)
{
        switch (cdb[0]) {
        case 0x1e:
                return (cdb[4] & 0x03) == 0;
        case 0x1b:
                return (cdb[4] & 0x01) && (cdb[4] >> 4) == 0;
        default:
                return false;
        }
}

enum scsi_reason scsi_reservation_check(struct scsi_task *task, const struct scsi_opcode_entry *e)
{
        if (!task->lun)
                return SCSI_OK;
        struct scsi_lun_private *priv = scsi_lun_private(task->lun);
        uint32_t s = atomic_load_explicit(&priv->res_summary, memory_order_acquire);
        if (!(s & (SCSI_RES_PR_TYPE | SCSI_RES_SPC2)))
                return SCSI_OK;
        uint8_t f = task->nexus ? scsi_nexus_res_flags(task->nexus, task->lun) : 0;
        if ((s & SCSI_RES_SPC2) && !(f & SCSI_NX_SPC2_HOLDER) &&
            !(e->flags & SCSI_F_ALLOWED_UNDER_RESERVATION))
                return SR_RESERVATION_CONFLICT;
        if (pr_conflicts(s & SCSI_RES_PR_TYPE, f & SCSI_NX_REGISTERED, f & SCSI_NX_PR_HOLDER,
                         e->flags, cdb_harmless(task->cdb)))
                return SR_RESERVATION_CONFLICT;
        return SCSI_OK;
}

/* ---- records ---- */

static size_t record_cap(void)
{
        size_t a = pr_state_record_max(), b = scsi_ua_record_max();
        return a > b ? a : b;
}

int scsi_lun_state_store_locked(struct scsi_lun *lun, unsigned mask)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        size_t cap = record_cap();
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        int first = 0;
        for (unsigned id = 0; id < SCSI_STATE_IDS; id++) {
                if (!(mask & (1u << id)))
                        continue;
                size_t len = 0;
                bool persist = false;
                pthread_mutex_lock(&priv->state_lock);
                if (id == SCSI_STATE_PR) {
                        len = pr_state_encode(priv->pr, buf, cap);
                        persist = priv->pr->aptpl;
                } else if (id == SCSI_STATE_RESERVE) {
                        len = scsi_spc2_encode_locked(lun, buf, cap);
                } else if (id == SCSI_STATE_UA) {
                        len = scsi_ua_encode_locked(lun, buf, cap);
                } else if (id == SCSI_STATE_RESET) {
                        len = scsi_reset_encode_locked(lun, buf, cap);
                }
                pthread_mutex_unlock(&priv->state_lock);
                int rc = scsi_lun_state_store(lun, (enum scsi_state_id)id, buf, len, persist);
                if (rc < 0 && first == 0)
                        first = rc;
        }
        free(buf);
        return first;
}

struct store_job {
        struct net_work work;
        struct scsi_lun *lun;
        unsigned mask;
};

static void store_job_run(struct net_work *w)
{
        struct store_job *j = (struct store_job *)w;
        struct scsi_lun_private *priv = scsi_lun_private(j->lun);
        pthread_mutex_lock(&priv->state_op_lock);
        scsi_lun_state_store_locked(j->lun, j->mask);
        pthread_mutex_unlock(&priv->state_op_lock);
}

static void store_job_done(struct net_work *w)
{
        struct store_job *j = (struct store_job *)w;
        scsi_lun_put(j->lun);
        free(j);
}

/*
 * Each job stores what memory holds when it runs, under state_op_lock: whatever order the
 * pool runs them in, the last store is the latest state.
 */
void scsi_lun_state_store_later(struct scsi_lun *lun, unsigned mask)
{
        struct store_job *j = net_loop_current() ? calloc(1, sizeof(*j)) : NULL;
        if (!j) {
                struct scsi_lun_private *priv = scsi_lun_private(lun);
                pthread_mutex_lock(&priv->state_op_lock);
                scsi_lun_state_store_locked(lun, mask);
                pthread_mutex_unlock(&priv->state_op_lock);
                return;
        }
        scsi_lun_get(lun);
        j->lun = lun;
        j->mask = mask;
        j->work.run = store_job_run;
        j->work.done = store_job_done;
        net_pool_submit(&j->work);
}

void scsi_pr_reload(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        size_t cap = pr_state_record_max();
        uint8_t *buf = malloc(cap);
        struct pr_state *st = malloc(sizeof(*st));
        if (!buf || !st) {
                log_err("LUN %llu: out of memory reloading persistent reservations",
                        (unsigned long long)lun->id);
                free(buf);
                free(st);
                return;
        }
        pthread_mutex_lock(&priv->state_op_lock);
        size_t len = scsi_lun_state_load(lun, SCSI_STATE_PR, buf, cap, NULL);
        if (len > cap || !pr_state_decode(st, buf, len)) {
                /* Keep what we have: an unreadable record must not look like a CLEAR. */
                log_err("LUN %llu: the persistent reservation record is malformed (%zu bytes): "
                        "ignored",
                        (unsigned long long)lun->id, len);
        } else {
                pthread_mutex_lock(&priv->state_lock);
                struct pr_state *old = priv->pr;
                priv->pr = st;
                st = old;
                scsi_lun_state_changed_locked(lun);
                pthread_mutex_unlock(&priv->state_lock);
        }
        pthread_mutex_unlock(&priv->state_op_lock);
        free(st);
        free(buf);
}

int scsi_lun_state_init(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        priv->pr = calloc(1, sizeof(*priv->pr));
        priv->named_uas = calloc(SCSI_NAMED_UA_MAX, sizeof(*priv->named_uas));
        if (!priv->pr || !priv->named_uas) {
                free(priv->pr);
                free(priv->named_uas);
                return -ENOMEM;
        }
        pthread_mutex_init(&priv->state_op_lock, NULL);
        pthread_mutex_init(&priv->state_lock, NULL);
        pthread_mutex_init(&priv->caw_lock, NULL);
        pthread_mutex_lock(&priv->state_lock);
        scsi_lun_state_changed_locked(lun);
        pthread_mutex_unlock(&priv->state_lock);
        /* What the medium holds: this node's own (APTPL) or what the peer sent. */
        scsi_pr_reload(lun);
        scsi_spc2_reload(lun);
        scsi_ua_reload(lun);
        scsi_reset_reload(lun);
        return 0;
}

void scsi_lun_state_fini(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        if (!priv->pr)
                return;
        pthread_mutex_destroy(&priv->state_op_lock);
        pthread_mutex_destroy(&priv->state_lock);
        pthread_mutex_destroy(&priv->caw_lock);
        free(priv->pr);
        free(priv->named_uas);
        priv->pr = NULL;
}
