/*
 * How tandemctl and tandemd talk (daemon/ctl/client.c, daemon/admin/ipc.c): libqb IPC on
 * the service "tandem-<instance>". Each request is a qb_ipc_request_header (id
 * ADMIN_MSG_REQUEST, size = header + payload) followed by a packed tandem.admin.AdminRequest
 * (proto/admin.proto); each response a qb_ipc_response_header followed by a packed
 * AdminResponse.
 */
#ifndef TANDEM_ADMIN_WIRE_H
#define TANDEM_ADMIN_WIRE_H

#include <stddef.h>

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
 * Client: sends req to tandemd instance and returns its unpacked response (free with
 * tandem__admin__admin_response__free_unpacked(*resp, NULL)). Errors, with err set:
 * -ECONNREFUSED "tandemd (instance X) is not running", -EACCES (not root), -ETIMEDOUT,
 * -EPROTO (an answer that does not decode).
 */
int admin_client_call(const char *instance, const Tandem__Admin__AdminRequest *req,
                      Tandem__Admin__AdminResponse **resp, char *err, size_t errlen);

#endif
