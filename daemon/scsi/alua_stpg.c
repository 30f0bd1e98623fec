/*
 * Explicit ALUA (SPC-5 5.16.6, 6.36): SET TARGET PORT GROUPS. An initiator asks for this
 * node's port group to become active/optimized; the medium (the replicator) moves the
 * Primary here through the cluster and reports transitioning meanwhile.
 *
 * What can be asked is decided by scsi_stpg_decide, a pure function of the groups' states
 * and the parameter list. tandem moves the Primary only towards the node that is asked:
 * this node's group to active/optimized (the peer's may be named standby or unavailable in
 * the same list, as Windows MPIO does), or any list that changes nothing. Making the other
 * node's group active, or this node's group standby while it serves, would leave the LU
 * served by nobody until the other node acts: refused as an invalid field.
 */
#include <errno.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

#define STPG_HEADER_LEN 4 /* reserved */
#define STPG_DESC_LEN   4 /* state, reserved, group id */

static bool state_settable(uint8_t s)
{
        return s == TDM_ACCESS_ACTIVE || s == TDM_ACCESS_STANDBY || s == TDM_ACCESS_UNAVAILABLE;
}

/* What one descriptor asks of a group in state `now`: nothing, or this node activated. */
static enum scsi_reason decide_one(bool local, uint8_t now, uint8_t want, bool *activate,
                                   bool *peer_down)
{
        bool active = now == TDM_ACCESS_ACTIVE;
        if (local) {
                if (want == TDM_ACCESS_ACTIVE)
                        *activate = !active;
                else if (active)
                        return SR_INVALID_FIELD_PARAM; /* no demoting the serving node */
                return SCSI_OK;
        }
        if (want == TDM_ACCESS_ACTIVE && !active)
                return SR_INVALID_FIELD_PARAM; /* the other node is asked on its own port */
        if (want != TDM_ACCESS_ACTIVE && active)
                *peer_down = true; /* only together with this node's group activated */
        return SCSI_OK;
}

enum scsi_reason scsi_stpg_decide(const struct scsi_stpg_groups *g, const uint8_t *param,
                                  uint32_t len, bool *activate, struct scsi_field_ptr *bad)
{
        *activate = false;
        *bad = (struct scsi_field_ptr){0};
        if (len == 0)
                return SCSI_OK; /* no descriptors: nothing asked */
        if (len < STPG_HEADER_LEN || (len - STPG_HEADER_LEN) % STPG_DESC_LEN)
                return SR_PARAM_LIST_LENGTH_ERROR;
        bool seen_local = false, seen_peer = false, peer_down = false;
        for (uint32_t off = STPG_HEADER_LEN; off < len; off += STPG_DESC_LEN) {
                const uint8_t *d = param + off;
                uint16_t id = get_be16(d + 2);
                bool local = id == g->local_id;
                if (d[0] & 0xf0) {
                        *bad = (struct scsi_field_ptr){(uint16_t)off, 7, true};
                        return SR_INVALID_FIELD_PARAM;
                }
                if (d[1]) {
                        *bad = (struct scsi_field_ptr){(uint16_t)(off + 1), 7, true};
                        return SR_INVALID_FIELD_PARAM;
                }
                *bad = (struct scsi_field_ptr){.byte = (uint16_t)off};
                if (!state_settable(d[0]))
                        return SR_INVALID_FIELD_PARAM;
                bad->byte = (uint16_t)(off + 2);
                if (!local && (id != g->peer_id || id == 0))
                        return SR_INVALID_FIELD_PARAM; /* no such group */
                bool *seen = local ? &seen_local : &seen_peer;
                if (*seen)
                        return SR_INVALID_FIELD_PARAM; /* one descriptor per group */
                *seen = true;
                bad->byte = (uint16_t)off;
                enum scsi_reason r = decide_one(local, local ? g->local_state : g->peer_state, d[0],
                                                activate, &peer_down);
                if (r != SCSI_OK)
                        return r;
        }
        if (peer_down && !*activate) {
                bad->byte = STPG_HEADER_LEN;
                return SR_INVALID_FIELD_PARAM;
        }
        *bad = (struct scsi_field_ptr){0};
        return SCSI_OK;
}

static void stpg_done(struct tdm_mio *io)
{
        struct scsi_task *task = io->arg;
        struct scsi_lun *lun = task->lun;
        uint64_t me = task->nexus ? task->nexus->id : 0;
        atomic_compare_exchange_strong(&scsi_lun_private(lun)->alua_requester, &me, 0);
        if (io->result < 0)
                log_warn("LUN %llu: SET TARGET PORT GROUPS from %s failed: %s",
                         (unsigned long long)lun->id, task->nexus ? task->nexus->initiator : "?",
                         strerror(-io->result));
        scsi_task_complete(task, io->result < 0 ? SR_STPG_FAILED : SCSI_OK);
}

enum scsi_reason spc_set_target_port_groups(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        struct tdm_access a = tdm_medium_access(lun->medium);
        if (!a.explicit_alua)
                return SR_INVALID_OPCODE; /* TPGS 01b: implicit only */
        uint32_t len = get_be32(task->cdb + 6);
        if (len > task->data_out_len)
                return SR_PARAM_LIST_LENGTH_ERROR;
        struct scsi_stpg_groups g = {.local_id = scsi_alua_local_group(&a),
                                     .peer_id = a.peer_id,
                                     .local_state = a.local_state,
                                     .peer_state = a.peer_state};
        bool activate;
        enum scsi_reason r = scsi_stpg_decide(&g, task->data_out, len, &activate, &task->field);
        if (r != SCSI_OK || !activate)
                return r;
        log_notice("LUN %llu: %s asks for node group %u (SET TARGET PORT GROUPS)",
                   (unsigned long long)lun->id, task->nexus ? task->nexus->initiator : "?",
                   g.local_id);
        /* The requester gets no ASYMMETRIC ACCESS STATE CHANGED for the change it asked. */
        atomic_store(&scsi_lun_private(lun)->alua_requester, task->nexus ? task->nexus->id : 0);
        task->mio = (struct tdm_mio){.done = stpg_done, .arg = task};
        tdm_medium_request_active(lun->medium, &task->mio);
        return SCSI_PENDING;
}
