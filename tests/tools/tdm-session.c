/*
 * tdm-session: one libiscsi session that runs a script of SCSI commands given on the command
 * line, and can hold the session open between them until the test script says go on.
 *
 *   tdm-session [--initiator IQN] URL COMMAND...
 *
 * URL is libiscsi's: iscsi://[USER%SECRET@]HOST:PORT/IQN/LUN[?target_user=U&target_password=P]
 * (target_user/target_password: mutual CHAP, the initiator checks the target's answer). The
 * session asks for HeaderDigest=None,CRC32C unless the URL says otherwise.
 * Commands (one argument each), with the block size taken from READ CAPACITY(16):
 *
 *   tur                      TEST UNIT READY
 *   read LBA BLOCKS [PAT]    READ(10); with PAT (a byte), every byte must equal it
 *   write LBA BLOCKS PAT     WRITE(10) of PAT bytes
 *   write-fua LBA BLOCKS PAT WRITE(10) with FUA
 *   caw LBA OLD NEW          COMPARE AND WRITE of one block: every byte OLD, then NEW
 *   sync                     SYNCHRONIZE CACHE(10) of the whole LUN
 *   report-luns              REPORT LUNS, prints luns=0,1,...
 *   get-wce                  MODE SENSE(10) caching page, prints wce=0|1
 *   set-wce 0|1              MODE SENSE(10) + MODE SELECT(10) of the caching page
 *   wait PATH                keep the session (answering target pings) until PATH exists
 *
 * Prints "login: ok local=ADDR:PORT" and then one line per command: the command, ": ", the
 * SCSI status (GOOD, CHECK_CONDITION K/ASC/ASCQ, ...) and what it read. Exit status: 0 when
 * every command got a SCSI status (whatever it was), 1 when the login failed, 2 on a usage
 * error, 3 when the transport failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "tandem/byteorder.h"

#define WAIT_LIMIT_MS      120000
#define CACHING_PAGE       0x08
#define MODE_HDR10_LEN     8
#define MODE_BUF_LEN       255
#define MAX_REPORTED_LUNS  256
#define REPORT_LUNS_BUFLEN (8 + 8 * MAX_REPORTED_LUNS)

struct session {
        struct iscsi_context *iscsi;
        int lun;
        uint32_t block_size;
        uint64_t blocks;
};

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Status word printed after "CMD: ". */
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
        case SCSI_STATUS_BUSY:
                printf("BUSY");
                break;
        case SCSI_STATUS_RESERVATION_CONFLICT:
                printf("RESERVATION_CONFLICT");
                break;
        case SCSI_STATUS_TASK_SET_FULL:
                printf("TASK_SET_FULL");
                break;
        default:
                printf("STATUS_0x%02x", (unsigned)t->status & 0xff);
                break;
        }
}

/*
 * Run one CDB; returns the finished task (caller frees) or NULL on a transport error, which
 * is printed. data/len: what a write sends.
 */
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

static int read_capacity(struct session *s)
{
        uint8_t cdb[16] = {0x9e, 0x10};
        put_be32(cdb + 10, 32);
        struct scsi_task *t = run_cdb(s, "read-capacity", cdb, 16, SCSI_XFER_READ, 32, NULL);
        if (t == NULL)
                return -EIO;
        int rc = 0;
        if (t->status != SCSI_STATUS_GOOD || t->datain.size < 12) {
                printf("read-capacity: ");
                print_status(t);
                printf("\n");
                rc = -EIO;
        } else {
                s->blocks = get_be64(t->datain.data) + 1;
                s->block_size = get_be32(t->datain.data + 8);
        }
        scsi_free_scsi_task(t);
        return rc;
}

/* Finish a command line: status, then extra text. Returns 0, or -EIO if t is NULL. */
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

static int cmd_tur(struct session *s, const char *what)
{
        uint8_t cdb[6] = {0};
        return report(what, run_cdb(s, what, cdb, 6, SCSI_XFER_NONE, 0, NULL), "");
}

static int cmd_read(struct session *s, const char *what, uint32_t lba, uint16_t blocks, int pat)
{
        uint8_t cdb[10] = {0x28};
        uint32_t len = (uint32_t)blocks * s->block_size;
        char extra[96] = "";
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, blocks);
        struct scsi_task *t = run_cdb(s, what, cdb, 10, SCSI_XFER_READ, len, NULL);
        if (t != NULL && t->status == SCSI_STATUS_GOOD && pat >= 0) {
                if ((uint32_t)t->datain.size != len) {
                        snprintf(extra, sizeof(extra), "data=short(%d of %u)", t->datain.size, len);
                } else {
                        snprintf(extra, sizeof(extra), "data=ok");
                        for (uint32_t i = 0; i < len; i++) {
                                if (t->datain.data[i] != pat) {
                                        snprintf(extra, sizeof(extra),
                                                 "data=mismatch at byte %u (0x%02x)", i,
                                                 t->datain.data[i]);
                                        break;
                                }
                        }
                }
        }
        return report(what, t, extra);
}

static int cmd_write(struct session *s, const char *what, uint32_t lba, uint16_t blocks, int pat,
                     bool fua)
{
        uint8_t cdb[10] = {0x2a, fua ? 0x08 : 0};
        uint32_t len = (uint32_t)blocks * s->block_size;
        uint8_t *buf = malloc(len ? len : 1);
        if (buf == NULL) {
                printf("%s: ERROR out of memory\n", what);
                return -ENOMEM;
        }
        memset(buf, pat, len);
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, blocks);
        int rc = report(what, run_cdb(s, what, cdb, 10, SCSI_XFER_WRITE, len, buf), "");
        free(buf);
        return rc;
}

static int cmd_caw(struct session *s, const char *what, uint32_t lba, int old_pat, int new_pat)
{
        uint8_t cdb[16] = {0x89};
        uint32_t bs = s->block_size;
        uint8_t *buf = malloc(2 * (size_t)bs);
        if (buf == NULL) {
                printf("%s: ERROR out of memory\n", what);
                return -ENOMEM;
        }
        memset(buf, old_pat, bs);
        memset(buf + bs, new_pat, bs);
        put_be64(cdb + 2, lba);
        cdb[13] = 1;
        int rc = report(what, run_cdb(s, what, cdb, 16, SCSI_XFER_WRITE, 2 * bs, buf), "");
        free(buf);
        return rc;
}

static int cmd_sync(struct session *s, const char *what)
{
        uint8_t cdb[10] = {0x35};
        return report(what, run_cdb(s, what, cdb, 10, SCSI_XFER_NONE, 0, NULL), "");
}

static int cmd_report_luns(struct session *s, const char *what)
{
        uint8_t cdb[12] = {0xa0};
        char extra[512] = "luns=";
        put_be32(cdb + 6, REPORT_LUNS_BUFLEN);
        struct scsi_task *t = run_cdb(s, what, cdb, 12, SCSI_XFER_READ, REPORT_LUNS_BUFLEN, NULL);
        if (t != NULL && t->status == SCSI_STATUS_GOOD && t->datain.size >= 8) {
                uint32_t list_len = get_be32(t->datain.data);
                size_t n = strlen(extra);
                for (uint32_t off = 8;
                     off + 8 <= 8 + list_len && off + 8 <= (uint32_t)t->datain.size; off += 8) {
                        const uint8_t *e = t->datain.data + off;
                        /* peripheral (00b) or flat (01b) single-level addressing */
                        unsigned lun = ((e[0] & 0x3fu) << 8) | e[1];
                        n += (size_t)snprintf(extra + n, sizeof(extra) - n, "%s%u",
                                              off == 8 ? "" : ",", lun);
                        if (n >= sizeof(extra))
                                break;
                }
        } else {
                extra[0] = 0;
        }
        return report(what, t, extra);
}

/* MODE SENSE(10) of the current caching page into buf; returns the task (caller frees). */
static struct scsi_task *mode_sense_caching(struct session *s, const char *what)
{
        uint8_t cdb[10] = {0x5a, 0x08, CACHING_PAGE};
        put_be16(cdb + 7, MODE_BUF_LEN);
        return run_cdb(s, what, cdb, 10, SCSI_XFER_READ, MODE_BUF_LEN, NULL);
}

/* Offset of the caching page in a MODE SENSE(10) answer, or -1. */
static int caching_page_offset(const struct scsi_task *t)
{
        if (t->status != SCSI_STATUS_GOOD || t->datain.size < MODE_HDR10_LEN)
                return -1;
        int off = MODE_HDR10_LEN + (t->datain.data[6] << 8 | t->datain.data[7]);
        if (off + 3 > t->datain.size || (t->datain.data[off] & 0x3f) != CACHING_PAGE)
                return -1;
        return off;
}

static int cmd_get_wce(struct session *s, const char *what)
{
        struct scsi_task *t = mode_sense_caching(s, what);
        char extra[32] = "";
        if (t != NULL) {
                int off = caching_page_offset(t);
                if (off >= 0)
                        snprintf(extra, sizeof(extra), "wce=%d",
                                 (t->datain.data[off + 2] & 0x04) ? 1 : 0);
                else if (t->status == SCSI_STATUS_GOOD)
                        snprintf(extra, sizeof(extra), "no-caching-page");
        }
        return report(what, t, extra);
}

static int cmd_set_wce(struct session *s, const char *what, int wce)
{
        uint8_t buf[MODE_BUF_LEN];
        struct scsi_task *t = mode_sense_caching(s, what);
        if (t == NULL)
                return -EIO;
        int off = caching_page_offset(t);
        if (off < 0)
                return report(what, t, "(mode sense)");
        int page_len = t->datain.data[off + 1] + 2;
        if (off + page_len > t->datain.size) {
                scsi_free_scsi_task(t);
                printf("%s: ERROR truncated caching page\n", what);
                return 0;
        }
        /* Parameter list: header (mode data length reserved, zero) + descriptors + page. */
        int len = off + page_len;
        memcpy(buf, t->datain.data, (size_t)len);
        scsi_free_scsi_task(t);
        buf[0] = buf[1] = 0;
        buf[off] &= 0x3f; /* PS bit is reserved in MODE SELECT */
        buf[off + 2] = (uint8_t)((buf[off + 2] & ~0x04) | (wce ? 0x04 : 0));
        uint8_t cdb[10] = {0x55, 0x10}; /* PF=1, SP=0 */
        put_be16(cdb + 7, (uint16_t)len);
        return report(what, run_cdb(s, what, cdb, 10, SCSI_XFER_WRITE, (uint32_t)len, buf), "");
}

/* Keep the session alive (answering NOP-In pings) until path exists. */
static int cmd_wait(struct session *s, const char *what, const char *path)
{
        uint64_t deadline = now_ms() + WAIT_LIMIT_MS;
        printf("%s: waiting\n", what);
        fflush(stdout);
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

static bool parse_u32(const char *s, uint32_t *out)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 0);
        if (errno || end == s || *end || v > UINT32_MAX)
                return false;
        *out = (uint32_t)v;
        return true;
}

/* Runs one command; returns 0, -EINVAL on a malformed command, another errno on transport. */
static int run_command(struct session *s, const char *cmd)
{
        char verb[32], a[64] = "", b[64] = "", c[64] = "";
        uint32_t lba, blocks, pat;
        int n = sscanf(cmd, "%31s %63s %63s %63s", verb, a, b, c);
        if (n < 1)
                return -EINVAL;
        if (strcmp(verb, "tur") == 0 && n == 1)
                return cmd_tur(s, cmd);
        if (strcmp(verb, "sync") == 0 && n == 1)
                return cmd_sync(s, cmd);
        if (strcmp(verb, "report-luns") == 0 && n == 1)
                return cmd_report_luns(s, cmd);
        if (strcmp(verb, "get-wce") == 0 && n == 1)
                return cmd_get_wce(s, cmd);
        if (strcmp(verb, "set-wce") == 0 && n == 2 && (!strcmp(a, "0") || !strcmp(a, "1")))
                return cmd_set_wce(s, cmd, a[0] == '1');
        if (strcmp(verb, "wait") == 0 && n == 2)
                return cmd_wait(s, cmd, a);
        uint32_t old_pat, new_pat;
        if (strcmp(verb, "caw") == 0 && n == 4 && parse_u32(a, &lba) && parse_u32(b, &old_pat) &&
            parse_u32(c, &new_pat) && old_pat <= 0xff && new_pat <= 0xff)
                return cmd_caw(s, cmd, lba, (int)old_pat, (int)new_pat);
        bool rw = !strcmp(verb, "read") || !strcmp(verb, "write") || !strcmp(verb, "write-fua");
        if (!rw || n < 3 || !parse_u32(a, &lba) || !parse_u32(b, &blocks) || blocks > 0xffff)
                return -EINVAL;
        bool has_pat = n == 4 && parse_u32(c, &pat) && pat <= 0xff;
        if (strcmp(verb, "read") == 0 && (n == 3 || has_pat))
                return cmd_read(s, cmd, lba, (uint16_t)blocks, has_pat ? (int)pat : -1);
        if (!has_pat)
                return -EINVAL;
        return cmd_write(s, cmd, lba, (uint16_t)blocks, (int)pat, verb[5] == '-');
}

static void print_local_address(struct iscsi_context *iscsi)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char host[INET6_ADDRSTRLEN] = "?";
        unsigned port = 0;
        if (getsockname(iscsi_get_fd(iscsi), (struct sockaddr *)&ss, &len) == 0) {
                if (ss.ss_family == AF_INET) {
                        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
                        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
                        port = ntohs(in->sin_port);
                } else if (ss.ss_family == AF_INET6) {
                        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                        port = ntohs(in6->sin6_port);
                }
        }
        printf("login: ok local=%s:%u\n", host, port);
}

static void usage(FILE *f)
{
        fprintf(f, "usage: tdm-session [--initiator IQN] URL COMMAND...\n"
                   "commands: tur | read LBA BLOCKS [PAT] | write LBA BLOCKS PAT |\n"
                   "          write-fua LBA BLOCKS PAT | sync | report-luns | get-wce |\n"
                   "          set-wce 0|1 | caw LBA OLD NEW | wait PATH\n");
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
        const char *initiator = "iqn.2026-11.io.tandem:tdm-session";
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
        /* Before parsing, so that a header_digest argument in the URL wins. */
        iscsi_set_header_digest(s.iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
        struct iscsi_url *url = iscsi_parse_full_url(s.iscsi, argv[optind]);
        if (url == NULL) {
                printf("login: failed: bad URL: %s\n", iscsi_get_error(s.iscsi));
                iscsi_destroy_context(s.iscsi);
                return 2;
        }
        iscsi_set_targetname(s.iscsi, url->target);
        iscsi_set_session_type(s.iscsi, ISCSI_SESSION_NORMAL);
        if (url->user[0])
                iscsi_set_initiator_username_pwd(s.iscsi, url->user, url->passwd);
        if (url->target_user[0])
                iscsi_set_target_username_pwd(s.iscsi, url->target_user, url->target_passwd);
        iscsi_set_noautoreconnect(s.iscsi, 1);
        s.lun = url->lun;
        int rc = 0;
        if (iscsi_full_connect_sync(s.iscsi, url->portal, url->lun) != 0) {
                printf("login: failed: %s\n", iscsi_get_error(s.iscsi));
                rc = 1;
                goto out;
        }
        print_local_address(s.iscsi);
        if (read_capacity(&s) != 0) {
                rc = 3;
                goto out;
        }
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
        if (rc != 3)
                iscsi_logout_sync(s.iscsi);
out:
        iscsi_destroy_url(url);
        iscsi_destroy_context(s.iscsi);
        return rc;
}
