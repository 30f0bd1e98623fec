/*
 * tdm-alua: one libiscsi session that asks a LUN about its ALUA target port groups and its
 * pending unit attentions, running the commands given on the command line in order.
 *
 *   tdm-alua [--initiator IQN] URL COMMAND...
 *
 * URL is libiscsi's: iscsi://HOST:PORT/IQN/LUN. The login clears the attentions a new
 * session starts with (libiscsi sends TEST UNIT READY until none is left).
 * Commands (one argument each):
 *
 *   rtpg        REPORT TARGET PORT GROUPS, length-only header
 *   rtpg-ext    REPORT TARGET PORT GROUPS, extended header (prints its transition time)
 *   tur         TEST UNIT READY: reports (and so consumes) one pending unit attention
 *   read        READ(10) of LBA 0, one block
 *   inquiry     standard INQUIRY, prints tpgs=N
 *   wait PATH   keep the session (answering target pings) until PATH exists
 *   stpg ID:STATE[,ID:STATE...]
 *               SET TARGET PORT GROUPS asking group ID for STATE (ao, s or u), e.g.
 *               "stpg 2:ao,1:s"; prints how long it took (ms=N)
 *
 * Prints "login: ok" and then, per command, "COMMAND: STATUS" where STATUS is GOOD or
 * CHECK_CONDITION K/ASC/ASCQ (hex) or STATUS_0xNN, and for a good RTPG one line per group:
 *   group=ID state=ao|an|s|u|lbd|o|t port=REL[,REL...] status=NN
 * Exit status: 0 when every command got a SCSI status (whatever it was), 1 when the login
 * failed, 2 on a usage error, 3 when the transport failed.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define RTPG_BUF_LEN  1024
#define READ_BUF_LEN  65536 /* the largest logical block: READ(10) of one block fits */
#define INQUIRY_LEN   96
#define WAIT_LIMIT_MS 120000

struct session {
        struct iscsi_context *iscsi;
        int lun;
};

static uint16_t get_be16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* "CMD: STATUS" without the line end (the command may add more). */
static void print_status(const char *what, const struct scsi_task *t)
{
        printf("%s: ", what);
        if (t->status == SCSI_STATUS_GOOD)
                printf("GOOD");
        else if (t->status == SCSI_STATUS_CHECK_CONDITION)
                printf("CHECK_CONDITION %x/%02x/%02x", (unsigned)t->sense.key,
                       (unsigned)(t->sense.ascq >> 8) & 0xff, (unsigned)t->sense.ascq & 0xff);
        else
                printf("STATUS_0x%02x", (unsigned)t->status & 0xff);
}

/* Runs one data-in (or no-data) CDB; NULL (printed) on a transport error. */
static struct scsi_task *run_cdb(struct session *s, const char *what, uint8_t *cdb, int cdb_len,
                                 uint32_t xfer_len)
{
        int dir = xfer_len ? SCSI_XFER_READ : SCSI_XFER_NONE;
        struct scsi_task *t = scsi_create_task(cdb_len, cdb, dir, (int)xfer_len);
        if (t == NULL) {
                printf("%s: ERROR cannot allocate task\n", what);
                return NULL;
        }
        if (iscsi_scsi_command_sync(s->iscsi, s->lun, t, NULL) == NULL) {
                printf("%s: ERROR transport: %s\n", what, iscsi_get_error(s->iscsi));
                scsi_free_scsi_task(t);
                return NULL;
        }
        return t;
}

/* A command whose whole report is its status. */
static int cmd_simple(struct session *s, const char *what, uint8_t *cdb, int cdb_len,
                      uint32_t xfer_len)
{
        struct scsi_task *t = run_cdb(s, what, cdb, cdb_len, xfer_len);
        if (t == NULL)
                return -EIO;
        print_status(what, t);
        printf("\n");
        scsi_free_scsi_task(t);
        return 0;
}

static const char *state_name(uint8_t state)
{
        switch (state) {
        case 0x0:
                return "ao";
        case 0x1:
                return "an";
        case 0x2:
                return "s";
        case 0x3:
                return "u";
        case 0x4:
                return "lbd";
        case 0xe:
                return "o";
        case 0xf:
                return "t";
        }
        return "reserved";
}

/* One line per target port group descriptor in d[off..end). */
static void print_groups(const uint8_t *d, uint32_t off, uint32_t end)
{
        while (off + 8 <= end) {
                const uint8_t *g = d + off;
                unsigned ports = g[7];
                printf("group=%u state=%s port=", get_be16(g + 2), state_name(g[0] & 0x0f));
                for (unsigned i = 0; i < ports && off + 8 + 4 * i + 4 <= end; i++)
                        printf("%s%u", i ? "," : "", get_be16(g + 8 + 4 * i + 2));
                printf(" status=%02x pref=%u sup=%02x\n", g[5], g[0] >> 7, g[1]);
                off += 8 + 4 * ports;
        }
}

static int cmd_rtpg(struct session *s, const char *what, bool extended)
{
        uint8_t cdb[12] = {0xa3, (uint8_t)((extended ? 0x20 : 0) | 0x0a)};
        put_be32(cdb + 6, RTPG_BUF_LEN);
        struct scsi_task *t = run_cdb(s, what, cdb, 12, RTPG_BUF_LEN);
        if (t == NULL)
                return -EIO;
        print_status(what, t);
        uint32_t size = t->datain.size > 0 ? (uint32_t)t->datain.size : 0;
        if (t->status != SCSI_STATUS_GOOD || size < 4) {
                printf("\n");
                scsi_free_scsi_task(t);
                return 0;
        }
        const uint8_t *d = t->datain.data;
        uint32_t end = get_be32(d) + 4;
        if (end > size)
                end = size;
        uint32_t off = 4;
        if (extended && size >= 8) {
                printf(" format=%u transition_time=%u", (d[4] >> 4) & 0x07, d[5]);
                off = 8;
        }
        printf(" length=%u\n", get_be32(d));
        print_groups(d, off, end);
        scsi_free_scsi_task(t);
        return 0;
}

static int cmd_inquiry(struct session *s, const char *what)
{
        uint8_t cdb[6] = {0x12, 0, 0, 0, INQUIRY_LEN, 0};
        struct scsi_task *t = run_cdb(s, what, cdb, 6, INQUIRY_LEN);
        if (t == NULL)
                return -EIO;
        print_status(what, t);
        if (t->status == SCSI_STATUS_GOOD && t->datain.size > 5)
                printf(" tpgs=%u", (t->datain.data[5] >> 4) & 0x03);
        printf("\n");
        scsi_free_scsi_task(t);
        return 0;
}

/* Keep the session alive (answering NOP-In pings) until path exists. */
static int cmd_wait(struct session *s, const char *what, const char *path)
{
        uint64_t deadline = now_ms() + WAIT_LIMIT_MS;
        printf("%s: waiting\n", what);
        while (access(path, F_OK) != 0) {
                if (now_ms() > deadline) {
                        printf("%s: ERROR timed out\n", what);
                        return -ETIMEDOUT;
                }
                struct pollfd pfd = {.fd = iscsi_get_fd(s->iscsi),
                                     .events = (short)iscsi_which_events(s->iscsi)};
                int n = poll(&pfd, 1, 20);
                if (n < 0 && errno != EINTR) {
                        printf("%s: ERROR poll: %s\n", what, strerror(errno));
                        return -EIO;
                }
                if (iscsi_service(s->iscsi, n > 0 ? pfd.revents : 0) != 0 ||
                    !iscsi_is_logged_in(s->iscsi)) {
                        printf("%s: ERROR session lost: %s\n", what, iscsi_get_error(s->iscsi));
                        return -EIO;
                }
        }
        printf("%s: done\n", what);
        return 0;
}

static int state_code(const char *name)
{
        static const char *const names[16] = {
            [0x0] = "ao", [0x1] = "an", [0x2] = "s", [0x3] = "u", [0x4] = "lbd", [0xe] = "o"};
        for (int i = 0; i < 16; i++)
                if (names[i] && strcmp(names[i], name) == 0)
                        return i;
        return -1;
}

/* "ID:STATE,..." as STPG descriptors after the 4-byte header; the list's length, 0 if bad. */
static uint32_t stpg_param(const char *spec, uint8_t *p, uint32_t cap)
{
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", spec);
        uint32_t len = 4;
        memset(p, 0, cap);
        for (char *save = NULL, *d = strtok_r(buf, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
                char *colon = strchr(d, ':');
                if (!colon || len + 4 > cap)
                        return 0;
                *colon = 0;
                int state = state_code(colon + 1);
                unsigned long id = strtoul(d, NULL, 10);
                if (state < 0 || id == 0 || id > 0xffff)
                        return 0;
                p[len] = (uint8_t)state;
                p[len + 2] = (uint8_t)(id >> 8);
                p[len + 3] = (uint8_t)id;
                len += 4;
        }
        return len;
}

static int cmd_stpg(struct session *s, const char *what, const char *spec)
{
        uint8_t param[64];
        uint32_t len = stpg_param(spec, param, sizeof(param));
        if (len <= 4)
                return -EINVAL;
        uint8_t cdb[12] = {0xa4, 0x0a};
        put_be32(cdb + 6, len);
        struct scsi_task *t = scsi_create_task(12, cdb, SCSI_XFER_WRITE, (int)len);
        if (t == NULL) {
                printf("stpg: ERROR cannot allocate task\n");
                return -EIO;
        }
        struct iscsi_data data = {.data = param, .size = len};
        uint64_t t0 = now_ms();
        if (iscsi_scsi_command_sync(s->iscsi, s->lun, t, &data) == NULL) {
                printf("stpg: ERROR transport: %s\n", iscsi_get_error(s->iscsi));
                scsi_free_scsi_task(t);
                return -EIO;
        }
        print_status(what, t);
        printf(" ms=%llu\n", (unsigned long long)(now_ms() - t0));
        scsi_free_scsi_task(t);
        return 0;
}

/* Runs one command; 0, -EINVAL for an unknown command, another -errno on transport. */
static int run_command(struct session *s, const char *cmd)
{
        if (strcmp(cmd, "rtpg") == 0)
                return cmd_rtpg(s, cmd, false);
        if (strcmp(cmd, "rtpg-ext") == 0)
                return cmd_rtpg(s, cmd, true);
        if (strcmp(cmd, "inquiry") == 0)
                return cmd_inquiry(s, cmd);
        if (strcmp(cmd, "tur") == 0) {
                uint8_t cdb[6] = {0};
                return cmd_simple(s, cmd, cdb, 6, 0);
        }
        if (strcmp(cmd, "read") == 0) {
                uint8_t cdb[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
                return cmd_simple(s, cmd, cdb, 10, READ_BUF_LEN);
        }
        if (strncmp(cmd, "wait ", 5) == 0 && cmd[5])
                return cmd_wait(s, cmd, cmd + 5);
        if (strncmp(cmd, "stpg ", 5) == 0 && cmd[5])
                return cmd_stpg(s, "stpg", cmd + 5);
        return -EINVAL;
}

static void usage(FILE *f)
{
        fprintf(f, "usage: tdm-alua [--initiator IQN] URL COMMAND...\n"
                   "commands: rtpg | rtpg-ext | tur | read | inquiry | wait PATH | stpg "
                   "ID:STATE[,ID:STATE...]\n");
}

int main(int argc, char **argv)
{
        /* A connection the target reset is an error to report, not a signal to die of. */
        signal(SIGPIPE, SIG_IGN);
        static const struct option longopts[] = {
            {"initiator", required_argument, NULL, 'i'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        const char *initiator = "iqn.2026-11.io.tandem:tdm-alua";
        int opt;
        while ((opt = getopt_long(argc, argv, "+i:h", longopts, NULL)) != -1) {
                switch (opt) {
                case 'i':
                        initiator = optarg;
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
        struct session s = {0};
        s.iscsi = iscsi_create_context(initiator);
        if (s.iscsi == NULL) {
                printf("login: failed: cannot create a libiscsi context\n");
                return 1;
        }
        struct iscsi_url *url = iscsi_parse_full_url(s.iscsi, argv[optind]);
        if (url == NULL) {
                printf("login: failed: bad URL: %s\n", iscsi_get_error(s.iscsi));
                iscsi_destroy_context(s.iscsi);
                return 2;
        }
        iscsi_set_targetname(s.iscsi, url->target);
        iscsi_set_session_type(s.iscsi, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(s.iscsi, ISCSI_HEADER_DIGEST_NONE);
        /* A reconnect would be a new nexus: its attentions are not the ones asked about. */
        iscsi_set_noautoreconnect(s.iscsi, 1);
        s.lun = url->lun;
        int rc = 0;
        if (iscsi_full_connect_sync(s.iscsi, url->portal, url->lun) != 0) {
                printf("login: failed: %s\n", iscsi_get_error(s.iscsi));
                rc = 1;
                goto out;
        }
        printf("login: ok\n");
        for (int i = optind + 1; i < argc; i++) {
                int r = run_command(&s, argv[i]);
                if (r == -EINVAL) {
                        printf("%s: ERROR unknown command\n", argv[i]);
                        rc = 2;
                        break;
                }
                if (r != 0) {
                        rc = 3;
                        break;
                }
        }
        if (rc != 3)
                iscsi_logout_sync(s.iscsi);
out:
        iscsi_destroy_url(url);
        iscsi_destroy_context(s.iscsi);
        return rc;
}
