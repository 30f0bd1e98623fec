/*
 * The service manager's notification protocol (systemd's sd_notify), without libsystemd:
 * newline-separated "KEY=VALUE" assignments in one datagram to the AF_UNIX socket named by
 * $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace). The daemon sends READY=1
 * once it serves, STOPPING=1 when it shuts down, WATCHDOG=1 from a main-loop timer, STATUS=.
 * Every call is a no-op returning 0 when the variable is unset (not run by a service
 * manager, or by one that does not ask for notifications).
 */
#ifndef TANDEM_SD_NOTIFY_H
#define TANDEM_SD_NOTIFY_H

#include <stdint.h>
#include <sys/types.h>

/*
 * Sends state to the socket at address (NOTIFY_SOCKET syntax). 1 when sent, 0 when address
 * is NULL or empty, -EINVAL for an address that is neither "/path" nor "@name" or does not fit
 * sun_path, otherwise the -errno of socket() or sendto().
 */
int tdm_sd_notify_to(const char *address, const char *state);

/* The same to $NOTIFY_SOCKET. */
int tdm_sd_notify(const char *state);

/* printf-style state, at most 1024 bytes after formatting (longer: -EMSGSIZE). */
int tdm_sd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Whether the manager expects WATCHDOG=1 from this process, from the values of WATCHDOG_USEC
 * and WATCHDOG_PID (either may be NULL) and our pid: 1 with *usec set to the timeout when
 * WATCHDOG_USEC is a positive decimal and WATCHDOG_PID is unset, empty or self; 0 when there is
 * no watchdog or it is meant for another process; -EINVAL when a value is malformed.
 */
int tdm_sd_watchdog_parse(const char *usec_value, const char *pid_value, pid_t self,
                          uint64_t *usec);

/* The same from the environment and getpid(). */
int tdm_sd_watchdog_enabled(uint64_t *usec);

#endif
