/*
 * The OpenMetrics exporter (daemon/exporter/): GET /metrics over HTTP on the address of
 * config metrics.listen, served by libmicrohttpd on a thread of its own. Each scrape is
 * handed to the control thread (the libqb main loop), which makes the text as the admin
 * handlers answer tandemctl (tandem/admin_metrics.h) and hands it back.
 */
#ifndef TANDEM_EXPORTER_H
#define TANDEM_EXPORTER_H

#include <qb/qbloop.h>
#include <stddef.h>

/* Limits of the HTTP side: what a hostile client can take from it, and no more. */
#define EXPORTER_MAX_CONNECTIONS 16    /* more are accepted and closed at once */
#define EXPORTER_IDLE_TIMEOUT_S  5     /* a connection silent this long is closed */
#define EXPORTER_REQUEST_MEMORY  16384 /* bytes for a request's line and headers */
#define EXPORTER_SCRAPE_WAIT_MS  5000  /* a scrape the control thread has not begun: 503 */

/*
 * Starts listening on listen ("IP:PORT", "[IPV6]:PORT"), scrapes made on loop. 0, or a
 * negative errno with err naming metrics.listen and the reason.
 */
int exporter_start(qb_loop_t *loop, const char *listen, char *err, size_t errlen);
/* Stops listening and ends the HTTP thread (a scrape waiting gets 503). */
void exporter_stop(void);

#endif
