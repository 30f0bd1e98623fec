/* Replication framing: header codec, bounded receive, deadlines, partial I/O. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../replicator/wire.h"

#define N_TYPES 21 /* MSG_HELLO .. MSG_RESIZE */

static void pair(int sv[2])
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Bytes still waiting in the socket, without consuming them. */
static ssize_t peek(int fd, void *buf, size_t len)
{
        return recv(fd, buf, len, MSG_PEEK | MSG_DONTWAIT);
}

/* ---- header codec ---- */

START_TEST(test_encode_layout)
{
        uint8_t hdr[REPL_FRAME_HDR_LEN];
        static const uint8_t want[REPL_FRAME_HDR_LEN] = {
            0x54, 0x44, 0x52, 0x31, 1, 6, 0, 0, 1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d};
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, 0x01020304, 0x0a0b0c0d);
        ck_assert_mem_eq(hdr, want, sizeof(want));
        ck_assert_mem_eq(hdr, "TDR1", 4);
}
END_TEST

START_TEST(test_roundtrip_every_type)
{
        for (unsigned t = 1; t <= N_TYPES; t++) {
                uint8_t hdr[REPL_FRAME_HDR_LEN];
                struct repl_frame f = {0};
                const char *why = NULL;
                uint32_t ml = (t * 3001) % (REPL_MSG_MAX + 1), pl = t * 65537;
                repl_frame_encode(hdr, (uint8_t)t, ml, pl);
                if (!repl_msg_has_payload((uint8_t)t)) {
                        /* Payload is a property of the type: refused from the header alone. */
                        ck_assert_int_eq(repl_frame_decode(hdr, &f, &why), -EPROTO);
                        ck_assert_ptr_nonnull(strstr(why, "unexpected payload on a "));
                        ck_assert_ptr_nonnull(strstr(why, repl_msg_name((uint8_t)t)));
                        pl = 0;
                        repl_frame_encode(hdr, (uint8_t)t, ml, pl);
                }
                ck_assert_int_eq(repl_frame_decode(hdr, &f, &why), 0);
                ck_assert_uint_eq(f.type, t);
                ck_assert_uint_eq(f.msg_len, ml);
                ck_assert_uint_eq(f.payload_len, pl);
                ck_assert_ptr_nonnull(repl_msg_descriptor((uint8_t)t));
                ck_assert_str_ne(repl_msg_name((uint8_t)t), "UNKNOWN");
        }
        ck_assert(repl_msg_has_payload(TANDEM__REPL__MSG_TYPE__MSG_WRITE));
        ck_assert(repl_msg_has_payload(TANDEM__REPL__MSG_TYPE__MSG_BITMAP));
        ck_assert(!repl_msg_has_payload(TANDEM__REPL__MSG_TYPE__MSG_FLUSH));
        ck_assert(!repl_msg_has_payload(TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE));
        ck_assert(!repl_msg_has_payload(0));
        ck_assert_str_eq(repl_msg_name(TANDEM__REPL__MSG_TYPE__MSG_HELLO), "HELLO");
        ck_assert_str_eq(repl_msg_name(TANDEM__REPL__MSG_TYPE__MSG_PING_ACK), "PING_ACK");
        ck_assert_ptr_eq(repl_msg_descriptor(TANDEM__REPL__MSG_TYPE__MSG_PING_ACK),
                         &tandem__repl__ping__descriptor);
        ck_assert_ptr_eq(repl_msg_descriptor(TANDEM__REPL__MSG_TYPE__MSG_RS_ACK),
                         &tandem__repl__ack__descriptor);
        ck_assert_ptr_eq(repl_msg_descriptor(TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REQ),
                         &tandem__repl__verify_request__descriptor);
        ck_assert_ptr_null(repl_msg_descriptor(0));
        ck_assert_ptr_null(repl_msg_descriptor(N_TYPES + 1));
        ck_assert_ptr_null(repl_msg_descriptor(255));
        ck_assert_str_eq(repl_msg_name(0), "UNKNOWN");
        ck_assert_str_eq(repl_msg_name(200), "UNKNOWN");
}
END_TEST

static int decode_why(const uint8_t *hdr, const char **why)
{
        struct repl_frame f;
        *why = NULL;
        return repl_frame_decode(hdr, &f, why);
}

START_TEST(test_decode_rejects)
{
        uint8_t hdr[REPL_FRAME_HDR_LEN];
        const char *why;

        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_PING, 0, 0);
        hdr[3] ^= 1;
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        ck_assert_str_eq(why, "bad magic");

        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_PING, 0, 0);
        hdr[4] = 7;
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        ck_assert_str_eq(why, "unsupported frame version 7");

        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_PING, 0, 0);
        hdr[7] = 0x80;
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        ck_assert_str_eq(why, "reserved bits set");

        repl_frame_encode(hdr, 0, 0, 0);
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        ck_assert_str_eq(why, "unknown message type 0");
        repl_frame_encode(hdr, N_TYPES + 1, 0, 0);
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        ck_assert_str_eq(why, "unknown message type 22");

        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, REPL_MSG_MAX, REPL_PAYLOAD_MAX);
        ck_assert_int_eq(decode_why(hdr, &why), 0);
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, REPL_MSG_MAX + 1, 0);
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        ck_assert_str_eq(why, "message too large");
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, 0xffffffffu, 0);
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, 10, REPL_PAYLOAD_MAX + 1);
        ck_assert_int_eq(decode_why(hdr, &why), -EPROTO);
        ck_assert_str_eq(why, "payload too large");

        /* A NULL why is allowed. */
        struct repl_frame f;
        ck_assert_int_eq(repl_frame_decode(hdr, &f, NULL), -EPROTO);
}
END_TEST

/* xorshift64*: reproducible without touching the global rand() state. */
static uint64_t rng_next(uint64_t *s)
{
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        return *s * 0x2545f4914f6cdd1dull;
}

static uint32_t be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

START_TEST(test_fuzz_headers)
{
        uint64_t s = 0x9e3779b97f4a7c15ull;
        unsigned accepted = 0;
        for (int i = 0; i < 10000; i++) {
                uint8_t hdr[REPL_FRAME_HDR_LEN];
                for (int j = 0; j < REPL_FRAME_HDR_LEN; j += 8) {
                        uint64_t v = rng_next(&s);
                        memcpy(hdr + j, &v, 8);
                }
                /* Steer most headers past the early checks so the later ones get exercised. */
                uint64_t k = rng_next(&s);
                if (k & 1)
                        memcpy(hdr, "TDR1", 4);
                if (k & 2)
                        hdr[4] = 1;
                if (k & 4)
                        hdr[6] = hdr[7] = 0;
                if (k & 8)
                        hdr[5] %= 20;
                if (k & 16)
                        hdr[8] = hdr[9] = 0;
                if (k & 32)
                        hdr[12] = 0;
                bool valid = be32(hdr) == REPL_WIRE_MAGIC && hdr[4] == 1 && !hdr[6] && !hdr[7] &&
                             hdr[5] >= 1 && hdr[5] <= N_TYPES && be32(hdr + 8) <= REPL_MSG_MAX &&
                             be32(hdr + 12) <= REPL_PAYLOAD_MAX &&
                             (be32(hdr + 12) == 0 || repl_msg_has_payload(hdr[5]));
                struct repl_frame f = {0};
                const char *why = NULL;
                int r = repl_frame_decode(hdr, &f, &why);
                ck_assert_int_eq(r, (valid ? 0 : -EPROTO));
                if (valid) {
                        accepted++;
                        ck_assert_uint_eq(f.type, hdr[5]);
                        ck_assert_uint_eq(f.msg_len, be32(hdr + 8));
                        ck_assert_uint_eq(f.payload_len, be32(hdr + 12));
                } else {
                        ck_assert_ptr_nonnull(why);
                }
        }
        /* The steering must actually have produced both outcomes. */
        ck_assert_uint_gt(accepted, 20);
        ck_assert_uint_lt(accepted, 9000);
}
END_TEST

/* ---- send / receive ---- */

START_TEST(test_send_recv_every_type)
{
        int sv[2];
        pair(sv);
        for (unsigned t = 1; t <= N_TYPES; t++) {
                const ProtobufCMessageDescriptor *d = repl_msg_descriptor((uint8_t)t);
                ProtobufCMessage *m = calloc(1, d->sizeof_message);
                d->message_init(m);
                uint8_t data[64];
                memset(data, (int)t, sizeof(data));
                struct iovec iov = {.iov_base = data, .iov_len = t};
                bool with_payload = repl_msg_has_payload((uint8_t)t);
                ck_assert_int_eq(repl_send(sv[0], (uint8_t)t, m, with_payload ? &iov : NULL,
                                           with_payload ? 1 : 0, 1000),
                                 0);
                free(m);

                struct repl_rx rx;
                const char *why = NULL;
                ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, &why), 0);
                ck_assert_uint_eq(rx.f.type, t);
                ck_assert_ptr_nonnull(rx.msg);
                ck_assert_ptr_eq(rx.msg->descriptor, d);
                if (with_payload) {
                        ck_assert_uint_eq(rx.f.payload_len, t);
                        ck_assert_mem_eq(rx.payload, data, t);
                } else {
                        ck_assert_uint_eq(rx.f.payload_len, 0);
                        ck_assert_ptr_null(rx.payload);
                }
                repl_rx_free(&rx);
                ck_assert_ptr_null(rx.msg);
        }
        /* A NULL message travels as msg_len 0 and unpacks to the defaults. */
        ck_assert_int_eq(repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_FLUSH, NULL, NULL, 0, 1000),
                         0);
        struct repl_rx rx;
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, NULL), 0);
        ck_assert_uint_eq(rx.f.msg_len, 0);
        ck_assert_uint_eq(((Tandem__Repl__Flush *)rx.msg)->seq, 0);
        repl_rx_free(&rx);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_send_recv_write_fields)
{
        int sv[2];
        pair(sv);
        Tandem__Repl__Write w = TANDEM__REPL__WRITE__INIT;
        w.seq = 42;
        w.offset = 1ull << 40;
        w.length = 12;
        w.fua = true;
        struct iovec iov[3] = {{"abcd", 4}, {"", 0}, {"efghijkl", 8}};
        ck_assert_int_eq(repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_WRITE, &w.base, iov, 3, -1),
                         0);

        struct repl_rx rx;
        ck_assert_int_eq(repl_recv_head(sv[1], &rx, 1000, NULL), 0);
        ck_assert_ptr_null(rx.payload);
        ck_assert_uint_eq(rx.f.payload_len, 12);
        const Tandem__Repl__Write *got = (const void *)rx.msg;
        ck_assert_uint_eq(got->seq, 42);
        ck_assert_uint_eq(got->offset, 1ull << 40);
        ck_assert_uint_eq(got->length, 12);
        ck_assert(got->fua);
        char buf[12];
        ck_assert_int_eq(repl_recv_payload(sv[1], buf, sizeof(buf), 1000), 0);
        ck_assert_mem_eq(buf, "abcdefghijkl", 12);
        repl_rx_free(&rx);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* A message past the small on-stack pack buffer, and right up to REPL_MSG_MAX. */
START_TEST(test_send_recv_large_message)
{
        int sv[2];
        pair(sv);
        enum { N = 2000 };
        uint64_t *offs = malloc(N * sizeof(*offs));
        for (int i = 0; i < N; i++)
                offs[i] = (uint64_t)i << 20;
        Tandem__Repl__VerifyReply vr = TANDEM__REPL__VERIFY_REPLY__INIT;
        vr.seq = 5;
        vr.n_mismatch_offsets = N;
        vr.mismatch_offsets = offs;
        ck_assert_int_eq(
            repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REPLY, &vr.base, NULL, 0, 1000), 0);
        struct repl_rx rx;
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, NULL), 0);
        ck_assert_uint_gt(rx.f.msg_len, 256);
        const Tandem__Repl__VerifyReply *got = (const void *)rx.msg;
        ck_assert_uint_eq(got->n_mismatch_offsets, N);
        ck_assert_mem_eq(got->mismatch_offsets, offs, N * sizeof(*offs));
        repl_rx_free(&rx);
        free(offs);

        /* Exactly REPL_MSG_MAX bytes packed is still accepted (3 bytes of tag and length). */
        size_t slen = REPL_MSG_MAX - 4;
        char *reason = malloc(slen + 1);
        memset(reason, 'r', slen);
        reason[slen] = '\0';
        Tandem__Repl__Disconnect dc = TANDEM__REPL__DISCONNECT__INIT;
        dc.reason = reason;
        ck_assert_uint_eq(protobuf_c_message_get_packed_size(&dc.base), REPL_MSG_MAX);
        ck_assert_int_eq(
            repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT, &dc.base, NULL, 0, 1000), 0);
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, NULL), 0);
        ck_assert_uint_eq(rx.f.msg_len, REPL_MSG_MAX);
        ck_assert_str_eq(((Tandem__Repl__Disconnect *)rx.msg)->reason, reason);
        repl_rx_free(&rx);
        free(reason);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

struct bulk_sender {
        int fd, rc, niov;
        struct iovec *iov;
};

static void *bulk_send(void *arg)
{
        struct bulk_sender *b = arg;
        Tandem__Repl__ResyncData rd = TANDEM__REPL__RESYNC_DATA__INIT;
        rd.seq = 7;
        b->rc =
            repl_send(b->fd, TANDEM__REPL__MSG_TYPE__MSG_RS_DATA, &rd.base, b->iov, b->niov, 10000);
        return NULL;
}

/* Larger than the socket buffer and more iovecs than IOV_MAX: partial sends must resume. */
START_TEST(test_bulk_payload_partial_io)
{
        enum { NIOV = 3000, CHUNK = 1500 };
        int sv[2];
        pair(sv);
        uint8_t *data = malloc((size_t)NIOV * CHUNK);
        struct iovec *iov = calloc(NIOV, sizeof(*iov));
        for (size_t i = 0; i < (size_t)NIOV * CHUNK; i++)
                data[i] = (uint8_t)(i * 7 + i / 251);
        for (int i = 0; i < NIOV; i++)
                iov[i] = (struct iovec){data + (size_t)i * CHUNK, CHUNK};

        struct bulk_sender b = {.fd = sv[0], .rc = 1, .niov = NIOV, .iov = iov};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, bulk_send, &b), 0);
        usleep(50 * 1000); /* let the sender fill the socket buffer first */
        struct repl_rx rx;
        ck_assert_int_eq(repl_recv_head(sv[1], &rx, 5000, NULL), 0);
        ck_assert_uint_eq(rx.f.payload_len, (uint32_t)NIOV * CHUNK);
        ck_assert_uint_eq(((Tandem__Repl__ResyncData *)rx.msg)->seq, 7);
        uint8_t *got = malloc(rx.f.payload_len);
        ck_assert_int_eq(repl_recv_payload(sv[1], got, rx.f.payload_len, 5000), 0);
        pthread_join(t, NULL);
        ck_assert_int_eq(b.rc, 0);
        ck_assert_mem_eq(got, data, (size_t)NIOV * CHUNK);
        repl_rx_free(&rx);
        free(got);
        free(data);
        free(iov);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_send_rejects)
{
        int sv[2];
        pair(sv);
        Tandem__Repl__Ping p = TANDEM__REPL__PING__INIT;
        ck_assert_int_eq(repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_ACK, &p.base, NULL, 0, 100),
                         -EINVAL);
        ck_assert_int_eq(repl_send(sv[0], 0, NULL, NULL, 0, 100), -EINVAL);
        ck_assert_int_eq(repl_send(sv[0], 99, NULL, NULL, 0, 100), -EINVAL);
        ck_assert_int_eq(
            repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_PING_ACK, &p.base, NULL, 0, 100), 0);

        static char dummy[1];
        struct iovec big = {.iov_base = dummy, .iov_len = REPL_PAYLOAD_MAX + 1};
        ck_assert_int_eq(repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_WRITE, NULL, &big, 1, 100),
                         -EMSGSIZE);
        char *reason = malloc(REPL_MSG_MAX + 1);
        memset(reason, 'x', REPL_MSG_MAX);
        reason[REPL_MSG_MAX] = '\0';
        Tandem__Repl__Disconnect dc = TANDEM__REPL__DISCONNECT__INIT;
        dc.reason = reason;
        ck_assert_int_eq(
            repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT, &dc.base, NULL, 0, 100),
            -EMSGSIZE);
        free(reason);

        /* Only the PING_ACK went out: nothing of the refused frames reached the wire. */
        struct repl_rx rx;
        ck_assert_int_eq(repl_recv(sv[1], &rx, 100, NULL), 0);
        ck_assert_uint_eq(rx.f.type, TANDEM__REPL__MSG_TYPE__MSG_PING_ACK);
        repl_rx_free(&rx);
        ck_assert_int_eq(repl_recv(sv[1], &rx, 50, NULL), -ETIMEDOUT);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/* The stream ends inside the message: the peer closed. */
START_TEST(test_recv_truncated_stream)
{
        int sv[2];
        pair(sv);
        uint8_t hdr[REPL_FRAME_HDR_LEN], body[20] = {0};
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_STATE, 40, 0);
        ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), sizeof(hdr));
        ck_assert_int_eq(write(sv[0], body, sizeof(body)), sizeof(body));
        close(sv[0]);
        struct repl_rx rx;
        memset(&rx, 0x5a, sizeof(rx));
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, NULL), -ECONNRESET);
        ck_assert_ptr_null(rx.msg);
        ck_assert_ptr_null(rx.payload);
        close(sv[1]);

        /* Same when the payload is cut short. */
        pair(sv);
        Tandem__Repl__Write p = TANDEM__REPL__WRITE__INIT;
        uint8_t packed[16];
        p.seq = 99;
        size_t n = protobuf_c_message_pack(&p.base, packed);
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, (uint32_t)n, 100);
        ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), sizeof(hdr));
        ck_assert_int_eq(write(sv[0], packed, n), (ssize_t)n);
        ck_assert_int_eq(write(sv[0], body, 10), 10);
        close(sv[0]);
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, NULL), -ECONNRESET);
        ck_assert_ptr_null(rx.msg);
        close(sv[1]);

        /* And inside the header. */
        pair(sv);
        ck_assert_int_eq(write(sv[0], hdr, 9), 9);
        close(sv[0]);
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, NULL), -ECONNRESET);
        close(sv[1]);
}
END_TEST

/* msg_len covers a protobuf encoding that was cut inside a field: it does not unpack. */
START_TEST(test_recv_truncated_message)
{
        int sv[2];
        pair(sv);
        uint8_t nonce[32];
        memset(nonce, 0xab, sizeof(nonce));
        Tandem__Repl__Hello h = TANDEM__REPL__HELLO__INIT;
        h.proto_min = h.proto_max = 1;
        h.node_id = 1;
        h.nonce.data = nonce;
        h.nonce.len = sizeof(nonce);
        h.lun_naa = "6001405abcdef0123456789abcdef012";
        uint8_t packed[256];
        size_t n = protobuf_c_message_pack(&h.base, packed);
        uint32_t cut = (uint32_t)n - 40; /* inside the nonce bytes */
        uint8_t hdr[REPL_FRAME_HDR_LEN];
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_HELLO, cut, 0);
        ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), sizeof(hdr));
        ck_assert_int_eq(write(sv[0], packed, cut), (ssize_t)cut);
        struct repl_rx rx;
        const char *why = NULL;
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, &why), -EPROTO);
        ck_assert_str_eq(why, "malformed HELLO message");
        ck_assert_ptr_null(rx.msg);

        /* The whole encoding unpacks fine. */
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_HELLO, (uint32_t)n, 0);
        ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), sizeof(hdr));
        ck_assert_int_eq(write(sv[0], packed, n), (ssize_t)n);
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, &why), 0);
        ck_assert_str_eq(((Tandem__Repl__Hello *)rx.msg)->lun_naa, h.lun_naa);
        repl_rx_free(&rx);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

/*
 * Oversized lengths are refused from the header alone: the call returns at once (no waiting
 * for a body that never comes) and the bytes behind the header are left unread.
 */
START_TEST(test_recv_oversized_refused_before_reading)
{
        static const struct {
                uint32_t msg_len, payload_len;
                const char *why;
        } cases[] = {
            {0xffffffffu, 0, "message too large"},
            {REPL_MSG_MAX + 1, 0, "message too large"},
            {4, 0xffffffffu, "payload too large"},
            {4, REPL_PAYLOAD_MAX + 1, "payload too large"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int sv[2];
                pair(sv);
                uint8_t hdr[REPL_FRAME_HDR_LEN];
                repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, cases[i].msg_len,
                                  cases[i].payload_len);
                ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), sizeof(hdr));
                ck_assert_int_eq(write(sv[0], "MARKER", 6), 6);
                struct repl_rx rx;
                const char *why = NULL;
                int64_t t0 = mono_ms();
                ck_assert_int_eq(repl_recv(sv[1], &rx, 5000, &why), -EPROTO);
                ck_assert_int_lt(mono_ms() - t0, 1000);
                ck_assert_str_eq(why, cases[i].why);
                ck_assert_ptr_null(rx.msg);
                ck_assert_ptr_null(rx.payload);
                char left[8];
                ck_assert_int_eq(peek(sv[1], left, sizeof(left)), 6);
                ck_assert_mem_eq(left, "MARKER", 6);
                close(sv[0]);
                close(sv[1]);
        }
}
END_TEST

START_TEST(test_recv_timeout)
{
        int sv[2];
        pair(sv);
        struct repl_rx rx;
        int64_t t0 = mono_ms();
        ck_assert_int_eq(repl_recv(sv[1], &rx, 100, NULL), -ETIMEDOUT);
        int64_t took = mono_ms() - t0;
        ck_assert_int_ge(took, 90);
        ck_assert_int_lt(took, 2000);

        /* Half a header, then silence. */
        uint8_t hdr[REPL_FRAME_HDR_LEN];
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_PING, 0, 0);
        ck_assert_int_eq(write(sv[0], hdr, 8), 8);
        ck_assert_int_eq(repl_recv(sv[1], &rx, 100, NULL), -ETIMEDOUT);

        /* A valid header promising a body that never comes. */
        char buf[4];
        ck_assert_int_eq(repl_recv_payload(sv[1], buf, 4, 50), -ETIMEDOUT);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_send_timeout_when_peer_does_not_read)
{
        int sv[2];
        pair(sv);
        size_t len = 8u * 1024 * 1024; /* far more than a socket buffer */
        uint8_t *data = calloc(1, len);
        struct iovec iov = {data, len};
        int64_t t0 = mono_ms();
        ck_assert_int_eq(repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_WRITE, NULL, &iov, 1, 100),
                         -ETIMEDOUT);
        int64_t took = mono_ms() - t0;
        ck_assert_int_ge(took, 90);
        ck_assert_int_lt(took, 2000);
        free(data);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

START_TEST(test_peer_closed)
{
        int sv[2];
        pair(sv);
        close(sv[0]);
        struct repl_rx rx;
        ck_assert_int_eq(repl_recv(sv[1], &rx, 1000, NULL), -ECONNRESET);
        /* EPIPE, without a SIGPIPE that would kill the test. */
        ck_assert_int_eq(repl_send(sv[1], TANDEM__REPL__MSG_TYPE__MSG_PING, NULL, NULL, 0, 1000),
                         -ECONNRESET);
        close(sv[1]);
}
END_TEST

/* ---- sealed frames (frame_seal.h) through the wire functions ---- */

struct sealed_pair {
        struct frame_seal tx, rx;
};

static void sealed_pair_init(struct sealed_pair *sp, int mode)
{
        struct frame_key k;
        for (int i = 0; i < FRAME_KEY_LEN; i++)
                k.key[i] = (uint8_t)(0x40 + i);
        for (int i = 0; i < FRAME_IV_LEN; i++)
                k.iv[i] = (uint8_t)(0x90 + i);
        ck_assert_int_eq(frame_seal_init(&sp->tx, &k, mode, FRAME_CIPHER_DEFAULT, false), 0);
        ck_assert_int_eq(frame_seal_init(&sp->rx, &k, mode, FRAME_CIPHER_DEFAULT, true), 0);
}

static void sealed_pair_fini(struct sealed_pair *sp)
{
        frame_seal_fini(&sp->tx);
        frame_seal_fini(&sp->rx);
}

struct sealed_sender {
        int fd, rc;
        struct frame_seal *tx;
        const uint8_t *payload;
        size_t len;
};

static void *sealed_send(void *arg)
{
        struct sealed_sender *b = arg;
        Tandem__Repl__Write w = TANDEM__REPL__WRITE__INIT;
        w.seq = 1;
        w.offset = 1 << 20;
        w.length = (uint32_t)b->len;
        w.kind = 1;
        struct iovec iov[2] = {{(void *)b->payload, b->len / 2},
                               {(void *)(b->payload + b->len / 2), b->len - b->len / 2}};
        b->rc =
            repl_send_on(b->fd, b->tx, TANDEM__REPL__MSG_TYPE__MSG_WRITE, &w.base, iov, 2, 10000);
        Tandem__Repl__Ping p = TANDEM__REPL__PING__INIT;
        p.token = 99;
        if (b->rc == 0)
                b->rc = repl_send_on(b->fd, b->tx, TANDEM__REPL__MSG_TYPE__MSG_PING, &p.base, NULL,
                                     0, 10000);
        return NULL;
}

/*
 * Sealed send, then the reader: a 2 MiB WRITE (longer than the reader's buffer: it grows, no
 * copy), then a PING; both modes. The sender's payload is never modified.
 */
START_TEST(test_sealed_reader_roundtrip)
{
        int mode = _i ? FRAME_PROTECT_ENCRYPT : FRAME_PROTECT_AUTHENTICATE;
        struct sealed_pair sp;
        sealed_pair_init(&sp, mode);
        size_t len = 2u << 20;
        uint8_t *payload = malloc(len), *copy = malloc(len);
        ck_assert_ptr_nonnull(payload);
        ck_assert_ptr_nonnull(copy);
        for (size_t i = 0; i < len; i++)
                payload[i] = (uint8_t)(i * 13 + (i >> 16));
        memcpy(copy, payload, len);
        int sv[2];
        pair(sv);
        struct sealed_sender b = {.fd = sv[0], .tx = &sp.tx, .payload = payload, .len = len};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, sealed_send, &b), 0);
        struct repl_reader rd;
        ck_assert_int_eq(repl_reader_init_on(&rd, sv[1], &sp.rx), 0);
        struct repl_rx rx;
        const char *why = NULL;
        ck_assert_int_eq(repl_reader_next(&rd, &rx, 10000, &why), 0);
        ck_assert_uint_eq(rx.f.type, TANDEM__REPL__MSG_TYPE__MSG_WRITE);
        ck_assert_uint_eq(rx.f.payload_len, len);
        ck_assert_uint_eq(((Tandem__Repl__Write *)rx.msg)->offset, 1 << 20);
        const void *got = NULL;
        ck_assert_int_eq(repl_reader_payload(&rd, (uint32_t)len, NULL, &got, 10000), 0);
        ck_assert_int_eq(memcmp(got, copy, len), 0);
        repl_rx_free(&rx);
        ck_assert_int_eq(repl_reader_next(&rd, &rx, 10000, &why), 0);
        ck_assert_uint_eq(rx.f.type, TANDEM__REPL__MSG_TYPE__MSG_PING);
        ck_assert_uint_eq(((Tandem__Repl__Ping *)rx.msg)->token, 99);
        repl_rx_free(&rx);
        pthread_join(t, NULL);
        ck_assert_int_eq(b.rc, 0);
        ck_assert_int_eq(memcmp(payload, copy, len), 0);
        repl_reader_fini(&rd);
        close(sv[0]);
        close(sv[1]);
        free(payload);
        free(copy);
        sealed_pair_fini(&sp);
}
END_TEST

/*
 * repl_recv_on: a good frame, then the same bytes again (replayed), then, on a fresh pair,
 * one with a byte changed in its message and one sent unsealed: -EPROTO, the reason says so,
 * nothing is returned.
 */
START_TEST(test_sealed_recv_rejects)
{
        int mode = _i ? FRAME_PROTECT_ENCRYPT : FRAME_PROTECT_AUTHENTICATE;
        struct sealed_pair sp;
        sealed_pair_init(&sp, mode);
        int sv[2];
        pair(sv);
        Tandem__Repl__Write a = TANDEM__REPL__WRITE__INIT;
        a.seq = 5;
        uint8_t bm[64];
        memset(bm, 0x3c, sizeof(bm));
        struct iovec iov = {bm, sizeof(bm)};
        ck_assert_int_eq(
            repl_send_on(sv[0], &sp.tx, TANDEM__REPL__MSG_TYPE__MSG_WRITE, &a.base, &iov, 1, 1000),
            0);
        uint8_t frame[256];
        ssize_t n = peek(sv[1], frame, sizeof(frame));
        ck_assert_int_eq(n, REPL_FRAME_HDR_LEN + 2 + 64 + FRAME_TAG_LEN);
        if (mode == FRAME_PROTECT_ENCRYPT)
                ck_assert_uint_ne(frame[REPL_FRAME_HDR_LEN + 2 + 10], 0x3c);
        else
                ck_assert_uint_eq(frame[REPL_FRAME_HDR_LEN + 2 + 10], 0x3c);
        struct repl_rx rx;
        const char *why = NULL;
        ck_assert_int_eq(repl_recv_on(sv[1], &sp.rx, &rx, 1000, &why), 0);
        ck_assert_uint_eq(((Tandem__Repl__Write *)rx.msg)->seq, 5);
        ck_assert_int_eq(memcmp(rx.payload, bm, sizeof(bm)), 0);
        repl_rx_free(&rx);
        /* Replayed. */
        ck_assert_int_eq(repl_write_full(sv[0], frame, (size_t)n, 1000), 0);
        ck_assert_int_eq(repl_recv_on(sv[1], &sp.rx, &rx, 1000, &why), -EPROTO);
        ck_assert_ptr_nonnull(strstr(why, "frame failed authentication"));
        ck_assert_ptr_null(rx.msg);
        ck_assert_ptr_null(rx.payload);
        sealed_pair_fini(&sp);

        /* Altered: one byte of the message. */
        sealed_pair_init(&sp, mode);
        frame[REPL_FRAME_HDR_LEN] ^= 0x80;
        ck_assert_int_eq(repl_write_full(sv[0], frame, (size_t)n, 1000), 0);
        why = NULL;
        ck_assert_int_eq(repl_recv_on(sv[1], &sp.rx, &rx, 1000, &why), -EPROTO);
        ck_assert_ptr_nonnull(strstr(why, "frame failed authentication"));
        sealed_pair_fini(&sp);

        /* Unsealed (a clear frame followed by 16 bytes of something). */
        sealed_pair_init(&sp, mode);
        ck_assert_int_eq(
            repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_WRITE, &a.base, NULL, 0, 1000), 0);
        memset(bm, 0, FRAME_TAG_LEN);
        ck_assert_int_eq(repl_write_full(sv[0], bm, FRAME_TAG_LEN, 1000), 0);
        why = NULL;
        ck_assert_int_eq(repl_recv_on(sv[1], &sp.rx, &rx, 1000, &why), -EPROTO);
        ck_assert_ptr_nonnull(strstr(why, "frame failed authentication"));
        sealed_pair_fini(&sp);
        close(sv[0]);
        close(sv[1]);
}
END_TEST

static Suite *wire_suite(void)
{
        Suite *s = suite_create("repl_wire");
        TCase *tc = tcase_create("wire");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_encode_layout);
        tcase_add_test(tc, test_roundtrip_every_type);
        tcase_add_test(tc, test_decode_rejects);
        tcase_add_test(tc, test_fuzz_headers);
        tcase_add_test(tc, test_send_recv_every_type);
        tcase_add_test(tc, test_send_recv_write_fields);
        tcase_add_test(tc, test_send_recv_large_message);
        tcase_add_test(tc, test_bulk_payload_partial_io);
        tcase_add_test(tc, test_send_rejects);
        tcase_add_test(tc, test_recv_truncated_stream);
        tcase_add_test(tc, test_recv_truncated_message);
        tcase_add_test(tc, test_recv_oversized_refused_before_reading);
        tcase_add_test(tc, test_recv_timeout);
        tcase_add_test(tc, test_send_timeout_when_peer_does_not_read);
        tcase_add_test(tc, test_peer_closed);
        tcase_add_loop_test(tc, test_sealed_reader_roundtrip, 0, 2);
        tcase_add_loop_test(tc, test_sealed_recv_rejects, 0, 2);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(wire_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
