/*
 * The replication peer protocol's receive side under fuzzing: the peer's bytes are written
 * into one end of a socketpair, which is then closed for writing (a peer that goes away),
 * and the replicator's own receive code reads the other end as its threads do:
 *
 *   mode 0: the buffered reader of the data and control channel receivers
 *           (repl_reader_next, then repl_reader_payload for a frame that announces a payload,
 *           into a scratch buffer when it is longer than REPL_READER_CAP), as
 *           repl_data_rx_main does after its checks of the message;
 *   mode 1: repl_recv (header, message and payload at once), as the connection manager
 *           reads the peer's State and bitmap;
 *   mode 2, 3: the unauthenticated handshake, repl_handshake() as node 1 expecting node 2
 *           on the data (2) or control (3) channel; the bytes are the peer's HELLO, AUTH and
 *           AUTH_RESULT frames.
 *
 * In modes 0 and 1 every State message goes where the manager puts it: repl_peer_from_state()
 * into a LUN's peer view, then the sync decision (repl_gen_decide, and for a split brain
 * repl_split_brain_resolve under each policy) between the previous State (first: a fixed
 * local side) and this one.
 *
 * Input: one mode byte (bits 0-1), then the peer's bytes.
 *
 * Checks: every frame received is the one the input holds at that place (header fields,
 * message type, payload bytes), and the receive ends only where the input does not hold
 * a whole frame (-ECONNRESET) or holds a bad one (-EPROTO, with a reason); the peer view
 * stays within its enums and buffers; decisions are symmetric (what node A decides is the
 * mirror image of what node B decides from the same two States). The handshake never
 * succeeds (the input cannot know the secret, nor the nonce drawn after it was written),
 * fails only with the errors auth.h lists, gives a printable reason, never sends a positive
 * AUTH_RESULT, and tells the peer its refusal when the refusal is its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../replicator/auth.h"
#include "../../replicator/genid.h"
#include "../../replicator/repl_internal.h"
#include "../../replicator/wire.h"
#include "fuzz_util.h"

#define NODE_SELF  1u
#define NODE_PEER  2u
#define SECRET     "fuzz-replication-secret"
#define LUN_NAA    "67a6e640c3f1a2b4d5e6f708192a3b4c"
#define TIMEOUT_MS 5000 /* never reached: the peer's side is closed before anything reads */

enum mode { MODE_READER = 0, MODE_RECV = 1, MODE_HANDSHAKE_DATA = 2, MODE_HANDSHAKE_CTL = 3 };

/* ---- the peer's bytes ---- */

struct stream {
        const uint8_t *p;
        size_t len; /* what reached the socket */
        size_t off; /* where the next frame starts */
};

/* A socketpair: sv[0] is ours (the receiver), sv[1] the peer's, already written and shut. */
static void peer_says(int sv[2], const uint8_t *data, size_t size, struct stream *s)
{
        FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair: %s",
                    strerror(errno));
        size_t done = 0;
        while (done < size) {
                /* The socket buffer holds far more than max_len; what does not fit is not sent,
                 * and the checks below only count what was. */
                ssize_t n = send(sv[1], data + done, size - done, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n <= 0)
                        break;
                done += (size_t)n;
        }
        FUZZ_ASSERT(shutdown(sv[1], SHUT_WR) == 0, "shutdown: %s", strerror(errno));
        *s = (struct stream){.p = data, .len = done, .off = 0};
}

static size_t stream_left(const struct stream *s)
{
        return s->len - s->off;
}

/* The frame the input holds at s->off, as the real header decoder reads it. */
static bool frame_at(const struct stream *s, struct repl_frame *f)
{
        return stream_left(s) >= REPL_FRAME_HDR_LEN &&
               repl_frame_decode(s->p + s->off, f, NULL) == 0;
}

/* The receive failed: the input must hold no whole good frame at this place. */
static void check_end(const struct stream *s, int rc, const char *why, bool with_payload)
{
        struct repl_frame f;
        bool hdr_ok = frame_at(s, &f);
        size_t left = stream_left(s);
        if (rc == -ECONNRESET) {
                size_t need = hdr_ok ? REPL_FRAME_HDR_LEN + (size_t)f.msg_len +
                                           (with_payload ? f.payload_len : 0)
                                     : REPL_FRAME_HDR_LEN;
                FUZZ_ASSERT(left < need, "stream ended with %zu bytes left, a frame needs %zu",
                            left, need);
                return;
        }
        FUZZ_ASSERT(rc == -EPROTO, "receive = %d", rc);
        FUZZ_ASSERT(why != NULL && why[0] != '\0', "-EPROTO without a reason");
        FUZZ_ASSERT(left >= REPL_FRAME_HDR_LEN, "-EPROTO (%s) with only %zu bytes", why, left);
        if (!hdr_ok)
                return;
        /* A good header: refused only once the whole message is there and does not unpack. */
        FUZZ_ASSERT(left - REPL_FRAME_HDR_LEN >= f.msg_len,
                    "-EPROTO (%s) before the message was complete", why);
        ProtobufCMessage *m = protobuf_c_message_unpack(
            repl_msg_descriptor(f.type), NULL, f.msg_len, s->p + s->off + REPL_FRAME_HDR_LEN);
        FUZZ_ASSERT(m == NULL, "good %s frame refused: %s", repl_msg_name(f.type), why);
}

/* A frame was received: it must be the one at s->off. Moves s past header and message. */
static void check_frame(struct stream *s, const struct repl_rx *rx)
{
        struct repl_frame f;
        FUZZ_ASSERT(frame_at(s, &f), "a frame received where the input holds none");
        FUZZ_ASSERT(f.type == rx->f.type && f.msg_len == rx->f.msg_len &&
                        f.payload_len == rx->f.payload_len,
                    "frame fields differ from the input's");
        FUZZ_ASSERT(rx->f.msg_len <= REPL_MSG_MAX && rx->f.payload_len <= REPL_PAYLOAD_MAX,
                    "lengths above the limits");
        FUZZ_ASSERT(rx->msg != NULL && rx->msg->descriptor == repl_msg_descriptor(rx->f.type),
                    "message is not the type's");
        FUZZ_ASSERT(stream_left(s) - REPL_FRAME_HDR_LEN >= rx->f.msg_len,
                    "message longer than the input");
        s->off += REPL_FRAME_HDR_LEN + rx->f.msg_len;
        if (fuzz_verbose())
                fprintf(stderr, "frame %s msg %u payload %u\n", repl_msg_name(rx->f.type),
                        rx->f.msg_len, rx->f.payload_len);
}

static void check_payload(struct stream *s, const void *payload, uint32_t len)
{
        FUZZ_ASSERT(stream_left(s) >= len, "payload longer than the input");
        FUZZ_ASSERT(len == 0 || memcmp(payload, s->p + s->off, len) == 0,
                    "payload bytes differ from the input's");
        s->off += len;
}

/* ---- what the manager does with the peer's State ---- */

static struct repl_lun lun; /* only its peer view and peer_id are used */
static struct repl_side self_side;
static char self_name[64];

static void decisions_reset(void)
{
        memset(&lun.peer, 0, sizeof(lun.peer));
        lun.peer_id = NODE_PEER;
        snprintf(self_name, sizeof(self_name), "node%u", NODE_SELF);
        self_side = (struct repl_side){
            .gen = {.current = 0x1111111111111111ull, .bitmap = 0x2222222222222222ull},
            .disk = REPL_DISK_UPTODATE,
            .role = REPL_ROLE_SECONDARY,
            .dirty_bits = 8,
            .promote_epoch = 3,
            .node_id = NODE_SELF,
            .node_name = self_name,
        };
}

static bool decision_valid(enum repl_decision d)
{
        return (unsigned)d <= REPL_DECIDE_NO_GOOD_DATA;
}

/* Both nodes run the same rules on the same two States: they must agree on who sends. */
static void check_decisions(const struct repl_side *self, const struct repl_side *peer)
{
        const char *why = NULL, *why2 = NULL;
        enum repl_decision d = repl_gen_decide(self, peer, &why);
        enum repl_decision d2 = repl_gen_decide(peer, self, &why2);
        FUZZ_ASSERT(decision_valid(d) && why != NULL, "decision %d", d);
        FUZZ_ASSERT(d2 == repl_decision_mirror(d), "decide: %s here, %s on the peer (%s / %s)",
                    repl_decision_name(d), repl_decision_name(d2), why, why2);
        if (d != REPL_DECIDE_SPLIT_BRAIN)
                return;
        static const enum repl_sb_policy policies[] = {
            REPL_SB_DISCONNECT, REPL_SB_DISCARD_ZERO_CHANGES, REPL_SB_DISCARD_YOUNGER_PRIMARY,
            REPL_SB_DISCARD_NODE};
        for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
                /* discard-node-NAME is configured alike on both nodes: try each name. */
                const char *names[] = {self->node_name, peer->node_name};
                for (size_t n = 0; n < 2; n++) {
                        enum repl_decision r =
                            repl_split_brain_resolve(policies[i], names[n], self, peer, &why);
                        enum repl_decision r2 =
                            repl_split_brain_resolve(policies[i], names[n], peer, self, &why2);
                        FUZZ_ASSERT(r == REPL_DECIDE_SPLIT_BRAIN ||
                                        r == REPL_DECIDE_SOURCE_BITMAP ||
                                        r == REPL_DECIDE_TARGET_BITMAP,
                                    "policy %d resolved to %s", policies[i], repl_decision_name(r));
                        FUZZ_ASSERT(r2 == repl_decision_mirror(r),
                                    "policy %d: %s here, %s on the peer", policies[i],
                                    repl_decision_name(r), repl_decision_name(r2));
                }
        }
}

static void on_state(const Tandem__Repl__State *m)
{
        repl_peer_from_state(&lun, m);
        const struct repl_peer_view *p = &lun.peer;
        FUZZ_ASSERT(p->known, "peer view not marked known");
        FUZZ_ASSERT(memchr(p->naa, '\0', sizeof(p->naa)) && memchr(p->name, '\0', sizeof(p->name)),
                    "peer strings not terminated");
        FUZZ_ASSERT(p->side.disk <= REPL_DISK_UPTODATE, "peer disk %d", p->side.disk);
        FUZZ_ASSERT(p->side.role == REPL_ROLE_PRIMARY || p->side.role == REPL_ROLE_SECONDARY,
                    "peer role %d", p->side.role);
        FUZZ_ASSERT(p->side.node_id == NODE_PEER && p->side.node_name == p->name,
                    "peer identity not ours to set");
        check_decisions(&self_side, &p->side);
        /* The next State meets this one, as if this had been our own. */
        self_side = p->side;
        self_side.node_id = NODE_SELF;
        snprintf(self_name, sizeof(self_name), "%s", p->name);
        self_side.node_name = self_name;
}

static void on_message(const struct repl_rx *rx)
{
        if (rx->f.type == TANDEM__REPL__MSG_TYPE__MSG_STATE)
                on_state((const Tandem__Repl__State *)rx->msg);
}

/* ---- modes 0 and 1 ---- */

static void run_reader(int fd, struct stream *s)
{
        struct repl_reader rd;
        FUZZ_ASSERT(repl_reader_init(&rd, fd) == 0, "repl_reader_init");
        uint8_t *scratch = NULL;
        for (;;) {
                struct repl_rx rx;
                const char *why = NULL;
                int rc = repl_reader_next(&rd, &rx, TIMEOUT_MS, &why);
                if (rc) {
                        FUZZ_ASSERT(rx.msg == NULL, "message left after %d", rc);
                        check_end(s, rc, why, false);
                        break;
                }
                check_frame(s, &rx);
                on_message(&rx);
                uint32_t len = rx.f.payload_len;
                repl_rx_free(&rx);
                if (!len)
                        continue;
                /* The receiver's scratch holds at least the payload when it is too long for
                 * the reader's buffer (repl_apply.c payload_in). */
                if (len > REPL_READER_CAP) {
                        scratch = realloc(scratch, len);
                        FUZZ_ASSERT(scratch != NULL, "out of memory");
                }
                const void *payload = NULL;
                rc = repl_reader_payload(&rd, len, scratch, &payload, TIMEOUT_MS);
                if (rc) {
                        FUZZ_ASSERT(rc == -ECONNRESET, "repl_reader_payload = %d", rc);
                        FUZZ_ASSERT(stream_left(s) < len, "payload of %u cut short with %zu left",
                                    len, stream_left(s));
                        break;
                }
                check_payload(s, payload, len);
        }
        free(scratch);
        repl_reader_fini(&rd);
}

static void run_recv(int fd, struct stream *s)
{
        for (;;) {
                struct repl_rx rx;
                const char *why = NULL;
                int rc = repl_recv(fd, &rx, TIMEOUT_MS, &why);
                if (rc) {
                        FUZZ_ASSERT(rx.msg == NULL && rx.payload == NULL, "rx left after %d", rc);
                        check_end(s, rc, why, true);
                        break;
                }
                check_frame(s, &rx);
                FUZZ_ASSERT((rx.payload != NULL) == (rx.f.payload_len != 0), "payload buffer");
                check_payload(s, rx.payload, rx.f.payload_len);
                on_message(&rx);
                repl_rx_free(&rx);
        }
}

/* ---- modes 2 and 3: the handshake ---- */

static bool refusal_errno(int rc)
{
        return rc == -EACCES || rc == -EPROTO || rc == -ENOENT || rc == -ESRCH;
}

/* What the handshake sent to the peer: a HELLO first, never a positive AUTH_RESULT, and
 * (when it refused the peer itself) last the refusal with the reason it reported. */
static void check_sent(int peer_fd, int rc, const char *why)
{
        bool refused_here = refusal_errno(rc) && strncmp(why, "peer refused", 12) != 0;
        bool last_is_refusal = false;
        char last_reason[256] = "";
        for (unsigned i = 0;; i++) {
                struct repl_rx rx;
                int r = repl_recv(peer_fd, &rx, TIMEOUT_MS, NULL);
                if (r) {
                        FUZZ_ASSERT(r == -ECONNRESET, "what the handshake sent: %d", r);
                        break;
                }
                FUZZ_ASSERT(rx.f.payload_len == 0, "handshake frame with a payload");
                if (i == 0) {
                        const Tandem__Repl__Hello *h = (const void *)rx.msg;
                        FUZZ_ASSERT(rx.f.type == TANDEM__REPL__MSG_TYPE__MSG_HELLO,
                                    "first frame sent is %s", repl_msg_name(rx.f.type));
                        FUZZ_ASSERT(h->node_id == NODE_SELF && h->peer_node_id == NODE_PEER &&
                                        h->nonce.len == REPL_NONCE_LEN,
                                    "our HELLO");
                }
                last_is_refusal = false;
                if (rx.f.type == TANDEM__REPL__MSG_TYPE__MSG_AUTH_RESULT) {
                        const Tandem__Repl__AuthResult *ar = (const void *)rx.msg;
                        FUZZ_ASSERT(!ar->ok, "AUTH_RESULT ok sent to a peer without the secret");
                        last_is_refusal = true;
                        snprintf(last_reason, sizeof(last_reason), "%s",
                                 ar->reason ? ar->reason : "");
                }
                repl_rx_free(&rx);
        }
        if (refused_here) {
                FUZZ_ASSERT(last_is_refusal, "refused (%s) without telling the peer", why);
                FUZZ_ASSERT(strcmp(last_reason, why) == 0, "told the peer \"%s\", logged \"%s\"",
                            last_reason, why);
        }
}

static void run_handshake(int sv[2], int channel)
{
        const struct repl_hs_local local = {
            .node_id = NODE_SELF,
            .peer_node_id = NODE_PEER,
            .secret = SECRET,
            .lun_naa = LUN_NAA,
            .channel = channel,
            .features = REPL_FEATURE_VERIFY_SHA256,
        };
        struct repl_hs_result res;
        char why[256];
        memset(why, 'x', sizeof(why));
        int rc = repl_handshake(sv[0], &local, &res, TIMEOUT_MS, why, sizeof(why));
        if (fuzz_verbose())
                fprintf(stderr, "handshake = %d: %s\n", rc, why);
        FUZZ_ASSERT(rc != 0, "handshake succeeded without the secret");
        FUZZ_ASSERT(refusal_errno(rc) || rc == -ECONNRESET, "handshake = %d (%s)", rc, why);
        FUZZ_ASSERT(memchr(why, '\0', sizeof(why)) != NULL && why[0] != '\0',
                    "no reason given for %d", rc);
        for (const char *c = why; *c; c++)
                FUZZ_ASSERT(*c >= 0x20 && *c < 0x7f, "unprintable byte 0x%02x in the reason: %s",
                            (unsigned char)*c, why);
        /* Ours closed too, so reading the peer's end stops after what the handshake sent. */
        FUZZ_ASSERT(shutdown(sv[0], SHUT_WR) == 0, "shutdown: %s", strerror(errno));
        check_sent(sv[1], rc, why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        enum mode mode = (enum mode)(data[0] & 3);
        int sv[2];
        struct stream s;
        peer_says(sv, data + 1, size - 1, &s);
        decisions_reset();
        switch (mode) {
        case MODE_READER:
                run_reader(sv[0], &s);
                break;
        case MODE_RECV:
                run_recv(sv[0], &s);
                break;
        case MODE_HANDSHAKE_DATA:
                run_handshake(sv, TANDEM__REPL__CHANNEL__CHANNEL_DATA);
                break;
        case MODE_HANDSHAKE_CTL:
                run_handshake(sv, TANDEM__REPL__CHANNEL__CHANNEL_CONTROL);
                break;
        }
        close(sv[0]);
        close(sv[1]);
        return 0;
}
