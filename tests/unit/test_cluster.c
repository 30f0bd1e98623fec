/*
 * Unit tests of daemon/cluster/: CPG message encoding and checking, membership
 * bookkeeping, and the API's behaviour without a reachable corosync (the real corosync is
 * exercised by tests/cluster/cpg_smoke).
 */
#include <check.h>
#include <corosync/cpg.h>
#include <errno.h>
#include <qb/qbloop.h>
#include <qb/qbutil.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.pb-c.h"
#include "cluster/cluster_internal.h"
#include "tandem/cluster.h"

#define NAA  "6007a6e64000000000000000000000a1"
#define NAA2 "6007a6e640000000000000000000ffff"

/* ---------------------------------------------------------------- messages */

static struct cluster_outdate_msg sample(void)
{
        struct cluster_outdate_msg m = {.from_node = 1,
                                        .incarnation = 0x1122334455667788ull,
                                        .seq = 42,
                                        .peer = 2,
                                        .gen = 0xDEADBEEFCAFEF00Dull};
        strcpy(m.naa, NAA);
        return m;
}

START_TEST(test_msg_round_trip)
{
        struct cluster_outdate_msg m = sample(), out;
        uint8_t *buf = NULL;
        size_t len = 0;
        ck_assert_int_eq(cluster_msg_encode_outdate(&m, &buf, &len), 0);
        ck_assert_uint_gt(len, 0);
        ck_assert_int_eq(cluster_msg_decode(buf, len, 1, &out), 0);
        ck_assert_uint_eq(out.from_node, 1);
        ck_assert_uint_eq(out.incarnation, m.incarnation);
        ck_assert_uint_eq(out.seq, 42);
        ck_assert_str_eq(out.naa, NAA);
        ck_assert_uint_eq(out.peer, 2);
        ck_assert_uint_eq(out.gen, m.gen);
        /* The sender CPG reports must be the node the message claims to come from. */
        ck_assert_int_eq(cluster_msg_decode(buf, len, 2, &out), -EINVAL);
        /* Truncated or garbage bytes are not a message. */
        ck_assert_int_eq(cluster_msg_decode(buf, len - 1, 1, &out), -EPROTO);
        free(buf);
        static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        ck_assert_int_eq(cluster_msg_decode(junk, sizeof(junk), 1, &out), -EPROTO);
}
END_TEST

START_TEST(test_msg_encode_refuses_bad_fields)
{
        struct cluster_outdate_msg m = sample();
        uint8_t *buf = NULL;
        size_t len = 0;
        strcpy(m.naa, "6007a6e64");
        ck_assert_int_eq(cluster_msg_encode_outdate(&m, &buf, &len), -EINVAL);
        m = sample();
        strcpy(m.naa, "x007a6e64000000000000000000000a1");
        ck_assert_int_eq(cluster_msg_encode_outdate(&m, &buf, &len), -EINVAL);
        m = sample();
        m.peer = 0;
        ck_assert_int_eq(cluster_msg_encode_outdate(&m, &buf, &len), -EINVAL);
        m.peer = 256;
        ck_assert_int_eq(cluster_msg_encode_outdate(&m, &buf, &len), -EINVAL);
        m = sample();
        m.from_node = 0;
        ck_assert_int_eq(cluster_msg_encode_outdate(&m, &buf, &len), -EINVAL);
        ck_assert_ptr_null(buf);
}
END_TEST

/* Packs a hand-made ClusterMessage (what another, maybe newer or broken, node could send). */
static int decode_raw(uint32_t version, int body, const char *naa, uint32_t peer,
                      struct cluster_outdate_msg *out)
{
        Tandem__Cluster__Outdate od = TANDEM__CLUSTER__OUTDATE__INIT;
        od.naa = (char *)naa;
        od.peer = peer;
        od.gen = 7;
        Tandem__Cluster__ClusterMessage cm = TANDEM__CLUSTER__CLUSTER_MESSAGE__INIT;
        cm.version = (Tandem__Cluster__ClusterVersion)version;
        cm.from_node = 5;
        cm.seq = 1;
        if (body) {
                cm.body_case = TANDEM__CLUSTER__CLUSTER_MESSAGE__BODY_OUTDATE;
                cm.outdate = &od;
        }
        uint8_t buf[256];
        ck_assert_uint_le(tandem__cluster__cluster_message__get_packed_size(&cm), sizeof(buf));
        size_t len = tandem__cluster__cluster_message__pack(&cm, buf);
        return cluster_msg_decode(buf, len, 5, out);
}

START_TEST(test_msg_decode_checks)
{
        struct cluster_outdate_msg out;
        ck_assert_int_eq(decode_raw(1, 1, NAA, 2, &out), 0);
        ck_assert_uint_eq(out.gen, 7);
        ck_assert_uint_eq(out.from_node, 5);
        /* Version 0 (unset) is read as version 1; a newer one is refused as such. */
        ck_assert_int_eq(decode_raw(0, 1, NAA, 2, &out), 0);
        ck_assert_int_eq(decode_raw(2, 1, NAA, 2, &out), -EPROTONOSUPPORT);
        /* No body: a kind of message this build does not know. */
        ck_assert_int_eq(decode_raw(1, 0, NAA, 2, &out), -ENOMSG);
        ck_assert_int_eq(decode_raw(1, 1, "6007", 2, &out), -EINVAL);
        ck_assert_int_eq(decode_raw(1, 1, "", 2, &out), -EINVAL);
        ck_assert_int_eq(decode_raw(1, 1, NAA, 0, &out), -EINVAL);
        ck_assert_int_eq(decode_raw(1, 1, NAA, 300, &out), -EINVAL);
}
END_TEST

/* ---------------------------------------------------------------- membership */

START_TEST(test_membership_sorted_unique)
{
        struct cluster_membership ms = {0};
        const struct cluster_member list[] = {{3, 100}, {1, 200}, {3, 100}, {2, 50}, {1, 150}};
        cluster_membership_set(&ms, list, 5);
        ck_assert_uint_eq(ms.n, 4); /* the duplicate (3,100) once */
        ck_assert(!ms.truncated);
        ck_assert_uint_eq(ms.m[0].nodeid, 1);
        ck_assert_uint_eq(ms.m[0].pid, 150);
        ck_assert_uint_eq(ms.m[1].pid, 200);
        ck_assert_uint_eq(ms.m[3].nodeid, 3);
        ck_assert(cluster_membership_has(&ms, 2, 50));
        ck_assert(!cluster_membership_has(&ms, 2, 51));
        ck_assert(!cluster_membership_has(&ms, 4, 100));

        /* Node ids: each once (node 1 has two processes), ascending. */
        uint32_t ids[8];
        ck_assert_uint_eq(cluster_membership_node_ids(&ms, ids, 8), 3);
        ck_assert_uint_eq(ids[0], 1);
        ck_assert_uint_eq(ids[1], 2);
        ck_assert_uint_eq(ids[2], 3);
        /* A short buffer gets what fits; the count is still all of them. */
        ids[1] = 99;
        ck_assert_uint_eq(cluster_membership_node_ids(&ms, ids, 1), 3);
        ck_assert_uint_eq(ids[0], 1);
        ck_assert_uint_eq(ids[1], 99);

        /* A configuration change replaces the list: node 3 left. */
        const struct cluster_member after[] = {{2, 50}, {1, 150}};
        cluster_membership_set(&ms, after, 2);
        ck_assert_uint_eq(cluster_membership_node_ids(&ms, ids, 8), 2);
        ck_assert(!cluster_membership_has(&ms, 3, 100));
        cluster_membership_clear(&ms);
        ck_assert_uint_eq(cluster_membership_node_ids(&ms, ids, 8), 0);
}
END_TEST

START_TEST(test_membership_truncated)
{
        struct cluster_membership ms = {0};
        struct cluster_member list[CLUSTER_MAX_MEMBERS + 5];
        for (size_t i = 0; i < CLUSTER_MAX_MEMBERS + 5; i++)
                list[i] = (struct cluster_member){(uint32_t)(i + 1), 10};
        cluster_membership_set(&ms, list, CLUSTER_MAX_MEMBERS + 5);
        ck_assert(ms.truncated);
        ck_assert_uint_eq(ms.n, CLUSTER_MAX_MEMBERS);
        cluster_membership_set(&ms, list, 2);
        ck_assert(!ms.truncated);
        ck_assert_uint_eq(ms.n, 2);
}
END_TEST

/* ---------------------------------------------------------------- API without corosync */

struct cb_record {
        int calls;
        int rc;
};

static void record_cb(void *arg, int rc)
{
        struct cb_record *r = arg;
        r->calls++;
        r->rc = rc;
}

static void stop_loop(void *data)
{
        qb_loop_stop(data);
}

START_TEST(test_api_not_started)
{
        struct cb_record rec = {0};
        ck_assert(!cluster_enabled());
        ck_assert(!cluster_quorate());
        uint32_t ids[4];
        ck_assert_uint_eq(cluster_members(ids, 4), 0);
        struct cluster_status st;
        cluster_get_status(&st);
        ck_assert(!st.enabled);
        ck_assert_int_eq(cluster_outdate_peer(NAA, 2, 1, 100, record_cb, &rec), -ENOTCONN);
        ck_assert_int_eq(cluster_outdate_peer("bad", 2, 1, 100, record_cb, &rec), -EINVAL);
        ck_assert_int_eq(cluster_outdate_peer(NAA, 0, 1, 100, record_cb, &rec), -EINVAL);
        ck_assert_int_eq(cluster_outdate_peer(NAA, 2, 1, 0, record_cb, &rec), -EINVAL);
        ck_assert_int_eq(cluster_outdate_peer(NAA, 2, 1, 100, NULL, &rec), -EINVAL);
        ck_assert_int_eq(rec.calls, 0);
        cluster_stop(); /* harmless when not started */
}
END_TEST

/*
 * Node 200 is no corosync node here (none runs in this namespace, or its nodeid differs):
 * the module starts anyway, keeps retrying, is not quorate, and refuses Outdate requests
 * through the callback with -EAGAIN, after the call returned.
 */
START_TEST(test_api_without_corosync)
{
        qb_loop_t *loop = qb_loop_create();
        ck_assert_ptr_nonnull(loop);
        char err[256] = "";
        ck_assert_int_eq(cluster_start(loop, 0, "tandem", err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(cluster_start(loop, 200, "", err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(cluster_start(loop, 200, "tandem-unit", err, sizeof(err)), 0);
        ck_assert_int_eq(cluster_start(loop, 200, "tandem-unit", err, sizeof(err)), -EALREADY);
        ck_assert(cluster_enabled());
        ck_assert(!cluster_quorate());
        struct cluster_status st;
        cluster_get_status(&st);
        ck_assert(st.enabled);
        ck_assert(!st.cpg_connected);
        ck_assert(!st.quorate);
        ck_assert_uint_eq(st.node_id, 200);
        ck_assert_str_eq(st.group, "tandem-unit");
        ck_assert_uint_eq(st.n_members, 0);
        ck_assert_str_ne(st.last_error, ""); /* says why it is not connected */

        /* Our own node id is no peer. */
        struct cb_record rec = {0}, queued = {0};
        ck_assert_int_eq(cluster_outdate_peer(NAA, 200, 9, 500, record_cb, &rec), -EINVAL);
        ck_assert_int_eq(cluster_outdate_peer(NAA, 7, 9, 500, record_cb, &rec), 0);
        ck_assert_int_eq(rec.calls, 0); /* never from within the call */
        qb_loop_timer_handle t;
        ck_assert_int_eq(
            qb_loop_timer_add(loop, QB_LOOP_LOW, 200 * 1000000ull, loop, stop_loop, &t), 0);
        qb_loop_run(loop);
        ck_assert_int_eq(rec.calls, 1);
        ck_assert_int_eq(rec.rc, -EAGAIN);

        /* A request still queued when the module stops ends with -ECANCELED. */
        ck_assert_int_eq(cluster_outdate_peer(NAA2, 7, 9, 500, record_cb, &queued), 0);
        cluster_stop();
        ck_assert_int_eq(queued.calls, 1);
        ck_assert_int_eq(queued.rc, -ECANCELED);
        ck_assert(!cluster_enabled());
        ck_assert_int_eq(cluster_outdate_peer(NAA, 7, 9, 500, record_cb, &rec), -ENOTCONN);
        ck_assert_int_eq(rec.calls, 1);

        /* It can start again (a daemon restarting its membership). */
        ck_assert_int_eq(cluster_start(loop, 201, "tandem-unit", err, sizeof(err)), 0);
        cluster_get_status(&st);
        ck_assert_uint_eq(st.node_id, 201);
        cluster_stop();
        qb_loop_destroy(loop);
}
END_TEST

/* ---------------------------------------------------------------- live (cpg_smoke) */

/*
 * Run by tests/cluster/cpg_smoke inside its namespace, next to a single-node corosync
 * (nodeid 1) and a tandemd in the group (TDM_CLUSTER_LIVE=1): not part of the plain run.
 */
struct live {
        qb_loop_t *loop;
        struct cb_record sent;
        int handled;
        char naa[33];
        uint32_t by_node;
        uint64_t gen;
};

static void live_handler(void *arg, const char *naa, uint32_t by_node, uint64_t gen)
{
        struct live *l = arg;
        l->handled++;
        snprintf(l->naa, sizeof(l->naa), "%s", naa);
        l->by_node = by_node;
        l->gen = gen;
        qb_loop_stop(l->loop);
}

/* Runs the loop in 50 ms steps until done(l) or about `ms` passed. */
static bool live_run_until(struct live *l, bool (*done)(struct live *), unsigned ms)
{
        for (unsigned waited = 0; !done(l) && waited < ms; waited += 50) {
                qb_loop_timer_handle t;
                qb_loop_timer_add(l->loop, QB_LOOP_LOW, 50 * 1000000ull, l->loop, stop_loop, &t);
                qb_loop_run(l->loop);
        }
        return done(l);
}

static bool live_joined(struct live *l)
{
        (void)l;
        uint32_t ids[4];
        return cluster_quorate() && cluster_members(ids, 4) >= 1 && ids[0] == 1;
}

static bool live_sent(struct live *l)
{
        return l->sent.calls > 0;
}

static bool live_handled(struct live *l)
{
        return l->handled > 0;
}

/*
 * Multicasts a raw Outdate from a child process (CPG has one membership per process and
 * group, so this process cannot join twice). Returns the child's exit status.
 */
static int raw_outdate(uint32_t from_node, uint32_t peer, uint64_t gen)
{
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                cpg_callbacks_t cbs = {0};
                cpg_handle_t h;
                struct cpg_name name = {.length = 6};
                memcpy(name.value, "tandem", 6);
                if (cpg_initialize(&h, &cbs) != CS_OK || cpg_join(h, &name) != CS_OK)
                        _exit(2);
                struct cluster_outdate_msg m = {
                    .from_node = from_node, .incarnation = 99, .seq = 1, .peer = peer, .gen = gen};
                strcpy(m.naa, NAA2);
                uint8_t *buf;
                size_t len;
                if (cluster_msg_encode_outdate(&m, &buf, &len))
                        _exit(3);
                struct iovec iov = {.iov_base = buf, .iov_len = len};
                cs_error_t cs = CS_ERR_TRY_AGAIN;
                for (int i = 0; i < 100 && cs == CS_ERR_TRY_AGAIN; i++)
                        if ((cs = cpg_mcast_joined(h, CPG_TYPE_AGREED, &iov, 1)) ==
                            CS_ERR_TRY_AGAIN)
                                usleep(20000);
                cpg_finalize(h);
                _exit(cs == CS_OK ? 0 : 4);
        }
        int st = 0;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static struct live *live_now;

static void live_sent_cb(void *arg, int rc)
{
        record_cb(arg, rc);
        qb_loop_stop(live_now->loop);
}

/* A fence-peer handler script in a temp dir: its body after the shebang. */
static void write_handler(const char *path, const char *body)
{
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "#!/bin/sh\n%s\n", body);
        fclose(f);
        ck_assert_int_eq(chmod(path, 0755), 0);
}

START_TEST(test_fence_peer_handler)
{
        char dir[] = "/tmp/tandem-fence-XXXXXX", path[128], out[160], line[128] = "";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/handler", dir);
        snprintf(out, sizeof(out), "%s/args", dir);

        cluster_set_fence_peer("");
        ck_assert_int_eq(cluster_fence_peer(2, "beta", 1000, true), -ENOENT);

        /* Exit 0: fenced. It gets the name, the id and the time left. */
        char body[512];
        snprintf(body, sizeof(body), "echo \"$1 $2 $3 $TANDEM_FENCE_TIMEOUT_MS\" > %s; exit 0",
                 out);
        write_handler(path, body);
        cluster_set_fence_peer(path);
        ck_assert_int_eq(cluster_fence_peer(2, "beta", 1500, false), 0);
        FILE *f = fopen(out, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
        fclose(f);
        ck_assert_str_eq(line, "beta 2 outdate 1500\n");
        ck_assert_int_eq(cluster_fence_peer(7, "gamma", 900, true), 0);
        f = fopen(out, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
        fclose(f);
        ck_assert_str_eq(line, "gamma 7 fence 900\n");

        /* Any other exit, or a signal: not fenced. */
        write_handler(path, "exit 1");
        ck_assert_int_eq(cluster_fence_peer(2, "beta", 1000, true), -EIO);
        write_handler(path, "kill -9 $$");
        ck_assert_int_eq(cluster_fence_peer(2, "beta", 1000, true), -EIO);
        /* Too slow: killed at the timeout. */
        write_handler(path, "exec sleep 5");
        uint64_t t0 = qb_util_nano_current_get();
        ck_assert_int_eq(cluster_fence_peer(2, "beta", 300, true), -ETIMEDOUT);
        ck_assert_uint_lt(qb_util_nano_current_get() - t0, 2000000000ull);
        /* Missing: an error, not a hang. */
        unlink(path);
        ck_assert_int_eq(cluster_fence_peer(2, "beta", 1000, true), -EIO);

        cluster_set_fence_peer("");
        unlink(out);
        rmdir(dir);
}
END_TEST

START_TEST(test_live_outdate)
{
        struct live l = {.loop = qb_loop_create()};
        char err[256] = "";
        ck_assert_int_eq(cluster_start(l.loop, 1, "tandem", err, sizeof(err)), 0);
        cluster_set_outdate_handler(live_handler, &l);
        live_now = &l;
        ck_assert_msg(live_run_until(&l, live_joined, 10000), "not quorate with member 1 in 10 s");

        /* Our own request comes back in the agreed order. Node 2 is in neither the group nor
         * corosync's ring (a one-node cluster): delivered, but the peer is unreachable. */
        uint64_t t0 = qb_util_nano_current_get();
        ck_assert_int_eq(cluster_outdate_peer(NAA, 2, 0xABCDEFull, 3000, live_sent_cb, &l.sent), 0);
        ck_assert(live_run_until(&l, live_sent, 5000));
        ck_assert_int_eq(l.sent.rc, CLUSTER_OUTDATE_PEER_UNREACHABLE);
        ck_assert(!cluster_two_node()); /* this corosync.conf has no two_node */
        ck_assert_int_eq(l.handled, 0); /* it named node 2, not us */
        printf("live: outdate delivered in %.1f ms\n",
               (double)(qb_util_nano_current_get() - t0) / 1e6);

        /* A message claiming another sender than CPG reports is dropped. */
        ck_assert_int_eq(raw_outdate(2, 1, 5), 0);
        live_run_until(&l, live_handled, 1000);
        ck_assert_int_eq(l.handled, 0);
        /* A valid one naming this node reaches the handler. */
        ck_assert_int_eq(raw_outdate(1, 1, 0x77), 0);
        ck_assert(live_run_until(&l, live_handled, 5000));
        ck_assert_int_eq(l.handled, 1);
        ck_assert_str_eq(l.naa, NAA2);
        ck_assert_uint_eq(l.by_node, 1);
        ck_assert_uint_eq(l.gen, 0x77);
        cluster_stop();
        qb_loop_destroy(l.loop);
}
END_TEST

static Suite *cluster_suite(void)
{
        Suite *s = suite_create("cluster");
        TCase *tc = tcase_create("cluster");
        tcase_set_timeout(tc, 20);
        tcase_add_test(tc, test_msg_round_trip);
        tcase_add_test(tc, test_msg_encode_refuses_bad_fields);
        tcase_add_test(tc, test_msg_decode_checks);
        tcase_add_test(tc, test_membership_sorted_unique);
        tcase_add_test(tc, test_membership_truncated);
        tcase_add_test(tc, test_api_not_started);
        tcase_add_test(tc, test_api_without_corosync);
        tcase_add_test(tc, test_fence_peer_handler);
        if (getenv("TDM_CLUSTER_LIVE"))
                tcase_add_test(tc, test_live_outdate);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(cluster_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
