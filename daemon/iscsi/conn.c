/*
 * One iSCSI connection: its lifetime, the login phase, and its timers. Owned by exactly one
 * worker thread; receiving is rx.c's, sending tx.c's.
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
#include "limits.h"
#include "tandem/log.h"

#define RX_INITIAL (64 * 1024)

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
        const struct tdm_iscsi_cfg *cfg = iscsi_worker_cfg(w);
        c->output_high = cfg->max_conn_output ? cfg->max_conn_output : TDM_DEFAULT_MAX_CONN_OUTPUT;
        c->write_data_max =
            cfg->max_conn_write_data ? cfg->max_conn_write_data : TDM_DEFAULT_MAX_CONN_WRITE_DATA;
        c->login_env.limits = cfg;
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

/* The connection no longer counts among those logging in (admission.c). */
static void pending_login_over(struct iscsi_conn *c)
{
        if (!c->pending_login)
                return;
        c->pending_login = false;
        iscsi_pending_login_done();
}

/*
 * A held login stops being held: the tick goes back to its pace, the answer is the caller's;
 * reading resumes once that answer is sent (iscsi_conn_check_backpressure).
 */
static void unhold(struct iscsi_conn *c)
{
        c->state = ISCSI_CONN_LOGIN;
        iscsi_worker_hold_login(c->worker, false);
}

void iscsi_conn_destroy(struct iscsi_conn *c)
{
        if (c->state == ISCSI_CONN_LOGIN_HELD) {
                iscsi_worker_hold_login(c->worker, false);
                iscsi_pdu_reply_free(&c->held_reply);
        }
        pending_login_over(c);
        iscsi_conn_drop_tasks(c);
        iscsi_tx_drop_queued(c);
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

void iscsi_conn_await_close(struct iscsi_conn *c)
{
        pending_login_over(c);
        c->state = ISCSI_CONN_AWAIT_CLOSE;
        c->await_close_ns = tdm_now_ns();
        if (c->rx_paused)
                iscsi_worker_pause_rx(c->worker, c, false); /* its FIN is what we wait for */
}

/*
 * Ends the TCP connection now with a reset: no TIME_WAIT here, no unsent output kept. A
 * disconnect (connect to AF_UNSPEC), not SO_LINGER 0: a connection whose commands are still
 * in the medium is only shut down until they end (portal.c), and a shutdown sends a FIN.
 */
static void conn_reset_now(struct iscsi_conn *c)
{
        struct sockaddr unspec = {.sa_family = AF_UNSPEC};
        if (connect(c->fd, &unspec, sizeof(unspec)) == 0)
                return;
        log_debug("%s: disconnect failed (%s): reset on close instead", c->peer, strerror(errno));
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
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

/*
 * A login whose answer is built and successful: the session, then the answer (or 03/02 when
 * the session limits refuse it). req is the final request's header.
 */
static int finish_login(struct iscsi_conn *c, const uint8_t *req, struct iscsi_pdu_reply *rep)
{
        int refusal = -1;
        char refused[192];
        c->sess = iscsi_session_create(c, &c->login, &refusal, refused, sizeof(refused));
        if (!c->sess && refusal < 0) {
                iscsi_pdu_reply_free(rep);
                return -ENOMEM;
        }
        if (!c->sess) {
                /* RFC 7143 11.13.5: 03/02, the target is out of session resources. */
                iscsi_pdu_reply_free(rep);
                iscsi_refusal_log((enum iscsi_refusal)refusal, c->peer, refused);
                iscsi_login_refuse(&c->login, req, ISCSI_LOGIN_OUT_OF_RESOURCES, rep);
                queue_login_reply(c, rep);
                return 0;
        }
        pending_login_over(c);
        iscsi_admission_logged_in(c->fd);
        c->state = ISCSI_CONN_FFP;
        log_info("%s: login of %s to %s complete (tsih %u)", c->peer, c->login.initiator_name,
                 c->sess->type == ISCSI_SESSION_DISCOVERY ? "discovery" : c->sess->target_name,
                 c->sess->tsih);
        queue_login_reply(c, rep);
        return 0;
}

/* A normal session's target that another node serves behind the shared portal, for now. */
static bool login_must_wait(const struct iscsi_conn *c)
{
        return c->login.type == ISCSI_SESSION_NORMAL && c->login.target &&
               scsi_target_served_elsewhere(c->login.target);
}

/* Keeps the final answer until this node serves the target (iscsi_conn_tick goes on). */
static void hold_login(struct iscsi_conn *c, const uint8_t *req, struct iscsi_pdu_reply *rep)
{
        memcpy(c->held_req, req, ISCSI_BHS_LEN);
        c->held_reply = *rep;
        *rep = (struct iscsi_pdu_reply){0};
        c->held_ns = tdm_now_ns();
        c->state = ISCSI_CONN_LOGIN_HELD;
        iscsi_worker_hold_login(c->worker, true);
        /* It sends nothing before our answer; whatever it sends waits in its socket. */
        iscsi_worker_pause_rx(c->worker, c, true);
        log_info("%s: login of %s to %s held: another node serves it here for now", c->peer,
                 c->login.initiator_name, c->login.target_name);
}

/* The held login's end: on when this node serves, 03/01 after ISCSI_LOGIN_HOLD_MAX_S. */
static void held_login_tick(struct iscsi_conn *c, uint64_t now_ns)
{
        bool expired = now_ns - c->held_ns > (uint64_t)ISCSI_LOGIN_HOLD_MAX_S * 1000000000ull;
        bool serving = !scsi_target_served_elsewhere(c->login.target);
        if (!serving && !expired)
                return;
        struct iscsi_pdu_reply rep = c->held_reply;
        c->held_reply = (struct iscsi_pdu_reply){0};
        unhold(c);
        if (serving) {
                log_info("%s: held login goes on after %llu ms", c->peer,
                         (unsigned long long)((now_ns - c->held_ns) / 1000000ull));
                if (finish_login(c, c->held_req, &rep) < 0)
                        atomic_store(&c->kill, true);
        } else {
                char what[TDM_IQN_MAX + 96];
                snprintf(what, sizeof(what),
                         "login to %s refused 03/01 (service unavailable): another node served "
                         "it for %u s",
                         c->login.target_name, ISCSI_LOGIN_HOLD_MAX_S);
                iscsi_refusal_log(ISCSI_REFUSE_NOT_SERVING, c->peer, what);
                iscsi_pdu_reply_free(&rep);
                iscsi_login_refuse(&c->login, c->held_req, ISCSI_LOGIN_SERVICE_UNAVAILABLE, &rep);
                queue_login_reply(c, &rep);
        }
        iscsi_conn_mark_dirty(c);
}

int iscsi_conn_login_pdu(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data,
                         uint32_t len)
{
        if (iscsi_bhs_opcode(bhs) != ISCSI_OP_LOGIN_REQ) {
                log_warn("%s: opcode 0x%02x during login: closing", c->peer, iscsi_bhs_opcode(bhs));
                return -EPROTO;
        }
        struct iscsi_pdu_reply rep = {0};
        int rc = iscsi_login_handle(&c->login, bhs, data, len, &rep);
        if (rc < 0)
                return rc;
        if (!c->login.complete || rep.close_after) {
                queue_login_reply(c, &rep);
                return 0;
        }
        if (login_must_wait(c)) {
                hold_login(c, bhs, &rep);
                return 0;
        }
        return finish_login(c, bhs, &rep);
}

void iscsi_conn_tick(struct iscsi_conn *c, uint64_t now_ns)
{
        const struct tdm_iscsi_cfg *cfg = iscsi_worker_cfg(c->worker);
        const uint64_t sec = 1000000000ull;
        if (c->state == ISCSI_CONN_AWAIT_CLOSE) {
                if (now_ns - c->await_close_ns > (uint64_t)ISCSI_AWAIT_CLOSE_S * sec) {
                        log_debug("%s: not closed %u s after the final answer: resetting", c->peer,
                                  ISCSI_AWAIT_CLOSE_S);
                        conn_reset_now(c);
                        atomic_store(&c->kill, true);
                }
                return;
        }
        if (c->state == ISCSI_CONN_LOGIN_HELD) {
                held_login_tick(c, now_ns);
                return;
        }
        if (c->state == ISCSI_CONN_LOGIN) {
                if (cfg->login_timeout_s &&
                    now_ns - c->login_start_ns > cfg->login_timeout_s * sec) {
                        char what[96];
                        snprintf(what, sizeof(what),
                                 "login not finished within %u s (iscsi.login_timeout): closing",
                                 cfg->login_timeout_s);
                        iscsi_refusal_log(ISCSI_REFUSE_LOGIN_TIMEOUT, c->peer, what);
                        atomic_store(&c->kill, true);
                }
                return;
        }
        uint32_t out_s =
            cfg->output_timeout_s ? cfg->output_timeout_s : TDM_DEFAULT_OUTPUT_TIMEOUT_S;
        if (c->tx_head && now_ns > c->tx_moved_ns &&
            now_ns - c->tx_moved_ns > (uint64_t)out_s * sec) {
                /* Its TCP window stayed shut: it holds our output (and its tasks) for nothing. */
                char what[160];
                snprintf(what, sizeof(what),
                         "%llu bytes of output not taken for %u s (iscsi.output_timeout): "
                         "dropping the connection",
                         (unsigned long long)c->tx_queued_bytes, out_s);
                iscsi_refusal_log(ISCSI_REFUSE_OUTPUT_TIMEOUT, c->peer, what);
                conn_reset_now(c);
                atomic_store(&c->kill, true);
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
