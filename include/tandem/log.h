/* Logging: formatted by the caller, written by one writer thread to stderr, the log file and
 * syslog (daemon/base/log.c); helpers keep call sites short. */
#ifndef TANDEM_LOG_H
#define TANDEM_LOG_H

#include <qb/qblog.h>
#include <syslog.h>

#define log_err(fmt, ...)    tdm_log(LOG_ERR, fmt, ##__VA_ARGS__)
#define log_warn(fmt, ...)   tdm_log(LOG_WARNING, fmt, ##__VA_ARGS__)
#define log_notice(fmt, ...) tdm_log(LOG_NOTICE, fmt, ##__VA_ARGS__)
#define log_info(fmt, ...)   tdm_log(LOG_INFO, fmt, ##__VA_ARGS__)
#define log_debug(fmt, ...)  tdm_log(LOG_DEBUG, fmt, ##__VA_ARGS__)

struct tdm_log_opts {
        const char *file; /* NULL: no log file */
        int level;        /* LOG_ERR .. LOG_DEBUG */
        int use_syslog;
        int use_stderr;
};

/* One line at syslog priority prio; never waits for a write once tdm_log_init has run (before
 * it, and in programs that never call it, the line is written on the calling thread). */
void tdm_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Starts the writer thread; tdm_log_fini writes what is queued and stops it. */
void tdm_log_init(const char *ident, const struct tdm_log_opts *opts);
void tdm_log_fini(void);

/* Waits (<= timeout_ms) until every line logged so far is written: 0, or -ETIMEDOUT. */
int tdm_log_flush(int timeout_ms);

#endif
