/*
 * The admin IPC service: libqb IPC ("tandem-<instance>") on the daemon's qb main loop.
 * Root only. Each request is handed to admin_dispatch() and answered synchronously.
 */
#include <errno.h>
#include <qb/qbipcs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "tandem/admin_ipc.h"
#include "tandem/log.h"
#include "tandem/session_info.h"

/*
 * Fallback until the iSCSI layer's implementation is linked in: no session rows. The
 * real (strong) definition in daemon/iscsi/ replaces this one at link time.
 */
__attribute__((weak)) size_t iscsi_sessions_snapshot(struct iscsi_session_info *out, size_t max)
{
        (void)out;
        (void)max;
        return 0;
}

static qb_ipcs_service_t *service;
static qb_loop_t *service_loop;

static int32_t on_accept(qb_ipcs_connection_t *c, uid_t uid, gid_t gid)
{
        if (uid != 0) {
                log_warn("admin: refused a connection from uid %u gid %u (root only)",
                         (unsigned)uid, (unsigned)gid);
                return -EACCES;
        }
        /* Shared-memory files of the connection: root only too. */
        qb_ipcs_connection_auth_set(c, 0, 0, 0600);
        return 0;
}

static void on_created(qb_ipcs_connection_t *c)
{
        (void)c;
        log_debug("admin: client connected");
}

static int32_t on_closed(qb_ipcs_connection_t *c)
{
        (void)c;
        return 0;
}

static void on_destroyed(qb_ipcs_connection_t *c)
{
        (void)c;
}

static int send_packed(qb_ipcs_connection_t *c, int32_t id, const uint8_t *data, size_t len)
{
        struct qb_ipc_response_header rh = {
            .id = id, .size = (int32_t)(sizeof(rh) + len), .error = 0};
        struct iovec iov[2] = {{.iov_base = &rh, .iov_len = sizeof(rh)},
                               {.iov_base = (void *)data, .iov_len = len}};
        ssize_t n = qb_ipcs_response_sendv(c, iov, 2);
        if (n < 0) {
                log_warn("admin: cannot send the response: %s", strerror((int)-n));
                return (int)n;
        }
        return 0;
}

/* An error response built here, for requests that never reach the dispatcher. */
static void send_error(qb_ipcs_connection_t *c, int32_t id, int err, const char *msg)
{
        Tandem__Admin__AdminResponse r = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
        uint8_t buf[512];
        r.errno_value = err;
        r.error = (char *)msg;
        if (tandem__admin__admin_response__get_packed_size(&r) > sizeof(buf))
                return;
        size_t n = tandem__admin__admin_response__pack(&r, buf);
        send_packed(c, id, buf, n);
}

static int32_t on_message(qb_ipcs_connection_t *c, void *data, size_t size)
{
        const struct qb_ipc_request_header *hdr = data;
        if (size < sizeof(*hdr) || (size_t)hdr->size != size || hdr->id != ADMIN_MSG_REQUEST) {
                send_error(c, size >= sizeof(*hdr) ? hdr->id : 0, EPROTO,
                           "request: not a tandem admin request");
                return 0;
        }
        uint8_t *out = NULL;
        size_t out_len = 0;
        int rc = admin_dispatch((const uint8_t *)data + sizeof(*hdr), size - sizeof(*hdr), &out,
                                &out_len);
        if (rc < 0) {
                send_error(c, hdr->id, -rc, "tandemd: out of memory");
                return 0;
        }
        if (out_len + sizeof(struct qb_ipc_response_header) > ADMIN_IPC_MAX_MSG)
                send_error(c, hdr->id, EMSGSIZE, "response: too large for the IPC buffer");
        else
                send_packed(c, hdr->id, out, out_len);
        free(out);
        return 0;
}

/* libqb's IPC server drives its sockets through these, mapped onto our qb loop. */
static int32_t job_add(enum qb_loop_priority p, void *data, qb_loop_job_dispatch_fn fn)
{
        return qb_loop_job_add(service_loop, p, data, fn);
}

static int32_t dispatch_add(enum qb_loop_priority p, int32_t fd, int32_t events, void *data,
                            qb_ipcs_dispatch_fn_t fn)
{
        return qb_loop_poll_add(service_loop, p, fd, events, data, fn);
}

static int32_t dispatch_mod(enum qb_loop_priority p, int32_t fd, int32_t events, void *data,
                            qb_ipcs_dispatch_fn_t fn)
{
        return qb_loop_poll_mod(service_loop, p, fd, events, data, fn);
}

static int32_t dispatch_del(int32_t fd)
{
        return qb_loop_poll_del(service_loop, fd);
}

int admin_ipc_start(qb_loop_t *loop, const char *instance)
{
        admin_reload_set_loop(loop);
        static struct qb_ipcs_service_handlers handlers = {
            .connection_accept = on_accept,
            .connection_created = on_created,
            .msg_process = on_message,
            .connection_closed = on_closed,
            .connection_destroyed = on_destroyed,
        };
        static struct qb_ipcs_poll_handlers poll_handlers = {
            .job_add = job_add,
            .dispatch_add = dispatch_add,
            .dispatch_mod = dispatch_mod,
            .dispatch_del = dispatch_del,
        };
        if (service)
                return -EALREADY;
        if (!instance || !*instance)
                instance = "default";
        char name[128];
        snprintf(name, sizeof(name), ADMIN_SERVICE_PREFIX "%s", instance);
        service_loop = loop;
        service = qb_ipcs_create(name, 0, QB_IPC_SHM, &handlers);
        if (!service)
                return errno ? -errno : -ENOMEM;
        qb_ipcs_enforce_buffer_size(service, ADMIN_IPC_MAX_MSG);
        qb_ipcs_poll_handlers_set(service, &poll_handlers);
        int32_t rc = qb_ipcs_run(service);
        if (rc < 0) {
                /* qb_ipcs_run destroys the service on failure. */
                service = NULL;
                log_err("admin: cannot serve %s: %s%s", name, strerror(-rc),
                        rc == -EADDRINUSE ? " (another tandemd runs this instance)" : "");
                return rc;
        }
        admin_dispatch_set_identity(instance);
        log_info("admin: serving %s", name);
        return 0;
}

void admin_ipc_stop(void)
{
        if (!service)
                return;
        qb_ipcs_destroy(service);
        service = NULL;
        service_loop = NULL;
}
