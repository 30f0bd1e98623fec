/*
 * Receiving PDUs: an explicit state machine over the connection's byte stream (RFC 7143
 * 11.2: BHS, AHS, header digest, data segment, data digest), then one dispatch table for
 * the full feature phase that checks the CmdSN window once, before any handler runs.
 *
 * Bytes arrive in the receive buffer (one recv brings many small PDUs). A PDU is judged
 * state by state while it sits there; a large Data-Out payload skips the buffer and lands
 * straight in its command's buffer. Refused bytes are read and dropped (RX_DISCARD).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"
#include "tandem/iscsi_hdr.h"
#include "tandem/log.h"

/* During login the default MaxRecvDataSegmentLength (8192) bounds every PDU (RFC 7143 13.12). */
#define LOGIN_DSL_LIMIT 8192
/* Data-Out payloads at least this large skip the receive buffer. */
#define DIRECT_RX_MIN (32 * 1024)

/* ---- the full feature phase's opcodes, as data ---- */

enum cmdsn_rule {
        CMDSN_NONE,    /* the PDU carries no CmdSN (Data-Out, SNACK) */
        CMDSN_WINDOW,  /* outside the window: dropped before the handler (RFC 7143 3.2.2.1) */
        CMDSN_ADVANCE, /* Logout: the window advances, the connection ends either way */
};

struct ffp_op {
        int (*handler)(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len);
        enum cmdsn_rule cmdsn;
        bool in_discovery; /* allowed in a discovery session */
        bool ahs;          /* may carry AHS (extended CDB) */
};

static int ffp_logout(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *d, uint32_t n)
{
        (void)d;
        (void)n;
        return iscsi_logout(c, bhs);
}

static int ffp_tmf(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *d, uint32_t n)
{
        (void)d;
        (void)n;
        return iscsi_tmf(c, bhs);
}

static int ffp_login_again(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *d, uint32_t n)
{
        (void)d;
        (void)n;
        log_warn("%s: login request in full feature phase: rejected", c->peer);
        iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
        return 0;
}

static int ffp_snack(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *d, uint32_t n)
{
        (void)d;
        (void)n;
        /* ErrorRecoveryLevel 0: SNACK is not supported. */
        iscsi_send_reject(c, bhs, ISCSI_REJECT_CMD_NOT_SUPPORTED);
        return 0;
}

static const struct ffp_op ffp_ops[64] = {
    [ISCSI_OP_NOP_OUT] = {iscsi_nop_out, CMDSN_WINDOW, true, false},
    [ISCSI_OP_SCSI_CMD] = {iscsi_scsi_cmd, CMDSN_WINDOW, false, true},
    [ISCSI_OP_TMF_REQ] = {ffp_tmf, CMDSN_WINDOW, false, false},
    [ISCSI_OP_LOGIN_REQ] = {ffp_login_again, CMDSN_NONE, true, false},
    [ISCSI_OP_TEXT_REQ] = {iscsi_text, CMDSN_WINDOW, true, false},
    [ISCSI_OP_DATA_OUT] = {iscsi_data_out, CMDSN_NONE, false, false},
    [ISCSI_OP_LOGOUT_REQ] = {ffp_logout, CMDSN_ADVANCE, true, false},
    [ISCSI_OP_SNACK] = {ffp_snack, CMDSN_NONE, false, false},
};

/*
 * ---- header rules, as data ----
 * RFC 7143 section 11: reserved fields are ignored, but "receipt of reserved code values in
 * defined fields MUST be reported as a protocol error"; fields that contradict each other are
 * an invalid PDU field. A PDU that breaks a rule gets a Reject and nothing else: in-window
 * commands have consumed their CmdSN (checked first, as for every command), and the
 * connection goes on.
 */
#define CMD_R    0x40
#define CMD_W    0x20
#define CMD_ATTR 0x07

static uint32_t bhs_word(const uint8_t *bhs, unsigned off)
{
        return get_be32(bhs + off);
}

/* 0xffffffff is the reserved tag (RFC 7143 11.2.1.8): no command, text or logout uses it. */
static bool itt_reserved(const uint8_t *bhs)
{
        return iscsi_bhs_itt(bhs) == ISCSI_RSVD_TAG;
}

/* 11.3.1.1: R and W MUST NOT both be 0 when the Expected Data Transfer Length is not 0. */
static bool cmd_no_direction(const uint8_t *bhs)
{
        return !(bhs[1] & (CMD_R | CMD_W)) && bhs_word(bhs, 20) != 0;
}

/*
 * 11.3.1.1: R and W both set is a bidirectional command, and no command here is one (SBC's
 * XDWRITEREAD and the like are not offered): the PDU describes a transfer no CDB has.
 */
static bool cmd_bidirectional(const uint8_t *bhs)
{
        return (bhs[1] & (CMD_R | CMD_W)) == (CMD_R | CMD_W);
}

/* 11.3.1.2: task attributes 5-7 are reserved. */
static bool cmd_attr_reserved(const uint8_t *bhs)
{
        return (bhs[1] & CMD_ATTR) > 4;
}

/* 11.5.1: functions 1-8 (and 9-12 of RFC 7144, answered "not supported"); 0, 13-127 reserved. */
static bool tmf_function_reserved(const uint8_t *bhs)
{
        uint8_t f = bhs[1] & 0x7f;
        return f == 0 || f > 12;
}

/* 11.14.1: reason codes 0-2; 3-127 are reserved. */
static bool logout_reason_reserved(const uint8_t *bhs)
{
        return (bhs[1] & 0x7f) > 2;
}

/* 11.18: a NOP-Out with ITT 0xffffffff (no answer wanted) MUST be immediate. */
static bool nop_unanswered_not_immediate(const uint8_t *bhs)
{
        return itt_reserved(bhs) && !iscsi_bhs_immediate(bhs);
}

/* 11.18.2: a NOP-Out that answers a ping (TTT set) MUST carry ITT 0xffffffff. */
static bool nop_answer_with_itt(const uint8_t *bhs)
{
        return !itt_reserved(bhs) && bhs_word(bhs, 20) != ISCSI_RSVD_TAG;
}

struct pdu_rule {
        uint8_t opcode;
        bool (*broken)(const uint8_t *bhs);
        uint8_t reason;
        const char *what;
};

static const struct pdu_rule pdu_rules[] = {
    {ISCSI_OP_SCSI_CMD, itt_reserved, ISCSI_REJECT_INVALID_PDU_FIELD, "ITT 0xffffffff"},
    {ISCSI_OP_SCSI_CMD, cmd_no_direction, ISCSI_REJECT_INVALID_PDU_FIELD,
     "Expected Data Transfer Length without R or W"},
    {ISCSI_OP_SCSI_CMD, cmd_bidirectional, ISCSI_REJECT_INVALID_PDU_FIELD,
     "R and W both set (no bidirectional commands)"},
    {ISCSI_OP_SCSI_CMD, cmd_attr_reserved, ISCSI_REJECT_PROTOCOL_ERROR, "reserved task attribute"},
    {ISCSI_OP_TMF_REQ, itt_reserved, ISCSI_REJECT_INVALID_PDU_FIELD, "ITT 0xffffffff"},
    {ISCSI_OP_TMF_REQ, tmf_function_reserved, ISCSI_REJECT_PROTOCOL_ERROR, "reserved function"},
    {ISCSI_OP_TEXT_REQ, itt_reserved, ISCSI_REJECT_INVALID_PDU_FIELD, "ITT 0xffffffff"},
    {ISCSI_OP_LOGOUT_REQ, itt_reserved, ISCSI_REJECT_INVALID_PDU_FIELD, "ITT 0xffffffff"},
    {ISCSI_OP_LOGOUT_REQ, logout_reason_reserved, ISCSI_REJECT_PROTOCOL_ERROR,
     "reserved reason code"},
    {ISCSI_OP_NOP_OUT, nop_unanswered_not_immediate, ISCSI_REJECT_INVALID_PDU_FIELD,
     "ITT 0xffffffff without the I bit"},
    {ISCSI_OP_NOP_OUT, nop_answer_with_itt, ISCSI_REJECT_INVALID_PDU_FIELD, "both ITT and TTT set"},
};

/* The first rule the PDU breaks, or NULL. */
static const struct pdu_rule *pdu_rule_broken(const uint8_t *bhs)
{
        uint8_t op = iscsi_bhs_opcode(bhs);
        for (size_t i = 0; i < sizeof(pdu_rules) / sizeof(pdu_rules[0]); i++)
                if (pdu_rules[i].opcode == op && pdu_rules[i].broken(bhs))
                        return &pdu_rules[i];
        return NULL;
}

static int ffp_dispatch(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len)
{
        uint8_t op = iscsi_bhs_opcode(bhs);
        const struct ffp_op *e = &ffp_ops[op];
        if (!e->handler) {
                log_warn("%s: unknown opcode 0x%02x: rejected", c->peer, op);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
        if (c->sess->type == ISCSI_SESSION_DISCOVERY && !e->in_discovery) {
                log_warn("%s: opcode 0x%02x in a discovery session: rejected", c->peer, op);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
        if (iscsi_bhs_ahs_len(bhs) && !e->ahs) {
                log_warn("%s: AHS on opcode 0x%02x: rejected", c->peer, op);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
        if (e->cmdsn != CMDSN_NONE && !iscsi_session_check_cmdsn(c->sess, bhs) &&
            e->cmdsn == CMDSN_WINDOW)
                return 0;
        const struct pdu_rule *rule = pdu_rule_broken(bhs);
        if (rule) {
                log_warn("%s: opcode 0x%02x with %s: rejected (reason 0x%02x)", c->peer, op,
                         rule->what, rule->reason);
                iscsi_send_reject(c, bhs, rule->reason);
                return 0;
        }
        return e->handler(c, bhs, data, len);
}

/* ---- the byte stream ---- */

/* One non-blocking receive: > 0 bytes, 0 when nothing is there now, < 0 closed or error. */
static ssize_t conn_recv(struct iscsi_conn *c, void *buf, size_t len)
{
        for (;;) {
                ssize_t n = recv(c->fd, buf, len, MSG_DONTWAIT);
                if (n > 0)
                        return n;
                if (n == 0)
                        return -ECONNRESET;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return 0;
                return -errno;
        }
}

static uint32_t buffered(const struct iscsi_conn *c)
{
        return c->rx_len - c->rx_off;
}

/* Room for need bytes from rx_off on: the buffer is compacted, and grown if it must. */
static int rx_reserve(struct iscsi_conn *c, uint32_t need)
{
        if (c->rx_off > 0) {
                memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
                c->rx_len -= c->rx_off;
                c->rx_off = 0;
        }
        if (need <= c->rx_cap)
                return 0;
        uint8_t *nb = realloc(c->rx, need);
        if (!nb)
                return -ENOMEM;
        c->rx = nb;
        c->rx_cap = need;
        return 0;
}

static bool digest_ok(const uint8_t *p, uint32_t len)
{
        uint32_t crc = iscsi_crc32c(p, len, ISCSI_CRC32C_SEED) ^ ISCSI_CRC32C_SEED;
        return crc == get_le32(p + len);
}

static bool header_digest_on(const struct iscsi_conn *c)
{
        return c->state == ISCSI_CONN_FFP && c->sess->params.header_digest;
}

static bool data_digest_on(const struct iscsi_conn *c)
{
        return c->state == ISCSI_CONN_FFP && c->sess->params.data_digest;
}

/* ---- the states ---- */

static void rx_next_pdu(struct iscsi_conn *c)
{
        c->rx_st = (struct iscsi_rx){.state = RX_BHS};
}

/*
 * A login PDU above the login-phase limit: its payload is read and dropped (closing with
 * unread data would reset the connection and lose our answer), then the login fails with
 * an initiator error.
 */
static void login_refuse_oversized(struct iscsi_conn *c, const uint8_t *pdu, uint32_t dsl)
{
        log_warn("%s: login PDU with %u bytes of text (limit %u): login refused", c->peer, dsl,
                 LOGIN_DSL_LIMIT);
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (tx) {
                const struct iscsi_req_hdr *q = (const struct iscsi_req_hdr *)pdu;
                struct iscsi_login_rsp_hdr *h = (struct iscsi_login_rsp_hdr *)tx->hdr;
                h->opcode = ISCSI_OP_LOGIN_RSP;
                memcpy(h->isid, pdu + 8, sizeof(h->isid));
                h->itt = q->itt;
                h->sn.stat_sn = q->exp_stat_sn;
                h->sn.exp_cmdsn = q->cmdsn;
                h->sn.max_cmdsn = q->cmdsn;
                h->status_class = ISCSI_LOGIN_INITIATOR_ERROR >> 8;
                h->status_detail = ISCSI_LOGIN_INITIATOR_ERROR & 0xff;
                tx->close_after = true;
                iscsi_tx_seal(c, tx);
        }
        uint32_t total = ISCSI_BHS_LEN + iscsi_bhs_ahs_len(pdu) + dsl + iscsi_pad4(dsl);
        uint32_t have = buffered(c) < total ? buffered(c) : total;
        c->rx_off += have;
        c->rx_st = (struct iscsi_rx){.state = RX_DISCARD, .discard_left = total - have};
        c->discard_reply = tx;
        c->state = ISCSI_CONN_LOGOUT; /* parse nothing more */
}

/* RX_BHS: the segment lengths are judged before a byte of data is taken. */
static int rx_bhs(struct iscsi_conn *c)
{
        const uint8_t *pdu = c->rx + c->rx_off;
        bool ffp = c->state == ISCSI_CONN_FFP;
        uint32_t dsl = iscsi_bhs_dsl(pdu);
        uint32_t limit = ffp ? c->sess->params.max_recv_dsl : LOGIN_DSL_LIMIT;
        if (!ffp && dsl > limit && iscsi_bhs_opcode(pdu) == ISCSI_OP_LOGIN_REQ) {
                login_refuse_oversized(c, pdu, dsl);
                return 0;
        }
        if (dsl > limit) {
                log_warn("%s: DataSegmentLength %u above the negotiated %u: closing", c->peer, dsl,
                         limit);
                return -EPROTO;
        }
        struct iscsi_rx *rx = &c->rx_st;
        rx->ahs_len = iscsi_bhs_ahs_len(pdu);
        rx->dsl = dsl;
        rx->pos = ISCSI_BHS_LEN;
        rx->state = rx->ahs_len ? RX_AHS : header_digest_on(c) ? RX_HDIGEST : RX_DATA;
        return 0;
}

static int rx_ahs(struct iscsi_conn *c)
{
        struct iscsi_rx *rx = &c->rx_st;
        if (c->state != ISCSI_CONN_FFP) {
                log_warn("%s: AHS on a login PDU: closing", c->peer);
                return -EPROTO;
        }
        rx->pos += rx->ahs_len;
        rx->state = header_digest_on(c) ? RX_HDIGEST : RX_DATA;
        return 0;
}

static int rx_hdigest(struct iscsi_conn *c)
{
        struct iscsi_rx *rx = &c->rx_st;
        if (!digest_ok(c->rx + c->rx_off, rx->pos)) {
                log_warn("%s: header digest mismatch: closing", c->peer);
                return -EPROTO;
        }
        rx->pos += ISCSI_DIGEST_LEN;
        rx->state = RX_DATA;
        return 0;
}

/*
 * RX_DATA with a large Data-Out whose payload is not all here: the buffered part is copied
 * into its command's buffer and the rest received there directly. False: the buffered path
 * takes it (whatever it decided about the PDU is then not repeated).
 */
static bool rx_start_direct(struct iscsi_conn *c)
{
        struct iscsi_rx *rx = &c->rx_st;
        const uint8_t *pdu = c->rx + c->rx_off;
        if (iscsi_bhs_opcode(pdu) != ISCSI_OP_DATA_OUT || rx->dsl < DIRECT_RX_MIN ||
            (rx->dsl & 3) || rx->ahs_len || data_digest_on(c) || rx->judged)
                return false;
        struct iscsi_task *t = iscsi_data_out_task(c, pdu, rx->dsl);
        if (!t) {
                rx->judged = true; /* ignored or rejected once: the buffered path drops it */
                return false;
        }
        memcpy(rx->bhs, pdu, ISCSI_BHS_LEN);
        uint32_t have = buffered(c) - rx->pos;
        uint8_t *dest = t->wbuf + t->received;
        memcpy(dest, pdu + rx->pos, have);
        c->rx_off = c->rx_len = 0;
        rx->task = t;
        rx->dest = dest + have;
        rx->left = rx->dsl - have;
        rx->state = RX_DIRECT;
        return true;
}

/* RX_DIRECT: receive into the command's buffer; 1 when the payload is in. */
static int rx_direct(struct iscsi_conn *c)
{
        struct iscsi_rx *rx = &c->rx_st;
        while (rx->left) {
                ssize_t n = conn_recv(c, rx->dest, rx->left);
                if (n <= 0)
                        return (int)n;
                rx->dest += n;
                rx->left -= (uint32_t)n;
                c->last_rx_ns = tdm_now_ns();
                c->nop_sent_ns = 0;
        }
        struct iscsi_task *t = rx->task;
        uint8_t bhs[ISCSI_BHS_LEN];
        memcpy(bhs, rx->bhs, sizeof(bhs));
        uint32_t len = rx->dsl;
        rx_next_pdu(c);
        iscsi_data_out_landed(c, t, bhs, len);
        return 1;
}

/* The whole PDU is in the buffer: check its data digest, then hand it on. */
static int rx_dispatch(struct iscsi_conn *c)
{
        struct iscsi_rx *rx = &c->rx_st;
        const uint8_t *pdu = c->rx + c->rx_off;
        const uint8_t *data = pdu + rx->pos;
        uint32_t padded = rx->dsl + iscsi_pad4(rx->dsl);
        bool dd = data_digest_on(c) && rx->dsl;
        uint32_t total = rx->pos + padded + (dd ? ISCSI_DIGEST_LEN : 0);
        bool judged = rx->judged;
        uint32_t dsl = rx->dsl;
        c->rx_off += total;
        c->rx_consumed += total;
        rx_next_pdu(c);
        if (judged)
                return 0; /* rx_start_direct answered it already */
        if (dd && !digest_ok(data, padded)) {
                log_warn("%s: data digest mismatch on opcode 0x%02x: rejected", c->peer,
                         iscsi_bhs_opcode(pdu));
                iscsi_send_reject(c, pdu, ISCSI_REJECT_DIGEST_ERROR);
                return 0;
        }
        /* pdu and data stay valid: nothing moves the buffer while the handler runs. */
        if (c->state == ISCSI_CONN_FFP)
                return ffp_dispatch(c, pdu, data, dsl);
        return iscsi_conn_login_pdu(c, pdu, data, dsl);
}

/*
 * Advances the machine over what the buffer holds. 0 with *need set to the buffered bytes
 * the next step wants (0: it reads the socket itself, or nothing more is parsed), < 0 to
 * close.
 */
static int rx_step(struct iscsi_conn *c, uint32_t *need)
{
        struct iscsi_rx *rx = &c->rx_st;
        uint32_t have = buffered(c);
        *need = 0;
        switch (rx->state) {
        case RX_BHS:
                if (have < ISCSI_BHS_LEN) {
                        *need = ISCSI_BHS_LEN;
                        return 0;
                }
                return rx_bhs(c);
        case RX_AHS:
                if (have < rx->pos + rx->ahs_len) {
                        *need = rx->pos + rx->ahs_len;
                        return 0;
                }
                return rx_ahs(c);
        case RX_HDIGEST:
                if (have < rx->pos + ISCSI_DIGEST_LEN) {
                        *need = rx->pos + ISCSI_DIGEST_LEN;
                        return 0;
                }
                return rx_hdigest(c);
        case RX_DATA: {
                uint32_t want = rx->dsl + iscsi_pad4(rx->dsl) +
                                (data_digest_on(c) && rx->dsl ? ISCSI_DIGEST_LEN : 0);
                if (have >= rx->pos + want)
                        return rx_dispatch(c);
                if (rx_start_direct(c))
                        return 0;
                *need = rx->pos + want;
                return 0;
        }
        default: /* RX_DIRECT and RX_DISCARD read the socket themselves */
                return 0;
        }
}

static int rx_resume(struct iscsi_conn *c);

static bool parsing_stops(const struct iscsi_conn *c)
{
        return c->state == ISCSI_CONN_CLOSED || c->state == ISCSI_CONN_LOGOUT ||
               c->state == ISCSI_CONN_AWAIT_CLOSE || c->state == ISCSI_CONN_LOGIN_HELD ||
               c->rx_st.state == RX_DIRECT || c->rx_st.state == RX_DISCARD;
}

/*
 * Every whole PDU the buffer holds, until the output is over its high watermark (a reader
 * that does not keep up: the rest waits until output drains). < 0 to close.
 */
static int rx_drain(struct iscsi_conn *c)
{
        uint32_t need = 0;
        while (!parsing_stops(c)) {
                /* A replaced session runs none of the commands still queued on its socket. */
                if (atomic_load_explicit(&c->kill, memory_order_relaxed))
                        return -ECONNRESET;
                if (iscsi_conn_over_high(c))
                        return 0;
                enum iscsi_rx_state before = c->rx_st.state;
                uint64_t consumed = c->rx_consumed;
                int rc = rx_step(c, &need);
                if (rc < 0)
                        return rc;
                if (need || (c->rx_st.state == before && c->rx_consumed == consumed))
                        break;
        }
        if (c->rx_off == c->rx_len && c->rx_st.state != RX_DIRECT)
                c->rx_off = c->rx_len = 0;
        else if (need > c->rx_cap - c->rx_off && rx_reserve(c, need) < 0)
                return -ENOMEM;
        return 0;
}

/* RX_DISCARD: drop the bytes of a refused PDU; 1 when done, 0 when more is to come. */
static int rx_discard(struct iscsi_conn *c)
{
        uint8_t sink[16384];
        struct iscsi_rx *rx = &c->rx_st;
        while (rx->discard_left) {
                size_t want = rx->discard_left < sizeof(sink) ? rx->discard_left : sizeof(sink);
                ssize_t n = conn_recv(c, sink, want);
                if (n <= 0)
                        return (int)n;
                rx->discard_left -= (uint32_t)n;
        }
        if (c->discard_reply) {
                iscsi_tx_queue(c, c->discard_reply);
                c->discard_reply = NULL;
        }
        rx->state = RX_DONE;
        return 1;
}

static int rx_fill(struct iscsi_conn *c)
{
        if (c->rx_cap - c->rx_len < 4096 || c->rx_off == c->rx_len)
                if (rx_reserve(c, c->rx_cap) < 0)
                        return -ENOMEM;
        if (c->rx_len == c->rx_cap)
                return 0;
        ssize_t n = conn_recv(c, c->rx + c->rx_len, c->rx_cap - c->rx_len);
        if (n <= 0)
                return (int)n;
        c->rx_len += (uint32_t)n;
        c->last_rx_ns = tdm_now_ns();
        c->nop_sent_ns = 0; /* any traffic proves the initiator alive */
        return (int)n;
}

/* AWAIT_CLOSE: drops what arrives; < 0 once the initiator closed (or on error). */
static int read_until_close(struct iscsi_conn *c)
{
        uint8_t sink[4096];
        /* Bounded per call: a sender that never stops meets the reset deadline instead. */
        for (int round = 0; round < 16; round++) {
                ssize_t n = conn_recv(c, sink, sizeof(sink));
                if (n <= 0)
                        return (int)n;
        }
        return 0;
}

int iscsi_conn_on_readable(struct iscsi_conn *c)
{
        if (atomic_load_explicit(&c->kill, memory_order_relaxed))
                return -ECONNRESET;
        if (c->state == ISCSI_CONN_AWAIT_CLOSE)
                return read_until_close(c);
        if (c->state == ISCSI_CONN_LOGIN_HELD) {
                /* Its next request waits in the socket until our answer is out. */
                if (!c->rx_paused)
                        iscsi_worker_pause_rx(c->worker, c, true);
                return 0;
        }
        if (c->state == ISCSI_CONN_LOGOUT && c->rx_st.state != RX_DISCARD) {
                /* Nothing more is parsed: stop reading until the last answer is sent. */
                if (!c->rx_paused)
                        iscsi_worker_pause_rx(c->worker, c, true);
                return iscsi_conn_flush(c);
        }
        for (int round = 0; round < 4; round++) {
                int rc = 0;
                if (c->rx_st.state == RX_DISCARD) {
                        rc = rx_discard(c);
                        if (rc < 0)
                                return rc;
                        break;
                }
                if (c->rx_st.state == RX_DIRECT && (rc = rx_direct(c)) <= 0) {
                        if (rc < 0)
                                return rc;
                        break;
                }
                /* Commands already read (left by a pause) come before reading more. */
                if ((rc = rx_drain(c)) < 0) {
                        iscsi_conn_flush(c);
                        return rc;
                }
                if (iscsi_conn_over_high(c) || parsing_stops(c))
                        break;
                int n = rx_fill(c);
                if (n < 0)
                        return n;
                if (n == 0)
                        break;
                if ((rc = rx_drain(c)) < 0) {
                        iscsi_conn_flush(c);
                        return rc;
                }
                if (n < 4096)
                        break;
        }
        return rx_resume(c);
}

static int rx_resume(struct iscsi_conn *c)
{
        /*
         * Parsing may have stopped at the high watermark with whole commands still buffered;
         * if sending freed room, take them now: no EPOLLIN will come for bytes already read.
         */
        for (;;) {
                int rc = iscsi_conn_flush(c);
                if (rc < 0)
                        return rc;
                if (iscsi_conn_over_high(c) || c->rx_off == c->rx_len || parsing_stops(c))
                        break;
                uint64_t before = c->rx_consumed;
                rc = rx_drain(c);
                if (rc < 0) {
                        iscsi_conn_flush(c);
                        return rc;
                }
                if (c->rx_consumed == before)
                        break; /* only a partial PDU is left: its rest arrives with EPOLLIN */
        }
        iscsi_conn_check_backpressure(c);
        return 0;
}
