/*
 * MODE SELECT(6/10): only changeable bits may change (caching WCE, control D_SENSE and SWP);
 * the whole list is checked before anything changes. The new values are the LU's mode
 * record (SCSI_STATE_MODE), stored on every copy of the medium before they become current,
 * so a promoted peer answers MODE SENSE and writes with the cache setting the initiator
 * chose; a change raises MODE PARAMETERS CHANGED on every other nexus, on both nodes. On a
 * node whose group does not serve, the serving node runs it (forward.c): SPC lets MODE
 * SELECT down a standby path.
 */
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

#define MODE_RECORD_MAGIC   0x4d /* 'M' */
#define MODE_RECORD_VERSION 1
#define MODE_RECORD_LEN     4
#define MODE_WCE            0x1
#define MODE_D_SENSE        0x2
#define MODE_SWP            0x4

/* The changeable values: MODE_* bits. */
static uint8_t mode_current(const struct scsi_lun *lun)
{
        const struct scsi_lun_private *priv = scsi_lun_private(lun);
        return (uint8_t)((atomic_load(&lun->wce) ? MODE_WCE : 0) |
                         (atomic_load(&priv->d_sense) ? MODE_D_SENSE : 0) |
                         (atomic_load(&priv->swp) ? MODE_SWP : 0));
}

/* Makes values current; true if any changed. */
static bool mode_set(struct scsi_lun *lun, uint8_t values)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        bool changed =
            atomic_exchange(&lun->wce, (values & MODE_WCE) != 0) != !!(values & MODE_WCE);
        changed |= atomic_exchange(&priv->d_sense, (values & MODE_D_SENSE) != 0) !=
                   !!(values & MODE_D_SENSE);
        changed |= atomic_exchange(&priv->swp, (values & MODE_SWP) != 0) != !!(values & MODE_SWP);
        return changed;
}

/* ---- checking the parameter list ---- */

struct select_list {
        const struct scsi_lun *lun;
        const uint8_t *p;
        uint32_t avail;
        struct scsi_field_ptr *field;
};

/* The highest set bit of a nonzero byte, for the field pointer. */
static int top_bit(uint8_t v)
{
        int bit = 7;
        while (!(v & (1u << bit)))
                bit--;
        return bit;
}

/* A block descriptor may only restate the current geometry (or leave the count 0). */
static enum scsi_reason select_block_descriptor(const struct select_list *l, uint32_t off,
                                                uint32_t bd_len)
{
        uint64_t blocks = atomic_load(&l->lun->num_blocks);
        uint32_t bs = l->lun->block_size;
        if (bd_len == 0)
                return SCSI_OK;
        if (bd_len == 8) {
                uint32_t n = get_be32(l->p + off);
                if (n != 0 && n != (blocks > UINT32_MAX ? UINT32_MAX : blocks))
                        return scsi_bad_param_at(l->field, (uint16_t)off, -1);
                if (get_be24(l->p + off + 5) != bs)
                        return scsi_bad_param_at(l->field, (uint16_t)(off + 5), -1);
                return SCSI_OK;
        }
        if (bd_len == 16) {
                uint64_t n = get_be64(l->p + off);
                if (n != 0 && n != blocks)
                        return scsi_bad_param_at(l->field, (uint16_t)off, -1);
                if (get_be32(l->p + off + 12) != bs)
                        return scsi_bad_param_at(l->field, (uint16_t)(off + 12), -1);
                return SCSI_OK;
        }
        return SR_PARAM_LIST_LENGTH_ERROR;
}

/* One page: only changeable bits may differ from the current values; *values gets them. */
static enum scsi_reason select_page(const struct select_list *l, uint32_t off, uint8_t *values,
                                    uint32_t *used)
{
        if (l->avail - off < 2)
                return SR_PARAM_LIST_LENGTH_ERROR;
        const uint8_t *pg = l->p + off;
        if (pg[0] & 0x80) /* PS is reserved in MODE SELECT */
                return scsi_bad_param_at(l->field, (uint16_t)off, 7);
        if (pg[0] & 0x40) /* no subpages here */
                return scsi_bad_param_at(l->field, (uint16_t)off, 6);
        uint8_t cur[SCSI_MODE_BUF_MAX], chg[SCSI_MODE_BUF_MAX];
        uint32_t len = scsi_mode_page_put(l->lun, pg[0] & 0x3f, SCSI_MODE_PC_CURRENT, cur);
        if (!len)
                return scsi_bad_param_at(l->field, (uint16_t)off, 5);
        if (pg[1] + 2u != len)
                return scsi_bad_param_at(l->field, (uint16_t)(off + 1), -1);
        if (l->avail - off < len)
                return SR_PARAM_LIST_LENGTH_ERROR;
        scsi_mode_page_put(l->lun, pg[0] & 0x3f, SCSI_MODE_PC_CHANGEABLE, chg);
        for (uint32_t i = 2; i < len; i++) {
                uint8_t bad = (uint8_t)((pg[i] ^ cur[i]) & ~chg[i]);
                if (bad)
                        return scsi_bad_param_at(l->field, (uint16_t)(off + i), top_bit(bad));
        }
        if ((pg[0] & 0x3f) == 0x08) {
                *values = (uint8_t)((*values & ~MODE_WCE) | ((pg[2] & 0x04) ? MODE_WCE : 0));
        } else if ((pg[0] & 0x3f) == 0x0a) {
                *values = (uint8_t)(*values & ~(MODE_D_SENSE | MODE_SWP));
                *values |= (pg[2] & SCSI_CONTROL_D_SENSE) ? MODE_D_SENSE : 0;
                *values |= (pg[4] & SCSI_CONTROL_SWP) ? MODE_SWP : 0;
        }
        *used = len;
        return SCSI_OK;
}

/* The values the whole list asks for, starting from the current ones. */
static enum scsi_reason select_parse(const struct select_list *l, bool ten, uint8_t *values)
{
        uint32_t hdr = ten ? 8 : 4;
        if (l->avail < hdr)
                return SR_PARAM_LIST_LENGTH_ERROR;
        uint32_t bd_len = ten ? get_be16(l->p + 6) : l->p[3];
        if (bd_len > l->avail - hdr)
                return SR_PARAM_LIST_LENGTH_ERROR;
        enum scsi_reason r = select_block_descriptor(l, hdr, bd_len);
        for (uint32_t off = hdr + bd_len, used = 0; r == SCSI_OK && off < l->avail; off += used)
                r = select_page(l, off, values, &used);
        return r;
}

/* ---- the record ---- */

static int mode_store(struct scsi_lun *lun, uint8_t values)
{
        uint8_t rec[MODE_RECORD_LEN] = {MODE_RECORD_MAGIC, MODE_RECORD_VERSION, values, 0};
        return scsi_lun_state_store(lun, SCSI_STATE_MODE, rec, sizeof(rec), false);
}

void scsi_mode_reload(struct scsi_lun *lun)
{
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        uint8_t rec[MODE_RECORD_LEN + 1];
        pthread_mutex_lock(&priv->state_op_lock);
        size_t len = scsi_lun_state_load(lun, SCSI_STATE_MODE, rec, sizeof(rec), NULL);
        if (len == 0) { /* none yet: the configured values stand */
                pthread_mutex_unlock(&priv->state_op_lock);
                return;
        }
        if (len != MODE_RECORD_LEN || rec[0] != MODE_RECORD_MAGIC ||
            rec[1] != MODE_RECORD_VERSION || (rec[2] & ~(MODE_WCE | MODE_D_SENSE | MODE_SWP))) {
                log_err("LUN %llu: the mode record is malformed: the current values stand",
                        (unsigned long long)lun->id);
                pthread_mutex_unlock(&priv->state_op_lock);
                return;
        }
        /* The nexus on this node whose MODE SELECT the serving node ran gets no attention. */
        uint64_t origin = atomic_exchange(&priv->mode_select_origin, 0);
        if (mode_set(lun, rec[2]))
                scsi_lun_raise_ua(lun, SCSI_UA_MODE_CHANGED, origin);
        pthread_mutex_unlock(&priv->state_op_lock);
}

/* ---- MODE SELECT ---- */

enum scsi_reason scsi_mode_select_run(struct scsi_lun *lun, const uint8_t *cdb,
                                      const uint8_t *param, uint32_t len, uint64_t origin,
                                      struct scsi_field_ptr *field)
{
        bool ten = cdb[0] == 0x55;
        uint32_t param_len = ten ? get_be16(cdb + 7) : cdb[4];
        if (!(cdb[1] & 0x10)) { /* PF: only the standard page format is understood */
                scsi_field_point(field, 1, 4);
                return SR_INVALID_FIELD_CDB;
        }
        if (param_len == 0)
                return SCSI_OK;
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        struct select_list l = {
            .lun = lun, .p = param, .avail = param_len < len ? param_len : len, .field = field};
        pthread_mutex_lock(&priv->state_op_lock);
        uint8_t old = mode_current(lun), values = old;
        enum scsi_reason r = select_parse(&l, ten, &values);
        if (r != SCSI_OK || values == old) {
                pthread_mutex_unlock(&priv->state_op_lock);
                return r;
        }
        int rc = mode_store(lun, values);
        if (rc < 0) {
                pthread_mutex_unlock(&priv->state_op_lock);
                return scsi_io_reason(rc, true);
        }
        mode_set(lun, values);
        scsi_lun_raise_ua(lun, SCSI_UA_MODE_CHANGED, origin);
        /* Turning the cache off must not leave earlier cached writes volatile; a failed
         * flush is not the MODE SELECT's. */
        if ((old & MODE_WCE) && !(values & MODE_WCE))
                (void)tdm_medium_flush(lun->medium);
        pthread_mutex_unlock(&priv->state_op_lock);
        return SCSI_OK;
}

static enum scsi_reason mode_select_blocking(struct scsi_task *task)
{
        uint64_t me = task->nexus ? task->nexus->id : 0;
        if (!scsi_lun_active(task->lun)) {
                atomic_store(&scsi_lun_private(task->lun)->mode_select_origin, me);
                return scsi_forward(task);
        }
        return scsi_mode_select_run(task->lun, task->cdb, task->data_out, task->data_out_len, me,
                                    &task->field);
}

enum scsi_reason spc_mode_select6(struct scsi_task *task)
{
        task->xfer_len = task->cdb[4];
        return scsi_task_block(task, mode_select_blocking);
}

enum scsi_reason spc_mode_select10(struct scsi_task *task)
{
        task->xfer_len = get_be16(task->cdb + 7);
        return scsi_task_block(task, mode_select_blocking);
}
