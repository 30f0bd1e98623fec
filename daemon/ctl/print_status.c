/* tandemctl status: the daemon, its targets, LUNs and sessions, its cluster membership. */
#include <inttypes.h>

#include "ctl_internal.h"

static void isid_hex(char *out, const ProtobufCBinaryData *isid)
{
        out[0] = '\0';
        for (size_t i = 0; i < isid->len && i < 6; i++)
                sprintf(out + 2 * i, "%02x", isid->data[i]);
}

static json_object *cluster_json(const Tandem__Admin__ClusterInfo *c)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "enabled", json_object_new_boolean(c && c->enabled));
        if (!c || !c->enabled)
                return o;
        json_object_object_add(o, "group", ctl_jstr(c->group));
        json_object_object_add(o, "node_id", json_object_new_int64(c->node_id));
        json_object_object_add(o, "corosync_node_id", json_object_new_int64(c->corosync_node_id));
        json_object_object_add(o, "quorate", json_object_new_boolean(c->quorate));
        json_object *m = json_object_new_array();
        for (size_t i = 0; i < c->n_members; i++)
                json_object_array_add(m, json_object_new_int64(c->members[i]));
        json_object_object_add(o, "members", m);
        json_object_object_add(o, "cpg_connected", json_object_new_boolean(c->cpg_connected));
        json_object_object_add(o, "quorum_connected", json_object_new_boolean(c->quorum_connected));
        json_object_object_add(o, "last_error", ctl_jstr(c->last_error));
        return o;
}

static void cluster_text(FILE *out, const Tandem__Admin__ClusterInfo *c)
{
        if (!c || !c->enabled) {
                fprintf(out, "cluster: disabled\n");
                return;
        }
        fprintf(out, "cluster: group %s, node %u, quorate %s, members", c->group, c->node_id,
                c->quorate ? "yes" : "no");
        if (c->n_members == 0)
                fprintf(out, " none");
        for (size_t i = 0; i < c->n_members; i++)
                fprintf(out, "%s%u", i ? "," : " ", c->members[i]);
        fprintf(out, ", cpg %s", c->cpg_connected ? "connected" : "not connected");
        if (c->last_error && *c->last_error)
                fprintf(out, " (%s)", c->last_error);
        fprintf(out, "\n");
}
static json_object *status_json(const Tandem__Admin__Status *s)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "instance", ctl_jstr(s->instance));
        json_object_object_add(o, "version", ctl_jstr(s->version));
        json_object_object_add(o, "pid", json_object_new_int64(s->pid));
        json_object_object_add(o, "uptime_s", json_object_new_uint64(s->uptime_s));
        json_object_object_add(o, "config_path", ctl_jstr(s->config_path));
        json_object *listen = json_object_new_array();
        for (size_t i = 0; i < s->n_listen; i++)
                json_object_array_add(listen, ctl_jstr(s->listen[i]));
        json_object_object_add(o, "listen", listen);
        json_object *disc = json_object_new_object();
        json_object_object_add(disc, "chap", json_object_new_boolean(s->discovery_chap));
        json_object_object_add(disc, "mutual_chap",
                               json_object_new_boolean(s->discovery_mutual_chap));
        json_object_object_add(o, "discovery", disc);
        json_object_object_add(o, "cluster", cluster_json(s->cluster));
        json_object *targets = json_object_new_array();
        for (size_t i = 0; i < s->n_targets; i++) {
                const Tandem__Admin__TargetInfo *t = s->targets[i];
                json_object *tj = json_object_new_object();
                json_object_object_add(tj, "iqn", ctl_jstr(t->iqn));
                json_object_object_add(tj, "alias", ctl_jstr(t->alias));
                json_object_object_add(tj, "tpgt", json_object_new_int(t->tpgt));
                json_object *acl = json_object_new_array();
                for (size_t j = 0; j < t->n_acl; j++)
                        json_object_array_add(acl, ctl_jstr(t->acl[j]));
                json_object_object_add(tj, "acl", acl);
                json_object_object_add(tj, "chap", json_object_new_boolean(t->chap));
                json_object_object_add(tj, "mutual_chap", json_object_new_boolean(t->mutual_chap));
                json_object_object_add(tj, "chap_user", ctl_jstr(t->chap_user));
                json_object_object_add(tj, "sessions", json_object_new_int64(t->sessions));
                json_object *luns = json_object_new_array();
                for (size_t j = 0; j < t->n_luns; j++) {
                        const Tandem__Admin__LunInfo *l = t->luns[j];
                        json_object *lj = json_object_new_object();
                        json_object_object_add(lj, "lun", json_object_new_int64(l->lun));
                        json_object_object_add(lj, "path", ctl_jstr(l->path));
                        json_object_object_add(lj, "size", json_object_new_uint64(l->size));
                        json_object_object_add(lj, "configured_size",
                                               json_object_new_uint64(l->configured_size));
                        json_object_object_add(lj, "block_size",
                                               json_object_new_int64(l->block_size));
                        json_object_object_add(lj, "physical_block_size",
                                               json_object_new_int64(l->physical_block_size));
                        json_object_object_add(lj, "thin", json_object_new_boolean(l->thin));
                        json_object_object_add(lj, "wce", json_object_new_boolean(l->wce));
                        json_object_object_add(lj, "direct", json_object_new_boolean(l->direct));
                        json_object_object_add(lj, "readonly",
                                               json_object_new_boolean(l->readonly));
                        json_object_object_add(lj, "naa", ctl_jstr(l->naa));
                        json_object_object_add(lj, "serial", ctl_jstr(l->serial));
                        json_object_object_add(lj, "online", json_object_new_boolean(l->online));
                        json_object_array_add(luns, lj);
                }
                json_object_object_add(tj, "luns", luns);
                json_object_array_add(targets, tj);
        }
        json_object_object_add(o, "targets", targets);
        json_object *sessions = json_object_new_array();
        for (size_t i = 0; i < s->n_sessions; i++) {
                const Tandem__Admin__SessionInfo *x = s->sessions[i];
                char isid[13];
                isid_hex(isid, &x->isid);
                json_object *sj = json_object_new_object();
                json_object_object_add(sj, "initiator", ctl_jstr(x->initiator));
                json_object_object_add(sj, "isid", ctl_jstr(isid));
                json_object_object_add(sj, "tsih", json_object_new_int64(x->tsih));
                json_object_object_add(sj, "target", ctl_jstr(x->target));
                json_object_object_add(sj, "peer", ctl_jstr(x->peer));
                json_object_object_add(sj, "cid", json_object_new_int64(x->cid));
                json_object_object_add(sj, "state", ctl_jstr(x->state));
                json_object_object_add(sj, "commands_in_flight",
                                       json_object_new_int64(x->commands_in_flight));
                json_object_array_add(sessions, sj);
        }
        json_object_object_add(o, "sessions", sessions);
        return o;
}

static void status_text(FILE *out, const Tandem__Admin__Status *s)
{
        uint64_t up = s->uptime_s;
        fprintf(out,
                "tandemd %s, instance %s, pid %u, up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64
                ":%02" PRIu64 "\n",
                s->version, s->instance, s->pid, up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
        if (s->config_path && *s->config_path)
                fprintf(out, "config: %s\n", s->config_path);
        fprintf(out, "listen:");
        for (size_t i = 0; i < s->n_listen; i++)
                fprintf(out, " %s", s->listen[i]);
        fprintf(out, "\ndiscovery CHAP: %s\n",
                !s->discovery_chap         ? "none"
                : s->discovery_mutual_chap ? "mutual"
                                           : "one-way");
        cluster_text(out, s->cluster);
        if (s->n_targets == 0)
                fprintf(out, "\nno targets\n");
        for (size_t i = 0; i < s->n_targets; i++) {
                const Tandem__Admin__TargetInfo *t = s->targets[i];
                fprintf(out, "\ntarget %s", t->iqn);
                if (t->alias && *t->alias)
                        fprintf(out, " (%s)", t->alias);
                fprintf(out, "  tpgt %u  sessions %u\n", t->tpgt, t->sessions);
                fprintf(out, "  acl:");
                if (t->n_acl == 0)
                        fprintf(out, " (empty: no initiator may log in)");
                for (size_t j = 0; j < t->n_acl; j++)
                        fprintf(out, " %s", t->acl[j]);
                fprintf(out, "\n  chap: ");
                if (t->chap)
                        fprintf(out, "user %s%s\n", t->chap_user, t->mutual_chap ? ", mutual" : "");
                else
                        fprintf(out, "none\n");
                for (size_t j = 0; j < t->n_luns; j++) {
                        const Tandem__Admin__LunInfo *l = t->luns[j];
                        char size[32];
                        ctl_human_size(size, sizeof(size), l->size);
                        char physical[32] = "";
                        if (l->physical_block_size > l->block_size)
                                snprintf(physical, sizeof(physical), "  physical %u",
                                         l->physical_block_size);
                        fprintf(out, "  lun %u  %s  %s  block %u%s%s%s%s%s%s\n", l->lun, size,
                                l->path, l->block_size, physical, l->thin ? "  thin" : "",
                                l->wce ? "  wce" : "", l->direct ? "  direct" : "",
                                l->readonly ? "  readonly" : "", l->online ? "" : "  OFFLINE");
                        fprintf(out, "         naa.%s  serial %s\n", l->naa, l->serial);
                }
        }
        fprintf(out, "\nsessions: %zu\n", s->n_sessions);
        for (size_t i = 0; i < s->n_sessions; i++) {
                const Tandem__Admin__SessionInfo *x = s->sessions[i];
                char isid[13];
                isid_hex(isid, &x->isid);
                fprintf(out, "  %s -> %s  isid %s tsih %u cid %u  peer %s  %s  in flight %u\n",
                        x->initiator, x->target && *x->target ? x->target : "(discovery)", isid,
                        x->tsih, x->cid, x->peer, x->state, x->commands_in_flight);
        }
}

bool admin_print_status(FILE *out, const Tandem__Admin__AdminRequest *q,
                        const Tandem__Admin__AdminResponse *r, bool json)
{
        (void)q;
        if (!r->status)
                return false;
        if (json) {
                json_object *o = status_json(r->status);
                json_object_object_add(o, "replication", ctl_repl_luns_json(r->repl_status));
                ctl_print_json(out, o);
        } else {
                status_text(out, r->status);
                ctl_repl_summary_text(out, r->repl_status);
        }
        return true;
}
