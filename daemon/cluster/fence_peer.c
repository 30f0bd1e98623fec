/*
 * The fence-peer handler: in a two_node cluster a Primary whose peer dropped out of the
 * membership may go on only once that peer is powered off, because the peer's side of a
 * partition is quorate too. The handler (shipped: deploy/pacemaker/tandem-fence-peer) asks
 * Pacemaker's fencer and exits 0 once the node is off.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "cluster_internal.h"
#include "tandem/cluster.h"
#include "tandem/log.h"

#define FENCE_POLL_MS 50

extern char **environ;

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

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

/* Reaps pid within timeout_ms (killing it after that); its wait status, or -ETIMEDOUT. */
static int wait_child(pid_t pid, unsigned timeout_ms)
{
        int status = 0;
        for (unsigned waited = 0;; waited += FENCE_POLL_MS) {
                pid_t w = waitpid(pid, &status, WNOHANG);
                if (w == pid)
                        return status;
                if (w < 0 && errno != EINTR)
                        return -errno;
                if (waited >= timeout_ms)
                        break;
                sleep_ms(FENCE_POLL_MS);
        }
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return -ETIMEDOUT;
}

static int spawn_handler(const char *path, const char *name, uint32_t peer, unsigned timeout_ms,
                         const char *action, pid_t *pid)
{
        char id[16], timeout_env[64];
        snprintf(id, sizeof(id), "%" PRIu32, peer);
        snprintf(timeout_env, sizeof(timeout_env), "TANDEM_FENCE_TIMEOUT_MS=%u", timeout_ms);
        /* Our environment plus the timeout; the handler needs PATH for stonith_admin. */
        size_t n = 0;
        while (environ && environ[n])
                n++;
        char *env[n + 2];
        for (size_t i = 0; i < n; i++)
                env[i] = environ[i];
        env[n] = timeout_env;
        env[n + 1] = NULL;
        char *argv[] = {(char *)path, (char *)name, id, (char *)action, NULL};
        posix_spawn_file_actions_t fa;
        if (posix_spawn_file_actions_init(&fa) != 0)
                return -ENOMEM;
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        int rc = posix_spawn(pid, path, &fa, NULL, argv, env);
        posix_spawn_file_actions_destroy(&fa);
        return -rc;
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
        pid_t pid;
        int rc = spawn_handler(path, peer_name, peer, timeout_ms, action, &pid);
        if (rc < 0) {
                log_err("cluster: cannot run the fence-peer handler %s: %s", path, strerror(-rc));
                return -EIO;
        }
        log_notice("cluster: %s node %" PRIu32 " (%s) through %s",
                   fence ? "fencing" : "marking outdated", peer, peer_name, path);
        int status = wait_child(pid, timeout_ms);
        if (status == -ETIMEDOUT) {
                log_warn("cluster: fence-peer handler for node %" PRIu32 " did not finish within "
                         "%u ms",
                         peer, timeout_ms);
                return -ETIMEDOUT;
        }
        if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                log_notice("cluster: node %" PRIu32 " (%s) is %s", peer, peer_name,
                           fence ? "fenced" : "marked outdated");
                return 0;
        }
        if (status >= 0 && WIFEXITED(status))
                log_warn("cluster: fence-peer handler for node %" PRIu32 " exited with %d", peer,
                         WEXITSTATUS(status));
        else if (status >= 0 && WIFSIGNALED(status))
                log_warn("cluster: fence-peer handler for node %" PRIu32 " killed by signal %d",
                         peer, WTERMSIG(status));
        else
                log_warn("cluster: fence-peer handler for node %" PRIu32 ": %s", peer,
                         strerror(-status));
        return -EIO;
}
