/*
 * Handlers of the configuration operations: targets, LUNs, ACLs and CHAP, each one call of
 * the target registry (which applies it live and saves the configuration).
 */
#include <errno.h>
#include <string.h>

#include "admin_internal.h"
#include "tandem/registry.h"

void admin_target_add(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__TargetAdd *m = (const void *)request;
        char err[512] = "";
        admin_result(rep, tdm_registry_target_add(m->iqn, err, sizeof(err)), err);
}

void admin_target_del(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__TargetDel *m = (const void *)request;
        char err[512] = "";
        admin_result(rep, tdm_registry_target_del(m->iqn, err, sizeof(err)), err);
}

void admin_lun_add(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__LunAdd *m = (const void *)request;
        char err[512] = "";
        struct tdm_lun_cfg l;
        tdm_lun_defaults(&l);
        l.lun = m->lun;
        if (!admin_copy(rep, l.path, sizeof(l.path), m->path, "path"))
                return;
        l.size = m->size;
        l.thin = m->thin;
        l.direct = m->direct;
        l.readonly = m->readonly;
        if (m->block_size)
                l.block_size = m->block_size;
        l.physical_block_size = m->physical_block_size;
        if (m->wce != TANDEM__ADMIN__TOGGLE__TOGGLE_DEFAULT)
                l.wce = m->wce == TANDEM__ADMIN__TOGGLE__TOGGLE_ON;
        admin_result(rep, tdm_registry_lun_add(m->iqn, &l, err, sizeof(err)), err);
}

void admin_lun_del(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__LunDel *m = (const void *)request;
        char err[512] = "";
        admin_result(rep, tdm_registry_lun_del(m->iqn, m->lun, err, sizeof(err)), err);
}

void admin_lun_resize(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__LunResize *m = (const void *)request;
        char err[512] = "";
        /* Allocated first: a resize that happened is never reported as out of memory. */
        Tandem__Admin__LunResized *done = admin_alloc(rep, sizeof(*done));
        if (!done)
                return;
        tandem__admin__lun_resized__init(done);
        int rc = tdm_registry_lun_resize(m->iqn, m->lun, m->size, &done->old_size, &done->new_size,
                                         err, sizeof(err));
        admin_result(rep, rc, err);
        if (rc == 0)
                rep->r.lun_resized = done;
}

void admin_acl_add(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__AclAdd *m = (const void *)request;
        char err[512] = "";
        admin_result(rep, tdm_registry_acl_add(m->iqn, m->initiator, err, sizeof(err)), err);
}

void admin_acl_del(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__AclDel *m = (const void *)request;
        char err[512] = "";
        admin_result(rep, tdm_registry_acl_del(m->iqn, m->initiator, err, sizeof(err)), err);
}

/* An empty user clears CHAP; either the target's (iqn) or discovery's. */
void admin_chap_set(struct admin_reply *rep, const ProtobufCMessage *request)
{
        const Tandem__Admin__ChapSet *m = (const void *)request;
        char err[512] = "";
        struct tdm_chap_cfg c = {0};
        c.enabled = m->user && *m->user;
        if (c.enabled &&
            (!admin_copy(rep, c.user, sizeof(c.user), m->user, "user") ||
             !admin_copy(rep, c.secret, sizeof(c.secret), m->secret ? m->secret : "", "secret")))
                return;
        c.mutual = c.enabled &&
                   ((m->mutual_user && *m->mutual_user) || (m->mutual_secret && *m->mutual_secret));
        if (c.mutual && (!admin_copy(rep, c.mutual_user, sizeof(c.mutual_user),
                                     m->mutual_user ? m->mutual_user : "", "mutual_user") ||
                         !admin_copy(rep, c.mutual_secret, sizeof(c.mutual_secret),
                                     m->mutual_secret ? m->mutual_secret : "", "mutual_secret")))
                return;
        const char *iqn = m->discovery ? NULL : m->iqn;
        admin_result(rep, tdm_registry_chap_set(iqn, &c, err, sizeof(err)), err);
}
