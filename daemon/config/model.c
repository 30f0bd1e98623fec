/*
 * The model: defaults, the limits parsing and validation share, freeing and copying, and
 * the queries (find a target or a LUN).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "config_internal.h"

const char *const cfg_log_levels[8] = {"emerg",   "alert",  "crit", "err",
                                       "warning", "notice", "info", "debug"};

/* Ranges from RFC 7143 13 (data lengths 512..2^24-1); ours are tighter where noted. */
#define ISCSI_RULE(name, member, lo, hi)                                                           \
        {                                                                                          \
                name, offsetof(struct tdm_iscsi_cfg, member), lo, hi                               \
        }
const struct cfg_iscsi_rule cfg_iscsi_rules[] = {
    ISCSI_RULE("max_recv_dsl", max_recv_dsl, 512, 16777215),
    ISCSI_RULE("max_burst", max_burst, 512, 16777215),
    ISCSI_RULE("first_burst", first_burst, 512, 16777215),
    ISCSI_RULE("max_outstanding_r2t", max_outstanding_r2t, 1, 16),
    ISCSI_RULE("queue_depth", queue_depth, 1, 4096),
    ISCSI_RULE("nop_interval", nop_interval_s, 0, 3600),
    ISCSI_RULE("nop_timeout", nop_timeout_s, 1, 60),
    ISCSI_RULE("login_timeout", login_timeout_s, 1, 300),
    ISCSI_RULE("max_sessions", max_sessions, 1, 65535),
    ISCSI_RULE("max_sessions_per_initiator", max_sessions_per_initiator, 1, 65535),
    ISCSI_RULE("max_pending_logins", max_pending_logins, 1, 65535),
    ISCSI_RULE("login_rate", login_rate, 1, 100000),
    ISCSI_RULE("login_burst", login_burst, 1, 100000),
    ISCSI_RULE("max_conn_output", max_conn_output, 1u << 20, 1u << 30),
    /* A whole 16 MiB command (ISCSI_MAX_XFER) must fit, or it could never be admitted. */
    ISCSI_RULE("max_conn_write_data", max_conn_write_data, 16u << 20, 2u << 30),
    ISCSI_RULE("output_timeout", output_timeout_s, 1, 3600),
};
const size_t cfg_n_iscsi_rules = sizeof(cfg_iscsi_rules) / sizeof(cfg_iscsi_rules[0]);

bool cfg_block_size_ok(uint32_t bs)
{
        return bs == 512 || bs == 1024 || bs == 2048 || bs == 4096;
}

void tdm_config_defaults(struct tdm_config *cfg)
{
        memset(cfg, 0, sizeof(*cfg));
        snprintf(cfg->listen[0], sizeof(cfg->listen[0]), "%s", TDM_DEFAULT_LISTEN);
        cfg->n_listen = 1;
        snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", TDM_DEFAULT_STATE_DIR);
        snprintf(cfg->instance, sizeof(cfg->instance), "%s", TDM_DEFAULT_INSTANCE);
        cfg->threads = 0;
        cfg->log_level = LOG_INFO;
        cfg->log_syslog = true;
        cfg->iscsi.max_recv_dsl = TDM_DEFAULT_MAX_RECV_DSL;
        cfg->iscsi.max_burst = TDM_DEFAULT_MAX_BURST;
        cfg->iscsi.first_burst = TDM_DEFAULT_FIRST_BURST;
        cfg->iscsi.initial_r2t = false;
        cfg->iscsi.immediate_data = true;
        cfg->iscsi.max_outstanding_r2t = TDM_DEFAULT_MAX_OUTSTANDING_R2T;
        cfg->iscsi.queue_depth = TDM_DEFAULT_QUEUE_DEPTH;
        cfg->iscsi.nop_interval_s = TDM_DEFAULT_NOP_INTERVAL_S;
        cfg->iscsi.nop_timeout_s = TDM_DEFAULT_NOP_TIMEOUT_S;
        cfg->iscsi.login_timeout_s = TDM_DEFAULT_LOGIN_TIMEOUT_S;
        cfg->iscsi.max_sessions = TDM_DEFAULT_MAX_SESSIONS;
        cfg->iscsi.max_sessions_per_initiator = TDM_DEFAULT_MAX_SESSIONS_PER_INIT;
        cfg->iscsi.max_pending_logins = TDM_DEFAULT_MAX_PENDING_LOGINS;
        cfg->iscsi.login_rate = TDM_DEFAULT_LOGIN_RATE;
        cfg->iscsi.login_burst = TDM_DEFAULT_LOGIN_BURST;
        cfg->iscsi.max_conn_output = TDM_DEFAULT_MAX_CONN_OUTPUT;
        cfg->iscsi.max_conn_write_data = TDM_DEFAULT_MAX_CONN_WRITE_DATA;
        cfg->iscsi.output_timeout_s = TDM_DEFAULT_OUTPUT_TIMEOUT_S;
        snprintf(cfg->cluster.group, sizeof(cfg->cluster.group), "%s", TDM_DEFAULT_CLUSTER_GROUP);
}

void tdm_lun_defaults(struct tdm_lun_cfg *lun)
{
        memset(lun, 0, sizeof(*lun));
        lun->block_size = TDM_DEFAULT_BLOCK_SIZE;
        lun->wce = true;
}

void cfg_target_free(struct tdm_target_cfg *t)
{
        free(t->luns);
        free(t->acl);
        t->luns = NULL;
        t->acl = NULL;
        t->n_luns = t->n_acl = 0;
}

void tdm_config_free(struct tdm_config *cfg)
{
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->n_targets; i++)
                cfg_target_free(&cfg->targets[i]);
        free(cfg->targets);
        cfg->targets = NULL;
        cfg->n_targets = 0;
}

static int target_copy(struct tdm_target_cfg *dst, const struct tdm_target_cfg *src)
{
        *dst = *src;
        dst->luns = NULL;
        dst->acl = NULL;
        if (src->n_luns) {
                dst->luns = malloc(src->n_luns * sizeof(*dst->luns));
                if (!dst->luns)
                        goto nomem;
                memcpy(dst->luns, src->luns, src->n_luns * sizeof(*dst->luns));
        }
        if (src->n_acl) {
                dst->acl = malloc(src->n_acl * sizeof(*dst->acl));
                if (!dst->acl)
                        goto nomem;
                memcpy(dst->acl, src->acl, src->n_acl * sizeof(*dst->acl));
        }
        return 0;
nomem:
        free(dst->luns);
        dst->luns = NULL;
        dst->n_luns = dst->n_acl = 0;
        return -ENOMEM;
}

int tdm_config_copy(struct tdm_config *dst, const struct tdm_config *src)
{
        *dst = *src;
        dst->targets = NULL;
        dst->n_targets = 0;
        if (src->n_targets == 0)
                return 0;
        dst->targets = calloc(src->n_targets, sizeof(*dst->targets));
        if (!dst->targets)
                return -ENOMEM;
        for (size_t i = 0; i < src->n_targets; i++) {
                int rc = target_copy(&dst->targets[i], &src->targets[i]);
                if (rc < 0) {
                        tdm_config_free(dst);
                        return rc;
                }
                dst->n_targets = i + 1;
        }
        return 0;
}

struct tdm_target_cfg *tdm_config_find_target(struct tdm_config *cfg, const char *iqn)
{
        for (size_t i = 0; i < cfg->n_targets; i++)
                if (tdm_iscsi_name_equal(cfg->targets[i].iqn, iqn))
                        return &cfg->targets[i];
        return NULL;
}

struct tdm_lun_cfg *tdm_config_find_lun(struct tdm_target_cfg *t, uint64_t lun)
{
        for (size_t i = 0; i < t->n_luns; i++)
                if (t->luns[i].lun == lun)
                        return &t->luns[i];
        return NULL;
}
