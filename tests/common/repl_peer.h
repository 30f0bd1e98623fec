/*
 * A replicator engine under test and a peer that talks to it, shared by the engine's unit
 * test (tests/unit/test_repl_engine.c) and its fuzz target (tests/fuzz/fuzz_repl_apply.c).
 *
 * The engine: a real replicated LUN (node 2, Secondary) on a sparse file, listening on
 * loopback. The peer plays node 1 with the wire and handshake API (it has the lower id, so
 * it dials): both channels authenticated with the shared secret and sealed with their keys,
 * the State exchange, the engine's identity acknowledged, then frames and acks.
 *
 * Nothing here asserts: every helper returns 0 or a negative errno (and a reason where the
 * engine or the wire gives one), and the caller checks in its own way (ck_assert, FUZZ_ASSERT).
 *
 * Header only, like test_scsi_harness.h: each test is one source file (the top-level
 * CMakeLists.txt builds tests/unit/test_*.c one executable each).
 */
#ifndef TANDEM_TESTS_REPL_PEER_H
#define TANDEM_TESTS_REPL_PEER_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../replicator/auth.h"
#include "../../replicator/genid.h"
#include "../../replicator/wire.h"
#include "tandem/backstore.h"
#include "tandem/config.h"
#include "tandem/medium.h"
#include "tandem/repl.h"

/* Kinds of a Write message on the wire (replicator/repl_internal.h REPL_OP_*). */
enum { REPL_IO_WRITE = 1, REPL_IO_ZERO = 2, REPL_IO_UNMAP = 3, REPL_IO_FLUSH = 4 };

#define PEER_NODE   1u /* the peer: it dials */
#define ENGINE_NODE 2u /* the engine under test: it accepts */

#define PEER_DATA    TANDEM__REPL__CHANNEL__CHANNEL_DATA
#define PEER_CONTROL TANDEM__REPL__CHANNEL__CHANNEL_CONTROL

static inline int64_t peer_mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void peer_nap_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

/* ---- the engine under test ---- */

struct peer_engine_opts {
        const char *dir_template; /* for mkdtemp, e.g. "/tmp/tandem-repl-engine-XXXXXX" */
        const char *iqn, *naa, *serial, *secret;
        uint64_t size_bytes;
        uint32_t block_size;
        uint32_t timeout_ms;
        int link_protection; /* TDM_LINK_PROTECT_* */
};

struct peer_engine {
        struct peer_engine_opts o;
        char dir[64];
        char data_path[128];
        char md_path[192];
        uint16_t port;
        struct repl_lun *r;
        struct tdm_lun_cfg cfg; /* large: the engine struct should be static */
};

/* A loopback port nobody listens on now. */
static inline int peer_free_port(uint16_t *port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(sa);
        int rc = 0;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
                rc = -errno;
        close(fd);
        *port = ntohs(sa.sin_port);
        return rc;
}

/* The replication section of the LUN's configuration: node 1 (the peer), node 2 (us). */
static inline void peer_engine_config(struct peer_engine *e)
{
        struct tdm_lun_cfg *c = &e->cfg;
        memset(c, 0, sizeof(*c));
        c->lun = 0;
        c->block_size = e->o.block_size;
        snprintf(c->path, sizeof(c->path), "%s", e->data_path);
        snprintf(c->naa, sizeof(c->naa), "%s", e->o.naa);
        snprintf(c->serial, sizeof(c->serial), "%s", e->o.serial);
        c->repl.enabled = true;
        snprintf(c->repl.secret, sizeof(c->repl.secret), "%s", e->o.secret);
        c->repl.nodes[0].id = PEER_NODE;
        snprintf(c->repl.nodes[0].name, sizeof(c->repl.nodes[0].name), "node1");
        /* Never dialled (node 1 dials node 2); a distinct endpoint all the same. */
        snprintf(c->repl.nodes[0].address, sizeof(c->repl.nodes[0].address), "127.0.0.1:%u",
                 e->port == 65535 ? 65534u : e->port + 1u);
        c->repl.nodes[1].id = ENGINE_NODE;
        snprintf(c->repl.nodes[1].name, sizeof(c->repl.nodes[1].name), "node2");
        snprintf(c->repl.nodes[1].address, sizeof(c->repl.nodes[1].address), "127.0.0.1:%u",
                 e->port);
        c->repl.n_nodes = 2;
        c->repl.timeout_ms = e->o.timeout_ms;
        c->repl.resync_rate = TDM_DEFAULT_RESYNC_RATE;
        c->repl.resync_min_rate = TDM_DEFAULT_RESYNC_MIN_RATE;
        c->repl.split_brain = REPL_SB_DISCONNECT;
        c->repl.link_protection = e->o.link_protection;
}

/* Creates the LUN's file and starts the engine on it. err names what failed. */
static inline int peer_engine_start(struct peer_engine *e, const struct peer_engine_opts *o,
                                    char *err, size_t errlen)
{
        memset(e, 0, sizeof(*e));
        e->o = *o;
        snprintf(e->dir, sizeof(e->dir), "%s", o->dir_template);
        if (!mkdtemp(e->dir)) {
                snprintf(err, errlen, "mkdtemp %s: %s", o->dir_template, strerror(errno));
                return -errno;
        }
        snprintf(e->data_path, sizeof(e->data_path), "%s/lun.img", e->dir);
        snprintf(e->md_path, sizeof(e->md_path), "%s/repl-%s.md", e->dir, o->naa);
        int rc = peer_free_port(&e->port);
        if (rc < 0) {
                snprintf(err, errlen, "no free port: %s", strerror(-rc));
                return rc;
        }
        struct bs_open_opts opts = {.create_size = o->size_bytes};
        struct bs_dev *dev = NULL;
        rc = bs_open(e->data_path, &opts, &dev);
        if (rc < 0) {
                snprintf(err, errlen, "bs_open %s: %s", e->data_path, strerror(-rc));
                return rc;
        }
        struct tdm_medium *local = NULL;
        rc = bs_medium_create(dev, &local);
        if (rc < 0) {
                snprintf(err, errlen, "bs_medium_create: %s", strerror(-rc));
                return rc;
        }
        peer_engine_config(e);
        rc = repl_lun_create(local, &e->cfg, o->iqn, ENGINE_NODE, e->dir, &e->r, err, errlen);
        if (rc < 0)
                return rc;
        rc = repl_lun_start(e->r);
        if (rc < 0)
                snprintf(err, errlen, "repl_lun_start: %s", strerror(-rc));
        return rc;
}

/* Stops the engine, then removes its file, metadata and directory. */
static inline void peer_engine_stop(struct peer_engine *e)
{
        repl_lun_stop(e->r);
        tdm_medium_destroy(repl_lun_medium(e->r)); /* and this node's medium under it */
        unlink(e->data_path);
        unlink(e->md_path);
        rmdir(e->dir);
        e->r = NULL;
}

/* The backing file as another reader sees it. */
static inline int peer_engine_read(const struct peer_engine *e, uint64_t off, void *buf, size_t len)
{
        int fd = open(e->data_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = pread(fd, buf, len, (off_t)off);
        int rc = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
        close(fd);
        return rc;
}

/* The engine's copy of state record id, as a string ("" when it has none). */
static inline void peer_engine_record(const struct peer_engine *e, unsigned id, char *buf,
                                      size_t cap)
{
        size_t n = tdm_medium_state_get(repl_lun_medium(e->r), id, buf, cap - 1, NULL);
        buf[n < cap ? n : cap - 1] = '\0';
}

struct peer_status_probe {
        const char *iqn;
        int n;
        struct repl_status st;
};

static inline void peer_status_cb(void *arg, const struct repl_status *st)
{
        struct peer_status_probe *p = arg;
        if (strcmp(st->iqn, p->iqn) == 0 && st->lun == 0) {
                p->n++;
                p->st = *st;
        }
}

/* The engine's status (repl_for_each_status); -ENOENT unless it lists the LUN once. */
static inline int peer_engine_status(const struct peer_engine *e, struct repl_status *out)
{
        struct peer_status_probe p = {.iqn = e->o.iqn};
        repl_for_each_status(peer_status_cb, &p);
        *out = p.st;
        return p.n == 1 ? 0 : -ENOENT;
}

/*
 * Polls until conn is `conn` (< 0: any) and, if err is set, last_error contains err. *out
 * gets the last status seen; false on timeout.
 */
static inline bool peer_engine_wait(const struct peer_engine *e, int conn, const char *err,
                                    int timeout_ms, struct repl_status *out)
{
        int64_t end = peer_mono_ms() + timeout_ms;
        for (;;) {
                struct repl_status st;
                bool listed = peer_engine_status(e, &st) == 0;
                bool conn_ok = conn < 0 || (int)st.conn == conn;
                if (listed && conn_ok && (!err || strstr(st.last_error, err))) {
                        *out = st;
                        return true;
                }
                if (peer_mono_ms() >= end) {
                        *out = st;
                        return false;
                }
                peer_nap_ms(2);
        }
}

/* ---- the peer (node 1) ---- */

/* What the peer says in its handshake. */
struct peer_hs {
        uint32_t node_id;
        uint32_t peer_node_id;
        const char *secret;
        const char *naa;
        int protection; /* enum frame_protect */
        uint64_t features;
};

/* Both channels of one connection, each sealed with the keys of its own handshake. */
struct peer_link {
        int data_fd, ctl_fd;
        struct frame_seal data_seal, data_open, ctl_seal, ctl_open;
};

static inline void peer_link_init(struct peer_link *l)
{
        memset(l, 0, sizeof(*l));
        l->data_fd = l->ctl_fd = -1;
}

/* Closes what is open and wipes the keys. */
static inline void peer_link_close(struct peer_link *l)
{
        if (l->data_fd >= 0)
                close(l->data_fd);
        if (l->ctl_fd >= 0)
                close(l->ctl_fd);
        l->data_fd = l->ctl_fd = -1;
        frame_seal_fini(&l->data_seal);
        frame_seal_fini(&l->data_open);
        frame_seal_fini(&l->ctl_seal);
        frame_seal_fini(&l->ctl_open);
}

/* A connect() a signal interrupted goes on: waits for its end (a fuzzer's timer, say). */
static inline int peer_connect_finish(int fd, int64_t end)
{
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int left = (int)(end - peer_mono_ms());
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (poll(&p, 1, left > 0 ? left : 0) <= 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr)
                return -EINTR;
        return 0;
}

/* Connects to the engine, retrying while it is not listening yet. */
static inline int peer_dial(uint16_t port, int timeout_ms, int *out)
{
        int64_t end = peer_mono_ms() + timeout_ms;
        for (;;) {
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return -errno;
                struct sockaddr_in sa = {.sin_family = AF_INET,
                                         .sin_port = htons(port),
                                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
                if (rc == -EINTR)
                        rc = peer_connect_finish(fd, end);
                if (rc == 0) {
                        /* Frames go out as written, as the engine's do: no Nagle delay. */
                        int one = 1;
                        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                        *out = fd;
                        return 0;
                }
                close(fd);
                if ((rc != -ECONNREFUSED && rc != -EINTR) || peer_mono_ms() >= end)
                        return rc;
                peer_nap_ms(10);
        }
}

/*
 * One channel: dial and run the handshake (deadline hs_ms: a refusal's back-off may have to
 * pass). Returns the handshake's result with *fd open on success, why saying what went
 * wrong otherwise; the channel's sealing is keyed (seal: ours, open: the engine's frames)
 * when seal is given.
 */
static inline int peer_channel_open(uint16_t port, const struct peer_hs *o, int channel, int hs_ms,
                                    int *fd, char *why, size_t whylen, struct frame_seal *seal,
                                    struct frame_seal *open)
{
        int s = -1;
        int rc = peer_dial(port, hs_ms, &s);
        if (rc < 0) {
                snprintf(why, whylen, "connect: %s", strerror(-rc));
                return rc;
        }
        struct repl_hs_local l = {.node_id = o->node_id,
                                  .peer_node_id = o->peer_node_id,
                                  .secret = o->secret,
                                  .lun_naa = o->naa,
                                  .channel = channel,
                                  .features = o->features,
                                  .protection = o->protection};
        struct repl_hs_result res;
        rc = repl_handshake(s, &l, &res, hs_ms, why, whylen);
        if (rc == 0 && seal) {
                rc = frame_seal_init(seal, &res.tx, res.protection, res.cipher, false);
                if (rc == 0 &&
                    (rc = frame_seal_init(open, &res.rx, res.protection, res.cipher, true)) < 0)
                        frame_seal_fini(seal);
                if (rc < 0)
                        snprintf(why, whylen, "cannot key the sealing: %s", strerror(-rc));
        }
        if (rc < 0) {
                close(s);
                return rc;
        }
        *fd = s;
        return 0;
}

/* The data channel, then the control channel, as the engine expects them. */
static inline int peer_link_open(struct peer_link *l, uint16_t port, const struct peer_hs *o,
                                 int hs_ms, char *why, size_t whylen)
{
        peer_link_init(l);
        int rc = peer_channel_open(port, o, PEER_DATA, hs_ms, &l->data_fd, why, whylen,
                                   &l->data_seal, &l->data_open);
        if (rc == 0)
                rc = peer_channel_open(port, o, PEER_CONTROL, hs_ms, &l->ctl_fd, why, whylen,
                                       &l->ctl_seal, &l->ctl_open);
        if (rc < 0)
                peer_link_close(l);
        return rc;
}

/* The State the peer sends (the engine decides the sync direction from both). */
struct peer_state {
        uint64_t size_bytes;
        uint32_t block_size;
        const char *naa, *serial, *node_name;
        struct repl_gen gen;
        enum repl_role role;
        enum repl_disk_state disk;
        uint64_t dirty_bits;
        bool want_discard;
        bool lu_state_valid;
};

static inline int peer_send_state(struct peer_link *l, const struct peer_state *s, int timeout_ms)
{
        Tandem__Repl__State m = TANDEM__REPL__STATE__INIT;
        Tandem__Repl__Generations g = TANDEM__REPL__GENERATIONS__INIT;
        uint64_t hist[2] = {s->gen.history[0], s->gen.history[1]};
        g.current = s->gen.current;
        g.bitmap = s->gen.bitmap;
        g.history = hist;
        g.n_history = 2;
        m.size_bytes = s->size_bytes;
        m.block_size = s->block_size;
        m.lun_naa = (char *)s->naa;
        m.lun_serial = (char *)s->serial;
        m.gen = &g;
        m.role = s->role;
        m.disk = s->disk;
        m.dirty_bits = s->dirty_bits;
        m.node_name = (char *)s->node_name;
        m.bitmap_shift = 12;
        m.want_discard = s->want_discard;
        m.lu_state_valid = s->lu_state_valid;
        return repl_send_on(l->ctl_fd, &l->ctl_seal, TANDEM__REPL__MSG_TYPE__MSG_STATE, &m.base,
                            NULL, 0, timeout_ms);
}

/* The engine's State: it comes first on the control channel. rx is the caller's to free. */
static inline int peer_recv_state(struct peer_link *l, struct repl_rx *rx, int timeout_ms,
                                  const char **why)
{
        *why = NULL;
        int rc = repl_recv_on(l->ctl_fd, &l->ctl_open, rx, timeout_ms, why);
        if (rc < 0)
                return rc;
        if (rx->f.type != TANDEM__REPL__MSG_TYPE__MSG_STATE) {
                *why = "the engine's first control message is not its State";
                repl_rx_free(rx);
                return -EPROTO;
        }
        return 0;
}

/*
 * A bitmap resync: the engine sends its bitmap first, then reads ours; the peer has no bits
 * of its own to add (one empty chunk).
 */
static inline int peer_exchange_bitmaps(struct peer_link *l, int timeout_ms, const char **why)
{
        bool last = false;
        *why = NULL;
        while (!last) {
                struct repl_rx rx;
                int rc = repl_recv_on(l->ctl_fd, &l->ctl_open, &rx, timeout_ms, why);
                if (rc < 0)
                        return rc;
                bool bitmap = rx.f.type == TANDEM__REPL__MSG_TYPE__MSG_BITMAP;
                last = bitmap && ((const Tandem__Repl__BitmapChunk *)rx.msg)->last;
                repl_rx_free(&rx);
                if (!bitmap) {
                        *why = "the engine sent something else than its bitmap";
                        return -EPROTO;
                }
        }
        Tandem__Repl__BitmapChunk m = TANDEM__REPL__BITMAP_CHUNK__INIT;
        m.last = true;
        return repl_send_on(l->ctl_fd, &l->ctl_seal, TANDEM__REPL__MSG_TYPE__MSG_BITMAP, &m.base,
                            NULL, 0, timeout_ms);
}

static inline int peer_send_ack(struct peer_link *l, uint64_t seq, int timeout_ms)
{
        Tandem__Repl__Ack a = TANDEM__REPL__ACK__INIT;
        a.seq = seq;
        return repl_send_on(l->ctl_fd, &l->ctl_seal, TANDEM__REPL__MSG_TYPE__MSG_ACK, &a.base, NULL,
                            0, timeout_ms);
}

/*
 * The engine's first data-channel message: its LUN identity (naa) and role, Secondary, as
 * seq 1, which it wants acknowledged like any other. Acknowledges it.
 */
static inline int peer_ack_engine_identity(struct peer_link *l, const char *naa, int timeout_ms,
                                           const char **why)
{
        struct repl_rx rx;
        *why = NULL;
        int rc = repl_recv_on(l->data_fd, &l->data_open, &rx, timeout_ms, why);
        if (rc < 0)
                return rc;
        const Tandem__Repl__ScsiState *s = (const Tandem__Repl__ScsiState *)rx.msg;
        if (rx.f.type != TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE)
                *why = "the engine's first data message is not its identity";
        else if (s->seq != 1)
                *why = "the engine's identity is not seq 1";
        else if (!s->lun_naa || strcmp(s->lun_naa, naa) != 0)
                *why = "the engine's identity names another LUN";
        else if (s->role != REPL_ROLE_SECONDARY)
                *why = "the engine's identity is not Secondary";
        repl_rx_free(&rx);
        if (*why)
                return -EPROTO;
        return peer_send_ack(l, 1, timeout_ms);
}

static inline int peer_send_write(struct peer_link *l, uint64_t seq, uint64_t off, uint32_t len,
                                  uint32_t kind, const void *payload, size_t payload_len,
                                  int timeout_ms)
{
        Tandem__Repl__Write m = TANDEM__REPL__WRITE__INIT;
        m.seq = seq;
        m.offset = off;
        m.length = len;
        m.kind = kind;
        struct iovec iov = {.iov_base = (void *)payload, .iov_len = payload_len};
        return repl_send_on(l->data_fd, &l->data_seal, TANDEM__REPL__MSG_TYPE__MSG_WRITE, &m.base,
                            payload_len ? &iov : NULL, payload_len ? 1 : 0, timeout_ms);
}

static inline int peer_send_flush(struct peer_link *l, uint64_t seq, int timeout_ms)
{
        Tandem__Repl__Flush m = TANDEM__REPL__FLUSH__INIT;
        m.seq = seq;
        return repl_send_on(l->data_fd, &l->data_seal, TANDEM__REPL__MSG_TYPE__MSG_FLUSH, &m.base,
                            NULL, 0, timeout_ms);
}

/*
 * Seals a frame built by hand: frame[0..len) is the header and the body (message, payload),
 * the tag goes to frame[len..len + FRAME_TAG_LEN). With "encrypt" the body is encrypted in
 * place. A frame sealed so counts as sent: every later frame must be sealed after it.
 */
static inline int peer_seal_frame(struct frame_seal *seal, uint8_t *frame, size_t len)
{
        struct iovec body = {frame + REPL_FRAME_HDR_LEN, len - REPL_FRAME_HDR_LEN};
        return frame_seal(seal, frame, REPL_FRAME_HDR_LEN, &body, &body, 1, frame + len);
}

/* What the engine said on the control channel so far. */
struct peer_ctl_seen {
        uint64_t max_ack;
        int ack_error;          /* the first nonzero error of an ack */
        uint64_t ack_error_seq; /* ... and its seq */
        unsigned n_acks, n_pings;
        bool got_disconnect;
        char disconnect_reason[256];
        char unexpected[64]; /* the first control message not handled here */
};

/*
 * One control message of the engine's: pings answered (when answer_pings), acks and a
 * disconnect recorded. False for any other message (the caller's; recorded as unexpected).
 */
static inline bool peer_ctl_take(struct peer_link *l, struct peer_ctl_seen *s,
                                 const struct repl_rx *rx, bool answer_pings, int timeout_ms)
{
        switch (rx->f.type) {
        case TANDEM__REPL__MSG_TYPE__MSG_PING:
                s->n_pings++;
                if (answer_pings)
                        (void)repl_send_on(l->ctl_fd, &l->ctl_seal,
                                           TANDEM__REPL__MSG_TYPE__MSG_PING_ACK, rx->msg, NULL, 0,
                                           timeout_ms);
                return true;
        case TANDEM__REPL__MSG_TYPE__MSG_ACK: {
                const Tandem__Repl__Ack *a = (const Tandem__Repl__Ack *)rx->msg;
                s->n_acks++;
                if (a->seq > s->max_ack)
                        s->max_ack = a->seq;
                if (a->error && !s->ack_error) {
                        s->ack_error = a->error;
                        s->ack_error_seq = a->seq;
                }
                return true;
        }
        case TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT: {
                const Tandem__Repl__Disconnect *d = (const Tandem__Repl__Disconnect *)rx->msg;
                s->got_disconnect = true;
                snprintf(s->disconnect_reason, sizeof(s->disconnect_reason), "%s",
                         d->reason ? d->reason : "");
                return true;
        }
        default:
                if (!s->unexpected[0])
                        snprintf(s->unexpected, sizeof(s->unexpected), "%s",
                                 repl_msg_name(rx->f.type));
                return false;
        }
}

#endif
