/* The log queue (log_queue.h): a ring of fixed-size lines under one mutex, one writer thread. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log_queue.h"
#include "tandem/clock.h"

struct log_slot {
        struct timespec when; /* CLOCK_REALTIME, when it was enqueued */
        int prio;
        char text[LOG_QUEUE_LINE_MAX];
};

static struct {
        pthread_mutex_t lock;
        pthread_cond_t more;    /* a line, a drop or the stop for the writer */
        pthread_cond_t written; /* the writer wrote a line or ended */
        struct log_slot *slots;
        size_t capacity, head, count;
        uint64_t queued, written_n; /* lines enqueued / written since start */
        unsigned long dropped;      /* lines lost since the last report */
        uint64_t dropped_after;     /* they came after the line with this number */
        bool reporting;             /* the writer is writing a drop report now */
        bool running, stopping, writer_ended;
        bool abandoned; /* a stop timed out: that writer may still run, no restart */
        log_queue_write_fn write;
        pthread_t thread;
} q = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The drops are reported once every line before them is written. Under the lock. */
static bool drops_due(void)
{
        return q.dropped && q.written_n >= q.dropped_after;
}

static void *writer_main(void *arg)
{
        (void)arg;
        pthread_setname_np(pthread_self(), "log-writer");
        struct log_slot line;
        pthread_mutex_lock(&q.lock);
        for (;;) {
                while (q.count == 0 && !drops_due() && !q.stopping)
                        pthread_cond_wait(&q.more, &q.lock);
                if (drops_due()) {
                        unsigned long n = q.dropped;
                        q.dropped = 0;
                        q.reporting = true; /* a flush waits for the report too */
                        pthread_mutex_unlock(&q.lock);
                        struct timespec now;
                        clock_gettime(CLOCK_REALTIME, &now);
                        q.write(LOG_WARNING, &now, NULL, n);
                        pthread_mutex_lock(&q.lock);
                        q.reporting = false;
                        pthread_cond_broadcast(&q.written);
                        continue;
                }
                if (q.count == 0)
                        break; /* stopping, and everything is written */
                line = q.slots[q.head];
                q.head = (q.head + 1) % q.capacity;
                q.count--;
                pthread_mutex_unlock(&q.lock);
                q.write(line.prio, &line.when, line.text, 0);
                pthread_mutex_lock(&q.lock);
                q.written_n++;
                pthread_cond_broadcast(&q.written);
        }
        q.writer_ended = true;
        pthread_cond_broadcast(&q.written);
        pthread_mutex_unlock(&q.lock);
        return NULL;
}

int log_queue_start(size_t capacity, log_queue_write_fn write)
{
        if (capacity == 0 || !write)
                return -EINVAL;
        pthread_mutex_lock(&q.lock);
        if (q.running || q.abandoned) {
                pthread_mutex_unlock(&q.lock);
                return q.running ? -EALREADY : -EBUSY;
        }
        q.slots = calloc(capacity, sizeof(*q.slots));
        if (!q.slots) {
                pthread_mutex_unlock(&q.lock);
                return -ENOMEM;
        }
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&q.more, &ca);
        pthread_cond_init(&q.written, &ca);
        pthread_condattr_destroy(&ca);
        q.capacity = capacity;
        q.head = q.count = 0;
        q.queued = q.written_n = q.dropped_after = 0;
        q.dropped = 0;
        q.reporting = false;
        q.stopping = q.writer_ended = false;
        q.write = write;
        int rc = pthread_create(&q.thread, NULL, writer_main, NULL);
        if (rc != 0) {
                free(q.slots);
                q.slots = NULL;
                pthread_mutex_unlock(&q.lock);
                return -rc;
        }
        q.running = true;
        pthread_mutex_unlock(&q.lock);
        return 0;
}

bool log_queue_push(int prio, const char *text)
{
        pthread_mutex_lock(&q.lock);
        if (!q.running || q.writer_ended) {
                pthread_mutex_unlock(&q.lock);
                return false;
        }
        if (q.count == q.capacity) {
                if (q.dropped++ == 0)
                        q.dropped_after = q.queued;
                pthread_mutex_unlock(&q.lock);
                return true;
        }
        struct log_slot *s = &q.slots[(q.head + q.count) % q.capacity];
        clock_gettime(CLOCK_REALTIME, &s->when);
        s->prio = prio;
        size_t n = strnlen(text, sizeof(s->text) - 1);
        memcpy(s->text, text, n);
        s->text[n] = '\0';
        q.count++;
        q.queued++;
        pthread_cond_signal(&q.more);
        pthread_mutex_unlock(&q.lock);
        return true;
}

/* Under the lock: waits until done() or the deadline. */
static int wait_written(bool (*done)(uint64_t), uint64_t arg, int timeout_ms)
{
        struct timespec until = tdm_deadline(CLOCK_MONOTONIC, (unsigned)timeout_ms);
        while (!done(arg))
                if (pthread_cond_timedwait(&q.written, &q.lock, &until) == ETIMEDOUT)
                        return done(arg) ? 0 : -ETIMEDOUT;
        return 0;
}

static bool written_up_to(uint64_t n)
{
        return q.writer_ended || (q.written_n >= n && !drops_due() && !q.reporting);
}

static bool writer_gone(uint64_t unused)
{
        (void)unused;
        return q.writer_ended;
}

int log_queue_flush(int timeout_ms)
{
        pthread_mutex_lock(&q.lock);
        int rc = q.running ? wait_written(written_up_to, q.queued, timeout_ms) : 0;
        pthread_mutex_unlock(&q.lock);
        return rc;
}

int log_queue_stop(int timeout_ms)
{
        pthread_mutex_lock(&q.lock);
        if (!q.running) {
                pthread_mutex_unlock(&q.lock);
                return 0;
        }
        q.stopping = true;
        pthread_cond_signal(&q.more);
        int rc = wait_written(writer_gone, 0, timeout_ms);
        if (rc < 0) {
                /* The writer is held in a write: leave it (and its ring) to the process's end;
                 * lines from now on are written by their callers. */
                q.running = false;
                q.abandoned = true;
                pthread_mutex_unlock(&q.lock);
                pthread_detach(q.thread);
                return rc;
        }
        q.running = false;
        pthread_mutex_unlock(&q.lock);
        pthread_join(q.thread, NULL);
        pthread_mutex_lock(&q.lock);
        free(q.slots);
        q.slots = NULL;
        pthread_cond_destroy(&q.more);
        pthread_cond_destroy(&q.written);
        pthread_mutex_unlock(&q.lock);
        return 0;
}
