/*
 * The connection manager of a replicated LUN: opens both channels (the node with the lower
 * id dials, the other accepts), authenticates them, exchanges states, decides from the
 * generation ids who syncs whom (or refuses: split brain, unrelated data, size mismatch),
 * runs the receivers and the resync while connected, and starts over after a disconnect.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "auth.h"
#include "tandem/cluster.h"
#include "repl_internal.h"
#include "tandem/clock.h"
#include "tandem/log.h"
#include "wire.h"

#define BITMAP_CHUNK       (32u * 1024)
#define REFUSED_RETRY_MS   5000
#define STRAY_HANDSHAKE_MS 2000

static void sleep_ms(struct repl_lun *r, unsigned ms)
{
        struct timespec ts = tdm_deadline(CLOCK_REALTIME, ms);
        pthread_mutex_lock(&r->lock);
        if (!r->stopping)
                pthread_cond_timedwait(&r->cond, &r->lock, &ts);
        pthread_mutex_unlock(&r->lock);
}

bool repl_stopping(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        bool s = r->stopping;
        pthread_mutex_unlock(&r->lock);
        return s;
}

static void set_conn(struct repl_lun *r, enum repl_conn_state c)
{
        pthread_mutex_lock(&r->lock);
        r->conn = c;
        pthread_mutex_unlock(&r->lock);
}

static void tune_socket(int fd)
{
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
                fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int resolve(const char *host, uint16_t port, bool passive, struct addrinfo **ai)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
        char portstr[8];
        snprintf(portstr, sizeof(portstr), "%u", port);
        return getaddrinfo(host[0] ? host : NULL, portstr, &hints, ai) ? -EINVAL : 0;
}

static int listen_open(struct repl_lun *r)
{
        struct addrinfo *ai;
        int rc = resolve(r->listen_host, r->listen_port, true, &ai);
        if (rc < 0)
                return rc;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                rc = -errno;
                freeaddrinfo(ai);
                return rc;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 8) < 0) {
                rc = -errno;
                close(fd);
                freeaddrinfo(ai);
                return rc;
        }
        freeaddrinfo(ai);
        r->listen_fd = fd;
        return 0;
}

static int dial(struct repl_lun *r, int *out)
{
        struct addrinfo *ai;
        int rc = resolve(r->peer_host, r->peer_port, false, &ai);
        if (rc < 0)
                return rc;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                rc = -errno;
                freeaddrinfo(ai);
                return rc;
        }
        rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        if (rc < 0 && errno != EINPROGRESS) {
                rc = -errno;
                close(fd);
                return rc;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        rc = poll(&p, 1, REPL_CONNECT_TIMEOUT_MS);
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (rc <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
                close(fd);
                return rc == 0 ? -ETIMEDOUT : -(soerr ? soerr : ECONNREFUSED);
        }
        tune_socket(fd);
        *out = fd;
        return 0;
}

static int accept_within(struct repl_lun *r, int timeout_ms, int *out, char *peer, size_t peerlen)
{
        struct pollfd p = {.fd = r->listen_fd, .events = POLLIN};
        int rc = poll(&p, 1, timeout_ms);
        if (rc <= 0)
                return rc == 0 ? -ETIMEDOUT : -errno;
        struct sockaddr_storage sa;
        socklen_t sl = sizeof(sa);
        int fd = accept4(r->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
                return -errno;
        char host[64] = "?", serv[16] = "?";
        getnameinfo((struct sockaddr *)&sa, sl, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(peer, peerlen, "%s:%s", host, serv);
        tune_socket(fd);
        *out = fd;
        return 0;
}

static void hs_local(struct repl_lun *r, int channel, struct repl_hs_local *l)
{
        *l = (struct repl_hs_local){.node_id = r->node_id,
                                    .peer_node_id = r->peer_id,
                                    .secret = r->cfg.secret,
                                    .lun_naa = r->naa,
                                    .channel = channel,
                                    .features = REPL_FEATURE_VERIFY_SHA256 | REPL_FEATURE_FORWARD |
                                                REPL_FEATURE_RESIZE | REPL_FEATURE_WRITE_STATE |
                                                REPL_FEATURE_FORWARD_TMF,
                                    .protection = r->cfg.link_protection};
}

/* Both directions of a channel from its handshake's keys (wiped here). */
static int link_seal_init(const struct repl_hs_result *res, struct frame_seal *seal,
                          struct frame_seal *open)
{
        int rc = frame_seal_init(seal, &res->tx, res->protection, res->cipher, false);
        if (rc == 0 && (rc = frame_seal_init(open, &res->rx, res->protection, res->cipher, true)))
                frame_seal_fini(seal);
        return rc;
}

static void refuse_stray(struct repl_lun *r);

/* Opens one channel: dial or accept, then the authenticated handshake, which keys the
 * channel's sealing (seal: our frames, open: the peer's). */
static int channel_open(struct repl_lun *r, int channel, int *out, struct frame_seal *seal,
                        struct frame_seal *open)
{
        int fd = -1, rc;
        char from[160] = "";
        if (r->node_id < r->peer_id) {
                struct pollfd p = {.fd = r->listen_fd, .events = POLLIN};
                if (poll(&p, 1, 0) > 0)
                        refuse_stray(r); /* we dial: whoever calls us is not our peer */
                rc = dial(r, &fd);
                snprintf(from, sizeof(from), "%s:%u", r->peer_host, r->peer_port);
        } else {
                rc = accept_within(r, REPL_RECONNECT_MS, &fd, from, sizeof(from));
        }
        if (rc < 0)
                return rc;
        struct repl_hs_local l;
        hs_local(r, channel, &l);
        struct repl_hs_result res;
        char why[256];
        rc = repl_handshake(fd, &l, &res, (int)r->cfg.timeout_ms, why, sizeof(why));
        if (rc == 0 && (rc = link_seal_init(&res, seal, open)) < 0)
                snprintf(why, sizeof(why), "cannot key the link's sealing: %s", strerror(-rc));
        uint64_t features = res.features;
        OPENSSL_cleanse(&res, sizeof(res)); /* the keys live on in the cipher contexts only */
        if (rc < 0) {
                pthread_mutex_lock(&r->lock);
                repl_set_error(r, "connection %s refused: %s", from, why);
                pthread_mutex_unlock(&r->lock);
                close(fd);
                return -ECONNABORTED;
        }
        pthread_mutex_lock(&r->lock);
        r->peer_features = features;
        pthread_mutex_unlock(&r->lock);
        *out = fd;
        return 0;
}

/* A connection nobody waits for: authenticate it only to log who it was, then close. */
static void refuse_stray(struct repl_lun *r)
{
        int fd = -1;
        char from[160];
        if (accept_within(r, 0, &fd, from, sizeof(from)) < 0)
                return;
        struct repl_hs_local l;
        hs_local(r, TANDEM__REPL__CHANNEL__CHANNEL_DATA, &l);
        struct repl_hs_result res;
        char why[256];
        int hrc = repl_handshake(fd, &l, &res, STRAY_HANDSHAKE_MS, why, sizeof(why));
        OPENSSL_cleanse(&res, sizeof(res));
        if (hrc < 0)
                log_warn("replication %s lun %llu: refused connection from %s: %s", r->iqn,
                         (unsigned long long)r->lun_id, from, why);
        else
                log_warn("replication %s lun %llu: refused connection from %s: already connected",
                         r->iqn, (unsigned long long)r->lun_id, from);
        close(fd);
}

/* ---- states ---- */

void repl_gen_to_msg(const struct repl_gen *g, Tandem__Repl__Generations *m, uint64_t *hist)
{
        tandem__repl__generations__init(m);
        m->current = g->current;
        m->bitmap = g->bitmap;
        hist[0] = g->history[0];
        hist[1] = g->history[1];
        m->history = hist;
        m->n_history = 2;
}

static void gen_from_msg(const Tandem__Repl__Generations *m, struct repl_gen *g)
{
        *g = (struct repl_gen){0};
        if (!m)
                return;
        g->current = m->current;
        g->bitmap = m->bitmap;
        for (size_t i = 0; i < m->n_history && i < 2; i++)
                g->history[i] = m->history[i];
}

int repl_send_ctl(struct repl_lun *r, uint8_t type, void *msg)
{
        pthread_mutex_lock(&r->ctl_send_lock);
        int fd = r->ctl_fd;
        int rc = fd >= 0
                     ? repl_send_on(fd, &r->ctl_seal, type, msg, NULL, 0, (int)r->cfg.timeout_ms)
                     : -ENOTCONN;
        pthread_mutex_unlock(&r->ctl_send_lock);
        return rc;
}

int repl_send_state(struct repl_lun *r)
{
        Tandem__Repl__State m = TANDEM__REPL__STATE__INIT;
        Tandem__Repl__Generations g;
        uint64_t hist[2];
        pthread_mutex_lock(&r->lock);
        m.size_bytes = r->size_bytes;
        m.block_size = r->block_size;
        m.lun_naa = r->naa;
        m.lun_serial = r->serial;
        repl_gen_to_msg(&r->sb.gen, &g, hist);
        m.gen = &g;
        m.role = r->sb.role;
        m.disk = r->sb.disk;
        m.crashed_primary = r->crashed_primary;
        m.dirty_bits = repl_md_dirty_bits(r->md);
        m.promote_epoch = r->sb.promote_epoch;
        m.node_name = r->self_name;
        m.bitmap_shift = REPL_MD_BIT_SHIFT;
        m.want_discard = r->want_discard;
        m.lu_state_valid = r->lu_state_valid;
        pthread_mutex_unlock(&r->lock);
        return repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_STATE, &m);
}

void repl_peer_from_state(struct repl_lun *r, const struct Tandem__Repl__State *m)
{
        struct repl_peer_view *p = &r->peer;
        p->known = true;
        p->size_bytes = m->size_bytes;
        p->block_size = m->block_size;
        snprintf(p->naa, sizeof(p->naa), "%s", m->lun_naa ? m->lun_naa : "");
        snprintf(p->name, sizeof(p->name), "%s", m->node_name ? m->node_name : "");
        gen_from_msg(m->gen, &p->side.gen);
        p->side.disk =
            m->disk <= REPL_DISK_UPTODATE ? (enum repl_disk_state)m->disk : REPL_DISK_INCONSISTENT;
        p->side.role = m->role == REPL_ROLE_PRIMARY ? REPL_ROLE_PRIMARY : REPL_ROLE_SECONDARY;
        p->side.crashed_primary = m->crashed_primary;
        p->side.dirty_bits = m->dirty_bits;
        p->side.promote_epoch = m->promote_epoch;
        p->side.node_id = r->peer_id;
        p->side.node_name = p->name;
        p->side.want_discard = m->want_discard;
        p->lu_state_valid = m->lu_state_valid;
}

static int recv_state(struct repl_lun *r)
{
        struct repl_rx rx;
        const char *why = NULL;
        int rc = repl_recv_on(r->ctl_fd, &r->ctl_open, &rx, (int)r->cfg.timeout_ms, &why);
        if (rc < 0) {
                pthread_mutex_lock(&r->lock);
                repl_set_error(r, "no state from peer: %s", why ? why : strerror(-rc));
                pthread_mutex_unlock(&r->lock);
                return rc;
        }
        if (rx.f.type != TANDEM__REPL__MSG_TYPE__MSG_STATE) {
                pthread_mutex_lock(&r->lock);
                repl_set_error(r, "peer sent %s instead of its state", repl_msg_name(rx.f.type));
                pthread_mutex_unlock(&r->lock);
                repl_rx_free(&rx);
                return -EPROTO;
        }
        pthread_mutex_lock(&r->lock);
        repl_peer_from_state(r, (Tandem__Repl__State *)rx.msg);
        pthread_mutex_unlock(&r->lock);
        repl_rx_free(&rx);
        return 0;
}

static void send_disconnect(struct repl_lun *r, const char *reason)
{
        Tandem__Repl__Disconnect m = TANDEM__REPL__DISCONNECT__INIT;
        m.reason = (char *)reason;
        (void)repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT, &m);
}

/* Identity and geometry must match before any data moves (lock held). */
static int check_peer_fits(struct repl_lun *r)
{
        const struct repl_peer_view *p = &r->peer;
        if (p->size_bytes != r->size_bytes) {
                repl_set_error(r,
                               "size mismatch: this node's LUN is %llu bytes, peer %u's is %llu "
                               "bytes",
                               (unsigned long long)r->size_bytes, r->peer_id,
                               (unsigned long long)p->size_bytes);
                return -EINVAL;
        }
        if (p->block_size != r->block_size) {
                repl_set_error(r, "block size mismatch: %u here, %u on peer %u", r->block_size,
                               p->block_size, r->peer_id);
                return -EINVAL;
        }
        if (strcasecmp(p->naa, r->naa) != 0) {
                repl_set_error(r, "LUN identity mismatch: naa %s here, %s on peer %u", r->naa,
                               p->naa, r->peer_id);
                return -EINVAL;
        }
        return 0;
}

/* ---- deciding ---- */

static bool decision_is_source(enum repl_decision d)
{
        return d == REPL_DECIDE_SOURCE_BITMAP || d == REPL_DECIDE_SOURCE_FULL;
}

static bool decision_is_target(enum repl_decision d)
{
        return d == REPL_DECIDE_TARGET_BITMAP || d == REPL_DECIDE_TARGET_FULL;
}

static bool decision_is_bitmap(enum repl_decision d)
{
        return d == REPL_DECIDE_SOURCE_BITMAP || d == REPL_DECIDE_TARGET_BITMAP;
}

/*
 * Decides (lock held). Returns the decision, or a negative errno after setting the error
 * and whether to stay StandAlone (*standalone).
 */
static int decide(struct repl_lun *r, enum repl_decision *out, bool *standalone)
{
        struct repl_side self;
        repl_side_self(r, &self);
        const struct repl_side *peer = &r->peer.side;
        const char *why = "";
        enum repl_decision d = repl_gen_decide(&self, peer, &why);
        /* A split brain resolved by hand: only the blocks either side changed since the
         * split move (both bitmaps hold them), not the whole LUN. */
        if (self.want_discard != peer->want_discard) {
                struct repl_side s2 = self, p2 = *peer;
                s2.want_discard = p2.want_discard = false;
                const char *why2 = "";
                if (repl_gen_decide(&s2, &p2, &why2) == REPL_DECIDE_SPLIT_BRAIN) {
                        d = self.want_discard ? REPL_DECIDE_TARGET_BITMAP
                                              : REPL_DECIDE_SOURCE_BITMAP;
                        why = "split brain resolved by hand: the discarding node's changes "
                              "since the split are replaced";
                }
        }
        if (d == REPL_DECIDE_SPLIT_BRAIN) {
                const char *how = "";
                d = repl_split_brain_resolve(r->cfg.split_brain, r->cfg.split_brain_node, &self,
                                             peer, &how);
                if (d == REPL_DECIDE_SPLIT_BRAIN) {
                        r->split_brain = true;
                        *standalone = true;
                        repl_set_error(r,
                                       "split brain: both nodes changed the data since they "
                                       "last agreed (%s); nothing is discarded without a "
                                       "policy: run 'tandemctl repl resolve-split-brain' on "
                                       "the node whose changes are to be thrown away",
                                       why);
                        return -EEXIST;
                }
                log_warn("replication %s lun %llu: split brain resolved by policy: %s", r->iqn,
                         (unsigned long long)r->lun_id, how);
        }
        /* Same data generation but one disk Inconsistent (invalidated, or a failed write):
         * only a full sync makes it whole. Both sides see both states: still symmetric. */
        if (d == REPL_DECIDE_IN_SYNC && self.disk == REPL_DISK_INCONSISTENT &&
            peer->disk == REPL_DISK_UPTODATE)
                d = REPL_DECIDE_TARGET_FULL;
        else if (d == REPL_DECIDE_IN_SYNC && peer->disk == REPL_DISK_INCONSISTENT &&
                 self.disk == REPL_DISK_UPTODATE)
                d = REPL_DECIDE_SOURCE_FULL;
        if (d == REPL_DECIDE_UNRELATED || d == REPL_DECIDE_NO_GOOD_DATA) {
                *standalone = d == REPL_DECIDE_UNRELATED;
                repl_set_error(r, "%s: %s",
                               d == REPL_DECIDE_UNRELATED ? "unrelated data" : "no good data", why);
                return -EINVAL;
        }
        if (self.role == REPL_ROLE_PRIMARY && decision_is_target(d)) {
                *standalone = true;
                repl_set_error(r,
                               "this node is Primary but the peer's data is newer (%s): "
                               "demote it, or invalidate the peer",
                               why);
                return -EPERM;
        }
        if (self.role == REPL_ROLE_PRIMARY && peer->role == REPL_ROLE_PRIMARY) {
                *standalone = true;
                repl_set_error(r, "both nodes are Primary");
                return -EPERM;
        }
        *out = d;
        return 0;
}

static int send_bitmap(struct repl_lun *r)
{
        size_t total = repl_md_bitmap_bytes(r->md);
        uint8_t *buf = malloc(BITMAP_CHUNK);
        if (!buf)
                return -ENOMEM;
        int rc = 0;
        for (size_t first = 0; rc == 0;) {
                size_t n = total - first < BITMAP_CHUNK ? total - first : BITMAP_CHUNK;
                rc = repl_md_bitmap_read(r->md, first, buf, n);
                if (rc < 0)
                        break;
                Tandem__Repl__BitmapChunk m = TANDEM__REPL__BITMAP_CHUNK__INIT;
                m.first_byte = first;
                m.last = first + n >= total;
                struct iovec iov = {.iov_base = buf, .iov_len = n};
                pthread_mutex_lock(&r->ctl_send_lock);
                rc = repl_send_on(r->ctl_fd, &r->ctl_seal, TANDEM__REPL__MSG_TYPE__MSG_BITMAP,
                                  &m.base, &iov, 1, (int)r->cfg.timeout_ms);
                pthread_mutex_unlock(&r->ctl_send_lock);
                first += n;
                if (m.last)
                        break;
        }
        free(buf);
        return rc;
}

static int recv_bitmap(struct repl_lun *r)
{
        size_t total = repl_md_bitmap_bytes(r->md);
        for (;;) {
                struct repl_rx rx;
                const char *why = NULL;
                int rc =
                    repl_recv_on(r->ctl_fd, &r->ctl_open, &rx, (int)r->cfg.timeout_ms * 2, &why);
                if (rc < 0) {
                        if (why) {
                                pthread_mutex_lock(&r->lock);
                                repl_set_error(r, "bitmap from peer: %s", why);
                                pthread_mutex_unlock(&r->lock);
                        }
                        return rc;
                }
                Tandem__Repl__BitmapChunk *m = (Tandem__Repl__BitmapChunk *)rx.msg;
                if (rx.f.type != TANDEM__REPL__MSG_TYPE__MSG_BITMAP || m->first_byte > total ||
                    rx.f.payload_len > total - m->first_byte) {
                        repl_rx_free(&rx);
                        return -EPROTO;
                }
                if (rx.f.payload_len)
                        rc = repl_md_bitmap_merge(r->md, m->first_byte, rx.payload,
                                                  rx.f.payload_len);
                bool last = m->last;
                repl_rx_free(&rx);
                if (rc < 0 || last)
                        return rc;
        }
}

/*
 * Sets the generations at the start of a resync so that an interrupted one resumes as a
 * bitmap resync: the source moves on to a fresh current id (keeping the one the target
 * will have as its bitmap id), the target takes that id and is Inconsistent until done.
 */
static int resync_begin(struct repl_lun *r, enum repl_decision d)
{
        pthread_mutex_lock(&r->lock);
        int rc = 0;
        if (decision_is_source(d)) {
                if (d == REPL_DECIDE_SOURCE_FULL)
                        repl_md_set_all(r->md);
                if (r->sb.gen.bitmap == 0)
                        repl_gen_new_current(&r->sb.gen, repl_gen_fresh());
                r->sb.peer_disk = REPL_DISK_INCONSISTENT;
                rc = repl_persist(r);
                r->conn = REPL_CONN_SYNC_SOURCE;
                r->sync_total = repl_md_dirty_bits(r->md) << REPL_MD_BIT_SHIFT;
                r->sync_done = 0;
        } else {
                const struct repl_gen *src = &r->peer.side.gen;
                uint64_t base = src->bitmap ? src->bitmap : src->current;
                if (d == REPL_DECIDE_TARGET_FULL)
                        repl_md_set_all(r->md);
                r->sb.gen.current = base;
                r->sb.gen.bitmap = 0;
                r->sb.disk = REPL_DISK_INCONSISTENT;
                r->sb.peer_disk = REPL_DISK_UPTODATE;
                rc = repl_persist(r);
                r->conn = REPL_CONN_SYNC_TARGET;
                r->sync_total = repl_md_dirty_bits(r->md) << REPL_MD_BIT_SHIFT;
                r->sync_done = 0;
        }
        pthread_mutex_unlock(&r->lock);
        if (rc == 0)
                rc = repl_md_flush_bitmap(r->md);
        return rc;
}

/* In sync: both UpToDate (an Outdated peer with our data is current again). */
static int in_sync_begin(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        if (r->sb.disk == REPL_DISK_OUTDATED)
                r->sb.disk = REPL_DISK_UPTODATE;
        r->sb.peer_disk =
            r->peer.side.disk == REPL_DISK_OUTDATED ? REPL_DISK_UPTODATE : r->peer.side.disk;
        r->conn = REPL_CONN_CONNECTED;
        int rc = repl_persist(r);
        pthread_mutex_unlock(&r->lock);
        return rc;
}

/* ---- one connection's life ---- */

static void close_channels(struct repl_lun *r)
{
        pthread_mutex_lock(&r->ctl_send_lock);
        pthread_mutex_lock(&r->send_lock);
        if (r->data_fd >= 0)
                close(r->data_fd);
        if (r->ctl_fd >= 0)
                close(r->ctl_fd);
        r->data_fd = r->ctl_fd = -1;
        /* The threads that used them ended (run_connected joined them). */
        frame_seal_fini(&r->data_seal);
        frame_seal_fini(&r->data_open);
        frame_seal_fini(&r->ctl_seal);
        frame_seal_fini(&r->ctl_open);
        pthread_mutex_unlock(&r->send_lock);
        pthread_mutex_unlock(&r->ctl_send_lock);
}

static int open_channels(struct repl_lun *r)
{
        int data = -1, ctl = -1;
        struct frame_seal ds, dopen, cs, copen;
        int rc = channel_open(r, TANDEM__REPL__CHANNEL__CHANNEL_DATA, &data, &ds, &dopen);
        if (rc == 0)
                rc = channel_open(r, TANDEM__REPL__CHANNEL__CHANNEL_CONTROL, &ctl, &cs, &copen);
        if (rc < 0) {
                if (data >= 0) {
                        close(data);
                        frame_seal_fini(&ds);
                        frame_seal_fini(&dopen);
                }
                return rc;
        }
        pthread_mutex_lock(&r->ctl_send_lock);
        pthread_mutex_lock(&r->send_lock);
        r->data_fd = data;
        r->ctl_fd = ctl;
        r->data_seal = ds;
        r->data_open = dopen;
        r->ctl_seal = cs;
        r->ctl_open = copen;
        pthread_mutex_unlock(&r->send_lock);
        pthread_mutex_unlock(&r->ctl_send_lock);
        return 0;
}

/* send_lock held, and the peer in the ack set. */
static int send_scsi_state_locked(struct repl_lun *r, enum repl_role role)
{
        Tandem__Repl__ScsiState m = TANDEM__REPL__SCSI_STATE__INIT;
        m.lun_naa = r->naa;
        m.lun_serial = r->serial;
        m.role = role;
        struct repl_req *req = repl_req_new(REPL_OP_STATE, 0);
        if (!req)
                return -ENOMEM;
        int rc =
            repl_queue_data_locked(r, req, TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE, &m, NULL, 0);
        if (rc < 0) {
                repl_req_put(req);
                repl_req_put(req);
        }
        return rc;
}

/*
 * The role, in order with the data. A new Primary's LU state records follow it as a whole set:
 * from now on they are the LU's, and the peer holds them as current too.
 */
int repl_send_scsi_state(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        enum repl_role role = r->sb.role;
        pthread_mutex_lock(&r->send_lock);
        int rc = r->in_ack_set ? send_scsi_state_locked(r, role) : -ENOTCONN;
        if (rc == 0 && role == REPL_ROLE_PRIMARY)
                rc = repl_queue_lu_state_snapshot_locked(r);
        pthread_mutex_unlock(&r->send_lock);
        pthread_mutex_unlock(&r->lock);
        return rc;
}

/*
 * Whether this node sends its LU state records after the connect (r->lock held): when they are
 * current here, and the peer's are not, or this node's data wins (Primary, sync source).
 * A restarted node's non-persistent records come back this way, whatever the roles.
 */
static bool lu_state_sender(const struct repl_lun *r, enum repl_decision d)
{
        if (!r->lu_state_valid)
                return false;
        return !r->peer.lu_state_valid || r->sb.role == REPL_ROLE_PRIMARY || decision_is_source(d);
}

/* States, checks, decision and bitmaps; on success the link is up and the decision set. */
static int establish(struct repl_lun *r, bool *standalone)
{
        int rc = repl_send_state(r);
        if (rc == 0)
                rc = recv_state(r);
        if (rc < 0)
                return rc;
        enum repl_decision d = REPL_DECIDE_IN_SYNC;
        pthread_mutex_lock(&r->lock);
        rc = check_peer_fits(r);
        if (rc == 0)
                rc = decide(r, &d, standalone);
        char reason[256];
        snprintf(reason, sizeof(reason), "%s", r->last_error);
        pthread_mutex_unlock(&r->lock);
        if (rc < 0) {
                send_disconnect(r, reason);
                return rc;
        }
        if (decision_is_bitmap(d)) {
                rc = send_bitmap(r);
                if (rc == 0)
                        rc = recv_bitmap(r);
                if (rc < 0)
                        return rc;
        }
        if (decision_is_source(d) || decision_is_target(d))
                rc = resync_begin(r, d);
        else if (d == REPL_DECIDE_IN_SYNC)
                rc = in_sync_begin(r);
        else
                rc = in_sync_begin(r); /* BOTH_NEW: connected, waiting for the admin */
        if (rc < 0)
                return rc;
        pthread_mutex_lock(&r->lock);
        if (r->stopping || !r->want_connect) {
                pthread_mutex_unlock(&r->lock);
                return -ECANCELED; /* told to stop while we were connecting */
        }
        r->decision = d;
        r->link_up = true;
        repl_publish_access(r);
        r->split_brain = false;
        if (d == REPL_DECIDE_IN_SYNC || decision_is_source(d))
                r->crashed_primary = false; /* what it may have left behind goes to the peer */
        r->last_ctl_rx_ns = tdm_now_ns();
        r->rx_expect_seq = 1;
        r->last_error[0] = '\0';
        pthread_mutex_lock(&r->send_lock);
        r->next_seq = 1;
        r->in_ack_set = true;
        /* Seq 1, before any write can take a number: identity and role; then, from the node
         * whose data wins, the logical unit's state records. */
        int src = send_scsi_state_locked(r, r->sb.role);
        if (src == 0 && lu_state_sender(r, d))
                src = repl_queue_lu_state_snapshot_locked(r);
        pthread_mutex_unlock(&r->send_lock);
        pthread_mutex_unlock(&r->lock);
        if (src < 0)
                return -ECONNRESET;
        log_notice("replication %s lun %llu: connected to node %u (%s): %s", r->iqn,
                   (unsigned long long)r->lun_id, r->peer_id, r->peer_name, repl_decision_name(d));
        return 0;
}

static int start_thread(pthread_t *t, bool *running, void *(*fn)(void *), struct repl_lun *r)
{
        int rc = pthread_create(t, NULL, fn, r);
        *running = rc == 0;
        return -rc;
}

static void join_thread(pthread_t t, bool *running)
{
        if (*running)
                pthread_join(t, NULL);
        *running = false;
}

/* Connected: wait for the end, serving verify requests and refusing strays meanwhile. */
static void run_connected(struct repl_lun *r)
{
        bool source = decision_is_source(r->decision);
        if (start_thread(&r->sender, &r->sender_running, repl_sender_main, r) < 0 ||
            start_thread(&r->data_rx, &r->data_rx_running, repl_data_rx_main, r) < 0 ||
            start_thread(&r->ctl_rx, &r->ctl_rx_running, repl_ctl_rx_main, r) < 0) {
                repl_disconnect(r, "cannot start receiver threads");
        } else if (source) {
                r->verify_mode = false;
                if (start_thread(&r->sync_thread, &r->sync_running, repl_sync_main, r) < 0)
                        repl_disconnect(r, "cannot start the resync thread");
        }
        for (;;) {
                pthread_mutex_lock(&r->lock);
                bool up = r->link_up && !r->stopping && r->want_connect;
                bool verify = r->verify_requested;
                r->verify_requested = false;
                pthread_mutex_unlock(&r->lock);
                if (!up)
                        break;
                if (verify) {
                        join_thread(r->sync_thread, &r->sync_running);
                        r->verify_mode = true;
                        if (start_thread(&r->sync_thread, &r->sync_running, repl_sync_main, r) < 0)
                                log_err("replication: cannot start verify");
                }
                struct pollfd p = {.fd = r->listen_fd, .events = POLLIN};
                if (poll(&p, 1, 200) > 0)
                        refuse_stray(r);
        }
        repl_disconnect(r, "stopping"); /* wakes the receivers whatever ended the loop */
        join_thread(r->sender, &r->sender_running);
        repl_send_queue_drop(r); /* frames the sender never took */
        join_thread(r->data_rx, &r->data_rx_running);
        join_thread(r->ctl_rx, &r->ctl_rx_running);
        join_thread(r->sync_thread, &r->sync_running);
}

void repl_go_on_without_peer_locked(struct repl_lun *r)
{
        repl_gen_new_current(&r->sb.gen, repl_gen_fresh());
        if (r->sb.peer_disk == REPL_DISK_UPTODATE)
                r->sb.peer_disk = REPL_DISK_OUTDATED;
}

void repl_disconnect_gen(struct repl_lun *r, uint64_t gen, const char *why)
{
        /* One critical section: a late caller finds the generation moved on and leaves. */
        pthread_mutex_lock(&r->lock);
        pthread_mutex_lock(&r->send_lock);
        if (gen != REPL_GEN_ANY && gen != r->conn_gen) {
                pthread_mutex_unlock(&r->send_lock);
                pthread_mutex_unlock(&r->lock);
                return;
        }
        bool was_up = r->link_up;
        bool had_peer = r->in_ack_set;
        r->link_up = false;
        repl_publish_access(r);
        r->in_ack_set = false;
        /* With a cluster, a Primary's writes wait from now until the group outdated the peer:
         * set in the same critical section, so no write slips through local-only. */
        bool outdating =
            had_peer && r->sb.role == REPL_ROLE_PRIMARY && cluster_enabled() && !r->stopping;
        if (outdating)
                r->outdating = true;
        if (r->data_fd >= 0)
                shutdown(r->data_fd, SHUT_RDWR);
        if (r->ctl_fd >= 0)
                shutdown(r->ctl_fd, SHUT_RDWR);
        pthread_cond_broadcast(&r->out_cond); /* the sender ends */
        if (was_up) {
                r->conn_gen++;
                if (!r->stopping)
                        repl_set_error(r, "disconnected: %s", why);
        }
        pthread_mutex_unlock(&r->send_lock);
        if (had_peer) {
                /* Before any write completes without the peer: our data moves on. In cluster
                 * mode that waits for the outdate (repl_outdate_peer): if this node is the one
                 * cut off and fenced, it comes back on the generation the survivor branched
                 * from, a plain SyncTarget rather than a split brain. */
                if (r->sb.role == REPL_ROLE_PRIMARY && !outdating)
                        repl_go_on_without_peer_locked(r);
                pthread_mutex_lock(&r->send_lock);
                r->outdate_gen = r->sb.gen.current;
                pthread_mutex_unlock(&r->send_lock);
                repl_persist(r);
        }
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        repl_fail_inflight(r);
}

void repl_disconnect(struct repl_lun *r, const char *why)
{
        repl_disconnect_gen(r, REPL_GEN_ANY, why);
}

static void after_disconnect(struct repl_lun *r, bool standalone)
{
        pthread_mutex_lock(&r->lock);
        if (standalone)
                r->want_connect = false;
        r->conn = r->want_connect && !r->stopping ? REPL_CONN_CONNECTING : REPL_CONN_STANDALONE;
        r->peer.known = false;
        repl_publish_access(r);
        r->sync_rate_bps = 0;
        r->dirty_at_disconnect = repl_md_dirty_bits(r->md) << REPL_MD_BIT_SHIFT;
        pthread_mutex_unlock(&r->lock);
}

void *repl_manager_main(void *arg)
{
        struct repl_lun *r = arg;
        while (!repl_stopping(r)) {
                if (r->listen_fd < 0 && listen_open(r) < 0) {
                        pthread_mutex_lock(&r->lock);
                        repl_set_error(r, "cannot listen on %s:%u: %s", r->listen_host,
                                       r->listen_port, strerror(errno));
                        pthread_mutex_unlock(&r->lock);
                        sleep_ms(r, REFUSED_RETRY_MS);
                        continue;
                }
                pthread_mutex_lock(&r->lock);
                bool want = r->want_connect;
                r->conn = want ? REPL_CONN_CONNECTING : REPL_CONN_STANDALONE;
                pthread_mutex_unlock(&r->lock);
                if (!want) {
                        struct pollfd p = {.fd = r->listen_fd, .events = POLLIN};
                        if (poll(&p, 1, 200) > 0)
                                refuse_stray(r);
                        continue;
                }
                if (open_channels(r) < 0) {
                        if (r->node_id < r->peer_id)
                                sleep_ms(r, REPL_RECONNECT_MS);
                        continue;
                }
                bool standalone = false;
                int rc = establish(r, &standalone);
                if (rc == 0)
                        run_connected(r);
                else
                        repl_disconnect(r, r->last_error);
                close_channels(r);
                repl_outdate_peer(r); /* cluster mode: held writes go on once it is done */
                after_disconnect(r, standalone);
                if (rc < 0 && !standalone)
                        sleep_ms(r, REFUSED_RETRY_MS);
        }
        set_conn(r, REPL_CONN_STANDALONE);
        return NULL;
}
