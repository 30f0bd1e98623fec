/* Replication frames: header codec and deadline-bounded socket I/O (see wire.h). */
#include "tandem/byteorder.h"
#include "wire.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Reasons that carry a number; valid until the next one is formatted on this thread. */
static _Thread_local char why_buf[96];

__attribute__((format(printf, 1, 2))) static const char *why_fmt(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why_buf, sizeof(why_buf), fmt, ap);
        va_end(ap);
        return why_buf;
}

/* ---- message types ---- */

struct msg_type_info {
        const char *name;
        const ProtobufCMessageDescriptor *desc;
        bool data_channel; /* in the data channel's sequence: carries a seq */
        bool payload;      /* may carry raw bytes after the message; no other type may */
};

static const struct msg_type_info msg_types[] = {
    [TANDEM__REPL__MSG_TYPE__MSG_HELLO] = {.name = "HELLO",
                                           .desc = &tandem__repl__hello__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_AUTH] = {.name = "AUTH", .desc = &tandem__repl__auth__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT] = {.name = "AUTH_RESULT",
                                                 .desc = &tandem__repl__auth_result__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_STATE] = {.name = "STATE",
                                           .desc = &tandem__repl__state__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_BITMAP] = {.name = "BITMAP",
                                            .desc = &tandem__repl__bitmap_chunk__descriptor,
                                            .payload = true},
    [TANDEM__REPL__MSG_TYPE__MSG_WRITE] = {.name = "WRITE",
                                           .desc = &tandem__repl__write__descriptor,
                                           .data_channel = true,
                                           .payload = true},
    [TANDEM__REPL__MSG_TYPE__MSG_FLUSH] = {.name = "FLUSH",
                                           .desc = &tandem__repl__flush__descriptor,
                                           .data_channel = true},
    [TANDEM__REPL__MSG_TYPE__MSG_ACK] = {.name = "ACK", .desc = &tandem__repl__ack__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_RS_DATA] = {.name = "RS_DATA",
                                             .desc = &tandem__repl__resync_data__descriptor,
                                             .data_channel = true,
                                             .payload = true},
    [TANDEM__REPL__MSG_TYPE__MSG_RS_ACK] = {.name = "RS_ACK",
                                            .desc = &tandem__repl__ack__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_SYNC_DONE] = {.name = "SYNC_DONE",
                                               .desc = &tandem__repl__sync_done__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REQ] = {.name = "VERIFY_REQ",
                                                .desc = &tandem__repl__verify_request__descriptor,
                                                .data_channel = true,
                                                .payload = true},
    [TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REPLY] = {.name = "VERIFY_REPLY",
                                                  .desc = &tandem__repl__verify_reply__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_PING] = {.name = "PING", .desc = &tandem__repl__ping__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_PING_ACK] = {.name = "PING_ACK",
                                              .desc = &tandem__repl__ping__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE] = {.name = "SCSI_STATE",
                                                .desc = &tandem__repl__scsi_state__descriptor,
                                                .data_channel = true},
    [TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT] = {.name = "DISCONNECT",
                                                .desc = &tandem__repl__disconnect__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_LU_STATE] = {.name = "LU_STATE",
                                              .desc = &tandem__repl__lu_state__descriptor,
                                              .data_channel = true,
                                              .payload = true},
    [TANDEM__REPL__MSG_TYPE__MSG_FORWARD] = {.name = "FORWARD",
                                             .desc = &tandem__repl__forward__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_FORWARD_REPLY] = {.name = "FORWARD_REPLY",
                                                   .desc =
                                                       &tandem__repl__forward_reply__descriptor},
    [TANDEM__REPL__MSG_TYPE__MSG_RESIZE] = {.name = "RESIZE",
                                            .desc = &tandem__repl__resize__descriptor,
                                            .data_channel = true},
};

const ProtobufCMessageDescriptor *repl_msg_descriptor(uint8_t type)
{
        if (type >= sizeof(msg_types) / sizeof(msg_types[0]))
                return NULL;
        return msg_types[type].desc;
}

uint64_t *repl_msg_seq(uint8_t type, void *msg)
{
        if (!repl_msg_descriptor(type) || !msg_types[type].data_channel)
                return NULL;
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(msg_types[type].desc, "seq");
        return f ? (uint64_t *)((char *)msg + f->offset) : NULL;
}

void repl_peer_text(char *dst, size_t dstlen, const char *src)
{
        if (dstlen == 0)
                return;
        size_t i = 0;
        for (; src && src[i] && i + 1 < dstlen; i++)
                dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
        dst[i] = '\0';
}

bool repl_msg_has_payload(uint8_t type)
{
        return repl_msg_descriptor(type) && msg_types[type].payload;
}

const char *repl_msg_name(uint8_t type)
{
        if (!repl_msg_descriptor(type))
                return "UNKNOWN";
        return msg_types[type].name;
}

/* ---- header ---- */

void repl_frame_encode(uint8_t hdr[REPL_FRAME_HDR_LEN], uint8_t type, uint32_t msg_len,
                       uint32_t payload_len)
{
        put_be32(hdr, REPL_WIRE_MAGIC);
        hdr[4] = REPL_WIRE_VERSION;
        hdr[5] = type;
        hdr[6] = 0;
        hdr[7] = 0;
        put_be32(hdr + 8, msg_len);
        put_be32(hdr + 12, payload_len);
}

int repl_frame_decode(const uint8_t hdr[REPL_FRAME_HDR_LEN], struct repl_frame *f, const char **why)
{
        const char *dummy;
        if (!why)
                why = &dummy;
        if (get_be32(hdr) != REPL_WIRE_MAGIC) {
                *why = "bad magic";
                return -EPROTO;
        }
        if (hdr[4] != REPL_WIRE_VERSION) {
                *why = why_fmt("unsupported frame version %u", hdr[4]);
                return -EPROTO;
        }
        if (hdr[6] || hdr[7]) {
                *why = "reserved bits set";
                return -EPROTO;
        }
        if (!repl_msg_descriptor(hdr[5])) {
                *why = why_fmt("unknown message type %u", hdr[5]);
                return -EPROTO;
        }
        uint32_t msg_len = get_be32(hdr + 8), payload_len = get_be32(hdr + 12);
        if (msg_len > REPL_MSG_MAX) {
                *why = "message too large";
                return -EPROTO;
        }
        if (payload_len > REPL_PAYLOAD_MAX) {
                *why = "payload too large";
                return -EPROTO;
        }
        if (payload_len && !msg_types[hdr[5]].payload) {
                *why = why_fmt("unexpected payload on a %s", msg_types[hdr[5]].name);
                return -EPROTO;
        }
        f->type = hdr[5];
        f->msg_len = msg_len;
        f->payload_len = payload_len;
        return 0;
}

/* ---- deadline-bounded socket I/O ---- */

struct deadline {
        bool none;
        int64_t at_ms; /* CLOCK_MONOTONIC */
};

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct deadline deadline_in(int timeout_ms)
{
        struct deadline d = {.none = timeout_ms < 0, .at_ms = 0};
        if (!d.none)
                d.at_ms = now_ms() + timeout_ms;
        return d;
}

/* Milliseconds left for poll(): -1 without a deadline, 0 once it has passed. */
static int deadline_left(const struct deadline *d)
{
        if (d->none)
                return -1;
        int64_t left = d->at_ms - now_ms();
        if (left <= 0)
                return 0;
        return left > INT_MAX ? INT_MAX : (int)left;
}

static int io_error(int err)
{
        /* A peer that went away shows up as EPIPE on send and ECONNRESET on recv. */
        if (err == EPIPE || err == ECONNRESET)
                return -ECONNRESET;
        return -err;
}

/* Waits until fd is ready for events; errors and hangups are left for the next I/O call. */
static int wait_ready(int fd, short events, const struct deadline *d)
{
        for (;;) {
                int left = deadline_left(d);
                if (left == 0)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = fd, .events = events};
                int n = poll(&p, 1, left);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        continue; /* the next round sees the deadline passed */
                if (p.revents & POLLNVAL)
                        return -EBADF;
                return 0;
        }
}

/* Some bytes (at most len, at least one) once there are any before the deadline. */
static ssize_t recv_some(int fd, void *buf, size_t len, const struct deadline *d)
{
        for (;;) {
                ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
                if (n > 0)
                        return n;
                if (n == 0)
                        return -ECONNRESET;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                        return io_error(errno);
                int r = wait_ready(fd, POLLIN, d);
                if (r)
                        return r;
        }
}

static int read_full(int fd, void *buf, size_t len, const struct deadline *d)
{
        uint8_t *p = buf;
        for (size_t done = 0; done < len;) {
                ssize_t n = recv_some(fd, p + done, len - done, d);
                if (n < 0)
                        return (int)n;
                done += (size_t)n;
        }
        return 0;
}

/* Sends every byte of iov[0..iovcnt); the array is consumed (advanced in place). */
static int writev_full(int fd, struct iovec *iov, size_t iovcnt, const struct deadline *d)
{
        for (;;) {
                while (iovcnt && iov->iov_len == 0) {
                        iov++;
                        iovcnt--;
                }
                if (!iovcnt)
                        return 0;
                struct msghdr mh = {.msg_iov = iov,
                                    .msg_iovlen = iovcnt > IOV_MAX ? IOV_MAX : iovcnt};
                ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                return io_error(errno);
                        int r = wait_ready(fd, POLLOUT, d);
                        if (r)
                                return r;
                        continue;
                }
                size_t sent = (size_t)n;
                while (sent && iovcnt) {
                        if (sent >= iov->iov_len) {
                                sent -= iov->iov_len;
                                iov++;
                                iovcnt--;
                        } else {
                                iov->iov_base = (uint8_t *)iov->iov_base + sent;
                                iov->iov_len -= sent;
                                sent = 0;
                        }
                }
        }
}

int repl_read_full(int fd, void *buf, size_t len, int timeout_ms)
{
        struct deadline d = deadline_in(timeout_ms);
        return read_full(fd, buf, len, &d);
}

int repl_write_full(int fd, const void *buf, size_t len, int timeout_ms)
{
        struct deadline d = deadline_in(timeout_ms);
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        return writev_full(fd, &iov, 1, &d);
}

/* ---- frames ---- */

#define SEND_SMALL_MSG 256
#define SEND_SMALL_IOV 16

int repl_writev_full(int fd, struct iovec *iov, size_t iovcnt, int timeout_ms)
{
        struct deadline d = deadline_in(timeout_ms);
        return writev_full(fd, iov, iovcnt, &d);
}

int repl_send(int fd, uint8_t type, const ProtobufCMessage *msg, const struct iovec *payload,
              int niov, int timeout_ms)
{
        return repl_send_on(fd, NULL, type, msg, payload, niov, timeout_ms);
}

/*
 * Seals header + packed message + payload (iov[0], iov[1], iov[2..2+niov)); with "encrypt"
 * the message in place and the payload into *cipher (malloc'd here), which then replaces the
 * payload iovecs. The tag goes to tag.
 */
static int seal_frame(struct frame_seal *tx, struct iovec *iov, int niov, uint64_t payload_len,
                      uint8_t **cipher, uint8_t tag[FRAME_TAG_LEN])
{
        const struct iovec *in = iov + 1;
        int n = niov + 1;
        if (tx->mode != FRAME_PROTECT_ENCRYPT)
                return frame_seal(tx, iov[0].iov_base, iov[0].iov_len, in, NULL, n, tag);
        struct iovec small_out[SEND_SMALL_IOV + 1];
        struct iovec *out = n <= SEND_SMALL_IOV + 1 ? small_out : calloc((size_t)n, sizeof(*out));
        *cipher = payload_len ? malloc(payload_len) : NULL;
        int r = -ENOMEM;
        if (!out || (payload_len && !*cipher))
                goto done;
        out[0] = iov[1]; /* the packed message: ours, in place */
        size_t off = 0;
        for (int i = 1; i < n; i++) {
                out[i] = (struct iovec){.iov_base = *cipher + off, .iov_len = in[i].iov_len};
                off += in[i].iov_len;
        }
        r = frame_seal(tx, iov[0].iov_base, iov[0].iov_len, in, out, n, tag);
done:
        if (out && out != small_out)
                free(out);
        return r;
}

int repl_send_on(int fd, struct frame_seal *tx, uint8_t type, const ProtobufCMessage *msg,
                 const struct iovec *payload, int niov, int timeout_ms)
{
        struct deadline d = deadline_in(timeout_ms);
        const ProtobufCMessageDescriptor *desc = repl_msg_descriptor(type);
        if (!desc || (msg && msg->descriptor != desc) || niov < 0 || (niov && !payload))
                return -EINVAL;
        bool sealed = frame_seal_active(tx);

        uint64_t payload_len = 0;
        for (int i = 0; i < niov; i++)
                payload_len += payload[i].iov_len;
        if (payload_len > REPL_PAYLOAD_MAX)
                return -EMSGSIZE;
        size_t msg_len = msg ? protobuf_c_message_get_packed_size(msg) : 0;
        if (msg_len > REPL_MSG_MAX)
                return -EMSGSIZE;

        uint8_t small_msg[SEND_SMALL_MSG];
        struct iovec small_iov[SEND_SMALL_IOV + 3];
        uint8_t *packed = msg_len <= sizeof(small_msg) ? small_msg : malloc(msg_len);
        struct iovec *iov =
            niov <= SEND_SMALL_IOV ? small_iov : calloc((size_t)niov + 3, sizeof(*iov));
        uint8_t *cipher = NULL, tag[FRAME_TAG_LEN];
        int r = -ENOMEM;
        if (!packed || !iov)
                goto out;
        if (msg_len)
                protobuf_c_message_pack(msg, packed);

        uint8_t hdr[REPL_FRAME_HDR_LEN];
        repl_frame_encode(hdr, type, (uint32_t)msg_len, (uint32_t)payload_len);
        iov[0] = (struct iovec){.iov_base = hdr, .iov_len = sizeof(hdr)};
        iov[1] = (struct iovec){.iov_base = packed, .iov_len = msg_len};
        if (niov)
                memcpy(iov + 2, payload, (size_t)niov * sizeof(*iov));
        size_t cnt = (size_t)niov + 2;
        if (sealed) {
                r = seal_frame(tx, iov, niov, payload_len, &cipher, tag);
                if (r)
                        goto out;
                if (cipher) {
                        iov[2] = (struct iovec){.iov_base = cipher, .iov_len = payload_len};
                        cnt = 3;
                }
                iov[cnt++] = (struct iovec){.iov_base = tag, .iov_len = sizeof(tag)};
        }
        r = writev_full(fd, iov, cnt, &d);
out:
        free(cipher);
        if (packed && packed != small_msg)
                free(packed);
        if (iov && iov != small_iov)
                free(iov);
        return r;
}

void repl_rx_free(struct repl_rx *rx)
{
        if (rx->msg)
                protobuf_c_message_free_unpacked(rx->msg, NULL);
        free(rx->payload);
        memset(rx, 0, sizeof(*rx));
}

static int recv_head(int fd, struct repl_rx *rx, const struct deadline *d, const char **why)
{
        uint8_t hdr[REPL_FRAME_HDR_LEN];
        int r = read_full(fd, hdr, sizeof(hdr), d);
        if (r)
                return r;
        /* Every length is checked here, before anything is allocated for it. */
        r = repl_frame_decode(hdr, &rx->f, why);
        if (r)
                return r;

        uint8_t *buf = malloc(rx->f.msg_len ? rx->f.msg_len : 1);
        if (!buf)
                return -ENOMEM;
        r = read_full(fd, buf, rx->f.msg_len, d);
        if (!r) {
                rx->msg = protobuf_c_message_unpack(repl_msg_descriptor(rx->f.type), NULL,
                                                    rx->f.msg_len, buf);
                if (!rx->msg) {
                        *why = why_fmt("malformed %s message", repl_msg_name(rx->f.type));
                        r = -EPROTO;
                }
        }
        free(buf);
        return r;
}

#define WHY_UNSEALED                                                                               \
        "frame failed authentication (altered, injected, replayed, reordered or truncated)"

/* Message, payload and tag of a sealed frame, opened before anything is unpacked. */
static int recv_sealed(int fd, struct frame_seal *open, struct repl_rx *rx,
                       const struct deadline *d, const char **why)
{
        uint8_t hdr[REPL_FRAME_HDR_LEN];
        int r = read_full(fd, hdr, sizeof(hdr), d);
        if (r)
                return r;
        r = repl_frame_decode(hdr, &rx->f, why);
        if (r)
                return r;
        size_t body = (size_t)rx->f.msg_len + rx->f.payload_len;
        uint8_t *buf = malloc(body + FRAME_TAG_LEN);
        if (!buf)
                return -ENOMEM;
        r = read_full(fd, buf, body + FRAME_TAG_LEN, d);
        if (r)
                goto out;
        struct iovec io = {.iov_base = buf, .iov_len = body};
        if (frame_open(open, hdr, sizeof(hdr), &io, 1, buf + body)) {
                *why = WHY_UNSEALED;
                r = -EPROTO;
                goto out;
        }
        rx->msg =
            protobuf_c_message_unpack(repl_msg_descriptor(rx->f.type), NULL, rx->f.msg_len, buf);
        if (!rx->msg) {
                *why = why_fmt("malformed %s message", repl_msg_name(rx->f.type));
                r = -EPROTO;
                goto out;
        }
        if (rx->f.payload_len) {
                rx->payload = malloc(rx->f.payload_len);
                if (!rx->payload)
                        r = -ENOMEM;
                else
                        memcpy(rx->payload, buf + rx->f.msg_len, rx->f.payload_len);
        }
out:
        free(buf);
        return r;
}

int repl_recv_on(int fd, struct frame_seal *open, struct repl_rx *rx, int timeout_ms,
                 const char **why)
{
        if (!frame_seal_active(open))
                return repl_recv(fd, rx, timeout_ms, why);
        const char *dummy;
        struct deadline d = deadline_in(timeout_ms);
        memset(rx, 0, sizeof(*rx));
        int r = recv_sealed(fd, open, rx, &d, why ? why : &dummy);
        if (r)
                repl_rx_free(rx);
        return r;
}

int repl_recv_head(int fd, struct repl_rx *rx, int timeout_ms, const char **why)
{
        const char *dummy;
        struct deadline d = deadline_in(timeout_ms);
        memset(rx, 0, sizeof(*rx));
        int r = recv_head(fd, rx, &d, why ? why : &dummy);
        if (r)
                repl_rx_free(rx);
        return r;
}

int repl_recv_payload(int fd, void *buf, uint32_t len, int timeout_ms)
{
        return repl_read_full(fd, buf, len, timeout_ms);
}

int repl_recv(int fd, struct repl_rx *rx, int timeout_ms, const char **why)
{
        const char *dummy;
        struct deadline d = deadline_in(timeout_ms);
        memset(rx, 0, sizeof(*rx));
        int r = recv_head(fd, rx, &d, why ? why : &dummy);
        if (!r && rx->f.payload_len) {
                rx->payload = malloc(rx->f.payload_len);
                r = rx->payload ? read_full(fd, rx->payload, rx->f.payload_len, &d) : -ENOMEM;
        }
        if (r)
                repl_rx_free(rx);
        return r;
}

/* ---- buffered receiving: many small frames per recv() ---- */

int repl_reader_init(struct repl_reader *rd, int fd)
{
        return repl_reader_init_on(rd, fd, NULL);
}

int repl_reader_init_on(struct repl_reader *rd, int fd, struct frame_seal *open)
{
        *rd = (struct repl_reader){.fd = fd, .cap = REPL_READER_CAP};
        if (frame_seal_active(open))
                rd->open = open;
        rd->buf = malloc(rd->cap);
        return rd->buf ? 0 : -ENOMEM;
}

void repl_reader_fini(struct repl_reader *rd)
{
        free(rd->buf);
        rd->buf = NULL;
}

bool repl_reader_buffered(const struct repl_reader *rd)
{
        return rd->end > rd->start;
}

/* Until at least need bytes are buffered (need <= cap, or the buffer grows to need). */
static int reader_fill(struct repl_reader *rd, size_t need, const struct deadline *d)
{
        if (need > rd->cap) {
                memmove(rd->buf, rd->buf + rd->start, rd->end - rd->start);
                rd->end -= rd->start;
                rd->start = 0;
                uint8_t *nb = realloc(rd->buf, need);
                if (!nb)
                        return -ENOMEM;
                rd->buf = nb;
                rd->cap = need;
        }
        while (rd->end - rd->start < need) {
                if (rd->cap - rd->start < need) {
                        memmove(rd->buf, rd->buf + rd->start, rd->end - rd->start);
                        rd->end -= rd->start;
                        rd->start = 0;
                }
                ssize_t n = recv_some(rd->fd, rd->buf + rd->end, rd->cap - rd->end, d);
                if (n < 0)
                        return (int)n;
                rd->end += (size_t)n;
        }
        return 0;
}

/* The next sealed frame, whole, opened in the buffer; then its message is unpacked. */
static int reader_next_sealed(struct repl_reader *rd, struct repl_rx *rx, const struct deadline *d,
                              const char **why)
{
        size_t body = (size_t)rx->f.msg_len + rx->f.payload_len;
        size_t need = REPL_FRAME_HDR_LEN + body + FRAME_TAG_LEN;
        int r = reader_fill(rd, need, d);
        if (r)
                return r;
        uint8_t *hdr = rd->buf + rd->start, *b = hdr + REPL_FRAME_HDR_LEN;
        struct iovec io = {.iov_base = b, .iov_len = body};
        if (frame_open(rd->open, hdr, REPL_FRAME_HDR_LEN, &io, 1, b + body)) {
                *why = WHY_UNSEALED;
                return -EPROTO;
        }
        rx->msg =
            protobuf_c_message_unpack(repl_msg_descriptor(rx->f.type), NULL, rx->f.msg_len, b);
        if (!rx->msg) {
                *why = why_fmt("malformed %s message", repl_msg_name(rx->f.type));
                return -EPROTO;
        }
        rd->payload = b + rx->f.msg_len;
        rd->payload_len = rx->f.payload_len;
        rd->start += need;
        return 0;
}

int repl_reader_next(struct repl_reader *rd, struct repl_rx *rx, int timeout_ms, const char **why)
{
        memset(rx, 0, sizeof(*rx));
        rd->payload = NULL;
        rd->payload_len = 0;
        struct deadline d = deadline_in(timeout_ms);
        int r = reader_fill(rd, REPL_FRAME_HDR_LEN, &d);
        if (r)
                return r;
        r = repl_frame_decode(rd->buf + rd->start, &rx->f, why);
        if (r)
                return r;
        if (rd->open)
                return reader_next_sealed(rd, rx, &d, why);
        r = reader_fill(rd, REPL_FRAME_HDR_LEN + rx->f.msg_len, &d);
        if (r)
                return r;
        rx->msg = protobuf_c_message_unpack(repl_msg_descriptor(rx->f.type), NULL, rx->f.msg_len,
                                            rd->buf + rd->start + REPL_FRAME_HDR_LEN);
        if (!rx->msg) {
                *why = why_fmt("malformed %s message", repl_msg_name(rx->f.type));
                return -EPROTO;
        }
        rd->start += REPL_FRAME_HDR_LEN + rx->f.msg_len;
        return 0;
}

int repl_reader_payload(struct repl_reader *rd, uint32_t len, void *scratch, const void **out,
                        int timeout_ms)
{
        if (rd->open) { /* opened with its frame, in the buffer */
                if (len != rd->payload_len || !rd->payload)
                        return -EINVAL;
                *out = rd->payload;
                rd->payload = NULL;
                return 0;
        }
        struct deadline d = deadline_in(timeout_ms);
        if (len <= rd->cap) {
                int r = reader_fill(rd, len, &d);
                if (r)
                        return r;
                *out = rd->buf + rd->start;
                rd->start += len;
                return 0;
        }
        size_t have = rd->end - rd->start;
        memcpy(scratch, rd->buf + rd->start, have);
        rd->start = rd->end = 0;
        int r = read_full(rd->fd, (uint8_t *)scratch + have, len - have, &d);
        if (r == 0)
                *out = scratch;
        return r;
}
