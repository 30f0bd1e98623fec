/*
 * RESERVE(6/10) and RELEASE(6/10): the SPC-2 logical unit reservation. While a nexus
 * holds it, every other nexus gets RESERVATION CONFLICT except for the commands the
 * table marks SCSI_F_ALLOWED_UNDER_RESERVATION. It ends with RELEASE from the holder,
 * a LUN or target reset, or the end of the holder's nexus (scsi_nexus_fini()).
 * Persistent reservations (a later issue) will refuse RESERVE while registrations exist.
 */
#include "scsi_internal.h"
#include "tandem/scsi_nexus.h"

static uint64_t task_nexus_id(const struct scsi_task *task)
{
        return task->nexus ? task->nexus->id : 0;
}

enum scsi_reason scsi_reservation_check(struct scsi_task *task, const struct scsi_opcode_entry *e)
{
        if (!task->lun || (e->flags & SCSI_F_ALLOWED_UNDER_RESERVATION))
                return SCSI_OK;
        uint64_t holder =
            atomic_load_explicit(&scsi_lun_private(task->lun)->reserved_by, memory_order_acquire);
        if (holder != 0 && holder != task_nexus_id(task))
                return SR_RESERVATION_CONFLICT;
        return SCSI_OK;
}

enum scsi_reason spc_reserve(struct scsi_task *task)
{
        uint64_t me = task_nexus_id(task);
        uint64_t none = 0;
        _Atomic uint64_t *holder = &scsi_lun_private(task->lun)->reserved_by;
        if (atomic_compare_exchange_strong(holder, &none, me) || none == me)
                return SCSI_OK;
        return SR_RESERVATION_CONFLICT;
}

/* Releasing a reservation held by another nexus (or none) is a successful no-op. */
enum scsi_reason spc_release(struct scsi_task *task)
{
        uint64_t me = task_nexus_id(task);
        atomic_compare_exchange_strong(&scsi_lun_private(task->lun)->reserved_by, &me, 0);
        return SCSI_OK;
}

void scsi_reservation_release_all(struct scsi_lun *lun)
{
        atomic_store_explicit(&scsi_lun_private(lun)->reserved_by, 0, memory_order_release);
}

void scsi_nexus_fini(struct scsi_nexus *nx)
{
        if (!nx->target)
                return;
        for (uint64_t id = 0; id < SCSI_MAX_LUNS; id++) {
                struct scsi_lun *lun = scsi_target_get_lun(nx->target, id);
                if (!lun)
                        continue;
                uint64_t me = nx->id;
                atomic_compare_exchange_strong(&scsi_lun_private(lun)->reserved_by, &me, 0);
                scsi_lun_put(lun);
        }
}
