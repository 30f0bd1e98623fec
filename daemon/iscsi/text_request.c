/*
 * Text Requests in full feature phase (RFC 7143 11.10, 11.11, Appendix C): SendTargets,
 * with long answers split over several Text Responses (C bit, Target Transfer Tag), and
 * initiator text continued over several requests. Renegotiation of login keys is refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "login_internal.h"
#include "tandem/iscsi_hdr.h"
#include "tandem/iscsi_pdu.h"
#include "tandem/log.h"

#define TEXT_FLAG_F      0x80
#define TEXT_FLAG_C      0x40
#define TTT_NONE         0xffffffffu
#define DEFAULT_XMIT_DSL 8192
#define TEXT_REPLY_MAX   (4u * 1024 * 1024) /* bound on one SendTargets answer */

bool iscsi_text_name_plausible(const char *name)
{
        size_t n = strlen(name);
        if (n <= 4 || n >= TDM_IQN_MAX)
                return false;
        if (strncasecmp(name, "iqn.", 4) != 0 && strncasecmp(name, "eui.", 4) != 0 &&
            strncasecmp(name, "naa.", 4) != 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)name[i];
                if (c <= ' ' || c == ',' || c == '=' || c == 0x7f)
                        return false;
        }
        return true;
}

static void state_reset(struct iscsi_text_state *ts)
{
        free(ts->req_text);
        free(ts->reply_text);
        ts->req_text = NULL;
        ts->reply_text = NULL;
        ts->req_len = ts->reply_len = ts->reply_off = 0;
        ts->req_active = false;
        ts->reply_active = false;
        ts->ttt = TTT_NONE;
}

void iscsi_text_state_fini(struct iscsi_text_state *ts)
{
        state_reset(ts);
}

/* The TTT of the open exchange, allocated when it opens. */
static uint32_t exchange_ttt(struct iscsi_text_state *ts)
{
        if (!ts->reply_active) {
                do {
                        ts->next_ttt++;
                } while (ts->next_ttt == TTT_NONE || ts->next_ttt == 0);
                ts->ttt = ts->next_ttt;
                ts->reply_active = true;
        }
        return ts->ttt;
}

static void fill_response(const struct iscsi_text_env *env, const uint8_t *req, uint8_t flags,
                          uint32_t ttt, uint32_t dsl, uint8_t *bhs)
{
        const struct iscsi_req_hdr *q = (const struct iscsi_req_hdr *)req;
        struct iscsi_rsp_hdr *h = (struct iscsi_rsp_hdr *)bhs;
        memset(h, 0, sizeof(*h));
        h->opcode = ISCSI_OP_TEXT_RSP;
        h->flags = flags;
        h->dsl = be24_of(dsl);
        memcpy(h->lun, q->lun, sizeof(h->lun));
        h->itt = q->itt;
        h->ttt = be32_of(ttt);
        h->sn.stat_sn = be32_of(env->stat_sn);
        h->sn.exp_cmdsn = be32_of(env->exp_cmdsn);
        h->sn.max_cmdsn = be32_of(env->max_cmdsn);
}

struct target_list {
        struct iscsi_text_buf *out;
        const char *portal;
        uint16_t tpgt;
};

static void add_target(void *arg, const char *iqn, uint16_t tpgt)
{
        struct target_list *tl = arg;
        /* The target's own portal group tag: login declares the same one (login.c). */
        iscsi_text_buf_add(tl->out, "TargetName", iqn);
        iscsi_text_buf_addf(tl->out, "TargetAddress", "%s,%u", tl->portal, tpgt ? tpgt : tl->tpgt);
}

/*
 * SendTargets=All lists every target the initiator may see in a discovery session; in a
 * normal session it (like the empty value) lists only the session's target. A name lists
 * that target when visible. Anything else is rejected.
 */
static void send_targets(const struct iscsi_text_env *env, const char *value,
                         struct iscsi_text_buf *out)
{
        bool discovery = env->type == ISCSI_SESSION_DISCOVERY;
        const char *only;
        if (strcmp(value, "All") == 0) {
                only = discovery ? NULL : env->target_name;
        } else if (value[0] == '\0') {
                if (discovery)
                        return; /* no session target to report */
                only = env->target_name;
        } else if (iscsi_text_name_plausible(value)) {
                only = value;
        } else {
                iscsi_text_buf_add(out, "SendTargets", "Reject");
                return;
        }
        if (!env->for_each_visible || (only && !only[0]))
                return;
        struct target_list tl = {out, env->portal ? env->portal : "", env->tpgt};
        env->for_each_visible(env->initiator_name, only, add_target, &tl);
}

/* Answers to every key of a complete request, in order. */
static int answer_keys(const struct iscsi_text_env *env, const struct iscsi_kv_list *kv,
                       struct iscsi_text_buf *out)
{
        for (uint32_t i = 0; i < kv->n; i++) {
                const char *key = kv->kv[i].key;
                if (iscsi_kv_find(kv, key, i + 1) >= 0)
                        return -EPROTO;
                enum iscsi_key_id id = iscsi_key_lookup(key);
                if (id == IK_SEND_TARGETS)
                        send_targets(env, kv->kv[i].value, out);
                else if (id == IK_UNKNOWN)
                        iscsi_text_buf_add(out, key, "NotUnderstood");
                else
                        iscsi_text_buf_add(out, key, "Reject"); /* no renegotiation in FFP */
        }
        return out->err == -ENOMEM ? -ENOMEM : 0;
}

/* Next piece of the answer; the last one closes the exchange when the request was final. */
static int send_chunk(struct iscsi_text_state *ts, const struct iscsi_text_env *env,
                      const uint8_t *req, bool final, struct iscsi_pdu_reply *rep)
{
        uint32_t max = env->max_xmit_dsl ? env->max_xmit_dsl : DEFAULT_XMIT_DSL;
        uint32_t left = ts->reply_len - ts->reply_off;
        uint32_t n = left < max ? left : max;
        uint8_t *data = NULL;
        if (n) {
                data = malloc(n);
                if (!data)
                        return -ENOMEM;
                memcpy(data, ts->reply_text + ts->reply_off, n);
        }
        ts->reply_off += n;
        bool more = ts->reply_off < ts->reply_len;
        uint8_t flags;
        uint32_t ttt;
        if (more) {
                flags = TEXT_FLAG_C;
                ttt = exchange_ttt(ts);
        } else {
                free(ts->reply_text);
                ts->reply_text = NULL;
                ts->reply_len = ts->reply_off = 0;
                if (final) {
                        flags = TEXT_FLAG_F;
                        ttt = TTT_NONE;
                        state_reset(ts);
                } else {
                        /* The initiator is not done: it answers with the TTT. */
                        flags = 0;
                        ttt = exchange_ttt(ts);
                }
        }
        fill_response(env, req, flags, ttt, n, rep->bhs);
        rep->data = data;
        rep->data_len = n;
        return 0;
}

static int collect(struct iscsi_text_state *ts, const uint8_t *data, uint32_t len)
{
        if (!len)
                return 0;
        if (ts->req_len + (uint64_t)len > ISCSI_LOGIN_TEXT_MAX)
                return -E2BIG;
        char *p = realloc(ts->req_text, ts->req_len + len);
        if (!p)
                return -ENOMEM;
        memcpy(p + ts->req_len, data, len);
        ts->req_text = p;
        ts->req_len += len;
        return 0;
}

static int answer_request(struct iscsi_text_state *ts, const struct iscsi_text_env *env,
                          const uint8_t *req, bool final, struct iscsi_pdu_reply *rep)
{
        struct iscsi_kv_list kv;
        int rc = iscsi_text_parse(ts->req_text, ts->req_len, ISCSI_LOGIN_TEXT_MAX, &kv);
        free(ts->req_text);
        ts->req_text = NULL;
        ts->req_len = 0;
        ts->req_active = false;
        if (rc)
                return rc == -ENOMEM ? rc : -EPROTO;
        struct iscsi_text_buf out;
        iscsi_text_buf_init(&out, TEXT_REPLY_MAX);
        rc = answer_keys(env, &kv, &out);
        iscsi_kv_list_free(&kv);
        if (rc) {
                iscsi_text_buf_free(&out);
                return rc;
        }
        if (out.err)
                log_warn("%s: SendTargets answer truncated at %u bytes", env->initiator_name,
                         out.len);
        ts->reply_text = out.data;
        ts->reply_len = out.len;
        ts->reply_off = 0;
        return send_chunk(ts, env, req, final, rep);
}

/* Empty response to an initiator continuation (C=1): send the rest. */
static int ack_continuation(struct iscsi_text_state *ts, const struct iscsi_text_env *env,
                            const uint8_t *req, struct iscsi_pdu_reply *rep)
{
        fill_response(env, req, 0, exchange_ttt(ts), 0, rep->bhs);
        return 0;
}

int iscsi_text_handle(struct iscsi_text_state *ts, const struct iscsi_text_env *env,
                      const uint8_t *bhs, const uint8_t *data, uint32_t len,
                      struct iscsi_pdu_reply *rep)
{
        memset(rep, 0, sizeof(*rep));
        if (iscsi_bhs_opcode(bhs) != ISCSI_OP_TEXT_REQ || (len && !data))
                return -EINVAL;
        const struct iscsi_req_hdr *q = (const struct iscsi_req_hdr *)bhs;
        bool final = (q->flags & TEXT_FLAG_F) != 0;
        bool cont = (q->flags & TEXT_FLAG_C) != 0;
        if (final && cont)
                return -EPROTO;
        uint32_t ttt = be32_get(q->word20);
        if (ttt == TTT_NONE) {
                state_reset(ts); /* a new exchange ends any open one */
        } else if (!ts->reply_active || ttt != ts->ttt) {
                return -EPROTO;
        } else if (!ts->req_active && ts->reply_text) {
                if (len || cont)
                        return -EPROTO; /* while we continue, the initiator only acknowledges */
                return send_chunk(ts, env, bhs, final, rep);
        }
        int rc = collect(ts, data, len);
        if (rc) {
                state_reset(ts);
                return rc == -E2BIG ? -EPROTO : rc;
        }
        if (cont) {
                ts->req_active = true;
                return ack_continuation(ts, env, bhs, rep);
        }
        rc = answer_request(ts, env, bhs, final, rep);
        if (rc)
                state_reset(ts);
        return rc;
}
