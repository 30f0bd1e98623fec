/*
 * Cluster membership and quorum: tandemd joins the Corosync CPG group (default "tandem")
 * and tracks quorum, both with their fds on the libqb main loop.
 *
 * Node ids: corosync's nodeid of a node (corosync.conf nodelist.node.nodeid) must equal
 * that node's tandem node_id; node ids in this API and in CPG messages are both. tandemd
 * refuses to join the group while they differ (the status shows why).
 *
 * Used by the replicator: a Primary that loses its peer gets the peer marked Outdated
 * through the group (cluster_outdate_peer, only while quorate) before it drops the peer
 * from its ack set; a node without quorum refuses promotion and, as Primary, holds writes.
 *
 * Threads: everything runs on the control thread (the main loop) unless noted.
 */
#ifndef TANDEM_CLUSTER_H
#define TANDEM_CLUSTER_H

#include <qb/qbloop.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_MAX_MEMBERS 64 /* CPG group members tracked (processes, not node ids) */

/*
 * Starts the membership: connects to corosync's CPG and quorum services and joins `group`.
 * Returns 0 also when corosync is not running yet: it retries every second in the
 * background (logging the first failure and the recovery). -EINVAL for bad arguments
 * (node_id 1..255, group 1..63 characters), -EALREADY if running, -errno on local failures
 * (err says which).
 */
int cluster_start(qb_loop_t *loop, uint32_t node_id, const char *group, char *err, size_t errlen);
/* Leaves the group; pending cluster_outdate_peer requests complete with -ECANCELED. */
void cluster_stop(void);
/* cluster_start succeeded and cluster_stop was not called yet. Any thread. */
bool cluster_enabled(void);
/*
 * The quorum service says this node's partition is quorate. False when not enabled, when
 * corosync is unreachable, and while the node ids disagree. Any thread (atomic).
 */
bool cluster_quorate(void);
/*
 * Node ids of the current CPG group members (each once, ascending; this node included once
 * joined). Returns how many there are (may exceed max; ids receives at most max).
 */
size_t cluster_members(uint32_t *ids, size_t max);
/*
 * Node `node_id` is in corosync's current ring membership (its corosync runs and reaches
 * ours). False when the cluster is not started or not connected. Control thread.
 */
bool cluster_ring_has(uint32_t node_id);

/*
 * Asks the group to record that node `peer` is Outdated for LUN naa (32 hex digits) at
 * generation gen (our current data id). cb(arg, rc) is called exactly once on the control
 * thread, never from within this call:
 *   0           our message came back in the agreed order while we are quorate, and the
 *               peer's tandemd is a group member: it got the message and outdates itself
 *               (unless it is stopping or dies first: callers still have it marked);
 *   CLUSTER_OUTDATE_PEER_ABSENT
 *               delivered while quorate; the peer's node is in our corosync membership (one
 *               partition: our Pacemaker decides what it may do) but its tandemd is not in
 *               the group, so its disk does not know it is outdated: the caller has it marked
 *               (cluster_fence_peer without fencing) so that it is not promoted on return;
 *   CLUSTER_OUTDATE_PEER_UNREACHABLE
 *               delivered while quorate, but the peer's node is not in our membership: it
 *               may be dead or on the other side of a partition. With real quorum that side
 *               cannot promote; in a two_node cluster both sides are quorate, so the caller
 *               must also have the peer fenced (cluster_fence_peer) before going on;
 *   -EAGAIN     not quorate or not connected (at send or at delivery), or the connection
 *               to corosync was lost before delivery;
 *   -ETIMEDOUT  not delivered within timeout_ms (counted from this call);
 *   -ECANCELED  cluster_stop ran first.
 * Any thread may call it. Returns 0 (cb will be called), or -EINVAL (bad naa, peer 0 or
 * > 255 or our own id, timeout 0, no cb), -ENOTCONN (cluster not started) or -ENOMEM; then
 * cb is never called.
 */
#define CLUSTER_OUTDATE_PEER_UNREACHABLE 1
#define CLUSTER_OUTDATE_PEER_ABSENT      2
int cluster_outdate_peer(const char *naa, uint32_t peer, uint64_t gen, unsigned timeout_ms,
                         void (*cb)(void *arg, int rc), void *arg);

/*
 * votequorum says this is a two_node cluster: one node alone is quorate, so quorum cannot
 * tell the two sides of a partition apart and only fencing can. Any thread (atomic).
 */
bool cluster_two_node(void);

/*
 * The fence-peer handler (tandem.conf cluster.fence_peer, an absolute path; "" for none),
 * set once at startup before any replicated LUN starts.
 */
void cluster_set_fence_peer(const char *path);
/*
 * Runs the handler as `HANDLER PEER_NAME PEER_ID fence|outdate` (environment
 * TANDEM_FENCE_TIMEOUT_MS) and waits for it. Both actions first record in the cluster that
 * the peer's data is outdated (it must not be promoted until it has resynced); fence then
 * also powers the peer off. Exit status 0 means done. Killed after timeout_ms. Returns 0,
 * -ENOENT (no handler configured), -ETIMEDOUT, or -EIO (it failed; its status is logged).
 * Any thread; blocks the caller.
 */
int cluster_fence_peer(uint32_t peer, const char *peer_name, unsigned timeout_ms, bool fence);

/*
 * The replicator's handler: called (control thread) when a delivered Outdate message
 * names THIS node; the replicator marks its disk Outdated (persisted) unless it is
 * Primary. by_node is the sender. NULL fn removes it.
 */
void cluster_set_outdate_handler(void (*fn)(void *arg, const char *naa, uint32_t by_node,
                                            uint64_t gen),
                                 void *arg);

/* What `tandemctl status` shows. */
struct cluster_status {
        bool enabled;
        bool cpg_connected;    /* joined the group */
        bool quorum_connected; /* tracking the quorum service */
        bool quorate;
        uint32_t node_id;          /* ours (tandem node_id) */
        uint32_t corosync_node_id; /* what corosync says we are (0: not connected yet) */
        char group[64];
        uint32_t members[CLUSTER_MAX_MEMBERS]; /* node ids, ascending, each once */
        size_t n_members;
        char last_error[256]; /* why not connected, "" when all is well */
};
void cluster_get_status(struct cluster_status *st);

#endif
