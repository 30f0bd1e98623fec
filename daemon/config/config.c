/*
 * The configuration model: defaults, parsing (libconfig), validation with messages that
 * name the field, atomic save, and the edits the admin plane applies.
 */
#include "tandem/fsutil.h"
#include "tandem/config.h"
#include "tandem/config_repl.h"
#include "tandem/repl.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libconfig.h>
#include <libgen.h>
#include <limits.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

/* Longest field path we build: "targets[N].luns[N].replication.nodes[N].address". */
#define FIELD_MAX 160

/* ---------------------------------------------------------------- errors */

__attribute__((format(printf, 5, 6))) static int fail(char *err, size_t errlen, int rc,
                                                      const char *field, const char *fmt, ...)
{
        if (err && errlen) {
                size_t n = 0;
                if (field && *field) {
                        int w = snprintf(err, errlen, "%s: ", field);
                        n = w < 0 ? 0 : (size_t)w;
                        if (n >= errlen)
                                n = errlen - 1;
                }
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(err + n, errlen - n, fmt, ap);
                va_end(ap);
        }
        return rc;
}

/* "prefix.name", or "name" at the top level. */
static void field_join(char *out, const char *prefix, const char *name)
{
        /* Field paths are bounded; a truncated one still names the place. */
        int n = (prefix && *prefix) ? snprintf(out, FIELD_MAX, "%s.%s", prefix, name)
                                    : snprintf(out, FIELD_MAX, "%s", name);
        if (n >= FIELD_MAX)
                out[FIELD_MAX - 1] = '\0';
}

static void field_index(char *out, const char *prefix, size_t i)
{
        if (snprintf(out, FIELD_MAX, "%s[%zu]", prefix, i) >= FIELD_MAX)
                out[FIELD_MAX - 1] = '\0';
}

/* ---------------------------------------------------------------- small parsers */

static bool all_digits(const char *s, size_t n)
{
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char)s[i]))
                        return false;
        return true;
}

static bool all_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char)s[i]))
                        return false;
        return true;
}

/* RFC 3720 3.2.6.2: after normalisation only a-z, 0-9, '-', '.', ':' (we accept A-Z too). */
static bool name_char_ok(char c)
{
        return isalnum((unsigned char)c) || c == '-' || c == '.' || c == ':';
}

/* Reversed domain name: labels of [A-Za-z0-9-], separated by single dots. */
static bool domain_ok(const char *s, size_t n)
{
        if (n == 0 || s[0] == '.' || s[n - 1] == '.')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '.') {
                        if (s[i + 1] == '.')
                                return false;
                } else if (!isalnum((unsigned char)c) && c != '-') {
                        return false;
                }
        }
        return true;
}

static bool iqn_valid(const char *s)
{
        /* iqn.YYYY-MM.reversed.domain[:unique] */
        const char *p = s + 4;
        if (!all_digits(p, 4) || p[4] != '-' || !all_digits(p + 5, 2) || p[7] != '.')
                return false;
        int month = (p[5] - '0') * 10 + (p[6] - '0');
        if (month < 1 || month > 12)
                return false;
        p += 8;
        const char *colon = strchr(p, ':');
        size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
        if (!domain_ok(p, dlen))
                return false;
        if (!colon)
                return true;
        const char *u = colon + 1;
        if (*u == '\0')
                return false;
        for (; *u; u++)
                if (!name_char_ok(*u))
                        return false;
        return true;
}

bool tdm_iscsi_name_valid(const char *name)
{
        if (!name)
                return false;
        size_t n = strlen(name);
        if (n < 5 || n >= TDM_IQN_MAX)
                return false;
        if (strncasecmp(name, "iqn.", 4) == 0)
                return iqn_valid(name);
        if (strncasecmp(name, "eui.", 4) == 0)
                return n == 4 + 16 && all_hex(name + 4, 16);
        if (strncasecmp(name, "naa.", 4) == 0)
                return (n == 4 + 16 || n == 4 + 32) && all_hex(name + 4, n - 4);
        return false;
}

bool tdm_iscsi_name_equal(const char *a, const char *b)
{
        return strcasecmp(a, b) == 0;
}

static int parse_port(const char *s, uint16_t *port)
{
        size_t n = strlen(s);
        if (n == 0 || n > 5 || !all_digits(s, n))
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

bool tdm_naa_valid(const char *hex)
{
        return hex && strlen(hex) == 32 && all_hex(hex, 32) && hex[0] == '6';
}

static int hex_nibble(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        return tolower((unsigned char)c) - 'a' + 10;
}

int tdm_naa_to_bytes(const char *hex, uint8_t out[16])
{
        if (!tdm_naa_valid(hex))
                return -EINVAL;
        for (int i = 0; i < 16; i++)
                out[i] = (uint8_t)(hex_nibble(hex[2 * i]) << 4 | hex_nibble(hex[2 * i + 1]));
        return 0;
}

/* ---------------------------------------------------------------- identity */

static void random_bytes(uint8_t *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t r = getrandom(buf + got, n - got, 0);
                if (r > 0) {
                        got += (size_t)r;
                        continue;
                }
                if (r < 0 && errno == EINTR)
                        continue;
                break;
        }
        if (got == n)
                return;
        /* getrandom unavailable: OpenSSL's generator; a LUN identity must never be guessable
         * or repeated, so there is no weaker fallback. */
        if (RAND_bytes(buf, (int)n) != 1)
                abort();
}

static void to_hex(const uint8_t *in, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 0xf];
        }
        out[2 * n] = '\0';
}

void tdm_lun_identity_generate(struct tdm_lun_cfg *lun)
{
        uint8_t r[21];
        random_bytes(r, sizeof(r));
        /*
         * NAA IEEE Registered Extended (SPC-4 7.8.6.6.5): NAA 6, 24-bit company id,
         * 36-bit vendor specific identifier, 64-bit vendor specific extension.
         */
        uint32_t cid = TDM_NAA_COMPANY_ID;
        uint8_t naa[16];
        naa[0] = (uint8_t)(0x60 | ((cid >> 20) & 0x0f));
        naa[1] = (uint8_t)(cid >> 12);
        naa[2] = (uint8_t)(cid >> 4);
        naa[3] = (uint8_t)(((cid & 0x0f) << 4) | (r[0] & 0x0f));
        memcpy(naa + 4, r + 1, 12);
        to_hex(naa, sizeof(naa), lun->naa);
        to_hex(r + 13, 8, lun->serial);
}

/* ---------------------------------------------------------------- defaults */

void tdm_config_defaults(struct tdm_config *cfg)
{
        memset(cfg, 0, sizeof(*cfg));
        snprintf(cfg->listen[0], sizeof(cfg->listen[0]), "%s", TDM_DEFAULT_LISTEN);
        cfg->n_listen = 1;
        snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", TDM_DEFAULT_STATE_DIR);
        snprintf(cfg->instance, sizeof(cfg->instance), "%s", TDM_DEFAULT_INSTANCE);
        cfg->threads = 0;
        cfg->log_level = LOG_INFO;
        cfg->log_syslog = true;
        cfg->iscsi.max_recv_dsl = TDM_DEFAULT_MAX_RECV_DSL;
        cfg->iscsi.max_burst = TDM_DEFAULT_MAX_BURST;
        cfg->iscsi.first_burst = TDM_DEFAULT_FIRST_BURST;
        cfg->iscsi.initial_r2t = false;
        cfg->iscsi.immediate_data = true;
        cfg->iscsi.max_outstanding_r2t = TDM_DEFAULT_MAX_OUTSTANDING_R2T;
        cfg->iscsi.queue_depth = TDM_DEFAULT_QUEUE_DEPTH;
        cfg->iscsi.nop_interval_s = TDM_DEFAULT_NOP_INTERVAL_S;
        cfg->iscsi.nop_timeout_s = TDM_DEFAULT_NOP_TIMEOUT_S;
        cfg->iscsi.login_timeout_s = TDM_DEFAULT_LOGIN_TIMEOUT_S;
        /* ---- cluster (issue 4) ---- */
        snprintf(cfg->cluster.group, sizeof(cfg->cluster.group), "%s", TDM_DEFAULT_CLUSTER_GROUP);
        /* ---- end cluster ---- */
}

void tdm_lun_defaults(struct tdm_lun_cfg *lun)
{
        memset(lun, 0, sizeof(*lun));
        lun->block_size = TDM_DEFAULT_BLOCK_SIZE;
        lun->wce = true;
}

static void target_free(struct tdm_target_cfg *t)
{
        free(t->luns);
        free(t->acl);
        t->luns = NULL;
        t->acl = NULL;
        t->n_luns = t->n_acl = 0;
}

void tdm_config_free(struct tdm_config *cfg)
{
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->n_targets; i++)
                target_free(&cfg->targets[i]);
        free(cfg->targets);
        cfg->targets = NULL;
        cfg->n_targets = 0;
}

static int target_copy(struct tdm_target_cfg *dst, const struct tdm_target_cfg *src)
{
        *dst = *src;
        dst->luns = NULL;
        dst->acl = NULL;
        if (src->n_luns) {
                dst->luns = malloc(src->n_luns * sizeof(*dst->luns));
                if (!dst->luns)
                        goto nomem;
                memcpy(dst->luns, src->luns, src->n_luns * sizeof(*dst->luns));
        }
        if (src->n_acl) {
                dst->acl = malloc(src->n_acl * sizeof(*dst->acl));
                if (!dst->acl)
                        goto nomem;
                memcpy(dst->acl, src->acl, src->n_acl * sizeof(*dst->acl));
        }
        return 0;
nomem:
        free(dst->luns);
        dst->luns = NULL;
        dst->n_luns = dst->n_acl = 0;
        return -ENOMEM;
}

int tdm_config_copy(struct tdm_config *dst, const struct tdm_config *src)
{
        *dst = *src;
        dst->targets = NULL;
        dst->n_targets = 0;
        if (src->n_targets == 0)
                return 0;
        dst->targets = calloc(src->n_targets, sizeof(*dst->targets));
        if (!dst->targets)
                return -ENOMEM;
        for (size_t i = 0; i < src->n_targets; i++) {
                int rc = target_copy(&dst->targets[i], &src->targets[i]);
                if (rc < 0) {
                        tdm_config_free(dst);
                        return rc;
                }
                dst->n_targets = i + 1;
        }
        return 0;
}

/* ---------------------------------------------------------------- replication helpers */

static const char *const sb_policy_names[] = {
    [REPL_SB_DISCONNECT] = "disconnect",
    [REPL_SB_DISCARD_ZERO_CHANGES] = "discard-zero-changes",
    [REPL_SB_DISCARD_YOUNGER_PRIMARY] = "discard-younger-primary",
    [REPL_SB_DISCARD_NODE] = "discard-node-",
};
#define SB_DISCARD_NODE_PREFIX "discard-node-"

const struct tdm_repl_node *tdm_repl_local_node(const struct tdm_repl_cfg *r, uint32_t node_id)
{
        for (size_t i = 0; i < r->n_nodes && i < TDM_REPL_MAX_NODES; i++)
                if (r->nodes[i].id == node_id)
                        return &r->nodes[i];
        return NULL;
}

const struct tdm_repl_node *tdm_repl_peer_node(const struct tdm_repl_cfg *r, uint32_t node_id)
{
        for (size_t i = 0; i < r->n_nodes && i < TDM_REPL_MAX_NODES; i++)
                if (r->nodes[i].id != node_id)
                        return &r->nodes[i];
        return NULL;
}

/* Whether an address string carries its own port ("h:p", "[v6]:p"; a bare IPv6 has none). */
static bool address_has_port(const char *s)
{
        if (s[0] == '[')
                return strstr(s, "]:") != NULL;
        const char *colon = strchr(s, ':');
        return colon && !strchr(colon + 1, ':');
}

int tdm_repl_node_endpoint(const struct tdm_repl_cfg *r, const struct tdm_repl_node *n, char *host,
                           size_t hostlen, uint16_t *port)
{
        int rc = tdm_parse_hostport(n->address, host, hostlen, port);
        if (rc == 0 && !address_has_port(n->address))
                *port = r->port ? r->port : TDM_DEFAULT_REPL_PORT;
        return rc;
}

int tdm_repl_metadata_path(const struct tdm_config *cfg, const struct tdm_lun_cfg *lun, char *out,
                           size_t outlen)
{
        int n = lun->repl.metadata[0]
                    ? snprintf(out, outlen, "%s", lun->repl.metadata)
                    : snprintf(out, outlen, "%s/repl-%s.md", cfg->state_dir, lun->naa);
        return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

void tdm_repl_split_brain_name(const struct tdm_repl_cfg *r, char *out, size_t outlen)
{
        unsigned p = (unsigned)r->split_brain;
        if (p == REPL_SB_DISCARD_NODE)
                snprintf(out, outlen, SB_DISCARD_NODE_PREFIX "%s", r->split_brain_node);
        else
                snprintf(out, outlen, "%s",
                         p < sizeof(sb_policy_names) / sizeof(sb_policy_names[0])
                             ? sb_policy_names[p]
                             : "?");
}

/* ---------------------------------------------------------------- validation */

static bool path_absolute(const char *p)
{
        return p[0] == '/';
}

static bool printable(const char *s)
{
        for (; *s; s++)
                if (!isprint((unsigned char)*s))
                        return false;
        return true;
}

/* 1..max characters of A-Z a-z 0-9 - _ . (names that end up in files, sockets, messages). */
static bool plain_name_ok(const char *s, size_t max)
{
        size_t n = strlen(s);
        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

static bool instance_ok(const char *s)
{
        return plain_name_ok(s, sizeof(((struct tdm_config *)0)->instance) - 1) && s[0] != '.';
}

static bool serial_ok(const char *s)
{
        return plain_name_ok(s, 32);
}

int tdm_chap_check(const struct tdm_chap_cfg *chap, const char *field, char *err, size_t errlen)
{
        char f[FIELD_MAX];
        if (!chap->enabled) {
                if (chap->mutual)
                        return fail(err, errlen, -EINVAL, field,
                                    "mutual CHAP needs CHAP (user and secret) too");
                return 0;
        }
        field_join(f, field, "user");
        if (chap->user[0] == '\0' || !printable(chap->user) ||
            strnlen(chap->user, TDM_CHAP_MAX) >= TDM_CHAP_MAX)
                return fail(err, errlen, -EINVAL, f, "must be 1..%d printable characters",
                            TDM_CHAP_MAX - 1);
        field_join(f, field, "secret");
        size_t sl = strnlen(chap->secret, TDM_CHAP_MAX);
        if (sl < TDM_CHAP_SECRET_MIN || sl >= TDM_CHAP_MAX || !printable(chap->secret))
                return fail(err, errlen, -EINVAL, f,
                            "must be %d..%d printable characters (RFC 7143 wants at least 96 bits)",
                            TDM_CHAP_SECRET_MIN, TDM_CHAP_MAX - 1);
        if (!chap->mutual)
                return 0;
        field_join(f, field, "mutual_user");
        if (chap->mutual_user[0] == '\0' || !printable(chap->mutual_user) ||
            strnlen(chap->mutual_user, TDM_CHAP_MAX) >= TDM_CHAP_MAX)
                return fail(err, errlen, -EINVAL, f, "must be 1..%d printable characters",
                            TDM_CHAP_MAX - 1);
        field_join(f, field, "mutual_secret");
        sl = strnlen(chap->mutual_secret, TDM_CHAP_MAX);
        if (sl < TDM_CHAP_SECRET_MIN || sl >= TDM_CHAP_MAX || !printable(chap->mutual_secret))
                return fail(err, errlen, -EINVAL, f,
                            "must be %d..%d printable characters (RFC 7143 wants at least 96 bits)",
                            TDM_CHAP_SECRET_MIN, TDM_CHAP_MAX - 1);
        /* RFC 7143 12.1.3: a secret used one way must not be used the other way. */
        if (strcmp(chap->mutual_secret, chap->secret) == 0)
                return fail(err, errlen, -EINVAL, f,
                            "must differ from the secret (RFC 7143 12.1.3)");
        return 0;
}

static int check_range(uint64_t v, uint64_t lo, uint64_t hi, const char *field, char *err,
                       size_t errlen)
{
        if (v < lo || v > hi)
                return fail(err, errlen, -EINVAL, field,
                            "must be %" PRIu64 "..%" PRIu64 ", got %" PRIu64, lo, hi, v);
        return 0;
}

static int validate_iscsi(const struct tdm_iscsi_cfg *c, char *err, size_t errlen)
{
        /* Ranges from RFC 7143 13 (data lengths 512..2^24-1); ours are tighter where noted. */
        int rc;
        if ((rc = check_range(c->max_recv_dsl, 512, 16777215, "iscsi.max_recv_dsl", err, errlen)) ||
            (rc = check_range(c->max_burst, 512, 16777215, "iscsi.max_burst", err, errlen)) ||
            (rc = check_range(c->first_burst, 512, 16777215, "iscsi.first_burst", err, errlen)) ||
            (rc = check_range(c->max_outstanding_r2t, 1, 16, "iscsi.max_outstanding_r2t", err,
                              errlen)) ||
            (rc = check_range(c->queue_depth, 1, 4096, "iscsi.queue_depth", err, errlen)) ||
            (rc = check_range(c->nop_interval_s, 0, 3600, "iscsi.nop_interval", err, errlen)) ||
            (rc = check_range(c->nop_timeout_s, 1, 60, "iscsi.nop_timeout", err, errlen)) ||
            (rc = check_range(c->login_timeout_s, 1, 300, "iscsi.login_timeout", err, errlen)))
                return rc;
        if (c->first_burst > c->max_burst)
                return fail(err, errlen, -EINVAL, "iscsi.first_burst",
                            "must not exceed iscsi.max_burst (%u), got %u", c->max_burst,
                            c->first_burst);
        return 0;
}

#define REPL_IDENTITY_MSG "a replicated LUN needs the same naa and serial on every node; set both"

/* A read-only LUN exports its file or device as it is: nothing may create or grow it. */
#define READONLY_SIZE_MSG                                                                          \
        "a read-only LUN cannot create or grow its backing store: leave size out (the existing "   \
        "size is used)"

int tdm_physical_block_size_check(uint32_t physical_block_size, uint32_t block_size,
                                  const char *field, char *err, size_t errlen)
{
        uint32_t pbs = physical_block_size;
        if (pbs == 0)
                return 0;
        if (pbs < block_size || pbs > TDM_MAX_PHYSICAL_BLOCK_SIZE || (pbs & (pbs - 1)))
                return fail(err, errlen, -EINVAL, field,
                            "must be block_size (%u) times a power of two, at most %u, got %u",
                            block_size, TDM_MAX_PHYSICAL_BLOCK_SIZE, pbs);
        return 0;
}

static int validate_lun(const struct tdm_lun_cfg *l, const char *f, char *err, size_t errlen)
{
        char g[FIELD_MAX];
        int rc;
        field_join(g, f, "lun");
        if ((rc = check_range(l->lun, 0, TDM_LUN_ID_MAX, g, err, errlen)))
                return rc;
        field_join(g, f, "path");
        if (l->path[0] == '\0')
                return fail(err, errlen, -EINVAL, g, "missing (required)");
        if (!path_absolute(l->path))
                return fail(err, errlen, -EINVAL, g, "must be an absolute path, got \"%s\"",
                            l->path);
        field_join(g, f, "block_size");
        uint32_t bs = l->block_size;
        if (bs != 512 && bs != 1024 && bs != 2048 && bs != 4096)
                return fail(err, errlen, -EINVAL, g, "must be 512, 1024, 2048 or 4096, got %u", bs);
        field_join(g, f, "physical_block_size");
        if ((rc = tdm_physical_block_size_check(l->physical_block_size, bs, g, err, errlen)))
                return rc;
        field_join(g, f, "size");
        if (l->size % bs != 0)
                return fail(err, errlen, -EINVAL, g, "must be a positive multiple of %u", bs);
        /* The file holds it as a signed 64-bit integer (and file offsets are off_t): a larger
         * size, possible with a unit ("16000P"), would be saved as one the next load refuses. */
        if (l->size > INT64_MAX)
                return fail(err, errlen, -EINVAL, g,
                            "must be at most %" PRId64 " bytes, got %" PRIu64, INT64_MAX, l->size);
        if (l->readonly && l->size)
                return fail(err, errlen, -EINVAL, g, READONLY_SIZE_MSG);
        if (l->repl.enabled && (l->naa[0] == '\0' || l->serial[0] == '\0')) {
                /* A generated identity would differ between the nodes. */
                field_join(g, f, l->naa[0] == '\0' ? "naa" : "serial");
                return fail(err, errlen, -EINVAL, g, REPL_IDENTITY_MSG);
        }
        field_join(g, f, "naa");
        if (!tdm_naa_valid(l->naa))
                return fail(err, errlen, -EINVAL, g,
                            "must be 32 hex digits starting with 6 (NAA type 6), got \"%s\"",
                            l->naa);
        field_join(g, f, "serial");
        if (!serial_ok(l->serial))
                return fail(err, errlen, -EINVAL, g,
                            "must be 1..32 characters of A-Z a-z 0-9 - _ ., got \"%s\"", l->serial);
        return 0;
}

/* Identity and storage must be unique across the whole configuration. */
static int validate_lun_unique(const struct tdm_config *cfg, size_t ti, size_t li, const char *f,
                               char *err, size_t errlen)
{
        const struct tdm_lun_cfg *l = &cfg->targets[ti].luns[li];
        char g[FIELD_MAX];
        for (size_t tj = 0; tj <= ti; tj++) {
                const struct tdm_target_cfg *t = &cfg->targets[tj];
                size_t end = tj == ti ? li : t->n_luns;
                for (size_t lj = 0; lj < end; lj++) {
                        const struct tdm_lun_cfg *o = &t->luns[lj];
                        if (tj == ti && o->lun == l->lun) {
                                field_join(g, f, "lun");
                                return fail(err, errlen, -EINVAL, g,
                                            "%" PRIu64 " is used twice in this target", l->lun);
                        }
                        const char *what = NULL;
                        if (strcmp(o->path, l->path) == 0)
                                what = "path";
                        else if (strcasecmp(o->naa, l->naa) == 0)
                                what = "naa";
                        else if (strcmp(o->serial, l->serial) == 0)
                                what = "serial";
                        if (what) {
                                field_join(g, f, what);
                                return fail(err, errlen, -EINVAL, g,
                                            "already used by targets[%zu].luns[%zu]", tj, lj);
                        }
                }
        }
        return 0;
}

/* Node names end up in messages and in discard-node-NAME: keep them plain. */
static bool repl_node_name_ok(const char *s)
{
        return plain_name_ok(s, sizeof(((struct tdm_repl_node *)0)->name) - 1);
}

/* 0.0.0.0 and :: bind every address, so they clash with any address on the same port. */
static bool host_is_wildcard(const char *h)
{
        return strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0;
}

static bool endpoints_clash(const char *h1, uint16_t p1, const char *h2, uint16_t p2)
{
        return p1 == p2 &&
               (strcasecmp(h1, h2) == 0 || host_is_wildcard(h1) || host_is_wildcard(h2));
}

static int validate_repl_nodes(const struct tdm_config *cfg, const struct tdm_repl_cfg *r,
                               const char *g, char *err, size_t errlen)
{
        char f[FIELD_MAX], nf[FIELD_MAX], h[FIELD_MAX];
        int rc;
        field_join(f, g, "nodes");
        if (r->n_nodes > TDM_REPL_MAX_NODES)
                return fail(err, errlen, -EINVAL, f,
                            "only one peer per LUN is supported: list this node and its peer, "
                            "got %zu nodes",
                            r->n_nodes);
        if (r->n_nodes < TDM_REPL_MAX_NODES)
                return fail(err, errlen, -EINVAL, f,
                            "must list this node and its peer (%d entries), got %zu",
                            TDM_REPL_MAX_NODES, r->n_nodes);
        char host[TDM_REPL_MAX_NODES][128];
        uint16_t port[TDM_REPL_MAX_NODES];
        for (size_t i = 0; i < r->n_nodes; i++) {
                const struct tdm_repl_node *n = &r->nodes[i];
                field_index(nf, f, i);
                field_join(h, nf, "id");
                if ((rc = check_range(n->id, 1, 255, h, err, errlen)))
                        return rc;
                field_join(h, nf, "name");
                if (!repl_node_name_ok(n->name))
                        return fail(err, errlen, -EINVAL, h,
                                    "must be 1..63 characters of A-Z a-z 0-9 - _ ., got \"%s\"",
                                    n->name);
                field_join(h, nf, "address");
                if (tdm_repl_node_endpoint(r, n, host[i], sizeof(host[i]), &port[i]) < 0)
                        return fail(err, errlen, -EINVAL, h,
                                    "\"%s\" is not HOST[:PORT] or [IPV6][:PORT] (port 1..65535)",
                                    n->address);
                for (size_t j = 0; j < i; j++) {
                        const struct tdm_repl_node *o = &r->nodes[j];
                        if (o->id == n->id) {
                                field_join(h, nf, "id");
                                return fail(err, errlen, -EINVAL, h, "%u is already nodes[%zu]",
                                            n->id, j);
                        }
                        if (strcmp(o->name, n->name) == 0) {
                                field_join(h, nf, "name");
                                return fail(err, errlen, -EINVAL, h, "\"%s\" is already nodes[%zu]",
                                            n->name, j);
                        }
                        if (strcasecmp(host[i], host[j]) == 0 && port[i] == port[j])
                                return fail(err, errlen, -EINVAL, h,
                                            "\"%s\" is the same endpoint as nodes[%zu] (a node "
                                            "would connect to itself)",
                                            n->address, j);
                }
        }
        if (!tdm_repl_local_node(r, cfg->node_id))
                return fail(err, errlen, -EINVAL, f,
                            "none of the nodes is this node (node_id = %u)", cfg->node_id);
        return 0;
}

static int validate_repl_split_brain(const struct tdm_repl_cfg *r, const char *g, char *err,
                                     size_t errlen)
{
        char f[FIELD_MAX];
        field_join(f, g, "split_brain");
        if (r->split_brain < REPL_SB_DISCONNECT || r->split_brain > REPL_SB_DISCARD_NODE)
                return fail(err, errlen, -EINVAL, f, "unknown policy %d", r->split_brain);
        if (r->split_brain != REPL_SB_DISCARD_NODE)
                return 0;
        for (size_t i = 0; i < r->n_nodes; i++)
                if (strcmp(r->nodes[i].name, r->split_brain_node) == 0)
                        return 0;
        return fail(err, errlen, -EINVAL, f,
                    SB_DISCARD_NODE_PREFIX "%s: no node is named \"%s\" (nodes: %s, %s)",
                    r->split_brain_node, r->split_brain_node, r->nodes[0].name, r->nodes[1].name);
}

static int validate_repl_settings(const struct tdm_repl_cfg *r, const char *g, char *err,
                                  size_t errlen)
{
        char f[FIELD_MAX];
        int rc;
        field_join(f, g, "secret");
        size_t sl = strnlen(r->secret, TDM_CHAP_MAX);
        if (sl < TDM_REPL_SECRET_MIN || sl >= TDM_CHAP_MAX || !printable(r->secret))
                return fail(err, errlen, -EINVAL, f,
                            "must be %d..%d printable characters, the same on both nodes",
                            TDM_REPL_SECRET_MIN, TDM_CHAP_MAX - 1);
        field_join(f, g, "port");
        if ((rc = check_range(r->port, 1, 65535, f, err, errlen)))
                return rc;
        field_join(f, g, "metadata");
        if (r->metadata[0] && !path_absolute(r->metadata))
                return fail(err, errlen, -EINVAL, f, "must be an absolute path, got \"%s\"",
                            r->metadata);
        field_join(f, g, "timeout");
        if (r->timeout_ms > TDM_REPL_TIMEOUT_MAX_MS)
                return fail(err, errlen, -EINVAL, f,
                            "%u ms is not well below the initiators' 15 s abort timer; at most %u",
                            r->timeout_ms, TDM_REPL_TIMEOUT_MAX_MS);
        if (r->timeout_ms < TDM_REPL_TIMEOUT_MIN_MS)
                return fail(err, errlen, -EINVAL, f,
                            "%u ms would drop a peer that is merely busy; at least %u",
                            r->timeout_ms, TDM_REPL_TIMEOUT_MIN_MS);
        field_join(f, g, "resync_rate");
        if ((rc = check_range(r->resync_rate, 1, INT64_MAX, f, err, errlen)))
                return rc;
        field_join(f, g, "resync_min_rate");
        if ((rc = check_range(r->resync_min_rate, 1, INT64_MAX, f, err, errlen)))
                return rc;
        if (r->resync_min_rate > r->resync_rate)
                return fail(err, errlen, -EINVAL, f,
                            "%" PRIu64 " bytes/s exceeds resync_rate (%" PRIu64 " bytes/s)",
                            r->resync_min_rate, r->resync_rate);
        return 0;
}

/*
 * What one replicated LUN needs from the others: its own listening endpoint (one listener
 * per LUN), not an iSCSI portal, and its own metadata file.
 */
static int validate_repl_unique(const struct tdm_config *cfg, size_t ti, size_t li, const char *g,
                                char *err, size_t errlen)
{
        const struct tdm_repl_cfg *r = &cfg->targets[ti].luns[li].repl;
        const struct tdm_repl_node *me = tdm_repl_local_node(r, cfg->node_id);
        char f[FIELD_MAX], nf[FIELD_MAX], host[128], other[128];
        uint16_t port, oport;
        field_join(f, g, "nodes");
        field_index(nf, f, (size_t)(me - r->nodes));
        field_join(f, nf, "address");
        if (tdm_repl_node_endpoint(r, me, host, sizeof(host), &port) < 0)
                return fail(err, errlen, -EINVAL, f, "\"%s\" is not HOST[:PORT]", me->address);
        for (size_t i = 0; i < cfg->n_listen; i++)
                if (tdm_parse_hostport(cfg->listen[i], other, sizeof(other), &oport) == 0 &&
                    endpoints_clash(host, port, other, oport))
                        return fail(err, errlen, -EINVAL, f,
                                    "%s port %u clashes with the iSCSI portal listen[%zu] "
                                    "(\"%s\"); give replication its own port",
                                    host, port, i, cfg->listen[i]);
        for (size_t tj = 0; tj <= ti; tj++) {
                const struct tdm_target_cfg *t = &cfg->targets[tj];
                size_t end = tj == ti ? li : t->n_luns;
                for (size_t lj = 0; lj < end; lj++) {
                        const struct tdm_repl_cfg *o = &t->luns[lj].repl;
                        const struct tdm_repl_node *ome = tdm_repl_local_node(o, cfg->node_id);
                        if (!o->enabled || !ome)
                                continue;
                        if (tdm_repl_node_endpoint(o, ome, other, sizeof(other), &oport) == 0 &&
                            endpoints_clash(host, port, other, oport))
                                return fail(err, errlen, -EINVAL, f,
                                            "%s port %u is already where targets[%zu].luns[%zu] "
                                            "listens; give each replicated LUN its own port",
                                            host, port, tj, lj);
                        if (r->metadata[0] && strcmp(r->metadata, o->metadata) == 0) {
                                field_join(f, g, "metadata");
                                return fail(err, errlen, -EINVAL, f,
                                            "already used by targets[%zu].luns[%zu]", tj, lj);
                        }
                }
        }
        if (!r->metadata[0])
                return 0;
        for (size_t tj = 0; tj < cfg->n_targets; tj++)
                for (size_t lj = 0; lj < cfg->targets[tj].n_luns; lj++)
                        if (strcmp(cfg->targets[tj].luns[lj].path, r->metadata) == 0) {
                                field_join(f, g, "metadata");
                                return fail(err, errlen, -EINVAL, f,
                                            "is the backing store of targets[%zu].luns[%zu]", tj,
                                            lj);
                        }
        return 0;
}

static int validate_repl(const struct tdm_config *cfg, size_t ti, size_t li, const char *f,
                         char *err, size_t errlen)
{
        const struct tdm_lun_cfg *l = &cfg->targets[ti].luns[li];
        char g[FIELD_MAX];
        int rc;
        if (!l->repl.enabled)
                return 0;
        if (cfg->node_id < 1 || cfg->node_id > 255)
                return fail(err, errlen, -EINVAL, "node_id",
                            "must be set (1..255) when a LUN is replicated (%s); it says which of "
                            "replication.nodes this node is",
                            f);
        field_join(g, f, "readonly");
        if (l->readonly)
                return fail(err, errlen, -EINVAL, g,
                            "a replicated LUN cannot be read-only: the peer's writes must land on "
                            "it");
        field_join(g, f, "replication");
        if ((rc = validate_repl_settings(&l->repl, g, err, errlen)) ||
            (rc = validate_repl_nodes(cfg, &l->repl, g, err, errlen)) ||
            (rc = validate_repl_split_brain(&l->repl, g, err, errlen)) ||
            (rc = validate_repl_unique(cfg, ti, li, g, err, errlen)))
                return rc;
        return 0;
}

static int validate_target(const struct tdm_config *cfg, size_t ti, char *err, size_t errlen)
{
        const struct tdm_target_cfg *t = &cfg->targets[ti];
        char f[FIELD_MAX], g[FIELD_MAX];
        int rc;
        field_index(f, "targets", ti);
        field_join(g, f, "iqn");
        if (t->iqn[0] == '\0')
                return fail(err, errlen, -EINVAL, g, "missing (required)");
        if (!tdm_iscsi_name_valid(t->iqn))
                return fail(err, errlen, -EINVAL, g,
                            "\"%s\" is not an iSCSI name (iqn.YYYY-MM.domain[:id], eui.<16 hex>, "
                            "naa.<16|32 hex>)",
                            t->iqn);
        for (size_t j = 0; j < ti; j++)
                if (tdm_iscsi_name_equal(cfg->targets[j].iqn, t->iqn))
                        return fail(err, errlen, -EINVAL, g, "\"%s\" is already targets[%zu]",
                                    t->iqn, j);
        field_join(g, f, "alias");
        if (!printable(t->alias))
                return fail(err, errlen, -EINVAL, g, "must be printable characters");
        field_join(g, f, "tpgt");
        if ((rc = check_range(t->tpgt, 1, 65535, g, err, errlen)))
                return rc;
        for (size_t a = 0; a < t->n_acl; a++) {
                char h[FIELD_MAX];
                field_join(g, f, "acl");
                field_index(h, g, a);
                if (strcmp(t->acl[a], "ALL") != 0 && !tdm_iscsi_name_valid(t->acl[a]))
                        return fail(err, errlen, -EINVAL, h,
                                    "\"%s\" is neither ALL nor an iSCSI initiator name", t->acl[a]);
                for (size_t b = 0; b < a; b++)
                        if (tdm_iscsi_name_equal(t->acl[a], t->acl[b]))
                                return fail(err, errlen, -EINVAL, h, "\"%s\" is listed twice",
                                            t->acl[a]);
        }
        if (t->n_acl > TDM_MAX_ACL)
                return fail(err, errlen, -EINVAL, g, "at most %d entries", TDM_MAX_ACL);
        field_join(g, f, "chap");
        if ((rc = tdm_chap_check(&t->chap, g, err, errlen)))
                return rc;
        if (t->n_luns > TDM_LUN_ID_MAX + 1) {
                field_join(g, f, "luns");
                return fail(err, errlen, -EINVAL, g, "at most %d LUNs", TDM_LUN_ID_MAX + 1);
        }
        for (size_t li = 0; li < t->n_luns; li++) {
                char lf[FIELD_MAX];
                field_join(g, f, "luns");
                field_index(lf, g, li);
                if ((rc = validate_lun(&t->luns[li], lf, err, errlen)) ||
                    (rc = validate_lun_unique(cfg, ti, li, lf, err, errlen)) ||
                    (rc = validate_repl(cfg, ti, li, lf, err, errlen)))
                        return rc;
        }
        return 0;
}

/* ---- cluster (issue 4) ---- */
static int validate_cluster(const struct tdm_config *cfg, char *err, size_t errlen)
{
        const struct tdm_cluster_cfg *c = &cfg->cluster;
        /* The same alphabet as instance names: it is also a CPG group name in logs. */
        if (!instance_ok(c->group))
                return fail(err, errlen, -EINVAL, "cluster.group",
                            "must be 1..63 characters of A-Z a-z 0-9 - _ . (not starting with .), "
                            "got \"%s\"",
                            c->group);
        if (c->enabled && (cfg->node_id < 1 || cfg->node_id > 255))
                return fail(err, errlen, -EINVAL, "node_id",
                            "must be set (1..255) when cluster.enabled is true; it must equal this "
                            "node's nodeid in corosync.conf");
        if (c->fence_peer[0] && !path_absolute(c->fence_peer))
                return fail(err, errlen, -EINVAL, "cluster.fence_peer",
                            "must be an absolute path, got \"%s\"", c->fence_peer);
        return 0;
}

/* The timer chain in cluster mode: a dead peer noticed within 2 s, writes held at most 10 s. */
static int validate_cluster_timers(const struct tdm_config *cfg, char *err, size_t errlen)
{
        if (!cfg->cluster.enabled)
                return 0;
        for (size_t t = 0; t < cfg->n_targets; t++)
                for (size_t l = 0; l < cfg->targets[t].n_luns; l++) {
                        const struct tdm_lun_cfg *lun = &cfg->targets[t].luns[l];
                        if (!lun->repl.enabled ||
                            lun->repl.timeout_ms <= TDM_CLUSTER_REPL_TIMEOUT_MAX_MS)
                                continue;
                        char f[FIELD_MAX];
                        snprintf(f, sizeof(f), "targets[%zu].luns[%zu].replication.timeout", t, l);
                        return fail(err, errlen, -EINVAL, f,
                                    "%u ms: with cluster.enabled a dead peer must be noticed "
                                    "within %u ms (then writes are held until it is outdated, "
                                    "%u ms in all at most)",
                                    lun->repl.timeout_ms, TDM_CLUSTER_REPL_TIMEOUT_MAX_MS,
                                    TDM_CLUSTER_IO_HOLD_MAX_MS);
                }
        return 0;
}
/* ---- end cluster ---- */

int tdm_config_validate(const struct tdm_config *cfg, char *err, size_t errlen)
{
        int rc;
        if (!instance_ok(cfg->instance))
                return fail(err, errlen, -EINVAL, "instance",
                            "must be 1..63 characters of A-Z a-z 0-9 - _ . (not starting with .), "
                            "got \"%s\"",
                            cfg->instance);
        if (!path_absolute(cfg->state_dir))
                return fail(err, errlen, -EINVAL, "state_dir",
                            "must be an absolute path, got \"%s\"", cfg->state_dir);
        if (cfg->log_file[0] && !path_absolute(cfg->log_file))
                return fail(err, errlen, -EINVAL, "log.file",
                            "must be an absolute path, got \"%s\"", cfg->log_file);
        if ((rc = check_range((uint64_t)(cfg->log_level < 0 ? 99 : cfg->log_level), LOG_EMERG,
                              LOG_DEBUG, "log.level", err, errlen)))
                return rc;
        if (cfg->n_listen == 0 || cfg->n_listen > TDM_MAX_LISTEN)
                return fail(err, errlen, -EINVAL, "listen", "must have 1..%d addresses",
                            TDM_MAX_LISTEN);
        for (size_t i = 0; i < cfg->n_listen; i++) {
                char f[FIELD_MAX], host[128];
                uint16_t port;
                field_index(f, "listen", i);
                if (tdm_parse_hostport(cfg->listen[i], host, sizeof(host), &port) < 0)
                        return fail(err, errlen, -EINVAL, f,
                                    "\"%s\" is not ADDR[:PORT] or [IPV6][:PORT] (port 1..65535)",
                                    cfg->listen[i]);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(cfg->listen[i], cfg->listen[j]) == 0)
                                return fail(err, errlen, -EINVAL, f, "\"%s\" is listed twice",
                                            cfg->listen[i]);
        }
        if ((rc = check_range(cfg->threads, 0, 1024, "threads", err, errlen)) ||
            (rc = check_range(cfg->node_id, 0, 255, "node_id", err, errlen)))
                return rc;
        if ((rc = validate_iscsi(&cfg->iscsi, err, errlen)))
                return rc;
        if ((rc = validate_cluster(cfg, err, errlen)) || /* cluster (issue 4) */
            (rc = validate_cluster_timers(cfg, err, errlen)))
                return rc;
        if ((rc = tdm_chap_check(&cfg->discovery_chap, "discovery.chap", err, errlen)))
                return rc;
        for (size_t i = 0; i < cfg->n_targets; i++)
                if ((rc = validate_target(cfg, i, err, errlen)))
                        return rc;
        return 0;
}

/* ---------------------------------------------------------------- parsing */

struct parser {
        char *err;
        size_t errlen;
        struct tdm_config *cfg;
};

static int check_members(struct parser *p, const config_setting_t *s, const char *field,
                         const char *const *allowed)
{
        if (!config_setting_is_group(s))
                return fail(p->err, p->errlen, -EINVAL, field, "must be a group { ... }");
        int n = config_setting_length(s);
        for (int i = 0; i < n; i++) {
                const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
                const char *name = config_setting_name(m);
                bool known = false;
                for (const char *const *a = allowed; *a; a++)
                        if (strcmp(*a, name) == 0)
                                known = true;
                if (!known) {
                        char f[FIELD_MAX];
                        field_join(f, field, name);
                        return fail(p->err, p->errlen, -EINVAL, f, "unknown field");
                }
        }
        return 0;
}

static const config_setting_t *member(const config_setting_t *group, const char *name,
                                      const char *field, char *f)
{
        field_join(f, field, name);
        return config_setting_get_member(group, name);
}

static int get_string(struct parser *p, const config_setting_t *s, const char *f, char *out,
                      size_t outlen)
{
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
                return fail(p->err, p->errlen, -EINVAL, f, "must be a string");
        const char *v = config_setting_get_string(s);
        if (strlen(v) >= outlen)
                return fail(p->err, p->errlen, -EINVAL, f, "too long (at most %zu characters)",
                            outlen - 1);
        memcpy(out, v, strlen(v) + 1);
        return 0;
}

static int get_uint(struct parser *p, const config_setting_t *s, const char *f, uint64_t lo,
                    uint64_t hi, uint64_t *out)
{
        int type = config_setting_type(s);
        if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
                return fail(p->err, p->errlen, -EINVAL, f, "must be an integer");
        long long v = config_setting_get_int64(s);
        if (v < 0 || (uint64_t)v < lo || (uint64_t)v > hi)
                return fail(p->err, p->errlen, -EINVAL, f,
                            "must be %" PRIu64 "..%" PRIu64 ", got %lld", lo, hi, v);
        *out = (uint64_t)v;
        return 0;
}

static int get_u32(struct parser *p, const config_setting_t *s, const char *f, uint64_t lo,
                   uint64_t hi, uint32_t *out)
{
        uint64_t v;
        int rc = get_uint(p, s, f, lo, hi, &v);
        if (rc == 0)
                *out = (uint32_t)v;
        return rc;
}

static int get_bool(struct parser *p, const config_setting_t *s, const char *f, bool *out)
{
        if (config_setting_type(s) != CONFIG_TYPE_BOOL)
                return fail(p->err, p->errlen, -EINVAL, f, "must be true or false");
        *out = config_setting_get_bool(s) != 0;
        return 0;
}

/* A size: an integer number of bytes or a string with a unit ("10G", "512MiB"). */
static int get_size(struct parser *p, const config_setting_t *s, const char *f, uint64_t *out)
{
        int type = config_setting_type(s);
        if (type == CONFIG_TYPE_STRING) {
                int rc = tdm_parse_size(config_setting_get_string(s), out);
                if (rc == -ERANGE)
                        return fail(p->err, p->errlen, -EINVAL, f, "too large");
                if (rc < 0)
                        return fail(
                            p->err, p->errlen, -EINVAL, f,
                            "must be bytes or a number with K/M/G/T (KiB..) or KB/MB/GB/TB, "
                            "got \"%s\"",
                            config_setting_get_string(s));
                return 0;
        }
        return get_uint(p, s, f, 0, INT64_MAX, out);
}

/* A string or an array/list of strings, into fixed-size slots. */
static int get_string_list(struct parser *p, const config_setting_t *s, const char *field,
                           char *slots, size_t slot_len, size_t max, size_t *n_out)
{
        if (config_setting_type(s) == CONFIG_TYPE_STRING) {
                *n_out = 1;
                return get_string(p, s, field, slots, slot_len);
        }
        if (!config_setting_is_array(s) && !config_setting_is_list(s))
                return fail(p->err, p->errlen, -EINVAL, field,
                            "must be a string or a list of strings");
        size_t n = (size_t)config_setting_length(s);
        if (n > max)
                return fail(p->err, p->errlen, -EINVAL, field, "at most %zu entries, got %zu", max,
                            n);
        for (size_t i = 0; i < n; i++) {
                char f[FIELD_MAX];
                field_index(f, field, i);
                int rc = get_string(p, config_setting_get_elem(s, (unsigned)i), f,
                                    slots + i * slot_len, slot_len);
                if (rc)
                        return rc;
        }
        *n_out = n;
        return 0;
}

static int parse_chap(struct parser *p, const config_setting_t *s, const char *field,
                      struct tdm_chap_cfg *chap)
{
        static const char *const keys[] = {"user", "secret", "mutual_user", "mutual_secret", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, field, keys)))
                return rc;
        memset(chap, 0, sizeof(*chap));
        if ((m = member(s, "user", field, f)) &&
            (rc = get_string(p, m, f, chap->user, TDM_CHAP_MAX)))
                return rc;
        if ((m = member(s, "secret", field, f)) &&
            (rc = get_string(p, m, f, chap->secret, TDM_CHAP_MAX)))
                return rc;
        if ((m = member(s, "mutual_user", field, f)) &&
            (rc = get_string(p, m, f, chap->mutual_user, TDM_CHAP_MAX)))
                return rc;
        if ((m = member(s, "mutual_secret", field, f)) &&
            (rc = get_string(p, m, f, chap->mutual_secret, TDM_CHAP_MAX)))
                return rc;
        chap->enabled = chap->user[0] || chap->secret[0];
        chap->mutual = chap->mutual_user[0] || chap->mutual_secret[0];
        return 0;
}

static int parse_log(struct parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {"file", "level", "syslog", NULL};
        static const char *const levels[] = {"emerg",   "alert",  "crit", "err",
                                             "warning", "notice", "info", "debug"};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, "log", keys)))
                return rc;
        if ((m = member(s, "file", "log", f)) &&
            (rc = get_string(p, m, f, p->cfg->log_file, sizeof(p->cfg->log_file))))
                return rc;
        if ((m = member(s, "syslog", "log", f)) && (rc = get_bool(p, m, f, &p->cfg->log_syslog)))
                return rc;
        if (!(m = member(s, "level", "log", f)))
                return 0;
        if (config_setting_type(m) == CONFIG_TYPE_STRING) {
                const char *v = config_setting_get_string(m);
                for (int i = 0; i < 8; i++) {
                        if (strcasecmp(v, levels[i]) == 0 ||
                            (i == LOG_ERR && strcasecmp(v, "error") == 0) ||
                            (i == LOG_WARNING && strcasecmp(v, "warn") == 0)) {
                                p->cfg->log_level = i;
                                return 0;
                        }
                }
                return fail(
                    p->err, p->errlen, -EINVAL, f,
                    "must be one of emerg alert crit err warning notice info debug (or 0..7), "
                    "got \"%s\"",
                    v);
        }
        uint64_t v;
        if ((rc = get_uint(p, m, f, LOG_EMERG, LOG_DEBUG, &v)))
                return rc;
        p->cfg->log_level = (int)v;
        return 0;
}

static int parse_iscsi(struct parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {
            "max_recv_dsl",   "max_burst",           "first_burst", "initial_r2t",
            "immediate_data", "max_outstanding_r2t", "queue_depth", "nop_interval",
            "nop_timeout",    "login_timeout",       NULL};
        struct tdm_iscsi_cfg *c = &p->cfg->iscsi;
        const struct {
                const char *name;
                uint32_t *dst;
                uint64_t lo, hi;
        } nums[] = {
            {"max_recv_dsl", &c->max_recv_dsl, 512, 16777215},
            {"max_burst", &c->max_burst, 512, 16777215},
            {"first_burst", &c->first_burst, 512, 16777215},
            {"max_outstanding_r2t", &c->max_outstanding_r2t, 1, 16},
            {"queue_depth", &c->queue_depth, 1, 4096},
            {"nop_interval", &c->nop_interval_s, 0, 3600},
            {"nop_timeout", &c->nop_timeout_s, 1, 60},
            {"login_timeout", &c->login_timeout_s, 1, 300},
        };
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, "iscsi", keys)))
                return rc;
        for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
                if ((m = member(s, nums[i].name, "iscsi", f)) &&
                    (rc = get_u32(p, m, f, nums[i].lo, nums[i].hi, nums[i].dst)))
                        return rc;
        if ((m = member(s, "initial_r2t", "iscsi", f)) && (rc = get_bool(p, m, f, &c->initial_r2t)))
                return rc;
        if ((m = member(s, "immediate_data", "iscsi", f)) &&
            (rc = get_bool(p, m, f, &c->immediate_data)))
                return rc;
        return 0;
}

static int parse_repl_node(struct parser *p, const config_setting_t *s, const char *field,
                           struct tdm_repl_node *n)
{
        static const char *const keys[] = {"id", "name", "address", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, field, keys)))
                return rc;
        memset(n, 0, sizeof(*n));
        if (!(m = member(s, "id", field, f)))
                return fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = get_u32(p, m, f, 1, 255, &n->id)))
                return rc;
        if ((m = member(s, "name", field, f))) {
                if ((rc = get_string(p, m, f, n->name, sizeof(n->name))))
                        return rc;
        } else {
                snprintf(n->name, sizeof(n->name), "node%u", n->id);
        }
        if (!(m = member(s, "address", field, f)))
                return fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        return get_string(p, m, f, n->address, sizeof(n->address));
}

static int parse_repl_nodes(struct parser *p, const config_setting_t *s, const char *field,
                            struct tdm_repl_cfg *r)
{
        if (!config_setting_is_list(s))
                return fail(p->err, p->errlen, -EINVAL, field,
                            "must be a list ( { id = N; address = \"HOST[:PORT]\"; }, ... )");
        size_t n = (size_t)config_setting_length(s);
        if (n > TDM_REPL_MAX_NODES)
                return fail(p->err, p->errlen, -EINVAL, field,
                            "only one peer per LUN is supported: list this node and its peer, "
                            "got %zu nodes",
                            n);
        for (size_t i = 0; i < n; i++) {
                char f[FIELD_MAX];
                field_index(f, field, i);
                int rc =
                    parse_repl_node(p, config_setting_get_elem(s, (unsigned)i), f, &r->nodes[i]);
                if (rc)
                        return rc;
                r->n_nodes = i + 1;
        }
        return 0;
}

static int parse_split_brain(struct parser *p, const config_setting_t *s, const char *f,
                             struct tdm_repl_cfg *r)
{
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
                return fail(p->err, p->errlen, -EINVAL, f, "must be a string");
        const char *v = config_setting_get_string(s);
        size_t plen = strlen(SB_DISCARD_NODE_PREFIX);
        if (strncmp(v, SB_DISCARD_NODE_PREFIX, plen) == 0 && v[plen] != '\0' &&
            strlen(v + plen) < sizeof(r->split_brain_node)) {
                r->split_brain = REPL_SB_DISCARD_NODE;
                snprintf(r->split_brain_node, sizeof(r->split_brain_node), "%s", v + plen);
                return 0;
        }
        for (int i = REPL_SB_DISCONNECT; i < REPL_SB_DISCARD_NODE; i++)
                if (strcmp(v, sb_policy_names[i]) == 0) {
                        r->split_brain = i;
                        return 0;
                }
        return fail(p->err, p->errlen, -EINVAL, f,
                    "must be disconnect, discard-zero-changes, discard-younger-primary or "
                    "discard-node-NAME, got \"%s\"",
                    v);
}

static int parse_repl(struct parser *p, const config_setting_t *s, const char *field,
                      struct tdm_repl_cfg *r)
{
        static const char *const keys[] = {"secret",          "port",        "nodes",
                                           "metadata",        "timeout",     "resync_rate",
                                           "resync_min_rate", "split_brain", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, field, keys)))
                return rc;
        memset(r, 0, sizeof(*r));
        r->enabled = true;
        r->port = TDM_DEFAULT_REPL_PORT;
        r->timeout_ms = TDM_DEFAULT_REPL_TIMEOUT_MS;
        r->resync_rate = TDM_DEFAULT_RESYNC_RATE;
        r->resync_min_rate = TDM_DEFAULT_RESYNC_MIN_RATE;
        r->split_brain = REPL_SB_DISCONNECT;
        if ((m = member(s, "secret", field, f)) &&
            (rc = get_string(p, m, f, r->secret, sizeof(r->secret))))
                return rc;
        if ((m = member(s, "port", field, f))) {
                uint64_t v;
                if ((rc = get_uint(p, m, f, 1, 65535, &v)))
                        return rc;
                r->port = (uint16_t)v;
        }
        if (!(m = member(s, "nodes", field, f)))
                return fail(p->err, p->errlen, -EINVAL, f,
                            "missing (required): this node and its peer");
        if ((rc = parse_repl_nodes(p, m, f, r)))
                return rc;
        if ((m = member(s, "metadata", field, f)) &&
            (rc = get_string(p, m, f, r->metadata, sizeof(r->metadata))))
                return rc;
        /* Wide range here: validation explains what is wrong with a timeout. */
        if ((m = member(s, "timeout", field, f)) &&
            (rc = get_u32(p, m, f, 0, UINT32_MAX, &r->timeout_ms)))
                return rc;
        if ((m = member(s, "resync_rate", field, f)) && (rc = get_size(p, m, f, &r->resync_rate)))
                return rc;
        if ((m = member(s, "resync_min_rate", field, f)) &&
            (rc = get_size(p, m, f, &r->resync_min_rate)))
                return rc;
        if ((m = member(s, "split_brain", field, f)) && (rc = parse_split_brain(p, m, f, r)))
                return rc;
        return 0;
}

static int parse_lun(struct parser *p, const config_setting_t *s, const char *field,
                     struct tdm_lun_cfg *l)
{
        static const char *const keys[] = {
            "lun", "path",   "size", "thin",     "direct",      "block_size", "physical_block_size",
            "naa", "serial", "wce",  "readonly", "replication", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, field, keys)))
                return rc;
        tdm_lun_defaults(l);
        if (!(m = member(s, "lun", field, f)))
                return fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = get_uint(p, m, f, 0, TDM_LUN_ID_MAX, &l->lun)))
                return rc;
        if (!(m = member(s, "path", field, f)))
                return fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = get_string(p, m, f, l->path, sizeof(l->path))))
                return rc;
        if ((m = member(s, "block_size", field, f)) &&
            (rc = get_u32(p, m, f, 512, 4096, &l->block_size)))
                return rc;
        if ((m = member(s, "physical_block_size", field, f))) {
                uint64_t v;
                if ((rc = get_size(p, m, f, &v)))
                        return rc;
                /* 0 here is a mistake: leaving the field out means "same as block_size". */
                if (v == 0 || v > TDM_MAX_PHYSICAL_BLOCK_SIZE)
                        return fail(p->err, p->errlen, -EINVAL, f,
                                    "must be block_size (%u) times a power of two, at most %u, "
                                    "got %" PRIu64,
                                    l->block_size, TDM_MAX_PHYSICAL_BLOCK_SIZE, v);
                l->physical_block_size = (uint32_t)v;
        }
        if ((m = member(s, "size", field, f))) {
                if ((rc = get_size(p, m, f, &l->size)))
                        return rc;
                /* Present but 0 is a mistake: leaving the field out means "existing size". */
                if (l->size == 0 || l->size % l->block_size)
                        return fail(p->err, p->errlen, -EINVAL, f,
                                    "must be a positive multiple of %u", l->block_size);
        }
        if ((m = member(s, "thin", field, f)) && (rc = get_bool(p, m, f, &l->thin)))
                return rc;
        if ((m = member(s, "direct", field, f)) && (rc = get_bool(p, m, f, &l->direct)))
                return rc;
        if ((m = member(s, "wce", field, f)) && (rc = get_bool(p, m, f, &l->wce)))
                return rc;
        if ((m = member(s, "readonly", field, f)) && (rc = get_bool(p, m, f, &l->readonly)))
                return rc;
        if ((m = member(s, "naa", field, f)) && (rc = get_string(p, m, f, l->naa, sizeof(l->naa))))
                return rc;
        if ((m = member(s, "serial", field, f)) &&
            (rc = get_string(p, m, f, l->serial, sizeof(l->serial))))
                return rc;
        if ((m = member(s, "replication", field, f)) && (rc = parse_repl(p, m, f, &l->repl)))
                return rc;
        if (l->repl.enabled) {
                /* Never generated: both nodes must show the same one; validation says so. */
        } else if (l->naa[0] == '\0' && l->serial[0] == '\0') {
                tdm_lun_identity_generate(l);
                p->cfg->identities_generated = true;
        } else if (l->naa[0] == '\0' || l->serial[0] == '\0') {
                /* Half an identity is a damaged file, not a new LUN: do not invent the rest. */
                field_join(f, field, l->naa[0] ? "serial" : "naa");
                return fail(p->err, p->errlen, -EINVAL, f,
                            "missing while %s is set (both or neither: neither generates new ones)",
                            l->naa[0] ? "naa" : "serial");
        }
        return 0;
}

static int parse_target(struct parser *p, const config_setting_t *s, const char *field,
                        struct tdm_target_cfg *t)
{
        static const char *const keys[] = {"iqn", "alias", "tpgt", "acl", "chap", "luns", NULL};
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, field, keys)))
                return rc;
        t->tpgt = TDM_DEFAULT_TPGT;
        if (!(m = member(s, "iqn", field, f)))
                return fail(p->err, p->errlen, -EINVAL, f, "missing (required)");
        if ((rc = get_string(p, m, f, t->iqn, sizeof(t->iqn))))
                return rc;
        if ((m = member(s, "alias", field, f)) &&
            (rc = get_string(p, m, f, t->alias, sizeof(t->alias))))
                return rc;
        if ((m = member(s, "tpgt", field, f))) {
                uint64_t v;
                if ((rc = get_uint(p, m, f, 1, 65535, &v)))
                        return rc;
                t->tpgt = (uint16_t)v;
        }
        if ((m = member(s, "acl", field, f))) {
                t->acl = calloc(TDM_MAX_ACL, sizeof(*t->acl));
                if (!t->acl)
                        return -ENOMEM;
                if ((rc = get_string_list(p, m, f, t->acl[0], TDM_IQN_MAX, TDM_MAX_ACL, &t->n_acl)))
                        return rc;
                for (size_t i = 0; i < t->n_acl; i++)
                        if (strcasecmp(t->acl[i], "ALL") == 0)
                                strcpy(t->acl[i], "ALL");
        }
        if ((m = member(s, "chap", field, f)) && (rc = parse_chap(p, m, f, &t->chap)))
                return rc;
        if (!(m = member(s, "luns", field, f)))
                return 0;
        if (!config_setting_is_list(m))
                return fail(p->err, p->errlen, -EINVAL, f, "must be a list ( { ... }, ... )");
        size_t n = (size_t)config_setting_length(m);
        if (n > TDM_LUN_ID_MAX + 1)
                return fail(p->err, p->errlen, -EINVAL, f, "at most %d LUNs", TDM_LUN_ID_MAX + 1);
        if (n) {
                t->luns = calloc(n, sizeof(*t->luns));
                if (!t->luns)
                        return -ENOMEM;
        }
        char lf[FIELD_MAX];
        for (size_t i = 0; i < n; i++) {
                field_index(lf, f, i);
                if ((rc = parse_lun(p, config_setting_get_elem(m, (unsigned)i), lf, &t->luns[i])))
                        return rc;
                t->n_luns = i + 1;
        }
        return 0;
}

static int parse_targets(struct parser *p, const config_setting_t *s)
{
        if (!config_setting_is_list(s))
                return fail(p->err, p->errlen, -EINVAL, "targets",
                            "must be a list ( { ... }, ... )");
        size_t n = (size_t)config_setting_length(s);
        if (n == 0)
                return 0;
        p->cfg->targets = calloc(n, sizeof(*p->cfg->targets));
        if (!p->cfg->targets)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                char f[FIELD_MAX];
                field_index(f, "targets", i);
                p->cfg->n_targets = i + 1;
                int rc = parse_target(p, config_setting_get_elem(s, (unsigned)i), f,
                                      &p->cfg->targets[i]);
                if (rc)
                        return rc;
        }
        return 0;
}

/* ---- cluster (issue 4) ---- */
static int parse_cluster(struct parser *p, const config_setting_t *s)
{
        static const char *const keys[] = {"enabled", "group", "fence_peer", NULL};
        struct tdm_cluster_cfg *c = &p->cfg->cluster;
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, s, "cluster", keys)))
                return rc;
        if ((m = member(s, "enabled", "cluster", f)) && (rc = get_bool(p, m, f, &c->enabled)))
                return rc;
        if ((m = member(s, "group", "cluster", f)) &&
            (rc = get_string(p, m, f, c->group, sizeof(c->group))))
                return rc;
        if ((m = member(s, "fence_peer", "cluster", f)) &&
            (rc = get_string(p, m, f, c->fence_peer, sizeof(c->fence_peer))))
                return rc;
        return 0;
}
/* ---- end cluster ---- */

static int parse_root(struct parser *p, const config_setting_t *root)
{
        static const char *const keys[] = {"instance", "state_dir", "listen",    "threads",
                                           "log",      "iscsi",     "discovery", "targets",
                                           "node_id",  "cluster",   NULL};
        static const char *const discovery_keys[] = {"chap", NULL};
        struct tdm_config *c = p->cfg;
        char f[FIELD_MAX];
        const config_setting_t *m;
        int rc;
        if ((rc = check_members(p, root, "", keys)))
                return rc;
        if ((m = member(root, "instance", "", f)) &&
            (rc = get_string(p, m, f, c->instance, sizeof(c->instance))))
                return rc;
        if ((m = member(root, "state_dir", "", f)) &&
            (rc = get_string(p, m, f, c->state_dir, sizeof(c->state_dir))))
                return rc;
        if ((m = member(root, "listen", "", f)) &&
            (rc = get_string_list(p, m, f, c->listen[0], sizeof(c->listen[0]), TDM_MAX_LISTEN,
                                  &c->n_listen)))
                return rc;
        if ((m = member(root, "threads", "", f))) {
                uint64_t v;
                if ((rc = get_uint(p, m, f, 0, 1024, &v)))
                        return rc;
                c->threads = (unsigned)v;
        }
        if ((m = member(root, "node_id", "", f)) && (rc = get_u32(p, m, f, 1, 255, &c->node_id)))
                return rc;
        if ((m = member(root, "log", "", f)) && (rc = parse_log(p, m)))
                return rc;
        if ((m = member(root, "iscsi", "", f)) && (rc = parse_iscsi(p, m)))
                return rc;
        if ((m = member(root, "discovery", "", f))) {
                if ((rc = check_members(p, m, "discovery", discovery_keys)))
                        return rc;
                const config_setting_t *ch = member(m, "chap", "discovery", f);
                if (ch && (rc = parse_chap(p, ch, f, &c->discovery_chap)))
                        return rc;
        }
        if ((m = member(root, "targets", "", f)) && (rc = parse_targets(p, m)))
                return rc;
        if ((m = member(root, "cluster", "", f)) && (rc = parse_cluster(p, m))) /* issue 4 */
                return rc;
        return 0;
}

/* Parses an already read libconfig tree into cfg (defaults first), then validates. */
static int config_from_tree(config_t *lc, struct tdm_config *cfg, char *err, size_t errlen)
{
        struct parser p = {.err = err, .errlen = errlen, .cfg = cfg};
        tdm_config_defaults(cfg);
        int rc = parse_root(&p, config_root_setting(lc));
        if (rc == -ENOMEM)
                fail(err, errlen, rc, "config", "out of memory");
        if (rc == 0)
                rc = tdm_config_validate(cfg, err, errlen);
        if (rc)
                tdm_config_free(cfg);
        return rc;
}

int tdm_config_parse_string(const char *text, struct tdm_config *cfg, char *err, size_t errlen)
{
        config_t lc;
        config_init(&lc);
        int rc;
        if (config_read_string(&lc, text) != CONFIG_TRUE) {
                tdm_config_defaults(cfg);
                rc = fail(err, errlen, -EINVAL, NULL, "line %d: %s", config_error_line(&lc),
                          config_error_text(&lc));
        } else {
                rc = config_from_tree(&lc, cfg, err, errlen);
        }
        config_destroy(&lc);
        return rc;
}

int tdm_config_load(const char *path, struct tdm_config *cfg, char *err, size_t errlen)
{
        tdm_config_defaults(cfg);
        FILE *f = fopen(path, "r");
        if (!f) {
                int e = errno;
                return fail(err, errlen, -e, path, "cannot open: %s", strerror(e));
        }
        config_t lc;
        config_init(&lc);
        int rc;
        if (config_read(&lc, f) != CONFIG_TRUE)
                rc = fail(err, errlen, -EINVAL, path, "line %d: %s", config_error_line(&lc),
                          config_error_text(&lc));
        else
                rc = config_from_tree(&lc, cfg, err, errlen);
        config_destroy(&lc);
        fclose(f);
        return rc;
}

/* ---------------------------------------------------------------- saving */

static config_setting_t *add_str(config_setting_t *g, const char *name, const char *v)
{
        config_setting_t *s = config_setting_add(g, name, CONFIG_TYPE_STRING);
        if (s)
                config_setting_set_string(s, v);
        return s;
}

static config_setting_t *add_int(config_setting_t *g, const char *name, long long v)
{
        bool big = v > INT32_MAX || v < INT32_MIN;
        config_setting_t *s =
            config_setting_add(g, name, big ? CONFIG_TYPE_INT64 : CONFIG_TYPE_INT);
        if (s && big)
                config_setting_set_int64(s, v);
        else if (s)
                config_setting_set_int(s, (int)v);
        return s;
}

static config_setting_t *add_bool(config_setting_t *g, const char *name, bool v)
{
        config_setting_t *s = config_setting_add(g, name, CONFIG_TYPE_BOOL);
        if (s)
                config_setting_set_bool(s, v);
        return s;
}

static void tree_chap(config_setting_t *g, const char *name, const struct tdm_chap_cfg *chap)
{
        if (!chap->enabled)
                return;
        config_setting_t *c = config_setting_add(g, name, CONFIG_TYPE_GROUP);
        add_str(c, "user", chap->user);
        add_str(c, "secret", chap->secret);
        if (chap->mutual) {
                add_str(c, "mutual_user", chap->mutual_user);
                add_str(c, "mutual_secret", chap->mutual_secret);
        }
}

static void tree_repl(config_setting_t *lun, const struct tdm_repl_cfg *r)
{
        if (!r->enabled)
                return;
        config_setting_t *g = config_setting_add(lun, "replication", CONFIG_TYPE_GROUP);
        add_str(g, "secret", r->secret);
        add_int(g, "port", r->port);
        config_setting_t *nodes = config_setting_add(g, "nodes", CONFIG_TYPE_LIST);
        for (size_t i = 0; i < r->n_nodes && i < TDM_REPL_MAX_NODES; i++) {
                config_setting_t *n = config_setting_add(nodes, NULL, CONFIG_TYPE_GROUP);
                add_int(n, "id", r->nodes[i].id);
                add_str(n, "name", r->nodes[i].name);
                add_str(n, "address", r->nodes[i].address);
        }
        if (r->metadata[0])
                add_str(g, "metadata", r->metadata);
        add_int(g, "timeout", r->timeout_ms);
        add_int(g, "resync_rate", (long long)r->resync_rate);
        add_int(g, "resync_min_rate", (long long)r->resync_min_rate);
        char sb[96];
        tdm_repl_split_brain_name(r, sb, sizeof(sb));
        add_str(g, "split_brain", sb);
}

static void tree_lun(config_setting_t *list, const struct tdm_lun_cfg *l)
{
        config_setting_t *g = config_setting_add(list, NULL, CONFIG_TYPE_GROUP);
        add_int(g, "lun", (long long)l->lun);
        add_str(g, "path", l->path);
        if (l->size)
                config_setting_set_int64(config_setting_add(g, "size", CONFIG_TYPE_INT64),
                                         (long long)l->size);
        add_int(g, "block_size", l->block_size);
        if (l->physical_block_size)
                add_int(g, "physical_block_size", l->physical_block_size);
        add_bool(g, "thin", l->thin);
        add_bool(g, "direct", l->direct);
        add_bool(g, "wce", l->wce);
        if (l->readonly)
                add_bool(g, "readonly", true);
        add_str(g, "naa", l->naa);
        add_str(g, "serial", l->serial);
        tree_repl(g, &l->repl);
}

static void tree_target(config_setting_t *list, const struct tdm_target_cfg *t)
{
        config_setting_t *g = config_setting_add(list, NULL, CONFIG_TYPE_GROUP);
        add_str(g, "iqn", t->iqn);
        if (t->alias[0])
                add_str(g, "alias", t->alias);
        add_int(g, "tpgt", t->tpgt);
        config_setting_t *acl = config_setting_add(g, "acl", CONFIG_TYPE_ARRAY);
        for (size_t i = 0; i < t->n_acl; i++)
                config_setting_set_string_elem(acl, -1, t->acl[i]);
        tree_chap(g, "chap", &t->chap);
        config_setting_t *luns = config_setting_add(g, "luns", CONFIG_TYPE_LIST);
        for (size_t i = 0; i < t->n_luns; i++)
                tree_lun(luns, &t->luns[i]);
}

static void config_to_tree(const struct tdm_config *cfg, config_t *lc)
{
        static const char *const levels[] = {"emerg",   "alert",  "crit", "err",
                                             "warning", "notice", "info", "debug"};
        config_setting_t *root = config_root_setting(lc);
        add_str(root, "instance", cfg->instance);
        add_str(root, "state_dir", cfg->state_dir);
        if (cfg->node_id)
                add_int(root, "node_id", cfg->node_id);
        /* ---- cluster (issue 4): written when it says anything but the defaults ---- */
        if (cfg->cluster.enabled || strcmp(cfg->cluster.group, TDM_DEFAULT_CLUSTER_GROUP) != 0 ||
            cfg->cluster.fence_peer[0]) {
                config_setting_t *cl = config_setting_add(root, "cluster", CONFIG_TYPE_GROUP);
                add_bool(cl, "enabled", cfg->cluster.enabled);
                add_str(cl, "group", cfg->cluster.group);
                if (cfg->cluster.fence_peer[0])
                        add_str(cl, "fence_peer", cfg->cluster.fence_peer);
        }
        /* ---- end cluster ---- */
        config_setting_t *listen = config_setting_add(root, "listen", CONFIG_TYPE_ARRAY);
        for (size_t i = 0; i < cfg->n_listen; i++)
                config_setting_set_string_elem(listen, -1, cfg->listen[i]);
        add_int(root, "threads", cfg->threads);

        config_setting_t *log = config_setting_add(root, "log", CONFIG_TYPE_GROUP);
        if (cfg->log_file[0])
                add_str(log, "file", cfg->log_file);
        add_str(log, "level", levels[cfg->log_level & 7]);
        add_bool(log, "syslog", cfg->log_syslog);

        const struct tdm_iscsi_cfg *c = &cfg->iscsi;
        config_setting_t *is = config_setting_add(root, "iscsi", CONFIG_TYPE_GROUP);
        add_int(is, "max_recv_dsl", c->max_recv_dsl);
        add_int(is, "max_burst", c->max_burst);
        add_int(is, "first_burst", c->first_burst);
        add_bool(is, "initial_r2t", c->initial_r2t);
        add_bool(is, "immediate_data", c->immediate_data);
        add_int(is, "max_outstanding_r2t", c->max_outstanding_r2t);
        add_int(is, "queue_depth", c->queue_depth);
        add_int(is, "nop_interval", c->nop_interval_s);
        add_int(is, "nop_timeout", c->nop_timeout_s);
        add_int(is, "login_timeout", c->login_timeout_s);

        if (cfg->discovery_chap.enabled) {
                config_setting_t *d = config_setting_add(root, "discovery", CONFIG_TYPE_GROUP);
                tree_chap(d, "chap", &cfg->discovery_chap);
        }
        config_setting_t *targets = config_setting_add(root, "targets", CONFIG_TYPE_LIST);
        for (size_t i = 0; i < cfg->n_targets; i++)
                tree_target(targets, &cfg->targets[i]);
}

static const char save_header[] =
    "# tandem configuration (libconfig syntax). Rewritten by tandemd when the admin\n"
    "# changes targets, LUNs, ACLs or CHAP: comments are not kept. See\n"
    "# deploy/examples/tandem.conf for what every field means.\n\n";

int tdm_config_save(const char *path, const struct tdm_config *cfg, char *err, size_t errlen)
{
        int rc = tdm_config_validate(cfg, err, errlen);
        if (rc)
                return rc;
        char tmp[4096 + 16];
        if (snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= (int)sizeof(tmp))
                return fail(err, errlen, -ENAMETOOLONG, path, "path too long");
        /* Same directory as the target so rename() is atomic; 0600: it holds CHAP secrets. */
        int fd = mkstemp(tmp);
        if (fd < 0) {
                int e = errno;
                return fail(err, errlen, -e, path, "cannot create temporary file: %s", strerror(e));
        }
        FILE *f = fdopen(fd, "w");
        if (!f) {
                rc = -errno;
                close(fd);
                goto out_unlink;
        }
        config_t lc;
        config_init(&lc);
        config_set_options(&lc, CONFIG_OPTION_SEMICOLON_SEPARATORS);
        config_set_tab_width(&lc, 2);
        config_to_tree(cfg, &lc);
        fputs(save_header, f);
        config_write(&lc, f);
        config_destroy(&lc);
        if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) < 0) {
                rc = errno ? -errno : -EIO;
                fclose(f);
                goto out_unlink;
        }
        if (fclose(f) != 0) {
                rc = -errno;
                goto out_unlink;
        }
        if (rename(tmp, path) < 0) {
                rc = -errno;
                goto out_unlink;
        }
        rc = tdm_fsync_parent_dir(path);
        if (rc < 0)
                return fail(err, errlen, rc, path, "saved, but syncing its directory failed: %s",
                            strerror(-rc));
        return 0;
out_unlink:
        unlink(tmp);
        return fail(err, errlen, rc, path, "cannot save: %s", strerror(-rc));
}

/* ---------------------------------------------------------------- edits */

struct tdm_target_cfg *tdm_config_find_target(struct tdm_config *cfg, const char *iqn)
{
        for (size_t i = 0; i < cfg->n_targets; i++)
                if (tdm_iscsi_name_equal(cfg->targets[i].iqn, iqn))
                        return &cfg->targets[i];
        return NULL;
}

struct tdm_lun_cfg *tdm_config_find_lun(struct tdm_target_cfg *t, uint64_t lun)
{
        for (size_t i = 0; i < t->n_luns; i++)
                if (t->luns[i].lun == lun)
                        return &t->luns[i];
        return NULL;
}

static int find_target_or_fail(struct tdm_config *cfg, const char *iqn, struct tdm_target_cfg **out,
                               char *err, size_t errlen)
{
        *out = iqn ? tdm_config_find_target(cfg, iqn) : NULL;
        if (!*out)
                return fail(err, errlen, -ENOENT, "iqn", "no target \"%s\"", iqn ? iqn : "(null)");
        return 0;
}

int tdm_config_add_target(struct tdm_config *cfg, const char *iqn, char *err, size_t errlen)
{
        if (!iqn || !tdm_iscsi_name_valid(iqn))
                return fail(err, errlen, -EINVAL, "iqn",
                            "\"%s\" is not an iSCSI name (iqn.YYYY-MM.domain[:id], eui.<16 hex>, "
                            "naa.<16|32 hex>)",
                            iqn ? iqn : "");
        if (tdm_config_find_target(cfg, iqn))
                return fail(err, errlen, -EEXIST, "iqn", "target \"%s\" already exists", iqn);
        struct tdm_target_cfg *t = realloc(cfg->targets, (cfg->n_targets + 1) * sizeof(*t));
        if (!t)
                return fail(err, errlen, -ENOMEM, NULL, "out of memory");
        cfg->targets = t;
        t = &cfg->targets[cfg->n_targets++];
        memset(t, 0, sizeof(*t));
        snprintf(t->iqn, sizeof(t->iqn), "%s", iqn);
        t->tpgt = TDM_DEFAULT_TPGT;
        return 0;
}

int tdm_config_del_target(struct tdm_config *cfg, const char *iqn, char *err, size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        size_t i = (size_t)(t - cfg->targets);
        target_free(t);
        memmove(t, t + 1, (cfg->n_targets - i - 1) * sizeof(*t));
        cfg->n_targets--;
        return 0;
}

/* Where a LUN's storage is already used, or NULL. */
static const struct tdm_lun_cfg *lun_with_path(const struct tdm_config *cfg, const char *path,
                                               const char **iqn)
{
        for (size_t i = 0; i < cfg->n_targets; i++)
                for (size_t j = 0; j < cfg->targets[i].n_luns; j++)
                        if (strcmp(cfg->targets[i].luns[j].path, path) == 0) {
                                *iqn = cfg->targets[i].iqn;
                                return &cfg->targets[i].luns[j];
                        }
        return NULL;
}

int tdm_config_add_lun(struct tdm_config *cfg, const char *iqn, const struct tdm_lun_cfg *lun,
                       char *err, size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        struct tdm_lun_cfg l = *lun;
        if (l.block_size == 0)
                l.block_size = TDM_DEFAULT_BLOCK_SIZE;
        if (l.lun > TDM_LUN_ID_MAX)
                return fail(err, errlen, -EINVAL, "lun", "must be 0..%d, got %" PRIu64,
                            TDM_LUN_ID_MAX, l.lun);
        if (tdm_config_find_lun(t, l.lun))
                return fail(err, errlen, -EEXIST, "lun", "%" PRIu64 " already exists in %s", l.lun,
                            t->iqn);
        if (l.path[0] == '\0' || !path_absolute(l.path))
                return fail(err, errlen, -EINVAL, "path", "must be an absolute path, got \"%s\"",
                            l.path);
        const char *other_iqn;
        const struct tdm_lun_cfg *other = lun_with_path(cfg, l.path, &other_iqn);
        if (other)
                return fail(err, errlen, -EEXIST, "path", "%s is already LUN %" PRIu64 " of %s",
                            l.path, other->lun, other_iqn);
        if (l.block_size != 512 && l.block_size != 1024 && l.block_size != 2048 &&
            l.block_size != 4096)
                return fail(err, errlen, -EINVAL, "block_size",
                            "must be 512, 1024, 2048 or 4096, got %u", l.block_size);
        if ((rc = tdm_physical_block_size_check(l.physical_block_size, l.block_size,
                                                "physical_block_size", err, errlen)))
                return rc;
        if (l.size % l.block_size)
                return fail(err, errlen, -EINVAL, "size", "must be a positive multiple of %u",
                            l.block_size);
        if (l.readonly && l.size)
                return fail(err, errlen, -EINVAL, "size", READONLY_SIZE_MSG);
        if (l.repl.enabled && (l.naa[0] == '\0' || l.serial[0] == '\0'))
                return fail(err, errlen, -EINVAL, l.naa[0] == '\0' ? "naa" : "serial",
                            REPL_IDENTITY_MSG);
        if (l.naa[0] == '\0' && l.serial[0] == '\0')
                tdm_lun_identity_generate(&l);
        if (!tdm_naa_valid(l.naa))
                return fail(err, errlen, -EINVAL, "naa",
                            "must be 32 hex digits starting with 6 (NAA type 6), got \"%s\"",
                            l.naa);
        if (!serial_ok(l.serial))
                return fail(err, errlen, -EINVAL, "serial",
                            "must be 1..32 characters of A-Z a-z 0-9 - _ ., got \"%s\"", l.serial);
        struct tdm_lun_cfg *luns = realloc(t->luns, (t->n_luns + 1) * sizeof(*luns));
        if (!luns)
                return fail(err, errlen, -ENOMEM, NULL, "out of memory");
        t->luns = luns;
        t->luns[t->n_luns++] = l;
        return 0;
}

int tdm_config_del_lun(struct tdm_config *cfg, const char *iqn, uint64_t lun, char *err,
                       size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        struct tdm_lun_cfg *l = tdm_config_find_lun(t, lun);
        if (!l)
                return fail(err, errlen, -ENOENT, "lun", "no LUN %" PRIu64 " in %s", lun, t->iqn);
        size_t i = (size_t)(l - t->luns);
        memmove(l, l + 1, (t->n_luns - i - 1) * sizeof(*l));
        t->n_luns--;
        return 0;
}

int tdm_config_set_lun_size(struct tdm_config *cfg, const char *iqn, uint64_t lun, uint64_t size,
                            char *err, size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        struct tdm_lun_cfg *l = tdm_config_find_lun(t, lun);
        if (!l)
                return fail(err, errlen, -ENOENT, "lun", "no LUN %" PRIu64 " in %s", lun, t->iqn);
        if (size % l->block_size)
                return fail(err, errlen, -EINVAL, "size",
                            "must be a multiple of the block size (%u), got %" PRIu64,
                            l->block_size, size);
        if (l->readonly && size)
                return fail(err, errlen, -EINVAL, "size", READONLY_SIZE_MSG);
        l->size = size;
        return 0;
}

int tdm_config_add_acl(struct tdm_config *cfg, const char *iqn, const char *initiator, char *err,
                       size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        bool all = initiator && strcasecmp(initiator, "ALL") == 0;
        if (!initiator || (!all && !tdm_iscsi_name_valid(initiator)))
                return fail(err, errlen, -EINVAL, "initiator",
                            "\"%s\" is neither ALL nor an iSCSI name (iqn.YYYY-MM.domain[:id], "
                            "eui.<16 hex>, naa.<16|32 hex>)",
                            initiator ? initiator : "");
        for (size_t i = 0; i < t->n_acl; i++)
                if (tdm_iscsi_name_equal(t->acl[i], initiator))
                        return fail(err, errlen, -EEXIST, "initiator",
                                    "%s is already in the ACL of %s", initiator, t->iqn);
        if (t->n_acl >= TDM_MAX_ACL)
                return fail(err, errlen, -ENOSPC, "initiator", "the ACL of %s is full (%d entries)",
                            t->iqn, TDM_MAX_ACL);
        char(*acl)[TDM_IQN_MAX] = realloc(t->acl, (t->n_acl + 1) * sizeof(*acl));
        if (!acl)
                return fail(err, errlen, -ENOMEM, NULL, "out of memory");
        t->acl = acl;
        snprintf(t->acl[t->n_acl++], TDM_IQN_MAX, "%s", all ? "ALL" : initiator);
        return 0;
}

int tdm_config_del_acl(struct tdm_config *cfg, const char *iqn, const char *initiator, char *err,
                       size_t errlen)
{
        struct tdm_target_cfg *t;
        int rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        for (size_t i = 0; initiator && i < t->n_acl; i++) {
                if (!tdm_iscsi_name_equal(t->acl[i], initiator))
                        continue;
                memmove(t->acl[i], t->acl[i + 1], (t->n_acl - i - 1) * sizeof(*t->acl));
                t->n_acl--;
                return 0;
        }
        return fail(err, errlen, -ENOENT, "initiator", "%s is not in the ACL of %s",
                    initiator ? initiator : "", t->iqn);
}

int tdm_config_set_chap(struct tdm_config *cfg, const char *iqn, const struct tdm_chap_cfg *chap,
                        char *err, size_t errlen)
{
        struct tdm_chap_cfg c = *chap;
        if (!c.enabled)
                memset(&c, 0, sizeof(c));
        else if (!c.mutual)
                c.mutual_user[0] = c.mutual_secret[0] = '\0';
        int rc = tdm_chap_check(&c, "chap", err, errlen);
        if (rc)
                return rc;
        if (!iqn) {
                cfg->discovery_chap = c;
                return 0;
        }
        struct tdm_target_cfg *t;
        rc = find_target_or_fail(cfg, iqn, &t, err, errlen);
        if (rc)
                return rc;
        t->chap = c;
        return 0;
}
