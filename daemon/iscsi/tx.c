/* Outgoing PDUs: queueing, digests, and gathered writes to the socket. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tandem/byteorder.h"
#include "conn.h"
#include "tandem/log.h"

#define TX_POOL_MAX 256

/* PDUs come from a per-connection pool: no allocation per I/O in steady state. */
struct iscsi_tx *iscsi_tx_alloc(struct iscsi_conn *c)
{
        struct iscsi_tx *tx = c->tx_pool;
        if (tx) {
                c->tx_pool = tx->next;
                c->tx_pooled--;
                memset(tx, 0, sizeof(*tx));
        } else {
                tx = calloc(1, sizeof(*tx));
                if (!tx)
                        return NULL;
        }
        tx->hdr_len = ISCSI_BHS_LEN;
        return tx;
}

void iscsi_tx_free(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        free(tx->owned);
        tx->owned = NULL;
        if (c->tx_pooled >= TX_POOL_MAX) {
                free(tx);
                return;
        }
        tx->next = c->tx_pool;
        c->tx_pool = tx;
        c->tx_pooled++;
}

void iscsi_tx_pool_drain(struct iscsi_conn *c)
{
        while (c->tx_pool) {
                struct iscsi_tx *tx = c->tx_pool;
                c->tx_pool = tx->next;
                free(tx);
        }
        c->tx_pooled = 0;
}

/* Sets the data segment length, padding and the digests the session negotiated. */
void iscsi_tx_seal(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        bool hd = c->sess && c->sess->params.header_digest;
        bool dd = c->sess && c->sess->params.data_digest;
        iscsi_bhs_set_dsl(tx->hdr, tx->data_len);
        tx->hdr_len = ISCSI_BHS_LEN;
        if (hd) {
                put_le32(tx->hdr + ISCSI_BHS_LEN,
                         iscsi_crc32c(tx->hdr, ISCSI_BHS_LEN, ISCSI_CRC32C_SEED) ^
                             ISCSI_CRC32C_SEED);
                tx->hdr_len += ISCSI_DIGEST_LEN;
        }
        tx->trailer_len = 0;
        if (tx->data_len == 0)
                return;
        uint32_t pad = iscsi_pad4(tx->data_len);
        memset(tx->trailer, 0, pad);
        tx->trailer_len = pad;
        if (dd) {
                uint32_t crc = iscsi_crc32c(tx->data, tx->data_len, ISCSI_CRC32C_SEED);
                if (pad)
                        crc = iscsi_crc32c(tx->trailer, pad, crc);
                put_le32(tx->trailer + pad, crc ^ ISCSI_CRC32C_SEED);
                tx->trailer_len += ISCSI_DIGEST_LEN;
        }
}

void iscsi_tx_queue(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        c->tx_queued_bytes += tx->hdr_len + tx->data_len + tx->trailer_len;
        if (!c->tx_head)
                c->tx_moved_ns = tdm_now_ns(); /* the output timeout counts from here */
        tx->next = NULL;
        if (c->tx_tail)
                c->tx_tail->next = tx;
        else
                c->tx_head = tx;
        c->tx_tail = tx;
}

void iscsi_fill_sn(struct iscsi_conn *c, struct iscsi_sn *sn, bool advance_stat)
{
        struct iscsi_session *s = c->sess;
        if (!s)
                return;
        sn->stat_sn = be32_of(s->stat_sn);
        if (advance_stat)
                s->stat_sn++;
        sn->exp_cmdsn = be32_of(s->exp_cmdsn);
        sn->max_cmdsn = be32_of(iscsi_session_max_cmdsn(s));
}

void iscsi_send_reject(struct iscsi_conn *c, const uint8_t *bhs, uint8_t reason)
{
        struct iscsi_tx *tx = iscsi_tx_alloc(c);
        if (!tx)
                return;
        tx->owned = malloc(ISCSI_BHS_LEN);
        if (!tx->owned) {
                iscsi_tx_free(c, tx);
                return;
        }
        memcpy(tx->owned, bhs, ISCSI_BHS_LEN);
        tx->data = tx->owned;
        tx->data_len = ISCSI_BHS_LEN;
        struct iscsi_rsp_hdr *h = (struct iscsi_rsp_hdr *)tx->hdr;
        h->opcode = ISCSI_OP_REJECT;
        h->flags = ISCSI_FLAG_FINAL;
        h->response = reason;
        h->itt = be32_of(ISCSI_RSVD_TAG);
        iscsi_fill_sn(c, &h->sn, true);
        iscsi_tx_seal(c, tx);
        iscsi_tx_queue(c, tx);
}

static int tx_gather(struct iscsi_conn *c, struct iovec *iov, int max)
{
        int n = 0;
        for (struct iscsi_tx *tx = c->tx_head; tx && n + 3 <= max; tx = tx->next) {
                uint32_t skip = tx->sent;
                const uint8_t *parts[3] = {tx->hdr, tx->data, tx->trailer};
                uint32_t lens[3] = {tx->hdr_len, tx->data_len, tx->trailer_len};
                for (int i = 0; i < 3; i++) {
                        if (skip >= lens[i]) {
                                skip -= lens[i];
                                continue;
                        }
                        iov[n].iov_base = (void *)(parts[i] + skip);
                        iov[n].iov_len = lens[i] - skip;
                        skip = 0;
                        n++;
                }
                if (tx->close_after)
                        break;
        }
        return n;
}

static void tx_complete(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        if (tx->task_done)
                iscsi_task_put(c, tx->task_done);
        iscsi_tx_free(c, tx);
}

void iscsi_tx_drop_queued(struct iscsi_conn *c)
{
        while (c->tx_head) {
                struct iscsi_tx *tx = c->tx_head;
                c->tx_head = tx->next;
                c->tx_queued_bytes -= tx->hdr_len + tx->data_len + tx->trailer_len;
                tx_complete(c, tx);
        }
        c->tx_tail = NULL;
}

/* After the final answer nothing more goes out: answers of commands finishing late are dropped. */
static int tx_final_answer_sent(struct iscsi_conn *c)
{
        if (c->state != ISCSI_CONN_AWAIT_CLOSE)
                iscsi_conn_await_close(c);
        iscsi_tx_drop_queued(c);
        if (c->want_write)
                iscsi_worker_want_write(c->worker, c, false);
        return 0;
}

/* Returns 0 when all was sent or the socket is full, < 0 on error. */
int iscsi_conn_flush(struct iscsi_conn *c)
{
        struct iovec iov[64];
        if (c->state == ISCSI_CONN_AWAIT_CLOSE)
                return tx_final_answer_sent(c);
        while (c->tx_head) {
                int n = tx_gather(c, iov, 64);
                struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
                ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK) {
                                if (!c->want_write)
                                        iscsi_worker_want_write(c->worker, c, true);
                                return 0;
                        }
                        return -errno;
                }
                size_t left = (size_t)w;
                if (w > 0) {
                        c->tx_moved_ns = tdm_now_ns();
                        if (c->rx_paused)
                                c->last_rx_ns = c->tx_moved_ns; /* it reads our output: alive */
                }
                while (left > 0 && c->tx_head) {
                        struct iscsi_tx *tx = c->tx_head;
                        uint32_t total = tx->hdr_len + tx->data_len + tx->trailer_len;
                        uint32_t rest = total - tx->sent;
                        if (left < rest) {
                                tx->sent += (uint32_t)left;
                                left = 0;
                                break;
                        }
                        left -= rest;
                        c->tx_queued_bytes -= total;
                        c->tx_head = tx->next;
                        if (!c->tx_head)
                                c->tx_tail = NULL;
                        bool close_after = tx->close_after;
                        tx_complete(c, tx);
                        if (close_after)
                                return tx_final_answer_sent(c);
                }
        }
        if (c->want_write)
                iscsi_worker_want_write(c->worker, c, false);
        return 0;
}

/* Output queued plus what commands waiting for the medium will produce. */
static uint64_t conn_output_bytes(const struct iscsi_conn *c)
{
        return c->tx_queued_bytes + c->exec_data_bytes;
}

bool iscsi_conn_over_high(const struct iscsi_conn *c)
{
        /* Tasks still collecting data need reads to finish: only answered ones count here. */
        uint32_t answered = c->tasks_active - c->tasks_collecting;
        return conn_output_bytes(c) > c->output_high || answered > ISCSI_TASKS_HIGH;
}

static bool conn_below_low(const struct iscsi_conn *c)
{
        uint32_t answered = c->tasks_active - c->tasks_collecting;
        return conn_output_bytes(c) < c->output_high / 4 && answered < ISCSI_TASKS_HIGH / 2;
}

bool iscsi_conn_check_backpressure(struct iscsi_conn *c)
{
        /*
         * Paused only with output still queued or commands in the medium: the EPOLLOUT the
         * flush asked for, or their completion, is what resumes the connection. Never past the
         * final answer: the initiator's close, which only reading sees, is what it waits for.
         */
        if (!c->rx_paused && c->state != ISCSI_CONN_AWAIT_CLOSE && iscsi_conn_over_high(c) &&
            (c->tx_head || c->async_pending)) {
                iscsi_worker_pause_rx(c->worker, c, true);
                return false;
        }
        if (c->rx_paused && conn_below_low(c) && c->state != ISCSI_CONN_LOGOUT &&
            c->state != ISCSI_CONN_LOGIN_HELD) {
                iscsi_worker_pause_rx(c->worker, c, false);
                return true;
        }
        return false;
}
