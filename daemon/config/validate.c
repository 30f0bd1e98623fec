/*
 * Validation of a whole configuration: every rule the daemon relies on, each refusal naming
 * the field ("targets[0].luns[1].size: must be a positive multiple of 512"). The replication
 * groups are checked in validate_repl.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "config_internal.h"

#define REPL_IDENTITY_MSG "a replicated LUN needs the same naa and serial on every node; set both"

/* A secret of CHAP: RFC 7143 12.1.3 wants at least 96 bits. */
static int check_chap_secret(const char *secret, const char *f, char *err, size_t errlen)
{
        size_t sl = strnlen(secret, TDM_CHAP_MAX);
        if (sl < TDM_CHAP_SECRET_MIN || sl >= TDM_CHAP_MAX || !cfg_printable(secret))
                return cfg_fail(
                    err, errlen, -EINVAL, f,
                    "must be %d..%d printable characters (RFC 7143 wants at least 96 bits)",
                    TDM_CHAP_SECRET_MIN, TDM_CHAP_MAX - 1);
        return 0;
}

static int check_chap_user(const char *user, const char *f, char *err, size_t errlen)
{
        if (user[0] == '\0' || !cfg_printable(user) || strnlen(user, TDM_CHAP_MAX) >= TDM_CHAP_MAX)
                return cfg_fail(err, errlen, -EINVAL, f, "must be 1..%d printable characters",
                                TDM_CHAP_MAX - 1);
        return 0;
}

int tdm_chap_check(const struct tdm_chap_cfg *chap, const char *field, char *err, size_t errlen)
{
        char f[FIELD_MAX];
        int rc;
        if (!chap->enabled) {
                if (chap->mutual)
                        return cfg_fail(err, errlen, -EINVAL, field,
                                        "mutual CHAP needs CHAP (user and secret) too");
                return 0;
        }
        cfg_field_join(f, field, "user");
        if ((rc = check_chap_user(chap->user, f, err, errlen)))
                return rc;
        cfg_field_join(f, field, "secret");
        if ((rc = check_chap_secret(chap->secret, f, err, errlen)))
                return rc;
        if (!chap->mutual)
                return 0;
        cfg_field_join(f, field, "mutual_user");
        if ((rc = check_chap_user(chap->mutual_user, f, err, errlen)))
                return rc;
        cfg_field_join(f, field, "mutual_secret");
        if ((rc = check_chap_secret(chap->mutual_secret, f, err, errlen)))
                return rc;
        /* RFC 7143 12.1.3: a secret used one way must not be used the other way. */
        if (strcmp(chap->mutual_secret, chap->secret) == 0)
                return cfg_fail(err, errlen, -EINVAL, f,
                                "must differ from the secret (RFC 7143 12.1.3)");
        return 0;
}

int tdm_physical_block_size_check(uint32_t physical_block_size, uint32_t block_size,
                                  const char *field, char *err, size_t errlen)
{
        uint32_t pbs = physical_block_size;
        if (pbs == 0)
                return 0;
        if (pbs < block_size || pbs > TDM_MAX_PHYSICAL_BLOCK_SIZE || (pbs & (pbs - 1)))
                return cfg_fail(err, errlen, -EINVAL, field,
                                "must be block_size (%u) times a power of two, at most %u, got %u",
                                block_size, TDM_MAX_PHYSICAL_BLOCK_SIZE, pbs);
        return 0;
}

static int validate_iscsi(const struct tdm_iscsi_cfg *c, char *err, size_t errlen)
{
        int rc;
        for (size_t i = 0; i < cfg_n_iscsi_rules; i++) {
                const struct cfg_iscsi_rule *r = &cfg_iscsi_rules[i];
                char f[FIELD_MAX];
                cfg_field_join(f, "iscsi", r->name);
                if ((rc = cfg_check_range(cfg_iscsi_value(c, r), r->lo, r->hi, f, err, errlen)))
                        return rc;
        }
        if (c->first_burst > c->max_burst)
                return cfg_fail(err, errlen, -EINVAL, "iscsi.first_burst",
                                "must not exceed iscsi.max_burst (%u), got %u", c->max_burst,
                                c->first_burst);
        if (c->max_sessions_per_initiator > c->max_sessions)
                return cfg_fail(err, errlen, -EINVAL, "iscsi.max_sessions_per_initiator",
                                "must not exceed iscsi.max_sessions (%u), got %u", c->max_sessions,
                                c->max_sessions_per_initiator);
        return 0;
}

int cfg_validate_lun(const struct tdm_lun_cfg *l, const char *f, char *err, size_t errlen)
{
        char g[FIELD_MAX];
        int rc;
        cfg_field_join(g, f, "lun");
        if ((rc = cfg_check_range(l->lun, 0, TDM_LUN_ID_MAX, g, err, errlen)))
                return rc;
        cfg_field_join(g, f, "path");
        if (l->path[0] == '\0')
                return cfg_fail(err, errlen, -EINVAL, g, "missing (required)");
        if (!cfg_path_absolute(l->path))
                return cfg_fail(err, errlen, -EINVAL, g, "must be an absolute path, got \"%s\"",
                                l->path);
        cfg_field_join(g, f, "block_size");
        uint32_t bs = l->block_size;
        if (!cfg_block_size_ok(bs))
                return cfg_fail(err, errlen, -EINVAL, g, "must be 512, 1024, 2048 or 4096, got %u",
                                bs);
        cfg_field_join(g, f, "physical_block_size");
        if ((rc = tdm_physical_block_size_check(l->physical_block_size, bs, g, err, errlen)))
                return rc;
        cfg_field_join(g, f, "size");
        if (l->size % bs != 0)
                return cfg_fail(err, errlen, -EINVAL, g, "must be a positive multiple of %u", bs);
        /* The file holds it as a signed 64-bit integer (and file offsets are off_t): a larger
         * size, possible with a unit ("16000P"), would be saved as one the next load refuses. */
        if (l->size > INT64_MAX)
                return cfg_fail(err, errlen, -EINVAL, g,
                                "must be at most %" PRId64 " bytes, got %" PRIu64, INT64_MAX,
                                l->size);
        if (l->readonly && l->size)
                return cfg_fail(err, errlen, -EINVAL, g, CFG_READONLY_SIZE_MSG);
        if (l->repl.enabled && (l->naa[0] == '\0' || l->serial[0] == '\0')) {
                /* A generated identity would differ between the nodes. */
                cfg_field_join(g, f, l->naa[0] == '\0' ? "naa" : "serial");
                return cfg_fail(err, errlen, -EINVAL, g, REPL_IDENTITY_MSG);
        }
        cfg_field_join(g, f, "naa");
        if (!tdm_naa_valid(l->naa))
                return cfg_fail(err, errlen, -EINVAL, g,
                                "must be 32 hex digits starting with 6 (NAA type 6), got \"%s\"",
                                l->naa);
        cfg_field_join(g, f, "serial");
        if (!tdm_serial_valid(l->serial))
                return cfg_fail(err, errlen, -EINVAL, g,
                                "must be 1..32 characters of A-Z a-z 0-9 - _ ., got \"%s\"",
                                l->serial);
        return 0;
}

/* Identity and storage must be unique across the whole configuration. */
static int validate_lun_unique(const struct tdm_config *cfg, size_t ti, size_t li, const char *f,
                               char *err, size_t errlen)
{
        const struct tdm_lun_cfg *l = &cfg->targets[ti].luns[li];
        char g[FIELD_MAX];
        for (size_t tj = 0; tj <= ti; tj++) {
                const struct tdm_target_cfg *t = &cfg->targets[tj];
                size_t end = tj == ti ? li : t->n_luns;
                for (size_t lj = 0; lj < end; lj++) {
                        const struct tdm_lun_cfg *o = &t->luns[lj];
                        if (tj == ti && o->lun == l->lun) {
                                cfg_field_join(g, f, "lun");
                                return cfg_fail(err, errlen, -EINVAL, g,
                                                "%" PRIu64 " is used twice in this target", l->lun);
                        }
                        const char *what = NULL;
                        if (strcmp(o->path, l->path) == 0)
                                what = "path";
                        else if (strcasecmp(o->naa, l->naa) == 0)
                                what = "naa";
                        else if (strcmp(o->serial, l->serial) == 0)
                                what = "serial";
                        if (what) {
                                cfg_field_join(g, f, what);
                                return cfg_fail(err, errlen, -EINVAL, g,
                                                "already used by targets[%zu].luns[%zu]", tj, lj);
                        }
                }
        }
        return 0;
}

static int validate_acl(const struct tdm_target_cfg *t, const char *f, char *err, size_t errlen)
{
        char g[FIELD_MAX], h[FIELD_MAX];
        cfg_field_join(g, f, "acl");
        for (size_t a = 0; a < t->n_acl; a++) {
                cfg_field_index(h, g, a);
                if (strcmp(t->acl[a], "ALL") != 0 && !tdm_iscsi_name_valid(t->acl[a]))
                        return cfg_fail(err, errlen, -EINVAL, h,
                                        "\"%s\" is neither ALL nor an iSCSI initiator name",
                                        t->acl[a]);
                for (size_t b = 0; b < a; b++)
                        if (tdm_iscsi_name_equal(t->acl[a], t->acl[b]))
                                return cfg_fail(err, errlen, -EINVAL, h, "\"%s\" is listed twice",
                                                t->acl[a]);
        }
        if (t->n_acl > TDM_MAX_ACL)
                return cfg_fail(err, errlen, -EINVAL, g, "at most %d entries", TDM_MAX_ACL);
        return 0;
}

static int validate_target(const struct tdm_config *cfg, size_t ti, char *err, size_t errlen)
{
        const struct tdm_target_cfg *t = &cfg->targets[ti];
        char f[FIELD_MAX], g[FIELD_MAX];
        int rc;
        cfg_field_index(f, "targets", ti);
        cfg_field_join(g, f, "iqn");
        if (t->iqn[0] == '\0')
                return cfg_fail(err, errlen, -EINVAL, g, "missing (required)");
        if (!tdm_iscsi_name_valid(t->iqn))
                return cfg_fail(err, errlen, -EINVAL, g,
                                "\"%s\" is not an iSCSI name " TDM_ISCSI_NAME_FORMS, t->iqn);
        for (size_t j = 0; j < ti; j++)
                if (tdm_iscsi_name_equal(cfg->targets[j].iqn, t->iqn))
                        return cfg_fail(err, errlen, -EINVAL, g, "\"%s\" is already targets[%zu]",
                                        t->iqn, j);
        cfg_field_join(g, f, "alias");
        if (!cfg_printable(t->alias))
                return cfg_fail(err, errlen, -EINVAL, g, "must be printable characters");
        cfg_field_join(g, f, "tpgt");
        if ((rc = cfg_check_range(t->tpgt, 1, 65535, g, err, errlen)))
                return rc;
        if ((rc = validate_acl(t, f, err, errlen)))
                return rc;
        cfg_field_join(g, f, "chap");
        if ((rc = tdm_chap_check(&t->chap, g, err, errlen)))
                return rc;
        cfg_field_join(g, f, "luns");
        if (t->n_luns > TDM_LUN_ID_MAX + 1)
                return cfg_fail(err, errlen, -EINVAL, g, "at most %d LUNs", TDM_LUN_ID_MAX + 1);
        for (size_t li = 0; li < t->n_luns; li++) {
                char lf[FIELD_MAX];
                cfg_field_index(lf, g, li);
                if ((rc = cfg_validate_lun(&t->luns[li], lf, err, errlen)) ||
                    (rc = validate_lun_unique(cfg, ti, li, lf, err, errlen)) ||
                    (rc = cfg_validate_repl(cfg, ti, li, lf, err, errlen)))
                        return rc;
        }
        return 0;
}

static int validate_cluster(const struct tdm_config *cfg, char *err, size_t errlen)
{
        const struct tdm_cluster_cfg *c = &cfg->cluster;
        /* The same alphabet as instance names: it is also a CPG group name in logs. */
        if (!tdm_instance_name_valid(c->group))
                return cfg_fail(err, errlen, -EINVAL, "cluster.group",
                                "must be 1..63 characters of A-Z a-z 0-9 - _ . (not starting with "
                                ".), got \"%s\"",
                                c->group);
        if (c->enabled && (cfg->node_id < 1 || cfg->node_id > 255))
                return cfg_fail(err, errlen, -EINVAL, "node_id",
                                "must be set (1..255) when cluster.enabled is true; it must equal "
                                "this node's nodeid in corosync.conf");
        if (c->fence_peer[0] && !cfg_path_absolute(c->fence_peer))
                return cfg_fail(err, errlen, -EINVAL, "cluster.fence_peer",
                                "must be an absolute path, got \"%s\"", c->fence_peer);
        return 0;
}

/* The timer chain in cluster mode: a dead peer noticed within 2 s, writes held at most 10 s. */
static int validate_cluster_timers(const struct tdm_config *cfg, char *err, size_t errlen)
{
        if (!cfg->cluster.enabled)
                return 0;
        for (size_t t = 0; t < cfg->n_targets; t++)
                for (size_t l = 0; l < cfg->targets[t].n_luns; l++) {
                        const struct tdm_lun_cfg *lun = &cfg->targets[t].luns[l];
                        if (!lun->repl.enabled ||
                            lun->repl.timeout_ms <= TDM_CLUSTER_REPL_TIMEOUT_MAX_MS)
                                continue;
                        char f[FIELD_MAX];
                        snprintf(f, sizeof(f), "targets[%zu].luns[%zu].replication.timeout", t, l);
                        return cfg_fail(err, errlen, -EINVAL, f,
                                        "%u ms: with cluster.enabled a dead peer must be noticed "
                                        "within %u ms (then writes are held until it is outdated, "
                                        "%u ms in all at most)",
                                        lun->repl.timeout_ms, TDM_CLUSTER_REPL_TIMEOUT_MAX_MS,
                                        TDM_CLUSTER_IO_HOLD_MAX_MS);
                }
        return 0;
}

static int validate_listen(const struct tdm_config *cfg, char *err, size_t errlen)
{
        if (cfg->n_listen == 0 || cfg->n_listen > TDM_MAX_LISTEN)
                return cfg_fail(err, errlen, -EINVAL, "listen", "must have 1..%d addresses",
                                TDM_MAX_LISTEN);
        for (size_t i = 0; i < cfg->n_listen; i++) {
                char f[FIELD_MAX], host[128];
                uint16_t port;
                cfg_field_index(f, "listen", i);
                if (tdm_parse_hostport(cfg->listen[i], host, sizeof(host), &port) < 0)
                        return cfg_fail(
                            err, errlen, -EINVAL, f,
                            "\"%s\" is not ADDR[:PORT] or [IPV6][:PORT] (port 1..65535)",
                            cfg->listen[i]);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(cfg->listen[i], cfg->listen[j]) == 0)
                                return cfg_fail(err, errlen, -EINVAL, f, "\"%s\" is listed twice",
                                                cfg->listen[i]);
        }
        return 0;
}

/* The exporter: off, or a numeric address of its own (not one of the iSCSI portals). */
static int validate_metrics(const struct tdm_config *cfg, char *err, size_t errlen)
{
        const char *l = cfg->metrics.listen;
        if (!l[0])
                return 0;
        if (tdm_parse_ip_port(l, NULL, NULL) < 0)
                return cfg_fail(err, errlen, -EINVAL, "metrics.listen",
                                "\"%s\" is not IP:PORT or [IPV6]:PORT (a numeric address and a "
                                "port 1..65535, e.g. \"127.0.0.1:9750\")",
                                l);
        for (size_t i = 0; i < cfg->n_listen; i++)
                if (strcmp(l, cfg->listen[i]) == 0)
                        return cfg_fail(err, errlen, -EINVAL, "metrics.listen",
                                        "\"%s\" is also an iSCSI portal (listen[%zu])", l, i);
        return 0;
}

int tdm_config_validate(const struct tdm_config *cfg, char *err, size_t errlen)
{
        int rc;
        if (!tdm_instance_name_valid(cfg->instance))
                return cfg_fail(err, errlen, -EINVAL, "instance",
                                "must be 1..63 characters of A-Z a-z 0-9 - _ . (not starting with "
                                ".), got \"%s\"",
                                cfg->instance);
        if (!cfg_path_absolute(cfg->state_dir))
                return cfg_fail(err, errlen, -EINVAL, "state_dir",
                                "must be an absolute path, got \"%s\"", cfg->state_dir);
        if (cfg->log_file[0] && !cfg_path_absolute(cfg->log_file))
                return cfg_fail(err, errlen, -EINVAL, "log.file",
                                "must be an absolute path, got \"%s\"", cfg->log_file);
        if ((rc = cfg_check_range((uint64_t)(cfg->log_level < 0 ? 99 : cfg->log_level), LOG_EMERG,
                                  LOG_DEBUG, "log.level", err, errlen)) ||
            (rc = validate_listen(cfg, err, errlen)) ||
            (rc = cfg_check_range(cfg->threads, 0, 1024, "threads", err, errlen)) ||
            (rc = cfg_check_range(cfg->node_id, 0, 255, "node_id", err, errlen)) ||
            (rc = validate_iscsi(&cfg->iscsi, err, errlen)) ||
            (rc = validate_cluster(cfg, err, errlen)) ||
            (rc = validate_cluster_timers(cfg, err, errlen)) ||
            (rc = validate_metrics(cfg, err, errlen)) ||
            (rc = tdm_chap_check(&cfg->discovery_chap, "discovery.chap", err, errlen)))
                return rc;
        for (size_t i = 0; i < cfg->n_targets; i++)
                if ((rc = validate_target(cfg, i, err, errlen)))
                        return rc;
        return 0;
}
