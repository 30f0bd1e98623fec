/*
 * tdm-pr: one libiscsi session that runs persistent reservation commands (and a few others)
 * given on the command line, as one I_T nexus: with --isid the session logs in with that
 * ISID, so the same initiator port comes back after a relogin or a failover (libiscsi picks a
 * random one otherwise).
 *
 *   tdm-pr [--initiator IQN] [--isid HEX12] URL COMMAND...
 *
 * --isid: 12 hex digits; the first byte 00-3F (OUI format), 40 (EN) or 80 (random format).
 * Commands (one argument each; KEY and SARK in C notation, TYPE we|ea|we-ro|ea-ro|we-ar|ea-ar
 * or 1..8):
 *
 *   register SARK [aptpl]          REGISTER AND IGNORE EXISTING KEY
 *   register-key KEY SARK [aptpl]  REGISTER
 *   unregister                     REGISTER AND IGNORE EXISTING KEY with SARK 0
 *   reserve KEY TYPE | release KEY TYPE | clear KEY
 *   preempt KEY SARK TYPE | preempt-abort KEY SARK TYPE
 *   read-keys                      prints generation=N keys=K1,K2,...
 *   read-reservation               prints generation=N reservation=none | key=K type=T
 *   read-full-status               prints generation=N regs=K@PORT[!T];... (! marks holders)
 *   caps                           REPORT CAPABILITIES, prints the 8 bytes in hex
 *   tur | clear-ua                 TEST UNIT READY once | until GOOD (prints the attentions)
 *   read LBA | write LBA PAT       READ(10) / WRITE(10) of one block (PAT: a byte)
 *   reserve6 | release6            SPC-2 RESERVE(6) / RELEASE(6)
 *   abort-task-set | clear-task-set | lun-reset
 *                                  the task management function, prints its response
 *   hold                           logs in a second I_T nexus (same initiator, another ISID)
 *                                  that stays logged in; "held:COMMAND" runs COMMAND on it
 *
 * The session reports unit attentions to the commands (libiscsi does not clear them at login),
 * so "clear-ua" shows what the target owed this I_T nexus.
 * Prints "login: ok isid=..." and one line per command: the command, ": ", the SCSI status
 * (GOOD, CHECK_CONDITION K/ASC/ASCQ, RESERVATION_CONFLICT, ...) and what it read. Exit status:
 * 0 when every command got a SCSI status (whatever it was), 1 when the login failed, 2 on a
 * usage error, 3 when the transport failed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define PR_IN_LEN 8192
#define UA_TRIES  16

struct session {
        struct iscsi_context *iscsi;
        struct iscsi_url *url;
        const char *initiator, *url_text;
        int lun;
        uint32_t block_size;
        struct session *held; /* "hold": a second nexus of the same initiator, kept open */
};

static void put_be16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
        put_be16(p, (uint16_t)(v >> 16));
        put_be16(p + 2, (uint16_t)v);
}

static void put_be64(uint8_t *p, uint64_t v)
{
        put_be32(p, (uint32_t)(v >> 32));
        put_be32(p + 4, (uint32_t)v);
}

static uint32_t get_be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
        return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

static void print_status(const struct scsi_task *t)
{
        switch (t->status) {
        case SCSI_STATUS_GOOD:
                printf("GOOD");
                break;
        case SCSI_STATUS_CHECK_CONDITION:
                printf("CHECK_CONDITION %x/%02x/%02x", (unsigned)t->sense.key,
                       (unsigned)(t->sense.ascq >> 8) & 0xff, (unsigned)t->sense.ascq & 0xff);
                break;
        case SCSI_STATUS_RESERVATION_CONFLICT:
                printf("RESERVATION_CONFLICT");
                break;
        case SCSI_STATUS_BUSY:
                printf("BUSY");
                break;
        default:
                printf("STATUS_0x%02x", (unsigned)t->status & 0xff);
                break;
        }
}

static struct scsi_task *run_cdb(struct session *s, const char *what, uint8_t *cdb, int cdb_len,
                                 int dir, uint32_t xfer_len, uint8_t *data)
{
        struct scsi_task *task = scsi_create_task(cdb_len, cdb, dir, (int)xfer_len);
        if (task == NULL) {
                printf("%s: ERROR cannot allocate task\n", what);
                return NULL;
        }
        struct iscsi_data out = {.size = dir == SCSI_XFER_WRITE ? xfer_len : 0, .data = data};
        if (iscsi_scsi_command_sync(s->iscsi, s->lun, task, dir == SCSI_XFER_WRITE ? &out : NULL) ==
            NULL) {
                printf("%s: ERROR transport: %s\n", what, iscsi_get_error(s->iscsi));
                scsi_free_scsi_task(task);
                return NULL;
        }
        return task;
}

static int report(const char *what, struct scsi_task *t, const char *extra)
{
        if (t == NULL)
                return -EIO;
        printf("%s: ", what);
        print_status(t);
        printf("%s%s\n", extra[0] ? " " : "", extra);
        scsi_free_scsi_task(t);
        return 0;
}

static int parse_type(const char *s, unsigned *type)
{
        static const char *const names[] = {NULL,    "we",    NULL,    "ea",   NULL,
                                            "we-ro", "ea-ro", "we-ar", "ea-ar"};
        for (unsigned i = 1; i < sizeof(names) / sizeof(names[0]); i++)
                if (names[i] && strcasecmp(s, names[i]) == 0) {
                        *type = i;
                        return 0;
                }
        char *end;
        unsigned long v = strtoul(s, &end, 0);
        if (*end || v > 15)
                return -EINVAL;
        *type = (unsigned)v;
        return 0;
}

static int prout(struct session *s, const char *what, uint8_t sa, unsigned type, uint64_t key,
                 uint64_t sark, bool aptpl)
{
        uint8_t cdb[10] = {0x5f, sa, (uint8_t)type};
        uint8_t param[24] = {0};
        put_be32(cdb + 5, sizeof(param));
        put_be64(param, key);
        put_be64(param + 8, sark);
        param[20] = aptpl ? 0x01 : 0;
        return report(what, run_cdb(s, what, cdb, 10, SCSI_XFER_WRITE, sizeof(param), param), "");
}

static struct scsi_task *prin(struct session *s, const char *what, uint8_t sa)
{
        uint8_t cdb[10] = {0x5e, sa};
        put_be16(cdb + 7, PR_IN_LEN);
        return run_cdb(s, what, cdb, 10, SCSI_XFER_READ, PR_IN_LEN, NULL);
}

/* Appends to a bounded line. */
static void addf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void addf(char *buf, size_t cap, const char *fmt, ...)
{
        size_t n = strlen(buf);
        if (n + 1 >= cap)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf + n, cap - n, fmt, ap);
        va_end(ap);
}

static int cmd_read_keys(struct session *s, const char *what)
{
        static char extra[PR_IN_LEN * 3];
        extra[0] = '\0';
        struct scsi_task *t = prin(s, what, 0);
        if (t && t->status == SCSI_STATUS_GOOD && t->datain.size >= 8) {
                const uint8_t *d = t->datain.data;
                uint32_t n = get_be32(d + 4) / 8, have = ((uint32_t)t->datain.size - 8) / 8;
                addf(extra, sizeof(extra), "generation=%" PRIu32 " keys=", get_be32(d));
                for (uint32_t i = 0; i < n && i < have; i++)
                        addf(extra, sizeof(extra), "%s0x%" PRIx64, i ? "," : "",
                             get_be64(d + 8 + 8 * i));
        }
        return report(what, t, extra);
}

static int cmd_read_reservation(struct session *s, const char *what)
{
        char extra[128] = "";
        struct scsi_task *t = prin(s, what, 1);
        if (t && t->status == SCSI_STATUS_GOOD && t->datain.size >= 8) {
                const uint8_t *d = t->datain.data;
                if (get_be32(d + 4) >= 16 && t->datain.size >= 24)
                        snprintf(extra, sizeof(extra),
                                 "generation=%" PRIu32 " key=0x%" PRIx64 " type=%u scope=%u",
                                 get_be32(d), get_be64(d + 8), d[21] & 0x0f, d[21] >> 4);
                else
                        snprintf(extra, sizeof(extra), "generation=%" PRIu32 " reservation=none",
                                 get_be32(d));
        }
        return report(what, t, extra);
}

static int cmd_read_full_status(struct session *s, const char *what)
{
        static char extra[PR_IN_LEN * 2];
        extra[0] = '\0';
        struct scsi_task *t = prin(s, what, 3);
        if (t && t->status == SCSI_STATUS_GOOD && t->datain.size >= 8) {
                const uint8_t *d = t->datain.data;
                uint32_t end = 8 + get_be32(d + 4);
                if (end > (uint32_t)t->datain.size)
                        end = (uint32_t)t->datain.size;
                addf(extra, sizeof(extra), "generation=%" PRIu32 " regs=", get_be32(d));
                for (uint32_t at = 8; at + 24 <= end;) {
                        const uint8_t *r = d + at;
                        uint32_t tid = get_be32(r + 20);
                        const char *name = "?";
                        if (tid >= 5 && at + 24 + tid <= end && memchr(r + 28, 0, tid - 4))
                                name = (const char *)r + 28;
                        addf(extra, sizeof(extra), "%s0x%" PRIx64 "@%s", at > 8 ? ";" : "",
                             get_be64(r), name);
                        if (r[12] & 1)
                                addf(extra, sizeof(extra), "!%u", r[13] & 0x0f);
                        at += 24 + tid;
                }
        }
        return report(what, t, extra);
}

static int cmd_caps(struct session *s, const char *what)
{
        char extra[64] = "";
        struct scsi_task *t = prin(s, what, 2);
        if (t && t->status == SCSI_STATUS_GOOD && t->datain.size >= 8) {
                addf(extra, sizeof(extra), "caps=");
                for (int i = 0; i < 8; i++)
                        addf(extra, sizeof(extra), "%02x", t->datain.data[i]);
        }
        return report(what, t, extra);
}

static int cmd_clear_ua(struct session *s, const char *what)
{
        char extra[256] = "attentions=";
        for (int i = 0; i < UA_TRIES; i++) {
                uint8_t cdb[6] = {0};
                struct scsi_task *t = run_cdb(s, what, cdb, 6, SCSI_XFER_NONE, 0, NULL);
                if (t == NULL)
                        return -EIO;
                if (t->status == SCSI_STATUS_CHECK_CONDITION && t->sense.key == 6) {
                        addf(extra, sizeof(extra), "%s%02x/%02x", i ? "," : "",
                             (unsigned)(t->sense.ascq >> 8) & 0xff, (unsigned)t->sense.ascq & 0xff);
                        scsi_free_scsi_task(t);
                        continue;
                }
                return report(what, t, extra);
        }
        printf("%s: ERROR still unit attentions after %d commands\n", what, UA_TRIES);
        return 0;
}

static int read_block_size(struct session *s)
{
        uint8_t cdb[10] = {0x25};
        struct scsi_task *t = run_cdb(s, "read-capacity", cdb, 10, SCSI_XFER_READ, 8, NULL);
        if (t == NULL)
                return -EIO;
        /* Taken late, by the first read or write: it may report an attention itself. */
        s->block_size = t->status == SCSI_STATUS_GOOD && t->datain.size >= 8
                            ? get_be32(t->datain.data + 4)
                            : 512;
        scsi_free_scsi_task(t);
        return 0;
}

static int cmd_rw(struct session *s, const char *what, bool write, uint32_t lba, unsigned pat)
{
        uint8_t cdb[10] = {write ? 0x2a : 0x28};
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, 1);
        uint8_t *buf = NULL;
        if (!s->block_size && read_block_size(s) != 0)
                return -EIO;
        if (write) {
                buf = malloc(s->block_size);
                if (!buf)
                        return -ENOMEM;
                memset(buf, (int)pat, s->block_size);
        }
        int rc = report(
            what,
            run_cdb(s, what, cdb, 10, write ? SCSI_XFER_WRITE : SCSI_XFER_READ, s->block_size, buf),
            "");
        free(buf);
        return rc;
}

struct tmf_wait {
        bool done;
        int status;
        uint32_t response;
};

static void tmf_done(struct iscsi_context *iscsi, int status, void *data, void *private)
{
        (void)iscsi;
        struct tmf_wait *w = private;
        w->done = true;
        w->status = status;
        w->response = data ? *(uint32_t *)data : 0xffffffffu;
}

/* The function on this session's LUN, waited for: prints the target's response code. */
static int cmd_tmf(struct session *s, const char *what, enum iscsi_task_mgmt_funcs fn)
{
        struct tmf_wait w = {0};
        if (iscsi_task_mgmt_async(s->iscsi, s->lun, fn, 0xffffffff, 0, tmf_done, &w) != 0) {
                printf("%s: ERROR transport: %s\n", what, iscsi_get_error(s->iscsi));
                return -EIO;
        }
        while (!w.done) {
                struct pollfd pfd = {.fd = iscsi_get_fd(s->iscsi),
                                     .events = (short)iscsi_which_events(s->iscsi)};
                if (poll(&pfd, 1, 10000) <= 0 || iscsi_service(s->iscsi, pfd.revents) != 0) {
                        printf("%s: ERROR transport: %s\n", what, iscsi_get_error(s->iscsi));
                        return -EIO;
                }
        }
        if (w.status != 0) {
                printf("%s: ERROR transport: %s\n", what, iscsi_get_error(s->iscsi));
                return -EIO;
        }
        static const char *const names[] = {"FUNCTION_COMPLETE",        "TASK_DOES_NOT_EXIST",
                                            "LUN_DOES_NOT_EXIST",       "TASK_STILL_ALLEGIANT",
                                            "REASSIGNMENT_UNSUPPORTED", "FUNCTION_UNSUPPORTED"};
        if (w.response < sizeof(names) / sizeof(names[0]))
                printf("%s: %s\n", what, names[w.response]);
        else
                printf("%s: RESPONSE_%u\n", what, (unsigned)w.response);
        return 0;
}

static int session_open(struct session *s, const char *isid);
static void session_close(struct session *s, bool logout);

static int cmd_hold(struct session *s, const char *what)
{
        if (s->held) {
                printf("%s: ERROR a second nexus is held already\n", what);
                return -EINVAL;
        }
        s->held = calloc(1, sizeof(*s->held));
        if (!s->held)
                return -ENOMEM;
        s->held->initiator = s->initiator;
        s->held->url_text = s->url_text;
        int rc = session_open(s->held, NULL);
        printf("%s: %s\n", what, rc == 0 ? "ok" : "failed");
        if (rc != 0) {
                free(s->held);
                s->held = NULL;
                return -EIO;
        }
        return 0;
}

static int run_command(struct session *s, const char *c)
{
        if (strncmp(c, "held:", 5) == 0) {
                if (!s->held) {
                        printf("%s: ERROR no held nexus (\"hold\" first)\n", c);
                        return -EINVAL;
                }
                printf("held:"); /* the command's line follows: "held:COMMAND: ..." */
                return run_command(s->held, c + 5);
        }
        char verb[32], a[32] = "", b[32] = "", d[32] = "";
        int n = sscanf(c, "%31s %31s %31s %31s", verb, a, b, d);
        if (n < 1)
                return -EINVAL;
        unsigned long long k1 = strtoull(a, NULL, 0), k2 = strtoull(b, NULL, 0);
        unsigned type = 0;
        if (strcmp(verb, "register") == 0 && n >= 2)
                return prout(s, c, 0x06, 0, 0, k1, strcmp(b, "aptpl") == 0);
        if (strcmp(verb, "register-key") == 0 && n >= 3)
                return prout(s, c, 0x00, 0, k1, k2, strcmp(d, "aptpl") == 0);
        if (strcmp(verb, "unregister") == 0)
                return prout(s, c, 0x06, 0, 0, 0, false);
        if ((strcmp(verb, "reserve") == 0 || strcmp(verb, "release") == 0) && n == 3 &&
            parse_type(b, &type) == 0)
                return prout(s, c, verb[2] == 's' ? 0x01 : 0x02, type, k1, 0, false);
        if (strcmp(verb, "clear") == 0 && n == 2)
                return prout(s, c, 0x03, 0, k1, 0, false);
        if ((strcmp(verb, "preempt") == 0 || strcmp(verb, "preempt-abort") == 0) && n == 4 &&
            parse_type(d, &type) == 0)
                return prout(s, c, verb[7] ? 0x05 : 0x04, type, k1, k2, false);
        if (strcmp(verb, "read-keys") == 0)
                return cmd_read_keys(s, c);
        if (strcmp(verb, "read-reservation") == 0)
                return cmd_read_reservation(s, c);
        if (strcmp(verb, "read-full-status") == 0)
                return cmd_read_full_status(s, c);
        if (strcmp(verb, "caps") == 0)
                return cmd_caps(s, c);
        if (strcmp(verb, "tur") == 0) {
                uint8_t cdb[6] = {0};
                return report(c, run_cdb(s, c, cdb, 6, SCSI_XFER_NONE, 0, NULL), "");
        }
        if (strcmp(verb, "clear-ua") == 0)
                return cmd_clear_ua(s, c);
        if (strcmp(verb, "read") == 0 && n == 2)
                return cmd_rw(s, c, false, (uint32_t)k1, 0);
        if (strcmp(verb, "write") == 0 && n == 3)
                return cmd_rw(s, c, true, (uint32_t)k1, (unsigned)k2 & 0xff);
        if (strcmp(verb, "reserve6") == 0 || strcmp(verb, "release6") == 0) {
                uint8_t cdb[6] = {verb[2] == 's' ? 0x16 : 0x17};
                return report(c, run_cdb(s, c, cdb, 6, SCSI_XFER_NONE, 0, NULL), "");
        }
        if (strcmp(verb, "abort-task-set") == 0)
                return cmd_tmf(s, c, ISCSI_TM_ABORT_TASK_SET);
        if (strcmp(verb, "clear-task-set") == 0)
                return cmd_tmf(s, c, ISCSI_TM_CLEAR_TASK_SET);
        if (strcmp(verb, "lun-reset") == 0)
                return cmd_tmf(s, c, ISCSI_TM_LUN_RESET);
        if (strcmp(verb, "hold") == 0)
                return cmd_hold(s, c);
        return -EINVAL;
}

/* The ISID as libiscsi can set it: OUI format (any bytes), or EN / random formats. */
static int set_isid(struct iscsi_context *iscsi, const char *hex)
{
        uint8_t b[6];
        if (strlen(hex) != 12)
                return -EINVAL;
        for (int i = 0; i < 6; i++) {
                char two[3] = {hex[2 * i], hex[2 * i + 1], 0}, *end;
                b[i] = (uint8_t)strtoul(two, &end, 16);
                if (*end)
                        return -EINVAL;
        }
        uint32_t mid = (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        uint32_t q = (uint32_t)b[4] << 8 | b[5];
        if (b[0] < 0x40)
                return iscsi_set_isid_oui(iscsi, (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2],
                                          (uint32_t)b[3] << 16 | q);
        if (b[0] == 0x40)
                return iscsi_set_isid_en(iscsi, mid, q);
        if (b[0] == 0x80)
                return iscsi_set_isid_random(iscsi, mid, q);
        return -EINVAL;
}

/* Logs in (LUN -1: libiscsi would otherwise clear the unit attentions itself with TURs).
 * 0, or the exit status: 1 the login failed, 2 a bad ISID or URL. */
static int session_open(struct session *s, const char *isid)
{
        s->iscsi = iscsi_create_context(s->initiator);
        if (s->iscsi == NULL) {
                printf("login: failed: cannot create a libiscsi context\n");
                return 1;
        }
        if (isid && set_isid(s->iscsi, isid) != 0) {
                printf("login: failed: bad ISID %s\n", isid);
                session_close(s, false);
                return 2;
        }
        s->url = iscsi_parse_full_url(s->iscsi, s->url_text);
        if (s->url == NULL) {
                printf("login: failed: bad URL: %s\n", iscsi_get_error(s->iscsi));
                session_close(s, false);
                return 2;
        }
        iscsi_set_targetname(s->iscsi, s->url->target);
        iscsi_set_session_type(s->iscsi, ISCSI_SESSION_NORMAL);
        if (s->url->user[0])
                iscsi_set_initiator_username_pwd(s->iscsi, s->url->user, s->url->passwd);
        iscsi_set_noautoreconnect(s->iscsi, 1);
        s->lun = s->url->lun;
        if (iscsi_full_connect_sync(s->iscsi, s->url->portal, -1) != 0) {
                printf("login: failed: %s\n", iscsi_get_error(s->iscsi));
                session_close(s, false);
                return 1;
        }
        return 0;
}

static void session_close(struct session *s, bool logout)
{
        if (logout)
                iscsi_logout_sync(s->iscsi);
        if (s->url)
                iscsi_destroy_url(s->url);
        if (s->iscsi)
                iscsi_destroy_context(s->iscsi);
        s->url = NULL;
        s->iscsi = NULL;
}

static void usage(FILE *f)
{
        fprintf(f,
                "usage: tdm-pr [--initiator IQN] [--isid HEX12] URL COMMAND...\n"
                "commands: register SARK [aptpl] | register-key KEY SARK [aptpl] | unregister |\n"
                "          reserve KEY TYPE | release KEY TYPE | clear KEY |\n"
                "          preempt KEY SARK TYPE | preempt-abort KEY SARK TYPE | read-keys |\n"
                "          read-reservation | read-full-status | caps | tur | clear-ua |\n"
                "          read LBA | write LBA PAT | abort-task-set | clear-task-set |\n"
                "          lun-reset | reserve6 | release6 | hold | held:COMMAND\n");
}

int main(int argc, char **argv)
{
        /* A connection the target reset is an error to report, not a signal to die of. */
        signal(SIGPIPE, SIG_IGN);
        static const struct option longopts[] = {
            {"initiator", required_argument, NULL, 'i'},
            {"isid", required_argument, NULL, 's'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        const char *initiator = "iqn.2026-11.io.tandem:tdm-pr";
        const char *isid = NULL;
        int opt;
        while ((opt = getopt_long(argc, argv, "+i:s:h", longopts, NULL)) != -1) {
                switch (opt) {
                case 'i':
                        initiator = optarg;
                        break;
                case 's':
                        isid = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        struct session s = {.initiator = initiator, .url_text = argv[optind]};
        int rc = session_open(&s, isid);
        if (rc != 0)
                return rc;
        printf("login: ok initiator=%s isid=%s\n", initiator, isid ? isid : "random");
        for (int i = optind + 1; i < argc; i++) {
                int r = run_command(&s, argv[i]);
                if (r == -EINVAL) {
                        printf("%s: ERROR malformed command\n", argv[i]);
                        rc = 2;
                        break;
                }
                if (r != 0) {
                        rc = 3;
                        break;
                }
        }
        if (s.held) {
                session_close(s.held, rc != 3);
                free(s.held);
        }
        session_close(&s, rc != 3);
        return rc;
}
