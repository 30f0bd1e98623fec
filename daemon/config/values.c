/* Sizes with units ("10G") and network addresses ("HOST:PORT", "[V6]:PORT"). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

int tdm_parse_size(const char *s, uint64_t *out)
{
        if (!s)
                return -EINVAL;
        size_t n = 0;
        while (isdigit((unsigned char)s[n]))
                n++;
        if (n == 0)
                return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        static const struct {
                const char *suffix;
                uint64_t mult;
        } units[] = {
            {"", 1},
            {"B", 1},
            {"K", 1ull << 10},
            {"KiB", 1ull << 10},
            {"KB", 1000ull},
            {"M", 1ull << 20},
            {"MiB", 1ull << 20},
            {"MB", 1000000ull},
            {"G", 1ull << 30},
            {"GiB", 1ull << 30},
            {"GB", 1000000000ull},
            {"T", 1ull << 40},
            {"TiB", 1ull << 40},
            {"TB", 1000000000000ull},
            {"P", 1ull << 50},
            {"PiB", 1ull << 50},
            {"PB", 1000000000000000ull},
        };
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (strcasecmp(end, units[i].suffix) != 0)
                        continue;
                if (v > UINT64_MAX / units[i].mult)
                        return -ERANGE;
                *out = (uint64_t)v * units[i].mult;
                return 0;
        }
        return -EINVAL;
}

/* ---------------------------------------------------------------- addresses */

static int parse_port(const char *s, uint16_t *port)
{
        size_t n = strlen(s);
        if (n == 0 || n > 5 || !cfg_all_digits(s, n))
                return -EINVAL;
        unsigned long v = strtoul(s, NULL, 10);
        if (v < 1 || v > 65535)
                return -EINVAL;
        *port = (uint16_t)v;
        return 0;
}

static bool hostname_ok(const char *s, size_t n)
{
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!isalnum((unsigned char)c) && c != '-' && c != '.' && c != '_')
                        return false;
        }
        return true;
}

static bool ipv6_ok(const char *s, size_t n)
{
        char buf[INET6_ADDRSTRLEN + 1];
        struct in6_addr a;
        if (n == 0 || n >= sizeof(buf))
                return false;
        memcpy(buf, s, n);
        buf[n] = '\0';
        return inet_pton(AF_INET6, buf, &a) == 1;
}

static int copy_host(const char *s, size_t n, char *host, size_t hostlen)
{
        if (n >= hostlen)
                return -EINVAL;
        memcpy(host, s, n);
        host[n] = '\0';
        return 0;
}

int tdm_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port)
{
        if (!s || !host || hostlen == 0)
                return -EINVAL;
        *port = TDM_DEFAULT_PORT;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || !ipv6_ok(s + 1, (size_t)(end - s - 1)))
                        return -EINVAL;
                if (end[1] != '\0' && (end[1] != ':' || parse_port(end + 2, port) < 0))
                        return -EINVAL;
                return copy_host(s + 1, (size_t)(end - s - 1), host, hostlen);
        }
        const char *colon = strchr(s, ':');
        if (colon && strchr(colon + 1, ':')) {
                /* Several colons and no brackets: a bare IPv6 address, default port. */
                if (!ipv6_ok(s, strlen(s)))
                        return -EINVAL;
                return copy_host(s, strlen(s), host, hostlen);
        }
        size_t hlen = colon ? (size_t)(colon - s) : strlen(s);
        if (!hostname_ok(s, hlen))
                return -EINVAL;
        if (colon && parse_port(colon + 1, port) < 0)
                return -EINVAL;
        return copy_host(s, hlen, host, hostlen);
}

int tdm_parse_ip_port(const char *s, struct sockaddr_storage *out, unsigned *outlen)
{
        char host[128];
        uint16_t port;
        struct sockaddr_storage ss;
        unsigned len;
        const char *colon = s ? strrchr(s, ':') : NULL;
        /* An explicit port: the last colon, after "]" for IPv6. */
        if (!colon || (s[0] == '[' && colon[-1] != ']') || (s[0] != '[' && strchr(s, ':') != colon))
                return -EINVAL;
        if (tdm_parse_hostport(s, host, sizeof(host), &port) < 0 || port == 0)
                return -EINVAL;
        memset(&ss, 0, sizeof(ss));
        struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
        if (s[0] != '[' && inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
                v4->sin_family = AF_INET;
                v4->sin_port = htons(port);
                len = sizeof(*v4);
        } else if (s[0] == '[' && inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
                v6->sin6_family = AF_INET6;
                v6->sin6_port = htons(port);
                len = sizeof(*v6);
        } else {
                return -EINVAL;
        }
        if (out)
                *out = ss;
        if (outlen)
                *outlen = len;
        return 0;
}
