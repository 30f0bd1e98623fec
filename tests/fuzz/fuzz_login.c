/*
 * Login phase under fuzzing: a sequence of Login Request PDUs through iscsi_login_handle(),
 * with a daemon side that knows one target (with or without CHAP), as the unit tests build it.
 *
 * Input: one configuration byte, then PDUs as on the wire (48-byte BHS, the data segment
 * its DataSegmentLength gives, padding). Configuration bits:
 *   0: the target requires CHAP          1: ... and mutual CHAP
 *   2: discovery sessions require CHAP   3-4: target limits (see limits_variant)
 *   5: no TSIH left (alloc_tsih gives 0) 6: the target has no alias and TPGT 0
 * A request whose text contains "CHAP_R=AUTO" gets AUTO replaced by the right response to
 * the last challenge, so the fuzzer can get past authentication.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "fuzz_util.h"
#include "iscsi/login_internal.h"
#include "tandem/iscsi_login.h"
#include "tandem/iscsi_pdu.h"

#define TARGET             "iqn.2026-11.io.tandem:t1" /* as in the captured seeds */
#define STRANGER           "iqn.2024-01.test:stranger"
#define CHAP_USER          "fuzzuser"
#define CHAP_SECRET        "fuzzsecret123"
#define MUTUAL_USER        "target"
#define MUTUAL_SECRET      "targetsecret"
#define DISC_SECRET        "discoverysecret"
#define AUTO_KEY           "CHAP_R=AUTO"
#define LOGIN_TEXT_PDU_MAX 8192 /* data we accept in one login response (RFC 7143 13.12) */

/* ---- fake daemon side ---- */

static struct scsi_target tgt;
static struct tdm_auth tgt_auth, disc_auth;
static struct tdm_iscsi_cfg limits;
static int refs_taken, refs_dropped;
static bool no_tsih;
static uint16_t next_tsih;

static int fake_lookup(void *arg, const char *target, const char *initiator,
                       struct scsi_target **out, struct tdm_auth *auth)
{
        (void)arg;
        if (strcmp(target, "iqn.2024-01.test:broken") == 0)
                return -EIO;
        if (strcmp(target, "iqn.2024-01.test:busy") == 0)
                return -EBUSY;
        if (strcmp(target, TARGET) != 0)
                return -ENOENT;
        if (strcmp(initiator, STRANGER) == 0)
                return -EACCES;
        refs_taken++;
        *out = &tgt;
        *auth = tgt_auth;
        return 0;
}

static void fake_discovery_auth(void *arg, struct tdm_auth *auth)
{
        (void)arg;
        *auth = disc_auth;
}

static void fake_put(void *arg, struct scsi_target *t)
{
        (void)arg;
        FUZZ_ASSERT(t == &tgt, "put of a target never handed out");
        refs_dropped++;
}

static uint16_t fake_tsih(void *arg)
{
        (void)arg;
        if (no_tsih)
                return 0;
        if (++next_tsih == 0)
                next_tsih = 1;
        return next_tsih;
}

/*
 * Deterministic stand-in for OpenSSL's generator (CHAP_I and CHAP_C): the same input
 * must take the same path on every run for a crash to reproduce.
 */
static uint64_t rand_state;

int RAND_bytes(unsigned char *buf, int num)
{
        for (int i = 0; i < num; i++) {
                rand_state = rand_state * 6364136223846793005ull + 1442695040888963407ull;
                buf[i] = (unsigned char)(rand_state >> 56);
        }
        return 1;
}

static void limits_variant(unsigned v)
{
        switch (v) {
        case 0: /* what the unit tests and the example config use */
                limits = (struct tdm_iscsi_cfg){.max_recv_dsl = 262144,
                                                .max_burst = 1048576,
                                                .first_burst = 65536,
                                                .immediate_data = true,
                                                .max_outstanding_r2t = 4,
                                                .queue_depth = 64};
                break;
        case 1: /* small bursts and no immediate data: the target offers keys itself */
                limits = (struct tdm_iscsi_cfg){.max_recv_dsl = 8192,
                                                .max_burst = 4096,
                                                .first_burst = 1024,
                                                .initial_r2t = true,
                                                .immediate_data = false,
                                                .max_outstanding_r2t = 1,
                                                .queue_depth = 1};
                break;
        case 2: /* the smallest values the configuration accepts */
                limits = (struct tdm_iscsi_cfg){.max_recv_dsl = 512,
                                                .max_burst = 512,
                                                .first_burst = 512,
                                                .initial_r2t = true,
                                                .max_outstanding_r2t = 1,
                                                .queue_depth = 1};
                break;
        default: /* the largest values the configuration accepts */
                limits = (struct tdm_iscsi_cfg){.max_recv_dsl = 16777215,
                                                .max_burst = 16777215,
                                                .first_burst = 16777215,
                                                .immediate_data = true,
                                                .max_outstanding_r2t = 16,
                                                .queue_depth = 4096};
                break;
        }
}

static void setup(uint8_t cfg, struct iscsi_login_env *env)
{
        memset(&tgt, 0, sizeof(tgt));
        snprintf(tgt.iqn, sizeof(tgt.iqn), "%s", TARGET);
        if (!(cfg & 0x40)) {
                snprintf(tgt.alias, sizeof(tgt.alias), "disk one");
                tgt.tpgt = 3;
        }
        memset(&tgt_auth, 0, sizeof(tgt_auth));
        memset(&disc_auth, 0, sizeof(disc_auth));
        if (cfg & 0x01) {
                tgt_auth.chap.enabled = true;
                snprintf(tgt_auth.chap.user, sizeof(tgt_auth.chap.user), CHAP_USER);
                snprintf(tgt_auth.chap.secret, sizeof(tgt_auth.chap.secret), CHAP_SECRET);
                if (cfg & 0x02) {
                        tgt_auth.chap.mutual = true;
                        snprintf(tgt_auth.chap.mutual_user, sizeof(tgt_auth.chap.mutual_user),
                                 MUTUAL_USER);
                        snprintf(tgt_auth.chap.mutual_secret, sizeof(tgt_auth.chap.mutual_secret),
                                 MUTUAL_SECRET);
                }
        }
        if (cfg & 0x04) {
                disc_auth.chap.enabled = true;
                snprintf(disc_auth.chap.user, sizeof(disc_auth.chap.user), CHAP_USER);
                snprintf(disc_auth.chap.secret, sizeof(disc_auth.chap.secret), DISC_SECRET);
        }
        limits_variant((cfg >> 3) & 3);
        no_tsih = (cfg & 0x20) != 0;
        next_tsih = 0;
        refs_taken = refs_dropped = 0;
        rand_state = 0x7a6e64;
        *env = (struct iscsi_login_env){
            .limits = &limits,
            .lookup_target = fake_lookup,
            .discovery_auth = fake_discovery_auth,
            .alloc_tsih = fake_tsih,
            .put_target = fake_put,
            .tpgt = 7,
            .peer = "fuzz:0",
        };
}

/* ---- CHAP helper: answer the last challenge for the fuzzer ---- */

struct chap_seen {
        bool have;
        int alg;
        uint8_t id;
        uint8_t challenge[ISCSI_CHAP_BINARY_MAX];
        size_t challenge_len;
};

static void chap_note_reply(struct chap_seen *cs, const uint8_t *text, uint32_t len)
{
        char a[16], i[16], c[ISCSI_LARGE_VALUE_MAX + 1];
        uint64_t alg, id;
        if (!fuzz_text_get(text, len, "CHAP_A", a, sizeof(a)) ||
            !fuzz_text_get(text, len, "CHAP_I", i, sizeof(i)) ||
            !fuzz_text_get(text, len, "CHAP_C", c, sizeof(c)))
                return;
        FUZZ_ASSERT(iscsi_parse_number(a, &alg) == 0 && iscsi_chap_digest_len((int)alg) > 0,
                    "target chose CHAP_A=%s", a);
        FUZZ_ASSERT(iscsi_parse_number(i, &id) == 0 && id <= 255, "target sent CHAP_I=%s", i);
        FUZZ_ASSERT(
            iscsi_chap_decode(c, cs->challenge, sizeof(cs->challenge), &cs->challenge_len) == 0 &&
                cs->challenge_len > 0,
            "target sent an undecodable CHAP_C=%s", c);
        cs->have = true;
        cs->alg = (int)alg;
        cs->id = (uint8_t)id;
}

/* Copy of data with CHAP_R=AUTO answered; NULL when there is nothing to replace. */
static uint8_t *chap_fill_auto(const struct chap_seen *cs, const struct iscsi_login *l,
                               const uint8_t *data, uint32_t len, uint32_t *out_len)
{
        if (!cs->have || len < sizeof(AUTO_KEY) - 1)
                return NULL;
        const uint8_t *hit = NULL;
        for (uint32_t i = 0; i + sizeof(AUTO_KEY) - 1 <= len; i++) {
                if (memcmp(data + i, AUTO_KEY, sizeof(AUTO_KEY) - 1) == 0) {
                        hit = data + i;
                        break;
                }
        }
        if (!hit)
                return NULL;
        uint8_t digest[ISCSI_CHAP_DIGEST_MAX];
        char hex[2 * ISCSI_CHAP_DIGEST_MAX + 3];
        if (iscsi_chap_compute(cs->alg, cs->id, l->auth.chap.secret, cs->challenge,
                               cs->challenge_len, digest) != 0 ||
            iscsi_chap_encode_hex(digest, iscsi_chap_digest_len(cs->alg), hex, sizeof(hex)) != 0)
                return NULL;
        size_t head = (size_t)(hit - data) + strlen("CHAP_R="), hexlen = strlen(hex);
        size_t tail = len - head - 4;
        uint8_t *out = malloc(head + hexlen + tail);
        FUZZ_ASSERT(out != NULL, "out of memory");
        memcpy(out, data, head);
        memcpy(out + head, hex, hexlen);
        memcpy(out + head + hexlen, data + head + 4, tail);
        *out_len = (uint32_t)(head + hexlen + tail);
        return out;
}

/* ---- invariants ---- */

struct expect {
        bool have_first;
        uint8_t isid[6];
        uint32_t cmdsn;
        uint32_t stat_sn; /* StatSN the next success-class response carries */
        struct fuzz_text_acc text;
};

static void check_params(const struct iscsi_session_params *p, enum iscsi_session_type type)
{
        FUZZ_ASSERT(p->max_xmit_dsl >= 512 && p->max_xmit_dsl <= 16777215, "MaxXmitDSL %u",
                    p->max_xmit_dsl);
        FUZZ_ASSERT(p->max_recv_dsl >= 512 && p->max_recv_dsl <= 16777215, "MaxRecvDSL %u",
                    p->max_recv_dsl);
        FUZZ_ASSERT(p->max_burst >= 512 && p->max_burst <= 16777215, "MaxBurstLength %u",
                    p->max_burst);
        FUZZ_ASSERT(p->first_burst >= 512 && p->first_burst <= p->max_burst,
                    "FirstBurstLength %u > MaxBurstLength %u", p->first_burst, p->max_burst);
        FUZZ_ASSERT(p->max_outstanding_r2t >= 1 && p->max_outstanding_r2t <= 65535,
                    "MaxOutstandingR2T %u", p->max_outstanding_r2t);
        FUZZ_ASSERT(p->max_connections == 1, "MaxConnections %u", p->max_connections);
        FUZZ_ASSERT(p->erl == 0, "ErrorRecoveryLevel %u", p->erl);
        FUZZ_ASSERT(p->time2wait <= 3600 && p->time2retain <= 3600, "Time2Wait %u Time2Retain %u",
                    p->time2wait, p->time2retain);
        if (type != ISCSI_SESSION_NORMAL)
                return; /* the keys below are irrelevant to discovery */
        FUZZ_ASSERT(!p->immediate_data || limits.immediate_data,
                    "ImmediateData=Yes though the target said No");
        FUZZ_ASSERT(p->initial_r2t || !limits.initial_r2t,
                    "InitialR2T=No though the target said Yes");
        FUZZ_ASSERT(p->max_burst <= limits.max_burst, "MaxBurstLength %u above our %u",
                    p->max_burst, limits.max_burst);
        FUZZ_ASSERT(p->first_burst <= limits.first_burst, "FirstBurstLength %u above our %u",
                    p->first_burst, limits.first_burst);
        FUZZ_ASSERT(p->max_outstanding_r2t <= limits.max_outstanding_r2t,
                    "MaxOutstandingR2T %u above our %u", p->max_outstanding_r2t,
                    limits.max_outstanding_r2t);
}

static void check_reply(const struct iscsi_login *l, struct expect *ex, const uint8_t *req,
                        const struct iscsi_pdu_reply *rep)
{
        const uint8_t *h = rep->bhs;
        uint16_t status = get_be16(h + 36);
        bool t = (h[1] & 0x80) != 0, c = (h[1] & 0x40) != 0;
        FUZZ_ASSERT(h[0] == ISCSI_OP_LOGIN_RSP, "opcode 0x%02x", h[0]);
        FUZZ_ASSERT(get_be32(h + 16) == get_be32(req + 16), "ITT not echoed");
        FUZZ_ASSERT(memcmp(h + 8, req + 8, 6) == 0, "ISID not echoed");
        FUZZ_ASSERT(h[2] == 0 && h[3] == 0, "version %u/%u", h[2], h[3]);
        FUZZ_ASSERT(rep->data_len <= LOGIN_TEXT_PDU_MAX, "data_len %u", rep->data_len);
        FUZZ_ASSERT(iscsi_bhs_dsl(h) == rep->data_len, "DSL %u vs data_len %u", iscsi_bhs_dsl(h),
                    rep->data_len);
        FUZZ_ASSERT(!(t && c), "T and C both set");
        FUZZ_ASSERT(((h[1] >> 2) & 3) == ((req[1] >> 2) & 3), "CSG %u for a request in CSG %u",
                    (h[1] >> 2) & 3, (req[1] >> 2) & 3);
        if (status != ISCSI_LOGIN_SUCCESS) {
                FUZZ_ASSERT(rep->close_after, "failure %04x without close_after", status);
                FUZZ_ASSERT(l->failed && !l->complete, "failure %04x: failed %d complete %d",
                            status, l->failed, l->complete);
                FUZZ_ASSERT(rep->data_len == 0 && !t, "failure %04x with text or T", status);
                FUZZ_ASSERT((status >> 8) == 2 || (status >> 8) == 3, "status class %u",
                            status >> 8);
                return;
        }
        FUZZ_ASSERT(!rep->close_after && !l->failed, "success with close_after or failed");
        if (!ex->have_first) {
                ex->have_first = true;
                memcpy(ex->isid, req + 8, 6);
                ex->cmdsn = get_be32(req + 24);
                ex->stat_sn = get_be32(req + 28);
        }
        FUZZ_ASSERT(get_be32(h + 24) == ex->stat_sn, "StatSN %u, want %u", get_be32(h + 24),
                    ex->stat_sn);
        ex->stat_sn++;
        FUZZ_ASSERT(get_be32(h + 28) == ex->cmdsn, "ExpCmdSN %u, want %u", get_be32(h + 28),
                    ex->cmdsn);
        uint32_t window = get_be32(h + 32) - ex->cmdsn + 1;
        FUZZ_ASSERT(window >= 1 && window <= (limits.queue_depth ? limits.queue_depth : 128),
                    "MaxCmdSN %u for ExpCmdSN %u", get_be32(h + 32), ex->cmdsn);
        if (t) {
                FUZZ_ASSERT(req[1] & 0x80, "T=1 answer to a request without T");
                /* A target may stop short of the stage asked for, never go beyond it. */
                unsigned nsg = h[1] & 3, csg = (h[1] >> 2) & 3;
                FUZZ_ASSERT(nsg > csg && nsg != 2 && nsg <= (req[1] & 3u),
                            "NSG %u from CSG %u, the initiator asked %u", nsg, csg, req[1] & 3);
        }
        fuzz_text_acc_add(&ex->text, rep->data, rep->data_len);
        if (!c) {
                fuzz_check_text(ex->text.buf, ex->text.len, true);
                fuzz_text_acc_reset(&ex->text);
        }
        if (l->complete) {
                FUZZ_ASSERT(t && (h[1] & 3) == 3, "complete without T=1 NSG=3");
                FUZZ_ASSERT(get_be16(h + 14) != 0 && get_be16(h + 14) == l->tsih,
                            "TSIH %u (login has %u)", get_be16(h + 14), l->tsih);
                FUZZ_ASSERT(l->type != ISCSI_SESSION_NONE, "complete without a session type");
                FUZZ_ASSERT(l->type == ISCSI_SESSION_DISCOVERY || l->target == &tgt,
                            "normal session without its target");
                FUZZ_ASSERT(!l->auth.chap.enabled || l->auth_state == ISCSI_AUTH_DONE,
                            "complete without the CHAP it requires");
                check_params(&l->params, l->type);
        } else {
                FUZZ_ASSERT(get_be16(h + 14) == 0, "TSIH %u before the final response",
                            get_be16(h + 14));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fuzz_in in = {data, size};
        uint8_t cfg;
        if (!fuzz_take_u8(&in, &cfg))
                return 0;
        struct iscsi_login_env env;
        setup(cfg, &env);
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct expect ex = {0};
        struct chap_seen cs = {0};
        const uint8_t *bhs, *pdu_data;
        uint32_t len;
        while (fuzz_next_pdu(&in, &bhs, &pdu_data, &len)) {
                bool over = l.failed || l.complete;
                uint32_t filled_len = 0;
                uint8_t *filled = chap_fill_auto(&cs, &l, pdu_data, len, &filled_len);
                struct iscsi_pdu_reply rep;
                int rc = filled ? iscsi_login_handle(&l, bhs, filled, filled_len, &rep)
                                : iscsi_login_handle(&l, bhs, pdu_data, len, &rep);
                free(filled);
                if (over) {
                        FUZZ_ASSERT(rc == -EPROTO, "request after the end answered with %d", rc);
                        FUZZ_ASSERT(rep.data == NULL && rep.data_len == 0, "text after the end");
                        break;
                }
                FUZZ_ASSERT(rc == 0, "iscsi_login_handle returned %d", rc);
                if (fuzz_verbose())
                        fprintf(stderr,
                                "login: flags 0x%02x -> flags 0x%02x status %04x text %u%s\n",
                                bhs[1], rep.bhs[1], get_be16(rep.bhs + 36), rep.data_len,
                                l.complete ? " complete" : "");
                check_reply(&l, &ex, bhs, &rep);
                chap_note_reply(&cs, rep.data, rep.data_len);
                iscsi_pdu_reply_free(&rep);
        }
        iscsi_login_fini(&l);
        fuzz_text_acc_reset(&ex.text);
        FUZZ_ASSERT(refs_taken == refs_dropped, "target references: %d taken, %d dropped",
                    refs_taken, refs_dropped);
        return 0;
}
