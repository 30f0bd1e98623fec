/*
 * Command execution: table lookup, LUN presence, unit attentions, reserved CDB bits,
 * then the handler; the result becomes status and sense in exactly one place.
 */
#include <errno.h>

#include "scsi/scsi_internal.h"

static void task_reset_result(struct scsi_task *task)
{
        scsi_task_release(task);
        task->status = SCSI_STATUS_GOOD;
        task->sense_len = 0;
        task->reason = SCSI_OK;
        task->field = (struct scsi_field_ptr){0};
        task->info = 0;
        task->info_valid = false;
        task->xfer_len = 0;
}

/* An opcode we know with a service action we do not: the SA field is invalid. */
static enum scsi_reason unsupported_command(struct scsi_task *task)
{
        if (scsi_opcode_has_service_actions(task->cdb[0]))
                return scsi_bad_cdb_field(task, 1, 4);
        return SR_INVALID_OPCODE;
}

/* Checks of the command against the state of the LUN: attentions, reservation, write protect. */
static enum scsi_reason task_admit(struct scsi_task *task, const struct scsi_opcode_entry *e)
{
        bool standby = atomic_load_explicit(&task->lun->standby, memory_order_acquire);
        /* This node's port group changed state (promote, demote): every nexus hears of it. */
        if (scsi_alua_local_state(standby) != scsi_alua_published_local(task->lun))
                scsi_alua_notice_change(task->lun);
        if (task->nexus && !(e->flags & SCSI_F_NO_UA)) {
                enum scsi_reason ua = scsi_ua_take(task->nexus, task->lun);
                if (ua != SCSI_OK)
                        return ua;
        }
        if (standby && !(e->flags & SCSI_F_OK_ON_STANDBY))
                return SR_NOT_READY_STANDBY;
        enum scsi_reason r = scsi_cdb_check_usage(task, e);
        if (r == SCSI_OK)
                r = scsi_reservation_check(task, e);
        if (r == SCSI_OK && (e->flags & SCSI_F_WRITES_MEDIUM) &&
            scsi_lun_write_protected(task->lun))
                r = SR_WRITE_PROTECTED;
        return r;
}

static enum scsi_reason task_dispatch(struct scsi_task *task, const struct scsi_opcode_entry *e)
{
        if (!e)
                return unsupported_command(task);
        enum scsi_reason r;
        if (task->lun)
                r = task_admit(task, e);
        else if (e->flags & SCSI_F_NEEDS_LUN)
                r = SR_LUN_NOT_SUPPORTED;
        else
                r = scsi_cdb_check_usage(task, e);
        return r != SCSI_OK ? r : e->handler(task);
}

/* Command and error counters; the transport records the latency (scsi_lun_record_latency). */
static void task_account(struct scsi_task *task, const struct scsi_opcode_entry *e)
{
        struct scsi_lun *lun = task->lun;
        if (!lun)
                return;
        uint32_t flags = e ? e->flags : 0;
        if (flags & SCSI_F_STAT_READ)
                atomic_fetch_add_explicit(&lun->stats.reads, 1, memory_order_relaxed);
        else if (flags & SCSI_F_STAT_WRITE)
                atomic_fetch_add_explicit(&lun->stats.writes, 1, memory_order_relaxed);
        else
                atomic_fetch_add_explicit(&lun->stats.other, 1, memory_order_relaxed);
        if (task->status != SCSI_STATUS_GOOD)
                atomic_fetch_add_explicit(&lun->stats.errors, 1, memory_order_relaxed);
}

/* A write the local medium took but a peer could not: the command fails all the same. */
static void task_apply_repl_error(struct scsi_task *task)
{
        int err = atomic_load(&task->repl_error);
        if (err == 0 || task->status != SCSI_STATUS_GOOD)
                return;
        scsi_task_release(task);
        /* -EAGAIN: held without quorum for too long; initiators retry a transition. */
        scsi_task_set_reason(task, err == -ENOSPC   ? SR_SPACE_ALLOC_FAILED
                                   : err == -EAGAIN ? SR_NOT_READY_TRANSITION
                                                    : SR_WRITE_ERROR);
        if (task->lun)
                atomic_fetch_add_explicit(&task->lun->stats.errors, 1, memory_order_relaxed);
}

void scsi_task_execute(struct scsi_task *task)
{
        task_reset_result(task);
        atomic_store(&task->repl_pending, 1);
        atomic_store(&task->repl_error, 0);
        task->async = false;
        const struct scsi_opcode_entry *e = scsi_opcode_lookup(task->cdb);
        enum scsi_reason r = task_dispatch(task, e);
        if (r != SCSI_OK) {
                /* A failed command returns no data. */
                scsi_task_release(task);
        }
        scsi_task_set_reason(task, r);
        task_account(task, e);
        /* Set before the last acknowledgement can arrive: only one side sees zero. */
        task->async = true;
        if (atomic_fetch_sub(&task->repl_pending, 1) == 1) {
                task->async = false;
                task_apply_repl_error(task);
        }
}

void scsi_task_repl_hold(struct scsi_task *task)
{
        atomic_fetch_add(&task->repl_pending, 1);
}

void scsi_task_repl_release(struct scsi_task *task, int error)
{
        if (error) {
                int none = 0;
                atomic_compare_exchange_strong(&task->repl_error, &none, error);
        }
        if (atomic_fetch_sub(&task->repl_pending, 1) != 1)
                return;
        task_apply_repl_error(task);
        task->async_done(task);
}
