/*
 * Command execution: table lookup, LUN presence, unit attentions, reserved CDB bits,
 * then the handler; the result becomes status and sense in exactly one place.
 */
#include <errno.h>

#include "scsi_internal.h"

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

/* This node's port group, as commands see it: refused per command class unless active. */
static enum scsi_reason access_check(const struct scsi_task *task,
                                     const struct scsi_opcode_entry *e)
{
        if (e->flags & SCSI_F_OK_ON_STANDBY)
                return SCSI_OK;
        switch (tdm_medium_access(task->lun->medium).local_state) {
        case TDM_ACCESS_ACTIVE:
                return SCSI_OK;
        case TDM_ACCESS_STANDBY:
                return SR_NOT_READY_STANDBY;
        case TDM_ACCESS_TRANSITIONING:
                return SR_NOT_READY_TRANSITION;
        default:
                return SR_NOT_READY_UNAVAILABLE;
        }
}

/*
 * Checks of the command against the state of the LUN: attentions, ALUA access, reserved CDB
 * bits, reservations (SPC-2 and persistent, pr.c), write protect.
 */
static enum scsi_reason task_admit(struct scsi_task *task, const struct scsi_opcode_entry *e)
{
        if (task->nexus && !(e->flags & SCSI_F_NO_UA)) {
                bool store = false;
                enum scsi_reason ua = scsi_ua_take(task->nexus, task->lun, &store);
                if (store) { /* owed by name: taken only once the record says so */
                        task->op_flags = (uint32_t)ua;
                        return scsi_task_block(task, scsi_ua_store_taken);
                }
                if (ua != SCSI_OK)
                        return ua;
        }
        enum scsi_reason r = access_check(task, e);
        if (r == SCSI_OK)
                r = scsi_cdb_check_usage(task, e);
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

/* Command and error counters; the latency is recorded when the task ends (nexus_stats.c). */
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

/* The result becomes status and sense; a failed command returns no data. */
static void task_settle(struct scsi_task *task, enum scsi_reason r)
{
        if (r != SCSI_OK)
                scsi_task_release(task);
        scsi_task_set_reason(task, r);
        task_account(task, task->entry);
}

void scsi_task_execute(struct scsi_task *task)
{
        task_reset_result(task);
        task->async = false;
        task->finished = false;
        task->in_execute = true;
        task->entry = scsi_opcode_lookup(task->cdb);
        enum scsi_reason r = task_dispatch(task, task->entry);
        task->in_execute = false;
        if (r == SCSI_PENDING) {
                if (!task->finished) {
                        task->async = true;
                        return;
                }
                r = task->pending_result;
        }
        task_settle(task, r);
}

void scsi_task_complete(struct scsi_task *task, enum scsi_reason r)
{
        if (task->in_execute) {
                /* Completed inline (a thread on no loop): execute returns the result. */
                task->finished = true;
                task->pending_result = r;
                return;
        }
        task_settle(task, r);
        task->done(task);
}
