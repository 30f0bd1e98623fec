/* What the files of daemon/exporter/ share: a scrape on its way to the control thread. */
#ifndef TANDEM_EXPORTER_INTERNAL_H
#define TANDEM_EXPORTER_INTERNAL_H

#include <qb/qbloop.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum scrape_state { SCRAPE_QUEUED, SCRAPE_RUNNING, SCRAPE_DONE };

struct scrape {
        bool openmetrics;        /* the format asked for */
        enum scrape_state state; /* under the scrape lock */
        int rc;                  /* admin_metrics_text's */
        char *text;              /* malloc'd, the waiter's once done */
        size_t len;
        struct scrape *next;
};

/* scrape.c: the hand-off. init on the control thread before the HTTP thread starts. */
int exporter_scrape_init(qb_loop_t *loop, char *err, size_t errlen);
/* Every waiting scrape gives up (before the HTTP thread is stopped). */
void exporter_scrape_close(void);
void exporter_scrape_fini(void);
/*
 * HTTP thread: has the control thread make s's text and waits for it. 0 (s->text set), or
 * -ETIMEDOUT (the control thread did not take it in time), -ESHUTDOWN, -ENOMEM.
 */
int exporter_scrape(struct scrape *s);

#endif
