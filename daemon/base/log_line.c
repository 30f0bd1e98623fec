/* One log line as text (log_line.h). */
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "log_line.h"

/* English names, as libqb's %T has them, whatever the locale says. */
static const char *const month_names[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const prio_names[] = {
    [LOG_EMERG] = "emerg",     [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit", [LOG_ERR] = "error",
    [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

const char *log_line_prio_name(int prio)
{
        if (prio < 0)
                return prio_names[LOG_EMERG];
        if (prio > LOG_DEBUG)
                return prio_names[LOG_DEBUG];
        return prio_names[prio];
}

size_t log_line_format(char *out, size_t cap, const struct timespec *when, int prio,
                       const char *text)
{
        struct tm tm;
        time_t secs = when->tv_sec;
        localtime_r(&secs, &tm);
        int n = snprintf(out, cap, "%s %02d %02d:%02d:%02d.%03ld %s: %s",
                         month_names[tm.tm_mon % 12], tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                         when->tv_nsec / 1000000L, log_line_prio_name(prio), text);
        size_t len = n < 0 ? 0 : (size_t)n;
        if (len > cap - 2)
                len = cap - 2; /* cut: the newline takes the last place before the NUL */
        out[len++] = '\n';
        out[len] = '\0';
        return len;
}
