/* Operational key negotiation: one vector per key and rule (RFC 7143 13). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "iscsi/login_internal.h"

static struct tdm_iscsi_cfg lim;
static struct iscsi_session_params p;

static void setup(void)
{
        lim = (struct tdm_iscsi_cfg){
            .max_recv_dsl = 131072,
            .max_burst = 262144,
            .first_burst = 65536,
            .initial_r2t = true,
            .immediate_data = true,
            .max_outstanding_r2t = 8,
            .queue_depth = 32,
        };
        iscsi_params_defaults(&p);
}

static bool params_equal(const struct iscsi_session_params *a, const struct iscsi_session_params *b)
{
        return a->header_digest == b->header_digest && a->data_digest == b->data_digest &&
               a->max_recv_dsl == b->max_recv_dsl && a->max_xmit_dsl == b->max_xmit_dsl &&
               a->max_burst == b->max_burst && a->first_burst == b->first_burst &&
               a->initial_r2t == b->initial_r2t && a->immediate_data == b->immediate_data &&
               a->max_outstanding_r2t == b->max_outstanding_r2t &&
               a->max_connections == b->max_connections &&
               a->data_pdu_in_order == b->data_pdu_in_order &&
               a->data_seq_in_order == b->data_seq_in_order && a->time2wait == b->time2wait &&
               a->time2retain == b->time2retain && a->erl == b->erl;
}

struct vector {
        const char *key;
        const char *value;
        enum iscsi_neg_outcome outcome;
        const char *answer; /* for ISCSI_NEG_ANSWER: the formatted result */
};

/* Normal session, limits from setup(). */
static const struct vector vectors[] = {
    {"HeaderDigest", "CRC32C,None", ISCSI_NEG_ANSWER, "CRC32C"},
    {"HeaderDigest", "None,CRC32C", ISCSI_NEG_ANSWER, "None"},
    {"HeaderDigest", "CRC32C", ISCSI_NEG_ANSWER, "CRC32C"},
    {"HeaderDigest", "SHA1,CRC32C", ISCSI_NEG_ANSWER, "CRC32C"}, /* unknown values skipped */
    {"HeaderDigest", "crc32c", ISCSI_NEG_REJECT, NULL},          /* values are case-sensitive */
    {"HeaderDigest", "MD5", ISCSI_NEG_REJECT, NULL},
    {"HeaderDigest", "", ISCSI_NEG_REJECT, NULL},
    {"HeaderDigest", ",None", ISCSI_NEG_REJECT, NULL},
    {"DataDigest", "CRC32C,None", ISCSI_NEG_ANSWER, "CRC32C"},
    {"DataDigest", "None", ISCSI_NEG_ANSWER, "None"},
    {"DataDigest", "Adler", ISCSI_NEG_REJECT, NULL},
    {"MaxRecvDataSegmentLength", "65536", ISCSI_NEG_SILENT, NULL},
    {"MaxRecvDataSegmentLength", "512", ISCSI_NEG_SILENT, NULL},
    {"MaxRecvDataSegmentLength", "0x1000", ISCSI_NEG_SILENT, NULL},
    {"MaxRecvDataSegmentLength", "511", ISCSI_NEG_FAIL, NULL},
    {"MaxRecvDataSegmentLength", "16777216", ISCSI_NEG_FAIL, NULL},
    {"MaxRecvDataSegmentLength", "lots", ISCSI_NEG_FAIL, NULL},
    {"MaxConnections", "4", ISCSI_NEG_ANSWER, "1"},
    {"MaxConnections", "1", ISCSI_NEG_ANSWER, "1"},
    {"MaxConnections", "0", ISCSI_NEG_REJECT, NULL},
    {"MaxConnections", "65536", ISCSI_NEG_REJECT, NULL},
    {"MaxConnections", "-1", ISCSI_NEG_REJECT, NULL},
    {"InitialR2T", "No", ISCSI_NEG_ANSWER, "Yes"}, /* OR with our Yes */
    {"InitialR2T", "Yes", ISCSI_NEG_ANSWER, "Yes"},
    {"InitialR2T", "yes", ISCSI_NEG_REJECT, NULL},
    {"ImmediateData", "Yes", ISCSI_NEG_ANSWER, "Yes"},
    {"ImmediateData", "No", ISCSI_NEG_ANSWER, "No"},
    {"ImmediateData", "Y", ISCSI_NEG_REJECT, NULL},
    {"MaxBurstLength", "1048576", ISCSI_NEG_ANSWER, "262144"},
    {"MaxBurstLength", "65536", ISCSI_NEG_ANSWER, "65536"},
    {"MaxBurstLength", "512", ISCSI_NEG_ANSWER, "512"},
    {"MaxBurstLength", "511", ISCSI_NEG_REJECT, NULL},
    {"MaxBurstLength", "16777216", ISCSI_NEG_REJECT, NULL},
    {"MaxBurstLength", "99999999999999999999999", ISCSI_NEG_REJECT, NULL},
    {"FirstBurstLength", "262144", ISCSI_NEG_ANSWER, "65536"},
    {"FirstBurstLength", "4096", ISCSI_NEG_ANSWER, "4096"},
    {"FirstBurstLength", "100", ISCSI_NEG_REJECT, NULL},
    {"DefaultTime2Wait", "0", ISCSI_NEG_ANSWER, "0"}, /* max of theirs and our 0 */
    {"DefaultTime2Wait", "2", ISCSI_NEG_ANSWER, "2"},
    {"DefaultTime2Wait", "10", ISCSI_NEG_ANSWER, "10"},
    {"DefaultTime2Wait", "3601", ISCSI_NEG_REJECT, NULL},
    {"DefaultTime2Retain", "0", ISCSI_NEG_ANSWER, "0"}, /* min */
    {"DefaultTime2Retain", "60", ISCSI_NEG_ANSWER, "20"},
    {"DefaultTime2Retain", "3601", ISCSI_NEG_REJECT, NULL},
    {"MaxOutstandingR2T", "16", ISCSI_NEG_ANSWER, "8"},
    {"MaxOutstandingR2T", "1", ISCSI_NEG_ANSWER, "1"},
    {"MaxOutstandingR2T", "0", ISCSI_NEG_REJECT, NULL},
    {"DataPDUInOrder", "No", ISCSI_NEG_ANSWER, "Yes"},
    {"DataPDUInOrder", "Yes", ISCSI_NEG_ANSWER, "Yes"},
    {"DataPDUInOrder", "", ISCSI_NEG_REJECT, NULL},
    {"DataSequenceInOrder", "No", ISCSI_NEG_ANSWER, "Yes"},
    {"DataSequenceInOrder", "Yes", ISCSI_NEG_ANSWER, "Yes"},
    {"ErrorRecoveryLevel", "2", ISCSI_NEG_ANSWER, "0"},
    {"ErrorRecoveryLevel", "0", ISCSI_NEG_ANSWER, "0"},
    {"ErrorRecoveryLevel", "3", ISCSI_NEG_REJECT, NULL},
    {"OFMarker", "Yes", ISCSI_NEG_ANSWER, "No"},
    {"OFMarker", "No", ISCSI_NEG_ANSWER, "No"},
    {"OFMarker", "maybe", ISCSI_NEG_REJECT, NULL},
    {"IFMarker", "Yes", ISCSI_NEG_ANSWER, "No"},
    {"OFMarkInt", "2048~8192", ISCSI_NEG_IRRELEVANT, NULL},
    {"IFMarkInt", "1", ISCSI_NEG_IRRELEVANT, NULL},
    {"MaxBurstLength", "NotUnderstood", ISCSI_NEG_FAIL, NULL},
    {"ImmediateData", "Reject", ISCSI_NEG_FAIL, NULL},
    {"InitialR2T", "Irrelevant", ISCSI_NEG_FAIL, NULL},
};

START_TEST(test_vector)
{
        const struct vector *v = &vectors[_i];
        enum iscsi_key_id key = iscsi_key_lookup(v->key);
        ck_assert_int_ne(key, IK_UNKNOWN);
        struct iscsi_session_params before = p;
        enum iscsi_neg_outcome o =
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, key, v->value);
        ck_assert_msg(o == v->outcome, "%s=%s: outcome %d, want %d", v->key, v->value, o,
                      v->outcome);
        if (v->outcome == ISCSI_NEG_ANSWER) {
                char buf[32];
                ck_assert_int_eq(iscsi_params_format(&p, key, buf, sizeof(buf)), 0);
                ck_assert_msg(strcmp(buf, v->answer) == 0, "%s=%s: answered %s, want %s", v->key,
                              v->value, buf, v->answer);
        }
        if (v->outcome == ISCSI_NEG_REJECT || v->outcome == ISCSI_NEG_IRRELEVANT ||
            v->outcome == ISCSI_NEG_FAIL)
                ck_assert(params_equal(&before, &p)); /* nothing changes */
}
END_TEST

START_TEST(test_declarations_set_send_limit)
{
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_MAX_RECV_DSL, "65536"),
            ISCSI_NEG_SILENT);
        ck_assert_uint_eq(p.max_xmit_dsl, 65536);
        ck_assert_uint_eq(p.max_recv_dsl, 8192); /* ours is only set when declared */
        ck_assert_uint_eq(iscsi_params_our_max_recv_dsl(&lim), 131072);
        lim.max_recv_dsl = 0;
        ck_assert_uint_eq(iscsi_params_our_max_recv_dsl(&lim), 8192);
        lim.max_recv_dsl = 100;
        ck_assert_uint_eq(iscsi_params_our_max_recv_dsl(&lim), 512);
        lim.max_recv_dsl = 100000000;
        ck_assert_uint_eq(iscsi_params_our_max_recv_dsl(&lim), 16777215);
}
END_TEST

START_TEST(test_limits_drive_results)
{
        lim.initial_r2t = false;
        lim.immediate_data = false;
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_INITIAL_R2T, "No"),
            ISCSI_NEG_ANSWER);
        ck_assert(!p.initial_r2t);
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_IMMEDIATE_DATA, "Yes"),
            ISCSI_NEG_ANSWER);
        ck_assert(!p.immediate_data);
        lim.max_outstanding_r2t = 0; /* unset: the RFC default 1 */
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_MAX_OUTSTANDING_R2T, "4"),
            ISCSI_NEG_ANSWER);
        ck_assert_uint_eq(p.max_outstanding_r2t, 1);
}
END_TEST

START_TEST(test_first_burst_settles_below_max_burst)
{
        lim.first_burst = 262144;
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_FIRST_BURST, "131072"),
            ISCSI_NEG_ANSWER);
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_MAX_BURST, "16384"),
            ISCSI_NEG_ANSWER);
        ck_assert_uint_eq(p.first_burst, 131072);
        iscsi_params_settle(&p);
        ck_assert_uint_eq(p.first_burst, 16384);
        ck_assert_uint_eq(p.max_burst, 16384);
}
END_TEST

static const char *const discovery_irrelevant[] = {
    "MaxConnections",   "InitialR2T",        "ImmediateData",  "MaxBurstLength",
    "FirstBurstLength", "MaxOutstandingR2T", "DataPDUInOrder", "DataSequenceInOrder",
};

START_TEST(test_discovery_irrelevant)
{
        enum iscsi_key_id key = iscsi_key_lookup(discovery_irrelevant[_i]);
        ck_assert_int_ne(key, IK_UNKNOWN);
        ck_assert_int_eq(iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_DISCOVERY, key, "1"),
                         ISCSI_NEG_IRRELEVANT);
}
END_TEST

START_TEST(test_discovery_relevant)
{
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_DISCOVERY, IK_HEADER_DIGEST, "CRC32C"),
            ISCSI_NEG_ANSWER);
        ck_assert(p.header_digest);
        ck_assert_int_eq(iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_DISCOVERY, IK_ERL, "1"),
                         ISCSI_NEG_ANSWER);
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_DISCOVERY, IK_MAX_RECV_DSL, "4096"),
            ISCSI_NEG_SILENT);
        ck_assert_uint_eq(p.max_xmit_dsl, 4096);
}
END_TEST

START_TEST(test_key_table)
{
        ck_assert_int_eq(iscsi_key_lookup("HeaderDigest"), IK_HEADER_DIGEST);
        ck_assert_int_eq(iscsi_key_lookup("headerdigest"), IK_UNKNOWN); /* case-sensitive */
        ck_assert_int_eq(iscsi_key_lookup("X-com.example"), IK_UNKNOWN);
        ck_assert_int_eq(iscsi_key_lookup(""), IK_UNKNOWN);
        for (int k = 0; k < IK_COUNT; k++)
                ck_assert_int_eq(iscsi_key_lookup(iscsi_key_name((enum iscsi_key_id)k)), k);
        ck_assert_int_eq(iscsi_key_kind(IK_AUTH_METHOD), IKK_SECURITY);
        ck_assert_int_eq(iscsi_key_kind(IK_CHAP_R), IKK_SECURITY);
        ck_assert_int_eq(iscsi_key_kind(IK_TARGET_NAME), IKK_IDENTITY);
        ck_assert_int_eq(iscsi_key_kind(IK_TPGT), IKK_TARGET_ONLY);
        ck_assert_int_eq(iscsi_key_kind(IK_SEND_TARGETS), IKK_FFP_ONLY);
        ck_assert_int_eq(iscsi_key_kind(IK_MAX_BURST), IKK_OPERATIONAL);
        /* Non-operational keys are not negotiated here. */
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_AUTH_METHOD, "None"),
            ISCSI_NEG_FAIL);
        ck_assert_int_eq(
            iscsi_params_negotiate(&p, &lim, ISCSI_SESSION_NORMAL, IK_TARGET_NAME, "iqn.x"),
            ISCSI_NEG_FAIL);
}
END_TEST

START_TEST(test_defaults)
{
        ck_assert_uint_eq(p.max_recv_dsl, 8192);
        ck_assert_uint_eq(p.max_xmit_dsl, 8192);
        ck_assert_uint_eq(p.max_burst, 262144);
        ck_assert_uint_eq(p.first_burst, 65536);
        ck_assert(p.initial_r2t);
        ck_assert(p.immediate_data);
        ck_assert_uint_eq(p.max_outstanding_r2t, 1);
        ck_assert_uint_eq(p.max_connections, 1);
        ck_assert(p.data_pdu_in_order);
        ck_assert(p.data_seq_in_order);
        ck_assert_uint_eq(p.time2wait, 2);
        ck_assert_uint_eq(p.time2retain, 20);
        ck_assert_uint_eq(p.erl, 0);
        ck_assert(!p.header_digest);
        ck_assert(!p.data_digest);
}
END_TEST

static bool text_has(const struct iscsi_text_buf *b, const char *kv)
{
        size_t n = strlen(kv) + 1;
        for (uint32_t off = 0; off + n <= b->len; off += (uint32_t)strlen(b->data + off) + 1)
                if (memcmp(b->data + off, kv, n) == 0)
                        return true;
        return false;
}

START_TEST(test_offers)
{
        struct iscsi_text_buf out;
        iscsi_text_buf_init(&out, 4096);
        /* Limits the defaults satisfy: nothing to offer. */
        ck_assert_uint_eq(iscsi_params_offer(&p, &lim, ISCSI_SESSION_NORMAL, 0, &out), 0);
        ck_assert_uint_eq(out.len, 0);

        lim.max_burst = 65536;
        lim.first_burst = 16384;
        lim.immediate_data = false;
        uint64_t offered = iscsi_params_offer(&p, &lim, ISCSI_SESSION_NORMAL, 0, &out);
        ck_assert_uint_eq(offered, (1ull << IK_MAX_BURST) | (1ull << IK_FIRST_BURST) |
                                       (1ull << IK_IMMEDIATE_DATA));
        ck_assert(text_has(&out, "MaxBurstLength=65536"));
        ck_assert(text_has(&out, "FirstBurstLength=16384"));
        ck_assert(text_has(&out, "ImmediateData=No"));
        iscsi_text_buf_free(&out);

        /* Keys the initiator already negotiated are not offered again. */
        iscsi_text_buf_init(&out, 4096);
        uint64_t seen = (1ull << IK_MAX_BURST) | (1ull << IK_IMMEDIATE_DATA);
        ck_assert_uint_eq(iscsi_params_offer(&p, &lim, ISCSI_SESSION_NORMAL, seen, &out),
                          1ull << IK_FIRST_BURST);
        iscsi_text_buf_free(&out);

        /* Discovery sessions carry no data: nothing to offer. */
        iscsi_text_buf_init(&out, 4096);
        ck_assert_uint_eq(iscsi_params_offer(&p, &lim, ISCSI_SESSION_DISCOVERY, 0, &out), 0);
        iscsi_text_buf_free(&out);
}
END_TEST

START_TEST(test_answers_to_offers)
{
        lim.max_burst = 65536;
        ck_assert_int_eq(iscsi_params_take_answer(&p, &lim, IK_MAX_BURST, "32768"),
                         ISCSI_NEG_SILENT);
        ck_assert_uint_eq(p.max_burst, 32768);
        ck_assert_int_eq(iscsi_params_take_answer(&p, &lim, IK_MAX_BURST, "131072"),
                         ISCSI_NEG_FAIL); /* more than offered under a min rule */
        ck_assert_int_eq(iscsi_params_take_answer(&p, &lim, IK_MAX_BURST, "Reject"),
                         ISCSI_NEG_FAIL);
        ck_assert_int_eq(iscsi_params_take_answer(&p, &lim, IK_MAX_BURST, "Irrelevant"),
                         ISCSI_NEG_SILENT);
        lim.immediate_data = false;
        ck_assert_int_eq(iscsi_params_take_answer(&p, &lim, IK_IMMEDIATE_DATA, "No"),
                         ISCSI_NEG_SILENT);
        ck_assert(!p.immediate_data);
        ck_assert_int_eq(iscsi_params_take_answer(&p, &lim, IK_IMMEDIATE_DATA, "Yes"),
                         ISCSI_NEG_FAIL);
        ck_assert_int_eq(iscsi_params_take_answer(&p, &lim, IK_HEADER_DIGEST, "None"),
                         ISCSI_NEG_FAIL); /* never offered */
}
END_TEST

static Suite *params_suite(void)
{
        Suite *s = suite_create("iscsi_params");
        TCase *tc = tcase_create("negotiation");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_loop_test(tc, test_vector, 0, sizeof(vectors) / sizeof(vectors[0]));
        tcase_add_test(tc, test_declarations_set_send_limit);
        tcase_add_test(tc, test_limits_drive_results);
        tcase_add_test(tc, test_first_burst_settles_below_max_burst);
        tcase_add_loop_test(tc, test_discovery_irrelevant, 0,
                            sizeof(discovery_irrelevant) / sizeof(discovery_irrelevant[0]));
        tcase_add_test(tc, test_discovery_relevant);
        tcase_add_test(tc, test_key_table);
        tcase_add_test(tc, test_defaults);
        tcase_add_test(tc, test_offers);
        tcase_add_test(tc, test_answers_to_offers);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(params_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
