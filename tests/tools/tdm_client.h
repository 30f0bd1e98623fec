/*
 * A libiscsi session for test clients that must ride through a failover: libiscsi reconnects
 * (resending unfinished commands in a new session, no unit attention on reconnect), and our
 * own liveness check drops a silent connection (a crashed portal sends no RST; libiscsi sends
 * no NOP-Out), as an initiator with a short NOP-Out timeout would. A command answered with a
 * UNIT ATTENTION was not run (SAM-5): it is sent again, as initiators do, a bounded number of
 * times, and counted. One command at a time.
 */
#ifndef TDM_CLIENT_H
#define TDM_CLIENT_H

#include <errno.h>
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct tdm_client {
        struct iscsi_context *iscsi;
        int lun;
        unsigned liveness_s;
        uint64_t last_done_ns;
        uint64_t max_stall_ns;
        unsigned reconnects;
        unsigned ua_retries; /* commands sent again after a UNIT ATTENTION */
        /* the command in flight */
        bool done;
        int status;
        struct scsi_task *task;
};

static inline uint64_t tdm_client_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Logs in to url_s as initiator; liveness_s 0: no liveness check of our own. */
static inline int tdm_client_open(struct tdm_client *c, const char *url_s, const char *initiator,
                                  unsigned liveness_s)
{
        memset(c, 0, sizeof(*c));
        /* A write to a connection the target reset (the portal moved) fails with EPIPE and
         * is reconnected; the default SIGPIPE would end the whole client without a word. */
        signal(SIGPIPE, SIG_IGN);
        c->liveness_s = liveness_s;
        c->iscsi = iscsi_create_context(initiator);
        if (!c->iscsi)
                return -ENOMEM;
        struct iscsi_url *url = iscsi_parse_full_url(c->iscsi, url_s);
        if (!url) {
                fprintf(stderr, "bad URL %s: %s\n", url_s, iscsi_get_error(c->iscsi));
                return -EINVAL;
        }
        iscsi_set_targetname(c->iscsi, url->target);
        iscsi_set_session_type(c->iscsi, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(c->iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
        iscsi_set_no_ua_on_reconnect(c->iscsi, 1);
        int rc = iscsi_full_connect_sync(c->iscsi, url->portal, url->lun);
        c->lun = url->lun;
        iscsi_destroy_url(url);
        if (rc != 0) {
                fprintf(stderr, "login to %s failed: %s\n", url_s, iscsi_get_error(c->iscsi));
                return -EIO;
        }
        c->last_done_ns = tdm_client_now_ns();
        return 0;
}

static inline void tdm_client_close(struct tdm_client *c)
{
        if (c->iscsi) {
                iscsi_logout_sync(c->iscsi);
                iscsi_destroy_context(c->iscsi);
        }
        c->iscsi = NULL;
}

static inline void tdm_client_cb(struct iscsi_context *iscsi, int status, void *data,
                                 void *private_data)
{
        (void)iscsi;
        struct tdm_client *c = private_data;
        c->status = status;
        c->task = data;
        c->done = true;
}

#define TDM_CLIENT_MAX_UA_RETRIES 8 /* per command: more means the target keeps raising them */

/* One try of a command, through reconnects (tdm_client_run). */
static inline struct scsi_task *tdm_client_run_once(struct tdm_client *c, const uint8_t *cdb,
                                                    int cdb_len, int dir, const void *out,
                                                    uint32_t out_len, uint32_t in_len)
{
        struct scsi_task *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        memcpy(t->cdb, cdb, (size_t)cdb_len);
        t->cdb_size = cdb_len;
        t->xfer_dir = dir;
        t->expxferlen = dir == SCSI_XFER_WRITE ? out_len : in_len;
        struct iscsi_data d = {.data = (unsigned char *)out, .size = out_len};
        c->done = false;
        uint64_t start = tdm_client_now_ns(), last_kick = start;
        if (iscsi_scsi_command_async(c->iscsi, c->lun, t, tdm_client_cb,
                                     dir == SCSI_XFER_WRITE ? &d : NULL, c) != 0) {
                scsi_free_scsi_task(t);
                return NULL;
        }
        while (!c->done) {
                int events = iscsi_which_events(c->iscsi);
                struct pollfd pfd = {.fd = iscsi_get_fd(c->iscsi), .events = (short)events};
                int n = 0;
                if (events == 0 || pfd.fd < 0)
                        usleep(100 * 1000);
                else if ((n = poll(&pfd, 1, 100)) < 0 && errno != EINTR)
                        return NULL;
                if (iscsi_service(c->iscsi, n > 0 ? pfd.revents : 0) < 0)
                        return NULL;
                uint64_t now = tdm_client_now_ns(), limit = c->liveness_s * 1000000000ull;
                if (!c->done && c->liveness_s && now - start > limit && now - last_kick > limit) {
                        last_kick = now;
                        c->reconnects++;
                        if (iscsi_reconnect(c->iscsi) != 0)
                                fprintf(stderr, "reconnect: %s\n", iscsi_get_error(c->iscsi));
                }
        }
        uint64_t now = tdm_client_now_ns();
        if (now - c->last_done_ns > c->max_stall_ns)
                c->max_stall_ns = now - c->last_done_ns;
        c->last_done_ns = now;
        return c->task;
}

/*
 * Runs one command (cdb, data-out, data-in of in_len) to its end, through reconnects and unit
 * attentions. The finished task (status, sense, data-in) is returned: free it with
 * scsi_free_scsi_task. NULL when libiscsi gave up.
 */
static inline struct scsi_task *tdm_client_run(struct tdm_client *c, const uint8_t *cdb,
                                               int cdb_len, int dir, const void *out,
                                               uint32_t out_len, uint32_t in_len)
{
        for (unsigned tries = 0;; tries++) {
                struct scsi_task *t =
                    tdm_client_run_once(c, cdb, cdb_len, dir, out, out_len, in_len);
                if (!t || t->status != SCSI_STATUS_CHECK_CONDITION ||
                    t->sense.key != SCSI_SENSE_UNIT_ATTENTION || tries >= TDM_CLIENT_MAX_UA_RETRIES)
                        return t;
                fprintf(stderr, "unit attention %04x on opcode 0x%02x: sent again\n",
                        (unsigned)t->sense.ascq, cdb[0]);
                c->ua_retries++;
                scsi_free_scsi_task(t);
        }
}

/* Sense key and ASC/ASCQ of a finished task (0 when it has none). */
static inline int tdm_client_sense(const struct scsi_task *t, int *ascq)
{
        if (t->status != SCSI_STATUS_CHECK_CONDITION) {
                *ascq = 0;
                return 0;
        }
        *ascq = t->sense.ascq;
        return t->sense.key;
}

#endif
