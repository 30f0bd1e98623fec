/* The client side of the admin IPC (tandemctl): one request, one response. */
#include <errno.h>
#include <qb/qbipcc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "tandem/admin_ops.h"
#include "tandem/admin_wire.h"

static int connect_error(const char *instance, int e, char *err, size_t errlen)
{
        switch (e) {
        case EACCES:
        case EPERM:
                return admin_error(err, errlen, -EACCES,
                                   "tandemd (instance %s) refused the connection: admin needs root",
                                   instance);
        case ECONNREFUSED:
        case ENOENT:
        case ENOTCONN:
        case 0:
                return admin_error(err, errlen, -ECONNREFUSED,
                                   "tandemd (instance %s) is not running", instance);
        default:
                return admin_error(err, errlen, -e, "cannot connect to tandemd (instance %s): %s",
                                   instance, strerror(e));
        }
}

int admin_client_call(const char *instance, const Tandem__Admin__AdminRequest *req,
                      Tandem__Admin__AdminResponse **resp, char *err, size_t errlen)
{
        char name[128];
        if (!instance || !*instance)
                instance = "default";
        *resp = NULL;
        snprintf(name, sizeof(name), ADMIN_SERVICE_PREFIX "%s", instance);

        size_t len = tandem__admin__admin_request__get_packed_size(req);
        if (len + sizeof(struct qb_ipc_request_header) > ADMIN_IPC_MAX_MSG)
                return admin_error(err, errlen, -EMSGSIZE, "request too large (%zu bytes)", len);
        uint8_t *payload = malloc(len ? len : 1);
        uint8_t *answer = malloc(ADMIN_IPC_MAX_MSG);
        int rc = 0;
        if (!payload || !answer) {
                rc = admin_error(err, errlen, -ENOMEM, "out of memory");
                goto out;
        }
        tandem__admin__admin_request__pack(req, payload);

        errno = 0;
        qb_ipcc_connection_t *c = qb_ipcc_connect(name, ADMIN_IPC_MAX_MSG);
        if (!c) {
                rc = connect_error(instance, errno, err, errlen);
                goto out;
        }
        struct qb_ipc_request_header hdr = {.id = ADMIN_MSG_REQUEST,
                                            .size = (int32_t)(sizeof(hdr) + len)};
        struct iovec iov[2] = {{.iov_base = &hdr, .iov_len = sizeof(hdr)},
                               {.iov_base = payload, .iov_len = len}};
        ssize_t n = qb_ipcc_sendv_recv(c, iov, 2, answer, ADMIN_IPC_MAX_MSG, ADMIN_IPC_TIMEOUT_MS);
        qb_ipcc_disconnect(c);
        const struct qb_ipc_response_header *rh = (const void *)answer;
        if (n == -ETIMEDOUT || n == -EAGAIN) {
                rc = admin_error(err, errlen, -ETIMEDOUT,
                                 "tandemd (instance %s) did not answer within %d s", instance,
                                 ADMIN_IPC_TIMEOUT_MS / 1000);
        } else if (n < 0) {
                rc = admin_error(err, errlen, (int)n, "tandemd (instance %s): %s", instance,
                                 strerror((int)-n));
        } else if ((size_t)n < sizeof(*rh) || rh->size != n) {
                rc = admin_error(err, errlen, -EPROTO,
                                 "tandemd (instance %s) sent a malformed answer", instance);
        } else {
                *resp = tandem__admin__admin_response__unpack(NULL, (size_t)n - sizeof(*rh),
                                                              answer + sizeof(*rh));
                if (!*resp)
                        rc = admin_error(
                            err, errlen, -EPROTO,
                            "tandemd (instance %s) sent an answer that does not decode", instance);
        }
out:
        free(payload);
        free(answer);
        return rc;
}
