/*
 * The data channel's sender. Whoever has a message for the peer (a caller's change, the
 * resync worker, a role change) queues it under send_lock with its sequence number; this
 * thread alone writes the socket, many frames per writev, so no I/O thread ever waits on
 * it. A peer that stops reading for replication.timeout is dropped.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "repl_internal.h"
#include "tandem/clock.h"
#include "tandem/log.h"
#include "wire.h"

#define SEND_BATCH_IOV 128 /* frames go two iovecs each */

struct repl_req *repl_req_new(enum repl_op_kind kind, size_t owned_bytes)
{
        struct repl_req *req = calloc(1, sizeof(*req));
        if (!req)
                return NULL;
        if (owned_bytes && !(req->owned = malloc(owned_bytes))) {
                free(req);
                return NULL;
        }
        req->kind = kind;
        atomic_init(&req->refs, 2); /* the answer and the sender */
        return req;
}

static void req_free_frame(struct repl_req *req)
{
        if (req->head && req->head != req->head_inline)
                free(req->head);
        req->head = NULL;
}

void repl_req_put(struct repl_req *req)
{
        if (atomic_fetch_sub_explicit(&req->refs, 1, memory_order_acq_rel) != 1)
                return;
        req_free_frame(req);
        free(req->owned);
        free(req);
}

int repl_queue_data_locked(struct repl_lun *r, struct repl_req *req, uint8_t type, void *msg,
                           const void *payload, uint32_t payload_len)
{
        uint64_t seq = r->next_seq;
        uint64_t *msg_seq = repl_msg_seq(type, msg);
        if (!msg_seq)
                return -EINVAL;
        *msg_seq = seq;
        size_t msg_len = protobuf_c_message_get_packed_size(msg);
        if (msg_len > REPL_MSG_MAX || payload_len > REPL_PAYLOAD_MAX)
                return -EMSGSIZE;
        size_t head_len = REPL_FRAME_HDR_LEN + msg_len;
        req->head = head_len <= sizeof(req->head_inline) ? req->head_inline : malloc(head_len);
        if (!req->head)
                return -ENOMEM;
        repl_frame_encode(req->head, type, (uint32_t)msg_len, payload_len);
        protobuf_c_message_pack(msg, req->head + REPL_FRAME_HDR_LEN);
        req->head_len = (uint32_t)head_len;
        req->payload = payload;
        req->payload_len = payload_len;
        r->next_seq++;
        req->seq = seq;
        req->sent_ns = tdm_now_ns();
        /* For its ack: an ack can only come after the bytes left. */
        req->next = NULL;
        if (r->inflight_tail)
                r->inflight_tail->next = req;
        else
                r->inflight_head = req;
        r->inflight_tail = req;
        if (req->kind == REPL_OP_RESYNC)
                r->inflight_bytes += req->len;
        /* For the sender. */
        req->out_next = NULL;
        bool was_empty = !r->out_head;
        if (r->out_tail)
                r->out_tail->out_next = req;
        else
                r->out_head = req;
        r->out_tail = req;
        if (was_empty)
                pthread_cond_signal(&r->out_cond);
        if (req->kind != REPL_OP_RESYNC && req->kind != REPL_OP_VERIFY &&
            req->kind != REPL_OP_STATE && req->kind != REPL_OP_LU_STATE &&
            req->kind != REPL_OP_RESIZE)
                atomic_fetch_add_explicit(&r->writes_replicated, 1, memory_order_relaxed);
        return 0;
}

/* The sender let go of req: a caller's change may complete, a standalone req may go. */
static void sent(struct repl_req *req)
{
        req_free_frame(req);
        if (req->w)
                repl_write_part_done(req->w, 0);
        else
                repl_req_put(req);
}

/* Takes the whole queue (send_lock held). */
static struct repl_req *take_queue_locked(struct repl_lun *r)
{
        struct repl_req *list = r->out_head;
        r->out_head = r->out_tail = NULL;
        return list;
}

static void drop_list(struct repl_req *list);

void repl_send_queue_drop(struct repl_lun *r)
{
        pthread_mutex_lock(&r->send_lock);
        struct repl_req *list = take_queue_locked(r);
        pthread_mutex_unlock(&r->send_lock);
        drop_list(list);
}

/*
 * Writes the frames of *list, many per writev; each one written is let go of. 0, or -errno
 * with *list the frames not (wholly) written.
 */
static int write_frames(int fd, struct repl_req **listp, unsigned timeout_ms)
{
        struct iovec iov[SEND_BATCH_IOV];
        struct repl_req *list = *listp;
        while (list) {
                int n = 0;
                struct repl_req *end = list;
                while (end && n + 2 <= SEND_BATCH_IOV) {
                        iov[n++] = (struct iovec){.iov_base = end->head, .iov_len = end->head_len};
                        if (end->payload_len)
                                iov[n++] = (struct iovec){.iov_base = (void *)end->payload,
                                                          .iov_len = end->payload_len};
                        end = end->out_next;
                }
                int rc = repl_writev_full(fd, iov, (size_t)n, (int)timeout_ms);
                if (rc < 0) {
                        *listp = list;
                        return rc;
                }
                while (list != end) {
                        struct repl_req *next = list->out_next;
                        sent(list);
                        list = next;
                }
        }
        *listp = NULL;
        return 0;
}

static void drop_list(struct repl_req *list)
{
        while (list) {
                struct repl_req *next = list->out_next;
                sent(list);
                list = next;
        }
}

void *repl_sender_main(void *arg)
{
        struct repl_lun *r = arg;
        pthread_mutex_lock(&r->send_lock);
        uint64_t gen = r->conn_gen;
        int fd = r->data_fd;
        for (;;) {
                while (!r->out_head && r->in_ack_set && r->conn_gen == gen)
                        pthread_cond_wait(&r->out_cond, &r->send_lock);
                if (!r->out_head)
                        break; /* the link went down */
                struct repl_req *list = take_queue_locked(r);
                pthread_mutex_unlock(&r->send_lock);
                int rc = write_frames(fd, &list, r->cfg.timeout_ms);
                if (rc < 0) {
                        /* The link is gone: the peer's parts complete through the disconnect. */
                        repl_disconnect_gen(r, gen,
                                            rc == -ETIMEDOUT
                                                ? "peer stopped reading (send timed out)"
                                                : "send to peer failed");
                        drop_list(list);
                        pthread_mutex_lock(&r->send_lock);
                        break;
                }
                pthread_mutex_lock(&r->send_lock);
        }
        pthread_mutex_unlock(&r->send_lock);
        repl_send_queue_drop(r);
        return NULL;
}
