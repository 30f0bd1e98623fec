/*
 * Validation of a LUN's replication group: its settings, its two nodes, its split-brain
 * policy, and what it must not share with the rest of the configuration (listening
 * endpoint, metadata file).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"
#include "tandem/config_repl.h"
#include "tandem/repl.h"

/* Node names end up in messages and in discard-node-NAME: keep them plain. */
static bool repl_node_name_ok(const char *s)
{
        return cfg_plain_name_ok(s, sizeof(((struct tdm_repl_node *)0)->name) - 1);
}

/* 0.0.0.0 and :: bind every address, so they clash with any address on the same port. */
static bool host_is_wildcard(const char *h)
{
        return strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0;
}

static bool endpoints_clash(const char *h1, uint16_t p1, const char *h2, uint16_t p2)
{
        return p1 == p2 &&
               (strcasecmp(h1, h2) == 0 || host_is_wildcard(h1) || host_is_wildcard(h2));
}

static int validate_nodes(const struct tdm_config *cfg, const struct tdm_repl_cfg *r, const char *g,
                          char *err, size_t errlen)
{
        char f[FIELD_MAX], nf[FIELD_MAX], h[FIELD_MAX];
        int rc;
        cfg_field_join(f, g, "nodes");
        if (r->n_nodes > TDM_REPL_MAX_NODES)
                return cfg_fail(err, errlen, -EINVAL, f,
                                "only one peer per LUN is supported: list this node and its peer, "
                                "got %zu nodes",
                                r->n_nodes);
        if (r->n_nodes < TDM_REPL_MAX_NODES)
                return cfg_fail(err, errlen, -EINVAL, f,
                                "must list this node and its peer (%d entries), got %zu",
                                TDM_REPL_MAX_NODES, r->n_nodes);
        char host[TDM_REPL_MAX_NODES][128];
        uint16_t port[TDM_REPL_MAX_NODES];
        for (size_t i = 0; i < r->n_nodes; i++) {
                const struct tdm_repl_node *n = &r->nodes[i];
                cfg_field_index(nf, f, i);
                cfg_field_join(h, nf, "id");
                if ((rc = cfg_check_range(n->id, 1, 255, h, err, errlen)))
                        return rc;
                cfg_field_join(h, nf, "name");
                if (!repl_node_name_ok(n->name))
                        return cfg_fail(err, errlen, -EINVAL, h,
                                        "must be 1..63 characters of A-Z a-z 0-9 - _ ., got \"%s\"",
                                        n->name);
                cfg_field_join(h, nf, "address");
                if (tdm_repl_node_endpoint(r, n, host[i], sizeof(host[i]), &port[i]) < 0)
                        return cfg_fail(
                            err, errlen, -EINVAL, h,
                            "\"%s\" is not HOST[:PORT] or [IPV6][:PORT] (port 1..65535)",
                            n->address);
                for (size_t j = 0; j < i; j++) {
                        const struct tdm_repl_node *o = &r->nodes[j];
                        if (o->id == n->id) {
                                cfg_field_join(h, nf, "id");
                                return cfg_fail(err, errlen, -EINVAL, h, "%u is already nodes[%zu]",
                                                n->id, j);
                        }
                        if (strcmp(o->name, n->name) == 0) {
                                cfg_field_join(h, nf, "name");
                                return cfg_fail(err, errlen, -EINVAL, h,
                                                "\"%s\" is already nodes[%zu]", n->name, j);
                        }
                        if (strcasecmp(host[i], host[j]) == 0 && port[i] == port[j])
                                return cfg_fail(err, errlen, -EINVAL, h,
                                                "\"%s\" is the same endpoint as nodes[%zu] (a "
                                                "node would connect to itself)",
                                                n->address, j);
                }
        }
        if (!tdm_repl_local_node(r, cfg->node_id))
                return cfg_fail(err, errlen, -EINVAL, f,
                                "none of the nodes is this node (node_id = %u)", cfg->node_id);
        return 0;
}

static int validate_split_brain(const struct tdm_repl_cfg *r, const char *g, char *err,
                                size_t errlen)
{
        char f[FIELD_MAX];
        cfg_field_join(f, g, "split_brain");
        if (r->split_brain < REPL_SB_DISCONNECT || r->split_brain > REPL_SB_DISCARD_NODE)
                return cfg_fail(err, errlen, -EINVAL, f, "unknown policy %d", r->split_brain);
        if (r->split_brain != REPL_SB_DISCARD_NODE)
                return 0;
        for (size_t i = 0; i < r->n_nodes; i++)
                if (strcmp(r->nodes[i].name, r->split_brain_node) == 0)
                        return 0;
        return cfg_fail(err, errlen, -EINVAL, f,
                        CFG_SB_DISCARD_NODE_PREFIX "%s: no node is named \"%s\" (nodes: %s, %s)",
                        r->split_brain_node, r->split_brain_node, r->nodes[0].name,
                        r->nodes[1].name);
}

/* Explicit ALUA moves the Primary through a handler, between the two nodes' own groups. */
static int validate_alua(const struct tdm_repl_cfg *r, const char *g, char *err, size_t errlen)
{
        char f[FIELD_MAX];
        cfg_field_join(f, g, "stpg_handler");
        if (r->stpg_handler[0] && !cfg_path_absolute(r->stpg_handler))
                return cfg_fail(err, errlen, -EINVAL, f, "must be an absolute path, got \"%s\"",
                                r->stpg_handler);
        if (!r->alua_explicit)
                return 0;
        if (!r->stpg_handler[0])
                return cfg_fail(err, errlen, -EINVAL, f,
                                "required with alua = \"explicit\": the program that moves the "
                                "Primary (e.g. tandem-stpg)");
        cfg_field_join(f, g, "alua");
        if (!r->ports_per_node)
                return cfg_fail(err, errlen, -EINVAL, f,
                                "\"explicit\" needs target_ports = \"per_node\" (with shared "
                                "ports there is one port group, nothing to choose between)");
        return 0;
}

static int validate_settings(const struct tdm_repl_cfg *r, const char *g, char *err, size_t errlen)
{
        char f[FIELD_MAX];
        int rc;
        cfg_field_join(f, g, "secret");
        size_t sl = strnlen(r->secret, TDM_CHAP_MAX);
        if (sl < TDM_REPL_SECRET_MIN || sl >= TDM_CHAP_MAX || !cfg_printable(r->secret))
                return cfg_fail(err, errlen, -EINVAL, f,
                                "must be %d..%d printable characters, the same on both nodes",
                                TDM_REPL_SECRET_MIN, TDM_CHAP_MAX - 1);
        cfg_field_join(f, g, "port");
        if ((rc = cfg_check_range(r->port, 1, 65535, f, err, errlen)))
                return rc;
        cfg_field_join(f, g, "metadata");
        if (r->metadata[0] && !cfg_path_absolute(r->metadata))
                return cfg_fail(err, errlen, -EINVAL, f, "must be an absolute path, got \"%s\"",
                                r->metadata);
        cfg_field_join(f, g, "timeout");
        if (r->timeout_ms > TDM_REPL_TIMEOUT_MAX_MS)
                return cfg_fail(
                    err, errlen, -EINVAL, f,
                    "%u ms is not well below the initiators' 15 s abort timer; at most %u",
                    r->timeout_ms, TDM_REPL_TIMEOUT_MAX_MS);
        if (r->timeout_ms < TDM_REPL_TIMEOUT_MIN_MS)
                return cfg_fail(err, errlen, -EINVAL, f,
                                "%u ms would drop a peer that is merely busy; at least %u",
                                r->timeout_ms, TDM_REPL_TIMEOUT_MIN_MS);
        cfg_field_join(f, g, "resync_rate");
        if ((rc = cfg_check_range(r->resync_rate, 1, INT64_MAX, f, err, errlen)))
                return rc;
        cfg_field_join(f, g, "resync_min_rate");
        if ((rc = cfg_check_range(r->resync_min_rate, 1, INT64_MAX, f, err, errlen)))
                return rc;
        if (r->resync_min_rate > r->resync_rate)
                return cfg_fail(err, errlen, -EINVAL, f,
                                "%" PRIu64 " bytes/s exceeds resync_rate (%" PRIu64 " bytes/s)",
                                r->resync_min_rate, r->resync_rate);
        cfg_field_join(f, g, "link_protection");
        if (r->link_protection != TDM_LINK_PROTECT_AUTHENTICATE &&
            r->link_protection != TDM_LINK_PROTECT_ENCRYPT)
                return cfg_fail(err, errlen, -EINVAL, f,
                                "unknown protection %d (\"authenticate\" or \"encrypt\")",
                                r->link_protection);
        return validate_alua(r, g, err, errlen);
}

/*
 * What one replicated LUN needs from the others: its own listening endpoint (one listener
 * per LUN), not an iSCSI portal, and its own metadata file.
 */
static int validate_unique(const struct tdm_config *cfg, size_t ti, size_t li, const char *g,
                           char *err, size_t errlen)
{
        const struct tdm_repl_cfg *r = &cfg->targets[ti].luns[li].repl;
        const struct tdm_repl_node *me = tdm_repl_local_node(r, cfg->node_id);
        char f[FIELD_MAX], nf[FIELD_MAX], host[128], other[128];
        uint16_t port, oport;
        cfg_field_join(f, g, "nodes");
        cfg_field_index(nf, f, (size_t)(me - r->nodes));
        cfg_field_join(f, nf, "address");
        if (tdm_repl_node_endpoint(r, me, host, sizeof(host), &port) < 0)
                return cfg_fail(err, errlen, -EINVAL, f, "\"%s\" is not HOST[:PORT]", me->address);
        for (size_t i = 0; i < cfg->n_listen; i++)
                if (tdm_parse_hostport(cfg->listen[i], other, sizeof(other), &oport) == 0 &&
                    endpoints_clash(host, port, other, oport))
                        return cfg_fail(err, errlen, -EINVAL, f,
                                        "%s port %u clashes with the iSCSI portal listen[%zu] "
                                        "(\"%s\"); give replication its own port",
                                        host, port, i, cfg->listen[i]);
        for (size_t tj = 0; tj <= ti; tj++) {
                const struct tdm_target_cfg *t = &cfg->targets[tj];
                size_t end = tj == ti ? li : t->n_luns;
                for (size_t lj = 0; lj < end; lj++) {
                        const struct tdm_repl_cfg *o = &t->luns[lj].repl;
                        const struct tdm_repl_node *ome = tdm_repl_local_node(o, cfg->node_id);
                        if (!o->enabled || !ome)
                                continue;
                        if (tdm_repl_node_endpoint(o, ome, other, sizeof(other), &oport) == 0 &&
                            endpoints_clash(host, port, other, oport))
                                return cfg_fail(err, errlen, -EINVAL, f,
                                                "%s port %u is already where "
                                                "targets[%zu].luns[%zu] listens; give each "
                                                "replicated LUN its own port",
                                                host, port, tj, lj);
                        if (r->metadata[0] && strcmp(r->metadata, o->metadata) == 0) {
                                cfg_field_join(f, g, "metadata");
                                return cfg_fail(err, errlen, -EINVAL, f,
                                                "already used by targets[%zu].luns[%zu]", tj, lj);
                        }
                }
        }
        if (!r->metadata[0])
                return 0;
        for (size_t tj = 0; tj < cfg->n_targets; tj++)
                for (size_t lj = 0; lj < cfg->targets[tj].n_luns; lj++)
                        if (strcmp(cfg->targets[tj].luns[lj].path, r->metadata) == 0) {
                                cfg_field_join(f, g, "metadata");
                                return cfg_fail(err, errlen, -EINVAL, f,
                                                "is the backing store of targets[%zu].luns[%zu]",
                                                tj, lj);
                        }
        return 0;
}

int cfg_validate_repl(const struct tdm_config *cfg, size_t ti, size_t li, const char *f, char *err,
                      size_t errlen)
{
        const struct tdm_lun_cfg *l = &cfg->targets[ti].luns[li];
        char g[FIELD_MAX];
        int rc;
        if (!l->repl.enabled)
                return 0;
        if (cfg->node_id < 1 || cfg->node_id > 255)
                return cfg_fail(err, errlen, -EINVAL, "node_id",
                                "must be set (1..255) when a LUN is replicated (%s); it says "
                                "which of replication.nodes this node is",
                                f);
        cfg_field_join(g, f, "readonly");
        if (l->readonly)
                return cfg_fail(err, errlen, -EINVAL, g,
                                "a replicated LUN cannot be read-only: the peer's writes must "
                                "land on it");
        cfg_field_join(g, f, "replication");
        if ((rc = validate_settings(&l->repl, g, err, errlen)) ||
            (rc = validate_nodes(cfg, &l->repl, g, err, errlen)) ||
            (rc = validate_split_brain(&l->repl, g, err, errlen)) ||
            (rc = validate_unique(cfg, ti, li, g, err, errlen)))
                return rc;
        return 0;
}
