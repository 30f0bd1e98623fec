/*
 * tandemctl's request building: each value the command line gave is checked by its kind
 * and stored in the member its row names, then the row's rules across values run.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ctl_internal.h"
#include "tandem/config.h"

#define SIZE_FORMS "(K M G T, KiB MiB ..., KB MB ...)"

static int parse_lun_id(const char *name, const char *v, uint32_t *out, char *err, size_t errlen)
{
        size_t n = strlen(v);
        bool digits = n > 0 && n <= 3;
        for (size_t i = 0; digits && i < n; i++)
                digits = isdigit((unsigned char)v[i]);
        if (!digits || atoi(v) > TDM_LUN_ID_MAX)
                return admin_bad(err, errlen, "%s: must be 0..%d, got \"%s\"", name, TDM_LUN_ID_MAX,
                                 v);
        *out = (uint32_t)atoi(v);
        return 0;
}

static int parse_positive_size(const char *name, const char *v, uint64_t *out, char *err,
                               size_t errlen)
{
        int rc = tdm_parse_size(v, out);
        if (rc == -ERANGE)
                return admin_bad(err, errlen, "%s: too large, got \"%s\"", name, v);
        if (rc < 0 || *out == 0)
                return admin_bad(
                    err, errlen,
                    "%s: must be a positive number of bytes with an optional unit " SIZE_FORMS
                    ", got \"%s\"",
                    name, v);
        return 0;
}

/* A relative path is taken from the current directory: tandemd runs elsewhere. */
static int absolute_path(struct admin_call *call, const char *name, const char *p, char *err,
                         size_t errlen)
{
        if (!*p)
                return admin_bad(err, errlen, "%s: must not be empty", name);
        if (p[0] == '/') {
                if (strlen(p) >= sizeof(call->path))
                        return admin_bad(err, errlen, "%s: too long", name);
                snprintf(call->path, sizeof(call->path), "%s", p);
                return 0;
        }
        char cwd[4096];
        if (!getcwd(cwd, sizeof(cwd)))
                return admin_bad(err, errlen,
                                 "%s: \"%s\" is relative and the current directory is unknown",
                                 name, p);
        size_t dl = strcmp(cwd, "/") ? strlen(cwd) : 0, pl = strlen(p);
        if (dl + 1 + pl >= sizeof(call->path))
                return admin_bad(err, errlen, "%s: too long", name);
        memcpy(call->path, cwd, dl);
        call->path[dl] = '/';
        memcpy(call->path + dl + 1, p, pl + 1);
        return 0;
}

/* The block size the request has so far (block-size comes first): sizes are multiples of it. */
static uint32_t request_block_size(const ProtobufCMessage *m)
{
        uint32_t bs = ctl_u32(m, "block_size");
        return bs ? bs : TDM_DEFAULT_BLOCK_SIZE;
}

/* "a|b": true for a. */
static int parse_switch(const char *name, const char *word, const char *v, protobuf_c_boolean *out,
                        char *err, size_t errlen)
{
        const char *bar = strchr(word, '|');
        size_t first = (size_t)(bar - word);
        if (strlen(v) == first && strncmp(v, word, first) == 0)
                *out = 1;
        else if (strcmp(v, bar + 1) == 0)
                *out = 0;
        else
                return admin_bad(err, errlen, "%s: must be %.*s or %s, got \"%s\"", name,
                                 (int)first, word, bar + 1, v);
        return 0;
}

static int set_value(struct admin_call *call, const struct admin_arg *a, const char *v, char *err,
                     size_t errlen)
{
        ProtobufCMessage *m = &call->msg.base;
        char words[64];
        const char *name = a->name;
        uint64_t n = 0;
        char *end = "";
        int rc = 0;
        if (!name) {
                admin_op_words(call->op, words, sizeof(words));
                name = words;
        }
        switch (a->kind) {
        case ADMIN_IQN:
                if (!tdm_iscsi_name_valid(v))
                        return admin_bad(err, errlen,
                                         "%s: \"%s\" is not an iSCSI name " TDM_ISCSI_NAME_FORMS,
                                         name, v);
                ctl_string(m, a->field) = (char *)v;
                return 0;
        case ADMIN_INITIATOR:
                if (strcasecmp(v, "ALL") != 0 && !tdm_iscsi_name_valid(v))
                        return admin_bad(
                            err, errlen,
                            "%s: \"%s\" is neither ALL nor an iSCSI name " TDM_ISCSI_NAME_FORMS,
                            name, v);
                ctl_string(m, a->field) = (char *)v;
                return 0;
        case ADMIN_TEXT:
                if (strlen(v) >= TDM_CHAP_MAX)
                        return admin_bad(err, errlen, "%s: too long (at most %d characters)", name,
                                         TDM_CHAP_MAX - 1);
                ctl_string(m, a->field) = (char *)v;
                return 0;
        case ADMIN_PATH:
                if ((rc = absolute_path(call, name, v, err, errlen)) == 0)
                        ctl_string(m, a->field) = call->path;
                return rc;
        case ADMIN_LUN:
                return parse_lun_id(name, v, &ctl_u32(m, a->field), err, errlen);
        case ADMIN_SECONDS:
                n = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
                if (n < 1 || n > 3600 || *end)
                        return admin_bad(err, errlen, "%s: must be 1..3600 seconds, got \"%s\"",
                                         name, v);
                ctl_u32(m, a->field) = (uint32_t)n;
                return 0;
        case ADMIN_SWITCH:
                return parse_switch(name, a->word, v, &ctl_bool(m, a->field), err, errlen);
        case ADMIN_SIZE:
                return parse_positive_size(name, v, &ctl_u64(m, a->field), err, errlen);
        case ADMIN_LUN_SIZE:
                if ((rc = parse_positive_size(name, v, &n, err, errlen)))
                        return rc;
                if (n % request_block_size(m))
                        return admin_bad(err, errlen,
                                         "%s: must be a positive multiple of %u, got \"%s\"", name,
                                         request_block_size(m), v);
                ctl_u64(m, a->field) = n;
                return 0;
        case ADMIN_BLOCK_SIZE:
                if (tdm_parse_size(v, &n) < 0 || (n != 512 && n != 1024 && n != 2048 && n != 4096))
                        return admin_bad(err, errlen,
                                         "%s: must be 512, 1024, 2048 or 4096, got \"%s\"", name,
                                         v);
                ctl_u32(m, a->field) = (uint32_t)n;
                return 0;
        case ADMIN_PHYSICAL_BLOCK_SIZE:
                if (tdm_parse_size(v, &n) < 0 || n == 0 || n > TDM_MAX_PHYSICAL_BLOCK_SIZE)
                        return admin_bad(err, errlen,
                                         "%s: must be block-size (%u) times a power of two, at "
                                         "most %u, got \"%s\"",
                                         name, request_block_size(m), TDM_MAX_PHYSICAL_BLOCK_SIZE,
                                         v);
                if ((rc = tdm_physical_block_size_check((uint32_t)n, request_block_size(m), name,
                                                        err, errlen)))
                        return rc;
                ctl_u32(m, a->field) = (uint32_t)n;
                return 0;
        }
        return admin_bad(err, errlen, "%s: unknown kind of argument", name);
}

/* The words of the arguments from i on (required or optional ones), joined by sep. */
static void arg_words(const struct admin_op *op, size_t i, bool optional, const char *sep,
                      char *out, size_t outlen)
{
        const struct admin_arg *a;
        bool opt;
        size_t n = 0;
        out[0] = '\0';
        for (; (a = admin_op_arg(op, i, &opt)) && n < outlen; i++)
                if (opt == optional) {
                        int w = snprintf(out + n, outlen - n, "%s%s", n ? sep : "", a->word);
                        n += w > 0 ? (size_t)w : 0;
                }
}

/* An argument that decides what the rest mean (pause|resume; IQN or --discovery). */
static bool leads(const struct admin_arg *a)
{
        return a->unless || a->kind == ADMIN_SWITCH;
}

/*
 * Leading arguments are each checked before the rest are counted; the rest are the required
 * ones, then the optional ones, all or none.
 */
static int set_positionals(struct admin_call *call, const struct admin_values *v, const char *cmd,
                           char *err, size_t errlen)
{
        const struct admin_op *op = call->op;
        const struct admin_arg *a;
        bool optional;
        size_t i = 0, p = 0, n_req = 0, n_opt = 0;
        char words[128], give[128];
        int rc;
        for (; (a = admin_op_arg(op, i, &optional)) && !optional && leads(a); i++) {
                const struct admin_option *instead = admin_option_by_bit(a->unless);
                if (instead && (v->given & a->unless))
                        continue;
                if (p == v->n_pos)
                        return instead ? admin_bad(err, errlen, "%s: missing %s (or --%s)", cmd,
                                                   a->word, instead->name)
                                       : admin_bad(err, errlen, "%s: missing %s", cmd, a->word);
                if ((rc = set_value(call, a, v->pos[p++], err, errlen)))
                        return rc;
        }
        for (size_t j = i; (a = admin_op_arg(op, j, &optional)); j++)
                optional ? n_opt++ : n_req++;
        size_t left = v->n_pos - p;
        arg_words(op, i, false, " ", words, sizeof(words));
        if (left < n_req)
                return admin_bad(err, errlen, "%s: missing %s", cmd, words);
        if (left > n_req + n_opt)
                return admin_bad(err, errlen, "%s: unexpected argument \"%s\"", cmd,
                                 v->pos[p + n_req + n_opt]);
        if (left > n_req && left < n_req + n_opt) {
                arg_words(op, i + left, true, " ", words, sizeof(words));
                arg_words(op, i + n_req, true, " and ", give, sizeof(give));
                return admin_bad(err, errlen, "%s: missing %s (give %s, or neither)", cmd, words,
                                 give);
        }
        for (; p < v->n_pos; p++, i++)
                if ((rc = set_value(call, admin_op_arg(op, i, NULL), v->pos[p], err, errlen)))
                        return rc;
        return 0;
}

int admin_call_build(struct admin_call *call, const struct admin_op *op,
                     const struct admin_values *v, char *err, size_t errlen)
{
        const ProtobufCMessageDescriptor *d = ctl_request_descriptor(op->request);
        char cmd[64];
        int rc;
        memset(call, 0, sizeof(*call));
        call->op = op;
        admin_op_words(op, cmd, sizeof(cmd));
        tandem__admin__admin_request__init(&call->req);
        call->req.version = TANDEM__ADMIN__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
        if (!d || d->sizeof_message > sizeof(call->msg))
                return admin_bad(err, errlen, "%s: no room for its request (a tandemctl bug)", cmd);
        protobuf_c_message_init(d, &call->msg);
        for (size_t k = 0; k < admin_n_options; k++)
                if ((v->given & admin_options[k].bit) && !(op->options & admin_options[k].bit))
                        return admin_bad(err, errlen, "%s: --%s does not apply here", cmd,
                                         admin_options[k].name);
        if ((rc = set_positionals(call, v, cmd, err, errlen)))
                return rc;
        for (size_t k = 0; k < admin_n_options; k++) {
                const struct admin_option *o = &admin_options[k];
                if (!(v->given & o->bit))
                        continue;
                if (o->flag)
                        ctl_bool(&call->msg.base, o->flag) = 1;
                for (size_t j = 0; j < admin_option_n_values(o); j++)
                        if ((rc = set_value(call, o->values[j], v->options[k][j], err, errlen)))
                                return rc;
        }
        if (op->check && (rc = op->check(call, v, err, errlen)))
                return rc;
        ctl_request_set(&call->req, op->request, &call->msg.base);
        return 0;
}
