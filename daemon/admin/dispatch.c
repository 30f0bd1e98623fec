/*
 * Admin request dispatch: decode an AdminRequest, find its row in the table of operations,
 * check it against the row's arguments, run the row's handler, encode the AdminResponse.
 * Runs on the control thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admin_internal.h"

#define ADMIN_CLI(x)    NULL
#define ADMIN_DAEMON(x) x
#include "tandem/admin_ops_table.h"

/* The first row that builds this request (chap set and chap clear share one). */
static const struct admin_op *row_of(Tandem__Admin__AdminRequest__OpCase request)
{
        for (size_t i = 0; i < sizeof(admin_op_table) / sizeof(admin_op_table[0]); i++)
                if (admin_op_table[i].request == request)
                        return &admin_op_table[i];
        return NULL;
}

static void run(struct admin_reply *rep, const Tandem__Admin__AdminRequest *q)
{
        char err[512] = "";
        if (q->version > TANDEM__ADMIN__PROTOCOL_VERSION__PROTOCOL_VERSION_1) {
                admin_fail(rep, -EPROTONOSUPPORT,
                           "version: request version %d is newer than this tandemd (%s) "
                           "understands",
                           q->version, TANDEM_VERSION);
                return;
        }
        const struct admin_op *op = row_of(q->op_case);
        const ProtobufCMessage *m = admin_request_message(q);
        if (!op || !m) {
                admin_fail(rep, -EOPNOTSUPP, "request: no operation this tandemd (%s) knows",
                           TANDEM_VERSION);
                return;
        }
        int rc = admin_request_check(op, m, err, sizeof(err));
        if (rc)
                admin_fail(rep, rc, "%s", err);
        else
                op->handle(rep, m);
}

static int pack(const Tandem__Admin__AdminResponse *r, uint8_t **out, size_t *out_len)
{
        size_t n = tandem__admin__admin_response__get_packed_size(r);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return -ENOMEM;
        *out_len = tandem__admin__admin_response__pack(r, buf);
        *out = buf;
        return 0;
}

int admin_dispatch(const uint8_t *req, size_t len, uint8_t **out, size_t *out_len)
{
        struct admin_reply rep = {.r = TANDEM__ADMIN__ADMIN_RESPONSE__INIT};
        Tandem__Admin__AdminRequest *q = tandem__admin__admin_request__unpack(NULL, len, req);
        if (!q)
                admin_fail(&rep, -EPROTO, "request: cannot decode (not a tandem.admin request)");
        else
                run(&rep, q);
        if (rep.failed) {
                /* Never a half-filled success: report the shortage with a fixed message. */
                Tandem__Admin__AdminResponse oom = TANDEM__ADMIN__ADMIN_RESPONSE__INIT;
                oom.errno_value = ENOMEM;
                oom.error = "tandemd: out of memory";
                rep.r = oom;
        }
        int rc = pack(&rep.r, out, out_len);
        if (q)
                tandem__admin__admin_request__free_unpacked(q, NULL);
        admin_reply_free(&rep);
        return rc;
}
