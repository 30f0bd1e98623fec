/*
 * The live registry: the configuration plus the scsi_target / scsi_lun objects built
 * from it. Admin operations (control thread) change both; worker threads look targets up
 * at login. Every admin operation works on a copy of the configuration, prepares the
 * live objects it needs, saves the copy atomically, and only then publishes: a failure
 * at any step leaves the file and the live state as they were.
 */
#include "tandem/registry.h"
#include "tandem/repl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tandem/backstore.h"
#include "tandem/log.h"

struct reg_target {
        char iqn[TDM_IQN_MAX];
        struct scsi_target *st; /* the registry's reference */
};

static struct {
        /* Readers: login lookups (workers). Writers: publishing an admin change. */
        pthread_rwlock_t lock;
        /* Serialises admin operations, so a copy-edit-publish is never interleaved. */
        pthread_mutex_t admin_lock;
        bool up;
        /* Live configuration. Only targets and discovery_chap change after init. */
        struct tdm_config cfg;
        /* The daemon-wide settings as the file has them (without command-line overrides). */
        struct tdm_config file_base;
        bool persist;
        char path[4096];
        struct reg_target *targets;
        size_t n_targets;
} reg = {
    .lock = PTHREAD_RWLOCK_INITIALIZER,
    .admin_lock = PTHREAD_MUTEX_INITIALIZER,
};

__attribute__((format(printf, 5, 6))) static int fail(char *err, size_t errlen, int rc,
                                                      const char *field, const char *fmt, ...)
{
        if (err && errlen) {
                int n = field ? snprintf(err, errlen, "%s: ", field) : 0;
                size_t off = n < 0 ? 0 : (size_t)n >= errlen ? errlen - 1 : (size_t)n;
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(err + off, errlen - off, fmt, ap);
                va_end(ap);
        }
        return rc;
}

/* ---------------------------------------------------------------- live objects */

static struct reg_target *live_find(const char *iqn)
{
        for (size_t i = 0; i < reg.n_targets; i++)
                if (tdm_iscsi_name_equal(reg.targets[i].iqn, iqn))
                        return &reg.targets[i];
        return NULL;
}

/*
 * The journal that makes WRITE ATOMIC of more than one block power-safe lives in the state
 * directory, named by the LUN's identity. Replaying what a crash left in it must succeed
 * (the medium may hold a torn write until then); a journal that cannot be opened only
 * limits atomic writes to one block, and is logged.
 */
static int lun_attach_journal(struct scsi_lun *lun, struct tdm_medium *local,
                              const struct tdm_lun_cfg *l, const char *field, char *err,
                              size_t errlen)
{
        char path[4096 + 64], f[256];
        snprintf(path, sizeof(path), "%s/lun-%s.atomic", reg.cfg.state_dir, l->naa);
        snprintf(f, sizeof(f), "%s%spath", field, *field ? "." : "");
        int rc = scsi_lun_attach_atomic_journal(lun, path, local);
        if (rc == -EIO)
                return fail(err, errlen, rc, f,
                            "completing the atomic writes a crash interrupted (journal %s) "
                            "failed: %s",
                            path, strerror(-rc));
        if (rc < 0)
                log_warn("LUN %" PRIu64 " (%s): atomic write journal %s: %s; WRITE ATOMIC is "
                         "limited to one block",
                         l->lun, l->path, path, strerror(-rc));
        return 0;
}

/*
 * Replicated LUN: its metadata is opened and the replicator wraps this node's medium; the
 * LUN is built on the replicated medium. On failure local is still the caller's.
 */
static int medium_replicate(struct tdm_medium *local, const struct tdm_lun_cfg *l, const char *iqn,
                            const char *field, struct repl_lun **out, char *err, size_t errlen)
{
        char why[512];
        int rc = repl_lun_create(local, l, iqn, reg.cfg.node_id, reg.cfg.state_dir, out, why,
                                 sizeof(why));
        return rc < 0 ? fail(err, errlen, rc, field, "replication: %s", why) : 0;
}

/* Stops a LUN's replicator, if it has one (before the LUN leaves its target). */
static void lun_detach_replication(struct scsi_lun *lun)
{
        repl_lun_stop(repl_lun_from_medium(lun->medium));
}

/* The backing store under a LUN, replicated or not. */
static struct bs_dev *lun_dev(struct scsi_lun *lun)
{
        struct repl_lun *r = repl_lun_from_medium(lun->medium);
        return bs_medium_dev(r ? repl_lun_local(r) : lun->medium);
}

/* A LUN whose node serves it (ALUA active): a Primary's replicator is in its write path. */
static bool lun_serving(struct scsi_lun *lun)
{
        return tdm_medium_access(lun->medium).local_state == TDM_ACCESS_ACTIVE;
}

/*
 * Opens the backing store and builds the LUN with the configured identity. *created
 * tells whether the backing file did not exist before (so a failed add can remove it).
 */
static int lun_build(const struct tdm_lun_cfg *l, const char *iqn, const char *field,
                     struct scsi_lun **out, bool *created, char *err, size_t errlen)
{
        char f[256];
        struct stat st;
        *created = stat(l->path, &st) < 0 && errno == ENOENT;
        struct bs_open_opts o = {.create_size = l->size,
                                 .direct = l->direct,
                                 .must_exist = l->size == 0,
                                 .read_only = l->readonly};
        struct bs_dev *bs = NULL;
        snprintf(f, sizeof(f), "%s%spath", field, *field ? "." : "");
        int rc = bs_open(l->path, &o, &bs);
        if (rc < 0) {
                *created = false;
                if (rc == -ENOENT && l->size == 0)
                        return fail(err, errlen, rc, f,
                                    "%s does not exist (give a size to create it)", l->path);
                if (rc == -EINVAL && stat(l->path, &st) == 0 && !S_ISREG(st.st_mode) &&
                    !S_ISBLK(st.st_mode))
                        return fail(err, errlen, rc, f, "%s is not a regular file or block device",
                                    l->path);
                if (rc == -EINVAL && l->direct)
                        return fail(
                            err, errlen, rc, f,
                            "cannot open %s with O_DIRECT (not supported by its filesystem?)",
                            l->path);
                return fail(err, errlen, rc, f, "cannot open %s: %s", l->path, strerror(-rc));
        }
        snprintf(f, sizeof(f), "%s%ssize", field, *field ? "." : "");
        if (l->size > bs->size)
                rc = fail(err, errlen, -ENOSPC, f,
                          "%" PRIu64 " bytes is more than %s has (%" PRIu64 ")", l->size, l->path,
                          bs->size);
        else if (bs->size < l->block_size)
                rc = fail(err, errlen, -EINVAL, f, "%s is smaller than one block (%u bytes)",
                          l->path, l->block_size);
        if (rc < 0)
                goto out_close;
        /*
         * The LUN exposes the whole file or device: one that grew while the daemon was down
         * (lvextend, truncate) shows its real size; the configured size is a minimum.
         */
        if (l->size && bs->size > l->size)
                log_info("LUN %" PRIu64 " (%s): %" PRIu64
                         " bytes, more than the configured %" PRIu64 ": all of them are exported",
                         l->lun, l->path, bs->size, l->size);
        struct tdm_medium *local = NULL, *top = NULL;
        struct repl_lun *r = NULL;
        if (bs_medium_create(bs, &local) < 0) {
                rc = fail(err, errlen, -ENOMEM, NULL, "out of memory");
                goto out_close;
        }
        /* Reservations and the like live next to the atomic journal, named by identity. */
        char state_path[4096 + 64];
        snprintf(state_path, sizeof(state_path), "%s/lun-%s.state", reg.cfg.state_dir, l->naa);
        if ((rc = bs_medium_attach_state(local, state_path)) < 0) {
                tdm_medium_destroy(local); /* closes the backing store */
                rc =
                    fail(err, errlen, rc, field, "state records %s: %s", state_path, strerror(-rc));
                goto out_removed;
        }
        top = local;
        if (l->repl.enabled) {
                rc = medium_replicate(local, l, iqn, field, &r, err, errlen);
                if (rc < 0) {
                        tdm_medium_destroy(local); /* closes the backing store */
                        goto out_removed;
                }
                top = repl_lun_medium(r);
        }
        struct scsi_lun *lun = scsi_lun_create(l->lun, top, l->block_size, l->path);
        if (!lun) {
                tdm_medium_destroy(top);
                rc = fail(err, errlen, -ENOMEM, NULL, "out of memory");
                goto out_removed;
        }
        snprintf(f, sizeof(f), "%s%sphysical_block_size", field, *field ? "." : "");
        if (scsi_lun_set_physical_block_size(lun, l->physical_block_size) < 0) {
                /* The config checks say the same; this guards a caller that skipped them. */
                rc = fail(err, errlen, -EINVAL, f,
                          "must be block_size (%u) times a power of two, at most %u, got %u",
                          l->block_size, TDM_MAX_PHYSICAL_BLOCK_SIZE, l->physical_block_size);
                scsi_lun_put(lun); /* closes the backing store */
                if (*created)
                        unlink(l->path);
                *created = false;
                return rc;
        }
        tdm_naa_to_bytes(l->naa, lun->naa);
        snprintf(lun->serial, sizeof(lun->serial), "%s", l->serial);
        lun->thin = l->thin;
        lun->read_only = l->readonly;
        atomic_store(&lun->wce, l->wce);
        if (!l->readonly && (rc = lun_attach_journal(lun, local, l, field, err, errlen)) < 0)
                goto out_lun;
        if (r && (rc = repl_lun_start(r)) < 0) {
                rc = fail(err, errlen, rc, field, "replication: cannot start: %s", strerror(-rc));
                goto out_lun;
        }
        *out = lun;
        return 0;
out_lun:
        scsi_lun_put(lun); /* destroys the media and closes the backing store */
        goto out_removed;
out_close:
        bs_close(bs);
out_removed:
        if (*created)
                unlink(l->path);
        *created = false;
        return rc;
}

/* Drops a LUN that was built but never published; removes a file we created for it. */
static void lun_discard(struct scsi_lun *lun, const char *path, bool created)
{
        lun_detach_replication(lun);
        scsi_lun_put(lun);
        if (created)
                unlink(path);
}

static struct scsi_target *target_build(const struct tdm_target_cfg *t)
{
        struct scsi_target *st = scsi_target_create(t->iqn);
        if (!st)
                return NULL;
        snprintf(st->alias, sizeof(st->alias), "%s", t->alias);
        st->tpgt = t->tpgt;
        return st;
}

/* Removes every LUN from a live target (sessions see them go) and drops our reference. */
static void target_teardown(struct scsi_target *st)
{
        for (uint64_t id = 0; id < SCSI_MAX_LUNS; id++) {
                struct scsi_lun *lun = scsi_target_get_lun(st, id);
                if (!lun)
                        continue;
                lun_detach_replication(lun);
                scsi_lun_put(lun);
                scsi_target_del_lun(st, id);
        }
        scsi_target_put(st);
}

/* Builds the live target and its LUNs from the configuration (registry init). */
static int target_build_all(const struct tdm_target_cfg *t, size_t ti, struct scsi_target **out,
                            char *err, size_t errlen)
{
        struct scsi_target *st = target_build(t);
        if (!st)
                return fail(err, errlen, -ENOMEM, NULL, "out of memory");
        for (size_t li = 0; li < t->n_luns; li++) {
                char field[64];
                snprintf(field, sizeof(field), "targets[%zu].luns[%zu]", ti, li);
                struct scsi_lun *lun;
                bool created;
                int rc = lun_build(&t->luns[li], t->iqn, field, &lun, &created, err, errlen);
                if (rc == 0 && (rc = scsi_target_add_lun(st, lun)) < 0) {
                        lun_discard(lun, t->luns[li].path, created);
                        fail(err, errlen, rc, field, "cannot add LUN %" PRIu64 ": %s",
                             t->luns[li].lun, strerror(-rc));
                } else if (rc == 0) {
                        scsi_lun_put(lun); /* the target's table holds its own reference */
                }
                if (rc < 0) {
                        target_teardown(st);
                        return rc;
                }
        }
        *out = st;
        return 0;
}

/* ---------------------------------------------------------------- persistence */

/* The file gets the file's own daemon settings plus the live targets and discovery CHAP. */
static int persist(const struct tdm_config *next, char *err, size_t errlen)
{
        if (!reg.persist)
                return 0;
        struct tdm_config view = reg.file_base;
        view.targets = next->targets;
        view.n_targets = next->n_targets;
        view.discovery_chap = next->discovery_chap;
        return tdm_config_save(reg.path, &view, err, errlen);
}

/* Makes next the live configuration (its arrays move into the registry). */
static void publish_config(struct tdm_config *next)
{
        struct tdm_config old = reg.cfg;
        pthread_rwlock_wrlock(&reg.lock);
        reg.cfg.targets = next->targets;
        reg.cfg.n_targets = next->n_targets;
        reg.cfg.discovery_chap = next->discovery_chap;
        pthread_rwlock_unlock(&reg.lock);
        next->targets = NULL;
        next->n_targets = 0;
        tdm_config_free(&old);
}

/* Starts an admin operation: a private copy of the live configuration to edit. */
static int edit_begin(struct tdm_config *copy, char *err, size_t errlen)
{
        pthread_mutex_lock(&reg.admin_lock);
        if (!reg.up) {
                pthread_mutex_unlock(&reg.admin_lock);
                return fail(err, errlen, -ENODEV, NULL, "the registry is not running");
        }
        int rc = tdm_config_copy(copy, &reg.cfg);
        if (rc < 0) {
                pthread_mutex_unlock(&reg.admin_lock);
                return fail(err, errlen, rc, NULL, "out of memory");
        }
        return 0;
}

static int edit_end(struct tdm_config *copy, int rc)
{
        tdm_config_free(copy);
        pthread_mutex_unlock(&reg.admin_lock);
        return rc;
}

/* Validates the edited copy and saves it; the live state is still untouched. */
static int edit_commit_file(struct tdm_config *copy, char *err, size_t errlen)
{
        int rc = tdm_config_validate(copy, err, errlen);
        if (rc == 0)
                rc = persist(copy, err, errlen);
        return rc;
}

const struct tdm_config *tdm_registry_file_base(void)
{
        return &reg.file_base;
}

int tdm_registry_set_listen(const struct tdm_config *next, char *err, size_t errlen)
{
        pthread_mutex_lock(&reg.admin_lock);
        memcpy(reg.file_base.listen, next->listen, sizeof(next->listen));
        reg.file_base.n_listen = next->n_listen;
        memcpy(reg.cfg.listen, next->listen, sizeof(next->listen));
        reg.cfg.n_listen = next->n_listen;
        int rc = persist(&reg.cfg, err, errlen);
        pthread_mutex_unlock(&reg.admin_lock);
        return rc;
}

/* ---------------------------------------------------------------- init / fini */

static void live_free_all(void)
{
        for (size_t i = 0; i < reg.n_targets; i++)
                target_teardown(reg.targets[i].st);
        free(reg.targets);
        reg.targets = NULL;
        reg.n_targets = 0;
}

/*
 * The daemon-wide settings to write back: the file's own when it exists (so command-line
 * overrides stay on the command line); otherwise the ones the daemon runs with.
 */
static int load_file_base(const char *path, const struct tdm_config *running, char *err,
                          size_t errlen)
{
        int rc = 0;
        /* Only the daemon-wide settings are kept: targets come from the live state. */
        if (access(path, F_OK) == 0) {
                rc = tdm_config_load(path, &reg.file_base, err, errlen);
                tdm_config_free(&reg.file_base);
        } else {
                reg.file_base = *running;
                reg.file_base.targets = NULL;
                reg.file_base.n_targets = 0;
        }
        return rc;
}

int tdm_registry_init(struct tdm_config *cfg, const char *config_path, char *err, size_t errlen)
{
        pthread_mutex_lock(&reg.admin_lock);
        int rc = 0;
        if (reg.up) {
                rc = fail(err, errlen, -EALREADY, NULL, "the registry is already running");
                goto out;
        }
        if ((rc = tdm_config_validate(cfg, err, errlen)) < 0)
                goto out;
        reg.persist = config_path != NULL;
        if (reg.persist) {
                if (strlen(config_path) >= sizeof(reg.path)) {
                        rc = fail(err, errlen, -ENAMETOOLONG, NULL, "config path too long");
                        goto out;
                }
                snprintf(reg.path, sizeof(reg.path), "%s", config_path);
                if ((rc = load_file_base(config_path, cfg, err, errlen)) < 0)
                        goto out;
        }
        if ((rc = tdm_config_copy(&reg.cfg, cfg)) < 0) {
                fail(err, errlen, rc, NULL, "out of memory");
                goto out;
        }
        reg.targets = calloc(cfg->n_targets ? cfg->n_targets : 1, sizeof(*reg.targets));
        if (!reg.targets) {
                rc = fail(err, errlen, -ENOMEM, NULL, "out of memory");
                goto out_cfg;
        }
        for (size_t i = 0; i < cfg->n_targets; i++) {
                struct reg_target *rt = &reg.targets[i];
                if ((rc = target_build_all(&cfg->targets[i], i, &rt->st, err, errlen)) < 0)
                        goto out_live;
                snprintf(rt->iqn, sizeof(rt->iqn), "%s", cfg->targets[i].iqn);
                reg.n_targets = i + 1;
        }
        /* Identities generated at load exist only in memory: keep them before anyone sees them. */
        if (cfg->identities_generated && (rc = persist(&reg.cfg, err, errlen)) < 0)
                goto out_live;
        reg.cfg.identities_generated = false;
        reg.up = true;
        log_info("registry: %zu targets from %s", reg.n_targets,
                 reg.persist ? reg.path : "(not persisted)");
        goto out;
out_live:
        live_free_all();
out_cfg:
        tdm_config_free(&reg.cfg);
out:
        pthread_mutex_unlock(&reg.admin_lock);
        return rc;
}

void tdm_registry_fini(void)
{
        pthread_mutex_lock(&reg.admin_lock);
        if (reg.up) {
                pthread_rwlock_wrlock(&reg.lock);
                reg.up = false;
                pthread_rwlock_unlock(&reg.lock);
                live_free_all();
                tdm_config_free(&reg.cfg);
                tdm_config_free(&reg.file_base);
        }
        pthread_mutex_unlock(&reg.admin_lock);
}

/* ---------------------------------------------------------------- lookups */

static bool acl_allows(const struct tdm_target_cfg *t, const char *initiator)
{
        for (size_t i = 0; i < t->n_acl; i++)
                if (strcmp(t->acl[i], "ALL") == 0 ||
                    (initiator && tdm_iscsi_name_equal(t->acl[i], initiator)))
                        return true;
        return false;
}

int tdm_registry_login_target(const char *iqn, const char *initiator, struct scsi_target **out,
                              struct tdm_auth *auth)
{
        int rc = -ENOENT;
        *out = NULL;
        if (!iqn)
                return rc;
        pthread_rwlock_rdlock(&reg.lock);
        if (!reg.up)
                goto out;
        struct tdm_target_cfg *t = tdm_config_find_target(&reg.cfg, iqn);
        struct reg_target *rt = t ? live_find(iqn) : NULL;
        if (!rt)
                goto out;
        if (!acl_allows(t, initiator)) {
                rc = -EACCES;
                goto out;
        }
        if (auth)
                auth->chap = t->chap;
        scsi_target_get(rt->st);
        *out = rt->st;
        rc = 0;
out:
        pthread_rwlock_unlock(&reg.lock);
        return rc;
}

void tdm_registry_discovery_auth(struct tdm_auth *auth)
{
        pthread_rwlock_rdlock(&reg.lock);
        auth->chap = reg.up ? reg.cfg.discovery_chap : (struct tdm_chap_cfg){0};
        pthread_rwlock_unlock(&reg.lock);
}

void tdm_registry_for_each_visible(const char *initiator, const char *only,
                                   void (*cb)(void *arg, const char *iqn, uint16_t tpgt), void *arg)
{
        /* Copy under the lock, call back outside it: cb may take its own locks. */
        struct visible {
                char iqn[TDM_IQN_MAX];
                uint16_t tpgt;
        } *list = NULL;
        size_t n = 0;
        pthread_rwlock_rdlock(&reg.lock);
        if (reg.up && reg.cfg.n_targets)
                list = malloc(reg.cfg.n_targets * sizeof(*list));
        for (size_t i = 0; list && i < reg.cfg.n_targets; i++) {
                const struct tdm_target_cfg *t = &reg.cfg.targets[i];
                if (only && !tdm_iscsi_name_equal(only, t->iqn))
                        continue;
                if (!acl_allows(t, initiator))
                        continue;
                memcpy(list[n].iqn, t->iqn, sizeof(list[n].iqn));
                list[n++].tpgt = t->tpgt;
        }
        pthread_rwlock_unlock(&reg.lock);
        for (size_t i = 0; i < n; i++)
                cb(arg, list[i].iqn, list[i].tpgt);
        free(list);
}

const struct tdm_config *tdm_registry_config(void)
{
        return &reg.cfg;
}

const char *tdm_registry_config_path(void)
{
        return reg.persist ? reg.path : "";
}

struct scsi_target *tdm_registry_get_target(const char *iqn)
{
        struct scsi_target *st = NULL;
        pthread_rwlock_rdlock(&reg.lock);
        struct reg_target *rt = reg.up && iqn ? live_find(iqn) : NULL;
        if (rt) {
                scsi_target_get(rt->st);
                st = rt->st;
        }
        pthread_rwlock_unlock(&reg.lock);
        return st;
}

/* ---------------------------------------------------------------- admin operations */

int tdm_registry_target_add(const char *iqn, char *err, size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        if ((rc = tdm_config_add_target(&copy, iqn, err, errlen)) < 0)
                return edit_end(&copy, rc);
        /* realloc may free the old array: readers walk it under the read lock. */
        pthread_rwlock_wrlock(&reg.lock);
        struct reg_target *grown = realloc(reg.targets, (reg.n_targets + 1) * sizeof(*grown));
        if (grown)
                reg.targets = grown;
        pthread_rwlock_unlock(&reg.lock);
        if (!grown)
                return edit_end(&copy, fail(err, errlen, -ENOMEM, NULL, "out of memory"));
        struct scsi_target *st = target_build(tdm_config_find_target(&copy, iqn));
        if (!st)
                return edit_end(&copy, fail(err, errlen, -ENOMEM, NULL, "out of memory"));
        if ((rc = edit_commit_file(&copy, err, errlen)) < 0) {
                scsi_target_put(st);
                return edit_end(&copy, rc);
        }
        pthread_rwlock_wrlock(&reg.lock);
        struct reg_target *rt = &reg.targets[reg.n_targets++];
        snprintf(rt->iqn, sizeof(rt->iqn), "%s", iqn);
        rt->st = st;
        pthread_rwlock_unlock(&reg.lock);
        publish_config(&copy);
        log_notice("admin: target %s added", iqn);
        return edit_end(&copy, 0);
}

int tdm_registry_target_del(const char *iqn, char *err, size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        if ((rc = tdm_config_del_target(&copy, iqn, err, errlen)) < 0 ||
            (rc = edit_commit_file(&copy, err, errlen)) < 0)
                return edit_end(&copy, rc);
        /* Unpublish first (no new logins), then take the LUNs away from open sessions. */
        pthread_rwlock_wrlock(&reg.lock);
        struct reg_target *rt = live_find(iqn);
        struct scsi_target *st = rt ? rt->st : NULL;
        if (rt) {
                *rt = reg.targets[reg.n_targets - 1];
                reg.n_targets--;
        }
        pthread_rwlock_unlock(&reg.lock);
        publish_config(&copy);
        if (st)
                target_teardown(st);
        log_notice("admin: target %s deleted", iqn);
        return edit_end(&copy, 0);
}

int tdm_registry_lun_add(const char *iqn, const struct tdm_lun_cfg *lun, char *err, size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        if ((rc = tdm_config_add_lun(&copy, iqn, lun, err, errlen)) < 0 ||
            (rc = tdm_config_validate(&copy, err, errlen)) < 0)
                return edit_end(&copy, rc);
        /* The LUN as the copy has it: with its generated identity and defaults. */
        const struct tdm_lun_cfg *l =
            tdm_config_find_lun(tdm_config_find_target(&copy, iqn), lun->lun);
        struct reg_target *rt = live_find(iqn);
        if (!rt)
                return edit_end(&copy, fail(err, errlen, -ENOENT, "iqn", "no target \"%s\"", iqn));
        struct scsi_lun *sl;
        bool created;
        if ((rc = lun_build(l, iqn, "", &sl, &created, err, errlen)) < 0)
                return edit_end(&copy, rc);
        if ((rc = persist(&copy, err, errlen)) < 0) {
                lun_discard(sl, l->path, created);
                return edit_end(&copy, rc);
        }
        /* Raises REPORTED LUNS DATA HAS CHANGED on the target's sessions. */
        if ((rc = scsi_target_add_lun(rt->st, sl)) < 0) {
                char ignored[256];
                lun_discard(sl, l->path, created);
                persist(&reg.cfg, ignored, sizeof(ignored)); /* put the old file back */
                return edit_end(&copy,
                                fail(err, errlen, rc, "lun", "cannot add LUN %" PRIu64 ": %s",
                                     lun->lun, strerror(-rc)));
        }
        scsi_lun_put(sl); /* the target's table holds its own reference */
        log_notice("admin: %s LUN %" PRIu64 " added (%s, naa.%s)", iqn, l->lun, l->path, l->naa);
        publish_config(&copy);
        return edit_end(&copy, 0);
}

int tdm_registry_lun_del(const char *iqn, uint64_t lun, char *err, size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        struct reg_target *rt = live_find(iqn);
        struct scsi_lun *sl = rt ? scsi_target_get_lun(rt->st, lun) : NULL;
        /* A Primary's replicator is in the write path of every session: demote first. */
        if (sl && repl_lun_from_medium(sl->medium) && lun_serving(sl))
                rc = fail(err, errlen, -EBUSY, "lun",
                          "LUN %" PRIu64 " is replicated and Primary here; demote it first", lun);
        if (rc < 0 || (rc = tdm_config_del_lun(&copy, iqn, lun, err, errlen)) < 0 ||
            (rc = edit_commit_file(&copy, err, errlen)) < 0) {
                if (sl)
                        scsi_lun_put(sl);
                return edit_end(&copy, rc);
        }
        if (sl) {
                lun_detach_replication(sl);
                scsi_lun_put(sl);
                scsi_target_del_lun(rt->st, lun);
        }
        publish_config(&copy);
        log_notice("admin: %s LUN %" PRIu64 " deleted", iqn, lun);
        return edit_end(&copy, 0);
}

int tdm_registry_acl_add(const char *iqn, const char *initiator, char *err, size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        if ((rc = tdm_config_add_acl(&copy, iqn, initiator, err, errlen)) < 0 ||
            (rc = edit_commit_file(&copy, err, errlen)) < 0)
                return edit_end(&copy, rc);
        publish_config(&copy);
        log_notice("admin: %s ACL +%s", iqn, initiator);
        return edit_end(&copy, 0);
}

int tdm_registry_acl_del(const char *iqn, const char *initiator, char *err, size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        if ((rc = tdm_config_del_acl(&copy, iqn, initiator, err, errlen)) < 0 ||
            (rc = edit_commit_file(&copy, err, errlen)) < 0)
                return edit_end(&copy, rc);
        /* Sessions already logged in stay; the ACL is checked at login. */
        publish_config(&copy);
        log_notice("admin: %s ACL -%s", iqn, initiator);
        return edit_end(&copy, 0);
}

int tdm_registry_chap_set(const char *iqn, const struct tdm_chap_cfg *chap, char *err,
                          size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        if ((rc = tdm_config_set_chap(&copy, iqn, chap, err, errlen)) < 0 ||
            (rc = edit_commit_file(&copy, err, errlen)) < 0)
                return edit_end(&copy, rc);
        publish_config(&copy);
        log_notice("admin: CHAP %s for %s", chap->enabled ? "set" : "cleared",
                   iqn ? iqn : "discovery");
        return edit_end(&copy, 0);
}

/* ---------------------------------------------------------------- lun resize */

/* What a resize will do, worked out before anything changes. */
struct resize_plan {
        uint64_t old_bytes, new_bytes; /* the LUN's size */
        uint64_t config_size;          /* size to save (0: "the device's size" stays) */
        uint64_t file_before;          /* regular file: its length before we grow it */
};

static int resize_plan_file(const struct tdm_lun_cfg *l, struct scsi_lun *sl, uint64_t size,
                            struct resize_plan *p, char *err, size_t errlen)
{
        if (l->readonly)
                return fail(err, errlen, -EROFS, "size",
                            "LUN %" PRIu64 " is read-only: its file is never grown", l->lun);
        if (size == 0)
                return fail(err, errlen, -EINVAL, "size",
                            "missing: a LUN on a file needs the new size (only a block device "
                            "LUN re-reads its size)");
        if (size % sl->block_size)
                return fail(err, errlen, -EINVAL, "size",
                            "must be a multiple of the block size (%u), got %" PRIu64,
                            sl->block_size, size);
        if (size < p->old_bytes)
                return fail(err, errlen, -EINVAL, "size",
                            "%" PRIu64 " bytes is less than the LUN has (%" PRIu64
                            "): shrinking is refused (it would cut off the end of the "
                            "filesystem or VMFS datastore on it)",
                            size, p->old_bytes);
        int rc = bs_probe_size(lun_dev(sl), &p->file_before);
        if (rc < 0)
                return fail(err, errlen, rc, "path", "cannot read the size of %s: %s", l->path,
                            strerror(-rc));
        if (size < p->file_before)
                return fail(err, errlen, -EINVAL, "size",
                            "%s already has %" PRIu64 " bytes: give at least that (the LUN "
                            "exposes the whole file when tandemd starts)",
                            l->path, p->file_before);
        p->new_bytes = size;
        p->config_size = size;
        return 0;
}

/* tandem cannot resize a block device: it takes the size the device has now (lvextend). */
static int resize_plan_device(const struct tdm_lun_cfg *l, struct scsi_lun *sl, uint64_t size,
                              struct resize_plan *p, char *err, size_t errlen)
{
        uint64_t dev;
        int rc = bs_probe_size(lun_dev(sl), &dev);
        if (rc < 0)
                return fail(err, errlen, rc, "path", "cannot read the size of %s: %s", l->path,
                            strerror(-rc));
        if (size && size != dev)
                return fail(err, errlen, -EINVAL, "size",
                            "%" PRIu64 " bytes is not the size of %s (%" PRIu64
                            " bytes): tandem cannot resize a block device; grow it first "
                            "(lvextend), then resize without a size",
                            size, l->path, dev);
        p->new_bytes = dev - dev % sl->block_size;
        if (p->new_bytes < p->old_bytes)
                return fail(err, errlen, -EINVAL, "size",
                            "%s has shrunk to %" PRIu64 " bytes, less than the LUN (%" PRIu64
                            "): shrinking is refused (data at the end would be lost); grow "
                            "the device back",
                            l->path, dev, p->old_bytes);
        p->config_size = l->size ? p->new_bytes : 0;
        return 0;
}

/*
 * Prepare (grow the file: initiators cannot address the new blocks yet), save, then apply;
 * a failed save shrinks the file back to what it was.
 */
/*
 * A replicated LUN: saved first, then grown on both nodes by the replicator (this node's store
 * too); a grow that fails puts the saved size back. Only the Primary grows the pair.
 */
static int resize_commit_replicated(struct tdm_config *copy, struct repl_lun *r,
                                    struct scsi_lun *sl, const struct resize_plan *p, char *err,
                                    size_t errlen)
{
        int rc = edit_commit_file(copy, err, errlen);
        if (rc < 0)
                return rc;
        char why[256] = "";
        rc = repl_lun_grow(r, p->new_bytes, lun_dev(sl)->is_blockdev, why, sizeof(why));
        if (rc < 0) {
                char undo[256] = "";
                if (persist(&reg.cfg, undo, sizeof(undo)) < 0)
                        log_err("admin: the config file keeps the new size: %s", undo);
                return fail(err, errlen, rc, "lun", "LUN %" PRIu64 " is replicated: %s", sl->id,
                            why);
        }
        scsi_lun_grow(sl, p->new_bytes / sl->block_size);
        publish_config(copy);
        return 0;
}

static int resize_commit(struct tdm_config *copy, const char *iqn, struct scsi_lun *sl,
                         const struct resize_plan *p, char *err, size_t errlen)
{
        int rc = tdm_config_set_lun_size(copy, iqn, sl->id, p->config_size, err, errlen);
        if (rc < 0)
                return rc;
        struct repl_lun *r = repl_lun_from_medium(sl->medium);
        if (r)
                return resize_commit_replicated(copy, r, sl, p, err, errlen);
        struct bs_dev *bs = lun_dev(sl);
        bool grow_file = !bs->is_blockdev && p->new_bytes > p->file_before;
        if (grow_file && (rc = bs_set_file_size(bs, p->new_bytes)) < 0)
                return fail(err, errlen, rc, "size", "cannot grow %s to %" PRIu64 " bytes: %s",
                            bs->path, p->new_bytes, strerror(-rc));
        if ((rc = edit_commit_file(copy, err, errlen)) < 0) {
                int undo = grow_file ? bs_set_file_size(bs, p->file_before) : 0;
                if (undo < 0)
                        log_err("admin: %s stays grown to %" PRIu64 " bytes (cannot undo: %s)",
                                bs->path, p->new_bytes, strerror(-undo));
                return rc;
        }
        if (bs->is_blockdev && (rc = bs_refresh_size(bs)) < 0)
                log_warn("admin: %s: re-reading its size: %s (the LUN grows anyway)", bs->path,
                         strerror(-rc));
        atomic_store(&sl->medium->size, p->new_bytes);
        /* Cannot fail: admin operations are serialised and the plan only grows. */
        scsi_lun_grow(sl, p->new_bytes / sl->block_size);
        publish_config(copy);
        return 0;
}

int tdm_registry_lun_resize(const char *iqn, uint64_t lun, uint64_t size, uint64_t *old_size,
                            uint64_t *new_size, char *err, size_t errlen)
{
        struct tdm_config copy;
        int rc = edit_begin(&copy, err, errlen);
        if (rc < 0)
                return rc;
        struct tdm_target_cfg *t = iqn ? tdm_config_find_target(&copy, iqn) : NULL;
        if (!t)
                return edit_end(&copy, fail(err, errlen, -ENOENT, "iqn", "no target \"%s\"",
                                            iqn ? iqn : "(null)"));
        const struct tdm_lun_cfg *l = tdm_config_find_lun(t, lun);
        if (!l)
                return edit_end(&copy, fail(err, errlen, -ENOENT, "lun", "no LUN %" PRIu64 " in %s",
                                            lun, t->iqn));
        struct reg_target *rt = live_find(iqn);
        struct scsi_lun *sl = rt ? scsi_target_get_lun(rt->st, lun) : NULL;
        if (!sl)
                return edit_end(&copy, fail(err, errlen, -ENODEV, "lun",
                                            "LUN %" PRIu64 " of %s is not open", lun, t->iqn));
        struct resize_plan p = {.old_bytes = atomic_load(&sl->num_blocks) * sl->block_size};
        char path[sizeof(l->path)];
        snprintf(path, sizeof(path), "%s", l->path);
        rc = lun_dev(sl)->is_blockdev ? resize_plan_device(l, sl, size, &p, err, errlen)
                                      : resize_plan_file(l, sl, size, &p, err, errlen);
        /* The same size again (a repeated command, no lvextend yet): nothing to save or tell. */
        if (rc == 0 && p.new_bytes != p.old_bytes)
                rc = resize_commit(&copy, iqn, sl, &p, err, errlen);
        scsi_lun_put(sl);
        if (rc == 0 && old_size)
                *old_size = p.old_bytes;
        if (rc == 0 && new_size)
                *new_size = p.new_bytes;
        if (rc == 0 && p.new_bytes != p.old_bytes)
                log_notice("admin: %s LUN %" PRIu64 " resized from %" PRIu64 " to %" PRIu64
                           " bytes (%s)",
                           iqn, lun, p.old_bytes, p.new_bytes, path);
        return edit_end(&copy, rc);
}
