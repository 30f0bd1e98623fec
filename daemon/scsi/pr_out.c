/*
 * PERSISTENT RESERVE OUT (SPC-4 6.17). On the pool, under the LUN's state_op_lock: decode,
 * run the service action on a copy of the state (pr_model.c), store the copy as the PR
 * record (on a replicated LUN: on both nodes), and only then make it the state, owe its unit
 * attentions by name (stored too) and have the transport abort what PREEMPT AND ABORT
 * preempted. A failed store changes nothing here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pr_model.h"
#include "scsi_internal.h"
#include "tandem/log.h"

static _Atomic(scsi_pr_abort_fn) abort_hook;

void scsi_set_pr_abort(scsi_pr_abort_fn fn)
{
        atomic_store(&abort_hook, fn);
}

/* A relative target port of this LU: this node's or, on a pair, the peer's. */
static bool rtpi_known(const struct scsi_lun *lun, uint16_t rtpi)
{
        struct tdm_access a = tdm_medium_access(lun->medium);
        return rtpi != 0 && (rtpi == (a.local_id ? a.local_id : 1) || rtpi == a.peer_id);
}

static int store_state(struct scsi_lun *lun, const struct pr_state *st)
{
        size_t cap = pr_state_record_max();
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        size_t len = pr_state_encode(st, buf, cap);
        int rc = len ? scsi_lun_state_store(lun, SCSI_STATE_PR, buf, len, st->aptpl) : -EINVAL;
        free(buf);
        return rc;
}

/* The stored state becomes the LU's, with the attentions it owes. state_op_lock held. */
static void make_current(struct scsi_lun *lun, struct pr_state **st, const struct pr_effects *fx)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        pthread_mutex_lock(&priv->state_lock);
        struct pr_state *old = priv->pr;
        priv->pr = *st;
        *st = old;
        for (unsigned i = 0; i < fx->nuas; i++)
                scsi_ua_owe_locked(lun, fx->uas[i].name, fx->uas[i].reason);
        scsi_lun_state_changed_locked(lun);
        pthread_mutex_unlock(&priv->state_lock);
        if (fx->nuas && scsi_lun_state_store_locked(lun, 1u << SCSI_STATE_UA) < 0)
                log_warn("LUN %llu: the attentions owed after a reservation change are not "
                         "stored on every copy yet",
                         (unsigned long long)lun->id);
}

/* task: the command's own task (its transport aborts what it preempts), NULL when forwarded. */
static void abort_preempted(const struct scsi_task *task, const struct pr_effects *fx)
{
        scsi_pr_abort_fn fn = atomic_load(&abort_hook);
        if (!fn || !task || fx->naborts == 0)
                return;
        const char *names[PR_MAX_REGS];
        for (unsigned i = 0; i < fx->naborts; i++)
                names[i] = fx->aborts[i];
        fn(task->target, task->lun->id, names, fx->naborts, task);
}

enum scsi_reason scsi_pr_out_run(struct scsi_lun *lun, const char *me, const uint8_t *cdb,
                                 const uint8_t *param, uint32_t len, struct scsi_field_ptr *field,
                                 const struct scsi_task *task)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        struct pr_out_params p;
        enum scsi_reason r = pr_out_parse(cdb, param, len, &p, field);
        if (r != SCSI_OK)
                return r;
        bool rtpi_ok = p.sa != PR_OUT_REGISTER_MOVE || rtpi_known(lun, p.rtpi);
        struct pr_state *st = malloc(sizeof(*st));
        struct pr_effects *fx = malloc(sizeof(*fx));
        if (!st || !fx) {
                free(st);
                free(fx);
                return SR_INTERNAL_ERROR;
        }
        pthread_mutex_lock(&priv->state_op_lock);
        pthread_mutex_lock(&priv->state_lock);
        memcpy(st, priv->pr, sizeof(*st));
        pthread_mutex_unlock(&priv->state_lock);
        r = pr_out_apply(st, me, &p, rtpi_ok, fx, field);
        if (r == SCSI_OK && fx->changed) {
                int rc = store_state(lun, st);
                if (rc < 0) {
                        log_warn("LUN %llu: storing the persistent reservation state for %s: %s",
                                 (unsigned long long)lun->id, me, strerror(-rc));
                        r = scsi_io_reason(rc, true);
                } else {
                        make_current(lun, &st, fx);
                }
        }
        pthread_mutex_unlock(&priv->state_op_lock);
        if (r == SCSI_OK)
                abort_preempted(task, fx);
        free(st);
        free(fx);
        return r;
}

/* A node whose group does not serve has the serving node run it (per_node ALUA ports:
 * an initiator registers on every path, the standby ones too). */
static enum scsi_reason pr_out_blocking(struct scsi_task *task)
{
        if (!scsi_lun_active(task->lun))
                return scsi_forward(task);
        const char *me = task->nexus ? task->nexus->port_name : "";
        return scsi_pr_out_run(task->lun, me, task->cdb, task->data_out, task->data_out_len,
                               &task->field, task);
}

enum scsi_reason spc_pr_out(struct scsi_task *task)
{
        task->xfer_len = get_be32(task->cdb + 5);
        return scsi_task_block(task, pr_out_blocking);
}
