/*
 * The receivers. Data channel: the peer's writes, resync data and verify requests, applied
 * in sequence order (a gap or a repeat ends the connection) and acknowledged cumulatively
 * on the control channel once applied as durably as asked. Control channel: acks, states,
 * pings, end of resync, verify results; silence longer than the timeout drops the peer.
 */
#include <errno.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "repl_internal.h"
#include "tandem/clock.h"
#include "tandem/log.h"
#include "wire.h"

#define ACK_BATCH 32u

static bool link_is_up(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        bool up = r->link_up;
        pthread_mutex_unlock(&r->lock);
        return up;
}

static int send_ack(struct repl_lun *r, uint64_t seq, int error)
{
        Tandem__Repl__Ack m = TANDEM__REPL__ACK__INIT;
        m.seq = seq;
        m.error = error;
        return repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_ACK, &m);
}

/* ---- the data channel ---- */

struct rx_state {
        struct repl_reader rd;
        uint8_t *buf; /* scratch: payloads too long for the reader, verify reads */
        size_t cap;
        uint64_t pending_ack; /* highest seq applied, not yet acknowledged */
        unsigned unacked;
        bool flush_before_ack; /* resync data since the last ack: durable first */
        bool bits_handed_over; /* SyncTarget: the source holds the bitmap from now on */
};

static int rx_buf(struct rx_state *st, size_t len)
{
        if (len <= st->cap)
                return 0;
        void *p = NULL;
        if (posix_memalign(&p, 4096, len))
                return -ENOMEM;
        free(st->buf);
        st->buf = p;
        st->cap = len;
        return 0;
}

/* The payload of the frame just read: in the reader's buffer, or copied to the scratch. */
static int payload_in(struct rx_state *st, uint32_t len, const void **out)
{
        *out = NULL;
        if (len == 0)
                return 0;
        if (len > REPL_READER_CAP) {
                int rc = rx_buf(st, len);
                if (rc < 0)
                        return rc;
        }
        return repl_reader_payload(&st->rd, len, st->buf, out, -1);
}

static bool range_ok(struct repl_lun *r, uint64_t off, uint64_t len)
{
        uint32_t bs = r->block_size;
        return off % bs == 0 && len % bs == 0 && off <= r->size_bytes && len <= r->size_bytes - off;
}

/* A change the peer sent failed here: our copy is no longer a mirror. */
static int apply_failed(struct repl_lun *r, uint64_t off, uint64_t len, int rc, const char *what)
{
        repl_md_set_dirty(r->md, off, len);
        (void)repl_md_flush_bitmap(r->md); /* the range may lie outside the activity log */
        pthread_mutex_lock(&r->lock);
        r->sb.disk = REPL_DISK_INCONSISTENT;
        repl_persist(r);
        repl_set_error(r, "%s failed on this node: %s", what, strerror(-rc));
        pthread_mutex_unlock(&r->lock);
        return rc;
}

static int apply_local(struct repl_lun *r, uint32_t kind, const void *buf, uint64_t off,
                       uint64_t len)
{
        switch (kind) {
        case REPL_OP_WRITE:
                return tdm_medium_write(r->local, buf, len, off, 0);
        case REPL_OP_ZERO:
                return tdm_medium_change(r->local, TDM_MIO_WRITE_ZEROES, off, len);
        case REPL_OP_UNMAP:
                return tdm_medium_change(r->local, TDM_MIO_UNMAP, off, len);
        }
        return -EINVAL;
}

static int apply_change(struct repl_lun *r, uint32_t kind, const void *buf, uint64_t off,
                        uint64_t len)
{
        if (len == 0)
                return 0;
        int rc = repl_md_al_begin(r->md, off, len);
        if (rc < 0)
                return apply_failed(r, off, len, rc, "activity log");
        rc = apply_local(r, kind, buf, off, len);
        if (rc < 0)
                apply_failed(r, off, len, rc, "replicated write");
        repl_md_al_end(r->md, off, len);
        return rc;
}

/*
 * Resync data on the SyncTarget bypasses the activity log: the source clears its bits only
 * on our ack, and we ack resync data only after a flush (rx_state.flush_before_ack), so after
 * a crash here the source's bitmap alone says what is still missing, and an interrupted resync
 * resumes where it was instead of resending every extent we were writing.
 */
static int apply_resync(struct repl_lun *r, struct rx_state *st, uint32_t kind, const void *buf,
                        uint64_t off, uint64_t len)
{
        if (len == 0)
                return 0; /* nothing to write (a backstore would call a 0-byte write ENOSPC) */
        /* The source persisted the union of both bitmaps before its first resync data: ours
         * would only make a resumed resync send everything again. */
        if (!st->bits_handed_over) {
                repl_md_clear_dirty(r->md, 0, r->size_bytes);
                int frc = repl_md_flush_bitmap(r->md);
                if (frc < 0)
                        return apply_failed(r, 0, 0, frc, "bitmap write");
                st->bits_handed_over = true;
        }
        int rc = apply_local(r, kind, buf, off, len);
        if (rc < 0)
                return apply_failed(r, off, len, rc, "resync write");
        st->flush_before_ack = true;
        return 0;
}

static int protocol_error(struct repl_lun *r, const char *fmt, const char *what)
{
        char why[200];
        snprintf(why, sizeof(why), fmt, what);
        repl_disconnect(r, why);
        return -EPROTO;
}

/* A state record the Primary sent: stored on this node's medium; the LU above hears of it. */
static int store_state(struct repl_lun *r, unsigned id, const void *buf, size_t len, bool persist)
{
        int rc = tdm_medium_state_put(r->local, id, buf, len, persist ? TDM_MIO_PERSIST : 0);
        if (rc < 0)
                return apply_failed(r, 0, 0, rc, "state record");
        if (r->medium.state_changed)
                r->medium.state_changed(r->medium.access_arg, id);
        return 0;
}

static int on_write(struct repl_lun *r, struct rx_state *st, const struct repl_rx *rx)
{
        const Tandem__Repl__Write *m = (const Tandem__Repl__Write *)rx->msg;
        pthread_mutex_lock(&r->lock);
        bool primary = r->sb.role == REPL_ROLE_PRIMARY;
        bool peer_primary = r->peer.side.role == REPL_ROLE_PRIMARY;
        pthread_mutex_unlock(&r->lock);
        if (primary)
                return protocol_error(r, "peer sent a %s while this node is Primary", "write");
        /* Writes come only from a Primary: its role, sent on this channel, precedes them. */
        if (!peer_primary)
                return protocol_error(r, "peer sent a %s while it is not Primary", "write");
        bool data = m->kind == REPL_OP_WRITE;
        bool kind_ok = data || m->kind == REPL_OP_ZERO || m->kind == REPL_OP_UNMAP;
        if (!kind_ok || !range_ok(r, m->offset, m->length) ||
            rx->f.payload_len != (data ? m->length : 0))
                return protocol_error(r, "malformed %s from peer", "write");
        const void *payload = NULL;
        int rc = payload_in(st, rx->f.payload_len, &payload);
        if (rc < 0)
                return rc;
        if (m->has_state &&
            (m->state_id >= TDM_STATE_RECORDS || !data || m->state.len > TDM_STATE_MAX_BYTES))
                return protocol_error(r, "malformed %s from peer", "write with a state record");
        rc = apply_change(r, m->kind, payload, m->offset, m->length);
        if (rc == 0 && m->fua && (rc = tdm_medium_flush(r->local)) < 0) /* durable before the ack */
                return apply_failed(r, m->offset, m->length, rc, "flush of a FUA write");
        if (rc == 0 && m->has_state)
                rc = store_state(r, m->state_id, m->state.data, m->state.len, false);
        return rc;
}

static int on_resync_data(struct repl_lun *r, struct rx_state *st, const struct repl_rx *rx)
{
        const Tandem__Repl__ResyncData *m = (const Tandem__Repl__ResyncData *)rx->msg;
        pthread_mutex_lock(&r->lock);
        bool target = r->conn == REPL_CONN_SYNC_TARGET;
        pthread_mutex_unlock(&r->lock);
        if (!target)
                return protocol_error(r, "peer sent %s while this node is not SyncTarget",
                                      "resync data");
        if (!range_ok(r, m->offset, m->length) || rx->f.payload_len != (m->zero ? 0 : m->length))
                return protocol_error(r, "malformed %s from peer", "resync data");
        const void *payload = NULL;
        int rc = payload_in(st, rx->f.payload_len, &payload);
        if (rc < 0)
                return rc;
        rc = apply_resync(r, st, m->zero ? REPL_OP_ZERO : REPL_OP_WRITE, payload, m->offset,
                          m->length);
        if (rc == 0) {
                pthread_mutex_lock(&r->lock);
                r->resync_received += m->length;
                r->sync_done += m->length;
                pthread_mutex_unlock(&r->lock);
        }
        return rc;
}

static void block_digest(const uint8_t *p, size_t len, uint8_t out[32])
{
        SHA256(p, len, out);
}

static int on_verify(struct repl_lun *r, struct rx_state *st, const struct repl_rx *rx)
{
        const Tandem__Repl__VerifyRequest *m = (const Tandem__Repl__VerifyRequest *)rx->msg;
        if (m->length == 0) { /* the end of a verify run */
                pthread_mutex_lock(&r->lock);
                if (r->conn == REPL_CONN_VERIFY_TARGET)
                        r->conn = REPL_CONN_CONNECTED;
                pthread_mutex_unlock(&r->lock);
                return 0;
        }
        uint32_t blk = m->block_bytes;
        if (blk != REPL_VERIFY_BLOCK || !range_ok(r, m->offset, m->length) ||
            m->length > REPL_VERIFY_CHUNK || m->length % blk ||
            rx->f.payload_len != m->length / blk * 32)
                return protocol_error(r, "malformed %s from peer", "verify request");
        const uint8_t *digests = NULL;
        int rc = payload_in(st, rx->f.payload_len, (const void **)&digests);
        if (rc == 0)
                rc = rx_buf(st, m->length); /* digests stay valid: the reader is not called */
        if (rc < 0)
                return rc;
        pthread_mutex_lock(&r->lock);
        if (r->conn == REPL_CONN_CONNECTED)
                r->conn = REPL_CONN_VERIFY_TARGET;
        pthread_mutex_unlock(&r->lock);
        rc = tdm_medium_read(r->local, st->buf, m->length, m->offset);
        uint64_t *bad = calloc(m->length / blk, sizeof(*bad));
        size_t n_bad = 0;
        if (!bad)
                return -ENOMEM;
        for (uint32_t i = 0; rc == 0 && i < m->length / blk; i++) {
                uint8_t d[32];
                block_digest(st->buf + (size_t)i * blk, blk, d);
                if (memcmp(d, digests + (size_t)i * 32, 32) != 0)
                        bad[n_bad++] = m->offset + (uint64_t)i * blk;
        }
        Tandem__Repl__VerifyReply rep = TANDEM__REPL__VERIFY_REPLY__INIT;
        rep.seq = m->seq;
        rep.offset = m->offset;
        rep.length = m->length;
        rep.mismatch_offsets = bad;
        rep.n_mismatch_offsets = n_bad;
        rep.error = rc < 0 ? -rc : 0;
        int src = repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REPLY, &rep);
        free(bad);
        return src;
}

/*
 * A state record of the logical unit: from a Primary (its change, or its set on connect) or
 * from our sync source. Stored on this node's medium; the LU above hears of it.
 */
static int on_lu_state(struct repl_lun *r, struct rx_state *st, const struct repl_rx *rx)
{
        const Tandem__Repl__LuState *m = (const Tandem__Repl__LuState *)rx->msg;
        pthread_mutex_lock(&r->lock);
        bool from_source = r->peer.side.role == REPL_ROLE_PRIMARY ||
                           r->conn == REPL_CONN_SYNC_TARGET || !r->lu_state_valid;
        bool primary = r->sb.role == REPL_ROLE_PRIMARY;
        pthread_mutex_unlock(&r->lock);
        if (primary || !from_source)
                return protocol_error(r, "peer sent %s while it is not the source", "LU state");
        if (m->id >= TDM_STATE_RECORDS || rx->f.payload_len > TDM_STATE_MAX_BYTES)
                return protocol_error(r, "malformed %s from peer", "LU state");
        const void *payload = NULL;
        int rc = payload_in(st, rx->f.payload_len, &payload);
        if (rc < 0)
                return rc;
        rc = store_state(r, m->id, payload, rx->f.payload_len, m->persist);
        if (rc < 0)
                return rc;
        if (m->last_of_set) {
                pthread_mutex_lock(&r->lock);
                r->lu_state_valid = true;
                pthread_mutex_unlock(&r->lock);
        }
        return 0;
}

static int on_scsi_state(struct repl_lun *r, const struct repl_rx *rx)
{
        const Tandem__Repl__ScsiState *m = (const Tandem__Repl__ScsiState *)rx->msg;
        if ((m->lun_naa && strcasecmp(m->lun_naa, r->naa) != 0) ||
            (m->lun_serial && m->lun_serial[0] && strcmp(m->lun_serial, r->serial) != 0))
                return protocol_error(r, "peer's %s differs from this node's", "LUN identity");
        pthread_mutex_lock(&r->lock);
        r->peer.side.role = m->role == REPL_ROLE_PRIMARY ? REPL_ROLE_PRIMARY : REPL_ROLE_SECONDARY;
        repl_publish_access(r);
        pthread_mutex_unlock(&r->lock);
        return 0;
}

/* Flush (if asked) and acknowledge everything applied so far. */
static int flush_acks(struct repl_lun *r, struct rx_state *st)
{
        if (!st->unacked)
                return 0;
        if (st->flush_before_ack) {
                int rc = tdm_medium_flush(r->local);
                if (rc < 0) /* nothing since the last ack may count as done */
                        return apply_failed(r, 0, 0, rc, "flush of resync data");
                st->flush_before_ack = false;
        }
        st->unacked = 0;
        return send_ack(r, st->pending_ack, 0);
}

static uint64_t data_seq(const struct repl_rx *rx);

static int on_data_message(struct repl_lun *r, struct rx_state *st, struct repl_rx *rx)
{
        switch (rx->f.type) {
        case TANDEM__REPL__MSG_TYPE__MSG_WRITE:
                return on_write(r, st, rx);
        case TANDEM__REPL__MSG_TYPE__MSG_FLUSH: {
                int rc = tdm_medium_flush(r->local);
                return rc < 0 ? apply_failed(r, 0, 0, rc, "flush") : 0;
        }
        case TANDEM__REPL__MSG_TYPE__MSG_RS_DATA:
                return on_resync_data(r, st, rx);
        case TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REQ:
                return on_verify(r, st, rx);
        case TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE:
                return on_scsi_state(r, rx);
        case TANDEM__REPL__MSG_TYPE__MSG_LU_STATE:
                return on_lu_state(r, st, rx);
        case TANDEM__REPL__MSG_TYPE__MSG_RESIZE: {
                /* A resize this node cannot make changes nothing: refused, still mirroring. */
                int rc = repl_apply_resize(r, (const Tandem__Repl__Resize *)rx->msg);
                if (rc < 0) {
                        flush_acks(r, st);
                        send_ack(r, data_seq(rx), -rc);
                }
                return 0;
        }
        default:
                return protocol_error(r, "unexpected %s on the data channel",
                                      repl_msg_name(rx->f.type));
        }
}

/* The seq every data message carries (0: not a data-channel message). */
static uint64_t data_seq(const struct repl_rx *rx)
{
        const uint64_t *seq = repl_msg_seq(rx->f.type, rx->msg);
        return seq ? *seq : 0;
}

static bool more_input(int fd)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        return poll(&p, 1, 0) > 0;
}

void *repl_data_rx_main(void *arg)
{
        struct repl_lun *r = arg;
        struct rx_state st = {0};
        int fd = r->data_fd;
        if (repl_reader_init_on(&st.rd, fd, &r->data_open) < 0) {
                repl_disconnect(r, "out of memory for the data channel");
                return NULL;
        }
        for (;;) {
                struct repl_rx rx;
                const char *why = NULL;
                int rc = repl_reader_next(&st.rd, &rx, -1, &why);
                if (rc < 0) {
                        repl_disconnect(r, why ? why : "data channel closed");
                        break;
                }
                uint64_t seq = data_seq(&rx);
                if (seq == 0) { /* not a data-channel message at all */
                        char m[96];
                        snprintf(m, sizeof(m), "unexpected %s on the data channel",
                                 repl_msg_name(rx.f.type));
                        repl_rx_free(&rx);
                        repl_disconnect(r, m);
                        break;
                }
                if (seq != r->rx_expect_seq) {
                        char m[128];
                        snprintf(m, sizeof(m), "out-of-order sequence number %llu (expected %llu)",
                                 (unsigned long long)seq, (unsigned long long)r->rx_expect_seq);
                        repl_rx_free(&rx);
                        repl_disconnect(r, m);
                        break;
                }
                r->rx_expect_seq++;
                rc = on_data_message(r, &st, &rx);
                repl_rx_free(&rx);
                if (rc == -EPROTO || rc == -ECONNRESET || rc == -ETIMEDOUT) {
                        if (rc != -EPROTO)
                                repl_disconnect(r, "data channel closed");
                        break;
                }
                if (rc < 0) { /* our disk failed it: tell the sender, then stop mirroring */
                        flush_acks(r, &st);
                        send_ack(r, seq, -rc);
                        /* Reconnecting would fail the Primary's writes again: StandAlone until
                         * the admin has fixed the disk and says connect. */
                        char why[200];
                        snprintf(why, sizeof(why),
                                 "this node's disk failed a replicated change (%s); fix it, then "
                                 "'tandemctl repl connect'",
                                 strerror(-rc));
                        pthread_mutex_lock(&r->lock);
                        r->want_connect = false;
                        repl_set_error(r, "%s", why);
                        pthread_mutex_unlock(&r->lock);
                        /* The sender must read the failed ack before it sees us go: close
                         * only our sending side of the control channel, after the ack. The
                         * sender then closes, and our control receiver ends the link. */
                        Tandem__Repl__Disconnect d = TANDEM__REPL__DISCONNECT__INIT;
                        d.reason = why;
                        (void)repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT, &d);
                        pthread_mutex_lock(&r->ctl_send_lock);
                        if (r->ctl_fd >= 0)
                                shutdown(r->ctl_fd, SHUT_WR);
                        pthread_mutex_unlock(&r->ctl_send_lock);
                        break;
                }
                st.pending_ack = seq;
                st.unacked++;
                bool more = repl_reader_buffered(&st.rd) || more_input(fd);
                if ((st.unacked >= ACK_BATCH || !more) && flush_acks(r, &st) < 0) {
                        repl_disconnect(r, "cannot send acks");
                        break;
                }
        }
        free(st.buf);
        repl_reader_fini(&st.rd);
        return NULL;
}

/* ---- the control channel ---- */

static void on_sync_done(struct repl_lun *r, const Tandem__Repl__SyncDone *m)
{
        pthread_mutex_lock(&r->lock);
        bool expected = r->conn == REPL_CONN_SYNC_TARGET ||
                        (r->decision == REPL_DECIDE_BOTH_NEW && r->sb.role == REPL_ROLE_SECONDARY);
        pthread_mutex_unlock(&r->lock);
        if (!expected) {
                repl_disconnect(r, "peer ended a resync this node was not part of");
                return;
        }
        /* The resync data must be durable before the disk claims UpToDate. */
        int drc = tdm_medium_flush(r->local);
        if (drc < 0) {
                apply_failed(r, 0, 0, drc, "flush at the end of resync");
                repl_disconnect(r, "cannot make the resynced data durable");
                return;
        }
        struct repl_gen src = {0};
        if (m->gen) {
                src.current = m->gen->current;
                src.bitmap = m->gen->bitmap;
                for (size_t i = 0; i < m->gen->n_history && i < 2; i++)
                        src.history[i] = m->gen->history[i];
        }
        repl_md_clear_dirty(r->md, 0, r->size_bytes);
        int frc = repl_md_flush_bitmap(r->md);
        pthread_mutex_lock(&r->lock);
        repl_gen_sync_target_done(&r->sb.gen, &src);
        r->sb.disk = frc == 0 ? REPL_DISK_UPTODATE : REPL_DISK_INCONSISTENT;
        r->sb.peer_disk = REPL_DISK_UPTODATE;
        r->want_discard = false;
        r->conn = REPL_CONN_CONNECTED;
        r->sync_done = r->sync_total;
        repl_persist(r);
        pthread_mutex_unlock(&r->lock);
        log_notice("replication %s lun %llu: resync from node %u done; disk UpToDate", r->iqn,
                   (unsigned long long)r->lun_id, r->peer_id);
}

static void on_verify_reply(struct repl_lun *r, const Tandem__Repl__VerifyReply *m)
{
        for (size_t i = 0; i < m->n_mismatch_offsets; i++) {
                uint64_t off = m->mismatch_offsets[i];
                if (off < r->size_bytes && r->verify_resync)
                        repl_md_set_dirty(r->md, off, REPL_VERIFY_BLOCK);
        }
        pthread_mutex_lock(&r->lock);
        r->verify_oos += (uint64_t)m->n_mismatch_offsets * REPL_VERIFY_BLOCK;
        if (m->error)
                repl_set_error(r, "verify: peer could not read at %llu: %s",
                               (unsigned long long)m->offset, strerror(m->error));
        pthread_mutex_unlock(&r->lock);
        if (m->n_mismatch_offsets)
                log_warn("replication %s lun %llu: verify found %zu out-of-sync blocks of 4 KiB "
                         "at %llu..",
                         r->iqn, (unsigned long long)r->lun_id, m->n_mismatch_offsets,
                         (unsigned long long)m->mismatch_offsets[0]);
}

static void on_peer_state(struct repl_lun *r, const Tandem__Repl__State *m)
{
        pthread_mutex_lock(&r->lock);
        repl_peer_from_state(r, m);
        repl_publish_access(r);
        bool both_primary =
            r->peer.side.role == REPL_ROLE_PRIMARY && r->sb.role == REPL_ROLE_PRIMARY;
        if (r->conn == REPL_CONN_CONNECTED || r->conn == REPL_CONN_SYNC_SOURCE)
                r->sb.peer_disk = r->peer.side.disk;
        pthread_mutex_unlock(&r->lock);
        if (both_primary)
                repl_disconnect(r, "both nodes are Primary");
}

static int on_ctl_message(struct repl_lun *r, struct repl_rx *rx)
{
        switch (rx->f.type) {
        case TANDEM__REPL__MSG_TYPE__MSG_ACK: {
                const Tandem__Repl__Ack *m = (const Tandem__Repl__Ack *)rx->msg;
                int acked =
                    m->error < 0 || m->error > 4095 ? -EPROTO : repl_acked(r, m->seq, -m->error);
                if (acked < 0) {
                        repl_disconnect(r, "peer acknowledged something never sent");
                        return -EPROTO;
                }
                if (m->error && acked == REPL_ACKED_REFUSED_RESIZE)
                        return 0; /* the peer could not grow: the resize fails, nothing else */
                if (m->error) {
                        pthread_mutex_lock(&r->lock);
                        r->sb.peer_disk = REPL_DISK_INCONSISTENT;
                        pthread_mutex_unlock(&r->lock);
                        char why[160];
                        snprintf(why, sizeof(why), "peer failed a replicated change: %s",
                                 strerror(m->error));
                        repl_disconnect(r, why);
                        return -EIO;
                }
                return 0;
        }
        case TANDEM__REPL__MSG_TYPE__MSG_PING: {
                Tandem__Repl__Ping *m = (Tandem__Repl__Ping *)rx->msg;
                return repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_PING_ACK, m);
        }
        case TANDEM__REPL__MSG_TYPE__MSG_PING_ACK:
                return 0;
        case TANDEM__REPL__MSG_TYPE__MSG_STATE:
                on_peer_state(r, (const Tandem__Repl__State *)rx->msg);
                return 0;
        case TANDEM__REPL__MSG_TYPE__MSG_SYNC_DONE:
                on_sync_done(r, (const Tandem__Repl__SyncDone *)rx->msg);
                return 0;
        case TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REPLY:
                on_verify_reply(r, (const Tandem__Repl__VerifyReply *)rx->msg);
                return 0;
        case TANDEM__REPL__MSG_TYPE__MSG_FORWARD:
                return repl_on_forward(r, (const Tandem__Repl__Forward *)rx->msg);
        case TANDEM__REPL__MSG_TYPE__MSG_FORWARD_REPLY:
                repl_on_forward_reply(r, (const Tandem__Repl__ForwardReply *)rx->msg);
                return 0;
        case TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT: {
                const Tandem__Repl__Disconnect *m = (const Tandem__Repl__Disconnect *)rx->msg;
                char reason[256], why[300];
                repl_peer_text(reason, sizeof(reason), m->reason);
                snprintf(why, sizeof(why), "peer closed: %s", reason);
                repl_disconnect(r, why);
                return -ECONNRESET;
        }
        default: {
                char why[96];
                snprintf(why, sizeof(why), "unexpected %s on the control channel",
                         repl_msg_name(rx->f.type));
                repl_disconnect(r, why);
                return -EPROTO;
        }
        }
}

void *repl_ctl_rx_main(void *arg)
{
        struct repl_lun *r = arg;
        int fd = r->ctl_fd;
        unsigned timeout = r->cfg.timeout_ms;
        unsigned ping_ms = timeout / 4 ? timeout / 4 : 1;
        uint64_t ping_ns = (uint64_t)ping_ms * 1000000ull;
        struct repl_reader rd;
        if (repl_reader_init_on(&rd, fd, &r->ctl_open) < 0) {
                repl_disconnect(r, "out of memory for the control channel");
                return NULL;
        }
        uint64_t last_rx = tdm_now_ns(), last_ping = 0;
        uint64_t token = 0;
        while (link_is_up(r)) {
                uint64_t now = tdm_now_ns();
                /* Pings go out on time even while acks flow: the peer watches this channel. */
                if (now - last_ping >= ping_ns) {
                        Tandem__Repl__Ping m = TANDEM__REPL__PING__INIT;
                        m.token = ++token;
                        if (repl_send_ctl(r, TANDEM__REPL__MSG_TYPE__MSG_PING, &m) < 0) {
                                repl_disconnect(r, "cannot send to peer");
                                break;
                        }
                        last_ping = now;
                }
                if (now - last_rx > (uint64_t)timeout * 1000000ull) {
                        char why[96];
                        snprintf(why, sizeof(why), "peer silent for %u ms", timeout);
                        repl_disconnect(r, why);
                        break;
                }
                /* Alive but not applying (a hung disk): writes are held no longer. */
                uint64_t oldest = repl_oldest_inflight_ns(r);
                if (oldest && now > oldest && now - oldest > (uint64_t)timeout * 1000000ull) {
                        char why[96];
                        snprintf(why, sizeof(why), "peer acknowledged nothing for %u ms", timeout);
                        repl_disconnect(r, why);
                        break;
                }
                if (!repl_reader_buffered(&rd)) {
                        struct pollfd p = {.fd = fd, .events = POLLIN};
                        if (poll(&p, 1, (int)ping_ms) <= 0)
                                continue;
                }
                struct repl_rx rx;
                const char *why = NULL;
                int rc = repl_reader_next(&rd, &rx, (int)timeout, &why);
                if (rc < 0) {
                        repl_disconnect(r, why                 ? why
                                           : rc == -ECONNRESET ? "peer closed"
                                                               : strerror(-rc));
                        break;
                }
                last_rx = tdm_now_ns();
                rc = on_ctl_message(r, &rx);
                repl_rx_free(&rx);
                if (rc < 0 && !link_is_up(r))
                        break;
        }
        repl_reader_fini(&rd);
        return NULL;
}
