/*
 * Helpers over the replication part of the configuration (struct tdm_repl_cfg in config.h),
 * so the replicator and the admin plane read it the way validation checked it.
 * Implemented in daemon/config/replication.c.
 */
#ifndef TANDEM_CONFIG_REPL_H
#define TANDEM_CONFIG_REPL_H

#include <stddef.h>
#include <stdint.h>

#include "tandem/config.h"

#define TDM_DEFAULT_REPL_PORT 7789u

/* The entry of r->nodes that is this node (id == node_id), or the other one; NULL if none. */
const struct tdm_repl_node *tdm_repl_local_node(const struct tdm_repl_cfg *r, uint32_t node_id);
const struct tdm_repl_node *tdm_repl_peer_node(const struct tdm_repl_cfg *r, uint32_t node_id);

/*
 * Host (without brackets) and port of a node's address; an address without a port gets
 * r->port (not the iSCSI port). Returns 0 or -EINVAL.
 */
int tdm_repl_node_endpoint(const struct tdm_repl_cfg *r, const struct tdm_repl_node *n, char *host,
                           size_t hostlen, uint16_t *port);

/* The LUN's metadata file: replication.metadata, or <state_dir>/repl-<naa>.md. */
int tdm_repl_metadata_path(const struct tdm_config *cfg, const struct tdm_lun_cfg *lun, char *out,
                           size_t outlen);

/* "disconnect", ..., "discard-node-NAME" as written in the file (NAME filled in from r). */
void tdm_repl_split_brain_name(const struct tdm_repl_cfg *r, char *out, size_t outlen);

#endif
