/*
 * How sizes and network addresses are written in the configuration and on tandemctl's
 * command line. Implemented in daemon/config/values.c.
 */
#ifndef TANDEM_CONFIG_VALUES_H
#define TANDEM_CONFIG_VALUES_H

#include <stddef.h>
#include <stdint.h>

#define TDM_DEFAULT_PORT 3260

/*
 * Sizes like "123", "4096K", "10G", "3MiB", "5GB" (integers only: "1.5T" is refused).
 * K/M/G/T/P and KiB..PiB are powers of 1024, KB..PB powers of 1000; case-insensitive.
 * Returns 0, -EINVAL or -ERANGE (overflow).
 */
int tdm_parse_size(const char *s, uint64_t *out);

/*
 * "1.2.3.4:3260", "[::1]:3260", "host", "[::1]" or "::1" (no port: TDM_DEFAULT_PORT).
 * host receives the address without brackets. Returns 0 or -EINVAL.
 */
int tdm_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

/*
 * A numeric socket address with its port, as the metrics exporter binds: "127.0.0.1:9750" or
 * "[::1]:9750" (no host names, no default port). *out (may be NULL) receives it as a
 * struct sockaddr_in or sockaddr_in6, *outlen its length. Returns 0 or -EINVAL.
 */
struct sockaddr_storage;
int tdm_parse_ip_port(const char *s, struct sockaddr_storage *out, unsigned *outlen);

#endif
