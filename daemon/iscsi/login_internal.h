/*
 * Internals of the login phase shared by login.c, params.c, chap.c, text.c and
 * text_request.c (and their unit tests). Not for the rest of the daemon.
 */
#ifndef TANDEM_ISCSI_LOGIN_INTERNAL_H
#define TANDEM_ISCSI_LOGIN_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/iscsi_login.h"

/* ---- text.c: key=value<NUL> codec (RFC 7143 6.1) ---- */

#define ISCSI_KEY_NAME_MAX    63   /* bytes of a key name */
#define ISCSI_VALUE_MAX       255  /* bytes of a simple value */
#define ISCSI_LARGE_VALUE_MAX 8192 /* bytes of an encoded large binary value (CHAP_C, CHAP_R) */
#define ISCSI_TEXT_PAIRS_MAX  512  /* pairs in one request */
#define ISCSI_LOGIN_PDU_TEXT  8192 /* data we put in one login response PDU */

struct iscsi_kv {
        const char *key;
        const char *value;
};

struct iscsi_kv_list {
        struct iscsi_kv *kv;
        uint32_t n;
        char *buf; /* private copy the pointers point into */
};

/*
 * Split len bytes of "key=value\0..." into pairs. Trailing NUL padding is tolerated.
 * Returns 0, -EINVAL (malformed: no '=', empty or bad key name, missing final NUL,
 * value too long), -E2BIG (more than max_total bytes or ISCSI_TEXT_PAIRS_MAX pairs),
 * -ENOMEM.
 */
int iscsi_text_parse(const void *data, uint32_t len, uint32_t max_total, struct iscsi_kv_list *out);
void iscsi_kv_list_free(struct iscsi_kv_list *l);
/* Index of the first pair named key at or after from, or -1. */
int iscsi_kv_find(const struct iscsi_kv_list *l, const char *key, uint32_t from);

/* Key names: letters, digits and . - + @ _ # (RFC 7143 6.1), 1..63 bytes. */
bool iscsi_key_name_valid(const char *key, size_t len);
/* Longest value a key may carry (ISCSI_LARGE_VALUE_MAX for CHAP_C/CHAP_R). */
size_t iscsi_key_value_max(const char *key);
/* Numbers: decimal or 0x hex, no sign, no spaces; 0 or -EINVAL / -ERANGE. */
int iscsi_parse_number(const char *s, uint64_t *out);
/* Booleans: exactly "Yes" or "No"; 0 or -EINVAL. */
int iscsi_parse_bool(const char *s, bool *out);

/* Growing response text bounded by max bytes. */
struct iscsi_text_buf {
        char *data;
        uint32_t len, cap, max;
        int err; /* first error (-E2BIG, -ENOMEM): later adds are ignored */
};

void iscsi_text_buf_init(struct iscsi_text_buf *b, uint32_t max);
int iscsi_text_buf_add(struct iscsi_text_buf *b, const char *key, const char *value);
int iscsi_text_buf_addf(struct iscsi_text_buf *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void iscsi_text_buf_free(struct iscsi_text_buf *b);

/* ---- params.c: the key table and operational negotiation (RFC 7143 13) ---- */

enum iscsi_key_id {
        IK_HEADER_DIGEST,
        IK_DATA_DIGEST,
        IK_MAX_RECV_DSL,
        IK_MAX_CONNECTIONS,
        IK_INITIAL_R2T,
        IK_IMMEDIATE_DATA,
        IK_MAX_BURST,
        IK_FIRST_BURST,
        IK_TIME2WAIT,
        IK_TIME2RETAIN,
        IK_MAX_OUTSTANDING_R2T,
        IK_DATA_PDU_IN_ORDER,
        IK_DATA_SEQ_IN_ORDER,
        IK_ERL,
        IK_OFMARKER,
        IK_IFMARKER,
        IK_OFMARKINT,
        IK_IFMARKINT,
        IK_SESSION_TYPE,
        IK_INITIATOR_NAME,
        IK_TARGET_NAME,
        IK_INITIATOR_ALIAS,
        IK_TARGET_ALIAS,
        IK_TARGET_ADDRESS,
        IK_TPGT,
        IK_SEND_TARGETS,
        IK_AUTH_METHOD,
        IK_CHAP_A,
        IK_CHAP_I,
        IK_CHAP_C,
        IK_CHAP_N,
        IK_CHAP_R,
        IK_COUNT,
        IK_UNKNOWN = -1,
};

enum iscsi_key_kind {
        IKK_OPERATIONAL, /* negotiated in the operational stage */
        IKK_IDENTITY,    /* names and session type: declared by the initiator */
        IKK_TARGET_ONLY, /* only a target may send it */
        IKK_SECURITY,    /* AuthMethod and CHAP_*: security stage only */
        IKK_FFP_ONLY,    /* SendTargets */
};

enum iscsi_key_id iscsi_key_lookup(const char *name);
const char *iscsi_key_name(enum iscsi_key_id key);
enum iscsi_key_kind iscsi_key_kind(enum iscsi_key_id key);

/* What to answer to one operational key. */
enum iscsi_neg_outcome {
        ISCSI_NEG_ANSWER,     /* answer with the value iscsi_params_format gives */
        ISCSI_NEG_SILENT,     /* declarative: no answer */
        ISCSI_NEG_REJECT,     /* answer key=Reject, the value stays as it was */
        ISCSI_NEG_IRRELEVANT, /* answer key=Irrelevant */
        ISCSI_NEG_FAIL,       /* the login fails: initiator error */
};

/* RFC 7143 defaults (and 8192 both ways for the data segment lengths). */
void iscsi_params_defaults(struct iscsi_session_params *p);
/* Our side of one key the initiator proposed or declared. */
enum iscsi_neg_outcome iscsi_params_negotiate(struct iscsi_session_params *p,
                                              const struct tdm_iscsi_cfg *lim,
                                              enum iscsi_session_type type, enum iscsi_key_id key,
                                              const char *value);
/*
 * Whether the negotiated values respect the target's configured limits (normal sessions).
 * A login never reaches full feature phase with values we cannot honour.
 */
bool iscsi_params_within_limits(const struct iscsi_session_params *p,
                                const struct tdm_iscsi_cfg *lim, enum iscsi_session_type type,
                                const char **why);

/* The initiator's answer to a key we offered (iscsi_params_offer). */
enum iscsi_neg_outcome iscsi_params_take_answer(struct iscsi_session_params *p,
                                                const struct tdm_iscsi_cfg *lim,
                                                enum iscsi_key_id key, const char *value);
/* The negotiated value of key as answer text. */
int iscsi_params_format(const struct iscsi_session_params *p, enum iscsi_key_id key, char *buf,
                        size_t len);
/* Cross-key rules after a request (FirstBurstLength <= MaxBurstLength). */
void iscsi_params_settle(struct iscsi_session_params *p);
/*
 * Keys whose RFC default our limits cannot accept and that the initiator has not
 * negotiated (bits of seen): appends our offers to out, returns their bits.
 */
uint64_t iscsi_params_offer(struct iscsi_session_params *p, const struct tdm_iscsi_cfg *lim,
                            enum iscsi_session_type type, uint64_t seen,
                            struct iscsi_text_buf *out);
/* What we declare as MaxRecvDataSegmentLength (limits clamped to the RFC range). */
uint32_t iscsi_params_our_max_recv_dsl(const struct tdm_iscsi_cfg *lim);

/* ---- chap.c: AuthMethod and CHAP (RFC 7143 12.1.3, RFC 1994) ---- */

#define ISCSI_CHAP_MD5        5
#define ISCSI_CHAP_SHA1       6
#define ISCSI_CHAP_SHA256     7
#define ISCSI_CHAP_SHA3_256   8
#define ISCSI_CHAP_DIGEST_MAX 32
#define ISCSI_CHAP_BINARY_MAX 1024 /* longest challenge/response we decode */

enum iscsi_auth_state {
        ISCSI_AUTH_START = 0, /* nothing chosen yet */
        ISCSI_AUTH_WAIT_CHAP_A,
        ISCSI_AUTH_WAIT_CHAP_R,
        ISCSI_AUTH_DONE,
};

/* The security keys of one request (NULL when absent). */
struct iscsi_auth_keys {
        const char *auth_method;
        const char *chap_a;
        const char *chap_i;
        const char *chap_c;
        const char *chap_n;
        const char *chap_r;
};

/*
 * One security-stage step: appends our answers to rsp and advances l->auth_state.
 * Returns ISCSI_LOGIN_SUCCESS or the failure status (authentication failure, ...) with
 * *why saying what went wrong.
 */
uint16_t iscsi_auth_step(struct iscsi_login *l, const struct iscsi_auth_keys *k,
                         struct iscsi_text_buf *rsp, const char **why);

/* Digest length of a CHAP algorithm, or 0 when we do not support it. */
unsigned iscsi_chap_digest_len(int alg);
/* The first algorithm of a CHAP_A list that we support, or -1. */
int iscsi_chap_select_alg(const char *list);
/* H(id || secret || challenge) into out (iscsi_chap_digest_len bytes); 0 or -errno. */
int iscsi_chap_compute(int alg, uint8_t id, const char *secret, const uint8_t *challenge,
                       size_t challenge_len, uint8_t *out);
/* Decode a 0x (hex) or 0b (base64) binary value; 0, -EINVAL or -E2BIG. */
int iscsi_chap_decode(const char *value, uint8_t *out, size_t cap, size_t *out_len);
/* "0x" + lowercase hex into out (2 * len + 3 bytes); 0 or -E2BIG. */
int iscsi_chap_encode_hex(const uint8_t *in, size_t len, char *out, size_t cap);

/* ---- text_request.c: SendTargets formatting (exposed for tests) ---- */

/* Syntax of an iSCSI name as SendTargets accepts it: iqn./eui./naa. forms. */
bool iscsi_text_name_plausible(const char *name);

#endif
