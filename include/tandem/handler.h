/*
 * Running an admin's handler program (daemon/base/handler.c): the fence-peer handler and
 * the SET TARGET PORT GROUPS handler. The caller's thread waits for it; only threads that
 * may block (never a net loop) run one.
 */
#ifndef TANDEM_HANDLER_H
#define TANDEM_HANDLER_H

#include <stdbool.h>

struct tdm_handler_call {
        char *const *argv;      /* argv[0]: the program's absolute path */
        char *const *extra_env; /* added to our environment (NULL-terminated; may be NULL) */
        unsigned timeout_ms;    /* killed (SIGKILL) once it runs longer */
        /* Asked while waiting (may be NULL): true kills the handler at once. */
        bool (*cancelled)(void *arg);
        void *arg;
};

/*
 * Runs the handler with stdin from /dev/null and waits for it. Its wait status (>= 0,
 * see waitpid), -ETIMEDOUT when it was killed for running too long or cancelled, or
 * -errno when it could not be started.
 */
int tdm_handler_run(const struct tdm_handler_call *call);
/* One line for the log: "exited with N", "killed by signal N", the error's text. */
void tdm_handler_describe(int status, char *buf, unsigned cap);
/* The handler exited with status 0. */
bool tdm_handler_ok(int status);

#endif
