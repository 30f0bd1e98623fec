/*
 * SPC commands other than INQUIRY and MODE: TEST UNIT READY, REQUEST SENSE, REPORT LUNS,
 * PREVENT ALLOW MEDIUM REMOVAL, START STOP UNIT, REPORT SUPPORTED OPERATION CODES.
 */
#include <string.h>

#include "scsi_internal.h"

enum scsi_reason spc_test_unit_ready(struct scsi_task *task)
{
        (void)task;
        return SCSI_OK;
}

/*
 * REQUEST SENSE reports (and clears) a pending unit attention, else NO SENSE: sense
 * data of failed commands already went back with them (autosense).
 */
static enum scsi_reason request_sense_data(struct scsi_task *task, enum scsi_reason pending)
{
        bool descriptor = task->cdb[1] & 0x01;
        uint8_t *d = scsi_data_in_alloc(task, SCSI_SENSE_MAX);
        uint8_t len = scsi_sense_format(d, SCSI_SENSE_MAX, pending, NULL, 0, false, descriptor);
        task->data_in_len = len;
        scsi_data_in_limit(task, task->cdb[4]);
        return SCSI_OK;
}

/* An attention owed by name: its record is stored before the sense data goes out. */
static enum scsi_reason request_sense_store(struct scsi_task *task)
{
        return request_sense_data(task, scsi_ua_store_taken(task));
}

enum scsi_reason spc_request_sense(struct scsi_task *task)
{
        enum scsi_reason pending = SCSI_OK;
        bool store = false;
        if (!task->lun)
                pending = SR_LUN_NOT_SUPPORTED;
        else if (task->nexus)
                pending = scsi_ua_take(task->nexus, task->lun, &store);
        if (store) {
                task->op_flags = (uint32_t)pending;
                return scsi_task_block(task, request_sense_store);
        }
        return request_sense_data(task, pending);
}

/* LUN numbers below 256 use the peripheral device addressing method (byte 0 = 0). */
static void put_lun(uint8_t *p, uint64_t id)
{
        memset(p, 0, 8);
        if (id < 256) {
                p[1] = (uint8_t)id;
        } else {
                p[0] = (uint8_t)(0x40 | ((id >> 8) & 0x3f)); /* flat space */
                p[1] = (uint8_t)id;
        }
}

enum scsi_reason spc_report_luns(struct scsi_task *task)
{
        uint8_t select = task->cdb[2];
        if (select > 0x02)
                return scsi_bad_cdb_field(task, 2, -1);
        struct scsi_target *t = task->target;
        uint32_t count = 0;
        uint8_t *d = scsi_data_in_alloc(task, 8 + 8 * SCSI_MAX_LUNS);
        if (!d)
                return SR_INTERNAL_ERROR;
        /* Select 01h asks for well-known LUNs only: there are none. */
        for (int i = 0; t && select != 0x01 && i < SCSI_MAX_LUNS; i++) {
                struct scsi_lun *lun = atomic_load_explicit(&t->luns[i], memory_order_acquire);
                if (lun)
                        put_lun(d + 8 + 8 * count++, (uint64_t)i);
        }
        /* An initiator with no LUN 0 still gets LUN 0 listed, so it can address the target. */
        if (count == 0 && select != 0x01)
                put_lun(d + 8 + 8 * count++, 0);
        put_be32(d, 8 * count);
        task->data_in_len = 8 + 8 * count;
        if (task->nexus)
                scsi_ua_clear_luns_changed(task->nexus);
        scsi_data_in_limit(task, get_be32(task->cdb + 6));
        return SCSI_OK;
}

enum scsi_reason spc_prevent_allow(struct scsi_task *task)
{
        atomic_store(&task->lun->removal_prevented, (task->cdb[4] & 0x03) != 0);
        return SCSI_OK;
}

/*
 * The medium cannot be removed or stopped; a stop request flushes (unless NO_FLUSH) and
 * an eject is refused while removal is prevented.
 */
static void stop_flushed(struct scsi_task *task, int rc)
{
        scsi_task_complete(task, rc < 0 ? scsi_io_error(task, "flush", rc, true) : SCSI_OK);
}

enum scsi_reason spc_start_stop_unit(struct scsi_task *task)
{
        const uint8_t *cdb = task->cdb;
        bool start = cdb[4] & 0x01, loej = cdb[4] & 0x02, no_flush = cdb[4] & 0x04;
        uint8_t power_condition = cdb[4] >> 4;
        if (power_condition != 0)
                return SCSI_OK; /* power conditions: nothing to change on a virtual disk */
        if (loej && !start && atomic_load(&task->lun->removal_prevented))
                return SR_MEDIUM_REMOVAL_PREVENTED;
        if (start || no_flush)
                return SCSI_OK;
        /* Stopping: what is cached goes to stable media first. */
        scsi_mio_start(task, TDM_MIO_FLUSH, NULL, 0, 0, 0, stop_flushed);
        return SCSI_PENDING;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---- */

#define RSOC_TIMEOUT_DESC_LEN      12
#define RSOC_RECOMMENDED_TIMEOUT_S 30

static void put_timeouts(uint8_t *p)
{
        put_be16(p, 0x0a);
        put_be32(p + 4, 0); /* nominal processing timeout: not specified */
        put_be32(p + 8, RSOC_RECOMMENDED_TIMEOUT_S);
}

static enum scsi_reason rsoc_all(struct scsi_task *task, bool rctd, uint32_t alloc_len)
{
        uint32_t desc_len = 8 + (rctd ? RSOC_TIMEOUT_DESC_LEN : 0);
        uint32_t len = 4 + desc_len * (uint32_t)scsi_opcode_table_len;
        uint8_t *d = scsi_data_in_alloc(task, len);
        if (!d)
                return SR_INTERNAL_ERROR;
        put_be32(d, len - 4);
        uint8_t *p = d + 4;
        for (size_t i = 0; i < scsi_opcode_table_len; i++, p += desc_len) {
                const struct scsi_opcode_entry *e = &scsi_opcode_table[i];
                p[0] = e->opcode;
                put_be16(p + 2, e->has_service_action ? e->service_action : 0);
                p[5] = (uint8_t)((rctd ? 0x02 : 0) | (e->has_service_action ? 0x01 : 0));
                put_be16(p + 6, e->cdb_len);
                if (rctd)
                        put_timeouts(p + 8);
        }
        scsi_data_in_limit(task, alloc_len);
        return SCSI_OK;
}

/* The row a one-command request names, per the reporting options; NULL if unsupported. */
static const struct scsi_opcode_entry *rsoc_find(uint8_t opcode, uint16_t sa, bool use_sa)
{
        for (size_t i = 0; i < scsi_opcode_table_len; i++) {
                const struct scsi_opcode_entry *e = &scsi_opcode_table[i];
                if (e->opcode == opcode && (!use_sa || e->service_action == sa))
                        return e;
        }
        return NULL;
}

static enum scsi_reason rsoc_one(struct scsi_task *task, uint8_t options, bool rctd,
                                 uint32_t alloc_len)
{
        uint8_t opcode = task->cdb[3];
        uint16_t sa = get_be16(task->cdb + 4);
        bool has_sa = scsi_opcode_has_service_actions(opcode);
        /* 01b names an opcode without service actions, 02b one with them. */
        if ((options == 1 && has_sa) || (options == 2 && !has_sa))
                return scsi_bad_cdb_field(task, 2, 2);
        const struct scsi_opcode_entry *e = rsoc_find(opcode, sa, has_sa);
        uint32_t len = 4;
        if (e)
                len += e->cdb_len + (rctd ? RSOC_TIMEOUT_DESC_LEN : 0);
        uint8_t *d = scsi_data_in_alloc(task, len);
        if (!e) {
                d[1] = 0x01; /* not supported */
        } else {
                d[1] = (uint8_t)((rctd ? 0x80 : 0) | 0x03); /* supported as the standard says */
                put_be16(d + 2, e->cdb_len);
                memcpy(d + 4, e->usage, e->cdb_len);
                if (rctd)
                        put_timeouts(d + 4 + e->cdb_len);
        }
        scsi_data_in_limit(task, alloc_len);
        return SCSI_OK;
}

enum scsi_reason spc_report_supported_opcodes(struct scsi_task *task)
{
        const uint8_t *cdb = task->cdb;
        bool rctd = cdb[2] & 0x80;
        uint8_t options = cdb[2] & 0x07;
        uint32_t alloc_len = get_be32(cdb + 6);
        if (options == 0)
                return rsoc_all(task, rctd, alloc_len);
        if (options <= 3)
                return rsoc_one(task, options, rctd, alloc_len);
        return scsi_bad_cdb_field(task, 2, 2);
}
