/*
 * Logging: lines are formatted by the thread that logs and written by the log queue's writer
 * thread (log_queue.c) to libqb's targets (stderr, syslog, an optional file), filtered by level.
 * Two reasons not to call qb_log from every thread: a write that blocks (a file on a stalled
 * disk) would hold an iSCSI worker and every connection it owns, and libqb drops, without a
 * word, a line logged while another thread is inside qb_log.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <qb/qblog.h>

#include "log_queue.h"
#include "tandem/log.h"

/* Milliseconds (%T): a failover is read by lining these lines up with corosync's and
 * Pacemaker's, which carry them too. */
#define TDM_LOG_FORMAT      "%T %p: %b"
#define TDM_LOG_QUEUE_LINES 1024
#define TDM_LOG_LATE_S      0.5 /* a line written this late says so (its %T is the write's) */
#define TDM_LOG_STOP_MS     2000

static int log_max_prio = LOG_DEBUG; /* lines above it are not even formatted */

/* The writer thread's end: the only caller of qb_log once the queue runs. */
static void write_line(int prio, const char *text, double queued_s, unsigned long dropped)
{
        if (!text)
                qb_log(LOG_WARNING, "log: %lu lines dropped while the log writer was held",
                       dropped);
        else if (queued_s >= TDM_LOG_LATE_S)
                qb_log(prio, "%s [logged %.1f s late: the log writer was held]", text, queued_s);
        else
                qb_log(prio, "%s", text);
}

void tdm_log(int prio, const char *fmt, ...)
{
        if (prio > log_max_prio)
                return;
        int saved_errno = errno;
        char text[LOG_QUEUE_LINE_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        if (!log_queue_push(prio, text))
                qb_log(prio, "%s", text); /* before init, after fini, in tools and tests */
        errno = saved_errno;
}

int tdm_log_flush(int timeout_ms)
{
        return log_queue_flush(timeout_ms);
}

static void targets_init(const char *ident, const struct tdm_log_opts *opts)
{
        qb_log_init(ident, LOG_DAEMON, opts->level);
        qb_log_format_set(QB_LOG_STDERR, TDM_LOG_FORMAT);
        qb_log_ctl(QB_LOG_STDERR, QB_LOG_CONF_ENABLED, opts->use_stderr ? QB_TRUE : QB_FALSE);
        if (opts->use_stderr)
                qb_log_filter_ctl(QB_LOG_STDERR, QB_LOG_FILTER_ADD, QB_LOG_FILTER_FILE, "*",
                                  (uint8_t)opts->level);
        qb_log_ctl(QB_LOG_SYSLOG, QB_LOG_CONF_ENABLED, opts->use_syslog ? QB_TRUE : QB_FALSE);
        if (opts->use_syslog)
                qb_log_filter_ctl(QB_LOG_SYSLOG, QB_LOG_FILTER_ADD, QB_LOG_FILTER_FILE, "*",
                                  (uint8_t)(opts->level < LOG_INFO ? opts->level : LOG_INFO));
        if (opts->file && opts->file[0]) {
                int32_t fd = qb_log_file_open(opts->file);
                if (fd >= 0) {
                        qb_log_format_set(fd, TDM_LOG_FORMAT);
                        qb_log_ctl(fd, QB_LOG_CONF_ENABLED, QB_TRUE);
                        qb_log_filter_ctl(fd, QB_LOG_FILTER_ADD, QB_LOG_FILTER_FILE, "*",
                                          (uint8_t)opts->level);
                }
        }
}

void tdm_log_init(const char *ident, const struct tdm_log_opts *opts)
{
        targets_init(ident, opts);
        log_max_prio = opts->level;
        int rc = log_queue_start(TDM_LOG_QUEUE_LINES, write_line);
        if (rc < 0)
                qb_log(LOG_WARNING, "log: no writer thread (%s): lines are written as they come",
                       strerror(-rc));
}

void tdm_log_fini(void)
{
        /* A writer held past the timeout keeps libqb's targets: they end with the process. */
        if (log_queue_stop(TDM_LOG_STOP_MS) == 0)
                qb_log_fini();
        log_max_prio = LOG_DEBUG;
}
