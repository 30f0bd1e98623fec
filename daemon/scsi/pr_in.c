/*
 * PERSISTENT RESERVE IN (SPC-4 6.16): READ KEYS, READ RESERVATION, REPORT CAPABILITIES and
 * READ FULL STATUS, each from one consistent copy of the state taken under state_lock.
 */
#include <stdlib.h>
#include <string.h>

#include "pr_model.h"
#include "scsi_internal.h"

#define HDR_LEN       8u
#define RESV_DESC_LEN 16u
#define FULL_DESC_LEN 24u
#define CAPS_LEN      8u
#define TID_MAX       (4u + SCSI_PORT_NAME_MAX)

/* REPORT CAPABILITIES bits. */
#define CAP_CRH    0x10 /* RESERVE/RELEASE as SPC-4 5.13.3 says */
#define CAP_ATP_C  0x04 /* ALL_TG_PT: every registration is one anyway */
#define CAP_PTPL_C 0x01 /* APTPL offered */
#define CAP_TMV    0x80 /* the type mask is valid */
/* ALLOW COMMANDS 011b: TEST UNIT READY through WE and EA; MODE SENSE, REPORT SUPPORTED
 * OPERATION CODES, READ DEFECT DATA (and the like) through Write Exclusive. */
#define CAP_ALLOW_COMMANDS (3u << 4)
#define CAP_PTPL_A         0x01

/* Type mask: byte 4 WR_EX_AR 0x80, EX_AC_RO 0x40, WR_EX_RO 0x20, EX_AC 0x08, WR_EX 0x02; byte 5
 * EX_AC_AR 0x01. */
#define TYPE_MASK_4 0xea
#define TYPE_MASK_5 0x01

static enum scsi_reason read_keys(struct scsi_task *task, const struct pr_state *st)
{
        uint8_t *d = scsi_data_in_alloc(task, HDR_LEN + 8 * st->nregs);
        if (!d)
                return SR_INTERNAL_ERROR;
        put_be32(d, st->generation);
        put_be32(d + 4, 8 * st->nregs);
        for (unsigned i = 0; i < st->nregs; i++)
                put_be64(d + HDR_LEN + 8 * i, st->regs[i].key);
        return SCSI_OK;
}

/* The reservation key of the reservation: the holder's, 0 for all registrants. */
static uint64_t reservation_key(const struct pr_state *st)
{
        for (unsigned i = 0; i < st->nregs; i++)
                if (st->regs[i].holder)
                        return st->regs[i].key;
        return 0;
}

static enum scsi_reason read_reservation(struct scsi_task *task, const struct pr_state *st)
{
        bool reserved = st->type != PR_TYPE_NONE;
        uint8_t *d = scsi_data_in_alloc(task, HDR_LEN + (reserved ? RESV_DESC_LEN : 0));
        if (!d)
                return SR_INTERNAL_ERROR;
        put_be32(d, st->generation);
        if (!reserved)
                return SCSI_OK;
        put_be32(d + 4, RESV_DESC_LEN);
        put_be64(d + HDR_LEN, reservation_key(st));
        d[HDR_LEN + 13] = (uint8_t)(st->scope << 4 | st->type);
        return SCSI_OK;
}

static enum scsi_reason report_capabilities(struct scsi_task *task, const struct pr_state *st)
{
        uint8_t *d = scsi_data_in_alloc(task, CAPS_LEN);
        if (!d)
                return SR_INTERNAL_ERROR;
        put_be16(d, CAPS_LEN);
        d[2] = CAP_CRH | CAP_ATP_C | CAP_PTPL_C;
        d[3] = CAP_TMV | CAP_ALLOW_COMMANDS | (st->aptpl ? CAP_PTPL_A : 0);
        d[4] = TYPE_MASK_4;
        d[5] = TYPE_MASK_5;
        return SCSI_OK;
}

/*
 * One descriptor per registration. ALL_TG_PT is 1 (a registration covers every target port
 * of the pair), so RELATIVE TARGET PORT IDENTIFIER is not defined and stays 0: both nodes
 * answer alike.
 */
static enum scsi_reason read_full_status(struct scsi_task *task, const struct pr_state *st)
{
        size_t cap = HDR_LEN + (size_t)st->nregs * (FULL_DESC_LEN + TID_MAX);
        uint8_t *d = scsi_data_in_alloc(task, (uint32_t)cap);
        if (!d)
                return SR_INTERNAL_ERROR;
        put_be32(d, st->generation);
        size_t at = HDR_LEN;
        bool all_reg = pr_type_all_registrants(st->type);
        for (unsigned i = 0; i < st->nregs; i++) {
                const struct pr_reg *r = &st->regs[i];
                uint8_t *desc = d + at;
                size_t tid = pr_tid_encode(r->name, desc + FULL_DESC_LEN, TID_MAX);
                put_be64(desc, r->key);
                desc[12] = 0x02; /* ALL_TG_PT */
                if (r->holder || (all_reg && st->type != PR_TYPE_NONE)) {
                        desc[12] |= 0x01; /* R_HOLDER */
                        desc[13] = (uint8_t)(st->scope << 4 | st->type);
                }
                put_be32(desc + 20, (uint32_t)tid);
                at += FULL_DESC_LEN + tid;
        }
        put_be32(d + 4, (uint32_t)(at - HDR_LEN));
        task->data_in_len = (uint32_t)at;
        return SCSI_OK;
}

enum scsi_reason spc_pr_in(struct scsi_task *task)
{
        struct scsi_lun_private *priv = scsi_lun_private(task->lun);
        struct pr_state *st = malloc(sizeof(*st));
        if (!st)
                return SR_INTERNAL_ERROR;
        pthread_mutex_lock(&priv->state_lock);
        memcpy(st, priv->pr,
               offsetof(struct pr_state, regs) + priv->pr->nregs * sizeof(st->regs[0]));
        pthread_mutex_unlock(&priv->state_lock);
        enum scsi_reason r;
        switch (task->cdb[1] & 0x1f) {
        case PR_IN_READ_KEYS:
                r = read_keys(task, st);
                break;
        case PR_IN_READ_RESERVATION:
                r = read_reservation(task, st);
                break;
        case PR_IN_REPORT_CAPABILITIES:
                r = report_capabilities(task, st);
                break;
        default:
                r = read_full_status(task, st);
                break;
        }
        free(st);
        if (r == SCSI_OK)
                scsi_data_in_limit(task, get_be16(task->cdb + 7));
        return r;
}
