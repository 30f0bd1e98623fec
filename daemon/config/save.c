/*
 * Saving: struct tdm_config back into the file (libconfig syntax), atomically: a temporary
 * file in the same directory, fsync, rename, fsync of the directory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libconfig.h>

#include "config_internal.h"
#include "tandem/config_repl.h"
#include "tandem/fsutil.h"

static config_setting_t *add_str(config_setting_t *g, const char *name, const char *v)
{
        config_setting_t *s = config_setting_add(g, name, CONFIG_TYPE_STRING);
        if (s)
                config_setting_set_string(s, v);
        return s;
}

static config_setting_t *add_int(config_setting_t *g, const char *name, long long v)
{
        bool big = v > INT32_MAX || v < INT32_MIN;
        config_setting_t *s =
            config_setting_add(g, name, big ? CONFIG_TYPE_INT64 : CONFIG_TYPE_INT);
        if (s && big)
                config_setting_set_int64(s, v);
        else if (s)
                config_setting_set_int(s, (int)v);
        return s;
}

static config_setting_t *add_bool(config_setting_t *g, const char *name, bool v)
{
        config_setting_t *s = config_setting_add(g, name, CONFIG_TYPE_BOOL);
        if (s)
                config_setting_set_bool(s, v);
        return s;
}

static void add_strings(config_setting_t *g, const char *name, const char *slots, size_t slot_len,
                        size_t n)
{
        config_setting_t *a = config_setting_add(g, name, CONFIG_TYPE_ARRAY);
        for (size_t i = 0; i < n; i++)
                config_setting_set_string_elem(a, -1, slots + i * slot_len);
}

static void tree_chap(config_setting_t *g, const char *name, const struct tdm_chap_cfg *chap)
{
        if (!chap->enabled)
                return;
        config_setting_t *c = config_setting_add(g, name, CONFIG_TYPE_GROUP);
        add_str(c, "user", chap->user);
        add_str(c, "secret", chap->secret);
        if (chap->mutual) {
                add_str(c, "mutual_user", chap->mutual_user);
                add_str(c, "mutual_secret", chap->mutual_secret);
        }
}

static void tree_repl(config_setting_t *lun, const struct tdm_repl_cfg *r)
{
        if (!r->enabled)
                return;
        config_setting_t *g = config_setting_add(lun, "replication", CONFIG_TYPE_GROUP);
        add_str(g, "secret", r->secret);
        add_int(g, "port", r->port);
        config_setting_t *nodes = config_setting_add(g, "nodes", CONFIG_TYPE_LIST);
        for (size_t i = 0; i < r->n_nodes && i < TDM_REPL_MAX_NODES; i++) {
                config_setting_t *n = config_setting_add(nodes, NULL, CONFIG_TYPE_GROUP);
                add_int(n, "id", r->nodes[i].id);
                add_str(n, "name", r->nodes[i].name);
                add_str(n, "address", r->nodes[i].address);
        }
        if (r->metadata[0])
                add_str(g, "metadata", r->metadata);
        add_int(g, "timeout", r->timeout_ms);
        add_int(g, "resync_rate", (long long)r->resync_rate);
        add_int(g, "resync_min_rate", (long long)r->resync_min_rate);
        char sb[96];
        tdm_repl_split_brain_name(r, sb, sizeof(sb));
        add_str(g, "split_brain", sb);
        if (r->ports_per_node)
                add_str(g, "target_ports", "per_node");
        if (r->alua_explicit)
                add_str(g, "alua", "explicit");
        if (r->stpg_handler[0])
                add_str(g, "stpg_handler", r->stpg_handler);
        if (r->link_protection == TDM_LINK_PROTECT_ENCRYPT)
                add_str(g, "link_protection", "encrypt");
}

static void tree_lun(config_setting_t *list, const struct tdm_lun_cfg *l)
{
        config_setting_t *g = config_setting_add(list, NULL, CONFIG_TYPE_GROUP);
        add_int(g, "lun", (long long)l->lun);
        add_str(g, "path", l->path);
        if (l->size)
                config_setting_set_int64(config_setting_add(g, "size", CONFIG_TYPE_INT64),
                                         (long long)l->size);
        add_int(g, "block_size", l->block_size);
        if (l->physical_block_size)
                add_int(g, "physical_block_size", l->physical_block_size);
        add_bool(g, "thin", l->thin);
        add_bool(g, "direct", l->direct);
        add_bool(g, "wce", l->wce);
        if (l->readonly)
                add_bool(g, "readonly", true);
        add_str(g, "naa", l->naa);
        add_str(g, "serial", l->serial);
        tree_repl(g, &l->repl);
}

static void tree_target(config_setting_t *list, const struct tdm_target_cfg *t)
{
        config_setting_t *g = config_setting_add(list, NULL, CONFIG_TYPE_GROUP);
        add_str(g, "iqn", t->iqn);
        if (t->alias[0])
                add_str(g, "alias", t->alias);
        add_int(g, "tpgt", t->tpgt);
        add_strings(g, "acl", t->n_acl ? t->acl[0] : NULL, TDM_IQN_MAX, t->n_acl);
        tree_chap(g, "chap", &t->chap);
        config_setting_t *luns = config_setting_add(g, "luns", CONFIG_TYPE_LIST);
        for (size_t i = 0; i < t->n_luns; i++)
                tree_lun(luns, &t->luns[i]);
}

/* Written when it says anything but the defaults. */
static void tree_cluster(config_setting_t *root, const struct tdm_cluster_cfg *c)
{
        if (!c->enabled && strcmp(c->group, TDM_DEFAULT_CLUSTER_GROUP) == 0 && !c->fence_peer[0])
                return;
        config_setting_t *cl = config_setting_add(root, "cluster", CONFIG_TYPE_GROUP);
        add_bool(cl, "enabled", c->enabled);
        add_str(cl, "group", c->group);
        if (c->fence_peer[0])
                add_str(cl, "fence_peer", c->fence_peer);
}

/* Written only when the exporter is on. */
static void tree_metrics(config_setting_t *root, const struct tdm_metrics_cfg *c)
{
        if (!c->listen[0])
                return;
        config_setting_t *m = config_setting_add(root, "metrics", CONFIG_TYPE_GROUP);
        add_str(m, "listen", c->listen);
}

static void tree_iscsi(config_setting_t *root, const struct tdm_iscsi_cfg *c)
{
        config_setting_t *is = config_setting_add(root, "iscsi", CONFIG_TYPE_GROUP);
        for (size_t i = 0; i < cfg_n_iscsi_rules; i++)
                add_int(is, cfg_iscsi_rules[i].name, cfg_iscsi_value(c, &cfg_iscsi_rules[i]));
        add_bool(is, "initial_r2t", c->initial_r2t);
        add_bool(is, "immediate_data", c->immediate_data);
}

static void config_to_tree(const struct tdm_config *cfg, config_t *lc)
{
        config_setting_t *root = config_root_setting(lc);
        add_str(root, "instance", cfg->instance);
        add_str(root, "state_dir", cfg->state_dir);
        if (cfg->node_id)
                add_int(root, "node_id", cfg->node_id);
        tree_cluster(root, &cfg->cluster);
        tree_metrics(root, &cfg->metrics);
        add_strings(root, "listen", cfg->listen[0], sizeof(cfg->listen[0]), cfg->n_listen);
        add_int(root, "threads", cfg->threads);

        config_setting_t *log = config_setting_add(root, "log", CONFIG_TYPE_GROUP);
        if (cfg->log_file[0])
                add_str(log, "file", cfg->log_file);
        add_str(log, "level", cfg_log_levels[cfg->log_level & 7]);
        add_bool(log, "syslog", cfg->log_syslog);

        tree_iscsi(root, &cfg->iscsi);
        if (cfg->discovery_chap.enabled) {
                config_setting_t *d = config_setting_add(root, "discovery", CONFIG_TYPE_GROUP);
                tree_chap(d, "chap", &cfg->discovery_chap);
        }
        config_setting_t *targets = config_setting_add(root, "targets", CONFIG_TYPE_LIST);
        for (size_t i = 0; i < cfg->n_targets; i++)
                tree_target(targets, &cfg->targets[i]);
}

static const char save_header[] =
    "# tandem configuration (libconfig syntax). Rewritten by tandemd when the admin\n"
    "# changes targets, LUNs, ACLs or CHAP: comments are not kept. See\n"
    "# deploy/examples/tandem.conf for what every field means.\n\n";

/* The text into f, flushed and fsynced; 0 or -errno. */
static int write_synced(FILE *f, const struct tdm_config *cfg)
{
        config_t lc;
        errno = 0;
        config_init(&lc);
        config_set_options(&lc, CONFIG_OPTION_SEMICOLON_SEPARATORS);
        config_set_tab_width(&lc, 2);
        config_to_tree(cfg, &lc);
        fputs(save_header, f);
        config_write(&lc, f);
        config_destroy(&lc);
        if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) < 0)
                return errno ? -errno : -EIO;
        return 0;
}

int tdm_config_save(const char *path, const struct tdm_config *cfg, char *err, size_t errlen)
{
        int rc = tdm_config_validate(cfg, err, errlen);
        if (rc)
                return rc;
        char tmp[4096 + 16];
        if (snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= (int)sizeof(tmp))
                return cfg_fail(err, errlen, -ENAMETOOLONG, path, "path too long");
        /* Same directory as the target so rename() is atomic; 0600: it holds CHAP secrets. */
        int fd = mkstemp(tmp);
        if (fd < 0) {
                int e = errno;
                return cfg_fail(err, errlen, -e, path, "cannot create temporary file: %s",
                                strerror(e));
        }
        FILE *f = fdopen(fd, "w");
        if (!f) {
                rc = -errno;
                close(fd);
                goto out_unlink;
        }
        if ((rc = write_synced(f, cfg)) < 0) {
                fclose(f);
                goto out_unlink;
        }
        if (fclose(f) != 0) {
                rc = -errno;
                goto out_unlink;
        }
        if (rename(tmp, path) < 0) {
                rc = -errno;
                goto out_unlink;
        }
        rc = tdm_fsync_parent_dir(path);
        if (rc < 0)
                return cfg_fail(err, errlen, rc, path,
                                "saved, but syncing its directory failed: %s", strerror(-rc));
        return 0;
out_unlink:
        unlink(tmp);
        return cfg_fail(err, errlen, rc, path, "cannot save: %s", strerror(-rc));
}
