/*
 * Reload: the config file against the running configuration (daemon/config/diff.c), each
 * difference applied through the registry's edit operations (which save the file again in
 * tandemd's form) or the portal list. A refused file changes nothing; a change that fails
 * midway stops the reload with the ones before it applied, and says so.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "admin_internal.h"
#include "tandem/config_diff.h"
#include "tandem/iscsi_portal.h"
#include "tandem/log.h"
#include "tandem/medium.h"
#include "tandem/config_values.h"
#include "tandem/registry.h"
#include "tandem/reload.h"

static qb_loop_t *portal_loop;

void admin_reload_set_loop(qb_loop_t *loop)
{
        portal_loop = loop;
}

static int portal(const char *addr, bool add, char *err, size_t errlen)
{
        char host[128];
        uint16_t port;
        if (tdm_parse_hostport(addr, host, sizeof(host), &port) < 0) {
                snprintf(err, errlen, "listen: bad address %s", addr);
                return -EINVAL;
        }
        int rc = add ? (portal_loop ? iscsi_listen_add(portal_loop, host, port) : -ENODEV)
                     : iscsi_listen_del(host, port);
        if (rc < 0)
                snprintf(err, errlen, "listen: %s %s: %s", add ? "cannot listen on" : "no portal",
                         addr, strerror(-rc));
        return rc;
}

/* The size in the file is a minimum: a LUN whose store is already larger keeps that size. */
static int grow(const struct tdm_change *c, char *err, size_t errlen)
{
        uint64_t size = c->size;
        struct scsi_target *t = tdm_registry_get_target(c->iqn);
        struct scsi_lun *lun = t ? scsi_target_get_lun(t, c->lun_id) : NULL;
        if (lun && tdm_medium_size(lun->medium) > size)
                size = tdm_medium_size(lun->medium);
        scsi_lun_put(lun);
        scsi_target_put(t);
        return tdm_registry_lun_resize(c->iqn, c->lun_id, size, NULL, NULL, err, errlen);
}

static int apply(const struct tdm_change *c, char *err, size_t errlen)
{
        switch (c->kind) {
        case TDM_CHANGE_LISTEN_ADD:
                return portal(c->listen, true, err, errlen);
        case TDM_CHANGE_LISTEN_DEL:
                return portal(c->listen, false, err, errlen);
        case TDM_CHANGE_TARGET_ADD:
                return tdm_registry_target_add(c->iqn, err, errlen);
        case TDM_CHANGE_TARGET_DEL:
                return tdm_registry_target_del(c->iqn, err, errlen);
        case TDM_CHANGE_LUN_ADD:
                return tdm_registry_lun_add(c->iqn, c->lun, err, errlen);
        case TDM_CHANGE_LUN_DEL:
                return tdm_registry_lun_del(c->iqn, c->lun_id, err, errlen);
        case TDM_CHANGE_LUN_RESIZE:
                return grow(c, err, errlen);
        case TDM_CHANGE_ACL_ADD:
                return tdm_registry_acl_add(c->iqn, c->initiator, err, errlen);
        case TDM_CHANGE_ACL_DEL:
                return tdm_registry_acl_del(c->iqn, c->initiator, err, errlen);
        case TDM_CHANGE_CHAP_SET:
                return tdm_registry_chap_set(c->iqn, c->chap, err, errlen);
        }
        return -EINVAL;
}

static bool changes_portals(const struct tdm_changes *ch)
{
        for (size_t i = 0; i < ch->n; i++)
                if (ch->v[i].kind == TDM_CHANGE_LISTEN_ADD ||
                    ch->v[i].kind == TDM_CHANGE_LISTEN_DEL)
                        return true;
        return false;
}

static int apply_all(const struct tdm_config *next, const struct tdm_changes *ch,
                     tdm_reload_report report, void *arg, char *err, size_t errlen)
{
        for (size_t i = 0; i < ch->n; i++) {
                char what[512], why[512] = "";
                tdm_change_describe(&ch->v[i], what, sizeof(what));
                int rc = apply(&ch->v[i], why, sizeof(why));
                if (rc < 0) {
                        snprintf(err, errlen,
                                 "%s (reload stopped: %zu of %zu changes applied; %s "
                                 "failed)",
                                 why[0] ? why : strerror(-rc), i, ch->n, what);
                        return rc;
                }
                log_notice("reload: %s", what);
                if (report)
                        report(arg, what);
        }
        char why[512] = "";
        int rc = changes_portals(ch) ? tdm_registry_set_listen(next, why, sizeof(why)) : 0;
        if (rc < 0)
                snprintf(err, errlen, "%s (the portals changed; saving the file failed)", why);
        return rc;
}

int tdm_reload(tdm_reload_report report, void *arg, char *err, size_t errlen)
{
        const char *path = tdm_registry_config_path();
        if (!path[0]) {
                snprintf(err, errlen, "reload: tandemd runs without a config file");
                return -ENOENT;
        }
        struct tdm_config next;
        char why[512] = "";
        int rc = tdm_config_load(path, &next, why, sizeof(why));
        if (rc < 0) {
                snprintf(err, errlen, "%s (nothing changed)", why); /* why names the file */
                return rc;
        }
        /* A copy: every change applied replaces the registry's configuration. */
        struct tdm_config cur;
        if ((rc = tdm_config_copy(&cur, tdm_registry_config())) < 0) {
                tdm_config_free(&next);
                snprintf(err, errlen, "reload: out of memory (nothing changed)");
                return rc;
        }
        struct tdm_changes ch;
        rc = tdm_config_diff(tdm_registry_file_base(), &cur, &next, &ch, why, sizeof(why));
        if (rc < 0)
                snprintf(err, errlen, "%s: %s (nothing changed)", path, why);
        else
                rc = apply_all(&next, &ch, report, arg, err, errlen);
        if (rc == 0 && ch.n == 0)
                log_info("reload: %s matches the running configuration", path);
        tdm_changes_free(&ch);
        tdm_config_free(&cur);
        tdm_config_free(&next);
        return rc;
}

/* ---- tandemctl reload ---- */

struct reply_lines {
        struct admin_reply *rep;
        Tandem__Admin__Reloaded *done;
        size_t cap;
};

static void add_line(void *arg, const char *change)
{
        struct reply_lines *l = arg;
        if (l->done->n_changes == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                char **v = admin_alloc(l->rep, cap * sizeof(*v));
                if (!v)
                        return;
                if (l->done->n_changes)
                        memcpy(v, l->done->changes, l->done->n_changes * sizeof(*v));
                l->done->changes = v;
                l->cap = cap;
        }
        char *s = admin_strdup(l->rep, change);
        if (s)
                l->done->changes[l->done->n_changes++] = s;
}

void admin_reload(struct admin_reply *rep, const ProtobufCMessage *request)
{
        (void)request;
        Tandem__Admin__Reloaded *done = admin_alloc(rep, sizeof(*done));
        if (!done)
                return;
        tandem__admin__reloaded__init(done);
        struct reply_lines lines = {.rep = rep, .done = done};
        char err[1024] = "";
        int rc = tdm_reload(add_line, &lines, err, sizeof(err));
        admin_result(rep, rc, err);
        if (rc == 0)
                rep->r.reloaded = done;
}
