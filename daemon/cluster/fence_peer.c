/*
 * The fence-peer handler: in a two_node cluster a Primary whose peer dropped out of the
 * membership may go on only once that peer is powered off, because the peer's side of a
 * partition is quorate too. The handler (shipped: deploy/pacemaker/tandem-fence-peer) asks
 * Pacemaker's fencer and exits 0 once the node is off.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cluster_internal.h"
#include "tandem/cluster.h"
#include "tandem/handler.h"
#include "tandem/log.h"

static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static char handler[4096];

void cluster_set_fence_peer(const char *path)
{
        pthread_mutex_lock(&handler_lock);
        snprintf(handler, sizeof(handler), "%s", path ? path : "");
        pthread_mutex_unlock(&handler_lock);
}

bool cluster_fence_peer_configured(void)
{
        pthread_mutex_lock(&handler_lock);
        bool set = handler[0] != 0;
        pthread_mutex_unlock(&handler_lock);
        return set;
}

int cluster_fence_peer(uint32_t peer, const char *peer_name, unsigned timeout_ms, bool fence)
{
        const char *action = fence ? "fence" : "outdate";
        char path[sizeof(handler)];
        pthread_mutex_lock(&handler_lock);
        memcpy(path, handler, sizeof(path));
        pthread_mutex_unlock(&handler_lock);
        if (!path[0])
                return -ENOENT;
        char id[16], timeout_env[64];
        snprintf(id, sizeof(id), "%" PRIu32, peer);
        /* The handler needs our PATH for stonith_admin: the environment is passed on. */
        snprintf(timeout_env, sizeof(timeout_env), "TANDEM_FENCE_TIMEOUT_MS=%u", timeout_ms);
        char *argv[] = {path, (char *)peer_name, id, (char *)action, NULL};
        char *env[] = {timeout_env, NULL};
        log_notice("cluster: %s node %" PRIu32 " (%s) through %s",
                   fence ? "fencing" : "marking outdated", peer, peer_name, path);
        int status = tdm_handler_run(
            &(struct tdm_handler_call){.argv = argv, .extra_env = env, .timeout_ms = timeout_ms});
        if (tdm_handler_ok(status)) {
                log_notice("cluster: node %" PRIu32 " (%s) is %s", peer, peer_name,
                           fence ? "fenced" : "marked outdated");
                return 0;
        }
        char why[96];
        tdm_handler_describe(status, why, sizeof(why));
        log_warn("cluster: fence-peer handler %s for node %" PRIu32 ": %s", path, peer, why);
        return status == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
}
