/*
 * One log line per refusal kind and peer address per interval: a flood of refused logins or
 * connections must not flood the log too. A small table of recent (kind, address) pairs; a
 * pair that falls out of it is simply logged again.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "limits.h"
#include "tandem/clock.h"
#include "tandem/log.h"

#define SLOTS 64

struct refusal_slot {
        int kind; /* -1: free */
        char addr[64];
        uint64_t last_ns;
        uint64_t suppressed;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct refusal_slot slots[SLOTS];
static bool slots_ready;

/* "1.2.3.4:5678" -> "1.2.3.4", "[::1]:3260" -> "[::1]". */
static void peer_address(const char *peer, char *out, size_t len)
{
        snprintf(out, len, "%s", peer ? peer : "?");
        char *cut = out[0] == '[' ? strchr(out, ']') : strrchr(out, ':');
        if (cut)
                cut[out[0] == '[' ? 1 : 0] = 0;
}

void iscsi_refusal_log(enum iscsi_refusal kind, const char *peer, const char *what)
{
        char addr[64];
        peer_address(peer, addr, sizeof(addr));
        uint64_t now = tdm_now_ns();
        const uint64_t interval = (uint64_t)ISCSI_REFUSAL_LOG_INTERVAL_S * 1000000000ull;
        uint64_t suppressed = 0;
        pthread_mutex_lock(&lock);
        if (!slots_ready) {
                for (size_t i = 0; i < SLOTS; i++)
                        slots[i].kind = -1;
                slots_ready = true;
        }
        struct refusal_slot *hit = NULL, *oldest = &slots[0];
        for (size_t i = 0; i < SLOTS && !hit; i++) {
                struct refusal_slot *s = &slots[i];
                if (s->kind == (int)kind && strcmp(s->addr, addr) == 0)
                        hit = s;
                else if (s->kind == -1 || (oldest->kind != -1 && s->last_ns < oldest->last_ns))
                        oldest = s;
        }
        bool quiet = hit && now - hit->last_ns < interval;
        if (quiet) {
                hit->suppressed++;
        } else {
                if (!hit) {
                        hit = oldest;
                        hit->kind = (int)kind;
                        snprintf(hit->addr, sizeof(hit->addr), "%s", addr);
                        hit->suppressed = 0;
                }
                suppressed = hit->suppressed;
                hit->suppressed = 0;
                hit->last_ns = now;
        }
        pthread_mutex_unlock(&lock);
        if (quiet)
                return;
        if (suppressed)
                log_warn("%s: %s (and %llu more like it from %s since the last report)", peer, what,
                         (unsigned long long)suppressed, addr);
        else
                log_warn("%s: %s", peer, what);
}
