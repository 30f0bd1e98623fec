/*
 * MODE SENSE(6/10) and MODE SELECT(6/10). Pages: caching (08h, WCE changeable),
 * control (0Ah, D_SENSE and SWP changeable) and informational exceptions control (1Ch).
 * Nothing is savable.
 * A MODE SELECT may only change changeable bits; a change raises MODE PARAMETERS
 * CHANGED on every other nexus.
 */
#include <string.h>

#include "scsi_internal.h"

#define PAGE_ALL        0x3f
#define MODE_BUF_MAX    128
#define DSP_DPOFUA      0x10
#define DSP_WP          0x80
#define CONTROL_D_SENSE 0x04 /* control page byte 2 */
#define CONTROL_SWP     0x08 /* control page byte 4 */

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
                p[2] = CONTROL_D_SENSE;
                p[4] = CONTROL_SWP;
                return;
        }
        p[2] = 0x02;             /* GLTSD: no log parameters are saved */
        p[3] = 0x10;             /* QUEUE ALGORITHM MODIFIER 1: unrestricted reordering */
        put_be16(p + 8, 0xffff); /* BUSY TIMEOUT PERIOD: unlimited */
        if (pc == SCSI_MODE_PC_CURRENT) {
                if (atomic_load(&priv->d_sense))
                        p[2] |= CONTROL_D_SENSE;
                if (atomic_load(&priv->swp))
                        p[4] |= CONTROL_SWP;
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
        uint8_t *d = scsi_data_in_alloc(task, MODE_BUF_MAX);
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

/* ---- MODE SELECT ---- */

/* New values of the changeable bits, applied once the whole list is valid. */
struct mode_changes {
        bool caching, control; /* pages present */
        bool wce, swp, d_sense;
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
static enum scsi_reason select_block_descriptor(struct scsi_task *task, const uint8_t *p,
                                                uint32_t off, uint32_t bd_len)
{
        const struct scsi_lun *lun = task->lun;
        uint64_t blocks = atomic_load(&lun->num_blocks);
        if (bd_len == 0)
                return SCSI_OK;
        if (bd_len == 8) {
                uint32_t n = get_be32(p + off);
                if (n != 0 && n != (blocks > UINT32_MAX ? UINT32_MAX : blocks))
                        return scsi_bad_param_field(task, (uint16_t)off, -1);
                if (get_be24(p + off + 5) != lun->block_size)
                        return scsi_bad_param_field(task, (uint16_t)(off + 5), -1);
                return SCSI_OK;
        }
        if (bd_len == 16) {
                uint64_t n = get_be64(p + off);
                if (n != 0 && n != blocks)
                        return scsi_bad_param_field(task, (uint16_t)off, -1);
                if (get_be32(p + off + 12) != lun->block_size)
                        return scsi_bad_param_field(task, (uint16_t)(off + 12), -1);
                return SCSI_OK;
        }
        return SR_PARAM_LIST_LENGTH_ERROR;
}

/* One page: only changeable bits may differ from the current values. */
static enum scsi_reason select_page(struct scsi_task *task, const uint8_t *p, uint32_t off,
                                    uint32_t avail, struct mode_changes *ch, uint32_t *used)
{
        if (avail - off < 2)
                return SR_PARAM_LIST_LENGTH_ERROR;
        const uint8_t *pg = p + off;
        if (pg[0] & 0x80) /* PS is reserved in MODE SELECT */
                return scsi_bad_param_field(task, (uint16_t)off, 7);
        if (pg[0] & 0x40) /* no subpages here */
                return scsi_bad_param_field(task, (uint16_t)off, 6);
        const struct mode_page *mp = mode_page_find(pg[0] & 0x3f);
        if (!mp)
                return scsi_bad_param_field(task, (uint16_t)off, 5);
        if (pg[1] + 2u != mp->len)
                return scsi_bad_param_field(task, (uint16_t)(off + 1), -1);
        if (avail - off < mp->len)
                return SR_PARAM_LIST_LENGTH_ERROR;
        uint8_t cur[MODE_BUF_MAX], chg[MODE_BUF_MAX];
        put_page(task->lun, mp, SCSI_MODE_PC_CURRENT, cur);
        put_page(task->lun, mp, SCSI_MODE_PC_CHANGEABLE, chg);
        for (uint32_t i = 2; i < mp->len; i++) {
                uint8_t bad = (uint8_t)((pg[i] ^ cur[i]) & ~chg[i]);
                if (bad)
                        return scsi_bad_param_field(task, (uint16_t)(off + i), top_bit(bad));
        }
        if (mp->code == 0x08) {
                ch->caching = true;
                ch->wce = pg[2] & 0x04;
        } else if (mp->code == 0x0a) {
                ch->control = true;
                ch->d_sense = pg[2] & CONTROL_D_SENSE;
                ch->swp = pg[4] & CONTROL_SWP;
        }
        *used = mp->len;
        return SCSI_OK;
}

static enum scsi_reason select_parse(struct scsi_task *task, bool ten, uint32_t avail,
                                     struct mode_changes *ch)
{
        const uint8_t *p = task->data_out;
        uint32_t hdr = ten ? 8 : 4;
        if (avail < hdr)
                return SR_PARAM_LIST_LENGTH_ERROR;
        uint32_t bd_len = ten ? get_be16(p + 6) : p[3];
        if (bd_len > avail - hdr)
                return SR_PARAM_LIST_LENGTH_ERROR;
        enum scsi_reason r = select_block_descriptor(task, p, hdr, bd_len);
        for (uint32_t off = hdr + bd_len, used = 0; r == SCSI_OK && off < avail; off += used)
                r = select_page(task, p, off, avail, ch, &used);
        return r;
}

/* Stores a new value; true if it differs from the old one. */
static bool set_flag(atomic_bool *flag, bool value)
{
        return atomic_exchange(flag, value) != value;
}

/* Applies the changes; true when the cache was turned off and must be flushed. */
static bool select_apply(struct scsi_task *task, const struct mode_changes *ch)
{
        struct scsi_lun *lun = task->lun;
        struct scsi_lun_private *priv = scsi_lun_private(lun);
        bool changed = false, flush = false;
        if (ch->caching && set_flag(&lun->wce, ch->wce)) {
                changed = true;
                /* Turning the cache off must not leave earlier cached writes volatile. */
                flush = !ch->wce;
        }
        if (ch->control) {
                changed |= set_flag(&priv->d_sense, ch->d_sense);
                changed |= set_flag(&priv->swp, ch->swp);
        }
        if (changed)
                scsi_lun_raise_ua(lun, SCSI_UA_MODE_CHANGED, task->nexus ? task->nexus->id : 0);
        return flush;
}

/* The flush after the cache went off: its failure is not the MODE SELECT's (as before). */
static void select_flushed(struct scsi_task *task, int rc)
{
        (void)rc;
        scsi_task_complete(task, SCSI_OK);
}

static enum scsi_reason mode_select(struct scsi_task *task, bool ten, uint32_t param_len)
{
        if (!(task->cdb[1] & 0x10)) /* PF: only the standard page format is understood */
                return scsi_bad_cdb_field(task, 1, 4);
        task->xfer_len = param_len;
        if (param_len == 0)
                return SCSI_OK;
        uint32_t avail = min_u32(param_len, task->data_out_len);
        struct mode_changes ch = {0};
        enum scsi_reason r = select_parse(task, ten, avail, &ch);
        if (r != SCSI_OK || !select_apply(task, &ch))
                return r;
        scsi_mio_start(task, TDM_MIO_FLUSH, NULL, 0, 0, 0, select_flushed);
        return SCSI_PENDING;
}

enum scsi_reason spc_mode_select6(struct scsi_task *task)
{
        return mode_select(task, false, task->cdb[4]);
}

enum scsi_reason spc_mode_select10(struct scsi_task *task)
{
        return mode_select(task, true, get_be16(task->cdb + 7));
}
