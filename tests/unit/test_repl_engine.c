/*
 * The replicator engine against a fake peer: a real replicated LUN (node 2, Secondary, on a
 * sparse temp file) listens on loopback; the test plays node 1 with the wire and handshake
 * API (it has the lower id, so it dials), and checks what the engine applies, acknowledges,
 * refuses and reports through repl_for_each_status. The engine and the peer's steps are
 * tests/common/repl_peer.h (shared with tests/fuzz/fuzz_repl_apply.c).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/repl_peer.h"

#define SECRET   "fake peer shared secret"
#define NAA      "6001405a1b2c3d4e5f60718293a4b5c6"
#define SERIAL   "replengine000001"
#define IQN      "iqn.2024-01.org.tandem:repl-engine"
#define LUN_BS   512u
#define LUN_SIZE (4u * 1024 * 1024)
#define BLK      4096u

#define DATA    PEER_DATA
#define CONTROL PEER_CONTROL

/* Handshake deadline of the fake: covers the engine's 5 s back-off after a refusal. */
#define FAKE_HS_MS   8000
#define WAIT_MS      3000 /* for things the engine does at once */
#define REFUSED_WAIT 9000 /* for a reconnect that waits out REFUSED_RETRY_MS (5 s) */

#define mono_ms peer_mono_ms
#define nap_ms  peer_nap_ms

/* ---- the engine under test ---- */

static struct peer_engine eng; /* large: static */
static uint8_t *snapshot;      /* the whole file, taken before a bad case */

static void engine_start(uint32_t timeout_ms)
{
        const struct peer_engine_opts o = {.dir_template = "/tmp/tandem-repl-engine-XXXXXX",
                                           .iqn = IQN,
                                           .naa = NAA,
                                           .serial = SERIAL,
                                           .secret = SECRET,
                                           .size_bytes = LUN_SIZE,
                                           .block_size = LUN_BS,
                                           .timeout_ms = timeout_ms,
                                           .link_protection = TDM_LINK_PROTECT_AUTHENTICATE};
        char err[256] = "";
        int rc = peer_engine_start(&eng, &o, err, sizeof(err));
        ck_assert_msg(rc == 0, "engine start: %d %s", rc, err);
        snapshot = malloc(LUN_SIZE);
        ck_assert_ptr_nonnull(snapshot);
}

static void engine_stop(void)
{
        peer_engine_stop(&eng);
        free(snapshot);
        snapshot = NULL;
}

static void setup_1s(void)
{
        engine_start(1000);
}

static void setup_300ms(void)
{
        engine_start(300);
}

/* The backing file as another reader sees it. */
static void file_read(uint64_t off, void *buf, size_t len)
{
        ck_assert_int_eq(peer_engine_read(&eng, off, buf, len), 0);
}

static void file_snapshot(void)
{
        file_read(0, snapshot, LUN_SIZE);
}

static void assert_file_unchanged(void)
{
        uint8_t *now = malloc(LUN_SIZE);
        ck_assert_ptr_nonnull(now);
        file_read(0, now, LUN_SIZE);
        size_t i = 0;
        while (i < LUN_SIZE && now[i] == snapshot[i])
                i++;
        free(now);
        ck_assert_msg(i == LUN_SIZE, "the file changed at byte %zu", i);
}

static void assert_range_zero(uint64_t off, size_t len)
{
        uint8_t *b = malloc(len);
        ck_assert_ptr_nonnull(b);
        file_read(off, b, len);
        size_t i = 0;
        while (i < len && b[i] == 0)
                i++;
        free(b);
        ck_assert_msg(i == len, "byte %llu is not zero", (unsigned long long)(off + i));
}

static uint8_t *pattern(size_t len, uint8_t seed)
{
        uint8_t *p = malloc(len);
        ck_assert_ptr_nonnull(p);
        for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)(seed + i * 7 + (i >> 9) + 1);
        return p;
}

/* ---- the engine's status ---- */

static struct repl_status status_now(void)
{
        struct repl_status st;
        ck_assert_int_eq(peer_engine_status(&eng, &st), 0);
        return st;
}

/* Polls until conn is `conn` and (if err is set) last_error contains err. */
static bool wait_status(int conn, const char *err, int timeout_ms, struct repl_status *out)
{
        struct repl_status st;
        bool ok = peer_engine_wait(&eng, conn, err, timeout_ms, &st);
        if (out)
                *out = st;
        return ok;
}

/* Connected, and the error of the last connection cleared (set just after the state). */
static void assert_connected_clean(int timeout_ms)
{
        int64_t end = mono_ms() + timeout_ms;
        struct repl_status st;
        for (;;) {
                st = status_now();
                if (st.conn == REPL_CONN_CONNECTED && st.last_error[0] == '\0')
                        return;
                ck_assert_msg(mono_ms() < end,
                              "engine: conn %s last_error \"%s\"; wanted Connected",
                              repl_conn_name(st.conn), st.last_error);
                nap_ms(5);
        }
}

static void assert_status(int conn, const char *err, int timeout_ms)
{
        struct repl_status st;
        bool ok = wait_status(conn, err, timeout_ms, &st);
        ck_assert_msg(ok, "engine: conn %s last_error \"%s\"; wanted conn %s with \"%s\"",
                      repl_conn_name(st.conn), st.last_error,
                      conn < 0 ? "any" : repl_conn_name((enum repl_conn_state)conn),
                      err ? err : "");
}

/* ---- the fake peer (node 1) ---- */

struct fake {
        struct peer_link l;
        pthread_t ctl_thread;
        bool ctl_running;
        pthread_mutex_t lock; /* the fields below, and sending on l.ctl_fd */
        pthread_cond_t cond;
        bool answer_pings;
        bool stop;
        bool ctl_closed; /* the engine closed the control channel (or it failed) */
        int ctl_close_rc;
        struct peer_ctl_seen seen;
};

static void fake_init(struct fake *f)
{
        memset(f, 0, sizeof(*f));
        peer_link_init(&f->l);
        f->answer_pings = true;
        pthread_mutex_init(&f->lock, NULL);
        pthread_cond_init(&f->cond, NULL);
}

static const struct peer_hs good_hs = {
    PEER_NODE, ENGINE_NODE, SECRET, NAA, FRAME_PROTECT_AUTHENTICATE, REPL_FEATURE_VERIFY_SHA256};

/*
 * One channel: dial and authenticate. Returns the handshake's result; *fd open on success, and
 * the channel's sealing keyed (seal: ours, open: the engine's frames) when asked for.
 */
static int fake_channel_sealed(const struct peer_hs *o, int channel, int *fd, char *why,
                               size_t whylen, struct frame_seal *seal, struct frame_seal *open)
{
        return peer_channel_open(eng.port, o, channel, FAKE_HS_MS, fd, why, whylen, seal, open);
}

static int fake_channel(const struct peer_hs *o, int channel, int *fd, char *why, size_t whylen)
{
        return fake_channel_sealed(o, channel, fd, why, whylen, NULL, NULL);
}

static void fake_send_state(struct fake *f, uint64_t size_bytes)
{
        const struct peer_state s = {
            .size_bytes = size_bytes,
            .block_size = LUN_BS,
            .naa = NAA,
            .serial = SERIAL,
            .node_name = "node1",
            .gen = {.current = REPL_GEN_JUST_CREATED}, /* with the engine's, BOTH_NEW */
            .role = REPL_ROLE_PRIMARY, /* the fake writes: the engine takes writes from a Primary */
            .disk = REPL_DISK_INCONSISTENT};
        ck_assert_int_eq(peer_send_state(&f->l, &s, WAIT_MS), 0);
}

/* The engine's State: it comes first on the control channel, and describes the LUN. */
static void fake_recv_engine_state(struct fake *f)
{
        struct repl_rx rx;
        const char *why = NULL;
        int rc = peer_recv_state(&f->l, &rx, WAIT_MS, &why);
        ck_assert_msg(rc == 0, "engine state: %d %s", rc, why ? why : "");
        const Tandem__Repl__State *s = (const Tandem__Repl__State *)rx.msg;
        ck_assert_uint_eq(s->size_bytes, LUN_SIZE);
        ck_assert_uint_eq(s->block_size, LUN_BS);
        ck_assert_str_eq(s->lun_naa, NAA);
        ck_assert_uint_eq(s->role, REPL_ROLE_SECONDARY);
        ck_assert_ptr_nonnull(s->gen);
        ck_assert_uint_eq(s->gen->current, REPL_GEN_JUST_CREATED);
        repl_rx_free(&rx);
}

static void *fake_ctl_main(void *arg)
{
        struct fake *f = arg;
        for (;;) {
                pthread_mutex_lock(&f->lock);
                bool stop = f->stop;
                pthread_mutex_unlock(&f->lock);
                if (stop)
                        break;
                struct repl_rx rx;
                const char *why = NULL;
                int rc = repl_recv_on(f->l.ctl_fd, &f->l.ctl_open, &rx, 50, &why);
                if (rc == -ETIMEDOUT)
                        continue;
                pthread_mutex_lock(&f->lock);
                if (rc < 0) {
                        f->ctl_closed = true;
                        f->ctl_close_rc = rc;
                        pthread_cond_broadcast(&f->cond);
                        pthread_mutex_unlock(&f->lock);
                        break;
                }
                (void)peer_ctl_take(&f->l, &f->seen, &rx, f->answer_pings, WAIT_MS);
                pthread_cond_broadcast(&f->cond);
                pthread_mutex_unlock(&f->lock);
                repl_rx_free(&rx);
        }
        return NULL;
}

/*
 * The engine's first data-channel message: its LUN identity and role (seq 1), which it
 * wants acknowledged like any other.
 */
static void fake_ack_engine_identity(struct fake *f)
{
        const char *why = NULL;
        int rc = peer_ack_engine_identity(&f->l, NAA, WAIT_MS, &why);
        ck_assert_msg(rc == 0, "engine identity: %d %s", rc, why ? why : "");
}

/* Both channels, both states, then the control channel served by a thread. */
static void fake_connect(struct fake *f)
{
        fake_init(f);
        char why[256] = "";
        int rc = fake_channel_sealed(&good_hs, DATA, &f->l.data_fd, why, sizeof(why),
                                     &f->l.data_seal, &f->l.data_open);
        ck_assert_msg(rc == 0, "data handshake: %d %s", rc, why);
        rc = fake_channel_sealed(&good_hs, CONTROL, &f->l.ctl_fd, why, sizeof(why), &f->l.ctl_seal,
                                 &f->l.ctl_open);
        ck_assert_msg(rc == 0, "control handshake: %d %s", rc, why);
        fake_recv_engine_state(f);
        fake_send_state(f, LUN_SIZE);
        fake_ack_engine_identity(f);
        ck_assert_int_eq(pthread_create(&f->ctl_thread, NULL, fake_ctl_main, f), 0);
        f->ctl_running = true;
}

static void fake_close(struct fake *f)
{
        pthread_mutex_lock(&f->lock);
        f->stop = true;
        pthread_mutex_unlock(&f->lock);
        if (f->ctl_running)
                pthread_join(f->ctl_thread, NULL);
        f->ctl_running = false;
        peer_link_close(&f->l);
        pthread_mutex_destroy(&f->lock);
        pthread_cond_destroy(&f->cond);
}

static void fake_set_answer_pings(struct fake *f, bool on)
{
        pthread_mutex_lock(&f->lock);
        f->answer_pings = on;
        pthread_mutex_unlock(&f->lock);
}

/* Waits for an ack covering seq; false on timeout or a closed channel. */
static bool fake_wait_ack(struct fake *f, uint64_t seq, int timeout_ms)
{
        int64_t end = mono_ms() + timeout_ms;
        pthread_mutex_lock(&f->lock);
        while (f->seen.max_ack < seq && !f->ctl_closed && mono_ms() < end) {
                pthread_mutex_unlock(&f->lock);
                nap_ms(2);
                pthread_mutex_lock(&f->lock);
        }
        bool ok = f->seen.max_ack >= seq;
        pthread_mutex_unlock(&f->lock);
        return ok;
}

/* What the control-channel thread has seen so far, read under its lock. */
static struct fake fake_seen(struct fake *f)
{
        pthread_mutex_lock(&f->lock);
        struct fake copy = *f;
        pthread_mutex_unlock(&f->lock);
        return copy;
}

/* The engine dropped us: the control channel reached EOF (or reset). */
static bool fake_wait_closed(struct fake *f, int timeout_ms)
{
        int64_t end = mono_ms() + timeout_ms;
        pthread_mutex_lock(&f->lock);
        while (!f->ctl_closed && mono_ms() < end) {
                pthread_mutex_unlock(&f->lock);
                nap_ms(2);
                pthread_mutex_lock(&f->lock);
        }
        bool closed = f->ctl_closed;
        pthread_mutex_unlock(&f->lock);
        return closed;
}

static int fake_send_write(struct fake *f, uint64_t seq, uint64_t off, uint32_t len, uint32_t kind,
                           const void *payload, size_t payload_len)
{
        return peer_send_write(&f->l, seq, off, len, kind, payload, payload_len, WAIT_MS);
}

static int fake_send_flush(struct fake *f, uint64_t seq)
{
        return peer_send_flush(&f->l, seq, WAIT_MS);
}

/* After a bad input: the engine hangs up on us with a reason, and listens again. */
static void expect_dropped(struct fake *f, const char *reason)
{
        ck_assert_msg(fake_wait_closed(f, WAIT_MS), "the engine did not drop the peer (%s)",
                      reason);
        assert_status(REPL_CONN_CONNECTING, reason, WAIT_MS);
        struct repl_status st = status_now();
        ck_assert_msg(strncmp(st.last_error, "disconnected: ", 14) == 0, "last_error \"%s\"",
                      st.last_error);
        fake_close(f);
}

/*
 * A good peer connects, writes a pattern at off, flushes, gets the ack, and the file holds
 * the pattern; then it leaves and the engine is Connecting again.
 */
static void good_roundtrip(uint64_t off, uint8_t seed, int connect_ms)
{
        struct fake f;
        fake_connect(&f);
        assert_connected_clean(connect_ms);
        uint8_t *p = pattern(BLK, seed);
        ck_assert_int_eq(fake_send_write(&f, 1, off, BLK, REPL_IO_WRITE, p, BLK), 0);
        ck_assert_int_eq(fake_send_flush(&f, 2), 0);
        ck_assert_msg(fake_wait_ack(&f, 2, WAIT_MS), "no ack for seq 2 (max %llu, closed %d)",
                      (unsigned long long)fake_seen(&f).seen.max_ack, fake_seen(&f).ctl_closed);
        ck_assert_int_eq(fake_seen(&f).seen.ack_error, 0);
        uint8_t got[BLK];
        file_read(off, got, BLK);
        ck_assert_msg(memcmp(got, p, BLK) == 0, "the file does not hold the replicated write");
        free(p);
        fake_close(&f);
        assert_status(REPL_CONN_CONNECTING, "disconnected", WAIT_MS);
}

/* ---- 1. happy path ---- */

START_TEST(test_write_flush_ack)
{
        struct fake f;
        fake_connect(&f);
        assert_connected_clean(WAIT_MS);
        struct repl_status st = status_now();
        ck_assert_uint_eq(st.size_bytes, LUN_SIZE);
        ck_assert_int_eq(st.role, REPL_ROLE_SECONDARY);
        ck_assert_uint_eq(st.peer_node_id, PEER_NODE);

        uint8_t *p = pattern(BLK, 0x31);
        ck_assert_int_eq(fake_send_write(&f, 1, 4096, BLK, REPL_IO_WRITE, p, BLK), 0);
        ck_assert_int_eq(fake_send_flush(&f, 2), 0);
        ck_assert_msg(fake_wait_ack(&f, 2, WAIT_MS), "no ack for seq 2 (max %llu)",
                      (unsigned long long)fake_seen(&f).seen.max_ack);
        ck_assert_int_eq(fake_seen(&f).seen.ack_error, 0);
        ck_assert_uint_le(fake_seen(&f).seen.max_ack, 2); /* nothing acked that was never sent */

        uint8_t got[BLK];
        file_read(4096, got, BLK);
        ck_assert(memcmp(got, p, BLK) == 0);
        assert_range_zero(0, 4096);
        assert_range_zero(8192, 64 * 1024);

        /* A zero and an unmap over the pattern are applied too, in order. */
        ck_assert_int_eq(fake_send_write(&f, 3, 4096, 1024, REPL_IO_ZERO, NULL, 0), 0);
        ck_assert_int_eq(fake_send_write(&f, 4, 5120, 1024, REPL_IO_UNMAP, NULL, 0), 0);
        ck_assert_int_eq(fake_send_flush(&f, 5), 0);
        ck_assert(fake_wait_ack(&f, 5, WAIT_MS));
        ck_assert_int_eq(fake_seen(&f).seen.ack_error, 0);
        file_read(4096, got, BLK);
        for (size_t i = 0; i < 2048; i++)
                ck_assert_msg(got[i] == 0, "byte %zu not zeroed", i);
        ck_assert(memcmp(got + 2048, p + 2048, BLK - 2048) == 0);
        free(p);

        /* A 1 MiB write, then 100 small ones in a burst: acks are cumulative, none lost. */
        uint8_t *big = pattern(1u << 20, 0x99);
        ck_assert_int_eq(fake_send_write(&f, 6, 2u << 20, 1u << 20, REPL_IO_WRITE, big, 1u << 20),
                         0);
        uint8_t *small = pattern(100 * 512, 0x5a);
        for (unsigned i = 0; i < 100; i++)
                ck_assert_int_eq(fake_send_write(&f, 7 + i, (3u << 20) + i * 512, 512,
                                                 REPL_IO_WRITE, small + i * 512, 512),
                                 0);
        ck_assert_int_eq(fake_send_flush(&f, 107), 0);
        ck_assert_msg(fake_wait_ack(&f, 107, WAIT_MS), "no ack for seq 107 (max %llu)",
                      (unsigned long long)fake_seen(&f).seen.max_ack);
        ck_assert_int_eq(fake_seen(&f).seen.ack_error, 0);
        uint8_t *back = malloc(1u << 20);
        ck_assert_ptr_nonnull(back);
        file_read(2u << 20, back, 1u << 20);
        ck_assert(memcmp(back, big, 1u << 20) == 0);
        file_read(3u << 20, back, 100 * 512);
        ck_assert(memcmp(back, small, 100 * 512) == 0);
        free(back);
        free(small);
        free(big);
        ck_assert_uint_eq(status_now().out_of_sync_bytes, 0);

        /* Still connected: the pings were answered, nothing failed. */
        ck_assert_int_eq(status_now().conn, REPL_CONN_CONNECTED);
        struct fake seen = fake_seen(&f);
        ck_assert(!seen.ctl_closed);
        ck_assert_str_eq(seen.seen.unexpected, "");
        fake_close(&f);
        assert_status(REPL_CONN_CONNECTING, "disconnected", WAIT_MS);
}
END_TEST

/* ---- 2. sequence numbers ---- */

START_TEST(test_out_of_order_seq)
{
        file_snapshot();
        struct fake f;
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        uint8_t *p = pattern(BLK, 0x52);
        ck_assert_int_eq(fake_send_write(&f, 5, 4096, BLK, REPL_IO_WRITE, p, BLK), 0);
        expect_dropped(&f, "out-of-order");
        ck_assert_uint_eq(f.seen.max_ack, 0);
        assert_file_unchanged();
        assert_range_zero(4096, BLK);

        /* A repeated seq: the first write lands, the repeat ends the connection. */
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        ck_assert_int_eq(fake_send_write(&f, 1, 8192, BLK, REPL_IO_WRITE, p, BLK), 0);
        ck_assert(fake_wait_ack(&f, 1, WAIT_MS));
        file_snapshot();
        uint8_t *q = pattern(BLK, 0x77);
        ck_assert_int_eq(fake_send_write(&f, 1, 8192, BLK, REPL_IO_WRITE, q, BLK), 0);
        expect_dropped(&f, "out-of-order");
        assert_file_unchanged();
        free(q);
        free(p);

        good_roundtrip(1 << 20, 0x11, WAIT_MS);
}
END_TEST

/* ---- 3. malformed writes ---- */

struct bad_write {
        const char *what;
        uint64_t off;
        uint32_t len, kind;
        size_t payload;
};

START_TEST(test_malformed_writes)
{
        static const struct bad_write cases[] = {
            {"straddles the end", LUN_SIZE - 2048, BLK, REPL_IO_WRITE, BLK},
            {"at the end", LUN_SIZE, BLK, REPL_IO_WRITE, BLK},
            {"unaligned offset", 4096 + 100, BLK, REPL_IO_WRITE, BLK},
            {"unaligned length", 4096, 4000, REPL_IO_WRITE, 4000},
            {"short payload", 4096, BLK, REPL_IO_WRITE, 2048},
            {"long payload", 4096, 2048, REPL_IO_WRITE, BLK},
            {"unknown kind", 4096, BLK, 9, BLK},
            {"flush kind in a write", 4096, BLK, REPL_IO_FLUSH, 0},
            {"zero with a payload", 4096, BLK, REPL_IO_ZERO, BLK},
            {"unmap beyond the end", LUN_SIZE - 512, 1024, REPL_IO_UNMAP, 0},
        };
        uint8_t *p = pattern(BLK, 0x63);
        /* Something non-zero where the unmap/zero cases aim, so a wrong apply shows. */
        good_roundtrip(LUN_SIZE - BLK, 0x21, WAIT_MS);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct bad_write *c = &cases[i];
                file_snapshot();
                struct fake f;
                fake_connect(&f);
                assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
                int rc = fake_send_write(&f, 1, c->off, c->len, c->kind, p, c->payload);
                ck_assert_msg(rc == 0 || rc == -ECONNRESET, "%s: send %d", c->what, rc);
                ck_assert_msg(fake_wait_closed(&f, WAIT_MS), "%s: not dropped", c->what);
                struct repl_status st;
                bool ok = wait_status(REPL_CONN_CONNECTING, "malformed", WAIT_MS, &st);
                ck_assert_msg(ok, "%s: conn %s last_error \"%s\"", c->what, repl_conn_name(st.conn),
                              st.last_error);
                ck_assert_msg(f.seen.max_ack == 0, "%s: acknowledged", c->what);
                fake_close(&f);
                assert_file_unchanged();
        }
        free(p);
        good_roundtrip(1 << 20, 0x12, WAIT_MS);
}
END_TEST

/* ---- 3b. a write that carries a state record: one change ---- */

#define CAW_STATE_ID 5u

static void write_with_state_msg(Tandem__Repl__Write *m, uint64_t seq, uint64_t off, uint32_t kind,
                                 uint32_t state_id, const char *state)
{
        *m = (Tandem__Repl__Write)TANDEM__REPL__WRITE__INIT;
        m->seq = seq;
        m->offset = off;
        m->length = BLK;
        m->kind = kind;
        m->has_state = true;
        m->state_id = state_id;
        m->state.data = (uint8_t *)state;
        m->state.len = strlen(state);
}

/* The engine's copy of a state record, as a string ("" when it has none). */
static void engine_state(unsigned id, char *buf, size_t cap)
{
        peer_engine_record(&eng, id, buf, cap);
}

/* A malformed write with a state record: dropped, neither the data nor the record stored. */
static void write_with_state_refused(uint32_t kind, uint32_t state_id, const char *what)
{
        char before[64], after[64];
        engine_state(CAW_STATE_ID, before, sizeof(before));
        file_snapshot();
        struct fake f;
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        Tandem__Repl__Write m;
        write_with_state_msg(&m, 1, 8192, kind, state_id, "refused record");
        uint8_t *p = pattern(BLK, 0x48);
        struct iovec iov = {.iov_base = p, .iov_len = BLK};
        bool data = kind == REPL_IO_WRITE;
        int rc = repl_send_on(f.l.data_fd, &f.l.data_seal, TANDEM__REPL__MSG_TYPE__MSG_WRITE,
                              &m.base, data ? &iov : NULL, data ? 1 : 0, WAIT_MS);
        ck_assert_msg(rc == 0 || rc == -ECONNRESET, "%s: send %d", what, rc);
        ck_assert_msg(fake_wait_closed(&f, WAIT_MS), "%s: not dropped", what);
        ck_assert_msg(wait_status(REPL_CONN_CONNECTING, "malformed", WAIT_MS, NULL),
                      "%s: last_error \"%s\"", what, status_now().last_error);
        ck_assert_msg(f.seen.max_ack == 0, "%s: acknowledged", what);
        fake_close(&f);
        assert_file_unchanged();
        engine_state(CAW_STATE_ID, after, sizeof(after));
        ck_assert_str_eq(after, before);
        free(p);
}

START_TEST(test_write_with_state)
{
        /* Applied: the data, then the record, then the ack. */
        struct fake f;
        fake_connect(&f);
        assert_connected_clean(WAIT_MS);
        uint8_t *p = pattern(BLK, 0x44);
        Tandem__Repl__Write m;
        write_with_state_msg(&m, 1, 8192, REPL_IO_WRITE, CAW_STATE_ID, "caw table one");
        struct iovec iov = {.iov_base = p, .iov_len = BLK};
        ck_assert_int_eq(repl_send_on(f.l.data_fd, &f.l.data_seal,
                                      TANDEM__REPL__MSG_TYPE__MSG_WRITE, &m.base, &iov, 1, WAIT_MS),
                         0);
        ck_assert_int_eq(fake_send_flush(&f, 2), 0);
        ck_assert_msg(fake_wait_ack(&f, 2, WAIT_MS), "no ack for seq 2");
        ck_assert_int_eq(fake_seen(&f).seen.ack_error, 0);
        uint8_t got[BLK];
        file_read(8192, got, BLK);
        ck_assert(memcmp(got, p, BLK) == 0);
        char rec[64];
        engine_state(CAW_STATE_ID, rec, sizeof(rec));
        ck_assert_str_eq(rec, "caw table one");

        /*
         * The Primary lost halfway through the next such frame: the engine has neither its
         * data nor its record (the old pair stays), whatever part of the frame arrived.
         */
        file_snapshot();
        uint8_t *q = pattern(BLK, 0x45);
        write_with_state_msg(&m, 3, 8192, REPL_IO_WRITE, CAW_STATE_ID, "caw table two");
        size_t msg_len = protobuf_c_message_get_packed_size(&m.base);
        size_t frame_len = REPL_FRAME_HDR_LEN + msg_len + BLK + FRAME_TAG_LEN;
        uint8_t *frame = malloc(frame_len);
        ck_assert_ptr_nonnull(frame);
        repl_frame_encode(frame, TANDEM__REPL__MSG_TYPE__MSG_WRITE, (uint32_t)msg_len, BLK);
        protobuf_c_message_pack(&m.base, frame + REPL_FRAME_HDR_LEN);
        memcpy(frame + REPL_FRAME_HDR_LEN + msg_len, q, BLK);
        ck_assert_int_eq(peer_seal_frame(&f.l.data_seal, frame, frame_len - FRAME_TAG_LEN), 0);
        ck_assert_int_eq(repl_write_full(f.l.data_fd, frame, frame_len - BLK / 2, WAIT_MS), 0);
        fake_close(&f);
        ck_assert(wait_status(REPL_CONN_CONNECTING, NULL, WAIT_MS, NULL));
        nap_ms(50);
        assert_file_unchanged();
        engine_state(CAW_STATE_ID, rec, sizeof(rec));
        ck_assert_str_eq(rec, "caw table one");
        free(frame);
        free(q);
        free(p);

        /* A record id beyond the table, a record on a zeroing write: malformed. */
        write_with_state_refused(REPL_IO_WRITE, TDM_STATE_RECORDS, "record id out of range");
        write_with_state_refused(REPL_IO_ZERO, CAW_STATE_ID, "record on a zero write");
        good_roundtrip(1 << 20, 0x13, WAIT_MS);
}
END_TEST

/* ---- 4. bad frames after authentication ---- */

enum raw_channel { RAW_DATA, RAW_CTL };

static void send_raw_and_expect_drop(enum raw_channel ch, const void *bytes, size_t len,
                                     const char *reason)
{
        file_snapshot();
        struct fake f;
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        int fd = ch == RAW_DATA ? f.l.data_fd : f.l.ctl_fd;
        if (ch == RAW_CTL)
                pthread_mutex_lock(&f.lock); /* no ping answer in the middle of it */
        int rc = repl_write_full(fd, bytes, len, WAIT_MS);
        if (ch == RAW_CTL)
                pthread_mutex_unlock(&f.lock);
        ck_assert_int_eq(rc, 0);
        ck_assert_msg(fake_wait_closed(&f, WAIT_MS), "not dropped after %s", reason);
        struct repl_status st;
        bool ok = wait_status(REPL_CONN_CONNECTING, reason, WAIT_MS, &st);
        ck_assert_msg(ok, "conn %s last_error \"%s\", wanted \"%s\"", repl_conn_name(st.conn),
                      st.last_error, reason);
        fake_close(&f);
        assert_file_unchanged();
}

/* bytes (header and message) sealed with the fake's data-channel key, then sent. */
static void send_sealed_raw_and_expect_drop(const uint8_t *bytes, size_t len, const char *reason)
{
        file_snapshot();
        struct fake f;
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        uint8_t frame[256];
        ck_assert_uint_le(len + FRAME_TAG_LEN, sizeof(frame));
        memcpy(frame, bytes, len);
        ck_assert_int_eq(peer_seal_frame(&f.l.data_seal, frame, len), 0);
        ck_assert_int_eq(repl_write_full(f.l.data_fd, frame, len + FRAME_TAG_LEN, WAIT_MS), 0);
        ck_assert_msg(fake_wait_closed(&f, WAIT_MS), "not dropped after %s", reason);
        struct repl_status st;
        bool ok = wait_status(REPL_CONN_CONNECTING, reason, WAIT_MS, &st);
        ck_assert_msg(ok, "conn %s last_error \"%s\", wanted \"%s\"", repl_conn_name(st.conn),
                      st.last_error, reason);
        fake_close(&f);
        assert_file_unchanged();
}

START_TEST(test_bad_frames)
{
        uint8_t hdr[REPL_FRAME_HDR_LEN + 64];
        memset(hdr, 0, sizeof(hdr));

        /* A write whose header announces more payload than any frame may carry. */
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, 0, REPL_PAYLOAD_MAX + 1);
        send_raw_and_expect_drop(RAW_DATA, hdr, REPL_FRAME_HDR_LEN, "payload too large");

        /* A message length beyond REPL_MSG_MAX. */
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, REPL_MSG_MAX + 1, 0);
        send_raw_and_expect_drop(RAW_DATA, hdr, REPL_FRAME_HDR_LEN, "message too large");

        /* Garbage on the data channel. */
        uint8_t junk[64];
        memset(junk, 0xde, sizeof(junk));
        send_raw_and_expect_drop(RAW_DATA, junk, sizeof(junk), "bad magic");

        /* Garbage on the control channel. */
        send_raw_and_expect_drop(RAW_CTL, junk, sizeof(junk), "bad magic");

        /* An unknown frame type. */
        repl_frame_encode(hdr, 42, 0, 0);
        send_raw_and_expect_drop(RAW_DATA, hdr, REPL_FRAME_HDR_LEN, "unknown message type 42");

        /* A WRITE frame whose message bytes are not a Write (sealed by the peer). */
        memset(hdr + REPL_FRAME_HDR_LEN, 0xff, 8);
        repl_frame_encode(hdr, TANDEM__REPL__MSG_TYPE__MSG_WRITE, 8, 0);
        send_sealed_raw_and_expect_drop(hdr, REPL_FRAME_HDR_LEN + 8, "malformed");

        /* The same bytes with a tag that is not the frame's (forged: no key). */
        memset(hdr + REPL_FRAME_HDR_LEN + 8, 0x42, FRAME_TAG_LEN);
        send_raw_and_expect_drop(RAW_DATA, hdr, REPL_FRAME_HDR_LEN + 8 + FRAME_TAG_LEN,
                                 "frame failed authentication");

        /* A well-formed WRITE, unsealed (a peer that skips the protection, or an injector). */
        uint8_t plain[REPL_FRAME_HDR_LEN + 64 + BLK + FRAME_TAG_LEN];
        Tandem__Repl__Write pw = TANDEM__REPL__WRITE__INIT;
        pw.seq = 2; /* the engine's identity took seq 1 */
        pw.offset = 8192;
        pw.length = BLK;
        pw.kind = REPL_IO_WRITE;
        size_t plen = tandem__repl__write__pack(&pw, plain + REPL_FRAME_HDR_LEN);
        repl_frame_encode(plain, TANDEM__REPL__MSG_TYPE__MSG_WRITE, (uint32_t)plen, BLK);
        memset(plain + REPL_FRAME_HDR_LEN + plen, 0x66, BLK + FRAME_TAG_LEN);
        send_raw_and_expect_drop(RAW_DATA, plain, REPL_FRAME_HDR_LEN + plen + BLK + FRAME_TAG_LEN,
                                 "frame failed authentication");
        send_raw_and_expect_drop(RAW_CTL, plain, REPL_FRAME_HDR_LEN + plen + BLK + FRAME_TAG_LEN,
                                 "frame failed authentication");

        /* A write whose payload stops short: the peer goes away in the middle of it. */
        file_snapshot();
        struct fake f;
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        Tandem__Repl__Write w = TANDEM__REPL__WRITE__INIT;
        w.seq = 1;
        w.offset = 4096;
        w.length = BLK;
        w.kind = REPL_IO_WRITE;
        uint8_t frame[REPL_FRAME_HDR_LEN + 64 + 1000];
        size_t mlen = tandem__repl__write__pack(&w, frame + REPL_FRAME_HDR_LEN);
        ck_assert_uint_le(mlen, 64);
        repl_frame_encode(frame, TANDEM__REPL__MSG_TYPE__MSG_WRITE, (uint32_t)mlen, BLK);
        memset(frame + REPL_FRAME_HDR_LEN + mlen, 0xab, 1000);
        ck_assert_int_eq(
            repl_write_full(f.l.data_fd, frame, REPL_FRAME_HDR_LEN + mlen + 1000, WAIT_MS), 0);
        shutdown(f.l.data_fd, SHUT_WR);
        expect_dropped(&f, "data channel closed");
        assert_file_unchanged();

        /* A control-channel message on the data channel (a PING carries no seq). */
        file_snapshot();
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        Tandem__Repl__Ping ping = TANDEM__REPL__PING__INIT;
        ping.token = 1;
        ck_assert_int_eq(repl_send_on(f.l.data_fd, &f.l.data_seal, TANDEM__REPL__MSG_TYPE__MSG_PING,
                                      &ping.base, NULL, 0, WAIT_MS),
                         0);
        ck_assert(fake_wait_closed(&f, WAIT_MS));
        assert_status(REPL_CONN_CONNECTING, "disconnected", WAIT_MS);
        fake_close(&f);
        assert_file_unchanged();

        /* A FLUSH carrying payload bytes, which no FLUSH has: refused, not skipped over. */
        file_snapshot();
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        Tandem__Repl__Flush stuffed = TANDEM__REPL__FLUSH__INIT;
        stuffed.seq = 1;
        uint8_t extra[16];
        memset(extra, 0x5a, sizeof(extra));
        struct iovec extra_iov = {.iov_base = extra, .iov_len = sizeof(extra)};
        ck_assert_int_eq(repl_send_on(f.l.data_fd, &f.l.data_seal,
                                      TANDEM__REPL__MSG_TYPE__MSG_FLUSH, &stuffed.base, &extra_iov,
                                      1, WAIT_MS),
                         0);
        expect_dropped(&f, "unexpected payload on a FLUSH");
        assert_file_unchanged();

        /* A data message on the control channel. */
        file_snapshot();
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        Tandem__Repl__Flush fl = TANDEM__REPL__FLUSH__INIT;
        fl.seq = 1;
        pthread_mutex_lock(&f.lock);
        ck_assert_int_eq(repl_send_on(f.l.ctl_fd, &f.l.ctl_seal, TANDEM__REPL__MSG_TYPE__MSG_FLUSH,
                                      &fl.base, NULL, 0, WAIT_MS),
                         0);
        pthread_mutex_unlock(&f.lock);
        expect_dropped(&f, "unexpected FLUSH on the control channel");
        assert_file_unchanged();

        good_roundtrip(1 << 20, 0x13, WAIT_MS);
}
END_TEST

/* ---- 5, 6. handshake refusals ---- */

START_TEST(test_handshake_refusals)
{
        char why[256] = "";
        int fd = -1, rc;

        /* A wrong secret: both ends see the HMAC mismatch; the engine says so. */
        struct peer_hs o = good_hs;
        o.secret = "not the shared secret";
        rc = fake_channel(&o, DATA, &fd, why, sizeof(why));
        ck_assert_msg(rc == -EACCES, "handshake %d (%s)", rc, why);
        ck_assert_msg(strstr(why, "wrong secret"), "fake's reason \"%s\"", why);
        assert_status(REPL_CONN_CONNECTING, "wrong secret: HMAC mismatch from node 1", WAIT_MS);
        struct repl_status st = status_now();
        ck_assert_msg(strstr(st.last_error, "refused"), "last_error \"%s\"", st.last_error);
        /* The engine keeps listening: a peer with the right secret gets in at once. */
        good_roundtrip(4096, 0x14, WAIT_MS);

        /* Node 7 is nobody the engine knows. */
        o = good_hs;
        o.node_id = 7;
        rc = fake_channel(&o, DATA, &fd, why, sizeof(why));
        ck_assert_msg(rc == -ENOENT, "node 7: %d (%s)", rc, why);
        assert_status(REPL_CONN_CONNECTING, "unknown node 7 (expected 1)", WAIT_MS);

        /* Node 1 expecting some other node than 2. */
        o = good_hs;
        o.peer_node_id = 3;
        rc = fake_channel(&o, DATA, &fd, why, sizeof(why));
        ck_assert_msg(rc == -ENOENT, "expects 3: %d (%s)", rc, why);
        assert_status(REPL_CONN_CONNECTING, "node 1 expects node 3", WAIT_MS);

        /* Another LUN. */
        o = good_hs;
        o.naa = "6001405a1b2c3d4e5f60718293a4b5c7";
        rc = fake_channel(&o, DATA, &fd, why, sizeof(why));
        ck_assert_msg(rc == -ESRCH, "naa: %d (%s)", rc, why);
        assert_status(REPL_CONN_CONNECTING, "different LUN", WAIT_MS);

        /* Another link protection: refused at the handshake, both ends saying why. */
        o = good_hs;
        o.protection = FRAME_PROTECT_ENCRYPT;
        rc = fake_channel(&o, DATA, &fd, why, sizeof(why));
        ck_assert_msg(rc == -EPROTO, "protection: %d (%s)", rc, why);
        ck_assert_msg(strstr(why, "link protection mismatch"), "fake's reason \"%s\"", why);
        assert_status(REPL_CONN_CONNECTING,
                      "link protection mismatch: node 1 has link_protection = \"encrypt\", node 2 "
                      "has \"authenticate\"",
                      WAIT_MS);

        /* The control channel first: the engine waits for the data channel. */
        rc = fake_channel(&good_hs, CONTROL, &fd, why, sizeof(why));
        ck_assert_msg(rc == -EPROTO, "channel: %d (%s)", rc, why);
        assert_status(REPL_CONN_CONNECTING, "channel mismatch", WAIT_MS);

        /* A good data channel, then a refused control channel: nothing connects. */
        int data = -1;
        rc = fake_channel(&good_hs, DATA, &data, why, sizeof(why));
        ck_assert_msg(rc == 0, "data: %d (%s)", rc, why);
        o = good_hs;
        o.secret = "not the shared secret";
        rc = fake_channel(&o, CONTROL, &fd, why, sizeof(why));
        ck_assert_msg(rc == -EACCES, "control: %d (%s)", rc, why);
        assert_status(REPL_CONN_CONNECTING, "wrong secret", WAIT_MS);
        /* The engine closed the authenticated data channel too. */
        uint8_t b;
        ck_assert_int_eq(repl_read_full(data, &b, 1, WAIT_MS), -ECONNRESET);
        close(data);

        good_roundtrip(4096, 0x15, WAIT_MS);
}
END_TEST

/* ---- 7. size mismatch ---- */

START_TEST(test_size_mismatch)
{
        file_snapshot();
        struct fake f;
        fake_init(&f);
        char why[256] = "";
        ck_assert_int_eq(fake_channel_sealed(&good_hs, DATA, &f.l.data_fd, why, sizeof(why),
                                             &f.l.data_seal, &f.l.data_open),
                         0);
        ck_assert_int_eq(fake_channel_sealed(&good_hs, CONTROL, &f.l.ctl_fd, why, sizeof(why),
                                             &f.l.ctl_seal, &f.l.ctl_open),
                         0);
        fake_recv_engine_state(&f);
        fake_send_state(&f, LUN_SIZE * 2ull);

        /* The engine says why, then hangs up, without ever being Connected. */
        struct repl_rx rx;
        const char *rwhy = NULL;
        int rc = repl_recv_on(f.l.ctl_fd, &f.l.ctl_open, &rx, WAIT_MS, &rwhy);
        ck_assert_msg(rc == 0, "recv: %d %s", rc, rwhy ? rwhy : "");
        ck_assert_int_eq(rx.f.type, TANDEM__REPL__MSG_TYPE__MSG_DISCONNECT);
        const Tandem__Repl__Disconnect *d = (const Tandem__Repl__Disconnect *)rx.msg;
        ck_assert_msg(d->reason && strstr(d->reason, "size mismatch"), "reason \"%s\"",
                      d->reason ? d->reason : "");
        repl_rx_free(&rx);
        uint8_t b;
        ck_assert_int_eq(repl_read_full(f.l.ctl_fd, &b, 1, WAIT_MS), -ECONNRESET);
        ck_assert_int_eq(repl_read_full(f.l.data_fd, &b, 1, WAIT_MS), -ECONNRESET);

        struct repl_status st;
        ck_assert(wait_status(-1, "size mismatch", WAIT_MS, &st));
        ck_assert_msg(strstr(st.last_error, "8388608"), "last_error \"%s\"", st.last_error);
        /* Sampled for a while: never Connected (the back-off keeps it Connecting). */
        int64_t end = mono_ms() + 500;
        while (mono_ms() < end) {
                st = status_now();
                ck_assert_msg(st.conn == REPL_CONN_CONNECTING, "conn %s", repl_conn_name(st.conn));
                ck_assert_msg(strstr(st.last_error, "size mismatch"), "last_error \"%s\"",
                              st.last_error);
                nap_ms(20);
        }
        /* The data channel is closed: a write sent anyway changes nothing. */
        uint8_t *p = pattern(BLK, 0x47);
        (void)fake_send_write(&f, 1, 4096, BLK, REPL_IO_WRITE, p, BLK);
        free(p);
        close(f.l.data_fd);
        close(f.l.ctl_fd);
        f.l.data_fd = f.l.ctl_fd = -1;
        fake_close(&f);
        assert_file_unchanged();

        /* A fitting peer is accepted once the refusal back-off (5 s) has passed. */
        int64_t t0 = mono_ms();
        good_roundtrip(4096, 0x16, REFUSED_WAIT);
        ck_assert_int_lt(mono_ms() - t0, REFUSED_WAIT);
}
END_TEST

/* ---- 8. silent peer ---- */

START_TEST(test_silent_peer)
{
        struct fake f;
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);

        /* Answering pings keeps the link up well past the 300 ms timeout. */
        nap_ms(600);
        struct repl_status st = status_now();
        ck_assert_msg(st.conn == REPL_CONN_CONNECTED, "conn %s last_error \"%s\"",
                      repl_conn_name(st.conn), st.last_error);
        pthread_mutex_lock(&f.lock);
        ck_assert_uint_ge(f.seen.n_pings, 3); /* every timeout/4 */
        ck_assert(!f.ctl_closed);
        pthread_mutex_unlock(&f.lock);

        /* Then silence: dropped after the timeout, not long after. */
        fake_set_answer_pings(&f, false);
        int64_t t0 = mono_ms();
        ck_assert(fake_wait_closed(&f, 2000));
        int64_t waited = mono_ms() - t0;
        ck_assert_msg(waited >= 200 && waited < 1500, "dropped after %lld ms", (long long)waited);
        assert_status(REPL_CONN_CONNECTING, "silent", WAIT_MS);
        fake_close(&f);

        good_roundtrip(4096, 0x17, WAIT_MS);
}
END_TEST

/* ---- 9. a run of bad peers, each followed by a good one ---- */

/* Each bad peer returns the reason the engine must give for dropping or refusing it. */
static const char *bad_out_of_order(void)
{
        struct fake f;
        fake_connect(&f);
        uint8_t *p = pattern(BLK, 0x61);
        ck_assert_int_eq(fake_send_write(&f, 2, 0, BLK, REPL_IO_WRITE, p, BLK), 0);
        free(p);
        expect_dropped(&f, "out-of-order");
        return "out-of-order";
}

static const char *bad_unaligned(void)
{
        struct fake f;
        fake_connect(&f);
        uint8_t *p = pattern(BLK, 0x62);
        ck_assert_int_eq(fake_send_write(&f, 1, 3, BLK, REPL_IO_WRITE, p, BLK), 0);
        free(p);
        expect_dropped(&f, "malformed");
        return "malformed";
}

static const char *bad_garbage(void)
{
        struct fake f;
        fake_connect(&f);
        uint8_t junk[32];
        memset(junk, 0x5c, sizeof(junk));
        ck_assert_int_eq(repl_write_full(f.l.data_fd, junk, sizeof(junk), WAIT_MS), 0);
        expect_dropped(&f, "bad magic");
        return "bad magic";
}

static const char *bad_secret(void)
{
        struct peer_hs o = good_hs;
        o.secret = "not the shared secret";
        char why[256];
        int fd;
        ck_assert_int_eq(fake_channel(&o, DATA, &fd, why, sizeof(why)), -EACCES);
        return "wrong secret";
}

static const char *bad_node(void)
{
        struct peer_hs o = good_hs;
        o.node_id = 7;
        char why[256];
        int fd;
        ck_assert_int_eq(fake_channel(&o, DATA, &fd, why, sizeof(why)), -ENOENT);
        return "unknown node 7";
}

static const char *bad_vanish(void)
{
        struct fake f;
        fake_connect(&f);
        assert_status(REPL_CONN_CONNECTED, NULL, WAIT_MS);
        fake_close(&f);
        return "disconnected";
}

START_TEST(test_reconnect_after_each_bad_case)
{
        static const char *(*const bad[])(void) = {bad_out_of_order, bad_unaligned, bad_garbage,
                                                   bad_secret,       bad_node,      bad_vanish};
        file_snapshot();
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *reason = bad[i]();
                assert_status(REPL_CONN_CONNECTING, reason, WAIT_MS);
                assert_file_unchanged();
                /* A good peer right after: connected, its write applied and acknowledged. */
                good_roundtrip(1 << 20, (uint8_t)(0x40 + i), WAIT_MS);
                file_snapshot();
        }
}
END_TEST

static Suite *engine_suite(void)
{
        Suite *s = suite_create("repl_engine");
        TCase *tc = tcase_create("engine");
        tcase_add_checked_fixture(tc, setup_1s, engine_stop);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_write_flush_ack);
        tcase_add_test(tc, test_out_of_order_seq);
        tcase_add_test(tc, test_malformed_writes);
        tcase_add_test(tc, test_write_with_state);
        tcase_add_test(tc, test_bad_frames);
        tcase_add_test(tc, test_handshake_refusals);
        tcase_add_test(tc, test_size_mismatch);
        tcase_add_test(tc, test_reconnect_after_each_bad_case);
        suite_add_tcase(s, tc);

        TCase *fast = tcase_create("timeout_300ms");
        tcase_add_checked_fixture(fast, setup_300ms, engine_stop);
        tcase_set_timeout(fast, 30);
        tcase_add_test(fast, test_silent_peer);
        suite_add_tcase(s, fast);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(engine_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
