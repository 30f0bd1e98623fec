/*
 * What a Secondary does with the frames of an authenticated peer, under fuzzing: two real
 * replicated LUN engines (node 2, Secondary, 4 MiB sparse files in /dev/shm, listening on
 * loopback; link_protection "authenticate" and "encrypt"), started on the first input
 * (tests/common/repl_peer.h, as tests/unit/test_repl_engine.c does). Per input the target
 * plays node 1, the Primary: it dials, runs the real handshake with the shared secret on the
 * data and the control channel, exchanges States (chosen from the engine's so that it is
 * Connected, or SyncTarget of a full resync; a bitmap exchange when the engine has dirty
 * bits), acknowledges the engine's identity, then sends the frames the input describes,
 * each sealed with its channel's keys so that mutations reach repl_data_rx_main (on_write
 * with and without a state record, on_resync_data, on_verify, on_lu_state, on_scsi_state,
 * resize, flush and acks) and repl_ctl_rx_main (on_sync_done, on_verify_reply,
 * on_peer_state, pings, acks, forwarded commands, disconnect), not only the tag check.
 *
 * Input: a flags byte, then frames until the input ends (at most MAX_FRAMES).
 *   flags: bit 0 the "encrypt" engine (else "authenticate"); bit 1 the engine is SyncTarget
 *   (else Connected: in sync, or both disks new); bit 2 no closing flush (the peer leaves
 *   right after its frames); bit 3 a Disconnect before leaving.
 *   frame: an op byte (low 5 bits: which frame, modulo N_OPS; high 3 bits: how it goes:
 *   0-5 sealed as built; 6 skewed: a data frame's seq off by a signed input byte, a control
 *   frame sent on the data channel; 7 mangled, by the next byte: 0 unsealed (no tag),
 *   1 a body bit flipped after sealing, 2 cut short and its channel shut, 3 sealed for and
 *   sent on the other channel), then the op's fields (see the decode_* functions): ranges
 *   in 512-byte blocks, flags, seeds of generated data, or message and payload bytes taken
 *   from the input (the RAW ops: any message type with any protobuf bytes).
 *
 * Checks: no crash, sanitizer report or leak; every handshake and State exchange succeeds
 * (the engine is back to listening before each input, never in a refusal's back-off); the
 * engine either acknowledges the closing flush or drops the connection; an ack never names
 * a seq that was not sent, never covers a frame the engine had to refuse (bad seq, range,
 * payload, kind, record), and carries an error only for a refused resize; a verify reply
 * answers a verify request sent, with exactly the mismatching blocks of the data the engine
 * held at that point; after the input every 512-byte block of the file is what the acked
 * frames made it, or what a later frame sent made it (the engine applies in order and may
 * have applied what it did not acknowledge yet), and likewise every state record; once the
 * link is down the status (repl_for_each_status) has a printable last_error; the engine is
 * Connecting again for the next input.
 *
 * Throughput seen on a 2-core machine, ASan + UBSan: about 105 inputs a second alone
 * (12939 in 120 s), 75 with fuzz_repl_wire beside it (tests/fuzz/run's short mode). Each
 * input is a whole connection: two handshakes, the engine's receiver threads, a 4 MiB file
 * comparison. The engine's manager looks at a dropped link only every 200 ms (between polls
 * of its listening socket): the target wakes it with a connection it closes at once (the
 * engine refuses it as a stray), and never makes the engine refuse a State (that would cost
 * the 5 s back-off of REFUSED_RETRY_MS).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../replicator/repl_internal.h"
#include "../common/repl_peer.h"
#include "fuzz_util.h"

#define LUN_SIZE   (4u * 1024 * 1024)
#define LUN_BS     512u
#define LUN_BLOCKS (LUN_SIZE / LUN_BS)
#define SECRET     "fuzz-apply shared secret"
#define SERIAL     "fuzzapply0000001"
#define TIMEOUT_MS 3000u /* the engine's replication.timeout */
#define WAIT_MS    5000  /* for anything the engine does at once */
#define MAX_FRAMES 64
#define VERIFY_BLK 4096u
#define N_RECORDS  TDM_STATE_RECORDS
#define REC_MAX    TDM_STATE_MAX_BYTES

/* ---- the engines ---- */

struct target {
        struct peer_engine e;
        const char *naa, *iqn;
        int protection;
        uint8_t *model;    /* the file as it must be between inputs */
        int fd;            /* the file, opened once: another run's clean-up may unlink it */
        uint64_t next_gen; /* fresh generation ids the peer takes as sync source */
};

static struct target targets[2] = {
    {.naa = "6001405fa3e1c0de0000000000000001",
     .iqn = "iqn.2024-01.org.tandem:fuzz-apply-auth",
     .protection = TDM_LINK_PROTECT_AUTHENTICATE},
    {.naa = "6001405fa3e1c0de0000000000000002",
     .iqn = "iqn.2024-01.org.tandem:fuzz-apply-enc",
     .protection = TDM_LINK_PROTECT_ENCRYPT},
};

static void targets_remove(void)
{
        for (size_t i = 0; i < 2; i++) {
                struct peer_engine *e = &targets[i].e;
                if (!e->r)
                        continue;
                unlink(e->data_path);
                unlink(e->md_path);
                rmdir(e->dir); /* a state file of persistent records keeps it: run removes it */
        }
}

static void targets_start(void)
{
        for (size_t i = 0; i < 2; i++) {
                struct target *t = &targets[i];
                const struct peer_engine_opts o = {.dir_template =
                                                       "/dev/shm/tandem-fuzz-apply-XXXXXX",
                                                   .iqn = t->iqn,
                                                   .naa = t->naa,
                                                   .serial = SERIAL,
                                                   .secret = SECRET,
                                                   .size_bytes = LUN_SIZE,
                                                   .block_size = LUN_BS,
                                                   .timeout_ms = TIMEOUT_MS,
                                                   .link_protection = t->protection};
                char err[256] = "";
                int rc = peer_engine_start(&t->e, &o, err, sizeof(err));
                FUZZ_ASSERT(rc == 0, "engine start: %d %s", rc, err);
                t->fd = open(t->e.data_path, O_RDONLY | O_CLOEXEC);
                FUZZ_ASSERT(t->fd >= 0, "open %s: %s", t->e.data_path, strerror(errno));
                t->model = calloc(1, LUN_SIZE); /* a new sparse file reads as zeroes */
                FUZZ_ASSERT(t->model != NULL, "out of memory");
                t->next_gen = 0x5eed000000000000ull + i * 0x100000000ull;
        }
        atexit(targets_remove);
}

/* ---- the input ---- */

static uint8_t take_u8(struct fuzz_in *in)
{
        uint8_t v = 0;
        (void)fuzz_take_u8(in, &v);
        return v;
}

static uint16_t take_u16(struct fuzz_in *in)
{
        uint16_t lo = take_u8(in);
        return (uint16_t)(lo | take_u8(in) << 8);
}

static uint64_t take_u64(struct fuzz_in *in)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v |= (uint64_t)take_u8(in) << (8 * i);
        return v;
}

/* Up to n bytes of the input (fewer where it ends); *got says how many. */
static const uint8_t *take_bytes(struct fuzz_in *in, size_t n, size_t *got)
{
        const uint8_t *p = in->p;
        *got = n < in->left ? n : in->left;
        in->p += *got;
        in->left -= *got;
        return p;
}

enum flags {
        F_ENCRYPT = 1 << 0,
        F_SYNC_TARGET = 1 << 1,
        F_NO_PROBE = 1 << 2,
        F_DISCONNECT = 1 << 3,
};

enum how { HOW_SKEW = 6, HOW_MANGLE = 7 };
enum mangle { MANGLE_UNSEALED, MANGLE_BITFLIP, MANGLE_CUT, MANGLE_OTHER_CHANNEL, N_MANGLES };

enum op {
        OP_WRITE,
        OP_ZERO,
        OP_UNMAP,
        OP_WRITE_KIND, /* a Write of any kind */
        OP_FLUSH,
        OP_RS_DATA,
        OP_VERIFY,
        OP_LU_STATE,
        OP_SCSI_STATE,
        OP_RESIZE,
        OP_RAW_DATA, /* any type, message bytes from the input, on the data channel */
        OP_SYNC_DONE,
        OP_VERIFY_REPLY,
        OP_STATE,
        OP_PING,
        OP_PING_ACK,
        OP_ACK,
        OP_DISCONNECT,
        OP_FORWARD,
        OP_FORWARD_REPLY,
        OP_RAW_CTL, /* any type, message bytes from the input, on the control channel */
        OP_SYNC,    /* not a frame: wait for the acks of everything sent so far */
        N_OPS
};

/* ---- one frame on its way ---- */

struct frame {
        uint8_t type;
        bool data_channel;
        uint8_t *msg; /* packed message, malloc'd */
        size_t msg_len;
        uint8_t *payload; /* malloc'd */
        size_t payload_len;
};

static void frame_free(struct frame *f)
{
        free(f->msg);
        free(f->payload);
        memset(f, 0, sizeof(*f));
}

static void frame_pack(struct frame *f, uint8_t type, const ProtobufCMessage *m)
{
        f->type = type;
        f->msg_len = protobuf_c_message_get_packed_size(m);
        f->msg = malloc(f->msg_len ? f->msg_len : 1);
        FUZZ_ASSERT(f->msg != NULL, "out of memory");
        protobuf_c_message_pack(m, f->msg);
}

static void frame_set_payload(struct frame *f, const void *p, size_t len)
{
        f->payload = malloc(len ? len : 1);
        FUZZ_ASSERT(f->payload != NULL, "out of memory");
        if (len)
                memcpy(f->payload, p, len);
        f->payload_len = len;
}

/* Generated data: cheap to describe, different per seed and per block. */
static void fill_pattern(uint8_t *p, size_t len, uint8_t seed)
{
        for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)(seed * 31u + i * 7u + (i >> 9) + 1u);
}

/* A payload of len bytes: from the input when asked (pattern where it ends), else made. */
static void payload_made(struct frame *f, struct fuzz_in *in, size_t len, bool from_input,
                         uint8_t seed)
{
        f->payload = malloc(len ? len : 1);
        FUZZ_ASSERT(f->payload != NULL, "out of memory");
        f->payload_len = len;
        fill_pattern(f->payload, len, seed);
        if (from_input) {
                size_t got;
                const uint8_t *p = take_bytes(in, len, &got);
                memcpy(f->payload, p, got);
        }
}

/* ---- what the peer knows of the input so far ---- */

/* A data-channel frame as the engine must treat it. */
enum effect { FX_NONE, FX_DATA, FX_ZERO };

struct sent {
        uint8_t type;
        bool valid; /* in sequence and well-formed: the engine may acknowledge it */
        bool resize;
        enum effect fx;
        uint64_t off, len;
        const uint8_t *data; /* FX_DATA: into the frame's payload (kept) */
        int record;          /* the state record it sets, -1: none */
        const uint8_t *rec;
        uint8_t *rec_copy; /* a Write's record: the message is freed once judged */
        size_t rec_len;
        /* A verify request: the reply the engine must give. */
        bool verify;
        uint64_t v_off, v_len;
        uint64_t *v_bad;
        size_t n_v_bad;
};

struct record {
        uint8_t *bytes;
        size_t len;
};

struct run {
        struct target *t;
        struct peer_link l;
        struct peer_state ps; /* the State we sent */
        enum repl_decision decision;
        uint8_t flags;
        /* Data-channel frames in the order sent: seq i + 1 is sent[i]. */
        struct sent sent[MAX_FRAMES + 1];
        struct frame kept[MAX_FRAMES + 1]; /* their bytes, for the model */
        size_t n_sent;
        uint8_t *optimistic; /* the file if every frame so far was applied */
        struct record base[N_RECORDS];
        /* What the engine said. */
        struct peer_ctl_seen seen;
        bool data_dead, ctl_dead; /* we can no longer send on it */
        bool closed;              /* the engine closed the control channel */
        uint64_t forwards_sent;
};

static bool range_ok(uint64_t off, uint64_t len)
{
        return off % LUN_BS == 0 && len % LUN_BS == 0 && off <= LUN_SIZE && len <= LUN_SIZE - off;
}

static void judge_write(struct sent *s, const Tandem__Repl__Write *m, size_t payload_len,
                        const uint8_t *payload)
{
        bool data = m->kind == REPL_IO_WRITE;
        bool kind_ok = data || m->kind == REPL_IO_ZERO || m->kind == REPL_IO_UNMAP;
        if (!kind_ok || !range_ok(m->offset, m->length) || payload_len != (data ? m->length : 0))
                s->valid = false;
        if (m->has_state && (m->state_id >= N_RECORDS || !data || m->state.len > REC_MAX))
                s->valid = false;
        if (!s->valid)
                return;
        s->fx = data ? FX_DATA : FX_ZERO; /* an unmapped range of the file reads as zeroes */
        s->off = m->offset;
        s->len = m->length;
        s->data = payload;
        if (m->has_state) {
                s->record = (int)m->state_id;
                s->rec = m->state.data;
                s->rec_len = m->state.len;
        }
}

static void judge_resync(struct sent *s, const Tandem__Repl__ResyncData *m, size_t payload_len,
                         const uint8_t *payload)
{
        if (!range_ok(m->offset, m->length) || payload_len != (m->zero ? 0 : m->length)) {
                s->valid = false;
                return;
        }
        s->fx = m->zero ? FX_ZERO : FX_DATA;
        s->off = m->offset;
        s->len = m->length;
        s->data = payload;
}

static void judge_verify(struct run *run, struct sent *s, const Tandem__Repl__VerifyRequest *m,
                         size_t payload_len, const uint8_t *digests)
{
        if (m->length == 0)
                return; /* the end of a verify run */
        if (m->block_bytes != VERIFY_BLK || !range_ok(m->offset, m->length) ||
            m->length > REPL_VERIFY_CHUNK || m->length % VERIFY_BLK ||
            payload_len != m->length / VERIFY_BLK * 32) {
                s->valid = false;
                return;
        }
        /* The engine reads what every frame before this one made of the file. */
        s->verify = true;
        s->v_off = m->offset;
        s->v_len = m->length;
        s->v_bad = calloc(m->length / VERIFY_BLK + 1, sizeof(uint64_t));
        FUZZ_ASSERT(s->v_bad != NULL, "out of memory");
        for (uint64_t i = 0; i < m->length / VERIFY_BLK; i++) {
                uint8_t d[32];
                SHA256(run->optimistic + m->offset + i * VERIFY_BLK, VERIFY_BLK, d);
                if (memcmp(d, digests + i * 32, 32) != 0)
                        s->v_bad[s->n_v_bad++] = m->offset + i * VERIFY_BLK;
        }
}

static void judge_lu_state(struct sent *s, const Tandem__Repl__LuState *m, size_t payload_len,
                           const uint8_t *payload)
{
        if (m->id >= N_RECORDS || payload_len > REC_MAX) {
                s->valid = false;
                return;
        }
        s->record = (int)m->id;
        s->rec = payload;
        s->rec_len = payload_len;
}

static void judge_scsi_state(struct run *run, struct sent *s, const Tandem__Repl__ScsiState *m)
{
        if ((m->lun_naa && strcasecmp(m->lun_naa, run->t->naa) != 0) ||
            (m->lun_serial && m->lun_serial[0] && strcmp(m->lun_serial, SERIAL) != 0))
                s->valid = false;
}

/*
 * Records a data-channel frame at seq run->n_sent + 1 as the engine must judge it: the
 * message decoded as the engine decodes it (whether the input built it or gave its bytes).
 */
static struct sent *judge(struct run *run, struct frame *f)
{
        struct sent *s = &run->sent[run->n_sent];
        *s = (struct sent){.type = f->type, .valid = true, .record = -1};
        uint64_t seq = run->n_sent + 1;
        const ProtobufCMessageDescriptor *d = repl_msg_descriptor(f->type);
        ProtobufCMessage *m = d ? protobuf_c_message_unpack(d, NULL, f->msg_len, f->msg) : NULL;
        const uint64_t *mseq = m ? repl_msg_seq(f->type, m) : NULL;
        if (!mseq || *mseq != seq)
                s->valid = false;
        else if (f->msg_len > REPL_MSG_MAX || f->payload_len > REPL_PAYLOAD_MAX)
                s->valid = false;
        else if (f->type == TANDEM__REPL__MSG_TYPE__MSG_WRITE)
                judge_write(s, (const Tandem__Repl__Write *)m, f->payload_len, f->payload);
        else if (f->type == TANDEM__REPL__MSG_TYPE__MSG_RS_DATA)
                judge_resync(s, (const Tandem__Repl__ResyncData *)m, f->payload_len, f->payload);
        else if (f->type == TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REQ)
                judge_verify(run, s, (const Tandem__Repl__VerifyRequest *)m, f->payload_len,
                             f->payload);
        else if (f->type == TANDEM__REPL__MSG_TYPE__MSG_LU_STATE)
                judge_lu_state(s, (const Tandem__Repl__LuState *)m, f->payload_len, f->payload);
        else if (f->type == TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE)
                judge_scsi_state(run, s, (const Tandem__Repl__ScsiState *)m);
        else if (f->type == TANDEM__REPL__MSG_TYPE__MSG_RESIZE)
                s->resize = true;
        else if (f->type != TANDEM__REPL__MSG_TYPE__MSG_FLUSH)
                s->valid = false;
        /* A payload of a message that has none is read with its sealed frame and ignored. */
        /* The record's bytes live in the message: keep a copy with the frame. */
        if (s->record >= 0 && f->type == TANDEM__REPL__MSG_TYPE__MSG_WRITE) {
                s->rec_copy = malloc(s->rec_len ? s->rec_len : 1);
                FUZZ_ASSERT(s->rec_copy != NULL, "out of memory");
                if (s->rec_len)
                        memcpy(s->rec_copy, s->rec, s->rec_len);
                s->rec = s->rec_copy;
        }
        if (m)
                protobuf_c_message_free_unpacked(m, NULL);
        if (s->fx == FX_DATA)
                memcpy(run->optimistic + s->off, s->data, s->len);
        else if (s->fx == FX_ZERO)
                memset(run->optimistic + s->off, 0, s->len);
        return s;
}

static void sent_free(struct run *run)
{
        for (size_t i = 0; i < run->n_sent; i++) {
                struct sent *s = &run->sent[i];
                free(s->rec_copy);
                free(s->v_bad);
                frame_free(&run->kept[i]);
        }
        run->n_sent = 0;
}

/* ---- building the frames from the input ---- */

struct range_fields {
        uint64_t off;
        uint32_t len;
        uint8_t flags, seed;
};

enum range_flag {
        R_FUA = 1 << 0,
        R_UNALIGNED_OFF = 1 << 1,
        R_UNALIGNED_LEN = 1 << 2,
        R_PAYLOAD_OFF = 1 << 3, /* payload length not what the kind wants */
        R_STATE = 1 << 4,
        R_FROM_INPUT = 1 << 5,
        R_BIG_STATE = 1 << 6,
        R_ZERO = 1 << 7, /* resync data: a zero range */
};

/* An offset and length in blocks: mostly inside the LUN, sometimes at or past its end. */
static struct range_fields decode_range(struct fuzz_in *in)
{
        struct range_fields r;
        r.off = (uint64_t)(take_u16(in) % (LUN_BLOCKS + 16)) * LUN_BS;
        r.len = (uint32_t)take_u8(in) * LUN_BS;
        r.flags = take_u8(in);
        r.seed = take_u8(in);
        if (r.flags & R_UNALIGNED_OFF)
                r.off += 1 + take_u8(in) % (LUN_BS - 1);
        if (r.flags & R_UNALIGNED_LEN)
                r.len -= r.len ? 1 + take_u8(in) % (LUN_BS - 1) : 0;
        return r;
}

static size_t payload_len_for(const struct range_fields *r, bool wants_data)
{
        size_t want = wants_data ? r->len : 0;
        if (!(r->flags & R_PAYLOAD_OFF))
                return want;
        return want >= LUN_BS ? want - LUN_BS : want + LUN_BS;
}

static void decode_write(struct frame *f, struct fuzz_in *in, uint32_t kind)
{
        struct range_fields r = decode_range(in);
        Tandem__Repl__Write m = TANDEM__REPL__WRITE__INIT;
        m.offset = r.off;
        m.length = r.len;
        m.kind = kind;
        m.fua = r.flags & R_FUA;
        uint8_t *state = NULL;
        if (r.flags & R_STATE) {
                m.has_state = true;
                m.state_id = take_u8(in) % (N_RECORDS + 2);
                size_t len = r.flags & R_BIG_STATE ? REC_MAX + 1 : (size_t)take_u8(in) * 16;
                state = malloc(len ? len : 1);
                FUZZ_ASSERT(state != NULL, "out of memory");
                fill_pattern(state, len, (uint8_t)(r.seed ^ 0x5a));
                m.state.data = state;
                m.state.len = len;
        }
        /* The seq goes in when the frame is sent (skewed or not). */
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_WRITE, &m.base);
        free(state);
        payload_made(f, in, payload_len_for(&r, kind == REPL_IO_WRITE), r.flags & R_FROM_INPUT,
                     r.seed);
}

static void decode_resync(struct frame *f, struct fuzz_in *in)
{
        struct range_fields r = decode_range(in);
        Tandem__Repl__ResyncData m = TANDEM__REPL__RESYNC_DATA__INIT;
        m.offset = r.off;
        m.length = r.len;
        m.zero = r.flags & R_ZERO;
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_RS_DATA, &m.base);
        payload_made(f, in, payload_len_for(&r, !m.zero), r.flags & R_FROM_INPUT, r.seed);
}

enum verify_flag {
        V_BLOCK_BYTES = 1 << 0, /* block_bytes from the input */
        V_DIGESTS_FROM_INPUT = 1 << 1,
        V_CORRUPT = 1 << 2, /* one digest wrong */
        V_SHORT = 1 << 3,   /* one digest missing */
};

/* Digests of what the engine should hold (run->optimistic), or the input's. */
static void decode_verify(struct run *run, struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__VerifyRequest m = TANDEM__REPL__VERIFY_REQUEST__INIT;
        m.offset = (uint64_t)(take_u16(in) % (LUN_SIZE / VERIFY_BLK + 4)) * VERIFY_BLK;
        uint32_t blocks = take_u16(in) % (REPL_VERIFY_CHUNK / VERIFY_BLK + 2);
        m.length = blocks * VERIFY_BLK;
        uint8_t vf = take_u8(in);
        uint8_t corrupt = take_u8(in);
        m.block_bytes = vf & V_BLOCK_BYTES ? take_u16(in) : VERIFY_BLK;
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REQ, &m.base);
        size_t len = (size_t)blocks * 32;
        uint8_t *d = calloc(1, len + 32);
        FUZZ_ASSERT(d != NULL, "out of memory");
        for (uint32_t i = 0; i < blocks; i++) {
                uint64_t at = m.offset + (uint64_t)i * VERIFY_BLK;
                if (at + VERIFY_BLK <= LUN_SIZE)
                        SHA256(run->optimistic + at, VERIFY_BLK, d + (size_t)i * 32);
        }
        if (vf & V_DIGESTS_FROM_INPUT) {
                size_t got;
                const uint8_t *p = take_bytes(in, len, &got);
                memcpy(d, p, got);
        }
        if ((vf & V_CORRUPT) && blocks)
                d[(corrupt % blocks) * 32] ^= 0x80;
        frame_set_payload(f, d, vf & V_SHORT && len ? len - 32 : len);
        free(d);
}

enum lu_flag { L_PERSIST = 1 << 0, L_LAST = 1 << 1, L_BIG = 1 << 2, L_FROM_INPUT = 1 << 3 };

static void decode_lu_state(struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__LuState m = TANDEM__REPL__LU_STATE__INIT;
        m.id = take_u8(in) % (N_RECORDS + 2);
        uint8_t lf = take_u8(in);
        m.persist = lf & L_PERSIST;
        m.last_of_set = lf & L_LAST;
        size_t len = lf & L_BIG ? REC_MAX + 1 : take_u16(in) % 4097;
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_LU_STATE, &m.base);
        payload_made(f, in, len, lf & L_FROM_INPUT, take_u8(in));
}

static void decode_scsi_state(struct run *run, struct frame *f, struct fuzz_in *in)
{
        static const char *const other_naa = "6001405fa3e1c0de00000000000000ff";
        char upper[40];
        snprintf(upper, sizeof(upper), "%s", run->t->naa);
        for (char *c = upper; *c; c++)
                *c = (char)toupper((unsigned char)*c);
        const char *naas[] = {run->t->naa, upper, other_naa, ""};
        const char *serials[] = {SERIAL, "", "someotherserial1"};
        Tandem__Repl__ScsiState m = TANDEM__REPL__SCSI_STATE__INIT;
        m.role = take_u8(in) % 3;
        m.lun_naa = (char *)naas[take_u8(in) % 4];
        m.lun_serial = (char *)serials[take_u8(in) % 3];
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_SCSI_STATE, &m.base);
}

/* Sizes the engine refuses or keeps: never a growth (that would outgrow the model). */
static void decode_resize(struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__Resize m = TANDEM__REPL__RESIZE__INIT;
        uint8_t how = take_u8(in);
        uint64_t k = take_u8(in) + 1u;
        switch (how % 4) {
        case 0:
                m.size_bytes = LUN_SIZE;
                break;
        case 1:
                m.size_bytes = LUN_SIZE - k * LUN_BS;
                break;
        case 2:
                m.size_bytes = LUN_SIZE + k % LUN_BS;
                break;
        default:
                m.size_bytes = 0;
        }
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_RESIZE, &m.base);
}

/* Any type, message bytes and payload length from the input. */
static void decode_raw(struct frame *f, struct fuzz_in *in, bool data_channel)
{
        f->type = take_u8(in);
        size_t n;
        const uint8_t *p = take_bytes(in, take_u8(in), &n);
        f->msg = malloc(n ? n : 1);
        FUZZ_ASSERT(f->msg != NULL, "out of memory");
        memcpy(f->msg, p, n);
        f->msg_len = n;
        size_t plen = data_channel ? take_u16(in) % 8193 : take_u8(in) % 65;
        payload_made(f, in, plen, false, take_u8(in));
}

/* Frames the target does not send: a Resize that would grow the LUN (the model is 4 MiB). */
static bool not_sent(const struct frame *f)
{
        bool skip = false;
        if (f->type == TANDEM__REPL__MSG_TYPE__MSG_RESIZE) {
                Tandem__Repl__Resize *m = tandem__repl__resize__unpack(NULL, f->msg_len, f->msg);
                skip = m && m->size_bytes > LUN_SIZE && m->size_bytes % LUN_BS == 0;
                if (m)
                        tandem__repl__resize__free_unpacked(m, NULL);
        }
        return skip;
}

static void generations_from_input(Tandem__Repl__Generations *g, uint64_t hist[2],
                                   const struct run *run, struct fuzz_in *in)
{
        tandem__repl__generations__init(g);
        uint8_t how = take_u8(in);
        hist[0] = run->ps.gen.history[0];
        hist[1] = run->ps.gen.history[1];
        g->current = run->ps.gen.current;
        switch (how % 5) {
        case 1:
                g->current = take_u64(in);
                hist[0] = take_u64(in);
                break;
        case 2:
                g->current = 0;
                break;
        case 3:
                g->current = REPL_GEN_JUST_CREATED;
                break;
        case 4:
                g->bitmap = take_u64(in);
                break;
        default:
                break;
        }
        g->history = hist;
        g->n_history = how & 0x80 ? 1 : 2;
}

static void decode_sync_done(struct run *run, struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__SyncDone m = TANDEM__REPL__SYNC_DONE__INIT;
        Tandem__Repl__Generations g;
        uint64_t hist[2];
        if (take_u8(in) & 1) {
                generations_from_input(&g, hist, run, in);
                m.gen = &g;
        }
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_SYNC_DONE, &m.base);
}

static void decode_verify_reply(struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__VerifyReply m = TANDEM__REPL__VERIFY_REPLY__INIT;
        uint64_t offs[16];
        m.seq = take_u8(in);
        m.offset = (uint64_t)take_u16(in) * VERIFY_BLK;
        m.length = VERIFY_BLK * 16;
        m.n_mismatch_offsets = take_u8(in) % 17;
        for (size_t i = 0; i < m.n_mismatch_offsets; i++)
                offs[i] = (uint64_t)take_u16(in) * VERIFY_BLK;
        m.mismatch_offsets = offs;
        m.error = (int8_t)take_u8(in);
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REPLY, &m.base);
}

static void decode_state(struct run *run, struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__State m = TANDEM__REPL__STATE__INIT;
        Tandem__Repl__Generations g;
        uint64_t hist[2];
        m.role = take_u8(in) % 3;
        m.disk = take_u8(in) % 5;
        m.size_bytes = take_u8(in) & 1 ? LUN_SIZE * 2ull : LUN_SIZE;
        m.block_size = LUN_BS;
        m.lun_naa = (char *)run->t->naa;
        m.lun_serial = (char *)SERIAL;
        m.node_name = (char *)"node1";
        m.dirty_bits = take_u8(in);
        m.want_discard = m.dirty_bits & 0x80;
        m.lu_state_valid = true;
        generations_from_input(&g, hist, run, in);
        m.gen = &g;
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_STATE, &m.base);
}

static void decode_ping(struct frame *f, struct fuzz_in *in, uint8_t type)
{
        Tandem__Repl__Ping m = TANDEM__REPL__PING__INIT;
        m.token = take_u64(in);
        frame_pack(f, type, &m.base);
}

static void decode_ack(struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__Ack m = TANDEM__REPL__ACK__INIT;
        m.seq = take_u8(in);
        m.error = (int8_t)take_u8(in);
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_ACK, &m.base);
}

/* The reason is the input's bytes, cut at the first NUL (a string on the wire). */
static void decode_disconnect(struct frame *f, struct fuzz_in *in)
{
        char reason[256];
        size_t n;
        const uint8_t *p = take_bytes(in, take_u8(in), &n);
        memcpy(reason, p, n);
        reason[n] = '\0';
        Tandem__Repl__Disconnect m = TANDEM__REPL__DISCONNECT__INIT;
        m.reason = reason;
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT, &m.base);
}

static void decode_forward(struct run *run, struct frame *f, struct fuzz_in *in)
{
        char name[256];
        uint8_t cdb[32], param[512];
        Tandem__Repl__Forward m = TANDEM__REPL__FORWARD__INIT;
        m.id = ++run->forwards_sent;
        size_t n;
        const uint8_t *p = take_bytes(in, take_u8(in) % 200, &n);
        memcpy(name, p, n);
        name[n] = '\0';
        m.port_name = name;
        p = take_bytes(in, take_u8(in) % 20, &n);
        memcpy(cdb, p, n);
        m.cdb.data = cdb;
        m.cdb.len = n;
        p = take_bytes(in, take_u16(in) % sizeof(param), &n);
        memcpy(param, p, n);
        m.param.data = param;
        m.param.len = n;
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_FORWARD, &m.base);
}

static void decode_forward_reply(struct frame *f, struct fuzz_in *in)
{
        Tandem__Repl__ForwardReply m = TANDEM__REPL__FORWARD_REPLY__INIT;
        m.id = take_u8(in);
        m.status = take_u8(in);
        m.field_valid = m.status & 1;
        m.field_bit = (int8_t)take_u8(in);
        frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_FORWARD_REPLY, &m.base);
}

/* The frame op describes; false for OP_SYNC (no frame). */
static bool decode_frame(struct run *run, enum op op, struct frame *f, struct fuzz_in *in)
{
        memset(f, 0, sizeof(*f));
        f->data_channel = op <= OP_RAW_DATA;
        switch (op) {
        case OP_WRITE:
                decode_write(f, in, REPL_IO_WRITE);
                break;
        case OP_ZERO:
                decode_write(f, in, REPL_IO_ZERO);
                break;
        case OP_UNMAP:
                decode_write(f, in, REPL_IO_UNMAP);
                break;
        case OP_WRITE_KIND:
                decode_write(f, in, take_u8(in));
                break;
        case OP_FLUSH: {
                Tandem__Repl__Flush m = TANDEM__REPL__FLUSH__INIT;
                frame_pack(f, TANDEM__REPL__MSG_TYPE__MSG_FLUSH, &m.base);
                break;
        }
        case OP_RS_DATA:
                decode_resync(f, in);
                break;
        case OP_VERIFY:
                decode_verify(run, f, in);
                break;
        case OP_LU_STATE:
                decode_lu_state(f, in);
                break;
        case OP_SCSI_STATE:
                decode_scsi_state(run, f, in);
                break;
        case OP_RESIZE:
                decode_resize(f, in);
                break;
        case OP_RAW_DATA:
                decode_raw(f, in, true);
                break;
        case OP_SYNC_DONE:
                decode_sync_done(run, f, in);
                break;
        case OP_VERIFY_REPLY:
                decode_verify_reply(f, in);
                break;
        case OP_STATE:
                decode_state(run, f, in);
                break;
        case OP_PING:
                decode_ping(f, in, TANDEM__REPL__MSG_TYPE__MSG_PING);
                break;
        case OP_PING_ACK:
                decode_ping(f, in, TANDEM__REPL__MSG_TYPE__MSG_PING_ACK);
                break;
        case OP_ACK:
                decode_ack(f, in);
                break;
        case OP_DISCONNECT:
                decode_disconnect(f, in);
                break;
        case OP_FORWARD:
                decode_forward(run, f, in);
                break;
        case OP_FORWARD_REPLY:
                decode_forward_reply(f, in);
                break;
        case OP_RAW_CTL:
                decode_raw(f, in, false);
                break;
        default:
                return false;
        }
        return true;
}

/* The data frame's seq: its place in the sequence, or off by a signed input byte. */
static void frame_set_seq(struct frame *f, uint64_t seq)
{
        const ProtobufCMessageDescriptor *d = repl_msg_descriptor(f->type);
        ProtobufCMessage *m = d ? protobuf_c_message_unpack(d, NULL, f->msg_len, f->msg) : NULL;
        uint64_t *mseq = m ? repl_msg_seq(f->type, m) : NULL;
        if (mseq) {
                *mseq = seq;
                free(f->msg);
                frame_pack(f, f->type, m);
        }
        if (m)
                protobuf_c_message_free_unpacked(m, NULL);
}

/* ---- the wire ---- */

/*
 * Header, message, payload and tag in one buffer, sealed with the channel's keys (or not,
 * or spoiled after sealing), then written whole or cut short. False when nothing more can
 * be sent on that channel.
 */
static bool frame_send(struct run *run, const struct frame *f, bool on_data, int mangle)
{
        int fd = on_data ? run->l.data_fd : run->l.ctl_fd;
        struct frame_seal *seal = on_data ? &run->l.data_seal : &run->l.ctl_seal;
        size_t body = f->msg_len + f->payload_len;
        size_t len = REPL_FRAME_HDR_LEN + body + FRAME_TAG_LEN;
        uint8_t *buf = calloc(1, len);
        FUZZ_ASSERT(buf != NULL, "out of memory");
        repl_frame_encode(buf, f->type, (uint32_t)f->msg_len, (uint32_t)f->payload_len);
        memcpy(buf + REPL_FRAME_HDR_LEN, f->msg, f->msg_len);
        if (f->payload_len)
                memcpy(buf + REPL_FRAME_HDR_LEN + f->msg_len, f->payload, f->payload_len);
        if (mangle != MANGLE_UNSEALED)
                FUZZ_ASSERT(peer_seal_frame(seal, buf, len - FRAME_TAG_LEN) == 0, "sealing failed");
        if (mangle == MANGLE_BITFLIP)
                buf[body ? REPL_FRAME_HDR_LEN + body / 2 : len - 1] ^= 0x10;
        size_t out = mangle == MANGLE_CUT ? len / 2 : len;
        int rc = repl_write_full(fd, buf, out, WAIT_MS);
        free(buf);
        if (mangle == MANGLE_CUT)
                shutdown(fd, SHUT_WR);
        return rc == 0 && mangle < 0;
}

/* ---- what the engine says ---- */

static void check_ack(struct run *run, const Tandem__Repl__Ack *a)
{
        uint64_t sent = run->n_sent;
        FUZZ_ASSERT(a->seq <= sent, "ack of seq %llu, only %llu sent", (unsigned long long)a->seq,
                    (unsigned long long)sent);
        FUZZ_ASSERT(a->seq >= run->seen.max_ack || a->error, "ack of %llu after an ack of %llu",
                    (unsigned long long)a->seq, (unsigned long long)run->seen.max_ack);
        for (uint64_t i = run->seen.max_ack; i < a->seq; i++)
                FUZZ_ASSERT(run->sent[i].valid, "ack %llu covers seq %llu (%s), which is not good",
                            (unsigned long long)a->seq, (unsigned long long)i + 1,
                            repl_msg_name(run->sent[i].type));
        if (a->error) {
                FUZZ_ASSERT(a->seq > 0, "ack of seq 0 with error %d", a->error);
                const struct sent *s = &run->sent[a->seq - 1];
                FUZZ_ASSERT(s->resize,
                            "ack of seq %llu (%s) with error %d: this node's disk is fine",
                            (unsigned long long)a->seq, repl_msg_name(s->type), a->error);
        }
}

static void check_verify_reply(struct run *run, const Tandem__Repl__VerifyReply *m)
{
        FUZZ_ASSERT(m->seq >= 1 && m->seq <= run->n_sent && run->sent[m->seq - 1].verify,
                    "verify reply for seq %llu, which is no verify request",
                    (unsigned long long)m->seq);
        const struct sent *s = &run->sent[m->seq - 1];
        FUZZ_ASSERT(m->offset == s->v_off && m->length == s->v_len && m->error == 0,
                    "verify reply %llu+%u error %d for the request %llu+%llu",
                    (unsigned long long)m->offset, m->length, m->error,
                    (unsigned long long)s->v_off, (unsigned long long)s->v_len);
        FUZZ_ASSERT(m->n_mismatch_offsets == s->n_v_bad,
                    "verify of %llu+%llu: %zu blocks differ, the engine says %zu",
                    (unsigned long long)s->v_off, (unsigned long long)s->v_len, s->n_v_bad,
                    m->n_mismatch_offsets);
        for (size_t i = 0; i < s->n_v_bad; i++)
                FUZZ_ASSERT(m->mismatch_offsets[i] == s->v_bad[i],
                            "verify: mismatch %zu at %llu, expected %llu", i,
                            (unsigned long long)m->mismatch_offsets[i],
                            (unsigned long long)s->v_bad[i]);
}

/* One message from the engine's control channel. */
static void take_ctl(struct run *run, const struct repl_rx *rx)
{
        FUZZ_ASSERT(rx->f.payload_len == 0, "%s with a payload", repl_msg_name(rx->f.type));
        if (rx->f.type == TANDEM__REPL__MSG_TYPE__MSG_ACK)
                check_ack(run, (const Tandem__Repl__Ack *)rx->msg);
        if (peer_ctl_take(&run->l, &run->seen, rx, !run->ctl_dead, WAIT_MS))
                return;
        switch (rx->f.type) {
        case TANDEM__REPL__MSG_TYPE__MSG_VERIFY_REPLY:
                check_verify_reply(run, (const Tandem__Repl__VerifyReply *)rx->msg);
                break;
        case TANDEM__REPL__MSG_TYPE__MSG_FORWARD_REPLY: {
                const Tandem__Repl__ForwardReply *m = (const Tandem__Repl__ForwardReply *)rx->msg;
                FUZZ_ASSERT(m->id >= 1 && m->id <= run->forwards_sent,
                            "answer to forwarded command %llu, never sent",
                            (unsigned long long)m->id);
                break;
        }
        case TANDEM__REPL__MSG_TYPE__MSG_PING_ACK:
                break;
        default:
                FUZZ_ASSERT(false, "the engine sent %s on the control channel",
                            repl_msg_name(rx->f.type));
        }
        run->seen.unexpected[0] = '\0';
}

/* Reads the control channel until the ack of seq, the engine closed it, or the deadline. */
static void read_ctl_until(struct run *run, uint64_t seq, int timeout_ms)
{
        int64_t end = peer_mono_ms() + timeout_ms;
        while (!run->closed && run->seen.max_ack < seq) {
                int64_t left = end - peer_mono_ms();
                if (left <= 0)
                        return;
                struct repl_rx rx;
                const char *why = NULL;
                int rc = repl_recv_on(run->l.ctl_fd, &run->l.ctl_open, &rx, (int)left, &why);
                if (rc == -ETIMEDOUT)
                        return;
                if (rc < 0) {
                        FUZZ_ASSERT(rc == -ECONNRESET, "control channel: %d %s", rc,
                                    why ? why : "");
                        run->closed = true;
                        return;
                }
                take_ctl(run, &rx);
                repl_rx_free(&rx);
        }
}

/* ---- connecting ---- */

static void engine_status(const struct target *t, struct repl_status *st)
{
        FUZZ_ASSERT(peer_engine_status(&t->e, st) == 0, "the engine is not listed");
}

/*
 * Before dialling: an engine that left the pair (a failed disk) is told to connect again,
 * and one whose generation is 0 (a SyncDone said so) to take the peer's data: no State of
 * ours could match it, and a refusal would cost a 5 s back-off.
 */
static void engine_ready(struct target *t)
{
        struct repl_status st;
        engine_status(t, &st);
        char err[256] = "";
        if (st.conn == REPL_CONN_STANDALONE)
                FUZZ_ASSERT(repl_admin_connect(t->iqn, 0, err, sizeof(err)) == 0, "connect: %s",
                            err);
        if (st.gen_current == 0)
                FUZZ_ASSERT(repl_admin_invalidate(t->iqn, 0, err, sizeof(err)) == 0,
                            "invalidate: %s", err);
}

static bool gen_known(const Tandem__Repl__State *s, uint64_t id)
{
        const Tandem__Repl__Generations *g = s->gen;
        if (!g || id == g->current || id == g->bitmap)
                return true;
        for (size_t i = 0; i < g->n_history; i++)
                if (g->history[i] == id)
                        return true;
        return false;
}

static void side_from_state(const Tandem__Repl__State *m, struct repl_side *s, uint32_t node)
{
        *s = (struct repl_side){.disk = (enum repl_disk_state)m->disk,
                                .role = (enum repl_role)m->role,
                                .crashed_primary = m->crashed_primary,
                                .dirty_bits = m->dirty_bits,
                                .promote_epoch = m->promote_epoch,
                                .node_id = node,
                                .want_discard = m->want_discard};
        if (m->gen) {
                s->gen.current = m->gen->current;
                s->gen.bitmap = m->gen->bitmap;
                for (size_t i = 0; i < m->gen->n_history && i < 2; i++)
                        s->gen.history[i] = m->gen->history[i];
        }
}

/*
 * Our State from the engine's: its generations (Connected: in sync, both new, or a bitmap
 * resync when it has dirty bits), or a fresh one with its current in our history (we are
 * the source of a full resync). The engine's decision follows from genid.h's rules.
 */
static void choose_state(struct run *run, const Tandem__Repl__State *es)
{
        struct target *t = run->t;
        struct peer_state *ps = &run->ps;
        *ps = (struct peer_state){.size_bytes = LUN_SIZE,
                                  .block_size = LUN_BS,
                                  .naa = t->naa,
                                  .serial = SERIAL,
                                  .node_name = "node1",
                                  .role = REPL_ROLE_PRIMARY,
                                  .disk = REPL_DISK_UPTODATE,
                                  .lu_state_valid = true};
        struct repl_side self, peer;
        side_from_state(es, &self, ENGINE_NODE);
        if (run->flags & F_SYNC_TARGET) {
                do
                        t->next_gen++;
                while (t->next_gen == REPL_GEN_JUST_CREATED || gen_known(es, t->next_gen));
                ps->gen.current = t->next_gen;
                ps->gen.history[0] = self.gen.current;
        } else {
                ps->gen = self.gen;
        }
        peer = (struct repl_side){
            .gen = ps->gen, .disk = ps->disk, .role = ps->role, .node_id = PEER_NODE};
        const char *why = "";
        enum repl_decision d = repl_gen_decide(&self, &peer, &why);
        /* repl_conn.c decide(): the same generation, but this disk Inconsistent. */
        if (d == REPL_DECIDE_IN_SYNC && self.disk == REPL_DISK_INCONSISTENT)
                d = REPL_DECIDE_TARGET_FULL;
        FUZZ_ASSERT(d == REPL_DECIDE_IN_SYNC || d == REPL_DECIDE_BOTH_NEW ||
                        d == REPL_DECIDE_TARGET_FULL || d == REPL_DECIDE_TARGET_BITMAP,
                    "no State of ours fits the engine's: %s (%s); current %llx",
                    repl_decision_name(d), why, (unsigned long long)self.gen.current);
        run->decision = d;
}

/* Both channels, both States (and bitmaps), the engine's identity acknowledged. */
static void link_up(struct run *run)
{
        struct target *t = run->t;
        const struct peer_hs hs = {PEER_NODE,
                                   ENGINE_NODE,
                                   SECRET,
                                   t->naa,
                                   t->protection,
                                   REPL_FEATURE_VERIFY_SHA256 | REPL_FEATURE_FORWARD |
                                       REPL_FEATURE_RESIZE | REPL_FEATURE_WRITE_STATE};
        char why[256] = "";
        int rc = peer_link_open(&run->l, t->e.port, &hs, WAIT_MS, why, sizeof(why));
        FUZZ_ASSERT(rc == 0, "handshake: %d %s", rc, why);
        struct repl_rx rx;
        const char *w = NULL;
        rc = peer_recv_state(&run->l, &rx, WAIT_MS, &w);
        FUZZ_ASSERT(rc == 0, "engine state: %d %s", rc, w ? w : "");
        choose_state(run, (const Tandem__Repl__State *)rx.msg);
        repl_rx_free(&rx);
        FUZZ_ASSERT(peer_send_state(&run->l, &run->ps, WAIT_MS) == 0, "sending our state");
        if (run->decision == REPL_DECIDE_TARGET_BITMAP) {
                rc = peer_exchange_bitmaps(&run->l, WAIT_MS, &w);
                FUZZ_ASSERT(rc == 0, "bitmaps: %d %s", rc, w ? w : "");
        }
        rc = peer_ack_engine_identity(&run->l, t->naa, WAIT_MS, &w);
        FUZZ_ASSERT(rc == 0, "engine identity: %d %s", rc, w ? w : "");
}

/* ---- after the input ---- */

static bool link_is_up(struct repl_lun *r)
{
        pthread_mutex_lock(&r->lock);
        bool up = r->link_up;
        pthread_mutex_unlock(&r->lock);
        return up;
}

/* last_error is printable, the peer's Disconnect reason in it too. */
static void check_printable(const char *s)
{
        FUZZ_ASSERT(s[0] != '\0', "no last_error after the link went down");
        for (const unsigned char *c = (const unsigned char *)s; *c; c++)
                FUZZ_ASSERT(*c >= 0x20 && *c != 0x7f, "last_error has byte 0x%02x: \"%s\"", *c, s);
}

/*
 * Our side closed: the engine notices, says why in its status, and is back to accepting.
 * Its manager looks at the link only every 200 ms, between polls of the listening socket: a
 * connection that we close at once wakes it sooner (it refuses it as a stray).
 */
static void wait_engine_idle(struct run *run)
{
        struct target *t = run->t;
        int64_t end = peer_mono_ms() + WAIT_MS;
        while (link_is_up(t->e.r)) {
                FUZZ_ASSERT(peer_mono_ms() < end, "the engine did not notice the peer leave");
                peer_nap_ms(1);
        }
        struct repl_status st;
        engine_status(t, &st);
        check_printable(st.last_error);
        if (fuzz_verbose())
                fprintf(stderr, "fuzz_repl_apply: %s, acked %llu of %zu: %s\n",
                        repl_conn_name(st.conn), (unsigned long long)run->seen.max_ack, run->n_sent,
                        st.last_error);
        int fd = -1;
        if (peer_dial(t->e.port, 0, &fd) == 0)
                close(fd);
        bool failed_disk = run->seen.ack_error && !run->sent[run->seen.ack_error_seq - 1].resize;
        int want = failed_disk ? REPL_CONN_STANDALONE : REPL_CONN_CONNECTING;
        FUZZ_ASSERT(peer_engine_wait(&t->e, want, NULL, WAIT_MS, &st),
                    "the engine is %s after the peer left, not %s (%s)", repl_conn_name(st.conn),
                    repl_conn_name((enum repl_conn_state)want), st.last_error);
}

static void apply_fx(uint8_t *img, const struct sent *s)
{
        if (s->fx == FX_DATA)
                memcpy(img + s->off, s->data, s->len);
        else if (s->fx == FX_ZERO)
                memset(img + s->off, 0, s->len);
}

/*
 * The file now: every block as the acked frames left it, or as a later frame sent made it
 * (applied in order, not acknowledged yet when the link went down).
 */
static void check_file(struct run *run)
{
        static uint8_t now[LUN_SIZE], expect[LUN_SIZE];
        static bool ok[LUN_BLOCKS];
        struct target *t = run->t;
        ssize_t n = pread(t->fd, now, LUN_SIZE, 0);
        FUZZ_ASSERT(n == (ssize_t)LUN_SIZE, "reading the file: %zd %s", n, strerror(errno));
        memcpy(expect, t->model, LUN_SIZE);
        uint64_t acked = run->seen.max_ack;
        for (uint64_t i = 0; i < acked; i++)
                apply_fx(expect, &run->sent[i]);
        for (size_t b = 0; b < LUN_BLOCKS; b++)
                ok[b] = memcmp(now + b * LUN_BS, expect + b * LUN_BS, LUN_BS) == 0;
        for (uint64_t i = acked; i < run->n_sent; i++) {
                const struct sent *s = &run->sent[i];
                if (s->fx == FX_NONE)
                        continue;
                apply_fx(expect, s);
                for (uint64_t b = s->off / LUN_BS; b < (s->off + s->len) / LUN_BS; b++)
                        ok[b] = ok[b] || memcmp(now + b * LUN_BS, expect + b * LUN_BS, LUN_BS) == 0;
        }
        for (size_t b = 0; b < LUN_BLOCKS; b++)
                FUZZ_ASSERT(ok[b],
                            "block %zu (byte %zu) is none of what the frames made it (%llu "
                            "of %zu acked)",
                            b, b * LUN_BS, (unsigned long long)acked, run->n_sent);
        memcpy(t->model, now, LUN_SIZE);
}

static bool record_is(const struct record *now, const uint8_t *p, size_t len)
{
        return now->len == len && (len == 0 || memcmp(now->bytes, p, len) == 0);
}

static void records_read(struct target *t, struct record rec[N_RECORDS])
{
        for (unsigned id = 0; id < N_RECORDS; id++) {
                rec[id].bytes = malloc(REC_MAX);
                FUZZ_ASSERT(rec[id].bytes != NULL, "out of memory");
                rec[id].len =
                    tdm_medium_state_get(repl_lun_medium(t->e.r), id, rec[id].bytes, REC_MAX, NULL);
        }
}

static void records_free(struct record rec[N_RECORDS])
{
        for (unsigned id = 0; id < N_RECORDS; id++)
                free(rec[id].bytes);
}

/* Each state record likewise: as the last acked frame set it, or a later one. */
static void check_records(struct run *run)
{
        struct record now[N_RECORDS];
        records_read(run->t, now);
        for (unsigned id = 0; id < N_RECORDS; id++) {
                const uint8_t *p = run->base[id].bytes;
                size_t len = run->base[id].len;
                for (uint64_t i = 0; i < run->seen.max_ack; i++)
                        if (run->sent[i].record == (int)id) {
                                p = run->sent[i].rec;
                                len = run->sent[i].rec_len;
                        }
                bool ok = record_is(&now[id], p, len);
                for (uint64_t i = run->seen.max_ack; i < run->n_sent && !ok; i++)
                        if (run->sent[i].record == (int)id)
                                ok = record_is(&now[id], run->sent[i].rec, run->sent[i].rec_len);
                FUZZ_ASSERT(ok, "state record %u holds %zu bytes that no frame left there", id,
                            now[id].len);
        }
        records_free(now);
}

/* ---- one input ---- */

/* The input's frames; stops early when the link is unusable. */
static void send_frames(struct run *run, struct fuzz_in *in)
{
        size_t n_frames = 0;
        uint8_t opb;
        while (n_frames < MAX_FRAMES && !run->data_dead && fuzz_take_u8(in, &opb)) {
                enum op op = (enum op)((opb & 0x1f) % N_OPS);
                unsigned how = opb >> 5;
                int8_t skew = how == HOW_SKEW ? (int8_t)take_u8(in) : 0;
                int mangle = how == HOW_MANGLE ? take_u8(in) % N_MANGLES : -1;
                struct frame f;
                if (!decode_frame(run, op, &f, in)) { /* OP_SYNC */
                        read_ctl_until(run, run->n_sent, WAIT_MS);
                        continue;
                }
                n_frames++;
                if (not_sent(&f)) {
                        frame_free(&f);
                        continue;
                }
                bool on_data = f.data_channel;
                if ((how == HOW_SKEW && !on_data) || mangle == MANGLE_OTHER_CHANNEL)
                        on_data = !on_data;
                if (on_data && run->n_sent == MAX_FRAMES) {
                        frame_free(&f);
                        break;
                }
                if (on_data) {
                        frame_set_seq(&f, run->n_sent + 1 + (uint64_t)(int64_t)skew);
                        struct sent *s = judge(run, &f);
                        if (mangle >= 0 && mangle != MANGLE_OTHER_CHANNEL)
                                s->valid = false, s->fx = FX_NONE, s->record = -1;
                        run->kept[run->n_sent++] = f;
                        if (!frame_send(run, &f, true,
                                        mangle == MANGLE_OTHER_CHANNEL ? -1 : mangle))
                                run->data_dead = true;
                        continue;
                }
                if (!on_data && !run->ctl_dead &&
                    !frame_send(run, &f, false, mangle == MANGLE_OTHER_CHANNEL ? -1 : mangle))
                        run->ctl_dead = true;
                frame_free(&f);
        }
}

/* Ends the input as flags say: a closing flush the engine must acknowledge, a Disconnect. */
static void finish(struct run *run)
{
        if (!(run->flags & F_NO_PROBE) && !run->data_dead && run->n_sent < MAX_FRAMES + 1) {
                struct frame f = {0};
                Tandem__Repl__Flush m = TANDEM__REPL__FLUSH__INIT;
                m.seq = run->n_sent + 1;
                frame_pack(&f, TANDEM__REPL__MSG_TYPE__MSG_FLUSH, &m.base);
                judge(run, &f);
                run->kept[run->n_sent++] = f;
                if (frame_send(run, &f, true, -1)) {
                        read_ctl_until(run, run->n_sent, WAIT_MS);
                        FUZZ_ASSERT(run->closed || run->seen.max_ack == run->n_sent,
                                    "the engine neither acknowledged seq %zu nor dropped the link "
                                    "(acked %llu)",
                                    run->n_sent, (unsigned long long)run->seen.max_ack);
                }
        }
        if ((run->flags & F_DISCONNECT) && !run->ctl_dead) {
                Tandem__Repl__Disconnect d = TANDEM__REPL__DISCONNECT__INIT;
                d.reason = (char *)"fuzz peer done";
                (void)repl_send_on(run->l.ctl_fd, &run->l.ctl_seal,
                                   TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT, &d.base, NULL, 0,
                                   WAIT_MS);
        }
        peer_link_close(&run->l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static bool started;
        if (!started) {
                targets_start();
                started = true;
        }
        if (size < 1)
                return 0;
        static struct run run;
        static uint8_t optimistic[LUN_SIZE];
        struct fuzz_in in = {.p = data + 1, .left = size - 1};
        struct target *t = &targets[data[0] & F_ENCRYPT];
        memset(&run, 0, sizeof(run));
        run.t = t;
        run.flags = data[0];
        run.optimistic = optimistic;
        memcpy(optimistic, t->model, LUN_SIZE);
        engine_ready(t);
        records_read(t, run.base);
        link_up(&run);
        send_frames(&run, &in);
        finish(&run);
        wait_engine_idle(&run);
        check_file(&run);
        check_records(&run);
        records_free(run.base);
        sent_free(&run);
        return 0;
}
