/*
 * Service manager notifications (sd_notify protocol) over a plain AF_UNIX datagram socket: no
 * libsystemd. The kernel attaches our credentials to the datagram, which is how the manager
 * tells the main process's messages from others'; nothing else is needed on our side.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tandem/sd_notify.h"

#define SD_NOTIFY_MAX 1024

/* NOTIFY_SOCKET's value as a sockaddr: "/path" or "@abstract". Length in *len. */
static int notify_address(const char *address, struct sockaddr_un *sa, socklen_t *len)
{
        size_t n = strlen(address);
        memset(sa, 0, sizeof(*sa));
        sa->sun_family = AF_UNIX;
        if (address[0] == '/') {
                if (n >= sizeof(sa->sun_path)) /* room for the terminating NUL */
                        return -EINVAL;
                memcpy(sa->sun_path, address, n + 1);
                *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
                return 0;
        }
        if (address[0] == '@' && n >= 2) {
                if (n > sizeof(sa->sun_path)) /* the '@' becomes the leading NUL */
                        return -EINVAL;
                sa->sun_path[0] = '\0';
                memcpy(sa->sun_path + 1, address + 1, n - 1);
                /* Abstract names are counted bytes, not strings: no NUL at the end. */
                *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
                return 0;
        }
        return -EINVAL;
}

int tdm_sd_notify_to(const char *address, const char *state)
{
        if (!address || !address[0])
                return 0;
        struct sockaddr_un sa;
        socklen_t len;
        int rc = notify_address(address, &sa, &len);
        if (rc < 0)
                return rc;
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        size_t n = strlen(state);
        ssize_t sent = sendto(fd, state, n, MSG_NOSIGNAL, (const struct sockaddr *)&sa, len);
        rc = sent < 0 ? -errno : (size_t)sent == n ? 1 : -EMSGSIZE;
        close(fd);
        return rc;
}

int tdm_sd_notify(const char *state)
{
        return tdm_sd_notify_to(getenv("NOTIFY_SOCKET"), state);
}

int tdm_sd_notifyf(const char *fmt, ...)
{
        char buf[SD_NOTIFY_MAX + 1];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t)n > SD_NOTIFY_MAX)
                return -EMSGSIZE;
        return tdm_sd_notify(buf);
}

/* A positive decimal without sign, spaces or trailing characters. */
static int parse_positive(const char *s, unsigned long long *out)
{
        if (!s || s[0] < '0' || s[0] > '9')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end || v == 0)
                return -EINVAL;
        *out = v;
        return 0;
}

int tdm_sd_watchdog_parse(const char *usec_value, const char *pid_value, pid_t self, uint64_t *usec)
{
        unsigned long long v, pid;
        if (!usec_value || !usec_value[0])
                return 0;
        if (parse_positive(usec_value, &v) < 0)
                return -EINVAL;
        if (pid_value && pid_value[0]) {
                if (parse_positive(pid_value, &pid) < 0)
                        return -EINVAL;
                if (pid != (unsigned long long)self)
                        return 0; /* the watchdog is another process's (we were forked) */
        }
        *usec = v;
        return 1;
}

int tdm_sd_watchdog_enabled(uint64_t *usec)
{
        return tdm_sd_watchdog_parse(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"), getpid(),
                                     usec);
}
