/*
 * MODE SENSE(6/10) and the mode pages. Pages: caching (08h, WCE changeable), control (0Ah,
 * D_SENSE and SWP changeable) and informational exceptions control (1Ch). Nothing is
 * savable. MODE SELECT is mode_select.c.
 */
#include <string.h>

#include "scsi_internal.h"

#define PAGE_ALL   0x3f
#define DSP_DPOFUA 0x10
#define DSP_WP     0x80

struct mode_page {
        uint8_t code;
        uint8_t len; /* including the two header bytes */
        void (*fill)(const struct scsi_lun *lun, enum scsi_mode_pc pc, uint8_t *p);
};

static void page_caching(const struct scsi_lun *lun, enum scsi_mode_pc pc, uint8_t *p)
{
        if (pc == SCSI_MODE_PC_CHANGEABLE)
                p[2] = 0x04;
        else if (pc == SCSI_MODE_PC_DEFAULT)
                p[2] = 0x04; /* WCE on by default: SYNCHRONIZE CACHE and FUA are honoured */
        else
                p[2] = atomic_load(&lun->wce) ? 0x04 : 0x00;
}

static void page_control(const struct scsi_lun *lun, enum scsi_mode_pc pc, uint8_t *p)
{
        const struct scsi_lun_private *priv = scsi_lun_private(lun);
        if (pc == SCSI_MODE_PC_CHANGEABLE) {
                p[2] = SCSI_CONTROL_D_SENSE;
                p[4] = SCSI_CONTROL_SWP;
                return;
        }
        p[2] = 0x02;             /* GLTSD: no log parameters are saved */
        p[3] = 0x10;             /* QUEUE ALGORITHM MODIFIER 1: unrestricted reordering */
        put_be16(p + 8, 0xffff); /* BUSY TIMEOUT PERIOD: unlimited */
        if (pc == SCSI_MODE_PC_CURRENT) {
                if (atomic_load(&priv->d_sense))
                        p[2] |= SCSI_CONTROL_D_SENSE;
                if (atomic_load(&priv->swp))
                        p[4] |= SCSI_CONTROL_SWP;
        }
}

static void page_informational_exceptions(const struct scsi_lun *lun, enum scsi_mode_pc pc,
                                          uint8_t *p)
{
        (void)lun;
        if (pc != SCSI_MODE_PC_CHANGEABLE)
                p[2] = 0x08; /* DEXCPT: no informational exception reporting */
}

static const struct mode_page mode_pages[] = {
    {0x08, 20, page_caching},
    {0x0a, 12, page_control},
    {0x1c, 12, page_informational_exceptions},
};

#define MODE_PAGES (sizeof(mode_pages) / sizeof(mode_pages[0]))

static const struct mode_page *mode_page_find(uint8_t code)
{
        for (size_t i = 0; i < MODE_PAGES; i++)
                if (mode_pages[i].code == code)
                        return &mode_pages[i];
        return NULL;
}

static uint32_t put_page(const struct scsi_lun *lun, const struct mode_page *mp,
                         enum scsi_mode_pc pc, uint8_t *p);

uint32_t scsi_mode_page_put(const struct scsi_lun *lun, uint8_t code, enum scsi_mode_pc pc,
                            uint8_t *p)
{
        const struct mode_page *mp = mode_page_find(code);
        return mp ? put_page(lun, mp, pc, p) : 0;
}

static uint32_t put_page(const struct scsi_lun *lun, const struct mode_page *mp,
                         enum scsi_mode_pc pc, uint8_t *p)
{
        memset(p, 0, mp->len);
        p[0] = mp->code;
        p[1] = (uint8_t)(mp->len - 2);
        mp->fill(lun, pc, p);
        return mp->len;
}

/* Block descriptor: short (8 bytes) or long LBA (16 bytes); not changeable. */
static uint32_t put_block_descriptor(const struct scsi_lun *lun, enum scsi_mode_pc pc, bool longlba,
                                     uint8_t *p)
{
        uint32_t len = longlba ? 16 : 8;
        memset(p, 0, len);
        if (pc == SCSI_MODE_PC_CHANGEABLE)
                return len;
        uint64_t blocks = atomic_load(&lun->num_blocks);
        if (longlba) {
                put_be64(p, blocks);
                put_be32(p + 12, lun->block_size);
        } else {
                put_be32(p, blocks > UINT32_MAX ? UINT32_MAX : (uint32_t)blocks);
                put_be32(p + 4, lun->block_size & 0xffffff);
        }
        return len;
}

/* Device-specific parameter: WP while write protected (read-only LUN or SWP), DPOFUA always. */
static uint8_t mode_device_specific(const struct scsi_lun *lun, enum scsi_mode_pc pc)
{
        if (pc == SCSI_MODE_PC_CHANGEABLE)
                return 0;
        if (pc == SCSI_MODE_PC_CURRENT && scsi_lun_write_protected(lun))
                return DSP_WP | DSP_DPOFUA;
        return DSP_DPOFUA;
}

struct mode_sense_req {
        bool ten; /* MODE SENSE(10) */
        bool dbd, llbaa;
        enum scsi_mode_pc pc;
        uint8_t page, subpage;
        uint32_t alloc_len;
};

static enum scsi_reason mode_sense_check(struct scsi_task *task, const struct mode_sense_req *rq)
{
        if (rq->pc == SCSI_MODE_PC_SAVED)
                return SR_SAVING_PARAMS_UNSUP;
        if (rq->page == PAGE_ALL) {
                if (rq->subpage != 0x00 && rq->subpage != 0xff)
                        return scsi_bad_cdb_field(task, 3, -1);
                return SCSI_OK;
        }
        if (!mode_page_find(rq->page))
                return scsi_bad_cdb_field(task, 2, 5);
        if (rq->subpage != 0x00 && rq->subpage != 0xff)
                return scsi_bad_cdb_field(task, 3, -1);
        return SCSI_OK;
}

static enum scsi_reason mode_sense(struct scsi_task *task, const struct mode_sense_req *rq)
{
        const struct scsi_lun *lun = task->lun;
        enum scsi_reason r = mode_sense_check(task, rq);
        if (r != SCSI_OK)
                return r;
        uint8_t *d = scsi_data_in_alloc(task, SCSI_MODE_BUF_MAX);
        uint32_t hdr = rq->ten ? 8 : 4;
        uint32_t len = hdr;
        bool longlba = rq->ten && rq->llbaa;
        if (!rq->dbd)
                len += put_block_descriptor(lun, rq->pc, longlba, d + len);
        uint32_t bd_len = len - hdr;
        for (size_t i = 0; i < MODE_PAGES; i++)
                if (rq->page == PAGE_ALL || rq->page == mode_pages[i].code)
                        len += put_page(lun, &mode_pages[i], rq->pc, d + len);
        uint8_t dsp = mode_device_specific(lun, rq->pc);
        if (rq->ten) {
                put_be16(d, (uint16_t)(len - 2));
                d[3] = dsp;
                d[4] = longlba ? 0x01 : 0x00;
                put_be16(d + 6, (uint16_t)bd_len);
        } else {
                d[0] = (uint8_t)(len - 1);
                d[2] = dsp;
                d[3] = (uint8_t)bd_len;
        }
        task->data_in_len = len;
        scsi_data_in_limit(task, rq->alloc_len);
        return SCSI_OK;
}

static struct mode_sense_req mode_sense_decode(const uint8_t *cdb, bool ten)
{
        return (struct mode_sense_req){
            .ten = ten,
            .dbd = cdb[1] & 0x08,
            .llbaa = ten && (cdb[1] & 0x10),
            .pc = (enum scsi_mode_pc)(cdb[2] >> 6),
            .page = cdb[2] & 0x3f,
            .subpage = cdb[3],
            .alloc_len = ten ? get_be16(cdb + 7) : cdb[4],
        };
}

enum scsi_reason spc_mode_sense6(struct scsi_task *task)
{
        struct mode_sense_req rq = mode_sense_decode(task->cdb, false);
        return mode_sense(task, &rq);
}

enum scsi_reason spc_mode_sense10(struct scsi_task *task)
{
        struct mode_sense_req rq = mode_sense_decode(task->cdb, true);
        return mode_sense(task, &rq);
}
