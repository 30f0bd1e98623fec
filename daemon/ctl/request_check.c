/*
 * tandemd's check of a request against its row, before the handler runs: the rules of the
 * row's arguments that a request built by anything but tandemctl may break.
 */
#include "ctl_internal.h"
#include "tandem/config.h"

/* An argument an option stands for (chap IQN or --discovery): exactly one of them. */
static int check_either(const ProtobufCMessage *m, const struct admin_arg *a, char *err,
                        size_t errlen)
{
        const struct admin_option *o = admin_option_by_bit(a->unless);
        bool instead = ctl_bool(m, o->flag), has = ctl_member_set(m, a->field);
        if (instead && has)
                return admin_bad(err, errlen, "%s: not allowed with %s", a->name, o->name);
        if (!instead && !has)
                return admin_bad(err, errlen, "%s: missing (required, or %s)", a->name, o->name);
        return 0;
}

int admin_request_check(const struct admin_op *op, const ProtobufCMessage *m, char *err,
                        size_t errlen)
{
        const struct admin_arg *a;
        bool optional, in_group = false;
        int rc;
        for (size_t i = 0; (a = admin_op_arg(op, i, &optional)); i++) {
                if (optional && !in_group && !ctl_member_set(m, a->field))
                        break; /* the optional arguments are absent */
                in_group = optional;
                if (a->unless) {
                        if ((rc = check_either(m, a, err, errlen)))
                                return rc;
                        continue;
                }
                switch (a->kind) {
                case ADMIN_IQN:
                case ADMIN_INITIATOR:
                case ADMIN_PATH:
                        if (!*ctl_string(m, a->field))
                                return admin_bad(err, errlen, "%s: missing (required)", a->name);
                        break;
                case ADMIN_LUN:
                        if (ctl_u32(m, a->field) > TDM_LUN_ID_MAX)
                                return admin_bad(err, errlen, "%s: must be 0..%d, got %u", a->name,
                                                 TDM_LUN_ID_MAX, ctl_u32(m, a->field));
                        break;
                default: /* what CHAP secrets and sizes may be, the daemon's edits decide */
                        break;
                }
        }
        return 0;
}
