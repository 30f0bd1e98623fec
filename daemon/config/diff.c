/*
 * The difference between the running configuration and the file a reload reads, as the
 * operations tandemd applies live (include/tandem/config_diff.h). Pure: no I/O, no registry.
 *
 * What cannot change while tandemd serves is a rule in a table: the daemon-wide settings
 * (fixed at start: threads, state dir, the iSCSI parameters sessions negotiated, the
 * cluster), and of a target or a LUN everything but its LUNs, ACL and CHAP, and a LUN's
 * size growing. Such a change is refused with the field's name; the admin restarts tandemd
 * or deletes and adds the target or LUN.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"
#include "tandem/config_diff.h"

struct fixed_field {
        const char *name;
        size_t off, size;
};

#define CONFIG_FIELD(name, member)                                                                 \
        {                                                                                          \
                name, offsetof(struct tdm_config, member),                                         \
                    sizeof(((struct tdm_config *)0)->member)                                       \
        }
#define LUN_FIELD(name, member)                                                                    \
        {                                                                                          \
                name, offsetof(struct tdm_lun_cfg, member),                                        \
                    sizeof(((struct tdm_lun_cfg *)0)->member)                                      \
        }
#define TARGET_FIELD(name, member)                                                                 \
        {                                                                                          \
                name, offsetof(struct tdm_target_cfg, member),                                     \
                    sizeof(((struct tdm_target_cfg *)0)->member)                                   \
        }

static const struct fixed_field daemon_fixed[] = {
    CONFIG_FIELD("instance", instance),   CONFIG_FIELD("state_dir", state_dir),
    CONFIG_FIELD("threads", threads),     CONFIG_FIELD("log.file", log_file),
    CONFIG_FIELD("log.level", log_level), CONFIG_FIELD("log.syslog", log_syslog),
    CONFIG_FIELD("iscsi", iscsi),         CONFIG_FIELD("node_id", node_id),
    CONFIG_FIELD("cluster", cluster),     CONFIG_FIELD("metrics", metrics),
};

static const struct fixed_field target_fixed[] = {
    TARGET_FIELD("alias", alias),
    TARGET_FIELD("tpgt", tpgt),
};

static const struct fixed_field lun_fixed[] = {
    LUN_FIELD("path", path),
    LUN_FIELD("block_size", block_size),
    LUN_FIELD("physical_block_size", physical_block_size),
    LUN_FIELD("thin", thin),
    LUN_FIELD("direct", direct),
    LUN_FIELD("readonly", readonly),
    LUN_FIELD("wce", wce),
    LUN_FIELD("replication", repl),
};

/* Checked only when the file names the identity (one generated on reading is not a change). */
static const struct fixed_field lun_identity[] = {
    LUN_FIELD("naa", naa),
    LUN_FIELD("serial", serial),
};

/* The first field of the table that differs between a and b, or NULL. */
static const struct fixed_field *first_changed(const struct fixed_field *t, size_t n, const void *a,
                                               const void *b)
{
        for (size_t i = 0; i < n; i++)
                if (memcmp((const char *)a + t[i].off, (const char *)b + t[i].off, t[i].size))
                        return &t[i];
        return NULL;
}

static int refuse(char *err, size_t errlen, const char *prefix, const char *name, const char *what)
{
        char f[FIELD_MAX];
        cfg_field_join(f, prefix, name);
        return cfg_fail(err, errlen, -EINVAL, f, "cannot change while tandemd runs: %s", what);
}

static int push(struct tdm_changes *c, struct tdm_change ch)
{
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 16;
                struct tdm_change *v = realloc(c->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                c->v = v;
                c->cap = cap;
        }
        c->v[c->n++] = ch;
        return 0;
}

void tdm_changes_free(struct tdm_changes *c)
{
        free(c->v);
        *c = (struct tdm_changes){0};
}

static const struct tdm_target_cfg *find_target(const struct tdm_config *cfg, const char *iqn)
{
        for (size_t i = 0; i < cfg->n_targets; i++)
                if (strcasecmp(cfg->targets[i].iqn, iqn) == 0)
                        return &cfg->targets[i];
        return NULL;
}

static const struct tdm_lun_cfg *find_lun(const struct tdm_target_cfg *t, uint64_t lun)
{
        for (size_t i = 0; i < t->n_luns; i++)
                if (t->luns[i].lun == lun)
                        return &t->luns[i];
        return NULL;
}

static bool has_acl(const struct tdm_target_cfg *t, const char *initiator)
{
        for (size_t i = 0; i < t->n_acl; i++)
                if (strcasecmp(t->acl[i], initiator) == 0)
                        return true;
        return false;
}

static bool has_listen(const struct tdm_config *cfg, const char *addr)
{
        for (size_t i = 0; i < cfg->n_listen; i++)
                if (strcmp(cfg->listen[i], addr) == 0)
                        return true;
        return false;
}

static bool same_listen(const struct tdm_config *a, const struct tdm_config *b)
{
        if (a->n_listen != b->n_listen)
                return false;
        for (size_t i = 0; i < a->n_listen; i++)
                if (!has_listen(b, a->listen[i]))
                        return false;
        return true;
}

/* The daemon-wide settings: the file's at start against the file's now. */
static int diff_daemon(const struct tdm_config *base, const struct tdm_config *cur,
                       const struct tdm_config *next, struct tdm_changes *out, char *err,
                       size_t errlen)
{
        const struct fixed_field *f =
            first_changed(daemon_fixed, sizeof(daemon_fixed) / sizeof(daemon_fixed[0]), base, next);
        if (f)
                return refuse(err, errlen, "", f->name, "restart tandemd to apply it");
        if (same_listen(base, next))
                return 0;
        if (!same_listen(base, cur))
                return refuse(err, errlen, "", "listen",
                              "tandemd was started with --listen, which overrides it");
        int rc = 0;
        for (size_t i = 0; i < next->n_listen && rc == 0; i++)
                if (!has_listen(cur, next->listen[i]))
                        rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_LISTEN_ADD,
                                                           .listen = next->listen[i]});
        for (size_t i = 0; i < cur->n_listen && rc == 0; i++)
                if (!has_listen(next, cur->listen[i]))
                        rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_LISTEN_DEL,
                                                           .listen = cur->listen[i]});
        return rc;
}

/* A LUN in both: only its size may grow. */
static int diff_lun(const struct tdm_target_cfg *t, const struct tdm_lun_cfg *was,
                    const struct tdm_lun_cfg *now, const char *prefix, struct tdm_changes *out,
                    char *err, size_t errlen)
{
        const struct fixed_field *f =
            first_changed(lun_fixed, sizeof(lun_fixed) / sizeof(lun_fixed[0]), was, now);
        if (!f && !now->identity_generated)
                f = first_changed(lun_identity, sizeof(lun_identity) / sizeof(lun_identity[0]), was,
                                  now);
        if (f)
                return refuse(err, errlen, prefix, f->name,
                              "delete the LUN and add it again, or restart tandemd");
        if (now->size == was->size)
                return 0;
        if (now->size < was->size) {
                char field[FIELD_MAX];
                cfg_field_join(field, prefix, "size");
                return cfg_fail(err, errlen, -EINVAL, field,
                                "%" PRIu64 " bytes is smaller than %" PRIu64
                                ": a LUN is never shrunk",
                                now->size, was->size);
        }
        return push(out, (struct tdm_change){.kind = TDM_CHANGE_LUN_RESIZE,
                                             .iqn = t->iqn,
                                             .lun_id = now->lun,
                                             .size = now->size});
}

/* A target in both: its LUNs, ACL and CHAP. */
static int diff_target(const struct tdm_target_cfg *was, const struct tdm_target_cfg *now,
                       const char *prefix, struct tdm_changes *out, char *err, size_t errlen)
{
        const struct fixed_field *f =
            first_changed(target_fixed, sizeof(target_fixed) / sizeof(target_fixed[0]), was, now);
        if (f)
                return refuse(err, errlen, prefix, f->name,
                              "delete the target and add it again, or restart tandemd");
        int rc = 0;
        for (size_t i = 0; i < now->n_luns && rc == 0; i++) {
                char lp[FIELD_MAX], luns[FIELD_MAX];
                cfg_field_join(luns, prefix, "luns");
                cfg_field_index(lp, luns, i);
                const struct tdm_lun_cfg *old = find_lun(was, now->luns[i].lun);
                rc = old ? diff_lun(now, old, &now->luns[i], lp, out, err, errlen)
                         : push(out, (struct tdm_change){.kind = TDM_CHANGE_LUN_ADD,
                                                         .iqn = now->iqn,
                                                         .lun = &now->luns[i]});
        }
        for (size_t i = 0; i < now->n_acl && rc == 0; i++)
                if (!has_acl(was, now->acl[i]))
                        rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_ACL_ADD,
                                                           .iqn = now->iqn,
                                                           .initiator = now->acl[i]});
        if (rc == 0 && memcmp(&was->chap, &now->chap, sizeof(now->chap)))
                rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_CHAP_SET,
                                                   .iqn = now->iqn,
                                                   .chap = &now->chap});
        for (size_t i = 0; i < was->n_acl && rc == 0; i++)
                if (!has_acl(now, was->acl[i]))
                        rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_ACL_DEL,
                                                           .iqn = now->iqn,
                                                           .initiator = was->acl[i]});
        for (size_t i = 0; i < was->n_luns && rc == 0; i++)
                if (!find_lun(now, was->luns[i].lun))
                        rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_LUN_DEL,
                                                           .iqn = now->iqn,
                                                           .lun_id = was->luns[i].lun});
        return rc;
}

/* A new target: created, then its LUNs, ACL and CHAP as additions. A live target starts with
 * the default alias and tag (tandemctl target add has no others). */
static int add_target(const struct tdm_target_cfg *t, const char *prefix, struct tdm_changes *out,
                      char *err, size_t errlen)
{
        if (t->alias[0])
                return refuse(err, errlen, prefix, "alias",
                              "a target added live has none; restart tandemd to give it one");
        if (t->tpgt != TDM_DEFAULT_TPGT)
                return refuse(err, errlen, prefix, "tpgt",
                              "a target added live has the default; restart tandemd");
        int rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_TARGET_ADD, .iqn = t->iqn});
        for (size_t i = 0; i < t->n_luns && rc == 0; i++)
                rc = push(out, (struct tdm_change){
                                   .kind = TDM_CHANGE_LUN_ADD, .iqn = t->iqn, .lun = &t->luns[i]});
        for (size_t i = 0; i < t->n_acl && rc == 0; i++)
                rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_ACL_ADD,
                                                   .iqn = t->iqn,
                                                   .initiator = t->acl[i]});
        if (rc == 0 && t->chap.enabled)
                rc = push(out, (struct tdm_change){
                                   .kind = TDM_CHANGE_CHAP_SET, .iqn = t->iqn, .chap = &t->chap});
        return rc;
}

/* Orders the changes by kind (the order they apply in), keeping the file's order within one. */
static int order_by_kind(struct tdm_changes *c)
{
        struct tdm_change *v = malloc((c->n ? c->n : 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        size_t n = 0;
        for (int k = TDM_CHANGE_LISTEN_ADD; k <= TDM_CHANGE_LISTEN_DEL; k++)
                for (size_t i = 0; i < c->n; i++)
                        if ((int)c->v[i].kind == k)
                                v[n++] = c->v[i];
        free(c->v);
        c->v = v;
        c->cap = c->n;
        return 0;
}

int tdm_config_diff(const struct tdm_config *base, const struct tdm_config *cur,
                    const struct tdm_config *next, struct tdm_changes *out, char *err,
                    size_t errlen)
{
        *out = (struct tdm_changes){0};
        int rc = diff_daemon(base, cur, next, out, err, errlen);
        for (size_t i = 0; i < next->n_targets && rc == 0; i++) {
                char tp[FIELD_MAX];
                cfg_field_index(tp, "targets", i);
                const struct tdm_target_cfg *old = find_target(cur, next->targets[i].iqn);
                rc = old ? diff_target(old, &next->targets[i], tp, out, err, errlen)
                         : add_target(&next->targets[i], tp, out, err, errlen);
        }
        for (size_t i = 0; i < cur->n_targets && rc == 0; i++)
                if (!find_target(next, cur->targets[i].iqn))
                        rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_TARGET_DEL,
                                                           .iqn = cur->targets[i].iqn});
        if (rc == 0 &&
            memcmp(&cur->discovery_chap, &next->discovery_chap, sizeof(next->discovery_chap)))
                rc = push(out, (struct tdm_change){.kind = TDM_CHANGE_CHAP_SET,
                                                   .chap = &next->discovery_chap});
        if (rc == 0)
                rc = order_by_kind(out);
        if (rc == -ENOMEM)
                cfg_fail(err, errlen, rc, NULL, "out of memory");
        if (rc < 0)
                tdm_changes_free(out);
        return rc;
}

void tdm_change_describe(const struct tdm_change *c, char *buf, size_t cap)
{
        switch (c->kind) {
        case TDM_CHANGE_LISTEN_ADD:
                snprintf(buf, cap, "portal %s added", c->listen);
                break;
        case TDM_CHANGE_LISTEN_DEL:
                snprintf(buf, cap, "portal %s removed (its sessions stay)", c->listen);
                break;
        case TDM_CHANGE_TARGET_ADD:
                snprintf(buf, cap, "target %s added", c->iqn);
                break;
        case TDM_CHANGE_TARGET_DEL:
                snprintf(buf, cap, "target %s deleted", c->iqn);
                break;
        case TDM_CHANGE_LUN_ADD:
                snprintf(buf, cap, "LUN %" PRIu64 " of %s added (%s)", c->lun->lun, c->iqn,
                         c->lun->path);
                break;
        case TDM_CHANGE_LUN_DEL:
                snprintf(buf, cap, "LUN %" PRIu64 " of %s deleted", c->lun_id, c->iqn);
                break;
        case TDM_CHANGE_LUN_RESIZE:
                snprintf(buf, cap, "LUN %" PRIu64 " of %s grown to %" PRIu64 " bytes", c->lun_id,
                         c->iqn, c->size);
                break;
        case TDM_CHANGE_ACL_ADD:
                snprintf(buf, cap, "%s may log in to %s", c->initiator, c->iqn);
                break;
        case TDM_CHANGE_ACL_DEL:
                snprintf(buf, cap, "%s removed from the ACL of %s", c->initiator, c->iqn);
                break;
        case TDM_CHANGE_CHAP_SET:
                snprintf(buf, cap, "CHAP of %s %s", c->iqn ? c->iqn : "discovery",
                         c->chap->enabled ? "set" : "cleared");
                break;
        }
}
