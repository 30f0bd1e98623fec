/*
 * One iSCSI connection: receive whole PDUs from a buffer, check framing and digests,
 * and dispatch by phase and opcode. Owned by exactly one worker thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tandem/byteorder.h"
#include "conn.h"
#include "tandem/log.h"

#define RX_INITIAL (64 * 1024)
/* During login the default MaxRecvDataSegmentLength (8192) bounds every PDU (RFC 7143 13.12). */
#define LOGIN_DSL_LIMIT 8192
/* Data-Out payloads at least this large skip the receive buffer. */
#define DIRECT_RX_MIN (32 * 1024)

static void sockaddr_format(const struct sockaddr_storage *ss, char *out, size_t len)
{
        char host[INET6_ADDRSTRLEN] = "?";
        uint16_t port = 0;
        if (ss->ss_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
                inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
                port = ntohs(a->sin_port);
                snprintf(out, len, "%s:%u", host, port);
        } else if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
                inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
                port = ntohs(a->sin6_port);
                snprintf(out, len, "[%s]:%u", host, port);
        } else {
                snprintf(out, len, "unknown");
        }
}

static int login_lookup_target(void *arg, const char *target, const char *initiator,
                               struct scsi_target **out, struct tdm_auth *auth)
{
        (void)arg;
        const struct iscsi_env *env = iscsi_env();
        return env->lookup_target ? env->lookup_target(target, initiator, out, auth) : -ENOENT;
}

static void login_discovery_auth(void *arg, struct tdm_auth *auth)
{
        (void)arg;
        const struct iscsi_env *env = iscsi_env();
        if (env->discovery_auth)
                env->discovery_auth(auth);
}

static void login_put_target(void *arg, struct scsi_target *t)
{
        (void)arg;
        scsi_target_put(t);
}

struct iscsi_conn *iscsi_conn_create(struct iscsi_worker *w, int fd)
{
        struct iscsi_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->rx = malloc(RX_INITIAL);
        if (!c->rx) {
                free(c);
                return NULL;
        }
        c->rx_cap = RX_INITIAL;
        c->fd = fd;
        c->worker = w;
        c->state = ISCSI_CONN_LOGIN;
        c->next_ttt = 1;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
                sockaddr_format(&ss, c->peer, sizeof(c->peer));
        sl = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
                sockaddr_format(&ss, c->portal, sizeof(c->portal));
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->login_env.limits = iscsi_worker_cfg(w);
        c->login_env.lookup_target = login_lookup_target;
        c->login_env.discovery_auth = login_discovery_auth;
        c->login_env.alloc_tsih = iscsi_session_alloc_tsih;
        c->login_env.put_target = login_put_target;
        c->login_env.arg = c;
        c->login_env.tpgt = 1;
        c->login_env.peer = c->peer;
        iscsi_login_init(&c->login, &c->login_env);
        c->login_start_ns = tdm_now_ns();
        c->last_rx_ns = c->login_start_ns;
        c->text.ttt = 0xffffffff;
        return c;
}

void iscsi_conn_destroy(struct iscsi_conn *c)
{
        iscsi_conn_drop_tasks(c);
        while (c->tx_head) {
                struct iscsi_tx *tx = c->tx_head;
                c->tx_head = tx->next;
                if (tx->task_done)
                        iscsi_task_put(c, tx->task_done);
                iscsi_tx_free(c, tx);
        }
        if (c->discard_reply)
                iscsi_tx_free(c, c->discard_reply);
        iscsi_tx_pool_drain(c);
        while (c->task_free) {
                struct iscsi_task *t = c->task_free;
                c->task_free = t->free_next;
                free(t);
        }
        if (c->sess)
                iscsi_session_destroy(c->sess);
        iscsi_login_fini(&c->login);
        iscsi_text_state_fini(&c->text);
        close(c->fd);
        free(c->rx);
        free(c);
}

static void queue_login_reply(struct iscsi_conn *c, struct iscsi_pdu_reply *rep)
{
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx) {
                iscsi_pdu_reply_free(rep);
                return;
        }
        memcpy(tx->hdr, rep->bhs, ISCSI_BHS_LEN);
        tx->owned = rep->data;
        tx->data = rep->data;
        tx->data_len = rep->data_len;
        tx->close_after = rep->close_after;
        rep->data = NULL;
        /* Login PDUs never carry digests: the session's settings start after the final one. */
        struct iscsi_session *s = c->sess;
        c->sess = NULL;
        iscsi_tx_seal(c, tx);
        c->sess = s;
        iscsi_tx_queue(c, tx);
}

static int conn_login(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len)
{
        if (iscsi_bhs_opcode(bhs) != ISCSI_OP_LOGIN_REQ) {
                log_warn("%s: opcode 0x%02x during login: closing", c->peer, iscsi_bhs_opcode(bhs));
                return -EPROTO;
        }
        struct iscsi_pdu_reply rep = {0};
        int rc = iscsi_login_handle(&c->login, bhs, data, len, &rep);
        if (rc < 0)
                return rc;
        if (c->login.complete && !rep.close_after) {
                c->sess = iscsi_session_create(c, &c->login);
                if (!c->sess) {
                        iscsi_pdu_reply_free(&rep);
                        return -ENOMEM;
                }
                c->state = ISCSI_CONN_FFP;
                log_info(
                    "%s: login of %s to %s complete (tsih %u)", c->peer, c->login.initiator_name,
                    c->sess->type == ISCSI_SESSION_DISCOVERY ? "discovery" : c->sess->target_name,
                    c->sess->tsih);
        }
        queue_login_reply(c, &rep);
        return 0;
}

static bool discovery_allows(uint8_t op)
{
        return op == ISCSI_OP_TEXT_REQ || op == ISCSI_OP_LOGOUT_REQ || op == ISCSI_OP_NOP_OUT;
}

static int conn_ffp(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t len)
{
        uint8_t op = iscsi_bhs_opcode(bhs);
        struct iscsi_session *s = c->sess;
        if (s->type == ISCSI_SESSION_DISCOVERY && !discovery_allows(op)) {
                log_warn("%s: opcode 0x%02x in a discovery session: rejected", c->peer, op);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
        switch (op) {
        case ISCSI_OP_SCSI_CMD:
                return iscsi_scsi_cmd(c, bhs, data, len);
        case ISCSI_OP_DATA_OUT:
                return iscsi_data_out(c, bhs, data, len);
        case ISCSI_OP_NOP_OUT:
                return iscsi_nop_out(c, bhs, data, len);
        case ISCSI_OP_TMF_REQ:
                return iscsi_tmf(c, bhs);
        case ISCSI_OP_TEXT_REQ:
                return iscsi_text(c, bhs, data, len);
        case ISCSI_OP_LOGOUT_REQ:
                return iscsi_logout(c, bhs);
        case ISCSI_OP_LOGIN_REQ:
                log_warn("%s: login request in full feature phase: rejected", c->peer);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        case ISCSI_OP_SNACK:
                /* ErrorRecoveryLevel 0: SNACK is not supported. */
                iscsi_send_reject(c, bhs, ISCSI_REJECT_CMD_NOT_SUPPORTED);
                return 0;
        default:
                log_warn("%s: unknown opcode 0x%02x: rejected", c->peer, op);
                iscsi_send_reject(c, bhs, ISCSI_REJECT_PROTOCOL_ERROR);
                return 0;
        }
}

static bool header_digest_ok(const uint8_t *pdu, uint32_t hlen)
{
        uint32_t crc = iscsi_crc32c(pdu, hlen, ISCSI_CRC32C_SEED) ^ ISCSI_CRC32C_SEED;
        return crc == get_le32(pdu + hlen);
}

static bool data_digest_ok(const uint8_t *data, uint32_t padded_len)
{
        uint32_t crc = iscsi_crc32c(data, padded_len, ISCSI_CRC32C_SEED) ^ ISCSI_CRC32C_SEED;
        return crc == get_le32(data + padded_len);
}

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

/*
 * A login PDU above the login-phase limit: its payload is read and dropped (closing with
 * unread data would reset the connection and lose our answer), then the login fails with
 * an initiator error.
 */
static void login_refuse_oversized(struct iscsi_conn *c, const uint8_t *pdu, uint32_t avail,
                                   uint32_t dsl)
{
        log_warn("%s: login PDU with %u bytes of text (limit %u): login refused", c->peer, dsl,
                 LOGIN_DSL_LIMIT);
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (tx) {
                uint8_t *h = tx->hdr;
                h[0] = ISCSI_OP_LOGIN_RSP;
                memcpy(h + 8, pdu + 8, 6); /* ISID */
                put_be32(h + 16, iscsi_bhs_itt(pdu));
                put_be32(h + 24, get_be32(pdu + 28)); /* StatSN = ExpStatSN */
                put_be32(h + 28, get_be32(pdu + 24));
                put_be32(h + 32, get_be32(pdu + 24));
                put_be16(h + 36, ISCSI_LOGIN_INITIATOR_ERROR);
                tx->close_after = true;
                iscsi_tx_seal(c, tx);
        }
        uint32_t total = ISCSI_BHS_LEN + iscsi_bhs_ahs_len(pdu) + dsl + iscsi_pad4(dsl);
        c->rx_discard = total > avail ? total - avail : 0;
        c->rx_off = c->rx_len = 0;
        c->discard_reply = tx;
        c->state = ISCSI_CONN_LOGOUT; /* parse nothing more */
        if (c->rx_discard == 0 && tx) {
                iscsi_tx_queue(c, tx);
                c->discard_reply = NULL;
        }
}

/*
 * One non-blocking receive: > 0 bytes read, 0 when the socket has nothing now,
 * < 0 on error or when the initiator closed.
 */
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

/* Drop bytes of a refused PDU; returns 1 when done, 0 when more is to come. */
static int rx_discard(struct iscsi_conn *c)
{
        uint8_t sink[16384];
        while (c->rx_discard) {
                size_t want = c->rx_discard < sizeof(sink) ? c->rx_discard : sizeof(sink);
                ssize_t n = conn_recv(c, sink, want);
                if (n <= 0)
                        return (int)n;
                c->rx_discard -= (uint32_t)n;
        }
        if (c->discard_reply) {
                iscsi_tx_queue(c, c->discard_reply);
                c->discard_reply = NULL;
        }
        return 1;
}

/*
 * A Data-Out whose header is here but whose large payload is not: copy what arrived and
 * receive the rest straight into the task's buffer (no second copy of bulk write data).
 */
static bool rx_start_direct(struct iscsi_conn *c, const uint8_t *pdu, uint32_t avail, uint32_t hlen,
                            uint32_t dsl)
{
        if (iscsi_bhs_opcode(pdu) != ISCSI_OP_DATA_OUT || dsl < DIRECT_RX_MIN || (dsl & 3) ||
            iscsi_bhs_ahs_len(pdu) || avail < hlen)
                return false;
        if (hlen > ISCSI_BHS_LEN && !header_digest_ok(pdu, ISCSI_BHS_LEN))
                return false; /* the buffered path reports it */
        if (c->direct_declined)
                return false;
        struct iscsi_task *t = iscsi_data_out_task(c, pdu, dsl);
        if (!t) {
                /* Ignored or rejected once: the buffered path skips the payload. */
                c->direct_declined = true;
                return false;
        }
        uint32_t have = avail - hlen;
        uint8_t *dest = t->wbuf + t->received;
        memcpy(dest, pdu + hlen, have);
        c->direct.task = t;
        memcpy(c->direct.bhs, pdu, ISCSI_BHS_LEN);
        c->direct.dest = dest + have;
        c->direct.len = dsl;
        c->direct.left = dsl - have;
        c->rx_off = c->rx_len = 0;
        return true;
}

/* Receive into the direct destination; returns 1 when done, 0 when more is to come. */
static int rx_direct(struct iscsi_conn *c)
{
        while (c->direct.left) {
                ssize_t n = conn_recv(c, c->direct.dest, c->direct.left);
                if (n <= 0)
                        return (int)n;
                c->direct.dest += n;
                c->direct.left -= (uint32_t)n;
        }
        struct iscsi_task *t = c->direct.task;
        c->direct.task = NULL;
        iscsi_data_out_landed(c, t, c->direct.bhs, c->direct.len);
        return 1;
}

/*
 * Parse and dispatch every complete PDU in the buffer. Returns < 0 to close.
 * *need is set to the buffer size the next (incomplete) PDU requires.
 */
static int rx_process(struct iscsi_conn *c, uint32_t *need)
{
        *need = 0;
        while (c->state != ISCSI_CONN_CLOSED && c->state != ISCSI_CONN_LOGOUT) {
                /* A replaced session runs none of the commands still queued on its socket. */
                if (atomic_load_explicit(&c->kill, memory_order_relaxed))
                        return -ECONNRESET;
                /* A reader that does not keep up: leave the rest unparsed until output drains. */
                if (iscsi_conn_over_high(c))
                        return 0;
                uint32_t avail = c->rx_len - c->rx_off;
                if (avail < ISCSI_BHS_LEN) {
                        *need = ISCSI_BHS_LEN;
                        return 0;
                }
                const uint8_t *pdu = c->rx + c->rx_off;
                bool ffp = c->state == ISCSI_CONN_FFP;
                bool hd = ffp && c->sess->params.header_digest;
                bool dd = ffp && c->sess->params.data_digest;
                uint32_t ahs = iscsi_bhs_ahs_len(pdu);
                uint32_t dsl = iscsi_bhs_dsl(pdu);
                uint32_t limit = ffp ? c->sess->params.max_recv_dsl : LOGIN_DSL_LIMIT;
                if (!ffp && dsl > limit && iscsi_bhs_opcode(pdu) == ISCSI_OP_LOGIN_REQ) {
                        login_refuse_oversized(c, pdu, avail, dsl);
                        return 0;
                }
                if (dsl > limit) {
                        log_warn("%s: DataSegmentLength %u above the negotiated %u: closing",
                                 c->peer, dsl, limit);
                        return -EPROTO;
                }
                uint32_t hlen = ISCSI_BHS_LEN + ahs;
                uint32_t padded = dsl + iscsi_pad4(dsl);
                uint32_t total = hlen + (hd ? 4 : 0) + padded + (dd && dsl ? 4 : 0);
                if (avail < total) {
                        if (ffp && !dd && rx_start_direct(c, pdu, avail, hlen + (hd ? 4 : 0), dsl))
                                return 0;
                        *need = total;
                        return 0;
                }
                if (hd && !header_digest_ok(pdu, hlen)) {
                        log_warn("%s: header digest mismatch: closing", c->peer);
                        return -EPROTO;
                }
                const uint8_t *data = pdu + hlen + (hd ? 4 : 0);
                c->rx_off += total;
                c->rx_consumed += total;
                if (c->direct_declined) {
                        /* Already judged by rx_start_direct (rejected or ignored): skip it. */
                        c->direct_declined = false;
                        continue;
                }
                if (dd && dsl && !data_digest_ok(data, padded)) {
                        log_warn("%s: data digest mismatch on opcode 0x%02x: rejected", c->peer,
                                 iscsi_bhs_opcode(pdu));
                        iscsi_send_reject(c, pdu, ISCSI_REJECT_DIGEST_ERROR);
                        continue;
                }
                if (ahs && !ffp) {
                        log_warn("%s: AHS on a login PDU: closing", c->peer);
                        return -EPROTO;
                }
                if (ahs && iscsi_bhs_opcode(pdu) != ISCSI_OP_SCSI_CMD) {
                        log_warn("%s: AHS on opcode 0x%02x: rejected", c->peer,
                                 iscsi_bhs_opcode(pdu));
                        iscsi_send_reject(c, pdu, ISCSI_REJECT_PROTOCOL_ERROR);
                        continue;
                }
                int rc = ffp ? conn_ffp(c, pdu, data, dsl) : conn_login(c, pdu, data, dsl);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* Parse what the buffer holds; keeps the buffer ready for the next PDU. */
static int rx_drain(struct iscsi_conn *c)
{
        uint32_t need;
        int rc = rx_process(c, &need);
        if (rc < 0)
                return rc;
        if (c->rx_off == c->rx_len) {
                c->rx_off = c->rx_len = 0;
        } else if (need > c->rx_cap - c->rx_off) {
                if (rx_reserve(c, need) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int iscsi_conn_on_readable(struct iscsi_conn *c)
{
        if (atomic_load_explicit(&c->kill, memory_order_relaxed))
                return -ECONNRESET;
        if (c->state == ISCSI_CONN_LOGOUT && !c->rx_discard && !c->discard_reply) {
                /* Nothing more is parsed: stop reading until the last answer is sent. */
                if (!c->rx_paused)
                        iscsi_worker_pause_rx(c->worker, c, true);
                return iscsi_conn_flush(c);
        }
        for (int round = 0; round < 4; round++) {
                if (c->rx_discard || c->discard_reply) {
                        int rc = rx_discard(c);
                        if (rc < 0)
                                return rc;
                        break;
                }
                if (c->direct.task) {
                        int rc = rx_direct(c);
                        if (rc < 0)
                                return rc;
                        c->last_rx_ns = tdm_now_ns();
                        c->nop_sent_ns = 0;
                        if (rc == 0)
                                break;
                }
                /* Commands already read (left by a pause) come before reading more. */
                int rc = rx_drain(c);
                if (rc < 0) {
                        iscsi_conn_flush(c);
                        return rc;
                }
                if (iscsi_conn_over_high(c))
                        break;
                if (c->rx_cap - c->rx_len < 4096 || c->rx_off == c->rx_len) {
                        if (rx_reserve(c, c->rx_cap) < 0)
                                return -ENOMEM;
                }
                if (c->rx_len == c->rx_cap)
                        break;
                ssize_t n = conn_recv(c, c->rx + c->rx_len, c->rx_cap - c->rx_len);
                if (n < 0)
                        return (int)n;
                if (n == 0)
                        break;
                c->rx_len += (uint32_t)n;
                c->last_rx_ns = tdm_now_ns();
                c->nop_sent_ns = 0; /* any traffic proves the initiator alive */
                rc = rx_drain(c);
                if (rc < 0) {
                        iscsi_conn_flush(c);
                        return rc;
                }
                if ((size_t)n < 4096)
                        break;
        }
        /*
         * Parsing may have stopped at the high watermark with whole commands still buffered;
         * if sending freed room, take them now: no EPOLLIN will come for bytes already read.
         */
        for (;;) {
                int rc = iscsi_conn_flush(c);
                if (rc < 0)
                        return rc;
                if (iscsi_conn_over_high(c) || c->rx_off == c->rx_len || c->direct.task ||
                    c->rx_discard)
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

void iscsi_conn_tick(struct iscsi_conn *c, uint64_t now_ns)
{
        const struct tdm_iscsi_cfg *cfg = iscsi_worker_cfg(c->worker);
        const uint64_t sec = 1000000000ull;
        if (c->state == ISCSI_CONN_LOGIN) {
                if (cfg->login_timeout_s &&
                    now_ns - c->login_start_ns > cfg->login_timeout_s * sec) {
                        log_warn("%s: login not finished within %u s: closing", c->peer,
                                 cfg->login_timeout_s);
                        atomic_store(&c->kill, true);
                }
                return;
        }
        if (c->state == ISCSI_CONN_LOGOUT) {
                /* The last answer must get out within the NOP timeout, or we close anyway. */
                if (!c->logout_ns)
                        c->logout_ns = now_ns;
                else if (now_ns - c->logout_ns >
                         (uint64_t)(cfg->nop_timeout_s ? cfg->nop_timeout_s : 10) * sec)
                        atomic_store(&c->kill, true);
                return;
        }
        if (c->state != ISCSI_CONN_FFP || cfg->nop_interval_s == 0 || c->rx_paused)
                return; /* a paused initiator is reading our output: it is alive */
        if (c->nop_sent_ns) {
                if (now_ns - c->nop_sent_ns > cfg->nop_timeout_s * sec) {
                        log_warn("%s: no answer to NOP-In within %u s: closing", c->peer,
                                 cfg->nop_timeout_s);
                        atomic_store(&c->kill, true);
                }
                return;
        }
        if (now_ns - c->last_rx_ns > cfg->nop_interval_s * sec) {
                iscsi_send_nop_ping(c);
                c->nop_sent_ns = now_ns;
                iscsi_conn_flush(c);
        }
}
