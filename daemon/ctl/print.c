/*
 * tandemctl's printing of an answer: the row's printer when it has one, else what the row
 * says a success prints (its done text), or {"ok": true} in JSON. Helpers the printers share.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "ctl_internal.h"

void ctl_human_size(char *out, size_t n, uint64_t bytes)
{
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = (double)bytes;
        int u = 0;
        while (v >= 1024 && u < 5) {
                v /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(out, n, "%" PRIu64 " B", bytes);
        else
                snprintf(out, n, "%.1f %s", v, units[u]);
}

void ctl_print_json(FILE *out, json_object *o)
{
        fprintf(out, "%s\n",
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

json_object *ctl_jstr(const char *s)
{
        return json_object_new_string(s ? s : "");
}

/* The row's done text with each "{member}" replaced by the request's value. */
static void print_done(FILE *out, const struct admin_op *op, const ProtobufCMessage *m)
{
        const char *t = op->done;
        if (m && op->done_flag && ctl_bool(m, op->done_flag))
                t = op->done_flagged;
        if (!t || !m) {
                fputs("ok\n", out);
                return;
        }
        for (const char *p = t; *p;) {
                const char *open = strchr(p, '{'), *close = open ? strchr(open, '}') : NULL;
                if (!close) {
                        fputs(p, out);
                        break;
                }
                char name[64], value[4096];
                fwrite(p, 1, (size_t)(open - p), out);
                snprintf(name, sizeof(name), "%.*s", (int)(close - open - 1), open + 1);
                if (ctl_member_text(m, name, value, sizeof(value)))
                        fputs(value, out);
                p = close + 1;
        }
        fputc('\n', out);
}

int admin_print(FILE *out, const struct admin_call *call, const Tandem__Admin__AdminResponse *r,
                bool json)
{
        if (!r->ok)
                return -EIO;
        const struct admin_op *op = call->op;
        if (op->print && op->print(out, &call->req, r, json))
                return 0;
        if (json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "ok", json_object_new_boolean(true));
                ctl_print_json(out, o);
        } else {
                print_done(out, op, admin_request_message(&call->req));
        }
        return 0;
}

/* ---------------------------------------------------------------- printers of rows */

bool admin_print_reloaded(FILE *out, const Tandem__Admin__AdminRequest *q,
                          const Tandem__Admin__AdminResponse *r, bool json)
{
        (void)q;
        const Tandem__Admin__Reloaded *d = r->reloaded;
        if (!d)
                return false;
        if (json) {
                json_object *o = json_object_new_object();
                json_object *list = json_object_new_array();
                for (size_t i = 0; i < d->n_changes; i++)
                        json_object_array_add(list, ctl_jstr(d->changes[i]));
                json_object_object_add(o, "ok", json_object_new_boolean(true));
                json_object_object_add(o, "changes", list);
                ctl_print_json(out, o);
                return true;
        }
        if (d->n_changes == 0)
                fprintf(out, "reloaded: nothing changed\n");
        for (size_t i = 0; i < d->n_changes; i++)
                fprintf(out, "reloaded: %s\n", d->changes[i]);
        return true;
}

bool admin_print_resized(FILE *out, const Tandem__Admin__AdminRequest *q,
                         const Tandem__Admin__AdminResponse *r, bool json)
{
        const Tandem__Admin__LunResized *d = r->lun_resized;
        if (!d)
                return false;
        if (json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "ok", json_object_new_boolean(true));
                json_object_object_add(o, "old_size", json_object_new_uint64(d->old_size));
                json_object_object_add(o, "new_size", json_object_new_uint64(d->new_size));
                json_object_object_add(o, "changed",
                                       json_object_new_boolean(d->old_size != d->new_size));
                ctl_print_json(out, o);
                return true;
        }
        char from[32], to[32];
        ctl_human_size(from, sizeof(from), d->old_size);
        ctl_human_size(to, sizeof(to), d->new_size);
        if (d->old_size == d->new_size)
                fprintf(out, "LUN %u of %s unchanged: %s (%" PRIu64 " bytes)\n", q->lun_resize->lun,
                        q->lun_resize->iqn, to, d->new_size);
        else
                fprintf(out,
                        "LUN %u of %s resized from %s to %s (%" PRIu64
                        " bytes); initiators are told the capacity changed\n",
                        q->lun_resize->lun, q->lun_resize->iqn, from, to, d->new_size);
        return true;
}

bool admin_print_chap(FILE *out, const Tandem__Admin__AdminRequest *q,
                      const Tandem__Admin__AdminResponse *r, bool json)
{
        (void)r;
        if (json)
                return false;
        const Tandem__Admin__ChapSet *c = q->chap_set;
        const char *what = c->discovery ? "discovery" : c->iqn;
        if (c->user && *c->user)
                fprintf(out, "CHAP for %s set (user %s%s)\n", what, c->user,
                        c->mutual_user && *c->mutual_user ? ", mutual" : "");
        else
                fprintf(out, "CHAP for %s cleared\n", what);
        return true;
}
