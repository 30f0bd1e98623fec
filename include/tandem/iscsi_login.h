/*
 * Login phase (RFC 7143 6, 13): security and operational negotiation, CHAP, and
 * text requests (SendTargets). The connection code feeds complete PDUs in and sends the
 * replies; these functions never touch a socket.
 */
#ifndef TANDEM_ISCSI_LOGIN_H
#define TANDEM_ISCSI_LOGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "tandem/config.h"
#include "tandem/registry.h"
#include "tandem/scsi.h"

/* Operational parameters in force after login. */
struct iscsi_session_params {
        bool header_digest;    /* CRC32C */
        bool data_digest;      /* CRC32C */
        uint32_t max_recv_dsl; /* the most the initiator may send us in one PDU (we declared it) */
        uint32_t max_xmit_dsl; /* the most we may send in one PDU (initiator's declaration) */
        uint32_t max_burst;
        uint32_t first_burst;
        bool initial_r2t;
        bool immediate_data;
        uint32_t max_outstanding_r2t;
        uint32_t max_connections;
        bool data_pdu_in_order;
        bool data_seq_in_order;
        uint32_t time2wait;
        uint32_t time2retain;
        uint32_t erl;
};

enum iscsi_session_type {
        ISCSI_SESSION_NONE = 0,
        ISCSI_SESSION_NORMAL,
        ISCSI_SESSION_DISCOVERY,
};

/* What the login code needs from the daemon. */
struct iscsi_login_env {
        const struct tdm_iscsi_cfg *limits; /* target-side declarations and limits */
        /* 0 with a referenced target, -ENOENT (no such target), -EACCES (ACL refuses). */
        int (*lookup_target)(void *arg, const char *target, const char *initiator,
                             struct scsi_target **out, struct tdm_auth *auth);
        void (*discovery_auth)(void *arg, struct tdm_auth *auth);
        /* A new nonzero TSIH for a leading login. */
        uint16_t (*alloc_tsih)(void *arg);
        /*
         * Drops a target reference that lookup_target returned (scsi_target_put). Called by
         * iscsi_login_fini when the login still holds one; NULL leaks it.
         */
        void (*put_target)(void *arg, struct scsi_target *t);
        void *arg;
        uint16_t tpgt;
        const char *peer; /* "addr:port" of the initiator, for log lines */
};

enum iscsi_login_stage {
        ISCSI_STAGE_SECURITY = 0,
        ISCSI_STAGE_OPERATIONAL = 1,
        ISCSI_STAGE_FULL_FEATURE = 3,
};

#define ISCSI_LOGIN_TEXT_MAX (64 * 1024) /* bound on accumulated login text (C bit) */

struct iscsi_login {
        const struct iscsi_login_env *env;
        int stage;     /* current stage (enum iscsi_login_stage) */
        bool complete; /* the reply just built is the final one (T=1, NSG=3, TSIH set) */
        bool failed;   /* the reply just built is a failure: close after sending it */
        /* Identity from the leading login request. */
        uint8_t isid[6];
        uint16_t tsih; /* requested (0 = new session); after success, the assigned one */
        uint16_t cid;
        uint32_t itt;
        uint32_t cmdsn; /* CmdSN of the login request = first ExpCmdSN */
        /*
         * Next StatSN to use. Starts at the ExpStatSN of the first request; every
         * success-class login response (empty continuation acknowledgements included) takes
         * one. Once complete, it is the StatSN of the first full-feature response.
         */
        uint32_t stat_sn;
        bool have_first;
        enum iscsi_session_type type;
        char initiator_name[TDM_IQN_MAX];
        char initiator_alias[256];
        char target_name[TDM_IQN_MAX];
        /*
         * Referenced (normal sessions). The session takes it by setting it to NULL;
         * iscsi_login_fini drops a reference still here through env->put_target.
         */
        struct scsi_target *target;
        struct tdm_auth auth;
        struct iscsi_session_params params;
        /* Negotiation bookkeeping (private to login.c). */
        uint64_t keys_seen; /* bit per known key: duplicate detection */
        int auth_state;
        int chap_alg; /* 5 = MD5, 7 = SHA-256 */
        uint8_t chap_id;
        uint8_t chap_challenge[64];
        uint32_t chap_challenge_len;
        char *pending_text; /* accumulated request text while C=1 */
        uint32_t pending_len;
        char *reply_text; /* response text not yet sent (target-side continuation) */
        uint32_t reply_len, reply_off;
        bool declared_sent; /* target-declared keys already sent */
        /* More private bookkeeping (login.c, params.c, chap.c). */
        uint64_t keys_offered; /* operational keys we proposed, awaiting the initiator's answer */
        uint32_t pdu_count;    /* login requests seen (bounds a login that never ends) */
        uint8_t version_max, version_min;
        bool identity_done; /* names, session type, target and auth settings known */
        bool tpgt_sent;     /* TargetPortalGroupTag (and TargetAlias) returned */
};

struct iscsi_pdu_reply {
        uint8_t bhs[48];
        uint8_t *data; /* heap; free with iscsi_pdu_reply_free */
        uint32_t data_len;
        bool close_after; /* close the connection after sending */
};

void iscsi_login_init(struct iscsi_login *l, const struct iscsi_login_env *env);
/* Releases what the login holds (target reference unless taken, buffers). */
void iscsi_login_fini(struct iscsi_login *l);
/*
 * Handle one Login Request PDU (data: the data segment without padding). Returns 0 with a
 * Login Response in rep to send as built (StatSN, ExpCmdSN, MaxCmdSN filled in; no
 * digests); a failure status sets close_after (and l->failed). Returns -EPROTO, with
 * nothing to send, when called again after complete or failed: drop the connection.
 */
int iscsi_login_handle(struct iscsi_login *l, const uint8_t *bhs, const uint8_t *data, uint32_t len,
                       struct iscsi_pdu_reply *rep);
void iscsi_pdu_reply_free(struct iscsi_pdu_reply *rep);
/*
 * Turns the login's last request (req) into a failure after all: rep becomes a Login Response
 * with status and no text, close_after set, the login failed. For refusals decided outside
 * the login code (session limits); the caller logs why. rep must be empty (freed) on entry.
 */
void iscsi_login_refuse(struct iscsi_login *l, const uint8_t *req, uint16_t status,
                        struct iscsi_pdu_reply *rep);

/*
 * Text Request in full feature phase: SendTargets; login keys are answered Reject (no
 * renegotiation), unknown keys NotUnderstood.
 */
struct iscsi_text_env {
        enum iscsi_session_type type;
        /*
         * Target enumeration for SendTargets (tdm_registry_for_each_visible in the daemon;
         * routed through here so the text code links without the registry). NULL lists nothing.
         */
        void (*for_each_visible)(const char *initiator, const char *only,
                                 void (*cb)(void *arg, const char *iqn, uint16_t tpgt), void *arg);
        const char *initiator_name;
        const char *target_name; /* normal sessions: the session's target */
        const char *portal;      /* "ADDR:PORT" the connection arrived on ("[v6]:port" for v6) */
        uint16_t tpgt;
        uint32_t max_xmit_dsl;
        uint32_t stat_sn, exp_cmdsn, max_cmdsn;
};
struct iscsi_text_state {
        char *reply_text; /* continuation of a long SendTargets reply (TTT != 0xffffffff) */
        uint32_t reply_len, reply_off;
        uint32_t ttt; /* TTT of the exchange in progress (meaningful while reply_active) */
        /* Private (text_request.c). */
        char *req_text; /* initiator text accumulated while it sends C=1 */
        uint32_t req_len;
        bool req_active;   /* an initiator continuation is being collected */
        bool reply_active; /* an exchange is open: the next request must carry ttt */
        uint32_t next_ttt;
};
/*
 * Returns 0 with a Text Response in rep (StatSN/ExpCmdSN/MaxCmdSN from env; the caller may
 * overwrite them and advances StatSN), -EPROTO for a protocol error the caller answers with
 * a Reject (F and C both set, unknown TTT, malformed or oversized text, repeated key),
 * -EINVAL (not a Text Request) or -ENOMEM.
 */
int iscsi_text_handle(struct iscsi_text_state *ts, const struct iscsi_text_env *env,
                      const uint8_t *bhs, const uint8_t *data, uint32_t len,
                      struct iscsi_pdu_reply *rep);
void iscsi_text_state_fini(struct iscsi_text_state *ts);

#endif
