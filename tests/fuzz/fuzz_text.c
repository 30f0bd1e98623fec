/*
 * Text under fuzzing: the key=value<NUL> codec (parse, rebuild, value parsers, CHAP value
 * codec, operational negotiation of single keys) and Text Request exchanges through
 * iscsi_text_handle() with SendTargets over a fake target list.
 *
 * Input: one mode byte.
 *   bit 0 = 0: codec mode, the rest is one text (bit 1: negotiate as a discovery session).
 *   bit 0 = 1: exchange mode, then one byte (number of visible targets), then Text Request
 *     PDUs as on the wire (48-byte BHS, data segment, padding). Mode bits: 1 discovery
 *     session (else normal), 2-3 MaxRecvDataSegmentLength of the initiator (0 = unset,
 *     512, 8192, 65536). A request TTT of 0xfffffffe is replaced by the TTT of the open
 *     exchange so the fuzzer can follow a long reply.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "iscsi/login_internal.h"
#include "tandem/iscsi_login.h"
#include "tandem/iscsi_pdu.h"

#define TEXT_MAX       (64 * 1024) /* ISCSI_LOGIN_TEXT_MAX: the most text we parse */
#define SESSION_TARGET "iqn.2026-11.io.tandem:t1"
#define INITIATOR      "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls"
#define TTT_NONE       0xffffffffu
#define TTT_FOLLOW     0xfffffffeu

/* ---- codec mode ---- */

static bool all_digits(const char *s, unsigned base)
{
        if (!*s)
                return false;
        for (; *s; s++) {
                bool dec = *s >= '0' && *s <= '9';
                bool hex = (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F');
                if (!dec && !(base == 16 && hex))
                        return false;
        }
        return true;
}

/* iscsi_parse_number against strtoull on the forms it accepts. */
static void check_number(const char *v)
{
        uint64_t n;
        int rc = iscsi_parse_number(v, &n);
        bool hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
        const char *digits = hex ? v + 2 : v;
        bool well_formed = all_digits(digits, hex ? 16 : 10);
        if (!well_formed) {
                /* An overflow may be noticed before the bad character: either error will do. */
                FUZZ_ASSERT(rc == -EINVAL || rc == -ERANGE, "parse_number(\"%s\") = %d", v, rc);
                return;
        }
        errno = 0;
        unsigned long long ref = strtoull(digits, NULL, hex ? 16 : 10);
        if (errno == ERANGE) {
                FUZZ_ASSERT(rc == -ERANGE, "parse_number(\"%s\") = %d, want -ERANGE", v, rc);
                return;
        }
        FUZZ_ASSERT(rc == 0 && n == ref, "parse_number(\"%s\") = %d/%llu, want %llu", v, rc,
                    (unsigned long long)n, ref);
}

static void check_chap_value(const char *v)
{
        static uint8_t bin[ISCSI_CHAP_BINARY_MAX], again[ISCSI_CHAP_BINARY_MAX];
        static char hex[2 * ISCSI_CHAP_BINARY_MAX + 3];
        size_t n = 0, n2 = 0;
        int rc = iscsi_chap_decode(v, bin, sizeof(bin), &n);
        FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -E2BIG, "chap_decode = %d", rc);
        if (rc)
                return;
        FUZZ_ASSERT(n <= sizeof(bin), "chap_decode length %zu", n);
        if (n == 0)
                return;
        FUZZ_ASSERT(iscsi_chap_encode_hex(bin, n, hex, sizeof(hex)) == 0, "encode of %zu bytes", n);
        FUZZ_ASSERT(iscsi_chap_decode(hex, again, sizeof(again), &n2) == 0 && n2 == n &&
                        memcmp(bin, again, n) == 0,
                    "hex round trip of \"%s\" differs", v);
        int alg = iscsi_chap_select_alg(v);
        FUZZ_ASSERT(alg == -1 || iscsi_chap_digest_len(alg) > 0, "select_alg = %d", alg);
}

/* One operational key negotiated alone on fresh parameters. */
static void check_negotiation(enum iscsi_key_id id, const char *value, bool discovery)
{
        static const struct tdm_iscsi_cfg lim = {.max_recv_dsl = 262144,
                                                 .max_burst = 1048576,
                                                 .first_burst = 65536,
                                                 .immediate_data = true,
                                                 .max_outstanding_r2t = 4,
                                                 .queue_depth = 128};
        if (id == IK_UNKNOWN || iscsi_key_kind(id) != IKK_OPERATIONAL)
                return;
        struct iscsi_session_params p;
        iscsi_params_defaults(&p);
        enum iscsi_neg_outcome o = iscsi_params_negotiate(
            &p, &lim, discovery ? ISCSI_SESSION_DISCOVERY : ISCSI_SESSION_NORMAL, id, value);
        FUZZ_ASSERT(o >= ISCSI_NEG_ANSWER && o <= ISCSI_NEG_FAIL, "outcome %d", o);
        if (o == ISCSI_NEG_ANSWER) {
                char buf[32];
                FUZZ_ASSERT(iscsi_params_format(&p, id, buf, sizeof(buf)) == 0 && buf[0],
                            "no answer text for %s=%s", iscsi_key_name(id), value);
        }
        iscsi_params_settle(&p);
        FUZZ_ASSERT(p.first_burst <= p.max_burst, "FirstBurstLength %u > MaxBurstLength %u",
                    p.first_burst, p.max_burst);
        FUZZ_ASSERT(p.max_xmit_dsl >= 512 && p.max_burst >= 512 && p.max_outstanding_r2t >= 1,
                    "out of range after %s=%s", iscsi_key_name(id), value);
}

static void codec(uint8_t mode, const uint8_t *data, size_t size)
{
        struct iscsi_kv_list kv;
        int rc = iscsi_text_parse(data, (uint32_t)size, TEXT_MAX, &kv);
        FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -E2BIG, "text_parse = %d", rc);
        if (rc) {
                FUZZ_ASSERT(kv.kv == NULL && kv.buf == NULL && kv.n == 0, "list left after %d", rc);
                return;
        }
        /* Rebuilding the pairs gives the input back, less trailing NUL padding. */
        struct iscsi_text_buf b;
        iscsi_text_buf_init(&b, TEXT_MAX);
        for (uint32_t i = 0; i < kv.n; i++) {
                const char *k = kv.kv[i].key, *v = kv.kv[i].value;
                FUZZ_ASSERT(iscsi_key_name_valid(k, strlen(k)), "invalid key \"%s\" accepted", k);
                FUZZ_ASSERT(strlen(v) <= iscsi_key_value_max(k), "value of %s too long (%zu)", k,
                            strlen(v));
                FUZZ_ASSERT(iscsi_kv_find(&kv, k, 0) >= 0 && iscsi_kv_find(&kv, k, 0) <= (int)i,
                            "kv_find misses %s", k);
                FUZZ_ASSERT(iscsi_text_buf_add(&b, k, v) == 0, "rebuild of %s failed", k);
                enum iscsi_key_id id = iscsi_key_lookup(k);
                FUZZ_ASSERT(id == IK_UNKNOWN || strcmp(iscsi_key_name(id), k) == 0,
                            "lookup(%s) names %s", k, iscsi_key_name(id));
                bool yes;
                int brc = iscsi_parse_bool(v, &yes);
                FUZZ_ASSERT(brc == 0 ? (strcmp(v, yes ? "Yes" : "No") == 0) : brc == -EINVAL,
                            "parse_bool(\"%s\") = %d", v, brc);
                check_number(v);
                check_chap_value(v);
                (void)iscsi_text_name_plausible(v);
                check_negotiation(id, v, (mode & 2) != 0);
        }
        if (fuzz_verbose())
                fprintf(stderr, "codec: %u pairs\n", kv.n);
        FUZZ_ASSERT(b.err == 0 && b.len <= size, "rebuilt %u bytes from %zu", b.len, size);
        FUZZ_ASSERT(b.len == 0 || memcmp(b.data, data, b.len) == 0, "rebuilt text differs");
        for (size_t i = b.len; i < size; i++)
                FUZZ_ASSERT(data[i] == 0, "byte %zu after the pairs is 0x%02x", i, data[i]);
        iscsi_text_buf_free(&b);
        iscsi_kv_list_free(&kv);
}

/* ---- exchange mode ---- */

struct visible {
        unsigned n;
        unsigned calls;
};
static struct visible vis;

static void target_name(unsigned i, char *buf, size_t len)
{
        if (i == 0)
                snprintf(buf, len, "%s", SESSION_TARGET);
        else /* long names: a few dozen of them overflow one 8 KiB PDU */
                snprintf(buf, len, "iqn.2026-11.io.tandem:fuzz-target-with-a-long-name-%04u", i);
}

static void fake_for_each_visible(const char *initiator, const char *only,
                                  void (*cb)(void *arg, const char *iqn, uint16_t tpgt), void *arg)
{
        FUZZ_ASSERT(initiator && strcmp(initiator, INITIATOR) == 0, "initiator not passed on");
        FUZZ_ASSERT(!only || (only[0] && strlen(only) < TDM_IQN_MAX), "bad filter");
        vis.calls++;
        for (unsigned i = 0; i < vis.n; i++) {
                char name[TDM_IQN_MAX];
                target_name(i, name, sizeof(name));
                if (!only || strcmp(only, name) == 0)
                        cb(arg, name, (uint16_t)(i % 3)); /* 0: the portal's own tag applies */
        }
}

struct exchange {
        struct fuzz_text_acc text;
        uint32_t last_ttt;
};

static void check_text_reply(const struct iscsi_text_env *env, struct exchange *ex,
                             const uint8_t *req, const struct iscsi_pdu_reply *rep)
{
        const uint8_t *h = rep->bhs;
        bool f = (h[1] & 0x80) != 0, c = (h[1] & 0x40) != 0;
        uint32_t ttt = get_be32(h + 20);
        uint32_t max = env->max_xmit_dsl ? env->max_xmit_dsl : 8192;
        FUZZ_ASSERT(h[0] == ISCSI_OP_TEXT_RSP, "opcode 0x%02x", h[0]);
        FUZZ_ASSERT(get_be32(h + 16) == get_be32(req + 16), "ITT not echoed");
        FUZZ_ASSERT(memcmp(h + 8, req + 8, 8) == 0, "LUN not echoed");
        FUZZ_ASSERT(rep->data_len <= max, "data_len %u above MaxRecvDataSegmentLength %u",
                    rep->data_len, max);
        FUZZ_ASSERT(iscsi_bhs_dsl(h) == rep->data_len, "DSL %u vs data_len %u", iscsi_bhs_dsl(h),
                    rep->data_len);
        FUZZ_ASSERT(!(f && c), "F and C both set");
        FUZZ_ASSERT(f == (ttt == TTT_NONE), "F=%d with TTT 0x%x", f, ttt);
        FUZZ_ASSERT(ttt != 0, "TTT 0");
        FUZZ_ASSERT(!rep->close_after, "text reply closes the connection");
        FUZZ_ASSERT(get_be32(h + 24) == env->stat_sn && get_be32(h + 28) == env->exp_cmdsn &&
                        get_be32(h + 32) == env->max_cmdsn,
                    "sequence numbers not from env");
        ex->last_ttt = ttt;
        fuzz_text_acc_add(&ex->text, rep->data, rep->data_len);
        if (!c) {
                /* A target answer may repeat TargetName/TargetAddress, one per target. */
                fuzz_check_text(ex->text.buf, ex->text.len, false);
                fuzz_text_acc_reset(&ex->text);
        }
}

static void exchange(uint8_t mode, struct fuzz_in *in)
{
        static const uint32_t xmit[4] = {0, 512, 8192, 65536};
        uint8_t n;
        if (!fuzz_take_u8(in, &n))
                return;
        vis = (struct visible){.n = n};
        struct iscsi_text_env env = {
            .type = (mode & 2) ? ISCSI_SESSION_DISCOVERY : ISCSI_SESSION_NORMAL,
            .for_each_visible = fake_for_each_visible,
            .initiator_name = INITIATOR,
            .target_name = (mode & 2) ? "" : SESSION_TARGET,
            .portal = "127.0.0.1:3260",
            .tpgt = 1,
            .max_xmit_dsl = xmit[(mode >> 2) & 3],
            .stat_sn = 100,
            .exp_cmdsn = 200,
            .max_cmdsn = 327,
        };
        struct iscsi_text_state ts = {.ttt = TTT_NONE};
        struct exchange ex = {.last_ttt = TTT_NONE};
        const uint8_t *bhs, *data;
        uint32_t len;
        while (fuzz_next_pdu(in, &bhs, &data, &len)) {
                uint8_t req[ISCSI_BHS_LEN];
                memcpy(req, bhs, sizeof(req));
                if (get_be32(req + 20) == TTT_FOLLOW)
                        put_be32(req + 20, ex.last_ttt);
                bool starts_exchange =
                    iscsi_bhs_opcode(req) == ISCSI_OP_TEXT_REQ && get_be32(req + 20) == TTT_NONE;
                struct iscsi_pdu_reply rep;
                int rc = iscsi_text_handle(&ts, &env, req, data, len, &rep);
                /* An accepted request without a TTT starts a new exchange and the old answer is
                 * dropped; a rejected one leaves the open exchange (and its partial text) alone. */
                if (rc == 0 && starts_exchange)
                        fuzz_text_acc_reset(&ex.text);
                if (iscsi_bhs_opcode(req) != ISCSI_OP_TEXT_REQ) {
                        FUZZ_ASSERT(rc == -EINVAL, "opcode 0x%02x answered with %d",
                                    iscsi_bhs_opcode(req), rc);
                } else {
                        FUZZ_ASSERT(rc == 0 || rc == -EPROTO, "text_handle = %d", rc);
                }
                if (fuzz_verbose())
                        fprintf(
                            stderr,
                            "text: flags 0x%02x ttt 0x%x -> rc %d flags 0x%02x ttt 0x%x len %u\n",
                            req[1], get_be32(req + 20), rc, rep.bhs[1], get_be32(rep.bhs + 20),
                            rep.data_len);
                /* After an error (answered with a Reject) an open exchange goes on. */
                if (rc == 0)
                        check_text_reply(&env, &ex, req, &rep);
                FUZZ_ASSERT(rc == 0 || (rep.data == NULL && rep.data_len == 0),
                            "error %d with reply text", rc);
                iscsi_pdu_reply_free(&rep);
                env.stat_sn++;
        }
        iscsi_text_state_fini(&ts);
        fuzz_text_acc_reset(&ex.text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fuzz_in in = {data, size};
        uint8_t mode;
        if (!fuzz_take_u8(&in, &mode))
                return 0;
        if (mode & 1)
                exchange(mode, &in);
        else
                codec(mode, in.p, in.left);
        return 0;
}
