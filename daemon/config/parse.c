/*
 * Parsing: the configuration file (libconfig syntax) into struct tdm_config, starting from
 * the defaults, generating missing LUN identities, then validating the result.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "parse.h"

static int parse_chap(struct cfg_parser *p, const config_setting_t *s, const char *field,
                      struct tdm_chap_cfg *chap)
{
        static const char *const keys[] = {"user", "secret", "mutual_user", "mutual_secret", NULL};
        struct {
                const char *name;
                char *dst;
        } strs[] = {{"user", chap->user},
                    {"secret", chap->secret},
                    {"mutual_user", chap->mutual_user},
                    {"mutual_secret", chap->mutual_secret}};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, field, keys)))
                return rc;
        memset(chap, 0, sizeof(*chap));
        for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
                if ((m = cfg_member(s, strs[i].name, field, f)) &&
                    (rc = cfg_get_string(p, m, f, strs[i].dst, TDM_CHAP_MAX)))
                        return rc;
        chap->enabled = chap->user[0] || chap->secret[0];
        chap->mutual = chap->mutual_user[0] || chap->mutual_secret[0];
        return 0;
}

static int parse_log_level(struct cfg_parser *p, const config_setting_t *m, const char *f)
{
        if (config_setting_type(m) == CONFIG_TYPE_STRING) {
                const char *v = config_setting_get_string(m);
                for (int i = 0; i < 8; i++) {
                        if (strcasecmp(v, cfg_log_levels[i]) == 0 ||
                            (i == LOG_ERR && strcasecmp(v, "error") == 0) ||
                            (i == LOG_WARNING && strcasecmp(v, "warn") == 0)) {
                                p->cfg->log_level = i;
                                return 0;
                        }
                }
                return cfg_fail(p->err, p->errlen, -EINVAL, f,
                                "must be one of emerg alert crit err warning notice info debug "
                                "(or 0..7), got \"%s\"",
                                v);
        }
        uint64_t v = 0;
        int rc = cfg_get_uint(p, m, f, LOG_EMERG, LOG_DEBUG, &v);
        if (rc == 0)
                p->cfg->log_level = (int)v;
        return rc;
}

static int parse_log(struct cfg_parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {"file", "level", "syslog", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, "log", keys)))
                return rc;
        if ((m = cfg_member(s, "file", "log", f)) &&
            (rc = cfg_get_string(p, m, f, p->cfg->log_file, sizeof(p->cfg->log_file))))
                return rc;
        if ((m = cfg_member(s, "syslog", "log", f)) &&
            (rc = cfg_get_bool(p, m, f, &p->cfg->log_syslog)))
                return rc;
        if ((m = cfg_member(s, "level", "log", f)))
                return parse_log_level(p, m, f);
        return 0;
}

static int parse_iscsi(struct cfg_parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {"max_recv_dsl",
                                           "max_burst",
                                           "first_burst",
                                           "initial_r2t",
                                           "immediate_data",
                                           "max_outstanding_r2t",
                                           "queue_depth",
                                           "nop_interval",
                                           "nop_timeout",
                                           "login_timeout",
                                           "max_sessions",
                                           "max_sessions_per_initiator",
                                           "max_pending_logins",
                                           "login_rate",
                                           "login_burst",
                                           "max_conn_output",
                                           "max_conn_write_data",
                                           "output_timeout",
                                           NULL};
        struct tdm_iscsi_cfg *c = &p->cfg->iscsi;
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, "iscsi", keys)))
                return rc;
        for (size_t i = 0; i < cfg_n_iscsi_rules; i++) {
                const struct cfg_iscsi_rule *r = &cfg_iscsi_rules[i];
                if ((m = cfg_member(s, r->name, "iscsi", f)) &&
                    (rc = cfg_get_u32(p, m, f, r->lo, r->hi, cfg_iscsi_slot(c, r))))
                        return rc;
        }
        if ((m = cfg_member(s, "initial_r2t", "iscsi", f)) &&
            (rc = cfg_get_bool(p, m, f, &c->initial_r2t)))
                return rc;
        if ((m = cfg_member(s, "immediate_data", "iscsi", f)) &&
            (rc = cfg_get_bool(p, m, f, &c->immediate_data)))
                return rc;
        return 0;
}

/* Sizes of a LUN: present but 0 is a mistake (leaving the field out means the default). */
static int parse_lun_sizes(struct cfg_parser *p, const config_setting_t *s, const char *field,
                           struct tdm_lun_cfg *l)
{
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((m = cfg_member(s, "block_size", field, f)) &&
            (rc = cfg_get_u32(p, m, f, 512, 4096, &l->block_size)))
                return rc;
        if ((m = cfg_member(s, "physical_block_size", field, f))) {
                uint64_t v = 0;
                if ((rc = cfg_get_size(p, m, f, &v)))
                        return rc;
                if (v == 0 || v > TDM_MAX_PHYSICAL_BLOCK_SIZE)
                        return cfg_fail(p->err, p->errlen, -EINVAL, f,
                                        "must be block_size (%u) times a power of two, at most "
                                        "%u, got %" PRIu64,
                                        l->block_size, TDM_MAX_PHYSICAL_BLOCK_SIZE, v);
                l->physical_block_size = (uint32_t)v;
        }
        if ((m = cfg_member(s, "size", field, f))) {
                if ((rc = cfg_get_size(p, m, f, &l->size)))
                        return rc;
                if (l->size == 0 || l->size % l->block_size)
                        return cfg_fail(p->err, p->errlen, -EINVAL, f,
                                        "must be a positive multiple of %u", l->block_size);
        }
        return 0;
}

/* naa and serial as written; parse_lun decides what a missing one means. */
static int parse_lun_identity(struct cfg_parser *p, const config_setting_t *s, const char *field,
                              struct tdm_lun_cfg *l)
{
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((m = cfg_member(s, "naa", field, f)) &&
            (rc = cfg_get_string(p, m, f, l->naa, sizeof(l->naa))))
                return rc;
        if ((m = cfg_member(s, "serial", field, f)) &&
            (rc = cfg_get_string(p, m, f, l->serial, sizeof(l->serial))))
                return rc;
        return 0;
}

static int parse_lun(struct cfg_parser *p, const config_setting_t *s, const char *field,
                     struct tdm_lun_cfg *l)
{
        static const char *const keys[] = {
            "lun", "path",   "size", "thin",     "direct",      "block_size", "physical_block_size",
            "naa", "serial", "wce",  "readonly", "replication", NULL};
        struct {
                const char *name;
                bool *dst;
        } flags[] = {{"thin", &l->thin},
                     {"direct", &l->direct},
                     {"wce", &l->wce},
                     {"readonly", &l->readonly}};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, field, keys)))
                return rc;
        tdm_lun_defaults(l);
        if (!(m = cfg_member(s, "lun", field, f)))
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = cfg_get_uint(p, m, f, 0, TDM_LUN_ID_MAX, &l->lun)))
                return rc;
        if (!(m = cfg_member(s, "path", field, f)))
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = cfg_get_string(p, m, f, l->path, sizeof(l->path))) ||
            (rc = parse_lun_sizes(p, s, field, l)))
                return rc;
        for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
                if ((m = cfg_member(s, flags[i].name, field, f)) &&
                    (rc = cfg_get_bool(p, m, f, flags[i].dst)))
                        return rc;
        if ((rc = parse_lun_identity(p, s, field, l)))
                return rc;
        if ((m = cfg_member(s, "replication", field, f)) &&
            (rc = cfg_parse_repl(p, m, f, &l->repl)))
                return rc;
        if (l->repl.enabled) {
                /* Never generated: both nodes must show the same one; validation says so. */
        } else if (l->naa[0] == '\0' && l->serial[0] == '\0') {
                tdm_lun_identity_generate(l);
                l->identity_generated = true;
                p->cfg->identities_generated = true;
        } else if (l->naa[0] == '\0' || l->serial[0] == '\0') {
                /* Half an identity is a damaged file, not a new LUN: do not invent the rest. */
                cfg_field_join(f, field, l->naa[0] ? "serial" : "naa");
                return cfg_fail(
                    p->err, p->errlen, -EINVAL, f,
                    "missing while %s is set (both or neither: neither generates new ones)",
                    l->naa[0] ? "naa" : "serial");
        }
        return 0;
}

static int parse_luns(struct cfg_parser *p, const config_setting_t *m, const char *f,
                      struct tdm_target_cfg *t)
{
        if (!config_setting_is_list(m))
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "must be a list ( { ... }, ... )");
        size_t n = (size_t)config_setting_length(m);
        if (n > TDM_LUN_ID_MAX + 1)
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "at most %d LUNs",
                                TDM_LUN_ID_MAX + 1);
        if (n) {
                t->luns = calloc(n, sizeof(*t->luns));
                if (!t->luns)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                char lf[FIELD_MAX];
                cfg_field_index(lf, f, i);
                int rc = parse_lun(p, config_setting_get_elem(m, (unsigned)i), lf, &t->luns[i]);
                if (rc)
                        return rc;
                t->n_luns = i + 1;
        }
        return 0;
}

static int parse_acl(struct cfg_parser *p, const config_setting_t *m, const char *f,
                     struct tdm_target_cfg *t)
{
        t->acl = calloc(TDM_MAX_ACL, sizeof(*t->acl));
        if (!t->acl)
                return -ENOMEM;
        int rc = cfg_get_string_list(p, m, f, t->acl[0], TDM_IQN_MAX, TDM_MAX_ACL, &t->n_acl);
        if (rc)
                return rc;
        for (size_t i = 0; i < t->n_acl; i++)
                if (strcasecmp(t->acl[i], "ALL") == 0)
                        strcpy(t->acl[i], "ALL");
        return 0;
}

static int parse_target(struct cfg_parser *p, const config_setting_t *s, const char *field,
                        struct tdm_target_cfg *t)
{
        static const char *const keys[] = {"iqn", "alias", "tpgt", "acl", "chap", "luns", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, field, keys)))
                return rc;
        t->tpgt = TDM_DEFAULT_TPGT;
        if (!(m = cfg_member(s, "iqn", field, f)))
                return cfg_fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = cfg_get_string(p, m, f, t->iqn, sizeof(t->iqn))))
                return rc;
        if ((m = cfg_member(s, "alias", field, f)) &&
            (rc = cfg_get_string(p, m, f, t->alias, sizeof(t->alias))))
                return rc;
        if ((m = cfg_member(s, "tpgt", field, f))) {
                uint64_t v = 0;
                if ((rc = cfg_get_uint(p, m, f, 1, 65535, &v)))
                        return rc;
                t->tpgt = (uint16_t)v;
        }
        if ((m = cfg_member(s, "acl", field, f)) && (rc = parse_acl(p, m, f, t)))
                return rc;
        if ((m = cfg_member(s, "chap", field, f)) && (rc = parse_chap(p, m, f, &t->chap)))
                return rc;
        if ((m = cfg_member(s, "luns", field, f)))
                return parse_luns(p, m, f, t);
        return 0;
}

static int parse_targets(struct cfg_parser *p, const config_setting_t *s)
{
        if (!config_setting_is_list(s))
                return cfg_fail(p->err, p->errlen, -EINVAL, "targets",
                                "must be a list ( { ... }, ... )");
        size_t n = (size_t)config_setting_length(s);
        if (n == 0)
                return 0;
        p->cfg->targets = calloc(n, sizeof(*p->cfg->targets));
        if (!p->cfg->targets)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                char f[FIELD_MAX];
                cfg_field_index(f, "targets", i);
                p->cfg->n_targets = i + 1;
                int rc = parse_target(p, config_setting_get_elem(s, (unsigned)i), f,
                                      &p->cfg->targets[i]);
                if (rc)
                        return rc;
        }
        return 0;
}

static int parse_cluster(struct cfg_parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {"enabled", "group", "fence_peer", NULL};
        struct tdm_cluster_cfg *c = &p->cfg->cluster;
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, "cluster", keys)))
                return rc;
        if ((m = cfg_member(s, "enabled", "cluster", f)) &&
            (rc = cfg_get_bool(p, m, f, &c->enabled)))
                return rc;
        if ((m = cfg_member(s, "group", "cluster", f)) &&
            (rc = cfg_get_string(p, m, f, c->group, sizeof(c->group))))
                return rc;
        if ((m = cfg_member(s, "fence_peer", "cluster", f)) &&
            (rc = cfg_get_string(p, m, f, c->fence_peer, sizeof(c->fence_peer))))
                return rc;
        return 0;
}

static int parse_metrics(struct cfg_parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {"listen", NULL};
        struct tdm_metrics_cfg *c = &p->cfg->metrics;
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, s, "metrics", keys)))
                return rc;
        if ((m = cfg_member(s, "listen", "metrics", f)) &&
            (rc = cfg_get_string(p, m, f, c->listen, sizeof(c->listen))))
                return rc;
        return 0;
}

static int parse_discovery(struct cfg_parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {"chap", NULL};
        char f[FIELD_MAX];
        int rc;
        if ((rc = cfg_check_members(p, s, "discovery", keys)))
                return rc;
        const config_setting_t *ch = cfg_member(s, "chap", "discovery", f);
        if (ch)
                return parse_chap(p, ch, f, &p->cfg->discovery_chap);
        return 0;
}

static int parse_root(struct cfg_parser *p, const config_setting_t *root)
{
        static const char *const keys[] = {"instance", "state_dir", "listen",    "threads",
                                           "log",      "iscsi",     "discovery", "targets",
                                           "node_id",  "cluster",   "metrics",   NULL};
        struct tdm_config *c = p->cfg;
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = cfg_check_members(p, root, "", keys)))
                return rc;
        if ((m = cfg_member(root, "instance", "", f)) &&
            (rc = cfg_get_string(p, m, f, c->instance, sizeof(c->instance))))
                return rc;
        if ((m = cfg_member(root, "state_dir", "", f)) &&
            (rc = cfg_get_string(p, m, f, c->state_dir, sizeof(c->state_dir))))
                return rc;
        if ((m = cfg_member(root, "listen", "", f)) &&
            (rc = cfg_get_string_list(p, m, f, c->listen[0], sizeof(c->listen[0]), TDM_MAX_LISTEN,
                                      &c->n_listen)))
                return rc;
        if ((m = cfg_member(root, "threads", "", f))) {
                uint64_t v = 0;
                if ((rc = cfg_get_uint(p, m, f, 0, 1024, &v)))
                        return rc;
                c->threads = (unsigned)v;
        }
        if ((m = cfg_member(root, "node_id", "", f)) &&
            (rc = cfg_get_u32(p, m, f, 1, 255, &c->node_id)))
                return rc;
        if (((m = cfg_member(root, "log", "", f)) && (rc = parse_log(p, m))) ||
            ((m = cfg_member(root, "iscsi", "", f)) && (rc = parse_iscsi(p, m))) ||
            ((m = cfg_member(root, "discovery", "", f)) && (rc = parse_discovery(p, m))) ||
            ((m = cfg_member(root, "targets", "", f)) && (rc = parse_targets(p, m))) ||
            ((m = cfg_member(root, "cluster", "", f)) && (rc = parse_cluster(p, m))) ||
            ((m = cfg_member(root, "metrics", "", f)) && (rc = parse_metrics(p, m))))
                return rc;
        return 0;
}

/* Parses an already read libconfig tree into cfg (defaults first), then validates. */
static int config_from_tree(config_t *lc, struct tdm_config *cfg, char *err, size_t errlen)
{
        struct cfg_parser p = {.err = err, .errlen = errlen, .cfg = cfg};
        tdm_config_defaults(cfg);
        int rc = parse_root(&p, config_root_setting(lc));
        if (rc == -ENOMEM)
                cfg_fail(err, errlen, rc, "config", "out of memory");
        if (rc == 0)
                rc = tdm_config_validate(cfg, err, errlen);
        if (rc)
                tdm_config_free(cfg);
        return rc;
}

int tdm_config_parse_string(const char *text, struct tdm_config *cfg, char *err, size_t errlen)
{
        config_t lc;
        config_init(&lc);
        int rc;
        if (config_read_string(&lc, text) != CONFIG_TRUE) {
                tdm_config_defaults(cfg);
                rc = cfg_fail(err, errlen, -EINVAL, NULL, "line %d: %s", config_error_line(&lc),
                              config_error_text(&lc));
        } else {
                rc = config_from_tree(&lc, cfg, err, errlen);
        }
        config_destroy(&lc);
        return rc;
}

int tdm_config_load(const char *path, struct tdm_config *cfg, char *err, size_t errlen)
{
        tdm_config_defaults(cfg);
        FILE *f = fopen(path, "r");
        if (!f) {
                int e = errno;
                return cfg_fail(err, errlen, -e, path, "cannot open: %s", strerror(e));
        }
        config_t lc;
        config_init(&lc);
        int rc;
        if (config_read(&lc, f) != CONFIG_TRUE)
                rc = cfg_fail(err, errlen, -EINVAL, path, "line %d: %s", config_error_line(&lc),
                              config_error_text(&lc));
        else
                rc = config_from_tree(&lc, cfg, err, errlen);
        config_destroy(&lc);
        fclose(f);
        return rc;
}
