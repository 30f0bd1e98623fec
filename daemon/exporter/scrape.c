/*
 * Scrapes handed from the HTTP thread to the control thread and back: the HTTP thread queues
 * a request and writes an eventfd the main loop watches; the loop makes the text and wakes
 * the waiter. A request the loop has not taken within EXPORTER_SCRAPE_WAIT_MS (or at stop)
 * is withdrawn: the HTTP thread never waits on a busy control thread for long, and the
 * control thread never waits for the HTTP thread at all.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "exporter_internal.h"
#include "tandem/admin_metrics.h"
#include "tandem/clock.h"
#include "tandem/exporter.h"
#include "tandem/log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond;
static struct scrape *inbox; /* queued, not taken */
static bool open_for_scrapes;
static qb_loop_t *loop;
static int wake_fd = -1;

static int32_t wake_ready(int32_t fd, int32_t revents, void *data)
{
        (void)revents;
        (void)data;
        uint64_t v;
        if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_warn("metrics: eventfd read: %s", strerror(errno));
        pthread_mutex_lock(&lock);
        struct scrape *list = inbox;
        inbox = NULL;
        for (struct scrape *s = list; s; s = s->next)
                s->state = SCRAPE_RUNNING;
        pthread_mutex_unlock(&lock);
        while (list) {
                struct scrape *s = list;
                list = s->next;
                char *text = NULL;
                size_t len = 0;
                int rc = admin_metrics_text(s->openmetrics, &text, &len);
                pthread_mutex_lock(&lock);
                s->rc = rc;
                s->text = text;
                s->len = len;
                s->state = SCRAPE_DONE;
                pthread_cond_broadcast(&done_cond);
                pthread_mutex_unlock(&lock);
        }
        return 0;
}

int exporter_scrape_init(qb_loop_t *l, char *err, size_t errlen)
{
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&done_cond, &a);
        pthread_condattr_destroy(&a);
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                snprintf(err, errlen, "metrics.listen: eventfd: %s", strerror(e));
                return -e;
        }
        if (qb_loop_poll_add(l, QB_LOOP_LOW, fd, POLLIN, NULL, wake_ready) < 0) {
                close(fd);
                snprintf(err, errlen, "metrics.listen: cannot watch the scrape eventfd");
                return -ENOMEM;
        }
        pthread_mutex_lock(&lock);
        loop = l;
        wake_fd = fd;
        open_for_scrapes = true;
        pthread_mutex_unlock(&lock);
        return 0;
}

void exporter_scrape_close(void)
{
        pthread_mutex_lock(&lock);
        open_for_scrapes = false;
        pthread_cond_broadcast(&done_cond);
        pthread_mutex_unlock(&lock);
}

void exporter_scrape_fini(void)
{
        if (wake_fd < 0)
                return;
        qb_loop_poll_del(loop, wake_fd);
        close(wake_fd);
        wake_fd = -1;
        pthread_cond_destroy(&done_cond);
}

/* Unlinks s from the inbox (lock held). */
static void withdraw_locked(struct scrape *s)
{
        for (struct scrape **pp = &inbox; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        return;
                }
}

int exporter_scrape(struct scrape *s)
{
        struct timespec deadline = tdm_deadline(CLOCK_MONOTONIC, EXPORTER_SCRAPE_WAIT_MS);
        pthread_mutex_lock(&lock);
        if (!open_for_scrapes) {
                pthread_mutex_unlock(&lock);
                return -ESHUTDOWN;
        }
        s->state = SCRAPE_QUEUED;
        s->next = inbox;
        inbox = s;
        uint64_t one = 1;
        if (write(wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                log_warn("metrics: eventfd write: %s", strerror(errno));
        int rc = 0;
        while (s->state != SCRAPE_DONE) {
                if (s->state == SCRAPE_QUEUED && (rc == ETIMEDOUT || !open_for_scrapes)) {
                        withdraw_locked(s);
                        pthread_mutex_unlock(&lock);
                        return -ETIMEDOUT;
                }
                /* Once taken, it completes: the control thread is making it. */
                if (s->state == SCRAPE_QUEUED)
                        rc = pthread_cond_timedwait(&done_cond, &lock, &deadline);
                else
                        pthread_cond_wait(&done_cond, &lock);
        }
        pthread_mutex_unlock(&lock);
        return s->rc;
}
