/*
 * Admin plane: the libqb IPC service tandemctl talks to, the request dispatcher behind
 * it, and the client side used by tandemctl.
 *
 * Wire format: each request is a qb_ipc_request_header (id ADMIN_MSG_REQUEST, size =
 * header + payload) followed by a packed tandem.admin.AdminRequest (proto/admin.proto);
 * each response a qb_ipc_response_header followed by a packed AdminResponse.
 */
#ifndef TANDEM_ADMIN_IPC_H
#define TANDEM_ADMIN_IPC_H

#include <qb/qbloop.h>
#include <stddef.h>
#include <stdint.h>

#include "admin.pb-c.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "0.1.0"
#endif

#define ADMIN_MSG_REQUEST 1
/* Largest request or response (a status with thousands of sessions fits). */
#define ADMIN_IPC_MAX_MSG    (2u * 1024 * 1024)
#define ADMIN_IPC_TIMEOUT_MS 30000
#define ADMIN_SERVICE_PREFIX "tandem-"

/*
 * Serves "tandem-<instance>" (instance NULL or "": "default") on the libqb main loop.
 * Only root may connect. Returns 0, -EADDRINUSE when another tandemd serves that
 * instance, or another negative errno.
 */
int admin_ipc_start(qb_loop_t *loop, const char *instance);
void admin_ipc_stop(void);

/*
 * One request in, one response out (both packed protobuf, without the libqb headers).
 * *out is malloc'd; the function always produces a response (errors included) unless it
 * runs out of memory (-ENOMEM). Runs on the control thread. Exposed for tests.
 */
int admin_dispatch(const uint8_t *req, size_t len, uint8_t **out, size_t *out_len);
/* What status reports about the daemon (set by admin_ipc_start; tests may set it). */
void admin_dispatch_set_identity(const char *instance);

/*
 * A replicated LUN's status as the admin message carries it; strings and gen_history point
 * into st (and to static state names), so st must outlive m. Exposed for tests.
 */
struct repl_status;
void admin_repl_status_to_pb(const struct repl_status *st, Tandem__Admin__ReplLunStatus *m);

/*
 * Client: sends req to tandemd instance and returns its unpacked response (free with
 * tandem__admin__admin_response__free_unpacked(*resp, NULL)). Errors, with err set:
 * -ECONNREFUSED "tandemd (instance X) is not running", -EACCES (not root), -ETIMEDOUT,
 * -EPROTO (an answer that does not decode).
 */
int admin_client_call(const char *instance, const Tandem__Admin__AdminRequest *req,
                      Tandem__Admin__AdminResponse **resp, char *err, size_t errlen);

#endif
