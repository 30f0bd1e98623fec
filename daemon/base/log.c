/*
 * Logging: the thread that logs formats its line and queues it (log_queue.c); the log-writer
 * thread writes it to our targets itself: stderr, the log file, syslog(). It never goes
 * through qb_log, for two reasons found the hard way: qb_log writes on the calling thread (a
 * write that blocks, on a stalled disk or a stderr pipe nobody reads, held an iSCSI worker and
 * every connection it owns), and libqb drops, without a word, a line logged while another
 * thread is inside qb_log. qb_log keeps the same targets for libqb's own lines (IPC).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <qb/qblog.h>

#include "log_line.h"
#include "log_queue.h"
#include "tandem/fsutil.h"
#include "tandem/log.h"

/* Milliseconds (%T): as log_line.c writes ours. */
#define TDM_QB_LOG_FORMAT   "%T %p: %b"
#define TDM_LOG_QUEUE_LINES 1024
#define TDM_LOG_STOP_MS     2000
#define TDM_LOG_TEXT_MAX    (LOG_QUEUE_LINE_MAX + 64) /* the stamp and the level's name */

static struct {
        bool open; /* tdm_log_init has run: the targets below are ours to write */
        int max_prio;
        bool to_stderr;
        int file_fd;         /* -1: no log file */
        int syslog_max_prio; /* -1: no syslog */
} targets = {.max_prio = LOG_DEBUG, .file_fd = -1, .syslog_max_prio = -1};

/* The writer thread's end (and a caller's while no writer runs). */
static void write_line(int prio, const struct timespec *when, const char *text,
                       unsigned long dropped)
{
        char dropped_text[96];
        if (!text) {
                snprintf(dropped_text, sizeof(dropped_text),
                         "log: %lu lines dropped while the log writer was held", dropped);
                text = dropped_text;
        }
        char line[TDM_LOG_TEXT_MAX];
        size_t len = log_line_format(line, sizeof(line), when, prio, text);
        /* A failed write has nowhere to be reported: the line is lost, the daemon goes on. */
        if (targets.to_stderr)
                (void)tdm_write_all(STDERR_FILENO, line, len);
        if (targets.file_fd >= 0)
                (void)tdm_write_all(targets.file_fd, line, len);
        if (prio <= targets.syslog_max_prio)
                syslog(prio, "%s", text);
}

void tdm_log(int prio, const char *fmt, ...)
{
        if (prio > targets.max_prio)
                return;
        int saved_errno = errno;
        char text[LOG_QUEUE_LINE_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        if (!log_queue_push(prio, text)) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                if (targets.open)
                        write_line(prio, &now, text, 0); /* the writer could not start */
                else
                        qb_log(prio, "%s", text); /* tools and tests that never call init */
        }
        errno = saved_errno;
}

int tdm_log_flush(int timeout_ms)
{
        return log_queue_flush(timeout_ms);
}

/* libqb's own lines go to the same places through qb_log, in the same layout. */
static void qb_targets_init(const char *ident, const struct tdm_log_opts *opts)
{
        qb_log_init(ident, LOG_DAEMON, opts->level);
        qb_log_format_set(QB_LOG_STDERR, TDM_QB_LOG_FORMAT);
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
                        qb_log_format_set(fd, TDM_QB_LOG_FORMAT);
                        qb_log_ctl(fd, QB_LOG_CONF_ENABLED, QB_TRUE);
                        qb_log_filter_ctl(fd, QB_LOG_FILTER_ADD, QB_LOG_FILTER_FILE, "*",
                                          (uint8_t)opts->level);
                }
        }
}

void tdm_log_init(const char *ident, const struct tdm_log_opts *opts)
{
        qb_targets_init(ident, opts);
        targets.max_prio = opts->level;
        targets.to_stderr = opts->use_stderr;
        targets.syslog_max_prio = !opts->use_syslog        ? -1
                                  : opts->level < LOG_INFO ? opts->level
                                                           : LOG_INFO;
        targets.file_fd = -1;
        if (opts->file && opts->file[0]) {
                targets.file_fd = open(opts->file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
                if (targets.file_fd < 0)
                        qb_log(LOG_ERR, "log file %s: %s", opts->file, strerror(errno));
        }
        targets.open = true;
        int rc = log_queue_start(TDM_LOG_QUEUE_LINES, write_line);
        if (rc < 0)
                log_warn("log: no writer thread (%s): lines are written as they come",
                         strerror(-rc));
}

void tdm_log_fini(void)
{
        /* A writer held past the timeout keeps the targets: they end with the process. */
        if (log_queue_stop(TDM_LOG_STOP_MS) == 0) {
                if (targets.file_fd >= 0)
                        close(targets.file_fd);
                targets.file_fd = -1;
                targets.open = false;
                qb_log_fini();
        }
        targets.max_prio = LOG_DEBUG;
}
