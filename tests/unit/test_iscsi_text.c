/* Text format codec and full-feature-phase Text Requests (SendTargets). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iscsi/login_internal.h"
#include "tandem/iscsi_pdu.h"

/* ---- codec ---- */

static int parse(const char *data, uint32_t len, struct iscsi_kv_list *kv)
{
        return iscsi_text_parse(data, len, ISCSI_LOGIN_TEXT_MAX, kv);
}

START_TEST(test_parse_pairs)
{
        static const char t[] = "A=1\0Bee=two words\0Empty=\0CHAP_C=0bAQ==\0";
        struct iscsi_kv_list kv;
        ck_assert_int_eq(parse(t, sizeof(t) - 1, &kv), 0);
        ck_assert_uint_eq(kv.n, 4);
        ck_assert_str_eq(kv.kv[0].key, "A");
        ck_assert_str_eq(kv.kv[0].value, "1");
        ck_assert_str_eq(kv.kv[1].key, "Bee");
        ck_assert_str_eq(kv.kv[1].value, "two words");
        ck_assert_str_eq(kv.kv[2].value, "");
        ck_assert_str_eq(kv.kv[3].value, "0bAQ=="); /* '=' inside a value */
        ck_assert_int_eq(iscsi_kv_find(&kv, "Bee", 0), 1);
        ck_assert_int_eq(iscsi_kv_find(&kv, "Bee", 2), -1);
        ck_assert_int_eq(iscsi_kv_find(&kv, "bee", 0), -1);
        iscsi_kv_list_free(&kv);
}
END_TEST

START_TEST(test_parse_empty_and_padding)
{
        struct iscsi_kv_list kv;
        ck_assert_int_eq(parse("", 0, &kv), 0);
        ck_assert_uint_eq(kv.n, 0);
        iscsi_kv_list_free(&kv);
        static const char padded[] = "A=1\0\0\0\0";
        ck_assert_int_eq(parse(padded, sizeof(padded) - 1, &kv), 0);
        ck_assert_uint_eq(kv.n, 1);
        iscsi_kv_list_free(&kv);
}
END_TEST

struct bad_text {
        const char *data;
        uint32_t len;
        int rc;
};

#define BAD(s, rc)                                                                                 \
        {                                                                                          \
                s, sizeof(s) - 1, rc                                                               \
        }
static const struct bad_text bad_texts[] = {
    BAD("A=1", -EINVAL),             /* no final NUL */
    BAD("NoEquals\0", -EINVAL),      /* no '=' */
    BAD("=value\0", -EINVAL),        /* empty key */
    BAD("Ke y=1\0", -EINVAL),        /* space in a key */
    BAD("Key\xc3\xa9=1\0", -EINVAL), /* non-ASCII key */
    BAD("A=1\0\0B=2\0", -EINVAL),    /* empty pair in the middle */
    BAD("\0A=1\0", -EINVAL),
};

START_TEST(test_parse_malformed)
{
        struct iscsi_kv_list kv;
        const struct bad_text *b = &bad_texts[_i];
        ck_assert_int_eq(parse(b->data, b->len, &kv), b->rc);
        ck_assert_ptr_null(kv.kv);
        ck_assert_ptr_null(kv.buf);
}
END_TEST

static char *make_pair(const char *key, size_t key_len, size_t value_len, uint32_t *len)
{
        char *t = malloc(key_len + value_len + 2);
        if (key)
                memcpy(t, key, key_len);
        else
                memset(t, 'K', key_len);
        t[key_len] = '=';
        memset(t + key_len + 1, 'v', value_len);
        t[key_len + 1 + value_len] = '\0';
        *len = (uint32_t)(key_len + value_len + 2);
        return t;
}

START_TEST(test_parse_limits)
{
        struct iscsi_kv_list kv;
        uint32_t len;
        char *t = make_pair(NULL, 63, 1, &len);
        ck_assert_int_eq(parse(t, len, &kv), 0);
        iscsi_kv_list_free(&kv);
        free(t);
        t = make_pair(NULL, 64, 1, &len);
        ck_assert_int_eq(parse(t, len, &kv), -EINVAL);
        free(t);
        t = make_pair("Key", 3, 255, &len);
        ck_assert_int_eq(parse(t, len, &kv), 0);
        iscsi_kv_list_free(&kv);
        free(t);
        t = make_pair("Key", 3, 256, &len);
        ck_assert_int_eq(parse(t, len, &kv), -EINVAL);
        free(t);
        t = make_pair("CHAP_C", 6, 8192, &len);
        ck_assert_int_eq(parse(t, len, &kv), 0);
        iscsi_kv_list_free(&kv);
        free(t);
        t = make_pair("CHAP_R", 6, 8193, &len);
        ck_assert_int_eq(parse(t, len, &kv), -EINVAL);
        free(t);
        /* Bounded total. */
        t = make_pair("Key", 3, 200, &len);
        ck_assert_int_eq(iscsi_text_parse(t, len, 100, &kv), -E2BIG);
        free(t);
}
END_TEST

START_TEST(test_parse_too_many_pairs)
{
        char *t = malloc(16 * 600);
        uint32_t len = 0;
        for (int i = 0; i < 513; i++)
                len += (uint32_t)sprintf(t + len, "K%d=1", i) + 1;
        struct iscsi_kv_list kv;
        ck_assert_int_eq(parse(t, len, &kv), -E2BIG);
        /* 512 is fine. */
        len = 0;
        for (int i = 0; i < 512; i++)
                len += (uint32_t)sprintf(t + len, "K%d=1", i) + 1;
        ck_assert_int_eq(parse(t, len, &kv), 0);
        ck_assert_uint_eq(kv.n, 512);
        iscsi_kv_list_free(&kv);
        free(t);
}
END_TEST

START_TEST(test_key_names)
{
        ck_assert(iscsi_key_name_valid("X-com.example.k+y@z_1#", 22));
        ck_assert(!iscsi_key_name_valid("", 0));
        ck_assert(!iscsi_key_name_valid("a/b", 3));
        ck_assert(!iscsi_key_name_valid("a:b", 3));
        ck_assert_uint_eq(iscsi_key_value_max("CHAP_C"), 8192);
        ck_assert_uint_eq(iscsi_key_value_max("CHAP_R"), 8192);
        ck_assert_uint_eq(iscsi_key_value_max("CHAP_N"), 255);
        ck_assert_uint_eq(iscsi_key_value_max("TargetName"), 255);
}
END_TEST

START_TEST(test_numbers)
{
        uint64_t v;
        ck_assert_int_eq(iscsi_parse_number("0", &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(iscsi_parse_number("0065536", &v), 0);
        ck_assert_uint_eq(v, 65536);
        ck_assert_int_eq(iscsi_parse_number("0x1F", &v), 0);
        ck_assert_uint_eq(v, 31);
        ck_assert_int_eq(iscsi_parse_number("0XfF", &v), 0);
        ck_assert_uint_eq(v, 255);
        ck_assert_int_eq(iscsi_parse_number("18446744073709551615", &v), 0);
        ck_assert_uint_eq(v, UINT64_MAX);
        ck_assert_int_eq(iscsi_parse_number("18446744073709551616", &v), -ERANGE);
        ck_assert_int_eq(iscsi_parse_number("0x10000000000000000", &v), -ERANGE);
        static const char *const bad[] = {"", "0x", "-1", "+1", " 1", "1 ", "1a", "0b101", "1.5"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(iscsi_parse_number(bad[i], &v) == -EINVAL, "accepted '%s'", bad[i]);
        bool b;
        ck_assert_int_eq(iscsi_parse_bool("Yes", &b), 0);
        ck_assert(b);
        ck_assert_int_eq(iscsi_parse_bool("No", &b), 0);
        ck_assert(!b);
        ck_assert_int_eq(iscsi_parse_bool("yes", &b), -EINVAL);
        ck_assert_int_eq(iscsi_parse_bool("", &b), -EINVAL);
}
END_TEST

START_TEST(test_build)
{
        struct iscsi_text_buf b;
        iscsi_text_buf_init(&b, 24);
        ck_assert_int_eq(iscsi_text_buf_add(&b, "A", "1"), 0);
        ck_assert_int_eq(iscsi_text_buf_addf(&b, "Num", "%u", 42u), 0);
        ck_assert_uint_eq(b.len, 11);
        ck_assert_mem_eq(b.data, "A=1\0Num=42\0", 11);
        /* 11 + 14 > 24: refused, and every later add too. */
        ck_assert_int_eq(iscsi_text_buf_add(&b, "Longest", "value"), -E2BIG);
        ck_assert_int_eq(b.err, -E2BIG);
        ck_assert_int_eq(iscsi_text_buf_add(&b, "B", "2"), -E2BIG);
        ck_assert_uint_eq(b.len, 11);
        iscsi_text_buf_free(&b);
        ck_assert_ptr_null(b.data);
}
END_TEST

/* ---- Text Requests in full feature phase ---- */

#define ITT      0xabcd0001u
#define TTT_NONE 0xffffffffu

static const char *const all_targets[] = {
    "iqn.2024-01.test:disk1", "iqn.2024-01.test:disk2",
    "iqn.2024-01.test:secret", /* hidden from host1 */
};
static int enumerations;

static void fake_visible(const char *initiator, const char *only,
                         void (*cb)(void *arg, const char *iqn, uint16_t tpgt), void *arg)
{
        enumerations++;
        for (size_t i = 0; i < 3; i++) {
                if (strstr(all_targets[i], "secret") &&
                    strcmp(initiator, "iqn.2024-01.test:host1") == 0)
                        continue;
                if (only && strcmp(only, all_targets[i]) != 0)
                        continue;
                /* disk2 sits in portal group 7: replies must carry each target's own tag. */
                cb(arg, all_targets[i], strstr(all_targets[i], "disk2") ? 7 : 1);
        }
}

static struct iscsi_text_env discovery_env(void)
{
        return (struct iscsi_text_env){
            .type = ISCSI_SESSION_DISCOVERY,
            .for_each_visible = fake_visible,
            .initiator_name = "iqn.2024-01.test:host1",
            .portal = "192.0.2.1:3260",
            .tpgt = 1,
            .max_xmit_dsl = 8192,
            .stat_sn = 500,
            .exp_cmdsn = 20,
            .max_cmdsn = 51,
        };
}

static struct iscsi_text_env normal_env(void)
{
        struct iscsi_text_env e = discovery_env();
        e.type = ISCSI_SESSION_NORMAL;
        e.target_name = "iqn.2024-01.test:disk2";
        return e;
}

static void text_bhs(uint8_t *bhs, uint8_t flags, uint32_t ttt, uint32_t dsl)
{
        memset(bhs, 0, 48);
        bhs[0] = 0x40 | ISCSI_OP_TEXT_REQ;
        bhs[1] = flags;
        iscsi_bhs_set_dsl(bhs, dsl);
        bhs[9] = 3; /* a LUN, echoed back */
        put_be32(bhs + 16, ITT);
        put_be32(bhs + 20, ttt);
        put_be32(bhs + 24, 20);
}

static int text_req(struct iscsi_text_state *ts, const struct iscsi_text_env *env, uint8_t flags,
                    uint32_t ttt, const char *data, uint32_t len, struct iscsi_pdu_reply *rep)
{
        uint8_t bhs[48];
        text_bhs(bhs, flags, ttt, len);
        return iscsi_text_handle(ts, env, bhs, (const uint8_t *)data, len, rep);
}

/* Whole reply text as one string with '\n' between pairs. */
static void reply_lines(const struct iscsi_pdu_reply *rep, char *out, size_t cap)
{
        size_t o = 0;
        for (uint32_t i = 0; i < rep->data_len && o + 1 < cap; i++)
                out[o++] = rep->data[i] ? (char)rep->data[i] : '\n';
        out[o] = '\0';
}

static void check_response_bhs(const struct iscsi_pdu_reply *rep, uint8_t flags, uint32_t ttt)
{
        ck_assert_uint_eq(rep->bhs[0], ISCSI_OP_TEXT_RSP);
        ck_assert_uint_eq(rep->bhs[1], flags);
        ck_assert_uint_eq(iscsi_bhs_dsl(rep->bhs), rep->data_len);
        ck_assert_uint_eq(rep->bhs[9], 3);
        ck_assert_uint_eq(get_be32(rep->bhs + 16), ITT);
        ck_assert_uint_eq(get_be32(rep->bhs + 20), ttt);
        ck_assert_uint_eq(get_be32(rep->bhs + 24), 500);
        ck_assert_uint_eq(get_be32(rep->bhs + 28), 20);
        ck_assert_uint_eq(get_be32(rep->bhs + 32), 51);
        ck_assert(!rep->close_after);
}

static void expect_reply(const struct iscsi_text_env *env, const char *request, const char *want)
{
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct iscsi_pdu_reply rep;
        ck_assert_int_eq(
            text_req(&ts, env, 0x80, TTT_NONE, request, (uint32_t)strlen(request) + 1, &rep), 0);
        check_response_bhs(&rep, 0x80, TTT_NONE);
        char got[4096];
        reply_lines(&rep, got, sizeof(got));
        ck_assert_str_eq(got, want);
        iscsi_pdu_reply_free(&rep);
        iscsi_text_state_fini(&ts);
}

START_TEST(test_sendtargets_all_discovery)
{
        struct iscsi_text_env env = discovery_env();
        expect_reply(&env, "SendTargets=All",
                     "TargetName=iqn.2024-01.test:disk1\n"
                     "TargetAddress=192.0.2.1:3260,1\n"
                     "TargetName=iqn.2024-01.test:disk2\n"
                     "TargetAddress=192.0.2.1:3260,7\n");
}
END_TEST

START_TEST(test_sendtargets_ipv6_portal)
{
        struct iscsi_text_env env = discovery_env();
        env.portal = "[2001:db8::1]:3260";
        env.tpgt = 3; /* the connection's default; each target's own tag wins */
        expect_reply(&env, "SendTargets=iqn.2024-01.test:disk1",
                     "TargetName=iqn.2024-01.test:disk1\n"
                     "TargetAddress=[2001:db8::1]:3260,1\n");
}
END_TEST

START_TEST(test_sendtargets_named)
{
        struct iscsi_text_env env = discovery_env();
        expect_reply(&env, "SendTargets=iqn.2024-01.test:disk2",
                     "TargetName=iqn.2024-01.test:disk2\n"
                     "TargetAddress=192.0.2.1:3260,7\n");
        /* Invisible or unknown names list nothing. */
        expect_reply(&env, "SendTargets=iqn.2024-01.test:secret", "");
        expect_reply(&env, "SendTargets=iqn.2024-01.test:nothing", "");
        /* Empty value in a discovery session: there is no session target. */
        expect_reply(&env, "SendTargets=", "");
}
END_TEST

START_TEST(test_sendtargets_normal_session)
{
        struct iscsi_text_env env = normal_env();
        const char *own = "TargetName=iqn.2024-01.test:disk2\n"
                          "TargetAddress=192.0.2.1:3260,7\n";
        expect_reply(&env, "SendTargets=All", own); /* only the session's target */
        expect_reply(&env, "SendTargets=", own);
        expect_reply(&env, "SendTargets=iqn.2024-01.test:disk1",
                     "TargetName=iqn.2024-01.test:disk1\n"
                     "TargetAddress=192.0.2.1:3260,1\n");
}
END_TEST

START_TEST(test_sendtargets_invalid)
{
        struct iscsi_text_env env = normal_env();
        /* The cases iscsi-test-cu's SendTargets.Invalid sends. */
        expect_reply(&env, "SendTargetsPlease=All", "SendTargetsPlease=NotUnderstood\n");
        expect_reply(&env, "SendTargets=Alle", "SendTargets=Reject\n");
        expect_reply(&env, "SendTargets=A", "SendTargets=Reject\n");
        expect_reply(&env, "sENDtARGETS=aLL", "sENDtARGETS=NotUnderstood\n");
        /* Login keys cannot be renegotiated; extension keys are not understood. */
        expect_reply(&env, "MaxBurstLength=4096", "MaxBurstLength=Reject\n");
        expect_reply(&env, "X-vendor.Thing=1", "X-vendor.Thing=NotUnderstood\n");
}
END_TEST

START_TEST(test_sendtargets_no_registry)
{
        struct iscsi_text_env env = discovery_env();
        env.for_each_visible = NULL;
        expect_reply(&env, "SendTargets=All", "");
}
END_TEST

START_TEST(test_name_plausible)
{
        ck_assert(iscsi_text_name_plausible("iqn.2024-01.test:disk1"));
        ck_assert(iscsi_text_name_plausible("eui.02004567A425678D"));
        ck_assert(iscsi_text_name_plausible("naa.52004567BA64678D"));
        ck_assert(iscsi_text_name_plausible("IQN.2024-01.test"));
        ck_assert(!iscsi_text_name_plausible("All"));
        ck_assert(!iscsi_text_name_plausible("iqn."));
        ck_assert(!iscsi_text_name_plausible("iqn.a b"));
        ck_assert(!iscsi_text_name_plausible("iqn.a,b"));
        ck_assert(!iscsi_text_name_plausible("target1"));
}
END_TEST

START_TEST(test_bad_requests)
{
        struct iscsi_text_env env = discovery_env();
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct iscsi_pdu_reply rep;
        static const char st[] = "SendTargets=All";
        /* F and C together. */
        ck_assert_int_eq(text_req(&ts, &env, 0xc0, TTT_NONE, st, sizeof(st), &rep), -EPROTO);
        /* A TTT we never gave out. */
        ck_assert_int_eq(text_req(&ts, &env, 0x80, 0x1234, NULL, 0, &rep), -EPROTO);
        /* Malformed text. */
        ck_assert_int_eq(text_req(&ts, &env, 0x80, TTT_NONE, "SendTargets", 11, &rep), -EPROTO);
        /* Duplicate key. */
        static const char dup[] = "SendTargets=All\0SendTargets=All";
        ck_assert_int_eq(text_req(&ts, &env, 0x80, TTT_NONE, dup, sizeof(dup), &rep), -EPROTO);
        /* Wrong opcode. */
        uint8_t bhs[48];
        text_bhs(bhs, 0x80, TTT_NONE, 0);
        bhs[0] = ISCSI_OP_NOP_OUT;
        ck_assert_int_eq(iscsi_text_handle(&ts, &env, bhs, NULL, 0, &rep), -EINVAL);
        iscsi_text_state_fini(&ts);
}
END_TEST

/* An answer longer than MaxRecvDataSegmentLength goes out in pieces with C=1. */
START_TEST(test_long_reply_continues)
{
        struct iscsi_text_env env = discovery_env();
        env.max_xmit_dsl = 40; /* each pair is 34 or 31 bytes */
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct iscsi_pdu_reply rep;
        static const char st[] = "SendTargets=All";
        ck_assert_int_eq(text_req(&ts, &env, 0x80, TTT_NONE, st, sizeof(st), &rep), 0);
        uint32_t ttt = get_be32(rep.bhs + 20);
        ck_assert_uint_ne(ttt, TTT_NONE);
        check_response_bhs(&rep, 0x40, ttt);
        ck_assert_uint_eq(rep.data_len, 40);
        char all[512];
        uint32_t total = 0;
        memcpy(all, rep.data, rep.data_len);
        total += rep.data_len;
        iscsi_pdu_reply_free(&rep);
        int pieces = 1;
        for (;;) {
                /* Data while the target continues is a protocol error; keep the exchange. */
                ck_assert_int_eq(text_req(&ts, &env, 0x80, ttt, st, sizeof(st), &rep), -EPROTO);
                ck_assert_int_eq(text_req(&ts, &env, 0x80, ttt, NULL, 0, &rep), 0);
                pieces++;
                ck_assert_uint_le(rep.data_len, 40);
                memcpy(all + total, rep.data, rep.data_len);
                total += rep.data_len;
                bool more = rep.bhs[1] & 0x40;
                if (more) {
                        check_response_bhs(&rep, 0x40, ttt);
                } else {
                        check_response_bhs(&rep, 0x80, TTT_NONE);
                        iscsi_pdu_reply_free(&rep);
                        break;
                }
                iscsi_pdu_reply_free(&rep);
        }
        ck_assert_int_eq(pieces, 4); /* 130 bytes in 40-byte pieces */
        static const char want[] = "TargetName=iqn.2024-01.test:disk1\0"
                                   "TargetAddress=192.0.2.1:3260,1\0"
                                   "TargetName=iqn.2024-01.test:disk2\0"
                                   "TargetAddress=192.0.2.1:3260,7";
        ck_assert_uint_eq(total, sizeof(want));
        ck_assert_mem_eq(all, want, sizeof(want));
        /* The exchange is over: the old TTT is no longer valid. */
        ck_assert_int_eq(text_req(&ts, &env, 0x80, ttt, NULL, 0, &rep), -EPROTO);
        iscsi_text_state_fini(&ts);
}
END_TEST

START_TEST(test_new_request_abandons_exchange)
{
        struct iscsi_text_env env = discovery_env();
        env.max_xmit_dsl = 40;
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct iscsi_pdu_reply rep;
        static const char st[] = "SendTargets=All";
        ck_assert_int_eq(text_req(&ts, &env, 0x80, TTT_NONE, st, sizeof(st), &rep), 0);
        uint32_t ttt = get_be32(rep.bhs + 20);
        iscsi_pdu_reply_free(&rep);
        static const char one[] = "SendTargets=iqn.2024-01.test:disk1";
        env.max_xmit_dsl = 8192;
        ck_assert_int_eq(text_req(&ts, &env, 0x80, TTT_NONE, one, sizeof(one), &rep), 0);
        check_response_bhs(&rep, 0x80, TTT_NONE);
        iscsi_pdu_reply_free(&rep);
        ck_assert_int_eq(text_req(&ts, &env, 0x80, ttt, NULL, 0, &rep), -EPROTO);
        iscsi_text_state_fini(&ts);
}
END_TEST

/* The initiator's own text in two PDUs (C=1), cut inside the value. */
START_TEST(test_initiator_continuation)
{
        struct iscsi_text_env env = discovery_env();
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct iscsi_pdu_reply rep;
        static const char st[] = "SendTargets=iqn.2024-01.test:disk1";
        ck_assert_int_eq(text_req(&ts, &env, 0x40, TTT_NONE, st, 15, &rep), 0);
        uint32_t ttt = get_be32(rep.bhs + 20);
        ck_assert_uint_ne(ttt, TTT_NONE);
        check_response_bhs(&rep, 0x00, ttt);
        ck_assert_uint_eq(rep.data_len, 0);
        iscsi_pdu_reply_free(&rep);
        ck_assert_int_eq(text_req(&ts, &env, 0x80, ttt, st + 15, sizeof(st) - 15, &rep), 0);
        check_response_bhs(&rep, 0x80, TTT_NONE);
        char got[256];
        reply_lines(&rep, got, sizeof(got));
        ck_assert_str_eq(got,
                         "TargetName=iqn.2024-01.test:disk1\nTargetAddress=192.0.2.1:3260,1\n");
        iscsi_pdu_reply_free(&rep);
        iscsi_text_state_fini(&ts);
}
END_TEST

/* A request with F=0: the answer has F=0 and a TTT; the initiator closes with F=1. */
START_TEST(test_non_final_request)
{
        struct iscsi_text_env env = discovery_env();
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct iscsi_pdu_reply rep;
        static const char st[] = "SendTargets=iqn.2024-01.test:disk2";
        ck_assert_int_eq(text_req(&ts, &env, 0x00, TTT_NONE, st, sizeof(st), &rep), 0);
        uint32_t ttt = get_be32(rep.bhs + 20);
        ck_assert_uint_ne(ttt, TTT_NONE);
        check_response_bhs(&rep, 0x00, ttt);
        ck_assert_uint_gt(rep.data_len, 0);
        iscsi_pdu_reply_free(&rep);
        ck_assert_int_eq(text_req(&ts, &env, 0x80, ttt, NULL, 0, &rep), 0);
        check_response_bhs(&rep, 0x80, TTT_NONE);
        ck_assert_uint_eq(rep.data_len, 0);
        iscsi_pdu_reply_free(&rep);
        iscsi_text_state_fini(&ts);
}
END_TEST

START_TEST(test_initiator_text_too_long)
{
        struct iscsi_text_env env = discovery_env();
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct iscsi_pdu_reply rep;
        char *chunk = malloc(8192);
        memset(chunk, 'a', 8192);
        uint32_t ttt = TTT_NONE;
        int rc = 0;
        for (int i = 0; i < 9 && rc == 0; i++) {
                rc = text_req(&ts, &env, 0x40, ttt, chunk, 8192, &rep);
                if (rc == 0) {
                        ttt = get_be32(rep.bhs + 20);
                        iscsi_pdu_reply_free(&rep);
                }
        }
        ck_assert_int_eq(rc, -EPROTO); /* 9 * 8192 > 64 KiB */
        free(chunk);
        iscsi_text_state_fini(&ts);
}
END_TEST

static Suite *text_suite(void)
{
        Suite *s = suite_create("iscsi_text");
        TCase *tc = tcase_create("codec");
        tcase_add_test(tc, test_parse_pairs);
        tcase_add_test(tc, test_parse_empty_and_padding);
        tcase_add_loop_test(tc, test_parse_malformed, 0, sizeof(bad_texts) / sizeof(bad_texts[0]));
        tcase_add_test(tc, test_parse_limits);
        tcase_add_test(tc, test_parse_too_many_pairs);
        tcase_add_test(tc, test_key_names);
        tcase_add_test(tc, test_numbers);
        tcase_add_test(tc, test_build);
        suite_add_tcase(s, tc);

        tc = tcase_create("text_request");
        tcase_add_test(tc, test_sendtargets_all_discovery);
        tcase_add_test(tc, test_sendtargets_ipv6_portal);
        tcase_add_test(tc, test_sendtargets_named);
        tcase_add_test(tc, test_sendtargets_normal_session);
        tcase_add_test(tc, test_sendtargets_invalid);
        tcase_add_test(tc, test_sendtargets_no_registry);
        tcase_add_test(tc, test_name_plausible);
        tcase_add_test(tc, test_bad_requests);
        tcase_add_test(tc, test_long_reply_continues);
        tcase_add_test(tc, test_new_request_abandons_exchange);
        tcase_add_test(tc, test_initiator_continuation);
        tcase_add_test(tc, test_non_final_request);
        tcase_add_test(tc, test_initiator_text_too_long);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(text_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
