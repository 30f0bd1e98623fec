/*
 * Medium access: READ, WRITE, WRITE AND VERIFY, VERIFY, ORWRITE, PRE-FETCH,
 * SYNCHRONIZE CACHE. Every handler decodes its CDB, checks the range and calls one
 * shared body. READ and WRITE allocate nothing but the data-in buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"

/* The blocks a command addresses and where its TRANSFER LENGTH field sits. */
struct sbc_range {
        uint64_t lba;
        uint32_t nblocks;
        uint8_t len_byte;
};

static struct sbc_range range10(const uint8_t *cdb)
{
        return (struct sbc_range){get_be32(cdb + 2), get_be16(cdb + 7), 7};
}

static struct sbc_range range12(const uint8_t *cdb)
{
        return (struct sbc_range){get_be32(cdb + 2), get_be32(cdb + 6), 6};
}

static struct sbc_range range16(const uint8_t *cdb)
{
        return (struct sbc_range){get_be64(cdb + 2), get_be32(cdb + 10), 10};
}

/* READ(6)/WRITE(6): 21-bit LBA, and a TRANSFER LENGTH of 0 means 256 blocks. */
static struct sbc_range range6(const uint8_t *cdb)
{
        uint32_t n = cdb[4] ? cdb[4] : 256;
        return (struct sbc_range){get_be24(cdb + 1) & 0x1fffff, n, 4};
}

static bool cdb_fua(const uint8_t *cdb)
{
        return cdb[1] & 0x08;
}

/* Range and size checks common to every command that moves blocks. */
static enum scsi_reason check_range(struct scsi_task *task, const struct sbc_range *r)
{
        struct scsi_lun *lun = task->lun;
        if (!scsi_lba_range_ok(lun, r->lba, r->nblocks))
                return SR_LBA_OUT_OF_RANGE;
        if ((uint64_t)r->nblocks * lun->block_size > SCSI_MAX_XFER_BYTES)
                return scsi_bad_cdb_field(task, r->len_byte, -1);
        return SCSI_OK;
}

/* Bytes the initiator sends or takes for the range, for residual accounting. */
static void set_xfer_len(struct scsi_task *task, const struct sbc_range *r)
{
        uint64_t bytes = (uint64_t)r->nblocks * task->lun->block_size;
        task->xfer_len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
}

static void read_done(struct scsi_task *task, int rc)
{
        if (rc < 0) {
                scsi_task_complete(task, scsi_io_error(task, "read", rc, false));
                return;
        }
        scsi_lun_count_bytes(task->lun, false, task->xfer_len);
        scsi_task_complete(task, SCSI_OK);
}

/* Reads straight into the data-in buffer: data_in_len == xfer_len == the CDB's bytes. */
static enum scsi_reason sbc_read(struct scsi_task *task, struct sbc_range r)
{
        struct scsi_lun *lun = task->lun;
        set_xfer_len(task, &r);
        enum scsi_reason rs = check_range(task, &r);
        if (rs != SCSI_OK || task->xfer_len == 0)
                return rs;
        uint8_t *buf = scsi_data_in_alloc_aligned(task, task->xfer_len);
        if (!buf)
                return SR_INTERNAL_ERROR;
        scsi_mio_start(task, TDM_MIO_READ, buf, r.lba * lun->block_size, task->xfer_len, 0,
                       read_done);
        return SCSI_PENDING;
}

/*
 * Writes the whole blocks the initiator sent, at most what the CDB asks for: an iSCSI
 * expected length below the CDB's writes less (the transport reports the residual).
 */
static uint32_t data_out_blocks_bytes(const struct scsi_task *task)
{
        uint32_t have = min_u32(task->data_out_len, task->xfer_len);
        return have - have % task->lun->block_size;
}

static void write_done(struct scsi_task *task, int rc)
{
        if (rc < 0) {
                scsi_task_complete(task, scsi_io_error(task, "write", rc, true));
                return;
        }
        scsi_lun_count_bytes(task->lun, true, task->mio.len);
        scsi_task_complete(task, SCSI_OK);
}

static enum scsi_reason write_blocks(struct scsi_task *task, const struct sbc_range *r, bool fua)
{
        struct scsi_lun *lun = task->lun;
        uint32_t len = data_out_blocks_bytes(task);
        if (len == 0)
                return SCSI_OK;
        scsi_mio_start(task, TDM_MIO_WRITE, task->data_out, r->lba * lun->block_size, len,
                       scsi_write_flags(task, fua), write_done);
        return SCSI_PENDING;
}

static enum scsi_reason sbc_write(struct scsi_task *task, struct sbc_range r, bool fua)
{
        set_xfer_len(task, &r);
        enum scsi_reason rs = check_range(task, &r);
        if (rs != SCSI_OK)
                return rs;
        return write_blocks(task, &r, fua);
}

enum scsi_reason sbc_read6(struct scsi_task *task)
{
        return sbc_read(task, range6(task->cdb));
}

enum scsi_reason sbc_read10(struct scsi_task *task)
{
        return sbc_read(task, range10(task->cdb));
}

enum scsi_reason sbc_read12(struct scsi_task *task)
{
        return sbc_read(task, range12(task->cdb));
}

enum scsi_reason sbc_read16(struct scsi_task *task)
{
        return sbc_read(task, range16(task->cdb));
}

enum scsi_reason sbc_write6(struct scsi_task *task)
{
        return sbc_write(task, range6(task->cdb), false);
}

enum scsi_reason sbc_write10(struct scsi_task *task)
{
        return sbc_write(task, range10(task->cdb), cdb_fua(task->cdb));
}

enum scsi_reason sbc_write12(struct scsi_task *task)
{
        return sbc_write(task, range12(task->cdb), cdb_fua(task->cdb));
}

enum scsi_reason sbc_write16(struct scsi_task *task)
{
        return sbc_write(task, range16(task->cdb), cdb_fua(task->cdb));
}

/* WRITE AND VERIFY: the data must be on the medium to be verified, so it is made durable. */
enum scsi_reason sbc_write_verify10(struct scsi_task *task)
{
        return sbc_write(task, range10(task->cdb), true);
}

enum scsi_reason sbc_write_verify12(struct scsi_task *task)
{
        return sbc_write(task, range12(task->cdb), true);
}

enum scsi_reason sbc_write_verify16(struct scsi_task *task)
{
        return sbc_write(task, range16(task->cdb), true);
}

/* Scratch buffer for read-modify commands: at most SCSI_OPT_XFER_BYTES, block aligned. */
static uint8_t *chunk_alloc(const struct scsi_lun *lun, uint64_t total, uint32_t *chunk)
{
        uint32_t max = SCSI_OPT_XFER_BYTES - SCSI_OPT_XFER_BYTES % lun->block_size;
        *chunk = (uint32_t)min_u64(total, max ? max : lun->block_size);
        void *buf = NULL;
        if (posix_memalign(&buf, SCSI_GRANULARITY_BYTES, *chunk))
                return NULL;
        return buf;
}

/* First differing byte of two buffers, or len when equal. */
static uint32_t first_difference(const uint8_t *a, const uint8_t *b, uint32_t len)
{
        if (memcmp(a, b, len) == 0)
                return len;
        uint32_t i = 0;
        while (a[i] == b[i])
                i++;
        return i;
}

/*
 * Compares the medium with the data-out buffer: BYTCHK 01b byte for byte, 11b one
 * block against every block. The INFORMATION field gets the offset of the first
 * miscompare within the data-out buffer.
 */
static enum scsi_reason verify_compare(struct scsi_task *task, const struct sbc_range *r,
                                       bool one_block)
{
        struct scsi_lun *lun = task->lun;
        uint32_t bs = lun->block_size;
        if (one_block && task->data_out_len < bs)
                return SCSI_OK; /* nothing was sent to compare with */
        uint64_t total = one_block ? (uint64_t)r->nblocks * bs : data_out_blocks_bytes(task);
        uint32_t chunk;
        uint8_t *buf = total ? chunk_alloc(lun, total, &chunk) : NULL;
        if (total && !buf)
                return SR_INTERNAL_ERROR;
        /* Taken after every early return: a lock left held stops every writer of the range. */
        struct tdm_range lock = {
            .off = r->lba * bs, .len = (uint64_t)r->nblocks * bs, .shared = true};
        tdm_range_lock_wait(lun->medium, &lock);
        enum scsi_reason rs = SCSI_OK;
        for (uint64_t done = 0; done < total && rs == SCSI_OK;) {
                uint32_t n = (uint32_t)min_u64(chunk, total - done);
                int rc = tdm_medium_read(lun->medium, buf, n, r->lba * bs + done);
                if (rc < 0) {
                        rs = scsi_io_error(task, "verify read", rc, false);
                        break;
                }
                for (uint32_t off = 0; off < n; off += bs) {
                        const uint8_t *expect =
                            one_block ? task->data_out : task->data_out + done + off;
                        uint32_t at = first_difference(buf + off, expect, bs);
                        if (at < bs) {
                                task->info = one_block ? at : done + off + at;
                                task->info_valid = true;
                                rs = SR_MISCOMPARE_VERIFY;
                                break;
                        }
                }
                done += n;
        }
        tdm_range_unlock(lun->medium, &lock);
        free(buf);
        return rs;
}

static enum scsi_reason verify_blocking(struct scsi_task *task)
{
        unsigned bytchk = (task->cdb[1] >> 1) & 0x03;
        const uint8_t *cdb = task->cdb;
        struct sbc_range r = cdb[0] == 0x2f   ? range10(cdb)
                             : cdb[0] == 0xaf ? range12(cdb)
                                              : range16(cdb);
        return verify_compare(task, &r, bytchk == 3);
}

static enum scsi_reason sbc_verify(struct scsi_task *task, struct sbc_range r)
{
        unsigned bytchk = (task->cdb[1] >> 1) & 0x03;
        if (bytchk == 2)
                return scsi_bad_cdb_field(task, 1, 2);
        task->xfer_len = scsi_cdb_data_out_len(task->cdb, task->lun);
        enum scsi_reason rs = check_range(task, &r);
        if (rs != SCSI_OK || bytchk == 0 || r.nblocks == 0)
                return rs; /* without BYTCHK there is no medium check to make */
        return scsi_task_block(task, verify_blocking);
}

enum scsi_reason sbc_verify10(struct scsi_task *task)
{
        return sbc_verify(task, range10(task->cdb));
}

enum scsi_reason sbc_verify12(struct scsi_task *task)
{
        return sbc_verify(task, range12(task->cdb));
}

enum scsi_reason sbc_verify16(struct scsi_task *task)
{
        return sbc_verify(task, range16(task->cdb));
}

/*
 * ORWRITE: medium = medium OR data-out, chunk by chunk. The write guard covers the reads
 * too, so they see no atomic write half done.
 */
static enum scsi_reason orwrite_blocks(struct scsi_task *task, const struct sbc_range *r)
{
        struct scsi_lun *lun = task->lun;
        uint64_t total = data_out_blocks_bytes(task);
        uint32_t chunk;
        if (total == 0)
                return SCSI_OK;
        uint8_t *buf = chunk_alloc(lun, total, &chunk);
        if (!buf)
                return SR_INTERNAL_ERROR;
        enum scsi_reason rs = SCSI_OK;
        struct tdm_range lock = {.off = r->lba * lun->block_size, .len = total};
        tdm_range_lock_wait(lun->medium, &lock);
        uint32_t flags = scsi_write_flags(task, cdb_fua(task->cdb));
        for (uint64_t done = 0; done < total;) {
                uint32_t n = (uint32_t)min_u64(chunk, total - done);
                uint64_t off = r->lba * lun->block_size + done;
                int rc = tdm_medium_read(lun->medium, buf, n, off);
                if (rc < 0) {
                        rs = scsi_io_error(task, "orwrite read", rc, false);
                        break;
                }
                for (uint32_t i = 0; i < n; i++)
                        buf[i] |= task->data_out[done + i];
                rc = tdm_medium_write(lun->medium, buf, n, off, flags);
                if (rc < 0) {
                        rs = scsi_io_error(task, "orwrite write", rc, true);
                        break;
                }
                done += n;
        }
        tdm_range_unlock(lun->medium, &lock);
        free(buf);
        if (rs == SCSI_OK)
                scsi_lun_count_bytes(lun, true, total);
        return rs;
}

static enum scsi_reason orwrite_blocking(struct scsi_task *task)
{
        struct sbc_range r = range16(task->cdb);
        return orwrite_blocks(task, &r);
}

enum scsi_reason sbc_orwrite16(struct scsi_task *task)
{
        struct sbc_range r = range16(task->cdb);
        set_xfer_len(task, &r);
        enum scsi_reason rs = check_range(task, &r);
        if (rs != SCSI_OK)
                return rs;
        return scsi_task_block(task, orwrite_blocking);
}

/* PRE-FETCH: a hint to the page cache; GOOD (not CONDITION MET) as nothing is reserved. */
static enum scsi_reason sbc_prefetch(struct scsi_task *task, struct sbc_range r)
{
        struct scsi_lun *lun = task->lun;
        if (!scsi_lba_range_ok(lun, r.lba, r.nblocks))
                return SR_LBA_OUT_OF_RANGE;
        if (r.nblocks && lun->medium->ops->prefetch)
                lun->medium->ops->prefetch(lun->medium, r.lba * lun->block_size,
                                           (uint64_t)r.nblocks * lun->block_size);
        return SCSI_OK;
}

enum scsi_reason sbc_prefetch10(struct scsi_task *task)
{
        return sbc_prefetch(task, range10(task->cdb));
}

enum scsi_reason sbc_prefetch16(struct scsi_task *task)
{
        return sbc_prefetch(task, range16(task->cdb));
}

static void flush_done(struct scsi_task *task, int rc)
{
        scsi_task_complete(task, rc < 0 ? scsi_io_error(task, "flush", rc, true) : SCSI_OK);
}

/* SYNCHRONIZE CACHE: everything written before is made durable (IMMED is served the same way). */
static enum scsi_reason sbc_sync_cache(struct scsi_task *task, struct sbc_range r)
{
        if (!scsi_lba_range_ok(task->lun, r.lba, r.nblocks))
                return SR_LBA_OUT_OF_RANGE;
        scsi_mio_start(task, TDM_MIO_FLUSH, NULL, 0, 0, 0, flush_done);
        return SCSI_PENDING;
}

enum scsi_reason sbc_sync_cache10(struct scsi_task *task)
{
        return sbc_sync_cache(task, range10(task->cdb));
}

enum scsi_reason sbc_sync_cache16(struct scsi_task *task)
{
        return sbc_sync_cache(task, range16(task->cdb));
}
