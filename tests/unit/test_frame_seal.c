/*
 * replicator/frame_seal.c: key derivation against vectors computed independently (Python's
 * cryptography: HKDF, ChaCha20Poly1305, AESGCM over the documented layout), round trips in
 * both modes and ciphers, and every way a frame can be tampered with: each bit flipped in
 * header, message, payload and tag, replay, reorder, drop, truncation, reflection, keys of
 * another channel or mode.
 *
 * TANDEM_SEAL_BENCH=1 also prints the sealing throughput of both ciphers (not a test: no
 * timing is asserted).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../replicator/frame_seal.h"

#define DATA    1 /* TANDEM__REPL__CHANNEL__CHANNEL_DATA */
#define CONTROL 2

static const uint8_t n_self[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                   16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
static uint8_t n_peer[32];
static const char secret[] = "known vector shared secret";
static const char naa[] = "6001405A1B2C3D4E5F60718293A4B5C6"; /* enters lowercased */

static const uint8_t hdr[16] = {0x54, 0x44, 0x52, 0x31, 1, 6, 0, 0, 0, 0, 0, 5, 0, 0, 0, 64};
static const uint8_t msg[5] = {'h', 'e', 'l', 'l', 'o'};
static uint8_t payload[64];

static void setup(void)
{
        for (int i = 0; i < 32; i++)
                n_peer[i] = (uint8_t)(32 + i);
        for (int i = 0; i < 64; i++)
                payload[i] = (uint8_t)(i * 7);
}

static struct frame_kdf_in kdf_in(int mode, int cipher, int channel)
{
        return (struct frame_kdf_in){.secret = (const uint8_t *)secret,
                                     .secret_len = strlen(secret),
                                     .nonce_self = n_self,
                                     .nonce_peer = n_peer,
                                     .self_id = 1,
                                     .peer_id = 2,
                                     .channel = channel,
                                     .lun_naa = naa,
                                     .features_self = 0x1f,
                                     .features_peer = 0x0f,
                                     .mode = mode,
                                     .cipher = cipher};
}

/* The same handshake seen from node 2. */
static struct frame_kdf_in peer_view(struct frame_kdf_in in)
{
        struct frame_kdf_in p = in;
        p.nonce_self = in.nonce_peer;
        p.nonce_peer = in.nonce_self;
        p.self_id = in.peer_id;
        p.peer_id = in.self_id;
        p.features_self = in.features_peer;
        p.features_peer = in.features_self;
        return p;
}

/* ---- vectors ---- */

struct vector {
        int mode, cipher;
        uint8_t tx_key[32], tx_iv[12], rx_key[32], rx_iv[12];
        uint8_t out0[85], out1[85]; /* ciphertext || tag, or tag alone (16) */
        size_t out_len;
};

static const struct vector vectors[] = {
    {.mode = FRAME_PROTECT_ENCRYPT,
     .cipher = FRAME_CIPHER_CHACHA20_POLY1305,
     .tx_key = {0x23, 0x19, 0x2e, 0x4e, 0x92, 0xcb, 0x21, 0x5a, 0x85, 0xfa, 0x4b,
                0x5c, 0x44, 0x64, 0x41, 0x65, 0x3c, 0x21, 0xa6, 0x84, 0x54, 0x7f,
                0xcf, 0x37, 0xb0, 0x0f, 0x4b, 0x49, 0x17, 0xcb, 0x7d, 0xf6},
     .tx_iv = {0x6e, 0x84, 0x57, 0xc9, 0x68, 0x4e, 0x57, 0x2b, 0x15, 0xee, 0x7d, 0x61},
     .rx_key = {0x9b, 0xfb, 0xa9, 0xb3, 0x0b, 0xc8, 0x23, 0x84, 0x0d, 0x67, 0x1d,
                0xe8, 0x29, 0xb1, 0x34, 0x43, 0x77, 0x5b, 0xce, 0xba, 0x59, 0xa6,
                0x83, 0xbe, 0xc1, 0xd3, 0x35, 0x76, 0x29, 0x07, 0xa5, 0xcf},
     .rx_iv = {0xe2, 0x7c, 0x68, 0xdd, 0xc6, 0x65, 0x0d, 0xbc, 0x4e, 0x74, 0xca, 0xca},
     .out0 = {0x71, 0x04, 0x49, 0x5e, 0x56, 0x0c, 0xb7, 0x6c, 0xe2, 0xc7, 0x2d, 0x5f, 0x0d,
              0x58, 0x88, 0xaf, 0x13, 0xb2, 0x3d, 0xb0, 0x1a, 0xe4, 0x8e, 0x95, 0x1e, 0xeb,
              0x05, 0x93, 0xec, 0x7d, 0xd2, 0x7f, 0x59, 0x85, 0x62, 0x5c, 0x43, 0x3b, 0x78,
              0xb7, 0x2c, 0x80, 0xd5, 0x0e, 0xaf, 0xc0, 0x7d, 0x93, 0xbf, 0xe8, 0x14, 0xb7,
              0x4e, 0xb6, 0xbc, 0x94, 0x23, 0x61, 0x97, 0xd2, 0xd3, 0x7b, 0x50, 0xf0, 0x86,
              0xe7, 0xd1, 0x96, 0x32, 0xf2, 0x13, 0xae, 0x2b, 0x51, 0xc8, 0x1c, 0xfa, 0xa8,
              0xc0, 0x96, 0x0d, 0x4f, 0xf2, 0x50, 0x2d},
     .out1 = {0x14, 0x26, 0xd1, 0x32, 0x36, 0x34, 0x00, 0x20, 0x15, 0x12, 0x3e, 0x3a, 0x88,
              0x57, 0xf8, 0xc7, 0x9a, 0x64, 0x5d, 0xf3, 0xb3, 0x41, 0x4b, 0x91, 0x25, 0x72,
              0xb6, 0x0f, 0xa2, 0xb9, 0xc0, 0x05, 0xc9, 0x31, 0x23, 0x3a, 0x71, 0xf1, 0xa9,
              0x05, 0x0b, 0xdc, 0x9f, 0xec, 0x30, 0xd5, 0xa2, 0x0a, 0xed, 0xd1, 0x8e, 0xdd,
              0x48, 0xca, 0x5d, 0x34, 0x58, 0x12, 0x03, 0x1c, 0x8f, 0xb6, 0x7c, 0x0e, 0x80,
              0xd3, 0x78, 0x29, 0xad, 0x90, 0xde, 0x89, 0x44, 0xc6, 0x97, 0xef, 0x7f, 0x3d,
              0x4d, 0xf1, 0xd2, 0x9d, 0x8f, 0x8f, 0x60},
     .out_len = 85},
    {.mode = FRAME_PROTECT_AUTHENTICATE,
     .cipher = FRAME_CIPHER_AES_256_GCM,
     .tx_key = {0xa3, 0x58, 0xe5, 0xaa, 0xd6, 0x9d, 0xf8, 0x01, 0x86, 0x46, 0x90,
                0x53, 0x0a, 0xe1, 0xc7, 0xe5, 0x9b, 0x8e, 0x09, 0xbb, 0xd0, 0x03,
                0x59, 0x03, 0xa1, 0xe6, 0x45, 0xf2, 0xfb, 0x58, 0x6c, 0x7c},
     .tx_iv = {0x7a, 0xd6, 0xf3, 0xc2, 0x89, 0x2c, 0x10, 0x7a, 0x10, 0x6b, 0x1a, 0xd9},
     .rx_key = {0x99, 0x8d, 0xf5, 0xab, 0xd3, 0x38, 0xf0, 0x05, 0x1f, 0xae, 0xc9,
                0xeb, 0x1b, 0xb0, 0xd6, 0x7d, 0x94, 0x79, 0x6f, 0x8a, 0x6c, 0xfd,
                0x57, 0xab, 0x33, 0xd3, 0x07, 0x2e, 0x13, 0x42, 0xa5, 0x01},
     .rx_iv = {0x63, 0x55, 0x68, 0xf3, 0x50, 0xed, 0x50, 0x7f, 0xe1, 0x53, 0x01, 0x84},
     .out0 = {0x70, 0x41, 0x30, 0x4d, 0xc1, 0xbb, 0x26, 0x60, 0x22, 0x88, 0x5a, 0xba, 0xe8, 0x81,
              0x94, 0x0b},
     .out1 = {0xa4, 0x10, 0x75, 0x10, 0x0c, 0x06, 0x6e, 0xe5, 0xb4, 0x76, 0x22, 0x95, 0x72, 0xd5,
              0x96, 0x81},
     .out_len = 16},
};

START_TEST(test_kdf_vectors)
{
        const struct vector *v = &vectors[_i];
        struct frame_kdf_in in = kdf_in(v->mode, v->cipher, DATA);
        struct frame_key tx, rx, ptx, prx;
        ck_assert_int_eq(frame_keys_derive(&in, &tx, &rx), 0);
        ck_assert_mem_eq(tx.key, v->tx_key, 32);
        ck_assert_mem_eq(tx.iv, v->tx_iv, 12);
        ck_assert_mem_eq(rx.key, v->rx_key, 32);
        ck_assert_mem_eq(rx.iv, v->rx_iv, 12);
        /* The peer derives the same two keys, the other way round. */
        struct frame_kdf_in p = peer_view(in);
        ck_assert_int_eq(frame_keys_derive(&p, &ptx, &prx), 0);
        ck_assert_mem_eq(ptx.key, rx.key, 32);
        ck_assert_mem_eq(ptx.iv, rx.iv, 12);
        ck_assert_mem_eq(prx.key, tx.key, 32);
        ck_assert_mem_eq(prx.iv, tx.iv, 12);
}
END_TEST

/* Seals msg+payload as frame seq 0 and 1 of direction tx; compares with the vector. */
START_TEST(test_seal_vectors)
{
        const struct vector *v = &vectors[_i];
        struct frame_key k;
        memcpy(k.key, v->tx_key, 32);
        memcpy(k.iv, v->tx_iv, 12);
        struct frame_seal s, o;
        ck_assert_int_eq(frame_seal_init(&s, &k, v->mode, v->cipher, false), 0);
        ck_assert_int_eq(frame_seal_init(&o, &k, v->mode, v->cipher, true), 0);
        for (int seq = 0; seq < 2; seq++) {
                uint8_t m[5], p[64], tag[16], got[85];
                memcpy(m, msg, sizeof(m));
                memcpy(p, payload, sizeof(p));
                struct iovec io[2] = {{m, sizeof(m)}, {p, sizeof(p)}};
                ck_assert_int_eq(frame_seal(&s, hdr, sizeof(hdr), io, io, 2, tag), 0);
                size_t n = 0;
                if (v->mode == FRAME_PROTECT_ENCRYPT) {
                        memcpy(got, m, 5);
                        memcpy(got + 5, p, 64);
                        n = 69;
                } else { /* authenticate: the body is left as it was */
                        ck_assert_mem_eq(m, msg, 5);
                        ck_assert_mem_eq(p, payload, 64);
                }
                memcpy(got + n, tag, 16);
                ck_assert_uint_eq(n + 16, v->out_len);
                ck_assert_mem_eq(got, seq ? v->out1 : v->out0, v->out_len);
                /* And back: the opener restores the plaintext. */
                ck_assert_int_eq(frame_open(&o, hdr, sizeof(hdr), io, 2, tag), 0);
                ck_assert_mem_eq(m, msg, 5);
                ck_assert_mem_eq(p, payload, 64);
        }
        frame_seal_fini(&s);
        frame_seal_fini(&o);
}
END_TEST

/* ---- a sealed pair over both modes and ciphers ---- */

struct pair {
        struct frame_seal tx, rx;
};

static void pair_init(struct pair *pr, int mode, int cipher)
{
        struct frame_kdf_in in = kdf_in(mode, cipher, DATA), p = peer_view(in);
        struct frame_key tx, rx, ptx, prx;
        ck_assert_int_eq(frame_keys_derive(&in, &tx, &rx), 0);
        ck_assert_int_eq(frame_keys_derive(&p, &ptx, &prx), 0);
        ck_assert_int_eq(frame_seal_init(&pr->tx, &tx, mode, cipher, false), 0);
        ck_assert_int_eq(frame_seal_init(&pr->rx, &prx, mode, cipher, true), 0);
}

static void pair_fini(struct pair *pr)
{
        frame_seal_fini(&pr->tx);
        frame_seal_fini(&pr->rx);
}

/* One frame on the wire: header | message | payload | tag. */
struct wire_frame {
        uint8_t b[16 + 5 + 64 + 16];
};
#define BODY_LEN (5 + 64)

static void frame_make(struct frame_seal *tx, uint8_t fill, struct wire_frame *w)
{
        memcpy(w->b, hdr, 16);
        memcpy(w->b + 16, msg, 5);
        memset(w->b + 21, fill, 64);
        struct iovec io = {w->b + 16, BODY_LEN};
        ck_assert_int_eq(frame_seal(tx, w->b, 16, &io, &io, 1, w->b + 16 + BODY_LEN), 0);
}

/* Opens a copy (the opener works in place); the plaintext goes to body when given. */
static int frame_try(struct frame_seal *rx, const struct wire_frame *w, size_t body_len,
                     uint8_t *body)
{
        struct wire_frame c = *w;
        struct iovec io = {c.b + 16, body_len};
        int rc = frame_open(rx, c.b, 16, &io, 1, c.b + 16 + body_len);
        if (body)
                memcpy(body, c.b + 16, body_len);
        return rc;
}

static const int modes[] = {FRAME_PROTECT_AUTHENTICATE, FRAME_PROTECT_ENCRYPT};
static const int ciphers[] = {FRAME_CIPHER_CHACHA20_POLY1305, FRAME_CIPHER_AES_256_GCM};
#define MODE_OF(i)   modes[(i) / 2]
#define CIPHER_OF(i) ciphers[(i) % 2]

START_TEST(test_every_bit_flip_rejected)
{
        struct pair pr;
        pair_init(&pr, MODE_OF(_i), CIPHER_OF(_i));
        struct wire_frame w;
        frame_make(&pr.tx, 0x5a, &w);
        if (MODE_OF(_i) == FRAME_PROTECT_ENCRYPT)
                ck_assert_mem_ne(w.b + 16, msg, 5); /* the message is ciphertext */
        else
                ck_assert_mem_eq(w.b + 16, msg, 5);
        for (size_t bit = 0; bit < sizeof(w.b) * 8; bit++) {
                struct wire_frame bad = w;
                bad.b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                /* A copy of the state (at seq 0 every time; the context is rekeyed per frame). */
                struct frame_seal o = pr.rx;
                ck_assert_msg(frame_try(&o, &bad, BODY_LEN, NULL) == -EBADMSG,
                              "bit %zu (byte %zu) flipped was accepted", bit, bit / 8);
                ck_assert(o.broken);
        }
        /* The untouched frame still opens, and its plaintext is the original. */
        uint8_t body[BODY_LEN];
        ck_assert_int_eq(frame_try(&pr.rx, &w, BODY_LEN, body), 0);
        ck_assert_mem_eq(body, msg, 5);
        ck_assert_uint_eq(body[5], 0x5a);
        ck_assert_uint_eq(body[BODY_LEN - 1], 0x5a);
        pair_fini(&pr);
}
END_TEST

START_TEST(test_replay_rejected)
{
        struct pair pr;
        pair_init(&pr, MODE_OF(_i), CIPHER_OF(_i));
        struct wire_frame f0, f1;
        frame_make(&pr.tx, 1, &f0);
        frame_make(&pr.tx, 2, &f1);
        ck_assert_int_eq(frame_try(&pr.rx, &f0, BODY_LEN, NULL), 0);
        ck_assert_int_eq(frame_try(&pr.rx, &f0, BODY_LEN, NULL), -EBADMSG); /* again */
        /* Once a frame failed, nothing opens any more, not even the right next one. */
        ck_assert_int_eq(frame_try(&pr.rx, &f1, BODY_LEN, NULL), -EBADMSG);
        pair_fini(&pr);
}
END_TEST

START_TEST(test_reorder_and_drop_rejected)
{
        struct pair pr;
        pair_init(&pr, MODE_OF(_i), CIPHER_OF(_i));
        struct wire_frame f0, f1, f2;
        frame_make(&pr.tx, 1, &f0);
        frame_make(&pr.tx, 2, &f1);
        frame_make(&pr.tx, 3, &f2);
        /* Frame 0 dropped (or 1 moved ahead of it): 1 is not the next. */
        ck_assert_int_eq(frame_try(&pr.rx, &f1, BODY_LEN, NULL), -EBADMSG);
        pair_fini(&pr);

        pair_init(&pr, MODE_OF(_i), CIPHER_OF(_i));
        frame_make(&pr.tx, 1, &f0);
        frame_make(&pr.tx, 2, &f1);
        frame_make(&pr.tx, 3, &f2);
        ck_assert_int_eq(frame_try(&pr.rx, &f0, BODY_LEN, NULL), 0);
        ck_assert_int_eq(frame_try(&pr.rx, &f2, BODY_LEN, NULL), -EBADMSG); /* 1 dropped */
        pair_fini(&pr);

        /* In order, all three open. */
        pair_init(&pr, MODE_OF(_i), CIPHER_OF(_i));
        frame_make(&pr.tx, 1, &f0);
        frame_make(&pr.tx, 2, &f1);
        frame_make(&pr.tx, 3, &f2);
        uint8_t body[BODY_LEN];
        ck_assert_int_eq(frame_try(&pr.rx, &f0, BODY_LEN, body), 0);
        ck_assert_uint_eq(body[10], 1);
        ck_assert_int_eq(frame_try(&pr.rx, &f1, BODY_LEN, body), 0);
        ck_assert_uint_eq(body[10], 2);
        ck_assert_int_eq(frame_try(&pr.rx, &f2, BODY_LEN, body), 0);
        ck_assert_uint_eq(body[10], 3);
        ck_assert_uint_eq(pr.rx.seq, 3);
        pair_fini(&pr);
}
END_TEST

START_TEST(test_truncation_rejected)
{
        struct pair pr;
        pair_init(&pr, MODE_OF(_i), CIPHER_OF(_i));
        struct wire_frame w;
        frame_make(&pr.tx, 7, &w);
        /* A frame cut short: the tag read where the body's last bytes were. */
        for (size_t cut = 1; cut <= BODY_LEN; cut += 17) {
                struct frame_seal o = pr.rx;
                struct wire_frame c = w;
                struct iovec io = {c.b + 16, BODY_LEN - cut};
                ck_assert_int_eq(frame_open(&o, c.b, 16, &io, 1, c.b + 16 + BODY_LEN - cut),
                                 -EBADMSG);
        }
        /* Or the tag itself short: its last byte missing, the next frame's first in its place */
        struct wire_frame c = w;
        c.b[sizeof(c.b) - 1] = hdr[0];
        ck_assert_int_eq(frame_try(&pr.rx, &c, BODY_LEN, NULL), -EBADMSG);
        pair_fini(&pr);
}
END_TEST

/* Keys differ by direction, channel, mode and HELLO features; none opens another's frames. */
START_TEST(test_keys_are_distinct)
{
        int mode = MODE_OF(_i), cipher = CIPHER_OF(_i);
        struct frame_kdf_in in = kdf_in(mode, cipher, DATA);
        struct frame_key tx, rx, k2, r2;
        ck_assert_int_eq(frame_keys_derive(&in, &tx, &rx), 0);
        ck_assert_mem_ne(tx.key, rx.key, 32);
        ck_assert_mem_ne(tx.iv, rx.iv, 12);

        struct frame_kdf_in other = in;
        other.channel = CONTROL;
        ck_assert_int_eq(frame_keys_derive(&other, &k2, &r2), 0);
        ck_assert_mem_ne(tx.key, k2.key, 32);
        other = in;
        other.mode =
            mode == FRAME_PROTECT_ENCRYPT ? FRAME_PROTECT_AUTHENTICATE : FRAME_PROTECT_ENCRYPT;
        ck_assert_int_eq(frame_keys_derive(&other, &k2, &r2), 0);
        ck_assert_mem_ne(tx.key, k2.key, 32);
        other = in;
        other.features_peer ^= 0x4; /* a HELLO altered in transit */
        ck_assert_int_eq(frame_keys_derive(&other, &k2, &r2), 0);
        ck_assert_mem_ne(tx.key, k2.key, 32);
        other = in;
        other.secret = (const uint8_t *)"another shared secret";
        other.secret_len = strlen("another shared secret");
        ck_assert_int_eq(frame_keys_derive(&other, &k2, &r2), 0);
        ck_assert_mem_ne(tx.key, k2.key, 32);
        other = in;
        other.lun_naa = "6001405a1b2c3d4e5f60718293a4b5c6"; /* the same naa, lowercase */
        ck_assert_int_eq(frame_keys_derive(&other, &k2, &r2), 0);
        ck_assert_mem_eq(tx.key, k2.key, 32);

        /* A frame we sealed, reflected back at us, does not open with our receiving key. */
        struct frame_seal s, o;
        ck_assert_int_eq(frame_seal_init(&s, &tx, mode, cipher, false), 0);
        ck_assert_int_eq(frame_seal_init(&o, &rx, mode, cipher, true), 0);
        struct wire_frame w;
        frame_make(&s, 9, &w);
        ck_assert_int_eq(frame_try(&o, &w, BODY_LEN, NULL), -EBADMSG);
        frame_seal_fini(&s);
        frame_seal_fini(&o);

        /* Refused inputs. */
        other = in;
        other.peer_id = other.self_id;
        ck_assert_int_eq(frame_keys_derive(&other, &k2, &r2), -EINVAL);
        other = in;
        other.mode = 7;
        ck_assert_int_eq(frame_keys_derive(&other, &k2, &r2), -EINVAL);
        ck_assert_int_eq(frame_seal_init(&s, &tx, mode, 99, false), -EINVAL);
        ck_assert(!frame_seal_active(&s));
}
END_TEST

/* Split iovecs seal the same stream as one; 1 MiB in place; a sealer cannot open. */
START_TEST(test_iovecs_and_large)
{
        int mode = MODE_OF(_i), cipher = CIPHER_OF(_i);
        struct pair pr;
        pair_init(&pr, mode, cipher);
        size_t len = 1024 * 1024;
        uint8_t *a = malloc(len), *b = malloc(len), *orig = malloc(len);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_nonnull(orig);
        for (size_t i = 0; i < len; i++)
                orig[i] = (uint8_t)(i * 31 + (i >> 12));
        memcpy(a, orig, len);
        /* Sealed from three pieces into a separate buffer: the source stays as it was. */
        struct iovec in[3] = {{a, 7}, {a + 7, 4096}, {a + 7 + 4096, len - 7 - 4096}};
        struct iovec out[3] = {{b, 7}, {b + 7, 4096}, {b + 7 + 4096, len - 7 - 4096}};
        uint8_t tag[16];
        ck_assert_int_eq(frame_seal(&pr.tx, hdr, 16, in, out, 3, tag), 0);
        ck_assert_mem_eq(a, orig, 4096);
        ck_assert_int_eq(memcmp(a, orig, len), 0);
        uint8_t *wire = mode == FRAME_PROTECT_ENCRYPT ? b : a;
        if (mode == FRAME_PROTECT_ENCRYPT)
                ck_assert_int_ne(memcmp(b, orig, len), 0);
        /* Opened as one piece, in place. */
        struct iovec whole = {wire, len};
        ck_assert_int_eq(frame_open(&pr.rx, hdr, 16, &whole, 1, tag), 0);
        ck_assert_int_eq(memcmp(wire, orig, len), 0);
        /* Roles are fixed. */
        ck_assert_int_eq(frame_open(&pr.tx, hdr, 16, &whole, 1, tag), -EINVAL);
        ck_assert_int_eq(frame_seal(&pr.rx, hdr, 16, &whole, &whole, 1, tag), -EINVAL);
        free(a);
        free(b);
        free(orig);
        pair_fini(&pr);
}
END_TEST

START_TEST(test_protect_names)
{
        int m = -1;
        ck_assert_int_eq(frame_protect_parse("authenticate", &m), 0);
        ck_assert_int_eq(m, FRAME_PROTECT_AUTHENTICATE);
        ck_assert_int_eq(frame_protect_parse("encrypt", &m), 0);
        ck_assert_int_eq(m, FRAME_PROTECT_ENCRYPT);
        ck_assert_int_eq(frame_protect_parse("off", &m), -EINVAL);
        ck_assert_int_eq(frame_protect_parse(NULL, &m), -EINVAL);
        ck_assert_str_eq(frame_protect_name(FRAME_PROTECT_ENCRYPT), "encrypt");
        ck_assert_ptr_null(frame_protect_name(5));
}
END_TEST

/* ---- throughput (printed only with TANDEM_SEAL_BENCH=1) ---- */

static double mono_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

START_TEST(test_throughput)
{
        if (!getenv("TANDEM_SEAL_BENCH"))
                return;
        static const size_t sizes[] = {64, 4096, 1024 * 1024};
        size_t cap = 1024 * 1024;
        uint8_t *buf = calloc(1, cap), *out = calloc(1, cap), tag[16];
        ck_assert_ptr_nonnull(buf);
        ck_assert_ptr_nonnull(out);
        for (int i = 0; i < 4; i++) {
                struct pair pr;
                pair_init(&pr, MODE_OF(i), CIPHER_OF(i));
                for (size_t z = 0; z < 3; z++) {
                        size_t len = sizes[z], n = 0, bytes = 0;
                        double t0 = mono_s(), t;
                        do {
                                struct iovec in = {buf, len}, o = {out, len};
                                ck_assert_int_eq(frame_seal(&pr.tx, hdr, 16, &in, &o, 1, tag), 0);
                                struct iovec w = {MODE_OF(i) == FRAME_PROTECT_ENCRYPT ? out : buf,
                                                  len};
                                ck_assert_int_eq(frame_open(&pr.rx, hdr, 16, &w, 1, tag), 0);
                                bytes += len;
                                n++;
                        } while ((t = mono_s() - t0) < 0.3);
                        printf("seal+open %-17s %-12s %8zu B frames: %8.0f frames/s %7.2f GB/s\n",
                               CIPHER_OF(i) == FRAME_CIPHER_AES_256_GCM ? "AES-256-GCM"
                                                                        : "ChaCha20-Poly1305",
                               frame_protect_name(MODE_OF(i)), len, n / t, bytes / t / 1e9);
                }
                pair_fini(&pr);
        }
        free(buf);
        free(out);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("frame_seal");
        TCase *tc = tcase_create("core");
        tcase_add_unchecked_fixture(tc, setup, NULL);
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, test_kdf_vectors, 0, 2);
        tcase_add_loop_test(tc, test_seal_vectors, 0, 2);
        tcase_add_loop_test(tc, test_every_bit_flip_rejected, 0, 4);
        tcase_add_loop_test(tc, test_replay_rejected, 0, 4);
        tcase_add_loop_test(tc, test_reorder_and_drop_rejected, 0, 4);
        tcase_add_loop_test(tc, test_truncation_rejected, 0, 4);
        tcase_add_loop_test(tc, test_keys_are_distinct, 0, 4);
        tcase_add_loop_test(tc, test_iovecs_and_large, 0, 4);
        tcase_add_test(tc, test_protect_names);
        tcase_add_test(tc, test_throughput);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
