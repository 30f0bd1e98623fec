/*
 * tandemctl's command line (daemon/cli/): global options with getopt_long, then the command
 * and its arguments matched against the table of operations (tandem/admin_ops.h). Kept out
 * of main() so the unit tests drive it.
 */
#ifndef TANDEM_CLI_H
#define TANDEM_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "tandem/admin_ops.h"
#include "tandem/config.h"

struct cli {
        char instance[TDM_INSTANCE_MAX]; /* --instance: the tandemd to talk to */
        bool json;                       /* --json: machine-readable output */
        bool help;                       /* --help, help: print the usage of topic, exit 0 */
        const char *topic;               /* the command whose usage to print; NULL: all */
        struct admin_call call;          /* the request to send */
};

/*
 * Parses argv (argv[0] is the program). Returns 0 (c->call is ready, or c->help is set) or
 * -EINVAL with err naming the field (`lun: must be 0..255, got "x"`) or the command; c->topic
 * then names the command whose usage to show.
 */
int cli_parse(struct cli *c, int argc, char **argv, char *err, size_t errlen);
void cli_usage(FILE *out, const char *topic);
/*
 * stats --interval N (c->call is a stats request with interval_s > 0): asks twice, N seconds
 * apart, and prints the rates. 0, or a negative errno with err set.
 */
int cli_stats_interval(const struct cli *c, FILE *out, char *err, size_t errlen);

#endif
