/*
 * SCSI Command and Data-Out handling: collect write data (immediate, unsolicited,
 * solicited by R2T), execute, and answer with Data-In and/or SCSI Response.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "tandem/bufcache.h"
#include "tandem/log.h"

#define ISCSI_CMD_F      0x80
#define ISCSI_CMD_R      0x40
#define ISCSI_CMD_W      0x20
#define AHS_EXTENDED_CDB 1

static struct iscsi_task *task_get(struct iscsi_conn *c)
{
        struct iscsi_task *t = c->task_free;
        if (t) {
                c->task_free = t->free_next;
                memset(t, 0, sizeof(*t));
        } else {
                t = calloc(1, sizeof(*t));
                if (!t)
                        return NULL;
        }
        t->conn = c;
        c->tasks_active++;
        return t;
}

void iscsi_task_put(struct iscsi_conn *c, struct iscsi_task *t)
{
        scsi_task_release(&t->scsi);
        if (t->scsi.lun)
                scsi_lun_put(t->scsi.lun);
        t->scsi.lun = NULL;
        tdm_buf_put(t->wbuf, t->wbuf_cap);
        t->wbuf = NULL;
        c->collect_bytes -= t->wbuf_size;
        t->wbuf_size = 0;
        c->tasks_active--;
        t->free_next = c->task_free;
        c->task_free = t;
}

static void task_hash(struct iscsi_conn *c, struct iscsi_task *t)
{
        uint32_t b = t->itt % ISCSI_TASK_HASH;
        t->hash_next = c->tasks[b];
        c->tasks[b] = t;
        c->tasks_collecting++;
}

void iscsi_task_unhash(struct iscsi_conn *c, struct iscsi_task *t)
{
        struct iscsi_task **pp = &c->tasks[t->itt % ISCSI_TASK_HASH];
        while (*pp && *pp != t)
                pp = &(*pp)->hash_next;
        if (*pp) {
                *pp = t->hash_next;
                c->tasks_collecting--;
        }
        t->hash_next = NULL;
}

struct iscsi_task *iscsi_task_find(struct iscsi_conn *c, uint32_t itt)
{
        for (struct iscsi_task *t = c->tasks[itt % ISCSI_TASK_HASH]; t; t = t->hash_next)
                if (t->itt == itt)
                        return t;
        return NULL;
}

/* The executing tasks by ITT (only this connection's loop touches them). */
static void executing_add(struct iscsi_conn *c, struct iscsi_task *t)
{
        struct iscsi_task **head = &c->executing[t->itt % ISCSI_TASK_HASH];
        t->exec_next = *head;
        *head = t;
}

static void executing_del(struct iscsi_conn *c, struct iscsi_task *t)
{
        struct iscsi_task **pp = &c->executing[t->itt % ISCSI_TASK_HASH];
        while (*pp && *pp != t)
                pp = &(*pp)->exec_next;
        if (*pp)
                *pp = t->exec_next;
        t->exec_next = NULL;
}

/* An ITT a task of this connection holds: collecting its data or in the medium. */
static bool itt_in_use(struct iscsi_conn *c, uint32_t itt)
{
        if (iscsi_task_find(c, itt))
                return true;
        for (struct iscsi_task *t = c->executing[itt % ISCSI_TASK_HASH]; t; t = t->exec_next)
                if (t->itt == itt)
                        return true;
        return false;
}

void iscsi_conn_drop_tasks(struct iscsi_conn *c)
{
        for (int b = 0; b < ISCSI_TASK_HASH; b++) {
                while (c->tasks[b]) {
                        struct iscsi_task *t = c->tasks[b];
                        c->tasks[b] = t->hash_next;
                        c->tasks_collecting--;
                        iscsi_task_put(c, t);
                }
        }
}

/*
 * Residuals (RFC 7143 11.4.5.2) compare what the command transfers with the initiator's
 * Expected Data Transfer Length for that direction. A CDB that sends data (WRITE, WRITE
 * SAME, UNMAP, MODE SELECT, PR OUT, ...) transfers what its CDB asks to send
 * (scsi_cdb_data_out_len); without the W bit the initiator offered none of it, so all of it
 * is overflow. Any other command transfers its data-in.
 */
static void task_residual_basis(const struct iscsi_task *t, uint32_t *edtl, uint32_t *done)
{
        if (t->cdb_out) {
                *done = t->cdb_out;
                *edtl = (t->scsi.dir & SCSI_DIR_WRITE) ? t->edtl : 0;
                return;
        }
        *done = t->scsi.data_in_len;
        *edtl = t->edtl;
}

/* Residual flags (O 0x04, U 0x02 in Data-In and SCSI Response alike) and count. */
static void set_residual(uint8_t *flags, be32 *field, const struct iscsi_task *t)
{
        uint32_t edtl, done;
        task_residual_basis(t, &edtl, &done);
        if (done > edtl) {
                *flags |= ISCSI_FLAG_OVERFLOW;
                *field = be32_of(done - edtl);
        } else if (done < edtl) {
                *flags |= ISCSI_FLAG_UNDERFLOW;
                *field = be32_of(edtl - done);
        }
}

/*
 * Data-In PDUs for len bytes; returns how many were queued (the response's ExpDataSN).
 * A sequence ends (F bit) at every MaxBurstLength boundary and at the end.
 */
static uint32_t send_data_in(struct iscsi_conn *c, struct iscsi_task *t, uint32_t len,
                             bool with_status)
{
        const struct iscsi_session_params *p = &c->sess->params;
        uint32_t burst = p->max_burst ? p->max_burst : len;
        uint32_t max = p->max_xmit_dsl < burst ? p->max_xmit_dsl : burst;
        uint32_t datasn = 0;
        for (uint32_t off = 0; off < len;) {
                /* A PDU never straddles a burst boundary. */
                uint32_t room = burst - off % burst;
                uint32_t n = len - off;
                if (n > max)
                        n = max;
                if (n > room)
                        n = room;
                bool last = off + n >= len;
                struct iscsi_tx *tx = iscsi_tx_alloc(c);
                if (!tx)
                        return datasn;
                struct iscsi_data_in_hdr *h = (struct iscsi_data_in_hdr *)tx->hdr;
                h->opcode = ISCSI_OP_DATA_IN;
                h->itt = be32_of(t->itt);
                h->ttt = be32_of(ISCSI_RSVD_TAG);
                h->data_sn = be32_of(datasn++);
                h->offset = be32_of(off);
                if (last || (off + n) % burst == 0)
                        h->flags = ISCSI_FLAG_FINAL;
                if (last && with_status) {
                        h->flags |= ISCSI_FLAG_STATUS;
                        h->status = t->scsi.status;
                        set_residual(&h->flags, &h->residual, t);
                        iscsi_fill_sn(c, &h->sn, true);
                        tx->task_done = t;
                } else {
                        iscsi_fill_sn(c, &h->sn, false);
                        h->sn.stat_sn = be32_of(0); /* only with status */
                }
                tx->data = t->scsi.data_in + off;
                tx->data_len = n;
                iscsi_tx_seal(c, tx);
                iscsi_tx_queue(c, tx);
                off += n;
        }
        return datasn;
}

static void send_scsi_response(struct iscsi_conn *c, struct iscsi_task *t, uint32_t exp_datasn)
{
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx) {
                iscsi_task_put(c, t);
                return;
        }
        struct iscsi_scsi_rsp_hdr *h = (struct iscsi_scsi_rsp_hdr *)tx->hdr;
        h->opcode = ISCSI_OP_SCSI_RSP;
        h->flags = ISCSI_FLAG_FINAL;
        h->status = t->scsi.status;
        h->itt = be32_of(t->itt);
        iscsi_fill_sn(c, &h->sn, true);
        h->exp_data_sn = be32_of(exp_datasn);
        set_residual(&h->flags, &h->residual, t);
        if (t->scsi.sense_len) {
                /* Sense data lives in the task, which outlives this PDU (task_done). */
                uint8_t *seg = malloc(2u + t->scsi.sense_len);
                if (seg) {
                        put_be16(seg, t->scsi.sense_len);
                        memcpy(seg + 2, t->scsi.sense, t->scsi.sense_len);
                        tx->owned = seg;
                        tx->data = seg;
                        tx->data_len = 2u + t->scsi.sense_len;
                }
        }
        tx->task_done = t;
        iscsi_tx_seal(c, tx);
        iscsi_tx_queue(c, tx);
}

/* Send the result of an executed task; the task is released once its last PDU is sent. */
static void task_respond(struct iscsi_conn *c, struct iscsi_task *t)
{
        uint32_t len = t->scsi.data_in_len;
        if (len > t->edtl)
                len = t->edtl;
        if (!(t->scsi.dir & SCSI_DIR_READ))
                len = 0;
        if (len && t->scsi.status == SCSI_STATUS_GOOD) {
                send_data_in(c, t, len, true);
                return;
        }
        uint32_t datasn = len ? send_data_in(c, t, len, false) : t->r2t_sn;
        send_scsi_response(c, t, datasn);
}

static void task_finish(struct iscsi_conn *c, struct iscsi_task *t)
{
        if (t->scsi.lun) /* the LUN's histogram and the session's counters */
                scsi_task_record_done(&t->scsi, tdm_now_ns() - t->scsi.start_ns);
        t->state = ISCSI_TASK_DONE;
        task_respond(c, t);
}

/* The medium finished a command that waited for it (the connection's own loop). */
static void task_async_done(struct scsi_task *st)
{
        struct iscsi_task *t =
            (struct iscsi_task *)((char *)st - offsetof(struct iscsi_task, scsi));
        struct iscsi_conn *c = t->conn;
        executing_del(c, t);
        c->async_pending--;
        c->exec_data_bytes -= t->exec_bytes;
        t->exec_bytes = 0;
        if (c->state == ISCSI_CONN_CLOSED)
                iscsi_task_put(c, t);
        else
                task_finish(c, t);
        iscsi_conn_mark_dirty(c);
}

static void task_execute(struct iscsi_conn *c, struct iscsi_task *t)
{
        t->scsi.start_ns = tdm_now_ns();
        t->scsi.done = task_async_done;
        scsi_task_execute(&t->scsi);
        if (t->scsi.async) {
                t->state = ISCSI_TASK_EXECUTING;
                executing_add(c, t);
                c->async_pending++;
                t->exec_bytes = (t->scsi.dir & SCSI_DIR_READ) ? t->edtl : 0;
                c->exec_data_bytes += t->exec_bytes;
                return;
        }
        task_finish(c, t);
}

/* Fail a task before execution with a sense reason. */
static void task_fail(struct iscsi_conn *c, struct iscsi_task *t, enum scsi_reason reason)
{
        scsi_task_set_reason(&t->scsi, reason);
        t->state = ISCSI_TASK_DONE;
        send_scsi_response(c, t, t->r2t_sn);
}

static void send_r2t(struct iscsi_conn *c, struct iscsi_task *t, uint32_t off, uint32_t len)
{
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx)
                return;
        struct iscsi_r2t_hdr *h = (struct iscsi_r2t_hdr *)tx->hdr;
        h->opcode = ISCSI_OP_R2T;
        h->flags = ISCSI_FLAG_FINAL;
        iscsi_lun_encode(h->lun, t->scsi.lun_id);
        h->itt = be32_of(t->itt);
        if (t->r2t_sn == 0) {
                /* One TTT for every R2T of a task: Data-Out must copy it (RFC 7143 11.7.4). */
                t->ttt_base = c->next_ttt++;
                if (c->next_ttt == ISCSI_RSVD_TAG)
                        c->next_ttt = 1;
        }
        h->ttt = be32_of(t->ttt_base);
        iscsi_fill_sn(c, &h->sn, false);
        h->r2t_sn = be32_of(t->r2t_sn++);
        h->offset = be32_of(off);
        h->desired_len = be32_of(len);
        iscsi_tx_seal(c, tx);
        iscsi_tx_queue(c, tx);
}

/* Solicit the next bursts, keeping at most MaxOutstandingR2T in flight. */
static void task_solicit(struct iscsi_conn *c, struct iscsi_task *t)
{
        const struct iscsi_session_params *p = &c->sess->params;
        while (t->r2t_offset < t->want && t->r2t_outstanding < p->max_outstanding_r2t) {
                uint32_t len = t->want - t->r2t_offset;
                if (len > p->max_burst)
                        len = p->max_burst;
                send_r2t(c, t, t->r2t_offset, len);
                t->r2t_offset += len;
                t->r2t_outstanding++;
        }
}

/* Bytes a collecting task's buffer holds: what we solicit, or the unsolicited burst if longer. */
static uint32_t task_buf_len(const struct iscsi_task *t)
{
        return t->want > t->unsolicited_end ? t->want : t->unsolicited_end;
}

static bool task_data_complete(const struct iscsi_task *t)
{
        return t->received >= t->want && t->received >= t->unsolicited_end;
}

static int cmd_decode_cdb(struct iscsi_conn *c, struct iscsi_task *t, const uint8_t *bhs)
{
        const struct iscsi_scsi_cmd_hdr *h = (const struct iscsi_scsi_cmd_hdr *)bhs;
        memcpy(t->scsi.cdb, h->cdb, sizeof(h->cdb));
        t->scsi.cdb_len = 16;
        uint32_t ahs_len = iscsi_bhs_ahs_len(bhs);
        const uint8_t *ahs = bhs + ISCSI_BHS_LEN;
        while (ahs_len >= 4) {
                uint16_t len = get_be16(ahs);
                uint32_t seg = (4u + len + 3u) & ~3u;
                if (seg > ahs_len) {
                        log_warn("%s: AHS length %u overruns TotalAHSLength", c->peer, len);
                        return -EPROTO;
                }
                if (ahs[2] == AHS_EXTENDED_CDB && len >= 1 && len - 1 <= SCSI_CDB_MAX - 16) {
                        memcpy(t->scsi.cdb + 16, ahs + 4, len - 1u);
                        t->scsi.cdb_len = (uint8_t)(16 + len - 1);
                }
                ahs += seg;
                ahs_len -= seg;
        }
        return 0;
}

int iscsi_scsi_cmd(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len)
{
        const struct iscsi_scsi_cmd_hdr *h = (const struct iscsi_scsi_cmd_hdr *)bhs;
        struct iscsi_session *s = c->sess;
        uint32_t itt = be32_get(h->itt);
        if (itt_in_use(c, itt)) {
                log_warn("%s: ITT 0x%x already in use: rejected", c->peer, itt);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_TASK_IN_PROGRESS);
                return 0;
        }
        struct iscsi_task *t = task_get(c);
        if (!t) {
                iscsi_send_reject(c, bhs, ISCSI_REJECT_OUT_OF_RESOURCES);
                return 0;
        }
        t->itt = itt;
        t->cmdsn = be32_get(h->cmdsn);
        t->edtl = be32_get(h->edtl);
        t->immediate = iscsi_bhs_immediate(bhs);
        t->scsi.dir = (uint8_t)(((h->flags & ISCSI_CMD_R) ? SCSI_DIR_READ : 0) |
                                ((h->flags & ISCSI_CMD_W) ? SCSI_DIR_WRITE : 0));
        /* The data-out the initiator offers: none without the W bit, whatever the EDTL. */
        t->scsi.expected_len = (t->scsi.dir & SCSI_DIR_WRITE) ? t->edtl : 0;
        t->scsi.nexus = &s->nexus;
        t->scsi.target = s->target;
        if (cmd_decode_cdb(c, t, bhs) < 0) {
                iscsi_task_put(c, t);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_INVALID_PDU_FIELD);
                return 0;
        }
        uint64_t lun_id = 0;
        if (iscsi_lun_decode(h->lun, &lun_id)) {
                t->scsi.lun_id = lun_id;
                t->scsi.lun = iscsi_session_lun(s, lun_id);
        } else {
                t->scsi.lun_id = UINT64_MAX;
        }
        /*
         * What the CDB asks the initiator to send. A data-out CDB offered less (an EDTL below
         * it, 0, or no W bit) runs on whole blocks of what came, at most none, and is
         * answered with residual overflow (RFC 7143 11.4.5.2, FCP-4 9.4.2 a): a WRITE of 8
         * blocks with EDTL 0 writes nothing and says the 8 blocks were not transferred.
         * (FCP-4's other choice, CHECK CONDITION and INVALID FIELD IN COMMAND INFORMATION
         * UNIT, is LIO's; libiscsi's iSCSIResiduals tests want a) for WRITE AND VERIFY.)
         * Commands that need all their data (COMPARE AND WRITE, WRITE SAME, UNMAP, MODE
         * SELECT, PR OUT, EXTENDED COPY) refuse a short one with CHECK CONDITION.
         */
        t->cdb_out = scsi_cdb_data_out_len(t->scsi.cdb, t->scsi.lun);

        if (len && !(t->scsi.dir & SCSI_DIR_WRITE)) {
                log_warn("%s: immediate data on a command without W bit: rejected", c->peer);
                iscsi_task_put(c, t);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
        if (!(t->scsi.dir & SCSI_DIR_WRITE)) {
                task_execute(c, t);
                return 0;
        }

        const struct iscsi_session_params *p = &s->params;
        if (len > t->edtl || (len && !p->immediate_data) || len > p->first_burst) {
                log_warn("%s: immediate data of %u bytes breaks the negotiated limits: rejected",
                         c->peer, len);
                iscsi_task_put(c, t);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
        /* Unsolicited data the initiator will send whatever we answer. */
        t->unsolicited_end = len;
        if (!(h->flags & ISCSI_CMD_F) && !p->initial_r2t) {
                uint32_t fb = p->first_burst < t->edtl ? p->first_burst : t->edtl;
                if (fb > len)
                        t->unsolicited_end = fb;
        }
        if (t->edtl > ISCSI_MAX_XFER) {
                log_warn("%s: expected data transfer length %u is above our limit", c->peer,
                         t->edtl);
                t->scsi.field.byte = 0;
                task_fail(c, t, SR_INVALID_FIELD_CDB);
                return 0;
        }
        t->want = t->cdb_out < t->edtl ? t->cdb_out : t->edtl;

        uint32_t bufsz = task_buf_len(t);
        if (len >= t->want && t->unsolicited_end <= len) {
                /* All data came with the command. */
                if (len == 0) {
                        task_execute(c, t);
                        return 0;
                }
                bufsz = len;
        }
        if (c->collect_bytes + bufsz > c->write_data_max ||
            c->tasks_collecting >= ISCSI_COLLECTING_MAX) {
                /* Too much write data held for this initiator: it retries when some completes. */
                if (c->refused_full++ % 1024 == 0)
                        log_warn("%s: %s: TASK SET FULL (%llu refused on this connection)", c->peer,
                                 c->tasks_collecting >= ISCSI_COLLECTING_MAX
                                     ? "too many writes waiting for data"
                                     : "too much write data being collected",
                                 (unsigned long long)c->refused_full);
                task_fail(c, t, SR_TASK_SET_FULL);
                return 0;
        }
        size_t cap = 0;
        t->wbuf = tdm_buf_get(bufsz, &cap);
        t->wbuf_cap = cap;
        if (!t->wbuf) {
                task_fail(c, t, SR_INTERNAL_ERROR);
                return 0;
        }
        t->wbuf_size = (uint32_t)cap; /* what the buffer really takes */
        c->collect_bytes += cap;
        /* The command may wait for the medium: its data cannot stay in the receive buffer. */
        memcpy(t->wbuf, data, len);
        t->received = len;
        if (task_data_complete(t)) {
                t->scsi.data_out = t->wbuf;
                t->scsi.data_out_len = len < t->want ? len : t->want;
                task_execute(c, t);
                return 0;
        }
        t->r2t_offset = t->unsolicited_end > t->want ? t->want : t->unsolicited_end;
        t->state = ISCSI_TASK_COLLECTING;
        task_hash(c, t);
        task_solicit(c, t);
        return 0;
}

struct iscsi_task *iscsi_data_out_task(struct iscsi_conn *c, const uint8_t *bhs, uint32_t len)
{
        uint32_t itt = iscsi_bhs_itt(bhs);
        struct iscsi_task *t = iscsi_task_find(c, itt);
        if (!t) {
                /* Unsolicited data for a command we already answered (or aborted). */
                log_debug("%s: Data-Out for unknown ITT 0x%x ignored", c->peer, itt);
                return NULL;
        }
        const struct iscsi_data_out_hdr *h = (const struct iscsi_data_out_hdr *)bhs;
        uint32_t ttt = be32_get(h->ttt);
        uint32_t off = be32_get(h->offset);
        uint32_t bufsz = task_buf_len(t);
        if (off != t->received || len > bufsz - off) {
                log_warn(
                    "%s: Data-Out offset %u length %u out of sequence (have %u of %u): rejected",
                    c->peer, off, len, t->received, bufsz);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return NULL;
        }
        if (ttt != ISCSI_RSVD_TAG &&
            (t->r2t_sn == 0 || ttt != t->ttt_base || off + len > t->r2t_offset ||
             off < (t->unsolicited_end < t->want ? t->unsolicited_end : t->want))) {
                /* Solicited data carries the TTT of our R2T, for a range an R2T asked for. */
                log_warn("%s: Data-Out with TTT 0x%x for bytes %u+%u not solicited (ITT 0x%x): "
                         "rejected",
                         c->peer, ttt, off, len, itt);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_INVALID_PDU_FIELD);
                return NULL;
        }
        if (ttt == ISCSI_RSVD_TAG && off + len > t->unsolicited_end) {
                log_warn("%s: unsolicited Data-Out beyond FirstBurstLength: rejected", c->peer);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return NULL;
        }
        if (ttt == ISCSI_RSVD_TAG && iscsi_bhs_final(bhs) && off + len < t->unsolicited_end) {
                /* The unsolicited burst must reach min(FirstBurstLength, EDTL) (RFC 7143 13.14). */
                log_warn(
                    "%s: unsolicited burst ended at %u of %u bytes (ITT 0x%x): command aborted",
                    c->peer, off + len, t->unsolicited_end, itt);
                iscsi_task_unhash(c, t);
                task_fail(c, t, SR_ABORTED_COMMAND);
                return NULL;
        }
        uint32_t datasn = be32_get(h->data_sn);
        if (datasn != t->exp_datasn) {
                /* ErrorRecoveryLevel 0 cannot recover a sequence: the command fails. */
                log_warn("%s: Data-Out DataSN %u where %u was due (ITT 0x%x): command aborted",
                         c->peer, datasn, t->exp_datasn, itt);
                iscsi_task_unhash(c, t);
                task_fail(c, t, SR_ABORTED_COMMAND);
                return NULL;
        }
        /* DataSN counts within a sequence; DataSequenceInOrder makes sequences follow each other.
         */
        t->exp_datasn = iscsi_bhs_final(bhs) ? 0 : datasn + 1;
        return t;
}

void iscsi_data_out_landed(struct iscsi_conn *c, struct iscsi_task *t, const uint8_t *bhs,
                           uint32_t len)
{
        t->received += len;
        const struct iscsi_data_out_hdr *h = (const struct iscsi_data_out_hdr *)bhs;
        if (be32_get(h->ttt) != ISCSI_RSVD_TAG && iscsi_bhs_final(bhs) && t->r2t_outstanding > 0) {
                t->r2t_outstanding--;
                task_solicit(c, t);
        }
        if (!task_data_complete(t))
                return;
        iscsi_task_unhash(c, t);
        t->scsi.data_out = t->wbuf;
        t->scsi.data_out_len = t->received < t->want ? t->received : t->want;
        task_execute(c, t);
}

int iscsi_data_out(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len)
{
        struct iscsi_task *t = iscsi_data_out_task(c, bhs, len);
        if (!t)
                return 0;
        memcpy(t->wbuf + t->received, data, len);
        iscsi_data_out_landed(c, t, bhs, len);
        return 0;
}
