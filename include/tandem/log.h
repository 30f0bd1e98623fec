/* Logging through libqb's qb_log; helpers keep call sites short. */
#ifndef TANDEM_LOG_H
#define TANDEM_LOG_H

#include <qb/qblog.h>
#include <syslog.h>

#define log_err(fmt, ...)    qb_log(LOG_ERR, fmt, ##__VA_ARGS__)
#define log_warn(fmt, ...)   qb_log(LOG_WARNING, fmt, ##__VA_ARGS__)
#define log_notice(fmt, ...) qb_log(LOG_NOTICE, fmt, ##__VA_ARGS__)
#define log_info(fmt, ...)   qb_log(LOG_INFO, fmt, ##__VA_ARGS__)
#define log_debug(fmt, ...)  qb_log(LOG_DEBUG, fmt, ##__VA_ARGS__)

struct tdm_log_opts {
        const char *file; /* NULL: no log file */
        int level;        /* LOG_ERR .. LOG_DEBUG */
        int use_syslog;
        int use_stderr;
};

void tdm_log_init(const char *ident, const struct tdm_log_opts *opts);
void tdm_log_fini(void);

#endif
