/*
 * The security stage: AuthMethod negotiation and CHAP (RFC 7143 12.1.3, RFC 1994),
 * one-way and mutual, with MD5, SHA-1, SHA-256 and SHA3-256 (CHAP_A 5, 6, 7, 8: the
 * numbers Linux LIO, open-iscsi and libiscsi use).
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "login_internal.h"
#include "tandem/iscsi_pdu.h"
#include "tandem/log.h"

static const EVP_MD *chap_md(int alg)
{
        switch (alg) {
        case ISCSI_CHAP_MD5:
                return EVP_md5();
        case ISCSI_CHAP_SHA1:
                return EVP_sha1();
        case ISCSI_CHAP_SHA256:
                return EVP_sha256();
        case ISCSI_CHAP_SHA3_256:
                return EVP_sha3_256();
        default:
                return NULL;
        }
}

unsigned iscsi_chap_digest_len(int alg)
{
        switch (alg) {
        case ISCSI_CHAP_MD5:
                return 16;
        case ISCSI_CHAP_SHA1:
                return 20;
        case ISCSI_CHAP_SHA256:
        case ISCSI_CHAP_SHA3_256:
                return 32;
        default:
                return 0;
        }
}

int iscsi_chap_select_alg(const char *list)
{
        const char *p = list;
        while (*p) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                char one[16];
                uint64_t v;
                if (n > 0 && n < sizeof(one)) {
                        memcpy(one, p, n);
                        one[n] = '\0';
                        /* Unknown or malformed values in a list are skipped (RFC 7143 6.2.1). */
                        if (iscsi_parse_number(one, &v) == 0 && v <= 255 &&
                            iscsi_chap_digest_len((int)v) && chap_md((int)v))
                                return (int)v;
                }
                if (!comma)
                        break;
                p = comma + 1;
        }
        return -1;
}

int iscsi_chap_compute(int alg, uint8_t id, const char *secret, const uint8_t *challenge,
                       size_t challenge_len, uint8_t *out)
{
        const EVP_MD *md = chap_md(alg);
        if (!md)
                return -EINVAL;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx)
                return -ENOMEM;
        unsigned len = 0;
        int ok = EVP_DigestInit_ex(ctx, md, NULL) && EVP_DigestUpdate(ctx, &id, 1) &&
                 EVP_DigestUpdate(ctx, secret, strlen(secret)) &&
                 EVP_DigestUpdate(ctx, challenge, challenge_len) &&
                 EVP_DigestFinal_ex(ctx, out, &len);
        EVP_MD_CTX_free(ctx);
        if (!ok || len != iscsi_chap_digest_len(alg))
                return -EIO;
        return 0;
}

static int hex_digit(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static int decode_hex(const char *s, uint8_t *out, size_t cap, size_t *out_len)
{
        size_t digits = strlen(s);
        if (digits == 0)
                return -EINVAL;
        size_t n = (digits + 1) / 2;
        if (n > cap)
                return -E2BIG;
        /* An odd count means an implied leading zero nibble. */
        size_t i = 0, o = 0;
        if (digits % 2) {
                int d = hex_digit(s[0]);
                if (d < 0)
                        return -EINVAL;
                out[o++] = (uint8_t)d;
                i = 1;
        }
        for (; i < digits; i += 2) {
                int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                out[o++] = (uint8_t)(hi << 4 | lo);
        }
        *out_len = n;
        return 0;
}

static bool base64_char(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '+' || c == '/';
}

static int decode_base64(const char *s, uint8_t *out, size_t cap, size_t *out_len)
{
        size_t len = strlen(s);
        if (len == 0 || len % 4)
                return -EINVAL;
        size_t pad = 0;
        while (pad < 2 && s[len - 1 - pad] == '=')
                pad++;
        for (size_t i = 0; i < len - pad; i++)
                if (!base64_char(s[i]))
                        return -EINVAL;
        size_t n = len / 4 * 3 - pad;
        if (n > cap)
                return -E2BIG;
        uint8_t tmp[ISCSI_LARGE_VALUE_MAX];
        if (len / 4 * 3 > sizeof(tmp))
                return -E2BIG;
        int w = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)len);
        if (w < 0 || (size_t)w != len / 4 * 3)
                return -EINVAL;
        memcpy(out, tmp, n);
        *out_len = n;
        return 0;
}

int iscsi_chap_decode(const char *value, uint8_t *out, size_t cap, size_t *out_len)
{
        if (value[0] != '0')
                return -EINVAL;
        if (value[1] == 'x' || value[1] == 'X')
                return decode_hex(value + 2, out, cap, out_len);
        if (value[1] == 'b' || value[1] == 'B')
                return decode_base64(value + 2, out, cap, out_len);
        return -EINVAL;
}

int iscsi_chap_encode_hex(const uint8_t *in, size_t len, char *out, size_t cap)
{
        static const char digits[] = "0123456789abcdef";
        if (cap < 2 * len + 3)
                return -E2BIG;
        out[0] = '0';
        out[1] = 'x';
        for (size_t i = 0; i < len; i++) {
                out[2 + 2 * i] = digits[in[i] >> 4];
                out[3 + 2 * i] = digits[in[i] & 15];
        }
        out[2 + 2 * len] = '\0';
        return 0;
}

/* Equality of two strings without an early exit on the first differing byte. */
static bool equal_ct(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        if (la != lb)
                return false;
        return CRYPTO_memcmp(a, b, la) == 0;
}

static bool list_has(const char *list, const char *word)
{
        size_t wl = strlen(word);
        const char *p = list;
        for (;;) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                if (n == wl && strncmp(p, word, n) == 0)
                        return true;
                if (!comma)
                        return false;
                p = comma + 1;
        }
}

static const char *who(const struct iscsi_login *l)
{
        return l->env && l->env->peer ? l->env->peer : "?";
}

static uint16_t target_error(const char **why)
{
        *why = "CHAP digest computation failed";
        return ISCSI_LOGIN_TARGET_ERROR;
}

/* The reason goes into the one log line login.c writes for the failure. */
static uint16_t auth_fail(const char **why, const char *reason)
{
        *why = reason;
        return ISCSI_LOGIN_AUTH_FAILED;
}

static bool any_chap_key(const struct iscsi_auth_keys *k)
{
        return k->chap_a || k->chap_i || k->chap_c || k->chap_n || k->chap_r;
}

static uint16_t choose_method(struct iscsi_login *l, const struct iscsi_auth_keys *k,
                              struct iscsi_text_buf *rsp, const char **why)
{
        bool chap = list_has(k->auth_method, "CHAP");
        bool none = list_has(k->auth_method, "None");
        if (l->auth.chap.enabled) {
                if (!chap)
                        return auth_fail(why, "CHAP required but not offered");
                iscsi_text_buf_add(rsp, "AuthMethod", "CHAP");
                l->auth_state = ISCSI_AUTH_WAIT_CHAP_A;
                return ISCSI_LOGIN_SUCCESS;
        }
        if (!none)
                return auth_fail(why, "no authentication configured and None not offered");
        iscsi_text_buf_add(rsp, "AuthMethod", "None");
        l->auth_state = ISCSI_AUTH_DONE;
        return ISCSI_LOGIN_SUCCESS;
}

static uint16_t send_challenge(struct iscsi_login *l, const struct iscsi_auth_keys *k,
                               struct iscsi_text_buf *rsp, const char **why)
{
        if (k->chap_i || k->chap_c || k->chap_n || k->chap_r)
                return auth_fail(why, "CHAP keys out of order");
        int alg = iscsi_chap_select_alg(k->chap_a);
        if (alg < 0)
                return auth_fail(why, "no supported CHAP_A offered");
        unsigned clen = iscsi_chap_digest_len(alg);
        if (RAND_bytes(&l->chap_id, 1) != 1 || RAND_bytes(l->chap_challenge, (int)clen) != 1) {
                *why = "RAND_bytes failed";
                return ISCSI_LOGIN_TARGET_ERROR;
        }
        l->chap_alg = alg;
        l->chap_challenge_len = clen;
        char hex[2 * sizeof(l->chap_challenge) + 3];
        iscsi_chap_encode_hex(l->chap_challenge, clen, hex, sizeof(hex));
        iscsi_text_buf_addf(rsp, "CHAP_A", "%d", alg);
        iscsi_text_buf_addf(rsp, "CHAP_I", "%u", l->chap_id);
        iscsi_text_buf_add(rsp, "CHAP_C", hex);
        l->auth_state = ISCSI_AUTH_WAIT_CHAP_R;
        return ISCSI_LOGIN_SUCCESS;
}

static uint16_t check_response(struct iscsi_login *l, const struct iscsi_auth_keys *k,
                               const char **why)
{
        const struct tdm_chap_cfg *cfg = &l->auth.chap;
        if (!cfg->secret[0])
                return auth_fail(why, "no CHAP secret configured");
        if (!equal_ct(k->chap_n, cfg->user))
                return auth_fail(why, "unknown CHAP_N");
        uint8_t got[ISCSI_CHAP_BINARY_MAX] = {0};
        size_t got_len;
        if (iscsi_chap_decode(k->chap_r, got, sizeof(got), &got_len))
                return auth_fail(why, "malformed CHAP_R");
        uint8_t want[ISCSI_CHAP_DIGEST_MAX];
        if (iscsi_chap_compute(l->chap_alg, l->chap_id, cfg->secret, l->chap_challenge,
                               l->chap_challenge_len, want))
                return target_error(why);
        unsigned dlen = iscsi_chap_digest_len(l->chap_alg);
        bool match = got_len == dlen;
        /* Compare even on a length mismatch so timing says nothing about the secret. */
        match &= CRYPTO_memcmp(got, want, dlen) == 0;
        if (!match)
                return auth_fail(why, "wrong CHAP_R");
        return ISCSI_LOGIN_SUCCESS;
}

/* Mutual CHAP: the initiator challenges us and we prove the target secret. */
static uint16_t answer_challenge(struct iscsi_login *l, const struct iscsi_auth_keys *k,
                                 struct iscsi_text_buf *rsp, const char **why)
{
        const struct tdm_chap_cfg *cfg = &l->auth.chap;
        if (!k->chap_i && !k->chap_c) {
                if (cfg->mutual)
                        return auth_fail(why, "mutual CHAP configured, no challenge sent");
                return ISCSI_LOGIN_SUCCESS;
        }
        if (!k->chap_i || !k->chap_c)
                return auth_fail(why, "CHAP_I and CHAP_C must come together");
        if (!cfg->mutual || !cfg->mutual_secret[0])
                return auth_fail(why, "initiator asks for mutual CHAP, none configured");
        if (strcmp(cfg->mutual_secret, cfg->secret) == 0)
                return auth_fail(why,
                                 "mutual secret equals the initiator secret (RFC 7143 12.1.3)");
        uint64_t id;
        if (iscsi_parse_number(k->chap_i, &id) || id > 255)
                return auth_fail(why, "malformed CHAP_I");
        uint8_t chal[ISCSI_CHAP_BINARY_MAX];
        size_t chal_len;
        if (iscsi_chap_decode(k->chap_c, chal, sizeof(chal), &chal_len) || chal_len == 0)
                return auth_fail(why, "malformed CHAP_C");
        if (chal_len == l->chap_challenge_len && memcmp(chal, l->chap_challenge, chal_len) == 0)
                return auth_fail(why, "initiator reflected our challenge");
        uint8_t resp[ISCSI_CHAP_DIGEST_MAX];
        if (iscsi_chap_compute(l->chap_alg, (uint8_t)id, cfg->mutual_secret, chal, chal_len, resp))
                return target_error(why);
        char hex[2 * ISCSI_CHAP_DIGEST_MAX + 3];
        iscsi_chap_encode_hex(resp, iscsi_chap_digest_len(l->chap_alg), hex, sizeof(hex));
        iscsi_text_buf_add(rsp, "CHAP_N", cfg->mutual_user);
        iscsi_text_buf_add(rsp, "CHAP_R", hex);
        return ISCSI_LOGIN_SUCCESS;
}

static uint16_t verify(struct iscsi_login *l, const struct iscsi_auth_keys *k,
                       struct iscsi_text_buf *rsp, const char **why)
{
        if (k->chap_a)
                return auth_fail(why, "CHAP_A repeated");
        if (!k->chap_n && !k->chap_r && !k->chap_i && !k->chap_c)
                return ISCSI_LOGIN_SUCCESS; /* nothing yet: keep waiting */
        if (!k->chap_n || !k->chap_r)
                return auth_fail(why, "CHAP_N and CHAP_R must come together");
        uint16_t st = check_response(l, k, why);
        if (st == ISCSI_LOGIN_SUCCESS)
                st = answer_challenge(l, k, rsp, why);
        if (st == ISCSI_LOGIN_SUCCESS) {
                l->auth_state = ISCSI_AUTH_DONE;
                log_debug("%s: %s authenticated by CHAP (algorithm %d)", who(l), l->initiator_name,
                          l->chap_alg);
        }
        /* The challenge is single use. */
        OPENSSL_cleanse(l->chap_challenge, sizeof(l->chap_challenge));
        return st;
}

uint16_t iscsi_auth_step(struct iscsi_login *l, const struct iscsi_auth_keys *k,
                         struct iscsi_text_buf *rsp, const char **why)
{
        uint16_t st;
        switch (l->auth_state) {
        case ISCSI_AUTH_START:
                if (!k->auth_method) {
                        if (any_chap_key(k))
                                return auth_fail(why, "CHAP keys before AuthMethod");
                        return ISCSI_LOGIN_SUCCESS;
                }
                if (k->chap_i || k->chap_c || k->chap_n || k->chap_r)
                        return auth_fail(why, "CHAP keys out of order");
                st = choose_method(l, k, rsp, why);
                if (st != ISCSI_LOGIN_SUCCESS || l->auth_state != ISCSI_AUTH_WAIT_CHAP_A ||
                    !k->chap_a)
                        return st;
                return send_challenge(l, k, rsp, why); /* CHAP_A in the same request */
        case ISCSI_AUTH_WAIT_CHAP_A:
                if (!k->chap_a) {
                        if (any_chap_key(k))
                                return auth_fail(why, "CHAP keys out of order");
                        return ISCSI_LOGIN_SUCCESS;
                }
                return send_challenge(l, k, rsp, why);
        case ISCSI_AUTH_WAIT_CHAP_R:
                return verify(l, k, rsp, why);
        case ISCSI_AUTH_DONE:
        default:
                if (any_chap_key(k))
                        return auth_fail(why, "CHAP keys after authentication");
                return ISCSI_LOGIN_SUCCESS;
        }
}
