/*
 * Admission of new TCP connections, on the control loop as they are accepted: a token bucket
 * per source address (iscsi.login_rate, iscsi.login_burst) and a cap on connections that have
 * not finished login (iscsi.max_pending_logins). Every connection takes a token; a login that
 * succeeds gives it back, so what the rate bounds is connections that do not log in (idle,
 * refused, failed authentication, garbage), while an initiator that logs in and out at any
 * pace is bounded by the session limits alone. A refused connection is closed before a PDU
 * is read: there is no Login Request to answer yet, and a flood then costs neither a worker's
 * connection state nor its receive buffer. The buckets are under one lock (taken once per
 * accept and per successful login); the pending count is atomic.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "limits.h"
#include "tandem/clock.h"

#define BUCKETS 1024 /* addresses remembered; a forgotten one starts with a full bucket */
#define PROBE   8
#define MILLI   1000ull

struct bucket {
        uint8_t addr[16]; /* IPv4 as ::ffff:a.b.c.d */
        bool used;
        uint64_t tokens_milli; /* tokens times 1000 */
        uint64_t last_ns;
};

static pthread_mutex_t buckets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bucket buckets[BUCKETS];
static struct tdm_iscsi_cfg limits;
static atomic_uint pending;

void iscsi_admission_configure(const struct tdm_iscsi_cfg *cfg)
{
        pthread_mutex_lock(&buckets_lock);
        limits = *cfg;
        if (!limits.login_rate)
                limits.login_rate = TDM_DEFAULT_LOGIN_RATE;
        if (!limits.login_burst)
                limits.login_burst = TDM_DEFAULT_LOGIN_BURST;
        if (!limits.max_pending_logins)
                limits.max_pending_logins = TDM_DEFAULT_MAX_PENDING_LOGINS;
        memset(buckets, 0, sizeof(buckets));
        pthread_mutex_unlock(&buckets_lock);
}

static bool peer_of(int fd, uint8_t addr[16], char *text, size_t len)
{
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        memset(addr, 0, 16);
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
                return false;
        if (ss.ss_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
                const uint8_t *b = (const uint8_t *)&a->sin_addr;
                addr[10] = addr[11] = 0xff;
                memcpy(addr + 12, b, 4);
                snprintf(text, len, "%u.%u.%u.%u:%u", b[0], b[1], b[2], b[3], ntohs(a->sin_port));
                return true;
        }
        if (ss.ss_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
                memcpy(addr, &a->sin6_addr, 16);
                char host[64] = "?";
                inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
                snprintf(text, len, "[%s]:%u", host, ntohs(a->sin6_port));
                return true;
        }
        return false;
}

static uint32_t addr_hash(const uint8_t addr[16])
{
        uint32_t h = 2166136261u; /* FNV-1a */
        for (int i = 0; i < 16; i++)
                h = (h ^ addr[i]) * 16777619u;
        return h;
}

static void bucket_add(struct bucket *b, uint64_t milli)
{
        uint64_t cap = (uint64_t)limits.login_burst * MILLI;
        b->tokens_milli = b->tokens_milli + milli > cap ? cap : b->tokens_milli + milli;
}

/* The address's bucket, refilled to now; NULL when it is not in the table. Under the lock. */
static struct bucket *bucket_find(const uint8_t addr[16], uint64_t now, struct bucket **victim)
{
        uint32_t h = addr_hash(addr);
        for (uint32_t i = 0; i < PROBE; i++) {
                struct bucket *b = &buckets[(h + i) % BUCKETS];
                if (b->used && memcmp(b->addr, addr, 16) == 0) {
                        uint64_t ms = now > b->last_ns ? (now - b->last_ns) / 1000000ull : 0;
                        bucket_add(b, ms * limits.login_rate); /* milli-tokens */
                        b->last_ns += ms * 1000000ull;
                        return b;
                }
                if (victim &&
                    (!*victim || !b->used || ((*victim)->used && b->last_ns < (*victim)->last_ns)))
                        *victim = b;
        }
        return NULL;
}

/* The address's bucket, refilled to now; an evicted or new one starts full. Under the lock. */
static struct bucket *bucket_of(const uint8_t addr[16], uint64_t now)
{
        struct bucket *victim = NULL;
        struct bucket *b = bucket_find(addr, now, &victim);
        if (b)
                return b;
        memcpy(victim->addr, addr, 16);
        victim->used = true;
        victim->tokens_milli = (uint64_t)limits.login_burst * MILLI;
        victim->last_ns = now;
        return victim;
}

bool iscsi_admit_connection(int fd)
{
        uint8_t addr[16];
        char peer[80] = "?";
        if (!peer_of(fd, addr, peer, sizeof(peer)))
                return false;
        pthread_mutex_lock(&buckets_lock);
        struct bucket *b = bucket_of(addr, tdm_now_ns());
        bool over = b->tokens_milli < MILLI;
        if (!over)
                b->tokens_milli -= MILLI;
        pthread_mutex_unlock(&buckets_lock);
        if (over) {
                char what[160];
                snprintf(what, sizeof(what),
                         "connection refused before login: more than %u connections a second "
                         "(burst %u) from this address that did not log in (iscsi.login_rate)",
                         limits.login_rate, limits.login_burst);
                iscsi_refusal_log(ISCSI_REFUSE_RATE, peer, what);
                return false;
        }
        unsigned now_pending = atomic_fetch_add(&pending, 1);
        if (now_pending >= limits.max_pending_logins) {
                atomic_fetch_sub(&pending, 1);
                char what[160];
                snprintf(what, sizeof(what),
                         "connection refused before login: %u connections already logging in "
                         "(iscsi.max_pending_logins)",
                         limits.max_pending_logins);
                iscsi_refusal_log(ISCSI_REFUSE_PENDING, peer, what);
                return false;
        }
        return true;
}

void iscsi_admission_logged_in(int fd)
{
        uint8_t addr[16];
        char peer[80];
        if (!peer_of(fd, addr, peer, sizeof(peer)))
                return;
        pthread_mutex_lock(&buckets_lock);
        struct bucket *b = bucket_find(addr, tdm_now_ns(), NULL);
        if (b)
                bucket_add(b, MILLI);
        pthread_mutex_unlock(&buckets_lock);
}

void iscsi_pending_login_done(void)
{
        atomic_fetch_sub(&pending, 1);
}

unsigned iscsi_pending_logins(void)
{
        return atomic_load(&pending);
}
