/*
 * Cluster membership: the Corosync CPG group and the quorum service, on the main loop.
 *
 * Connection life: cluster_start tries to connect at once and, while corosync is missing,
 * every second (a timer). A dispatch error or a hang-up on either fd drops that
 * connection (quorate becomes false, pending Outdate requests fail with -EAGAIN) and the
 * timer reconnects. CPG is connected first: it tells us corosync's nodeid, which must
 * equal our node_id before the quorum service is trusted.
 *
 * Outdate requests may come from any thread: they go through a mutex-guarded inbox and an
 * eventfd to the loop, where they are multicast (CPG_TYPE_AGREED) and completed when our
 * own message comes back in the agreed order.
 */
#include <corosync/corotypes.h>
#include <corosync/cpg.h>
#include <corosync/quorum.h>
#include <corosync/votequorum.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <qb/qbutil.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cluster_internal.h"
#include "tandem/config.h"
#include "tandem/log.h"

#define RECONNECT_MS  1000u /* corosync missing or gone: try again this often */
#define SEND_RETRY_MS 20u   /* cpg_mcast_joined said TRY_AGAIN (membership change, flow) */
#define NS_PER_MS     1000000ull

struct outdate_req {
        struct outdate_req *next;
        char naa[33];
        uint32_t peer;
        uint64_t gen;
        uint64_t deadline_ns; /* qb_util_nano_current_get() clock */
        void (*cb)(void *arg, int rc);
        void *arg;
        uint64_t seq; /* 0 until multicast */
        /* Delivered in ring delivered_ring; decided once the quorum service has seen it. */
        bool delivered;
        uint64_t delivered_ring;
        int membership_outcome;
        qb_loop_timer_handle timer;
        bool timer_armed;
};

/* Control-thread state. */
static struct {
        qb_loop_t *loop;
        bool started;
        uint32_t node_id;
        char group[64];
        uint64_t incarnation, next_seq;

        cpg_handle_t cpg;
        bool cpg_open;
        int cpg_fd;
        bool joined;
        uint32_t cs_nodeid; /* corosync's nodeid for us, 0 until known */
        struct cluster_membership members;
        /* corosync's ring (totem) membership: node ids, in CPG's delivery order */
        uint32_t ring[CLUSTER_MAX_MEMBERS];
        size_t n_ring;
        uint64_t ring_seq;        /* of that ring */
        uint64_t quorum_ring_seq; /* the ring the quorum service last reported on */

        quorum_handle_t quorum;
        bool quorum_open;
        int quorum_fd;
        bool quorum_says_quorate;
        bool no_quorum_provider_logged;

        qb_loop_timer_handle reconnect_timer;
        bool reconnect_armed;
        char last_error[256];

        int wake_fd;
        struct outdate_req *pending; /* received from the inbox, not completed yet */

        void (*outdate_handler)(void *arg, const char *naa, uint32_t by_node, uint64_t gen);
        void *outdate_handler_arg;
} cl = {.cpg_fd = -1, .quorum_fd = -1, .wake_fd = -1};

/* Requests handed over by any thread; inbox_open mirrors "started" for them. */
static pthread_mutex_t inbox_lock = PTHREAD_MUTEX_INITIALIZER;
static struct outdate_req *inbox_head, *inbox_tail;
static bool inbox_open;

static atomic_bool enabled_flag, quorate_flag, two_node_flag;

static void reconnect_arm(void);
static void cpg_drop(const char *why);
static void quorum_drop(const char *why);

/* ---------------------------------------------------------------- state helpers */

/* Records why we are not (fully) connected; logs it when the reason changes. */
__attribute__((format(printf, 1, 2))) static void set_error(const char *fmt, ...)
{
        char msg[sizeof(cl.last_error)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (strcmp(msg, cl.last_error) != 0)
                log_warn("cluster: %s (retrying every %u ms)", msg, RECONNECT_MS);
        snprintf(cl.last_error, sizeof(cl.last_error), "%s", msg);
}

static void clear_error(void)
{
        if (cl.last_error[0])
                log_notice("cluster: connected to corosync again (was: %s)", cl.last_error);
        cl.last_error[0] = '\0';
}

static void publish_quorate(void)
{
        bool q =
            cl.started && cl.quorum_open && cl.quorum_says_quorate && cl.cs_nodeid == cl.node_id;
        bool was = atomic_exchange(&quorate_flag, q);
        if (was != q)
                log_notice("cluster: node %u is %s", cl.node_id, q ? "quorate" : "NOT quorate");
}

static void members_text(char *out, size_t n)
{
        uint32_t ids[CLUSTER_MAX_MEMBERS];
        size_t k = cluster_membership_node_ids(&cl.members, ids, CLUSTER_MAX_MEMBERS);
        size_t used = 0;
        out[0] = '\0';
        for (size_t i = 0; i < k && i < CLUSTER_MAX_MEMBERS && used < n; i++)
                used += (size_t)snprintf(out + used, n - used, "%s%" PRIu32, i ? " " : "", ids[i]);
}

/* ---------------------------------------------------------------- outdate requests */

/* Ends a request that is in no list: its timer goes, then its callback runs once. */
static void req_complete(struct outdate_req *r, int rc)
{
        if (r->timer_armed)
                qb_loop_timer_del(cl.loop, r->timer);
        if (rc)
                log_warn("cluster: marking node %" PRIu32 " Outdated for naa %s failed: %s",
                         r->peer, r->naa, strerror(-rc));
        r->cb(r->arg, rc);
        free(r);
}

static void req_finish(struct outdate_req *r, int rc)
{
        for (struct outdate_req **p = &cl.pending; *p; p = &(*p)->next)
                if (*p == r) {
                        *p = r->next;
                        break;
                }
        req_complete(r, rc);
}

/* Completes every pending request with rc (the list is detached first: cb may re-enter). */
static void pending_fail_all(int rc)
{
        struct outdate_req *list = cl.pending;
        cl.pending = NULL;
        while (list) {
                struct outdate_req *r = list;
                list = r->next;
                req_complete(r, rc);
        }
}

static void req_timer_fired(void *data);

static void req_timer_arm(struct outdate_req *r, uint64_t ms)
{
        if (qb_loop_timer_add(cl.loop, QB_LOOP_MED, ms * NS_PER_MS, r, req_timer_fired,
                              &r->timer) == 0)
                r->timer_armed = true;
        else
                req_finish(r, -ENOMEM);
}

static bool can_send(void)
{
        return cl.cpg_open && cl.joined && atomic_load(&quorate_flag);
}

static void req_send(struct outdate_req *r)
{
        uint64_t now = qb_util_nano_current_get();
        if (now >= r->deadline_ns) {
                req_finish(r, -ETIMEDOUT);
                return;
        }
        if (!can_send()) {
                req_finish(r, -EAGAIN);
                return;
        }
        struct cluster_outdate_msg m = {.from_node = cl.node_id,
                                        .incarnation = cl.incarnation,
                                        .seq = cl.next_seq + 1,
                                        .peer = r->peer,
                                        .gen = r->gen};
        memcpy(m.naa, r->naa, sizeof(m.naa));
        uint8_t *buf;
        size_t len;
        int rc = cluster_msg_encode_outdate(&m, &buf, &len);
        if (rc) {
                req_finish(r, rc);
                return;
        }
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        cs_error_t cs = cpg_mcast_joined(cl.cpg, CPG_TYPE_AGREED, &iov, 1);
        free(buf);
        uint64_t left_ms = (r->deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS;
        if (cs == CS_OK) {
                r->seq = ++cl.next_seq;
                log_notice("cluster: asking group %s to mark node %" PRIu32
                           " Outdated for naa %s (generation %016" PRIX64 ")",
                           cl.group, r->peer, r->naa, r->gen);
                req_timer_arm(r, left_ms);
        } else if (cs == CS_ERR_TRY_AGAIN) {
                req_timer_arm(r, left_ms < SEND_RETRY_MS ? left_ms : SEND_RETRY_MS);
        } else {
                log_warn("cluster: cpg_mcast_joined: %s", cs_strerror(cs));
                req_finish(r, -EAGAIN);
        }
}

static void req_timer_fired(void *data)
{
        struct outdate_req *r = data;
        r->timer_armed = false;
        if (r->seq == 0)
                req_send(r); /* a TRY_AGAIN retry (or its deadline) */
        else
                req_finish(r, -ETIMEDOUT);
}

static bool ring_has(uint32_t nodeid)
{
        for (size_t i = 0; i < cl.n_ring; i++)
                if (cl.ring[i] == nodeid)
                        return true;
        return false;
}

/* Where the peer is, as the ring our Outdate was delivered in says (see cluster_outdate_peer). */
static int membership_outcome(uint32_t peer)
{
        uint32_t ids[CLUSTER_MAX_MEMBERS];
        size_t n = cluster_membership_node_ids(&cl.members, ids, CLUSTER_MAX_MEMBERS);
        for (size_t i = 0; i < n && i < CLUSTER_MAX_MEMBERS; i++)
                if (ids[i] == peer)
                        return 0;
        if (ring_has(peer)) {
                log_notice("cluster: node %" PRIu32 " has no tandemd in group %s but is in our "
                           "membership: one partition",
                           peer, cl.group);
                return CLUSTER_OUTDATE_PEER_ABSENT;
        }
        return CLUSTER_OUTDATE_PEER_UNREACHABLE;
}

/*
 * Quorum is judged for the ring the message was delivered in: a partition shows in CPG (the
 * ring changes, our message is delivered in the new one) before the quorum service reports
 * the new ring as not quorate, and in between the old "quorate" must not count.
 */
static void req_decide(struct outdate_req *r)
{
        if (cl.quorum_ring_seq < r->delivered_ring)
                return; /* on_quorum decides it */
        req_finish(r, atomic_load(&quorate_flag) ? r->membership_outcome : -EAGAIN);
}

static void pending_decide(void)
{
        struct outdate_req *r = cl.pending, *next;
        for (; r; r = next) {
                next = r->next;
                if (r->delivered)
                        req_decide(r);
        }
}

/* Our own message came back in the agreed order. */
static void req_delivered(uint64_t seq)
{
        for (struct outdate_req *r = cl.pending; r; r = r->next)
                if (r->seq == seq) {
                        r->delivered = true;
                        r->delivered_ring = cl.ring_seq;
                        r->membership_outcome = membership_outcome(r->peer);
                        req_decide(r);
                        return;
                }
        log_info("cluster: our message %" PRIu64 " came back after its request ended", seq);
}

static int32_t wake_ready(int32_t fd, int32_t revents, void *data)
{
        (void)revents;
        (void)data;
        uint64_t v;
        if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_warn("cluster: wake eventfd: %s", strerror(errno));
        pthread_mutex_lock(&inbox_lock);
        struct outdate_req *list = inbox_head;
        inbox_head = inbox_tail = NULL;
        pthread_mutex_unlock(&inbox_lock);
        while (list) {
                struct outdate_req *r = list;
                list = r->next;
                r->next = cl.pending;
                cl.pending = r;
                req_send(r);
        }
        return 0;
}

int cluster_outdate_peer(const char *naa, uint32_t peer, uint64_t gen, unsigned timeout_ms,
                         void (*cb)(void *arg, int rc), void *arg)
{
        if (!naa || !tdm_naa_valid(naa) || peer < 1 || peer > 255 || timeout_ms == 0 || !cb)
                return -EINVAL;
        struct outdate_req *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        memcpy(r->naa, naa, sizeof(r->naa));
        r->peer = peer;
        r->gen = gen;
        r->deadline_ns = qb_util_nano_current_get() + (uint64_t)timeout_ms * NS_PER_MS;
        r->cb = cb;
        r->arg = arg;
        pthread_mutex_lock(&inbox_lock);
        /* cl.node_id is written only while inbox_open is false, under this lock. */
        int rc = !inbox_open ? -ENOTCONN : peer == cl.node_id ? -EINVAL : 0;
        if (rc == 0) {
                if (inbox_tail)
                        inbox_tail->next = r;
                else
                        inbox_head = r;
                inbox_tail = r;
                uint64_t one = 1;
                if (write(cl.wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                        log_warn("cluster: wake eventfd: %s", strerror(errno));
        }
        pthread_mutex_unlock(&inbox_lock);
        if (rc)
                free(r);
        return rc;
}

void cluster_set_outdate_handler(void (*fn)(void *arg, const char *naa, uint32_t by_node,
                                            uint64_t gen),
                                 void *arg)
{
        cl.outdate_handler = fn;
        cl.outdate_handler_arg = arg;
}

/* ---------------------------------------------------------------- CPG */

static const char *cpg_reason_name(uint32_t reason)
{
        switch (reason) {
        case CPG_REASON_JOIN:
                return "joined";
        case CPG_REASON_LEAVE:
                return "left";
        case CPG_REASON_NODEDOWN:
                return "node down";
        case CPG_REASON_NODEUP:
                return "node up";
        case CPG_REASON_PROCDOWN:
                return "process down";
        default:
                return "changed";
        }
}

static void on_deliver(cpg_handle_t handle, const struct cpg_name *group, uint32_t nodeid,
                       uint32_t pid, void *msg, size_t msg_len)
{
        (void)handle;
        (void)group;
        struct cluster_outdate_msg m;
        int rc = cluster_msg_decode(msg, msg_len, nodeid, &m);
        if (rc == -ENOMSG)
                return; /* a newer kind of message: not for us */
        if (rc) {
                log_warn("cluster: ignored a message from node %" PRIu32 " pid %" PRIu32 ": %s",
                         nodeid, pid,
                         rc == -EINVAL ? "a field is invalid or from_node is not the sender"
                         : rc == -EPROTONOSUPPORT ? "a newer message version"
                                                  : "not a tandem cluster message");
                return;
        }
        log_notice("cluster: node %" PRIu32 " declares node %" PRIu32
                   " Outdated for naa %s (its generation %016" PRIX64 ")",
                   m.from_node, m.peer, m.naa, m.gen);
        bool own =
            nodeid == cl.cs_nodeid && pid == (uint32_t)getpid() && m.incarnation == cl.incarnation;
        if (m.peer == cl.node_id && !own) {
                if (cl.outdate_handler)
                        cl.outdate_handler(cl.outdate_handler_arg, m.naa, m.from_node, m.gen);
                else
                        log_err("cluster: no replicator handler: the Outdate of naa %s by node "
                                "%" PRIu32 " is not recorded",
                                m.naa, m.from_node);
        }
        if (own)
                req_delivered(m.seq);
}

static void log_changes(const char *what, const struct cpg_address *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                log_notice("cluster: group %s: node %" PRIu32 " pid %" PRIu32 " %s (%s)", cl.group,
                           list[i].nodeid, list[i].pid, what, cpg_reason_name(list[i].reason));
}

static void on_confchg(cpg_handle_t handle, const struct cpg_name *group,
                       const struct cpg_address *member_list, size_t n_members,
                       const struct cpg_address *left_list, size_t n_left,
                       const struct cpg_address *joined_list, size_t n_joined)
{
        (void)handle;
        (void)group;
        struct cluster_member list[CLUSTER_MAX_MEMBERS];
        size_t take = n_members < CLUSTER_MAX_MEMBERS ? n_members : CLUSTER_MAX_MEMBERS;
        for (size_t i = 0; i < take; i++)
                list[i] = (struct cluster_member){member_list[i].nodeid, member_list[i].pid};
        cluster_membership_set(&cl.members, list, n_members);
        if (cl.members.truncated)
                log_warn("cluster: group %s has %zu members; tracking the first %d", cl.group,
                         n_members, CLUSTER_MAX_MEMBERS);
        log_changes("left", left_list, n_left);
        log_changes("joined", joined_list, n_joined);
        bool was = cl.joined;
        cl.joined = cluster_membership_has(&cl.members, cl.cs_nodeid, (uint32_t)getpid());
        char ids[512];
        members_text(ids, sizeof(ids));
        if (cl.joined && !was)
                log_notice("cluster: joined group %s as node %" PRIu32 " (members: %s)", cl.group,
                           cl.node_id, ids);
        else
                log_info("cluster: group %s members: %s", cl.group, ids);
        if (was && !cl.joined) {
                log_warn("cluster: no longer a member of group %s", cl.group);
                pending_fail_all(-EAGAIN);
        }
}

/* The ring membership comes in the same ordered stream as the group's messages. */
static void on_totem_confchg(cpg_handle_t handle, struct cpg_ring_id ring_id, uint32_t n,
                             const uint32_t *list)
{
        (void)handle;
        size_t take = n < CLUSTER_MAX_MEMBERS ? n : CLUSTER_MAX_MEMBERS;
        memcpy(cl.ring, list, take * sizeof(*list));
        cl.n_ring = take;
        cl.ring_seq = ring_id.seq;
        log_info("cluster: ring %" PRIu64 " has %" PRIu32 " node(s)", (uint64_t)ring_id.seq, n);
}

static int32_t cpg_ready(int32_t fd, int32_t revents, void *data)
{
        (void)fd;
        (void)data;
        cs_error_t cs = cpg_dispatch(cl.cpg, CS_DISPATCH_ALL);
        if (cs != CS_OK && cs != CS_ERR_TRY_AGAIN) {
                char why[128];
                snprintf(why, sizeof(why), "lost the CPG connection (cpg_dispatch: %s)",
                         cs_strerror(cs));
                cpg_drop(why);
        } else if (cl.cpg_open && (revents & (POLLHUP | POLLERR | POLLNVAL))) {
                cpg_drop("lost the CPG connection (hang-up)");
        }
        return 0;
}

static void cpg_drop(const char *why)
{
        if (!cl.cpg_open)
                return;
        log_warn("cluster: %s", why);
        qb_loop_poll_del(cl.loop, cl.cpg_fd);
        cpg_finalize(cl.cpg);
        cl.cpg_open = false;
        cl.cpg_fd = -1;
        cl.joined = false;
        cluster_membership_clear(&cl.members);
        cl.n_ring = 0;
        snprintf(cl.last_error, sizeof(cl.last_error), "%s", why);
        pending_fail_all(-EAGAIN);
        /* The quorum connection shares corosync's fate; a fresh CPG connection re-checks ids. */
        quorum_drop("lost the quorum connection with the CPG one");
        reconnect_arm();
}

static int cpg_connect(void)
{
        cpg_model_v1_data_t model = {.model = CPG_MODEL_V1,
                                     .cpg_deliver_fn = on_deliver,
                                     .cpg_confchg_fn = on_confchg,
                                     .cpg_totem_confchg_fn = on_totem_confchg,
                                     .flags = CPG_MODEL_V1_DELIVER_INITIAL_TOTEM_CONF};
        cpg_handle_t h;
        cs_error_t cs = cpg_model_initialize(&h, CPG_MODEL_V1, (cpg_model_data_t *)&model, NULL);
        if (cs != CS_OK) {
                set_error("corosync is not reachable (cpg_initialize: %s)", cs_strerror(cs));
                return -ENOTCONN;
        }
        unsigned int local = 0;
        int fd = -1;
        struct cpg_name name = {.length = (uint32_t)strlen(cl.group)};
        memcpy(name.value, cl.group, name.length);
        if ((cs = cpg_local_get(h, &local)) != CS_OK) {
                set_error("cpg_local_get: %s", cs_strerror(cs));
        } else if ((cl.cs_nodeid = local) != cl.node_id) {
                set_error("corosync's nodeid for this node is %u but tandem's node_id is %" PRIu32
                          ": corosync.conf nodeid must equal node_id",
                          local, cl.node_id);
        } else if ((cs = cpg_fd_get(h, &fd)) != CS_OK) {
                set_error("cpg_fd_get: %s", cs_strerror(cs));
        } else if ((cs = cpg_join(h, &name)) != CS_OK) {
                set_error("cannot join CPG group %s: %s", cl.group, cs_strerror(cs));
        } else if (qb_loop_poll_add(cl.loop, QB_LOOP_HIGH, fd, POLLIN | POLLPRI, NULL, cpg_ready) <
                   0) {
                set_error("cannot watch the CPG fd");
        } else {
                cl.cpg = h;
                cl.cpg_fd = fd;
                cl.cpg_open = true;
                return 0;
        }
        cpg_finalize(h);
        return -ENOTCONN;
}

/* ---------------------------------------------------------------- quorum */

/* votequorum's two_node flag; read at each quorum change (corosync reloads can change it). */
static void refresh_two_node(void)
{
        votequorum_handle_t h;
        struct votequorum_info info;
        bool two = false;
        if (votequorum_initialize(&h, NULL) != CS_OK)
                return; /* no votequorum provider: keep what we knew */
        if (votequorum_getinfo(h, cl.cs_nodeid, &info) == CS_OK)
                two = (info.flags & VOTEQUORUM_INFO_TWONODE) != 0;
        votequorum_finalize(h);
        if (atomic_exchange(&two_node_flag, two) == two)
                return;
        log_notice("cluster: two_node is %s",
                   two ? "on: a partition is decided by fencing" : "off");
        if (two && !cluster_fence_peer_configured())
                log_warn("cluster: two_node is on but cluster.fence_peer is not set: a Primary "
                         "cannot go on without a peer that left the membership");
}

bool cluster_two_node(void)
{
        return atomic_load(&two_node_flag);
}

static void on_quorum(quorum_handle_t handle, uint32_t quorate, uint64_t ring_seq, uint32_t n_view,
                      uint32_t *view)
{
        (void)handle;
        char ids[512] = "";
        size_t used = 0;
        for (uint32_t i = 0; i < n_view && used < sizeof(ids); i++)
                used += (size_t)snprintf(ids + used, sizeof(ids) - used, "%s%" PRIu32, i ? " " : "",
                                         view[i]);
        log_info("cluster: quorum %s, ring %" PRIu64 ", nodes: %s", quorate ? "yes" : "no",
                 ring_seq, ids);
        cl.quorum_says_quorate = quorate != 0;
        cl.quorum_ring_seq = ring_seq;
        refresh_two_node();
        publish_quorate();
        pending_decide();
}

static int32_t quorum_ready(int32_t fd, int32_t revents, void *data)
{
        (void)fd;
        (void)data;
        cs_error_t cs = quorum_dispatch(cl.quorum, CS_DISPATCH_ALL);
        if (cs != CS_OK && cs != CS_ERR_TRY_AGAIN) {
                char why[128];
                snprintf(why, sizeof(why), "lost the quorum connection (quorum_dispatch: %s)",
                         cs_strerror(cs));
                quorum_drop(why);
                reconnect_arm();
        } else if (cl.quorum_open && (revents & (POLLHUP | POLLERR | POLLNVAL))) {
                quorum_drop("lost the quorum connection (hang-up)");
                reconnect_arm();
        }
        return 0;
}

static void quorum_drop(const char *why)
{
        if (!cl.quorum_open)
                return;
        log_warn("cluster: %s", why);
        qb_loop_poll_del(cl.loop, cl.quorum_fd);
        quorum_finalize(cl.quorum);
        cl.quorum_open = false;
        cl.quorum_fd = -1;
        cl.quorum_says_quorate = false;
        if (!cl.last_error[0])
                snprintf(cl.last_error, sizeof(cl.last_error), "%s", why);
        publish_quorate();
}

static int quorum_connect(void)
{
        quorum_callbacks_t cbs = {.quorum_notify_fn = on_quorum};
        quorum_handle_t h;
        uint32_t type = 0;
        cs_error_t cs = quorum_initialize(&h, &cbs, &type);
        if (cs != CS_OK) {
                set_error("cannot connect to the quorum service (quorum_initialize: %s)",
                          cs_strerror(cs));
                return -ENOTCONN;
        }
        int quorate = 0, fd = -1;
        if ((cs = quorum_getquorate(h, &quorate)) != CS_OK) {
                set_error("quorum_getquorate: %s", cs_strerror(cs));
        } else if ((cs = quorum_trackstart(h, CS_TRACK_CHANGES | CS_TRACK_CURRENT)) != CS_OK) {
                set_error("quorum_trackstart: %s", cs_strerror(cs));
        } else if ((cs = quorum_fd_get(h, &fd)) != CS_OK) {
                set_error("quorum_fd_get: %s", cs_strerror(cs));
        } else if (qb_loop_poll_add(cl.loop, QB_LOOP_HIGH, fd, POLLIN | POLLPRI, NULL,
                                    quorum_ready) < 0) {
                set_error("cannot watch the quorum fd");
        } else {
                if (type == QUORUM_FREE && !cl.no_quorum_provider_logged) {
                        log_warn("cluster: corosync has no quorum provider: every partition "
                                 "counts as quorate (configure corosync_votequorum)");
                        cl.no_quorum_provider_logged = true;
                }
                cl.quorum = h;
                cl.quorum_fd = fd;
                cl.quorum_open = true;
                cl.quorum_says_quorate = quorate != 0;
                refresh_two_node();
                publish_quorate();
                return 0;
        }
        quorum_finalize(h);
        return -ENOTCONN;
}

/* ---------------------------------------------------------------- (re)connecting */

static void reconnect_fired(void *data);

static void reconnect_arm(void)
{
        if (cl.reconnect_armed || !cl.started)
                return;
        if (qb_loop_timer_add(cl.loop, QB_LOOP_LOW, (uint64_t)RECONNECT_MS * NS_PER_MS, NULL,
                              reconnect_fired, &cl.reconnect_timer) == 0)
                cl.reconnect_armed = true;
        else
                log_err("cluster: cannot arm the reconnect timer; membership stays down");
}

/* Connects what is missing: CPG first (it checks the node id), then quorum. */
static void connect_missing(void)
{
        if (!cl.cpg_open && cpg_connect() < 0) {
                reconnect_arm();
                return;
        }
        if (!cl.quorum_open && quorum_connect() < 0) {
                reconnect_arm();
                return;
        }
        clear_error();
}

static void reconnect_fired(void *data)
{
        (void)data;
        cl.reconnect_armed = false;
        connect_missing();
}

/* ---------------------------------------------------------------- lifecycle */

static uint64_t random_u64(void)
{
        uint64_t v;
        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
                return v;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
}

int cluster_start(qb_loop_t *loop, uint32_t node_id, const char *group, char *err, size_t errlen)
{
        if (!loop || node_id < 1 || node_id > 255 || !group || !*group ||
            strlen(group) >= sizeof(cl.group)) {
                snprintf(err, errlen, "cluster: node_id must be 1..255 and group 1..%zu characters",
                         sizeof(cl.group) - 1);
                return -EINVAL;
        }
        if (cl.started) {
                snprintf(err, errlen, "cluster: already started");
                return -EALREADY;
        }
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                snprintf(err, errlen, "cluster: eventfd: %s", strerror(e));
                return -e;
        }
        if (qb_loop_poll_add(loop, QB_LOOP_MED, fd, POLLIN, NULL, wake_ready) < 0) {
                snprintf(err, errlen, "cluster: cannot watch the wake eventfd");
                close(fd);
                return -ENOMEM;
        }
        pthread_mutex_lock(&inbox_lock);
        cl.loop = loop;
        cl.node_id = node_id;
        snprintf(cl.group, sizeof(cl.group), "%s", group);
        cl.incarnation = random_u64();
        cl.next_seq = 0;
        cl.wake_fd = fd;
        cl.started = true;
        cl.last_error[0] = '\0';
        inbox_open = true;
        pthread_mutex_unlock(&inbox_lock);
        atomic_store(&enabled_flag, true);
        log_notice("cluster: joining CPG group %s as node %" PRIu32, cl.group, node_id);
        connect_missing();
        return 0;
}

void cluster_stop(void)
{
        if (!cl.started)
                return;
        pthread_mutex_lock(&inbox_lock);
        inbox_open = false;
        struct outdate_req *list = inbox_head;
        inbox_head = inbox_tail = NULL;
        pthread_mutex_unlock(&inbox_lock);
        atomic_store(&enabled_flag, false);
        /* Queued requests join the pending ones: all end with -ECANCELED below. */
        while (list) {
                struct outdate_req *r = list;
                list = r->next;
                r->next = cl.pending;
                cl.pending = r;
        }
        cl.started = false; /* no reconnect from here on */
        pending_fail_all(-ECANCELED);
        if (cl.reconnect_armed)
                qb_loop_timer_del(cl.loop, cl.reconnect_timer);
        cl.reconnect_armed = false;
        if (cl.cpg_open) {
                qb_loop_poll_del(cl.loop, cl.cpg_fd);
                cpg_finalize(cl.cpg); /* the group sees us leave */
                cl.cpg_open = false;
        }
        if (cl.quorum_open) {
                qb_loop_poll_del(cl.loop, cl.quorum_fd);
                quorum_finalize(cl.quorum);
                cl.quorum_open = false;
        }
        publish_quorate();
        qb_loop_poll_del(cl.loop, cl.wake_fd);
        close(cl.wake_fd);
        cl.wake_fd = cl.cpg_fd = cl.quorum_fd = -1;
        cl.joined = false;
        cl.cs_nodeid = 0;
        cluster_membership_clear(&cl.members);
        cl.n_ring = 0;
        log_notice("cluster: left group %s", cl.group);
}

bool cluster_enabled(void)
{
        return atomic_load(&enabled_flag);
}

bool cluster_quorate(void)
{
        return atomic_load(&quorate_flag);
}

size_t cluster_members(uint32_t *ids, size_t max)
{
        if (!cl.joined)
                return 0;
        return cluster_membership_node_ids(&cl.members, ids, max);
}

bool cluster_ring_has(uint32_t node_id)
{
        return cl.started && ring_has(node_id);
}

void cluster_get_status(struct cluster_status *st)
{
        memset(st, 0, sizeof(*st));
        st->enabled = cl.started;
        if (!cl.started)
                return;
        st->cpg_connected = cl.cpg_open && cl.joined;
        st->quorum_connected = cl.quorum_open;
        st->quorate = atomic_load(&quorate_flag);
        st->node_id = cl.node_id;
        st->corosync_node_id = cl.cs_nodeid;
        snprintf(st->group, sizeof(st->group), "%s", cl.group);
        st->n_members = cluster_members(st->members, CLUSTER_MAX_MEMBERS);
        if (st->n_members > CLUSTER_MAX_MEMBERS)
                st->n_members = CLUSTER_MAX_MEMBERS;
        snprintf(st->last_error, sizeof(st->last_error), "%s", cl.last_error);
}
