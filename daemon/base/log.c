/* qb_log set-up: stderr, syslog and an optional file, filtered by level. */
#include <qb/qblog.h>
#include <string.h>

#include "tandem/log.h"

/* Milliseconds (%T): a failover is read by lining these lines up with corosync's and
 * Pacemaker's, which carry them too. */
#define TDM_LOG_FORMAT "%T %p: %b"

void tdm_log_init(const char *ident, const struct tdm_log_opts *opts)
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

void tdm_log_fini(void)
{
        qb_log_fini();
}
