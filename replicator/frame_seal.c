/* Sealed replication frames: key derivation, seal, open (see frame_seal.h). */
#include "frame_seal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#define NAA_MAX 64

const char *frame_protect_name(int mode)
{
        switch (mode) {
        case FRAME_PROTECT_AUTHENTICATE:
                return "authenticate";
        case FRAME_PROTECT_ENCRYPT:
                return "encrypt";
        default:
                return NULL;
        }
}

int frame_protect_parse(const char *name, int *mode)
{
        if (name && !strcmp(name, "authenticate")) {
                *mode = FRAME_PROTECT_AUTHENTICATE;
                return 0;
        }
        if (name && !strcmp(name, "encrypt")) {
                *mode = FRAME_PROTECT_ENCRYPT;
                return 0;
        }
        return -EINVAL;
}

static const EVP_CIPHER *cipher_of(int cipher)
{
        switch (cipher) {
        case FRAME_CIPHER_CHACHA20_POLY1305:
                return EVP_chacha20_poly1305();
        case FRAME_CIPHER_AES_256_GCM:
                return EVP_aes_256_gcm();
        default:
                return NULL;
        }
}

/* ---- key derivation ---- */

static size_t put_be32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
        return 4;
}

static size_t put_be64(uint8_t *p, uint64_t v)
{
        put_be32(p, (uint32_t)(v >> 32));
        put_be32(p + 4, (uint32_t)v);
        return 8;
}

/*
 * HKDF-SHA256(ikm = secret, salt = nonce of the lower node id || nonce of the higher,
 * info = domain || 0 || mode || cipher || channel || from id || to id || features of the lower
 * id's HELLO || of the higher's || naa lowercased), 44 bytes: key then IV.
 */
static int derive_one(const struct frame_kdf_in *in, const uint8_t salt[2 * FRAME_NONCE_LEN],
                      uint32_t from, uint32_t to, struct frame_key *out)
{
        uint8_t info[sizeof(FRAME_KDF_DOMAIN) + 3 + 4 + 4 + 8 + 8 + NAA_MAX + 1];
        size_t n = 0;
        memcpy(info, FRAME_KDF_DOMAIN, sizeof(FRAME_KDF_DOMAIN)); /* with its NUL */
        n += sizeof(FRAME_KDF_DOMAIN);
        info[n++] = (uint8_t)in->mode;
        info[n++] = (uint8_t)in->cipher;
        info[n++] = (uint8_t)in->channel;
        n += put_be32(info + n, from);
        n += put_be32(info + n, to);
        bool self_low = in->self_id < in->peer_id;
        n += put_be64(info + n, self_low ? in->features_self : in->features_peer);
        n += put_be64(info + n, self_low ? in->features_peer : in->features_self);
        for (size_t i = 0; in->lun_naa && in->lun_naa[i] && i < NAA_MAX; i++)
                info[n++] = (uint8_t)tolower((unsigned char)in->lun_naa[i]);

        uint8_t okm[FRAME_KEY_LEN + FRAME_IV_LEN];
        EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
        EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)in->secret,
                                              in->secret_len),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt,
                                              2 * FRAME_NONCE_LEN),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n),
            OSSL_PARAM_construct_end(),
        };
        int ok = kctx && EVP_KDF_derive(kctx, okm, sizeof(okm), params) > 0;
        EVP_KDF_CTX_free(kctx);
        EVP_KDF_free(kdf);
        if (ok) {
                memcpy(out->key, okm, FRAME_KEY_LEN);
                memcpy(out->iv, okm + FRAME_KEY_LEN, FRAME_IV_LEN);
        }
        OPENSSL_cleanse(okm, sizeof(okm));
        return ok ? 0 : -EIO;
}

int frame_keys_derive(const struct frame_kdf_in *in, struct frame_key *tx, struct frame_key *rx)
{
        if (in->self_id == in->peer_id || !frame_protect_name(in->mode) || !cipher_of(in->cipher) ||
            !in->secret || !in->nonce_self || !in->nonce_peer)
                return -EINVAL;
        uint8_t salt[2 * FRAME_NONCE_LEN];
        bool self_low = in->self_id < in->peer_id;
        memcpy(salt, self_low ? in->nonce_self : in->nonce_peer, FRAME_NONCE_LEN);
        memcpy(salt + FRAME_NONCE_LEN, self_low ? in->nonce_peer : in->nonce_self, FRAME_NONCE_LEN);
        int rc = derive_one(in, salt, in->self_id, in->peer_id, tx);
        if (rc == 0)
                rc = derive_one(in, salt, in->peer_id, in->self_id, rx);
        if (rc) {
                OPENSSL_cleanse(tx, sizeof(*tx));
                OPENSSL_cleanse(rx, sizeof(*rx));
        }
        return rc;
}

/* ---- sealing and opening ---- */

int frame_seal_init(struct frame_seal *s, const struct frame_key *k, int mode, int cipher,
                    bool opener)
{
        memset(s, 0, sizeof(*s));
        const EVP_CIPHER *c = cipher_of(cipher);
        if (!c || !frame_protect_name(mode))
                return -EINVAL;
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        if (!ctx)
                return -ENOMEM;
        /* Keyed once; each frame sets only its nonce. */
        int ok = opener ? EVP_DecryptInit_ex(ctx, c, NULL, k->key, k->iv)
                        : EVP_EncryptInit_ex(ctx, c, NULL, k->key, k->iv);
        if (!ok || EVP_CIPHER_CTX_get_iv_length(ctx) != FRAME_IV_LEN) {
                EVP_CIPHER_CTX_free(ctx);
                return -EIO;
        }
        s->ctx = ctx;
        memcpy(s->iv, k->iv, FRAME_IV_LEN);
        s->mode = mode;
        s->opener = opener;
        return 0;
}

void frame_seal_fini(struct frame_seal *s)
{
        EVP_CIPHER_CTX_free(s->ctx);
        OPENSSL_cleanse(s, sizeof(*s));
}

bool frame_seal_active(const struct frame_seal *s)
{
        return s && s->ctx;
}

/* The frame's nonce: the IV with the counter XORed into its last 8 bytes (as TLS 1.3 does). */
static void nonce_of(const struct frame_seal *s, uint8_t nonce[FRAME_IV_LEN])
{
        memcpy(nonce, s->iv, FRAME_IV_LEN);
        for (int i = 0; i < 8; i++)
                nonce[FRAME_IV_LEN - 1 - i] ^= (uint8_t)(s->seq >> (8 * i));
}

/* Additional data: the header, and with "authenticate" the body too. */
static int add_aad(EVP_CIPHER_CTX *ctx, const uint8_t *p, size_t len)
{
        int outl;
        while (len) {
                int chunk = len > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)len;
                if (EVP_CipherUpdate(ctx, NULL, &outl, p, chunk) != 1)
                        return -1;
                p += chunk;
                len -= (size_t)chunk;
        }
        return 0;
}

static int crypt_buf(EVP_CIPHER_CTX *ctx, uint8_t *out, const uint8_t *in, size_t len)
{
        while (len) {
                int chunk = len > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)len, outl = 0;
                if (EVP_CipherUpdate(ctx, out, &outl, in, chunk) != 1 || outl != chunk)
                        return -1;
                in += chunk;
                out += chunk;
                len -= (size_t)chunk;
        }
        return 0;
}

/* Starts a frame: the counter's nonce, then the header (and the body when only authenticated). */
static int frame_begin(struct frame_seal *s, const uint8_t *hdr, size_t hdr_len,
                       const struct iovec *in, int n)
{
        if (!s->ctx || s->broken)
                return -EIO;
        if (s->seq == UINT64_MAX) { /* never reached: 2^64 frames */
                s->broken = true;
                return -EOVERFLOW;
        }
        uint8_t nonce[FRAME_IV_LEN];
        nonce_of(s, nonce);
        EVP_CIPHER_CTX *ctx = s->ctx;
        if (EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, s->opener ? 0 : 1) != 1 ||
            add_aad(ctx, hdr, hdr_len))
                return -EIO;
        if (s->mode == FRAME_PROTECT_AUTHENTICATE)
                for (int i = 0; i < n; i++)
                        if (add_aad(ctx, in[i].iov_base, in[i].iov_len))
                                return -EIO;
        return 0;
}

int frame_seal(struct frame_seal *s, const uint8_t *hdr, size_t hdr_len, const struct iovec *in,
               const struct iovec *out, int n, uint8_t tag[FRAME_TAG_LEN])
{
        if (s->opener)
                return -EINVAL;
        int rc = frame_begin(s, hdr, hdr_len, in, n);
        EVP_CIPHER_CTX *ctx = s->ctx;
        if (rc == 0 && s->mode == FRAME_PROTECT_ENCRYPT)
                for (int i = 0; i < n && rc == 0; i++)
                        if (out[i].iov_len != in[i].iov_len ||
                            crypt_buf(ctx, out[i].iov_base, in[i].iov_base, in[i].iov_len))
                                rc = -EIO;
        int outl = 0;
        uint8_t last[16];
        if (rc == 0 && (EVP_EncryptFinal_ex(ctx, last, &outl) != 1 || outl != 0 ||
                        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, FRAME_TAG_LEN, tag) != 1))
                rc = -EIO;
        if (rc) {
                s->broken = true;
                return rc == -EOVERFLOW ? rc : -EIO;
        }
        s->seq++;
        return 0;
}

int frame_open(struct frame_seal *s, const uint8_t *hdr, size_t hdr_len, const struct iovec *io,
               int n, const uint8_t tag[FRAME_TAG_LEN])
{
        if (!s->opener)
                return -EINVAL;
        int rc = frame_begin(s, hdr, hdr_len, io, n);
        EVP_CIPHER_CTX *ctx = s->ctx;
        if (rc == 0 && s->mode == FRAME_PROTECT_ENCRYPT)
                for (int i = 0; i < n && rc == 0; i++)
                        if (crypt_buf(ctx, io[i].iov_base, io[i].iov_base, io[i].iov_len))
                                rc = -EIO;
        uint8_t want[FRAME_TAG_LEN], last[16];
        memcpy(want, tag, FRAME_TAG_LEN);
        int outl = 0;
        if (rc == 0 && (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, FRAME_TAG_LEN, want) != 1 ||
                        EVP_DecryptFinal_ex(ctx, last, &outl) != 1 || outl != 0))
                rc = -EBADMSG;
        if (rc) {
                s->broken = true;
                return -EBADMSG;
        }
        s->seq++;
        return 0;
}
