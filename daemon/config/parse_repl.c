/* Reading a LUN's "replication" group: settings with their defaults, the nodes, the policy. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "tandem/config_repl.h"
#include "tandem/repl.h"

static int parse_node(struct cfg_parser *p, const config_setting_t *s, const char *field,
                      struct tdm_repl_node *n)
{
        static const char *const keys[] = {"id", "name", "address", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, field, keys)))
                return rc;
        memset(n, 0, sizeof(*n));
        if (!(m = cfg_member(s, "id", field, f)))
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = cfg_get_u32(p, m, f, 1, 255, &n->id)))
                return rc;
        if ((m = cfg_member(s, "name", field, f))) {
                if ((rc = cfg_get_string(p, m, f, n->name, sizeof(n->name))))
                        return rc;
        } else {
                snprintf(n->name, sizeof(n->name), "node%u", n->id);
        }
        if (!(m = cfg_member(s, "address", field, f)))
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        return cfg_get_string(p, m, f, n->address, sizeof(n->address));
}

static int parse_nodes(struct cfg_parser *p, const config_setting_t *s, const char *field,
                       struct tdm_repl_cfg *r)
{
        if (!config_setting_is_list(s))
                return cfg_fail(p->err, p->errlen, -EINVAL, field,
                                "must be a list ( { id = N; address = \"HOST[:PORT]\"; }, ... )");
        size_t n = (size_t)config_setting_length(s);
        if (n > TDM_REPL_MAX_NODES)
                return cfg_fail(p->err, p->errlen, -EINVAL, field,
                                "only one peer per LUN is supported: list this node and its peer, "
                                "got %zu nodes",
                                n);
        for (size_t i = 0; i < n; i++) {
                char f[FIELD_MAX];
                cfg_field_index(f, field, i);
                int rc = parse_node(p, config_setting_get_elem(s, (unsigned)i), f, &r->nodes[i]);
                if (rc)
                        return rc;
                r->n_nodes = i + 1;
        }
        return 0;
}

static int parse_split_brain(struct cfg_parser *p, const config_setting_t *s, const char *f,
                             struct tdm_repl_cfg *r)
{
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "must be a string");
        const char *v = config_setting_get_string(s);
        if (cfg_split_brain_parse(v, r) == 0)
                return 0;
        return cfg_fail(p->err, p->errlen, -EINVAL, f,
                        "must be disconnect, discard-zero-changes, discard-younger-primary or "
                        "discard-node-NAME, got \"%s\"",
                        v);
}

static int parse_target_ports(struct cfg_parser *p, const config_setting_t *s, const char *f,
                              struct tdm_repl_cfg *r)
{
        const char *v =
            config_setting_type(s) == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
        if (v && (strcmp(v, "shared") == 0 || strcmp(v, "per_node") == 0)) {
                r->ports_per_node = strcmp(v, "per_node") == 0;
                return 0;
        }
        return cfg_fail(p->err, p->errlen, -EINVAL, f,
                        "must be \"shared\" (floating portal IP) or \"per_node\" (ALUA "
                        "multipath to both nodes)");
}

static int parse_alua(struct cfg_parser *p, const config_setting_t *s, const char *f,
                      struct tdm_repl_cfg *r)
{
        const char *v =
            config_setting_type(s) == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
        if (v && (strcmp(v, "implicit") == 0 || strcmp(v, "explicit") == 0)) {
                r->alua_explicit = strcmp(v, "explicit") == 0;
                return 0;
        }
        return cfg_fail(p->err, p->errlen, -EINVAL, f,
                        "must be \"implicit\" (the cluster moves the Primary) or \"explicit\" "
                        "(initiators may also ask with SET TARGET PORT GROUPS)");
}

static int parse_link_protection(struct cfg_parser *p, const config_setting_t *s, const char *f,
                                 struct tdm_repl_cfg *r)
{
        const char *v =
            config_setting_type(s) == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
        if (v && (strcmp(v, "authenticate") == 0 || strcmp(v, "encrypt") == 0)) {
                r->link_protection = strcmp(v, "encrypt") == 0 ? TDM_LINK_PROTECT_ENCRYPT
                                                               : TDM_LINK_PROTECT_AUTHENTICATE;
                return 0;
        }
        return cfg_fail(p->err, p->errlen, -EINVAL, f,
                        "must be \"authenticate\" (every frame of the link carries a tag) or "
                        "\"encrypt\" (and its data is encrypted); the same on both nodes");
}

int cfg_parse_repl(struct cfg_parser *p, const config_setting_t *s, const char *field,
                   struct tdm_repl_cfg *r)
{
        static const char *const keys[] = {"secret",
                                           "port",
                                           "nodes",
                                           "metadata",
                                           "timeout",
                                           "resync_rate",
                                           "resync_min_rate",
                                           "split_brain",
                                           "target_ports",
                                           "alua",
                                           "stpg_handler",
                                           "link_protection",
                                           NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, field, keys)))
                return rc;
        memset(r, 0, sizeof(*r));
        r->enabled = true;
        r->port = TDM_DEFAULT_REPL_PORT;
        r->timeout_ms = TDM_DEFAULT_REPL_TIMEOUT_MS;
        r->resync_rate = TDM_DEFAULT_RESYNC_RATE;
        r->resync_min_rate = TDM_DEFAULT_RESYNC_MIN_RATE;
        r->split_brain = REPL_SB_DISCONNECT;
        if ((m = cfg_member(s, "secret", field, f)) &&
            (rc = cfg_get_string(p, m, f, r->secret, sizeof(r->secret))))
                return rc;
        if ((m = cfg_member(s, "port", field, f))) {
                uint64_t v = 0;
                if ((rc = cfg_get_uint(p, m, f, 1, 65535, &v)))
                        return rc;
                r->port = (uint16_t)v;
        }
        if (!(m = cfg_member(s, "nodes", field, f)))
                return cfg_fail(p->err, p->errlen, -EINVAL, f,
                                "missing (required): this node and its peer");
        if ((rc = parse_nodes(p, m, f, r)))
                return rc;
        if ((m = cfg_member(s, "metadata", field, f)) &&
            (rc = cfg_get_string(p, m, f, r->metadata, sizeof(r->metadata))))
                return rc;
        /* Wide range here: validation explains what is wrong with a timeout. */
        if ((m = cfg_member(s, "timeout", field, f)) &&
            (rc = cfg_get_u32(p, m, f, 0, UINT32_MAX, &r->timeout_ms)))
                return rc;
        if ((m = cfg_member(s, "resync_rate", field, f)) &&
            (rc = cfg_get_size(p, m, f, &r->resync_rate)))
                return rc;
        if ((m = cfg_member(s, "resync_min_rate", field, f)) &&
            (rc = cfg_get_size(p, m, f, &r->resync_min_rate)))
                return rc;
        if ((m = cfg_member(s, "split_brain", field, f)) && (rc = parse_split_brain(p, m, f, r)))
                return rc;
        if ((m = cfg_member(s, "target_ports", field, f)) && (rc = parse_target_ports(p, m, f, r)))
                return rc;
        if ((m = cfg_member(s, "alua", field, f)) && (rc = parse_alua(p, m, f, r)))
                return rc;
        if ((m = cfg_member(s, "stpg_handler", field, f)) &&
            (rc = cfg_get_string(p, m, f, r->stpg_handler, sizeof(r->stpg_handler))))
                return rc;
        if ((m = cfg_member(s, "link_protection", field, f)) &&
            (rc = parse_link_protection(p, m, f, r)))
                return rc;
        return 0;
}
