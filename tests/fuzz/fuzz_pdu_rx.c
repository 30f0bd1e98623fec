/*
 * The daemon's connection receive path under fuzzing: bytes written into one end of a
 * socketpair, iscsi_conn_on_readable() on the other, as a worker thread runs it, with the
 * live registry behind it (one target, two 4 MiB LUNs in /dev/shm, rebuilt for every input).
 * What the connection sends back is parsed and checked too.
 *
 * No daemon file is changed for this: the worker functions the connection code
 * calls (daemon/core/worker.c) are defined here instead, so worker.c (threads, epoll) is
 * never linked in. If a daemon object starts to need more of worker.c, this link fails
 * with duplicate symbols: add the new function here or split worker.c.
 *
 * Input: one flags byte, then the initiator's bytes.
 *   bit 0: a login PDU built here goes first (bit 1: it asks for CRC32C digests; bit 5:
 *          a discovery session instead of a normal one)
 *   bit 2: framed: the rest is PDUs (BHS, AHS, data as the DSL says, padding), written
 *          with zero padding and, once the login negotiated them, digests computed here;
 *          without it the rest is written as it is
 *   bits 3-4: written in pieces of all / 7 / 48 / 1000 bytes, the connection reading
 *          after each
 * Then the initiator side closes, as it would, and the connection is destroyed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "iscsi/conn.h"
#include "tandem/config.h"
#include "tandem/iscsi_pdu.h"
#include "tandem/registry.h"

#define TARGET    "iqn.2026-11.io.tandem:t1"
#define INITIATOR "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-inq"
#define MAX_PUMPS 4096 /* bound on read rounds per write: a stuck loop is a finding */
#define OUT_MAX   (64u * 1024 * 1024)

/* ---- the worker, as far as the connection code sees it ---- */

struct iscsi_worker {
        struct tdm_iscsi_cfg cfg;
};

static struct iscsi_worker worker;
static uint64_t fake_clock = 1000000000ull;

uint64_t tdm_now_ns(void)
{
        return fake_clock += 1000; /* deterministic: no timer ever fires here */
}

const struct tdm_iscsi_cfg *iscsi_worker_cfg(struct iscsi_worker *w)
{
        return &w->cfg;
}

void iscsi_worker_want_write(struct iscsi_worker *w, struct iscsi_conn *c, bool on)
{
        (void)w;
        c->want_write = on;
}

void iscsi_worker_pause_rx(struct iscsi_worker *w, struct iscsi_conn *c, bool paused)
{
        (void)w;
        c->rx_paused = paused;
}

/* The registry here has no replicated LUN, so no login waits for a promotion. */
void iscsi_worker_hold_login(struct iscsi_worker *w, bool held)
{
        (void)w;
        (void)held;
        abort();
}

/* This thread runs no loop: every command completes before it is answered. */
void iscsi_conn_mark_dirty(struct iscsi_conn *c)
{
        (void)c;
        abort();
}

/* The portal's environment: the registry, as tandemd wires it. */
static const struct iscsi_env registry_env = {
    .lookup_target = tdm_registry_login_target,
    .discovery_auth = tdm_registry_discovery_auth,
    .for_each_visible = tdm_registry_for_each_visible,
};

const struct iscsi_env *iscsi_env(void)
{
        return &registry_env;
}

/* ---- the registry ---- */

static char shm_dir[64];
static struct tdm_config config;

static void registry_up(void)
{
        for (int i = 0; i < 2; i++) {
                char path[128];
                snprintf(path, sizeof(path), "%s/lun%d.img", shm_dir, i);
                unlink(path); /* fresh media: the same input meets the same data */
        }
        char err[512] = "";
        int rc = tdm_registry_init(&config, NULL, err, sizeof(err));
        FUZZ_ASSERT(rc == 0, "tdm_registry_init = %d: %s", rc, err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        snprintf(shm_dir, sizeof(shm_dir), "/dev/shm/tandem-fuzz-rx-XXXXXX");
        if (!mkdtemp(shm_dir)) {
                snprintf(shm_dir, sizeof(shm_dir), "/tmp/tandem-fuzz-rx-XXXXXX");
                FUZZ_ASSERT(mkdtemp(shm_dir) != NULL, "no temporary directory");
        }
        char text[2048], err[512] = "";
        snprintf(
            text, sizeof(text),
            "state_dir = \"%s/state\";\n" /* absent: no atomic journals, no writes elsewhere */
            "targets = (\n"
            "  { iqn = \"" TARGET "\"; alias = \"fuzz\"; tpgt = 1; acl = [ \"ALL\" ];\n"
            "    luns = ( { lun = 0; path = \"%s/lun0.img\"; size = 4194304L; thin = true;\n"
            "               naa = \"67a6e640c3f1a2b4d5e6f708192a3b4c\"; serial = \"fz0\"; },\n"
            "             { lun = 1; path = \"%s/lun1.img\"; size = 4194304L;\n"
            "               block_size = 4096; thin = false;\n"
            "               naa = \"67a6e640c3f1a2b4d5e6f708192a3b4d\"; serial = \"fz1\"; } );\n"
            "  },\n"
            "  { iqn = \"iqn.2026-11.io.tandem:chap\"; acl = [ \"ALL\" ];\n"
            "    chap = { user = \"fuzzuser\"; secret = \"fuzzsecret123\"; }; }\n"
            ");\n",
            shm_dir, shm_dir, shm_dir);
        int rc = tdm_config_parse_string(text, &config, err, sizeof(err));
        FUZZ_ASSERT(rc == 0, "config: %s", err);
        worker.cfg = config.iscsi;
        return 0;
}

__attribute__((destructor)) static void remove_shm_dir(void)
{
        if (!shm_dir[0])
                return;
        for (int i = 0; i < 2; i++) {
                char path[128];
                snprintf(path, sizeof(path), "%s/lun%d.img", shm_dir, i);
                unlink(path);
        }
        rmdir(shm_dir);
}

/* ---- what the target sends ---- */

struct out_parser {
        uint8_t *buf;
        size_t len;
        bool ffp;         /* after the final login response: digests as negotiated */
        bool hd, dd;      /* the session's digests (known once ffp) */
        uint32_t max_dsl; /* the most the initiator said it takes per PDU */
        unsigned pdus;
        uint32_t stat_sn; /* StatSN the next status-carrying PDU must have (once ffp) */
        bool din_open;    /* a Data-In sequence is under way: */
        uint32_t din_itt, din_sn, din_off; /* its task, next DataSN and buffer offset */
};

/* Full feature phase PDUs that carry a status and take the next StatSN (RFC 7143 11). */
static bool takes_stat_sn(const uint8_t *p)
{
        switch (iscsi_bhs_opcode(p)) {
        case ISCSI_OP_SCSI_RSP:
        case ISCSI_OP_TMF_RSP:
        case ISCSI_OP_TEXT_RSP:
        case ISCSI_OP_LOGOUT_RSP:
        case ISCSI_OP_REJECT:
                return true;
        case ISCSI_OP_NOP_IN: /* an answer, not a ping of our own */
                return get_be32(p + 16) != 0xffffffffu;
        case ISCSI_OP_DATA_IN: /* with the status (S bit) */
                return (p[1] & 0x01) != 0;
        default:
                return false;
        }
}

/* StatSN without gaps or repeats, and each task's Data-In numbered from 0 and contiguous. */
static void check_sequence(struct out_parser *op, const uint8_t *p, uint32_t dsl)
{
        uint8_t opcode = iscsi_bhs_opcode(p);
        uint32_t stat_sn = get_be32(p + 24);
        if (takes_stat_sn(p)) {
                FUZZ_ASSERT(stat_sn == op->stat_sn, "opcode 0x%02x with StatSN %u, want %u", opcode,
                            stat_sn, op->stat_sn);
                op->stat_sn++;
        } else if (opcode == ISCSI_OP_R2T) {
                FUZZ_ASSERT(stat_sn == op->stat_sn, "R2T with StatSN %u, want %u", stat_sn,
                            op->stat_sn);
        }
        if (opcode != ISCSI_OP_DATA_IN)
                return;
        uint32_t itt = get_be32(p + 16), sn = get_be32(p + 36), off = get_be32(p + 40);
        if (!op->din_open || op->din_itt != itt) {
                FUZZ_ASSERT(!op->din_open, "Data-In of 0x%x interleaved with 0x%x", itt,
                            op->din_itt);
                op->din_open = true;
                op->din_itt = itt;
                op->din_sn = 0;
                op->din_off = 0;
        }
        FUZZ_ASSERT(sn == op->din_sn && off == op->din_off,
                    "Data-In of 0x%x: DataSN %u offset %u, want %u and %u", itt, sn, off,
                    op->din_sn, op->din_off);
        op->din_sn++;
        op->din_off += dsl;
        if (p[1] & 0x80)
                op->din_open = false; /* F: the last of the task's data */
}

static bool target_opcode(uint8_t op)
{
        return (op >= ISCSI_OP_NOP_IN && op <= ISCSI_OP_LOGOUT_RSP) || op == ISCSI_OP_R2T ||
               op == ISCSI_OP_ASYNC || op == ISCSI_OP_REJECT;
}

static uint32_t le32(const uint8_t *p)
{
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
               ((uint32_t)p[3] << 24);
}

/* Checks every whole PDU at the front of the buffer and drops it. */
static void out_parse(struct out_parser *op, const struct iscsi_conn *c)
{
        size_t off = 0;
        for (;;) {
                const uint8_t *p = op->buf + off;
                size_t avail = op->len - off;
                if (avail < ISCSI_BHS_LEN)
                        break;
                uint8_t opcode = iscsi_bhs_opcode(p);
                uint32_t dsl = iscsi_bhs_dsl(p);
                bool hd = op->ffp && op->hd, dd = op->ffp && op->dd && dsl;
                size_t total = ISCSI_BHS_LEN + (hd ? 4 : 0) + dsl + iscsi_pad4(dsl) + (dd ? 4 : 0);
                FUZZ_ASSERT(target_opcode(opcode), "target sent opcode 0x%02x", p[0]);
                FUZZ_ASSERT(p[4] == 0, "target sent %u AHS words", p[4]);
                FUZZ_ASSERT(dsl <= (op->ffp ? op->max_dsl : 8192u),
                            "opcode 0x%02x with %u data bytes (limit %u)", opcode, dsl,
                            op->ffp ? op->max_dsl : 8192u);
                if (avail < total)
                        break;
                if (hd) {
                        uint32_t crc =
                            iscsi_crc32c(p, ISCSI_BHS_LEN, ISCSI_CRC32C_SEED) ^ ISCSI_CRC32C_SEED;
                        FUZZ_ASSERT(crc == le32(p + ISCSI_BHS_LEN),
                                    "bad header digest, opcode 0x%02x", opcode);
                }
                const uint8_t *data = p + ISCSI_BHS_LEN + (hd ? 4 : 0);
                for (uint32_t i = dsl; i < dsl + iscsi_pad4(dsl); i++)
                        FUZZ_ASSERT(data[i] == 0, "padding byte 0x%02x", data[i]);
                if (dd) {
                        uint32_t padded = dsl + iscsi_pad4(dsl);
                        uint32_t crc =
                            iscsi_crc32c(data, padded, ISCSI_CRC32C_SEED) ^ ISCSI_CRC32C_SEED;
                        FUZZ_ASSERT(crc == le32(data + padded), "bad data digest, opcode 0x%02x",
                                    opcode);
                }
                if (opcode == ISCSI_OP_REJECT)
                        FUZZ_ASSERT(dsl == ISCSI_BHS_LEN, "Reject carries %u bytes", dsl);
                if (op->ffp)
                        check_sequence(op, p, dsl);
                /* The final login response switches the stream to the session's settings. */
                if (opcode == ISCSI_OP_LOGIN_RSP && (p[1] & 0x83) == 0x83 && p[36] == 0) {
                        FUZZ_ASSERT(c->sess != NULL, "successful final login without a session");
                        op->ffp = true;
                        op->stat_sn = get_be32(p + 24) + 1;
                        op->hd = c->sess->params.header_digest;
                        op->dd = c->sess->params.data_digest;
                        op->max_dsl = c->sess->params.max_xmit_dsl;
                }
                if (fuzz_verbose())
                        fprintf(stderr,
                                "pdu_rx: out opcode 0x%02x flags 0x%02x itt 0x%x dsl %u%s\n",
                                opcode, p[1], get_be32(p + 16), dsl,
                                opcode == ISCSI_OP_REJECT ? " (reject)" : "");
                op->pdus++;
                off += total;
        }
        memmove(op->buf, op->buf + off, op->len - off);
        op->len -= off;
}

/* Reads everything the connection sent so far. */
static void drain(int fd, struct out_parser *op, const struct iscsi_conn *c)
{
        for (;;) {
                if (op->len + 65536 > OUT_MAX)
                        FUZZ_ASSERT(false, "more than %u bytes of output pending", OUT_MAX);
                uint8_t *nb = realloc(op->buf, op->len + 65536);
                FUZZ_ASSERT(nb != NULL, "out of memory");
                op->buf = nb;
                ssize_t n = recv(fd, op->buf + op->len, 65536, MSG_DONTWAIT);
                if (n <= 0)
                        break;
                op->len += (size_t)n;
                out_parse(op, c);
        }
}

/* ---- the connection ---- */

struct link {
        int fd[2]; /* [0] the connection's, [1] the initiator's */
        struct iscsi_conn *c;
        bool closed;
        struct out_parser out;
};

static int queued(int fd)
{
        int n = 0;
        if (ioctl(fd, FIONREAD, &n) < 0)
                return 0;
        return n;
}

/*
 * What the worker does on readable/writable events (worker_main), until the connection
 * has read everything or closed. While it pauses reading (backpressure) only its output
 * moves, which the initiator side here always takes.
 */
static void pump(struct link *lk)
{
        for (int round = 0; !lk->closed; round++) {
                FUZZ_ASSERT(round < MAX_PUMPS, "connection stops reading (%d bytes queued)",
                            queued(lk->fd[0]));
                int rc = lk->c->rx_paused ? 0 : iscsi_conn_on_readable(lk->c);
                drain(lk->fd[1], &lk->out, lk->c);
                if (rc == 0 && lk->c->want_write)
                        rc = iscsi_conn_flush(lk->c);
                drain(lk->fd[1], &lk->out, lk->c);
                if (rc == 0 && lk->c->kill)
                        rc = -ECONNRESET;
                if (rc == 0)
                        iscsi_conn_check_backpressure(lk->c);
                if (rc < 0) {
                        FUZZ_ASSERT(rc != -ENOMEM, "connection ran out of memory");
                        lk->closed = true;
                        break;
                }
                if (queued(lk->fd[0]) == 0 && !lk->c->want_write && !lk->c->rx_paused)
                        break;
        }
}

static void send_bytes(struct link *lk, const uint8_t *p, size_t len, size_t piece)
{
        while (len && !lk->closed) {
                size_t n = len < piece ? len : piece;
                ssize_t w = send(lk->fd[1], p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (w > 0) {
                        p += w;
                        len -= (size_t)w;
                }
                pump(lk);
                if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                        break;
        }
}

/* One PDU of a framed input: padding, and digests when the session has them. */
static void send_framed(struct link *lk, const uint8_t *bhs, const uint8_t *rest, size_t rest_len,
                        size_t *used, size_t piece)
{
        uint32_t ahs = iscsi_bhs_ahs_len(bhs), dsl = iscsi_bhs_dsl(bhs);
        if (ahs > rest_len)
                ahs = (uint32_t)rest_len;
        if (dsl > rest_len - ahs)
                dsl = (uint32_t)(rest_len - ahs);
        /* The input's own padding is skipped: this function writes zeroes instead. */
        *used = ahs + dsl + iscsi_pad4(dsl);
        if (*used > rest_len)
                *used = rest_len;
        bool ffp = lk->c->state == ISCSI_CONN_FFP && lk->c->sess;
        bool hd = ffp && lk->c->sess->params.header_digest;
        bool dd = ffp && lk->c->sess->params.data_digest && iscsi_bhs_dsl(bhs);
        uint32_t pad = iscsi_pad4(iscsi_bhs_dsl(bhs));
        size_t len = ISCSI_BHS_LEN + ahs + (hd ? 4 : 0) + dsl + pad + (dd ? 4 : 0);
        uint8_t *pdu = calloc(1, len);
        FUZZ_ASSERT(pdu != NULL, "out of memory");
        memcpy(pdu, bhs, ISCSI_BHS_LEN);
        memcpy(pdu + ISCSI_BHS_LEN, rest, ahs);
        size_t off = ISCSI_BHS_LEN + ahs;
        if (hd) {
                uint32_t crc = iscsi_crc32c(pdu, off, ISCSI_CRC32C_SEED) ^ ISCSI_CRC32C_SEED;
                for (int i = 0; i < 4; i++)
                        pdu[off + i] = (uint8_t)(crc >> (8 * i));
                off += 4;
        }
        memcpy(pdu + off, rest + ahs, dsl);
        uint8_t *data = pdu + off;
        off += dsl + pad;
        if (dd) {
                /* A short final PDU keeps its DSL: the digest covers what is here. */
                uint32_t crc = iscsi_crc32c(data, dsl + pad, ISCSI_CRC32C_SEED) ^ ISCSI_CRC32C_SEED;
                for (int i = 0; i < 4; i++)
                        pdu[off + i] = (uint8_t)(crc >> (8 * i));
                off += 4;
        }
        send_bytes(lk, pdu, off, piece);
        free(pdu);
}

/* The login libiscsi sends (iscsi-inq, iscsi-ls), optionally asking for digests. */
static size_t canned_login(uint8_t flags, uint8_t *buf, size_t cap)
{
        static const char *const ops[] = {
            "InitialR2T=No",         "ImmediateData=Yes",
            "MaxBurstLength=262144", "FirstBurstLength=262144",
            "DefaultTime2Wait=2",    "DefaultTime2Retain=0",
            "MaxOutstandingR2T=1",   "ErrorRecoveryLevel=0",
            "IFMarker=No",           "OFMarker=No",
            "MaxConnections=1",      "MaxRecvDataSegmentLength=262144",
            "DataPDUInOrder=Yes",    "DataSequenceInOrder=Yes"};
        char text[2048];
        size_t n = 0;
#define KEY(s) n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", s) + 1
        KEY("InitiatorName=" INITIATOR);
        if (flags & 0x20) {
                KEY("SessionType=Discovery");
        } else {
                KEY("TargetName=" TARGET);
                KEY("SessionType=Normal");
        }
        KEY((flags & 0x02) ? "HeaderDigest=CRC32C" : "HeaderDigest=None,CRC32C");
        KEY((flags & 0x02) ? "DataDigest=CRC32C" : "DataDigest=None");
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
                KEY(ops[i]);
#undef KEY
        size_t total = ISCSI_BHS_LEN + n + iscsi_pad4((uint32_t)n);
        FUZZ_ASSERT(total <= cap, "canned login too long");
        memset(buf, 0, total);
        buf[0] = 0x40 | ISCSI_OP_LOGIN_REQ;
        buf[1] = 0x87; /* T, CSG 1, NSG 3 */
        iscsi_bhs_set_dsl(buf, (uint32_t)n);
        static const uint8_t isid[6] = {0x80, 0x5c, 0xc3, 0x2f, 0, 0};
        memcpy(buf + 8, isid, 6);
        put_be32(buf + 16, 1);  /* ITT */
        put_be32(buf + 24, 1);  /* CmdSN */
        put_be32(buf + 28, 77); /* ExpStatSN */
        memcpy(buf + ISCSI_BHS_LEN, text, n);
        return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const size_t pieces[4] = {1u << 20, 7, 48, 1000};
        struct fuzz_in in = {data, size};
        uint8_t flags;
        if (!fuzz_take_u8(&in, &flags))
                return 0;
        size_t piece = pieces[(flags >> 3) & 3];
        registry_up();
        struct link lk = {0};
        FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, lk.fd) == 0,
                    "socketpair: %s", strerror(errno));
        lk.c = iscsi_conn_create(&worker, lk.fd[0]);
        FUZZ_ASSERT(lk.c != NULL, "iscsi_conn_create");
        if (flags & 0x01) {
                uint8_t login[2048];
                size_t n = canned_login(flags, login, sizeof(login));
                send_bytes(&lk, login, n, piece);
        }
        if (flags & 0x04) {
                while (in.left >= ISCSI_BHS_LEN && !lk.closed) {
                        const uint8_t *bhs = in.p;
                        size_t used;
                        send_framed(&lk, bhs, in.p + ISCSI_BHS_LEN, in.left - ISCSI_BHS_LEN, &used,
                                    piece);
                        in.p += ISCSI_BHS_LEN + used;
                        in.left -= ISCSI_BHS_LEN + used;
                }
        } else {
                send_bytes(&lk, in.p, in.left, piece);
        }
        /* The initiator hangs up; the worker sees the end of the stream and closes. */
        shutdown(lk.fd[1], SHUT_WR);
        if (!lk.closed)
                pump(&lk);
        if (fuzz_verbose())
                fprintf(stderr, "pdu_rx: %u PDUs out, state %d, %s\n", lk.out.pdus, lk.c->state,
                        lk.closed ? "closed" : "open");
        FUZZ_ASSERT(lk.closed, "connection still open after the initiator closed");
        iscsi_conn_destroy(lk.c); /* closes fd[0] */
        close(lk.fd[1]);
        free(lk.out.buf);
        tdm_registry_fini();
        return 0;
}
