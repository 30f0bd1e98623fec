/*
 * A scrape on the control thread: the status and stats handlers fill their answers as for
 * tandemctl, and the table of metrics (daemon/ctl/) turns them into text. LUN and session
 * counters are read with relaxed loads while the workers count on: nothing on the data
 * path waits for a scrape.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin_internal.h"
#include "tandem/admin_metrics.h"
#include "tandem/openmetrics.h"

int admin_metrics_text(bool openmetrics, char **text, size_t *len)
{
        struct admin_reply status = {.r = TANDEM__ADMIN__ADMIN_RESPONSE__INIT};
        struct admin_reply stats = {.r = TANDEM__ADMIN__ADMIN_RESPONSE__INIT};
        Tandem__Admin__StatsRequest all = TANDEM__ADMIN__STATS_REQUEST__INIT;
        int rc = -ENOMEM;
        admin_status(&status, NULL);
        admin_stats(&stats, &all.base);
        *text = NULL;
        *len = 0;
        if (status.r.ok && stats.r.ok && !status.failed && !stats.failed) {
                FILE *out = open_memstream(text, len);
                if (out) {
                        struct tdm_metrics_input in = {.status = status.r.status,
                                                       .repl = status.r.repl_status,
                                                       .stats = stats.r.stats};
                        rc = tdm_metrics_format(out, &in, openmetrics);
                        if (fclose(out) != 0 && rc == 0)
                                rc = -EIO;
                }
                if (rc < 0) {
                        free(*text);
                        *text = NULL;
                        *len = 0;
                }
        }
        admin_reply_free(&status);
        admin_reply_free(&stats);
        return rc;
}
