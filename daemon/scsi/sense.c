/*
 * The only place where a reason becomes a SCSI status and sense bytes.
 * Fixed format (0x70) by default; descriptor format (0x72) when asked for.
 */
#include <string.h>

#include "scsi_internal.h"

struct reason_info {
        const char *name;
        uint8_t status;
        uint8_t key;
        uint8_t asc;
        uint8_t ascq;
};

#define CC SCSI_STATUS_CHECK_CONDITION

static const struct reason_info reasons[SR_COUNT] = {
    [SCSI_OK] = {"GOOD", SCSI_STATUS_GOOD, 0x0, 0x00, 0x00},
    [SR_INVALID_OPCODE] = {"INVALID COMMAND OPERATION CODE", CC, 0x5, 0x20, 0x00},
    [SR_INVALID_FIELD_CDB] = {"INVALID FIELD IN CDB", CC, 0x5, 0x24, 0x00},
    [SR_INVALID_FIELD_PARAM] = {"INVALID FIELD IN PARAMETER LIST", CC, 0x5, 0x26, 0x00},
    [SR_PARAM_LIST_LENGTH_ERROR] = {"PARAMETER LIST LENGTH ERROR", CC, 0x5, 0x1a, 0x00},
    [SR_LBA_OUT_OF_RANGE] = {"LOGICAL BLOCK ADDRESS OUT OF RANGE", CC, 0x5, 0x21, 0x00},
    [SR_LUN_NOT_SUPPORTED] = {"LOGICAL UNIT NOT SUPPORTED", CC, 0x5, 0x25, 0x00},
    [SR_INVALID_RELEASE_OF_PR] = {"INVALID RELEASE OF PERSISTENT RESERVATION", CC, 0x5, 0x26, 0x04},
    [SR_INSUFFICIENT_REG_RESOURCES] = {"INSUFFICIENT REGISTRATION RESOURCES", CC, 0x5, 0x55, 0x04},
    [SR_SAVING_PARAMS_UNSUP] = {"SAVING PARAMETERS NOT SUPPORTED", CC, 0x5, 0x39, 0x00},
    [SR_MEDIUM_REMOVAL_PREVENTED] = {"MEDIUM REMOVAL PREVENTED", CC, 0x5, 0x53, 0x02},
    [SR_NOT_READY_MANUAL] = {"NOT READY, MANUAL INTERVENTION REQUIRED", CC, 0x2, 0x04, 0x03},
    [SR_NOT_READY_STANDBY] = {"NOT READY, TARGET PORT IN STANDBY STATE", CC, 0x2, 0x04, 0x0b},
    [SR_NOT_READY_UNAVAILABLE] = {"NOT READY, TARGET PORT IN UNAVAILABLE STATE", CC, 0x2, 0x04,
                                  0x0c},
    [SR_NOT_READY_TRANSITION] = {"NOT READY, ASYMMETRIC ACCESS STATE TRANSITION", CC, 0x2, 0x04,
                                 0x0a},
    [SR_MEDIUM_NOT_PRESENT] = {"MEDIUM NOT PRESENT", CC, 0x2, 0x3a, 0x00},
    [SR_READ_ERROR] = {"UNRECOVERED READ ERROR", CC, 0x3, 0x11, 0x00},
    [SR_WRITE_ERROR] = {"WRITE ERROR", CC, 0x3, 0x0c, 0x00},
    [SR_SPACE_ALLOC_FAILED] = {"SPACE ALLOCATION FAILED WRITE PROTECT", CC, 0x7, 0x27, 0x07},
    [SR_WRITE_PROTECTED] = {"WRITE PROTECTED", CC, 0x7, 0x27, 0x00},
    [SR_MISCOMPARE_VERIFY] = {"MISCOMPARE DURING VERIFY OPERATION", CC, 0xe, 0x1d, 0x00},
    [SR_UA_POWER_ON_RESET] = {"POWER ON, RESET, OR BUS DEVICE RESET OCCURRED", CC, 0x6, 0x29, 0x00},
    [SR_UA_BUS_DEVICE_RESET] = {"BUS DEVICE RESET FUNCTION OCCURRED", CC, 0x6, 0x29, 0x03},
    [SR_UA_TARGET_RESET] = {"SCSI BUS RESET OCCURRED", CC, 0x6, 0x29, 0x02},
    [SR_UA_MODE_PARAMS_CHANGED] = {"MODE PARAMETERS CHANGED", CC, 0x6, 0x2a, 0x01},
    [SR_UA_CAPACITY_CHANGED] = {"CAPACITY DATA HAS CHANGED", CC, 0x6, 0x2a, 0x09},
    [SR_UA_LUNS_CHANGED] = {"REPORTED LUNS DATA HAS CHANGED", CC, 0x6, 0x3f, 0x0e},
    [SR_UA_ALUA_STATE_CHANGED] = {"ASYMMETRIC ACCESS STATE CHANGED", CC, 0x6, 0x2a, 0x06},
    [SR_UA_RESERVATIONS_PREEMPTED] = {"RESERVATIONS PREEMPTED", CC, 0x6, 0x2a, 0x03},
    [SR_UA_RESERVATIONS_RELEASED] = {"RESERVATIONS RELEASED", CC, 0x6, 0x2a, 0x04},
    [SR_UA_REGISTRATIONS_PREEMPTED] = {"REGISTRATIONS PREEMPTED", CC, 0x6, 0x2a, 0x05},
    [SR_UA_NEXUS_LOSS] = {"I_T NEXUS LOSS OCCURRED", CC, 0x6, 0x29, 0x07},
    [SR_UA_CLEARED_BY_OTHER] = {"COMMANDS CLEARED BY ANOTHER INITIATOR", CC, 0x6, 0x2f, 0x00},
    [SR_RESERVATION_CONFLICT] = {"RESERVATION CONFLICT", SCSI_STATUS_RESERVATION_CONFLICT, 0, 0, 0},
    [SR_TASK_SET_FULL] = {"TASK SET FULL", SCSI_STATUS_TASK_SET_FULL, 0, 0, 0},
    [SR_BUSY] = {"BUSY", SCSI_STATUS_BUSY, 0, 0, 0},
    [SR_ABORTED_COMMAND] = {"ABORTED COMMAND", CC, 0xb, 0x00, 0x00},
    [SR_INTERNAL_ERROR] = {"INTERNAL TARGET FAILURE", CC, 0x4, 0x44, 0x00},
    [SR_TOO_MANY_TARGET_DESC] = {"TOO MANY TARGET DESCRIPTORS", CC, 0x5, 0x26, 0x06},
    [SR_UNSUPPORTED_TARGET_DESC] = {"UNSUPPORTED TARGET DESCRIPTOR TYPE CODE", CC, 0x5, 0x26, 0x07},
    [SR_TOO_MANY_SEGMENT_DESC] = {"TOO MANY SEGMENT DESCRIPTORS", CC, 0x5, 0x26, 0x08},
    [SR_UNSUPPORTED_SEGMENT_DESC] = {"UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE", CC, 0x5, 0x26,
                                     0x09},
    [SR_COPY_TARGET_UNREACHABLE] = {"COPY TARGET DEVICE NOT REACHABLE", CC, 0xa, 0x0d, 0x02},
    [SR_COPY_ABORTED] = {"COPY ABORTED", CC, 0xa, 0x00, 0x00},
    [SR_STPG_FAILED] = {"SET TARGET PORT GROUPS COMMAND FAILED", CC, 0x4, 0x67, 0x0a},
};

#undef CC

static const struct reason_info *reason_lookup(enum scsi_reason reason)
{
        if ((unsigned)reason >= SR_COUNT || !reasons[reason].name)
                return &reasons[SR_INTERNAL_ERROR];
        return &reasons[reason];
}

const char *scsi_reason_name(enum scsi_reason reason)
{
        if ((unsigned)reason >= SR_COUNT || !reasons[reason].name)
                return "UNKNOWN";
        return reasons[reason].name;
}

bool scsi_reason_has_sense(enum scsi_reason reason)
{
        return reason != SCSI_OK && reason_lookup(reason)->status == SCSI_STATUS_CHECK_CONDITION;
}

static bool reason_has_field_pointer(enum scsi_reason reason)
{
        return reason == SR_INVALID_FIELD_CDB || reason == SR_INVALID_FIELD_PARAM;
}

void scsi_reason_to_result(enum scsi_reason reason, const struct scsi_field_ptr *field,
                           struct tdm_forward_result *res)
{
        const struct reason_info *ri = reason_lookup(reason);
        *res = (struct tdm_forward_result){.status = ri->status,
                                           .key = ri->key,
                                           .asc = ri->asc,
                                           .ascq = ri->ascq,
                                           .field_bit = -1};
        if (reason_has_field_pointer(reason) && field) {
                res->field_valid = true;
                res->field_byte = field->byte;
                res->field_bit = field->bit_valid ? (int8_t)field->bit : -1;
        }
}

enum scsi_reason scsi_reason_from_result(const struct tdm_forward_result *res,
                                         struct scsi_field_ptr *field)
{
        for (unsigned r = 0; r < SR_COUNT; r++) {
                const struct reason_info *ri = &reasons[r];
                if (!ri->name || ri->status != res->status ||
                    (ri->status == SCSI_STATUS_CHECK_CONDITION &&
                     (ri->key != res->key || ri->asc != res->asc || ri->ascq != res->ascq)))
                        continue;
                if (reason_has_field_pointer((enum scsi_reason)r) && res->field_valid) {
                        field->byte = res->field_byte;
                        field->bit_valid = res->field_bit >= 0 && res->field_bit <= 7;
                        field->bit = field->bit_valid ? (uint8_t)res->field_bit : 0;
                }
                return (enum scsi_reason)r;
        }
        return SR_INTERNAL_ERROR; /* an answer this node has no name for */
}

/* Sense-key specific bytes: SKSV, C/D (CDB or parameter list), BPV + bit, field pointer. */
static void sense_key_specific(uint8_t *sks, enum scsi_reason reason,
                               const struct scsi_field_ptr *field)
{
        sks[0] = 0x80;
        if (reason == SR_INVALID_FIELD_CDB)
                sks[0] |= 0x40;
        if (field->bit_valid)
                sks[0] |= 0x08 | (field->bit & 0x07);
        put_be16(sks + 1, field->byte);
}

static uint8_t sense_fixed(uint8_t *buf, const struct reason_info *ri, enum scsi_reason reason,
                           const struct scsi_field_ptr *field, uint64_t info, bool info_valid)
{
        memset(buf, 0, 18);
        buf[0] = 0x70;
        buf[2] = ri->key;
        if (info_valid) {
                buf[0] |= 0x80;
                /* The fixed-format INFORMATION field holds 4 bytes. */
                put_be32(buf + 3, (uint32_t)(info > UINT32_MAX ? UINT32_MAX : info));
        }
        buf[7] = 10;
        buf[12] = ri->asc;
        buf[13] = ri->ascq;
        if (reason_has_field_pointer(reason) && field)
                sense_key_specific(buf + 15, reason, field);
        return 18;
}

static uint8_t sense_descriptor(uint8_t *buf, const struct reason_info *ri, enum scsi_reason reason,
                                const struct scsi_field_ptr *field, uint64_t info, bool info_valid)
{
        uint8_t len = 8;
        memset(buf, 0, 32);
        buf[0] = 0x72;
        buf[1] = ri->key;
        buf[2] = ri->asc;
        buf[3] = ri->ascq;
        if (info_valid) {
                uint8_t *d = buf + len;
                d[0] = 0x00; /* information descriptor */
                d[1] = 0x0a;
                d[2] = 0x80; /* VALID */
                put_be64(d + 4, info);
                len += 12;
        }
        if (reason_has_field_pointer(reason) && field) {
                uint8_t *d = buf + len;
                d[0] = 0x02; /* sense key specific descriptor */
                d[1] = 0x06;
                sense_key_specific(d + 4, reason, field);
                len += 8;
        }
        buf[7] = (uint8_t)(len - 8);
        return len;
}

uint8_t scsi_sense_format(uint8_t *buf, size_t cap, enum scsi_reason reason,
                          const struct scsi_field_ptr *field, uint64_t info, bool info_valid,
                          bool descriptor)
{
        uint8_t tmp[32];
        const struct reason_info *ri = reason_lookup(reason);
        uint8_t len = descriptor ? sense_descriptor(tmp, ri, reason, field, info, info_valid)
                                 : sense_fixed(tmp, ri, reason, field, info, info_valid);
        if (len > cap)
                len = (uint8_t)cap;
        memcpy(buf, tmp, len);
        return len;
}

/* The D_SENSE bit of the LUN's control mode page picks descriptor format. */
static bool task_wants_descriptor_sense(const struct scsi_task *task)
{
        return task->lun &&
               atomic_load_explicit(&scsi_lun_private(task->lun)->d_sense, memory_order_relaxed);
}

void scsi_sense_build(struct scsi_task *task, enum scsi_reason reason)
{
        const struct reason_info *ri = reason_lookup(reason);
        task->status = ri->status;
        task->sense_len = 0;
        if (!scsi_reason_has_sense(reason))
                return;
        task->sense_len =
            scsi_sense_format(task->sense, sizeof(task->sense), reason, &task->field, task->info,
                              task->info_valid, task_wants_descriptor_sense(task));
}

void scsi_task_set_reason(struct scsi_task *task, enum scsi_reason reason)
{
        if ((unsigned)reason >= SR_COUNT)
                reason = SR_INTERNAL_ERROR;
        task->reason = reason;
        scsi_sense_build(task, reason);
        if (task->nexus && task->sense_len) {
                memcpy(task->nexus->last_sense, task->sense, task->sense_len);
                task->nexus->last_sense_len = task->sense_len;
        }
}
