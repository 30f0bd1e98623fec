/*
 * RESERVE(6/10) and RELEASE(6/10): the SPC-2 logical unit reservation. While a nexus holds
 * it, every other nexus gets RESERVATION CONFLICT except for the commands the table marks
 * SCSI_F_ALLOWED_UNDER_RESERVATION (pr.c checks). It ends with RELEASE from the holder, a LUN
 * or target reset, or the end of the holder's nexus (scsi_nexus_fini()).
 *
 * The holder is an initiator port name kept in the LU's SCSI_STATE_RESERVE record, so a
 * promoted peer knows it (not persistent: a restart of both nodes is a power on). Under
 * persistent reservations SPC-4 5.13.3 applies: a nexus that holds the persistent
 * reservation, or is registered under a registrants-only or all-registrants one, gets GOOD
 * and nothing changes; otherwise any registration makes both commands conflict.
 */
#include <stdio.h>
#include <string.h>

#include "pr_model.h"
#include "scsi_internal.h"
#include "tandem/log.h"
#include "tandem/scsi_nexus.h"

static const char *task_port(const struct scsi_task *task)
{
        return task->nexus ? task->nexus->port_name : "";
}

/*
 * RESERVE (reserve) or RELEASE: decides under state_lock, stores the holder it leads to, and
 * only then puts it in force (state_op_lock keeps other changes out meanwhile).
 */
static enum scsi_reason set_holder_blocking(struct scsi_task *task, bool reserve)
{
        struct scsi_lun *lun = task->lun;
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        const char *me = task_port(task);
        enum scsi_reason r = SCSI_OK;
        const char *holder = NULL; /* the new holder, when it changes ("": none) */
        pthread_mutex_lock(&priv->state_op_lock);
        pthread_mutex_lock(&priv->state_lock);
        enum pr_spc2_verdict v = pr_spc2_check(priv->pr, me);
        bool held = priv->spc2_holder[0] != '\0';
        bool mine = held && strcmp(priv->spc2_holder, me) == 0;
        if (v == PR_SPC2_CONFLICT)
                r = SR_RESERVATION_CONFLICT;
        else if (v == PR_SPC2_AS_SPC2 && reserve && held && !mine)
                r = SR_RESERVATION_CONFLICT;
        else if (v == PR_SPC2_AS_SPC2 && reserve)
                holder = mine ? NULL : me;
        else if (v == PR_SPC2_AS_SPC2 && mine)
                holder = ""; /* releasing another's reservation (or none) is a no-op */
        pthread_mutex_unlock(&priv->state_lock);
        if (holder &&
            scsi_lun_state_store(lun, SCSI_STATE_RESERVE, holder, strlen(holder), false) < 0) {
                r = SR_INTERNAL_ERROR;
                holder = NULL;
        }
        pthread_mutex_lock(&priv->state_lock);
        if (holder) {
                snprintf(priv->spc2_holder, sizeof(priv->spc2_holder), "%s", holder);
                priv->spc2_nexus = 0;
                scsi_lun_state_changed_locked(lun);
        }
        /* The session that holds it now, for scsi_nexus_fini (a relogin reserves again). */
        if (r == SCSI_OK && priv->spc2_holder[0] && strcmp(priv->spc2_holder, me) == 0)
                priv->spc2_nexus = task->nexus ? task->nexus->id : 0;
        pthread_mutex_unlock(&priv->state_lock);
        pthread_mutex_unlock(&priv->state_op_lock);
        return r;
}

static enum scsi_reason reserve_blocking(struct scsi_task *task)
{
        return set_holder_blocking(task, true);
}

static enum scsi_reason release_blocking(struct scsi_task *task)
{
        return set_holder_blocking(task, false);
}

/* Both change a state record: on the pool, where the store may wait for the peer. */
enum scsi_reason spc_reserve(struct scsi_task *task)
{
        return scsi_task_block(task, reserve_blocking);
}

enum scsi_reason spc_release(struct scsi_task *task)
{
        return scsi_task_block(task, release_blocking);
}

/*
 * Drops the holder (any, or name's when taken by nexus_id or known only from the record);
 * true if it did (the record is then to be stored). Any thread.
 */
static bool release_if(struct scsi_lun *lun, const char *name, uint64_t nexus_id)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        if (!scsi_lun_active(lun))
                return false; /* the active node's to end (its record says who holds it) */
        pthread_mutex_lock(&priv->state_lock);
        bool drop = priv->spc2_holder[0] &&
                    (!name || (strcmp(priv->spc2_holder, name) == 0 &&
                               (priv->spc2_nexus == 0 || priv->spc2_nexus == nexus_id)));
        if (drop) {
                priv->spc2_holder[0] = '\0';
                priv->spc2_nexus = 0;
                scsi_lun_state_changed_locked(lun);
        }
        pthread_mutex_unlock(&priv->state_lock);
        return drop;
}

bool scsi_reservation_release_all(struct scsi_lun *lun)
{
        return release_if(lun, NULL, 0);
}

/*
 * The nexus ends: its reservation ends with it, unless another session of the same port
 * took it since (a reinstated session reserves before the old one is gone).
 */
void scsi_nexus_fini(struct scsi_nexus *nx)
{
        if (!nx->target)
                return;
        for (uint64_t id = 0; id < SCSI_MAX_LUNS; id++) {
                struct scsi_lun *lun = scsi_target_get_lun(nx->target, id);
                if (!lun)
                        continue;
                if (release_if(lun, nx->port_name, nx->id)) /* no command waits for it */
                        scsi_lun_state_store_later(lun, 1u << SCSI_STATE_RESERVE);
                scsi_lun_put(lun);
        }
}

/* ---- the record: the holder's port name ---- */

size_t scsi_spc2_encode_locked(const struct scsi_lun *lun, uint8_t *buf, size_t cap)
{
        const struct scsi_lun_private *priv = scsi_lun_private(lun);
        size_t n = strnlen(priv->spc2_holder, SCSI_PORT_NAME_MAX - 1);
        if (n > cap)
                return 0;
        memcpy(buf, priv->spc2_holder, n);
        return n;
}

void scsi_spc2_reload(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        char name[SCSI_PORT_NAME_MAX];
        pthread_mutex_lock(&priv->state_op_lock);
        size_t len = scsi_lun_state_load(lun, SCSI_STATE_RESERVE, name, sizeof(name) - 1, NULL);
        if (len >= sizeof(name) || memchr(name, 0, len)) {
                log_err("LUN %llu: the RESERVE record is malformed: no reservation",
                        (unsigned long long)lun->id);
                len = 0;
        }
        name[len] = '\0';
        pthread_mutex_lock(&priv->state_lock);
        memcpy(priv->spc2_holder, name, len + 1);
        priv->spc2_nexus = 0;
        scsi_lun_state_changed_locked(lun);
        pthread_mutex_unlock(&priv->state_lock);
        pthread_mutex_unlock(&priv->state_op_lock);
}
