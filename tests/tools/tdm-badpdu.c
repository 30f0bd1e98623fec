/*
 * tdm-badpdu: a catalogue of malformed iSCSI input, sent over raw TCP by a minimal initiator of
 * our own (no libiscsi), one case at a time:
 *
 *   tdm-badpdu --portal 127.0.0.1:3260 --target IQN [--lun N] [--chap-target IQN
 *              --chap-user NAME] [--cases a,b,...] [--list] [--cycles N] [--target-pid PID]
 *              [--limits max_sessions=N,per_initiator=N,...]
 *
 * Each case prints "badinput: case=NAME result=pass|fail|skip detail=...". After every case
 * the tool checks that the target still serves: a session opened before the first case must
 * still answer TEST UNIT READY, and a fresh login must work. Exit status 1 if any case failed.
 *
 * Expected target behaviour per RFC 7143 / SPC, where the brief leaves a choice, accepts each
 * reaction a conforming target may have and reports which one it saw. A few cases check what
 * the malformed ones rely on, on the good path: digest_write_read (HeaderDigest and DataDigest
 * CRC32C over a WRITE and a READ; tests/clients/run uses it too), nop_ping_data.
 *
 * The resource cases (collect_flood, collect_flood_tasks, slow_reader, read_burst) flood one
 * connection with immediate commands, which the CmdSN window does not hold back, and check
 * that the target bounds what it holds for it and keeps serving the other sessions; with
 * --target-pid they also bound the growth of the target's resident memory.
 *
 * The limit cases (limit_*, tdm-badpdu-limits.inc) run only with --limits, which tells them
 * the target's configured iscsi.* limits (tests/limits/run starts a target with small ones).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "tandem/iscsi_pdu.h"

#define IO_TIMEOUT_MS    5000
#define MAX_PDU_DATA     (16u << 20)
#define OUR_MAX_RECV_DSL 262144u
#define DETAIL_LEN       512

/* ------------------------------------------------------------------------------------------ */
/* CRC32C (Castagnoli, reflected), table driven: the tool stays free of ISA-L. */

static uint32_t crc32c_table[256];

static void crc32c_init(void)
{
        for (uint32_t i = 0; i < 256; i++) {
                uint32_t c = i;
                for (int k = 0; k < 8; k++)
                        c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
                crc32c_table[i] = c;
        }
}

static uint32_t crc32c(const void *buf, size_t len)
{
        const uint8_t *p = buf;
        uint32_t crc = 0xffffffffu;
        while (len--)
                crc = (crc >> 8) ^ crc32c_table[(crc ^ *p++) & 0xff];
        return crc ^ 0xffffffffu;
}

/* SAM single-level LUN: peripheral addressing below 256, flat space addressing above. (The
 * library's iscsi_lun_encode lives in tandem_core, which tools do not link.) */
static void lun_encode(uint8_t *p, uint64_t lun)
{
        memset(p, 0, 8);
        if (lun < 256) {
                p[1] = (uint8_t)lun;
        } else {
                p[0] = (uint8_t)(0x40 | ((lun >> 8) & 0x3f));
                p[1] = (uint8_t)lun;
        }
}

/* ------------------------------------------------------------------------------------------ */
/* Connection and PDU framing */

struct conn {
        int fd;
        bool ffp; /* full feature phase: the negotiated digests apply from here on */
        bool header_digest;
        bool data_digest;
        char header_digest_answer[16];
        uint8_t isid[6];
        uint16_t tsih;
        uint32_t itt;
        uint32_t cmdsn;
        uint32_t exp_statsn;
        /* negotiated */
        uint32_t target_max_recv_dsl;
        uint32_t first_burst;
        uint32_t max_burst;
        bool immediate_data;
        bool initial_r2t;
        char data_digest_answer[16];
        /* received data segments whose CRC32C data digest was checked and right */
        unsigned data_digests_ok;
};

struct pdu {
        uint8_t bhs[ISCSI_BHS_LEN];
        uint8_t *data;
        uint32_t dlen;
};

struct ctx {
        char host[64];
        uint16_t port;
        const char *target;
        const char *initiator;
        uint64_t lun;
        const char *chap_target;
        const char *chap_user;
        unsigned cycles;
        pid_t target_pid; /* 0: unknown, memory figures are not checked */
        /* --limits: the target's iscsi.* limits; the limit cases run only when known. */
        struct {
                bool on;
                unsigned max_sessions, per_initiator, pending, rate, burst;
                unsigned login_timeout_s, output_timeout_s;
                uint32_t output, write_data;
        } lim;
        uint32_t pattern_seed;
        uint8_t *pattern; /* PATTERN_BYTES, what the read cases wrote at PATTERN_BASE */
        bool pattern_written;
        struct conn healthy;
        bool healthy_up;
        uint32_t block_size;
        uint64_t num_blocks;
        bool stalled_lun; /* --stalled-lun: the LUN's store holds every request for seconds */
};

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pdu_free(struct pdu *p)
{
        free(p->data);
        p->data = NULL;
        p->dlen = 0;
}

/*
 * rcvbuf > 0 sets SO_RCVBUF before connecting, so the TCP window stays that small; src (an
 * IPv4 address of loopback, e.g. 127.0.0.21) is the source address, NULL any.
 */
static int tcp_connect_from(const struct ctx *c, int rcvbuf, const char *src)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c->port)};
        struct timeval tv = {.tv_sec = IO_TIMEOUT_MS / 1000};
        int one = 1;
        int fd;

        if (inet_pton(AF_INET, c->host, &sa.sin_addr) != 1)
                return -EINVAL;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (rcvbuf > 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
        if (src) {
                struct sockaddr_in me = {.sin_family = AF_INET};
                if (inet_pton(AF_INET, src, &me.sin_addr) != 1 ||
                    bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0) {
                        int err = errno ? -errno : -EINVAL;
                        close(fd);
                        return err;
                }
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        return fd;
}

static int tcp_connect_rcvbuf(const struct ctx *c, int rcvbuf)
{
        return tcp_connect_from(c, rcvbuf, NULL);
}

static int tcp_connect(const struct ctx *c)
{
        return tcp_connect_rcvbuf(c, 0);
}

static void conn_init(struct conn *cn)
{
        memset(cn, 0, sizeof(*cn));
        cn->fd = -1;
        cn->isid[0] = 0x80; /* random ISID format */
        for (int i = 1; i < 6; i++)
                cn->isid[i] = (uint8_t)(rand() & 0xff);
        cn->itt = (uint32_t)rand() & 0xffff;
        cn->cmdsn = 1;
        cn->target_max_recv_dsl = 8192;
}

static void conn_close(struct conn *cn)
{
        if (cn->fd >= 0)
                close(cn->fd);
        cn->fd = -1;
}

/* Close with a TCP RST rather than a FIN. */
static void conn_abort(struct conn *cn)
{
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        if (cn->fd >= 0)
                setsockopt(cn->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        conn_close(cn);
}

static int send_all(int fd, const void *buf, size_t len)
{
        const uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Read exactly len bytes; -ECONNRESET when the peer closed, -ETIMEDOUT on silence. */
static int recv_all(int fd, void *buf, size_t len)
{
        uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = recv(fd, p, len, 0);
                if (n == 0)
                        return -ECONNRESET;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return -ETIMEDOUT;
                        return errno == EPIPE ? -ECONNRESET : -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* What pdu_send_raw gets wrong on purpose. */
enum corruption {
        CORRUPT_HEADER_DIGEST = 1u << 0,
        CORRUPT_DATA_DIGEST = 1u << 1,
};

/*
 * Send one PDU: BHS (+AHS) (+header digest) + data + pad (+data digest).
 * corrupt (enum corruption bits) sends digests that do not match.
 */
static int pdu_send_raw(struct conn *cn, uint8_t *bhs, const uint8_t *ahs, uint32_t ahs_len,
                        const void *data, uint32_t dlen, unsigned corrupt)
{
        static const uint8_t zeros[4];
        uint8_t digest[4];
        int rc;

        bhs[4] = (uint8_t)(ahs_len / 4);
        iscsi_bhs_set_dsl(bhs, dlen);
        uint8_t *hdr = malloc(ISCSI_BHS_LEN + ahs_len);
        if (hdr == NULL)
                return -ENOMEM;
        memcpy(hdr, bhs, ISCSI_BHS_LEN);
        if (ahs_len)
                memcpy(hdr + ISCSI_BHS_LEN, ahs, ahs_len);
        rc = send_all(cn->fd, hdr, ISCSI_BHS_LEN + ahs_len);
        if (rc == 0 && cn->ffp && cn->header_digest) {
                uint32_t crc = crc32c(hdr, ISCSI_BHS_LEN + ahs_len);
                put_le32(digest, (corrupt & CORRUPT_HEADER_DIGEST) ? crc ^ 0x5a5a5a5a : crc);
                rc = send_all(cn->fd, digest, 4);
        }
        free(hdr);
        if (rc == 0 && dlen > 0) {
                rc = send_all(cn->fd, data, dlen);
                if (rc == 0 && iscsi_pad4(dlen))
                        rc = send_all(cn->fd, zeros, iscsi_pad4(dlen));
                if (rc == 0 && cn->ffp && cn->data_digest) {
                        uint8_t *padded = calloc(1, dlen + 4);
                        if (padded == NULL)
                                return -ENOMEM;
                        memcpy(padded, data, dlen);
                        uint32_t crc = crc32c(padded, dlen + iscsi_pad4(dlen));
                        put_le32(digest, (corrupt & CORRUPT_DATA_DIGEST) ? crc ^ 0xa5a5a5a5 : crc);
                        free(padded);
                        rc = send_all(cn->fd, digest, 4);
                }
        }
        return rc;
}

static int pdu_send(struct conn *cn, uint8_t *bhs, const void *data, uint32_t dlen)
{
        return pdu_send_raw(cn, bhs, NULL, 0, data, dlen, 0);
}

/* Receive one PDU (any opcode). Checks header and data digests when negotiated. */
static int pdu_recv_any(struct conn *cn, struct pdu *out)
{
        uint8_t ahs[ISCSI_MAX_AHS_LEN], digest[4];
        int rc;

        memset(out, 0, sizeof(*out));
        rc = recv_all(cn->fd, out->bhs, ISCSI_BHS_LEN);
        if (rc != 0)
                return rc;
        uint32_t ahs_len = iscsi_bhs_ahs_len(out->bhs);
        if (ahs_len && (rc = recv_all(cn->fd, ahs, ahs_len)) != 0)
                return rc;
        bool hd = cn->ffp && cn->header_digest, dd = cn->ffp && cn->data_digest;
        if (hd) {
                if ((rc = recv_all(cn->fd, digest, 4)) != 0)
                        return rc;
                uint8_t hdr[ISCSI_BHS_LEN + ISCSI_MAX_AHS_LEN];
                memcpy(hdr, out->bhs, ISCSI_BHS_LEN);
                memcpy(hdr + ISCSI_BHS_LEN, ahs, ahs_len);
                uint8_t want[4];
                put_le32(want, crc32c(hdr, ISCSI_BHS_LEN + ahs_len));
                if (memcmp(want, digest, 4) != 0)
                        return -EBADMSG;
        }
        out->dlen = iscsi_bhs_dsl(out->bhs);
        if (out->dlen > MAX_PDU_DATA)
                return -EMSGSIZE;
        uint32_t total = out->dlen + iscsi_pad4(out->dlen) + (dd && out->dlen ? 4 : 0);
        if (total) {
                out->data = malloc(total + 1);
                if (out->data == NULL)
                        return -ENOMEM;
                if ((rc = recv_all(cn->fd, out->data, total)) != 0) {
                        pdu_free(out);
                        return rc;
                }
                if (dd && out->dlen) {
                        uint32_t padded = out->dlen + iscsi_pad4(out->dlen);
                        uint8_t want[4];
                        put_le32(want, crc32c(out->data, padded));
                        if (memcmp(want, out->data + padded, 4) != 0) {
                                pdu_free(out);
                                return -EBADMSG;
                        }
                        cn->data_digests_ok++;
                }
                out->data[out->dlen] = 0;
        }
        return 0;
}

static void note_statsn(struct conn *cn, const struct pdu *p)
{
        uint8_t op = iscsi_bhs_opcode(p->bhs);
        /* StatSN is meaningful in responses that carry status. */
        if (op == ISCSI_OP_SCSI_RSP || op == ISCSI_OP_NOP_IN || op == ISCSI_OP_LOGOUT_RSP ||
            op == ISCSI_OP_TEXT_RSP || op == ISCSI_OP_REJECT || op == ISCSI_OP_TMF_RSP ||
            (op == ISCSI_OP_DATA_IN && (p->bhs[1] & 0x01)))
                cn->exp_statsn = get_be32(p->bhs + 24) + 1;
}

/* Answer a target NOP-In ping (TTT != 0xffffffff), so long waits do not look dead. */
static void answer_ping(struct conn *cn, const struct pdu *p)
{
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        bhs[0] = 0x40 | ISCSI_OP_NOP_OUT;
        bhs[1] = 0x80;
        memcpy(bhs + 8, p->bhs + 8, 8);
        put_be32(bhs + 16, 0xffffffffu);
        memcpy(bhs + 20, p->bhs + 20, 4);
        put_be32(bhs + 24, cn->cmdsn);
        put_be32(bhs + 28, cn->exp_statsn);
        pdu_send(cn, bhs, NULL, 0);
}

/*
 * Receive the next PDU the test cares about: skips target pings (answering them) and async
 * messages. Returns 0, -ECONNRESET, -ETIMEDOUT or another negative errno.
 */
static int pdu_recv(struct conn *cn, struct pdu *out)
{
        uint64_t deadline = now_ms() + IO_TIMEOUT_MS;
        for (;;) {
                int rc = pdu_recv_any(cn, out);
                if (rc != 0)
                        return rc;
                note_statsn(cn, out);
                uint8_t op = iscsi_bhs_opcode(out->bhs);
                if (op == ISCSI_OP_NOP_IN && get_be32(out->bhs + 20) != 0xffffffffu) {
                        answer_ping(cn, out);
                } else if (op != ISCSI_OP_ASYNC) {
                        return 0;
                }
                pdu_free(out);
                if (now_ms() > deadline)
                        return -ETIMEDOUT;
        }
}

/* Wait until the target closes the connection (true) or stays silent/keeps it (false). */
static bool wait_closed(struct conn *cn, unsigned timeout_ms, char *seen, size_t seenlen)
{
        uint64_t deadline = now_ms() + timeout_ms;
        seen[0] = 0;
        while (now_ms() < deadline) {
                struct pdu p;
                int rc = pdu_recv_any(cn, &p);
                if (rc == -ECONNRESET || rc == -EPIPE || rc == -EBADMSG)
                        return true;
                if (rc == -ETIMEDOUT)
                        return false;
                if (rc != 0)
                        return true;
                snprintf(seen, seenlen, "pdu 0x%02x", iscsi_bhs_opcode(p.bhs));
                pdu_free(&p);
        }
        return false;
}

/* ------------------------------------------------------------------------------------------ */
/* Login */

struct text {
        char buf[70000];
        uint32_t len;
};

static void text_add(struct text *t, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, sizeof(t->buf) - t->len, fmt, ap);
        va_end(ap);
        if (n > 0 && t->len + (uint32_t)n + 1 < sizeof(t->buf))
                t->len += (uint32_t)n + 1; /* keep the NUL separator */
}

/* Value of key in a login/text data segment, or NULL. */
static const char *text_get(const struct pdu *p, const char *key)
{
        size_t klen = strlen(key);
        uint32_t off = 0;
        while (off < p->dlen) {
                const char *kv = (const char *)p->data + off;
                size_t len = strnlen(kv, p->dlen - off);
                if (len > klen && strncmp(kv, key, klen) == 0 && kv[klen] == '=')
                        return kv + klen + 1;
                off += (uint32_t)len + 1;
        }
        return NULL;
}

static int login_send(struct conn *cn, int csg, int nsg, bool transit, const struct text *t)
{
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        bhs[0] = 0x40 | ISCSI_OP_LOGIN_REQ;
        bhs[1] = (uint8_t)((transit ? 0x80 : 0) | (csg << 2) | (transit ? nsg : 0));
        memcpy(bhs + 8, cn->isid, 6);
        put_be16(bhs + 14, cn->tsih);
        put_be32(bhs + 16, cn->itt);
        put_be32(bhs + 24, cn->cmdsn);
        put_be32(bhs + 28, cn->exp_statsn);
        return pdu_send(cn, bhs, t ? t->buf : NULL, t ? t->len : 0);
}

struct login_result {
        int rc; /* transport error, or 0 */
        uint8_t status_class;
        uint8_t status_detail;
        bool transit;
        int nsg;
        struct pdu rsp;
};

static void login_recv(struct conn *cn, struct login_result *lr)
{
        memset(lr, 0, sizeof(*lr));
        lr->rc = pdu_recv(cn, &lr->rsp);
        if (lr->rc != 0)
                return;
        if (iscsi_bhs_opcode(lr->rsp.bhs) != ISCSI_OP_LOGIN_RSP) {
                lr->rc = -EPROTO;
                return;
        }
        lr->status_class = lr->rsp.bhs[36];
        lr->status_detail = lr->rsp.bhs[37];
        lr->transit = (lr->rsp.bhs[1] & 0x80) != 0;
        lr->nsg = lr->rsp.bhs[1] & 0x03;
        cn->tsih = get_be16(lr->rsp.bhs + 14);
        cn->exp_statsn = get_be32(lr->rsp.bhs + 24) + 1;
        if (lr->status_class == 0)
                cn->cmdsn = get_be32(lr->rsp.bhs + 28);
}

static void apply_operational(struct conn *cn, const struct pdu *rsp)
{
        const char *v;
        if ((v = text_get(rsp, "MaxRecvDataSegmentLength")))
                cn->target_max_recv_dsl = (uint32_t)strtoul(v, NULL, 10);
        if ((v = text_get(rsp, "HeaderDigest"))) {
                cn->header_digest = strcmp(v, "CRC32C") == 0;
                snprintf(cn->header_digest_answer, sizeof(cn->header_digest_answer), "%s", v);
        }
        if ((v = text_get(rsp, "DataDigest"))) {
                cn->data_digest = strcmp(v, "CRC32C") == 0;
                snprintf(cn->data_digest_answer, sizeof(cn->data_digest_answer), "%s", v);
        }
        if ((v = text_get(rsp, "ImmediateData")))
                cn->immediate_data = strcmp(v, "Yes") == 0;
        if ((v = text_get(rsp, "InitialR2T")))
                cn->initial_r2t = strcmp(v, "Yes") == 0;
        if ((v = text_get(rsp, "FirstBurstLength")))
                cn->first_burst = (uint32_t)strtoul(v, NULL, 10);
        if ((v = text_get(rsp, "MaxBurstLength")))
                cn->max_burst = (uint32_t)strtoul(v, NULL, 10);
}

struct login_opts {
        const char *target; /* NULL: discovery session */
        bool header_digest;
        bool data_digest;
        bool initial_r2t_no; /* offer InitialR2T=No (the target may still insist on Yes) */
        const char *extra_security_key; /* appended to the first PDU */
        const char *extra_operational_key;
        bool duplicate_operational_key;
        int rcvbuf;            /* > 0: SO_RCVBUF of the socket, set before connecting */
        const char *initiator; /* NULL: the tool's (--initiator) */
        const char *src;       /* source address, NULL: any */
        const uint8_t *isid;   /* 6 bytes; NULL: a random one */
};

static void operational_keys(struct text *t, const struct login_opts *o)
{
        text_add(t, "HeaderDigest=%s", o->header_digest ? "CRC32C" : "None");
        text_add(t, "DataDigest=%s", o->data_digest ? "CRC32C" : "None");
        text_add(t, "MaxRecvDataSegmentLength=%u", OUR_MAX_RECV_DSL);
        if (o->target) {
                text_add(t, "InitialR2T=%s", o->initial_r2t_no ? "No" : "Yes");
                text_add(t, "ImmediateData=Yes");
                text_add(t, "MaxBurstLength=262144");
                text_add(t, "FirstBurstLength=65536");
                text_add(t, "MaxOutstandingR2T=1");
                text_add(t, "DataPDUInOrder=Yes");
                text_add(t, "DataSequenceInOrder=Yes");
                text_add(t, "MaxConnections=1");
        }
        text_add(t, "DefaultTime2Wait=0");
        text_add(t, "DefaultTime2Retain=0");
        text_add(t, "ErrorRecoveryLevel=0");
        if (o->extra_operational_key)
                text_add(t, "%s", o->extra_operational_key);
        if (o->duplicate_operational_key)
                text_add(t, "DefaultTime2Wait=0");
}

/*
 * Full login: security stage with AuthMethod=None, operational stage, full feature phase.
 * On failure returns the last login result (status or transport error) in *lr.
 */
static int login(const struct ctx *c, struct conn *cn, const struct login_opts *o,
                 struct login_result *lr)
{
        struct text t = {.len = 0};
        int fd = tcp_connect_from(c, o->rcvbuf, o->src);

        memset(lr, 0, sizeof(*lr));
        if (fd < 0) {
                lr->rc = fd;
                return fd;
        }
        conn_init(cn);
        cn->fd = fd;
        if (o->isid)
                memcpy(cn->isid, o->isid, sizeof(cn->isid));
        text_add(&t, "InitiatorName=%s", o->initiator ? o->initiator : c->initiator);
        if (o->target) {
                text_add(&t, "SessionType=Normal");
                text_add(&t, "TargetName=%s", o->target);
        } else {
                text_add(&t, "SessionType=Discovery");
        }
        text_add(&t, "AuthMethod=None");
        if (o->extra_security_key)
                text_add(&t, "%s", o->extra_security_key);
        if (login_send(cn, 0, 1, true, &t) != 0) {
                lr->rc = -EIO;
                return -EIO;
        }
        login_recv(cn, lr);
        if (lr->rc != 0 || lr->status_class != 0)
                return -EACCES;
        /* Operational stage (unless the target already moved us to full feature phase). */
        for (int round = 0; !(lr->transit && lr->nsg == 3); round++) {
                if (round >= 4) {
                        lr->rc = -EPROTO;
                        return -EPROTO;
                }
                t.len = 0;
                if (round == 0)
                        operational_keys(&t, o);
                pdu_free(&lr->rsp);
                if (login_send(cn, 1, 3, true, &t) != 0) {
                        lr->rc = -EIO;
                        return -EIO;
                }
                login_recv(cn, lr);
                if (lr->rc != 0 || lr->status_class != 0)
                        return -EACCES;
                apply_operational(cn, &lr->rsp);
        }
        cn->ffp = true;
        /* Keep the last response for callers that inspect it. */
        return 0;
}

/* Logout (close the session) answered with success; the socket stays open. */
static int logout_answered(struct conn *cn)
{
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        struct pdu p;
        int rc;

        bhs[0] = 0x40 | ISCSI_OP_LOGOUT_REQ;
        bhs[1] = 0x80; /* close the session */
        put_be32(bhs + 16, ++cn->itt);
        put_be32(bhs + 24, cn->cmdsn);
        put_be32(bhs + 28, cn->exp_statsn);
        rc = pdu_send(cn, bhs, NULL, 0);
        if (rc == 0)
                rc = pdu_recv(cn, &p);
        if (rc == 0) {
                if (iscsi_bhs_opcode(p.bhs) != ISCSI_OP_LOGOUT_RSP || p.bhs[2] != 0)
                        rc = -EPROTO;
                pdu_free(&p);
        }
        return rc;
}

static int logout(struct conn *cn)
{
        int rc = logout_answered(cn);
        conn_close(cn);
        return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* SCSI commands */

struct scsi_result {
        int rc; /* transport: 0, -ECONNRESET, -ETIMEDOUT, or -EPROTO on a Reject */
        uint8_t status;
        uint8_t key, asc, ascq;
        uint8_t reject_reason;
        uint8_t resid_flags; /* O 0x04, U 0x02 of the PDU that carried the status */
        uint32_t residual;
        uint32_t data_in_bytes; /* Data-In payload bytes received */
        uint8_t data[256];
        uint32_t data_len;
};

#define RESID_O 0x04
#define RESID_U 0x02

static void parse_sense(const uint8_t *s, uint32_t len, struct scsi_result *r)
{
        if (len < 3)
                return;
        if ((s[0] & 0x7f) == 0x72 || (s[0] & 0x7f) == 0x73) {
                r->key = s[1] & 0x0f;
                r->asc = len > 2 ? s[2] : 0;
                r->ascq = len > 3 ? s[3] : 0;
        } else {
                r->key = s[2] & 0x0f;
                r->asc = len > 12 ? s[12] : 0;
                r->ascq = len > 13 ? s[13] : 0;
        }
}

static void build_scsi_cmd(struct conn *cn, const struct ctx *c, uint8_t *bhs, const uint8_t *cdb,
                           size_t cdblen, bool read, bool write, uint32_t edtl)
{
        memset(bhs, 0, ISCSI_BHS_LEN);
        bhs[0] = ISCSI_OP_SCSI_CMD;
        bhs[1] = (uint8_t)(0x80 | (read ? 0x40 : 0) | (write ? 0x20 : 0) | 0x01);
        lun_encode(bhs + 8, c->lun);
        put_be32(bhs + 16, ++cn->itt);
        put_be32(bhs + 20, edtl);
        put_be32(bhs + 24, cn->cmdsn++);
        put_be32(bhs + 28, cn->exp_statsn);
        memcpy(bhs + 32, cdb, cdblen < 16 ? cdblen : 16);
}

/* Collect the outcome of the command with this ITT: Data-In, SCSI Response or Reject. */
static void scsi_wait(struct conn *cn, uint32_t itt, struct scsi_result *r)
{
        for (;;) {
                struct pdu p;
                r->rc = pdu_recv(cn, &p);
                if (r->rc != 0)
                        return;
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                if (op == ISCSI_OP_REJECT) {
                        r->reject_reason = p.bhs[2];
                        r->rc = -EPROTO;
                        pdu_free(&p);
                        return;
                }
                if (iscsi_bhs_itt(p.bhs) != itt) {
                        pdu_free(&p);
                        continue;
                }
                if (op == ISCSI_OP_DATA_IN) {
                        uint32_t off = get_be32(p.bhs + 40);
                        for (uint32_t i = 0; i < p.dlen && off + i < sizeof(r->data); i++)
                                r->data[off + i] = p.data[i];
                        if (off + p.dlen > r->data_len)
                                r->data_len = off + p.dlen;
                        bool has_status = (p.bhs[1] & 0x01) != 0;
                        r->status = p.bhs[3];
                        r->data_in_bytes += p.dlen;
                        if (has_status) {
                                r->resid_flags = p.bhs[1] & (RESID_O | RESID_U);
                                r->residual = get_be32(p.bhs + 44);
                        }
                        pdu_free(&p);
                        if (has_status)
                                return;
                        continue;
                }
                if (op == ISCSI_OP_SCSI_RSP) {
                        r->status = p.bhs[3];
                        r->resid_flags = p.bhs[1] & (RESID_O | RESID_U);
                        r->residual = get_be32(p.bhs + 44);
                        if (p.dlen >= 2) {
                                uint32_t slen = get_be16(p.data);
                                if (slen > p.dlen - 2)
                                        slen = p.dlen - 2;
                                parse_sense(p.data + 2, slen, r);
                        }
                        pdu_free(&p);
                        return;
                }
                pdu_free(&p);
        }
}

static void scsi_exec(struct conn *cn, const struct ctx *c, const uint8_t *cdb, size_t cdblen,
                      uint32_t read_len, struct scsi_result *r)
{
        uint8_t bhs[ISCSI_BHS_LEN];
        memset(r, 0, sizeof(*r));
        build_scsi_cmd(cn, c, bhs, cdb, cdblen, read_len > 0, false, read_len);
        r->rc = pdu_send(cn, bhs, NULL, 0);
        if (r->rc == 0)
                scsi_wait(cn, iscsi_bhs_itt(bhs), r);
}

static const uint8_t cdb_tur[6] = {0x00};

/* TEST UNIT READY until GOOD, letting a pending unit attention go by. */
static int tur_ok(struct conn *cn, const struct ctx *c, char *why, size_t whylen)
{
        struct scsi_result r;
        for (int i = 0; i < 4; i++) {
                scsi_exec(cn, c, cdb_tur, sizeof(cdb_tur), 0, &r);
                if (r.rc != 0) {
                        snprintf(why, whylen, "TEST UNIT READY: %s", strerror(-r.rc));
                        return -EIO;
                }
                if (r.status == 0)
                        return 0;
                if (!(r.status == 2 && r.key == 6)) {
                        snprintf(why, whylen, "TEST UNIT READY: status 0x%02x sense %x/%02x/%02x",
                                 r.status, r.key, r.asc, r.ascq);
                        return -EIO;
                }
        }
        snprintf(why, whylen, "TEST UNIT READY: unit attention does not clear");
        return -EIO;
}

/* NOP-Out ping on a session: true when the matching NOP-In comes back. */
static bool nop_ok(struct conn *cn)
{
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        struct pdu p;
        bhs[0] = 0x40 | ISCSI_OP_NOP_OUT;
        bhs[1] = 0x80;
        put_be32(bhs + 16, ++cn->itt);
        put_be32(bhs + 20, 0xffffffffu);
        put_be32(bhs + 24, cn->cmdsn);
        put_be32(bhs + 28, cn->exp_statsn);
        if (pdu_send(cn, bhs, NULL, 0) != 0)
                return false;
        for (;;) {
                if (pdu_recv(cn, &p) != 0)
                        return false;
                bool match = iscsi_bhs_opcode(p.bhs) == ISCSI_OP_NOP_IN &&
                             iscsi_bhs_itt(p.bhs) == get_be32(bhs + 16);
                pdu_free(&p);
                if (match)
                        return true;
        }
}

/* ------------------------------------------------------------------------------------------ */
/* Cases. Each returns 1 pass, 0 fail, -1 skip, writing what it saw into detail. */

#define DETAIL(...) snprintf(detail, DETAIL_LEN, __VA_ARGS__)

static int tur_ok(struct conn *cn, const struct ctx *c, char *why, size_t whylen);

/*
 * A logged-in session whose unit attentions (e.g. POWER ON for a new I_T nexus) are already
 * consumed, so that a case's command gets the target's answer to that command.
 */
static int session_with(const struct ctx *c, struct conn *cn, const struct login_opts *o,
                        char *detail)
{
        struct login_result lr;
        if (login(c, cn, o, &lr) != 0) {
                DETAIL("login failed: rc=%d status=%u/%u", lr.rc, lr.status_class,
                       lr.status_detail);
                pdu_free(&lr.rsp);
                conn_close(cn);
                return -1;
        }
        pdu_free(&lr.rsp);
        if (tur_ok(cn, c, detail, DETAIL_LEN) != 0) {
                conn_close(cn);
                return -1;
        }
        return 0;
}

static int session(const struct ctx *c, struct conn *cn, bool hd, char *detail)
{
        struct login_opts o = {.target = c->target, .header_digest = hd};
        return session_with(c, cn, &o, detail);
}

/* A PDU with a reserved initiator opcode. */
static int case_unknown_opcode(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        struct pdu p;
        if (session(c, &cn, false, detail) != 0)
                return 0;
        bhs[0] = 0x0f; /* reserved: not an initiator opcode */
        bhs[1] = 0x80;
        put_be32(bhs + 16, ++cn.itt);
        put_be32(bhs + 24, cn.cmdsn);
        put_be32(bhs + 28, cn.exp_statsn);
        pdu_send(&cn, bhs, NULL, 0);
        int rc = pdu_recv(&cn, &p);
        int res;
        if (rc == -ECONNRESET) {
                DETAIL("connection closed");
                res = 1;
        } else if (rc != 0) {
                DETAIL("no reaction: %s", strerror(-rc));
                res = 0;
        } else if (iscsi_bhs_opcode(p.bhs) == ISCSI_OP_REJECT &&
                   (p.bhs[2] == ISCSI_REJECT_PROTOCOL_ERROR ||
                    p.bhs[2] == ISCSI_REJECT_CMD_NOT_SUPPORTED)) {
                DETAIL("reject reason 0x%02x", p.bhs[2]);
                res = 1;
        } else {
                DETAIL("unexpected pdu 0x%02x reason 0x%02x", iscsi_bhs_opcode(p.bhs), p.bhs[2]);
                res = 0;
        }
        if (rc == 0)
                pdu_free(&p);
        conn_close(&cn);
        return res;
}

/* NOP-Out whose data segment exceeds the MaxRecvDataSegmentLength the target declared. */
static int case_dsl_too_big(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        char seen[64];
        if (session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t len = cn.target_max_recv_dsl + 4096;
        uint8_t *data = calloc(1, len);
        if (data == NULL)
                return 0;
        bhs[0] = 0x40 | ISCSI_OP_NOP_OUT;
        bhs[1] = 0x80;
        put_be32(bhs + 16, ++cn.itt);
        put_be32(bhs + 20, 0xffffffffu);
        put_be32(bhs + 24, cn.cmdsn);
        put_be32(bhs + 28, cn.exp_statsn);
        pdu_send(&cn, bhs, data, len);
        free(data);
        struct pdu p;
        int rc = pdu_recv(&cn, &p);
        int res;
        if (rc == -ECONNRESET) {
                DETAIL("connection closed (dsl %u > target max %u)", len, cn.target_max_recv_dsl);
                res = 1;
        } else if (rc == 0 && iscsi_bhs_opcode(p.bhs) == ISCSI_OP_REJECT) {
                DETAIL("reject reason 0x%02x%s", p.bhs[2],
                       wait_closed(&cn, 2000, seen, sizeof(seen)) ? ", then closed" : "");
                res = 1;
        } else if (rc == 0) {
                DETAIL("accepted: pdu 0x%02x (dsl %u > target max %u)", iscsi_bhs_opcode(p.bhs),
                       len, cn.target_max_recv_dsl);
                res = 0;
        } else {
                DETAIL("no reaction: %s", strerror(-rc));
                res = 0;
        }
        if (rc == 0)
                pdu_free(&p);
        conn_close(&cn);
        return res;
}

/* TEST UNIT READY with TotalAHSLength != 0 and an AHS of garbage. */
static int case_ahs_garbage(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN];
        uint8_t ahs[8] = {0x77, 0x77, 0xfe, 0xde, 0xad, 0xbe, 0xef, 0x01};
        struct scsi_result r = {0};
        if (session(c, &cn, false, detail) != 0)
                return 0;
        build_scsi_cmd(&cn, c, bhs, cdb_tur, sizeof(cdb_tur), false, false, 0);
        pdu_send_raw(&cn, bhs, ahs, sizeof(ahs), NULL, 0, 0);
        scsi_wait(&cn, iscsi_bhs_itt(bhs), &r);
        int res;
        if (r.rc == -ECONNRESET) {
                DETAIL("connection closed");
                res = 1;
        } else if (r.rc == -EPROTO) {
                DETAIL("reject reason 0x%02x", r.reject_reason);
                res = 1;
        } else if (r.rc == 0) {
                /* The target skipped the AHS; framing must be intact. */
                bool alive = nop_ok(&cn);
                DETAIL("answered status 0x%02x, framing %s", r.status, alive ? "intact" : "lost");
                res = alive;
        } else {
                DETAIL("no reaction: %s", strerror(-r.rc));
                res = 0;
        }
        conn_close(&cn);
        return res;
}

/* With HeaderDigest=CRC32C: one good PDU must work, one with a bad digest must close. */
static int case_header_digest(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        char seen[64];
        if (session(c, &cn, true, detail) != 0)
                return 0;
        if (!cn.header_digest) {
                DETAIL("target did not agree to HeaderDigest=CRC32C (answered %s)",
                       cn.header_digest_answer);
                conn_close(&cn);
                return 0;
        }
        if (!nop_ok(&cn)) {
                DETAIL("NOP-Out with a correct digest got no answer");
                conn_close(&cn);
                return 0;
        }
        bhs[0] = 0x40 | ISCSI_OP_NOP_OUT;
        bhs[1] = 0x80;
        put_be32(bhs + 16, ++cn.itt);
        put_be32(bhs + 20, 0xffffffffu);
        put_be32(bhs + 24, cn.cmdsn);
        put_be32(bhs + 28, cn.exp_statsn);
        pdu_send_raw(&cn, bhs, NULL, 0, NULL, 0, CORRUPT_HEADER_DIGEST);
        bool closed = wait_closed(&cn, IO_TIMEOUT_MS, seen, sizeof(seen));
        DETAIL("%s%s%s", closed ? "connection closed" : "connection kept open",
               seen[0] ? " after " : "", seen);
        conn_close(&cn);
        return closed;
}

/* Data-Out for a task that does not exist. */
static int case_dataout_unknown_itt(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN] = {0}, data[512] = {0};
        struct pdu p;
        if (session(c, &cn, false, detail) != 0)
                return 0;
        bhs[0] = ISCSI_OP_DATA_OUT;
        bhs[1] = 0x80;
        lun_encode(bhs + 8, c->lun);
        put_be32(bhs + 16, 0x7eadbeef);
        put_be32(bhs + 20, 0xffffffffu);
        put_be32(bhs + 28, cn.exp_statsn);
        pdu_send(&cn, bhs, data, sizeof(data));
        /* A Reject, a silent discard (the session goes on) or a close are all acceptable. */
        uint8_t nop[ISCSI_BHS_LEN] = {0};
        nop[0] = 0x40 | ISCSI_OP_NOP_OUT;
        nop[1] = 0x80;
        put_be32(nop + 16, ++cn.itt);
        put_be32(nop + 20, 0xffffffffu);
        put_be32(nop + 24, cn.cmdsn);
        put_be32(nop + 28, cn.exp_statsn);
        pdu_send(&cn, nop, NULL, 0);
        int res = 0, rc;
        bool rejected = false;
        while ((rc = pdu_recv(&cn, &p)) == 0) {
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                if (op == ISCSI_OP_REJECT)
                        rejected = true;
                bool nop_back = op == ISCSI_OP_NOP_IN && iscsi_bhs_itt(p.bhs) == cn.itt;
                pdu_free(&p);
                if (nop_back) {
                        DETAIL("%s, session still works", rejected ? "rejected" : "discarded");
                        res = 1;
                        break;
                }
        }
        if (rc == -ECONNRESET) {
                DETAIL("%sconnection closed", rejected ? "rejected, then " : "");
                res = 1;
        } else if (rc != 0) {
                DETAIL("no answer to the following NOP-Out: %s", strerror(-rc));
        }
        conn_close(&cn);
        return res;
}

static int expect_sense(const struct scsi_result *r, uint8_t key, uint8_t asc, uint8_t ascq,
                        char *detail)
{
        if (r->rc != 0) {
                DETAIL("transport error: %s (reject 0x%02x)", strerror(-r->rc), r->reject_reason);
                return 0;
        }
        DETAIL("status 0x%02x sense %x/%02x/%02x (want 02 %x/%02x/%02x)", r->status, r->key, r->asc,
               r->ascq, key, asc, ascq);
        return r->status == 2 && r->key == key && r->asc == asc && r->ascq == ascq;
}

static int case_cdb_reserved_inquiry(struct ctx *c, char *detail)
{
        struct conn cn;
        struct scsi_result r;
        /* INQUIRY, byte 1 bit 2 is reserved (only EVPD, bit 0, is defined). */
        const uint8_t cdb[6] = {0x12, 0x04, 0x00, 0x00, 36, 0x00};
        if (session(c, &cn, false, detail) != 0)
                return 0;
        scsi_exec(&cn, c, cdb, sizeof(cdb), 36, &r);
        conn_close(&cn);
        return expect_sense(&r, 0x5, 0x24, 0x00, detail);
}

static int case_cdb_reserved_tur(struct ctx *c, char *detail)
{
        struct conn cn;
        struct scsi_result r;
        /* TEST UNIT READY: bytes 1-4 are reserved. */
        const uint8_t cdb[6] = {0x00, 0x00, 0x00, 0x00, 0x5a, 0x00};
        if (session(c, &cn, false, detail) != 0)
                return 0;
        scsi_exec(&cn, c, cdb, sizeof(cdb), 0, &r);
        conn_close(&cn);
        return expect_sense(&r, 0x5, 0x24, 0x00, detail);
}

static int read_capacity(struct conn *cn, struct ctx *c, char *detail)
{
        struct scsi_result r;
        const uint8_t cdb[16] = {0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0};
        scsi_exec(cn, c, cdb, sizeof(cdb), 32, &r);
        if (r.rc != 0 || r.status != 0 || r.data_len < 12) {
                DETAIL("READ CAPACITY(16) failed: rc=%d status=0x%02x", r.rc, r.status);
                return -EIO;
        }
        c->num_blocks = get_be64(r.data) + 1;
        c->block_size = get_be32(r.data + 8);
        return 0;
}

static int case_read_beyond_end(struct ctx *c, char *detail)
{
        struct conn cn;
        struct scsi_result r;
        uint8_t cdb[16] = {0x88};
        if (session(c, &cn, false, detail) != 0)
                return 0;
        if (read_capacity(&cn, c, detail) != 0) {
                conn_close(&cn);
                return 0;
        }
        put_be64(cdb + 2, c->num_blocks);
        put_be32(cdb + 10, 1);
        scsi_exec(&cn, c, cdb, sizeof(cdb), c->block_size, &r);
        conn_close(&cn);
        return expect_sense(&r, 0x5, 0x21, 0x00, detail);
}

/* First login PDU sent by hand; returns the login result of the first response. */
static int raw_first_login(const struct ctx *c, struct conn *cn, int csg, int nsg,
                           const struct text *t, struct login_result *lr)
{
        int fd = tcp_connect(c);
        if (fd < 0) {
                lr->rc = fd;
                return fd;
        }
        conn_init(cn);
        cn->fd = fd;
        if (login_send(cn, csg, nsg, true, t) != 0) {
                lr->rc = -EIO;
                return -EIO;
        }
        login_recv(cn, lr);
        return 0;
}

static int login_must_fail(struct login_result *lr, struct conn *cn, uint8_t want_class,
                           int want_detail, char *detail)
{
        int res;
        if (lr->rc == -ECONNRESET) {
                DETAIL("connection closed without a login response");
                res = want_detail < 0;
        } else if (lr->rc != 0) {
                DETAIL("no login response: %s", strerror(-lr->rc));
                res = 0;
        } else {
                if (want_detail >= 0)
                        DETAIL("login status %02x%02x (want %02x%02x)", lr->status_class,
                               lr->status_detail, want_class, want_detail);
                else
                        DETAIL("login status %02x%02x (want class %02x)", lr->status_class,
                               lr->status_detail, want_class);
                res = lr->status_class == want_class &&
                      (want_detail < 0 || lr->status_detail == want_detail);
        }
        pdu_free(&lr->rsp);
        conn_close(cn);
        return res;
}

static int case_login_duplicate_key(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_opts o = {.target = c->target, .duplicate_operational_key = true};
        struct login_result lr;
        if (login(c, &cn, &o, &lr) == 0) {
                DETAIL("login succeeded with DefaultTime2Wait declared twice");
                pdu_free(&lr.rsp);
                conn_close(&cn);
                return 0;
        }
        return login_must_fail(&lr, &cn, 2, -1, detail);
}

static int case_login_unknown_key(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_opts o = {.target = c->target, .extra_operational_key = "TandemBogusKey=1"};
        struct login_result lr;
        if (login(c, &cn, &o, &lr) != 0) {
                DETAIL("login failed: rc=%d status=%u/%u", lr.rc, lr.status_class,
                       lr.status_detail);
                pdu_free(&lr.rsp);
                conn_close(&cn);
                return 0;
        }
        /* The answer to our operational keys came in the last login response. */
        const char *v = text_get(&lr.rsp, "TandemBogusKey");
        int res = v != NULL && strcmp(v, "NotUnderstood") == 0;
        DETAIL("TandemBogusKey=%s", v ? v : "(no answer)");
        pdu_free(&lr.rsp);
        if (res)
                res = logout(&cn) == 0;
        conn_close(&cn);
        return res;
}

static int case_login_oversized_text(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_result lr = {0};
        static struct text t;
        t.len = 0;
        text_add(&t, "InitiatorName=%s", c->initiator);
        text_add(&t, "SessionType=Normal");
        text_add(&t, "TargetName=%s", c->target);
        text_add(&t, "AuthMethod=None");
        /* One login PDU of 64 KiB: far above the 8192 bytes allowed during login. */
        char *big = malloc(65536);
        if (big == NULL)
                return 0;
        memset(big, 'a', 65535);
        big[65535] = 0;
        memcpy(big, "X-io.tandem.pad=", 16);
        memcpy(t.buf + t.len, big, 65536);
        t.len += 65536;
        free(big);
        raw_first_login(c, &cn, 0, 1, &t, &lr);
        return login_must_fail(&lr, &cn, 2, -1, detail);
}

static int case_login_wrong_stage(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_result lr = {0};
        struct text t = {.len = 0};
        text_add(&t, "InitiatorName=%s", c->initiator);
        text_add(&t, "SessionType=Normal");
        text_add(&t, "TargetName=%s", c->target);
        /* Transit from operational negotiation back to security negotiation: not allowed. */
        raw_first_login(c, &cn, 1, 0, &t, &lr);
        return login_must_fail(&lr, &cn, 2, -1, detail);
}

static int case_login_no_such_target(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_result lr = {0};
        struct text t = {.len = 0};
        text_add(&t, "InitiatorName=%s", c->initiator);
        text_add(&t, "SessionType=Normal");
        text_add(&t, "TargetName=iqn.2026-11.io.tandem:no-such-target");
        text_add(&t, "AuthMethod=None");
        raw_first_login(c, &cn, 0, 1, &t, &lr);
        return login_must_fail(&lr, &cn, 2, 3, detail);
}

/* CHAP with a wrong response: authentication failure 02/01. */
static int case_chap_failure(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_result lr = {0};
        struct text t = {.len = 0};
        if (c->chap_target == NULL || c->chap_user == NULL) {
                DETAIL("no --chap-target/--chap-user given");
                return -1;
        }
        text_add(&t, "InitiatorName=%s", c->initiator);
        text_add(&t, "SessionType=Normal");
        text_add(&t, "TargetName=%s", c->chap_target);
        text_add(&t, "AuthMethod=CHAP");
        if (raw_first_login(c, &cn, 0, 1, &t, &lr) != 0 || lr.rc != 0 || lr.status_class != 0)
                return login_must_fail(&lr, &cn, 2, 1, detail);
        /* The target picked CHAP and stays in the security stage; ask for MD5. */
        const char *am = text_get(&lr.rsp, "AuthMethod");
        if (am == NULL || strcmp(am, "CHAP") != 0) {
                DETAIL("target answered AuthMethod=%s", am ? am : "(none)");
                pdu_free(&lr.rsp);
                conn_close(&cn);
                return 0;
        }
        pdu_free(&lr.rsp);
        t.len = 0;
        text_add(&t, "CHAP_A=5");
        login_send(&cn, 0, 1, false, &t);
        login_recv(&cn, &lr);
        if (lr.rc != 0 || lr.status_class != 0 || !text_get(&lr.rsp, "CHAP_C"))
                return login_must_fail(&lr, &cn, 2, 1, detail);
        pdu_free(&lr.rsp);
        t.len = 0;
        text_add(&t, "CHAP_N=%s", c->chap_user);
        text_add(&t, "CHAP_R=0x00112233445566778899aabbccddeeff"); /* not the right answer */
        login_send(&cn, 0, 1, true, &t);
        login_recv(&cn, &lr);
        return login_must_fail(&lr, &cn, 2, 1, detail);
}

static int block_size_known(struct ctx *c, char *detail)
{
        struct conn cn;
        if (c->block_size)
                return 0;
        if (session(c, &cn, false, detail) != 0)
                return -EIO;
        int rc = read_capacity(&cn, c, detail);
        conn_close(&cn);
        return rc;
}

/* WRITE with half of its immediate data sent, then the connection closes (FIN). */
static int case_drop_mid_command(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN], cdb[10] = {0x2a};
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t blocks = 65536 / c->block_size;
        put_be32(cdb + 2, 1024);
        put_be16(cdb + 7, (uint16_t)blocks);
        build_scsi_cmd(&cn, c, bhs, cdb, sizeof(cdb), false, true, blocks * c->block_size);
        uint32_t imm = 0;
        if (cn.immediate_data) {
                imm = blocks * c->block_size;
                if (imm > cn.first_burst && cn.first_burst)
                        imm = cn.first_burst;
                if (imm > cn.target_max_recv_dsl)
                        imm = cn.target_max_recv_dsl;
        }
        bhs[4] = 0;
        iscsi_bhs_set_dsl(bhs, imm);
        send_all(cn.fd, bhs, ISCSI_BHS_LEN);
        uint8_t *half = calloc(1, imm / 2 + 1);
        if (half && imm)
                send_all(cn.fd, half, imm / 2);
        free(half);
        conn_close(&cn);
        DETAIL("sent WRITE header and %u of %u immediate bytes, closed", imm / 2, imm);
        return 1; /* the health check that follows decides */
}

/* WRITE without immediate data; after the R2T, half of the data, then a TCP RST. */
static int case_drop_mid_r2t(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN], cdb[10] = {0x2a};
        struct pdu p;
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t blocks = 131072 / c->block_size;
        put_be32(cdb + 2, 2048);
        put_be16(cdb + 7, (uint16_t)blocks);
        build_scsi_cmd(&cn, c, bhs, cdb, sizeof(cdb), false, true, blocks * c->block_size);
        pdu_send(&cn, bhs, NULL, 0);
        int rc = pdu_recv(&cn, &p);
        if (rc != 0 || iscsi_bhs_opcode(p.bhs) != ISCSI_OP_R2T) {
                DETAIL("no R2T: rc=%d opcode 0x%02x", rc, rc == 0 ? iscsi_bhs_opcode(p.bhs) : 0);
                if (rc == 0)
                        pdu_free(&p);
                conn_close(&cn);
                return 0;
        }
        uint32_t ttt = get_be32(p.bhs + 20), off = get_be32(p.bhs + 40),
                 want = get_be32(p.bhs + 44);
        pdu_free(&p);
        uint32_t len = want / 2;
        if (len > cn.target_max_recv_dsl)
                len = cn.target_max_recv_dsl;
        uint8_t *data = calloc(1, len ? len : 1);
        uint8_t d[ISCSI_BHS_LEN] = {0};
        d[0] = ISCSI_OP_DATA_OUT;
        lun_encode(d + 8, c->lun);
        memcpy(d + 16, bhs + 16, 4);
        put_be32(d + 20, ttt);
        put_be32(d + 28, cn.exp_statsn);
        put_be32(d + 40, off);
        if (data)
                pdu_send(&cn, d, data, len);
        free(data);
        conn_abort(&cn);
        DETAIL("R2T for %u bytes at %u; sent %u, then reset", want, off, len);
        return 1;
}

/* Many short sessions: connect, login, logout; then one TEST UNIT READY. */
static int case_login_cycles(struct ctx *c, char *detail)
{
        const uint64_t limit_ms = 120000;
        uint64_t start = now_ms();
        unsigned done = 0, failed = 0;
        struct login_opts o = {.target = c->target};
        char why[128] = "";

        for (unsigned i = 0; i < c->cycles && now_ms() - start < limit_ms; i++) {
                struct conn cn;
                struct login_result lr;
                if (login(c, &cn, &o, &lr) != 0 || logout(&cn) != 0) {
                        if (failed++ == 0)
                                snprintf(why, sizeof(why), "cycle %u: rc=%d status=%u/%u", i, lr.rc,
                                         lr.status_class, lr.status_detail);
                }
                pdu_free(&lr.rsp);
                conn_close(&cn);
                done++;
        }
        uint64_t ms = now_ms() - start;
        struct conn cn;
        char turwhy[128] = "";
        bool tur = false;
        if (session(c, &cn, false, detail) == 0) {
                tur = tur_ok(&cn, c, turwhy, sizeof(turwhy)) == 0;
                logout(&cn);
        }
        DETAIL("%u/%u cycles in %" PRIu64 " ms, %u failed%s%s; final TEST UNIT READY %s%s", done,
               c->cycles, ms, failed, failed ? ": " : "", why, tur ? "good" : "failed ", turwhy);
        return done == c->cycles && failed == 0 && tur;
}

/* ------------------------------------------------------------------------------------------ */
/* Data transfer with the negotiated parameters: the raw client's own WRITE and READ. */

/* How a WRITE sends its data; write_plan_default gives what the negotiation allows. */
struct write_plan {
        uint32_t immediate;    /* bytes in the command PDU */
        uint32_t unsolicited;  /* bytes in Data-Out PDUs with TTT 0xffffffff after it */
        unsigned corrupt;      /* enum corruption bits for the command PDU */
        bool r2t_out_of_order; /* answer the first R2T's second half before its first half */
};

static uint32_t min_u32(uint32_t a, uint32_t b)
{
        return a < b ? a : b;
}

static struct write_plan write_plan_default(const struct conn *cn, uint32_t len)
{
        struct write_plan p = {0};
        uint32_t first_burst = cn->first_burst ? cn->first_burst : 65536;
        if (cn->immediate_data)
                p.immediate = min_u32(min_u32(len, first_burst), cn->target_max_recv_dsl);
        if (!cn->initial_r2t)
                p.unsolicited = min_u32(len - p.immediate, first_burst - p.immediate);
        return p;
}

/*
 * Data-Out PDUs for buf[off, off + len), each at most the target's MaxRecvDataSegmentLength;
 * DataSN counts on from *datasn; F on the last one when final.
 */
static int send_data_out(struct conn *cn, const struct ctx *c, uint32_t itt, uint32_t ttt,
                         const uint8_t *buf, uint32_t off, uint32_t len, uint32_t *datasn,
                         bool final)
{
        while (len > 0) {
                uint32_t n = min_u32(len, cn->target_max_recv_dsl);
                uint8_t d[ISCSI_BHS_LEN] = {0};
                d[0] = ISCSI_OP_DATA_OUT;
                d[1] = (final && n == len) ? 0x80 : 0;
                lun_encode(d + 8, c->lun);
                put_be32(d + 16, itt);
                put_be32(d + 20, ttt);
                put_be32(d + 28, cn->exp_statsn);
                put_be32(d + 36, (*datasn)++);
                put_be32(d + 40, off);
                int rc = pdu_send(cn, d, buf + off, n);
                if (rc != 0)
                        return rc;
                off += n;
                len -= n;
        }
        return 0;
}

/* Answer one R2T with the data it asks for (buf holds the whole transfer). */
static int answer_r2t(struct conn *cn, const struct ctx *c, const struct pdu *r2t,
                      const uint8_t *buf, uint32_t len, bool out_of_order)
{
        uint32_t itt = iscsi_bhs_itt(r2t->bhs), ttt = get_be32(r2t->bhs + 20);
        uint32_t off = get_be32(r2t->bhs + 40), want = get_be32(r2t->bhs + 44);
        uint32_t datasn = 0;
        if (off > len || want > len - off)
                return -EPROTO;
        if (!out_of_order || want < 2048)
                return send_data_out(cn, c, itt, ttt, buf, off, want, &datasn, true);
        /* Second half first, then the first half with F: offsets out of sequence. */
        uint32_t half = (want / 2) & ~511u;
        int rc = send_data_out(cn, c, itt, ttt, buf, off + half, want - half, &datasn, false);
        return rc ? rc : send_data_out(cn, c, itt, ttt, buf, off, half, &datasn, true);
}

/*
 * WRITE(10) of buf to lba following plan, answering every R2T, until the SCSI Response
 * (r->status, sense), a Reject (r->rc = -EPROTO) or a transport error. *itt_out gets the ITT
 * used; a nonzero *itt_out on entry is used as the ITT.
 */
static void write_run(struct conn *cn, const struct ctx *c, uint32_t lba, const uint8_t *buf,
                      uint32_t len, const struct write_plan *plan, uint32_t *itt_out,
                      struct scsi_result *r)
{
        uint8_t bhs[ISCSI_BHS_LEN], cdb[10] = {0x2a};
        memset(r, 0, sizeof(*r));
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, (uint16_t)(len / c->block_size));
        build_scsi_cmd(cn, c, bhs, cdb, sizeof(cdb), false, true, len);
        if (itt_out && *itt_out)
                put_be32(bhs + 16, *itt_out);
        uint32_t itt = iscsi_bhs_itt(bhs);
        if (itt_out)
                *itt_out = itt;
        if (plan->unsolicited)
                bhs[1] &= 0x7f; /* F=0: unsolicited Data-Out follows */
        r->rc = pdu_send_raw(cn, bhs, NULL, 0, buf, plan->immediate, plan->corrupt);
        if (r->rc == 0 && plan->unsolicited) {
                uint32_t datasn = 0;
                r->rc = send_data_out(cn, c, itt, 0xffffffffu, buf, plan->immediate,
                                      plan->unsolicited, &datasn, true);
        }
        bool first_r2t = true;
        while (r->rc == 0) {
                struct pdu p;
                r->rc = pdu_recv(cn, &p);
                if (r->rc != 0)
                        return;
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                if (op == ISCSI_OP_REJECT) {
                        r->reject_reason = p.bhs[2];
                        r->rc = -EPROTO;
                } else if (iscsi_bhs_itt(p.bhs) != itt) {
                        /* someone else's PDU: ignore */
                } else if (op == ISCSI_OP_R2T) {
                        r->rc =
                            answer_r2t(cn, c, &p, buf, len, plan->r2t_out_of_order && first_r2t);
                        first_r2t = false;
                } else if (op == ISCSI_OP_SCSI_RSP) {
                        r->status = p.bhs[3];
                        if (p.dlen >= 2) {
                                uint32_t slen = min_u32(get_be16(p.data), p.dlen - 2);
                                parse_sense(p.data + 2, slen, r);
                        }
                        pdu_free(&p);
                        return;
                }
                pdu_free(&p);
        }
}

/* READ(10) into buf; *pdus counts the Data-In PDUs. r->rc = -EBADMSG on a bad digest. */
static void read_run(struct conn *cn, const struct ctx *c, uint32_t lba, uint8_t *buf, uint32_t len,
                     unsigned *pdus, struct scsi_result *r)
{
        uint8_t bhs[ISCSI_BHS_LEN], cdb[10] = {0x28};
        uint32_t expect_datasn = 0;
        memset(r, 0, sizeof(*r));
        *pdus = 0;
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, (uint16_t)(len / c->block_size));
        build_scsi_cmd(cn, c, bhs, cdb, sizeof(cdb), true, false, len);
        uint32_t itt = iscsi_bhs_itt(bhs);
        r->rc = pdu_send(cn, bhs, NULL, 0);
        while (r->rc == 0) {
                struct pdu p;
                r->rc = pdu_recv(cn, &p);
                if (r->rc != 0)
                        return;
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                bool done = false;
                if (op == ISCSI_OP_REJECT) {
                        r->reject_reason = p.bhs[2];
                        r->rc = -EPROTO;
                } else if (iscsi_bhs_itt(p.bhs) != itt) {
                        /* not ours */
                } else if (op == ISCSI_OP_DATA_IN) {
                        uint32_t off = get_be32(p.bhs + 40);
                        if (get_be32(p.bhs + 36) != expect_datasn++ || off > len ||
                            p.dlen > len - off) {
                                r->rc = -EPROTO;
                        } else {
                                memcpy(buf + off, p.data, p.dlen);
                                (*pdus)++;
                                if (p.bhs[1] & 0x01) {
                                        r->status = p.bhs[3];
                                        done = true;
                                }
                        }
                } else if (op == ISCSI_OP_SCSI_RSP) {
                        r->status = p.bhs[3];
                        if (p.dlen >= 2)
                                parse_sense(p.data + 2, min_u32(get_be16(p.data), p.dlen - 2), r);
                        done = true;
                }
                pdu_free(&p);
                if (done)
                        return;
        }
}

static void fill_random(uint8_t *buf, size_t len)
{
        for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)rand();
}

/* Read back len bytes at lba and compare with want; 1 when equal. */
static int read_matches(struct conn *cn, struct ctx *c, uint32_t lba, const uint8_t *want,
                        uint32_t len, char *why, size_t whylen)
{
        struct scsi_result r;
        unsigned pdus;
        uint8_t *got = malloc(len);
        if (got == NULL)
                return 0;
        read_run(cn, c, lba, got, len, &pdus, &r);
        int res = 0;
        if (r.rc != 0)
                snprintf(why, whylen, "READ at %u: %s (reject 0x%02x)", lba, strerror(-r.rc),
                         r.reject_reason);
        else if (r.status != 0)
                snprintf(why, whylen, "READ at %u: status 0x%02x sense %x/%02x/%02x", lba, r.status,
                         r.key, r.asc, r.ascq);
        else if (memcmp(got, want, len) != 0)
                snprintf(why, whylen, "READ at %u: data differs from what was written", lba);
        else
                res = 1;
        free(got);
        return res;
}

/* Write buf at lba with the default plan and expect GOOD; 1 when so. */
static int write_ok(struct conn *cn, struct ctx *c, uint32_t lba, const uint8_t *buf, uint32_t len,
                    char *why, size_t whylen)
{
        struct scsi_result r;
        struct write_plan plan = write_plan_default(cn, len);
        write_run(cn, c, lba, buf, len, &plan, NULL, &r);
        if (r.rc == 0 && r.status == 0)
                return 1;
        snprintf(why, whylen, "WRITE at %u: rc=%d reject 0x%02x status 0x%02x sense %x/%02x/%02x",
                 lba, r.rc, r.reject_reason, r.status, r.key, r.asc, r.ascq);
        return 0;
}

/* LBAs of the scratch areas the data cases write, far from the other cases' blocks. */
#define SCRATCH_LBA(n) (8192u + (n)*2048u)

/* ------------------------------------------------------------------------------------------ */
/* Digests, data transfer rules, sequence numbers, NOP, logout and task management. */

/*
 * HeaderDigest=CRC32C and DataDigest=CRC32C negotiated; a 192 KiB WRITE (immediate data, then
 * Data-Out on R2T) and a 512 KiB READ (several Data-In PDUs) with every digest checked.
 */
static int case_digest_write_read(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_opts o = {.target = c->target, .header_digest = true, .data_digest = true};
        const uint32_t wlen = 192 * 1024, rlen = 512 * 1024;
        char why[256] = "";
        if (block_size_known(c, detail) != 0 || session_with(c, &cn, &o, detail) != 0)
                return 0;
        if (!cn.header_digest || !cn.data_digest) {
                DETAIL("target answered HeaderDigest=%s DataDigest=%s", cn.header_digest_answer,
                       cn.data_digest_answer);
                conn_close(&cn);
                return 0;
        }
        uint8_t *buf = malloc(rlen);
        if (buf == NULL) {
                conn_close(&cn);
                return 0;
        }
        fill_random(buf, rlen);
        uint32_t lba = SCRATCH_LBA(0);
        unsigned before = cn.data_digests_ok;
        int res =
            write_ok(&cn, c, lba, buf, wlen, why, sizeof(why)) &&
            write_ok(&cn, c, lba + wlen / c->block_size, buf + wlen, rlen - wlen, why, sizeof(why));
        struct scsi_result r;
        unsigned pdus = 0;
        uint8_t *got = res ? malloc(rlen) : NULL;
        if (got) {
                read_run(&cn, c, lba, got, rlen, &pdus, &r);
                if (r.rc != 0 || r.status != 0) {
                        snprintf(why, sizeof(why), "READ: %s status 0x%02x",
                                 r.rc == -EBADMSG ? "bad digest" : strerror(-r.rc), r.status);
                        res = 0;
                } else if (memcmp(got, buf, rlen) != 0) {
                        snprintf(why, sizeof(why), "data read back differs");
                        res = 0;
                }
        }
        free(got);
        free(buf);
        bool ping = res && nop_ok(&cn);
        unsigned checked = cn.data_digests_ok - before;
        DETAIL("HeaderDigest=%s DataDigest=%s; wrote %u KiB, read %u KiB in %u Data-In PDUs, %u "
               "data digests checked%s%s%s",
               cn.header_digest_answer, cn.data_digest_answer, rlen / 1024, rlen / 1024, pdus,
               checked, why[0] ? "; " : "", why, res && !ping ? "; NOP-Out ping failed" : "");
        conn_close(&cn);
        return res && ping && pdus >= 2 && checked >= pdus;
}

/*
 * DataDigest=CRC32C, a WRITE whose immediate data has a wrong digest: Reject reason 0x02 and
 * the PDU discarded with its CmdSN not taken (RFC 7143, "Digest Errors" and "Usage of Reject
 * PDU in Recovery"); a correct WRITE with that CmdSN then plugs the gap and succeeds, and the
 * bad data was never written.
 */
static int case_data_digest_mismatch(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_opts o = {.target = c->target, .data_digest = true};
        const uint32_t len = 4096;
        uint8_t before[4096], bad[4096], good[4096];
        char why[256] = "";
        if (block_size_known(c, detail) != 0 || session_with(c, &cn, &o, detail) != 0)
                return 0;
        if (!cn.data_digest || !cn.immediate_data) {
                DETAIL("target answered DataDigest=%s ImmediateData=%s", cn.data_digest_answer,
                       cn.immediate_data ? "Yes" : "No");
                conn_close(&cn);
                return 0;
        }
        fill_random(before, len);
        fill_random(bad, len);
        fill_random(good, len);
        uint32_t lba_bad = SCRATCH_LBA(1), lba_good = SCRATCH_LBA(1) + 64;
        if (!write_ok(&cn, c, lba_bad, before, len, why, sizeof(why))) {
                DETAIL("setup: %s", why);
                conn_close(&cn);
                return 0;
        }
        struct scsi_result r;
        struct write_plan plan = {.immediate = len, .corrupt = CORRUPT_DATA_DIGEST};
        write_run(&cn, c, lba_bad, bad, len, &plan, NULL, &r);
        if (r.rc != -EPROTO || r.reject_reason != ISCSI_REJECT_DIGEST_ERROR) {
                DETAIL("bad data digest: rc=%d reject 0x%02x status 0x%02x (want Reject 0x02)",
                       r.rc, r.reject_reason, r.status);
                conn_close(&cn);
                return 0;
        }
        /* Plug the CmdSN gap with a correct command of the same CmdSN. */
        cn.cmdsn--;
        int res = write_ok(&cn, c, lba_good, good, len, why, sizeof(why)) &&
                  read_matches(&cn, c, lba_good, good, len, why, sizeof(why)) &&
                  read_matches(&cn, c, lba_bad, before, len, why, sizeof(why));
        DETAIL("Reject 0x02 for the bad digest; %s", res ? "the same CmdSN then wrote and read "
                                                           "back correctly, bad data not written"
                                                         : why);
        conn_close(&cn);
        return res;
}

/*
 * How a target refused a transfer that breaks the negotiated rules: a Reject, a CHECK
 * CONDITION or a closed connection all pass; GOOD (the data taken as if fine) fails.
 */
static int judge_refused_write(struct conn *cn, const struct scsi_result *r, const char *what,
                               char *detail)
{
        if (r->rc == -ECONNRESET) {
                DETAIL("%s: connection closed", what);
                return 1;
        }
        if (r->rc == -EPROTO) {
                bool alive = nop_ok(cn);
                DETAIL("%s: Reject reason 0x%02x, connection %s", what, r->reject_reason,
                       alive ? "still answers" : "closed");
                return 1;
        }
        if (r->rc != 0) {
                DETAIL("%s: no answer: %s", what, strerror(-r->rc));
                return 0;
        }
        DETAIL("%s: status 0x%02x sense %x/%02x/%02x%s", what, r->status, r->key, r->asc, r->ascq,
               r->status == 0 ? " (accepted)" : "");
        return r->status != 0;
}

/* Immediate data longer than FirstBurstLength (but within MaxRecvDataSegmentLength). */
static int case_immediate_over_first_burst(struct ctx *c, char *detail)
{
        struct conn cn;
        char what[96];
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t len = cn.first_burst + 4096;
        if (!cn.immediate_data || cn.first_burst == 0 || len > cn.target_max_recv_dsl) {
                DETAIL("cannot build the case: ImmediateData=%s FirstBurstLength=%u "
                       "MaxRecvDataSegmentLength=%u",
                       cn.immediate_data ? "Yes" : "No", cn.first_burst, cn.target_max_recv_dsl);
                conn_close(&cn);
                return -1;
        }
        uint8_t *buf = calloc(1, len);
        if (buf == NULL) {
                conn_close(&cn);
                return 0;
        }
        struct scsi_result r;
        struct write_plan plan = {.immediate = len};
        write_run(&cn, c, SCRATCH_LBA(2), buf, len, &plan, NULL, &r);
        free(buf);
        snprintf(what, sizeof(what), "%u bytes immediate data, FirstBurstLength %u", len,
                 cn.first_burst);
        int res = judge_refused_write(&cn, &r, what, detail);
        conn_close(&cn);
        return res;
}

/* InitialR2T=No: immediate plus unsolicited Data-Out adding up to more than FirstBurstLength. */
static int case_unsolicited_over_first_burst(struct ctx *c, char *detail)
{
        struct conn cn;
        struct login_opts o = {.target = c->target, .initial_r2t_no = true};
        char what[128];
        if (block_size_known(c, detail) != 0 || session_with(c, &cn, &o, detail) != 0)
                return 0;
        if (cn.initial_r2t || cn.first_burst == 0) {
                DETAIL("target kept InitialR2T=Yes: no unsolicited Data-Out allowed at all");
                conn_close(&cn);
                return -1;
        }
        uint32_t imm = cn.immediate_data ? min_u32(cn.first_burst / 2, 16384) : 0;
        uint32_t unsol = cn.first_burst - imm + 8192;
        uint32_t len = imm + unsol + 65536;
        uint8_t *buf = calloc(1, len);
        if (buf == NULL) {
                conn_close(&cn);
                return 0;
        }
        struct scsi_result r;
        struct write_plan plan = {.immediate = imm, .unsolicited = unsol};
        write_run(&cn, c, SCRATCH_LBA(3), buf, len, &plan, NULL, &r);
        free(buf);
        snprintf(what, sizeof(what), "%u immediate + %u unsolicited bytes, FirstBurstLength %u",
                 imm, unsol, cn.first_burst);
        int res = judge_refused_write(&cn, &r, what, detail);
        conn_close(&cn);
        return res;
}

/* DataPDUInOrder=Yes, and the Data-Out PDUs answering an R2T come with offsets out of order. */
static int case_dataout_out_of_order(struct ctx *c, char *detail)
{
        struct conn cn;
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t len = 65536;
        uint8_t *buf = calloc(1, len);
        if (buf == NULL) {
                conn_close(&cn);
                return 0;
        }
        struct scsi_result r;
        struct write_plan plan = {.r2t_out_of_order = true}; /* no immediate data: all on R2T */
        write_run(&cn, c, SCRATCH_LBA(4), buf, len, &plan, NULL, &r);
        free(buf);
        int res = judge_refused_write(&cn, &r, "Data-Out offsets out of order (DataPDUInOrder=Yes)",
                                      detail);
        conn_close(&cn);
        return res;
}

/*
 * Non-immediate commands with a CmdSN outside [ExpCmdSN, MaxCmdSN], one far ahead and one
 * already used, are silently ignored (RFC 7143 4.2.2.1): no answer ever, ExpCmdSN unchanged,
 * and the next in-window command works.
 */
static int case_cmdsn_out_of_window(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN];
        if (session(c, &cn, false, detail) != 0)
                return 0;
        const uint32_t offsets[2] = {100000u, (uint32_t)-1}; /* far ahead; the last one used */
        uint32_t ignored[2];
        for (int i = 0; i < 2; i++) {
                build_scsi_cmd(&cn, c, bhs, cdb_tur, sizeof(cdb_tur), false, false, 0);
                cn.cmdsn--; /* build_scsi_cmd took one; these do not count */
                put_be32(bhs + 24, cn.cmdsn + offsets[i]);
                ignored[i] = iscsi_bhs_itt(bhs);
                pdu_send(&cn, bhs, NULL, 0);
        }
        build_scsi_cmd(&cn, c, bhs, cdb_tur, sizeof(cdb_tur), false, false, 0);
        uint32_t good_itt = iscsi_bhs_itt(bhs), want_exp = cn.cmdsn;
        pdu_send(&cn, bhs, NULL, 0);
        int res = 0;
        bool answered_good = false;
        uint32_t exp_cmdsn = 0;
        uint8_t good_status = 0xff;
        for (;;) {
                struct pdu p;
                int rc = pdu_recv(&cn, &p);
                if (rc != 0) {
                        DETAIL("waiting for the in-window TEST UNIT READY: %s", strerror(-rc));
                        goto out;
                }
                uint32_t itt = iscsi_bhs_itt(p.bhs);
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                if (itt == ignored[0] || itt == ignored[1] || op == ISCSI_OP_REJECT) {
                        DETAIL("out-of-window command answered: pdu 0x%02x reason 0x%02x", op,
                               p.bhs[2]);
                        pdu_free(&p);
                        goto out;
                }
                if (op == ISCSI_OP_SCSI_RSP && itt == good_itt) {
                        answered_good = true;
                        good_status = p.bhs[3];
                        exp_cmdsn = get_be32(p.bhs + 28);
                        pdu_free(&p);
                        break;
                }
                pdu_free(&p);
        }
        /* Nothing may come later for the ignored ones either: a ping flushes the pipe. */
        bool ping = nop_ok(&cn);
        res = answered_good && good_status == 0 && exp_cmdsn == want_exp && ping;
        DETAIL("ignored CmdSN +%u and -1; next TEST UNIT READY status 0x%02x, ExpCmdSN %u (want "
               "%u)%s",
               offsets[0], good_status, exp_cmdsn, want_exp, ping ? "" : "; ping unanswered");
out:
        conn_close(&cn);
        return res;
}

/* A NOP-Out ping with 1001 bytes of data comes back as a NOP-In with the same data. */
static int case_nop_ping_data(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN] = {0}, data[1001];
        if (session(c, &cn, false, detail) != 0)
                return 0;
        fill_random(data, sizeof(data));
        bhs[0] = 0x40 | ISCSI_OP_NOP_OUT;
        bhs[1] = 0x80;
        put_be32(bhs + 16, ++cn.itt);
        put_be32(bhs + 20, 0xffffffffu);
        put_be32(bhs + 24, cn.cmdsn);
        put_be32(bhs + 28, cn.exp_statsn);
        pdu_send(&cn, bhs, data, sizeof(data));
        struct pdu p;
        int rc = pdu_recv(&cn, &p);
        int res = 0;
        if (rc != 0) {
                DETAIL("no answer: %s", strerror(-rc));
        } else {
                bool nop_in = iscsi_bhs_opcode(p.bhs) == ISCSI_OP_NOP_IN;
                bool itt = iscsi_bhs_itt(p.bhs) == cn.itt;
                bool ttt = get_be32(p.bhs + 20) == 0xffffffffu;
                bool same = p.dlen == sizeof(data) && memcmp(p.data, data, sizeof(data)) == 0;
                DETAIL("pdu 0x%02x, ITT %s, TTT %s, %u data bytes %s", iscsi_bhs_opcode(p.bhs),
                       itt ? "echoed" : "wrong", ttt ? "0xffffffff" : "wrong", p.dlen,
                       same ? "echoed" : "differ");
                res = nop_in && itt && ttt && same;
                pdu_free(&p);
        }
        if (res && !nop_ok(&cn)) {
                res = 0;
                size_t n = strlen(detail);
                snprintf(detail + n, DETAIL_LEN - n, "; a second ping got no answer");
        }
        conn_close(&cn);
        return res;
}

/*
 * Logout "remove the connection for recovery" with ErrorRecoveryLevel=0: response 2,
 * connection recovery is not supported (RFC 7143 11.15.1); nothing is logged out, so the
 * session goes on working.
 */
static int case_logout_for_recovery(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        char why[128] = "";
        if (session(c, &cn, false, detail) != 0)
                return 0;
        bhs[0] = 0x40 | ISCSI_OP_LOGOUT_REQ;
        bhs[1] = 0x80 | 2;
        put_be32(bhs + 16, ++cn.itt);
        put_be16(bhs + 20, 0); /* our CID */
        put_be32(bhs + 24, cn.cmdsn);
        put_be32(bhs + 28, cn.exp_statsn);
        pdu_send(&cn, bhs, NULL, 0);
        struct pdu p;
        int rc = pdu_recv(&cn, &p);
        int res = 0;
        if (rc != 0) {
                DETAIL("no Logout Response: %s", strerror(-rc));
        } else if (iscsi_bhs_opcode(p.bhs) != ISCSI_OP_LOGOUT_RSP) {
                DETAIL("answer was pdu 0x%02x reason 0x%02x", iscsi_bhs_opcode(p.bhs), p.bhs[2]);
                pdu_free(&p);
        } else {
                uint8_t response = p.bhs[2];
                pdu_free(&p);
                bool tur = tur_ok(&cn, c, why, sizeof(why)) == 0;
                DETAIL("Logout Response %u (want 2); session afterwards: %s", response,
                       tur ? "TEST UNIT READY good" : why);
                res = response == 2 && tur;
        }
        conn_close(&cn);
        return res;
}

/* A Task Management Function request; returns its response code or a negative errno. */
static int tmf(struct conn *cn, const struct ctx *c, uint8_t function, uint32_t ref_itt,
               uint32_t ref_cmdsn, uint32_t *tmf_itt, char *seen, size_t seenlen)
{
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        bhs[0] = 0x40 | ISCSI_OP_TMF_REQ;
        bhs[1] = 0x80 | function;
        if (function <= 5)
                lun_encode(bhs + 8, c->lun);
        *tmf_itt = ++cn->itt;
        put_be32(bhs + 16, *tmf_itt);
        put_be32(bhs + 20, ref_itt);
        put_be32(bhs + 24, cn->cmdsn);
        put_be32(bhs + 28, cn->exp_statsn);
        put_be32(bhs + 32, ref_cmdsn);
        int rc = pdu_send(cn, bhs, NULL, 0);
        seen[0] = 0;
        while (rc == 0) {
                struct pdu p;
                rc = pdu_recv(cn, &p);
                if (rc != 0)
                        break;
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                uint32_t itt = iscsi_bhs_itt(p.bhs);
                if (op == ISCSI_OP_TMF_RSP && itt == *tmf_itt) {
                        rc = p.bhs[2];
                        pdu_free(&p);
                        return rc;
                }
                size_t n = strlen(seen);
                snprintf(seen + n, seenlen - n, "%spdu 0x%02x itt 0x%x status 0x%02x",
                         n ? ", " : "", op, itt, p.bhs[3]);
                pdu_free(&p);
        }
        return rc;
}

/*
 * ABORT TASK for a WRITE waiting for its Data-Out after an R2T: "Function complete"; a late
 * Data-Out for the aborted task does no harm; the ITT is free again, and a new WRITE with it
 * writes what it carries.
 */
static int case_abort_task_mid_r2t(struct ctx *c, char *detail)
{
        struct conn cn;
        uint8_t bhs[ISCSI_BHS_LEN], cdb[10] = {0x2a};
        char seen[256], why[256] = "";
        const uint32_t len = 65536, lba = SCRATCH_LBA(5);
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, (uint16_t)(len / c->block_size));
        build_scsi_cmd(&cn, c, bhs, cdb, sizeof(cdb), false, true, len);
        uint32_t itt = iscsi_bhs_itt(bhs), cmdsn = get_be32(bhs + 24);
        pdu_send(&cn, bhs, NULL, 0);
        struct pdu p;
        int rc = pdu_recv(&cn, &p);
        if (rc != 0 || iscsi_bhs_opcode(p.bhs) != ISCSI_OP_R2T) {
                DETAIL("no R2T: rc=%d opcode 0x%02x", rc, rc == 0 ? iscsi_bhs_opcode(p.bhs) : 0);
                if (rc == 0)
                        pdu_free(&p);
                conn_close(&cn);
                return 0;
        }
        uint32_t ttt = get_be32(p.bhs + 20);
        pdu_free(&p);
        uint32_t tmf_itt;
        int response = tmf(&cn, c, 1, itt, cmdsn, &tmf_itt, seen, sizeof(seen));
        if (response != 0) {
                DETAIL("ABORT TASK: %s %d%s%.200s", response < 0 ? "error" : "response", response,
                       seen[0] ? "; before it: " : "", seen);
                conn_close(&cn);
                return 0;
        }
        /* Late data for the aborted task, as an initiator with data in flight sends it. */
        uint8_t *buf = malloc(len);
        if (buf == NULL) {
                conn_close(&cn);
                return 0;
        }
        memset(buf, 0xab, len);
        uint32_t datasn = 0;
        send_data_out(&cn, c, itt, ttt, buf, 0, 4096, &datasn, false);
        /* A ping drains whatever the target says to it (nothing, or a Reject). */
        if (!nop_ok(&cn)) {
                DETAIL("ABORT TASK: Function complete; then the connection died after a late "
                       "Data-Out for the aborted task");
                free(buf);
                conn_close(&cn);
                return 0;
        }
        /* The same ITT for a new WRITE, all of it on R2T. */
        fill_random(buf, len);
        struct scsi_result r;
        struct write_plan plan = {0};
        uint32_t reuse = itt;
        write_run(&cn, c, lba, buf, len, &plan, &reuse, &r);
        int res = 0;
        if (r.rc != 0 || r.status != 0)
                snprintf(why, sizeof(why),
                         "new WRITE with the same ITT: rc=%d reject 0x%02x "
                         "status 0x%02x",
                         r.rc, r.reject_reason, r.status);
        else
                res = read_matches(&cn, c, lba, buf, len, why, sizeof(why));
        free(buf);
        DETAIL("ABORT TASK: Function complete%s%.160s; %.160s", seen[0] ? " after " : "", seen,
               res ? "ITT reused, data written and read back" : why);
        conn_close(&cn);
        return res;
}

/* A reset unit attention: 06/29/00 power on or reset, 02 bus reset, 03 device reset. */
static bool reset_ua(const struct scsi_result *r)
{
        return r->rc == 0 && r->status == 2 && r->key == 6 && r->asc == 0x29 && r->ascq <= 3;
}

/*
 * TARGET WARM RESET: "Function complete"; then the next command of every session of the
 * target, the one that asked and another one, gets a reset unit attention, and the one after
 * it is GOOD (SAM: a target reset is a hard reset of every logical unit).
 */
static int case_target_warm_reset(struct ctx *c, char *detail)
{
        struct conn cn, other;
        struct scsi_result r1, r2, o1, o2;
        char seen[256];
        if (session(c, &cn, false, detail) != 0)
                return 0;
        if (session(c, &other, false, detail) != 0) {
                conn_close(&cn);
                return 0;
        }
        uint32_t tmf_itt;
        int response = tmf(&cn, c, 6, 0xffffffffu, cn.cmdsn, &tmf_itt, seen, sizeof(seen));
        if (response != 0) {
                DETAIL("TARGET WARM RESET: %s %d%s%.200s", response < 0 ? "error" : "response",
                       response, seen[0] ? "; before it: " : "", seen);
                conn_close(&cn);
                conn_close(&other);
                return 0;
        }
        scsi_exec(&cn, c, cdb_tur, sizeof(cdb_tur), 0, &r1);
        scsi_exec(&cn, c, cdb_tur, sizeof(cdb_tur), 0, &r2);
        scsi_exec(&other, c, cdb_tur, sizeof(cdb_tur), 0, &o1);
        scsi_exec(&other, c, cdb_tur, sizeof(cdb_tur), 0, &o2);
        DETAIL("Function complete; next TEST UNIT READY: status 0x%02x sense %x/%02x/%02x, then "
               "0x%02x; on another session: 0x%02x sense %x/%02x/%02x, then 0x%02x",
               r1.status, r1.key, r1.asc, r1.ascq, r2.status, o1.status, o1.key, o1.asc, o1.ascq,
               o2.status);
        conn_close(&cn);
        conn_close(&other);
        return reset_ua(&r1) && r2.rc == 0 && r2.status == 0 && reset_ua(&o1) && o2.rc == 0 &&
               o2.status == 0;
}

/*
 * CLEAR ACA on a target without ACA (NACA unsupported): FUNCTION REJECTED (255, SAM-5 7.3),
 * and the session goes on.
 */
static int case_clear_aca(struct ctx *c, char *detail)
{
        struct conn cn;
        struct scsi_result r;
        char seen[256];
        if (session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t tmf_itt;
        int response = tmf(&cn, c, 3, 0xffffffffu, cn.cmdsn, &tmf_itt, seen, sizeof(seen));
        scsi_exec(&cn, c, cdb_tur, sizeof(cdb_tur), 0, &r);
        DETAIL("CLEAR ACA: response %d; next TEST UNIT READY: status 0x%02x", response, r.status);
        conn_close(&cn);
        return response == 255 && r.rc == 0;
}

/* ------------------------------------------------------------------------------------------ */
/*
 * Resource bounds against a hostile or slow initiator. Immediate commands (I bit) are not
 * held back by the CmdSN window, so one connection can have any number of them in flight:
 * the target must bound what it holds per connection (write data being collected, tasks
 * waiting for Data-Out, output queued for a reader that does not read) and keep serving
 * the other sessions meanwhile. With --target-pid the target's resident memory is sampled
 * during each case and its growth must stay below RSS_GROWTH_MAX_KIB. The READ floods ask
 * for well above that (800 MiB, 1 GiB), so a target that queues whatever it is asked fails,
 * while one that holds a bounded queue (tandemd: 64 MiB) passes with room for its allocator's
 * slack (a sanitizer's quarantine of freed memory included).
 */

/* The bounds tandemd documents (daemon/iscsi/conn.h); a target may choose lower ones. */
#define COLLECT_BYTES_MAX  (256u << 20) /* write data being collected per connection */
#define COLLECT_TASKS_MAX  1024u        /* tasks waiting for Data-Out per connection */
#define RSS_GROWTH_MAX_KIB (600l << 10)
#define SCSI_TASK_SET_FULL 0x28
#define TMF_ABORT_TASK_SET 2
#define TMF_LUN_RESET      5
/* Where the read cases' known pattern lives on the LUN, in bytes: far from other cases. */
#define PATTERN_BASE  (128ull << 20)
#define PATTERN_BYTES (16u << 20)

/* A value from /proc/PID/status in KiB (e.g. "VmRSS"), or -1. */
static long proc_status_kib(pid_t pid, const char *key)
{
        char path[64], line[256];
        size_t klen = strlen(key);
        long v = -1;
        snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
        FILE *f = fopen(path, "r");
        if (f == NULL)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
                        v = strtol(line + klen + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return v;
}

/* The target's resident memory over a case: at the start, the highest sample, the last. */
struct rss_watch {
        long base, peak, last; /* KiB; -1 when unknown */
};

static void rss_sample(const struct ctx *c, struct rss_watch *w)
{
        long v = c->target_pid > 0 ? proc_status_kib(c->target_pid, "VmRSS") : -1;
        if (v < 0)
                return;
        w->last = v;
        if (v > w->peak)
                w->peak = v;
}

static void rss_start(const struct ctx *c, struct rss_watch *w)
{
        w->base = w->peak = w->last = -1;
        rss_sample(c, w);
        w->base = w->last;
}

/* Appends the figures to detail; returns false when the growth is above the bound. */
static bool rss_judge(const struct ctx *c, struct rss_watch *w, char *detail)
{
        size_t n = strlen(detail);
        rss_sample(c, w);
        if (w->base < 0) {
                snprintf(detail + n, DETAIL_LEN - n, "; target memory not measured%s",
                         c->target_pid > 0 ? " (cannot read /proc)" : " (no --target-pid)");
                return true;
        }
        long growth = w->peak - w->base;
        snprintf(detail + n, DETAIL_LEN - n,
                 "; target RSS %ld MiB before, peak %ld MiB (+%ld MiB, limit +%ld), %ld MiB "
                 "after",
                 w->base >> 10, w->peak >> 10, growth >> 10, RSS_GROWTH_MAX_KIB >> 10,
                 w->last >> 10);
        return growth < RSS_GROWTH_MAX_KIB;
}

/* Appends to detail (for the lines cases build step by step). */
static void detail_add(char *detail, const char *fmt, ...)
{
        size_t n = strlen(detail);
        if (n >= DETAIL_LEN - 1)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail + n, DETAIL_LEN - n, fmt, ap);
        va_end(ap);
}

/* An immediate command: I bit set, CmdSN is the next one but not taken. */
static void build_immediate_cmd(struct conn *cn, const struct ctx *c, uint8_t *bhs,
                                const uint8_t *cdb, size_t cdblen, bool read, bool write,
                                uint32_t edtl)
{
        build_scsi_cmd(cn, c, bhs, cdb, cdblen, read, write, edtl);
        bhs[0] |= 0x40;
        cn->cmdsn--;
}

/*
 * n immediate WRITE(10)s of blocks blocks each, no data, ITTs first_itt .. first_itt + n - 1,
 * all sent in one go (one TCP write, as a hostile initiator would).
 */
static int send_write_flood(struct conn *cn, const struct ctx *c, unsigned n, uint32_t lba,
                            uint16_t blocks, uint32_t *first_itt)
{
        uint8_t *buf = malloc((size_t)n * ISCSI_BHS_LEN);
        if (buf == NULL)
                return -ENOMEM;
        uint8_t cdb[10] = {0x2a};
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, blocks);
        for (unsigned i = 0; i < n; i++) {
                uint8_t *bhs = buf + (size_t)i * ISCSI_BHS_LEN;
                build_immediate_cmd(cn, c, bhs, cdb, sizeof(cdb), false, true,
                                    (uint32_t)blocks * c->block_size);
                if (i == 0)
                        *first_itt = iscsi_bhs_itt(bhs);
        }
        int rc = send_all(cn->fd, buf, (size_t)n * ISCSI_BHS_LEN);
        free(buf);
        return rc;
}

/* What a flooded WRITE got first. */
enum flood_answer {
        FLOOD_NONE,
        FLOOD_R2T,
        FLOOD_RESPONSE,
};

struct flood_result {
        unsigned r2t, task_set_full, other, rejects;
        unsigned first_full;  /* index of the first TASK SET FULL, n if none */
        unsigned last_r2t;    /* index of the last R2T + 1, 0 if none */
        uint8_t other_status; /* status of the first other response */
        uint32_t r2t_bytes;   /* desired length of the first R2T */
        bool full_with_sense; /* a TASK SET FULL came with sense data */
};

/* Wait until each of the n flooded WRITEs got an R2T or a SCSI Response. */
static int collect_flood(struct conn *cn, uint32_t first_itt, unsigned n, struct flood_result *fr,
                         char *why, size_t whylen)
{
        uint8_t *seen = calloc(n, 1);
        unsigned answered = 0;
        int rc = 0;
        if (seen == NULL)
                return -ENOMEM;
        memset(fr, 0, sizeof(*fr));
        fr->first_full = n;
        while (answered < n) {
                struct pdu p;
                rc = pdu_recv(cn, &p);
                if (rc != 0) {
                        snprintf(why, whylen, "%u of %u WRITEs answered, then %s", answered, n,
                                 strerror(-rc));
                        break;
                }
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                uint32_t i = iscsi_bhs_itt(p.bhs) - first_itt;
                if (op == ISCSI_OP_REJECT) {
                        fr->rejects++;
                        /* The rejected command's header comes back as the data segment. */
                        if (p.dlen >= ISCSI_BHS_LEN)
                                i = iscsi_bhs_itt(p.data) - first_itt;
                        if (i < n && !seen[i]) {
                                seen[i] = FLOOD_RESPONSE;
                                answered++;
                        }
                } else if (i < n && op == ISCSI_OP_R2T && !seen[i]) {
                        seen[i] = FLOOD_R2T;
                        answered++;
                        if (fr->r2t++ == 0)
                                fr->r2t_bytes = get_be32(p.bhs + 44);
                        fr->last_r2t = i + 1;
                } else if (i < n && op == ISCSI_OP_SCSI_RSP && !seen[i]) {
                        seen[i] = FLOOD_RESPONSE;
                        answered++;
                        if (p.bhs[3] == SCSI_TASK_SET_FULL) {
                                fr->task_set_full++;
                                if (i < fr->first_full)
                                        fr->first_full = i;
                                if (p.dlen > 0)
                                        fr->full_with_sense = true;
                        } else if (fr->other++ == 0) {
                                fr->other_status = p.bhs[3];
                        }
                }
                pdu_free(&p);
        }
        free(seen);
        return rc;
}

/*
 * After the tasks first_itt .. + n were aborted: a ping flushes the connection, and nothing
 * may have come for them meanwhile (an aborted task gets no response, RFC 7143 11.5.1).
 */
static int flushed_without_answers(struct conn *cn, uint32_t first_itt, unsigned n, char *why,
                                   size_t whylen)
{
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        bhs[0] = 0x40 | ISCSI_OP_NOP_OUT;
        bhs[1] = 0x80;
        uint32_t itt = ++cn->itt;
        put_be32(bhs + 16, itt);
        put_be32(bhs + 20, 0xffffffffu);
        put_be32(bhs + 24, cn->cmdsn);
        put_be32(bhs + 28, cn->exp_statsn);
        int rc = pdu_send(cn, bhs, NULL, 0);
        unsigned stray = 0;
        while (rc == 0) {
                struct pdu p;
                rc = pdu_recv(cn, &p);
                if (rc != 0)
                        break;
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                bool back = op == ISCSI_OP_NOP_IN && iscsi_bhs_itt(p.bhs) == itt;
                if (iscsi_bhs_itt(p.bhs) - first_itt < n)
                        stray++;
                pdu_free(&p);
                if (back)
                        break;
        }
        if (rc != 0) {
                snprintf(why, whylen, "ping after the abort: %s", strerror(-rc));
                return -EIO;
        }
        if (stray) {
                snprintf(why, whylen, "%u PDUs for aborted tasks after the abort", stray);
                return -EPROTO;
        }
        return 0;
}

/*
 * One round of a WRITE flood: n WRITEs of blocks blocks, no data, R2Ts left unanswered, then
 * the task management function tmf_fn frees them. Appends "round: ..." to detail; returns 1
 * when the target bounded what it reserved (at most max_tasks tasks and max_bytes bytes got
 * R2Ts, every other one TASK SET FULL after them) and the function freed every task.
 */
static int write_flood_round(struct conn *cn, struct ctx *c, const char *round, unsigned n,
                             uint16_t blocks, unsigned max_tasks, uint64_t max_bytes,
                             uint8_t tmf_fn, struct rss_watch *rss, unsigned *r2ts, char *detail)
{
        char why[256] = "", seen[256];
        uint32_t first_itt = 0, edtl = (uint32_t)blocks * c->block_size;
        struct flood_result fr;
        int rc = send_write_flood(cn, c, n, 0, blocks, &first_itt);
        if (rc == 0)
                rc = collect_flood(cn, first_itt, n, &fr, why, sizeof(why));
        else
                snprintf(why, sizeof(why), "sending: %s", strerror(-rc));
        rss_sample(c, rss);
        if (rc != 0) {
                detail_add(detail, "%s: %s", round, why);
                return 0;
        }
        *r2ts = fr.r2t;
        detail_add(detail, "%s: %u WRITEs of %u bytes: %u R2T, %u TASK SET FULL", round, n, edtl,
                   fr.r2t, fr.task_set_full);
        if (fr.other)
                detail_add(detail, ", %u other status (first 0x%02x)", fr.other, fr.other_status);
        if (fr.rejects)
                detail_add(detail, ", %u Rejects", fr.rejects);
        bool bounded = fr.r2t >= 1 && fr.r2t <= max_tasks && (uint64_t)fr.r2t * edtl <= max_bytes &&
                       fr.task_set_full == n - fr.r2t && fr.last_r2t <= fr.first_full &&
                       !fr.full_with_sense;
        if (!bounded)
                detail_add(detail,
                           " (want 1..%u R2Ts within %" PRIu64 " MiB, then TASK SET FULL "
                           "without sense for the rest)",
                           max_tasks, max_bytes >> 20);
        uint32_t tmf_itt;
        int response = tmf(cn, c, tmf_fn, 0xffffffffu, cn->cmdsn, &tmf_itt, seen, sizeof(seen));
        if (response != 0) {
                detail_add(detail, "; %s: %s %d%s%.120s",
                           tmf_fn == TMF_LUN_RESET ? "LUN RESET" : "ABORT TASK SET",
                           response < 0 ? "error" : "response", response,
                           seen[0] ? "; before it: " : "", seen);
                return 0;
        }
        if (flushed_without_answers(cn, first_itt, n, why, sizeof(why)) != 0) {
                detail_add(detail, "; %s", why);
                return 0;
        }
        detail_add(detail, "; %s complete",
                   tmf_fn == TMF_LUN_RESET ? "LUN RESET" : "ABORT TASK SET");
        return bounded;
}

/*
 * Two flood rounds (the second proves the first one's reservations were all freed: it must
 * get as many R2Ts), then an ordinary WRITE on the same connection is written and read back.
 */
static int write_flood_case(struct ctx *c, char *detail, unsigned n, uint16_t blocks,
                            unsigned max_tasks, uint8_t tmf_fn)
{
        struct conn cn;
        struct rss_watch rss;
        char why[256] = "";
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        rss_start(c, &rss);
        detail[0] = 0;
        unsigned r2t1 = 0, r2t2 = 0;
        int res = write_flood_round(&cn, c, "first", n, blocks, max_tasks, COLLECT_BYTES_MAX,
                                    tmf_fn, &rss, &r2t1, detail);
        if (res) {
                detail_add(detail, "; ");
                res = write_flood_round(&cn, c, "second", n, blocks, max_tasks, COLLECT_BYTES_MAX,
                                        tmf_fn, &rss, &r2t2, detail);
                if (res && r2t2 != r2t1) {
                        detail_add(detail,
                                   " (second round got %u R2Ts, the first %u: "
                                   "reservations not freed)",
                                   r2t2, r2t1);
                        res = 0;
                }
        }
        if (res) {
                /* After a LUN RESET the next command reports the reset: let it go by. */
                uint8_t buf[65536];
                fill_random(buf, sizeof(buf));
                uint32_t lba = SCRATCH_LBA(6);
                res = tur_ok(&cn, c, why, sizeof(why)) == 0 &&
                      write_ok(&cn, c, lba, buf, sizeof(buf), why, sizeof(why)) &&
                      read_matches(&cn, c, lba, buf, sizeof(buf), why, sizeof(why));
                detail_add(detail, "; then %s", res ? "a 64 KiB WRITE good and read back" : why);
        }
        if (!rss_judge(c, &rss, detail))
                res = 0;
        conn_close(&cn);
        return res;
}

/* Immediate WRITEs of 16 MiB (tandem's MAXIMUM TRANSFER LENGTH), none of them given data. */
static int case_collect_flood(struct ctx *c, char *detail)
{
        if (block_size_known(c, detail) != 0)
                return 0;
        uint32_t blocks = (16u << 20) / c->block_size;
        if (blocks > 0xffff)
                blocks = 0xffff; /* WRITE(10) */
        unsigned fit = COLLECT_BYTES_MAX / (blocks * c->block_size);
        return write_flood_case(c, detail, fit + 8, (uint16_t)blocks, COLLECT_TASKS_MAX,
                                TMF_ABORT_TASK_SET);
}

/* 2000 immediate one-block WRITEs without data: the cap on tasks waiting for Data-Out. */
static int case_collect_flood_tasks(struct ctx *c, char *detail)
{
        return write_flood_case(c, detail, 2000, 1, COLLECT_TASKS_MAX, TMF_LUN_RESET);
}

/* The read cases' known pattern: random bytes, a fresh seed per run. */
static void pattern_fill(const struct ctx *c, uint8_t *buf, uint32_t len)
{
        uint64_t x = c->pattern_seed | 1;
        for (uint32_t i = 0; i < len; i++) {
                /* xorshift64 */
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf[i] = (uint8_t)(x >> 24);
        }
}

/* True when buf holds the pattern's LUN bytes [off, off + len). */
static bool pattern_matches(const struct ctx *c, const uint8_t *buf, uint64_t off, uint32_t len)
{
        return off >= PATTERN_BASE && off - PATTERN_BASE <= PATTERN_BYTES &&
               len <= PATTERN_BYTES - (off - PATTERN_BASE) &&
               memcmp(buf, c->pattern + (off - PATTERN_BASE), len) == 0;
}

/* Write the known pattern over [PATTERN_BASE, + PATTERN_BYTES) once per run. */
static int pattern_region_ready(struct ctx *c, char *detail)
{
        if (c->pattern_written)
                return 0;
        if ((uint64_t)c->num_blocks * c->block_size < PATTERN_BASE + PATTERN_BYTES) {
                DETAIL("LUN of %" PRIu64 " bytes is too small for the pattern region at %llu MiB",
                       c->num_blocks * c->block_size, PATTERN_BASE >> 20);
                return -ENOSPC;
        }
        struct conn cn;
        char why[256] = "";
        const uint32_t chunk = 1u << 20;
        if (c->pattern == NULL && (c->pattern = malloc(PATTERN_BYTES)) == NULL)
                return -ENOMEM;
        pattern_fill(c, c->pattern, PATTERN_BYTES);
        if (session(c, &cn, false, detail) != 0)
                return -EIO;
        int ok = 1;
        for (uint32_t off = 0; ok && off < PATTERN_BYTES; off += chunk)
                ok = write_ok(&cn, c, (uint32_t)((PATTERN_BASE + off) / c->block_size),
                              c->pattern + off, chunk, why, sizeof(why));
        logout(&cn);
        conn_close(&cn);
        if (!ok) {
                DETAIL("writing the pattern: %s", why);
                return -EIO;
        }
        c->pattern_written = true;
        return 0;
}

/* One READ of a flood, checked PDU by PDU as its Data-In arrives. */
struct read_track {
        uint64_t lun_off;
        uint32_t next_off, next_datasn;
        bool done;
};

struct read_flood {
        unsigned n;
        uint32_t len, first_itt;
        struct read_track *t;
        unsigned good, bad_status, bad_data, bad_seq, pdus;
        uint8_t first_bad_status;
        char first_problem[160];
};

/*
 * n immediate READ(10)s of len bytes, READ i at the pattern offset (i % regions) * len; all in
 * one TCP write when pace_us is 0, else one command every pace_us.
 */
static int send_read_flood(struct conn *cn, struct ctx *c, struct read_flood *rf, unsigned n,
                           uint32_t len, unsigned pace_us)
{
        unsigned regions = PATTERN_BYTES / len;
        uint8_t *buf = malloc((size_t)n * ISCSI_BHS_LEN);
        memset(rf, 0, sizeof(*rf));
        rf->t = calloc(n, sizeof(*rf->t));
        if (buf == NULL || rf->t == NULL || regions == 0) {
                free(buf);
                return -ENOMEM;
        }
        rf->n = n;
        rf->len = len;
        for (unsigned i = 0; i < n; i++) {
                uint8_t cdb[10] = {0x28}, *bhs = buf + (size_t)i * ISCSI_BHS_LEN;
                rf->t[i].lun_off = PATTERN_BASE + (uint64_t)(i % regions) * len;
                put_be32(cdb + 2, (uint32_t)(rf->t[i].lun_off / c->block_size));
                put_be16(cdb + 7, (uint16_t)(len / c->block_size));
                build_immediate_cmd(cn, c, bhs, cdb, sizeof(cdb), true, false, len);
                if (i == 0)
                        rf->first_itt = iscsi_bhs_itt(bhs);
        }
        int rc = 0;
        if (pace_us == 0)
                rc = send_all(cn->fd, buf, (size_t)n * ISCSI_BHS_LEN);
        for (unsigned i = 0; pace_us && rc == 0 && i < n; i++) {
                rc = send_all(cn->fd, buf + (size_t)i * ISCSI_BHS_LEN, ISCSI_BHS_LEN);
                usleep(pace_us);
        }
        free(buf);
        return rc;
}

static void read_problem(struct read_flood *rf, unsigned *counter, const char *fmt, ...)
{
        (*counter)++;
        if (rf->first_problem[0])
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rf->first_problem, sizeof(rf->first_problem), fmt, ap);
        va_end(ap);
}

/* One Data-In or SCSI Response of the flood: DataSN, offset, data and status checked. */
static void read_flood_pdu(const struct ctx *c, struct read_flood *rf, const struct pdu *p)
{
        uint8_t op = iscsi_bhs_opcode(p->bhs);
        uint32_t i = iscsi_bhs_itt(p->bhs) - rf->first_itt;
        if (i >= rf->n || (op != ISCSI_OP_DATA_IN && op != ISCSI_OP_SCSI_RSP))
                return;
        struct read_track *t = &rf->t[i];
        if (t->done) {
                read_problem(rf, &rf->bad_seq, "READ %u: pdu 0x%02x after its status", i, op);
                return;
        }
        bool has_status = op == ISCSI_OP_SCSI_RSP || (p->bhs[1] & 0x01);
        if (op == ISCSI_OP_DATA_IN) {
                uint32_t datasn = get_be32(p->bhs + 36), off = get_be32(p->bhs + 40);
                rf->pdus++;
                if (datasn != t->next_datasn || off != t->next_off || p->dlen > rf->len - off) {
                        read_problem(rf, &rf->bad_seq,
                                     "READ %u: Data-In DataSN %u offset %u length %u, want "
                                     "DataSN %u offset %u",
                                     i, datasn, off, p->dlen, t->next_datasn, t->next_off);
                        t->done = true;
                        return;
                }
                if (!pattern_matches(c, p->data, t->lun_off + off, p->dlen))
                        read_problem(rf, &rf->bad_data, "READ %u: data at offset %u differ", i,
                                     off);
                t->next_datasn++;
                t->next_off += p->dlen;
        }
        if (!has_status)
                return;
        t->done = true;
        uint8_t status = p->bhs[3];
        if (status != 0) {
                if (rf->bad_status++ == 0)
                        rf->first_bad_status = status;
                return;
        }
        if (t->next_off != rf->len || (p->bhs[1] & 0x06))
                read_problem(rf, &rf->bad_seq, "READ %u: GOOD after %u of %u bytes, flags 0x%02x",
                             i, t->next_off, rf->len, p->bhs[1]);
        else
                rf->good++;
}

/* Read until every READ of the flood has its status. */
static int read_flood_collect(struct conn *cn, const struct ctx *c, struct read_flood *rf,
                              struct rss_watch *rss, char *why, size_t whylen)
{
        unsigned done = 0;
        while (done < rf->n) {
                struct pdu p;
                int rc = pdu_recv(cn, &p);
                if (rc != 0) {
                        snprintf(why, whylen, "%u of %u READs complete, then %s", done, rf->n,
                                 strerror(-rc));
                        return rc;
                }
                if (iscsi_bhs_opcode(p.bhs) == ISCSI_OP_REJECT) {
                        snprintf(why, whylen, "Reject reason 0x%02x", p.bhs[2]);
                        pdu_free(&p);
                        return -EPROTO;
                }
                uint32_t i = iscsi_bhs_itt(p.bhs) - rf->first_itt;
                bool was_done = i < rf->n && rf->t[i].done;
                read_flood_pdu(c, rf, &p);
                if (i < rf->n && !was_done && rf->t[i].done)
                        done++;
                if (rf->pdus % 64 == 0)
                        rss_sample(c, rss);
                pdu_free(&p);
        }
        return 0;
}

/* Sessions that measure how fast the target answers while one connection is stalled. */
#define PROBES 4

struct probes {
        struct conn cn[PROBES];
        unsigned up, asked, slow;
        uint64_t max_ms;
        char problem[160];
};

/*
 * Opened right after the stalled connection: workers take connections in turn, so with up
 * to PROBES workers one of them shares the stalled connection's worker.
 */
static int probes_open(struct ctx *c, struct probes *pr, char *detail)
{
        memset(pr, 0, sizeof(*pr));
        for (unsigned i = 0; i < PROBES; i++) {
                if (session(c, &pr->cn[i], false, detail) != 0) {
                        for (unsigned k = 0; k < i; k++)
                                conn_close(&pr->cn[k]);
                        return -EIO;
                }
                pr->up++;
        }
        return 0;
}

/* TEST UNIT READY on every probe; a probe slower than 1 s or failing counts as a problem. */
static void probes_ask(const struct ctx *c, struct probes *pr)
{
        for (unsigned i = 0; i < pr->up; i++) {
                struct scsi_result r;
                uint64_t t0 = now_ms();
                scsi_exec(&pr->cn[i], c, cdb_tur, sizeof(cdb_tur), 0, &r);
                uint64_t ms = now_ms() - t0;
                pr->asked++;
                if (ms > pr->max_ms)
                        pr->max_ms = ms;
                if (r.rc != 0 || r.status != 0 || ms >= 1000) {
                        pr->slow++;
                        if (!pr->problem[0])
                                snprintf(pr->problem, sizeof(pr->problem),
                                         "probe %u: TEST UNIT READY after %" PRIu64
                                         " ms: %s status 0x%02x",
                                         i, ms, r.rc ? strerror(-r.rc) : "answered", r.status);
                }
        }
}

static void probes_close(struct probes *pr)
{
        for (unsigned i = 0; i < pr->up; i++) {
                logout(&pr->cn[i]);
                conn_close(&pr->cn[i]);
        }
}

/*
 * A flood of immediate READs (n of len bytes, all sent in one go) on a connection with a
 * small receive buffer that then is not read for stall_ms; meanwhile other sessions must be
 * answered within 1 s, and the target's memory must stay bounded. Then everything is read:
 * every READ GOOD, with the right data, DataSN and offsets.
 */
static int read_flood_case(struct ctx *c, char *detail, unsigned n, uint32_t len, unsigned pace_us,
                           unsigned stall_ms)
{
        struct conn cn;
        struct probes pr;
        struct read_flood rf;
        struct rss_watch rss;
        struct login_opts o = {.target = c->target, .rcvbuf = 16384};
        char why[256] = "";
        if (block_size_known(c, detail) != 0)
                return 0;
        int rc = pattern_region_ready(c, detail);
        if (rc == -ENOSPC)
                return -1;
        if (rc != 0 || session_with(c, &cn, &o, detail) != 0)
                return 0;
        if (probes_open(c, &pr, detail) != 0) {
                conn_close(&cn);
                return 0;
        }
        rss_start(c, &rss);
        rc = send_read_flood(&cn, c, &rf, n, len, pace_us);
        if (rc != 0) {
                DETAIL("sending %u READs: %s", n, strerror(-rc));
                goto out;
        }
        uint64_t start = now_ms();
        while (now_ms() - start < stall_ms) {
                probes_ask(c, &pr);
                rss_sample(c, &rss);
                usleep(100 * 1000);
        }
        long stall_peak = rss.peak;
        int big = 4 << 20;
        setsockopt(cn.fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        uint64_t t0 = now_ms();
        rc = read_flood_collect(&cn, c, &rf, &rss, why, sizeof(why));
        uint64_t drain_ms = now_ms() - t0;
        bool ping = rc == 0 && nop_ok(&cn);
        DETAIL("%u immediate READs of %u KiB %s, not read for %u ms: other sessions answered "
               "%u TEST UNIT READYs, slowest %" PRIu64 " ms%s%s; then %u GOOD, %u bad status",
               n, len >> 10, pace_us ? "one by one" : "in one burst", stall_ms, pr.asked, pr.max_ms,
               pr.slow ? ", " : "", pr.problem, rf.good, rf.bad_status);
        if (rf.bad_status)
                detail_add(detail, " (first 0x%02x)", rf.first_bad_status);
        detail_add(detail, ", %u Data-In PDUs in %" PRIu64 " ms", rf.pdus, drain_ms);
        if (rf.bad_data || rf.bad_seq)
                detail_add(detail, ", %u data and %u sequence errors: %s", rf.bad_data, rf.bad_seq,
                           rf.first_problem);
        if (rc != 0)
                detail_add(detail, "; %s", why);
        else if (!ping)
                detail_add(detail, "; the connection then did not answer a ping");
        rc = rc == 0 && ping && rf.good == n && pr.slow == 0 && pr.asked > 0 ? 1 : 0;
        if (rss.base >= 0)
                detail_add(detail, "; target RSS +%ld MiB while not read",
                           (stall_peak - rss.base) >> 10);
        if (!rss_judge(c, &rss, detail))
                rc = 0;
out:
        free(rf.t);
        probes_close(&pr);
        conn_close(&cn);
        return rc;
}

/*
 * 200 READs of 4 MiB, more than the CmdSN window, issued one by one (as an initiator issues
 * its I/O) through a reader that does not read: the target stops reading the connection once
 * enough output is queued, and goes on when it drains, still bounded (the commands it did not
 * read meanwhile all arrive at once then).
 */
static int case_slow_reader(struct ctx *c, char *detail)
{
        return read_flood_case(c, detail, 200, 4u << 20, 1000, 3000);
}

/*
 * 64 READs of 16 MiB (1 GiB, the largest transfer one READ may ask for) sent in one go to a
 * reader that does not read: the queued output must stay bounded, wherever a batch of PDUs
 * arriving together ends.
 */
static int case_read_burst(struct ctx *c, char *detail)
{
        return read_flood_case(c, detail, 64, 16u << 20, 0, 2000);
}

/* ------------------------------------------------------------------------------------------ */
/*
 * Lengths that disagree (issue 23): a CDB that sends data, offered none of it (EDTL 0, or no
 * W bit), and READs whose EDTL is below or above what the CDB reads. RFC 7143 11.4.5.2: the
 * residual counts the bytes the CDB transfers that the EDTL did not cover (O) or the bytes of
 * the EDTL the command did not use (U). tandemd runs a short WRITE on what came (FCP-4 9.4.2
 * a: nothing, here) and answers GOOD with O; commands that need all their data answer CHECK
 * CONDITION, ILLEGAL REQUEST. Either way the O count is the CDB's bytes and the medium is
 * unchanged.
 */

/* Send one command with these R/W bits and EDTL and no data; collect the outcome. */
static void scsi_exec_flags(struct conn *cn, const struct ctx *c, const uint8_t *cdb, size_t cdblen,
                            bool rd, bool wr, uint32_t edtl, struct scsi_result *r)
{
        uint8_t bhs[ISCSI_BHS_LEN];
        memset(r, 0, sizeof(*r));
        build_scsi_cmd(cn, c, bhs, cdb, cdblen, rd, wr, edtl);
        r->rc = pdu_send(cn, bhs, NULL, 0);
        if (r->rc == 0)
                scsi_wait(cn, iscsi_bhs_itt(bhs), r);
}

struct dataout_row {
        const char *name;
        uint8_t cdb[16];
        uint8_t cdb_len;
        uint32_t blocks;  /* data-out the CDB asks for, in blocks (0: bytes below) */
        uint32_t bytes;   /* ... or in bytes (parameter lists) */
        bool must_refuse; /* needs all its data: CHECK CONDITION, never GOOD */
};

#define NOOFFER_LBA    SCRATCH_LBA(8)
#define NOOFFER_BLOCKS 8u

/* LBA NOOFFER_LBA, 8 blocks, in each CDB's own layout (filled in at run time). */
static const struct dataout_row dataout_rows[] = {
    {"WRITE(6)", {0x0a, 0, 0, 0, NOOFFER_BLOCKS, 0}, 6, NOOFFER_BLOCKS, 0, false},
    {"WRITE(10)", {0x2a, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0}, 10, NOOFFER_BLOCKS, 0, false},
    {"WRITE(12)",
     {0xaa, 0, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0, 0},
     12,
     NOOFFER_BLOCKS,
     0,
     false},
    {"WRITE(16)",
     {0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0, 0},
     16,
     NOOFFER_BLOCKS,
     0,
     false},
    {"WRITE AND VERIFY(10)",
     {0x2e, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0},
     10,
     NOOFFER_BLOCKS,
     0,
     false},
    {"WRITE AND VERIFY(16)",
     {0x8e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0, 0},
     16,
     NOOFFER_BLOCKS,
     0,
     false},
    {"ORWRITE(16)",
     {0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0, 0},
     16,
     NOOFFER_BLOCKS,
     0,
     false},
    {"VERIFY(10) BYTCHK=1",
     {0x2f, 0x02, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0},
     10,
     NOOFFER_BLOCKS,
     0,
     false},
    /* one block against every block: it once kept its range locked without that block */
    {"VERIFY(10) BYTCHK=3", {0x2f, 0x06, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0}, 10, 1, 0, false},
    {"WRITE SAME(10)", {0x41, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0}, 10, 1, 0, true},
    {"WRITE SAME(16)",
     {0x93, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NOOFFER_BLOCKS, 0, 0},
     16,
     1,
     0,
     true},
    {"COMPARE AND WRITE", {0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, 16, 2, 0, true},
    {"UNMAP", {0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0}, 10, 0, 24, true},
    {"MODE SELECT(6)", {0x15, 0x10, 0, 0, 24, 0}, 6, 0, 24, true},
    {"MODE SELECT(10)", {0x55, 0x10, 0, 0, 0, 0, 0, 0, 28, 0}, 10, 0, 28, true},
    {"PERSISTENT RESERVE OUT", {0x5f, 0x00, 0, 0, 0, 0, 0, 0, 24, 0}, 10, 0, 24, true},
    {"EXTENDED COPY", {0x83, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 48, 0, 0}, 16, 0, 48, true},
};

/* The CDB with its LBA set to NOOFFER_LBA (block commands). */
static void dataout_cdb(const struct dataout_row *row, uint8_t *cdb)
{
        memcpy(cdb, row->cdb, sizeof(row->cdb));
        if (row->bytes)
                return;
        switch (cdb[0]) {
        case 0x0a:
                put_be24(cdb + 1, NOOFFER_LBA & 0x1fffff);
                break;
        case 0x2a:
        case 0x2e:
        case 0x2f:
        case 0x41:
        case 0xaa:
                put_be32(cdb + 2, NOOFFER_LBA);
                break;
        default:
                put_be64(cdb + 2, NOOFFER_LBA);
                break;
        }
}

/* One answer judged: O with the CDB's bytes, GOOD only where allowed. */
static bool dataout_answer_ok(const struct dataout_row *row, const struct scsi_result *r,
                              uint32_t want_resid, char *why, size_t whylen)
{
        if (r->rc != 0) {
                snprintf(why, whylen, "%s: %s (reject 0x%02x)", row->name, strerror(-r->rc),
                         r->reject_reason);
                return false;
        }
        bool status_ok = r->status == 0 ? !row->must_refuse : (r->status == 2 && r->key == 5);
        bool resid_ok = r->resid_flags == RESID_O && r->residual == want_resid;
        if (status_ok && resid_ok)
                return true;
        snprintf(
            why, whylen, "%s: status 0x%02x sense %x/%02x/%02x, residual %s%s %u (want %s, O %u)",
            row->name, r->status, r->key, r->asc, r->ascq, (r->resid_flags & RESID_O) ? "O" : "",
            (r->resid_flags & RESID_U) ? "U" : "", r->residual,
            row->must_refuse ? "CHECK CONDITION 5/xx" : "GOOD or 5/xx", want_resid);
        return false;
}

/*
 * Every data-out CDB of the table, 3 ways: W with EDTL 0; no R/W and EDTL 0; R only with the
 * CDB's length as EDTL. Then the blocks the WRITEs address must read back unchanged.
 */
static int case_dataout_not_offered(struct ctx *c, char *detail)
{
        struct conn cn;
        char why[256] = "";
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t len = NOOFFER_BLOCKS * c->block_size;
        uint8_t *before = malloc(len);
        if (before == NULL) {
                conn_close(&cn);
                return 0;
        }
        fill_random(before, len);
        int res = write_ok(&cn, c, NOOFFER_LBA, before, len, why, sizeof(why));
        unsigned judged = 0, good = 0;
        for (size_t i = 0; res && i < sizeof(dataout_rows) / sizeof(dataout_rows[0]); i++) {
                const struct dataout_row *row = &dataout_rows[i];
                uint32_t want = row->bytes ? row->bytes : row->blocks * c->block_size;
                uint8_t cdb[16];
                dataout_cdb(row, cdb);
                const struct {
                        bool rd, wr;
                        uint32_t edtl;
                } ways[3] = {{false, true, 0}, {false, false, 0}, {true, false, want}};
                for (int w = 0; res && w < 3; w++) {
                        struct scsi_result r;
                        scsi_exec_flags(&cn, c, cdb, row->cdb_len, ways[w].rd, ways[w].wr,
                                        ways[w].edtl, &r);
                        /* A unit attention owed to this nexus comes first: ask again. */
                        if (r.rc == 0 && r.status == 2 && r.key == 6)
                                scsi_exec_flags(&cn, c, cdb, row->cdb_len, ways[w].rd, ways[w].wr,
                                                ways[w].edtl, &r);
                        if (!dataout_answer_ok(row, &r, want, why, sizeof(why))) {
                                size_t n = strlen(why);
                                snprintf(why + n, sizeof(why) - n, " [%s EDTL %u]",
                                         ways[w].wr   ? "W"
                                         : ways[w].rd ? "R"
                                                      : "no R/W",
                                         ways[w].edtl);
                                res = 0;
                        }
                        judged++;
                        good += r.status == 0;
                }
        }
        if (res)
                res = read_matches(&cn, c, NOOFFER_LBA, before, len, why, sizeof(why));
        DETAIL("%u commands offered no data-out: %u GOOD, %u CHECK CONDITION, each with "
               "residual overflow of its CDB's bytes; %s",
               judged, good, judged - good, res ? "blocks unchanged" : why);
        free(before);
        conn_close(&cn);
        return res;
}

/*
 * READ(10) of 2 blocks with EDTL 0, 200, 1 block, 2 blocks, 3 blocks; and READ(16) without
 * R/W and EDTL 0: the data sent is min(EDTL, CDB), matching what is on the medium, and the
 * residual is O (CDB - EDTL), U (EDTL - CDB) or none.
 */
static int case_read_residuals(struct ctx *c, char *detail)
{
        struct conn cn;
        char why[256] = "";
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t bs = c->block_size, len = 2 * bs, lba = SCRATCH_LBA(9);
        uint8_t *pattern = malloc(len);
        if (pattern == NULL) {
                conn_close(&cn);
                return 0;
        }
        fill_random(pattern, len);
        int res = write_ok(&cn, c, lba, pattern, len, why, sizeof(why));
        const struct {
                uint32_t edtl;
                bool rd;
        } rows[] = {{0, true}, {200, true}, {bs, true}, {2 * bs, true}, {3 * bs, true}, {0, false}};
        for (size_t i = 0; res && i < sizeof(rows) / sizeof(rows[0]); i++) {
                uint8_t cdb[16] = {0};
                size_t cdblen;
                if (rows[i].rd) {
                        cdb[0] = 0x28;
                        put_be32(cdb + 2, lba);
                        put_be16(cdb + 7, 2);
                        cdblen = 10;
                } else {
                        cdb[0] = 0x88;
                        put_be64(cdb + 2, lba);
                        put_be32(cdb + 10, 2);
                        cdblen = 16;
                }
                struct scsi_result r;
                scsi_exec_flags(&cn, c, cdb, cdblen, rows[i].rd, false, rows[i].edtl, &r);
                uint32_t edtl = rows[i].edtl;
                uint32_t sent = rows[i].rd ? (edtl < len ? edtl : len) : 0;
                uint8_t flags = edtl < len ? RESID_O : edtl > len ? RESID_U : 0;
                uint32_t resid = edtl < len ? len - edtl : edtl - len;
                uint32_t cmp = sent < sizeof(r.data) ? sent : sizeof(r.data);
                if (r.rc != 0 || r.status != 0 || r.data_in_bytes != sent ||
                    r.resid_flags != flags || (flags && r.residual != resid) ||
                    memcmp(r.data, pattern, cmp) != 0) {
                        snprintf(why, sizeof(why),
                                 "READ(%zu) of %u bytes, %s EDTL %u: rc %d status 0x%02x, %u data "
                                 "bytes (want %u), residual flags 0x%02x count %u (want 0x%02x "
                                 "%u)%s",
                                 cdblen, len, rows[i].rd ? "R" : "no R/W", edtl, r.rc, r.status,
                                 r.data_in_bytes, sent, r.resid_flags, r.residual, flags, resid,
                                 memcmp(r.data, pattern, cmp) ? ", data differs" : "");
                        res = 0;
                }
        }
        DETAIL("%s", res ? "EDTL 0, 200, 1, 2, 3 blocks for 2 blocks and no R/W: data and "
                           "residuals right"
                         : why);
        free(pattern);
        conn_close(&cn);
        return res;
}

/*
 * Header rules (RFC 7143 section 11): reserved code values in defined fields are a protocol
 * error, fields that contradict each other an invalid PDU field. One row per rule: the PDU,
 * the answer, and the session must go on (a NOP-Out ping answered).
 */
struct pdu_rule_row {
        const char *name;
        uint8_t opcode;   /* with the I bit when immediate */
        uint8_t flags;    /* byte 1 */
        uint32_t itt;     /* 0: a fresh one */
        uint32_t word20;  /* EDTL, TTT, RTT or CID<<16 */
        bool cdb_tur;     /* SCSI command: TEST UNIT READY */
        int want_reject;  /* reason, or -1 */
        int want_tmf_rsp; /* TMF response, or -1 */
};

static const struct pdu_rule_row pdu_rule_rows[] = {
    {"rule_cmd_itt_reserved", ISCSI_OP_SCSI_CMD, 0x81, 0xffffffffu, 0, true, 0x09, -1},
    {"rule_cmd_edtl_without_rw", ISCSI_OP_SCSI_CMD, 0x81, 0, 512, true, 0x09, -1},
    {"rule_cmd_attr_reserved", ISCSI_OP_SCSI_CMD, 0x85, 0, 0, true, 0x04, -1},
    {"rule_tmf_itt_reserved", 0x40 | ISCSI_OP_TMF_REQ, 0x85, 0xffffffffu, 0xffffffffu, false, 0x09,
     -1},
    {"rule_tmf_function_0", 0x40 | ISCSI_OP_TMF_REQ, 0x80, 0, 0xffffffffu, false, 0x04, -1},
    {"rule_tmf_function_13", 0x40 | ISCSI_OP_TMF_REQ, 0x8d, 0, 0xffffffffu, false, 0x04, -1},
    {"rule_tmf_function_127", 0x40 | ISCSI_OP_TMF_REQ, 0xff, 0, 0xffffffffu, false, 0x04, -1},
    {"rule_tmf_query_task_unsupported", 0x40 | ISCSI_OP_TMF_REQ, 0x89, 0, 0x12345, false, -1, 5},
    {"rule_text_itt_reserved", 0x40 | ISCSI_OP_TEXT_REQ, 0x80, 0xffffffffu, 0xffffffffu, false,
     0x09, -1},
    {"rule_logout_itt_reserved", 0x40 | ISCSI_OP_LOGOUT_REQ, 0x80, 0xffffffffu, 0, false, 0x09, -1},
    {"rule_logout_reason_3", 0x40 | ISCSI_OP_LOGOUT_REQ, 0x83, 0, 0, false, 0x04, -1},
    {"rule_logout_reason_127", 0x40 | ISCSI_OP_LOGOUT_REQ, 0xff, 0, 0, false, 0x04, -1},
    {"rule_nop_itt_reserved_not_immediate", ISCSI_OP_NOP_OUT, 0x80, 0xffffffffu, 0xffffffffu, false,
     0x09, -1},
    {"rule_nop_itt_and_ttt", 0x40 | ISCSI_OP_NOP_OUT, 0x80, 0, 0x1234, false, 0x09, -1},
};

static int case_pdu_rule(struct ctx *c, const void *arg, char *detail)
{
        const struct pdu_rule_row *row = arg;
        struct conn cn;
        if (session(c, &cn, false, detail) != 0)
                return 0;
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        bhs[0] = row->opcode;
        bhs[1] = row->flags;
        if ((row->opcode & 0x3f) == ISCSI_OP_SCSI_CMD || (row->opcode & 0x3f) == ISCSI_OP_TMF_REQ)
                lun_encode(bhs + 8, c->lun);
        uint32_t itt = row->itt ? row->itt : ++cn.itt;
        put_be32(bhs + 16, itt);
        put_be32(bhs + 20, row->word20);
        bool immediate = row->opcode & 0x40;
        put_be32(bhs + 24, immediate ? cn.cmdsn : cn.cmdsn++);
        put_be32(bhs + 28, cn.exp_statsn);
        if (row->cdb_tur)
                memcpy(bhs + 32, cdb_tur, sizeof(cdb_tur));
        pdu_send(&cn, bhs, NULL, 0);
        struct pdu p;
        int rc = pdu_recv(&cn, &p);
        int res = 0;
        if (rc != 0) {
                DETAIL("no answer: %s", strerror(-rc));
                conn_close(&cn);
                return 0;
        }
        uint8_t op = iscsi_bhs_opcode(p.bhs);
        if (row->want_reject >= 0) {
                res = op == ISCSI_OP_REJECT && p.bhs[2] == row->want_reject &&
                      p.dlen >= ISCSI_BHS_LEN && memcmp(p.data, bhs, ISCSI_BHS_LEN) == 0;
                DETAIL("pdu 0x%02x reason 0x%02x%s (want Reject 0x%02x with the header)", op,
                       p.bhs[2],
                       op == ISCSI_OP_REJECT && p.dlen >= ISCSI_BHS_LEN &&
                               memcmp(p.data, bhs, ISCSI_BHS_LEN) == 0
                           ? " with the header"
                           : "",
                       row->want_reject);
        } else {
                res = op == ISCSI_OP_TMF_RSP && p.bhs[2] == row->want_tmf_rsp &&
                      iscsi_bhs_itt(p.bhs) == itt;
                DETAIL("pdu 0x%02x response %u (want TMF response %d)", op, p.bhs[2],
                       row->want_tmf_rsp);
        }
        pdu_free(&p);
        bool alive = nop_ok(&cn);
        if (!alive)
                res = 0;
        size_t n = strlen(detail);
        snprintf(detail + n, DETAIL_LEN - n, "; session %s", alive ? "goes on" : "lost");
        conn_close(&cn);
        return res;
}

/*
 * Data-Out whose Target Transfer Tag is not the one of our R2T (RFC 7143 11.7.4: copied from
 * the R2T): Reject (invalid PDU field), nothing taken; the right Data-Out then completes the
 * WRITE, and what is read back is what the right one carried.
 */
static int case_dataout_foreign_ttt(struct ctx *c, char *detail)
{
        struct conn cn;
        char why[256] = "";
        const uint32_t len = 16384, lba = SCRATCH_LBA(10);
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint8_t bhs[ISCSI_BHS_LEN], cdb[10] = {0x2a};
        put_be32(cdb + 2, lba);
        put_be16(cdb + 7, (uint16_t)(len / c->block_size));
        build_scsi_cmd(&cn, c, bhs, cdb, sizeof(cdb), false, true, len);
        uint32_t itt = iscsi_bhs_itt(bhs);
        pdu_send(&cn, bhs, NULL, 0);
        struct pdu p;
        int rc = pdu_recv(&cn, &p);
        if (rc != 0 || iscsi_bhs_opcode(p.bhs) != ISCSI_OP_R2T) {
                DETAIL("no R2T: rc=%d", rc);
                if (rc == 0)
                        pdu_free(&p);
                conn_close(&cn);
                return 0;
        }
        uint32_t ttt = get_be32(p.bhs + 20), want = get_be32(p.bhs + 44);
        pdu_free(&p);
        uint8_t *junk = malloc(len), *good = malloc(len);
        if (junk == NULL || good == NULL) {
                free(junk);
                free(good);
                conn_close(&cn);
                return 0;
        }
        memset(junk, 0x5a, len);
        fill_random(good, len);
        uint32_t datasn = 0;
        send_data_out(&cn, c, itt, ttt ^ 0x00ff00ffu, junk, 0, want, &datasn, true);
        rc = pdu_recv(&cn, &p);
        int res = rc == 0 && iscsi_bhs_opcode(p.bhs) == ISCSI_OP_REJECT && p.bhs[2] == 0x09;
        if (!res)
                snprintf(why, sizeof(why),
                         "Data-Out with a TTT we never sent: rc %d pdu 0x%02x "
                         "reason 0x%02x (want Reject 0x09)",
                         rc, rc == 0 ? iscsi_bhs_opcode(p.bhs) : 0, rc == 0 ? p.bhs[2] : 0);
        if (rc == 0)
                pdu_free(&p);
        if (res) {
                uint32_t datasn = 0;
                send_data_out(&cn, c, itt, ttt, good, 0, want, &datasn, true);
                struct scsi_result r = {0};
                scsi_wait(&cn, itt, &r);
                if (r.rc != 0 || r.status != 0) {
                        snprintf(why, sizeof(why), "the right Data-Out then: rc %d status 0x%02x",
                                 r.rc, r.status);
                        res = 0;
                } else {
                        res = read_matches(&cn, c, lba, good, len, why, sizeof(why));
                }
        }
        DETAIL("%s", res ? "Reject 0x09 for a foreign TTT; the right Data-Out then wrote, "
                           "read back equal"
                         : why);
        free(junk);
        free(good);
        conn_close(&cn);
        return res;
}

/*
 * A command with the ITT of one still executing (a WRITE SAME over 8 MiB in the medium, sent
 * in the same segment): Reject 0x07 TASK IN PROGRESS for the second, GOOD for the first
 * (RFC 7143 11.17.1: an ITT is unique among the connection's outstanding tasks).
 */
static int case_itt_in_use_executing(struct ctx *c, char *detail)
{
        struct conn cn;
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        if (!cn.immediate_data) {
                DETAIL("cannot build the case: ImmediateData=No");
                conn_close(&cn);
                return -1;
        }
        uint32_t bs = c->block_size, blocks = 8u * 1024 * 1024 / bs;
        uint8_t *pattern = malloc(bs);
        if (pattern == NULL) {
                conn_close(&cn);
                return 0;
        }
        memset(pattern, 0xa7, bs);
        uint8_t ws[16] = {0x93}, tur[6] = {0}, first[ISCSI_BHS_LEN], second[ISCSI_BHS_LEN];
        put_be64(ws + 2, SCRATCH_LBA(12));
        put_be32(ws + 10, blocks);
        build_scsi_cmd(&cn, c, first, ws, sizeof(ws), false, true, bs);
        build_scsi_cmd(&cn, c, second, tur, sizeof(tur), false, false, 0);
        uint32_t itt = iscsi_bhs_itt(first);
        put_be32(second + 16, itt);
        pdu_send(&cn, first, pattern, bs);
        pdu_send(&cn, second, NULL, 0);
        free(pattern);
        int rejected = -1, status = -1;
        for (int i = 0; i < 8 && (rejected < 0 || status < 0); i++) {
                struct pdu p;
                if (pdu_recv(&cn, &p) != 0)
                        break;
                uint8_t op = iscsi_bhs_opcode(p.bhs);
                if (op == ISCSI_OP_REJECT)
                        rejected = p.bhs[2];
                else if (op == ISCSI_OP_SCSI_RSP && iscsi_bhs_itt(p.bhs) == itt)
                        status = p.bhs[3];
                pdu_free(&p);
        }
        int res = rejected == 0x07 && status == 0;
        DETAIL("second command with the executing WRITE SAME's ITT: %s (reason 0x%02x, want "
               "0x07); the WRITE SAME: status %d (want 0)",
               rejected < 0 ? "no Reject" : "Reject", rejected < 0 ? 0 : rejected, status);
        conn_close(&cn);
        return res;
}

/*
 * R and W both set on a READ(10) and on a WRITE(10) (no command here is bidirectional):
 * Reject 0x09 for each, nothing written; the session goes on (a TUR after them is GOOD).
 */
static int case_bidi_on_plain_cdb(struct ctx *c, char *detail)
{
        struct conn cn;
        char why[200] = "";
        if (block_size_known(c, detail) != 0 || session(c, &cn, false, detail) != 0)
                return 0;
        uint32_t bs = c->block_size, lba = SCRATCH_LBA(13);
        uint8_t *buf = malloc(bs);
        if (buf == NULL) {
                conn_close(&cn);
                return 0;
        }
        memset(buf, 0, bs);
        int res = write_ok(&cn, c, lba, buf, bs, why, sizeof(why));
        static const uint8_t ops[] = {0x28, 0x2a};
        for (size_t i = 0; res && i < sizeof(ops); i++) {
                uint8_t cdb[10] = {ops[i]}, bhs[ISCSI_BHS_LEN];
                put_be32(cdb + 2, lba);
                put_be16(cdb + 7, 1);
                build_scsi_cmd(&cn, c, bhs, cdb, sizeof(cdb), true, true, bs);
                memset(buf, 0x3c, bs);
                pdu_send(&cn, bhs, ops[i] == 0x2a && cn.immediate_data ? buf : NULL,
                         ops[i] == 0x2a && cn.immediate_data ? bs : 0);
                struct scsi_result r = {0};
                scsi_wait(&cn, iscsi_bhs_itt(bhs), &r);
                if (r.rc != -EPROTO || r.reject_reason != 0x09) {
                        snprintf(why, sizeof(why),
                                 "opcode 0x%02x with R and W: rc %d reject 0x%02x "
                                 "status %u (want Reject 0x09)",
                                 ops[i], r.rc, r.reject_reason, r.status);
                        res = 0;
                }
        }
        memset(buf, 0, bs);
        if (res)
                res = read_matches(&cn, c, lba, buf, bs, why, sizeof(why)) &&
                      tur_ok(&cn, c, why, sizeof(why)) == 0;
        DETAIL("%s", res ? "Reject 0x09 for READ(10) and WRITE(10) with R and W; nothing "
                           "written, the session goes on"
                         : why);
        free(buf);
        conn_close(&cn);
        return res;
}

#include "tdm-badpdu-close.inc"

struct test_case {
        const char *name;
        int (*fn)(struct ctx *c, char *detail);
};

static const struct test_case cases[] = {
    {"unknown_opcode", case_unknown_opcode},
    {"dsl_above_max_recv", case_dsl_too_big},
    {"ahs_garbage", case_ahs_garbage},
    {"header_digest_mismatch", case_header_digest},
    {"dataout_unknown_itt", case_dataout_unknown_itt},
    {"cdb_reserved_bits_inquiry", case_cdb_reserved_inquiry},
    {"cdb_reserved_bits_tur", case_cdb_reserved_tur},
    {"read_beyond_end", case_read_beyond_end},
    {"login_duplicate_key", case_login_duplicate_key},
    {"login_unknown_key", case_login_unknown_key},
    {"login_oversized_text", case_login_oversized_text},
    {"login_wrong_stage", case_login_wrong_stage},
    {"login_no_such_target", case_login_no_such_target},
    {"chap_failure", case_chap_failure},
    {"drop_mid_command", case_drop_mid_command},
    {"drop_mid_r2t", case_drop_mid_r2t},
    {"digest_write_read", case_digest_write_read},
    {"data_digest_mismatch", case_data_digest_mismatch},
    {"immediate_data_over_first_burst", case_immediate_over_first_burst},
    {"unsolicited_over_first_burst", case_unsolicited_over_first_burst},
    {"dataout_out_of_order", case_dataout_out_of_order},
    {"cmdsn_out_of_window", case_cmdsn_out_of_window},
    {"nop_ping_data", case_nop_ping_data},
    {"logout_for_recovery", case_logout_for_recovery},
    {"abort_task_mid_r2t", case_abort_task_mid_r2t},
    {"target_warm_reset", case_target_warm_reset},
    {"clear_aca", case_clear_aca},
    {"collect_flood", case_collect_flood},
    {"collect_flood_tasks", case_collect_flood_tasks},
    {"slow_reader", case_slow_reader},
    {"read_burst", case_read_burst},
    {"login_cycles", case_login_cycles},
    {"dataout_not_offered", case_dataout_not_offered},
    {"read_residuals", case_read_residuals},
    {"dataout_foreign_ttt", case_dataout_foreign_ttt},
    {"itt_in_use_executing", case_itt_in_use_executing},
    {"bidi_on_plain_cdb", case_bidi_on_plain_cdb},
    {"logout_initiator_closes_first", case_logout_initiator_closes_first},
    {"logout_left_open_is_reset", case_logout_left_open_is_reset},
};

/* ------------------------------------------------------------------------------------------ */

/* The target still serves: the long-lived session answers, and a fresh login works. */
#include "tdm-badpdu-limits.inc"

/* Cases that need a LUN whose store holds every request for seconds (--stalled-lun). */
static const struct test_case stalled_lun_cases[] = {
    {"logout_in_flight_left_open_is_reset", case_logout_in_flight_left_open_is_reset},
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The k-th case of those the target's setup allows (--limits, then --stalled-lun); NULL past
 * the end. */
static const struct test_case *optional_case(const struct ctx *c, size_t k)
{
        size_t nlimits = c->lim.on ? ARRAY_LEN(limit_cases) : 0;
        size_t nstalled = c->stalled_lun ? ARRAY_LEN(stalled_lun_cases) : 0;
        if (k < nlimits)
                return &limit_cases[k];
        return k - nlimits < nstalled ? &stalled_lun_cases[k - nlimits] : NULL;
}

static int health_check(struct ctx *c, char *why, size_t whylen)
{
        struct conn fresh;
        char detail[DETAIL_LEN];

        if (!c->healthy_up) {
                snprintf(why, whylen, "long-lived session is down");
                return -EIO;
        }
        if (tur_ok(&c->healthy, c, why, whylen) != 0) {
                c->healthy_up = false;
                conn_close(&c->healthy);
                size_t n = strlen(why);
                snprintf(why + n, whylen - n, " (long-lived session)");
                return -EIO;
        }
        if (session(c, &fresh, false, detail) != 0) {
                snprintf(why, whylen, "fresh session: %.200s", detail);
                return -EIO;
        }
        int rc = tur_ok(&fresh, c, why, whylen);
        if (rc == 0 && logout(&fresh) != 0) {
                snprintf(why, whylen, "fresh session: logout failed");
                rc = -EIO;
        }
        conn_close(&fresh);
        return rc;
}

static void print_detail(const char *s)
{
        for (; *s; s++)
                putchar(*s == '\n' ? ' ' : *s);
}

static bool selected(const char *list, const char *name)
{
        if (list == NULL)
                return true;
        size_t n = strlen(name);
        for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
                if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
                        return true;
        return false;
}

static void usage(FILE *f)
{
        fprintf(
            f, "usage: tdm-badpdu --portal HOST:PORT --target IQN [--lun N] [--initiator IQN]\n"
               "                  [--chap-target IQN --chap-user NAME] [--cases a,b] [--cycles N]\n"
               "                  [--target-pid PID] [--list] [--limits KEY=N,...]\n"
               "                  [--stalled-lun]\n");
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
            {"portal", required_argument, NULL, 'p'},
            {"target", required_argument, NULL, 't'},
            {"lun", required_argument, NULL, 'l'},
            {"initiator", required_argument, NULL, 'i'},
            {"chap-target", required_argument, NULL, 'C'},
            {"chap-user", required_argument, NULL, 'U'},
            {"cases", required_argument, NULL, 'c'},
            {"cycles", required_argument, NULL, 'n'},
            {"target-pid", required_argument, NULL, 'P'},
            {"limits", required_argument, NULL, 'M'},
            {"stalled-lun", no_argument, NULL, 'S'},
            {"list", no_argument, NULL, 'L'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        struct ctx c = {.initiator = "iqn.2026-11.io.tandem:tdm-badpdu", .cycles = 1000};
        const char *portal = NULL, *list = NULL;
        int opt;

        while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (opt) {
                case 'p':
                        portal = optarg;
                        break;
                case 't':
                        c.target = optarg;
                        break;
                case 'l':
                        c.lun = strtoull(optarg, NULL, 0);
                        break;
                case 'i':
                        c.initiator = optarg;
                        break;
                case 'C':
                        c.chap_target = optarg;
                        break;
                case 'U':
                        c.chap_user = optarg;
                        break;
                case 'c':
                        list = optarg;
                        break;
                case 'n':
                        c.cycles = (unsigned)strtoul(optarg, NULL, 0);
                        break;
                case 'P':
                        c.target_pid = (pid_t)strtol(optarg, NULL, 10);
                        break;
                case 'M':
                        if (parse_limits(&c, optarg) != 0)
                                return 2;
                        break;
                case 'S':
                        c.stalled_lun = true;
                        break;
                case 'L':
                        for (size_t i = 0; i < ARRAY_LEN(cases); i++)
                                printf("%s\n", cases[i].name);
                        for (size_t i = 0; i < ARRAY_LEN(pdu_rule_rows); i++)
                                printf("%s\n", pdu_rule_rows[i].name);
                        for (size_t i = 0; i < ARRAY_LEN(limit_cases); i++)
                                printf("%s (with --limits)\n", limit_cases[i].name);
                        for (size_t i = 0; i < ARRAY_LEN(stalled_lun_cases); i++)
                                printf("%s (with --stalled-lun)\n", stalled_lun_cases[i].name);
                        return 0;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (portal == NULL || c.target == NULL) {
                usage(stderr);
                return 2;
        }
        const char *colon = strrchr(portal, ':');
        size_t hostlen = colon ? (size_t)(colon - portal) : strlen(portal);
        if (hostlen >= sizeof(c.host)) {
                usage(stderr);
                return 2;
        }
        memcpy(c.host, portal, hostlen);
        c.port = colon ? (uint16_t)atoi(colon + 1) : 3260;

        signal(SIGPIPE, SIG_IGN);
        srand((unsigned)time(NULL) ^ (unsigned)getpid());
        c.pattern_seed = (uint32_t)rand();
        crc32c_init();
        if (crc32c("123456789", 9) != 0xe3069283u) {
                fprintf(stderr, "tdm-badpdu: CRC32C self-test failed\n");
                return 2;
        }

        char detail[DETAIL_LEN];
        if (session(&c, &c.healthy, false, detail) != 0) {
                fprintf(stderr, "tdm-badpdu: cannot log in to %s at %s: %s\n", c.target, portal,
                        detail);
                return 2;
        }
        c.healthy_up = true;

        int failures = 0;
        size_t ncases = ARRAY_LEN(cases), nrules = ARRAY_LEN(pdu_rule_rows);
        for (size_t i = 0;; i++) {
                const struct pdu_rule_row *rule =
                    i >= ncases && i < ncases + nrules ? &pdu_rule_rows[i - ncases] : NULL;
                const struct test_case *tc = i < ncases ? &cases[i]
                                             : rule     ? NULL
                                                        : optional_case(&c, i - ncases - nrules);
                if (!rule && !tc)
                        break;
                const char *name = rule ? rule->name : tc->name;
                if (!selected(list, name))
                        continue;
                detail[0] = 0;
                int res = rule ? case_pdu_rule(&c, rule, detail) : tc->fn(&c, detail);
                char why[DETAIL_LEN] = "";
                if (res >= 0 && health_check(&c, why, sizeof(why)) != 0) {
                        res = 0;
                        size_t n = strlen(detail);
                        snprintf(detail + n, sizeof(detail) - n,
                                 "; target unhealthy afterwards: %s", why);
                }
                printf("badinput: case=%s result=%s detail=", name,
                       res > 0    ? "pass"
                       : res == 0 ? "fail"
                                  : "skip");
                print_detail(detail);
                putchar('\n');
                fflush(stdout);
                if (res == 0)
                        failures++;
        }
        if (c.healthy_up)
                logout(&c.healthy);
        free(c.pattern);
        return failures ? 1 : 0;
}
