/* Full feature phase PDUs other than SCSI data: NOP, Logout, Task Management, Text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "tandem/log.h"

int iscsi_nop_out(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len)
{
        const struct iscsi_req_hdr *q = (const struct iscsi_req_hdr *)bhs;
        uint32_t itt = be32_get(q->itt);
        uint32_t ttt = be32_get(q->word20);
        if (itt == ISCSI_RSVD_TAG) {
                /* An answer to our ping, or a one-way ping (must be immediate). */
                if (ttt != ISCSI_RSVD_TAG && ttt == c->nop_ttt)
                        c->nop_sent_ns = 0;
                return 0;
        }
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx)
                return 0;
        if (len) {
                tx->owned = malloc(len);
                if (!tx->owned) {
                        iscsi_tx_free(c, tx);
                        return 0;
                }
                memcpy(tx->owned, data, len);
                tx->data = tx->owned;
                tx->data_len = len;
        }
        struct iscsi_rsp_hdr *h = (struct iscsi_rsp_hdr *)tx->hdr;
        h->opcode = ISCSI_OP_NOP_IN;
        h->flags = ISCSI_FLAG_FINAL;
        memcpy(h->lun, q->lun, sizeof(h->lun));
        h->itt = q->itt;
        h->ttt = be32_of(ISCSI_RSVD_TAG);
        iscsi_fill_sn(c, &h->sn, true);
        iscsi_tx_seal(c, tx);
        iscsi_tx_queue(c, tx);
        return 0;
}

void iscsi_send_nop_ping(struct iscsi_conn *c)
{
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx)
                return;
        struct iscsi_rsp_hdr *h = (struct iscsi_rsp_hdr *)tx->hdr;
        h->opcode = ISCSI_OP_NOP_IN;
        h->flags = ISCSI_FLAG_FINAL;
        h->itt = be32_of(ISCSI_RSVD_TAG);
        c->nop_ttt = c->next_ttt++;
        if (c->next_ttt == ISCSI_RSVD_TAG)
                c->next_ttt = 1;
        h->ttt = be32_of(c->nop_ttt);
        iscsi_fill_sn(c, &h->sn, false);
        iscsi_tx_seal(c, tx);
        iscsi_tx_queue(c, tx);
}

enum logout_response {
        LOGOUT_CLOSED = 0,
        LOGOUT_CID_NOT_FOUND = 1,
        LOGOUT_RECOVERY_UNSUPPORTED = 2,
};

int iscsi_logout(struct iscsi_conn *c, const uint8_t *bhs)
{
        const struct iscsi_req_hdr *q = (const struct iscsi_req_hdr *)bhs;
        uint8_t reason = q->flags & 0x7f;
        uint16_t cid = (uint16_t)(be32_get(q->word20) >> 16);
        uint8_t response = LOGOUT_CLOSED;
        if (reason == 2)
                response = LOGOUT_RECOVERY_UNSUPPORTED;
        else if (reason == 1 && cid != c->login.cid)
                response = LOGOUT_CID_NOT_FOUND;
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx)
                return -ENOMEM;
        struct iscsi_rsp_hdr *h = (struct iscsi_rsp_hdr *)tx->hdr;
        h->opcode = ISCSI_OP_LOGOUT_RSP;
        h->flags = ISCSI_FLAG_FINAL;
        h->response = response;
        h->itt = q->itt;
        iscsi_fill_sn(c, &h->sn, true);
        iscsi_tx_seal(c, tx);
        if (response == LOGOUT_CLOSED) {
                tx->close_after = true;
                c->state = ISCSI_CONN_LOGOUT;
                log_info("%s: logout of %s (reason %u)", c->peer, c->sess->initiator, reason);
        }
        iscsi_tx_queue(c, tx);
        return 0;
}

enum tmf_function {
        TMF_ABORT_TASK = 1,
        TMF_ABORT_TASK_SET = 2,
        TMF_CLEAR_ACA = 3,
        TMF_CLEAR_TASK_SET = 4,
        TMF_LUN_RESET = 5,
        TMF_TARGET_WARM_RESET = 6,
        TMF_TARGET_COLD_RESET = 7,
        TMF_TASK_REASSIGN = 8,
};

enum tmf_response {
        TMF_RSP_COMPLETE = 0,
        TMF_RSP_NO_TASK = 1,
        TMF_RSP_NO_LUN = 2,
        TMF_RSP_REASSIGN_UNSUPPORTED = 4,
        TMF_RSP_UNSUPPORTED = 5,
        TMF_RSP_REJECTED = 255,
};

/* Abort every task still collecting data for lun (all LUNs when lun is UINT64_MAX). */
static void abort_lun_tasks(struct iscsi_conn *c, uint64_t lun)
{
        for (int b = 0; b < ISCSI_TASK_HASH; b++) {
                struct iscsi_task **pp = &c->tasks[b];
                while (*pp) {
                        struct iscsi_task *t = *pp;
                        if (lun == UINT64_MAX || t->scsi.lun_id == lun) {
                                *pp = t->hash_next;
                                c->tasks_collecting--;
                                iscsi_task_put(c, t);
                        } else {
                                pp = &t->hash_next;
                        }
                }
        }
}

static uint8_t tmf_abort_task(struct iscsi_conn *c, const struct iscsi_req_hdr *q)
{
        uint32_t rtt = be32_get(q->word20);
        uint32_t ref_cmdsn = be32_get(q->word32);
        struct iscsi_task *t = iscsi_task_find(c, rtt);
        if (t) {
                iscsi_task_unhash(c, t);
                iscsi_task_put(c, t);
                return TMF_RSP_COMPLETE;
        }
        /* Not here: answered already if its CmdSN is inside the window (RFC 7143 11.5.1). */
        struct iscsi_session *s = c->sess;
        if (iscsi_sn_le(s->exp_cmdsn, ref_cmdsn) &&
            iscsi_sn_le(ref_cmdsn, iscsi_session_max_cmdsn(s)))
                return TMF_RSP_COMPLETE;
        return TMF_RSP_NO_TASK;
}

/*
 * A reset is answered once each LU's records (the RESERVE it ended, its reset count) are
 * stored on every copy, or on a standby node once the serving node ran it (on the pool): the
 * other node's nexuses hear of it, and a peer promoted after the answer has it.
 */
struct tmf_store {
        struct net_work work; /* first */
        struct iscsi_conn *c;
        be32 itt;
        uint8_t response;
        bool cold;
        unsigned n;
        struct scsi_lun *luns[SCSI_MAX_LUNS];
};

/* lun's reset has its second half run before the answer (the collector holds a ref). */
static void tmf_store_add(struct tmf_store **st, struct scsi_lun *lun)
{
        if (!*st)
                *st = calloc(1, sizeof(**st));
        if (!*st) { /* no memory for the wait: stored here, the loop waits */
                scsi_lun_store_reset(lun);
                return;
        }
        scsi_lun_get(lun);
        (*st)->luns[(*st)->n++] = lun;
}

static void tmf_reset_lun(struct iscsi_conn *c, struct scsi_lun *lun, struct tmf_store **st)
{
        if (scsi_nexus_lun_reset(&c->sess->nexus, lun))
                tmf_store_add(st, lun);
}

static uint8_t tmf_lun_reset(struct iscsi_conn *c, uint64_t lun_id, struct tmf_store **st)
{
        struct scsi_lun *lun = scsi_target_get_lun(c->sess->target, lun_id);
        if (!lun)
                return TMF_RSP_NO_LUN;
        abort_lun_tasks(c, lun_id);
        tmf_reset_lun(c, lun, st);
        scsi_lun_put(lun);
        return TMF_RSP_COMPLETE;
}

/* ABORT TASK SET ends this nexus's tasks; CLEAR TASK SET also tells the other nexuses. */
static uint8_t tmf_task_set(struct iscsi_conn *c, uint64_t lun_id, bool clear)
{
        struct scsi_lun *lun = scsi_target_get_lun(c->sess->target, lun_id);
        if (!lun)
                return TMF_RSP_NO_LUN;
        abort_lun_tasks(c, lun_id);
        if (clear)
                scsi_nexus_clear_task_set(&c->sess->nexus, lun);
        scsi_lun_put(lun);
        return TMF_RSP_COMPLETE;
}

static uint8_t tmf_target_reset(struct iscsi_conn *c, struct tmf_store **st)
{
        abort_lun_tasks(c, UINT64_MAX);
        for (uint64_t id = 0; id < SCSI_MAX_LUNS; id++) {
                struct scsi_lun *lun = scsi_target_get_lun(c->sess->target, id);
                if (!lun)
                        continue;
                tmf_reset_lun(c, lun, st);
                scsi_lun_put(lun);
        }
        return TMF_RSP_COMPLETE;
}

static void tmf_respond(struct iscsi_conn *c, be32 itt, uint8_t response, bool cold)
{
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx)
                return;
        struct iscsi_rsp_hdr *h = (struct iscsi_rsp_hdr *)tx->hdr;
        h->opcode = ISCSI_OP_TMF_RSP;
        h->flags = ISCSI_FLAG_FINAL;
        h->response = response;
        h->itt = itt;
        iscsi_fill_sn(c, &h->sn, true);
        iscsi_tx_seal(c, tx);
        if (cold) {
                tx->close_after = true;
                c->state = ISCSI_CONN_LOGOUT;
        }
        iscsi_tx_queue(c, tx);
}

static void tmf_store_run(struct net_work *w)
{
        struct tmf_store *st = (struct tmf_store *)w;
        for (unsigned i = 0; i < st->n; i++)
                scsi_lun_store_reset(st->luns[i]);
}

/* The stores are done: the answer, unless the connection is gone or gave its final answer
 * (a Logout Response) meanwhile: nothing goes out after that one. */
static void tmf_store_answer(struct tmf_store *st)
{
        struct iscsi_conn *c = st->c;
        for (unsigned i = 0; i < st->n; i++)
                scsi_lun_put(st->luns[i]);
        if (c->state == ISCSI_CONN_FFP)
                tmf_respond(c, st->itt, st->response, st->cold);
        free(st);
}

/* Back on the connection's loop. */
static void tmf_store_done(struct net_work *w)
{
        struct iscsi_conn *c = ((struct tmf_store *)w)->c;
        c->async_pending--;
        tmf_store_answer((struct tmf_store *)w);
        iscsi_conn_mark_dirty(c);
}

int iscsi_tmf(struct iscsi_conn *c, const uint8_t *bhs)
{
        const struct iscsi_req_hdr *q = (const struct iscsi_req_hdr *)bhs;
        uint8_t function = q->flags & 0x7f;
        uint64_t lun = UINT64_MAX;
        bool lun_ok = iscsi_lun_decode(q->lun, &lun);
        uint8_t response;
        bool cold = false;
        struct tmf_store *st = NULL;
        switch (function) {
        case TMF_ABORT_TASK:
                response = tmf_abort_task(c, q);
                break;
        case TMF_ABORT_TASK_SET:
        case TMF_CLEAR_TASK_SET:
                response =
                    lun_ok ? tmf_task_set(c, lun, function == TMF_CLEAR_TASK_SET) : TMF_RSP_NO_LUN;
                break;
        case TMF_LUN_RESET:
                response = lun_ok ? tmf_lun_reset(c, lun, &st) : TMF_RSP_NO_LUN;
                break;
        case TMF_TARGET_WARM_RESET:
                response = tmf_target_reset(c, &st);
                break;
        case TMF_TARGET_COLD_RESET:
                /* A warm reset, then every session of the target ends (ours after the answer). */
                response = tmf_target_reset(c, &st);
                iscsi_sessions_drop_target(c->sess->target, c);
                cold = true;
                break;
        case TMF_TASK_REASSIGN:
                response = TMF_RSP_REASSIGN_UNSUPPORTED;
                break;
        case TMF_CLEAR_ACA:
                /* No ACA here (NACA is not supported): SAM-5 7.3 says function rejected. */
                response = TMF_RSP_REJECTED;
                break;
        default:
                response = TMF_RSP_UNSUPPORTED;
                break;
        }
        log_info("%s: task management function %u on LUN %llu: response %u", c->peer, function,
                 (unsigned long long)lun, response);
        if (st && st->n) {
                st->work.run = tmf_store_run;
                st->work.done = tmf_store_done;
                st->c = c;
                st->itt = q->itt;
                st->response = response;
                st->cold = cold;
                if (net_loop_current()) {
                        c->async_pending++; /* the connection outlives the wait */
                        net_pool_submit(&st->work);
                        return 0;
                }
                /* No loop to come back to (a tool, a fuzz harness): the pool's done would run
                 * on its thread beside this one, so the stores run here. */
                tmf_store_run(&st->work);
                tmf_store_answer(st);
                return 0;
        }
        free(st);
        tmf_respond(c, q->itt, response, cold);
        return 0;
}

int iscsi_text(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len)
{
        struct iscsi_session *s = c->sess;
        struct iscsi_text_env env = {
            .type = s->type,
            .initiator_name = s->initiator,
            .target_name = s->target_name,
            .portal = c->portal,
            .tpgt = c->login_env.tpgt,
            .max_xmit_dsl = s->params.max_xmit_dsl,
            .stat_sn = s->stat_sn,
            .exp_cmdsn = s->exp_cmdsn,
            .max_cmdsn = iscsi_session_max_cmdsn(s),
            .for_each_visible = iscsi_env()->for_each_visible,
        };
        struct iscsi_pdu_reply rep = {0};
        int rc = iscsi_text_handle(&c->text, &env, bhs, data, len, &rep);
        if (rc < 0) {
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx) {
                iscsi_pdu_reply_free(&rep);
                return 0;
        }
        memcpy(tx->hdr, rep.bhs, ISCSI_BHS_LEN);
        iscsi_fill_sn(c, &((struct iscsi_rsp_hdr *)tx->hdr)->sn, true);
        tx->owned = rep.data;
        tx->data = rep.data;
        tx->data_len = rep.data_len;
        tx->close_after = rep.close_after;
        iscsi_tx_seal(c, tx);
        iscsi_tx_queue(c, tx);
        return 0;
}
