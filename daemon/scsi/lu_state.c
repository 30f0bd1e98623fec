/*
 * The logical unit's own state (persistent reservations, the SPC-2 reservation, mode pages,
 * unit attentions owed) kept as records of the medium: a change is stored there before the
 * command that made it completes, so on a replicated LUN the peer has it too (ordered with
 * the data) and a promoted peer answers as this node would have. A record that changes on
 * the medium's other copy is reloaded here.
 */
#include "scsi_internal.h"
#include "tandem/log.h"

/* What each record reloads into (NULL: read when needed, nothing cached). */
static void (*const reloaders[SCSI_STATE_IDS])(struct scsi_lun *lun) = {
    [SCSI_STATE_PR] = scsi_pr_reload,       [SCSI_STATE_RESERVE] = scsi_spc2_reload,
    [SCSI_STATE_MODE] = scsi_mode_reload,   [SCSI_STATE_UA] = scsi_ua_reload,
    [SCSI_STATE_RESET] = scsi_reset_reload,
};

int scsi_lun_state_store(struct scsi_lun *lun, enum scsi_state_id id, const void *buf, size_t len,
                         bool persist)
{
        int rc = tdm_medium_state_put(lun->medium, id, buf, len, persist ? TDM_MIO_PERSIST : 0);
        if (rc < 0)
                log_err("LUN %llu: storing state record %u: %s", (unsigned long long)lun->id, id,
                        strerror(-rc));
        return rc;
}

size_t scsi_lun_state_load(struct scsi_lun *lun, enum scsi_state_id id, void *buf, size_t cap,
                           bool *persist)
{
        return tdm_medium_state_get(lun->medium, id, buf, cap, persist);
}

void scsi_lun_state_changed(void *arg, unsigned id)
{
        struct scsi_lun *lun = arg;
        if (id < SCSI_STATE_IDS && reloaders[id])
                reloaders[id](lun);
}
