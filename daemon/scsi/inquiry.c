/*
 * INQUIRY: standard data and the VPD pages 00h, 80h, 83h, B0h, B1h, B2h.
 * Works without a LUN (peripheral qualifier 011b) as SPC requires.
 */
#include <stdio.h>
#include <string.h>

#include "scsi_internal.h"

#define STD_INQUIRY_LEN 96
#define VPD_BUF_MAX     512

static const uint8_t supported_vpd[] = {0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2};

/* Version descriptors: SAM-5, iSCSI, SPC-4, SBC-3. */
static const uint16_t version_descriptors[] = {0x00a0, 0x0960, 0x0460, 0x04c0};

static uint8_t peripheral_byte(const struct scsi_task *task)
{
        return task->lun ? 0x00 : 0x7f; /* direct access block device, or no LUN here */
}

/* Copies s into a fixed-width space-padded ASCII field. */
static void put_ascii(uint8_t *dst, size_t width, const char *s)
{
        size_t n = strnlen(s, width);
        memset(dst, ' ', width);
        memcpy(dst, s, n);
}

static enum scsi_reason inquiry_standard(struct scsi_task *task, uint32_t alloc_len)
{
        uint8_t *d = scsi_data_in_alloc(task, STD_INQUIRY_LEN);
        d[0] = peripheral_byte(task);
        d[2] = 0x06;        /* SPC-4 */
        d[3] = 0x10 | 0x02; /* HISUP, response data format 2 */
        d[4] = STD_INQUIRY_LEN - 5;
        /* TPGS: 01b implicit ALUA; 11b implicit and explicit (alua.c, alua_stpg.c). */
        if (task->lun)
                d[5] = tdm_medium_access(task->lun->medium).explicit_alua ? 0x30 : 0x10;
        d[5] |= 0x08; /* 3PC: EXTENDED COPY (xcopy.c) */
        d[7] = 0x02;  /* CMDQUE */
        put_ascii(d + 8, 8, SCSI_VENDOR_ID);
        put_ascii(d + 16, 16, task->lun ? task->lun->product : "");
        put_ascii(d + 32, 4, SCSI_PRODUCT_REV);
        for (size_t i = 0; i < sizeof(version_descriptors) / sizeof(version_descriptors[0]); i++)
                put_be16(d + 58 + 2 * i, version_descriptors[i]);
        scsi_data_in_limit(task, alloc_len);
        return SCSI_OK;
}

/* VPD header; the page length is filled in by vpd_finish(). */
static uint8_t *vpd_begin(struct scsi_task *task, uint8_t page, uint32_t len)
{
        uint8_t *d = scsi_data_in_alloc(task, len);
        if (d) {
                d[0] = peripheral_byte(task);
                d[1] = page;
        }
        return d;
}

static void vpd_finish(struct scsi_task *task, uint32_t len, uint32_t alloc_len)
{
        put_be16(task->data_in + 2, (uint16_t)(len - 4));
        task->data_in_len = len;
        scsi_data_in_limit(task, alloc_len);
}

static enum scsi_reason vpd_supported_pages(struct scsi_task *task, uint32_t alloc_len)
{
        uint32_t len = 4 + sizeof(supported_vpd);
        uint8_t *d = vpd_begin(task, 0x00, len);
        memcpy(d + 4, supported_vpd, sizeof(supported_vpd));
        vpd_finish(task, len, alloc_len);
        return SCSI_OK;
}

static enum scsi_reason vpd_serial(struct scsi_task *task, uint32_t alloc_len)
{
        size_t n = strnlen(task->lun->serial, sizeof(task->lun->serial) - 1);
        uint8_t *d = vpd_begin(task, 0x80, (uint32_t)(4 + n));
        memcpy(d + 4, task->lun->serial, n);
        vpd_finish(task, (uint32_t)(4 + n), alloc_len);
        return SCSI_OK;
}

/* One designation descriptor; returns its total length. */
static uint32_t put_designator(uint8_t *p, uint8_t proto_codeset, uint8_t piv_assoc_type,
                               const void *id, uint32_t id_len)
{
        p[0] = proto_codeset;
        p[1] = piv_assoc_type;
        p[3] = (uint8_t)id_len;
        memcpy(p + 4, id, id_len);
        return 4 + id_len;
}

/* SCSI name string of the target device: the IQN, NUL terminated, padded to 4 bytes. */
static uint32_t put_target_name(uint8_t *p, const char *iqn)
{
        uint32_t n = (uint32_t)strnlen(iqn, 223) + 1;
        uint32_t padded = (n + 3) & ~3u;
        p[0] = 0x53; /* iSCSI, UTF-8 */
        p[1] = 0xa8; /* PIV, target device, SCSI name string */
        p[3] = (uint8_t)padded;
        memset(p + 4, 0, padded);
        memcpy(p + 4, iqn, n - 1);
        return 4 + padded;
}

static enum scsi_reason vpd_device_identification(struct scsi_task *task, uint32_t alloc_len)
{
        const struct scsi_lun *lun = task->lun;
        uint8_t *d = vpd_begin(task, 0x83, VPD_BUF_MAX);
        if (!d)
                return SR_INTERNAL_ERROR;
        uint32_t len = 4;
        /* Logical unit: NAA IEEE Registered Extended. */
        len += put_designator(d + len, 0x01, 0x03, lun->naa, sizeof(lun->naa));
        /* Logical unit: T10 vendor id + product + serial. */
        uint8_t t10[8 + 16 + 32];
        put_ascii(t10, 8, SCSI_VENDOR_ID);
        put_ascii(t10 + 8, 16, lun->product);
        size_t sn = strnlen(lun->serial, 32);
        memcpy(t10 + 24, lun->serial, sn);
        len += put_designator(d + len, 0x02, 0x01, t10, (uint32_t)(24 + sn));
        /* Target port: relative target port identifier and target port group (node id). */
        struct tdm_access a = tdm_medium_access(lun->medium);
        uint16_t id = a.local_id ? a.local_id : 1;
        uint8_t port[4] = {0, 0, (uint8_t)(id >> 8), (uint8_t)id};
        len += put_designator(d + len, 0x51, 0x94, port, 4);
        uint8_t group[4] = {0, 0, (uint8_t)(id >> 8), (uint8_t)id};
        len += put_designator(d + len, 0x51, 0x95, group, 4);
        if (task->target && task->target->iqn[0])
                len += put_target_name(d + len, task->target->iqn);
        vpd_finish(task, len, alloc_len);
        return SCSI_OK;
}

static enum scsi_reason vpd_third_party_copy(struct scsi_task *task, uint32_t alloc_len)
{
        uint8_t *d = vpd_begin(task, 0x8f, 512);
        if (!d)
                return SR_INTERNAL_ERROR;
        vpd_finish(task, 4 + scsi_vpd_third_party_copy(d + 4), alloc_len);
        return SCSI_OK;
}

static enum scsi_reason vpd_block_limits(struct scsi_task *task, uint32_t alloc_len)
{
        const struct scsi_lun *lun = task->lun;
        uint32_t bs = lun->block_size;
        uint8_t *d = vpd_begin(task, 0xb0, 64);
        /* WSNZ 0: WRITE SAME with 0 blocks means "to the end", within the length below. */
        d[5] = (uint8_t)scsi_caw_max_blocks(lun);
        put_be16(d + 6, (uint16_t)scsi_lun_granularity_blocks(lun));
        put_be32(d + 8, SCSI_MAX_XFER_BYTES / bs);
        put_be32(d + 12, SCSI_OPT_XFER_BYTES / bs);
        if (lun->thin) {
                put_be32(d + 20, SCSI_MAX_UNMAP_BLOCKS);
                put_be32(d + 24, SCSI_MAX_UNMAP_DESCRIPTORS);
                put_be32(d + 28, scsi_lun_granularity_blocks(lun));
        }
        put_be64(d + 36, SCSI_MAX_WS_BYTES / bs);
        /* Atomic writes: no alignment or granularity rule, no ATOMIC BOUNDARY (atomic.c). */
        uint32_t atomic_max = scsi_atomic_max_blocks(lun);
        put_be32(d + 44, atomic_max);
        put_be32(d + 48, atomic_max ? 1 : 0);
        put_be32(d + 52, atomic_max ? 1 : 0);
        vpd_finish(task, 64, alloc_len);
        return SCSI_OK;
}

static enum scsi_reason vpd_block_characteristics(struct scsi_task *task, uint32_t alloc_len)
{
        uint8_t *d = vpd_begin(task, 0xb1, 64);
        put_be16(d + 4, 0x0001); /* non-rotating medium */
        vpd_finish(task, 64, alloc_len);
        return SCSI_OK;
}

static enum scsi_reason vpd_provisioning(struct scsi_task *task, uint32_t alloc_len)
{
        uint8_t *d = vpd_begin(task, 0xb2, 8);
        if (task->lun->thin) {
                d[5] = 0x80 | 0x40 | 0x20 | 0x04; /* LBPU, LBPWS, LBPWS10, LBPRZ */
                d[6] = 0x02;                      /* thin provisioned */
        }
        vpd_finish(task, 8, alloc_len);
        return SCSI_OK;
}

static enum scsi_reason inquiry_vpd(struct scsi_task *task, uint8_t page, uint32_t alloc_len)
{
        if (!task->lun && page != 0x00)
                return SR_LUN_NOT_SUPPORTED;
        switch (page) {
        case 0x00:
                return vpd_supported_pages(task, alloc_len);
        case 0x80:
                return vpd_serial(task, alloc_len);
        case 0x83:
                return vpd_device_identification(task, alloc_len);
        case 0x8f:
                return vpd_third_party_copy(task, alloc_len);
        case 0xb0:
                return vpd_block_limits(task, alloc_len);
        case 0xb1:
                return vpd_block_characteristics(task, alloc_len);
        case 0xb2:
                return vpd_provisioning(task, alloc_len);
        }
        return scsi_bad_cdb_field(task, 2, -1);
}

enum scsi_reason spc_inquiry(struct scsi_task *task)
{
        const uint8_t *cdb = task->cdb;
        uint32_t alloc_len = get_be16(cdb + 3);
        if (cdb[1] & 0x01)
                return inquiry_vpd(task, cdb[2], alloc_len);
        if (cdb[2] != 0)
                return scsi_bad_cdb_field(task, 2, -1);
        return inquiry_standard(task, alloc_len);
}
