/*
 * Logical block provisioning: WRITE SAME(10/16) (with UNMAP on thin LUNs), UNMAP and
 * GET LBA STATUS. Thin LUNs deallocate (TDM_MIO_UNMAP) and read back zeroes (LBPRZ).
 * WRITE SAME and UNMAP run on the pool: they take several steps under one range lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

static enum scsi_reason lbp_io_error(struct scsi_task *task, const char *what, int rc)
{
        return scsi_io_error(task, what, rc, true);
}

static bool all_zero(const uint8_t *p, uint32_t len)
{
        for (uint32_t i = 0; i < len; i++)
                if (p[i])
                        return false;
        return true;
}

/* ---- WRITE SAME ---- */

struct write_same_req {
        uint64_t lba;
        uint64_t nblocks; /* 0 in the CDB: up to the last LBA */
        uint8_t len_byte;
        bool unmap, ndob;
};

/* Repeats one block over the range, a chunk at a time. */
static enum scsi_reason write_same_pattern(struct scsi_task *task, const struct write_same_req *rq)
{
        struct scsi_lun *lun = task->lun;
        uint32_t bs = lun->block_size;
        uint64_t total = (uint64_t)rq->nblocks * bs;
        uint32_t chunk = (uint32_t)min_u64(total, SCSI_OPT_XFER_BYTES - SCSI_OPT_XFER_BYTES % bs);
        void *buf = NULL;
        if (posix_memalign(&buf, SCSI_GRANULARITY_BYTES, chunk))
                return SR_INTERNAL_ERROR;
        for (uint32_t off = 0; off < chunk; off += bs)
                memcpy((uint8_t *)buf + off, task->data_out, bs);
        enum scsi_reason r = SCSI_OK;
        uint32_t flags = scsi_write_flags(task, false);
        for (uint64_t done = 0; done < total; done += chunk) {
                uint32_t n = (uint32_t)min_u64(chunk, total - done);
                int rc = tdm_medium_write(lun->medium, buf, n, rq->lba * bs + done, flags);
                if (rc < 0) {
                        r = lbp_io_error(task, "write same", rc);
                        break;
                }
        }
        free(buf);
        return r;
}

static enum scsi_reason write_same_check(struct scsi_task *task, struct write_same_req *rq)
{
        struct scsi_lun *lun = task->lun;
        uint64_t capacity = atomic_load(&lun->num_blocks);
        if (rq->lba > capacity)
                return SR_LBA_OUT_OF_RANGE;
        if (rq->nblocks == 0) /* WSNZ is 0: a zero length means "to the end of the LUN" */
                rq->nblocks = capacity - rq->lba;
        if (!scsi_lba_range_ok(lun, rq->lba, rq->nblocks))
                return SR_LBA_OUT_OF_RANGE;
        if (rq->nblocks > SCSI_MAX_WS_BYTES / lun->block_size)
                return scsi_bad_cdb_field(task, rq->len_byte, -1);
        if (rq->unmap && !lun->thin)
                return scsi_bad_cdb_field(task, 1, 3);
        /* Exactly one block of data, or none with NDOB. */
        uint32_t want = rq->ndob ? 0 : lun->block_size;
        if (task->expected_len != want || task->data_out_len < want)
                return scsi_bad_cdb_field(task, rq->len_byte, -1);
        return SCSI_OK;
}

/*
 * UNMAP (thin LUNs only) deallocates whatever the data-out block holds: the blocks then
 * read back as zeroes (LBPRZ). Initiators rely on that (libiscsi's WriteSame*.UnmapUntilEnd
 * unmaps with a 0xFF block and expects zeroes, as LIO does). Otherwise zeroes are written
 * cheaply and a pattern is copied.
 */
static enum scsi_reason write_same_store(struct scsi_task *task, const struct write_same_req *rq)
{
        struct scsi_lun *lun = task->lun;
        uint64_t off = rq->lba * lun->block_size;
        uint64_t len = rq->nblocks * lun->block_size;
        if (!rq->unmap && !rq->ndob && !all_zero(task->data_out, lun->block_size))
                return write_same_pattern(task, rq);
        int rc = tdm_medium_run(
            lun->medium, &(struct tdm_mio){.op = rq->unmap ? TDM_MIO_UNMAP : TDM_MIO_WRITE_ZEROES,
                                           .flags = scsi_write_flags(task, false),
                                           .off = off,
                                           .len = len});
        return rc < 0 ? lbp_io_error(task, rq->unmap ? "unmap" : "write zeroes", rc) : SCSI_OK;
}

#define WS_UNMAP 0x1u
#define WS_NDOB  0x2u

/* On the pool: the whole range locked while it is written. */
static enum scsi_reason write_same_blocking(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        struct write_same_req rq = {.lba = task->lba,
                                    .nblocks = task->nblocks,
                                    .unmap = task->op_flags & WS_UNMAP,
                                    .ndob = task->op_flags & WS_NDOB};
        struct tdm_range lock = {.off = rq.lba * lun->block_size,
                                 .len = rq.nblocks * lun->block_size};
        tdm_range_lock_wait(lun->medium, &lock);
        enum scsi_reason r = write_same_store(task, &rq);
        tdm_range_unlock(lun->medium, &lock);
        if (r == SCSI_OK)
                scsi_lun_count_bytes(lun, true, (uint64_t)rq.nblocks * lun->block_size);
        return r;
}

static enum scsi_reason write_same(struct scsi_task *task, struct write_same_req *rq)
{
        struct scsi_lun *lun = task->lun;
        task->xfer_len = rq->ndob ? 0 : lun->block_size;
        enum scsi_reason r = write_same_check(task, rq);
        if (r != SCSI_OK)
                return r;
        task->lba = rq->lba;
        task->nblocks = rq->nblocks;
        task->op_flags = (rq->unmap ? WS_UNMAP : 0) | (rq->ndob ? WS_NDOB : 0);
        return scsi_task_block(task, write_same_blocking);
}

enum scsi_reason sbc_write_same10(struct scsi_task *task)
{
        const uint8_t *cdb = task->cdb;
        struct write_same_req rq = {
            .lba = get_be32(cdb + 2),
            .nblocks = get_be16(cdb + 7),
            .len_byte = 7,
            .unmap = cdb[1] & 0x08,
        };
        return write_same(task, &rq);
}

enum scsi_reason sbc_write_same16(struct scsi_task *task)
{
        const uint8_t *cdb = task->cdb;
        struct write_same_req rq = {
            .lba = get_be64(cdb + 2),
            .nblocks = get_be32(cdb + 10),
            .len_byte = 10,
            .unmap = cdb[1] & 0x08,
            .ndob = cdb[1] & 0x01,
        };
        return write_same(task, &rq);
}

/* ---- UNMAP ---- */

#define UNMAP_HDR  8
#define UNMAP_DESC 16

/* Every descriptor is checked before anything is deallocated. */
static enum scsi_reason unmap_check(struct scsi_task *task, const uint8_t *p, uint32_t count)
{
        for (uint32_t i = 0; i < count; i++) {
                const uint8_t *d = p + UNMAP_HDR + UNMAP_DESC * i;
                uint64_t lba = get_be64(d);
                uint32_t n = get_be32(d + 8);
                if (!scsi_lba_range_ok(task->lun, lba, n))
                        return SR_LBA_OUT_OF_RANGE;
                if (n > SCSI_MAX_UNMAP_BLOCKS)
                        return scsi_bad_param_field(task,
                                                    (uint16_t)(UNMAP_HDR + UNMAP_DESC * i + 8), -1);
        }
        return SCSI_OK;
}

/* On the pool: each descriptor's range locked while it is deallocated. */
static enum scsi_reason unmap_blocking(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        const uint8_t *p = task->data_out;
        uint32_t count = task->op_flags;
        uint32_t flags = scsi_write_flags(task, false);
        uint64_t total = 0;
        for (uint32_t i = 0; i < count; i++) {
                const uint8_t *d = p + UNMAP_HDR + UNMAP_DESC * i;
                struct tdm_range lock = {.off = get_be64(d) * lun->block_size,
                                         .len = (uint64_t)get_be32(d + 8) * lun->block_size};
                tdm_range_lock_wait(lun->medium, &lock);
                int rc = tdm_medium_run(lun->medium, &(struct tdm_mio){.op = TDM_MIO_UNMAP,
                                                                       .flags = flags,
                                                                       .off = lock.off,
                                                                       .len = lock.len});
                tdm_range_unlock(lun->medium, &lock);
                if (rc < 0)
                        return lbp_io_error(task, "unmap", rc);
                total += lock.len;
        }
        scsi_lun_count_bytes(lun, true, total);
        return SCSI_OK;
}

enum scsi_reason sbc_unmap(struct scsi_task *task)
{
        uint32_t param_len = get_be16(task->cdb + 7);
        task->xfer_len = param_len;
        if (!task->lun->thin)
                return SR_INVALID_OPCODE; /* a fully provisioned LUN has no UNMAP */
        if (param_len == 0)
                return SCSI_OK;
        uint32_t avail = min_u32(param_len, task->data_out_len);
        if (avail < UNMAP_HDR)
                return SR_PARAM_LIST_LENGTH_ERROR;
        const uint8_t *p = task->data_out;
        uint32_t desc_bytes = min_u32(get_be16(p + 2), avail - UNMAP_HDR);
        uint32_t count = desc_bytes / UNMAP_DESC; /* a partial descriptor is ignored */
        if (count > SCSI_MAX_UNMAP_DESCRIPTORS)
                return scsi_bad_param_field(task, 2, -1);
        enum scsi_reason r = unmap_check(task, p, count);
        if (r != SCSI_OK || count == 0)
                return r;
        task->op_flags = count;
        return scsi_task_block(task, unmap_blocking);
}

/* ---- GET LBA STATUS ---- */

/* One run of blocks with the same provisioning status, from lba on (at most max blocks). */
static int lba_status_run(struct scsi_lun *lun, uint64_t lba, uint64_t max, bool *mapped,
                          uint64_t *blocks)
{
        uint32_t bs = lun->block_size;
        if (!lun->thin) {
                *mapped = true;
                *blocks = max;
                return 0;
        }
        struct tdm_lba_status st;
        int rc = lun->medium->ops->lba_status(lun->medium, lba * bs, max * bs, &st);
        if (rc < 0)
                return rc;
        uint64_t run = st.run_len;
        *mapped = st.mapped;
        /* A block partly allocated counts as mapped. */
        *blocks = *mapped ? (run + bs - 1) / bs : run / bs;
        if (*blocks == 0) {
                *mapped = true;
                *blocks = 1;
        }
        if (*blocks > max)
                *blocks = max;
        return 0;
}

enum scsi_reason sbc_get_lba_status(struct scsi_task *task)
{
        struct scsi_lun *lun = task->lun;
        uint64_t lba = get_be64(task->cdb + 2);
        uint32_t alloc_len = get_be32(task->cdb + 10);
        uint64_t capacity = atomic_load(&lun->num_blocks);
        if (lba >= capacity)
                return SR_LBA_OUT_OF_RANGE;
        uint32_t max_desc =
            alloc_len < 24 ? 1 : min_u32((alloc_len - 8) / 16, SCSI_GET_LBA_STATUS_MAX_DESC);
        uint8_t *d = scsi_data_in_alloc(task, 8 + 16 * max_desc);
        if (!d)
                return SR_INTERNAL_ERROR;
        uint32_t n = 0;
        while (n < max_desc && lba < capacity) {
                bool mapped;
                uint64_t blocks;
                int rc =
                    lba_status_run(lun, lba, min_u64(capacity - lba, UINT32_MAX), &mapped, &blocks);
                if (rc < 0)
                        return SR_READ_ERROR;
                uint8_t *p = d + 8 + 16 * n++;
                put_be64(p, lba);
                put_be32(p + 8, (uint32_t)blocks);
                p[12] = mapped ? 0x00 : 0x01; /* mapped, or deallocated */
                lba += blocks;
        }
        put_be32(d, 4 + 16 * n);
        task->data_in_len = 8 + 16 * n;
        scsi_data_in_limit(task, alloc_len);
        return SCSI_OK;
}
