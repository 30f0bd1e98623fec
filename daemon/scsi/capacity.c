/* READ CAPACITY(10/16) and READ DEFECT DATA(10/12): what the medium looks like. */
#include "scsi_internal.h"

static uint64_t last_lba(const struct scsi_lun *lun)
{
        uint64_t n = atomic_load_explicit(&lun->num_blocks, memory_order_relaxed);
        return n ? n - 1 : 0;
}

/* SBC-3: with PMI clear the LOGICAL BLOCK ADDRESS field must be zero. */
static enum scsi_reason check_pmi(struct scsi_task *task, uint64_t lba, bool pmi, uint16_t byte)
{
        if (!pmi && lba != 0)
                return scsi_bad_cdb_field(task, byte, -1);
        return SCSI_OK;
}

enum scsi_reason sbc_read_capacity10(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        enum scsi_reason r = check_pmi(task, get_be32(task->cdb + 2), task->cdb[8] & 0x01, 2);
        if (r != SCSI_OK)
                return r;
        uint8_t *d = scsi_data_in_alloc(task, 8);
        uint64_t last = last_lba(lun);
        /* Larger than 32 bits: 0xffffffff sends the initiator to READ CAPACITY(16). */
        put_be32(d, last > UINT32_MAX ? UINT32_MAX : (uint32_t)last);
        put_be32(d + 4, lun->block_size);
        task->xfer_len = 8;
        return SCSI_OK;
}

enum scsi_reason sbc_read_capacity16(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        enum scsi_reason r = check_pmi(task, get_be64(task->cdb + 2), task->cdb[14] & 0x01, 2);
        if (r != SCSI_OK)
                return r;
        uint8_t *d = scsi_data_in_alloc(task, 32);
        put_be64(d, last_lba(lun));
        put_be32(d + 8, lun->block_size);
        /* byte 12: no protection information */
        d[13] = scsi_lun_lbppb_exponent(lun);
        if (lun->thin)
                d[14] = 0x80 | 0x40; /* LBPME, LBPRZ: unmapped blocks read as zeroes */
        scsi_data_in_limit(task, get_be32(task->cdb + 10));
        return SCSI_OK;
}

/* A virtual medium has no defects: a header with an empty list, in the format asked for. */
enum scsi_reason sbc_read_defect_data10(struct scsi_task *task)
{
        uint8_t *d = scsi_data_in_alloc(task, 4);
        d[1] = task->cdb[2] & 0x1f;
        scsi_data_in_limit(task, get_be16(task->cdb + 7));
        return SCSI_OK;
}

enum scsi_reason sbc_read_defect_data12(struct scsi_task *task)
{
        uint8_t *d = scsi_data_in_alloc(task, 8);
        d[1] = task->cdb[1] & 0x1f;
        scsi_data_in_limit(task, get_be32(task->cdb + 6));
        return SCSI_OK;
}
