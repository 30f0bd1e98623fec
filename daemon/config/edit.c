/*
 * Edits the admin plane makes (tandemctl target/lun/acl/chap): each checks what it is
 * given with the rules validation applies, names the field the admin typed ("iqn", "lun",
 * "path", ...) when it refuses, and changes nothing then.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

static int find_target_or_fail(struct tdm_config *cfg, const char *iqn, struct tdm_target_cfg **out,
                               char *err, size_t errlen)
{
        *out = iqn ? tdm_config_find_target(cfg, iqn) : NULL;
        if (!*out)
                return cfg_fail(err, errlen, -ENOENT, "iqn", "no target \"%s\"",
                                iqn ? iqn : "(null)");
        return 0;
}

static int find_lun_or_fail(struct tdm_config *cfg, const char *iqn, uint64_t lun,
                            struct tdm_target_cfg **t, struct tdm_lun_cfg **out, char *err,
                            size_t errlen)
{
        int rc = find_target_or_fail(cfg, iqn, t, err, errlen);
        if (rc)
                return rc;
        *out = tdm_config_find_lun(*t, lun);
        if (!*out)
                return cfg_fail(err, errlen, -ENOENT, "lun", "no LUN %" PRIu64 " in %s", lun,
                                (*t)->iqn);
        return 0;
}

int tdm_config_add_target(struct tdm_config *cfg, const char *iqn, char *err, size_t errlen)
{
        if (!iqn || !tdm_iscsi_name_valid(iqn))
                return cfg_fail(err, errlen, -EINVAL, "iqn",
                                "\"%s\" is not an iSCSI name " TDM_ISCSI_NAME_FORMS,
                                iqn ? iqn : "");
        if (tdm_config_find_target(cfg, iqn))
                return cfg_fail(err, errlen, -EEXIST, "iqn", "target \"%s\" already exists", iqn);
        struct tdm_target_cfg *t = realloc(cfg->targets, (cfg->n_targets + 1) * sizeof(*t));
        if (!t)
                return cfg_fail(err, errlen, -ENOMEM, NULL, "out of memory");
        cfg->targets = t;
        t = &cfg->targets[cfg->n_targets++];
        memset(t, 0, sizeof(*t));
        snprintf(t->iqn, sizeof(t->iqn), "%s", iqn);
        t->tpgt = TDM_DEFAULT_TPGT;
        return 0;
}

int tdm_config_del_target(struct tdm_config *cfg, const char *iqn, char *err, size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        size_t i = (size_t)(t - cfg->targets);
        cfg_target_free(t);
        memmove(t, t + 1, (cfg->n_targets - i - 1) * sizeof(*t));
        cfg->n_targets--;
        return 0;
}

/* Where a LUN's storage is already used, or NULL. */
static const struct tdm_lun_cfg *lun_with_path(const struct tdm_config *cfg, const char *path,
                                               const char **iqn)
{
        for (size_t i = 0; i < cfg->n_targets; i++)
                for (size_t j = 0; j < cfg->targets[i].n_luns; j++)
                        if (strcmp(cfg->targets[i].luns[j].path, path) == 0) {
                                *iqn = cfg->targets[i].iqn;
                                return &cfg->targets[i].luns[j];
                        }
        return NULL;
}

int tdm_config_add_lun(struct tdm_config *cfg, const char *iqn, const struct tdm_lun_cfg *lun,
                       char *err, size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        struct tdm_lun_cfg l = *lun;
        if (l.block_size == 0)
                l.block_size = TDM_DEFAULT_BLOCK_SIZE;
        if ((rc = cfg_check_range(l.lun, 0, TDM_LUN_ID_MAX, "lun", err, errlen)))
                return rc;
        if (tdm_config_find_lun(t, l.lun))
                return cfg_fail(err, errlen, -EEXIST, "lun", "%" PRIu64 " already exists in %s",
                                l.lun, t->iqn);
        if (!cfg_path_absolute(l.path))
                return cfg_fail(err, errlen, -EINVAL, "path",
                                "must be an absolute path, got \"%s\"", l.path);
        const char *other_iqn;
        const struct tdm_lun_cfg *other = lun_with_path(cfg, l.path, &other_iqn);
        if (other)
                return cfg_fail(err, errlen, -EEXIST, "path", "%s is already LUN %" PRIu64 " of %s",
                                l.path, other->lun, other_iqn);
        /* A replicated LUN's identity must come from the file (validation says so). */
        if (!l.repl.enabled && l.naa[0] == '\0' && l.serial[0] == '\0')
                tdm_lun_identity_generate(&l);
        if ((rc = cfg_validate_lun(&l, "", err, errlen)))
                return rc;
        struct tdm_lun_cfg *luns = realloc(t->luns, (t->n_luns + 1) * sizeof(*luns));
        if (!luns)
                return cfg_fail(err, errlen, -ENOMEM, NULL, "out of memory");
        t->luns = luns;
        t->luns[t->n_luns++] = l;
        return 0;
}

int tdm_config_del_lun(struct tdm_config *cfg, const char *iqn, uint64_t lun, char *err,
                       size_t errlen)
{
        struct tdm_target_cfg *t;
        struct tdm_lun_cfg *l;
        int rc = find_lun_or_fail(cfg, iqn, lun, &t, &l, err, errlen);
        if (rc)
                return rc;
        size_t i = (size_t)(l - t->luns);
        memmove(l, l + 1, (t->n_luns - i - 1) * sizeof(*l));
        t->n_luns--;
        return 0;
}

int tdm_config_set_lun_size(struct tdm_config *cfg, const char *iqn, uint64_t lun, uint64_t size,
                            char *err, size_t errlen)
{
        struct tdm_target_cfg *t;
        struct tdm_lun_cfg *l;
        int rc = find_lun_or_fail(cfg, iqn, lun, &t, &l, err, errlen);
        if (rc)
                return rc;
        if (size % l->block_size)
                return cfg_fail(err, errlen, -EINVAL, "size",
                                "must be a multiple of the block size (%u), got %" PRIu64,
                                l->block_size, size);
        if (l->readonly && size)
                return cfg_fail(err, errlen, -EINVAL, "size", CFG_READONLY_SIZE_MSG);
        /* Every other rule a LUN's size must meet (at most INT64_MAX: the file holds a signed
         * 64-bit integer), as for an added LUN: else a restart would refuse the saved file. */
        struct tdm_lun_cfg resized = *l;
        resized.size = size;
        if ((rc = cfg_validate_lun(&resized, "", err, errlen)))
                return rc;
        l->size = size;
        return 0;
}

int tdm_config_add_acl(struct tdm_config *cfg, const char *iqn, const char *initiator, char *err,
                       size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        bool all = initiator && strcasecmp(initiator, "ALL") == 0;
        if (!initiator || (!all && !tdm_iscsi_name_valid(initiator)))
                return cfg_fail(err, errlen, -EINVAL, "initiator",
                                "\"%s\" is neither ALL nor an iSCSI name " TDM_ISCSI_NAME_FORMS,
                                initiator ? initiator : "");
        for (size_t i = 0; i < t->n_acl; i++)
                if (tdm_iscsi_name_equal(t->acl[i], initiator))
                        return cfg_fail(err, errlen, -EEXIST, "initiator",
                                        "%s is already in the ACL of %s", initiator, t->iqn);
        if (t->n_acl >= TDM_MAX_ACL)
                return cfg_fail(err, errlen, -ENOSPC, "initiator",
                                "the ACL of %s is full (%d entries)", t->iqn, TDM_MAX_ACL);
        char(*acl)[TDM_IQN_MAX] = realloc(t->acl, (t->n_acl + 1) * sizeof(*acl));
        if (!acl)
                return cfg_fail(err, errlen, -ENOMEM, NULL, "out of memory");
        t->acl = acl;
        snprintf(t->acl[t->n_acl++], TDM_IQN_MAX, "%s", all ? "ALL" : initiator);
        return 0;
}

int tdm_config_del_acl(struct tdm_config *cfg, const char *iqn, const char *initiator, char *err,
                       size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        for (size_t i = 0; initiator && i < t->n_acl; i++) {
                if (!tdm_iscsi_name_equal(t->acl[i], initiator))
                        continue;
                memmove(t->acl[i], t->acl[i + 1], (t->n_acl - i - 1) * sizeof(*t->acl));
                t->n_acl--;
                return 0;
        }
        return cfg_fail(err, errlen, -ENOENT, "initiator", "%s is not in the ACL of %s",
                        initiator ? initiator : "", t->iqn);
}

int tdm_config_set_chap(struct tdm_config *cfg, const char *iqn, const struct tdm_chap_cfg *chap,
                        char *err, size_t errlen)
{
        struct tdm_chap_cfg c = *chap;
        if (!c.enabled)
                memset(&c, 0, sizeof(c));
        else if (!c.mutual)
                c.mutual_user[0] = c.mutual_secret[0] = '\0';
        int rc = tdm_chap_check(&c, "chap", err, errlen);
        if (rc)
                return rc;
        if (!iqn) {
                cfg->discovery_chap = c;
                return 0;
        }
        struct tdm_target_cfg *t;
        rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        t->chap = c;
        return 0;
}
