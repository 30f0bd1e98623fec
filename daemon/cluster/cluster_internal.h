/*
 * The pure parts of daemon/cluster/ (no corosync calls), so unit tests can drive them:
 * CPG message encoding and checking, and the membership bookkeeping.
 */
#ifndef TANDEM_CLUSTER_INTERNAL_H
#define TANDEM_CLUSTER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tandem/cluster.h"

/* ---------------------------------------------------------------- messages */

/* A decoded Outdate message (proto/cluster.proto) with its envelope. */
struct cluster_outdate_msg {
        uint32_t from_node;
        uint64_t incarnation;
        uint64_t seq;
        char naa[33];
        uint32_t peer;
        uint64_t gen;
};

/* Packs m into a new buffer (free() it). Returns 0, -EINVAL (bad naa/peer) or -ENOMEM. */
int cluster_msg_encode_outdate(const struct cluster_outdate_msg *m, uint8_t **buf, size_t *len);
/*
 * Decodes a delivered CPG message from corosync node `sender` into out. Returns 0 for a
 * valid Outdate; -EPROTO not a ClusterMessage; -EPROTONOSUPPORT a newer version;
 * -ENOMSG a message kind this build does not know (to be ignored); -EINVAL a field is
 * wrong (from_node differs from sender, naa not 32 hex digits, peer not 1..255).
 */
int cluster_msg_decode(const void *buf, size_t len, uint32_t sender,
                       struct cluster_outdate_msg *out);

/* ---------------------------------------------------------------- membership */

struct cluster_member {
        uint32_t nodeid;
        uint32_t pid;
};

/* The CPG group's members as the last configuration change listed them. */
struct cluster_membership {
        struct cluster_member m[CLUSTER_MAX_MEMBERS];
        size_t n;
        bool truncated; /* the group had more members than we track */
};

/* Replaces the membership with list (sorted by node id then pid, duplicates dropped). */
void cluster_membership_set(struct cluster_membership *ms, const struct cluster_member *list,
                            size_t n);
void cluster_membership_clear(struct cluster_membership *ms);
bool cluster_membership_has(const struct cluster_membership *ms, uint32_t nodeid, uint32_t pid);
/* Distinct node ids, ascending; returns how many there are (ids receives at most max). */
size_t cluster_membership_node_ids(const struct cluster_membership *ms, uint32_t *ids, size_t max);

/* A fence-peer handler is configured (fence_peer.c). */
bool cluster_fence_peer_configured(void);

#endif
