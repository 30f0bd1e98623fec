/*
 * The replication part of a LUN's configuration read the way validation checked it: which
 * node is this one, where a node listens, the metadata file, split_brain policy names.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config_internal.h"
#include "tandem/config_repl.h"
#include "tandem/repl.h"

static const char *const sb_policy_names[] = {
    [REPL_SB_DISCONNECT] = "disconnect",
    [REPL_SB_DISCARD_ZERO_CHANGES] = "discard-zero-changes",
    [REPL_SB_DISCARD_YOUNGER_PRIMARY] = "discard-younger-primary",
    [REPL_SB_DISCARD_NODE] = CFG_SB_DISCARD_NODE_PREFIX,
};

const struct tdm_repl_node *tdm_repl_local_node(const struct tdm_repl_cfg *r, uint32_t node_id)
{
        for (size_t i = 0; i < r->n_nodes && i < TDM_REPL_MAX_NODES; i++)
                if (r->nodes[i].id == node_id)
                        return &r->nodes[i];
        return NULL;
}

const struct tdm_repl_node *tdm_repl_peer_node(const struct tdm_repl_cfg *r, uint32_t node_id)
{
        for (size_t i = 0; i < r->n_nodes && i < TDM_REPL_MAX_NODES; i++)
                if (r->nodes[i].id != node_id)
                        return &r->nodes[i];
        return NULL;
}

/* Whether an address string carries its own port ("h:p", "[v6]:p"; a bare IPv6 has none). */
static bool address_has_port(const char *s)
{
        if (s[0] == '[')
                return strstr(s, "]:") != NULL;
        const char *colon = strchr(s, ':');
        return colon && !strchr(colon + 1, ':');
}

int tdm_repl_node_endpoint(const struct tdm_repl_cfg *r, const struct tdm_repl_node *n, char *host,
                           size_t hostlen, uint16_t *port)
{
        int rc = tdm_parse_hostport(n->address, host, hostlen, port);
        if (rc == 0 && !address_has_port(n->address))
                *port = r->port ? r->port : TDM_DEFAULT_REPL_PORT;
        return rc;
}

int tdm_repl_metadata_path(const struct tdm_config *cfg, const struct tdm_lun_cfg *lun, char *out,
                           size_t outlen)
{
        int n = lun->repl.metadata[0]
                    ? snprintf(out, outlen, "%s", lun->repl.metadata)
                    : snprintf(out, outlen, "%s/repl-%s.md", cfg->state_dir, lun->naa);
        return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

void tdm_repl_split_brain_name(const struct tdm_repl_cfg *r, char *out, size_t outlen)
{
        unsigned p = (unsigned)r->split_brain;
        if (p == REPL_SB_DISCARD_NODE)
                snprintf(out, outlen, CFG_SB_DISCARD_NODE_PREFIX "%s", r->split_brain_node);
        else
                snprintf(out, outlen, "%s",
                         p < sizeof(sb_policy_names) / sizeof(sb_policy_names[0])
                             ? sb_policy_names[p]
                             : "?");
}

int cfg_split_brain_parse(const char *v, struct tdm_repl_cfg *r)
{
        size_t plen = strlen(CFG_SB_DISCARD_NODE_PREFIX);
        if (strncmp(v, CFG_SB_DISCARD_NODE_PREFIX, plen) == 0 && v[plen] != '\0' &&
            strlen(v + plen) < sizeof(r->split_brain_node)) {
                r->split_brain = REPL_SB_DISCARD_NODE;
                snprintf(r->split_brain_node, sizeof(r->split_brain_node), "%s", v + plen);
                return 0;
        }
        for (int i = REPL_SB_DISCONNECT; i < REPL_SB_DISCARD_NODE; i++)
                if (strcmp(v, sb_policy_names[i]) == 0) {
                        r->split_brain = i;
                        return 0;
                }
        return -EINVAL;
}
