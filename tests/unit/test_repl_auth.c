/* Replication handshake: agreement, every refusal, hostile and broken peers. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "../../replicator/auth.h"
#include "../../replicator/wire.h"

#define SECRET  "correct horse battery"
#define NAA     "6001405a1b2c3d4e5f60718293a4b5c6"
#define DATA    TANDEM__REPL__CHANNEL__CHANNEL_DATA
#define CONTROL TANDEM__REPL__CHANNEL__CHANNEL_CONTROL
#define T_MS    3000

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- two real ends ---- */

struct side {
        struct repl_hs_local local;
        int fd, timeout_ms, rc;
        struct repl_hs_result res;
        char why[256];
};

static struct side side_a(void)
{
        return (struct side){.local = {.node_id = 1,
                                       .peer_node_id = 2,
                                       .secret = SECRET,
                                       .lun_naa = NAA,
                                       .channel = DATA,
                                       .features = REPL_FEATURE_VERIFY_SHA256},
                             .timeout_ms = T_MS,
                             .rc = 1};
}

static struct side side_b(void)
{
        struct side b = side_a();
        b.local.node_id = 2;
        b.local.peer_node_id = 1;
        return b;
}

static void *run_side(void *arg)
{
        struct side *s = arg;
        s->rc = repl_handshake(s->fd, &s->local, &s->res, s->timeout_ms, s->why, sizeof(s->why));
        return NULL;
}

/* Runs a in this thread and b in another, on the two ends of a socketpair (left open). */
static void run_pair(struct side *a, struct side *b, int sv[2])
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        a->fd = sv[0];
        b->fd = sv[1];
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, run_side, b), 0);
        run_side(a);
        pthread_join(t, NULL);
}

static void close_pair(int sv[2])
{
        close(sv[0]);
        close(sv[1]);
}

START_TEST(test_handshake_agrees)
{
        struct side a = side_a(), b = side_b();
        a.local.features = REPL_FEATURE_VERIFY_SHA256 | 0x400;
        b.local.features = REPL_FEATURE_VERIFY_SHA256 | 0x800;
        int sv[2];
        run_pair(&a, &b, sv);
        ck_assert_msg(a.rc == 0, "a: %d %s", a.rc, a.why);
        ck_assert_msg(b.rc == 0, "b: %d %s", b.rc, b.why);
        ck_assert_str_eq(a.why, "");
        ck_assert_uint_eq(a.res.proto, 1);
        ck_assert_uint_eq(b.res.proto, 1);
        ck_assert_uint_eq(a.res.features, REPL_FEATURE_VERIFY_SHA256);
        ck_assert_uint_eq(b.res.features, REPL_FEATURE_VERIFY_SHA256);
        ck_assert_int_eq(a.res.channel, DATA);
        ck_assert_int_eq(b.res.channel, DATA);
        /* Frame keys: one's sending key is the other's receiving key, and the two differ. */
        ck_assert_int_eq(a.res.protection, FRAME_PROTECT_AUTHENTICATE);
        ck_assert_mem_eq(a.res.tx.key, b.res.rx.key, FRAME_KEY_LEN);
        ck_assert_mem_eq(a.res.tx.iv, b.res.rx.iv, FRAME_IV_LEN);
        ck_assert_mem_eq(a.res.rx.key, b.res.tx.key, FRAME_KEY_LEN);
        ck_assert_mem_ne(a.res.tx.key, a.res.rx.key, FRAME_KEY_LEN);

        /* The handshake consumed exactly its own frames: the stream is in step afterwards. */
        Tandem__Repl__Ping p = TANDEM__REPL__PING__INIT;
        p.token = 0x1234;
        ck_assert_int_eq(repl_send(sv[0], TANDEM__REPL__MSG_TYPE__MSG_PING, &p.base, NULL, 0, 100),
                         0);
        struct repl_rx rx;
        ck_assert_int_eq(repl_recv(sv[1], &rx, 100, NULL), 0);
        ck_assert_uint_eq(rx.f.type, TANDEM__REPL__MSG_TYPE__MSG_PING);
        ck_assert_uint_eq(((Tandem__Repl__Ping *)rx.msg)->token, 0x1234);
        repl_rx_free(&rx);
        ck_assert_int_eq(repl_recv(sv[0], &rx, 20, NULL), -ETIMEDOUT);
        close_pair(sv);
}
END_TEST

START_TEST(test_handshake_control_channel_naa_case)
{
        struct side a = side_a(), b = side_b();
        a.local.channel = b.local.channel = CONTROL;
        a.local.features = 0;
        b.local.lun_naa = "6001405A1B2C3D4E5F60718293A4B5C6"; /* same LUN, other spelling */
        a.timeout_ms = b.timeout_ms = -1;
        int sv[2];
        run_pair(&a, &b, sv);
        ck_assert_msg(a.rc == 0 && b.rc == 0, "%d %s / %d %s", a.rc, a.why, b.rc, b.why);
        ck_assert_int_eq(a.res.channel, CONTROL);
        ck_assert_uint_eq(b.res.features, 0);
        close_pair(sv);
}
END_TEST

START_TEST(test_wrong_secret)
{
        struct side a = side_a(), b = side_b();
        b.local.secret = "correct horse battery!";
        int sv[2];
        run_pair(&a, &b, sv);
        ck_assert_int_eq(a.rc, -EACCES);
        ck_assert_int_eq(b.rc, -EACCES);
        ck_assert_str_eq(a.why, "wrong secret: HMAC mismatch from node 2");
        ck_assert_str_eq(b.why, "wrong secret: HMAC mismatch from node 1");
        close_pair(sv);
}
END_TEST

START_TEST(test_unknown_node)
{
        struct side a = side_a(), b = side_b();
        b.local.node_id = 7;
        int sv[2];
        run_pair(&a, &b, sv);
        ck_assert_int_eq(a.rc, -ENOENT);
        ck_assert_int_eq(b.rc, -ENOENT);
        ck_assert_str_eq(a.why, "unknown node 7 (expected 2)");
        ck_assert_str_eq(b.why, "unknown node: node 1 expects node 2, we are node 7");
        close_pair(sv);
}
END_TEST

START_TEST(test_naa_mismatch)
{
        struct side a = side_a(), b = side_b();
        b.local.lun_naa = "6001405a1b2c3d4e5f60718293a4b5c7";
        int sv[2];
        run_pair(&a, &b, sv);
        ck_assert_int_eq(a.rc, -ESRCH);
        ck_assert_int_eq(b.rc, -ESRCH);
        ck_assert_str_eq(a.why, "different LUN: node 2 has naa 6001405a1b2c3d4e5f60718293a4b5c7, "
                                "we have naa 6001405a1b2c3d4e5f60718293a4b5c6");
        ck_assert_ptr_nonnull(strstr(b.why, "different LUN: node 1"));
        close_pair(sv);
}
END_TEST

START_TEST(test_channel_mismatch)
{
        struct side a = side_a(), b = side_b();
        b.local.channel = CONTROL;
        int sv[2];
        run_pair(&a, &b, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_int_eq(b.rc, -EPROTO);
        ck_assert_str_eq(a.why, "channel mismatch: node 2 says control, we want data");
        ck_assert_str_eq(b.why, "channel mismatch: node 1 says data, we want control");
        close_pair(sv);
}
END_TEST

START_TEST(test_bad_local_config)
{
        static const struct {
                const char *secret, *naa;
                int channel;
                uint32_t peer;
                const char *why;
        } cases[] = {
            {"short", NAA, DATA, 2, "shared secret too short"},
            {NULL, NAA, DATA, 2, "shared secret too short"},
            {SECRET, "6001405a", DATA, 2, "local LUN naa"},
            {SECRET, "6001405a1b2c3d4e5f60718293a4b5cg", DATA, 2, "local LUN naa"},
            {SECRET, NAA, 0, 2, "bad local channel"},
            {SECRET, NAA, DATA, 1, "node id 1 is also the peer's"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int sv[2];
                ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
                struct side a = side_a();
                a.local.secret = cases[i].secret;
                a.local.lun_naa = cases[i].naa;
                a.local.channel = cases[i].channel;
                a.local.peer_node_id = cases[i].peer;
                a.fd = sv[0];
                run_side(&a);
                ck_assert_int_eq(a.rc, -EINVAL);
                ck_assert_msg(strstr(a.why, cases[i].why), "case %zu: %s", i, a.why);
                /* Nothing was sent. */
                char c;
                ck_assert_int_eq(recv(sv[1], &c, 1, MSG_DONTWAIT), -1);
                close_pair(sv);
        }
}
END_TEST

/* ---- a scripted peer on the other end ---- */

struct script {
        int fd;
        void (*run)(struct script *);
        /* inputs */
        uint32_t pmin, pmax;
        uint64_t features; /* REPL_FEATURE_SEALED is added unless unsealed */
        bool unsealed;     /* a tandemd from before link protection */
        /* what the script saw */
        struct repl_rx hello;         /* the handshake's HELLO */
        Tandem__Repl__AuthResult *ar; /* its final AUTH_RESULT, if any */
        int rc;
};

static void *run_script(void *arg)
{
        struct script *s = arg;
        s->run(s);
        return NULL;
}

/* Starts the script on sv[1] and runs the real handshake (as side a) on sv[0]. */
static void run_against(struct script *s, struct side *a, int sv[2])
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        s->fd = sv[1];
        a->fd = sv[0];
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, run_script, s), 0);
        run_side(a);
        pthread_join(t, NULL);
}

static void script_free(struct script *s)
{
        repl_rx_free(&s->hello);
        if (s->ar)
                protobuf_c_message_free_unpacked(&s->ar->base, NULL);
}

static int send_hello(int fd, uint32_t pmin, uint32_t pmax, uint64_t features,
                      const uint8_t nonce[32])
{
        Tandem__Repl__Hello h = TANDEM__REPL__HELLO__INIT;
        h.proto_min = pmin;
        h.proto_max = pmax;
        h.features = features;
        h.node_id = 2;
        h.peer_node_id = 1;
        h.channel = DATA;
        h.nonce.data = (uint8_t *)nonce;
        h.nonce.len = 32;
        h.lun_naa = NAA;
        return repl_send(fd, TANDEM__REPL__MSG_TYPE__MSG_HELLO, &h.base, NULL, 0, T_MS);
}

static int send_auth(int fd, const uint8_t mac[32])
{
        Tandem__Repl__Auth a = TANDEM__REPL__AUTH__INIT;
        a.hmac.data = (uint8_t *)mac;
        a.hmac.len = 32;
        return repl_send(fd, TANDEM__REPL__MSG_TYPE__MSG_AUTH, &a.base, NULL, 0, T_MS);
}

/* Keeps the AUTH_RESULT the handshake sends last (refusal or success). */
static int recv_auth_result(struct script *s)
{
        struct repl_rx rx;
        int r = repl_recv(s->fd, &rx, T_MS, NULL);
        if (r)
                return r;
        if (rx.f.type != TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT) {
                repl_rx_free(&rx);
                return -EPROTO;
        }
        s->ar = (Tandem__Repl__AuthResult *)rx.msg;
        return 0;
}

static const Tandem__Repl__Hello *their_hello(struct script *s)
{
        return (const Tandem__Repl__Hello *)s->hello.msg;
}

/* The spec's MAC input, built by hand with the one-shot HMAC() to pin the definition. */
static void spec_mac(const char *secret, const uint8_t challenge[32], const uint8_t own[32],
                     uint32_t sender, uint32_t receiver, uint8_t channel, const char *naa,
                     uint8_t out[32])
{
        uint8_t buf[256];
        size_t n = 0;
        memcpy(buf, "tandem-repl-auth-v1", 19);
        n = 19;
        memcpy(buf + n, challenge, 32);
        n += 32;
        memcpy(buf + n, own, 32);
        n += 32;
        for (int i = 3; i >= 0; i--)
                buf[n++] = (uint8_t)(sender >> (8 * i));
        for (int i = 3; i >= 0; i--)
                buf[n++] = (uint8_t)(receiver >> (8 * i));
        buf[n++] = channel;
        memcpy(buf + n, naa, strlen(naa));
        n += strlen(naa);
        unsigned len = 0;
        ck_assert_ptr_nonnull(HMAC(EVP_sha256(), secret, (int)strlen(secret), buf, n, out, &len));
        ck_assert_uint_eq(len, 32);
}

/* A correct peer written from the spec, with its own version range and features. */
static void script_honest(struct script *s)
{
        uint8_t nonce[32], mac[32];
        RAND_bytes(nonce, sizeof(nonce));
        if ((s->rc = repl_recv(s->fd, &s->hello, T_MS, NULL)) ||
            (s->rc = send_hello(s->fd, s->pmin, s->pmax,
                                s->features | (s->unsealed ? 0 : REPL_FEATURE_SEALED), nonce)))
                return;
        const Tandem__Repl__Hello *h = their_hello(s);
        /* Not spec_mac(): ck_assert in this thread would not report cleanly. */
        repl_auth_mac(SECRET, h->nonce.data, nonce, 2, 1, DATA, NAA, mac);
        struct repl_rx rx;
        if ((s->rc = send_auth(s->fd, mac)) || (s->rc = repl_recv(s->fd, &rx, T_MS, NULL)))
                return;
        uint8_t want[32];
        repl_auth_mac(SECRET, nonce, h->nonce.data, 1, 2, DATA, NAA, want);
        if (rx.f.type == TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT) {
                s->ar = (Tandem__Repl__AuthResult *)rx.msg; /* refused by the other side */
                return;
        }
        const Tandem__Repl__Auth *a = (const void *)rx.msg;
        bool good = rx.f.type == TANDEM__REPL__MSG_TYPE__MSG_AUTH && a->hmac.len == 32 &&
                    !memcmp(a->hmac.data, want, 32);
        repl_rx_free(&rx);
        Tandem__Repl__AuthResult ok = TANDEM__REPL__AUTH_RESULT__INIT;
        ok.ok = good;
        ok.reason = good ? "" : "wrong secret: test";
        if ((s->rc = repl_send(s->fd, TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT, &ok.base, NULL, 0,
                               T_MS)))
                return;
        s->rc = recv_auth_result(s);
}

START_TEST(test_mac_matches_spec)
{
        uint8_t c[32], o[32], got[32], want[32], other[32];
        for (int i = 0; i < 32; i++) {
                c[i] = (uint8_t)i;
                o[i] = (uint8_t)(0xff - i);
        }
        repl_auth_mac(SECRET, c, o, 1, 2, DATA, NAA, got);
        spec_mac(SECRET, c, o, 1, 2, DATA, NAA, want);
        ck_assert_mem_eq(got, want, 32);
        /* The naa enters lowercased. */
        repl_auth_mac(SECRET, c, o, 1, 2, DATA, "6001405A1B2C3D4E5F60718293A4B5C6", other);
        ck_assert_mem_eq(other, want, 32);
        /* Every input matters: swapped roles, nonces, channel, secret. */
        repl_auth_mac(SECRET, c, o, 2, 1, DATA, NAA, other);
        ck_assert_mem_ne(other, want, 32);
        repl_auth_mac(SECRET, o, c, 1, 2, DATA, NAA, other);
        ck_assert_mem_ne(other, want, 32);
        repl_auth_mac(SECRET, c, o, 1, 2, CONTROL, NAA, other);
        ck_assert_mem_ne(other, want, 32);
        repl_auth_mac(SECRET "x", c, o, 1, 2, DATA, NAA, other);
        ck_assert_mem_ne(other, want, 32);
}
END_TEST

/* Protection must match: both ends refuse, each naming both settings. */
START_TEST(test_protection_mismatch)
{
        struct side a = side_a(), b = side_b();
        a.local.protection = FRAME_PROTECT_ENCRYPT;
        int sv[2];
        run_pair(&a, &b, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_int_eq(b.rc, -EPROTO);
        ck_assert_msg(strstr(a.why, "link protection mismatch: node 2 has link_protection = "
                                    "\"authenticate\", node 1 has \"encrypt\""),
                      "a: %s", a.why);
        ck_assert_msg(strstr(b.why, "link protection mismatch: node 1 has link_protection = "
                                    "\"encrypt\", node 2 has \"authenticate\""),
                      "b: %s", b.why);
        close_pair(sv);

        /* Both "encrypt": agreed, keys of their own (not those of "authenticate"). */
        struct side c = side_a(), d = side_b();
        c.local.protection = d.local.protection = FRAME_PROTECT_ENCRYPT;
        run_pair(&c, &d, sv);
        ck_assert_msg(c.rc == 0 && d.rc == 0, "%d %s / %d %s", c.rc, c.why, d.rc, d.why);
        ck_assert_int_eq(c.res.protection, FRAME_PROTECT_ENCRYPT);
        ck_assert_mem_eq(c.res.tx.key, d.res.rx.key, FRAME_KEY_LEN);
        close_pair(sv);

        /* An unusable local value. */
        struct side e = side_a();
        e.local.protection = 9;
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        e.fd = sv[0];
        run_side(&e);
        ck_assert_int_eq(e.rc, -EINVAL);
        ck_assert_msg(strstr(e.why, "link protection"), "%s", e.why);
        close_pair(sv);
}
END_TEST

/* A peer that would send its frames unsealed is refused. */
START_TEST(test_unsealed_peer_refused)
{
        struct script s = {
            .run = script_honest, .pmin = 1, .pmax = 1, .features = 0x1, .unsealed = true};
        struct side a = side_a();
        int sv[2];
        run_against(&s, &a, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_msg(strstr(a.why, "link protection mismatch: node 2 does not seal its frames"),
                      "%s", a.why);
        close_pair(sv);
        script_free(&s);
}
END_TEST

START_TEST(test_interop_with_wider_version_range)
{
        struct script s = {.run = script_honest, .pmin = 1, .pmax = 5, .features = 0x3};
        struct side a = side_a();
        int sv[2];
        run_against(&s, &a, sv);
        ck_assert_msg(a.rc == 0, "%d %s", a.rc, a.why);
        ck_assert_int_eq(s.rc, 0);
        ck_assert_ptr_nonnull(s.ar);
        ck_assert(s.ar->ok);
        ck_assert_uint_eq(a.res.proto, 1);
        ck_assert_uint_eq(a.res.features, REPL_FEATURE_VERIFY_SHA256);
        /* What we announced. */
        const Tandem__Repl__Hello *h = their_hello(&s);
        ck_assert_uint_eq(h->proto_min, REPL_PROTO_MIN);
        ck_assert_uint_eq(h->proto_max, REPL_PROTO_MAX);
        ck_assert_uint_eq(h->node_id, 1);
        ck_assert_uint_eq(h->peer_node_id, 2);
        ck_assert_uint_eq(h->nonce.len, 32);
        ck_assert_str_eq(h->lun_naa, NAA);
        script_free(&s);
        close_pair(sv);
}
END_TEST

START_TEST(test_incompatible_version)
{
        struct script s = {.run = script_honest, .pmin = 3, .pmax = 4};
        struct side a = side_a();
        int sv[2];
        run_against(&s, &a, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_str_eq(a.why, "incompatible protocol: peer speaks 3..4, we speak 1..1");
        /* The peer was told why: our refusal arrived where it expected our AUTH. */
        ck_assert_int_eq(s.rc, 0);
        script_free(&s);
        close_pair(sv);

        /* Nonsense ranges too. */
        struct script s2 = {.run = script_honest, .pmin = 2, .pmax = 1};
        run_against(&s2, &a, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_str_eq(a.why, "incompatible protocol: peer speaks 2..1, we speak 1..1");
        script_free(&s2);
        close_pair(sv);
}
END_TEST

/* Reads our HELLO, then answers with whatever raw bytes the test chose. */
struct raw_reply {
        struct script s;
        const void *bytes;
        size_t len;
        bool close_after;
};

static void script_raw(struct script *s)
{
        struct raw_reply *r = (struct raw_reply *)s;
        if ((s->rc = repl_recv(s->fd, &s->hello, T_MS, NULL)))
                return;
        s->rc = repl_write_full(s->fd, r->bytes, r->len, T_MS);
        if (r->close_after)
                shutdown(s->fd, SHUT_WR);
        else if (!s->rc)
                s->rc = recv_auth_result(s);
}

START_TEST(test_garbage_instead_of_hello)
{
        static const char http[] = "GET / HTTP/1.1\r\nHost: tandem\r\n\r\n";
        struct raw_reply r = {.s.run = script_raw, .bytes = http, .len = sizeof(http) - 1};
        struct side a = side_a();
        int sv[2];
        run_against(&r.s, &a, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_str_eq(a.why, "bad frame from peer instead of HELLO: bad magic");
        ck_assert_int_eq(r.s.rc, 0);
        ck_assert(!r.s.ar->ok);
        ck_assert_str_eq(r.s.ar->reason, a.why);
        script_free(&r.s);
        close_pair(sv);
}
END_TEST

START_TEST(test_malformed_hello)
{
        uint8_t bytes[REPL_FRAME_HDR_LEN + 6];
        repl_frame_encode(bytes, TANDEM__REPL__MSG_TYPE__MSG_HELLO, 6, 0);
        memset(bytes + REPL_FRAME_HDR_LEN, 0xff, 6);
        struct raw_reply r = {.s.run = script_raw, .bytes = bytes, .len = sizeof(bytes)};
        struct side a = side_a();
        int sv[2];
        run_against(&r.s, &a, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_str_eq(a.why, "bad frame from peer instead of HELLO: malformed HELLO message");
        script_free(&r.s);
        close_pair(sv);
}
END_TEST

START_TEST(test_unexpected_message)
{
        uint8_t bytes[REPL_FRAME_HDR_LEN];
        repl_frame_encode(bytes, TANDEM__REPL__MSG_TYPE__MSG_PING, 0, 0);
        struct raw_reply r = {.s.run = script_raw, .bytes = bytes, .len = sizeof(bytes)};
        struct side a = side_a();
        int sv[2];
        run_against(&r.s, &a, sv);
        ck_assert_int_eq(a.rc, -EPROTO);
        ck_assert_str_eq(a.why, "unexpected PING message (expected HELLO)");
        ck_assert_int_eq(r.s.rc, 0);
        ck_assert_str_eq(r.s.ar->reason, a.why);
        script_free(&r.s);
        close_pair(sv);
}
END_TEST

/* An oversized frame costs nothing: refused from its header, the bytes behind it unread. */
START_TEST(test_oversized_headers)
{
        uint8_t bytes[REPL_FRAME_HDR_LEN + 6];
        memcpy(bytes + REPL_FRAME_HDR_LEN, "MARKER", 6);
        static const struct {
                uint32_t msg_len, payload_len;
                const char *why;
        } cases[] = {
            {0xffffffffu, 0, "bad frame from peer instead of HELLO: message too large"},
            {REPL_MSG_MAX + 1, 0, "bad frame from peer instead of HELLO: message too large"},
            {0, 0xffffffffu, "bad frame from peer instead of HELLO: payload too large"},
            /* Within the frame limit, but a HELLO carries no payload: not read either. */
            {0, REPL_PAYLOAD_MAX,
             "bad frame from peer instead of HELLO: unexpected payload on a HELLO"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                repl_frame_encode(bytes, TANDEM__REPL__MSG_TYPE__MSG_HELLO, cases[i].msg_len,
                                  cases[i].payload_len);
                struct raw_reply r = {.s.run = script_raw, .bytes = bytes, .len = sizeof(bytes)};
                struct side a = side_a();
                a.timeout_ms = 10000;
                int sv[2];
                int64_t t0 = mono_ms();
                run_against(&r.s, &a, sv);
                ck_assert_int_lt(mono_ms() - t0, 2000);
                ck_assert_int_eq(a.rc, -EPROTO);
                ck_assert_str_eq(a.why, cases[i].why);
                char left[8];
                ck_assert_int_eq(recv(sv[0], left, sizeof(left), MSG_DONTWAIT), 6);
                ck_assert_mem_eq(left, "MARKER", 6);
                script_free(&r.s);
                close_pair(sv);
        }
}
END_TEST

/* Sends a valid HELLO, then hangs up. */
static void script_hello_then_close(struct script *s)
{
        uint8_t nonce[32];
        RAND_bytes(nonce, sizeof(nonce));
        if (!(s->rc = repl_recv(s->fd, &s->hello, T_MS, NULL)))
                s->rc = send_hello(s->fd, 1, 1, REPL_FEATURE_SEALED, nonce);
        shutdown(s->fd, SHUT_RDWR);
}

START_TEST(test_peer_closes_mid_handshake)
{
        struct script s = {.run = script_hello_then_close};
        struct side a = side_a();
        int sv[2];
        run_against(&s, &a, sv);
        ck_assert_int_eq(s.rc, 0);
        ck_assert_int_eq(a.rc, -ECONNRESET);
        ck_assert_msg(strstr(a.why, "peer closed the connection"), "%s", a.why);
        script_free(&s);
        close_pair(sv);

        /* Before sending anything at all. */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        close(sv[1]);
        a.fd = sv[0];
        run_side(&a);
        ck_assert_int_eq(a.rc, -ECONNRESET);
        close(sv[0]);

        /* A half frame, then gone. */
        uint8_t half[REPL_FRAME_HDR_LEN];
        repl_frame_encode(half, TANDEM__REPL__MSG_TYPE__MSG_HELLO, 100, 0);
        struct raw_reply r = {.s.run = script_raw, .bytes = half, .len = 8, .close_after = true};
        run_against(&r.s, &a, sv);
        ck_assert_int_eq(a.rc, -ECONNRESET);
        ck_assert_str_eq(a.why, "peer closed the connection while we waited for HELLO");
        script_free(&r.s);
        close_pair(sv);
}
END_TEST

/* Sends a valid HELLO, takes our AUTH, then says nothing more (for a while). */
static void script_hello_then_silence(struct script *s)
{
        uint8_t nonce[32];
        RAND_bytes(nonce, sizeof(nonce));
        struct repl_rx rx;
        if ((s->rc = repl_recv(s->fd, &s->hello, T_MS, NULL)) ||
            (s->rc = send_hello(s->fd, 1, 1, REPL_FEATURE_SEALED, nonce)) ||
            (s->rc = repl_recv(s->fd, &rx, T_MS, NULL)))
                return;
        repl_rx_free(&rx);
        /* Wait out the other side's deadline without answering. */
        int r = repl_recv(s->fd, &rx, 1000, NULL);
        s->rc = r == -ETIMEDOUT ? 0 : (r ? r : -EPROTO);
        if (!r)
                repl_rx_free(&rx);
}

START_TEST(test_silent_peer_times_out)
{
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        struct side a = side_a();
        a.fd = sv[0];
        a.timeout_ms = 200;
        int64_t t0 = mono_ms();
        run_side(&a);
        int64_t took = mono_ms() - t0;
        ck_assert_int_eq(a.rc, -ETIMEDOUT);
        ck_assert_str_eq(a.why, "timed out waiting for HELLO from peer");
        ck_assert_int_ge(took, 180);
        ck_assert_int_lt(took, 3000);
        close_pair(sv);

        /* A peer that says HELLO and then nothing: the deadline covers the whole handshake. */
        struct script s = {.run = script_hello_then_silence};
        a.timeout_ms = 300;
        t0 = mono_ms();
        run_against(&s, &a, sv);
        took = mono_ms() - t0;
        ck_assert_int_eq(a.rc, -ETIMEDOUT);
        ck_assert_str_eq(a.why, "timed out waiting for AUTH from peer");
        ck_assert_int_lt(took, 3000);
        ck_assert_int_eq(s.rc, 0);
        script_free(&s);
        close_pair(sv);
}
END_TEST

/* Sends HELLO, then reflects our own AUTH back at us. */
static void script_reflect_auth(struct script *s)
{
        uint8_t nonce[32];
        RAND_bytes(nonce, sizeof(nonce));
        struct repl_rx rx;
        if ((s->rc = repl_recv(s->fd, &s->hello, T_MS, NULL)) ||
            (s->rc = send_hello(s->fd, 1, 1, REPL_FEATURE_SEALED, nonce)) ||
            (s->rc = repl_recv(s->fd, &rx, T_MS, NULL)))
                return;
        const Tandem__Repl__Auth *a = (const void *)rx.msg;
        s->rc = a->hmac.len == 32 ? send_auth(s->fd, a->hmac.data) : -EPROTO;
        repl_rx_free(&rx);
        if (!s->rc)
                s->rc = recv_auth_result(s);
}

START_TEST(test_reflected_auth_refused)
{
        struct script s = {.run = script_reflect_auth};
        struct side a = side_a();
        int sv[2];
        run_against(&s, &a, sv);
        ck_assert_int_eq(a.rc, -EACCES);
        ck_assert_str_eq(a.why, "wrong secret: HMAC mismatch from node 2");
        ck_assert_int_eq(s.rc, 0);
        ck_assert(!s.ar->ok);
        ck_assert_str_eq(s.ar->reason, a.why);
        script_free(&s);
        close_pair(sv);
}
END_TEST

/* Sends our own HELLO nonce back as its challenge. */
static void script_reflect_nonce(struct script *s)
{
        if ((s->rc = repl_recv(s->fd, &s->hello, T_MS, NULL)) ||
            (s->rc = send_hello(s->fd, 1, 1, REPL_FEATURE_SEALED, their_hello(s)->nonce.data)))
                return;
        s->rc = recv_auth_result(s);
}

START_TEST(test_reflected_nonce_refused)
{
        struct script s = {.run = script_reflect_nonce};
        struct side a = side_a();
        int sv[2];
        run_against(&s, &a, sv);
        ck_assert_int_eq(a.rc, -EACCES);
        ck_assert_str_eq(a.why, "reflected HELLO: the peer sent our own nonce back");
        ck_assert_int_eq(s.rc, 0);
        ck_assert(!s.ar->ok);
        script_free(&s);
        close_pair(sv);
}
END_TEST

/* Sends HELLO, takes our AUTH, then refuses us with a reason. */
static void script_refuse(struct script *s)
{
        uint8_t nonce[32];
        RAND_bytes(nonce, sizeof(nonce));
        struct repl_rx rx;
        if ((s->rc = repl_recv(s->fd, &s->hello, T_MS, NULL)) ||
            (s->rc = send_hello(s->fd, 1, 1, REPL_FEATURE_SEALED, nonce)) ||
            (s->rc = repl_recv(s->fd, &rx, T_MS, NULL)))
                return;
        repl_rx_free(&rx);
        Tandem__Repl__AuthResult ar = TANDEM__REPL__AUTH_RESULT__INIT;
        ar.reason = "wrong secret: HMAC mismatch from node 1\n\x1b[31m";
        s->rc = repl_send(s->fd, TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT, &ar.base, NULL, 0, T_MS);
}

START_TEST(test_peer_refusal_reported)
{
        struct script s = {.run = script_refuse};
        struct side a = side_a();
        int sv[2];
        run_against(&s, &a, sv);
        ck_assert_int_eq(s.rc, 0);
        ck_assert_int_eq(a.rc, -EACCES);
        /* Its reason, with the control characters made harmless for our log. */
        ck_assert_str_eq(a.why, "peer refused: wrong secret: HMAC mismatch from node 1??[31m");
        script_free(&s);
        close_pair(sv);
}
END_TEST

static Suite *auth_suite(void)
{
        Suite *s = suite_create("repl_auth");
        TCase *tc = tcase_create("handshake");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_handshake_agrees);
        tcase_add_test(tc, test_handshake_control_channel_naa_case);
        tcase_add_test(tc, test_wrong_secret);
        tcase_add_test(tc, test_unknown_node);
        tcase_add_test(tc, test_naa_mismatch);
        tcase_add_test(tc, test_channel_mismatch);
        tcase_add_test(tc, test_bad_local_config);
        tcase_add_test(tc, test_mac_matches_spec);
        tcase_add_test(tc, test_interop_with_wider_version_range);
        tcase_add_test(tc, test_protection_mismatch);
        tcase_add_test(tc, test_unsealed_peer_refused);
        tcase_add_test(tc, test_incompatible_version);
        tcase_add_test(tc, test_garbage_instead_of_hello);
        tcase_add_test(tc, test_malformed_hello);
        tcase_add_test(tc, test_unexpected_message);
        tcase_add_test(tc, test_oversized_headers);
        tcase_add_test(tc, test_peer_closes_mid_handshake);
        tcase_add_test(tc, test_silent_peer_times_out);
        tcase_add_test(tc, test_reflected_auth_refused);
        tcase_add_test(tc, test_reflected_nonce_refused);
        tcase_add_test(tc, test_peer_refusal_reported);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(auth_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
