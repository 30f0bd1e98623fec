/* Listening TCP sockets. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tandem/net_listen.h"

int net_listen_tcp(const char *host, uint16_t port)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV};
        char portstr[8];
        snprintf(portstr, sizeof(portstr), "%u", port);
        struct addrinfo *ai;
        if (getaddrinfo(host[0] ? host : NULL, portstr, &hints, &ai) != 0)
                return -EINVAL;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int rc = fd < 0 ? -errno : 0;
        if (fd >= 0) {
                int one = 1;
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (ai->ai_family == AF_INET6)
                        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
                        rc = -errno;
                        close(fd);
                }
        }
        freeaddrinfo(ai);
        return rc < 0 ? rc : fd;
}

int net_accept_batch(int lfd, unsigned max, void (*fn)(void *arg, int fd), void *arg)
{
        unsigned n = 0;
        for (; n < max; n++) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                                break;
                        return -errno;
                }
                fn(arg, fd);
        }
        return (int)n;
}
