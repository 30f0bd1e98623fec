/*
 * The iSCSI layer as the daemon starts it: data-plane workers (one net loop each), the
 * listening portals, and the environment it looks targets up in (the target registry,
 * wired in by tandemd, so the iSCSI layer does not depend on it).
 */
#ifndef TANDEM_ISCSI_PORTAL_H
#define TANDEM_ISCSI_PORTAL_H

#include <qb/qbloop.h>
#include <stdint.h>

#include "tandem/config.h"

struct scsi_target;

struct iscsi_env {
        /* 0 with a referenced target, -ENOENT (no such target), -EACCES (ACL refuses). */
        int (*lookup_target)(const char *iqn, const char *initiator, struct scsi_target **out,
                             struct tdm_auth *auth);
        void (*discovery_auth)(struct tdm_auth *auth);
        /* SendTargets: cb for each target the initiator may see (only `only` if not NULL). */
        void (*for_each_visible)(const char *initiator, const char *only,
                                 void (*cb)(void *arg, const char *iqn, uint16_t tpgt), void *arg);
};

/* Starts n workers (0 = one per core); env is copied. */
int iscsi_workers_start(unsigned n, const struct tdm_iscsi_cfg *cfg, const struct iscsi_env *env);
/* Closes every connection, waits (10 s at most) for their commands, ends the workers. */
void iscsi_workers_stop(void);
/* A listening portal on host ("" = any) and port; the control loop accepts. */
int iscsi_listen_add(qb_loop_t *loop, const char *host, uint16_t port);
/* Stops listening on the portal added as host and port (its sessions stay); -ENOENT if none. */
int iscsi_listen_del(const char *host, uint16_t port);
void iscsi_listen_close_all(void);

#endif
