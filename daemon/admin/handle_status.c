/*
 * The handler of status: the daemon, its targets, LUNs, sessions, cluster membership and the
 * replication summary.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin_internal.h"
#include "tandem/cluster.h"
#include "tandem/registry.h"
#include "tandem/session_info.h"

/* Who this daemon is, for status. */
static struct {
        char instance[TDM_INSTANCE_MAX];
        struct timespec started;
} ident = {.instance = "default"};

void admin_dispatch_set_identity(const char *instance)
{
        snprintf(ident.instance, sizeof(ident.instance), "%s",
                 instance && *instance ? instance : "default");
        clock_gettime(CLOCK_MONOTONIC, &ident.started);
}

struct iscsi_session_info *admin_sessions_get(size_t *n_out)
{
        size_t cap = 64;
        for (int tries = 0; tries < 4; tries++) {
                struct iscsi_session_info *s = calloc(cap, sizeof(*s));
                if (!s)
                        break;
                size_t n = iscsi_sessions_snapshot(s, cap);
                if (n <= cap) {
                        *n_out = n;
                        return s;
                }
                free(s);
                cap = n + 16;
        }
        *n_out = 0;
        return NULL;
}

static Tandem__Admin__LunInfo *lun_info(struct admin_reply *rep, struct scsi_target *st,
                                        const struct tdm_lun_cfg *l)
{
        Tandem__Admin__LunInfo *li = admin_alloc(rep, sizeof(*li));
        if (!li)
                return NULL;
        tandem__admin__lun_info__init(li);
        li->lun = (uint32_t)l->lun;
        li->path = (char *)l->path;
        li->configured_size = l->size;
        li->block_size = l->block_size;
        li->thin = l->thin;
        li->direct = l->direct;
        li->naa = (char *)l->naa;
        li->serial = (char *)l->serial;
        li->wce = l->wce;
        li->readonly = l->readonly;
        li->physical_block_size = l->physical_block_size ? l->physical_block_size : l->block_size;
        struct scsi_lun *lun = st ? scsi_target_get_lun(st, l->lun) : NULL;
        if (lun) {
                li->online = true;
                li->size = atomic_load(&lun->num_blocks) * lun->block_size;
                li->wce = atomic_load(&lun->wce);
                li->physical_block_size = lun->block_size << lun->lbppb_exponent;
                scsi_lun_put(lun);
        }
        return li;
}

static Tandem__Admin__TargetInfo *target_info(struct admin_reply *rep,
                                              const struct tdm_target_cfg *t,
                                              const struct iscsi_session_info *s, size_t n_sessions)
{
        Tandem__Admin__TargetInfo *ti = admin_alloc(rep, sizeof(*ti));
        if (!ti)
                return NULL;
        tandem__admin__target_info__init(ti);
        ti->iqn = (char *)t->iqn;
        ti->alias = (char *)t->alias;
        ti->tpgt = t->tpgt;
        ti->chap = t->chap.enabled;
        ti->mutual_chap = t->chap.enabled && t->chap.mutual;
        ti->chap_user = (char *)(t->chap.enabled ? t->chap.user : "");
        ti->acl = admin_alloc(rep, t->n_acl * sizeof(char *));
        ti->luns = admin_alloc(rep, t->n_luns * sizeof(*ti->luns));
        if (!ti->acl || !ti->luns)
                return NULL;
        for (size_t i = 0; i < t->n_acl; i++)
                ti->acl[ti->n_acl++] = (char *)t->acl[i];
        for (size_t i = 0; i < n_sessions; i++)
                if (tdm_iscsi_name_equal(s[i].target, t->iqn))
                        ti->sessions++;
        struct scsi_target *st = tdm_registry_get_target(t->iqn);
        for (size_t i = 0; i < t->n_luns; i++) {
                ti->luns[i] = lun_info(rep, st, &t->luns[i]);
                if (!ti->luns[i])
                        break;
                ti->n_luns = i + 1;
        }
        if (st)
                scsi_target_put(st);
        return ti;
}

static Tandem__Admin__SessionInfo *session_info(struct admin_reply *rep,
                                                const struct iscsi_session_info *s)
{
        Tandem__Admin__SessionInfo *si = admin_alloc(rep, sizeof(*si));
        uint8_t *isid = admin_alloc(rep, sizeof(s->isid));
        if (!si || !isid)
                return NULL;
        tandem__admin__session_info__init(si);
        memcpy(isid, s->isid, sizeof(s->isid));
        si->isid.data = isid;
        si->isid.len = sizeof(s->isid);
        si->initiator = (char *)s->initiator;
        si->target = (char *)s->target;
        si->tsih = s->tsih;
        si->peer = (char *)s->peer;
        si->cid = s->cid;
        si->state = (char *)s->state;
        si->commands_in_flight = s->commands_in_flight;
        return si;
}

/* Membership and quorum for the status. */
static Tandem__Admin__ClusterInfo *cluster_info(struct admin_reply *rep)
{
        Tandem__Admin__ClusterInfo *ci = admin_alloc(rep, sizeof(*ci));
        struct cluster_status *cs = admin_alloc(rep, sizeof(*cs));
        if (!ci || !cs)
                return NULL;
        tandem__admin__cluster_info__init(ci);
        cluster_get_status(cs);
        ci->enabled = cs->enabled;
        ci->quorate = cs->quorate;
        ci->members = cs->members;
        ci->n_members = cs->n_members;
        ci->node_id = cs->node_id;
        ci->cpg_connected = cs->cpg_connected;
        ci->quorum_connected = cs->quorum_connected;
        ci->group = cs->group;
        ci->corosync_node_id = cs->corosync_node_id;
        ci->last_error = cs->last_error;
        return ci;
}

/* Session rows are referenced by the response: the reply frees them after packing. */
void admin_status(struct admin_reply *rep, const ProtobufCMessage *request)
{
        Tandem__Admin__AdminResponse *r = &rep->r;
        (void)request;
        const struct tdm_config *cfg = tdm_registry_config();
        Tandem__Admin__Status *st = admin_alloc(rep, sizeof(*st));
        if (!st)
                return;
        tandem__admin__status__init(st);
        r->status = st;
        st->instance = ident.instance;
        st->version = TANDEM_VERSION;
        st->pid = (uint32_t)getpid();
        st->config_path = (char *)tdm_registry_config_path();
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        st->uptime_s = (uint64_t)(now.tv_sec - ident.started.tv_sec);
        st->listen = admin_alloc(rep, cfg->n_listen * sizeof(char *));
        if (!st->listen)
                return;
        for (size_t i = 0; i < cfg->n_listen; i++)
                st->listen[st->n_listen++] = (char *)cfg->listen[i];
        st->discovery_chap = cfg->discovery_chap.enabled;
        st->discovery_mutual_chap = cfg->discovery_chap.enabled && cfg->discovery_chap.mutual;
        if (!(st->cluster = cluster_info(rep)))
                return;

        size_t n_sessions = 0;
        rep->sessions = admin_sessions_get(&n_sessions);
        st->sessions = admin_alloc(rep, n_sessions * sizeof(*st->sessions));
        st->targets = admin_alloc(rep, cfg->n_targets * sizeof(*st->targets));
        if (!st->sessions || !st->targets)
                return;
        for (size_t i = 0; i < n_sessions; i++) {
                if (!(st->sessions[i] = session_info(rep, &rep->sessions[i])))
                        return;
                st->n_sessions = i + 1;
        }
        for (size_t i = 0; i < cfg->n_targets; i++) {
                if (!(st->targets[i] =
                          target_info(rep, &cfg->targets[i], rep->sessions, n_sessions)))
                        return;
                st->n_targets = i + 1;
        }
        admin_fill_repl_status(rep, NULL, 0); /* the replication summary */
        r->ok = true;
}
