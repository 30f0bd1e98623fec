/*
 * The exporter's text (tandem/openmetrics.h) made from what `tandemctl status` and
 * `tandemctl stats` answer (daemon/admin/metrics.c). Control thread only: it reads the
 * registry, as the admin handlers do.
 */
#ifndef TANDEM_ADMIN_METRICS_H
#define TANDEM_ADMIN_METRICS_H

#include <stdbool.h>
#include <stddef.h>

/* 0 and *text (malloc'd, *len bytes, NUL-terminated), or -ENOMEM / -EIO. */
int admin_metrics_text(bool openmetrics, char **text, size_t *len);

#endif
