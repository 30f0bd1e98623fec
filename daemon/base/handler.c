/* Running an admin's handler program and waiting for it (include/tandem/handler.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "tandem/handler.h"

#define HANDLER_POLL_MS 50

extern char **environ;

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

static int reap(pid_t pid)
{
        int status = 0;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return status;
}

/* Reaps pid within the call's time (killing it after that or once cancelled). */
static int wait_child(pid_t pid, const struct tdm_handler_call *call)
{
        for (unsigned waited = 0;; waited += HANDLER_POLL_MS) {
                int status = 0;
                pid_t w = waitpid(pid, &status, WNOHANG);
                if (w == pid)
                        return status;
                if (w < 0 && errno != EINTR)
                        return -errno;
                if (waited >= call->timeout_ms || (call->cancelled && call->cancelled(call->arg)))
                        break;
                sleep_ms(HANDLER_POLL_MS);
        }
        kill(pid, SIGKILL);
        reap(pid);
        return -ETIMEDOUT;
}

int tdm_handler_run(const struct tdm_handler_call *call)
{
        size_t n = 0, extra = 0;
        while (environ && environ[n])
                n++;
        while (call->extra_env && call->extra_env[extra])
                extra++;
        char *env[n + extra + 1];
        for (size_t i = 0; i < n; i++)
                env[i] = environ[i];
        for (size_t i = 0; i < extra; i++)
                env[n + i] = call->extra_env[i];
        env[n + extra] = NULL;
        posix_spawn_file_actions_t fa;
        if (posix_spawn_file_actions_init(&fa) != 0)
                return -ENOMEM;
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        pid_t pid;
        int rc = posix_spawn(&pid, call->argv[0], &fa, NULL, call->argv, env);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0)
                return -rc;
        return wait_child(pid, call);
}

bool tdm_handler_ok(int status)
{
        return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void tdm_handler_describe(int status, char *buf, unsigned cap)
{
        if (status >= 0 && WIFEXITED(status))
                snprintf(buf, cap, "exited with %d", WEXITSTATUS(status));
        else if (status >= 0 && WIFSIGNALED(status))
                snprintf(buf, cap, "killed by signal %d", WTERMSIG(status));
        else if (status == -ETIMEDOUT)
                snprintf(buf, cap, "did not finish in time (killed)");
        else
                snprintf(buf, cap, "%s", strerror(-status));
}
