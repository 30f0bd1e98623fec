/*
 * tandemctl's logic, kept out of its main() so unit tests can drive it: command-line
 * parsing into an AdminRequest (with local validation naming the field) and printing of
 * responses as text or JSON.
 */
#ifndef TANDEM_ADMIN_CTL_H
#define TANDEM_ADMIN_CTL_H

#include <stdbool.h>
#include <stdio.h>

#include "admin_ipc.h"

struct admin_ctl {
        char instance[64];
        bool json;
        bool help;         /* --help / help: print usage of `topic`, exit 0 */
        const char *topic; /* command usage to print ("lun", "chap", ...; NULL: all) */
        char path[4096];   /* LUN path made absolute */
        Tandem__Admin__AdminRequest req;
        union {
                Tandem__Admin__TargetAdd target_add;
                Tandem__Admin__TargetDel target_del;
                Tandem__Admin__LunAdd lun_add;
                Tandem__Admin__LunDel lun_del;
                Tandem__Admin__LunResize lun_resize;
                Tandem__Admin__AclAdd acl_add;
                Tandem__Admin__AclDel acl_del;
                Tandem__Admin__ChapSet chap_set;
                Tandem__Admin__StatusRequest status;
                Tandem__Admin__StatsRequest stats;
                Tandem__Admin__ReplStatusRequest repl_status;
                Tandem__Admin__ReplLun repl_lun;
                Tandem__Admin__ReplPromote repl_promote;
                Tandem__Admin__ReplVerify repl_verify;
                Tandem__Admin__ReplResyncPause repl_resync_pause;
        } op;
};

/*
 * Parses argv (argv[0] is the program). Returns 0 (ctl->req is ready, or ctl->help is
 * set) or -EINVAL with err like `lun: must be 0..255, got "x"`; ctl->topic then names
 * the command whose usage to show. Strings in the request point into argv or ctl.
 */
int admin_ctl_parse(struct admin_ctl *ctl, int argc, char **argv, char *err, size_t errlen);
void admin_ctl_usage(FILE *out, const char *topic);
/*
 * Prints a successful response (text, or JSON with --json). Returns 0, or -EIO when the
 * response says the operation failed (nothing printed; the caller reports resp->error).
 */
int admin_ctl_print(FILE *out, const struct admin_ctl *ctl,
                    const Tandem__Admin__AdminResponse *resp);

#endif
