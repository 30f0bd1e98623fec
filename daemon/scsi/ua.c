/*
 * Unit attentions, per I_T nexus and LUN. A LUN bumps a generation counter per kind when
 * a condition arises; each nexus remembers the generation it last reported. A new nexus
 * first reports POWER ON RESET, which subsumes everything raised before it.
 * One condition is reported per command, highest precedence first (29h before 2Ah/3Fh).
 */
#include "scsi_internal.h"

static const enum scsi_reason ua_reason[SCSI_UA_KINDS] = {
    [SCSI_UA_LUN_RESET] = SR_UA_BUS_DEVICE_RESET,
    [SCSI_UA_MODE_CHANGED] = SR_UA_MODE_PARAMS_CHANGED,
    [SCSI_UA_CAPACITY_CHANGED] = SR_UA_CAPACITY_CHANGED,
    [SCSI_UA_ALUA_CHANGED] = SR_UA_ALUA_STATE_CHANGED,
};

/* Reporting order after POWER ON RESET. */
static const enum scsi_ua_kind ua_order[SCSI_UA_KINDS] = {
    SCSI_UA_LUN_RESET,
    SCSI_UA_CAPACITY_CHANGED,
    SCSI_UA_MODE_CHANGED,
    SCSI_UA_ALUA_CHANGED,
};

static void ua_sync_all(struct scsi_nexus *nx, struct scsi_lun *lun)
{
        for (int k = 0; k < SCSI_UA_KINDS; k++)
                nx->ua_seen[lun->id][k] =
                    atomic_load_explicit(&lun->ua_gen[k], memory_order_acquire);
}

/* The next condition to report for this nexus and LUN, marked as reported. */
enum scsi_reason scsi_ua_take(struct scsi_nexus *nx, struct scsi_lun *lun)
{
        if (lun->id >= SCSI_MAX_LUNS)
                return SCSI_OK;
        if (nx->power_on_pending[lun->id]) {
                nx->power_on_pending[lun->id] = false;
                ua_sync_all(nx, lun);
                return SR_UA_POWER_ON_RESET;
        }
        for (int i = 0; i < SCSI_UA_KINDS; i++) {
                enum scsi_ua_kind k = ua_order[i];
                unsigned gen = atomic_load_explicit(&lun->ua_gen[k], memory_order_acquire);
                if (gen == nx->ua_seen[lun->id][k])
                        continue;
                nx->ua_seen[lun->id][k] = gen;
                /*
                 * The nexus that caused a change knows about it: no attention for it. Origin
                 * 0 is no nexus (the admin plane, a LUN reset): everyone gets it, even a
                 * nexus whose id was never set.
                 */
                uint64_t origin = atomic_load_explicit(&lun->ua_origin[k], memory_order_relaxed);
                if (origin == 0 || origin != nx->id)
                        return ua_reason[k];
        }
        if (nx->target) {
                unsigned gen = atomic_load_explicit(&nx->target->luns_gen, memory_order_acquire);
                if (gen != nx->luns_gen_seen) {
                        nx->luns_gen_seen = gen;
                        return SR_UA_LUNS_CHANGED;
                }
        }
        return SCSI_OK;
}

/* REPORT LUNS clears REPORTED LUNS DATA HAS CHANGED for the nexus that sent it. */
void scsi_ua_clear_luns_changed(struct scsi_nexus *nx)
{
        if (nx->target)
                nx->luns_gen_seen =
                    atomic_load_explicit(&nx->target->luns_gen, memory_order_acquire);
}

/* origin_nexus: the nexus whose command caused the change, 0 when none did. */
void scsi_lun_raise_ua(struct scsi_lun *lun, enum scsi_ua_kind kind, uint64_t origin_nexus)
{
        if ((unsigned)kind >= SCSI_UA_KINDS)
                return;
        atomic_store_explicit(&lun->ua_origin[kind], origin_nexus, memory_order_relaxed);
        atomic_fetch_add_explicit(&lun->ua_gen[kind], 1, memory_order_release);
}
