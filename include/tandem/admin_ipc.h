/*
 * tandemd's admin plane (daemon/admin/): the libqb IPC service tandemctl talks to
 * (tandem/admin_wire.h) and the dispatcher that runs each request through the table of
 * operations (tandem/admin_ops_table.h).
 */
#ifndef TANDEM_ADMIN_IPC_H
#define TANDEM_ADMIN_IPC_H

#include <qb/qbloop.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/admin_wire.h"

/*
 * Serves "tandem-<instance>" (instance NULL or "": "default") on the libqb main loop.
 * Only root may connect. Returns 0, -EADDRINUSE when another tandemd serves that
 * instance, or another negative errno.
 */
int admin_ipc_start(qb_loop_t *loop, const char *instance);
void admin_ipc_stop(void);
/* The loop the iSCSI portals run on, for a reload that adds one (admin_ipc_start sets it). */
void admin_reload_set_loop(qb_loop_t *loop);

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

#endif
