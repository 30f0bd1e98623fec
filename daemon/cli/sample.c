/*
 * tandemctl stats --interval N: two answers N seconds apart, printed as rates. The daemon
 * keeps only cumulative counters; the interval is the time between the two answers as
 * tandemctl measures it (CLOCK_MONOTONIC, each taken when its answer arrived).
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "cli.h"
#include "tandem/admin_wire.h"

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int ask(const struct cli *c, Tandem__Admin__AdminResponse **r, double *at, char *err,
               size_t errlen)
{
        int rc = admin_client_call(c->instance, &c->call.req, r, err, errlen);
        *at = now_s();
        if (rc < 0)
                return rc;
        if (!(*r)->ok || !(*r)->stats) {
                snprintf(err, errlen, "%s",
                         (*r)->error && *(*r)->error ? (*r)->error : "the operation failed");
                return -EIO;
        }
        return 0;
}

int cli_stats_interval(const struct cli *c, FILE *out, char *err, size_t errlen)
{
        Tandem__Admin__AdminResponse *a = NULL, *b = NULL;
        double ta, tb;
        unsigned interval = c->call.req.stats->interval_s;
        int rc = ask(c, &a, &ta, err, errlen);
        if (rc == 0) {
                struct timespec d = {(time_t)interval, 0};
                while (nanosleep(&d, &d) < 0 && errno == EINTR)
                        ;
                rc = ask(c, &b, &tb, err, errlen);
        }
        if (rc == 0)
                rc = admin_print_stats_rates(out, a->stats, b->stats, tb - ta, c->json);
        if (a)
                tandem__admin__admin_response__free_unpacked(a, NULL);
        if (b)
                tandem__admin__admin_response__free_unpacked(b, NULL);
        return rc;
}
