/*
 * The login phase (RFC 7143 6, 11.12, 11.13): one Login Request in, one Login Response
 * out. Stages: security (CSG 0), operational (1), full feature (3). This file owns the
 * stage machine, the header fields and the identity keys; params.c negotiates the
 * operational keys and chap.c the security ones.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "login_internal.h"
#include "tandem/iscsi_hdr.h"
#include "tandem/iscsi_pdu.h"
#include "tandem/log.h"

#define LOGIN_FLAG_T   0x80
#define LOGIN_FLAG_C   0x40
#define LOGIN_MAX_PDUS 128 /* a login taking more requests than this is going nowhere */
#define DEFAULT_WINDOW 128 /* CmdSN window when the limits give none (as session.c) */
#define ISCSI_VERSION  0x00

/* The fields of one Login Request we act on. */
struct login_req {
        const uint8_t *bhs;
        bool transit;
        bool cont;
        int csg, nsg;
};

/* One answer of a response, formatted after the whole request is processed. */
struct answer {
        const char *key;
        enum iscsi_key_id id; /* IK_UNKNOWN with fixed */
        const char *fixed;    /* NotUnderstood, Reject, Irrelevant; NULL = negotiated value */
};

static const char *peer(const struct iscsi_login *l)
{
        return l->env && l->env->peer ? l->env->peer : "?";
}

static const char *initiator(const struct iscsi_login *l)
{
        return l->initiator_name[0] ? l->initiator_name : "?";
}

void iscsi_login_init(struct iscsi_login *l, const struct iscsi_login_env *env)
{
        memset(l, 0, sizeof(*l));
        l->env = env;
        l->stage = ISCSI_STAGE_SECURITY;
        iscsi_params_defaults(&l->params);
}

void iscsi_login_fini(struct iscsi_login *l)
{
        if (l->target && l->env && l->env->put_target)
                l->env->put_target(l->env->arg, l->target);
        l->target = NULL;
        free(l->pending_text);
        free(l->reply_text);
        l->pending_text = NULL;
        l->reply_text = NULL;
        l->pending_len = l->reply_len = l->reply_off = 0;
}

void iscsi_pdu_reply_free(struct iscsi_pdu_reply *rep)
{
        free(rep->data);
        rep->data = NULL;
        rep->data_len = 0;
}

static uint32_t cmd_window(const struct iscsi_login *l)
{
        uint32_t qd = l->env && l->env->limits ? l->env->limits->queue_depth : 0;
        return qd ? qd : DEFAULT_WINDOW;
}

static void fill_response(const struct iscsi_login *l, const uint8_t *req, uint8_t flags,
                          uint16_t tsih, uint16_t status, uint32_t dsl, uint8_t *bhs)
{
        const struct iscsi_login_req_hdr *q = (const struct iscsi_login_req_hdr *)req;
        struct iscsi_login_rsp_hdr *h = (struct iscsi_login_rsp_hdr *)bhs;
        memset(h, 0, sizeof(*h));
        h->opcode = ISCSI_OP_LOGIN_RSP;
        h->flags = flags;
        h->version_max = ISCSI_VERSION;
        h->version_active = ISCSI_VERSION;
        h->dsl = be24_of(dsl);
        memcpy(h->isid, q->isid, sizeof(h->isid));
        h->tsih = be16_of(tsih);
        h->itt = q->itt;
        h->sn.stat_sn = be32_of(l->stat_sn);
        h->sn.exp_cmdsn = be32_of(l->cmdsn);
        h->sn.max_cmdsn = be32_of(l->cmdsn + cmd_window(l) - 1);
        h->status_class = (uint8_t)(status >> 8);
        h->status_detail = (uint8_t)status;
}

/* A failure response: no text, and the connection closes after it. */
static int login_fail(struct iscsi_login *l, const uint8_t *req, uint16_t status, const char *why,
                      struct iscsi_pdu_reply *rep)
{
        log_warn("%s: login of %s failed with status %02x/%02x: %s", peer(l), initiator(l),
                 status >> 8, status & 0xff, why);
        const struct iscsi_login_req_hdr *q = (const struct iscsi_login_req_hdr *)req;
        fill_response(l, req, (uint8_t)(q->flags & 0x0c), be16_get(q->tsih), status, 0, rep->bhs);
        rep->close_after = true;
        l->failed = true;
        return 0;
}

void iscsi_login_refuse(struct iscsi_login *l, const uint8_t *req, uint16_t status,
                        struct iscsi_pdu_reply *rep)
{
        const struct iscsi_login_req_hdr *q = (const struct iscsi_login_req_hdr *)req;
        memset(rep, 0, sizeof(*rep));
        fill_response(l, req, (uint8_t)(q->flags & 0x0c), be16_get(q->tsih), status, 0, rep->bhs);
        rep->close_after = true;
        l->failed = true;
        l->complete = false;
}

/* A success-class response; every one of them takes a StatSN. */
static void login_respond(struct iscsi_login *l, const struct login_req *rq, uint8_t flags,
                          uint16_t tsih, uint8_t *data, uint32_t len, struct iscsi_pdu_reply *rep)
{
        fill_response(l, rq->bhs, flags, tsih, ISCSI_LOGIN_SUCCESS, len, rep->bhs);
        rep->data = data;
        rep->data_len = len;
        l->stat_sn++;
}

/* Header checks of a Login Request; returns a failure status or success. */
static uint16_t check_header(struct iscsi_login *l, const struct login_req *rq, const char **why)
{
        const struct iscsi_login_req_hdr *q = (const struct iscsi_login_req_hdr *)rq->bhs;
        if (iscsi_bhs_opcode(rq->bhs) != ISCSI_OP_LOGIN_REQ) {
                *why = "not a Login Request";
                return ISCSI_LOGIN_INVALID_DURING_LOGIN;
        }
        if (!l->have_first) {
                memcpy(l->isid, q->isid, sizeof(l->isid));
                l->tsih = be16_get(q->tsih);
                l->itt = be32_get(q->itt);
                l->cid = be16_get(q->cid);
                l->cmdsn = be32_get(q->cmdsn);
                /* Starting StatSN: what the initiator expects, as it is free for us to pick. */
                l->stat_sn = be32_get(q->exp_stat_sn);
                l->version_max = q->version_max;
                l->version_min = q->version_min;
                l->have_first = true;
                if (l->version_min > ISCSI_VERSION || l->version_max < l->version_min) {
                        *why = "no common protocol version";
                        return ISCSI_LOGIN_UNSUPPORTED_VERSION;
                }
                if (l->tsih != 0) {
                        /* MaxConnections=1: there is never a session to add a connection to. */
                        *why = "connection for an existing session (TSIH != 0)";
                        return ISCSI_LOGIN_SESSION_DOES_NOT_EXIST;
                }
        } else if (memcmp(l->isid, q->isid, sizeof(l->isid)) != 0 || l->tsih != be16_get(q->tsih) ||
                   l->cid != be16_get(q->cid) || l->version_max != q->version_max ||
                   l->version_min != q->version_min) {
                *why = "ISID, TSIH, CID or version changed during login";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        if (rq->transit && rq->cont) {
                *why = "T and C both set";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        if (rq->csg != ISCSI_STAGE_SECURITY && rq->csg != ISCSI_STAGE_OPERATIONAL) {
                *why = "invalid current stage";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        /* The first request may skip the security stage. */
        if (l->pdu_count == 1)
                l->stage = rq->csg;
        if (rq->csg != l->stage) {
                *why = "current stage differs from the negotiated one";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        if (rq->transit && (rq->nsg <= rq->csg || rq->nsg == 2)) {
                *why = "invalid stage transition";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        return ISCSI_LOGIN_SUCCESS;
}

static uint16_t take_name(char *dst, size_t cap, const char *value, bool known, uint16_t too_long,
                          const char **why)
{
        if (known) {
                if (strcmp(dst, value) != 0) {
                        *why = "name changed during login";
                        return ISCSI_LOGIN_INITIATOR_ERROR;
                }
                return ISCSI_LOGIN_SUCCESS;
        }
        size_t n = strlen(value);
        if (n == 0) {
                *why = "empty name";
                return ISCSI_LOGIN_MISSING_PARAMETER;
        }
        if (n >= cap) {
                *why = "name too long";
                return too_long;
        }
        memcpy(dst, value, n + 1);
        return ISCSI_LOGIN_SUCCESS;
}

static uint16_t take_session_type(struct iscsi_login *l, const char *value, const char **why)
{
        enum iscsi_session_type t;
        if (strcmp(value, "Normal") == 0) {
                t = ISCSI_SESSION_NORMAL;
        } else if (strcmp(value, "Discovery") == 0) {
                t = ISCSI_SESSION_DISCOVERY;
        } else {
                *why = "unsupported SessionType";
                return ISCSI_LOGIN_SESSION_TYPE_UNSUPPORTED;
        }
        if (l->identity_done && t != l->type) {
                *why = "SessionType changed during login";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        l->type = t;
        return ISCSI_LOGIN_SUCCESS;
}

/*
 * InitiatorName, TargetName, SessionType, InitiatorAlias. They belong in the first
 * request; an initiator that repeats them later (libiscsi after AuthMethod=None) must
 * repeat the same values.
 */
static uint16_t take_identity(struct iscsi_login *l, const struct iscsi_kv_list *kv,
                              const char **why)
{
        bool known = l->identity_done;
        for (uint32_t i = 0; i < kv->n; i++) {
                const char *v = kv->kv[i].value;
                uint16_t st = ISCSI_LOGIN_SUCCESS;
                switch (iscsi_key_lookup(kv->kv[i].key)) {
                case IK_INITIATOR_NAME:
                        st = take_name(l->initiator_name, sizeof(l->initiator_name), v, known,
                                       ISCSI_LOGIN_INITIATOR_ERROR, why);
                        break;
                case IK_TARGET_NAME:
                        st = take_name(l->target_name, sizeof(l->target_name), v,
                                       known && l->target_name[0], ISCSI_LOGIN_NOT_FOUND, why);
                        break;
                case IK_SESSION_TYPE:
                        st = take_session_type(l, v, why);
                        break;
                case IK_INITIATOR_ALIAS:
                        if (!known)
                                snprintf(l->initiator_alias, sizeof(l->initiator_alias), "%s", v);
                        break;
                default:
                        break;
                }
                if (st != ISCSI_LOGIN_SUCCESS)
                        return st;
        }
        return ISCSI_LOGIN_SUCCESS;
}

/* After the first request: who is logging in to what, and which credentials apply. */
static uint16_t resolve_target(struct iscsi_login *l, const char **why)
{
        const struct iscsi_login_env *env = l->env;
        if (!l->initiator_name[0]) {
                *why = "InitiatorName missing";
                return ISCSI_LOGIN_MISSING_PARAMETER;
        }
        if (l->type == ISCSI_SESSION_NONE)
                l->type = ISCSI_SESSION_NORMAL;
        memset(&l->auth, 0, sizeof(l->auth));
        if (l->type == ISCSI_SESSION_DISCOVERY) {
                /* A discovery session has no target: a TargetName, if sent, is ignored. */
                if (env->discovery_auth)
                        env->discovery_auth(env->arg, &l->auth);
                return ISCSI_LOGIN_SUCCESS;
        }
        if (!l->target_name[0]) {
                *why = "TargetName missing";
                return ISCSI_LOGIN_MISSING_PARAMETER;
        }
        if (!env->lookup_target) {
                *why = "no target lookup";
                return ISCSI_LOGIN_TARGET_ERROR;
        }
        int rc =
            env->lookup_target(env->arg, l->target_name, l->initiator_name, &l->target, &l->auth);
        switch (rc) {
        case 0:
                return ISCSI_LOGIN_SUCCESS;
        case -ENOENT:
                *why = "no such target";
                return ISCSI_LOGIN_NOT_FOUND;
        case -EACCES:
                *why = "initiator not allowed by the target's ACL";
                return ISCSI_LOGIN_NOT_AUTHORIZED;
        case -EAGAIN:
        case -EBUSY:
                *why = "target temporarily unavailable";
                return ISCSI_LOGIN_SERVICE_UNAVAILABLE;
        default:
                *why = "target lookup failed";
                return ISCSI_LOGIN_TARGET_ERROR;
        }
}

static void record_security_key(struct iscsi_auth_keys *ak, enum iscsi_key_id id, const char *value)
{
        switch (id) {
        case IK_AUTH_METHOD:
                ak->auth_method = value;
                break;
        case IK_CHAP_A:
                ak->chap_a = value;
                break;
        case IK_CHAP_I:
                ak->chap_i = value;
                break;
        case IK_CHAP_C:
                ak->chap_c = value;
                break;
        case IK_CHAP_N:
                ak->chap_n = value;
                break;
        case IK_CHAP_R:
                ak->chap_r = value;
                break;
        default:
                break;
        }
}

/* One operational key: negotiate it, or take it as the answer to our offer. */
static uint16_t operational_key(struct iscsi_login *l, enum iscsi_key_id id, const char *key,
                                const char *value, struct answer *ans, uint32_t *n_ans,
                                const char **why)
{
        uint64_t bit = 1ull << id;
        const struct tdm_iscsi_cfg *lim = l->env->limits;
        if (l->keys_offered & bit) {
                l->keys_offered &= ~bit;
                l->keys_seen |= bit;
                if (iscsi_params_take_answer(&l->params, lim, id, value) == ISCSI_NEG_FAIL) {
                        *why = "unacceptable answer to a key we offered";
                        return ISCSI_LOGIN_INITIATOR_ERROR;
                }
                return ISCSI_LOGIN_SUCCESS;
        }
        if (l->keys_seen & bit) {
                *why = "key negotiated twice";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        l->keys_seen |= bit;
        const char *fixed = NULL;
        switch (iscsi_params_negotiate(&l->params, lim, l->type, id, value)) {
        case ISCSI_NEG_ANSWER:
                break;
        case ISCSI_NEG_SILENT:
                return ISCSI_LOGIN_SUCCESS;
        case ISCSI_NEG_REJECT:
                fixed = "Reject";
                log_info("%s: %s: rejected %s=%s", peer(l), initiator(l), key, value);
                break;
        case ISCSI_NEG_IRRELEVANT:
                fixed = "Irrelevant";
                break;
        case ISCSI_NEG_FAIL:
        default:
                *why = "invalid operational key value";
                return ISCSI_LOGIN_INITIATOR_ERROR;
        }
        ans[(*n_ans)++] = (struct answer){key, fixed ? IK_UNKNOWN : id, fixed};
        return ISCSI_LOGIN_SUCCESS;
}

/* Walk the request's keys in order, collecting answers and the security keys. */
static uint16_t walk_keys(struct iscsi_login *l, const struct iscsi_kv_list *kv,
                          struct iscsi_auth_keys *ak, struct answer *ans, uint32_t *n_ans,
                          const char **why)
{
        for (uint32_t i = 0; i < kv->n; i++) {
                const char *key = kv->kv[i].key, *value = kv->kv[i].value;
                if (iscsi_kv_find(kv, key, i + 1) >= 0) {
                        *why = "key repeated in one request";
                        return ISCSI_LOGIN_INITIATOR_ERROR;
                }
                enum iscsi_key_id id = iscsi_key_lookup(key);
                if (id == IK_UNKNOWN) { /* X- extensions included */
                        ans[(*n_ans)++] = (struct answer){key, IK_UNKNOWN, "NotUnderstood"};
                        continue;
                }
                uint16_t st = ISCSI_LOGIN_SUCCESS;
                switch (iscsi_key_kind(id)) {
                case IKK_IDENTITY:
                        break; /* taken by take_identity */
                case IKK_TARGET_ONLY:
                        *why = "initiator sent a key only a target may send";
                        return ISCSI_LOGIN_INITIATOR_ERROR;
                case IKK_FFP_ONLY:
                        ans[(*n_ans)++] = (struct answer){key, IK_UNKNOWN, "Irrelevant"};
                        break;
                case IKK_SECURITY:
                        if (l->stage != ISCSI_STAGE_SECURITY) {
                                *why = "security key outside the security stage";
                                return ISCSI_LOGIN_INITIATOR_ERROR;
                        }
                        if (l->keys_seen & (1ull << id)) {
                                *why = "security key repeated";
                                return ISCSI_LOGIN_INITIATOR_ERROR;
                        }
                        l->keys_seen |= 1ull << id;
                        record_security_key(ak, id, value);
                        break;
                case IKK_OPERATIONAL:
                        if (l->stage != ISCSI_STAGE_OPERATIONAL) {
                                *why = "operational key outside the operational stage";
                                return ISCSI_LOGIN_INITIATOR_ERROR;
                        }
                        st = operational_key(l, id, key, value, ans, n_ans, why);
                        break;
                }
                if (st != ISCSI_LOGIN_SUCCESS)
                        return st;
        }
        return ISCSI_LOGIN_SUCCESS;
}

static void emit_answers(const struct iscsi_login *l, const struct answer *ans, uint32_t n,
                         struct iscsi_text_buf *rsp)
{
        for (uint32_t i = 0; i < n; i++) {
                char value[32];
                if (ans[i].fixed) {
                        iscsi_text_buf_add(rsp, ans[i].key, ans[i].fixed);
                } else if (iscsi_params_format(&l->params, ans[i].id, value, sizeof(value)) == 0) {
                        iscsi_text_buf_add(rsp, ans[i].key, value);
                }
        }
}

/* What the target declares without being asked, once. */
static void emit_declarations(struct iscsi_login *l, struct iscsi_text_buf *rsp)
{
        /* RFC 7143 13.9: TPGT goes in the response to the first request naming a target. */
        if (!l->tpgt_sent && l->type == ISCSI_SESSION_NORMAL) {
                if (l->target && l->target->alias[0])
                        iscsi_text_buf_add(rsp, "TargetAlias", l->target->alias);
                /* The same tag SendTargets reports for this target (text_request.c). */
                uint16_t tpgt = l->target && l->target->tpgt ? l->target->tpgt : l->env->tpgt;
                iscsi_text_buf_addf(rsp, "TargetPortalGroupTag", "%u", tpgt);
                l->tpgt_sent = true;
        }
        if (!l->declared_sent && l->stage == ISCSI_STAGE_OPERATIONAL) {
                uint32_t ours = iscsi_params_our_max_recv_dsl(l->env->limits);
                iscsi_text_buf_addf(rsp, "MaxRecvDataSegmentLength", "%u", ours);
                l->params.max_recv_dsl = ours;
                l->declared_sent = true;
        }
}

/* Whether the response may carry T=1; may add offers that postpone it. */
static uint16_t decide_transit(struct iscsi_login *l, const struct login_req *rq,
                               struct iscsi_text_buf *rsp, bool *transit, const char **why)
{
        *transit = false;
        if (!rq->transit)
                return ISCSI_LOGIN_SUCCESS;
        if (l->auth_state == ISCSI_AUTH_START) {
                /* Leaving the security stage without choosing a method means AuthMethod=None. */
                if (l->auth.chap.enabled) {
                        *why = "CHAP required but the initiator skipped authentication";
                        return ISCSI_LOGIN_AUTH_FAILED;
                }
                l->auth_state = ISCSI_AUTH_DONE;
        }
        if (l->auth_state != ISCSI_AUTH_DONE || l->keys_offered)
                return ISCSI_LOGIN_SUCCESS;
        if (l->stage == ISCSI_STAGE_OPERATIONAL) {
                uint64_t offers =
                    iscsi_params_offer(&l->params, l->env->limits, l->type, l->keys_seen, rsp);
                if (offers) {
                        l->keys_offered |= offers;
                        return ISCSI_LOGIN_SUCCESS;
                }
        }
        *transit = true;
        return ISCSI_LOGIN_SUCCESS;
}

/* The whole text of a request is here: negotiate and build the response text. */
static uint16_t process_request(struct iscsi_login *l, const struct login_req *rq,
                                const struct iscsi_kv_list *kv, struct iscsi_text_buf *rsp,
                                bool *transit, const char **why)
{
        uint16_t st = take_identity(l, kv, why);
        if (st == ISCSI_LOGIN_SUCCESS && !l->identity_done) {
                st = resolve_target(l, why);
                l->identity_done = true;
        }
        if (st != ISCSI_LOGIN_SUCCESS)
                return st;
        if (l->stage == ISCSI_STAGE_OPERATIONAL && l->auth_state != ISCSI_AUTH_DONE) {
                if (l->auth.chap.enabled) {
                        *why = "CHAP required but the login started in the operational stage";
                        return ISCSI_LOGIN_AUTH_FAILED;
                }
                l->auth_state = ISCSI_AUTH_DONE;
        }
        struct iscsi_auth_keys ak = {0};
        struct answer *ans = calloc(kv->n ? kv->n : 1, sizeof(*ans));
        if (!ans)
                return ISCSI_LOGIN_OUT_OF_RESOURCES;
        uint32_t n_ans = 0;
        st = walk_keys(l, kv, &ak, ans, &n_ans, why);
        if (st == ISCSI_LOGIN_SUCCESS) {
                iscsi_params_settle(&l->params);
                emit_answers(l, ans, n_ans, rsp);
        }
        free(ans);
        if (st != ISCSI_LOGIN_SUCCESS)
                return st;
        if (l->stage == ISCSI_STAGE_SECURITY) {
                st = iscsi_auth_step(l, &ak, rsp, why);
                if (st != ISCSI_LOGIN_SUCCESS)
                        return st;
        }
        emit_declarations(l, rsp);
        st = decide_transit(l, rq, rsp, transit, why);
        if (st == ISCSI_LOGIN_SUCCESS && rsp->err) {
                *why = rsp->err == -ENOMEM ? "out of memory" : "response text too long";
                return ISCSI_LOGIN_OUT_OF_RESOURCES;
        }
        return st;
}

/* Next piece of a response longer than one PDU (C=1 until the last). */
static int send_reply_chunk(struct iscsi_login *l, const struct login_req *rq,
                            struct iscsi_pdu_reply *rep)
{
        uint32_t left = l->reply_len - l->reply_off;
        uint32_t n = left < ISCSI_LOGIN_PDU_TEXT ? left : ISCSI_LOGIN_PDU_TEXT;
        uint8_t *data = malloc(n ? n : 1);
        if (!data)
                return login_fail(l, rq->bhs, ISCSI_LOGIN_OUT_OF_RESOURCES, "out of memory", rep);
        memcpy(data, l->reply_text + l->reply_off, n);
        l->reply_off += n;
        bool more = l->reply_off < l->reply_len;
        if (!more) {
                free(l->reply_text);
                l->reply_text = NULL;
                l->reply_len = l->reply_off = 0;
        }
        /* Never T=1 here: the initiator's acknowledgement of a continuation has T=0. */
        uint8_t flags = (uint8_t)((more ? LOGIN_FLAG_C : 0) | (l->stage << 2));
        login_respond(l, rq, flags, 0, data, n, rep);
        return 0;
}

/* Collect the request's text; false when more PDUs (C=1) are to come. */
static int accumulate(struct iscsi_login *l, const uint8_t *data, uint32_t len)
{
        if (len == 0)
                return 0;
        if (l->pending_len + (uint64_t)len > ISCSI_LOGIN_TEXT_MAX)
                return -E2BIG;
        char *p = realloc(l->pending_text, l->pending_len + len);
        if (!p)
                return -ENOMEM;
        memcpy(p + l->pending_len, data, len);
        l->pending_text = p;
        l->pending_len += len;
        return 0;
}

static void finish_login(struct iscsi_login *l)
{
        if (!l->declared_sent)
                l->params.max_recv_dsl = 8192; /* never declared: the RFC default holds */
        l->complete = true;
        log_debug("%s: %s logged in (%s%s%s, tsih %u, cmdsn %u, statsn %u)", peer(l), initiator(l),
                  l->type == ISCSI_SESSION_DISCOVERY ? "discovery" : "target ",
                  l->type == ISCSI_SESSION_DISCOVERY ? "" : l->target_name,
                  l->auth_state == ISCSI_AUTH_DONE && l->chap_alg ? ", CHAP" : "", l->tsih,
                  l->cmdsn, l->stat_sn);
}

/* Send the response text of a complete request, transiting when agreed. */
static int respond(struct iscsi_login *l, const struct login_req *rq, struct iscsi_text_buf *rsp,
                   bool transit, struct iscsi_pdu_reply *rep)
{
        if (rsp->len > ISCSI_LOGIN_PDU_TEXT) {
                /* Rare: the rest goes out as the initiator acknowledges each piece. */
                l->reply_text = rsp->data;
                l->reply_len = rsp->len;
                l->reply_off = 0;
                rsp->data = NULL;
                return send_reply_chunk(l, rq, rep);
        }
        uint8_t flags = (uint8_t)(l->stage << 2);
        uint16_t tsih = 0;
        int nsg = rq->nsg;
        if (transit && nsg == ISCSI_STAGE_FULL_FEATURE) {
                const char *why = NULL;
                if (!iscsi_params_within_limits(&l->params, l->env->limits, l->type, &why)) {
                        if (l->stage == ISCSI_STAGE_SECURITY && !l->keys_offered) {
                                /*
                                 * Skipping operational negotiation would leave RFC defaults we
                                 * cannot honour: answer with the lower next stage instead, where
                                 * our offers are made.
                                 */
                                nsg = ISCSI_STAGE_OPERATIONAL;
                        } else {
                                return login_fail(l, rq->bhs, ISCSI_LOGIN_INITIATOR_ERROR, why,
                                                  rep);
                        }
                }
        }
        if (transit) {
                flags |= (uint8_t)(LOGIN_FLAG_T | nsg);
                if (nsg == ISCSI_STAGE_FULL_FEATURE) {
                        tsih = l->env->alloc_tsih ? l->env->alloc_tsih(l->env->arg) : 0;
                        if (tsih == 0)
                                return login_fail(l, rq->bhs, ISCSI_LOGIN_OUT_OF_RESOURCES,
                                                  "no TSIH available", rep);
                        l->tsih = tsih;
                }
                l->stage = nsg;
        }
        login_respond(l, rq, flags, tsih, (uint8_t *)rsp->data, rsp->len, rep);
        rsp->data = NULL;
        if (l->stage == ISCSI_STAGE_FULL_FEATURE)
                finish_login(l);
        return 0;
}

int iscsi_login_handle(struct iscsi_login *l, const uint8_t *bhs, const uint8_t *data, uint32_t len,
                       struct iscsi_pdu_reply *rep)
{
        memset(rep, 0, sizeof(*rep));
        if (l->failed || l->complete || (len && !data))
                return -EPROTO;
        struct login_req rq = {
            .bhs = bhs,
            .transit = (((const struct iscsi_login_req_hdr *)bhs)->flags & LOGIN_FLAG_T) != 0,
            .cont = (((const struct iscsi_login_req_hdr *)bhs)->flags & LOGIN_FLAG_C) != 0,
            .csg = (((const struct iscsi_login_req_hdr *)bhs)->flags >> 2) & 3,
            .nsg = ((const struct iscsi_login_req_hdr *)bhs)->flags & 3,
        };
        const char *why = "";
        if (++l->pdu_count > LOGIN_MAX_PDUS)
                return login_fail(l, bhs, ISCSI_LOGIN_INITIATOR_ERROR, "too many login requests",
                                  rep);
        uint16_t st = check_header(l, &rq, &why);
        if (st != ISCSI_LOGIN_SUCCESS)
                return login_fail(l, bhs, st, why, rep);
        if (l->reply_text) {
                if (len || rq.cont)
                        return login_fail(l, bhs, ISCSI_LOGIN_INITIATOR_ERROR,
                                          "text while the target continues its response", rep);
                return send_reply_chunk(l, &rq, rep);
        }
        int rc = accumulate(l, data, len);
        if (rc)
                return login_fail(l, bhs,
                                  rc == -E2BIG ? ISCSI_LOGIN_INITIATOR_ERROR
                                               : ISCSI_LOGIN_OUT_OF_RESOURCES,
                                  rc == -E2BIG ? "login text too long" : "out of memory", rep);
        if (rq.cont) {
                /* An empty response asks for the rest of the text. */
                login_respond(l, &rq, (uint8_t)(l->stage << 2), 0, NULL, 0, rep);
                return 0;
        }
        struct iscsi_kv_list kv;
        rc = iscsi_text_parse(l->pending_text, l->pending_len, ISCSI_LOGIN_TEXT_MAX, &kv);
        free(l->pending_text);
        l->pending_text = NULL;
        l->pending_len = 0;
        if (rc)
                return login_fail(l, bhs,
                                  rc == -ENOMEM ? ISCSI_LOGIN_OUT_OF_RESOURCES
                                                : ISCSI_LOGIN_INITIATOR_ERROR,
                                  "malformed login text", rep);
        struct iscsi_text_buf rsp;
        iscsi_text_buf_init(&rsp, ISCSI_LOGIN_TEXT_MAX);
        bool transit = false;
        st = process_request(l, &rq, &kv, &rsp, &transit, &why);
        iscsi_kv_list_free(&kv);
        if (st != ISCSI_LOGIN_SUCCESS)
                rc = login_fail(l, bhs, st, why, rep);
        else
                rc = respond(l, &rq, &rsp, transit, rep);
        iscsi_text_buf_free(&rsp);
        return rc;
}
