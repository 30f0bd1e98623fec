/*
 * CPG messages (proto/cluster.proto) and membership bookkeeping: the parts of the cluster
 * module that need no corosync, kept apart so unit tests drive them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.pb-c.h"
#include "cluster_internal.h"
#include "tandem/config.h"

/* ---------------------------------------------------------------- messages */

static bool peer_ok(uint32_t peer)
{
        return peer >= 1 && peer <= 255;
}

int cluster_msg_encode_outdate(const struct cluster_outdate_msg *m, uint8_t **buf, size_t *len)
{
        if (!tdm_naa_valid(m->naa) || !peer_ok(m->peer) || !peer_ok(m->from_node))
                return -EINVAL;
        Tandem__Cluster__Outdate od = TANDEM__CLUSTER__OUTDATE__INIT;
        od.naa = (char *)m->naa;
        od.peer = m->peer;
        od.gen = m->gen;
        Tandem__Cluster__ClusterMessage cm = TANDEM__CLUSTER__CLUSTER_MESSAGE__INIT;
        cm.version = TANDEM__CLUSTER__CLUSTER_VERSION__CLUSTER_VERSION_1;
        cm.from_node = m->from_node;
        cm.incarnation = m->incarnation;
        cm.seq = m->seq;
        cm.body_case = TANDEM__CLUSTER__CLUSTER_MESSAGE__BODY_OUTDATE;
        cm.outdate = &od;
        size_t n = tandem__cluster__cluster_message__get_packed_size(&cm);
        uint8_t *b = malloc(n);
        if (!b)
                return -ENOMEM;
        *len = tandem__cluster__cluster_message__pack(&cm, b);
        *buf = b;
        return 0;
}

static int outdate_from_pb(const Tandem__Cluster__ClusterMessage *cm, uint32_t sender,
                           struct cluster_outdate_msg *out)
{
        const Tandem__Cluster__Outdate *od = cm->outdate;
        if (cm->from_node != sender || !od->naa || !tdm_naa_valid(od->naa) || !peer_ok(od->peer))
                return -EINVAL;
        memset(out, 0, sizeof(*out));
        out->from_node = cm->from_node;
        out->incarnation = cm->incarnation;
        out->seq = cm->seq;
        memcpy(out->naa, od->naa, 33); /* 32 digits and the NUL, checked above */
        out->peer = od->peer;
        out->gen = od->gen;
        return 0;
}

int cluster_msg_decode(const void *buf, size_t len, uint32_t sender,
                       struct cluster_outdate_msg *out)
{
        Tandem__Cluster__ClusterMessage *cm =
            tandem__cluster__cluster_message__unpack(NULL, len, (const uint8_t *)buf);
        if (!cm)
                return -EPROTO;
        int rc;
        if ((int)cm->version > TANDEM__CLUSTER__CLUSTER_VERSION__CLUSTER_VERSION_1)
                rc = -EPROTONOSUPPORT;
        else if (cm->body_case != TANDEM__CLUSTER__CLUSTER_MESSAGE__BODY_OUTDATE)
                rc = -ENOMSG;
        else
                rc = outdate_from_pb(cm, sender, out);
        tandem__cluster__cluster_message__free_unpacked(cm, NULL);
        return rc;
}

/* ---------------------------------------------------------------- membership */

static int member_cmp(const void *a, const void *b)
{
        const struct cluster_member *x = a, *y = b;
        if (x->nodeid != y->nodeid)
                return x->nodeid < y->nodeid ? -1 : 1;
        return x->pid < y->pid ? -1 : x->pid > y->pid;
}

void cluster_membership_clear(struct cluster_membership *ms)
{
        ms->n = 0;
        ms->truncated = false;
}

void cluster_membership_set(struct cluster_membership *ms, const struct cluster_member *list,
                            size_t n)
{
        struct cluster_member sorted[CLUSTER_MAX_MEMBERS];
        size_t take = n < CLUSTER_MAX_MEMBERS ? n : CLUSTER_MAX_MEMBERS;
        if (take)
                memcpy(sorted, list, take * sizeof(*list));
        qsort(sorted, take, sizeof(*sorted), member_cmp);
        cluster_membership_clear(ms);
        ms->truncated = n > CLUSTER_MAX_MEMBERS;
        for (size_t i = 0; i < take; i++)
                if (ms->n == 0 || member_cmp(&ms->m[ms->n - 1], &sorted[i]) != 0)
                        ms->m[ms->n++] = sorted[i];
}

bool cluster_membership_has(const struct cluster_membership *ms, uint32_t nodeid, uint32_t pid)
{
        for (size_t i = 0; i < ms->n; i++)
                if (ms->m[i].nodeid == nodeid && ms->m[i].pid == pid)
                        return true;
        return false;
}

size_t cluster_membership_node_ids(const struct cluster_membership *ms, uint32_t *ids, size_t max)
{
        size_t n = 0;
        for (size_t i = 0; i < ms->n; i++) {
                if (i > 0 && ms->m[i].nodeid == ms->m[i - 1].nodeid)
                        continue; /* sorted: several processes of one node are adjacent */
                if (n < max)
                        ids[n] = ms->m[i].nodeid;
                n++;
        }
        return n;
}
