/* CHAP: known-answer digests, value encodings, and whole security-stage exchanges. */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "iscsi/login_internal.h"
#include "tandem/iscsi_pdu.h"

#define T_BIT     0x80
#define CSG(x)    ((x) << 2)
#define NSG(x)    (x)
#define TARGET    "iqn.2024-01.test:disk1"
#define INITIATOR "iqn.2024-01.test:host1"
#define ITT       0x1000u

/* ---- known answers: H(0x2a || "abcdefghijkl" || 00 01 .. 0f) ---- */

static const uint8_t kat_challenge[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static void hex_to_bin(const char *hex, uint8_t *out)
{
        for (size_t i = 0; hex[2 * i]; i++) {
                unsigned v;
                ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
                out[i] = (uint8_t)v;
        }
}

static void check_kat(int alg, const char *hex)
{
        uint8_t want[32], got[32];
        unsigned len = iscsi_chap_digest_len(alg);
        ck_assert_uint_eq(strlen(hex), 2 * len);
        hex_to_bin(hex, want);
        ck_assert_int_eq(iscsi_chap_compute(alg, 0x2a, "abcdefghijkl", kat_challenge, 16, got), 0);
        ck_assert_mem_eq(got, want, len);
}

START_TEST(test_known_answers)
{
        check_kat(ISCSI_CHAP_MD5, "cec6cff406e03600ec3585732fc9de13");
        check_kat(ISCSI_CHAP_SHA1, "2e090624943aad63e3f610e6b168f367e57f3c1c");
        check_kat(ISCSI_CHAP_SHA256,
                  "c311614443e3469a010a5bdcb3b6b575b19e315a81aeec1c6e62a117e66c48aa");
        check_kat(ISCSI_CHAP_SHA3_256,
                  "322439d7eaa82322aa64bb1bb68e0775847af0806118efa4c2261ae204445bf9");
        uint8_t out[32];
        ck_assert_int_eq(iscsi_chap_compute(4, 1, "x", kat_challenge, 16, out), -EINVAL);
        ck_assert_uint_eq(iscsi_chap_digest_len(5), 16);
        ck_assert_uint_eq(iscsi_chap_digest_len(7), 32);
        ck_assert_uint_eq(iscsi_chap_digest_len(9), 0);
}
END_TEST

START_TEST(test_select_algorithm)
{
        ck_assert_int_eq(iscsi_chap_select_alg("5"), 5);
        ck_assert_int_eq(iscsi_chap_select_alg("7,5"), 7);
        ck_assert_int_eq(iscsi_chap_select_alg("5,7"), 5); /* the initiator's order decides */
        ck_assert_int_eq(iscsi_chap_select_alg("99,7"), 7);
        ck_assert_int_eq(iscsi_chap_select_alg("x,,8"), 8);
        ck_assert_int_eq(iscsi_chap_select_alg("0x5"), 5);
        ck_assert_int_eq(iscsi_chap_select_alg("99"), -1);
        ck_assert_int_eq(iscsi_chap_select_alg(""), -1);
        ck_assert_int_eq(iscsi_chap_select_alg("261"), -1); /* 261 & 0xff would be 5 */
}
END_TEST

START_TEST(test_decode_values)
{
        uint8_t out[64];
        size_t n;
        ck_assert_int_eq(iscsi_chap_decode("0x0aFf10", out, sizeof(out), &n), 0);
        ck_assert_uint_eq(n, 3);
        ck_assert_uint_eq(out[0], 0x0a);
        ck_assert_uint_eq(out[1], 0xff);
        ck_assert_uint_eq(out[2], 0x10);
        ck_assert_int_eq(iscsi_chap_decode("0XABC", out, sizeof(out), &n), 0); /* odd: 0a bc */
        ck_assert_uint_eq(n, 2);
        ck_assert_uint_eq(out[0], 0x0a);
        ck_assert_uint_eq(out[1], 0xbc);
        ck_assert_int_eq(iscsi_chap_decode("0bzsbP9AbgNgDsNYVzL8neEw==", out, sizeof(out), &n), 0);
        ck_assert_uint_eq(n, 16);
        uint8_t md5[16];
        hex_to_bin("cec6cff406e03600ec3585732fc9de13", md5);
        ck_assert_mem_eq(out, md5, 16);
        ck_assert_int_eq(iscsi_chap_decode("0BAQIDBAU=", out, sizeof(out), &n), 0);
        ck_assert_uint_eq(n, 5);
        ck_assert_uint_eq(out[4], 5);
        ck_assert_int_eq(iscsi_chap_decode("0bAQID", out, sizeof(out), &n), 0);
        ck_assert_uint_eq(n, 3);

        ck_assert_int_eq(iscsi_chap_decode("0x", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0xzz", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0x12 4", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("1234", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0y12", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0bAQI", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0bAQ*D", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0bA===", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0b", out, sizeof(out), &n), -EINVAL);
        ck_assert_int_eq(iscsi_chap_decode("0x010203", out, 2, &n), -E2BIG);
}
END_TEST

START_TEST(test_encode_hex)
{
        const uint8_t in[3] = {0x00, 0xab, 0x7f};
        char out[16];
        ck_assert_int_eq(iscsi_chap_encode_hex(in, 3, out, sizeof(out)), 0);
        ck_assert_str_eq(out, "0x00ab7f");
        ck_assert_int_eq(iscsi_chap_encode_hex(in, 3, out, 8), -E2BIG);
}
END_TEST

/* ---- whole exchanges through iscsi_login_handle ---- */

static struct scsi_target tgt;
static struct tdm_auth tgt_auth, disc_auth;
static struct tdm_iscsi_cfg limits = {
    .max_recv_dsl = 65536, .immediate_data = true, .queue_depth = 32};
static struct iscsi_login_env env;

static int fake_lookup(void *arg, const char *target, const char *initiator,
                       struct scsi_target **out, struct tdm_auth *auth)
{
        (void)arg;
        (void)initiator;
        if (strcmp(target, TARGET) != 0)
                return -ENOENT;
        *out = &tgt;
        *auth = tgt_auth;
        return 0;
}

static void fake_discovery_auth(void *arg, struct tdm_auth *auth)
{
        (void)arg;
        *auth = disc_auth;
}

static uint16_t fake_tsih(void *arg)
{
        (void)arg;
        return 9;
}

static void set_chap(struct tdm_auth *a, const char *user, const char *secret)
{
        memset(a, 0, sizeof(*a));
        a->chap.enabled = true;
        snprintf(a->chap.user, sizeof(a->chap.user), "%s", user);
        snprintf(a->chap.secret, sizeof(a->chap.secret), "%s", secret);
}

static void set_mutual(struct tdm_auth *a, const char *user, const char *secret)
{
        a->chap.mutual = true;
        snprintf(a->chap.mutual_user, sizeof(a->chap.mutual_user), "%s", user);
        snprintf(a->chap.mutual_secret, sizeof(a->chap.mutual_secret), "%s", secret);
}

static void setup(void)
{
        memset(&tgt, 0, sizeof(tgt));
        set_chap(&tgt_auth, "alice", "alice-secret-1");
        memset(&disc_auth, 0, sizeof(disc_auth));
        env = (struct iscsi_login_env){
            .limits = &limits,
            .lookup_target = fake_lookup,
            .discovery_auth = fake_discovery_auth,
            .alloc_tsih = fake_tsih,
            .tpgt = 1,
            .peer = "test",
        };
}

struct pdu {
        uint8_t bhs[48];
        char data[4096];
        uint32_t len;
};

static void pdu_init(struct pdu *p, uint8_t flags)
{
        memset(p, 0, sizeof(*p));
        p->bhs[0] = 0x40 | ISCSI_OP_LOGIN_REQ;
        p->bhs[1] = flags;
        p->bhs[8] = 0x80;
        put_be32(p->bhs + 16, ITT);
        put_be32(p->bhs + 24, 1);
        put_be32(p->bhs + 28, 1);
}

static void pdu_key(struct pdu *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pdu_key(struct pdu *p, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(p->data + p->len, sizeof(p->data) - p->len, fmt, ap);
        va_end(ap);
        ck_assert_int_gt(n, 0);
        p->len += (uint32_t)n + 1;
}

static const char *rsp_get(const struct iscsi_pdu_reply *rep, const char *key)
{
        size_t kl = strlen(key);
        for (uint32_t off = 0; off < rep->data_len;) {
                const char *s = (const char *)rep->data + off;
                size_t n = strnlen(s, rep->data_len - off);
                if (n > kl && strncmp(s, key, kl) == 0 && s[kl] == '=')
                        return s + kl + 1;
                off += (uint32_t)n + 1;
        }
        return NULL;
}

static uint16_t status_of(const struct iscsi_pdu_reply *rep)
{
        return get_be16(rep->bhs + 36);
}

static void xfer(struct iscsi_login *l, struct pdu *p, struct iscsi_pdu_reply *rep)
{
        ck_assert_int_eq(iscsi_login_handle(l, p->bhs, (uint8_t *)p->data, p->len, rep), 0);
}

/* H(id || secret || challenge) computed here with EVP, independently of chap.c. */
static void reference_response(const EVP_MD *md, uint8_t id, const char *secret, const uint8_t *c,
                               size_t clen, uint8_t *out, unsigned *len)
{
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        ck_assert(EVP_DigestInit_ex(ctx, md, NULL));
        ck_assert(EVP_DigestUpdate(ctx, &id, 1));
        ck_assert(EVP_DigestUpdate(ctx, secret, strlen(secret)));
        ck_assert(EVP_DigestUpdate(ctx, c, clen));
        ck_assert(EVP_DigestFinal_ex(ctx, out, len));
        EVP_MD_CTX_free(ctx);
}

static void to_hex(const uint8_t *in, size_t n, char *out)
{
        strcpy(out, "0x");
        for (size_t i = 0; i < n; i++)
                sprintf(out + 2 + 2 * i, "%02X", in[i]); /* upper case, as libiscsi sends */
}

static size_t from_hex_value(const char *v, uint8_t *out)
{
        ck_assert(v[0] == '0' && v[1] == 'x');
        size_t n = strlen(v + 2) / 2;
        hex_to_bin(v + 2, out);
        return n;
}

struct challenge {
        uint8_t id;
        uint8_t c[64];
        size_t len;
};

/* First two legs, as libiscsi does them: AuthMethod offer, then CHAP_A. */
static void start_chap(struct iscsi_login *l, const char *chap_a, bool discovery,
                       struct challenge *ch)
{
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "InitiatorName=%s", INITIATOR);
        if (!discovery)
                pdu_key(&p, "TargetName=%s", TARGET);
        pdu_key(&p, "SessionType=%s", discovery ? "Discovery" : "Normal");
        pdu_key(&p, "AuthMethod=CHAP,None");
        xfer(l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], CSG(0)); /* no transit before CHAP is done */
        ck_assert_str_eq(rsp_get(&rep, "AuthMethod"), "CHAP");
        iscsi_pdu_reply_free(&rep);

        pdu_init(&p, CSG(0) | NSG(1));
        pdu_key(&p, "CHAP_A=%s", chap_a);
        xfer(l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], CSG(0));
        const char *id = rsp_get(&rep, "CHAP_I");
        const char *c = rsp_get(&rep, "CHAP_C");
        ck_assert_ptr_nonnull(id);
        ck_assert_ptr_nonnull(c);
        ch->id = (uint8_t)atoi(id);
        ch->len = from_hex_value(c, ch->c);
        iscsi_pdu_reply_free(&rep);
}

static void finish_operational(struct iscsi_login *l)
{
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "MaxRecvDataSegmentLength=8192");
        xfer(l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(1) | NSG(3));
        ck_assert_uint_eq(get_be16(rep.bhs + 14), 9);
        ck_assert(l->complete);
        iscsi_pdu_reply_free(&rep);
}

START_TEST(test_chap_md5_login)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct challenge ch;
        start_chap(&l, "5", false, &ch);
        ck_assert_uint_eq(ch.len, 16);
        uint8_t r[32];
        unsigned rlen;
        reference_response(EVP_md5(), ch.id, "alice-secret-1", ch.c, ch.len, r, &rlen);
        char hex[80];
        to_hex(r, rlen, hex);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "CHAP_N=alice");
        pdu_key(&p, "CHAP_R=%s", hex);
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(1));
        ck_assert_ptr_null(rsp_get(&rep, "CHAP_R")); /* one-way */
        iscsi_pdu_reply_free(&rep);
        finish_operational(&l);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_chap_sha256_base64)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct challenge ch;
        start_chap(&l, "7,5", false, &ch);
        ck_assert_uint_eq(ch.len, 32);
        uint8_t r[32];
        unsigned rlen;
        reference_response(EVP_sha256(), ch.id, "alice-secret-1", ch.c, ch.len, r, &rlen);
        char b64[64] = "0b";
        EVP_EncodeBlock((unsigned char *)b64 + 2, r, (int)rlen);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "CHAP_N=alice");
        pdu_key(&p, "CHAP_R=%s", b64);
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(1));
        iscsi_pdu_reply_free(&rep);
        finish_operational(&l);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_chap_algorithm_in_reply)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        /* AuthMethod and CHAP_A in one request: the challenge comes at once. */
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "InitiatorName=%s", INITIATOR);
        pdu_key(&p, "TargetName=%s", TARGET);
        pdu_key(&p, "AuthMethod=CHAP");
        pdu_key(&p, "CHAP_A=8,7");
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_str_eq(rsp_get(&rep, "AuthMethod"), "CHAP");
        ck_assert_str_eq(rsp_get(&rep, "CHAP_A"), "8");
        ck_assert_uint_eq(strlen(rsp_get(&rep, "CHAP_C")), 2 + 64);
        ck_assert_uint_eq(rep.bhs[1], CSG(0));
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_chap_mutual)
{
        set_mutual(&tgt_auth, "target-bob", "bob-secret-22");
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct challenge ch;
        start_chap(&l, "5", false, &ch);
        uint8_t r[32];
        unsigned rlen;
        reference_response(EVP_md5(), ch.id, "alice-secret-1", ch.c, ch.len, r, &rlen);
        char hex[80];
        to_hex(r, rlen, hex);
        uint8_t mine[16];
        for (int i = 0; i < 16; i++)
                mine[i] = (uint8_t)(0xa0 + i);
        char mine_hex[80];
        to_hex(mine, 16, mine_hex);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "CHAP_N=alice");
        pdu_key(&p, "CHAP_R=%s", hex);
        pdu_key(&p, "CHAP_I=77");
        pdu_key(&p, "CHAP_C=%s", mine_hex);
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(1));
        ck_assert_str_eq(rsp_get(&rep, "CHAP_N"), "target-bob");
        uint8_t want[32], got[32];
        unsigned wlen;
        reference_response(EVP_md5(), 77, "bob-secret-22", mine, 16, want, &wlen);
        ck_assert_uint_eq(from_hex_value(rsp_get(&rep, "CHAP_R"), got), wlen);
        ck_assert_mem_eq(got, want, wlen);
        iscsi_pdu_reply_free(&rep);
        finish_operational(&l);
        iscsi_login_fini(&l);
}
END_TEST

/* Third leg with the given keys; expects authentication failure and close. */
static void third_leg_fails(const char *chap_a,
                            void (*fill)(struct pdu *, const struct challenge *))
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct challenge ch;
        start_chap(&l, chap_a, false, &ch);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        fill(&p, &ch);
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), ISCSI_LOGIN_AUTH_FAILED);
        ck_assert(rep.close_after);
        ck_assert_uint_eq(rep.data_len, 0);
        ck_assert(l.failed);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}

static void good_response(struct pdu *p, const struct challenge *ch, const char *secret)
{
        uint8_t r[32];
        unsigned rlen;
        reference_response(EVP_md5(), ch->id, secret, ch->c, ch->len, r, &rlen);
        char hex[80];
        to_hex(r, rlen, hex);
        pdu_key(p, "CHAP_N=alice");
        pdu_key(p, "CHAP_R=%s", hex);
}

static void fill_wrong_secret(struct pdu *p, const struct challenge *ch)
{
        good_response(p, ch, "alice-secret-2");
}

static void fill_wrong_name(struct pdu *p, const struct challenge *ch)
{
        uint8_t r[32];
        unsigned rlen;
        reference_response(EVP_md5(), ch->id, "alice-secret-1", ch->c, ch->len, r, &rlen);
        char hex[80];
        to_hex(r, rlen, hex);
        pdu_key(p, "CHAP_N=mallory");
        pdu_key(p, "CHAP_R=%s", hex);
}

static void fill_bad_hex(struct pdu *p, const struct challenge *ch)
{
        (void)ch;
        pdu_key(p, "CHAP_N=alice");
        pdu_key(p, "CHAP_R=0xZZ112233445566778899aabbccddeeff");
}

static void fill_short_response(struct pdu *p, const struct challenge *ch)
{
        uint8_t r[32];
        unsigned rlen;
        reference_response(EVP_md5(), ch->id, "alice-secret-1", ch->c, ch->len, r, &rlen);
        char hex[80];
        to_hex(r, rlen - 1, hex); /* a correct prefix is still wrong */
        pdu_key(p, "CHAP_N=alice");
        pdu_key(p, "CHAP_R=%s", hex);
}

static void fill_missing_name(struct pdu *p, const struct challenge *ch)
{
        (void)ch;
        pdu_key(p, "CHAP_R=0x00112233445566778899aabbccddeeff");
}

static void fill_reflected_challenge(struct pdu *p, const struct challenge *ch)
{
        good_response(p, ch, "alice-secret-1");
        char hex[160];
        to_hex(ch->c, ch->len, hex);
        pdu_key(p, "CHAP_I=%u", ch->id);
        pdu_key(p, "CHAP_C=%s", hex);
}

static void fill_no_mutual_challenge(struct pdu *p, const struct challenge *ch)
{
        good_response(p, ch, "alice-secret-1");
}

static void fill_mutual_unconfigured(struct pdu *p, const struct challenge *ch)
{
        good_response(p, ch, "alice-secret-1");
        pdu_key(p, "CHAP_I=1");
        pdu_key(p, "CHAP_C=0x0102030405060708090a0b0c0d0e0f10");
}

static void fill_bad_mutual_id(struct pdu *p, const struct challenge *ch)
{
        good_response(p, ch, "alice-secret-1");
        pdu_key(p, "CHAP_I=256");
        pdu_key(p, "CHAP_C=0x0102030405060708090a0b0c0d0e0f10");
}

START_TEST(test_chap_wrong_secret)
{
        third_leg_fails("5", fill_wrong_secret);
}
END_TEST

START_TEST(test_chap_wrong_name)
{
        third_leg_fails("5", fill_wrong_name);
}
END_TEST

START_TEST(test_chap_bad_hex)
{
        third_leg_fails("5", fill_bad_hex);
}
END_TEST

START_TEST(test_chap_short_response)
{
        third_leg_fails("5", fill_short_response);
}
END_TEST

START_TEST(test_chap_missing_name)
{
        third_leg_fails("5", fill_missing_name);
}
END_TEST

START_TEST(test_chap_reflection_refused)
{
        set_mutual(&tgt_auth, "target-bob", "bob-secret-22");
        third_leg_fails("5", fill_reflected_challenge);
}
END_TEST

START_TEST(test_chap_mutual_required)
{
        set_mutual(&tgt_auth, "target-bob", "bob-secret-22");
        third_leg_fails("5", fill_no_mutual_challenge);
}
END_TEST

START_TEST(test_chap_mutual_not_configured)
{
        third_leg_fails("5", fill_mutual_unconfigured);
}
END_TEST

START_TEST(test_chap_mutual_same_secret)
{
        set_mutual(&tgt_auth, "target-bob", "alice-secret-1");
        third_leg_fails("5", fill_mutual_unconfigured);
}
END_TEST

START_TEST(test_chap_bad_mutual_id)
{
        set_mutual(&tgt_auth, "target-bob", "bob-secret-22");
        third_leg_fails("5", fill_bad_mutual_id);
}
END_TEST

START_TEST(test_chap_unsupported_algorithm)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "InitiatorName=%s", INITIATOR);
        pdu_key(&p, "TargetName=%s", TARGET);
        pdu_key(&p, "AuthMethod=CHAP");
        xfer(&l, &p, &rep);
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, CSG(0) | NSG(1));
        pdu_key(&p, "CHAP_A=99,128");
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), ISCSI_LOGIN_AUTH_FAILED);
        ck_assert(rep.close_after);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_chap_keys_out_of_order)
{
        struct iscsi_login l;
        struct pdu p;
        struct iscsi_pdu_reply rep;
        /* CHAP_R before any challenge. */
        iscsi_login_init(&l, &env);
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "InitiatorName=%s", INITIATOR);
        pdu_key(&p, "TargetName=%s", TARGET);
        pdu_key(&p, "AuthMethod=CHAP");
        xfer(&l, &p, &rep);
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "CHAP_N=alice");
        pdu_key(&p, "CHAP_R=0x00112233445566778899aabbccddeeff");
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), ISCSI_LOGIN_AUTH_FAILED);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);

        /* CHAP keys without AuthMethod. */
        iscsi_login_init(&l, &env);
        pdu_init(&p, CSG(0) | NSG(1));
        pdu_key(&p, "InitiatorName=%s", INITIATOR);
        pdu_key(&p, "TargetName=%s", TARGET);
        pdu_key(&p, "CHAP_A=5");
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), ISCSI_LOGIN_AUTH_FAILED);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_chap_transit_before_response_waits)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct challenge ch;
        start_chap(&l, "5", false, &ch);
        /* T=1 without CHAP_N/CHAP_R: the target keeps waiting (T=0). */
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], CSG(0));
        iscsi_pdu_reply_free(&rep);
        /* The challenge still works afterwards. */
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        good_response(&p, &ch, "alice-secret-1");
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(1));
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_chap_response_replay_fails)
{
        /* A second login gets a new challenge: the old response does not fit it. */
        struct iscsi_login a, b;
        iscsi_login_init(&a, &env);
        iscsi_login_init(&b, &env);
        struct challenge ca, cb;
        start_chap(&a, "5", false, &ca);
        start_chap(&b, "5", false, &cb);
        ck_assert(ca.id != cb.id || memcmp(ca.c, cb.c, ca.len) != 0);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        good_response(&p, &ca, "alice-secret-1");
        xfer(&b, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), ISCSI_LOGIN_AUTH_FAILED);
        iscsi_pdu_reply_free(&rep);
        xfer(&a, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&a);
        iscsi_login_fini(&b);
}
END_TEST

START_TEST(test_chap_discovery)
{
        set_chap(&disc_auth, "alice", "alice-secret-1");
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct challenge ch;
        start_chap(&l, "5", true, &ch);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(3));
        good_response(&p, &ch, "alice-secret-1");
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(3));
        ck_assert(l.complete);
        ck_assert_int_eq(l.type, ISCSI_SESSION_DISCOVERY);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_discovery_without_auth)
{
        /* Discovery CHAP off while the target wants CHAP: discovery settings apply. */
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_key(&p, "InitiatorName=%s", INITIATOR);
        pdu_key(&p, "SessionType=Discovery");
        pdu_key(&p, "AuthMethod=CHAP,None");
        xfer(&l, &p, &rep);
        ck_assert_uint_eq(status_of(&rep), 0);
        ck_assert_str_eq(rsp_get(&rep, "AuthMethod"), "None");
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(1));
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

static Suite *chap_suite(void)
{
        Suite *s = suite_create("iscsi_chap");
        TCase *tc = tcase_create("crypto");
        tcase_add_test(tc, test_known_answers);
        tcase_add_test(tc, test_select_algorithm);
        tcase_add_test(tc, test_decode_values);
        tcase_add_test(tc, test_encode_hex);
        suite_add_tcase(s, tc);

        tc = tcase_create("exchange");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_chap_md5_login);
        tcase_add_test(tc, test_chap_sha256_base64);
        tcase_add_test(tc, test_chap_algorithm_in_reply);
        tcase_add_test(tc, test_chap_mutual);
        tcase_add_test(tc, test_chap_wrong_secret);
        tcase_add_test(tc, test_chap_wrong_name);
        tcase_add_test(tc, test_chap_bad_hex);
        tcase_add_test(tc, test_chap_short_response);
        tcase_add_test(tc, test_chap_missing_name);
        tcase_add_test(tc, test_chap_reflection_refused);
        tcase_add_test(tc, test_chap_mutual_required);
        tcase_add_test(tc, test_chap_mutual_not_configured);
        tcase_add_test(tc, test_chap_mutual_same_secret);
        tcase_add_test(tc, test_chap_bad_mutual_id);
        tcase_add_test(tc, test_chap_unsupported_algorithm);
        tcase_add_test(tc, test_chap_keys_out_of_order);
        tcase_add_test(tc, test_chap_transit_before_response_waits);
        tcase_add_test(tc, test_chap_response_replay_fails);
        tcase_add_test(tc, test_chap_discovery);
        tcase_add_test(tc, test_discovery_without_auth);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(chap_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
