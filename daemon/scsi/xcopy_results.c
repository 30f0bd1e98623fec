/*
 * RECEIVE COPY RESULTS (COPY STATUS, OPERATING PARAMETERS) and the Third-party Copy VPD page:
 * what the copy manager of a LUN tells about its limits and about finished copies.
 */
#include <pthread.h>
#include <string.h>

#include "xcopy.h"

#define SA_COPY_STATUS 0x00
#define SA_OP_PARAMS   0x03

/* COPY MANAGER STATUS codes. */
#define CM_DONE_OK     0x01
#define CM_DONE_ERRORS 0x02

struct copy_result {
        bool used;
        uint64_t nexus;
        uint8_t list_id;
        uint8_t status;
        uint16_t segments;
        uint64_t bytes;
};

/* Per process: few copies finish per second, and a result is asked for at once or never. */
static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
static struct copy_result results[XCOPY_RESULTS_KEPT];
static unsigned results_next;

void xcopy_record_result(struct scsi_lun *lun, uint64_t nexus, uint8_t list_id, bool ok,
                         uint16_t segments, uint64_t bytes)
{
        (void)lun;
        pthread_mutex_lock(&results_lock);
        struct copy_result *slot = NULL;
        for (unsigned i = 0; i < XCOPY_RESULTS_KEPT && !slot; i++)
                if (results[i].used && results[i].nexus == nexus && results[i].list_id == list_id)
                        slot = &results[i];
        if (!slot)
                slot = &results[results_next++ % XCOPY_RESULTS_KEPT];
        *slot = (struct copy_result){.used = true,
                                     .nexus = nexus,
                                     .list_id = list_id,
                                     .status = ok ? CM_DONE_OK : CM_DONE_ERRORS,
                                     .segments = segments,
                                     .bytes = bytes};
        pthread_mutex_unlock(&results_lock);
}

static enum scsi_reason copy_status(struct scsi_task *task, uint32_t alloc)
{
        uint8_t list_id = task->cdb[2];
        uint64_t nexus = task->nexus ? task->nexus->id : 0;
        struct copy_result r = {0};
        pthread_mutex_lock(&results_lock);
        for (unsigned i = 0; i < XCOPY_RESULTS_KEPT; i++)
                if (results[i].used && results[i].nexus == nexus && results[i].list_id == list_id)
                        r = results[i];
        pthread_mutex_unlock(&results_lock);
        if (!r.used)
                return scsi_bad_cdb_field(task, 2, -1); /* no such copy: LIST IDENTIFIER */
        uint8_t *d = scsi_data_in_alloc(task, 12);
        put_be32(d, 8);
        d[4] = r.status; /* HDD 0 */
        put_be16(d + 5, r.segments);
        d[7] = 0xf1; /* TRANSFER COUNT UNITS: kibibytes (2^10) */
        put_be32(d + 8, (uint32_t)(r.bytes >> 10));
        scsi_data_in_limit(task, alloc);
        return SCSI_OK;
}

static const uint8_t implemented_descriptors[] = {0x02, 0x0a, 0xe4};

static enum scsi_reason op_params(struct scsi_task *task, uint32_t alloc)
{
        uint32_t len = 44 + sizeof(implemented_descriptors);
        uint8_t *d = scsi_data_in_alloc(task, len);
        put_be32(d, len - 4);
        d[4] = 0x01; /* SNLID: a list with LIST ID USAGE 11b needs no identifier */
        put_be16(d + 8, XCOPY_MAX_TARGETS);
        put_be16(d + 10, XCOPY_MAX_SEGMENTS);
        put_be32(d + 12, XCOPY_MAX_DESC_LIST);
        put_be32(d + 16, XCOPY_MAX_SEGMENT_BYTES);
        put_be32(d + 20, 0); /* MAXIMUM INLINE DATA LENGTH */
        put_be32(d + 24, 0); /* HELD DATA LIMIT */
        put_be16(d + 34, 1); /* TOTAL CONCURRENT COPIES */
        d[36] = 1;           /* MAXIMUM CONCURRENT COPIES */
        d[37] = 9;           /* DATA SEGMENT GRANULARITY: 512 bytes (log2) */
        d[43] = sizeof(implemented_descriptors);
        memcpy(d + 44, implemented_descriptors, sizeof(implemented_descriptors));
        scsi_data_in_limit(task, alloc);
        return SCSI_OK;
}

enum scsi_reason spc_receive_copy_results(struct scsi_task *task)
{
        uint32_t alloc = get_be32(task->cdb + 10);
        switch (task->cdb[1] & 0x1f) {
        case SA_COPY_STATUS:
                return copy_status(task, alloc);
        case SA_OP_PARAMS:
                return op_params(task, alloc);
        default:
                return scsi_bad_cdb_field(task, 1, 4);
        }
}

/* ---- VPD 8Fh ---- */

/* One third-party copy descriptor: type, length (a multiple of 4 after padding). */
static uint32_t put_tpc_descriptor(uint8_t *p, uint16_t type, const uint8_t *body, uint32_t len)
{
        uint32_t padded = (len + 3) & ~3u;
        put_be16(p, type);
        put_be16(p + 2, (uint16_t)padded);
        memcpy(p + 4, body, len);
        memset(p + 4 + len, 0, padded - len);
        return 4 + padded;
}

uint32_t scsi_vpd_third_party_copy(uint8_t *d)
{
        uint32_t at = 0;
        /* Supported Commands: EXTENDED COPY(LID1); RECEIVE COPY RESULTS status, params. */
        static const uint8_t commands[] = {8, 0x83, 1, 0x00, 0x84, 2, 0x00, 0x03};
        at += put_tpc_descriptor(d + at, 0x0001, commands, sizeof(commands));
        /* Parameter Data: descriptor counts and the list length. */
        uint8_t params[28] = {0};
        put_be16(params + 4, XCOPY_MAX_TARGETS);
        put_be16(params + 6, XCOPY_MAX_SEGMENTS);
        put_be32(params + 8, XCOPY_MAX_DESC_LIST);
        at += put_tpc_descriptor(d + at, 0x0004, params, sizeof(params));
        /* Supported Descriptors. */
        uint8_t descs[1 + sizeof(implemented_descriptors)];
        descs[0] = sizeof(implemented_descriptors);
        memcpy(descs + 1, implemented_descriptors, sizeof(implemented_descriptors));
        at += put_tpc_descriptor(d + at, 0x0008, descs, sizeof(descs));
        /* General Copy Operations: concurrency, segment length, granularity. */
        uint8_t general[28] = {0};
        put_be32(general, 1);
        put_be32(general + 4, 1);
        put_be32(general + 8, XCOPY_MAX_SEGMENT_BYTES);
        general[12] = 9;
        at += put_tpc_descriptor(d + at, 0x8001, general, sizeof(general));
        return at;
}
