/*
 * Commands that change the LU's state, sent down a path to the node that does not serve.
 * With one port group per node (target_ports = "per_node") an initiator has a path to each
 * node, and SPC lets it send PERSISTENT RESERVE OUT and MODE SELECT down a standby path
 * (Windows MPIO and mpathpersist register every path). Only the serving node changes the LU's
 * state, so the standby node has it run there, as the same initiator port's, and passes its answer
 * on. The state it changed reaches this node with the data before the answer does.
 */
#include <errno.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

enum scsi_reason scsi_forward(struct scsi_task *task)
{
        struct tdm_forward_cmd cmd = {
            .cdb_len = task->cdb_len, .param = task->data_out, .param_len = task->data_out_len};
        if (task->cdb_len > sizeof(cmd.cdb) || task->data_out_len > TDM_FORWARD_PARAM_MAX)
                return SR_PARAM_LIST_LENGTH_ERROR;
        memcpy(cmd.cdb, task->cdb, task->cdb_len);
        snprintf(cmd.port_name, sizeof(cmd.port_name), "%s",
                 task->nexus ? task->nexus->port_name : "");
        struct tdm_forward_result res;
        int rc = tdm_medium_forward(task->lun->medium, &cmd, &res);
        if (rc < 0) {
                log_info("LUN %llu: %s from %s on a standby port: the serving node cannot run "
                         "it (%s)",
                         (unsigned long long)task->lun->id,
                         task->entry ? task->entry->name : "a command",
                         task->nexus ? task->nexus->initiator : "?", strerror(-rc));
                return SR_NOT_READY_STANDBY;
        }
        return scsi_reason_from_result(&res, &task->field);
}

void scsi_lun_forwarded(void *arg, const struct tdm_forward_cmd *cmd,
                        struct tdm_forward_result *res)
{
        struct scsi_lun *lun = arg;
        struct scsi_field_ptr field = {0};
        enum scsi_reason r;
        if (!scsi_lun_active(lun))
                r = SR_NOT_READY_STANDBY; /* never passed on again */
        else if (cmd->tmf == TDM_FORWARD_TMF_LU_RESET)
                r = scsi_lun_reset_run(lun);
        else if (cmd->tmf != TDM_FORWARD_TMF_NONE)
                r = SR_INVALID_OPCODE;
        else if (cmd->cdb_len >= 10 && cmd->cdb[0] == 0x5f)
                r = scsi_pr_out_run(lun, cmd->port_name, cmd->cdb, cmd->param, cmd->param_len,
                                    &field, NULL);
        else if ((cmd->cdb_len >= 6 && cmd->cdb[0] == 0x15) ||
                 (cmd->cdb_len >= 10 && cmd->cdb[0] == 0x55))
                r = scsi_mode_select_run(lun, cmd->cdb, cmd->param, cmd->param_len, 0, &field);
        else
                r = SR_INVALID_OPCODE;
        scsi_reason_to_result(r, &field, res);
}
