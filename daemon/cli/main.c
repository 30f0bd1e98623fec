/* tandemctl: the admin CLI of tandemd (see `tandemctl --help`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "tandem/admin_wire.h"

int main(int argc, char **argv)
{
        struct cli c;
        char err[1024] = "";
        if (cli_parse(&c, argc, argv, err, sizeof(err)) < 0) {
                fprintf(stderr, "tandemctl: %s\n\n", err);
                cli_usage(stderr, c.topic);
                return 2;
        }
        if (c.help) {
                cli_usage(stdout, c.topic);
                return 0;
        }
        if (geteuid() != 0) {
                fprintf(stderr,
                        "tandemctl: must run as root (tandemd takes admin requests from root "
                        "only)\n");
                return 1;
        }
        if (c.call.req.op_case == TANDEM__ADMIN__ADMIN_REQUEST__OP_STATS &&
            c.call.req.stats->interval_s) {
                if (cli_stats_interval(&c, stdout, err, sizeof(err)) < 0) {
                        fprintf(stderr, "tandemctl: %s\n", err);
                        return 1;
                }
                return fflush(stdout) == 0 ? 0 : 1;
        }
        Tandem__Admin__AdminResponse *resp = NULL;
        if (admin_client_call(c.instance, &c.call.req, &resp, err, sizeof(err)) < 0) {
                fprintf(stderr, "tandemctl: %s\n", err);
                return 1;
        }
        int status = 0;
        if (admin_print(stdout, &c.call, resp, c.json) < 0) {
                fprintf(stderr, "tandemctl: %s\n",
                        resp->error && *resp->error ? resp->error : "the operation failed");
                status = 1;
        }
        tandem__admin__admin_response__free_unpacked(resp, NULL);
        if (fflush(stdout) != 0) {
                perror("tandemctl: stdout");
                status = 1;
        }
        return status;
}
