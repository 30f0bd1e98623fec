/* Rules across the arguments of one command, run once each argument is checked on its own. */
#include <string.h>

#include "ctl_internal.h"
#include "tandem/config.h"

int admin_check_lun_add(const struct admin_call *call, const struct admin_values *v, char *err,
                        size_t errlen)
{
        (void)call;
        if ((v->given & ADMIN_OPT_READONLY) && (v->given & ADMIN_OPT_SIZE))
                return admin_bad(err, errlen,
                                 "lun add: --readonly and --size do not go together (a read-only "
                                 "LUN is never created or grown)");
        return 0;
}

/* What the daemon will check too, said before the request leaves: secrets, mutual CHAP. */
int admin_check_chap(const struct admin_call *call, const struct admin_values *v, char *err,
                     size_t errlen)
{
        const Tandem__Admin__ChapSet *m = (const Tandem__Admin__ChapSet *)&call->msg.base;
        struct tdm_chap_cfg c = {.enabled = true, .mutual = (v->given & ADMIN_OPT_MUTUAL) != 0};
        /* Each is shorter than TDM_CHAP_MAX: ADMIN_TEXT checked it. */
        strcpy(c.user, m->user);
        strcpy(c.secret, m->secret);
        strcpy(c.mutual_user, m->mutual_user);
        strcpy(c.mutual_secret, m->mutual_secret);
        return tdm_chap_check(&c, "", err, errlen);
}
