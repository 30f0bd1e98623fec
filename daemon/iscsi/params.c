/*
 * The login keys (RFC 7143 13) as data, and the negotiation of the operational ones:
 * how each key's result is chosen from the initiator's value and our limits.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "login_internal.h"

/* How the outcome of a key is computed (RFC 7143 6.2). */
enum neg_rule {
        RULE_NONE,     /* not negotiated here (identity, security, target-only, SendTargets) */
        RULE_DIGEST,   /* list: first of the initiator's values we support */
        RULE_DECLARE,  /* numeric declaration, no answer */
        RULE_MIN,      /* numeric, the smaller value wins */
        RULE_MAX,      /* numeric, the larger value wins */
        RULE_OR,       /* boolean, Yes if either side says Yes */
        RULE_AND,      /* boolean, Yes only if both sides say Yes */
        RULE_MARK_INT, /* OFMarkInt/IFMarkInt: irrelevant because markers are off */
};

struct key_def {
        const char *name;
        enum iscsi_key_kind kind;
        enum neg_rule rule;
        uint32_t lo, hi; /* admissible range of numeric values */
        bool discovery_irrelevant;
};

#define RANGE_DSL 512, 16777215

static const struct key_def key_table[IK_COUNT] = {
    [IK_HEADER_DIGEST] = {"HeaderDigest", IKK_OPERATIONAL, RULE_DIGEST, 0, 0, false},
    [IK_DATA_DIGEST] = {"DataDigest", IKK_OPERATIONAL, RULE_DIGEST, 0, 0, false},
    [IK_MAX_RECV_DSL] = {"MaxRecvDataSegmentLength", IKK_OPERATIONAL, RULE_DECLARE, RANGE_DSL,
                         false},
    [IK_MAX_CONNECTIONS] = {"MaxConnections", IKK_OPERATIONAL, RULE_MIN, 1, 65535, true},
    [IK_INITIAL_R2T] = {"InitialR2T", IKK_OPERATIONAL, RULE_OR, 0, 0, true},
    [IK_IMMEDIATE_DATA] = {"ImmediateData", IKK_OPERATIONAL, RULE_AND, 0, 0, true},
    [IK_MAX_BURST] = {"MaxBurstLength", IKK_OPERATIONAL, RULE_MIN, RANGE_DSL, true},
    [IK_FIRST_BURST] = {"FirstBurstLength", IKK_OPERATIONAL, RULE_MIN, RANGE_DSL, true},
    [IK_TIME2WAIT] = {"DefaultTime2Wait", IKK_OPERATIONAL, RULE_MAX, 0, 3600, false},
    [IK_TIME2RETAIN] = {"DefaultTime2Retain", IKK_OPERATIONAL, RULE_MIN, 0, 3600, false},
    [IK_MAX_OUTSTANDING_R2T] = {"MaxOutstandingR2T", IKK_OPERATIONAL, RULE_MIN, 1, 65535, true},
    [IK_DATA_PDU_IN_ORDER] = {"DataPDUInOrder", IKK_OPERATIONAL, RULE_OR, 0, 0, true},
    [IK_DATA_SEQ_IN_ORDER] = {"DataSequenceInOrder", IKK_OPERATIONAL, RULE_OR, 0, 0, true},
    [IK_ERL] = {"ErrorRecoveryLevel", IKK_OPERATIONAL, RULE_MIN, 0, 2, false},
    [IK_OFMARKER] = {"OFMarker", IKK_OPERATIONAL, RULE_AND, 0, 0, false},
    [IK_IFMARKER] = {"IFMarker", IKK_OPERATIONAL, RULE_AND, 0, 0, false},
    [IK_OFMARKINT] = {"OFMarkInt", IKK_OPERATIONAL, RULE_MARK_INT, 0, 0, false},
    [IK_IFMARKINT] = {"IFMarkInt", IKK_OPERATIONAL, RULE_MARK_INT, 0, 0, false},
    [IK_SESSION_TYPE] = {"SessionType", IKK_IDENTITY, RULE_NONE, 0, 0, false},
    [IK_INITIATOR_NAME] = {"InitiatorName", IKK_IDENTITY, RULE_NONE, 0, 0, false},
    [IK_TARGET_NAME] = {"TargetName", IKK_IDENTITY, RULE_NONE, 0, 0, false},
    [IK_INITIATOR_ALIAS] = {"InitiatorAlias", IKK_IDENTITY, RULE_NONE, 0, 0, false},
    [IK_TARGET_ALIAS] = {"TargetAlias", IKK_TARGET_ONLY, RULE_NONE, 0, 0, false},
    [IK_TARGET_ADDRESS] = {"TargetAddress", IKK_TARGET_ONLY, RULE_NONE, 0, 0, false},
    [IK_TPGT] = {"TargetPortalGroupTag", IKK_TARGET_ONLY, RULE_NONE, 0, 0, false},
    [IK_SEND_TARGETS] = {"SendTargets", IKK_FFP_ONLY, RULE_NONE, 0, 0, false},
    [IK_AUTH_METHOD] = {"AuthMethod", IKK_SECURITY, RULE_NONE, 0, 0, false},
    [IK_CHAP_A] = {"CHAP_A", IKK_SECURITY, RULE_NONE, 0, 0, false},
    [IK_CHAP_I] = {"CHAP_I", IKK_SECURITY, RULE_NONE, 0, 0, false},
    [IK_CHAP_C] = {"CHAP_C", IKK_SECURITY, RULE_NONE, 0, 0, false},
    [IK_CHAP_N] = {"CHAP_N", IKK_SECURITY, RULE_NONE, 0, 0, false},
    [IK_CHAP_R] = {"CHAP_R", IKK_SECURITY, RULE_NONE, 0, 0, false},
};

_Static_assert(IK_COUNT <= 64, "keys_seen is a 64-bit mask");

/* RFC 7143 defaults of the values we only take from the initiator. */
#define DEFAULT_DSL         8192
#define DEFAULT_MAX_BURST   262144
#define DEFAULT_FIRST_BURST 65536
#define DEFAULT_TIME2WAIT   2
#define DEFAULT_TIME2RETAIN 20
#define MAX_DSL             16777215u
/*
 * Our DefaultTime2Wait: 0. At error recovery level 0 nothing of a lost connection is kept to
 * wait for, and the result is the larger offer (RFC 7143 13.15), so a host that asks for 0
 * reconnects at once after a failover (open-iscsi waits this long before its first try).
 */
#define OUR_TIME2WAIT 0

enum iscsi_key_id iscsi_key_lookup(const char *name)
{
        for (int i = 0; i < IK_COUNT; i++)
                if (strcmp(key_table[i].name, name) == 0) /* keys are case-sensitive */
                        return (enum iscsi_key_id)i;
        return IK_UNKNOWN;
}

const char *iscsi_key_name(enum iscsi_key_id key)
{
        return key >= 0 && key < IK_COUNT ? key_table[key].name : "?";
}

enum iscsi_key_kind iscsi_key_kind(enum iscsi_key_id key)
{
        return key_table[key].kind;
}

void iscsi_params_defaults(struct iscsi_session_params *p)
{
        memset(p, 0, sizeof(*p));
        p->max_recv_dsl = DEFAULT_DSL;
        p->max_xmit_dsl = DEFAULT_DSL;
        p->max_burst = DEFAULT_MAX_BURST;
        p->first_burst = DEFAULT_FIRST_BURST;
        p->initial_r2t = true;
        p->immediate_data = true;
        p->max_outstanding_r2t = 1;
        p->max_connections = 1;
        p->data_pdu_in_order = true;
        p->data_seq_in_order = true;
        p->time2wait = DEFAULT_TIME2WAIT;
        p->time2retain = DEFAULT_TIME2RETAIN;
        p->erl = 0;
}

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi, uint32_t if_zero)
{
        if (v == 0)
                v = if_zero;
        if (v < lo)
                return lo;
        if (v > hi)
                return hi;
        return v;
}

uint32_t iscsi_params_our_max_recv_dsl(const struct tdm_iscsi_cfg *lim)
{
        return clamp_u32(lim->max_recv_dsl, 512, MAX_DSL, DEFAULT_DSL);
}

static uint32_t our_max_burst(const struct tdm_iscsi_cfg *lim)
{
        return clamp_u32(lim->max_burst, 512, MAX_DSL, DEFAULT_MAX_BURST);
}

static uint32_t our_first_burst(const struct tdm_iscsi_cfg *lim)
{
        return clamp_u32(lim->first_burst, 512, our_max_burst(lim), DEFAULT_FIRST_BURST);
}

/* Our own value of a numeric key. */
static uint32_t our_number(const struct tdm_iscsi_cfg *lim, enum iscsi_key_id key)
{
        switch (key) {
        case IK_MAX_CONNECTIONS:
                return 1;
        case IK_MAX_BURST:
                return our_max_burst(lim);
        case IK_FIRST_BURST:
                return our_first_burst(lim);
        case IK_TIME2WAIT:
                return OUR_TIME2WAIT;
        case IK_TIME2RETAIN:
                return DEFAULT_TIME2RETAIN;
        case IK_MAX_OUTSTANDING_R2T:
                return clamp_u32(lim->max_outstanding_r2t, 1, 65535, 1);
        case IK_ERL:
                return 0; /* we implement error recovery level 0 only */
        default:
                return 0;
        }
}

/* Our own value of a boolean key. */
static bool our_bool(const struct tdm_iscsi_cfg *lim, enum iscsi_key_id key)
{
        switch (key) {
        case IK_INITIAL_R2T:
                return lim->initial_r2t;
        case IK_IMMEDIATE_DATA:
                return lim->immediate_data;
        case IK_DATA_PDU_IN_ORDER:
        case IK_DATA_SEQ_IN_ORDER:
                return true; /* we need data in order: OR makes the result Yes */
        default:
                return false; /* markers */
        }
}

static uint32_t *number_slot(struct iscsi_session_params *p, enum iscsi_key_id key)
{
        switch (key) {
        case IK_MAX_RECV_DSL:
                return &p->max_xmit_dsl; /* the initiator's receive limit is our send limit */
        case IK_MAX_CONNECTIONS:
                return &p->max_connections;
        case IK_MAX_BURST:
                return &p->max_burst;
        case IK_FIRST_BURST:
                return &p->first_burst;
        case IK_TIME2WAIT:
                return &p->time2wait;
        case IK_TIME2RETAIN:
                return &p->time2retain;
        case IK_MAX_OUTSTANDING_R2T:
                return &p->max_outstanding_r2t;
        case IK_ERL:
                return &p->erl;
        default:
                return NULL;
        }
}

static bool *bool_slot(struct iscsi_session_params *p, enum iscsi_key_id key)
{
        switch (key) {
        case IK_INITIAL_R2T:
                return &p->initial_r2t;
        case IK_IMMEDIATE_DATA:
                return &p->immediate_data;
        case IK_DATA_PDU_IN_ORDER:
                return &p->data_pdu_in_order;
        case IK_DATA_SEQ_IN_ORDER:
                return &p->data_seq_in_order;
        default:
                return NULL; /* markers: always No, nothing to store */
        }
}

/* Pick the first value of the initiator's list we support; unknown values are skipped. */
static enum iscsi_neg_outcome negotiate_digest(bool *slot, const char *list)
{
        const char *p = list;
        for (;;) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                if (n == 0)
                        return ISCSI_NEG_REJECT; /* empty element: bad syntax */
                if (n == 4 && strncmp(p, "None", 4) == 0) {
                        *slot = false;
                        return ISCSI_NEG_ANSWER;
                }
                if (n == 6 && strncmp(p, "CRC32C", 6) == 0) {
                        *slot = true;
                        return ISCSI_NEG_ANSWER;
                }
                if (!comma)
                        return ISCSI_NEG_REJECT;
                p = comma + 1;
        }
}

static enum iscsi_neg_outcome negotiate_number(struct iscsi_session_params *p,
                                               const struct tdm_iscsi_cfg *lim,
                                               enum iscsi_key_id key, const char *value)
{
        const struct key_def *d = &key_table[key];
        uint64_t v;
        bool ok = iscsi_parse_number(value, &v) == 0 && v >= d->lo && v <= d->hi;
        if (d->rule == RULE_DECLARE) {
                if (!ok)
                        return ISCSI_NEG_FAIL; /* a declaration cannot be rejected */
                *number_slot(p, key) = (uint32_t)v;
                return ISCSI_NEG_SILENT;
        }
        if (!ok)
                return ISCSI_NEG_REJECT;
        uint32_t ours = our_number(lim, key);
        uint32_t theirs = (uint32_t)v;
        uint32_t result =
            d->rule == RULE_MIN ? (theirs < ours ? theirs : ours) : (theirs > ours ? theirs : ours);
        *number_slot(p, key) = result;
        return ISCSI_NEG_ANSWER;
}

static enum iscsi_neg_outcome negotiate_bool(struct iscsi_session_params *p,
                                             const struct tdm_iscsi_cfg *lim, enum iscsi_key_id key,
                                             const char *value)
{
        bool theirs;
        if (iscsi_parse_bool(value, &theirs))
                return ISCSI_NEG_REJECT;
        bool ours = our_bool(lim, key);
        bool result = key_table[key].rule == RULE_OR ? (theirs || ours) : (theirs && ours);
        bool *slot = bool_slot(p, key);
        if (slot)
                *slot = result;
        return ISCSI_NEG_ANSWER;
}

enum iscsi_neg_outcome iscsi_params_negotiate(struct iscsi_session_params *p,
                                              const struct tdm_iscsi_cfg *lim,
                                              enum iscsi_session_type type, enum iscsi_key_id key,
                                              const char *value)
{
        if (key < 0 || key >= IK_COUNT || key_table[key].kind != IKK_OPERATIONAL)
                return ISCSI_NEG_FAIL;
        const struct key_def *d = &key_table[key];
        if (type == ISCSI_SESSION_DISCOVERY && d->discovery_irrelevant)
                return ISCSI_NEG_IRRELEVANT;
        /* "NotUnderstood" and friends are answers, never proposals. */
        if (strcmp(value, "NotUnderstood") == 0 || strcmp(value, "Irrelevant") == 0 ||
            strcmp(value, "Reject") == 0)
                return ISCSI_NEG_FAIL;
        switch (d->rule) {
        case RULE_DIGEST:
                return negotiate_digest(
                    key == IK_HEADER_DIGEST ? &p->header_digest : &p->data_digest, value);
        case RULE_DECLARE:
        case RULE_MIN:
        case RULE_MAX:
                return negotiate_number(p, lim, key, value);
        case RULE_OR:
        case RULE_AND:
                return negotiate_bool(p, lim, key, value);
        case RULE_MARK_INT:
                return ISCSI_NEG_IRRELEVANT;
        case RULE_NONE:
                break;
        }
        return ISCSI_NEG_FAIL;
}

enum iscsi_neg_outcome iscsi_params_take_answer(struct iscsi_session_params *p,
                                                const struct tdm_iscsi_cfg *lim,
                                                enum iscsi_key_id key, const char *value)
{
        /* A refused offer leaves the RFC default, which is what we could not accept. */
        if (strcmp(value, "Irrelevant") == 0)
                return ISCSI_NEG_SILENT;
        switch (key) {
        case IK_MAX_BURST:
        case IK_FIRST_BURST: {
                uint64_t v;
                uint32_t offered = our_number(lim, key);
                if (iscsi_parse_number(value, &v) || v < 512 || v > offered)
                        return ISCSI_NEG_FAIL;
                *number_slot(p, key) = (uint32_t)v;
                return ISCSI_NEG_SILENT;
        }
        case IK_IMMEDIATE_DATA: {
                bool v;
                if (iscsi_parse_bool(value, &v) || v)
                        return ISCSI_NEG_FAIL; /* AND with our No can only be No */
                p->immediate_data = false;
                return ISCSI_NEG_SILENT;
        }
        default:
                return ISCSI_NEG_FAIL;
        }
}

int iscsi_params_format(const struct iscsi_session_params *p, enum iscsi_key_id key, char *buf,
                        size_t len)
{
        const char *s = NULL;
        uint32_t n = 0;
        switch (key) {
        case IK_HEADER_DIGEST:
                s = p->header_digest ? "CRC32C" : "None";
                break;
        case IK_DATA_DIGEST:
                s = p->data_digest ? "CRC32C" : "None";
                break;
        case IK_INITIAL_R2T:
                s = p->initial_r2t ? "Yes" : "No";
                break;
        case IK_IMMEDIATE_DATA:
                s = p->immediate_data ? "Yes" : "No";
                break;
        case IK_DATA_PDU_IN_ORDER:
                s = p->data_pdu_in_order ? "Yes" : "No";
                break;
        case IK_DATA_SEQ_IN_ORDER:
                s = p->data_seq_in_order ? "Yes" : "No";
                break;
        case IK_OFMARKER:
        case IK_IFMARKER:
                s = "No";
                break;
        case IK_MAX_CONNECTIONS:
                n = p->max_connections;
                break;
        case IK_MAX_BURST:
                n = p->max_burst;
                break;
        case IK_FIRST_BURST:
                n = p->first_burst;
                break;
        case IK_TIME2WAIT:
                n = p->time2wait;
                break;
        case IK_TIME2RETAIN:
                n = p->time2retain;
                break;
        case IK_MAX_OUTSTANDING_R2T:
                n = p->max_outstanding_r2t;
                break;
        case IK_ERL:
                n = p->erl;
                break;
        default:
                return -EINVAL;
        }
        int w = s ? snprintf(buf, len, "%s", s) : snprintf(buf, len, "%u", n);
        return w < 0 || (size_t)w >= len ? -E2BIG : 0;
}

void iscsi_params_settle(struct iscsi_session_params *p)
{
        if (p->first_burst > p->max_burst)
                p->first_burst = p->max_burst;
}

bool iscsi_params_within_limits(const struct iscsi_session_params *p,
                                const struct tdm_iscsi_cfg *lim, enum iscsi_session_type type,
                                const char **why)
{
        if (type != ISCSI_SESSION_NORMAL)
                return true;
        if (p->max_burst > our_max_burst(lim)) {
                *why = "MaxBurstLength above the configured limit";
                return false;
        }
        if (p->first_burst > our_first_burst(lim)) {
                *why = "FirstBurstLength above the configured limit";
                return false;
        }
        if (p->immediate_data && !lim->immediate_data) {
                *why = "ImmediateData=Yes though the target is configured without it";
                return false;
        }
        return true;
}

uint64_t iscsi_params_offer(struct iscsi_session_params *p, const struct tdm_iscsi_cfg *lim,
                            enum iscsi_session_type type, uint64_t seen, struct iscsi_text_buf *out)
{
        if (type != ISCSI_SESSION_NORMAL)
                return 0; /* the keys below are irrelevant to discovery */
        uint64_t offered = 0;
        if (!(seen & (1ull << IK_MAX_BURST)) && p->max_burst > our_max_burst(lim)) {
                iscsi_text_buf_addf(out, "MaxBurstLength", "%u", our_max_burst(lim));
                offered |= 1ull << IK_MAX_BURST;
        }
        if (!(seen & (1ull << IK_FIRST_BURST)) && p->first_burst > our_first_burst(lim)) {
                iscsi_text_buf_addf(out, "FirstBurstLength", "%u", our_first_burst(lim));
                offered |= 1ull << IK_FIRST_BURST;
        }
        if (!(seen & (1ull << IK_IMMEDIATE_DATA)) && p->immediate_data && !lim->immediate_data) {
                iscsi_text_buf_add(out, "ImmediateData", "No");
                offered |= 1ull << IK_IMMEDIATE_DATA;
        }
        return offered;
}
