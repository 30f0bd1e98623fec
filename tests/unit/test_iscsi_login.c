/* Login phase: real Login Request PDUs in, Login Response BHS fields and keys checked. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tandem/iscsi_login.h"
#include "tandem/iscsi_pdu.h"

#define T_BIT  0x80
#define C_BIT  0x40
#define CSG(x) ((x) << 2)
#define NSG(x) (x)

#define TARGET    "iqn.2024-01.test:disk1"
#define INITIATOR "iqn.2024-01.test:host1"
#define ITT       0x11223344u
#define CMDSN     1000u
#define EXPSTATSN 77u
#define CID       5

static const uint8_t isid[6] = {0x80, 0x12, 0x34, 0x56, 0x78, 0x9a};

/* ---- fake daemon side ---- */

static struct scsi_target tgt;
static struct tdm_auth tgt_auth;
static int lookups, released;
static uint16_t next_tsih;
static struct tdm_iscsi_cfg limits;
static struct iscsi_login_env env;

static int fake_lookup(void *arg, const char *target, const char *initiator,
                       struct scsi_target **out, struct tdm_auth *auth)
{
        (void)arg;
        lookups++;
        if (strcmp(target, "iqn.2024-01.test:broken") == 0)
                return -EIO;
        if (strcmp(target, TARGET) != 0)
                return -ENOENT;
        if (strcmp(initiator, "iqn.2024-01.test:stranger") == 0)
                return -EACCES;
        *out = &tgt;
        *auth = tgt_auth;
        return 0;
}

static void fake_put(void *arg, struct scsi_target *t)
{
        (void)arg;
        ck_assert_ptr_eq(t, &tgt);
        released++;
}

static uint16_t fake_tsih(void *arg)
{
        (void)arg;
        return next_tsih;
}

static void setup(void)
{
        memset(&tgt, 0, sizeof(tgt));
        snprintf(tgt.iqn, sizeof(tgt.iqn), "%s", TARGET);
        snprintf(tgt.alias, sizeof(tgt.alias), "disk one");
        memset(&tgt_auth, 0, sizeof(tgt_auth));
        lookups = released = 0;
        next_tsih = 0x0102;
        limits = (struct tdm_iscsi_cfg){
            .max_recv_dsl = 262144,
            .max_burst = 1048576,
            .first_burst = 65536,
            .initial_r2t = false,
            .immediate_data = true,
            .max_outstanding_r2t = 4,
            .queue_depth = 64,
        };
        env = (struct iscsi_login_env){
            .limits = &limits,
            .lookup_target = fake_lookup,
            .alloc_tsih = fake_tsih,
            .put_target = fake_put,
            .tpgt = 7,
            .peer = "127.0.0.1:5555",
        };
}

/* ---- PDU building and response reading ---- */

struct pdu {
        uint8_t bhs[48];
        char data[80000];
        uint32_t len;
};

static void pdu_init(struct pdu *p, uint8_t flags)
{
        memset(p->bhs, 0, sizeof(p->bhs));
        p->bhs[0] = 0x40 | ISCSI_OP_LOGIN_REQ;
        p->bhs[1] = flags;
        p->bhs[2] = 0; /* Version-max */
        p->bhs[3] = 0; /* Version-min */
        memcpy(p->bhs + 8, isid, 6);
        put_be32(p->bhs + 16, ITT);
        put_be16(p->bhs + 20, CID);
        put_be32(p->bhs + 24, CMDSN);
        put_be32(p->bhs + 28, EXPSTATSN);
        p->len = 0;
}

static void pdu_key(struct pdu *p, const char *kv)
{
        size_t n = strlen(kv) + 1;
        ck_assert_uint_le(p->len + n, sizeof(p->data));
        memcpy(p->data + p->len, kv, n);
        p->len += (uint32_t)n;
}

static void pdu_identity(struct pdu *p)
{
        pdu_key(p, "InitiatorName=" INITIATOR);
        pdu_key(p, "TargetName=" TARGET);
        pdu_key(p, "SessionType=Normal");
}

/* The operational keys libiscsi sends. */
static void pdu_operational(struct pdu *p)
{
        pdu_key(p, "HeaderDigest=None,CRC32C");
        pdu_key(p, "DataDigest=None");
        pdu_key(p, "InitialR2T=No");
        pdu_key(p, "ImmediateData=Yes");
        pdu_key(p, "MaxBurstLength=262144");
        pdu_key(p, "FirstBurstLength=262144");
        pdu_key(p, "DefaultTime2Wait=2");
        pdu_key(p, "DefaultTime2Retain=0");
        pdu_key(p, "MaxOutstandingR2T=1");
        pdu_key(p, "ErrorRecoveryLevel=0");
        pdu_key(p, "IFMarker=No");
        pdu_key(p, "OFMarker=No");
        pdu_key(p, "MaxConnections=1");
        pdu_key(p, "MaxRecvDataSegmentLength=65536");
        pdu_key(p, "DataPDUInOrder=Yes");
        pdu_key(p, "DataSequenceInOrder=Yes");
}

/* Value of key in a response text, NULL when absent; fails on a repeated key. */
static const char *rsp_get(const struct iscsi_pdu_reply *rep, const char *key)
{
        const char *found = NULL;
        size_t kl = strlen(key);
        uint32_t off = 0;
        while (off < rep->data_len) {
                const char *s = (const char *)rep->data + off;
                size_t n = strnlen(s, rep->data_len - off);
                ck_assert_uint_lt(off + n, rep->data_len); /* NUL-terminated */
                if (n > kl && strncmp(s, key, kl) == 0 && s[kl] == '=') {
                        ck_assert_msg(found == NULL, "key %s answered twice", key);
                        found = s + kl + 1;
                }
                off += (uint32_t)n + 1;
        }
        return found;
}

static void assert_key(const struct iscsi_pdu_reply *rep, const char *key, const char *value)
{
        const char *v = rsp_get(rep, key);
        ck_assert_msg(v != NULL, "response lacks %s", key);
        ck_assert_str_eq(v, value);
}

static uint16_t rsp_status(const struct iscsi_pdu_reply *rep)
{
        return get_be16(rep->bhs + 36);
}

static int send_pdu(struct iscsi_login *l, struct pdu *p, struct iscsi_pdu_reply *rep)
{
        return iscsi_login_handle(l, p->bhs, p->len ? (const uint8_t *)p->data : NULL, p->len, rep);
}

/* Expect a failure with this status; the connection closes. */
static void expect_fail(struct iscsi_login *l, struct pdu *p, uint16_t status)
{
        struct iscsi_pdu_reply rep;
        ck_assert_int_eq(send_pdu(l, p, &rep), 0);
        ck_assert_uint_eq(rep.bhs[0], ISCSI_OP_LOGIN_RSP);
        ck_assert_msg(rsp_status(&rep) == status, "status %04x, want %04x", rsp_status(&rep),
                      status);
        ck_assert(rep.close_after);
        ck_assert(l->failed);
        ck_assert(!l->complete);
        ck_assert_uint_eq(rep.bhs[1] & T_BIT, 0);
        ck_assert_uint_eq(get_be32(rep.bhs + 16), ITT);
        ck_assert_mem_eq(rep.bhs + 8, isid, 6);
        ck_assert_uint_eq(rep.data_len, 0);
        iscsi_pdu_reply_free(&rep);
        /* Nothing more is accepted on this connection. */
        ck_assert_int_eq(send_pdu(l, p, &rep), -EPROTO);
}

/* Expect success; returns the reply for more checks (free it). */
static void expect_ok(struct iscsi_login *l, struct pdu *p, struct iscsi_pdu_reply *rep)
{
        ck_assert_int_eq(send_pdu(l, p, rep), 0);
        ck_assert_msg(rsp_status(rep) == 0, "status %04x", rsp_status(rep));
        ck_assert(!rep->close_after);
        ck_assert_uint_eq(rep->bhs[0], ISCSI_OP_LOGIN_RSP);
        ck_assert_uint_eq(rep->bhs[2], 0);
        ck_assert_uint_eq(rep->bhs[3], 0);
        ck_assert_uint_eq(iscsi_bhs_dsl(rep->bhs), rep->data_len);
        ck_assert_mem_eq(rep->bhs + 8, isid, 6);
        ck_assert_uint_eq(get_be32(rep->bhs + 16), ITT);
        ck_assert_uint_eq(get_be32(rep->bhs + 28), CMDSN);          /* ExpCmdSN */
        ck_assert_uint_eq(get_be32(rep->bhs + 32), CMDSN + 64 - 1); /* MaxCmdSN */
}

/* ---- tests ---- */

START_TEST(test_single_pdu_operational_login)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_operational(&p);
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(1) | NSG(3));
        ck_assert_uint_eq(get_be16(rep.bhs + 14), 0x0102);
        ck_assert_uint_eq(get_be32(rep.bhs + 24), EXPSTATSN); /* first StatSN */
        assert_key(&rep, "TargetPortalGroupTag", "7");
        assert_key(&rep, "TargetAlias", "disk one");
        assert_key(&rep, "MaxRecvDataSegmentLength", "262144");
        assert_key(&rep, "HeaderDigest", "None");
        assert_key(&rep, "DataDigest", "None");
        assert_key(&rep, "InitialR2T", "No");
        assert_key(&rep, "ImmediateData", "Yes");
        assert_key(&rep, "MaxBurstLength", "262144");
        assert_key(&rep, "FirstBurstLength", "65536");
        assert_key(&rep, "DefaultTime2Wait", "2");
        assert_key(&rep, "DefaultTime2Retain", "0");
        assert_key(&rep, "MaxOutstandingR2T", "1");
        assert_key(&rep, "ErrorRecoveryLevel", "0");
        assert_key(&rep, "IFMarker", "No");
        assert_key(&rep, "OFMarker", "No");
        assert_key(&rep, "MaxConnections", "1");
        assert_key(&rep, "DataPDUInOrder", "Yes");
        assert_key(&rep, "DataSequenceInOrder", "Yes");
        ck_assert_ptr_null(rsp_get(&rep, "InitiatorName"));
        ck_assert(l.complete);
        ck_assert(!l.failed);
        ck_assert_uint_eq(l.tsih, 0x0102);
        ck_assert_uint_eq(l.stat_sn, EXPSTATSN + 1);
        ck_assert_uint_eq(l.cmdsn, CMDSN);
        ck_assert_uint_eq(l.cid, CID);
        ck_assert_int_eq(l.type, ISCSI_SESSION_NORMAL);
        ck_assert_str_eq(l.initiator_name, INITIATOR);
        ck_assert_str_eq(l.target_name, TARGET);
        ck_assert_ptr_eq(l.target, &tgt);
        ck_assert_uint_eq(l.params.max_recv_dsl, 262144);
        ck_assert_uint_eq(l.params.max_xmit_dsl, 65536);
        ck_assert_uint_eq(l.params.first_burst, 65536);
        ck_assert(!l.params.initial_r2t);
        ck_assert(l.params.immediate_data);
        ck_assert(!l.params.header_digest);
        iscsi_pdu_reply_free(&rep);
        /* The session takes the target reference; fini must not drop it again. */
        l.target = NULL;
        ck_assert_int_eq(send_pdu(&l, &p, &rep), -EPROTO);
        iscsi_login_fini(&l);
        ck_assert_int_eq(released, 0);
}
END_TEST

START_TEST(test_security_then_operational)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_identity(&p);
        pdu_key(&p, "AuthMethod=CHAP,None");
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(1));
        ck_assert_uint_eq(get_be16(rep.bhs + 14), 0); /* no TSIH before the final response */
        ck_assert_uint_eq(get_be32(rep.bhs + 24), EXPSTATSN);
        assert_key(&rep, "AuthMethod", "None");
        assert_key(&rep, "TargetPortalGroupTag", "7");
        ck_assert_ptr_null(rsp_get(&rep, "MaxRecvDataSegmentLength"));
        ck_assert(!l.complete);
        iscsi_pdu_reply_free(&rep);

        /* libiscsi repeats the names after AuthMethod=None: same values are fine. */
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        put_be32(p.bhs + 28, EXPSTATSN + 1);
        pdu_identity(&p);
        pdu_operational(&p);
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(1) | NSG(3));
        ck_assert_uint_eq(get_be32(rep.bhs + 24), EXPSTATSN + 1);
        ck_assert_uint_eq(get_be16(rep.bhs + 14), 0x0102);
        ck_assert_ptr_null(rsp_get(&rep, "TargetPortalGroupTag")); /* sent once */
        assert_key(&rep, "MaxRecvDataSegmentLength", "262144");
        ck_assert(l.complete);
        ck_assert_uint_eq(l.stat_sn, EXPSTATSN + 2);
        ck_assert_int_eq(lookups, 1);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l); /* still holds the target: dropped once */
        ck_assert_int_eq(released, 1);
}
END_TEST

START_TEST(test_security_straight_to_ffp)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(0) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "AuthMethod=None");
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(3));
        ck_assert(l.complete);
        /* Never declared: both directions keep the RFC default. */
        ck_assert_uint_eq(l.params.max_recv_dsl, 8192);
        ck_assert_uint_eq(l.params.max_xmit_dsl, 8192);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_discovery_session)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=" INITIATOR);
        pdu_key(&p, "SessionType=Discovery");
        pdu_operational(&p);
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert(l.complete);
        ck_assert_int_eq(l.type, ISCSI_SESSION_DISCOVERY);
        ck_assert_int_eq(lookups, 0);
        ck_assert_ptr_null(l.target);
        ck_assert_ptr_null(rsp_get(&rep, "TargetPortalGroupTag"));
        assert_key(&rep, "MaxConnections", "Irrelevant");
        assert_key(&rep, "InitialR2T", "Irrelevant");
        assert_key(&rep, "ImmediateData", "Irrelevant");
        assert_key(&rep, "MaxBurstLength", "Irrelevant");
        assert_key(&rep, "FirstBurstLength", "Irrelevant");
        assert_key(&rep, "MaxOutstandingR2T", "Irrelevant");
        assert_key(&rep, "DataPDUInOrder", "Irrelevant");
        assert_key(&rep, "DataSequenceInOrder", "Irrelevant");
        assert_key(&rep, "HeaderDigest", "None");
        assert_key(&rep, "ErrorRecoveryLevel", "0");
        assert_key(&rep, "MaxRecvDataSegmentLength", "262144");
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
        ck_assert_int_eq(released, 0);
}
END_TEST

START_TEST(test_missing_initiator_name)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "TargetName=" TARGET);
        expect_fail(&l, &p, ISCSI_LOGIN_MISSING_PARAMETER);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_missing_target_name)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=" INITIATOR);
        expect_fail(&l, &p, ISCSI_LOGIN_MISSING_PARAMETER);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_empty_and_long_names)
{
        struct iscsi_login l;
        struct pdu p;
        iscsi_login_init(&l, &env);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=");
        pdu_key(&p, "TargetName=" TARGET);
        expect_fail(&l, &p, ISCSI_LOGIN_MISSING_PARAMETER);
        iscsi_login_fini(&l);

        iscsi_login_init(&l, &env);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=" INITIATOR);
        char kv[300] = "TargetName=iqn.2024-01.test:";
        memset(kv + strlen(kv), 'x', 230);
        pdu_key(&p, kv);
        expect_fail(&l, &p, ISCSI_LOGIN_NOT_FOUND);
        iscsi_login_fini(&l);
        ck_assert_int_eq(lookups, 0);
}
END_TEST

START_TEST(test_target_not_found)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=" INITIATOR);
        pdu_key(&p, "TargetName=iqn.2024-01.test:nothere");
        expect_fail(&l, &p, ISCSI_LOGIN_NOT_FOUND);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_not_authorized)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=iqn.2024-01.test:stranger");
        pdu_key(&p, "TargetName=" TARGET);
        expect_fail(&l, &p, ISCSI_LOGIN_NOT_AUTHORIZED);
        iscsi_login_fini(&l);
        ck_assert_int_eq(released, 0);
}
END_TEST

START_TEST(test_lookup_error_is_target_error)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=" INITIATOR);
        pdu_key(&p, "TargetName=iqn.2024-01.test:broken");
        expect_fail(&l, &p, ISCSI_LOGIN_TARGET_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_unsupported_version)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        p.bhs[2] = 2;
        p.bhs[3] = 1; /* Version-min 1: we only speak 0 */
        pdu_identity(&p);
        expect_fail(&l, &p, ISCSI_LOGIN_UNSUPPORTED_VERSION);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_version_range_including_zero)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        p.bhs[2] = 5; /* Version-max 5, Version-min 0: 0 is common */
        pdu_identity(&p);
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert(l.complete);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_nonzero_tsih)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        put_be16(p.bhs + 14, 0x0042);
        pdu_identity(&p);
        expect_fail(&l, &p, ISCSI_LOGIN_SESSION_DOES_NOT_EXIST);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_bad_session_type)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=" INITIATOR);
        pdu_key(&p, "SessionType=Special");
        expect_fail(&l, &p, ISCSI_LOGIN_SESSION_TYPE_UNSUPPORTED);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_not_a_login_pdu)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        p.bhs[0] = 0x40 | ISCSI_OP_TEXT_REQ;
        expect_fail(&l, &p, ISCSI_LOGIN_INVALID_DURING_LOGIN);
        iscsi_login_fini(&l);
}
END_TEST

/* Each bad flag combination on a first request fails with initiator error. */
static const uint8_t bad_flags[] = {
    T_BIT | C_BIT | CSG(1) | NSG(3), /* T and C */
    CSG(2) | NSG(0),                 /* reserved stage */
    T_BIT | CSG(3) | NSG(3),         /* login cannot start in FFP */
    T_BIT | CSG(1) | NSG(1),         /* no progress */
    T_BIT | CSG(1) | NSG(0),         /* backwards */
    T_BIT | CSG(0) | NSG(2),         /* reserved next stage */
};

START_TEST(test_bad_stage_flags)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, bad_flags[_i]);
        pdu_identity(&p);
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_stage_mismatch_later)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, CSG(0)); /* T=0: stays in security */
        pdu_identity(&p);
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], CSG(0));
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3)); /* claims operational without a transition */
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_isid_change_later)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, CSG(1));
        pdu_identity(&p);
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        p.bhs[13] ^= 1;
        struct iscsi_pdu_reply rep2;
        ck_assert_int_eq(send_pdu(&l, &p, &rep2), 0);
        ck_assert_uint_eq(rsp_status(&rep2), ISCSI_LOGIN_INITIATOR_ERROR);
        ck_assert(rep2.close_after);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_operational_key_in_security_stage)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_identity(&p);
        pdu_key(&p, "AuthMethod=None");
        pdu_key(&p, "MaxBurstLength=65536");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
        ck_assert_int_eq(released, 1); /* the looked-up target is released */
}
END_TEST

START_TEST(test_security_key_in_operational_stage)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "AuthMethod=None");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_target_only_key_from_initiator)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "TargetPortalGroupTag=1");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_duplicate_key_in_request)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "MaxBurstLength=65536");
        pdu_key(&p, "MaxBurstLength=65536");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_duplicate_unknown_key_in_request)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "X-vendor.Thing=1");
        pdu_key(&p, "X-vendor.Thing=2");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_renegotiation_in_later_request)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, CSG(1));
        pdu_identity(&p);
        pdu_key(&p, "MaxBurstLength=65536");
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        assert_key(&rep, "MaxBurstLength", "65536");
        ck_assert_uint_eq(rep.bhs[1], CSG(1)); /* T=0 asked, T=0 answered */
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "MaxBurstLength=32768");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_name_change_in_later_request)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, CSG(1));
        pdu_identity(&p);
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "InitiatorName=iqn.2024-01.test:other");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_unknown_keys_and_rejects)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "X-com.example.Feature=Yes");
        pdu_key(&p, "FancyNewKey=3");
        pdu_key(&p, "SendTargets=All");
        pdu_key(&p, "MaxBurstLength=100");  /* below 512: Reject */
        pdu_key(&p, "InitialR2T=Maybe");    /* not a boolean: Reject */
        pdu_key(&p, "HeaderDigest=MD5");    /* nothing we support: Reject */
        pdu_key(&p, "OFMarkInt=2048~8192"); /* markers are off */
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        assert_key(&rep, "X-com.example.Feature", "NotUnderstood");
        assert_key(&rep, "FancyNewKey", "NotUnderstood");
        assert_key(&rep, "SendTargets", "Irrelevant");
        assert_key(&rep, "MaxBurstLength", "Reject");
        assert_key(&rep, "InitialR2T", "Reject");
        assert_key(&rep, "HeaderDigest", "Reject");
        assert_key(&rep, "OFMarkInt", "Irrelevant");
        ck_assert(l.complete);
        /* Rejected keys keep their defaults. */
        ck_assert_uint_eq(l.params.max_burst, 262144);
        ck_assert(l.params.initial_r2t);
        ck_assert(!l.params.header_digest);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_answers_keep_request_order)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "MaxConnections=4");
        pdu_key(&p, "X-first=1");
        pdu_key(&p, "ErrorRecoveryLevel=2");
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        const char *a = (const char *)memmem(rep.data, rep.data_len, "MaxConnections=1", 16);
        const char *b = (const char *)memmem(rep.data, rep.data_len, "X-first=NotUnderstood", 21);
        const char *c = (const char *)memmem(rep.data, rep.data_len, "ErrorRecoveryLevel=0", 20);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_nonnull(c);
        ck_assert(a < b && b < c);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_declaration_out_of_range)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "MaxRecvDataSegmentLength=16777216");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_answer_value_as_proposal)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "MaxBurstLength=NotUnderstood");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_malformed_text)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        memcpy(p.data + p.len, "NoEquals", 8); /* and no final NUL */
        p.len += 8;
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_long_key_name)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        char kv[100];
        memset(kv, 'K', 64);
        strcpy(kv + 64, "=1");
        pdu_key(&p, kv);
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

/* The text of one request split over three PDUs, cut inside a key and a value. */
START_TEST(test_continuation)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu whole;
        pdu_init(&whole, 0);
        pdu_identity(&whole);
        pdu_operational(&whole);
        uint32_t cut1 = 10, cut2 = whole.len - 5;
        struct iscsi_pdu_reply rep;
        struct pdu p;

        pdu_init(&p, C_BIT | CSG(1) | NSG(3));
        memcpy(p.data, whole.data, cut1);
        p.len = cut1;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], CSG(1)); /* neither T nor C */
        ck_assert_uint_eq(rep.data_len, 0);
        ck_assert_uint_eq(get_be32(rep.bhs + 24), EXPSTATSN);
        iscsi_pdu_reply_free(&rep);

        pdu_init(&p, C_BIT | CSG(1) | NSG(3));
        memcpy(p.data, whole.data + cut1, cut2 - cut1);
        p.len = cut2 - cut1;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.data_len, 0);
        ck_assert_uint_eq(get_be32(rep.bhs + 24), EXPSTATSN + 1);
        iscsi_pdu_reply_free(&rep);
        ck_assert(!l.complete);

        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        memcpy(p.data, whole.data + cut2, whole.len - cut2);
        p.len = whole.len - cut2;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(1) | NSG(3));
        ck_assert_uint_eq(get_be32(rep.bhs + 24), EXPSTATSN + 2);
        assert_key(&rep, "DataSequenceInOrder", "Yes");
        ck_assert(l.complete);
        ck_assert_str_eq(l.initiator_name, INITIATOR);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_oversize_text)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        /* 9 PDUs of 8000 bytes = 72000 > ISCSI_LOGIN_TEXT_MAX. */
        for (int i = 0; i < 9; i++) {
                pdu_init(&p, C_BIT | CSG(1) | NSG(3));
                memset(p.data, 'a', 8000);
                p.len = 8000;
                if (i < 8) {
                        expect_ok(&l, &p, &rep);
                        iscsi_pdu_reply_free(&rep);
                } else {
                        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
                }
        }
        iscsi_login_fini(&l);
}
END_TEST

/* Hundreds of NotUnderstood answers exceed one PDU: the target continues with C=1. */
START_TEST(test_target_continuation)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        for (int i = 0; i < 400; i++) {
                char kv[64];
                snprintf(kv, sizeof(kv), "X-example.unknown.key.%03d=1", i);
                pdu_key(&p, kv);
        }
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], C_BIT | CSG(1));
        ck_assert_uint_eq(rep.data_len, 8192);
        char *all = malloc(40000);
        memcpy(all, rep.data, rep.data_len);
        uint32_t total = rep.data_len;
        iscsi_pdu_reply_free(&rep);
        ck_assert(!l.complete);

        /* Text while the target continues is an error; an empty acknowledgement is not. */
        for (;;) {
                pdu_init(&p, CSG(1));
                expect_ok(&l, &p, &rep);
                memcpy(all + total, rep.data, rep.data_len);
                total += rep.data_len;
                bool more = rep.bhs[1] & C_BIT;
                ck_assert_uint_eq(rep.bhs[1] & T_BIT, 0);
                iscsi_pdu_reply_free(&rep);
                if (!more)
                        break;
        }
        ck_assert_ptr_nonnull(memmem(all, total, "X-example.unknown.key.000=NotUnderstood", 39));
        ck_assert_ptr_nonnull(memmem(all, total, "X-example.unknown.key.399=NotUnderstood", 39));
        ck_assert_ptr_nonnull(memmem(all, total, "TargetPortalGroupTag=7", 22));
        free(all);
        /* Now the initiator asks again to transit, with nothing new. */
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(1) | NSG(3));
        ck_assert(l.complete);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_text_during_target_continuation)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        for (int i = 0; i < 400; i++) {
                char kv[64];
                snprintf(kv, sizeof(kv), "X-example.unknown.key.%03d=1", i);
                pdu_key(&p, kv);
        }
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1] & C_BIT, C_BIT);
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, CSG(1));
        pdu_key(&p, "MaxBurstLength=65536");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_too_many_pdus)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        struct iscsi_pdu_reply rep;
        pdu_init(&p, CSG(1));
        pdu_identity(&p);
        expect_ok(&l, &p, &rep);
        iscsi_pdu_reply_free(&rep);
        for (int i = 1; i < 128; i++) {
                pdu_init(&p, CSG(1));
                expect_ok(&l, &p, &rep);
                iscsi_pdu_reply_free(&rep);
        }
        pdu_init(&p, CSG(1));
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

/* Our limits refuse a default the initiator left alone: we offer, then transit. */
START_TEST(test_target_offers_keys)
{
        limits.immediate_data = false;
        limits.max_burst = 131072;
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "MaxRecvDataSegmentLength=65536");
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], CSG(1)); /* no transit while offers are open */
        assert_key(&rep, "ImmediateData", "No");
        assert_key(&rep, "MaxBurstLength", "131072");
        ck_assert_ptr_null(rsp_get(&rep, "FirstBurstLength")); /* default 65536 is fine */
        iscsi_pdu_reply_free(&rep);

        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "ImmediateData=No");
        pdu_key(&p, "MaxBurstLength=131072");
        expect_ok(&l, &p, &rep);
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(1) | NSG(3));
        ck_assert_uint_eq(rep.data_len, 0); /* answers are not answered */
        ck_assert(l.complete);
        ck_assert(!l.params.immediate_data);
        ck_assert_uint_eq(l.params.max_burst, 131072);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_bad_answer_to_offer)
{
        limits.immediate_data = false;
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        assert_key(&rep, "ImmediateData", "No");
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_key(&p, "ImmediateData=Yes"); /* AND with our No cannot be Yes */
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_no_tsih)
{
        next_tsih = 0;
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        expect_fail(&l, &p, ISCSI_LOGIN_OUT_OF_RESOURCES);
        iscsi_login_fini(&l);
        ck_assert_int_eq(released, 1);
}
END_TEST

START_TEST(test_chap_required_skipped)
{
        tgt_auth.chap.enabled = true;
        snprintf(tgt_auth.chap.user, sizeof(tgt_auth.chap.user), "user");
        snprintf(tgt_auth.chap.secret, sizeof(tgt_auth.chap.secret), "secretsecret");
        struct iscsi_login l;
        struct pdu p;

        /* Straight to the operational stage. */
        iscsi_login_init(&l, &env);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        expect_fail(&l, &p, ISCSI_LOGIN_AUTH_FAILED);
        iscsi_login_fini(&l);

        /* Security stage, but only None offered. */
        iscsi_login_init(&l, &env);
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_identity(&p);
        pdu_key(&p, "AuthMethod=None");
        expect_fail(&l, &p, ISCSI_LOGIN_AUTH_FAILED);
        iscsi_login_fini(&l);

        /* Security stage, transit without any AuthMethod. */
        iscsi_login_init(&l, &env);
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_identity(&p);
        expect_fail(&l, &p, ISCSI_LOGIN_AUTH_FAILED);
        iscsi_login_fini(&l);
        ck_assert_int_eq(released, 3);
}
END_TEST

START_TEST(test_no_auth_configured_chap_only_offered)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(0) | NSG(1));
        pdu_identity(&p);
        pdu_key(&p, "AuthMethod=CHAP");
        expect_fail(&l, &p, ISCSI_LOGIN_AUTH_FAILED);
        iscsi_login_fini(&l);
}
END_TEST

START_TEST(test_statsn_wraps)
{
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, CSG(1));
        put_be32(p.bhs + 28, 0xffffffffu);
        put_be32(p.bhs + 24, 0xfffffff0u);
        pdu_identity(&p);
        struct iscsi_pdu_reply rep;
        ck_assert_int_eq(send_pdu(&l, &p, &rep), 0);
        ck_assert_uint_eq(get_be32(rep.bhs + 24), 0xffffffffu);
        ck_assert_uint_eq(get_be32(rep.bhs + 28), 0xfffffff0u);
        ck_assert_uint_eq(get_be32(rep.bhs + 32), 0xfffffff0u + 63u); /* wraps to 0x2f */
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        put_be32(p.bhs + 24, 0xfffffff0u);
        ck_assert_int_eq(send_pdu(&l, &p, &rep), 0);
        ck_assert_uint_eq(get_be32(rep.bhs + 24), 0);
        ck_assert(l.complete);
        ck_assert_uint_eq(l.stat_sn, 1);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

/* Found by fuzz_login: a security-stage login straight to FFP must not skip our limits. */
START_TEST(test_security_to_ffp_with_limits_goes_operational)
{
        limits.immediate_data = false;
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(0) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "AuthMethod=None");
        struct iscsi_pdu_reply rep;
        expect_ok(&l, &p, &rep);
        /* The lower next stage: operational negotiation, where ImmediateData=No is made. */
        ck_assert_uint_eq(rep.bhs[1], T_BIT | CSG(0) | NSG(1));
        ck_assert(!l.complete);
        iscsi_pdu_reply_free(&rep);
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_operational(&p);
        expect_ok(&l, &p, &rep);
        assert_key(&rep, "ImmediateData", "No");
        ck_assert(l.complete);
        ck_assert(!l.params.immediate_data);
        iscsi_pdu_reply_free(&rep);
        iscsi_login_fini(&l);
}
END_TEST

/* Found by fuzz_login: a rejected value leaves a default above our limit: no session. */
START_TEST(test_rejected_key_default_above_limit_fails)
{
        limits.max_burst = 4096;
        limits.first_burst = 1024;
        struct iscsi_login l;
        iscsi_login_init(&l, &env);
        struct pdu p;
        pdu_init(&p, T_BIT | CSG(1) | NSG(3));
        pdu_identity(&p);
        pdu_key(&p, "MaxBurstLength=26x144");
        pdu_key(&p, "FirstBurstLength=512");
        expect_fail(&l, &p, ISCSI_LOGIN_INITIATOR_ERROR);
        iscsi_login_fini(&l);
}
END_TEST

static Suite *login_suite(void)
{
        Suite *s = suite_create("iscsi_login");
        TCase *tc = tcase_create("flows");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_single_pdu_operational_login);
        tcase_add_test(tc, test_security_then_operational);
        tcase_add_test(tc, test_security_straight_to_ffp);
        tcase_add_test(tc, test_discovery_session);
        tcase_add_test(tc, test_continuation);
        tcase_add_test(tc, test_target_continuation);
        tcase_add_test(tc, test_target_offers_keys);
        tcase_add_test(tc, test_version_range_including_zero);
        tcase_add_test(tc, test_statsn_wraps);
        tcase_add_test(tc, test_answers_keep_request_order);
        tcase_add_test(tc, test_unknown_keys_and_rejects);
        suite_add_tcase(s, tc);

        tc = tcase_create("failures");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_missing_initiator_name);
        tcase_add_test(tc, test_missing_target_name);
        tcase_add_test(tc, test_empty_and_long_names);
        tcase_add_test(tc, test_target_not_found);
        tcase_add_test(tc, test_not_authorized);
        tcase_add_test(tc, test_lookup_error_is_target_error);
        tcase_add_test(tc, test_unsupported_version);
        tcase_add_test(tc, test_nonzero_tsih);
        tcase_add_test(tc, test_bad_session_type);
        tcase_add_test(tc, test_not_a_login_pdu);
        tcase_add_loop_test(tc, test_bad_stage_flags, 0, sizeof(bad_flags));
        tcase_add_test(tc, test_stage_mismatch_later);
        tcase_add_test(tc, test_isid_change_later);
        tcase_add_test(tc, test_operational_key_in_security_stage);
        tcase_add_test(tc, test_security_key_in_operational_stage);
        tcase_add_test(tc, test_target_only_key_from_initiator);
        tcase_add_test(tc, test_duplicate_key_in_request);
        tcase_add_test(tc, test_duplicate_unknown_key_in_request);
        tcase_add_test(tc, test_renegotiation_in_later_request);
        tcase_add_test(tc, test_name_change_in_later_request);
        tcase_add_test(tc, test_declaration_out_of_range);
        tcase_add_test(tc, test_answer_value_as_proposal);
        tcase_add_test(tc, test_malformed_text);
        tcase_add_test(tc, test_long_key_name);
        tcase_add_test(tc, test_oversize_text);
        tcase_add_test(tc, test_text_during_target_continuation);
        tcase_add_test(tc, test_too_many_pdus);
        tcase_add_test(tc, test_bad_answer_to_offer);
        tcase_add_test(tc, test_no_tsih);
        tcase_add_test(tc, test_chap_required_skipped);
        tcase_add_test(tc, test_no_auth_configured_chap_only_offered);
        tcase_add_test(tc, test_security_to_ffp_with_limits_goes_operational);
        tcase_add_test(tc, test_rejected_key_default_above_limit_fails);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(login_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
