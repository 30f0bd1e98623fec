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

#define SEND_BATCH_FRAMES 64                      /* frames per writev: a tag each when sealed */
#define SEND_BATCH_IOV    (3 * SEND_BATCH_FRAMES) /* head, payload (if any), tag */
#define SEND_ARENA        (1024u * 1024) /* "encrypt": ciphertext of the payloads of one writev */

/* The sender's sealing (frame_seal.h): the data channel's sending side and its arena. */
struct send_seal {
        struct frame_seal *tx; /* NULL: frames go clear (no handshake keys: tests) */
        uint8_t *arena;
        size_t cap, used;
};

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
 * Seals req's frame: header clear, message (in req->head, ours) and payload; with "encrypt"
 * the message in place and the payload (borrowed: the caller's buffer, also being written
 * locally) into the arena, where *payload then points. 0, -ENOSPC (the arena is full: end the
 * batch before this frame), or another -errno.
 */
static int seal_req(struct send_seal *ss, struct repl_req *req, const void **payload,
                    uint8_t tag[FRAME_TAG_LEN], bool first)
{
        struct iovec in[2] = {
            {.iov_base = req->head + REPL_FRAME_HDR_LEN,
             .iov_len = req->head_len - REPL_FRAME_HDR_LEN},
            {.iov_base = (void *)req->payload, .iov_len = req->payload_len},
        };
        *payload = req->payload;
        if (ss->tx->mode != FRAME_PROTECT_ENCRYPT)
                return frame_seal(ss->tx, req->head, REPL_FRAME_HDR_LEN, in, NULL, 2, tag);
        if (req->payload_len == 0) /* the message alone, in place; the arena may not exist yet */
                return frame_seal(ss->tx, req->head, REPL_FRAME_HDR_LEN, in, in, 2, tag);
        if (ss->cap - ss->used < req->payload_len) {
                if (!first)
                        return -ENOSPC;
                size_t cap = req->payload_len > SEND_ARENA ? req->payload_len : SEND_ARENA;
                uint8_t *a = malloc(cap);
                if (!a)
                        return -ENOMEM;
                free(ss->arena);
                ss->arena = a;
                ss->cap = cap;
                ss->used = 0;
        }
        struct iovec out[2] = {in[0], {.iov_base = ss->arena + ss->used, .iov_len = in[1].iov_len}};
        *payload = out[1].iov_base;
        ss->used += req->payload_len;
        return frame_seal(ss->tx, req->head, REPL_FRAME_HDR_LEN, in, out, 2, tag);
}

/*
 * Writes the frames of *list, many per writev, each sealed just before (in order: the
 * counter is the nonce); each one written is let go of. 0, or -errno with *list the frames
 * not (wholly) written.
 */
static int write_frames(int fd, struct send_seal *ss, struct repl_req **listp, unsigned timeout_ms)
{
        struct iovec iov[SEND_BATCH_IOV];
        uint8_t tags[SEND_BATCH_FRAMES][FRAME_TAG_LEN];
        struct repl_req *list = *listp;
        bool sealed = ss->tx != NULL;
        while (list) {
                int n = 0, frames = 0;
                struct repl_req *end = list;
                ss->used = 0;
                /* Counted in frames, not iovecs: frames without a payload take two. */
                while (end && frames < SEND_BATCH_FRAMES) {
                        const void *payload = end->payload;
                        if (sealed) {
                                int rc = seal_req(ss, end, &payload, tags[frames], end == list);
                                if (rc == -ENOSPC)
                                        break;
                                if (rc < 0) {
                                        *listp = list;
                                        return rc;
                                }
                        }
                        iov[n++] = (struct iovec){.iov_base = end->head, .iov_len = end->head_len};
                        if (end->payload_len)
                                iov[n++] = (struct iovec){.iov_base = (void *)payload,
                                                          .iov_len = end->payload_len};
                        if (sealed)
                                iov[n++] = (struct iovec){.iov_base = tags[frames],
                                                          .iov_len = FRAME_TAG_LEN};
                        frames++;
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
        struct send_seal ss = {.tx = frame_seal_active(&r->data_seal) ? &r->data_seal : NULL};
        for (;;) {
                while (!r->out_head && r->in_ack_set && r->conn_gen == gen)
                        pthread_cond_wait(&r->out_cond, &r->send_lock);
                if (!r->out_head)
                        break; /* the link went down */
                struct repl_req *list = take_queue_locked(r);
                pthread_mutex_unlock(&r->send_lock);
                int rc = write_frames(fd, &ss, &list, r->cfg.timeout_ms);
                if (rc < 0) {
                        /* The link is gone: the peer's parts complete through the disconnect. */
                        repl_disconnect_gen(
                            r, gen,
                            rc == -ETIMEDOUT              ? "peer stopped reading (send timed out)"
                            : rc == -EIO || rc == -ENOMEM ? "cannot seal a frame for the peer"
                                                          : "send to peer failed");
                        drop_list(list);
                        pthread_mutex_lock(&r->send_lock);
                        break;
                }
                pthread_mutex_lock(&r->send_lock);
        }
        pthread_mutex_unlock(&r->send_lock);
        free(ss.arena);
        repl_send_queue_drop(r);
        return NULL;
}
