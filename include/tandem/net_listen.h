/* Listening TCP sockets (the control loop accepts; the data loops own connections). */
#ifndef TANDEM_NET_LISTEN_H
#define TANDEM_NET_LISTEN_H

#include <stdint.h>

/* A non-blocking listening socket on a numeric host ("" = any) and port; fd or -errno. */
int net_listen_tcp(const char *host, uint16_t port);
/*
 * Accepts at most max pending connections (non-blocking, close-on-exec) and hands each fd
 * to fn. The number accepted, or -errno on a real error (the backlog's rest stays queued).
 */
int net_accept_batch(int lfd, unsigned max, void (*fn)(void *arg, int fd), void *arg);

#endif
