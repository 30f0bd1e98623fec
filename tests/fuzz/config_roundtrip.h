/*
 * The configuration round trip the admin plane relies on, shared by fuzz_config and
 * fuzz_config_edit: save a configuration (to conf_path, which the including target sets up
 * in /dev/shm), load it back, compare field by field, save again: the file must not change.
 */
#ifndef TANDEM_FUZZ_CONFIG_ROUNDTRIP_H
#define TANDEM_FUZZ_CONFIG_ROUNDTRIP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "tandem/config.h"
#include "tandem/repl.h"

static char conf_path[128];
static char conf_dir[64];

/* conf_path in a fresh directory named for the target, in /dev/shm (else /tmp). */
static void conf_dir_init(const char *target)
{
        snprintf(conf_dir, sizeof(conf_dir), "/dev/shm/tandem-%s-XXXXXX", target);
        if (!mkdtemp(conf_dir)) {
                snprintf(conf_dir, sizeof(conf_dir), "/tmp/tandem-%s-XXXXXX", target);
                FUZZ_ASSERT(mkdtemp(conf_dir) != NULL, "no temporary directory");
        }
        snprintf(conf_path, sizeof(conf_path), "%s/tandem.conf", conf_dir);
}

__attribute__((destructor)) static void conf_dir_remove(void)
{
        if (!conf_dir[0])
                return;
        unlink(conf_path);
        rmdir(conf_dir);
}

/* The whole file, NUL-terminated (NULL if it cannot be read). */
static char *read_file(const char *path, size_t *len)
{
        FILE *f = fopen(path, "r");
        if (!f)
                return NULL;
        char *buf = NULL;
        size_t cap = 0, n = 0;
        for (;;) {
                if (cap - n < 4096) {
                        cap = cap ? 2 * cap : 8192;
                        char *nb = realloc(buf, cap);
                        FUZZ_ASSERT(nb != NULL, "out of memory");
                        buf = nb;
                }
                size_t got = fread(buf + n, 1, cap - n - 1, f);
                n += got;
                if (got == 0)
                        break;
        }
        fclose(f);
        buf[n] = '\0';
        *len = n;
        return buf;
}

#define SAME_STR(a, b, field)                                                                      \
        FUZZ_ASSERT(strcmp((a), (b)) == 0, "%s: \"%s\" reloaded as \"%s\"", field, (a), (b))
#define SAME_NUM(a, b, field)                                                                      \
        FUZZ_ASSERT((a) == (b), "%s: %llu reloaded as %llu", field, (unsigned long long)(a),       \
                    (unsigned long long)(b))

static void same_chap(const struct tdm_chap_cfg *a, const struct tdm_chap_cfg *b)
{
        SAME_NUM(a->enabled, b->enabled, "chap.enabled");
        SAME_NUM(a->mutual, b->mutual, "chap.mutual");
        SAME_STR(a->user, b->user, "chap.user");
        SAME_STR(a->secret, b->secret, "chap.secret");
        SAME_STR(a->mutual_user, b->mutual_user, "chap.mutual_user");
        SAME_STR(a->mutual_secret, b->mutual_secret, "chap.mutual_secret");
}

static void same_repl(const struct tdm_repl_cfg *a, const struct tdm_repl_cfg *b)
{
        SAME_NUM(a->enabled, b->enabled, "replication");
        if (!a->enabled)
                return;
        SAME_NUM(a->port, b->port, "replication.port");
        SAME_STR(a->secret, b->secret, "replication.secret");
        SAME_NUM(a->n_nodes, b->n_nodes, "replication.nodes");
        for (size_t i = 0; i < a->n_nodes && i < TDM_REPL_MAX_NODES; i++) {
                SAME_NUM(a->nodes[i].id, b->nodes[i].id, "replication.nodes[].id");
                SAME_STR(a->nodes[i].name, b->nodes[i].name, "replication.nodes[].name");
                SAME_STR(a->nodes[i].address, b->nodes[i].address, "replication.nodes[].address");
        }
        SAME_STR(a->metadata, b->metadata, "replication.metadata");
        SAME_NUM(a->timeout_ms, b->timeout_ms, "replication.timeout");
        SAME_NUM(a->resync_rate, b->resync_rate, "replication.resync_rate");
        SAME_NUM(a->resync_min_rate, b->resync_min_rate, "replication.resync_min_rate");
        SAME_NUM(a->split_brain, b->split_brain, "replication.split_brain");
        if (a->split_brain == REPL_SB_DISCARD_NODE) /* the name is part of the policy */
                SAME_STR(a->split_brain_node, b->split_brain_node, "replication.split_brain");
}

static void same_lun(const struct tdm_lun_cfg *a, const struct tdm_lun_cfg *b)
{
        SAME_NUM(a->lun, b->lun, "lun");
        SAME_STR(a->path, b->path, "lun.path");
        SAME_NUM(a->size, b->size, "lun.size");
        SAME_NUM(a->thin, b->thin, "lun.thin");
        SAME_NUM(a->direct, b->direct, "lun.direct");
        SAME_NUM(a->block_size, b->block_size, "lun.block_size");
        SAME_NUM(a->physical_block_size, b->physical_block_size, "lun.physical_block_size");
        SAME_STR(a->naa, b->naa, "lun.naa");
        SAME_STR(a->serial, b->serial, "lun.serial");
        SAME_NUM(a->wce, b->wce, "lun.wce");
        SAME_NUM(a->readonly, b->readonly, "lun.readonly");
        same_repl(&a->repl, &b->repl);
}

static void same_config(const struct tdm_config *a, const struct tdm_config *b)
{
        SAME_NUM(a->n_listen, b->n_listen, "listen");
        for (size_t i = 0; i < a->n_listen && i < TDM_MAX_LISTEN; i++)
                SAME_STR(a->listen[i], b->listen[i], "listen[]");
        SAME_STR(a->state_dir, b->state_dir, "state_dir");
        SAME_STR(a->instance, b->instance, "instance");
        SAME_NUM(a->threads, b->threads, "threads");
        SAME_STR(a->log_file, b->log_file, "log.file");
        SAME_NUM(a->log_level, b->log_level, "log.level");
        SAME_NUM(a->log_syslog, b->log_syslog, "log.syslog");
        FUZZ_ASSERT(memcmp(&a->iscsi, &b->iscsi, sizeof(a->iscsi)) == 0, "iscsi settings differ");
        same_chap(&a->discovery_chap, &b->discovery_chap);
        SAME_NUM(a->node_id, b->node_id, "node_id");
        SAME_NUM(a->cluster.enabled, b->cluster.enabled, "cluster.enabled");
        SAME_STR(a->cluster.group, b->cluster.group, "cluster.group");
        SAME_STR(a->cluster.fence_peer, b->cluster.fence_peer, "cluster.fence_peer");
        SAME_NUM(a->n_targets, b->n_targets, "targets");
        for (size_t i = 0; i < a->n_targets; i++) {
                const struct tdm_target_cfg *x = &a->targets[i], *y = &b->targets[i];
                SAME_STR(x->iqn, y->iqn, "target.iqn");
                SAME_STR(x->alias, y->alias, "target.alias");
                SAME_NUM(x->tpgt, y->tpgt, "target.tpgt");
                SAME_NUM(x->n_acl, y->n_acl, "target.acl");
                for (size_t j = 0; j < x->n_acl; j++)
                        SAME_STR(x->acl[j], y->acl[j], "target.acl[]");
                same_chap(&x->chap, &y->chap);
                SAME_NUM(x->n_luns, y->n_luns, "target.luns");
                for (size_t j = 0; j < x->n_luns; j++)
                        same_lun(&x->luns[j], &y->luns[j]);
        }
}

static void check_empty(const struct tdm_config *c, const char *after)
{
        FUZZ_ASSERT(c->targets == NULL && c->n_targets == 0, "%s left %zu targets", after,
                    c->n_targets);
}

/* Save, reload, compare; then save the reloaded one: the file must not change. */
static void round_trip(const struct tdm_config *a)
{
        char err[512] = "";
        int rc = tdm_config_save(conf_path, a, err, sizeof(err));
        FUZZ_ASSERT(rc == 0, "saving an accepted config = %d: %s", rc, err);
        size_t first_len = 0;
        char *first = read_file(conf_path, &first_len);
        FUZZ_ASSERT(first != NULL, "saved file unreadable");

        struct tdm_config b;
        err[0] = '\0';
        rc = tdm_config_load(conf_path, &b, err, sizeof(err));
        if (rc && fuzz_verbose())
                fprintf(stderr, "saved file:\n%s\n", first);
        FUZZ_ASSERT(rc == 0, "reloading the saved config = %d: %s", rc, err);
        FUZZ_ASSERT(!b.identities_generated, "identities generated again on reload");
        same_config(a, &b);

        err[0] = '\0';
        rc = tdm_config_save(conf_path, &b, err, sizeof(err));
        FUZZ_ASSERT(rc == 0, "saving the reloaded config = %d: %s", rc, err);
        size_t second_len = 0;
        char *second = read_file(conf_path, &second_len);
        FUZZ_ASSERT(second != NULL, "saved file unreadable");
        FUZZ_ASSERT(first_len == second_len && memcmp(first, second, first_len) == 0,
                    "saving the reloaded config wrote a different file");
        free(first);
        free(second);
        tdm_config_free(&b);
        check_empty(&b, "tdm_config_free");
}

#endif
