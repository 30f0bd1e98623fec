/*
 * LOGICAL UNIT RESET on a LU that two nodes export. SAM-5 has every I_T nexus of the LU,
 * the requester's included, hear BUS DEVICE RESET FUNCTION OCCURRED (29/03) and ends a RESERVE
 * and a medium removal prevention; persistent reservations stay. The other node's nexuses
 * (standby paths, ALUA per node) belong to the same LU, so the serving node counts its resets
 * in a state record (SCSI_STATE_RESET): it is stored on every copy before the function is
 * answered, and a copy that sees the count move raises the attention for its own nexuses.
 * A reset sent down a standby path is the serving node's to run (it alone changes the
 * records): forward.c passes it on like a PERSISTENT RESERVE OUT.
 */
#include <errno.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/byteorder.h"
#include "tandem/log.h"

#define RESET_RECORD_LEN 8 /* the count, big-endian */

/* What a reset does here, whichever node it came from. */
static void reset_effects(struct scsi_lun *lun)
{
        atomic_store(&lun->removal_prevented, false);
        scsi_lun_raise_ua(lun, SCSI_UA_LUN_RESET, 0);
}

/* The serving node's reset: its effects here, and counted for the other copy. */
static void reset_serving(struct scsi_lun *lun)
{
        scsi_reservation_release_all(lun);
        reset_effects(lun);
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        pthread_mutex_lock(&priv->state_lock);
        priv->resets++;
        pthread_mutex_unlock(&priv->state_lock);
}

bool scsi_nexus_lun_reset(struct scsi_nexus *nx, struct scsi_lun *lun)
{
        (void)nx;
        if (!lun)
                return false;
        if (scsi_lun_active(lun))
                reset_serving(lun);
        return true; /* stored, or on a standby node passed to the serving node */
}

void scsi_lun_store_reset(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        if (scsi_lun_active(lun)) {
                pthread_mutex_lock(&priv->state_op_lock);
                scsi_lun_state_store_locked(lun, 1u << SCSI_STATE_RESERVE | 1u << SCSI_STATE_RESET);
                pthread_mutex_unlock(&priv->state_op_lock);
                return;
        }
        /*
         * The serving node runs it; its record reaches this node before its answer and raises
         * the attention here. Without it (no link, no Primary) the reset is this node's alone.
         */
        struct tdm_forward_cmd cmd = {.tmf = TDM_FORWARD_TMF_LU_RESET};
        struct tdm_forward_result res;
        int rc = tdm_medium_forward(lun->medium, &cmd, &res);
        if (rc < 0 || res.status != 0) {
                log_info("LUN %llu: LOGICAL UNIT RESET on a standby port: the serving node did "
                         "not run it (%s); reset on this node only",
                         (unsigned long long)lun->id, rc < 0 ? strerror(-rc) : "refused");
                reset_effects(lun);
        }
}

enum scsi_reason scsi_lun_reset_run(struct scsi_lun *lun)
{
        reset_serving(lun);
        scsi_lun_store_reset(lun);
        return SCSI_OK;
}

size_t scsi_reset_encode_locked(const struct scsi_lun *lun, uint8_t *buf, size_t cap)
{
        if (cap < RESET_RECORD_LEN)
                return 0;
        put_be64(buf, scsi_lun_private(lun)->resets);
        return RESET_RECORD_LEN;
}

/*
 * The record changed on the other copy (or the LU starts): a count above the one known here
 * is a reset this node's nexuses have not heard of. At start no nexus exists yet, and a new
 * nexus's first attention (POWER ON or I_T NEXUS LOSS) subsumes it.
 */
void scsi_reset_reload(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        uint8_t rec[RESET_RECORD_LEN + 1];
        size_t len = scsi_lun_state_load(lun, SCSI_STATE_RESET, rec, sizeof(rec), NULL);
        if (len == 0)
                return;
        if (len != RESET_RECORD_LEN) {
                log_err("LUN %llu: the reset record is malformed (%zu bytes): ignored",
                        (unsigned long long)lun->id, len);
                return;
        }
        uint64_t count = get_be64(rec);
        pthread_mutex_lock(&priv->state_lock);
        bool newer = count > priv->resets;
        if (newer)
                priv->resets = count;
        pthread_mutex_unlock(&priv->state_lock);
        if (newer)
                reset_effects(lun);
}
