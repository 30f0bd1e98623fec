/*
 * The exporter's text: tandemd's counters and states in the Prometheus text format (0.0.4)
 * or OpenMetrics 1.0, made from the admin plane's answers (proto/admin.proto) by a table of
 * metrics (daemon/ctl/metrics_table.c, formatted by daemon/ctl/openmetrics.c). Pure: no I/O
 * but the FILE it writes to.
 */
#ifndef TANDEM_OPENMETRICS_H
#define TANDEM_OPENMETRICS_H

#include <stdbool.h>
#include <stdio.h>

#include "admin.pb-c.h"

/* What a scrape shows: status (with its replication summary) and stats. */
struct tdm_metrics_input {
        const Tandem__Admin__Status *status;
        const Tandem__Admin__ReplStatus *repl; /* may be NULL: no replicated LUN */
        const Tandem__Admin__Stats *stats;
};

/* Content types of the two formats. */
#define TDM_METRICS_TYPE_TEXT        "text/plain; version=0.0.4; charset=utf-8"
#define TDM_METRICS_TYPE_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

/*
 * Writes every metric of the table: "# HELP", "# TYPE", then its samples; openmetrics: the
 * OpenMetrics form (counter families without _total, "# EOF" at the end). 0, or -EIO when
 * writing failed.
 */
int tdm_metrics_format(FILE *out, const struct tdm_metrics_input *in, bool openmetrics);

/* Whether an Accept header asks for OpenMetrics (NULL: no). */
bool tdm_metrics_wants_openmetrics(const char *accept);

#endif
