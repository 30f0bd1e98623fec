/*
 * EXTENDED COPY (LID1, SPC-4 6.4) with identification target descriptors (E4h, by NAA) and
 * block-to-block segments (02h, and 0Ah with byte counts), between LUNs of the target the
 * command came through. The parameter list is parsed completely before anything is copied
 * (xcopy_parse: pure, fuzzed); the copy runs on the pool through the media, so on a
 * replicated LUN it is replicated like any write.
 *
 * Each segment is read whole, then written with one request: a replicated destination gets
 * it in one frame, so after a failover the promoted copy of that segment is all old or all
 * new, never torn (the initiator resends the command). Hence the segment length limit.
 */
#include <stdlib.h>
#include <string.h>

#include "scsi_internal.h"
#include "tandem/log.h"
#include "xcopy.h"

#define HDR_LEN         16
#define TGT_DESC_LEN    32
#define SEG_B2B_LEN     (4 + 0x18)
#define SEG_B2B_OFF_LEN (4 + 0x1c)
#define TD_IDENT        0xe4
#define SD_BLOCK_BLOCK  0x02
#define SD_BLOCK_BYTES  0x0a
#define LIST_ID_NONE    0x03 /* LIST ID USAGE 11b: no list identifier, nothing held */

static enum scsi_reason param_field(struct scsi_field_ptr *f, uint32_t byte)
{
        *f = (struct scsi_field_ptr){.byte = (uint16_t)(byte > 0xffff ? 0xffff : byte)};
        return SR_INVALID_FIELD_PARAM;
}

/* An identification descriptor names a LU of this target by its NAA designator. */
static enum scsi_reason parse_target(const uint8_t *d, uint32_t at, struct xcopy_target *t,
                                     struct scsi_field_ptr *f)
{
        if (d[0] != TD_IDENT)
                return SR_UNSUPPORTED_TARGET_DESC;
        if ((d[1] & 0x1f) != 0) /* peripheral device type: block devices only */
                return param_field(f, at + 1);
        /* d[4..27]: a designation descriptor; the LU ID TYPE is ignored (SPC-4). */
        uint8_t assoc_type = d[5], len = d[7];
        if ((assoc_type & 0x30) != 0 || (assoc_type & 0x0f) != 3 || len != 16)
                return param_field(f, at + 5); /* not a LU's NAA: we could never find it */
        memcpy(t->naa, d + 8, 16);
        t->block_size = get_be24(d + 29);
        return SCSI_OK;
}

static enum scsi_reason parse_segment(const uint8_t *d, uint32_t avail, uint32_t at,
                                      struct xcopy_segment *s, uint32_t *len,
                                      struct scsi_field_ptr *f)
{
        if (avail < 4)
                return SR_PARAM_LIST_LENGTH_ERROR;
        *len = 4 + get_be16(d + 2);
        if (d[0] == SD_BLOCK_BLOCK && *len != SEG_B2B_LEN)
                return param_field(f, at + 2);
        if (d[0] == SD_BLOCK_BYTES && *len != SEG_B2B_OFF_LEN)
                return param_field(f, at + 2);
        if (d[0] != SD_BLOCK_BLOCK && d[0] != SD_BLOCK_BYTES)
                return SR_UNSUPPORTED_SEGMENT_DESC;
        if (avail < *len)
                return SR_PARAM_LIST_LENGTH_ERROR;
        *s = (struct xcopy_segment){.src = get_be16(d + 4),
                                    .dst = get_be16(d + 6),
                                    .src_lba = get_be64(d + 12),
                                    .dst_lba = get_be64(d + 20),
                                    .field = at};
        if (d[0] == SD_BLOCK_BLOCK) {
                s->blocks = get_be16(d + 10);
        } else {
                /* Byte offsets within a block are not supported: whole blocks only. */
                if (get_be16(d + 28) || get_be16(d + 30))
                        return param_field(f, at + 28);
                s->bytes = get_be32(d + 8);
        }
        return SCSI_OK;
}

enum scsi_reason xcopy_parse(const uint8_t *p, uint32_t len, struct xcopy_plan *plan,
                             struct scsi_field_ptr *f)
{
        memset(plan, 0, sizeof(*plan));
        if (len < HDR_LEN)
                return SR_PARAM_LIST_LENGTH_ERROR;
        plan->list_id = p[0];
        plan->list_id_usage = (p[1] >> 3) & 3;
        uint32_t tgt_len = get_be16(p + 2), seg_len = get_be32(p + 8),
                 inline_len = get_be32(p + 12);
        if (inline_len)
                return param_field(f, 12); /* MAXIMUM INLINE DATA LENGTH is 0 */
        if ((uint64_t)HDR_LEN + tgt_len + seg_len > len)
                return SR_PARAM_LIST_LENGTH_ERROR;
        if ((uint64_t)tgt_len + seg_len > XCOPY_MAX_DESC_LIST)
                return SR_PARAM_LIST_LENGTH_ERROR;
        if (tgt_len % TGT_DESC_LEN)
                return SR_PARAM_LIST_LENGTH_ERROR;
        if (tgt_len / TGT_DESC_LEN > XCOPY_MAX_TARGETS)
                return SR_TOO_MANY_TARGET_DESC;
        uint32_t at = HDR_LEN;
        for (; plan->n_targets < tgt_len / TGT_DESC_LEN; at += TGT_DESC_LEN) {
                enum scsi_reason r = parse_target(p + at, at, &plan->targets[plan->n_targets], f);
                if (r != SCSI_OK)
                        return r;
                plan->n_targets++;
        }
        uint32_t end = at + seg_len;
        while (at < end) {
                if (plan->n_segments == XCOPY_MAX_SEGMENTS)
                        return SR_TOO_MANY_SEGMENT_DESC;
                uint32_t dlen;
                enum scsi_reason r = parse_segment(p + at, end - at, at,
                                                   &plan->segments[plan->n_segments], &dlen, f);
                if (r != SCSI_OK)
                        return r;
                plan->n_segments++;
                at += dlen;
        }
        return SCSI_OK;
}

/* ---- running the plan ---- */

/* The LUN of this target with that NAA, referenced; NULL: not reachable from here. */
static struct scsi_lun *lun_by_naa(struct scsi_target *t, const uint8_t naa[16])
{
        for (uint64_t id = 0; t && id < SCSI_MAX_LUNS; id++) {
                struct scsi_lun *lun = scsi_target_get_lun(t, id);
                if (lun && memcmp(lun->naa, naa, 16) == 0)
                        return lun;
                scsi_lun_put(lun);
        }
        return NULL;
}

struct xcopy_run {
        struct scsi_task *task;
        struct scsi_lun *luns[XCOPY_MAX_TARGETS];
        uint16_t segments_done;
        uint64_t bytes_done;
};

/* Reads the source range whole, then writes it with one request (see the top). */
static enum scsi_reason copy_bytes(struct xcopy_run *run, struct scsi_lun *src,
                                   struct scsi_lun *dst, uint64_t src_off, uint64_t dst_off,
                                   uint64_t bytes)
{
        uint8_t *buf = NULL;
        if (posix_memalign((void **)&buf, SCSI_GRANULARITY_BYTES, bytes))
                return SR_INTERNAL_ERROR;
        struct tdm_range rl = {.off = src_off, .len = bytes, .shared = true};
        tdm_range_lock_wait(src->medium, &rl);
        int rc = tdm_medium_read(src->medium, buf, bytes, src_off);
        tdm_range_unlock(src->medium, &rl);
        enum scsi_reason r = SCSI_OK;
        if (rc < 0) {
                r = scsi_io_error(run->task, "extended copy read", rc, false);
        } else {
                struct tdm_range wl = {.off = dst_off, .len = bytes};
                tdm_range_lock_wait(dst->medium, &wl);
                rc = tdm_medium_write(dst->medium, buf, bytes, dst_off,
                                      atomic_load(&dst->wce) ? 0 : TDM_MIO_FUA);
                tdm_range_unlock(dst->medium, &wl);
                if (rc < 0)
                        r = scsi_io_error(run->task, "extended copy write", rc, true);
                else
                        scsi_lun_count_bytes(dst, true, bytes);
        }
        free(buf);
        return r;
}

static enum scsi_reason run_segment(struct xcopy_run *run, const struct xcopy_plan *plan,
                                    const struct xcopy_segment *s)
{
        if (s->src >= plan->n_targets || s->dst >= plan->n_targets || !run->luns[s->src] ||
            !run->luns[s->dst])
                return SR_COPY_TARGET_UNREACHABLE;
        struct scsi_lun *src = run->luns[s->src], *dst = run->luns[s->dst];
        if (src->block_size != dst->block_size)
                return SR_COPY_ABORTED; /* no conversion between block sizes */
        uint32_t bs = src->block_size;
        uint64_t bytes = s->bytes ? s->bytes : (uint64_t)s->blocks * bs;
        if (bytes % bs) {
                run->task->field = (struct scsi_field_ptr){.byte = (uint16_t)(s->field + 8)};
                return SR_INVALID_FIELD_PARAM;
        }
        if (bytes > XCOPY_MAX_SEGMENT_BYTES) {
                run->task->field =
                    (struct scsi_field_ptr){.byte = (uint16_t)(s->field + (s->bytes ? 8 : 10))};
                return SR_INVALID_FIELD_PARAM;
        }
        uint64_t n = bytes / bs;
        if (!scsi_lba_range_ok(src, s->src_lba, n) || !scsi_lba_range_ok(dst, s->dst_lba, n))
                return SR_COPY_ABORTED;
        if (n && scsi_lun_write_protected(dst))
                return SR_WRITE_PROTECTED;
        enum scsi_reason r =
            n ? copy_bytes(run, src, dst, s->src_lba * bs, s->dst_lba * bs, bytes) : SCSI_OK;
        if (r == SCSI_OK) {
                run->segments_done++;
                run->bytes_done += bytes;
        }
        return r;
}

static enum scsi_reason xcopy_blocking(struct scsi_task *task)
{
        struct xcopy_plan plan;
        enum scsi_reason r = xcopy_parse(task->data_out, task->xfer_len, &plan, &task->field);
        struct xcopy_run run = {.task = task};
        for (unsigned i = 0; r == SCSI_OK && i < plan.n_targets; i++)
                run.luns[i] = lun_by_naa(task->target, plan.targets[i].naa);
        for (unsigned i = 0; r == SCSI_OK && i < plan.n_segments; i++)
                r = run_segment(&run, &plan, &plan.segments[i]);
        for (unsigned i = 0; i < plan.n_targets; i++)
                scsi_lun_put(run.luns[i]);
        if (plan.list_id_usage != LIST_ID_NONE && task->nexus)
                xcopy_record_result(task->lun, task->nexus->id, plan.list_id, r == SCSI_OK,
                                    run.segments_done, run.bytes_done);
        return r;
}

enum scsi_reason spc_extended_copy(struct scsi_task *task)
{
        uint32_t param_len = get_be32(task->cdb + 10);
        task->xfer_len = param_len;
        if (param_len == 0)
                return SCSI_OK;
        if (task->data_out_len < param_len)
                return SR_PARAM_LIST_LENGTH_ERROR;
        /* Everything that can be judged without the media is judged here, on the worker. */
        struct xcopy_plan plan;
        enum scsi_reason r = xcopy_parse(task->data_out, param_len, &plan, &task->field);
        if (r != SCSI_OK)
                return r;
        return scsi_task_block(task, xcopy_blocking);
}
